"""storage.k8s.io/v1: how volumes are provisioned and attached, and the CSI drivers that do it.

A StorageClass is the recipe a provisioner follows to create volumes on demand: it names its
provisioner and the opaque parameters handed to it, and neither may change once the class exists,
because volumes already made from it would no longer match.  The class annotated
``storageclass.kubernetes.io/is-default-class: "true"`` serves claims that name no class.  A
VolumeAttributesClass names a CSI driver and the mutable attributes (IOPS, throughput) it applies
to a volume; its parameters are immutable too, so a claim changes class to change attributes.

The CSI kinds are what a CSI driver's deployment and the kubelet publish: a CSIDriver says how
Kubernetes talks to a driver (whether volumes need attaching, pod information on mount, tokens,
lifecycle modes); a CSINode, named after its node, lists the drivers registered there; a
VolumeAttachment asks the driver's external attacher to attach a persistent volume to a node and
carries the answer in its status; a CSIStorageCapacity (namespaced, beside the driver) reports
the capacity of a class in one topology segment.  Nothing here attaches or provisions: the API
server stores and validates these objects for the drivers, the kubelet and the scheduler.

Field names, order and protobuf numbers are k8s.io/api release-1.36's, defaults and validation
pkg/apis/storage's, with upstream's messages (including the path ``spec.attachedRequired``, which
upstream spells so).  StorageClass's allowed topologies are core/v1's TopologySelectorTerm,
declared here with core's numbers.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

import msgspec

from kube.api import names
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.kinds.core_v1.volume import (
    ZERO,
    PersistentVolumeSpec,
    parse_quantity,
    validate_csi_driver_name,
)
from kube.api.meta_v1 import LabelSelector, Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import (
    DNS1123_SUBDOMAIN,
    QUALIFIED_NAME,
    QuantityValue,
    Struct,
    Time,
    atomic,
    merge_set,
    meta,
)

GROUP = "storage.k8s.io"

RECLAIM_POLICIES = ("Delete", "Retain")
VOLUME_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
MAX_PARAMETERS = 512
MAX_PARAMETERS_SIZE = 256 * 1024


def is_default_class(obj: Any) -> bool:
    """Whether a StorageClass is annotated as the cluster's default (either annotation)."""
    annotations = obj.metadata.annotations or {}
    return any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS)


