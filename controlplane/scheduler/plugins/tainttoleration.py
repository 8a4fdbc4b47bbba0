"""TaintToleration: a node's NoSchedule and NoExecute taints keep out pods that do not
tolerate them; its PreferNoSchedule taints only lower its score (upstream
``tainttoleration``).

Score counts the PreferNoSchedule taints the pod does not tolerate, and NormalizeScore turns
the count around so the node with the most gets 0.  PreScore keeps only the tolerations that
can matter for scoring (effect PreferNoSchedule or empty), once per pod rather than once per
node.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    NodeScore,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins.helper import (
    PREFER_NO_SCHEDULE,
    default_normalize_score,
    do_not_schedule_taints,
    find_untolerated_taint,
    tolerations_tolerate_taint,
)
from kubelab.api.kinds.core_v1.node import Node, Taint
from kubelab.api.kinds.core_v1.pod import Pod, Toleration

PRE_SCORE_STATE_KEY = "PreScore" + names.TAINT_TOLERATION


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    tolerations_prefer_no_schedule: tuple[Toleration, ...]


def _tolerations(pod: Pod) -> list[Toleration]:
    return (pod.spec.tolerations if pod.spec else None) or []


def _taints(node: Node) -> list[Taint]:
    return (node.spec.taints if node.spec else None) or []


class TaintToleration:
    NAME: ClassVar[str] = names.TAINT_TOLERATION

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.node is None:
            return Status.failed("node not found")
        taint = find_untolerated_taint(
            _taints(node.node), _tolerations(pod.pod), do_not_schedule_taints
        )
        if taint is None:
            return SUCCESS
        return Status.unresolvable(
            f"node(s) had untolerated taint {{{taint.key or ''}: {taint.value or ''}}}"
        )

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
        try:
            prepared = state.read(PRE_SCORE_STATE_KEY, _PreScoreState)
        except (KeyError, TypeError) as error:
            return 0, Status.failed(
                f"failed to read {PRE_SCORE_STATE_KEY!r} from cycleState: {error}"
            )
        if node.node is None:
            return 0, Status.failed("node not found")
        intolerable = sum(
            1
            for taint in _taints(node.node)
            if taint.effect == PREFER_NO_SCHEDULE
            and not tolerations_tolerate_taint(prepared.tolerations_prefer_no_schedule, taint)
        )
        return intolerable, SUCCESS

    def score_extensions(self) -> TaintToleration:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
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
