"""The scheduling queue: which pending pod the scheduler tries next, and when a rejected pod
is worth trying again (upstream ``pkg/scheduler/backend/queue/scheduling_queue.go``).

A pending pod lives in exactly one of three places:

* the **active queue**, a heap ordered by the QueueSort plugin's ``less``; ``pop`` takes its
  head and waits while it is empty;
* the **backoff queue**, ordered by when each pod's backoff expires.  The backoff doubles with
  every scheduling attempt, from ``initial_backoff`` (1 s) up to ``max_backoff`` (10 s), so a
  pod that keeps failing does not starve the others.  ``flush_backoff_completed`` (every
  second) moves pods whose backoff is over to the active queue;
* the **unschedulable pool**, for pods every node rejected.  They leave it only when a cluster
  event that one of their rejecting plugins registered for happens and that plugin's queueing
  hint says the event may help (``move_all_to_active_or_backoff``), or after
  ``max_in_unschedulable`` (5 minutes) as a safety net.  Pods a PreEnqueue plugin refuses
  (scheduling gates) wait here too, marked ``gated``, until an update lets them through.

Between ``pop`` and the verdict a pod is *in flight*.  A cluster event during that time may be
the very one that makes it schedulable, and it would be lost if the pod then went to the
unschedulable pool; so every move request records the current scheduling cycle, and a pod
rejected in a cycle that started before the last move request goes to the backoff queue
instead (upstream's ``moveRequestCycle``).  Updates and deletions of in-flight pods are
remembered and applied when the pod comes back.

The queue also keeps the nominator: the pods preemption nominated to a node, which Filter must
count as if they were already running there.

Everything runs on one event loop, so there are no locks; time comes from the injected clock.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from controlplane.scheduler.framework.interface import (
    SUCCESS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import PodInfo, QueuedPodInfo, pod_requests
from controlplane.scheduler.names import POD_TOPOLOGY_SPREAD
from kube.api.kinds.core_v1.pod import Pod
from kube.clock import Clock

DEFAULT_INITIAL_BACKOFF = 1.0
DEFAULT_MAX_BACKOFF = 10.0
DEFAULT_MAX_IN_UNSCHEDULABLE = 5 * 60.0
"""podMaxInUnschedulablePodsDuration: the longest a pod waits for an event that may help."""
BACKOFF_FLUSH_PERIOD = 1.0
UNSCHEDULABLE_FLUSH_PERIOD = 30.0

UNSCHEDULABLE_TIMEOUT = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "UnschedulableTimeout")
"""The event pods leave the unschedulable pool with after ``max_in_unschedulable``."""
ASSIGNED_POD_ADD = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd")

LessFn = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
PreEnqueueFn = Callable[[Pod], Status]
"""Runs the PreEnqueue plugins; a refusal names the refusing plugin in ``Status.plugin``."""
PreEnqueueCheck = Callable[[Pod], bool]
NamespaceLabels = Callable[[str], Mapping[str, str]]

log = logging.getLogger(__name__)


class Closed(Exception):
    """The queue was closed and has nothing left to pop."""


class _Requeue(enum.Enum):
    SKIP = enum.auto()
    AFTER_BACKOFF = enum.auto()
    IMMEDIATELY = enum.auto()


class _Where(enum.Enum):
    ACTIVE = enum.auto()
    BACKOFF = enum.auto()
    UNSCHEDULABLE = enum.auto()


class PendingPods(NamedTuple):
    """How many pods wait where (the ``scheduler_pending_pods`` metric's queues)."""

    active: int
    backoff: int
    unschedulable: int
    gated: int

    def __str__(self) -> str:
        return (
            f"activeQ:{self.active}; backoffQ:{self.backoff}; "
            f"unschedulablePods:{self.unschedulable}; gatedPods:{self.gated}"
        )


class _Entry:
    """A heap slot; a removed or re-pushed pod leaves its old slot behind, marked dead."""

    __slots__ = ("alive", "less", "qpi")

    def __init__(self, qpi: QueuedPodInfo, less: LessFn) -> None:
        self.qpi = qpi
        self.less = less
        self.alive = True

    def __lt__(self, other: _Entry) -> bool:
        return self.less(self.qpi, other.qpi)


class _Heap:
    """Pods keyed by uid in ``less`` order, with O(log n) removal by lazy deletion."""

    def __init__(self, less: LessFn) -> None:
        self._less = less
        self._heap: list[_Entry] = []
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, uid: str) -> bool:
        return uid in self._entries

    def __iter__(self) -> Iterator[QueuedPodInfo]:
        return (entry.qpi for entry in self._entries.values())

    def get(self, uid: str) -> QueuedPodInfo | None:
        entry = self._entries.get(uid)
        return entry.qpi if entry else None

    def push(self, qpi: QueuedPodInfo) -> None:
        """Add the pod, or re-place it if it is already here (its order may have changed)."""
        self.remove(qpi.info.uid)
        entry = _Entry(qpi, self._less)
        self._entries[qpi.info.uid] = entry
        heapq.heappush(self._heap, entry)

    def remove(self, uid: str) -> QueuedPodInfo | None:
        entry = self._entries.pop(uid, None)
        if entry is None:
            return None
        entry.alive = False
        if len(self._heap) > 2 * len(self._entries) + 64:
            self._heap = [slot for slot in self._heap if slot.alive]
            heapq.heapify(self._heap)
        return entry.qpi

    def peek(self) -> QueuedPodInfo | None:
        while self._heap and not self._heap[0].alive:
            heapq.heappop(self._heap)
        return self._heap[0].qpi if self._heap else None

    def pop(self) -> QueuedPodInfo | None:
        head = self.peek()
        if head is not None:
            heapq.heappop(self._heap)
            del self._entries[head.info.uid]
        return head