class TopologySelectorLabelRequirement(Struct):
    """A topology label and the values it may take."""

    key: Annotated[str | None, meta(required=True, format=QUALIFIED_NAME, proto=1)] = None
    values: Annotated[list[str] | None, atomic(required=True, proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        seen: set[str] = set()
        for i, value in enumerate(self.values or ()):
            if value in seen:
                errors.duplicate(path.child("values").index(i), value)
            seen.add(value)


class TopologySelectorTerm(Struct):
    """Topology requirements that must all hold."""

    match_label_expressions: Annotated[
        list[TopologySelectorLabelRequirement] | None, atomic(proto=1)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        seen: set[str | None] = set()
        for i, requirement in enumerate(self.match_label_expressions or ()):
            if requirement.key in seen:
                errors.duplicate(
                    path.child("matchLabelExpressions").index(i).child("key"), requirement.key
                )
            seen.add(requirement.key)

    def expressions(self) -> dict[str | None, frozenset[str]]:
        """The term as a map from key to allowed values, for comparing terms."""
        return {r.key: frozenset(r.values or ()) for r in self.match_label_expressions or ()}


def _validate_parameters(
    parameters: dict[str, str] | None, path: Path, errors: ErrorList, *, required: bool = False
) -> None:
    """A provisioner's or driver's opaque parameters: at most 512 non-empty keys, 256 KiB in all;
    ``required``: at least one."""
    parameters = parameters or {}
    if len(parameters) > MAX_PARAMETERS:
        errors.too_long(path, MAX_PARAMETERS)
        return
    for key in parameters:
        if not key:
            errors.invalid(path, key, "field can not be empty.")
    if sum(len(k) + len(v) for k, v in parameters.items()) > MAX_PARAMETERS_SIZE:
        errors.too_long(path, MAX_PARAMETERS_SIZE)
    if required and not parameters:
        errors.required(path, "must contain at least one key/value pair")


def _validate_provisioner(name: str | None, path: Path, errors: ErrorList) -> None:
    """A provisioner or driver name (declared required): a qualified name once lowercased."""
    if name:
        errors.extend_checked(path, name, names.is_qualified_name(name.lower()))


def _name_cell(obj: Any) -> str:
    return str(obj.metadata.name or "") + (" (default)" if is_default_class(obj) else "")


@kind(
    group="storage.k8s.io",
    version="v1",
    plural="storageclasses",
    namespaced=False,
    returns_deleted=True,
    short_names=("sc",),
    columns=(
        Column(
            "Name",
            lambda o, now: _name_cell(o),
            format="name",
            description="Name must be unique within a namespace.",
        ),
        Column("Provisioner", lambda o, now: o.provisioner or ""),
        Column("ReclaimPolicy", lambda o, now: o.reclaim_policy or "Delete"),
        Column("VolumeBindingMode", lambda o, now: o.volume_binding_mode or "Immediate"),
        Column("AllowVolumeExpansion", lambda o, now: bool(o.allow_volume_expansion)),
        AGE_COLUMN,
    ),
)
class StorageClass(Resource):
    """How volumes of one class are provisioned, reclaimed and bound."""

    provisioner: Annotated[
        str | None, meta(required=True, doc="The volume plugin that provisions volumes.", proto=2)
    ] = None
    parameters: Annotated[
        dict[str, str] | None, meta(doc="Opaque settings handed to the provisioner.", proto=3)
    ] = None
    reclaim_policy: Annotated[
        str | None,
        meta(
            enum=RECLAIM_POLICIES,
            doc="What happens to provisioned volumes when their claim goes: Delete or Retain.",
            proto=4,
        ),
    ] = None
    mount_options: Annotated[
        list[str] | None, atomic(doc="Mount options of volumes made from this class.", proto=5)
    ] = None
    allow_volume_expansion: Annotated[
        bool | None, meta(doc="Whether claims of this class may grow.", proto=6)
    ] = None
    volume_binding_mode: Annotated[
        str | None,
        meta(
            enum=VOLUME_BINDING_MODES,
            immutable=True,
            doc="When claims are bound: Immediate, or WaitForFirstConsumer (the first pod).",
            proto=7,
        ),
    ] = None
    allowed_topologies: Annotated[
        list[TopologySelectorTerm] | None,
        atomic(doc="Where volumes of this class may be provisioned.", proto=8),
    ] = None

    def set_defaults(self) -> None:
        if self.reclaim_policy is None:
            self.reclaim_policy = "Delete"
        if self.volume_binding_mode is None:
            self.volume_binding_mode = "Immediate"

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_provisioner(self.provisioner, path.child("provisioner"), errors)
        _validate_parameters(self.parameters, path.child("parameters"), errors)
        if self.volume_binding_mode is None:
            errors.required(path.child("volumeBindingMode"))
        seen: list[dict[str | None, frozenset[str]]] = []
        for i, term in enumerate(self.allowed_topologies or ()):
            expressions = term.expressions()
            if expressions in seen:
                errors.duplicate(
                    path.child("allowedTopologies").index(i).child("matchLabelExpressions"), ""
                )
            seen.append(expressions)

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        if (self.parameters or {}) != (old.parameters or {}):
            errors.forbidden(ROOT.child("parameters"), "updates to parameters are forbidden.")
        if self.provisioner != old.provisioner:
            errors.forbidden(ROOT.child("provisioner"), "updates to provisioner are forbidden.")
        if self.reclaim_policy != old.reclaim_policy:
            errors.forbidden(ROOT.child("reclaimPolicy"), "updates to reclaimPolicy are forbidden.")


def _spec(obj: Any, cls: type[Any]) -> Any:
    """A kind's spec, or an empty one for printing."""
    return obj.spec if obj.spec is not None else cls()


def _audiences_cell(spec: CSIDriverSpec) -> str:
    if spec.token_requests is None:
        return "<unset>"
    return ",".join(t.audience or "" for t in spec.token_requests)


# CSIDriver.

FS_GROUP_POLICIES = ("File", "None", "ReadWriteOnceWithFSType")
VOLUME_LIFECYCLE_MODES = ("Persistent", "Ephemeral")
MIN_TOKEN_SECONDS = 10 * 60
MAX_TOKEN_SECONDS = 1 << 32
MIN_ALLOCATABLE_UPDATE_PERIOD = 10


class TokenRequest(Struct):
    """A service account token the kubelet requests for a driver."""

    audience: Annotated[
        str | None, meta(doc="The token's audience; empty: the API server's.", proto=1)
    ] = None
    expiration_seconds: Annotated[
        int | None,
        meta(doc="How long the token is valid; at least 10 minutes.", proto=2, int64=True),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        seconds = self.expiration_seconds
        if seconds is not None and seconds < MIN_TOKEN_SECONDS:
            detail = "may not specify a duration less than 10 minutes"
            errors.invalid(path.child("expirationSeconds"), seconds, detail)
        if seconds is not None and seconds > MAX_TOKEN_SECONDS:
            detail = "may not specify a duration larger than 2^32 seconds"
            errors.invalid(path.child("expirationSeconds"), seconds, detail)


class CSIDriverSpec(Struct):
    """How Kubernetes works with one CSI driver."""

    attach_required: Annotated[
        bool | None,
        meta(
            doc="Whether volumes need attaching (ControllerPublishVolume) before mounting; "
            "default true; immutable.",
            proto=1,
        ),
    ] = None
    pod_info_on_mount: Annotated[
        bool | None,
        meta(doc="Whether the pod's name, namespace and UID are passed on mount.", proto=2),
    ] = None
    volume_lifecycle_modes: Annotated[
        list[str] | None,
        merge_set(
            doc="Persistent (the default) and/or Ephemeral (inline in pods); immutable.",
            proto=3,
        ),
    ] = None
    storage_capacity: Annotated[
        bool | None,
        meta(doc="Whether the scheduler considers the CSIStorageCapacity objects.", proto=4),
    ] = None
    fs_group_policy: Annotated[
        str | None,
        meta(
            doc="Whether fsGroup ownership applies: ReadWriteOnceWithFSType (the default), "
            "File or None.",
            proto=5,
        ),
    ] = None
    token_requests: Annotated[
        list[TokenRequest] | None,
        atomic(doc="Service account tokens passed to the driver on mount.", proto=6),
    ] = None
    requires_republish: Annotated[
        bool | None, meta(doc="Whether NodePublishVolume is called periodically.", proto=7)
    ] = None
    se_linux_mount: Annotated[
        bool | None,
        meta(
            doc='Whether the driver supports the "-o context" mount option.',
            proto=8,
        ),
    ] = None
    node_allocatable_update_period_seconds: Annotated[
        int | None,
        meta(
            doc="How often the CSINode's allocatable count is updated; at least 10 seconds.",
            proto=9,
            int64=True,
        ),
    ] = None
    service_account_token_in_secrets: Annotated[
        bool | None,
        meta(
            doc="Whether tokens are passed in NodePublishVolume's Secrets, not its volume "
            "context; only with tokenRequests.",
            proto=10,
        ),
    ] = None
    prevent_pod_scheduling_if_missing: Annotated[
        bool | None,
        meta(doc="Whether pods stay off nodes where the driver is not registered.", proto=11),
    ] = None

    def set_defaults(self) -> None:
        if self.attach_required is None:
            self.attach_required = True
        if self.pod_info_on_mount is None:
            self.pod_info_on_mount = False
        if self.storage_capacity is None:
            self.storage_capacity = False
        if self.fs_group_policy is None:
            self.fs_group_policy = "ReadWriteOnceWithFSType"
        if not self.volume_lifecycle_modes:
            self.volume_lifecycle_modes = ["Persistent"]
        if self.requires_republish is None:
            self.requires_republish = False
        if self.se_linux_mount is None:
            self.se_linux_mount = False

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.fs_group_policy is not None and self.fs_group_policy not in FS_GROUP_POLICIES:
            errors.not_supported(
                path.child("fsGroupPolicy"), self.fs_group_policy, FS_GROUP_POLICIES
            )
        for mode in self.volume_lifecycle_modes or ():  # reported at the list, as upstream
            if mode not in VOLUME_LIFECYCLE_MODES:
                errors.not_supported(
                    path.child("volumeLifecycleModes"), mode, VOLUME_LIFECYCLE_MODES
                )
        audiences: set[str] = set()
        for i, request in enumerate(self.token_requests or ()):
            audience = request.audience or ""
            if audience in audiences:
                errors.duplicate(path.child("tokenRequests").index(i).child("audience"), audience)
            audiences.add(audience)
        period = self.node_allocatable_update_period_seconds
        if period is not None and period < MIN_ALLOCATABLE_UPDATE_PERIOD:
            detail = "must be greater than or equal to 10 seconds"
            errors.invalid(path.child("nodeAllocatableUpdatePeriodSeconds"), period, detail)


@kind(
    group=GROUP,
    version="v1",
    plural="csidrivers",
    namespaced=False,
    returns_deleted=True,
    columns=(
        NAME_COLUMN,
        Column(
            "AttachRequired",
            lambda o, now: _spec(o, CSIDriverSpec).attach_required is not False,
            type="boolean",
            description="attachRequired indicates this CSI volume driver requires an attach "
            "operation.",
        ),
        Column(
            "PodInfoOnMount",
            lambda o, now: bool(_spec(o, CSIDriverSpec).pod_info_on_mount),
            type="boolean",
            description="podInfoOnMount indicates this CSI volume driver requires additional "
            "pod information during mount operations.",
        ),
        Column(
            "StorageCapacity",
            lambda o, now: bool(_spec(o, CSIDriverSpec).storage_capacity),
            type="boolean",
            description="storageCapacity indicates that the CSI volume driver wants pod "
            "scheduling to consider the storage capacity it reports.",
        ),
        Column(
            "TokenRequests",
            lambda o, now: _audiences_cell(_spec(o, CSIDriverSpec)),
            description="tokenRequests indicates the CSI driver needs pods' service account "
            "tokens it is mounting volume for to do necessary authentication.",
        ),
        Column(
            "RequiresRepublish",
            lambda o, now: bool(_spec(o, CSIDriverSpec).requires_republish),
            type="boolean",
            description="requiresRepublish indicates the CSI driver wants `NodePublishVolume` "
            "being periodically called.",
        ),
        Column(
            "Modes",
            lambda o, now: (
                ",".join(_spec(o, CSIDriverSpec).volume_lifecycle_modes or ()) or "<none>"
            ),
            description="volumeLifecycleModes defines what kind of volumes this CSI volume "
            "driver supports.",
        ),
        AGE_COLUMN,
    ),
)
class CSIDriver(Resource):
    """A CSI driver deployed in the cluster, named by the driver's GetPluginName()."""

    spec: Annotated[
        CSIDriverSpec | None,
        meta(required=True, doc="How Kubernetes works with the driver.", proto=2),
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = CSIDriverSpec()

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        # Upstream names the immutable attachRequired ``spec.attachedRequired``.
        new_spec, old_spec = _spec(self, CSIDriverSpec), _spec(old, CSIDriverSpec)
        if new_spec.attach_required != old_spec.attach_required:
            path = ROOT.child("spec").child("attachedRequired")
            errors.immutable(path, new_spec.attach_required)
        if new_spec.volume_lifecycle_modes != old_spec.volume_lifecycle_modes:
            path = ROOT.child("spec").child("volumeLifecycleModes")
            errors.immutable(path, new_spec.volume_lifecycle_modes)


# CSINode.

MAX_NODE_ID_LENGTH = 256


class VolumeNodeResources(Struct):
    """How many volumes of a driver a node can use."""

    count: Annotated[
        int | None, meta(minimum=0, doc="The most volumes of the driver on the node.", proto=1)
    ] = None


class CSINodeDriver(Struct):
    """One CSI driver registered on a node."""

    name: Annotated[
        str | None, meta(required=True, doc="The driver's name (GetPluginName()).", proto=1)
    ] = None
    node_id: Annotated[
        str | None,
        meta(required=True, doc="The node's ID as the driver knows it.", proto=2),
    ] = msgspec.field(default=None, name="nodeID")
    topology_keys: Annotated[
        list[str] | None,
        atomic(doc="Topology label keys the driver uses.", proto=3),
    ] = None
    allocatable: Annotated[
        VolumeNodeResources | None,
        meta(doc="The volume resources available for scheduling.", proto=4),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.name:
            validate_csi_driver_name(self.name, path.child("name"), errors)
        if self.node_id and len(self.node_id) > MAX_NODE_ID_LENGTH:
            detail = f"must be {MAX_NODE_ID_LENGTH} characters or less"
            errors.invalid(path.child("nodeID"), self.node_id, detail)
        seen: set[str] = set()
        for key in self.topology_keys or ():  # upstream reports these at the driver
            if not key:
                errors.required(path)
            if key in seen:
                errors.duplicate(path, key)
            seen.add(key)
            errors.extend_checked(path, key, names.is_qualified_name(key))


class CSINodeSpec(Struct):
    """The CSI drivers registered on a node."""

    drivers: Annotated[
        list[CSINodeDriver] | None,
        meta(merge_key="name", doc="The drivers, by name.", proto=1),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        seen: set[str] = set()
        for i, driver in enumerate(self.drivers or ()):
            name = driver.name or ""
            if name in seen:
                errors.duplicate(path.child("drivers").index(i).child("name"), name)
            seen.add(name)


@kind(
    group=GROUP,
    version="v1",
    plural="csinodes",
    namespaced=False,
    returns_deleted=True,
    columns=(
        NAME_COLUMN,
        Column(
            "Drivers",
            lambda o, now: len(_spec(o, CSINodeSpec).drivers or ()),
            type="integer",
            description="Drivers indicates the number of CSI drivers registered on the node",
        ),
        AGE_COLUMN,
    ),
)
class CSINode(Resource):
    """The CSI drivers installed on one node, named after the node."""

    spec: Annotated[
        CSINodeSpec | None, meta(required=True, doc="The node's CSI drivers.", proto=2)
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = CSINodeSpec()

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        """A registered driver's entry may change only in its allocatable count."""
        before = {d.name: d for d in _spec(old, CSINodeSpec).drivers or ()}
        for driver in _spec(self, CSINodeSpec).drivers or ():
            previous = before.get(driver.name)
            if previous is None:
                continue
            if msgspec.structs.replace(driver, allocatable=None) != msgspec.structs.replace(
                previous, allocatable=None
            ):
                errors.immutable(ROOT.child("spec").child("drivers"), driver)


# VolumeAttachment.

MAX_ATTACHMENT_METADATA_SIZE = 256 * 1024
MAX_VOLUME_ERROR_MESSAGE = 1024
_SOURCE_CHOICE = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"


class VolumeAttachmentSource(Struct):
    """The volume to attach: a PersistentVolume by name, or a migrated inline volume."""

    persistent_volume_name: Annotated[
        str | None, meta(doc="The PersistentVolume to attach.", proto=1)
    ] = None
    inline_volume_spec: Annotated[
        PersistentVolumeSpec | None,
        meta(
            doc="A pod's inline volume translated to a PersistentVolumeSpec (CSI migration).",
            proto=2,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        name, inline = self.persistent_volume_name, self.inline_volume_spec
        if name is None and inline is None:
            errors.required(path, _SOURCE_CHOICE)
        elif name is not None and inline is not None:
            errors.forbidden(path, _SOURCE_CHOICE)
        elif name is not None:
            name_path = path.child("persistentVolumeName")
            if not name:
                errors.required(name_path, "must specify non empty persistentVolumeName")
            else:
                errors.extend_checked(name_path, name, names.is_dns1123_subdomain(name))


class VolumeAttachmentSpec(Struct):
    """Which volume to attach to which node, and by which driver."""

    attacher: Annotated[
        str | None,
        meta(
            required=True, doc="The driver that handles the attachment (GetPluginName()).", proto=1
        ),
    ] = None
    source: Annotated[
        VolumeAttachmentSource | None, meta(required=True, doc="The volume to attach.", proto=2)
    ] = None
    node_name: Annotated[
        str | None,
        meta(
            required=True,
            format=DNS1123_SUBDOMAIN,
            doc="The node to attach the volume to.",
            proto=3,
        ),
    ] = None

    def set_defaults(self) -> None:
        if self.source is None:
            self.source = VolumeAttachmentSource()

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.attacher:
            validate_csi_driver_name(self.attacher, path.child("attacher"), errors)


class VolumeError(Struct):
    """An error of an attach or detach operation."""

    time: Annotated[Time | None, meta(doc="When the error happened.", proto=1, omitempty=True)] = (
        None
    )
    message: Annotated[
        str | None, meta(doc="The error; logged, so nothing secret.", proto=2, omitempty=True)
    ] = None
    error_code: Annotated[int | None, meta(doc="The gRPC code of the error.", proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.message and len(self.message) > MAX_VOLUME_ERROR_MESSAGE:
            # Upstream reports the metadata limit here.
            errors.too_long(path.child("message"), MAX_ATTACHMENT_METADATA_SIZE)
        if self.error_code is not None and self.error_code < 0:
            detail = "must be between 0 and 2147483647, inclusive"
            errors.invalid(path.child("errorCode"), self.error_code, detail)


class VolumeAttachmentStatus(Struct):
    """What the external attacher reports."""

    attached: Annotated[bool | None, meta(doc="Whether the volume is attached.", proto=1)] = None
    attachment_metadata: Annotated[
        dict[str, str] | None, meta(doc="What the attach returned, for mounting.", proto=2)
    ] = None
    attach_error: Annotated[VolumeError | None, meta(doc="The last attach error.", proto=3)] = None
    detach_error: Annotated[VolumeError | None, meta(doc="The last detach error.", proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        metadata = self.attachment_metadata or {}
        if sum(len(k) + len(v) for k, v in metadata.items()) > MAX_ATTACHMENT_METADATA_SIZE:
            errors.too_long(path.child("attachmentMetadata"), MAX_ATTACHMENT_METADATA_SIZE)


def _attached_cell(status: VolumeAttachmentStatus | None) -> bool:
    return bool(status and status.attached)


@kind(
    group=GROUP,
    version="v1",
    plural="volumeattachments",
    namespaced=False,
    returns_deleted=True,
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column(
            "Attacher",
            lambda o, now: _spec(o, VolumeAttachmentSpec).attacher or "",
            format="name",
            description="attacher indicates the name of the volume driver that MUST handle "
            "this request. This is the name returned by GetPluginName().",
        ),
        Column(
            "PV",
            lambda o, now: (
                (
                    _spec(o, VolumeAttachmentSpec).source or VolumeAttachmentSource()
                ).persistent_volume_name
                or ""
            ),
            description="persistentVolumeName represents the name of the persistent volume "
            "to attach.",
        ),
        Column(
            "Node",
            lambda o, now: _spec(o, VolumeAttachmentSpec).node_name or "",
            description="nodeName represents the node that the volume should be attached to.",
        ),
        Column(
            "Attached",
            lambda o, now: _attached_cell(o.status),
            type="boolean",
            description="attached indicates the volume is successfully attached.",
        ),
        AGE_COLUMN,
    ),
)
class VolumeAttachment(Resource):
    """A request to attach a volume to a node, answered in its status by the attacher."""

    spec: Annotated[
        VolumeAttachmentSpec | None,
        meta(required=True, doc="The volume, node and attacher; immutable.", proto=2),
    ] = None
    status: Annotated[
        VolumeAttachmentStatus | None, meta(doc="The attacher's answer.", proto=3)
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = VolumeAttachmentSpec()

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        if self.spec != old.spec:
            errors.immutable(ROOT.child("spec"), msgspec.to_builtins(self.spec))


# CSIStorageCapacity.


def _capacity_cell(obj: CSIStorageCapacity) -> str:
    parsed = parse_quantity(obj.capacity)
    return "<unset>" if parsed is None else str(parsed)


@kind(
    group=GROUP,
    version="v1",
    plural="csistoragecapacities",
    namespaced=True,
    columns=(
        NAME_COLUMN,
        Column(
            "StorageClassName",
            lambda o, now: o.storage_class_name or "",
            description="storageClassName represents the name of the StorageClass that the "
            "reported capacity applies to.",
        ),
        Column(
            "Capacity",
            lambda o, now: _capacity_cell(o),
            description="capacity is the value reported by the CSI driver in its "
            "GetCapacityResponse.",
        ),
    ),
)
class CSIStorageCapacity(Resource):
    """The capacity a CSI driver reports for one storage class in one topology segment."""

    node_topology: Annotated[
        LabelSelector | None,
        meta(
            immutable=True,
            doc="The nodes that reach the storage; unset: none, empty: every node; immutable.",
            proto=2,
        ),
    ] = None
    storage_class_name: Annotated[
        str | None,
        meta(
            required=True,
            immutable=True,
            format=DNS1123_SUBDOMAIN,
            doc="The StorageClass the capacity is for; immutable.",
            proto=3,
        ),
    ] = None
    capacity: Annotated[
        QuantityValue | None, meta(doc="The available capacity, in bytes.", proto=4)
    ] = None
    maximum_volume_size: Annotated[
        QuantityValue | None, meta(doc="The largest volume that can be created.", proto=5)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        capacity = parse_quantity(self.capacity)
        if capacity is not None and capacity < ZERO:
            errors.invalid(
                path.child("capacity"), str(capacity), "must be greater than or equal to 0"
            )


# VolumeAttributesClass.


@kind(
    group=GROUP,
    version="v1",
    plural="volumeattributesclasses",
    namespaced=False,
    returns_deleted=True,
    short_names=("vac",),
    columns=(
        NAME_COLUMN,
        Column(
            "DriverName",
            lambda o, now: o.driver_name or "",
            description="Name of the CSI driver This field is immutable.",
        ),
        AGE_COLUMN,
    ),
)
class VolumeAttributesClass(Resource):
    """Mutable volume attributes a CSI driver applies to the volumes of the class."""

    driver_name: Annotated[
        str | None, meta(required=True, doc="The CSI driver's name; immutable.", proto=2)
    ] = None
    parameters: Annotated[
        dict[str, str] | None,
        meta(doc="The attributes, opaque to Kubernetes; at least one; immutable.", proto=3),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_provisioner(self.driver_name, path.child("driverName"), errors)
        _validate_parameters(self.parameters, path.child("parameters"), errors, required=True)

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        if self.driver_name != old.driver_name:
            errors.forbidden(ROOT.child("driverName"), "updates to driverName are forbidden.")
        if (self.parameters or {}) != (old.parameters or {}):
            errors.forbidden(ROOT.child("parameters"), "updates to parameters are forbidden.")
