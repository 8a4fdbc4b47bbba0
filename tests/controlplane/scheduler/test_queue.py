from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping

import pytest

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import (
    SUCCESS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import PodInfo, QueuedPodInfo
from controlplane.scheduler.queue import (
    UNSCHEDULABLE_TIMEOUT,
    Closed,
    PendingPods,
    SchedulingQueue,
    pod_update_events,
)
from kube.api.kinds.core_v1.pod import (
    Affinity,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodStatus,
    Toleration,
)
from kube.api.meta_v1 import LabelSelector
from kube.clock import FakeClock
from tests.controlplane.scheduler.builders import make_pod

NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD)
NODE_DELETE = ClusterEvent(EventResource.NODE, ActionType.DELETE)
NODE_TAINT = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT)
PLUGIN = "Fit"
OTHER = "Other"


def priority_less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    if a.info.priority != b.info.priority:
        return a.info.priority > b.info.priority
    return a.timestamp < b.timestamp


def gates(pod: Pod) -> Status:
    if pod.spec is not None and pod.spec.scheduling_gates:
        return Status.unresolvable("waiting for scheduling gates").with_plugin(
            names.SCHEDULING_GATES
        )
    return SUCCESS


def new_queue(
    clock: FakeClock,
    events: Mapping[str, list[ClusterEventWithHint]] | None = None,
    *,
    initial_backoff: float = 1.0,
    max_backoff: float = 10.0,
    max_in_unschedulable: float = 300.0,
) -> SchedulingQueue:
    return SchedulingQueue(
        priority_less,
        clock,
        pre_enqueue=gates,
        events_by_plugin=events,
        initial_backoff=initial_backoff,
        max_backoff=max_backoff,
        max_in_unschedulable=max_in_unschedulable,
    )


def uid(pod: Pod) -> str:
    return pod.metadata.uid or ""


async def reject(
    queue: SchedulingQueue,
    pod: Pod,
    unschedulable: Iterable[str] = (),
    pending: Iterable[str] = (),
) -> QueuedPodInfo:
    """Add, pop and hand the pod back as rejected by the given plugins."""
    queue.add(pod)
    qpi = await queue.pop()
    qpi.unschedulable_plugins = set(unschedulable)
    qpi.pending_plugins = set(pending)
    assert queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    return qpi


@pytest.mark.parametrize(
    ("attempts", "initial", "maximum", "expected"),
    [
        pytest.param(0, 1.0, 10.0, 0.0, id="never-attempted"),
        pytest.param(1, 1.0, 10.0, 1.0, id="first"),
        pytest.param(2, 1.0, 10.0, 2.0, id="doubles"),
        pytest.param(3, 1.0, 10.0, 4.0, id="doubles-again"),
        pytest.param(4, 1.0, 10.0, 8.0, id="eight"),
        pytest.param(5, 1.0, 10.0, 10.0, id="capped"),
        pytest.param(30, 1.0, 10.0, 10.0, id="stays-capped"),
        pytest.param(3, 0.5, 3.0, 2.0, id="custom-initial"),
        pytest.param(4, 0.5, 3.0, 3.0, id="custom-cap"),
    ],
)
def test_backoff_duration(attempts: int, initial: float, maximum: float, expected: float) -> None:
    queue = new_queue(FakeClock(), initial_backoff=initial, max_backoff=maximum)
    qpi = QueuedPodInfo(PodInfo.of(make_pod()), timestamp=0.0, attempts=attempts)
    assert queue.backoff_duration(qpi) == expected


async def test_backoff_expires_after_duration() -> None:
    clock = FakeClock()
    queue = new_queue(clock)
    pod = make_pod("p")
    for attempt, wait in [(1, 1.0), (2, 2.0), (3, 4.0)]:
        qpi = await reject(queue, pod) if attempt == 1 else await queue.pop()
        if attempt > 1:
            assert queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
        assert qpi.attempts == attempt
        assert queue.where(uid(pod)) == "backoff"
        await clock.advance(wait - 0.1)
        queue.flush_backoff_completed()
        assert queue.where(uid(pod)) == "backoff"
        await clock.advance(0.2)
        queue.flush_backoff_completed()
        assert queue.where(uid(pod)) == "active"


