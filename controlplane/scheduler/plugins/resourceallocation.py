"""The resource arithmetic NodeResourcesFit and NodeResourcesBalancedAllocation share, as
upstream's ``noderesources`` package shares ``resourceAllocationScorer``: which resources are
scalar, the configured resources and their weights, and scoring nodes by requested and
allocatable amounts.  Plugins stay independent of one another; what two of them need lives
here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from controlplane.scheduler.framework.interface import SUCCESS, Status
from controlplane.scheduler.framework.types import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    NodeInfo,
    PodInfo,
    Resources,
)

_NATIVE_PREFIX = "kubernetes.io/"
_REQUESTS_PREFIX = "requests."


def is_extended_resource(name: str) -> bool:
    """A resource outside the ``kubernetes.io`` namespace, e.g. ``example.com/gpu``."""
    return "/" in name and _NATIVE_PREFIX not in name and not name.startswith(_REQUESTS_PREFIX)


def is_scalar_resource(name: str) -> bool:
    """Extended, hugepages, prefixed native or attachable-volume resources."""
    return (
        is_extended_resource(name)
        or name.startswith("hugepages-")
        or _NATIVE_PREFIX in name
        or name.startswith("attachable-volumes-")
    )


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


def parse_resource_specs(raw: Any, what: str) -> tuple[ResourceSpec, ...]:
    """``[{"name": ..., "weight": ...}]`` with upstream's defaults: cpu and memory when empty,
    weight 1 when unset.  ValueError on duplicates."""
    specs = tuple(
        ResourceSpec(str(item["name"]), int(item.get("weight") or 1)) for item in raw or ()
    )
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ValueError(f"{what}: Duplicate value: {spec.name!r}")
        seen.add(spec.name)
    return specs or DEFAULT_RESOURCES


Scorer = Callable[[Sequence[int], Sequence[int]], int]
"""(requested, allocatable) per configured resource → node score."""

CpuMemoryScorer = Callable[[int, int, int, int], int]
"""(requested cpu, allocatable cpu, requested memory, allocatable memory) → node score: a
``Scorer`` for exactly cpu and memory, without the sequences; allocatable 0 leaves a resource
out, as in ``Scorer``."""


class ResourceAllocationScorer:
    """Scores nodes by the configured resources' requested and allocatable amounts.

    ``use_requested`` counts the pods' actual requests; otherwise CPU and memory use the
    non-zero requests scoring assumes for containers that request none.  ``cpu_memory``, the
    same arithmetic as ``scorer`` for the resources ``[cpu, memory]``, is used when those are
    exactly the configured resources.
    """

    def __init__(
        self,
        resources: Sequence[ResourceSpec],
        scorer: Scorer,
        use_requested: bool,
        cpu_memory: CpuMemoryScorer | None = None,
    ) -> None:
        self.resources = tuple(resources)
        self._scorer = scorer
        self._use_requested = use_requested
        only_cpu_memory = tuple(spec.name for spec in self.resources) == (CPU, MEMORY)
        self._cpu_memory = cpu_memory if only_cpu_memory else None

    def pod_requests(self, pod: PodInfo) -> list[int]:
        """The pod's request of each configured resource, in configuration order."""
        requests = pod.requests if self._use_requested else pod.non_zero_requests
        return [_amount(requests, spec.name) for spec in self.resources]

    def score_nodes(
        self, nodes: Sequence[NodeInfo], pod_requests: Sequence[int]
    ) -> tuple[list[int], Status]:
        """Each node's score with the pod placed on it, in the nodes' order."""
        if not self.resources:
            return [0] * len(nodes), Status.failed("resources not found")
        cpu_memory = self._cpu_memory
        if cpu_memory is None:
            return [self._score(node, pod_requests) for node in nodes], SUCCESS
        cpu_request, memory_request = pod_requests
        use_requested = self._use_requested
        scores: list[int] = []
        append = scores.append
        for node in nodes:
            allocatable = node.allocatable
            requested = node.requested if use_requested else node.non_zero_requested
            append(
                cpu_memory(
                    requested.milli_cpu + cpu_request,
                    allocatable.milli_cpu,
                    requested.memory + memory_request,
                    allocatable.memory,
                )
            )
        return scores, SUCCESS

    def _score(self, node: NodeInfo, pod_requests: Sequence[int]) -> int:
        requested = [0] * len(self.resources)
        allocatable = [0] * len(self.resources)
        for i, spec in enumerate(self.resources):
            alloc, req = self._allocatable_and_requested(node, spec.name, pod_requests[i])
            if alloc:
                allocatable[i], requested[i] = alloc, req
        return self._scorer(requested, allocatable)

    def _allocatable_and_requested(
        self, node: NodeInfo, name: str, pod_request: int
    ) -> tuple[int, int]:
        """(allocatable, requested including the pod); (0, 0) leaves the resource out."""
        requested = node.requested if self._use_requested else node.non_zero_requested
        if pod_request == 0 and is_scalar_resource(name):
            return 0, 0
        if name in (CPU, MEMORY):
            return _amount(node.allocatable, name), _amount(requested, name) + pod_request
        if name == EPHEMERAL_STORAGE:
            return node.allocatable.ephemeral_storage, (
                node.requested.ephemeral_storage + pod_request
            )
        if name in node.allocatable.scalar:
            return node.allocatable.scalar[name], node.requested.scalar.get(name, 0) + pod_request
        return 0, 0


def _amount(resources: Resources, name: str) -> int:
    """``resources``' amount of ``name``; ``pods`` is no resource a pod requests."""
    return 0 if name == PODS else resources.get(name)


@dataclass(frozen=True, slots=True)
class ScoredRequests:
    """What PreScore records for the resource scorers: the pod's requests, in the scorer's
    resource order."""

    pod_requests: list[int]


def scored_requests_key(pre_score: object) -> Hashable | None:
    """The scored requests, when PreScore recorded them: a node's score holds while they and
    the node are unchanged."""
    return tuple(pre_score.pod_requests) if isinstance(pre_score, ScoredRequests) else None
