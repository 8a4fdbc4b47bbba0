"""The fake clock wakes sleepers in deadline order as time is advanced."""

from __future__ import annotations

import asyncio
import datetime

from kube.clock import FakeClock, RealClock


async def test_sleepers_wake_in_deadline_order() -> None:
    clock = FakeClock()
    woke: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(f"{name}@{clock.monotonic():g}")

    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in (("b", 5), ("a", 2), ("c", 9))]
    await asyncio.sleep(0)
    assert clock.sleepers == 3
    await clock.advance(6)
    assert woke == ["a@2", "b@5"]
    assert clock.monotonic() == 6
    assert clock.now() == datetime.datetime(2026, 1, 1, 0, 0, 6, tzinfo=datetime.UTC)
    await clock.advance(10)
    await asyncio.gather(*tasks)
    assert woke == ["a@2", "b@5", "c@9"]


async def test_real_clock_is_utc_and_monotonic() -> None:
    clock = RealClock()
    assert clock.now().tzinfo is datetime.UTC
    before = clock.monotonic()
    await clock.sleep(0.001)
    assert clock.monotonic() > before
