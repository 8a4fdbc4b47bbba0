"""SchedulingGates: keeps a pod out of the active queue while ``spec.schedulingGates`` lists
any gate (upstream ``schedulinggates``).

The gates can only be removed, never added back, so the queue re-checks the pod when an update
to that same pod leaves it with no gates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import (
    SUCCESS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    Handle,
    QueueingHint,
    Status,
)
from kube.api.kinds.core_v1.pod import Pod


class SchedulingGates:
    NAME: ClassVar[str] = names.SCHEDULING_GATES

    def pre_enqueue(self, pod: Pod) -> Status:
        gates = (pod.spec.scheduling_gates if pod.spec else None) or []
        if not gates:
            return SUCCESS
        listed = " ".join(gate.name or "" for gate in gates)
        return Status.unresolvable(f"waiting for scheduling gates: [{listed}]")

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES),
                self._is_schedulable_after_pod_update,
            )
        ]

    @staticmethod
    def _is_schedulable_after_pod_update(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Only an update of this very pod that removed its last gate can let it in."""
        if not isinstance(new, Pod) or new.metadata.uid != pod.metadata.uid:
            return QueueingHint.SKIP
        gates = new.spec.scheduling_gates if new.spec else None
        return QueueingHint.SKIP if gates else QueueingHint.QUEUE


def new(args: Mapping[str, Any] | None, handle: Handle) -> SchedulingGates:
    return SchedulingGates()
