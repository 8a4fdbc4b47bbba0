"""What plugins read: pods with their scheduling-relevant facts computed once, and nodes with
the sums of what runs on them.

A pod's requests, affinity terms and host ports are derived from its spec when it enters the
scheduler (``PodInfo``), not once per node per plugin: Filter and Score run for every node, so
anything they recompute is multiplied by the cluster size.  ``NodeInfo`` keeps running totals
(requested and non-zero requested resources, used host ports, pods with affinity) that the
cache updates as pods are added and removed, and a ``generation`` that tells the snapshot what
changed since the last cycle.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kube.api.kinds.core_v1.pod import containers_together
from kube.api.labels import Operator, Requirement, Selector, selector_of
from kube.api.quantity import Quantity

if TYPE_CHECKING:
    from kube.api.kinds.core_v1.node import Node
    from kube.api.kinds.core_v1.pod import (
        Container,
        Pod,
        PodAffinityTerm,
        WeightedPodAffinityTerm,
    )

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

DEFAULT_MILLI_CPU_REQUEST = 100
"""What scoring assumes a container without a CPU request uses (upstream: 0.1 core)."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
"""What scoring assumes a container without a memory request uses (upstream: 200 MiB)."""

_generation = itertools.count(1)


def next_generation() -> int:
    """A number larger than every one handed out before (NodeInfo change tracking)."""
    return next(_generation)


@dataclass(slots=True)
class Resources:
    """Amounts of resources: CPU in millicores, the rest in their base units (bytes, count)."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pods: int = 0
    scalar: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_list(cls, resources: Mapping[str, str | int | float] | None) -> Resources:
        result = cls()
        for name, value in (resources or {}).items():
            result.set(name, Quantity.parse(value))
        return result

    def set(self, name: str, quantity: Quantity) -> None:
        if name == CPU:
            self.milli_cpu = quantity.milli_value()
        elif name == MEMORY:
            self.memory = quantity.value()
        elif name == EPHEMERAL_STORAGE:
            self.ephemeral_storage = quantity.value()
        elif name == PODS:
            self.allowed_pods = quantity.value()
        else:
            self.scalar[name] = quantity.value()

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.allowed_pods
        return self.scalar.get(name, 0)

    def names(self) -> list[str]:
        """The resources this holds a non-zero amount of (cpu and memory always)."""
        names = [CPU, MEMORY]
        if self.ephemeral_storage:
            names.append(EPHEMERAL_STORAGE)
        return names + [name for name, value in self.scalar.items() if value]

    def add(self, other: Resources, sign: int = 1) -> None:
        self.milli_cpu += sign * other.milli_cpu
        self.memory += sign * other.memory
        self.ephemeral_storage += sign * other.ephemeral_storage
        self.allowed_pods += sign * other.allowed_pods
        for name, value in other.scalar.items():
            self.scalar[name] = self.scalar.get(name, 0) + sign * value

    def maximum(self, other: Resources) -> None:
        """Raise each amount to at least ``other``'s (init containers run one at a time)."""
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        self.ephemeral_storage = max(self.ephemeral_storage, other.ephemeral_storage)
        for name, value in other.scalar.items():
            self.scalar[name] = max(self.scalar.get(name, 0), value)

    def copy(self) -> Resources:
        return Resources(
            self.milli_cpu,
            self.memory,
            self.ephemeral_storage,
            self.allowed_pods,
            dict(self.scalar),
        )


def _container_requests(container: Container, non_zero: bool) -> Resources:
    requests = container.resources.requests if container.resources else None
    result = Resources.from_list(requests)
    if non_zero:
        if not requests or CPU not in requests:
            result.milli_cpu = DEFAULT_MILLI_CPU_REQUEST
        if not requests or MEMORY not in requests:
            result.memory = DEFAULT_MEMORY_REQUEST
    return result


