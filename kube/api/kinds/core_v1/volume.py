"""core/v1 storage: pod volumes and their sources, PersistentVolume and PersistentVolumeClaim.

Also the small reference and selector types both pods and volumes point with (``ObjectReference``,
``LocalObjectReference``, ``ObjectFieldSelector``, ``NodeSelector``, ...), so that
``kube.api.kinds.core_v1.pod`` builds on this module without a cycle.

A volume names exactly one source.  ``VolumeSource`` and ``PersistentVolumeSource`` declare their
sources in the order upstream validation visits them, so the second source given is the one
reported; upstream inlines these unions into ``Volume`` and ``PersistentVolumeSpec``, here the
two derive from them.  Sources that exist in a pod form and a persistent-volume form differing
only in how they name their Secret share a generic base.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from typing import Annotated, Any, Generic, Self, TypeVar

import msgspec

from kube.api import names, quantity
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.meta_v1 import LabelSelector, ObjectMeta, Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    Embedded,
    QuantityValue,
    Struct,
    Time,
    atomic,
    meta,
)

FILE_MODE_DEFAULT = 0o644
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
VOLUME_MODES = ("Block", "Filesystem")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
ZERO = quantity.Quantity(0)

AccessMode = Annotated[str, meta(enum=ACCESS_MODES)]
FileMode = Annotated[int | None, meta(minimum=0, maximum=0o777)]
SecretRef = TypeVar("SecretRef", bound=Struct)


# Helpers shared with pod.py.


def struct_fields(cls: type[Struct]) -> tuple[tuple[str, str], ...]:
    """(attribute, JSON name) of every field of a struct class, in declaration order."""
    return tuple(zip(cls.__struct_fields__, cls.__struct_encode_fields__, strict=True))


def validate_one_of(
    obj: Struct, fields: Iterable[tuple[str, str]], what: str, path: Path, errors: ErrorList
) -> None:
    """Exactly one of ``fields`` must be set: later ones are forbidden, none is required."""
    found = False
    for attr, name in fields:
        if getattr(obj, attr) is None:
            continue
        if found:
            errors.forbidden(path.child(name), f"may not specify more than 1 {what}")
        found = True
    if not found:
        errors.required(path, f"must specify a {what}")


def parse_quantity(value: Any) -> quantity.Quantity | None:
    """The quantity a field holds; None when it holds none, or an invalid one (which the
    field's format check reports)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return quantity.Quantity.parse(value)
    except quantity.QuantityError:
        return None


def image_pull_policy(image: str | None) -> str:
    """Upstream's default pull policy for an image: Always for ``:latest`` or no tag at all,
    IfNotPresent for any other tag or a bare digest."""
    name, at, _ = (image or "").partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2] if ":" in last else ("" if at else "latest")
    return "Always" if tag == "latest" else "IfNotPresent"


def validate_no_backsteps(value: str, path: Path, errors: ErrorList) -> bool:
    """Report a path that has a ``..`` element; True when it had one."""
    if ".." in value.replace("\\", "/").split("/"):
        errors.invalid(path, value, "must not contain '..'")
        return True
    return False


