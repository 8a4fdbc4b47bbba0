"""The node-lifecycle controller: notices nodes whose kubelet went silent and taints them.

As upstream (``pkg/controller/nodelifecycle``), a node's health signal is its Lease in
``kube-node-lease`` (``spec.renewTime``) and the heartbeat of its ``Ready`` condition.  The
controller remembers, per node, when it last *saw either change* (its own clock, so clock
skew between kubelet and controller does not matter; a restart grants every node a fresh
grace period).  Once nothing changed for ``--node-monitor-grace-period`` (60 s for a node
that never posted a status) the ``Ready``, ``MemoryPressure``, ``DiskPressure`` and
``PIDPressure`` conditions become ``Unknown`` ("Kubelet stopped posting node status."),
written with ``update_status``; the node gets a ``NodeNotReady`` event and its pods lose
their ``Ready`` condition.

Taints follow the conditions:

* ``NoSchedule`` taints mirror the conditions (``TaintNodesByCondition``): Ready False →
  ``not-ready``, Ready Unknown → ``unreachable``, memory/disk/PID pressure, network
  unavailable, and ``spec.unschedulable`` → ``unschedulable``.
* A ``NoExecute`` ``unreachable`` (Ready Unknown) or ``not-ready`` (Ready False) taint, whose
  pods the taint-eviction controller then evicts.  Adding one is rate-limited to
  ``--node-eviction-rate`` nodes per second (a token bucket of burst 1 on the controller's
  clock, as upstream's per-zone tainter); swapping one for the other is immediate.  When no
  node at all is Ready (upstream: every zone fully disrupted, most likely the control plane
  lost its network) no NoExecute taint is added and existing ones are removed.  Both are
  removed once the kubelet reports Ready again; the controller never sets Ready itself.

Keys are node names, plus ``MONITOR_KEY``: every ``NODE_MONITOR_PERIOD`` seconds it enqueues
every node (upstream's ``monitorNodeHealth`` loop).  Each node is also enqueued for the moment
its grace period runs out, and on node, Lease and pod-binding events.
"""

from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass
from typing import Any

import msgspec

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from controlplane.controllers.nodeutil import (
    NO_EXECUTE,
    NO_SCHEDULE,
    TAINT_DISK_PRESSURE,
    TAINT_MEMORY_PRESSURE,
    TAINT_NETWORK_UNAVAILABLE,
    TAINT_NOT_READY,
    TAINT_PID_PRESSURE,
    TAINT_UNREACHABLE,
    TAINT_UNSCHEDULABLE,
    node_condition,
    node_taints,
    record_node_status_change,
)
from kube.api import codec
from kube.api.kinds.coordination_v1 import Lease
from kube.api.kinds.core_v1.node import Node, NodeCondition, NodeStatus, Taint
from kube.api.kinds.core_v1.pod import Pod, PodStatus
from kube.api.struct import parse_micro_time
from kube.client.errors import ApiError
from kube.client.flowcontrol import TokenBucket
from kube.client.informers import NODE_NAME_INDEX

NAME = "node-lifecycle"
NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_MONITOR_PERIOD = 5.0
NODE_STARTUP_GRACE_PERIOD = 60.0
MONITOR_KEY = "#monitor"
"""Not a valid node name, so it never collides with one."""
EXCLUDE_DISRUPTION_LABEL = "node.kubernetes.io/exclude-disruption"

MONITORED_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
"""The conditions set to Unknown when the kubelet goes silent (not NetworkUnavailable, which
the control plane manages)."""
CONDITION_TAINTS = {
    ("Ready", "False"): TAINT_NOT_READY,
    ("Ready", "Unknown"): TAINT_UNREACHABLE,
    ("MemoryPressure", "True"): TAINT_MEMORY_PRESSURE,
    ("DiskPressure", "True"): TAINT_DISK_PRESSURE,
    ("NetworkUnavailable", "True"): TAINT_NETWORK_UNAVAILABLE,
    ("PIDPressure", "True"): TAINT_PID_PRESSURE,
}
_NO_SCHEDULE_KEYS = {*CONDITION_TAINTS.values(), TAINT_UNSCHEDULABLE}
_NO_EXECUTE_FOR = {"False": TAINT_NOT_READY, "Unknown": TAINT_UNREACHABLE}


@dataclass
class _Health:
    """What the controller last saw of a node, and when it last saw a sign of life."""

    node: Node
    heartbeat: datetime.datetime | None
    renew: datetime.datetime | None
    probe: datetime.datetime