def pod_requests(pod: Pod, non_zero: bool = False) -> Resources:
    """What the pod asks of a node, as upstream's ``resourcehelper.PodRequests`` computes it.

    The containers together (``containers_together``: sidecars add up, init containers peak),
    with pod overhead on top.  ``non_zero``
    substitutes scoring's defaults for containers that request no CPU or memory.
    """
    spec = pod.spec
    if spec is None:
        return Resources()
    total = containers_together(spec, lambda c: _container_requests(c, non_zero), Resources)
    if spec.overhead:
        total.add(Resources.from_list(spec.overhead))
    return total


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A pod (anti-)affinity term with its selectors parsed and namespaces resolved.

    ``namespaces`` empty and no ``namespace_selector`` means the pod's own namespace (already
    filled in); a ``namespace_selector`` matches namespaces by their labels, which the plugin
    resolves against the namespace cache.
    """

    selector: Selector
    topology_key: str
    namespaces: frozenset[str]
    namespace_selector: Selector | None

    @classmethod
    def of(cls, pod: Pod, term: PodAffinityTerm) -> AffinityTerm:
        namespaces = frozenset(term.namespaces or ())
        namespace_selector = (
            selector_of(term.namespace_selector) if term.namespace_selector is not None else None
        )
        if not namespaces and namespace_selector is None:
            namespaces = frozenset({pod.metadata.namespace or ""})
        selector = selector_of(term.label_selector)
        labels = pod.metadata.labels or {}
        extra = [
            Requirement(key, Operator.IN, (labels[key],))
            for key in term.match_label_keys or ()
            if key in labels
        ] + [
            Requirement(key, Operator.NOT_IN, (labels[key],))
            for key in term.mismatch_label_keys or ()
            if key in labels
        ]
        if extra and not selector.matches_nothing:
            selector = Selector(selector.requirements + tuple(extra))
        return cls(selector, term.topology_key or "", namespaces, namespace_selector)

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str] | None = None) -> bool:
        """Whether ``pod`` is one this term selects (``namespace_labels``: of its namespace)."""
        namespace = pod.metadata.namespace or ""
        in_namespace = namespace in self.namespaces or (
            self.namespace_selector is not None
            and self.namespace_selector.matches(namespace_labels or {})
        )
        return in_namespace and self.selector.matches(pod.metadata.labels or {})


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


def _terms(pod: Pod, terms: Iterable[PodAffinityTerm] | None) -> tuple[AffinityTerm, ...]:
    return tuple(AffinityTerm.of(pod, term) for term in terms or ())


def _weighted(
    pod: Pod, terms: Iterable[WeightedPodAffinityTerm] | None
) -> tuple[WeightedAffinityTerm, ...]:
    return tuple(
        WeightedAffinityTerm(AffinityTerm.of(pod, term.pod_affinity_term), term.weight or 0)
        for term in terms or ()
        if term.pod_affinity_term is not None
    )


@dataclass(frozen=True, slots=True)
class HostPort:
    """One host port a container claims: ``0.0.0.0`` conflicts with every address."""

    ip: str
    protocol: str
    port: int


def _host_ports(pod: Pod) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    spec = pod.spec
    if spec is None:
        return ()
    sidecars = (c for c in spec.init_containers or () if c.restart_policy == "Always")
    for container in itertools.chain(sidecars, spec.containers or ()):
        for port in container.ports or ():
            if port.host_port:
                ports.append(
                    HostPort(port.host_ip or "0.0.0.0", port.protocol or "TCP", port.host_port)
                )
    return tuple(ports)


@dataclass(slots=True)
class PodInfo:
    """A pod and the facts about it that scheduling reads again and again."""

    pod: Pod
    requests: Resources
    non_zero_requests: Resources
    required_affinity: tuple[AffinityTerm, ...]
    required_anti_affinity: tuple[AffinityTerm, ...]
    preferred_affinity: tuple[WeightedAffinityTerm, ...]
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...]
    host_ports: tuple[HostPort, ...]

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        affinity = pod.spec.affinity if pod.spec else None
        pod_affinity = affinity.pod_affinity if affinity else None
        anti = affinity.pod_anti_affinity if affinity else None
        return cls(
            pod=pod,
            requests=pod_requests(pod),
            non_zero_requests=pod_requests(pod, non_zero=True),
            required_affinity=_terms(
                pod,
                pod_affinity.required_during_scheduling_ignored_during_execution
                if pod_affinity
                else None,
            ),
            required_anti_affinity=_terms(
                pod, anti.required_during_scheduling_ignored_during_execution if anti else None
            ),
            preferred_affinity=_weighted(
                pod,
                pod_affinity.preferred_during_scheduling_ignored_during_execution
                if pod_affinity
                else None,
            ),
            preferred_anti_affinity=_weighted(
                pod, anti.preferred_during_scheduling_ignored_during_execution if anti else None
            ),
            host_ports=_host_ports(pod),
        )

    @property
    def uid(self) -> str:
        return self.pod.metadata.uid or ""

    @property
    def key(self) -> str:
        return f"{self.pod.metadata.namespace}/{self.pod.metadata.name}"

    @property
    def priority(self) -> int:
        return (self.pod.spec.priority if self.pod.spec else None) or 0

    @property
    def has_affinity(self) -> bool:
        return bool(
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )


@dataclass(slots=True)
class QueuedPodInfo:
    """A pod in the scheduling queue, with the bookkeeping of its attempts."""

    info: PodInfo
    timestamp: float
    """When the pod was added to the queue (monotonic seconds); QueueSort's tie-breaker."""
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gated: bool = False

    @property
    def pod(self) -> Pod:
        return self.info.pod