def validate_relative_path(value: str | None, path: Path, errors: ErrorList) -> None:
    """A path below some root: relative, without ``..`` elements, not starting with ``..``."""
    if not value:
        return
    if posixpath.isabs(value):
        errors.invalid(path, value, "must be a relative path")
    if not validate_no_backsteps(value, path, errors) and value.startswith(".."):
        errors.invalid(path, value, "must not start with '..'")


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The keys of two JSON objects that differ, as ``-``/``+`` lines, for messages that
    refuse a change."""
    lines: list[str] = []
    for key in sorted(old.keys() | new.keys()):
        if old.get(key) != new.get(key):
            lines.append(f"- {key}: {msgspec.json.encode(old.get(key)).decode()}")
            lines.append(f"+ {key}: {msgspec.json.encode(new.get(key)).decode()}")
    return "\n".join(lines)


def validate_template_metadata(metadata: ObjectMeta | None, path: Path, errors: ErrorList) -> None:
    """The metadata of an embedded template: valid labels and annotations."""
    if metadata is not None:
        names.validate_labels(metadata.labels, path.child("labels"), errors)
        names.validate_annotations(metadata.annotations, path.child("annotations"), errors)


def _validate_access_modes(modes: list[str] | None, path: Path, errors: ErrorList) -> None:
    """ReadWriteOncePod excludes every other mode (unknown modes are reported by the enum)."""
    known = {mode for mode in modes or () if mode in ACCESS_MODES}
    if "ReadWriteOncePod" in known and len(known) > 1:
        errors.forbidden(path, "may not use ReadWriteOncePod with other access modes")


def _validate_positive_quantity(value: Any, path: Path, errors: ErrorList) -> None:
    parsed = parse_quantity(value)
    if parsed is not None and parsed <= ZERO:
        errors.invalid(path, str(value), "must be greater than zero")


# References and selectors shared by pods and volumes.


class LocalObjectReference(Struct):
    """Names an object in the same namespace."""

    name: Annotated[str | None, meta(proto=1, omitempty=True)] = None


NAME_AS_LOCAL_REFERENCE: tuple[Embedded, ...] = (Embedded(1, "LocalObjectReference", ("name",)),)
"""The protobuf shape of structs that inline a LocalObjectReference: their ``name`` is in it."""


class ObjectReference(Struct):
    """Points at any object, optionally at a field within it."""

    kind: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    namespace: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    name: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    uid: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    api_version: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    resource_version: Annotated[str | None, meta(proto=6, omitempty=True)] = None
    field_path: Annotated[str | None, meta(proto=7, omitempty=True)] = None


class SecretReference(Struct):
    """Names a Secret in any namespace."""

    name: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    namespace: Annotated[str | None, meta(proto=2, omitempty=True)] = None


class TypedLocalObjectReference(Struct):
    """Points at an object of a given group and kind in the same namespace."""

    api_group: Annotated[str | None, meta(proto=1)] = None
    kind: Annotated[str | None, meta(required=True, proto=2)] = None
    name: Annotated[str | None, meta(required=True, proto=3)] = None


class TypedObjectReference(Struct):
    """Points at an object of a given group and kind, possibly in another namespace."""

    api_group: Annotated[str | None, meta(proto=1)] = None
    kind: Annotated[str | None, meta(required=True, proto=2)] = None
    name: Annotated[str | None, meta(required=True, proto=3)] = None
    namespace: Annotated[str | None, meta(format=DNS1123_LABEL, proto=4)] = None


class ObjectFieldSelector(Struct):
    """Selects a field of the pod (downward API): ``metadata.name``, ``status.podIP``, ..."""

    api_version: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    field_path: Annotated[str | None, meta(required=True, proto=2)] = None

    def set_defaults(self) -> None:
        if not self.api_version:
            self.api_version = "v1"

    def check(self, allowed: frozenset[str], path: Path, errors: ErrorList) -> None:
        """Check the selected field against what a consumer supports; subscripted
        ``metadata.labels['k']`` and ``metadata.annotations['k']`` are always supported."""
        if not self.api_version:
            errors.required(path.child("apiVersion"))
            return
        field_path = self.field_path
        if not field_path:
            return
        if self.api_version != "v1":
            detail = f"error converting fieldPath: unsupported pod version: {self.api_version}"
            errors.invalid(path.child("fieldPath"), field_path, detail)
            return
        base, bracket, subscript = field_path.removesuffix("']").partition("['")
        if field_path.endswith("']") and bracket and base:
            if base == "metadata.annotations":
                errors.extend_checked(path, subscript, names.is_qualified_name(subscript.lower()))
            elif base == "metadata.labels":
                errors.extend_checked(path, subscript, names.is_qualified_name(subscript))
            else:
                errors.invalid(path, base, "does not support subscript")
        elif field_path not in allowed:
            errors.not_supported(path.child("fieldPath"), field_path, allowed)


CONTAINER_RESOURCE_FIELDS = frozenset(
    {
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
    }
)
_BYTE_DIVISORS = ("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
# Resource (after requests./limits.) -> (divisors allowed, how the message names it).
_DIVISORS = {
    "cpu": (("1m", "1"), "the cpu"),
    "memory": (_BYTE_DIVISORS, "the memory"),
    "ephemeral-storage": (_BYTE_DIVISORS, "the local ephemeral storage"),
    "hugepages": (_BYTE_DIVISORS, "the hugepages"),
}


class ResourceFieldSelector(Struct):
    """Selects a resource request or limit of a container (downward API)."""

    container_name: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    resource: Annotated[str | None, meta(required=True, proto=2)] = None
    divisor: Annotated[QuantityValue | None, meta(proto=3)] = None

    def check(self, in_volume: bool, path: Path, errors: ErrorList) -> None:
        """Check the selected resource; volume files must also name the container."""
        resource = self.resource or ""
        if in_volume and not self.container_name:
            errors.required(path.child("containerName"))
        elif (
            resource
            and resource not in CONTAINER_RESOURCE_FIELDS
            and not resource.startswith(("requests.hugepages-", "limits.hugepages-"))
        ):
            errors.not_supported(path.child("resource"), resource, CONTAINER_RESOURCE_FIELDS)
        divisor = parse_quantity(self.divisor)
        name = resource.partition(".")[2]
        name = "hugepages" if name.startswith("hugepages-") else name
        if divisor is None or divisor == ZERO or name not in _DIVISORS:
            return
        allowed, what = _DIVISORS[name]
        if str(divisor) not in allowed:
            listed = "1m and 1" if name == "cpu" else ", ".join(allowed)
            detail = f"only divisor's values {listed} are supported with {what} resource"
            errors.invalid(path.child("divisor"), resource, detail)


class NodeSelectorRequirement(Struct):
    """One requirement on node labels or fields: ``key In (a, b)``, ``key Gt 3``, ..."""

    key: Annotated[str | None, meta(required=True, proto=1)] = None
    operator: Annotated[str | None, meta(required=True, proto=2)] = None
    values: Annotated[list[str] | None, atomic(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        count = len(self.values or ())
        values_path = path.child("values")
        if self.operator in ("In", "NotIn"):
            if count == 0:
                detail = "must be specified when `operator` is 'In' or 'NotIn'"
                errors.required(values_path, detail)
        elif self.operator in ("Exists", "DoesNotExist"):
            if count:
                detail = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                errors.forbidden(values_path, detail)
        elif self.operator in ("Gt", "Lt"):
            if count != 1:
                detail = "must be specified single value when `operator` is 'Lt' or 'Gt'"
                errors.required(values_path, detail)
        elif self.operator:
            errors.invalid(path.child("operator"), self.operator, "not a valid selector operator")


class NodeSelectorTerm(Struct):
    """Requirements that must all hold (one term of a node selector)."""

    match_expressions: Annotated[list[NodeSelectorRequirement] | None, atomic(proto=1)] = None
    match_fields: Annotated[list[NodeSelectorRequirement] | None, atomic(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        for i, requirement in enumerate(self.match_expressions or ()):
            if requirement.key:
                key_path = path.child("matchExpressions").index(i).child("key")
                errors.extend_checked(
                    key_path, requirement.key, names.is_qualified_name(requirement.key)
                )
        for i, requirement in enumerate(self.match_fields or ()):
            field_path = path.child("matchFields").index(i)
            if requirement.operator in ("In", "NotIn") and len(requirement.values or ()) != 1:
                errors.required(
                    field_path.child("values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field "
                    "selector",
                )
            if requirement.key and requirement.key != "metadata.name":
                detail = "not a valid field selector key"
                errors.invalid(field_path.child("key"), requirement.key, detail)
            for j, value in enumerate(requirement.values or ()):
                value_path = field_path.child("values").index(j)
                errors.extend_checked(value_path, value, names.is_dns1123_subdomain(value))

    def validate_label_values(self, path: Path, errors: ErrorList) -> None:
        """Terms that must hold also need valid label values (preferred ones may hold any)."""
        for i, requirement in enumerate(self.match_expressions or ()):
            values_path = path.child("matchExpressions").index(i).child("values")
            for j, value in enumerate(requirement.values or ()):
                errors.extend_checked(
                    values_path.index(j), value, names.is_valid_label_value(value)
                )


class NodeSelector(Struct):
    """Terms of which at least one must hold for a node to be selected."""

    node_selector_terms: Annotated[list[NodeSelectorTerm] | None, atomic(proto=1)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        terms_path = path.child("nodeSelectorTerms")
        if not self.node_selector_terms:
            errors.required(terms_path, "must have at least one node selector term")
        for i, term in enumerate(self.node_selector_terms or ()):
            term.validate_label_values(terms_path.index(i), errors)


class KeyToPath(Struct):
    """Projects one key of a ConfigMap or Secret to a file path."""

    key: Annotated[str | None, meta(required=True, proto=1)] = None
    path: Annotated[str | None, meta(required=True, proto=2)] = None
    mode: Annotated[FileMode, meta(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_relative_path(self.path, path.child("path"), errors)


# Volume sources, pod form first; the persistent-volume forms follow the claim.


class EmptyDirVolumeSource(Struct):
    """A scratch directory that lives as long as the pod, on disk or in memory."""

    medium: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    size_limit: Annotated[QuantityValue | None, meta(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        size = parse_quantity(self.size_limit)
        if size is not None and size < ZERO:
            detail = "SizeLimit field must be a valid resource quantity"
            errors.forbidden(path.child("sizeLimit"), detail)


HOST_PATH_TYPES = (
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
)


class HostPathVolumeSource(Struct):
    """A file or directory of the node, mounted into the pod."""

    path: Annotated[str | None, meta(required=True, proto=1)] = None
    type: Annotated[str | None, meta(enum=HOST_PATH_TYPES, proto=2)] = None

    def set_defaults(self) -> None:
        if self.type is None:
            self.type = ""

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.path:
            validate_no_backsteps(self.path, path.child("path"), errors)


class GitRepoVolumeSource(Struct):
    """A git repository cloned into the volume (deprecated)."""

    repository: Annotated[str | None, meta(required=True, proto=1)] = None
    revision: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    directory: Annotated[str | None, meta(proto=3, omitempty=True)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_relative_path(self.directory, path.child("directory"), errors)


class GCEPersistentDiskVolumeSource(Struct):
    """A Google Compute Engine persistent disk (in-tree, migrated to CSI)."""

    pd_name: Annotated[str | None, meta(required=True, proto=1)] = None
    fs_type: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    partition: Annotated[int | None, meta(minimum=0, maximum=255, proto=3, omitempty=True)] = None
    read_only: Annotated[bool | None, meta(proto=4, omitempty=True)] = None


class AWSElasticBlockStoreVolumeSource(Struct):
    """An AWS EBS volume (in-tree, migrated to CSI)."""

    volume_id: Annotated[str | None, meta(required=True, proto=1)] = msgspec.field(
        default=None, name="volumeID"
    )
    fs_type: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    partition: Annotated[int | None, meta(minimum=0, maximum=255, proto=3, omitempty=True)] = None
    read_only: Annotated[bool | None, meta(proto=4, omitempty=True)] = None


class SecretVolumeSource(Struct):
    """The keys of a Secret, as files."""

    secret_name: Annotated[str | None, meta(required=True, proto=1, omitempty=True)] = None
    items: Annotated[list[KeyToPath] | None, atomic(proto=2)] = None
    default_mode: Annotated[FileMode, meta(proto=3)] = None
    optional: Annotated[bool | None, meta(proto=4)] = None

    def set_defaults(self) -> None:
        if self.default_mode is None:
            self.default_mode = FILE_MODE_DEFAULT


class NFSVolumeSource(Struct):
    """An NFS export."""

    server: Annotated[str | None, meta(required=True, proto=1)] = None
    path: Annotated[str | None, meta(required=True, proto=2)] = None
    read_only: Annotated[bool | None, meta(proto=3, omitempty=True)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.path and not posixpath.isabs(self.path):
            errors.invalid(path.child("path"), self.path, "must be an absolute path")


_IQN_FORMATS = {
    "iqn": re.compile(r"iqn\.\d{4}-\d{2}\.([A-Za-z0-9\-.]+)(:[^,;*&$|\s]+)$"),
    "eui": re.compile(r"^eui.[A-Za-z0-9]{16}$"),
    "naa": re.compile(r"^naa.[A-Za-z0-9]{32}$"),
}


def _validate_iqn(value: str | None, path: Path, errors: ErrorList) -> None:
    if not value:
        return
    pattern = _IQN_FORMATS.get(value[:3])
    if pattern is None:
        errors.invalid(path, value, "must be valid format starting with iqn, eui, or naa")
    elif not pattern.search(value):
        errors.invalid(path, value, "must be valid format")


class _ISCSI(Struct, Generic[SecretRef]):
    """What the pod and persistent-volume forms of an iSCSI source share."""

    target_portal: Annotated[str | None, meta(required=True, proto=1)] = None
    iqn: Annotated[str | None, meta(required=True, proto=2)] = None
    lun: Annotated[int | None, meta(minimum=0, maximum=255, proto=3)] = None
    iscsi_interface: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    fs_type: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    read_only: Annotated[bool | None, meta(proto=6, omitempty=True)] = None
    portals: Annotated[list[str] | None, atomic(proto=7)] = None
    chap_auth_discovery: Annotated[bool | None, meta(proto=8, omitempty=True)] = None
    chap_auth_session: Annotated[bool | None, meta(proto=11, omitempty=True)] = None
    secret_ref: Annotated[SecretRef | None, meta(proto=10)] = None
    initiator_name: Annotated[str | None, meta(proto=12)] = None

    def set_defaults(self) -> None:
        if not self.iscsi_interface:
            self.iscsi_interface = "default"

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_iqn(self.iqn, path.child("iqn"), errors)
        _validate_iqn(self.initiator_name, path.child("initiatorname"), errors)
        if (self.chap_auth_discovery or self.chap_auth_session) and self.secret_ref is None:
            errors.required(path.child("secretRef"))


class ISCSIVolumeSource(_ISCSI[LocalObjectReference]):
    """An iSCSI disk."""


class GlusterfsVolumeSource(Struct):
    """A GlusterFS volume (removed from the kubelet, still in the API)."""

    endpoints: Annotated[str | None, meta(required=True, proto=1)] = None
    path: Annotated[str | None, meta(required=True, proto=2)] = None
    read_only: Annotated[bool | None, meta(proto=3, omitempty=True)] = None


class PersistentVolumeClaimVolumeSource(Struct):
    """Mounts the volume bound to a claim in the pod's namespace."""

    claim_name: Annotated[str | None, meta(required=True, proto=1)] = None
    read_only: Annotated[bool | None, meta(proto=2, omitempty=True)] = None


