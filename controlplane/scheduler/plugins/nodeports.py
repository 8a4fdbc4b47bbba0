"""NodePorts: a pod whose containers claim host ports fits only nodes where no running pod
holds the same port (upstream ``nodeports``).

A port is the triple (IP, protocol, port); ``0.0.0.0`` means every address, so it conflicts
with the same protocol and port on any IP, and a specific IP conflicts with itself and with
``0.0.0.0``.  PreFilter takes the pod's ports from its ``PodInfo`` and skips Filter for pods
with none, which is most of them.  For the rest, ``filter_nodes`` is the implementation (the
one-node ``filter`` delegates to it): it reads the ports once per batch, and a node where no
pod holds a port passes without further checks.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EventResource,
    Handle,
    PreFilterResult,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import HostPort, NodeInfo, PodInfo
from kube.api.kinds.core_v1.pod import Pod

PRE_FILTER_STATE_KEY = "PreFilter" + names.NODE_PORTS
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
BIND_ALL = "0.0.0.0"

_CONFLICT = Status.unschedulable(ERR_REASON)


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    """The pod's host ports; unaffected by other pods, so clones share it."""

    ports: tuple[HostPort, ...]


def conflicts(want: HostPort, used: Iterable[HostPort]) -> bool:
    """Whether ``want`` collides with any of ``used`` (upstream ``HostPortInfo.CheckConflict``;
    both sides already have the default IP and protocol filled in)."""
    if want.port <= 0:
        return False
    for port in used:
        if port.port != want.port or port.protocol != want.protocol:
            continue
        if want.ip == BIND_ALL or port.ip in (BIND_ALL, want.ip):
            return True
    return False


def fits_ports(wanted: Iterable[HostPort], used: Collection[HostPort]) -> bool:
    """Whether none of ``wanted`` collides with ``used``."""
    return not any(conflicts(want, used) for want in wanted)


class NodePorts:
    NAME: ClassVar[str] = names.NODE_PORTS

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.host_ports:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(pod.host_ports))
        return None, SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.filter_nodes(state, pod, (node,))[0]

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]:
        try:
            wanted = state.read(PRE_FILTER_STATE_KEY, _PreFilterState).ports
        except (KeyError, TypeError) as error:
            failed = Status.failed(f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: {error}")
            return [failed] * len(nodes)
        return [
            SUCCESS if not (used := info.used_ports) or fits_ports(wanted, used) else _CONFLICT
            for info in nodes
        ]

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Container ports are immutable, so pod updates never free one.
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.DELETE),
                self._is_schedulable_after_pod_deleted,
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
        ]

    @staticmethod
    def _is_schedulable_after_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A deleted pod frees ports only if it was on (or nominated to) a node and held a
        port this pod wants."""
        if not isinstance(old, Pod):
            return QueueingHint.QUEUE
        assigned = (old.spec.node_name if old.spec else None) or (
            old.status.nominated_node_name if old.status else None
        )
        if not assigned:
            return QueueingHint.SKIP
        freed = PodInfo.of(old).host_ports
        if not freed or fits_ports(PodInfo.of(pod).host_ports, freed):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodePorts:
    return NodePorts()