@dataclass(slots=True)
class _InFlight:
    """What happened to a popped pod while it was being scheduled."""

    pod: Pod
    updated: bool = False
    deleted: bool = False


class Nominator:
    """Pods nominated to nodes by preemption, until they are bound or deleted."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def nominate(self, info: PodInfo, node_name: str | None = None) -> None:
        """Nominate the pod to ``node_name`` (None: its ``status.nominatedNodeName``); an
        empty name only drops the old nomination."""
        self.delete_nomination(info.pod)
        if node_name is None:
            node_name = (info.pod.status.nominated_node_name if info.pod.status else None) or ""
        if not node_name:
            return
        self._node_of[info.uid] = node_name
        self._by_node.setdefault(node_name, {})[info.uid] = info

    def update_nomination(self, old: Pod, new: PodInfo) -> None:
        """Carry the nomination over to the pod's new version.

        An update that neither sets nor clears ``nominatedNodeName`` keeps the nomination the
        scheduler made itself: preemption nominates before the API server has the new status.
        """
        node_name: str | None = None
        if not _nominated_node(old) and not _nominated_node(new.pod):
            node_name = self._node_of.get(new.uid)
        self.nominate(new, node_name)

    def delete_nomination(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        node_name = self._node_of.pop(uid, None)
        if node_name is None:
            return
        pods = self._by_node[node_name]
        del pods[uid]
        if not pods:
            del self._by_node[node_name]

    def nominated_node(self, uid: str) -> str | None:
        return self._node_of.get(uid)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self._by_node.get(node_name, {}).values())

    def nominated_nodes(self) -> set[str]:
        """The nodes some pod is nominated to (usually none)."""
        return {name for name, pods in self._by_node.items() if pods}


def _nominated_node(pod: Pod) -> str:
    return (pod.status.nominated_node_name if pod.status else None) or ""


def _scheduling_relevant(pod: Pod) -> tuple[Any, ...]:
    """What an update must change to be worth a look: not status or bookkeeping."""
    meta = pod.metadata
    return (meta.labels, meta.annotations, meta.owner_references, pod.spec)


def pod_update_events(old: Pod, new: Pod) -> list[ClusterEvent]:
    """The events an update of a pod is (upstream ``PodSchedulingPropertiesChange``).

    An update that changes none of the properties plugins register for specifically is a
    plain ``Update`` of the pod's resource; one that changes nothing but status and
    bookkeeping is no event at all.
    """
    if _scheduling_relevant(old) == _scheduling_relevant(new):
        return []
    resource = (
        EventResource.ASSIGNED_POD
        if new.spec is not None and new.spec.node_name
        else EventResource.UNSCHEDULED_POD
    )
    actions: list[ActionType] = []
    if (old.metadata.labels or {}) != (new.metadata.labels or {}):
        actions.append(ActionType.UPDATE_POD_LABEL)
    old_requests, new_requests = pod_requests(old), pod_requests(new)
    if any(
        new_requests.get(name) < old_requests.get(name)
        for name in set(old_requests.names()) | set(new_requests.names())
    ):
        actions.append(ActionType.UPDATE_POD_SCALE_DOWN)
    old_spec, new_spec = old.spec, new.spec
    if (
        old_spec is not None
        and old_spec.scheduling_gates
        and not (new_spec is not None and new_spec.scheduling_gates)
    ):
        actions.append(ActionType.UPDATE_POD_SCHEDULING_GATES)
    if (old_spec.tolerations if old_spec else None) != (new_spec.tolerations if new_spec else None):
        actions.append(ActionType.UPDATE_POD_TOLERATION)
    return [ClusterEvent(resource, action) for action in actions or [ActionType.UPDATE]]


class SchedulingQueue:
    """The pending pods of one scheduler: active heap, backoff heap, unschedulable pool.

    ``less`` is the QueueSort plugin's; ``pre_enqueue`` runs the PreEnqueue plugins before a
    pod may enter the active queue; ``events_by_plugin`` maps each plugin to the cluster events
    (with optional queueing hints) that may undo its rejections; ``namespace_labels`` resolves
    affinity namespace selectors when an assigned pod arrives.
    """

    def __init__(
        self,
        less: LessFn,
        clock: Clock,
        *,
        pre_enqueue: PreEnqueueFn | None = None,
        events_by_plugin: Mapping[str, list[ClusterEventWithHint]] | None = None,
        namespace_labels: NamespaceLabels | None = None,
        initial_backoff: float = DEFAULT_INITIAL_BACKOFF,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        max_in_unschedulable: float = DEFAULT_MAX_IN_UNSCHEDULABLE,
    ) -> None:
        self._clock = clock
        self._pre_enqueue = pre_enqueue
        self._events_by_plugin = dict(events_by_plugin or {})
        self._namespace_labels = namespace_labels
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self._active = _Heap(less)
        self._backoff = _Heap(lambda a, b: self.backoff_expiry(a) < self.backoff_expiry(b))
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._in_flight: dict[str, _InFlight] = {}
        self._nominator = Nominator()
        self._scheduling_cycle = 0
        self._move_request_cycle = -1
        self._wakeup = asyncio.Event()
        self._closed = asyncio.Event()

    # --- entering and leaving -------------------------------------------------------------

    def add(self, pod: Pod) -> None:
        """A new pending pod (the informer's add of an unassigned pod)."""
        qpi = QueuedPodInfo(PodInfo.of(pod), timestamp=self._clock.monotonic())
        self._backoff.remove(qpi.info.uid)
        self._add_to_active(qpi)
        self._nominator.nominate(qpi.info)

    def update(self, old: Pod, new: Pod) -> None:
        """An update of a pending pod; it may make the pod schedulable."""
        uid = new.metadata.uid or ""
        info = PodInfo.of(new)
        in_flight = self._in_flight.get(uid)
        if in_flight is not None:
            in_flight.pod = new
            in_flight.updated = in_flight.updated or bool(pod_update_events(old, new))
            self._nominator.update_nomination(old, info)
            return
        for heap in (self._active, self._backoff):
            qpi = heap.get(uid)
            if qpi is not None:
                qpi.info = info
                heap.push(qpi)
                self._nominator.update_nomination(old, info)
                return
        qpi = self._unschedulable.get(uid)
        if qpi is None:
            self.add(new)
            return
        qpi.info = info
        self._nominator.update_nomination(old, info)
        if qpi.gated:
            self._add_to_active(qpi)
            return
        for event in pod_update_events(old, new):
            strategy = self._worth_requeuing(qpi, event, old, new)
            if strategy is not _Requeue.SKIP:
                del self._unschedulable[uid]
                self._requeue(qpi, strategy)
                return

    def delete(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        self._nominator.delete_nomination(pod)
        in_flight = self._in_flight.get(uid)
        if in_flight is not None:
            in_flight.deleted = True
        self._active.remove(uid)
        self._backoff.remove(uid)
        self._unschedulable.pop(uid, None)

    async def pop(self) -> QueuedPodInfo:
        """The next pod to schedule, waiting for one; Closed once closed and empty.

        The pod is in flight from now until ``done`` (or ``add_unschedulable_if_not_present``).
        """
        while True:
            qpi = self._active.pop()
            if qpi is not None:
                break
            if self._closed.is_set():
                raise Closed("scheduling queue is closed")
            self._wakeup.clear()
            await self._wakeup.wait()
        self._scheduling_cycle += 1
        qpi.attempts += 1
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self._clock.monotonic()
        qpi.unschedulable_plugins = set()
        qpi.pending_plugins = set()
        self._in_flight[qpi.info.uid] = _InFlight(qpi.pod)
        return qpi

    def done(self, uid: str) -> None:
        """The pod's scheduling attempt is over (bound, or handed back to the queue)."""
        self._in_flight.pop(uid, None)

    def add_unschedulable_if_not_present(
        self, qpi: QueuedPodInfo, pod_scheduling_cycle: int
    ) -> bool:
        """Take back a pod its cycle could not place; False if it is queued or gone already.

        It goes to the unschedulable pool unless a move request arrived since its cycle
        started, it was updated meanwhile, or no plugin rejected it (an error): then it is
        retried after its backoff.
        """
        uid = qpi.info.uid
        in_flight = self._in_flight.pop(uid, None)
        if uid in self._unschedulable or uid in self._active or uid in self._backoff:
            return False
        if in_flight is not None:
            if in_flight.deleted:
                return False
            if in_flight.pod is not qpi.pod:
                qpi.info = PodInfo.of(in_flight.pod)
        qpi.timestamp = self._clock.monotonic()
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        updated = in_flight is not None and in_flight.updated
        if self._move_request_cycle >= pod_scheduling_cycle or not rejectors or updated:
            self._backoff.push(qpi)
        else:
            self._unschedulable[uid] = qpi
        self._nominator.nominate(qpi.info)
        return True

    # --- cluster events ------------------------------------------------------------------

    def move_all_to_active_or_backoff(
        self,
        event: ClusterEvent,
        old: Any = None,
        new: Any = None,
        pre_check: PreEnqueueCheck | None = None,
    ) -> None:
        """Give the pods ``event`` may help (and ``pre_check`` accepts) another attempt."""
        pods = [
            qpi for qpi in self._unschedulable.values() if pre_check is None or pre_check(qpi.pod)
        ]
        self._move(pods, event, old, new)

    def assigned_pod_added(self, pod: Pod) -> None:
        """A pod was bound: only pods whose cross-node terms it may satisfy can benefit."""
        self._move(self._pods_with_cross_topology_term(pod), ASSIGNED_POD_ADD, None, pod)

    def assigned_pod_updated(self, old: Pod, new: Pod) -> None:
        """A bound pod changed; shrinking requests may help anyone, labels only cross-node
        terms."""
        for event in pod_update_events(old, new):
            if event.action & ActionType.UPDATE_POD_SCALE_DOWN:
                self.move_all_to_active_or_backoff(event, old, new)
            else:
                self._move(self._pods_with_cross_topology_term(new), event, old, new)

    def _pods_with_cross_topology_term(self, pod: Pod) -> list[QueuedPodInfo]:
        namespace = pod.metadata.namespace or ""
        labels = self._namespace_labels(namespace) if self._namespace_labels else {}
        return [
            qpi
            for qpi in self._unschedulable.values()
            if (
                POD_TOPOLOGY_SPREAD in qpi.unschedulable_plugins
                and qpi.pod.metadata.namespace == namespace
            )
            or any(term.matches(pod, labels) for term in qpi.info.required_affinity)
        ]

    def _move(self, pods: list[QueuedPodInfo], event: ClusterEvent, old: Any, new: Any) -> None:
        for qpi in pods:
            strategy = self._worth_requeuing(qpi, event, old, new)
            if strategy is _Requeue.SKIP:
                continue
            del self._unschedulable[qpi.info.uid]
            self._requeue(qpi, strategy)
        self._move_request_cycle = self._scheduling_cycle

    def _worth_requeuing(
        self, qpi: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any
    ) -> _Requeue:
        """Whether ``event`` may help the pod: a rejecting plugin registered for it and its
        hint does not say SKIP.  A pending plugin's QUEUE skips the backoff."""
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if not rejectors:
            return _Requeue.AFTER_BACKOFF
        if event.resource is EventResource.WILDCARD:
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            return _Requeue.AFTER_BACKOFF
        strategy = _Requeue.SKIP
        for plugin in rejectors:
            for registered in self._events_by_plugin.get(plugin, ()):
                if not registered.event.matches(event):
                    continue
                if _hint(registered, qpi.pod, old, new) is QueueingHint.SKIP:
                    continue
                if plugin in qpi.pending_plugins:
                    return _Requeue.IMMEDIATELY
                strategy = _Requeue.AFTER_BACKOFF
        return strategy

    def _requeue(self, qpi: QueuedPodInfo, strategy: _Requeue) -> _Where:
        """Put a pod that left the unschedulable pool where ``strategy`` says."""
        if strategy is _Requeue.AFTER_BACKOFF and self.is_backing_off(qpi):
            self._backoff.push(qpi)
            return _Where.BACKOFF
        if self._add_to_active(qpi):
            return _Where.ACTIVE
        return _Where.UNSCHEDULABLE

    def _add_to_active(self, qpi: QueuedPodInfo) -> bool:
        """Run PreEnqueue; a pod it refuses is parked, gated, in the unschedulable pool."""
        uid = qpi.info.uid
        status = self._pre_enqueue(qpi.pod) if self._pre_enqueue else SUCCESS
        if not status.is_success:
            qpi.gated = True
            qpi.unschedulable_plugins = {status.plugin} if status.plugin else set()
            self._unschedulable[uid] = qpi
            return False
        qpi.gated = False
        self._unschedulable.pop(uid, None)
        self._backoff.remove(uid)
        self._active.push(qpi)
        self._wakeup.set()
        return True

    # --- backoff and flushing ------------------------------------------------------------

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        """``initial_backoff`` doubled for each attempt after the first, at most
        ``max_backoff``; a pod never attempted has none."""
        if qpi.attempts == 0:
            return 0.0
        duration = self.initial_backoff
        for _ in range(1, qpi.attempts):
            if duration >= self.max_backoff - duration:
                return self.max_backoff
            duration += duration
        return duration

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        return qpi.timestamp + self.backoff_duration(qpi)

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        return self.backoff_expiry(qpi) > self._clock.monotonic()

    def flush_backoff_completed(self) -> None:
        """Move the pods whose backoff is over to the active queue."""
        while (head := self._backoff.peek()) is not None and not self.is_backing_off(head):
            self._backoff.pop()
            self._add_to_active(head)

    def flush_unschedulable_leftover(self) -> None:
        """Retry the pods that waited in the unschedulable pool longer than
        ``max_in_unschedulable``."""
        now = self._clock.monotonic()
        stale = [
            qpi
            for qpi in self._unschedulable.values()
            if now - qpi.timestamp > self.max_in_unschedulable
        ]
        if stale:
            self._move(stale, UNSCHEDULABLE_TIMEOUT, None, None)

    async def run(self) -> None:
        """Flush the backoff queue every second and the unschedulable pool every 30 s, until
        ``close``."""
        tasks = [
            asyncio.create_task(self._every(BACKOFF_FLUSH_PERIOD, self.flush_backoff_completed)),
            asyncio.create_task(
                self._every(UNSCHEDULABLE_FLUSH_PERIOD, self.flush_unschedulable_leftover)
            ),
        ]
        try:
            await self._closed.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _every(self, period: float, flush: Callable[[], None]) -> None:
        while True:
            flush()
            await self._clock.sleep(period)

    def close(self) -> None:
        """Stop ``run`` and make ``pop`` raise Closed once the active queue is empty."""
        self._closed.set()
        self._wakeup.set()

    # --- nominations ---------------------------------------------------------------------

    def nominate(self, info: PodInfo, node_name: str | None = None) -> None:
        self._nominator.nominate(info, node_name)

    def delete_nomination(self, pod: Pod) -> None:
        self._nominator.delete_nomination(pod)

    def nominated_node(self, uid: str) -> str | None:
        return self._nominator.nominated_node(uid)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self._nominator.nominated_pods_for_node(node_name)

    def nominated_nodes(self) -> set[str]:
        return self._nominator.nominated_nodes()

    # --- inspection ----------------------------------------------------------------------

    @property
    def scheduling_cycle(self) -> int:
        """How many pods were popped; a pod's cycle is this number right after its pop."""
        return self._scheduling_cycle

    def pending_pods(self) -> PendingPods:
        gated = sum(1 for qpi in self._unschedulable.values() if qpi.gated)
        return PendingPods(
            len(self._active), len(self._backoff), len(self._unschedulable) - gated, gated
        )

    def where(self, uid: str) -> str | None:
        """Which sub-queue holds the pod: active, backoff, unschedulable, gated, in-flight."""
        if uid in self._active:
            return "active"
        if uid in self._backoff:
            return "backoff"
        qpi = self._unschedulable.get(uid)
        if qpi is not None:
            return "gated" if qpi.gated else "unschedulable"
        return "in-flight" if uid in self._in_flight else None


def _hint(registered: ClusterEventWithHint, pod: Pod, old: Any, new: Any) -> QueueingHint:
    """The plugin's hint for the event; no hint, or a hint that fails, means QUEUE."""
    if registered.hint is None:
        return QueueingHint.QUEUE
    try:
        return registered.hint(pod, old, new)
    except Exception:
        log.exception("queueing hint failed for pod %s; queueing it", pod.metadata.name)
        return QueueingHint.QUEUE
