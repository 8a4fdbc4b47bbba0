"""core/v1 Node: a machine pods run on, as its kubelet reports it.

The spec holds what the control plane assigns (pod CIDRs, the cloud provider ID, taints,
whether new pods may be scheduled there); the status is written by the kubelet: capacity and
allocatable resources, conditions (``Ready`` above all), addresses, versions, images.

The singular ``podCIDR`` and the plural ``podCIDRs`` are kept in step, as upstream's conversion
does, so clients of either see the same ranges.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Self

import msgspec

from kube.api import names
from kube.api.errors import ROOT, ErrorList, ErrorType, FieldError, Path
from kube.api.kinds.core_v1.cluster import validate_resource_quantity
from kube.api.kinds.core_v1.pod import TAINT_EFFECTS, ResourceList
from kube.api.meta_v1 import Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import CIDR, QUALIFIED_NAME, Struct, Time, atomic, merge_set, meta

ROLE_LABEL_PREFIX = "node-role.kubernetes.io/"
ROLE_LABEL = "kubernetes.io/role"
POD_CIDR_CHANGED = 'node updates may not change podCIDR except from "" to valid'
PROVIDER_ID_CHANGED = 'node updates may not change providerID except from "" to valid'


class Taint(Struct):
    """Repels pods that do not tolerate it: from scheduling, or from running at all."""

    key: Annotated[str | None, meta(required=True, format=QUALIFIED_NAME)] = None
    value: str | None = None
    effect: Annotated[str | None, meta(required=True, enum=TAINT_EFFECTS)] = None
    time_added: Time | None = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        problems = names.is_valid_label_value(self.value or "")
        if problems:
            errors.invalid(path.child("value"), self.value or "", ";".join(problems))


class ConfigMapNodeConfigSource(Struct):
    """A ConfigMap holding kubelet configuration (deprecated dynamic kubelet config)."""

    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    kubelet_config_key: str | None = None

    def check(self, in_status: bool, path: Path, errors: ErrorList) -> None:
        """Upstream's checks, which differ between spec (no uid or resourceVersion) and
        status (both required); it runs them on node updates only."""
        for value, name in ((self.uid, "uid"), (self.resource_version, "resourceVersion")):
            if in_status and not value:
                errors.required(path.child(name), f"{name} must be set in status")
            elif not in_status and value:
                errors.forbidden(path.child(name), f"{name} must not be set in spec")
        for value, name, check in (
            (self.namespace, "namespace", names.is_dns1123_label),
            (self.name, "name", names.is_dns1123_subdomain),
            (self.kubelet_config_key, "kubeletConfigKey", names.is_config_map_key),
        ):
            if not value:
                errors.required(path.child(name), f"{name} must be set")
            else:
                for problem in check(value):
                    errors.invalid(path.child(name), value, problem)


class NodeConfigSource(Struct):
    """Where a node's kubelet configuration comes from (deprecated)."""

    config_map: ConfigMapNodeConfigSource | None = None

    def check(self, in_status: bool, path: Path, errors: ErrorList) -> None:
        """Exactly one source, checked as upstream does for spec or status."""
        if self.config_map is None:
            errors.invalid(
                path,
                msgspec.to_builtins(self),
                "exactly one reference subfield must be non-nil",
            )
        else:
            self.config_map.check(in_status, path.child("configMap"), errors)


class NodeSpec(Struct):
    """What the control plane assigns to a node."""

    pod_cidr: str | None = msgspec.field(default=None, name="podCIDR")
    pod_cidrs: Annotated[list[Annotated[str, meta(format=CIDR)]] | None, merge_set()] = (
        msgspec.field(default=None, name="podCIDRs")
    )
    provider_id: str | None = msgspec.field(default=None, name="providerID")
    unschedulable: bool | None = None
    taints: Annotated[list[Taint] | None, atomic()] = None
    config_source: NodeConfigSource | None = None
    external_id: str | None = msgspec.field(default=None, name="externalID")

    def set_defaults(self) -> None:
        if self.pod_cidr and not self.pod_cidrs:
            self.pod_cidrs = [self.pod_cidr]
        elif self.pod_cidrs and not self.pod_cidr:
            self.pod_cidr = self.pod_cidrs[0]

    def validate(self, path: Path, errors: ErrorList) -> None:
        seen: set[tuple[str | None, str | None]] = set()
        for i, taint in enumerate(self.taints or ()):
            if (taint.key, taint.effect) in seen:
                errors.append(
                    FieldError(
                        ErrorType.DUPLICATE,
                        str(path.child("taints").index(i)),
                        msgspec.to_builtins(taint),
                        "taints must be unique by key and effect pair",
                    )
                )
            seen.add((taint.key, taint.effect))
        self._validate_pod_cidrs(path.child("podCIDRs"), errors)

    def _validate_pod_cidrs(self, path: Path, errors: ErrorList) -> None:
        cidrs = self.pod_cidrs or []
        if len(cidrs) < 2:
            return
        try:
            versions = [ipaddress.ip_network(c, strict=False).version for c in cidrs]
        except ValueError:
            return  # the format check of each item reports it
        if len(cidrs) > 2 or len(set(versions)) != len(cidrs):
            errors.invalid(path, cidrs, "may specify no more than one CIDR for each IP family")
        for i, cidr in enumerate(cidrs):
            if cidr in cidrs[:i]:
                errors.duplicate(path.index(i), cidr)


