"""core/v1 Node: a machine pods run on, as its kubelet reports it.

The spec holds what the control plane assigns (pod CIDRs, the cloud provider ID, taints,
whether new pods may be scheduled there); the status is written by the kubelet: capacity and
allocatable resources, conditions (``Ready`` above all), addresses, versions, images.

The singular ``podCIDR`` and the plural ``podCIDRs`` are kept in step, as upstream's conversion
does, so clients of either see the same ranges.

The module also declares upstream's well-known Node labels (hostname, zone and region, instance
type, os and arch, exclusion from external load balancers, the roles) and the labels a kubelet
may set on its own Node (``is_kubelet_label``, which the kubelet and the NodeRestriction
admission plugin share).
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

# Upstream's well-known Node labels (k8s.io/api/core/v1/well_known_labels.go) and the ones a
# kubelet may set on its own Node (k8s.io/kubelet/pkg/apis/well_known_labels.go).
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
LABEL_TOPOLOGY_REGION = "topology.kubernetes.io/region"
LABEL_FAILURE_DOMAIN_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_FAILURE_DOMAIN_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
LABEL_INSTANCE_TYPE = "beta.kubernetes.io/instance-type"
LABEL_INSTANCE_TYPE_STABLE = "node.kubernetes.io/instance-type"
LABEL_OS_STABLE = "kubernetes.io/os"
LABEL_ARCH_STABLE = "kubernetes.io/arch"
LABEL_OS_BETA = "beta.kubernetes.io/os"
LABEL_ARCH_BETA = "beta.kubernetes.io/arch"
LABEL_NODE_EXCLUDE_BALANCERS = "node.kubernetes.io/exclude-from-external-load-balancers"
LABEL_NODE_ROLE_CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
"""kubeadm's control-plane role, used both as a label and as a taint key."""
KUBELET_LABELS = frozenset(
    {
        LABEL_HOSTNAME,
        LABEL_TOPOLOGY_ZONE,
        LABEL_TOPOLOGY_REGION,
        LABEL_FAILURE_DOMAIN_BETA_ZONE,
        LABEL_FAILURE_DOMAIN_BETA_REGION,
        LABEL_INSTANCE_TYPE,
        LABEL_INSTANCE_TYPE_STABLE,
        LABEL_OS_STABLE,
        LABEL_ARCH_STABLE,
        LABEL_OS_BETA,
        LABEL_ARCH_BETA,
    }
)
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def in_label_namespace(key: str, domain: str) -> bool:
    """Whether the namespace of label ``key`` (the part before ``/``) is ``domain`` or one of
    its subdomains."""
    namespace = key.partition("/")[0] if "/" in key else ""
    return namespace == domain or namespace.endswith("." + domain)


def is_reserved_label(key: str) -> bool:
    """Whether ``key`` is in the namespaces Kubernetes reserves (``kubernetes.io``,
    ``k8s.io`` and their subdomains)."""
    return in_label_namespace(key, "kubernetes.io") or in_label_namespace(key, "k8s.io")


def is_kubelet_label(key: str) -> bool:
    """Whether ``key`` is a label the kubelet sets on its own Node: one of ``KUBELET_LABELS``,
    or in one of ``KUBELET_LABEL_NAMESPACES`` (upstream ``IsKubeletLabel``)."""
    return key in KUBELET_LABELS or any(
        in_label_namespace(key, allowed) for allowed in KUBELET_LABEL_NAMESPACES
    )


class Taint(Struct):
    """Repels pods that do not tolerate it: from scheduling, or from running at all."""

    key: Annotated[str | None, meta(required=True, format=QUALIFIED_NAME, proto=1)] = None
    value: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    effect: Annotated[str | None, meta(required=True, enum=TAINT_EFFECTS, proto=3)] = None
    time_added: Annotated[Time | None, meta(proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        problems = names.is_valid_label_value(self.value or "")
        if problems:
            errors.invalid(path.child("value"), self.value or "", ";".join(problems))


class ConfigMapNodeConfigSource(Struct):
    """A ConfigMap holding kubelet configuration (deprecated dynamic kubelet config)."""

    namespace: Annotated[str | None, meta(proto=1)] = None
    name: Annotated[str | None, meta(proto=2)] = None
    uid: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    resource_version: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    kubelet_config_key: Annotated[str | None, meta(proto=5)] = None

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

    config_map: Annotated[ConfigMapNodeConfigSource | None, meta(proto=2)] = None

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

    pod_cidr: Annotated[str | None, meta(proto=1, omitempty=True)] = msgspec.field(
        default=None, name="podCIDR"
    )
    pod_cidrs: Annotated[list[Annotated[str, meta(format=CIDR)]] | None, merge_set(proto=7)] = (
        msgspec.field(default=None, name="podCIDRs")
    )
    provider_id: Annotated[str | None, meta(proto=3, omitempty=True)] = msgspec.field(
        default=None, name="providerID"
    )
    unschedulable: Annotated[bool | None, meta(proto=4, omitempty=True)] = None
    taints: Annotated[list[Taint] | None, atomic(proto=5)] = None
    config_source: Annotated[NodeConfigSource | None, meta(proto=6)] = None
    external_id: Annotated[str | None, meta(proto=2, omitempty=True)] = msgspec.field(
        default=None, name="externalID"
    )

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

    type: Annotated[str | None, meta(proto=1)] = None
    status: Annotated[str | None, meta(proto=2)] = None
    last_heartbeat_time: Annotated[Time | None, meta(proto=3, omitempty=True)] = None
    last_transition_time: Annotated[Time | None, meta(proto=4, omitempty=True)] = None
    reason: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=6, omitempty=True)] = None