def _conditions_unknown(node: Node, now: datetime.datetime) -> Node | None:
    """A copy of ``node`` with the monitored conditions Unknown, or None if Ready already is."""
    ready = node_condition(node, "Ready")
    if ready is not None and ready.status == "Unknown":
        return None
    updated = copy.deepcopy(node)
    status = updated.status = updated.status or NodeStatus()
    conditions = status.conditions = list(status.conditions or [])
    for condition_type in MONITORED_CONDITIONS:
        condition = node_condition(updated, condition_type)
        if condition is None:
            conditions.append(
                NodeCondition(
                    type=condition_type,
                    status="Unknown",
                    reason="NodeStatusNeverUpdated",
                    message="Kubelet never posted node status.",
                    last_heartbeat_time=node.metadata.creation_timestamp,
                    last_transition_time=now,
                )
            )
        elif condition.status != "Unknown":
            condition.status = "Unknown"
            condition.reason = "NodeStatusUnknown"
            condition.message = "Kubelet stopped posting node status."
            condition.last_transition_time = now
    return updated


class NodeLifecycleController(Controller):
    NAME = NAME
    EVENT_SOURCE = "node-controller"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.grace_period = ctx.options.node_monitor_grace_period
        rate = ctx.options.node_eviction_rate
        self.limiter = TokenBucket(rate, 1, ctx.clock) if rate > 0 else None
        self._health: dict[str, _Health] = {}
        self._tainting: dict[str, float] = {}
        """Node → the monotonic time its rate-limited NoExecute taint may be added."""
        self.nodes = ctx.informers.informer_for(Node)
        self.leases = ctx.informers.informer_for(Lease)
        self.pods = ctx.informers.informer_for(Pod)
        self.nodes.add_event_handler(self.enqueue, self.enqueue_update, self.enqueue)
        self.leases.add_event_handler(self._lease_changed, lambda _, new: self._lease_changed(new))
        self.pods.add_event_handler(self._pod_added, self._pod_updated)

    # Handlers.

    def _lease_changed(self, obj: Any) -> None:
        lease = unwrap(obj)
        if lease.metadata.namespace == NODE_LEASE_NAMESPACE:
            self.queue.add(lease.metadata.name or "")

    def _pod_added(self, pod: Pod) -> None:
        if pod.spec is not None and pod.spec.node_name:
            self.queue.add(pod.spec.node_name)

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        node_name = new.spec.node_name if new.spec else None
        if node_name and node_name != (old.spec.node_name if old.spec else None):
            self.queue.add(node_name)

    async def run(self, workers: int) -> None:
        self.queue.add(MONITOR_KEY)
        await super().run(workers)

    # Syncing.

    async def sync_key(self, key: str) -> None:
        if key == MONITOR_KEY:
            for name in {*self.nodes.lister.keys(), *self._health}:
                self.queue.add(name)
            self.queue.add_after(MONITOR_KEY, NODE_MONITOR_PERIOD)
            return
        node = self.nodes.lister.get(key)
        if node is None:
            self._tainting.pop(key, None)
            gone = self._health.pop(key, None)
            if gone is not None:
                self._node_event(gone.node, "RemovingNode", f"Removing Node {key} from Controller")
            return
        if key not in self._health:
            self._node_event(node, "RegisteredNode", f"Registered Node {key} in Controller")
        now = self.ctx.clock.now()
        health = self._observe(node, now)
        observed = node_condition(node, "Ready")
        grace = self.grace_period if observed is not None else NODE_STARTUP_GRACE_PERIOD
        remaining = (health.probe - now).total_seconds() + grace
        if remaining > 0:
            self.queue.add_after(key, remaining)
        else:
            updated = _conditions_unknown(node, now)
            if updated is not None:
                node = await self.ctx.client.update_status(updated)
                health.node, health.heartbeat = node, _heartbeat(node)
                if observed is not None and observed.status == "True":
                    record_node_status_change(self.ctx.recorder, node, "NodeNotReady")
        ready = node_condition(node, "Ready")
        if ready is not None and ready.status == "Unknown":
            await self._mark_pods_not_ready(key, now)
        await self._taint(node, ready, now)

    def _node_event(self, node: Node, reason: str, message: str) -> None:
        name = node.metadata.name or ""
        self.ctx.recorder.event(node, "Normal", reason, f"Node {name} event: {message}")

    def _observe(self, node: Node, now: datetime.datetime) -> _Health:
        """Record the node's health signals; its probe time moves to ``now`` when one moved."""
        name = node.metadata.name or ""
        heartbeat = _heartbeat(node)
        lease = self.leases.lister.get(f"{NODE_LEASE_NAMESPACE}/{name}")
        renew_time = lease.spec.renew_time if lease is not None and lease.spec else None
        renew = parse_micro_time(renew_time) if renew_time else None
        previous = self._health.get(name)
        if previous is None:
            never_posted = node_condition(node, "Ready") is None
            probe = (node.metadata.creation_timestamp or now) if never_posted else now
        else:
            probe = now if heartbeat != previous.heartbeat else previous.probe
        if renew is not None and (
            previous is None or previous.renew is None or renew > previous.renew
        ):
            probe = now
        health = self._health[name] = _Health(node, heartbeat, renew, probe)
        return health

    async def _mark_pods_not_ready(self, node_name: str, now: datetime.datetime) -> None:
        """Pods on a node that stopped reporting are not Ready (upstream ``MarkPodsNotReady``)."""
        for pod in self.pods.lister.by_index(NODE_NAME_INDEX, node_name):
            conditions = (pod.status.conditions if pod.status else None) or []
            if not any(c.type == "Ready" and c.status != "False" for c in conditions):
                continue
            updated = copy.deepcopy(pod)
            updated.status = msgspec.structs.replace(
                pod.status or PodStatus(),
                conditions=[
                    msgspec.structs.replace(c, status="False", last_transition_time=now)
                    if c.type == "Ready"
                    else c
                    for c in conditions
                ],
            )
            try:
                await self.ctx.client.update_status(updated)
            except ApiError as error:
                if error.not_found:
                    continue
                raise
            self.ctx.recorder.event(pod, "Warning", "NodeNotReady", "Node is not ready")

    async def _taint(self, node: Node, ready: NodeCondition | None, now: datetime.datetime) -> None:
        """Bring the node's condition taints in line with its conditions, in one patch."""
        existing = node_taints(node)
        wanted = self._no_schedule_taints(node)
        wanted += self._no_execute_taints(node, ready, existing)
        managed = [t for t in existing if _managed(t)]
        kept = [t for t in existing if not _managed(t)]
        result = kept + [
            next((t for t in managed if (t.key, t.effect) == key), None)
            or Taint(key=key[0], effect=key[1], time_added=now)
            for key in wanted
        ]
        if {(t.key, t.effect) for t in result} == {(t.key, t.effect) for t in existing}:
            return
        patch = {
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": [codec.to_builtins(taint) for taint in result]},
        }
        await self.ctx.client.patch(Node, node.metadata.name or "", None, patch)

    @staticmethod
    def _no_schedule_taints(node: Node) -> list[tuple[str, str]]:
        wanted = [
            (CONDITION_TAINTS[(c.type or "", c.status or "")], NO_SCHEDULE)
            for c in (node.status.conditions if node.status else None) or ()
            if (c.type or "", c.status or "") in CONDITION_TAINTS
        ]
        if node.spec is not None and node.spec.unschedulable:
            wanted.append((TAINT_UNSCHEDULABLE, NO_SCHEDULE))
        return wanted

    def _no_execute_taints(
        self, node: Node, ready: NodeCondition | None, existing: list[Taint]
    ) -> list[tuple[str, str]]:
        """The NoExecute taint the node should carry now: none while Ready (or while no
        node is), the present one, or a new one once the rate limiter allows."""
        name = node.metadata.name or ""
        key = _NO_EXECUTE_FOR.get(ready.status or "") if ready is not None else None
        if key is None or self._all_disrupted(node, ready):
            self._tainting.pop(name, None)
            return []
        has = {t.key for t in existing if t.effect == NO_EXECUTE}
        if has & set(_NO_EXECUTE_FOR.values()):
            self._tainting.pop(name, None)
            return [(key, NO_EXECUTE)]
        if self.limiter is None:
            return []
        clock = self.ctx.clock.monotonic()
        allowed = self._tainting.setdefault(name, clock + self.limiter.reserve())
        if clock < allowed:
            self.queue.add_after(name, allowed - clock)
            return []
        del self._tainting[name]
        return [(key, NO_EXECUTE)]

    def _all_disrupted(self, node: Node, ready: NodeCondition | None) -> bool:
        """Whether no node takes part in disruption checks as Ready (``node``'s readiness
        is ``ready``, which may be newer than the cache)."""
        for other in self.nodes.lister.list():
            if EXCLUDE_DISRUPTION_LABEL in (other.metadata.labels or {}):
                continue
            if other.metadata.name == node.metadata.name:
                if ready is not None and ready.status == "True":
                    return False
                continue
            condition = node_condition(other, "Ready")
            if condition is not None and condition.status == "True":
                return False
        return True


def _heartbeat(node: Node) -> datetime.datetime | None:
    ready = node_condition(node, "Ready")
    return ready.last_heartbeat_time if ready is not None else None


def _managed(taint: Taint) -> bool:
    """Whether this controller owns the taint: a condition/unschedulable NoSchedule taint or
    a not-ready/unreachable NoExecute taint."""
    if taint.effect == NO_SCHEDULE:
        return taint.key in _NO_SCHEDULE_KEYS
    return taint.effect == NO_EXECUTE and taint.key in _NO_EXECUTE_FOR.values()


def new(ctx: ControllerContext) -> NodeLifecycleController:
    return NodeLifecycleController(ctx)
