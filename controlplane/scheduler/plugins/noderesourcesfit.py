"""NodeResourcesFit: does the node have room for the pod's requests, and how full will it be?

Filter compares what the pod requests (PreFilter computes it once per cycle) with what the
node has left: allocatable minus the requests of the pods already there.  Every shortfall is a
reason ("Insufficient cpu", "Too many pods", ...); when the pod asks for more than the whole
node has, no preemption could help, so the status is UNSCHEDULABLE_AND_UNRESOLVABLE.
Extended resources (``example.com/gpu``) listed in ``ignoredResources``, or whose prefix is in
``ignoredResourceGroups``, are left to someone else (an extender, a device plugin).

Filter and Score run for every node for every pod, so both judge a whole batch of nodes in one
loop (``filter_nodes``, ``score_nodes``; the one-node forms delegate).  PreFilter turns the
pod's requests into a short list of checks, each a bit in a shortfall mask, and the cycle
builds each distinct verdict once; scoring exactly cpu and memory, the default, takes a
shortcut that reads the two amounts directly instead of walking the configured resources.

Score applies the configured ``scoringStrategy`` to the requested/allocatable ratio of each
configured resource, averaged by weight: LeastAllocated spreads pods out, MostAllocated packs
them, RequestedToCapacityRatio maps utilization to a score through a piecewise linear shape.
Scoring counts CPU and memory with scoring's non-zero defaults for containers that request
none (0.1 core, 200 MiB), so best-effort pods still weigh on a node.

The scoring arithmetic (``ResourceAllocationScorer``) is shared with
NodeResourcesBalancedAllocation, as upstream shares ``resourceAllocationScorer``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import Any, ClassVar

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    SUCCESS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EventResource,
    Handle,
    PreFilterExtensions,
    PreFilterResult,
    QueueingHint,
    ScoreExtensions,
    Status,
)
from controlplane.scheduler.framework.types import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    NodeInfo,
    PodInfo,
    Resources,
    pod_requests,
)
from controlplane.scheduler.plugins.resourceallocation import (
    CpuMemoryScorer,
    ResourceAllocationScorer,
    ResourceSpec,
    ScoredRequests,
    Scorer,
    is_extended_resource,
    parse_resource_specs,
    scored_requests_key,
)
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Pod

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
MAX_CUSTOM_PRIORITY_SCORE = 10
"""The top of a RequestedToCapacityRatio shape's score scale; scaled up to MAX_NODE_SCORE."""
MAX_UTILIZATION = 100

_PRE_FILTER_KEY = "PreFilter" + names.NODE_RESOURCES_FIT
_PRE_SCORE_KEY = "PreScore" + names.NODE_RESOURCES_FIT


