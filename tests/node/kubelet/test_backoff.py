"""CrashLoopBackOff: 10 s doubling to 5 minutes, measured from the exit, reset by a long run."""

from __future__ import annotations

import datetime

import pytest

from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import ObjectMeta
from kube.clock import FakeClock
from node.kubelet.backoff import BackoffKey, CrashLoopBackOff

KEY = BackoffKey("uid-1", "app", "h1")


async def crash(clock: FakeClock, backoff: CrashLoopBackOff, run: float = 1.0) -> float:
    """The container runs ``run`` seconds, exits, waits out its back-off and is restarted.
    Returns how long it waited."""
    await clock.advance(run)
    finished = clock.now()
    waited = backoff.in_backoff(KEY, finished)
    await clock.advance(waited)
    assert backoff.in_backoff(KEY, finished) == 0
    backoff.record_exit(KEY, finished)
    return waited


async def test_delays_double_to_five_minutes() -> None:
    clock = FakeClock()
    backoff = CrashLoopBackOff(clock)
    waits = [await crash(clock, backoff) for _ in range(8)]
    assert waits == [0, 10, 20, 40, 80, 160, 300, 300]
    assert backoff.delay(KEY) == 300


async def test_remaining_counts_down_from_the_exit() -> None:
    clock = FakeClock()
    backoff = CrashLoopBackOff(clock)
    backoff.record_exit(KEY, clock.now())
    await clock.advance(2)
    finished = clock.now()
    assert backoff.in_backoff(KEY, finished) == 10
    await clock.advance(4)
    assert backoff.in_backoff(KEY, finished) == 6
    await clock.advance(6)
    assert backoff.in_backoff(KEY, finished) == 0


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        pytest.param(599.0, 40.0, id="ten-minutes-not-reached"),
        pytest.param(601.0, 10.0, id="ten-minutes-of-running-resets"),
    ],
)
async def test_long_run_resets(run: float, expected: float) -> None:
    clock = FakeClock()
    backoff = CrashLoopBackOff(clock)
    await crash(clock, backoff)
    await crash(clock, backoff)
    assert backoff.delay(KEY) == 20
    await clock.advance(run)
    backoff.record_exit(KEY, clock.now())
    assert backoff.delay(KEY) == expected


async def test_keys_are_independent_per_spec_hash() -> None:
    clock = FakeClock()
    backoff = CrashLoopBackOff(clock)
    backoff.record_exit(KEY, clock.now())
    backoff.record_exit(KEY, clock.now())
    edited = KEY._replace(spec_hash="h2")
    assert backoff.in_backoff(edited, clock.now()) == 0
    assert backoff.record_exit(edited, clock.now()) == 10


async def test_gc_and_forget() -> None:
    clock = FakeClock()
    backoff = CrashLoopBackOff(clock)
    backoff.record_exit(KEY, clock.now())
    await clock.advance(400)
    other = BackoffKey("uid-2", "app", "h1")
    backoff.record_exit(other, clock.now())
    backoff.record_exit(BackoffKey("uid-3", "app", "h1"), clock.now())
    await clock.advance(300)
    backoff.gc()
    assert len(backoff) == 2
    assert backoff.delay(KEY) == 0
    backoff.forget_pod("uid-2")
    assert len(backoff) == 1


async def test_message_matches_upstream() -> None:
    clock = FakeClock()
    backoff = CrashLoopBackOff(clock)
    for _ in range(4):
        backoff.record_exit(KEY, clock.now())
    pod = Pod(metadata=ObjectMeta(name="web", namespace="default", uid="uid-1"))
    assert backoff.message(KEY, pod) == (
        "back-off 1m20s restarting failed container=app pod=web_default(uid-1)"
    )


def test_in_backoff_unknown_key() -> None:
    backoff = CrashLoopBackOff(FakeClock())
    assert backoff.in_backoff(KEY, datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)) == 0