class NodeAddress(Struct):
    """An address of a node and its kind (InternalIP, ExternalIP, Hostname, ...)."""

    type: Annotated[str | None, meta(proto=1)] = None
    address: Annotated[str | None, meta(proto=2)] = None


class DaemonEndpoint(Struct):
    """The port a node daemon listens on."""

    # Upstream's JSON name is capitalised (a tag once written without quotes).
    port: Annotated[int | None, meta(proto=1)] = msgspec.field(default=None, name="Port")


class NodeDaemonEndpoints(Struct):
    """Where the daemons of a node listen."""

    kubelet_endpoint: Annotated[DaemonEndpoint | None, meta(proto=1)] = None


class NodeSwapStatus(Struct):
    """The swap memory of a node."""

    capacity: Annotated[int | None, meta(proto=1, int64=True)] = None


class NodeSystemInfo(Struct):
    """Identity and versions of a node's machine, OS and software."""

    machine_id: Annotated[str | None, meta(proto=1)] = msgspec.field(default=None, name="machineID")
    system_uuid: Annotated[str | None, meta(proto=2)] = msgspec.field(
        default=None, name="systemUUID"
    )
    boot_id: Annotated[str | None, meta(proto=3)] = msgspec.field(default=None, name="bootID")
    kernel_version: Annotated[str | None, meta(proto=4)] = None
    os_image: Annotated[str | None, meta(proto=5)] = None
    container_runtime_version: Annotated[str | None, meta(proto=6)] = None
    kubelet_version: Annotated[str | None, meta(proto=7)] = None
    kube_proxy_version: Annotated[str | None, meta(proto=8)] = None
    operating_system: Annotated[str | None, meta(proto=9)] = None
    architecture: Annotated[str | None, meta(proto=10)] = None
    swap: Annotated[NodeSwapStatus | None, meta(proto=11)] = None


class ContainerImage(Struct):
    """An image present on a node."""

    names: Annotated[list[str] | None, atomic(proto=1)] = None
    size_bytes: Annotated[int | None, meta(proto=2, int64=True, omitempty=True)] = None


class AttachedVolume(Struct):
    """A volume attached to a node."""

    name: Annotated[str | None, meta(proto=1)] = None
    device_path: Annotated[str | None, meta(proto=2)] = None


class NodeConfigStatus(Struct):
    """The kubelet configuration a node was assigned, uses, and last knew to be good."""

    assigned: Annotated[NodeConfigSource | None, meta(proto=1)] = None
    active: Annotated[NodeConfigSource | None, meta(proto=2)] = None
    last_known_good: Annotated[NodeConfigSource | None, meta(proto=3)] = None
    error: Annotated[str | None, meta(proto=4, omitempty=True)] = None


class NodeRuntimeHandlerFeatures(Struct):
    """Features a runtime handler supports."""

    recursive_read_only_mounts: Annotated[bool | None, meta(proto=1)] = None
    user_namespaces: Annotated[bool | None, meta(proto=2)] = None


class NodeRuntimeHandler(Struct):
    """A runtime handler (RuntimeClass handler) of the node's container runtime."""

    name: Annotated[str | None, meta(proto=1)] = None
    features: Annotated[NodeRuntimeHandlerFeatures | None, meta(proto=2)] = None


class NodeFeatures(Struct):
    """Features the node's kubelet and runtime support."""

    supplemental_groups_policy: Annotated[bool | None, meta(proto=1)] = None


class NodeStatus(Struct):
    """What the kubelet reports about its node."""

    capacity: Annotated[ResourceList | None, meta(proto=1)] = None
    allocatable: Annotated[ResourceList | None, meta(proto=2)] = None
    phase: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    conditions: Annotated[list[NodeCondition] | None, meta(merge_key="type", proto=4)] = None
    addresses: Annotated[list[NodeAddress] | None, meta(merge_key="type", proto=5)] = None
    daemon_endpoints: Annotated[NodeDaemonEndpoints | None, meta(proto=6)] = None
    node_info: Annotated[NodeSystemInfo | None, meta(proto=7)] = None
    images: Annotated[list[ContainerImage] | None, atomic(proto=8)] = None
    volumes_in_use: Annotated[list[str] | None, atomic(proto=9)] = None
    volumes_attached: Annotated[list[AttachedVolume] | None, atomic(proto=10)] = None
    config: Annotated[NodeConfigStatus | None, meta(proto=11)] = None
    runtime_handlers: Annotated[list[NodeRuntimeHandler] | None, atomic(proto=12)] = None
    features: Annotated[NodeFeatures | None, meta(proto=13)] = None
    declared_features: Annotated[list[str] | None, atomic(proto=14)] = None

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
        NodeSpec | None, meta(doc="Pod CIDRs, provider ID, taints and schedulability.", proto=2)
    ] = None
    status: Annotated[
        NodeStatus | None,
        meta(doc="Capacity, conditions, addresses and versions reported by the kubelet.", proto=3),
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
