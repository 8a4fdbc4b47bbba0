"""NodeName: a pod that names its node in ``spec.nodeName`` fits only that node (upstream
``nodename``).

Nothing about an existing node can change its name, so only a node being added can help a
rejected pod.  Filter runs for every node, so ``filter_nodes`` is the implementation; most
pods the scheduler sees name no node, and for them the batch only checks that each node
exists.  The node the pod names is all Filter reads of it, its cache key: a node's verdict is
reused while the node is unchanged.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
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
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Pod

ERR_REASON = "node(s) didn't match the requested node name"

_MISMATCH = Status.unresolvable(ERR_REASON)


def fits(pod: Pod, node: Node) -> bool:
    """Whether the pod names no node, or names ``node``."""
    wanted = pod.spec.node_name if pod.spec else None
    return not wanted or wanted == node.metadata.name


class NodeName:
    NAME: ClassVar[str] = names.NODE_NAME

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.filter_nodes(state, pod, (node,))[0]

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]:
        spec = pod.pod.spec
        if not (spec and spec.node_name):
            return [_MISMATCH if info.node is None else SUCCESS for info in nodes]
        return [
            SUCCESS if (node := info.node) is not None and fits(pod.pod, node) else _MISMATCH
            for info in nodes
        ]

    def filter_cache_key(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """The node the pod names ("" for none): all Filter reads of the pod."""
        spec = pod.pod.spec
        return (spec.node_name if spec else None) or ""

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD),
                self._is_schedulable_after_node_add,
            )
        ]

    @staticmethod
    def _is_schedulable_after_node_add(pod: Pod, old: Any, new: Any) -> QueueingHint:
        return QueueingHint.QUEUE if isinstance(new, Node) and fits(pod, new) else QueueingHint.SKIP


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeName:
    return NodeName()