async def test_pop_order_by_priority_then_age() -> None:
    clock = FakeClock()
    queue = new_queue(clock)
    for name, priority in [("low", 1), ("high", 100), ("mid", 10), ("mid-later", 10)]:
        queue.add(make_pod(name, priority=priority))
        await clock.advance(1)
    popped = [(await queue.pop()).pod.metadata.name for _ in range(4)]
    assert popped == ["high", "mid", "mid-later", "low"]
    assert queue.scheduling_cycle == 4


def hint_of(result: QueueingHint) -> Callable[[Pod, object, object], QueueingHint]:
    return lambda pod, old, new: result


def failing_hint(pod: Pod, old: object, new: object) -> QueueingHint:
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("unschedulable", "pending", "registered", "event", "wait", "expected"),
    [
        pytest.param(
            {PLUGIN}, set(), {PLUGIN: [ClusterEventWithHint(NODE_ADD)]}, NODE_ADD, 0.0,
            "backoff", id="matching-event-still-backing-off",
        ),
        pytest.param(
            {PLUGIN}, set(), {PLUGIN: [ClusterEventWithHint(NODE_ADD)]}, NODE_ADD, 5.0,
            "active", id="matching-event-backoff-over",
        ),
        pytest.param(
            {PLUGIN}, set(), {PLUGIN: [ClusterEventWithHint(NODE_ADD)]}, NODE_DELETE, 5.0,
            "unschedulable", id="other-action",
        ),
        pytest.param(
            {PLUGIN}, set(),
            {PLUGIN: [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.UPDATE))]},
            NODE_TAINT, 5.0, "active", id="update-covers-taint-update",
        ),
        pytest.param(
            {PLUGIN}, set(),
            {PLUGIN: [ClusterEventWithHint(NODE_ADD, hint_of(QueueingHint.SKIP))]},
            NODE_ADD, 5.0, "unschedulable", id="hint-skip",
        ),
        pytest.param(
            {PLUGIN}, set(),
            {PLUGIN: [ClusterEventWithHint(NODE_ADD, hint_of(QueueingHint.QUEUE))]},
            NODE_ADD, 0.0, "backoff", id="hint-queue",
        ),
        pytest.param(
            {PLUGIN}, set(), {PLUGIN: [ClusterEventWithHint(NODE_ADD, failing_hint)]},
            NODE_ADD, 0.0, "backoff", id="failing-hint-queues",
        ),
        pytest.param(
            {PLUGIN}, set(), {OTHER: [ClusterEventWithHint(NODE_ADD)]}, NODE_ADD, 5.0,
            "unschedulable", id="event-of-a-plugin-that-did-not-reject",
        ),
        pytest.param(
            {PLUGIN, OTHER}, set(),
            {
                PLUGIN: [ClusterEventWithHint(NODE_ADD, hint_of(QueueingHint.SKIP))],
                OTHER: [ClusterEventWithHint(NODE_ADD)],
            },
            NODE_ADD, 0.0, "backoff", id="any-rejector-may-queue",
        ),
        pytest.param(
            set(), {PLUGIN}, {PLUGIN: [ClusterEventWithHint(NODE_ADD)]}, NODE_ADD, 0.0,
            "active", id="pending-plugin-skips-backoff",
        ),
        pytest.param(
            {PLUGIN}, set(),
            {PLUGIN: [ClusterEventWithHint(ClusterEvent(EventResource.WILDCARD, ActionType.ALL))]},
            NODE_DELETE, 0.0, "backoff", id="wildcard-registration",
        ),
        pytest.param(
            {PLUGIN}, set(), {}, UNSCHEDULABLE_TIMEOUT, 0.0, "backoff", id="wildcard-event",
        ),
    ],
)  # fmt: skip
async def test_move_on_event(
    unschedulable: set[str],
    pending: set[str],
    registered: Mapping[str, list[ClusterEventWithHint]],
    event: ClusterEvent,
    wait: float,
    expected: str,
) -> None:
    clock = FakeClock()
    queue = new_queue(clock, registered)
    pod = make_pod()
    await reject(queue, pod, unschedulable, pending)
    assert queue.where(uid(pod)) == "unschedulable"
    await clock.advance(wait)
    queue.move_all_to_active_or_backoff(event, None, None)
    assert queue.where(uid(pod)) == expected