def _weighted_average(
    per_resource: Callable[[int, int], int], resources: Sequence[ResourceSpec]
) -> Scorer:
    def scorer(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for i, spec in enumerate(resources):
            if allocatable[i] == 0:
                continue
            node_score += per_resource(requested[i], allocatable[i]) * spec.weight
            weight_sum += spec.weight
        return node_score // weight_sum if weight_sum else 0

    return scorer


def _weighted_average_cpu_memory(
    per_resource: Callable[[int, int], int], cpu_weight: int, memory_weight: int
) -> CpuMemoryScorer:
    """``_weighted_average`` of ``[cpu, memory]``."""

    def scorer(cpu: int, cpu_allocatable: int, memory: int, memory_allocatable: int) -> int:
        if not cpu_allocatable:
            return per_resource(memory, memory_allocatable) if memory_allocatable else 0
        if not memory_allocatable:
            return per_resource(cpu, cpu_allocatable)
        return (
            per_resource(cpu, cpu_allocatable) * cpu_weight
            + per_resource(memory, memory_allocatable) * memory_weight
        ) // (cpu_weight + memory_weight)

    return scorer


def least_requested_score(requested: int, capacity: int) -> int:
    """The share of the node left free, 0..MAX_NODE_SCORE."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    """The share of the node in use, 0..MAX_NODE_SCORE (over-commitment counts as full)."""
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


@dataclass(frozen=True, slots=True)
class ShapePoint:
    utilization: int
    score: int


def _truncating_division(a: int, b: int) -> int:
    """Integer division rounding toward zero, as Go's does (shapes may slope down)."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def broken_linear(shape: Sequence[ShapePoint]) -> Callable[[int], int]:
    """The piecewise linear function through ``shape``, flat beyond its ends."""

    def function(utilization: int) -> int:
        for i, point in enumerate(shape):
            if utilization <= point.utilization:
                if i == 0:
                    return point.score
                before = shape[i - 1]
                return before.score + _truncating_division(
                    (point.score - before.score) * (utilization - before.utilization),
                    point.utilization - before.utilization,
                )
        return shape[-1].score

    return function


def requested_to_capacity_ratio_scorer(
    resources: Sequence[ResourceSpec], shape: Sequence[ShapePoint]
) -> Scorer:
    """Scores each resource by its utilization through ``shape``; resources scoring 0 do
    not count towards the weighted average, which is rounded to the nearest integer."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    raw = broken_linear([ShapePoint(p.utilization, p.score * scale) for p in shape])

    def resource_score(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return raw(MAX_UTILIZATION)
        return raw(requested * MAX_UTILIZATION // capacity)

    def scorer(requested: Sequence[int], allocatable: Sequence[int]) -> int:
        node_score = weight_sum = 0
        for i, spec in enumerate(resources):
            if allocatable[i] == 0:
                continue
            score = resource_score(requested[i], allocatable[i])
            if score > 0:
                node_score += score * spec.weight
                weight_sum += spec.weight
        return math.floor(node_score / weight_sum + 0.5) if weight_sum else 0

    return scorer


def _parse_shape(raw: Any) -> tuple[ShapePoint, ...]:
    shape = tuple(
        ShapePoint(int(point.get("utilization", 0)), int(point.get("score", 0)))
        for point in raw or ()
    )
    if not shape:
        raise ValueError("scoringStrategy.requestedToCapacityRatio.shape: Required value")
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= MAX_UTILIZATION:
            raise ValueError(
                f"shape[{i}].utilization: Invalid value: {point.utilization}: "
                f"not in valid range [0, {MAX_UTILIZATION}]"
            )
        if i and point.utilization <= shape[i - 1].utilization:
            raise ValueError(
                f"shape[{i}].utilization: Invalid value: {point.utilization}: "
                "utilization values must be sorted in increasing order"
            )
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ValueError(
                f"shape[{i}].score: Invalid value: {point.score}: "
                f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"
            )
    return shape


def scorer_for_strategy(strategy: Mapping[str, Any]) -> ResourceAllocationScorer:
    """The scorer a ``scoringStrategy`` configures (defaults: LeastAllocated, cpu+memory)."""
    resources = parse_resource_specs(strategy.get("resources"), "scoringStrategy.resources")
    for spec in resources:
        if not 1 <= spec.weight <= 100:
            raise ValueError(
                f"scoringStrategy.resources: Invalid value: {spec.weight}: "
                f"resource weight of {spec.name} not in valid range [1, 100]"
            )
    kind = strategy.get("type", LEAST_ALLOCATED)
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        ratio = strategy.get("requestedToCapacityRatio") or {}
        shape = _parse_shape(ratio.get("shape"))
        return ResourceAllocationScorer(
            resources, requested_to_capacity_ratio_scorer(resources, shape), use_requested=False
        )
    per_resource = {LEAST_ALLOCATED: least_requested_score, MOST_ALLOCATED: most_requested_score}
    if kind not in per_resource:
        raise ValueError(f"scoring strategy {kind} is not supported")
    weights = {spec.name: spec.weight for spec in resources}
    return ResourceAllocationScorer(
        resources,
        _weighted_average(per_resource[kind], resources),
        use_requested=False,
        cpu_memory=_weighted_average_cpu_memory(
            per_resource[kind], weights.get(CPU, 0), weights.get(MEMORY, 0)
        ),
    )


_UNRESOLVABLE = 1
_TOO_MANY_PODS = 2
_NATIVE_AMOUNTS: Mapping[str, Callable[[Resources], int]] = {
    CPU: attrgetter("milli_cpu"),
    MEMORY: attrgetter("memory"),
    EPHEMERAL_STORAGE: attrgetter("ephemeral_storage"),
}


class _FitRequest:
    """What Filter checks a node against, prepared once per cycle from the pod's requests.

    Each requested resource is a check with its own bit in a shortfall mask (bit 0: no
    preemption can help, bit 1: too many pods); the verdict for each mask seen is built once
    and handed out again.  Nothing else changes after construction, so clones of the cycle
    state share one.
    """

    __slots__ = ("_checks", "_reasons", "_verdicts", "key")

    def __init__(
        self,
        request: Resources,
        ignored_resources: frozenset[str] = frozenset(),
        ignored_groups: frozenset[str] = frozenset(),
    ) -> None:
        wanted = [(name, request.get(name)) for name in _NATIVE_AMOUNTS if request.get(name) > 0]
        wanted += [
            (name, amount)
            for name, amount in request.scalar.items()
            if amount
            and not (
                is_extended_resource(name)
                and (name in ignored_resources or name.split("/", 1)[0] in ignored_groups)
            )
        ]
        self.key = tuple(wanted)
        """What a node's verdict depends on besides the node: reusable while it is equal."""
        self._checks = tuple(
            (amount, _TOO_MANY_PODS << (i + 1), _amount_of(name))
            for i, (name, amount) in enumerate(wanted)
        )
        self._reasons = ("Too many pods", *(f"Insufficient {name}" for name, _ in wanted))
        self._verdicts: dict[int, Status] = {0: SUCCESS}

    def filter_nodes(self, nodes: Sequence[NodeInfo]) -> list[Status]:
        checks = self._checks
        verdicts = self._verdicts
        statuses: list[Status] = []
        append = statuses.append
        for node in nodes:
            allocatable = node.allocatable
            used = node.requested
            shortfalls = _TOO_MANY_PODS if len(node.pods) >= allocatable.allowed_pods else 0
            for amount, bit, amount_of in checks:
                capacity = amount_of(allocatable)
                if amount > capacity - amount_of(used):
                    shortfalls |= bit if amount <= capacity else bit | _UNRESOLVABLE
            verdict = verdicts.get(shortfalls)
            append(verdict if verdict is not None else self._verdict(shortfalls))
        return statuses

    def _verdict(self, shortfalls: int) -> Status:
        reasons = tuple(
            r for i, r in enumerate(self._reasons) if shortfalls & (_TOO_MANY_PODS << i)
        )
        code = (
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            if shortfalls & _UNRESOLVABLE
            else Code.UNSCHEDULABLE
        )
        verdict = self._verdicts[shortfalls] = Status(code, reasons)
        return verdict


def _amount_of(name: str) -> Callable[[Resources], int]:
    return _NATIVE_AMOUNTS.get(name) or partial(Resources.get, name=name)


class NodeResourcesFit:
    NAME: ClassVar[str] = names.NODE_RESOURCES_FIT

    def __init__(
        self,
        ignored_resources: frozenset[str],
        ignored_groups: frozenset[str],
        scorer: ResourceAllocationScorer,
    ) -> None:
        self._ignored_resources = ignored_resources
        self._ignored_groups = ignored_groups
        self._scorer = scorer

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        request = _FitRequest(pod.requests, self._ignored_resources, self._ignored_groups)
        state.write(_PRE_FILTER_KEY, request)
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]:
        try:
            request = state.read(_PRE_FILTER_KEY, _FitRequest)
        except (KeyError, TypeError) as error:
            failed = Status.failed(f"error reading {_PRE_FILTER_KEY!r} from cycleState: {error}")
            return [failed] * len(nodes)
        return request.filter_nodes(nodes)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.filter_nodes(state, pod, (node,))[0]

    def filter_cache_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """The checked requests: a node's verdict holds while they and the node are unchanged."""
        request = state.get(_PRE_FILTER_KEY)
        return request.key if isinstance(request, _FitRequest) else None

    def score_cache_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        return scored_requests_key(state.get(_PRE_SCORE_KEY))

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        state.write(_PRE_SCORE_KEY, ScoredRequests(self._scorer.pod_requests(pod)))
        return SUCCESS

    def score_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[list[int], Status]:
        pre_score = state.get(_PRE_SCORE_KEY)
        requests = (
            pre_score.pod_requests
            if isinstance(pre_score, ScoredRequests)
            else self._scorer.pod_requests(pod)
        )
        return self._scorer.score_nodes(nodes, requests)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        scores, status = self.score_nodes(state, pod, (node,))
        return scores[0], status

    def score_extensions(self) -> ScoreExtensions | None:
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN
                ),
                self._after_pod_event,
            ),
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE
                ),
                self._after_node_change,
            ),
        ]

    def _after_pod_event(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A scheduled (or nominated) pod went away, or some pod shrank its requests."""
        if new is None:
            deleted: Pod = old
            assigned = (deleted.spec and deleted.spec.node_name) or (
                deleted.status and deleted.status.nominated_node_name
            )
            return QueueingHint.QUEUE if assigned else QueueingHint.SKIP
        return QueueingHint.QUEUE if _scaled_down_for(pod, old, new) else QueueingHint.SKIP

    def _after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A node that could hold the pod appeared, or grew in something the pod requests."""
        if new is None:
            return QueueingHint.SKIP
        (verdict,) = _FitRequest(pod_requests(pod)).filter_nodes((NodeInfo(new),))
        if verdict is not SUCCESS:
            return QueueingHint.SKIP
        if old is None or _requested_resources_increased(pod, old, new):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def _scaled_down_for(target: Pod, old: Pod, new: Pod) -> bool:
    """Whether ``new`` (``old`` resized) frees something ``target`` requests."""
    if new.metadata.uid == target.metadata.uid:
        return True
    if not (new.spec and new.spec.node_name):
        return False
    before, after = pod_requests(old), pod_requests(new)
    wanted = pod_requests(target)
    resource_names = [CPU, MEMORY, EPHEMERAL_STORAGE, *wanted.scalar]
    return any(wanted.get(n) and before.get(n) > after.get(n) for n in resource_names)


def _requested_resources_increased(pod: Pod, old: Node, new: Node) -> bool:
    """Whether the node's allowed pod count, or the allocatable of anything the pod
    requests, went up."""
    before, after = NodeInfo(old).allocatable, NodeInfo(new).allocatable
    if after.allowed_pods > before.allowed_pods:
        return True
    wanted = pod_requests(pod)
    resource_names = [CPU, MEMORY, EPHEMERAL_STORAGE, *wanted.scalar]
    return any(wanted.get(n) and after.get(n) > before.get(n) for n in resource_names)


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeResourcesFit:
    """``args``: NodeResourcesFitArgs (``ignoredResources``, ``ignoredResourceGroups``,
    ``scoringStrategy``); ValueError if invalid."""
    args = args or {}
    groups = frozenset(args.get("ignoredResourceGroups") or ())
    for group in groups:
        if "/" in group:
            raise ValueError(
                f"ignoredResourceGroups: Invalid value: {group!r}: "
                "resource group name can't contain '/'"
            )
    return NodeResourcesFit(
        frozenset(args.get("ignoredResources") or ()),
        groups,
        scorer_for_strategy(args.get("scoringStrategy") or {}),
    )
