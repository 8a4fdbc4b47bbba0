"""NodeResourcesBalancedAllocation: prefer nodes whose resources fill up evenly.

For each configured resource (cpu and memory by default) the fraction requested after placing
the pod is ``(node's requests + pod's request) / allocatable``, capped at 1.  The score is
``(1 - standard deviation of those fractions) * 100``: a node that would end up at 50 % CPU and
50 % memory scores 100, one at 90 % CPU and 10 % memory scores 60.  A node using a lot of one
resource and little of another strands the leftover, which this steers away from.

Unlike NodeResourcesFit's scoring, the actual requests are used (no non-zero defaults), and a
best-effort pod, which requests none of the resources, skips this plugin entirely: otherwise
every such pod would score the same emptiest-looking node highest and pile onto it.

Score runs for every feasible node, so ``score_nodes`` scores a batch in one loop (``score``
delegates), and the default resources, cpu and memory, take the two-fraction shortcut of the
standard deviation without building the fraction lists.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    CycleState,
    Handle,
    ScoreExtensions,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins.resourceallocation import (
    ResourceAllocationScorer,
    ScoredRequests,
    parse_resource_specs,
    scored_requests_key,
)

_PRE_SCORE_KEY = "PreScore" + names.NODE_RESOURCES_BALANCED_ALLOCATION


def balanced_resource_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """(1 - std of the requested fractions) * MAX_NODE_SCORE, leaving out resources the
    node has none of."""
    fractions = [
        min(req / alloc, 1.0) for req, alloc in zip(requested, allocatable, strict=True) if alloc
    ]
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def _balanced_cpu_memory_score(
    cpu: int, cpu_allocatable: int, memory: int, memory_allocatable: int
) -> int:
    """``balanced_resource_score`` of ``[cpu, memory]``."""
    if not (cpu_allocatable and memory_allocatable):
        return MAX_NODE_SCORE
    cpu_fraction = min(cpu / cpu_allocatable, 1.0)
    memory_fraction = min(memory / memory_allocatable, 1.0)
    return int((1 - abs((cpu_fraction - memory_fraction) / 2)) * MAX_NODE_SCORE)


class NodeResourcesBalancedAllocation:
    NAME: ClassVar[str] = names.NODE_RESOURCES_BALANCED_ALLOCATION

    def __init__(self, scorer: ResourceAllocationScorer) -> None:
        self._scorer = scorer

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        requests = self._scorer.pod_requests(pod)
        if not any(requests):
            return SKIP
        state.write(_PRE_SCORE_KEY, ScoredRequests(requests))
        return SUCCESS

    def score_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[list[int], Status]:
        pre_score = state.get(_PRE_SCORE_KEY)
        if isinstance(pre_score, ScoredRequests):
            requests = pre_score.pod_requests
        else:
            requests = self._scorer.pod_requests(pod)
            if not any(requests):
                return [0] * len(nodes), SUCCESS
        return self._scorer.score_nodes(nodes, requests)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        scores, status = self.score_nodes(state, pod, (node,))
        return scores[0], status

    def score_cache_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        return scored_requests_key(state.get(_PRE_SCORE_KEY))

    def score_extensions(self) -> ScoreExtensions | None:
        return None


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeResourcesBalancedAllocation:
    """``args``: NodeResourcesBalancedAllocationArgs (``resources``, each of weight 1);
    ValueError if invalid."""
    resources = parse_resource_specs((args or {}).get("resources"), "resources")
    for spec in resources:
        if spec.weight != 1:
            raise ValueError(f"resources: Invalid value: {spec.weight}: must be 1")
    return NodeResourcesBalancedAllocation(
        ResourceAllocationScorer(
            resources,
            balanced_resource_score,
            use_requested=True,
            cpu_memory=_balanced_cpu_memory_score,
        )
    )