async def test_move_honours_pre_check() -> None:
    queue = new_queue(FakeClock(), {PLUGIN: [ClusterEventWithHint(NODE_ADD)]})
    kept, moved = make_pod("kept"), make_pod("moved")
    for pod in (kept, moved):
        await reject(queue, pod, {PLUGIN})
    queue.move_all_to_active_or_backoff(
        NODE_ADD, None, None, pre_check=lambda pod: pod.metadata.name == "moved"
    )
    assert (queue.where(uid(kept)), queue.where(uid(moved))) == ("unschedulable", "backoff")


async def test_hint_receives_pod_and_objects() -> None:
    seen: list[tuple[str | None, object, object]] = []

    def hint(pod: Pod, old: object, new: object) -> QueueingHint:
        seen.append((pod.metadata.name, old, new))
        return QueueingHint.SKIP

    queue = new_queue(FakeClock(), {PLUGIN: [ClusterEventWithHint(NODE_ADD, hint)]})
    await reject(queue, make_pod("p"), {PLUGIN})
    queue.move_all_to_active_or_backoff(NODE_ADD, "old", "new")
    assert seen == [("p", "old", "new")]


@pytest.mark.parametrize(
    ("move_during_cycle", "unschedulable", "expected"),
    [
        pytest.param(False, {PLUGIN}, "unschedulable", id="no-move-request"),
        pytest.param(True, {PLUGIN}, "backoff", id="move-request-during-cycle"),
        pytest.param(False, set(), "backoff", id="error-without-rejecting-plugin"),
    ],
)
async def test_move_request_cycle(
    move_during_cycle: bool, unschedulable: set[str], expected: str
) -> None:
    queue = new_queue(FakeClock(), {PLUGIN: [ClusterEventWithHint(NODE_ADD)]})
    pod = make_pod()
    queue.add(pod)
    qpi = await queue.pop()
    cycle = queue.scheduling_cycle
    if move_during_cycle:
        queue.move_all_to_active_or_backoff(NODE_ADD)
    qpi.unschedulable_plugins = set(unschedulable)
    assert queue.add_unschedulable_if_not_present(qpi, cycle)
    assert queue.where(uid(pod)) == expected


async def test_move_request_before_cycle_does_not_count() -> None:
    queue = new_queue(FakeClock(), {PLUGIN: [ClusterEventWithHint(NODE_ADD)]})
    queue.move_all_to_active_or_backoff(NODE_ADD)
    pod = make_pod()
    await reject(queue, pod, {PLUGIN})
    assert queue.where(uid(pod)) == "unschedulable"


async def test_in_flight_update_and_delete() -> None:
    queue = new_queue(FakeClock())
    updated, deleted = make_pod("updated"), make_pod("deleted")
    queue.add(updated)
    queue.add(deleted)
    first, second = await queue.pop(), await queue.pop()
    relabelled = make_pod("updated", labels={"a": "b"})
    queue.update(updated, relabelled)
    queue.delete(deleted)
    for qpi in (first, second):
        qpi.unschedulable_plugins = {PLUGIN}
    assert queue.add_unschedulable_if_not_present(first, queue.scheduling_cycle)
    assert not queue.add_unschedulable_if_not_present(second, queue.scheduling_cycle)
    assert queue.where(uid(updated)) == "backoff"
    assert first.pod is relabelled
    assert queue.where(uid(deleted)) is None


async def test_add_unschedulable_refuses_queued_pod() -> None:
    queue = new_queue(FakeClock())
    pod = make_pod()
    queue.add(pod)
    qpi = await queue.pop()
    queue.add(pod)
    assert not queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    assert queue.where(uid(pod)) == "active"


@pytest.mark.parametrize(
    ("new_gates", "expected"),
    [
        pytest.param((), "active", id="gates-removed"),
        pytest.param(("g2",), "gated", id="still-gated"),
    ],
)
async def test_gated_pod(new_gates: tuple[str, ...], expected: str) -> None:
    queue = new_queue(FakeClock())
    pod = make_pod(scheduling_gates=("g1", "g2"))
    queue.add(pod)
    assert queue.where(uid(pod)) == "gated"
    assert queue.pending_pods() == PendingPods(active=0, backoff=0, unschedulable=0, gated=1)
    queue.move_all_to_active_or_backoff(UNSCHEDULABLE_TIMEOUT)
    assert queue.where(uid(pod)) == "gated"
    queue.update(pod, make_pod(scheduling_gates=new_gates))
    assert queue.where(uid(pod)) == expected


