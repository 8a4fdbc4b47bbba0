"""Pod workers: the state machine, merged updates, cancellation by deletion, retries."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from kube.api.kinds.core_v1.pod import Pod
from kube.clock import FakeClock
from node.kubelet.podworkers import (
    ERROR_BACKOFF,
    PodState,
    PodWorkers,
    SyncOutcome,
    grace_seconds,
)
from tests import builders


def _pod(uid: str = "u1", *, deleting: bool = False, grace: int | None = None) -> Pod:
    built = builders.pod("web", "ns", uid=uid, termination_grace_period_seconds=45)
    if deleting:
        built.metadata.deletion_timestamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        built.metadata.deletion_grace_period_seconds = grace
    return built


class Recorder:
    """A PodSyncer that records its calls and does what the test scripts."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, object]] = []
        self.outcomes: list[SyncOutcome] = []
        self.failures = 0
        self.block: asyncio.Event | None = None
        self.stopping: asyncio.Event | None = None
        """Containers that take their whole grace period to stop, unless it is 0."""
        self.started = asyncio.Event()

    async def sync_pod(self, pod: Pod) -> SyncOutcome:
        self.calls.append(("sync", pod.metadata.uid or "", pod.metadata.resource_version))
        self.started.set()
        if self.block is not None:
            await self.block.wait()
        if self.failures:
            self.failures -= 1
            raise RuntimeError("runtime unavailable")
        return self.outcomes.pop(0) if self.outcomes else SyncOutcome()

    async def sync_terminating_pod(self, pod: Pod, grace_seconds: int) -> None:
        self.calls.append(("terminating", pod.metadata.uid or "", grace_seconds))
        if grace_seconds and self.stopping is not None:
            await self.stopping.wait()

    async def sync_terminated_pod(self, pod: Pod) -> None:
        self.calls.append(("terminated", pod.metadata.uid or "", None))

    async def sync_removed_pod(self, pod: Pod) -> None:
        self.calls.append(("removed", pod.metadata.uid or "", None))

    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.calls]


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_pod_syncs_then_resyncs_on_events_only() -> None:
    syncer, clock = Recorder(), FakeClock()
    workers = PodWorkers(syncer, clock, resync_interval=60)
    workers.update_pod(_pod())
    await settle()
    assert syncer.kinds() == ["sync"]
    workers.sync("u1")
    await settle()
    assert syncer.kinds() == ["sync", "sync"]
    await clock.advance(60)
    await settle()
    assert syncer.kinds() == ["sync", "sync", "sync"]
    await workers.close()


async def test_updates_during_a_sync_are_merged_latest_wins() -> None:
    syncer, clock = Recorder(), FakeClock()
    syncer.block = asyncio.Event()
    workers = PodWorkers(syncer, clock)
    first = _pod()
    first.metadata.resource_version = "1"
    workers.update_pod(first)
    await syncer.started.wait()
    for version in ("2", "3", "4"):
        pod = _pod()
        pod.metadata.resource_version = version
        workers.update_pod(pod)
    syncer.block.set()
    await settle()
    assert syncer.calls == [("sync", "u1", "1"), ("sync", "u1", "4")]
    await workers.close()


async def test_terminal_phase_terminates_and_keeps_containers_until_deleted() -> None:
    syncer, clock = Recorder(), FakeClock()
    syncer.outcomes = [SyncOutcome(terminal=True)]
    workers = PodWorkers(syncer, clock)
    workers.update_pod(_pod())
    await settle()
    assert syncer.kinds() == ["sync", "terminating", "terminated"]
    assert workers.state("u1") is PodState.TERMINATED
    workers.update_pod(_pod(deleting=True, grace=0))
    await settle()
    assert syncer.kinds()[-1] == "removed"
    assert workers.state("u1") is PodState.REMOVED
    workers.update_pod(_pod(deleting=True, grace=0), removed=True)
    await settle()
    assert workers.known() == set()
    await workers.close()


async def test_deletion_cancels_a_sync_in_flight_and_uses_the_deletion_grace() -> None:
    syncer, clock = Recorder(), FakeClock()
    syncer.block = asyncio.Event()  # a sync that would hang (an image pull)
    workers = PodWorkers(syncer, clock)
    workers.update_pod(_pod())
    await syncer.started.wait()
    workers.update_pod(_pod(deleting=True, grace=5))
    await settle()
    assert syncer.calls[1:] == [
        ("terminating", "u1", 5),
        ("terminated", "u1", None),
        ("removed", "u1", None),
    ]
    await workers.close()


async def test_a_shorter_grace_period_reaches_a_termination_in_flight() -> None:
    syncer, clock = Recorder(), FakeClock()
    syncer.stopping = asyncio.Event()
    workers = PodWorkers(syncer, clock)
    workers.update_pod(_pod(deleting=True, grace=30))
    await settle()
    assert syncer.calls == [("terminating", "u1", 30)]
    workers.update_pod(_pod(deleting=True, grace=60))  # longer: the termination goes on
    await settle()
    assert syncer.calls == [("terminating", "u1", 30)]
    workers.update_pod(_pod(deleting=True, grace=0))  # kubectl delete --force --grace-period=0
    await settle()
    assert syncer.calls == [
        ("terminating", "u1", 30),
        ("terminating", "u1", 0),
        ("terminated", "u1", None),
        ("removed", "u1", None),
    ]
    await workers.close()


async def test_a_pod_removed_from_the_sources_is_stopped_with_its_spec_grace() -> None:
    syncer, clock = Recorder(), FakeClock()
    workers = PodWorkers(syncer, clock)
    workers.update_pod(_pod())
    await settle()
    workers.forget_missing(present=[])
    await settle()
    assert syncer.calls[1:] == [
        ("terminating", "u1", 45),
        ("terminated", "u1", None),
        ("removed", "u1", None),
    ]
    assert workers.known() == set()
    await workers.close()


async def test_a_failing_step_is_retried_with_backoff() -> None:
    syncer, clock = Recorder(), FakeClock()
    syncer.failures = 2
    workers = PodWorkers(syncer, clock)
    workers.update_pod(_pod())
    await settle()
    assert syncer.kinds() == ["sync"]
    await clock.advance(ERROR_BACKOFF)
    await settle()
    assert syncer.kinds() == ["sync", "sync"]
    await clock.advance(ERROR_BACKOFF)  # the second backoff is twice as long
    await settle()
    assert syncer.kinds() == ["sync", "sync"]
    await clock.advance(ERROR_BACKOFF)
    await settle()
    assert syncer.kinds() == ["sync", "sync", "sync"]
    assert workers.state("u1") is PodState.SYNCING
    await workers.close()


async def test_a_backoff_resync_comes_before_the_periodic_one() -> None:
    syncer, clock = Recorder(), FakeClock()
    syncer.outcomes = [SyncOutcome(resync_after=10)]
    workers = PodWorkers(syncer, clock, resync_interval=60)
    workers.update_pod(_pod())
    await settle()
    await clock.advance(10)
    await settle()
    assert syncer.kinds() == ["sync", "sync"]
    await workers.close()


@pytest.mark.parametrize(
    ("deleting", "grace", "expected"),
    [(False, None, 45), (True, 0, 0), (True, 7, 7), (True, None, 45)],
    ids=["spec", "force", "deletion", "deletion-without-grace"],
)
def test_grace_seconds(deleting: bool, grace: int | None, expected: int) -> None:
    assert grace_seconds(_pod(deleting=deleting, grace=grace)) == expected
