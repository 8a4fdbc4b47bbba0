"""TaintToleration: a node's NoSchedule and NoExecute taints keep out pods that do not
tolerate them; its PreferNoSchedule taints only lower its score (upstream
``tainttoleration``).

Score counts the PreferNoSchedule taints the pod does not tolerate, and NormalizeScore turns
the count around so the node with the most gets 0.  PreScore keeps only the tolerations that
can matter for scoring (effect PreferNoSchedule or empty), once per pod rather than once per
node.

Filter and Score run for every node, so the batch forms (``filter_nodes``, ``score_nodes``)
are the implementation and the one-node forms delegate to them.  Most nodes have no taints:
the loops answer those with one attribute check, and only tainted nodes go through the
toleration matching.  The rejection for a given taint is built once and remembered.  Filter
reads only the pod's tolerations (their key, operator, value and effect), its cache key: a
node's verdict is reused while the node and those are unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    SUCCESS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EventResource,
    Handle,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins.helper import (
    PREFER_NO_SCHEDULE,
    default_normalize_score,
    do_not_schedule_taints,
)
from kube.api.kinds.core_v1.node import Node, Taint
from kube.api.kinds.core_v1.pod import Pod, Toleration
from kube.api.taints import find_untolerated_taint, tolerations_tolerate_taint

PRE_SCORE_STATE_KEY = "PreScore" + names.TAINT_TOLERATION

_NODE_NOT_FOUND = Status.failed("node not found")


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    tolerations_prefer_no_schedule: tuple[Toleration, ...]


def _tolerations(pod: Pod) -> list[Toleration]:
    return (pod.spec.tolerations if pod.spec else None) or []


def _taints(node: Node) -> list[Taint]:
    return (node.spec.taints if node.spec else None) or []


@functools.lru_cache(maxsize=1024)
def _untolerated(key: str | None, value: str | None) -> Status:
    """The Filter rejection for an untolerated taint ``{key: value}``, built once."""
    return Status.unresolvable(f"node(s) had untolerated taint {{{key or ''}: {value or ''}}}")


def _intolerable_prefer_no_schedule(taints: list[Taint], tolerations: Sequence[Toleration]) -> int:
    """How many of the PreferNoSchedule ``taints`` none of ``tolerations`` tolerates."""
    return sum(
        1
        for taint in taints
        if taint.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate_taint(tolerations, taint)
    )


class TaintToleration:
    NAME: ClassVar[str] = names.TAINT_TOLERATION

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.filter_nodes(state, pod, (node,))[0]

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]:
        tolerations = _tolerations(pod.pod)
        statuses: list[Status] = []
        append = statuses.append
        for info in nodes:
            node = info.node
            if node is None:
                append(_NODE_NOT_FOUND)
                continue
            spec = node.spec
            if spec is None or not spec.taints:
                append(SUCCESS)
                continue
            taint = find_untolerated_taint(spec.taints, tolerations, do_not_schedule_taints)
            append(SUCCESS if taint is None else _untolerated(taint.key, taint.value))
        return statuses

    def filter_cache_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """What Filter reads of the pod: each toleration's key, operator, value and effect."""
        return tuple((t.key, t.operator, t.value, t.effect) for t in _tolerations(pod.pod))

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        # An empty effect tolerates every effect, PreferNoSchedule included.
        relevant = tuple(
            toleration
            for toleration in _tolerations(pod.pod)
            if not toleration.effect or toleration.effect == PREFER_NO_SCHEDULE
        )
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(relevant))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        scores, status = self.score_nodes(state, pod, (node,))
        return (scores[0] if scores else 0), status

    def score_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[list[int], Status]:
        try:
            prepared = state.read(PRE_SCORE_STATE_KEY, _PreScoreState)
        except (KeyError, TypeError) as error:
            return [], Status.failed(
                f"failed to read {PRE_SCORE_STATE_KEY!r} from cycleState: {error}"
            )
        tolerations = prepared.tolerations_prefer_no_schedule
        if any(info.node is None for info in nodes):
            return [], _NODE_NOT_FOUND
        # Comprehensions rather than a loop: most nodes have no taints, and for them this is
        # an attribute chain, not a call.
        return [
            _intolerable_prefer_no_schedule(taints, tolerations)
            if (spec := info.node.spec) is not None and (taints := spec.taints)  # type: ignore[union-attr]
            else 0
            for info in nodes
        ], SUCCESS

    def score_extensions(self) -> TaintToleration:
        return self

    def normalize_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[str], scores: list[int]
    ) -> Status:
        return default_normalize_score(MAX_NODE_SCORE, True, scores)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                self._is_schedulable_after_node_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATION),
                self._is_schedulable_after_pod_toleration_change,
            ),
        ]

    @staticmethod
    def _is_schedulable_after_node_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """The node (new, or updated) no longer has a taint the pod does not tolerate."""
        if not isinstance(new, Node):
            return QueueingHint.QUEUE
        tolerations = _tolerations(pod)
        was_untolerated = not isinstance(old, Node) or (
            find_untolerated_taint(_taints(old), tolerations, do_not_schedule_taints) is not None
        )
        is_untolerated = (
            find_untolerated_taint(_taints(new), tolerations, do_not_schedule_taints) is not None
        )
        return QueueingHint.QUEUE if was_untolerated and not is_untolerated else QueueingHint.SKIP

    @staticmethod
    def _is_schedulable_after_pod_toleration_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Only this pod's own new tolerations can change the verdict."""
        if isinstance(new, Pod) and new.metadata.uid == pod.metadata.uid:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def new(args: Mapping[str, Any] | None, handle: Handle) -> TaintToleration:
    return TaintToleration()