@pytest.mark.parametrize(
    ("registered", "new", "expected"),
    [
        pytest.param(
            ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_LABEL),
            make_pod(labels={"x": "y"}), "backoff", id="label-change",
        ),
        pytest.param(
            ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION),
            make_pod(labels={"x": "y"}), "unschedulable", id="unregistered-change",
        ),
        pytest.param(
            ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_LABEL),
            make_pod(), "unschedulable", id="no-change",
        ),
    ],
)  # fmt: skip
async def test_update_of_unschedulable_pod(
    registered: ClusterEvent, new: Pod, expected: str
) -> None:
    queue = new_queue(FakeClock(), {PLUGIN: [ClusterEventWithHint(registered)]})
    pod = make_pod()
    await reject(queue, pod, {PLUGIN})
    queue.update(pod, new)
    assert queue.where(uid(pod)) == expected


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(make_pod(), make_pod(), [], id="identical"),
        pytest.param(
            make_pod(labels={"a": "1"}), make_pod(labels={"a": "2"}),
            [ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_LABEL)],
            id="labels",
        ),
        pytest.param(
            make_pod(node_name="n", requests={"cpu": "2"}),
            make_pod(node_name="n", requests={"cpu": "1"}),
            [ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_SCALE_DOWN)],
            id="scale-down",
        ),
        pytest.param(
            make_pod(scheduling_gates=("g",)), make_pod(),
            [ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES)],
            id="gates-eliminated",
        ),
        pytest.param(
            make_pod(), make_pod(tolerations=[Toleration(key="k", operator="Exists")]),
            [ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION)],
            id="tolerations",
        ),
        pytest.param(
            make_pod(requests={"cpu": "1"}), make_pod(requests={"cpu": "2"}),
            [ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE)],
            id="other-update",
        ),
    ],
)  # fmt: skip
def test_pod_update_events(old: Pod, new: Pod, expected: list[ClusterEvent]) -> None:
    assert pod_update_events(old, new) == expected


def test_status_only_update_is_no_event() -> None:
    old = make_pod()
    new = make_pod()
    new.status = PodStatus(nominated_node_name="n")
    new.metadata.resource_version = "7"
    assert pod_update_events(old, new) == []


async def test_flush_unschedulable_after_max_duration() -> None:
    clock = FakeClock()
    queue = new_queue(clock)
    pod = make_pod()
    await reject(queue, pod, {PLUGIN})
    await clock.advance(299)
    queue.flush_unschedulable_leftover()
    assert queue.where(uid(pod)) == "unschedulable"
    await clock.advance(2)
    queue.flush_unschedulable_leftover()
    assert queue.where(uid(pod)) == "active"


async def test_run_flushes_and_close_stops() -> None:
    clock = FakeClock()
    queue = new_queue(clock, max_in_unschedulable=60)
    backing_off, unschedulable = make_pod("b"), make_pod("u")
    await reject(queue, backing_off)
    await reject(queue, unschedulable, {PLUGIN})
    runner = asyncio.create_task(queue.run())
    await asyncio.sleep(0)
    await clock.advance(1.5)
    assert queue.where(uid(backing_off)) == "active"
    assert queue.where(uid(unschedulable)) == "unschedulable"
    await clock.advance(60)
    assert queue.where(uid(unschedulable)) == "active"
    queue.close()
    await asyncio.wait_for(runner, 1)


async def test_pop_waits_and_close() -> None:
    queue = new_queue(FakeClock())
    waiter = asyncio.create_task(queue.pop())
    await asyncio.sleep(0)
    assert not waiter.done()
    queue.add(make_pod("late"))
    assert (await asyncio.wait_for(waiter, 1)).pod.metadata.name == "late"
    queue.add(make_pod("left"))
    queue.close()
    assert (await queue.pop()).pod.metadata.name == "left"
    with pytest.raises(Closed):
        await queue.pop()


async def test_close_wakes_waiting_pop() -> None:
    queue = new_queue(FakeClock())
    waiter = asyncio.create_task(queue.pop())
    await asyncio.sleep(0)
    queue.close()
    with pytest.raises(Closed):
        await asyncio.wait_for(waiter, 1)


