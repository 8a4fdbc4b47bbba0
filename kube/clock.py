"""Time, injected: components ask a ``Clock`` instead of the time module, so tests control it.

``RealClock`` is the wall clock and asyncio's sleep.  ``FakeClock`` moves only when a test
calls ``advance``; sleepers wake in deadline order as it passes their deadlines, which is how
backoffs, lease expiry and grace periods are tested without real waiting.
"""

from __future__ import annotations

import asyncio
import datetime
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime.datetime:
        """The current UTC time."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """The wall clock."""

    def now(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime.datetime | None = None) -> None:
        self._now = start or datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        self._elapsed = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> datetime.datetime:
        return self._now + datetime.timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._elapsed + seconds, next(self._order), waiter))
        await waiter

    @property
    def sleepers(self) -> int:
        """How many sleeps are pending (tests wait for a component to reach its sleep)."""
        return sum(1 for _, _, w in self._sleepers if not w.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking each sleeper whose deadline passes, in order."""
        target = self._elapsed + seconds
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, waiter = heapq.heappop(self._sleepers)
            self._elapsed = max(self._elapsed, deadline)
            if not waiter.done():
                waiter.set_result(None)
            for _ in range(5):
                await asyncio.sleep(0)
        self._elapsed = target
        await asyncio.sleep(0)