class NodeCondition(Struct):
    """One aspect of a node's health (Ready, MemoryPressure, DiskPressure, ...)."""

    type: str | None = None
    status: str | None = None
    last_heartbeat_time: Time | None = None
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class NodeAddress(Struct):
    """An address of a node and its kind (InternalIP, ExternalIP, Hostname, ...)."""

    type: str | None = None
    address: str | None = None


class DaemonEndpoint(Struct):
    """The port a node daemon listens on."""

    # Upstream's JSON name is capitalised (a tag once written without quotes).
    port: int | None = msgspec.field(default=None, name="Port")


class NodeDaemonEndpoints(Struct):
    """Where the daemons of a node listen."""

    kubelet_endpoint: DaemonEndpoint | None = None


class NodeSwapStatus(Struct):
    """The swap memory of a node."""

    capacity: int | None = None


class NodeSystemInfo(Struct):
    """Identity and versions of a node's machine, OS and software."""

    machine_id: str | None = msgspec.field(default=None, name="machineID")
    system_uuid: str | None = msgspec.field(default=None, name="systemUUID")
    boot_id: str | None = msgspec.field(default=None, name="bootID")
    kernel_version: str | None = None
    os_image: str | None = None
    container_runtime_version: str | None = None
    kubelet_version: str | None = None
    kube_proxy_version: str | None = None
    operating_system: str | None = None
    architecture: str | None = None
    swap: NodeSwapStatus | None = None


class ContainerImage(Struct):
    """An image present on a node."""

    names: Annotated[list[str] | None, atomic()] = None
    size_bytes: int | None = None


class AttachedVolume(Struct):
    """A volume attached to a node."""

    name: str | None = None
    device_path: str | None = None


class NodeConfigStatus(Struct):
    """The kubelet configuration a node was assigned, uses, and last knew to be good."""

    assigned: NodeConfigSource | None = None
    active: NodeConfigSource | None = None
    last_known_good: NodeConfigSource | None = None
    error: str | None = None


class NodeRuntimeHandlerFeatures(Struct):
    """Features a runtime handler supports."""

    recursive_read_only_mounts: bool | None = None
    user_namespaces: bool | None = None


class NodeRuntimeHandler(Struct):
    """A runtime handler (RuntimeClass handler) of the node's container runtime."""

    name: str | None = None
    features: NodeRuntimeHandlerFeatures | None = None


class NodeFeatures(Struct):
    """Features the node's kubelet and runtime support."""

    supplemental_groups_policy: bool | None = None


class NodeStatus(Struct):
    """What the kubelet reports about its node."""

    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None
    phase: str | None = None
    conditions: Annotated[list[NodeCondition] | None, meta(merge_key="type")] = None
    addresses: Annotated[list[NodeAddress] | None, meta(merge_key="type")] = None
    daemon_endpoints: NodeDaemonEndpoints | None = None
    node_info: NodeSystemInfo | None = None
    images: Annotated[list[ContainerImage] | None, atomic()] = None
    volumes_in_use: Annotated[list[str] | None, atomic()] = None
    volumes_attached: Annotated[list[AttachedVolume] | None, atomic()] = None
    config: NodeConfigStatus | None = None
    runtime_handlers: Annotated[list[NodeRuntimeHandler] | None, atomic()] = None
    features: NodeFeatures | None = None
    declared_features: Annotated[list[str] | None, atomic()] = None

    def set_defaults(self) -> None:
        if self.allocatable is None and self.capacity is not None:
            self.allocatable = dict(self.capacity)

    def validate(self, path: Path, errors: ErrorList) -> None:
        # Upstream names these ``status.capacity.cpu``, not ``status.capacity[cpu]``.
        for resources, name in ((self.capacity, "capacity"), (self.allocatable, "allocatable")):
            for resource, value in (resources or {}).items():
                validate_resource_quantity(
                    resource, value, path.child(name).child(resource), errors
                )

    def address_of(self, address_type: str) -> str | None:
        """The first address of a type, if the node has one."""
        for address in self.addresses or ():
            if address.type == address_type:
                return address.address
        return None