class _RBD(Struct, Generic[SecretRef]):
    """What the pod and persistent-volume forms of a Ceph RBD source share."""

    monitors: Annotated[list[str] | None, atomic(required=True, proto=1)] = None
    image: Annotated[str | None, meta(required=True, proto=2)] = None
    fs_type: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    pool: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    user: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    keyring: Annotated[str | None, meta(proto=6, omitempty=True)] = None
    secret_ref: Annotated[SecretRef | None, meta(proto=7)] = None
    read_only: Annotated[bool | None, meta(proto=8, omitempty=True)] = None

    def set_defaults(self) -> None:
        self.pool = self.pool or "rbd"
        self.user = self.user or "admin"
        self.keyring = self.keyring or "/etc/ceph/keyring"


class RBDVolumeSource(_RBD[LocalObjectReference]):
    """A Ceph RBD image (removed from the kubelet, still in the API)."""


class _Cinder(Struct, Generic[SecretRef]):
    """What the pod and persistent-volume forms of a Cinder source share."""

    volume_id: Annotated[str | None, meta(required=True, proto=1)] = msgspec.field(
        default=None, name="volumeID"
    )
    fs_type: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    read_only: Annotated[bool | None, meta(proto=3, omitempty=True)] = None
    secret_ref: Annotated[SecretRef | None, meta(proto=4)] = None


class CinderVolumeSource(_Cinder[LocalObjectReference]):
    """An OpenStack Cinder volume (in-tree, migrated to CSI)."""


class _CephFS(Struct, Generic[SecretRef]):
    """What the pod and persistent-volume forms of a CephFS source share."""

    monitors: Annotated[list[str] | None, atomic(required=True, proto=1)] = None
    path: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    user: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    secret_file: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    secret_ref: Annotated[SecretRef | None, meta(proto=5)] = None
    read_only: Annotated[bool | None, meta(proto=6, omitempty=True)] = None


class CephFSVolumeSource(_CephFS[LocalObjectReference]):
    """A CephFS mount (removed from the kubelet, still in the API)."""


class FlockerVolumeSource(Struct):
    """A Flocker dataset (removed from the kubelet, still in the API)."""

    dataset_name: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    dataset_uuid: Annotated[str | None, meta(proto=2, omitempty=True)] = msgspec.field(
        default=None, name="datasetUUID"
    )

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.dataset_name and not self.dataset_uuid:
            errors.required(path, "one of datasetName and datasetUUID is required")
        if self.dataset_name and self.dataset_uuid:
            detail = "datasetName and datasetUUID can not be specified simultaneously"
            errors.invalid(path, "resource", detail)
        if self.dataset_name and "/" in self.dataset_name:
            errors.invalid(path.child("datasetName"), self.dataset_name, "must not contain '/'")


VOLUME_FIELD_PATHS = frozenset(
    {
        "metadata.name",
        "metadata.namespace",
        "metadata.labels",
        "metadata.annotations",
        "metadata.uid",
    }
)


