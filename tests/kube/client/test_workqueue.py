"""The workqueue: de-duplication, one worker per key, delayed adds, rate limiters, shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable

import pytest

from kube.client.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
    ShutDown,
    WorkQueue,
    default_controller_rate_limiter,
)
from kube.clock import FakeClock


async def settle() -> None:
    """Let every ready task run until it blocks again."""
    for _ in range(10):
        await asyncio.sleep(0)


@pytest.fixture(autouse=True)
async def no_tasks_left() -> AsyncIterator[None]:
    yield
    await settle()
    assert asyncio.all_tasks() - {asyncio.current_task()} == set()


async def take_all(queue: WorkQueue[str]) -> list[str]:
    """Get and finish every key queued right now, in order."""
    taken = []
    while len(queue):
        key = await queue.get()
        queue.done(key)
        taken.append(key)
    return taken


@pytest.mark.parametrize(
    ("script", "left"),
    [
        pytest.param("add a, add b, add a, add c, add b", "a b c", id="duplicates-collapse"),
        pytest.param("add b, add a, add c", "b a c", id="fifo-by-first-add"),
        pytest.param("add a, get a, add a", "", id="readd-while-processing-is-held"),
        pytest.param("add a, get a, add a, add a, done a", "a", id="readd-queued-once-at-done"),
        pytest.param("add a, get a, done a", "", id="done-without-readd-leaves-nothing"),
        pytest.param("add a, get a, done a, add a", "a", id="add-after-done-queues"),
        pytest.param("add a, add b, get a, add a, add c, done a", "b c a", id="deferred-goes-last"),
    ],
)
async def test_dedup_and_deferral(script: str, left: str) -> None:
    queue = WorkQueue[str]()
    for step in script.split(", "):
        verb, key = step.split()
        if verb == "add":
            queue.add(key)
        elif verb == "get":
            assert await queue.get() == key
        else:
            queue.done(key)
    assert len(queue) == len(left.split())
    assert await take_all(queue) == left.split()


async def test_tuple_keys_work() -> None:
    queue = WorkQueue[tuple[str, str]]()
    queue.add(("default", "web"))
    queue.add(("default", "web"))
    assert len(queue) == 1
    assert await queue.get() == ("default", "web")


async def test_get_waits_for_work() -> None:
    queue = WorkQueue[str]()
    getter = asyncio.create_task(queue.get())
    await settle()
    assert not getter.done()
    queue.add("a")
    assert await getter == "a"


async def test_readd_during_processing_is_delivered_after_done() -> None:
    queue = WorkQueue[str]()
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    assert len(queue) == 0
    second = asyncio.create_task(queue.get())
    await settle()
    assert not second.done(), "a key being processed was handed to a second worker"
    queue.done("a")
    assert await second == "a"


async def test_a_key_is_never_processed_by_two_workers_at_once() -> None:
    queue = WorkQueue[str]()
    in_flight: list[str] = []
    most_at_once = 0
    syncs = 0

    async def worker() -> None:
        nonlocal most_at_once, syncs
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            in_flight.append(key)
            most_at_once = max(most_at_once, len(in_flight))
            for _ in range(3):
                await asyncio.sleep(0)
            in_flight.remove(key)
            syncs += 1
            queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(2)]
    for _ in range(20):
        queue.add("a")
        await asyncio.sleep(0)
    await queue.shutdown_with_drain()
    await asyncio.gather(*workers)
    assert most_at_once == 1
    assert 2 <= syncs < 20


async def test_a_cancelled_worker_hands_its_wakeup_on() -> None:
    queue = WorkQueue[str]()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("a")
    first.cancel()
    assert await second == "a"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_shutdown_hands_out_what_is_queued_then_raises() -> None:
    queue = WorkQueue[str]()
    queue.add("a")
    queue.add("b")
    queue.shutdown()
    queue.add("c")
    assert queue.shutting_down
    assert await queue.get() == "a"
    assert await queue.get() == "b"
    with pytest.raises(ShutDown):
        await queue.get()


async def test_shutdown_wakes_waiting_workers() -> None:
    queue = WorkQueue[str]()
    getters = [asyncio.create_task(queue.get()) for _ in range(2)]
    await settle()
    queue.shutdown()
    results = await asyncio.gather(*getters, return_exceptions=True)
    assert [type(r) for r in results] == [ShutDown, ShutDown]


async def test_shutdown_with_drain_waits_for_in_flight_keys() -> None:
    queue = WorkQueue[str]()
    queue.add("a")
    queue.add("b")
    a, b = await queue.get(), await queue.get()
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await settle()
    assert not drain.done()
    queue.add("c")
    queue.done(a)
    await settle()
    assert not drain.done()
    queue.done(b)
    await drain
    assert len(queue) == 0
    with pytest.raises(ShutDown):
        await queue.get()


async def test_shutdown_with_drain_returns_at_once_when_idle() -> None:
    queue = WorkQueue[str]()
    await asyncio.wait_for(queue.shutdown_with_drain(), timeout=1)


async def test_shutdown_ends_a_waiting_drain() -> None:
    queue = WorkQueue[str]()
    queue.add("a")
    await queue.get()
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await settle()
    queue.shutdown()
    await asyncio.wait_for(drain, timeout=1)


async def test_a_key_readded_before_drain_is_still_handed_out() -> None:
    queue = WorkQueue[str]()
    queue.add("a")
    await queue.get()
    queue.add("a")
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await settle()
    queue.done("a")
    await drain
    assert await queue.get() == "a"
    queue.done("a")
    with pytest.raises(ShutDown):
        await queue.get()


@pytest.mark.parametrize(
    ("adds", "steps"),
    [
        pytest.param(
            [("a", 3), ("b", 1), ("c", 2)],
            [(1, "b"), (1, "b c"), (1, "b c a")],
            id="deadlines-fire-in-order",
        ),
        pytest.param(
            [("late", 10), ("early", 2)],
            [(2, "early"), (7.5, "early"), (0.5, "early late")],
            id="earlier-deadline-added-later-fires-first",
        ),
        pytest.param(
            [("a", 1), ("b", 2), ("c", 3)],
            [(5, "a b c")],
            id="one-advance-passes-several-deadlines",
        ),
        pytest.param(
            [("a", 8), ("a", 2)],
            [(2, "a"), (8, "a")],
            id="earlier-of-two-deadlines-for-a-key-wins",
        ),
        pytest.param(
            [("a", 2), ("a", 8)],
            [(2, "a"), (8, "a")],
            id="later-deadline-for-a-waiting-key-is-ignored",
        ),
        pytest.param([("a", 1), ("b", 1)], [(1, "a b")], id="equal-deadlines-keep-add-order"),
        pytest.param([("a", 0), ("b", -1)], [(0, "a b")], id="no-delay-adds-at-once"),
    ],
)
async def test_add_after(adds: list[tuple[str, float]], steps: list[tuple[float, str]]) -> None:
    clock = FakeClock()
    queue = WorkQueue[str](clock)
    for key, seconds in adds:
        queue.add_after(key, seconds)
        await settle()
    arrived: list[str] = []
    for seconds, expected in steps:
        await clock.advance(seconds)
        arrived += await take_all(queue)
        assert arrived == expected.split(), f"at {clock.monotonic()}s"
    queue.shutdown()


async def test_add_after_keeps_a_key_being_processed_from_a_second_worker() -> None:
    clock = FakeClock()
    queue = WorkQueue[str](clock)
    queue.add("a")
    await queue.get()
    queue.add_after("a", 1)
    await clock.advance(1)
    assert len(queue) == 0
    queue.done("a")
    assert await take_all(queue) == ["a"]
    queue.shutdown()


async def test_shutdown_drops_held_back_keys_and_stops_the_waiter() -> None:
    clock = FakeClock()
    queue = WorkQueue[str](clock)
    queue.add_after("a", 1)
    await settle()
    assert clock.sleepers == 1
    queue.shutdown()
    queue.add_after("b", 1)
    await settle()
    assert clock.sleepers == 0
    await clock.advance(5)
    assert len(queue) == 0
    with pytest.raises(ShutDown):
        await queue.get()


async def test_add_after_on_the_real_clock() -> None:
    queue = WorkQueue[str]()
    queue.add_after("a", 0.01)
    assert len(queue) == 0
    assert await asyncio.wait_for(queue.get(), timeout=5) == "a"
    queue.done("a")
    await queue.shutdown_with_drain()


@pytest.mark.parametrize(
    ("base", "cap", "delays"),
    [
        pytest.param(0.005, 1000.0, [0.005, 0.01, 0.02, 0.04, 0.08], id="defaults-double"),
        pytest.param(1.0, 10.0, [1, 2, 4, 8, 10, 10], id="capped"),
        pytest.param(2.0, 1.0, [1, 1], id="cap-below-base"),
    ],
)
def test_exponential_backoff(base: float, cap: float, delays: list[float]) -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base, cap)
    assert [limiter.when("a") for _ in delays] == pytest.approx(delays)
    assert limiter.retries("a") == len(delays)
    assert limiter.when("b") == base if base <= cap else cap


def test_exponential_backoff_stays_at_cap_without_overflow() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    delays = [limiter.when("a") for _ in range(2000)]
    assert delays[-1] == 1000.0
    assert limiter.retries("a") == 2000


def test_forget_resets_the_backoff_of_one_key() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](1.0, 100.0)
    for _ in range(3):
        limiter.when("a")
        limiter.when("b")
    limiter.forget("a")
    limiter.forget("never-seen")
    assert limiter.retries("a") == 0
    assert limiter.when("a") == 1.0
    assert limiter.when("b") == 8.0


@pytest.mark.parametrize(
    ("qps", "burst", "script", "delays"),
    [
        pytest.param(10, 3, "w w w w w", [0, 0, 0, 0.1, 0.2], id="burst-then-one-per-interval"),
        pytest.param(2, 2, "w w +0.5 w w", [0, 0, 0, 0.5], id="tokens-refill-over-time"),
        pytest.param(10, 2, "+100 w w w", [0, 0, 0.1], id="refill-stops-at-burst"),
        pytest.param(1, 1, "w w w +1 w", [0, 1, 2, 2], id="reservations-queue-up"),
    ],
)
async def test_bucket_rate_limiter(
    qps: float, burst: int, script: str, delays: list[float]
) -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps, burst, clock)
    got = []
    for step in script.split():
        if step == "w":
            got.append(limiter.when("any"))
        else:
            await clock.advance(float(step))
    assert got == pytest.approx(delays)
    limiter.forget("any")
    assert limiter.retries("any") == 0


def test_max_of_rate_limiter_asks_every_limiter() -> None:
    fast = ItemExponentialFailureRateLimiter[str](1.0, 100.0)
    slow = ItemExponentialFailureRateLimiter[str](3.0, 5.0)
    limiter = MaxOfRateLimiter(fast, slow)
    assert [limiter.when("a") for _ in range(4)] == [3.0, 5.0, 5.0, 8.0]
    assert fast.retries("a") == slow.retries("a") == limiter.retries("a") == 4
    limiter.forget("a")
    assert fast.retries("a") == slow.retries("a") == 0
    with pytest.raises(ValueError, match="at least one"):
        MaxOfRateLimiter[str]()


def test_default_controller_rate_limiter_is_per_key_backoff_and_overall_bucket() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock)
    assert [limiter.when("a") for _ in range(4)] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    others: list[Hashable] = [f"k{i}" for i in range(96)]
    assert {limiter.when(key) for key in others} == {0.005}
    assert limiter.when("new") == pytest.approx(0.1), "the bucket's 100-token burst is spent"
    assert limiter.retries("a") == 4


async def test_rate_limited_retries_back_off_until_forgotten() -> None:
    clock = FakeClock()
    queue = RateLimitingQueue[str](ItemExponentialFailureRateLimiter(1.0, 4.0), clock)
    queue.add("a")
    for attempt, delay in enumerate([1.0, 2.0, 4.0, 4.0], start=1):
        key = await queue.get()
        queue.add_rate_limited(key)
        queue.done(key)
        assert queue.num_requeues("a") == attempt
        await settle()
        await clock.advance(delay - 0.5)
        assert len(queue) == 0, f"attempt {attempt} came back early"
        await clock.advance(0.5)
        assert len(queue) == 1, f"attempt {attempt} did not come back"
    assert await queue.get() == "a"
    queue.forget("a")
    queue.done("a")
    assert queue.num_requeues("a") == 0
    queue.add_rate_limited("a")
    await settle()
    await clock.advance(1)
    await settle()
    assert len(queue) == 1
    queue.shutdown()


async def test_rate_limiting_queue_defaults_to_the_controller_limiter() -> None:
    clock = FakeClock()
    queue = RateLimitingQueue[str](clock=clock)
    queue.add_rate_limited("a")
    queue.add_rate_limited("a")
    assert queue.num_requeues("a") == 2
    await clock.advance(0.005)
    assert await take_all(queue) == ["a"]
    await queue.shutdown_with_drain()