@dataclass(slots=True)
class ImageState:
    size: int
    num_nodes: int
    """On how many nodes the image is present (ImageLocality scales by spread)."""


_NO_LABELS: Mapping[str, str] = {}


def node_labels(node: Node | None) -> Mapping[str, str]:
    """A node's labels; none for a node that is unknown or has none."""
    return (node.metadata.labels or _NO_LABELS) if node is not None else _NO_LABELS


class NodeInfo:
    """A node and everything the scheduler has placed or seen on it.

    The totals are kept in step by ``add_pod`` and ``remove_pod``; every change bumps
    ``generation`` so the snapshot copies only nodes that changed.  Filter and Score must treat
    a NodeInfo as read-only; preemption works on ``clone()``s.
    """

    __slots__ = (
        "allocatable",
        "generation",
        "image_states",
        "labels",
        "name",
        "node",
        "non_zero_requested",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "pvc_ref_counts",
        "requested",
        "used_ports",
    )

    def __init__(self, node: Node | None = None) -> None:
        self.node: Node | None = None
        self.name = ""
        """The node's name ("" while the node is unknown); read for every node every cycle."""
        self.labels: Mapping[str, str] = _NO_LABELS
        """The node's labels (none while the node is unknown); read by the topology plugins
        for every node every cycle."""
        self.pods: list[PodInfo] = []
        self.pods_with_affinity: list[PodInfo] = []
        self.pods_with_required_anti_affinity: list[PodInfo] = []
        self.used_ports: set[HostPort] = set()
        self.requested = Resources()
        self.non_zero_requested = Resources()
        self.allocatable = Resources()
        self.image_states: dict[str, ImageState] = {}
        self.pvc_ref_counts: dict[str, int] = {}
        self.generation = next_generation()
        if node is not None:
            self.set_node(node)

    def set_node(self, node: Node) -> None:
        self.node = node
        self.name = node.metadata.name or ""
        self.labels = node_labels(node)
        status = node.status
        self.allocatable = Resources.from_list(status.allocatable if status else None)
        self.generation = next_generation()

    def clear_node(self) -> None:
        """The node is gone; what remains is a placeholder for the pods still bound to it."""
        self.node = None
        self.name = ""
        self.labels = _NO_LABELS
        self.allocatable = Resources()
        self.generation = next_generation()

    def add_pod(self, info: PodInfo) -> None:
        self.pods.append(info)
        if info.has_affinity:
            self.pods_with_affinity.append(info)
        if info.required_anti_affinity:
            self.pods_with_required_anti_affinity.append(info)
        self._account(info, 1)

    def remove_pod(self, pod: Pod) -> bool:
        """Remove the pod with ``pod``'s uid; False if it was not here."""
        uid = pod.metadata.uid
        for i, info in enumerate(self.pods):
            if info.uid == uid:
                del self.pods[i]
                self.pods_with_affinity = [p for p in self.pods_with_affinity if p.uid != uid]
                self.pods_with_required_anti_affinity = [
                    p for p in self.pods_with_required_anti_affinity if p.uid != uid
                ]
                self._account(info, -1)
                return True
        return False

    def _account(self, info: PodInfo, sign: int) -> None:
        self.requested.add(info.requests, sign)
        self.non_zero_requested.add(info.non_zero_requests, sign)
        if sign > 0:
            self.used_ports.update(info.host_ports)
        else:
            self.used_ports = {port for pod in self.pods for port in pod.host_ports}
        spec = info.pod.spec
        for volume in (spec.volumes or ()) if spec else ():
            claim = volume.persistent_volume_claim
            if claim is not None and claim.claim_name:
                key = f"{info.pod.metadata.namespace}/{claim.claim_name}"
                count = self.pvc_ref_counts.get(key, 0) + sign
                if count > 0:
                    self.pvc_ref_counts[key] = count
                else:
                    self.pvc_ref_counts.pop(key, None)
        self.generation = next_generation()

    def clone(self) -> NodeInfo:
        copy = NodeInfo()
        copy.node = self.node
        copy.name = self.name
        copy.labels = self.labels
        copy.pods = list(self.pods)
        copy.pods_with_affinity = list(self.pods_with_affinity)
        copy.pods_with_required_anti_affinity = list(self.pods_with_required_anti_affinity)
        copy.used_ports = set(self.used_ports)
        copy.requested = self.requested.copy()
        copy.non_zero_requested = self.non_zero_requested.copy()
        copy.allocatable = self.allocatable.copy()
        copy.image_states = self.image_states
        copy.pvc_ref_counts = dict(self.pvc_ref_counts)
        copy.generation = self.generation
        return copy

    def __repr__(self) -> str:
        return f"NodeInfo({self.name!r}, pods={len(self.pods)})"