class DownwardAPIVolumeFile(Struct):
    """One file of a downward API volume: a pod field or a container resource."""

    path: Annotated[str | None, meta(required=True, proto=1)] = None
    field_ref: Annotated[ObjectFieldSelector | None, meta(proto=2)] = None
    resource_field_ref: Annotated[ResourceFieldSelector | None, meta(proto=3)] = None
    mode: Annotated[FileMode, meta(proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_relative_path(self.path, path.child("path"), errors)
        if self.field_ref is not None:
            self.field_ref.check(VOLUME_FIELD_PATHS, path.child("fieldRef"), errors)
            if self.resource_field_ref is not None:
                detail = "fieldRef and resourceFieldRef can not be specified simultaneously"
                errors.invalid(path, "resource", detail)
        elif self.resource_field_ref is not None:
            self.resource_field_ref.check(True, path.child("resourceFieldRef"), errors)
        else:
            errors.required(path, "one of fieldRef and resourceFieldRef is required")


class DownwardAPIVolumeSource(Struct):
    """Pod fields and container resources, as files."""

    items: Annotated[list[DownwardAPIVolumeFile] | None, atomic(proto=1)] = None
    default_mode: Annotated[FileMode, meta(proto=2)] = None

    def set_defaults(self) -> None:
        if self.default_mode is None:
            self.default_mode = FILE_MODE_DEFAULT


class FCVolumeSource(Struct):
    """A Fibre Channel disk."""

    target_wwns: Annotated[list[str] | None, atomic(proto=1)] = msgspec.field(
        default=None, name="targetWWNs"
    )
    lun: Annotated[int | None, meta(minimum=0, maximum=255, proto=2)] = None
    fs_type: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    read_only: Annotated[bool | None, meta(proto=4, omitempty=True)] = None
    wwids: Annotated[list[str] | None, atomic(proto=5)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        wwns_path = path.child("targetWWNs")
        if not self.target_wwns and not self.wwids:
            errors.required(wwns_path, "must specify either targetWWNs or wwids, but not both")
        if self.target_wwns and self.wwids:
            detail = "targetWWNs and wwids can not be specified simultaneously"
            errors.invalid(wwns_path, self.target_wwns, detail)
        if self.target_wwns and self.lun is None:
            errors.required(path.child("lun"), "lun is required if targetWWNs is specified")


def _validate_flex_options(options: dict[str, str] | None, path: Path, errors: ErrorList) -> None:
    """FlexVolume options may not use the kubernetes.io and k8s.io prefixes."""
    for key in options or {}:
        prefix = key.split("/", 1)[0]
        if ("." + prefix.lower()).endswith((".kubernetes.io", ".k8s.io")):
            detail = "kubernetes.io and k8s.io namespaces are reserved"
            errors.invalid(path.child("options").key(key), key, detail)


class _Flex(Struct, Generic[SecretRef]):
    """What the pod and persistent-volume forms of a FlexVolume source share."""

    driver: Annotated[str | None, meta(required=True, proto=1)] = None
    fs_type: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    secret_ref: Annotated[SecretRef | None, meta(proto=3)] = None
    read_only: Annotated[bool | None, meta(proto=4, omitempty=True)] = None
    options: Annotated[dict[str, str] | None, meta(proto=5)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_flex_options(self.options, path, errors)


class FlexVolumeSource(_Flex[LocalObjectReference]):
    """A volume mounted by an exec-based FlexVolume driver."""


class AzureFileVolumeSource(Struct):
    """An Azure File share (in-tree, migrated to CSI)."""

    secret_name: Annotated[str | None, meta(required=True, proto=1)] = None
    share_name: Annotated[str | None, meta(required=True, proto=2)] = None
    read_only: Annotated[bool | None, meta(proto=3, omitempty=True)] = None


class ConfigMapVolumeSource(Struct):
    """The keys of a ConfigMap, as files."""

    PROTO_EMBEDDED = NAME_AS_LOCAL_REFERENCE

    name: Annotated[str | None, meta(required=True, proto=1, omitempty=True)] = None
    items: Annotated[list[KeyToPath] | None, atomic(proto=2)] = None
    default_mode: Annotated[FileMode, meta(proto=3)] = None
    optional: Annotated[bool | None, meta(proto=4)] = None

    def set_defaults(self) -> None:
        if self.default_mode is None:
            self.default_mode = FILE_MODE_DEFAULT


class VsphereVirtualDiskVolumeSource(Struct):
    """A vSphere virtual disk (in-tree, migrated to CSI)."""

    volume_path: Annotated[str | None, meta(required=True, proto=1)] = None
    fs_type: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    storage_policy_name: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    storage_policy_id: Annotated[str | None, meta(proto=4, omitempty=True)] = msgspec.field(
        default=None, name="storagePolicyID"
    )


class QuobyteVolumeSource(Struct):
    """A Quobyte volume (removed from the kubelet, still in the API)."""

    registry: Annotated[str | None, meta(proto=1)] = None
    volume: Annotated[str | None, meta(required=True, proto=2)] = None
    read_only: Annotated[bool | None, meta(proto=3, omitempty=True)] = None
    user: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    group: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    tenant: Annotated[str | None, meta(proto=6, omitempty=True)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        pairs = "must be a host:port pair or multiple pairs separated by commas"
        if not self.registry:
            errors.required(path.child("registry"), pairs)
        elif len(self.tenant or "") >= 65:
            detail = "must be a UUID and may not exceed a length of 64 characters"
            errors.required(path.child("tenant"), detail)
        elif not all(
            host and port for host, _, port in (p.rpartition(":") for p in self.registry.split(","))
        ):
            errors.invalid(path.child("registry"), self.registry, pairs)


_MANAGED_DISK_URI = (
    "/subscriptions/{sub-id}/resourcegroups/{group-name}/providers/microsoft.compute/disks/"
    "{disk-id}"
)
_BLOB_DISK_URI = "https://{account-name}.blob.core.windows.net/{container-name}/{disk-name}.vhd"


class AzureDiskVolumeSource(Struct):
    """An Azure data disk (in-tree, migrated to CSI)."""

    disk_name: Annotated[str | None, meta(required=True, proto=1)] = None
    disk_uri: Annotated[str | None, meta(required=True, proto=2)] = msgspec.field(
        default=None, name="diskURI"
    )
    caching_mode: Annotated[str | None, meta(enum=("None", "ReadOnly", "ReadWrite"), proto=3)] = (
        None
    )
    fs_type: Annotated[str | None, meta(proto=4)] = None
    read_only: Annotated[bool | None, meta(proto=5)] = None
    kind: Annotated[str | None, meta(enum=("Shared", "Dedicated", "Managed"), proto=6)] = None

    def set_defaults(self) -> None:
        self.caching_mode = self.caching_mode or "ReadWrite"
        self.fs_type = self.fs_type or "ext4"
        self.read_only = bool(self.read_only)
        self.kind = self.kind or "Shared"

    def validate(self, path: Path, errors: ErrorList) -> None:
        uri = self.disk_uri or ""
        if self.kind == "Managed" and not uri.startswith("/subscriptions/"):
            errors.not_supported(path.child("diskURI"), uri, [_MANAGED_DISK_URI])
        if self.kind not in (None, "Managed") and not uri.startswith("https://"):
            errors.not_supported(path.child("diskURI"), uri, [_BLOB_DISK_URI])


class PhotonPersistentDiskVolumeSource(Struct):
    """A Photon Controller persistent disk (removed from the kubelet, still in the API)."""

    pd_id: Annotated[str | None, meta(required=True, proto=1)] = msgspec.field(
        default=None, name="pdID"
    )
    fs_type: Annotated[str | None, meta(proto=2, omitempty=True)] = None


class ServiceAccountTokenProjection(Struct):
    """A token of the pod's service account, for an audience, as a file."""

    audience: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    expiration_seconds: Annotated[
        int | None, meta(minimum=600, maximum=1 << 32, proto=2, int64=True)
    ] = None
    path: Annotated[str | None, meta(required=True, proto=3)] = None

    def set_defaults(self) -> None:
        if self.expiration_seconds is None:
            self.expiration_seconds = 3600

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_relative_path(self.path, path.child("path"), errors)


class ConfigMapProjection(Struct):
    """Keys of a ConfigMap in a projected volume."""

    PROTO_EMBEDDED = NAME_AS_LOCAL_REFERENCE

    name: Annotated[str | None, meta(required=True, proto=1, omitempty=True)] = None
    items: Annotated[list[KeyToPath] | None, atomic(proto=2)] = None
    optional: Annotated[bool | None, meta(proto=4)] = None


class SecretProjection(Struct):
    """Keys of a Secret in a projected volume."""

    PROTO_EMBEDDED = NAME_AS_LOCAL_REFERENCE

    name: Annotated[str | None, meta(required=True, proto=1, omitempty=True)] = None
    items: Annotated[list[KeyToPath] | None, atomic(proto=2)] = None
    optional: Annotated[bool | None, meta(proto=4)] = None


class DownwardAPIProjection(Struct):
    """Downward API files in a projected volume."""

    items: Annotated[list[DownwardAPIVolumeFile] | None, atomic(proto=1)] = None


class ClusterTrustBundleProjection(Struct):
    """The certificates of ClusterTrustBundles, chosen by name or by signer, as one file."""

    name: Annotated[str | None, meta(proto=1)] = None
    signer_name: Annotated[str | None, meta(proto=2)] = None
    label_selector: Annotated[LabelSelector | None, meta(proto=3)] = None
    optional: Annotated[bool | None, meta(proto=5)] = None
    path: Annotated[str | None, meta(required=True, proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.name is not None and self.signer_name is not None:
            detail = "only one of name and signerName may be used"
            errors.invalid(path, msgspec.to_builtins(self), detail)
        elif self.name is not None:
            if not self.name:
                errors.required(path.child("name"), "must be a valid object name")
            if self.label_selector is not None:
                errors.invalid(
                    path.child("labelSelector"),
                    msgspec.to_builtins(self.label_selector),
                    "labelSelector must be unset if name is specified",
                )
        elif self.signer_name is not None:
            if not self.signer_name:
                errors.required(path.child("signerName"), "must be a valid signer name")
        else:
            errors.required(path, "either name or signerName must be specified")
        validate_relative_path(self.path, path.child("path"), errors)


class PodCertificateProjection(Struct):
    """A private key and a certificate chain issued to the pod by a signer, as files."""

    signer_name: Annotated[str | None, meta(required=True, proto=1, omitempty=True)] = None
    key_type: Annotated[
        str | None,
        meta(
            required=True,
            enum=("RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"),
            proto=2,
            omitempty=True,
        ),
    ] = None
    max_expiration_seconds: Annotated[
        int | None, meta(minimum=3600, maximum=91 * 86400, proto=3)
    ] = None
    credential_bundle_path: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    key_path: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    certificate_chain_path: Annotated[str | None, meta(proto=6, omitempty=True)] = None
    user_annotations: Annotated[dict[str, str] | None, meta(proto=7)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        for attr, name in struct_fields(PodCertificateProjection):
            if attr.endswith("_path"):
                validate_relative_path(getattr(self, attr), path.child(name), errors)


class VolumeProjection(Struct):
    """One source of a projected volume."""

    secret: Annotated[SecretProjection | None, meta(proto=1)] = None
    downward_api: Annotated[DownwardAPIProjection | None, meta(proto=2)] = msgspec.field(
        default=None, name="downwardAPI"
    )
    config_map: Annotated[ConfigMapProjection | None, meta(proto=3)] = None
    service_account_token: Annotated[ServiceAccountTokenProjection | None, meta(proto=4)] = None
    cluster_trust_bundle: Annotated[ClusterTrustBundleProjection | None, meta(proto=5)] = None
    pod_certificate: Annotated[PodCertificateProjection | None, meta(proto=6)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if sum(getattr(self, attr) is not None for attr, _ in _PROJECTIONS) > 1:
            errors.forbidden(path, "may not specify more than 1 volume type per source")

    def paths(self) -> list[str]:
        """The file paths this source writes."""
        items: list[KeyToPath | DownwardAPIVolumeFile] = []
        for source in (self.secret, self.config_map, self.downward_api):
            items += source.items or [] if source is not None else []
        found = [item.path for item in items if item.path]
        if self.cluster_trust_bundle is not None and self.cluster_trust_bundle.path:
            found.append(self.cluster_trust_bundle.path)
        return found


_PROJECTIONS = struct_fields(VolumeProjection)


class ProjectedVolumeSource(Struct):
    """Several sources (secrets, config maps, downward API, tokens) in one directory."""

    sources: Annotated[list[VolumeProjection] | None, atomic(proto=1)] = None
    default_mode: Annotated[FileMode, meta(proto=2)] = None

    def set_defaults(self) -> None:
        if self.default_mode is None:
            self.default_mode = FILE_MODE_DEFAULT

    def validate(self, path: Path, errors: ErrorList) -> None:
        seen: set[str] = set()
        for source in self.sources or ():
            for file_path in source.paths():
                if file_path in seen:
                    errors.invalid(path, file_path, "conflicting duplicate paths")
                seen.add(file_path)


class PortworxVolumeSource(Struct):
    """A Portworx volume (in-tree, migrated to CSI)."""

    volume_id: Annotated[str | None, meta(required=True, proto=1)] = msgspec.field(
        default=None, name="volumeID"
    )
    fs_type: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    read_only: Annotated[bool | None, meta(proto=3, omitempty=True)] = None


class _ScaleIO(Struct, Generic[SecretRef]):
    """What the pod and persistent-volume forms of a ScaleIO source share."""

    gateway: Annotated[str | None, meta(required=True, proto=1)] = None
    system: Annotated[str | None, meta(required=True, proto=2)] = None
    secret_ref: Annotated[SecretRef | None, meta(required=True, proto=3)] = None
    ssl_enabled: Annotated[bool | None, meta(proto=4, omitempty=True)] = None
    protection_domain: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    storage_pool: Annotated[str | None, meta(proto=6, omitempty=True)] = None
    storage_mode: Annotated[str | None, meta(proto=7, omitempty=True)] = None
    volume_name: Annotated[str | None, meta(required=True, proto=8, omitempty=True)] = None
    fs_type: Annotated[str | None, meta(proto=9, omitempty=True)] = None
    read_only: Annotated[bool | None, meta(proto=10, omitempty=True)] = None

    def set_defaults(self) -> None:
        self.storage_mode = self.storage_mode or "ThinProvisioned"
        self.fs_type = self.fs_type or "xfs"


class ScaleIOVolumeSource(_ScaleIO[LocalObjectReference]):
    """A ScaleIO volume (removed from the kubelet, still in the API)."""


class StorageOSVolumeSource(Struct):
    """A StorageOS volume (removed from the kubelet, still in the API)."""

    volume_name: Annotated[
        str | None, meta(required=True, format=DNS1123_LABEL, proto=1, omitempty=True)
    ] = None
    volume_namespace: Annotated[str | None, meta(format=DNS1123_LABEL, proto=2, omitempty=True)] = (
        None
    )
    fs_type: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    read_only: Annotated[bool | None, meta(proto=4, omitempty=True)] = None
    secret_ref: Annotated[LocalObjectReference | None, meta(proto=5)] = None


def validate_csi_driver_name(driver: str | None, path: Path, errors: ErrorList) -> None:
    """A CSI driver name: required, at most 63 characters, a DNS subdomain once lowercased."""
    if not driver:
        errors.required(path)
        return
    if len(driver) > 63:
        errors.too_long(path, 63)
    errors.extend_checked(path, driver, names.is_dns1123_subdomain(driver.lower()))


class CSIVolumeSource(Struct):
    """An ephemeral volume provided by a CSI driver, inline in the pod."""

    driver: Annotated[str | None, meta(proto=1)] = None
    read_only: Annotated[bool | None, meta(proto=2)] = None
    fs_type: Annotated[str | None, meta(proto=3)] = None
    volume_attributes: Annotated[dict[str, str] | None, meta(proto=4)] = None
    node_publish_secret_ref: Annotated[LocalObjectReference | None, meta(proto=5)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_csi_driver_name(self.driver, path.child("driver"), errors)
        secret = self.node_publish_secret_ref
        if secret is not None and not secret.name:
            errors.required(path.child("nodePublishSecretRef").child("name"))
        elif secret is not None and secret.name:
            errors.extend_checked(
                path.child("name"), secret.name, names.is_dns1123_subdomain(secret.name)
            )


class EphemeralVolumeSource(Struct):
    """A volume provisioned for the pod from a claim template, and deleted with it."""

    volume_claim_template: Annotated[
        PersistentVolumeClaimTemplate | None, meta(required=True, proto=1)
    ] = None


class ImageVolumeSource(Struct):
    """The content of an OCI image or artifact, read-only."""

    reference: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    pull_policy: Annotated[str | None, meta(enum=PULL_POLICIES, proto=2, omitempty=True)] = None

    def set_defaults(self) -> None:
        if not self.pull_policy:
            self.pull_policy = image_pull_policy(self.reference)


class VolumeSource(Struct, kw_only=True):
    """Exactly one source of a pod volume (upstream inlines it into ``Volume`` after the name;
    keyword-only, so that it follows on the wire: see kube.api.struct)."""

    empty_dir: Annotated[EmptyDirVolumeSource | None, meta(proto=2)] = None
    host_path: Annotated[HostPathVolumeSource | None, meta(proto=1)] = None
    git_repo: Annotated[GitRepoVolumeSource | None, meta(proto=5)] = None
    gce_persistent_disk: Annotated[GCEPersistentDiskVolumeSource | None, meta(proto=3)] = None
    aws_elastic_block_store: Annotated[AWSElasticBlockStoreVolumeSource | None, meta(proto=4)] = (
        None
    )
    secret: Annotated[SecretVolumeSource | None, meta(proto=6)] = None
    nfs: Annotated[NFSVolumeSource | None, meta(proto=7)] = None
    iscsi: Annotated[ISCSIVolumeSource | None, meta(proto=8)] = None
    glusterfs: Annotated[GlusterfsVolumeSource | None, meta(proto=9)] = None
    flocker: Annotated[FlockerVolumeSource | None, meta(proto=15)] = None
    persistent_volume_claim: Annotated[PersistentVolumeClaimVolumeSource | None, meta(proto=10)] = (
        None
    )
    rbd: Annotated[RBDVolumeSource | None, meta(proto=11)] = None
    cinder: Annotated[CinderVolumeSource | None, meta(proto=13)] = None
    cephfs: Annotated[CephFSVolumeSource | None, meta(proto=14)] = None
    quobyte: Annotated[QuobyteVolumeSource | None, meta(proto=21)] = None
    downward_api: Annotated[DownwardAPIVolumeSource | None, meta(proto=16)] = msgspec.field(
        default=None, name="downwardAPI"
    )
    fc: Annotated[FCVolumeSource | None, meta(proto=17)] = None
    flex_volume: Annotated[FlexVolumeSource | None, meta(proto=12)] = None
    config_map: Annotated[ConfigMapVolumeSource | None, meta(proto=19)] = None
    azure_file: Annotated[AzureFileVolumeSource | None, meta(proto=18)] = None
    vsphere_volume: Annotated[VsphereVirtualDiskVolumeSource | None, meta(proto=20)] = None
    photon_persistent_disk: Annotated[PhotonPersistentDiskVolumeSource | None, meta(proto=23)] = (
        None
    )
    portworx_volume: Annotated[PortworxVolumeSource | None, meta(proto=24)] = None
    azure_disk: Annotated[AzureDiskVolumeSource | None, meta(proto=22)] = None
    storageos: Annotated[StorageOSVolumeSource | None, meta(proto=27)] = None
    projected: Annotated[ProjectedVolumeSource | None, meta(proto=26)] = None
    scale_io: Annotated[ScaleIOVolumeSource | None, meta(proto=25)] = msgspec.field(
        default=None, name="scaleIO"
    )
    csi: Annotated[CSIVolumeSource | None, meta(proto=28)] = None
    ephemeral: Annotated[EphemeralVolumeSource | None, meta(proto=29)] = None
    image: Annotated[ImageVolumeSource | None, meta(proto=30)] = None


_VOLUME_SOURCES = struct_fields(VolumeSource)


class Volume(VolumeSource):
    """A named volume of a pod, which its containers mount."""

    PROTO_EMBEDDED = (Embedded(2, "VolumeSource", VolumeSource.__struct_fields__),)

    name: Annotated[str | None, meta(required=True, format=DNS1123_LABEL, proto=1)] = None

    def set_defaults(self) -> None:
        if all(getattr(self, attr) is None for attr, _ in _VOLUME_SOURCES):
            self.empty_dir = EmptyDirVolumeSource()

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_one_of(self, _VOLUME_SOURCES, "volume type", path, errors)
        iscsi = self.iscsi
        if (
            iscsi is not None
            and iscsi.initiator_name is not None
            and (len(f"{self.name or ''}:{iscsi.target_portal or ''}") > 64)
        ):
            errors.invalid(
                path.child("name"),
                self.name or "",
                "Total length of <volume name>:<iscsi.targetPortal> must be under 64 "
                "characters if iscsi.initiatorName is specified.",
            )

    def is_claim(self) -> bool:
        """Whether a PersistentVolumeClaim backs the volume (so it may be a block device)."""
        return self.persistent_volume_claim is not None or self.ephemeral is not None


class VolumeMount(Struct):
    """Where a container mounts a volume (or a sub-path of it)."""

    name: Annotated[str | None, meta(required=True, proto=1)] = None
    read_only: Annotated[bool | None, meta(proto=2, omitempty=True)] = None
    recursive_read_only: Annotated[
        str | None, meta(enum=("Disabled", "IfPossible", "Enabled"), proto=7)
    ] = None
    mount_path: Annotated[str | None, meta(required=True, proto=3)] = None
    sub_path: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    mount_propagation: Annotated[
        str | None, meta(enum=("None", "HostToContainer", "Bidirectional"), proto=5)
    ] = None
    sub_path_expr: Annotated[str | None, meta(proto=6, omitempty=True)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.sub_path and self.sub_path_expr:
            detail = "subPathExpr and subPath are mutually exclusive"
            errors.invalid(path.child("subPathExpr"), self.sub_path_expr, detail)
        validate_relative_path(self.sub_path, path.child("subPath"), errors)
        validate_relative_path(self.sub_path_expr, path.child("subPathExpr"), errors)
        if self.recursive_read_only in ("Enabled", "IfPossible"):
            rro_path = path.child("recursiveReadOnly")
            if not self.read_only:
                errors.forbidden(rro_path, "may only be specified when readOnly is true")
            if self.mount_propagation not in (None, "None"):
                detail = "may only be specified when mountPropagation is None or not specified"
                errors.forbidden(rro_path, detail)


class VolumeDevice(Struct):
    """Where a container sees a raw block volume."""

    name: Annotated[str | None, meta(required=True, proto=1)] = None
    device_path: Annotated[str | None, meta(required=True, proto=2)] = None


# PersistentVolumeClaim.


class VolumeResourceRequirements(Struct):
    """The storage a claim asks for."""

    limits: Annotated[dict[str, QuantityValue] | None, meta(proto=1)] = None
    requests: Annotated[dict[str, QuantityValue] | None, meta(proto=2)] = None


class PersistentVolumeClaimSpec(Struct):
    """What a claim asks for: access modes, size, class, and perhaps a data source."""

    access_modes: Annotated[list[AccessMode] | None, atomic(proto=1)] = None
    selector: Annotated[LabelSelector | None, meta(proto=4)] = None
    resources: Annotated[VolumeResourceRequirements | None, meta(proto=2)] = None
    volume_name: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    storage_class_name: Annotated[str | None, meta(format=DNS1123_SUBDOMAIN, proto=5)] = None
    volume_mode: Annotated[str | None, meta(enum=VOLUME_MODES, proto=6)] = None
    data_source: Annotated[TypedLocalObjectReference | None, meta(proto=7)] = None
    data_source_ref: Annotated[TypedObjectReference | None, meta(proto=8)] = None
    volume_attributes_class_name: Annotated[str | None, meta(format=DNS1123_SUBDOMAIN, proto=9)] = (
        None
    )

    def set_defaults(self) -> None:
        if self.volume_mode is None:
            self.volume_mode = "Filesystem"

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.access_modes:
            errors.required(path.child("accessModes"), "at least 1 access mode is required")
        _validate_access_modes(self.access_modes, path.child("accessModes"), errors)
        storage_path = path.child("resources").key("storage")
        requests = self.requests()
        if "storage" not in requests:
            errors.required(storage_path)
        else:
            _validate_positive_quantity(requests["storage"], storage_path, errors)
        for ref, name in (
            (self.data_source, "dataSource"),
            (self.data_source_ref, "dataSourceRef"),
        ):
            if ref is None:
                continue
            if ref.api_group:
                group_path = path.child(name).child("apiGroup")
                errors.extend_checked(
                    group_path, ref.api_group, names.is_dns1123_subdomain(ref.api_group)
                )
            elif ref.kind != "PersistentVolumeClaim":
                detail = "must be 'PersistentVolumeClaim' when referencing the default apiGroup"
                errors.invalid(path.child(name), ref.kind or "", detail)
        source, ref = self.data_source, self.data_source_ref
        if source is not None and ref is not None and ref.namespace:
            detail = "may not be specified when dataSourceRef.namespace is specified"
            errors.invalid(path, str(path.child("dataSource")), detail)
        elif (
            source is not None
            and ref is not None
            and (
                (source.api_group, source.kind, source.name) != (ref.api_group, ref.kind, ref.name)
            )
        ):
            errors.invalid(path, str(path.child("dataSource")), "must match dataSourceRef")

    def requests(self) -> dict[str, Any]:
        """The resources requested (empty when none are)."""
        return (self.resources.requests if self.resources else None) or {}


class PersistentVolumeClaimTemplate(Struct):
    """The claim an ephemeral volume is provisioned from."""

    metadata: Annotated[ObjectMeta | None, meta(proto=1)] = None
    spec: Annotated[PersistentVolumeClaimSpec | None, meta(required=True, proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        metadata_path = path.child("metadata")
        validate_template_metadata(self.metadata, metadata_path, errors)
        for attr, name in struct_fields(ObjectMeta):
            if attr not in ("labels", "annotations") and getattr(self.metadata, attr, None):
                errors.forbidden(metadata_path.child(name), "cannot be set")


class PersistentVolumeClaimCondition(Struct):
    """An observation about a claim (``Resizing``, ``FileSystemResizePending``, ...)."""

    type: Annotated[str | None, meta(required=True, proto=1)] = None
    status: Annotated[str | None, meta(required=True, proto=2)] = None
    last_probe_time: Annotated[Time | None, meta(proto=3, omitempty=True)] = None
    last_transition_time: Annotated[Time | None, meta(proto=4, omitempty=True)] = None
    reason: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=6, omitempty=True)] = None


class ModifyVolumeStatus(Struct):
    """How a change of the claim's VolumeAttributesClass is going."""

    target_volume_attributes_class_name: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    status: Annotated[str | None, meta(required=True, proto=2)] = None


class PersistentVolumeClaimStatus(Struct):
    """Whether the claim is bound, and what it got."""

    phase: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    access_modes: Annotated[list[str] | None, atomic(proto=2)] = None
    capacity: Annotated[dict[str, QuantityValue] | None, meta(proto=3)] = None
    conditions: Annotated[
        list[PersistentVolumeClaimCondition] | None, meta(merge_key="type", proto=4)
    ] = None
    allocated_resources: Annotated[dict[str, QuantityValue] | None, meta(proto=5)] = None
    allocated_resource_statuses: Annotated[
        dict[str, str] | None, meta(map_type="granular", proto=7)
    ] = None
    current_volume_attributes_class_name: Annotated[str | None, meta(proto=8)] = None
    modify_volume_status: Annotated[ModifyVolumeStatus | None, meta(proto=9)] = None


def _storage_class(metadata: ObjectMeta, field: str | None) -> str:
    """The class a volume or claim belongs to: the beta annotation wins over the field."""
    annotations = metadata.annotations or {}
    return annotations.get(STORAGE_CLASS_ANNOTATION, field or "")


def _storage_text(resources: dict[str, Any] | None) -> str:
    parsed = parse_quantity((resources or {}).get("storage"))
    return "0" if parsed is None else str(parsed)


def _unset_or(value: str | None) -> str:
    return "<unset>" if value is None else value


def _phase(obj: PersistentVolume | PersistentVolumeClaim) -> str:
    if obj.metadata.deletion_timestamp is not None:
        return "Terminating"
    return obj.status.phase or "" if obj.status else ""


def access_modes_text(modes: list[str] | None) -> str:
    """Access modes the way kubectl abbreviates them: ``RWO,ROX,RWX,RWOP``."""
    present = set(modes or ())
    short = ("RWO", "ROX", "RWX", "RWOP")
    return ",".join(s for mode, s in zip(ACCESS_MODES, short, strict=True) if mode in present)


def _claim_spec(o: PersistentVolumeClaim) -> PersistentVolumeClaimSpec:
    return o.spec or PersistentVolumeClaimSpec()


def _bound_status(o: PersistentVolumeClaim) -> PersistentVolumeClaimStatus | None:
    """The status of a claim bound to a volume (capacity and modes mean something then)."""
    return (o.status or PersistentVolumeClaimStatus()) if _claim_spec(o).volume_name else None


_CLAIM_COLUMNS = (
    NAME_COLUMN,
    Column("Status", lambda o, now: _phase(o)),
    Column("Volume", lambda o, now: _claim_spec(o).volume_name or ""),
    Column(
        "Capacity",
        lambda o, now: _storage_text(s.capacity) if (s := _bound_status(o)) else "",
    ),
    Column(
        "Access Modes",
        lambda o, now: access_modes_text(s.access_modes) if (s := _bound_status(o)) else "",
    ),
    Column(
        "StorageClass", lambda o, now: _storage_class(o.metadata, _claim_spec(o).storage_class_name)
    ),
    Column(
        "VolumeAttributesClass",
        lambda o, now: _unset_or(_claim_spec(o).volume_attributes_class_name),
    ),
    AGE_COLUMN,
    Column("VolumeMode", lambda o, now: _unset_or(_claim_spec(o).volume_mode), priority=1),
)


@kind(
    group="",
    version="v1",
    plural="persistentvolumeclaims",
    short_names=("pvc",),
    subresources=("status",),
    columns=_CLAIM_COLUMNS,
)
class PersistentVolumeClaim(Resource):
    """A request for storage, bound to a PersistentVolume that satisfies it."""

    spec: Annotated[
        PersistentVolumeClaimSpec | None,
        meta(doc="What the claim asks for: access modes, size, class, data source.", proto=2),
    ] = None
    status: Annotated[
        PersistentVolumeClaimStatus | None,
        meta(doc="Whether the claim is bound, and the capacity and modes it got.", proto=3),
    ] = None

    def set_defaults(self) -> None:
        if self.status is None:
            self.status = PersistentVolumeClaimStatus()
        if not self.status.phase:
            self.status.phase = "Pending"

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        spec_path = ROOT.child("spec")
        new_spec, old_spec = _claim_spec(self), _claim_spec(old)
        # What may change: volumeName once, the class from unset (when the beta annotation
        # agrees), and for a bound claim its storage request and attributes class.
        munged = msgspec.structs.replace(new_spec)
        if not old_spec.volume_name:
            munged.volume_name = old_spec.volume_name
        old_class = (old.metadata.annotations or {}).get(STORAGE_CLASS_ANNOTATION)
        if old_spec.storage_class_name is None and old_class in (None, new_spec.storage_class_name):
            munged.storage_class_name = None
        if self.status is not None and self.status.phase == "Bound":
            munged.volume_attributes_class_name = old_spec.volume_attributes_class_name
            munged.resources = _with_storage_of(new_spec.resources, old_spec)
        old_json, new_json = msgspec.to_builtins(old_spec), msgspec.to_builtins(munged)
        if new_json != old_json:
            errors.forbidden(
                spec_path,
                "spec is immutable after creation except resources.requests and "
                "volumeAttributesClassName for bound claims\n"
                + describe_changes(old_json, new_json),
            )
        new_size = parse_quantity(new_spec.requests().get("storage"))
        old_size = parse_quantity(old_spec.requests().get("storage"))
        if new_size is not None and old_size is not None and new_size < old_size:
            capacity = parse_quantity(((old.status and old.status.capacity) or {}).get("storage"))
            if capacity is None or new_size <= capacity:
                errors.forbidden(
                    spec_path.child("resources").child("requests").child("storage"),
                    "field can not be less than status.capacity",
                )
        if new_spec.volume_mode != old_spec.volume_mode:
            errors.immutable(ROOT.child("volumeMode"), new_spec.volume_mode)
        if old_spec.volume_attributes_class_name is not None:
            class_path = spec_path.child("volumeAttributesClassName")
            if new_spec.volume_attributes_class_name is None:
                errors.forbidden(class_path, "update from non-nil value to nil is forbidden")
            elif not new_spec.volume_attributes_class_name:
                detail = "update from non-nil value to an empty string is forbidden"
                errors.forbidden(class_path, detail)


def _with_storage_of(
    resources: VolumeResourceRequirements | None, old: PersistentVolumeClaimSpec
) -> VolumeResourceRequirements | None:
    """``resources`` with the storage request of ``old``: what a resize leaves unchanged."""
    if resources is None or resources.requests is None:
        return resources
    requests = dict(resources.requests)
    requests.pop("storage", None)
    if "storage" in old.requests():
        requests["storage"] = old.requests()["storage"]
    return msgspec.structs.replace(resources, requests=requests)


# PersistentVolume: the persistent forms of the sources, then the volume itself.


class GlusterfsPersistentVolumeSource(Struct):
    """A GlusterFS volume whose endpoints may live in another namespace."""

    endpoints: Annotated[str | None, meta(required=True, proto=1)] = None
    path: Annotated[str | None, meta(required=True, proto=2)] = None
    read_only: Annotated[bool | None, meta(proto=3, omitempty=True)] = None
    endpoints_namespace: Annotated[str | None, meta(proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        namespace = self.endpoints_namespace
        if namespace is not None:
            problems = (
                names.is_dns1123_label(namespace)
                if namespace
                else ["if the endpointnamespace is set, it must be a valid namespace name"]
            )
            errors.extend_checked(path.child("endpointsNamespace"), namespace, problems)


class RBDPersistentVolumeSource(_RBD[SecretReference]):
    """A Ceph RBD image whose Secret may live in another namespace."""


class ISCSIPersistentVolumeSource(_ISCSI[SecretReference]):
    """An iSCSI disk whose CHAP Secret may live in another namespace."""


class CinderPersistentVolumeSource(_Cinder[SecretReference]):
    """A Cinder volume whose Secret may live in another namespace."""


class CephFSPersistentVolumeSource(_CephFS[SecretReference]):
    """A CephFS mount whose Secret may live in another namespace."""


class FlexPersistentVolumeSource(_Flex[SecretReference]):
    """A FlexVolume whose Secret may live in another namespace."""


class AzureFilePersistentVolumeSource(Struct):
    """An Azure File share whose Secret may live in another namespace."""

    secret_name: Annotated[str | None, meta(required=True, proto=1)] = None
    share_name: Annotated[str | None, meta(required=True, proto=2)] = None
    read_only: Annotated[bool | None, meta(proto=3, omitempty=True)] = None
    secret_namespace: Annotated[str | None, meta(proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.secret_namespace == "":
            errors.required(path.child("secretNamespace"))


class ScaleIOPersistentVolumeSource(_ScaleIO[SecretReference]):
    """A ScaleIO volume whose Secret may live in another namespace."""


class LocalVolumeSource(Struct):
    """A disk, partition or directory of one node; needs node affinity."""

    path: Annotated[str | None, meta(required=True, proto=1)] = None
    fs_type: Annotated[str | None, meta(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.path:
            validate_no_backsteps(self.path, path.child("path"), errors)


class StorageOSPersistentVolumeSource(Struct):
    """A StorageOS volume whose Secret may live in another namespace."""

    volume_name: Annotated[
        str | None, meta(required=True, format=DNS1123_LABEL, proto=1, omitempty=True)
    ] = None
    volume_namespace: Annotated[str | None, meta(format=DNS1123_LABEL, proto=2, omitempty=True)] = (
        None
    )
    fs_type: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    read_only: Annotated[bool | None, meta(proto=4, omitempty=True)] = None
    secret_ref: Annotated[ObjectReference | None, meta(proto=5)] = None


class CSIPersistentVolumeSource(Struct):
    """A volume managed by a CSI driver, with the Secrets of each driver call."""

    driver: Annotated[str | None, meta(proto=1)] = None
    volume_handle: Annotated[str | None, meta(required=True, proto=2)] = None
    read_only: Annotated[bool | None, meta(proto=3, omitempty=True)] = None
    fs_type: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    volume_attributes: Annotated[dict[str, str] | None, meta(proto=5)] = None
    controller_publish_secret_ref: Annotated[SecretReference | None, meta(proto=6)] = None
    node_stage_secret_ref: Annotated[SecretReference | None, meta(proto=7)] = None
    node_publish_secret_ref: Annotated[SecretReference | None, meta(proto=8)] = None
    controller_expand_secret_ref: Annotated[SecretReference | None, meta(proto=9)] = None
    node_expand_secret_ref: Annotated[SecretReference | None, meta(proto=10)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_csi_driver_name(self.driver, path.child("driver"), errors)
        for attr, name in struct_fields(CSIPersistentVolumeSource):
            ref = getattr(self, attr)
            if isinstance(ref, SecretReference):
                _validate_pv_secret(ref, path.child(name), errors)


def _validate_pv_secret(ref: SecretReference, path: Path, errors: ErrorList) -> None:
    """A Secret a CSI driver is handed: both its name and its namespace are needed."""
    for value, name, check in (
        (ref.name, "name", names.is_dns1123_subdomain),
        (ref.namespace, "namespace", names.is_dns1123_label),
    ):
        if not value:
            errors.required(path.child(name))
        else:
            errors.extend_checked(path.child(name), value, check(value))


class PersistentVolumeSource(Struct, kw_only=True):
    """Exactly one source of a PersistentVolume (upstream inlines it into the spec after the
    capacity; keyword-only, so that it follows on the wire: see kube.api.struct)."""

    host_path: Annotated[HostPathVolumeSource | None, meta(proto=3)] = None
    gce_persistent_disk: Annotated[GCEPersistentDiskVolumeSource | None, meta(proto=1)] = None
    aws_elastic_block_store: Annotated[AWSElasticBlockStoreVolumeSource | None, meta(proto=2)] = (
        None
    )
    glusterfs: Annotated[GlusterfsPersistentVolumeSource | None, meta(proto=4)] = None
    flocker: Annotated[FlockerVolumeSource | None, meta(proto=11)] = None
    nfs: Annotated[NFSVolumeSource | None, meta(proto=5)] = None
    rbd: Annotated[RBDPersistentVolumeSource | None, meta(proto=6)] = None
    quobyte: Annotated[QuobyteVolumeSource | None, meta(proto=15)] = None
    cephfs: Annotated[CephFSPersistentVolumeSource | None, meta(proto=9)] = None
    iscsi: Annotated[ISCSIPersistentVolumeSource | None, meta(proto=7)] = None
    cinder: Annotated[CinderPersistentVolumeSource | None, meta(proto=8)] = None
    fc: Annotated[FCVolumeSource | None, meta(proto=10)] = None
    flex_volume: Annotated[FlexPersistentVolumeSource | None, meta(proto=12)] = None
    azure_file: Annotated[AzureFilePersistentVolumeSource | None, meta(proto=13)] = None
    vsphere_volume: Annotated[VsphereVirtualDiskVolumeSource | None, meta(proto=14)] = None
    photon_persistent_disk: Annotated[PhotonPersistentDiskVolumeSource | None, meta(proto=17)] = (
        None
    )
    portworx_volume: Annotated[PortworxVolumeSource | None, meta(proto=18)] = None
    azure_disk: Annotated[AzureDiskVolumeSource | None, meta(proto=16)] = None
    scale_io: Annotated[ScaleIOPersistentVolumeSource | None, meta(proto=19)] = msgspec.field(
        default=None, name="scaleIO"
    )
    local: Annotated[LocalVolumeSource | None, meta(proto=20)] = None
    storageos: Annotated[StorageOSPersistentVolumeSource | None, meta(proto=21)] = None
    csi: Annotated[CSIPersistentVolumeSource | None, meta(proto=22)] = None


_PERSISTENT_SOURCES = struct_fields(PersistentVolumeSource)


class VolumeNodeAffinity(Struct):
    """The nodes a volume can be reached from."""

    required: Annotated[NodeSelector | None, meta(proto=1)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.required is None:
            errors.required(path.child("required"), "must specify required node constraints")


class _PersistentVolumeCapacity(PersistentVolumeSource):
    """The field upstream's PersistentVolumeSpec declares before its inlined source."""

    capacity: Annotated[dict[str, QuantityValue] | None, meta(proto=1)] = None


class PersistentVolumeSpec(_PersistentVolumeCapacity, kw_only=True):
    """A piece of storage: its source, size, access modes and who may claim it."""

    PROTO_EMBEDDED = (
        Embedded(2, "PersistentVolumeSource", PersistentVolumeSource.__struct_fields__),
    )

    access_modes: Annotated[list[AccessMode] | None, atomic(proto=3)] = None
    claim_ref: Annotated[ObjectReference | None, meta(proto=4)] = None
    persistent_volume_reclaim_policy: Annotated[
        str | None, meta(enum=("Delete", "Recycle", "Retain"), proto=5, omitempty=True)
    ] = None
    storage_class_name: Annotated[
        str | None, meta(format=DNS1123_SUBDOMAIN, proto=6, omitempty=True)
    ] = None
    mount_options: Annotated[list[str] | None, atomic(proto=7)] = None
    volume_mode: Annotated[str | None, meta(enum=VOLUME_MODES, proto=8)] = None
    node_affinity: Annotated[VolumeNodeAffinity | None, meta(proto=9)] = None
    volume_attributes_class_name: Annotated[
        str | None, meta(format=DNS1123_SUBDOMAIN, proto=10)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        modes_path = path.child("accessModes")
        if not self.access_modes:
            errors.required(modes_path)
        _validate_access_modes(self.access_modes, modes_path, errors)
        capacity_path = path.child("capacity")
        capacity = self.capacity or {}
        if not capacity:
            errors.required(capacity_path)
        if "storage" not in capacity or len(capacity) > 1:
            errors.not_supported(capacity_path, capacity, ["storage"])
        for resource, value in capacity.items():
            _validate_positive_quantity(value, capacity_path.key(resource), errors)
        validate_one_of(self, _PERSISTENT_SOURCES, "volume type", path, errors)
        if self.local is not None and self.node_affinity is None:
            errors.required(path.child("nodeAffinity"), "Local volume requires node affinity")
        if (
            self.host_path is not None
            and posixpath.normpath(self.host_path.path or ".") == "/"
            and self.persistent_volume_reclaim_policy == "Recycle"
        ):
            errors.forbidden(
                path.child("persistentVolumeReclaimPolicy"),
                "may not be 'recycle' for a hostPath mount of '/'",
            )
        if self.volume_attributes_class_name is not None:
            class_path = path.child("volumeAttributesClassName")
            if not self.volume_attributes_class_name:
                errors.required(class_path, "an empty string is disallowed")
            if self.csi is None:
                detail = "has to be specified when using volumeAttributesClassName"
                errors.required(path.child("csi"), detail)

    def source_json(self) -> dict[str, Any]:
        """The volume source alone, as JSON."""
        source = {name: getattr(self, attr) for attr, name in _PERSISTENT_SOURCES}
        return {name: msgspec.to_builtins(v) for name, v in source.items() if v is not None}


class PersistentVolumeStatus(Struct):
    """Where the volume is in its life: Pending, Available, Bound, Released or Failed."""

    phase: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    reason: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    last_phase_transition_time: Annotated[Time | None, meta(proto=4)] = None


def _volume_spec(o: PersistentVolume) -> PersistentVolumeSpec:
    return o.spec or PersistentVolumeSpec()


def _claim_text(o: PersistentVolume) -> str:
    ref = _volume_spec(o).claim_ref
    return f"{ref.namespace or ''}/{ref.name or ''}" if ref is not None else ""


_VOLUME_COLUMNS = (
    NAME_COLUMN,
    Column("Capacity", lambda o, now: _storage_text(_volume_spec(o).capacity)),
    Column("Access Modes", lambda o, now: access_modes_text(_volume_spec(o).access_modes)),
    Column("Reclaim Policy", lambda o, now: _volume_spec(o).persistent_volume_reclaim_policy or ""),
    Column("Status", lambda o, now: _phase(o)),
    Column("Claim", lambda o, now: _claim_text(o)),
    Column(
        "StorageClass",
        lambda o, now: _storage_class(o.metadata, _volume_spec(o).storage_class_name),
    ),
    Column(
        "VolumeAttributesClass",
        lambda o, now: _unset_or(_volume_spec(o).volume_attributes_class_name),
    ),
    Column("Reason", lambda o, now: o.status.reason or "" if o.status else ""),
    AGE_COLUMN,
    Column("VolumeMode", lambda o, now: _unset_or(_volume_spec(o).volume_mode), priority=1),
)


@kind(
    group="",
    version="v1",
    plural="persistentvolumes",
    namespaced=False,
    short_names=("pv",),
    subresources=("status",),
    columns=_VOLUME_COLUMNS,
)
class PersistentVolume(Resource):
    """A piece of storage in the cluster, provisioned by an administrator or a driver."""

    spec: Annotated[
        PersistentVolumeSpec | None,
        meta(
            doc="The storage itself: its source, capacity, access modes and reclaim policy.",
            proto=2,
        ),
    ] = None
    status: Annotated[
        PersistentVolumeStatus | None,
        meta(doc="The phase of the volume in its lifecycle.", proto=3),
    ] = None

    def set_defaults(self) -> None:
        if self.status is None:
            self.status = PersistentVolumeStatus()
        if not self.status.phase:
            self.status.phase = "Pending"
        if self.spec is not None:
            if not self.spec.persistent_volume_reclaim_policy:
                self.spec.persistent_volume_reclaim_policy = "Retain"
            if self.spec.volume_mode is None:
                self.spec.volume_mode = "Filesystem"

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        new_spec, old_spec = _volume_spec(self), _volume_spec(old)
        new_source, old_source = new_spec.source_json(), old_spec.source_json()
        # A CSI volume may gain the Secret for controller expansion.
        if old_spec.csi is not None and old_spec.csi.controller_expand_secret_ref is None:
            new_source.get("csi", {}).pop("controllerExpandSecretRef", None)
        if new_source != old_source:
            errors.forbidden(
                ROOT.child("spec").child("persistentvolumesource"),
                "spec.persistentvolumesource is immutable after creation\n"
                + describe_changes(old_source, new_source),
            )
        if new_spec.volume_mode != old_spec.volume_mode:
            errors.immutable(ROOT.child("volumeMode"), new_spec.volume_mode)
        if old_spec.node_affinity is not None and new_spec.node_affinity != old_spec.node_affinity:
            new_affinity = msgspec.to_builtins(new_spec.node_affinity)
            errors.immutable(ROOT.child("nodeAffinity"), new_affinity)
        if (
            old_spec.volume_attributes_class_name is not None
            and new_spec.volume_attributes_class_name is None
        ):
            errors.forbidden(
                ROOT.child("spec").child("volumeAttributesClassName"),
                "update from non-nil value to nil is forbidden",
            )


def claim_class(claim: PersistentVolumeClaim) -> str:
    """A claim's StorageClass name (upstream ``GetPersistentVolumeClaimClass``): the beta
    annotation wins over the field; "" means no class."""
    annotated = (claim.metadata.annotations or {}).get(STORAGE_CLASS_ANNOTATION)
    if annotated is not None:
        return annotated
    return (claim.spec.storage_class_name if claim.spec else None) or ""


def volume_class(volume: PersistentVolume) -> str:
    """A volume's StorageClass name (upstream ``GetPersistentVolumeClass``), read as a
    claim's is."""
    annotated = (volume.metadata.annotations or {}).get(STORAGE_CLASS_ANNOTATION)
    if annotated is not None:
        return annotated
    return (volume.spec.storage_class_name if volume.spec else None) or ""
