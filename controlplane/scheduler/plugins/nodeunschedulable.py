"""NodeUnschedulable: a cordoned node (``spec.unschedulable``) takes no new pods, except those
that tolerate the ``node.kubernetes.io/unschedulable:NoSchedule`` taint (upstream
``nodeunschedulable``).

Tolerating that taint is how DaemonSet pods land on cordoned nodes; the node lifecycle
controller also adds the taint itself, which TaintToleration checks separately.

Filter runs for every node, so ``filter_nodes`` is the implementation: whether the pod
tolerates the taint is decided once per batch, leaving one attribute check per node.  That is
all Filter reads of the pod, so it is the Filter cache key: a node's verdict is reused while
the node is unchanged.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import (
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
    NO_SCHEDULE,
    TAINT_NODE_UNSCHEDULABLE,
)
from kube.api.kinds.core_v1.node import Node, Taint
from kube.api.kinds.core_v1.pod import Pod, Toleration
from kube.api.taints import tolerations_tolerate_taint

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
ERR_REASON_UNKNOWN_CONDITION = "node(s) had unknown conditions"

_UNSCHEDULABLE_TAINT = Taint(key=TAINT_NODE_UNSCHEDULABLE, effect=NO_SCHEDULE)
_UNSCHEDULABLE = Status.unresolvable(ERR_REASON_UNSCHEDULABLE)
_UNKNOWN_CONDITION = Status.unresolvable(ERR_REASON_UNKNOWN_CONDITION)


def _unschedulable(node: Node) -> bool:
    return bool(node.spec and node.spec.unschedulable)


def _tolerates_unschedulable(tolerations: Iterable[Toleration] | None) -> bool:
    return tolerations_tolerate_taint(tolerations, _UNSCHEDULABLE_TAINT)


class NodeUnschedulable:
    NAME: ClassVar[str] = names.NODE_UNSCHEDULABLE

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.filter_nodes(state, pod, (node,))[0]

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]:
        spec = pod.pod.spec
        cordoned = (
            SUCCESS
            if _tolerates_unschedulable(spec.tolerations if spec else None)
            else _UNSCHEDULABLE
        )
        return [
            _UNKNOWN_CONDITION
            if (node := info.node) is None
            else cordoned
            if _unschedulable(node)
            else SUCCESS
            for info in nodes
        ]

    def filter_cache_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """Whether the pod tolerates the unschedulable taint: all Filter reads of it."""
        spec = pod.pod.spec
        return _tolerates_unschedulable(spec.tolerations if spec else None)

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
        """A schedulable node was added, or a node was uncordoned."""
        if not isinstance(new, Node) or _unschedulable(new):
            return QueueingHint.SKIP
        if old is None or (isinstance(old, Node) and _unschedulable(old)):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    @staticmethod
    def _is_schedulable_after_pod_toleration_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """This pod gained a toleration of the unschedulable taint (tolerations can only be
        added, so the old pod did not have it)."""
        if (
            isinstance(new, Pod)
            and new.metadata.uid == pod.metadata.uid
            and _tolerates_unschedulable(new.spec.tolerations if new.spec else None)
        ):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()
