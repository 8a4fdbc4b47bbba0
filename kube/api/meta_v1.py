"""meta.k8s.io/v1: what every object carries, and the kinds the API speaks about objects.

``Resource`` is the base of every top-level kind (TypeMeta + ObjectMeta); ``ResourceList[T]``
is the list of any of them, so ``PodList`` needs no declaration of its own.  Status, DeleteOptions,
WatchEvent, Table, PartialObjectMetadata and the discovery documents are declared here once for
the API server and every client.

ObjectMeta rules that depend on the kind (name format, namespace or not) are checked by
``validate_object_meta`` with the kind's registration; the walker calls it for top-level objects.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Generic, Self, TypeVar

import msgspec

from kube.api import names
from kube.api.errors import ErrorList, Path
from kube.api.scheme import PATH_SEGMENT, KindInfo
from kube.api.struct import (
    QUALIFIED_NAME,
    RawJSON,
    Struct,
    Time,
    atomic,
    merge_set,
    meta,
)

FINALIZER_ORPHAN = "orphan"
FINALIZER_FOREGROUND = "foregroundDeletion"


class TypeMeta(Struct):
    """kind and apiVersion (in that order, as upstream's JSON has them); ``typed()`` fills
    them in from the class."""

    API_VERSION: ClassVar[str]
    KIND: ClassVar[str]

    kind: str | None = None
    api_version: str | None = None

    def typed(self) -> Self:
        """This object with its apiVersion and kind set (as sent and stored)."""
        if self.api_version is None:
            self.api_version = self.API_VERSION
        if self.kind is None:
            self.kind = self.KIND
        return self


class ServerKind(TypeMeta):
    """A kind the server builds (Status, Table, ...): typed as soon as it is constructed.

    Resources are not, so that decoding them stays faithful to the input; defaulting types
    them (kube.api.walk.set_defaults).
    """

    def __post_init__(self) -> None:
        self.typed()


class OwnerReference(Struct):
    """Points at the object that owns this one; the garbage collector follows these."""

    api_version: Annotated[str | None, meta(required=True, proto=5)] = None
    kind: Annotated[str | None, meta(required=True, proto=1)] = None
    name: Annotated[str | None, meta(required=True, proto=3)] = None
    uid: Annotated[str | None, meta(required=True, proto=4)] = None
    controller: Annotated[bool | None, meta(proto=6)] = None
    block_owner_deletion: Annotated[bool | None, meta(proto=7)] = None


class ManagedFieldsEntry(Struct):
    """Which manager owns which fields, as recorded by server-side apply."""

    manager: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    operation: Annotated[str | None, meta(enum=("Apply", "Update"), proto=2, omitempty=True)] = None
    api_version: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    time: Annotated[Time | None, meta(proto=4)] = None
    fields_type: Annotated[str | None, meta(proto=6, omitempty=True)] = None
    fields_v1: Annotated[RawJSON, meta(proto=7)] = msgspec.field(default=None, name="fieldsV1")
    subresource: Annotated[str | None, meta(proto=8, omitempty=True)] = None


class ObjectMeta(Struct):
    """Name, namespace, labels and the bookkeeping every stored object carries."""

    name: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    generate_name: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    namespace: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    self_link: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    uid: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    resource_version: Annotated[str | None, meta(proto=6, omitempty=True)] = None
    generation: Annotated[int | None, meta(proto=7, int64=True, omitempty=True)] = None
    creation_timestamp: Annotated[Time | None, meta(proto=8, omitempty=True)] = None
    deletion_timestamp: Annotated[Time | None, meta(proto=9)] = None
    deletion_grace_period_seconds: Annotated[int | None, meta(proto=10, int64=True)] = None
    labels: Annotated[dict[str, str] | None, meta(proto=11)] = None
    annotations: Annotated[dict[str, str] | None, meta(proto=12)] = None
    owner_references: Annotated[list[OwnerReference] | None, meta(merge_key="uid", proto=13)] = None
    finalizers: Annotated[list[str] | None, merge_set(proto=14)] = None
    managed_fields: Annotated[list[ManagedFieldsEntry] | None, atomic(proto=17)] = None


def validate_object_meta(
    metadata: ObjectMeta, info: KindInfo, path: Path, errors: ErrorList
) -> None:
    """Check the metadata of a top-level object against its kind's rules."""
    name_path = path.child("name")
    if metadata.name:
        errors.extend_checked(name_path, metadata.name, _check_name(info, metadata.name))
    elif metadata.generate_name:
        prefix = metadata.generate_name.rstrip("-") or metadata.generate_name
        errors.extend_checked(
            path.child("generateName"), metadata.generate_name, _check_name(info, prefix)
        )
    else:
        errors.required(name_path, "name or generateName is required")
    ns_path = path.child("namespace")
    if info.namespaced:
        if not metadata.namespace:
            errors.required(ns_path)
        else:
            errors.extend_checked(
                ns_path, metadata.namespace, names.is_dns1123_label(metadata.namespace)
            )
    elif metadata.namespace:
        errors.forbidden(ns_path, "not allowed on this type")
    names.validate_labels(metadata.labels, path.child("labels"), errors)
    names.validate_annotations(metadata.annotations, path.child("annotations"), errors)
    if metadata.generation is not None and metadata.generation < 0:
        errors.invalid(path.child("generation"), metadata.generation, "must be >= 0")
    for i, finalizer in enumerate(metadata.finalizers or ()):
        fin_path = path.child("finalizers").index(i)
        errors.extend_checked(fin_path, finalizer, names.is_qualified_name(finalizer))
    if metadata.finalizers and {FINALIZER_ORPHAN, FINALIZER_FOREGROUND} <= set(metadata.finalizers):
        errors.invalid(
            path.child("finalizers"),
            metadata.finalizers,
            "finalizer orphan and foregroundDeletion cannot be both set",
        )
    _validate_owner_references(metadata.owner_references, path.child("ownerReferences"), errors)


def _check_name(info: KindInfo, name: str) -> list[str]:
    if info.name_format == PATH_SEGMENT:
        return names.is_path_segment_name(name)
    return names.check_format(info.name_format, name)


def _validate_owner_references(
    refs: list[OwnerReference] | None, path: Path, errors: ErrorList
) -> None:
    controllers = 0
    for i, ref in enumerate(refs or ()):
        if ref.controller:
            controllers += 1
        if ref.api_version and "/" in ref.api_version:
            group = ref.api_version.split("/", 1)[0]
            if not group:
                errors.invalid(path.index(i).child("apiVersion"), ref.api_version, "bad group")
    if controllers > 1:
        errors.invalid(path, refs, "Only one reference can have Controller set to true")


def validate_object_meta_update(
    new: ObjectMeta, old: ObjectMeta, path: Path, errors: ErrorList
) -> None:
    """Fields of metadata that never change once an object exists."""
    for attr, json_name in (
        ("name", "name"),
        ("namespace", "namespace"),
        ("uid", "uid"),
        ("creation_timestamp", "creationTimestamp"),
    ):
        if getattr(new, attr) != getattr(old, attr):
            errors.immutable(path.child(json_name), getattr(new, attr))


class ListMeta(Struct):
    """The resourceVersion a list was read at, and the token to read the next page."""

    self_link: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    resource_version: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    continue_: Annotated[str | None, meta(proto=3, omitempty=True)] = msgspec.field(
        default=None, name="continue"
    )
    remaining_item_count: Annotated[int | None, meta(proto=4, int64=True)] = None


class LabelSelectorRequirement(Struct):
    """One set-based requirement: ``key In (a, b)``, ``key Exists``, ..."""

    key: Annotated[str | None, meta(required=True, format=QUALIFIED_NAME, proto=1)] = None
    operator: Annotated[
        str | None, meta(required=True, enum=("In", "NotIn", "Exists", "DoesNotExist"), proto=2)
    ] = None
    values: Annotated[list[str] | None, atomic(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.operator in ("In", "NotIn") and not self.values:
            errors.required(
                path.child("values"), "must be specified when `operator` is 'In' or 'NotIn'"
            )
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            errors.forbidden(
                path.child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )


class LabelSelector(Struct):
    """matchLabels and matchExpressions, all of which must hold."""

    match_labels: Annotated[dict[str, str] | None, meta(proto=1)] = None
    match_expressions: Annotated[list[LabelSelectorRequirement] | None, atomic(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        names.validate_labels(self.match_labels, path.child("matchLabels"), errors)


class Condition(Struct):
    """The standard condition shape (``type``, ``status``, ``reason``, ...)."""

    type: Annotated[str | None, meta(required=True, proto=1)] = None
    status: Annotated[
        str | None, meta(required=True, enum=("True", "False", "Unknown"), proto=2)
    ] = None
    observed_generation: Annotated[int | None, meta(proto=3, int64=True, omitempty=True)] = None
    last_transition_time: Annotated[Time | None, meta(proto=4)] = None
    reason: Annotated[str | None, meta(proto=5)] = None
    message: Annotated[str | None, meta(proto=6)] = None


class Resource(TypeMeta):
    """A top-level object: TypeMeta + ObjectMeta.  Every registered kind derives from it."""

    kind_info: ClassVar[KindInfo]

    metadata: Annotated[ObjectMeta, meta(proto=1)] = msgspec.field(default_factory=ObjectMeta)

    def validate_create(self, errors: ErrorList) -> None:
        """Append the problems only a new object can have, beyond ``validate``'s; never
        raise."""

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        """Append the problems of replacing ``old`` by this object beyond those every update
        has (immutable metadata, fields declared ``immutable``); never raise."""


T = TypeVar("T", bound=Resource)


class ResourceList(Struct, Generic[T], kw_only=True):
    """A list of any kind (``PodList`` is ``ResourceList[Pod]``)."""

    kind: str | None = None
    api_version: str | None = None
    metadata: Annotated[ListMeta, meta(proto=1)] = msgspec.field(default_factory=ListMeta)
    items: Annotated[list[T], meta(proto=2)]


class StatusCause(Struct):
    reason: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    field: Annotated[str | None, meta(proto=3, omitempty=True)] = None


class StatusDetails(Struct):
    name: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    group: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    kind: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    uid: Annotated[str | None, meta(proto=6, omitempty=True)] = None
    causes: Annotated[list[StatusCause] | None, meta(proto=4)] = None
    retry_after_seconds: Annotated[int | None, meta(proto=5, omitempty=True)] = None


class Status(ServerKind):
    """The answer to a failed request (and to some successful deletes)."""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Status"

    metadata: Annotated[ListMeta, meta(proto=1)] = msgspec.field(default_factory=ListMeta)
    status: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    reason: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    details: Annotated[StatusDetails | None, meta(proto=5)] = None
    code: Annotated[int | None, meta(proto=6, omitempty=True)] = None


class Preconditions(Struct):
    uid: Annotated[str | None, meta(proto=1)] = None
    resource_version: Annotated[str | None, meta(proto=2)] = None


class DeleteOptions(ServerKind):
    """How a delete should proceed: grace period, preconditions, propagation policy."""

    API_VERSION: ClassVar[str] = "meta.k8s.io/v1"
    KIND: ClassVar[str] = "DeleteOptions"

    grace_period_seconds: Annotated[int | None, meta(proto=1, int64=True)] = None
    preconditions: Annotated[Preconditions | None, meta(proto=2)] = None
    orphan_dependents: Annotated[bool | None, meta(proto=3)] = None
    propagation_policy: Annotated[
        str | None, meta(enum=("Orphan", "Background", "Foreground"), proto=4)
    ] = None
    dry_run: Annotated[list[str] | None, meta(proto=5)] = None
    ignore_store_read_error_with_cluster_breaking_potential: Annotated[
        bool | None, meta(proto=6)
    ] = None


class WatchEvent(Struct):
    """One line of a watch stream."""

    type: str
    object: RawJSON


class TableColumnDefinition(Struct):
    name: str
    type: str
    format: str = ""
    description: str = ""
    priority: int = 0


class PartialObjectMetadata(ServerKind):
    """An object reduced to its metadata (``as=PartialObjectMetadata``, Table rows)."""

    API_VERSION: ClassVar[str] = "meta.k8s.io/v1"
    KIND: ClassVar[str] = "PartialObjectMetadata"

    metadata: Annotated[ObjectMeta, meta(proto=1)] = msgspec.field(default_factory=ObjectMeta)


class PartialObjectMetadataList(ServerKind, kw_only=True):
    API_VERSION: ClassVar[str] = "meta.k8s.io/v1"
    KIND: ClassVar[str] = "PartialObjectMetadataList"

    metadata: Annotated[ListMeta, meta(proto=1)] = msgspec.field(default_factory=ListMeta)
    items: Annotated[list[PartialObjectMetadata], meta(proto=2)]


class TableRow(Struct):
    cells: list[Any]
    object: RawJSON = None
    conditions: list[RawJSON] | None = None


class Table(ServerKind, kw_only=True):
    """Rows of server-rendered cells: what ``kubectl get`` prints."""

    API_VERSION: ClassVar[str] = "meta.k8s.io/v1"
    KIND: ClassVar[str] = "Table"

    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    column_definitions: list[TableColumnDefinition]
    rows: list[TableRow]


# Discovery, legacy form: /api, /apis, /api/v1, /apis/G/V.


class GroupVersionForDiscovery(Struct):
    group_version: Annotated[str, meta(proto=1)]
    version: Annotated[str, meta(proto=2)]


class ServerAddressByClientCIDR(Struct):
    client_cidr: Annotated[str, meta(proto=1)] = msgspec.field(name="clientCIDR")
    server_address: Annotated[str, meta(proto=2)]


class APIVersions(ServerKind, kw_only=True):
    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "APIVersions"

    versions: Annotated[list[str], meta(proto=1)]
    server_address_by_client_cidrs: Annotated[list[ServerAddressByClientCIDR], meta(proto=2)] = (
        msgspec.field(name="serverAddressByClientCIDRs")
    )


class APIGroup(TypeMeta, kw_only=True):
    """A group and its versions: typed (``typed()``) when it is the document (``/apis/G``),
    not as an item of an APIGroupList, as upstream writes them."""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "APIGroup"

    name: Annotated[str, meta(proto=1)]
    versions: Annotated[list[GroupVersionForDiscovery], meta(proto=2)]
    preferred_version: Annotated[GroupVersionForDiscovery | None, meta(proto=3)] = None
    server_address_by_client_cidrs: Annotated[
        list[ServerAddressByClientCIDR] | None, meta(proto=4)
    ] = msgspec.field(default=None, name="serverAddressByClientCIDRs")


class APIGroupList(ServerKind, kw_only=True):
    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "APIGroupList"

    groups: Annotated[list[APIGroup], meta(proto=1)]


class APIResource(Struct, kw_only=True):
    """A resource of a group/version, its fields in upstream's order (a subresource answering
    with another group's kind names that group and version)."""

    name: Annotated[str, meta(proto=1)]
    singular_name: Annotated[str, meta(proto=6)]
    namespaced: Annotated[bool, meta(proto=2)]
    group: Annotated[str | None, meta(proto=8, omitempty=True)] = None
    version: Annotated[str | None, meta(proto=9, omitempty=True)] = None
    kind: Annotated[str, meta(proto=3)]
    verbs: Annotated[list[str], meta(proto=4, wrapped=True)]
    short_names: Annotated[list[str] | None, meta(proto=5)] = None
    categories: Annotated[list[str] | None, meta(proto=7)] = None
    storage_version_hash: Annotated[str | None, meta(proto=10, omitempty=True)] = None


class APIResourceList(ServerKind, kw_only=True):
    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "APIResourceList"

    group_version: Annotated[str, meta(proto=1)]
    resources: Annotated[list[APIResource], meta(proto=2)]


# Discovery, aggregated form (apidiscovery.k8s.io/v2), which kubectl prefers.


class GroupVersionKind(Struct):
    group: str
    version: str
    kind: str


class APISubresourceDiscovery(Struct):
    subresource: str
    response_kind: GroupVersionKind | None = None
    accepted_types: list[GroupVersionKind] | None = None
    verbs: list[str] = msgspec.field(default_factory=list)


class APIResourceDiscovery(Struct):
    resource: str
    response_kind: GroupVersionKind
    scope: str
    singular_resource: str
    verbs: list[str]
    short_names: list[str] | None = None
    categories: list[str] | None = None
    subresources: list[APISubresourceDiscovery] | None = None


class APIVersionDiscovery(Struct, kw_only=True):
    version: str
    resources: list[APIResourceDiscovery]
    freshness: str


class APIGroupDiscovery(Struct, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    versions: list[APIVersionDiscovery]


class APIGroupDiscoveryList(ServerKind, kw_only=True):
    API_VERSION: ClassVar[str] = "apidiscovery.k8s.io/v2"
    KIND: ClassVar[str] = "APIGroupDiscoveryList"

    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[APIGroupDiscovery]