def affinity_to(labels: dict[str, str]) -> Affinity:
    term = PodAffinityTerm(
        label_selector=LabelSelector(match_labels=labels), topology_key="kubernetes.io/hostname"
    )
    return Affinity(
        pod_affinity=PodAffinity(required_during_scheduling_ignored_during_execution=[term])
    )


@pytest.mark.parametrize(
    ("pending", "rejector", "assigned", "expected"),
    [
        pytest.param(
            make_pod(affinity=affinity_to({"app": "db"})), names.INTER_POD_AFFINITY,
            make_pod("db", node_name="n", labels={"app": "db"}), "backoff",
            id="affinity-matches",
        ),
        pytest.param(
            make_pod(affinity=affinity_to({"app": "db"})), names.INTER_POD_AFFINITY,
            make_pod("web", node_name="n", labels={"app": "web"}), "unschedulable",
            id="affinity-does-not-match",
        ),
        pytest.param(
            make_pod(), names.POD_TOPOLOGY_SPREAD, make_pod("x", node_name="n"), "backoff",
            id="spread-same-namespace",
        ),
        pytest.param(
            make_pod(), names.POD_TOPOLOGY_SPREAD,
            make_pod("x", "other", node_name="n"), "unschedulable",
            id="spread-other-namespace",
        ),
    ],
)  # fmt: skip
async def test_assigned_pod_added(
    pending: Pod, rejector: str, assigned: Pod, expected: str
) -> None:
    pod_event = [ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.ALL))]
    queue = new_queue(FakeClock(), {rejector: pod_event})
    await reject(queue, pending, {rejector})
    queue.assigned_pod_added(assigned)
    assert queue.where(uid(pending)) == expected


async def test_assigned_pod_scale_down_moves_everyone() -> None:
    events = [ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.UPDATE))]
    queue = new_queue(FakeClock(), {names.NODE_RESOURCES_FIT: events})
    pending = make_pod()
    await reject(queue, pending, {names.NODE_RESOURCES_FIT})
    queue.assigned_pod_updated(
        make_pod("x", node_name="n", requests={"cpu": "2"}),
        make_pod("x", node_name="n", requests={"cpu": "1"}),
    )
    assert queue.where(uid(pending)) == "backoff"


async def test_nominator() -> None:
    queue = new_queue(FakeClock())
    pod = make_pod()
    info = (await reject(queue, pod, {PLUGIN})).info
    queue.nominate(info, "n1")
    assert queue.nominated_pods_for_node("n1") == [info]
    queue.update(pod, make_pod(labels={"a": "b"}))
    assert [p.pod.metadata.labels for p in queue.nominated_pods_for_node("n1")] == [{"a": "b"}]
    queue.nominate(info, "n2")
    assert queue.nominated_pods_for_node("n1") == []
    assert queue.nominated_node(uid(pod)) == "n2"
    queue.delete(pod)
    assert queue.nominated_pods_for_node("n2") == []


async def test_nomination_from_status() -> None:
    queue = new_queue(FakeClock())
    pod = make_pod()
    pod.status = PodStatus(nominated_node_name="n1")
    queue.add(pod)
    assert [p.uid for p in queue.nominated_pods_for_node("n1")] == [uid(pod)]
    cleared = make_pod()
    cleared.status = PodStatus()
    queue.update(pod, cleared)
    assert queue.nominated_pods_for_node("n1") == []


async def test_pending_pods_summary() -> None:
    queue = new_queue(FakeClock())
    await reject(queue, make_pod("backoff"))
    await reject(queue, make_pod("unschedulable"), {PLUGIN})
    queue.add(make_pod("active"))
    queue.add(make_pod("gated", scheduling_gates=("g",)))
    summary = queue.pending_pods()
    assert summary == PendingPods(active=1, backoff=1, unschedulable=1, gated=1)
    assert str(summary) == "activeQ:1; backoffQ:1; unschedulablePods:1; gatedPods:1"


async def test_delete_removes_from_every_queue() -> None:
    queue = new_queue(FakeClock())
    pods = [make_pod("a"), make_pod("g", scheduling_gates=("x",))]
    backoff = make_pod("b")
    await reject(queue, backoff)
    for pod in pods:
        queue.add(pod)
    for pod in [*pods, backoff]:
        queue.delete(pod)
    assert queue.pending_pods() == PendingPods(0, 0, 0, 0)