# Printing.


def _status_cell(node: Node) -> str:
    status = node.status or NodeStatus()
    ready = next((c for c in status.conditions or () if c.type == "Ready"), None)
    cell = ["Unknown" if ready is None else "Ready" if ready.status == "True" else "NotReady"]
    if node.spec is not None and node.spec.unschedulable:
        cell.append("SchedulingDisabled")
    return ",".join(cell)


def _roles(node: Node) -> list[str]:
    """The roles a node's labels give it: ``node-role.kubernetes.io/<role>`` keys and the value
    of ``kubernetes.io/role``, sorted."""
    roles: set[str] = set()
    for key, value in (node.metadata.labels or {}).items():
        if key.startswith(ROLE_LABEL_PREFIX):
            roles.add(key.removeprefix(ROLE_LABEL_PREFIX))
        elif key == ROLE_LABEL and value:
            roles.add(value)
    return sorted(r for r in roles if r)


def _info(node: Node) -> NodeSystemInfo:
    return node.status.node_info if node.status and node.status.node_info else NodeSystemInfo()


def _address_cell(node: Node, address_type: str) -> str:
    return (node.status.address_of(address_type) if node.status else None) or "<none>"


@kind(
    group="",
    version="v1",
    plural="nodes",
    namespaced=False,
    short_names=("no",),
    subresources=("status", "proxy"),
    columns=(
        NAME_COLUMN,
        Column("Status", lambda o, now: _status_cell(o), description="The status of the node"),
        Column(
            "Roles",
            lambda o, now: ",".join(_roles(o)) or "<none>",
            description="The roles of the node",
        ),
        AGE_COLUMN,
        Column("Version", lambda o, now: _info(o).kubelet_version or ""),
        Column("Internal-IP", lambda o, now: _address_cell(o, "InternalIP"), priority=1),
        Column("External-IP", lambda o, now: _address_cell(o, "ExternalIP"), priority=1),
        Column("OS-Image", lambda o, now: _info(o).os_image or "<unknown>", priority=1),
        Column("Kernel-Version", lambda o, now: _info(o).kernel_version or "<unknown>", priority=1),
        Column(
            "Container-Runtime",
            lambda o, now: _info(o).container_runtime_version or "<unknown>",
            priority=1,
        ),
    ),
    field_selectors={
        "spec.unschedulable": lambda o: "true" if o.spec and o.spec.unschedulable else "false",
    },
)
class Node(Resource):
    """A worker machine: what the control plane assigned to it and what its kubelet reports."""

    spec: Annotated[
        NodeSpec | None, meta(doc="Pod CIDRs, provider ID, taints and schedulability.")
    ] = None
    status: Annotated[
        NodeStatus | None,
        meta(doc="Capacity, conditions, addresses and versions reported by the kubelet."),
    ] = None

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        spec, old_spec = self.spec or NodeSpec(), old.spec or NodeSpec()
        status = self.status or NodeStatus()
        seen: list[NodeAddress] = []
        for i, address in enumerate(status.addresses or ()):
            if address in seen:
                errors.duplicate(
                    ROOT.child("status").child("addresses").index(i),
                    msgspec.to_builtins(address),
                )
            seen.append(address)
        spec_path = ROOT.child("spec")
        old_cidrs, cidrs = old_spec.pod_cidrs or [], spec.pod_cidrs or []
        if old_cidrs:
            if len(old_cidrs) != len(cidrs):
                errors.forbidden(spec_path.child("podCIDRs"), POD_CIDR_CHANGED)
            else:
                for old_cidr, cidr in zip(old_cidrs, cidrs, strict=True):
                    if old_cidr != cidr:
                        errors.forbidden(spec_path.child("podCIDRs"), POD_CIDR_CHANGED)
        if old_spec.provider_id and old_spec.provider_id != spec.provider_id:
            errors.forbidden(spec_path.child("providerID"), PROVIDER_ID_CHANGED)
        if spec.config_source is not None:
            spec.config_source.check(False, spec_path.child("configSource"), errors)
        if status.config is not None:
            config_path = ROOT.child("status").child("config")
            for source, name in (
                (status.config.assigned, "assigned"),
                (status.config.active, "active"),
                (status.config.last_known_good, "lastKnownGood"),
            ):
                if source is not None:
                    source.check(True, config_path.child(name), errors)
        if (spec.external_id or "") != (old_spec.external_id or ""):
            errors.forbidden(spec_path.child("externalID"), "may not be updated")
