"""Seats lent and borrowed between priority levels, as upstream adjusts them every 10 seconds.

Each limited level has a nominal limit (its share of the server's seats), of which it may lend
``lendablePercent`` to others and beyond which it may borrow up to ``borrowingLimitPercent``
(no limit when unset): its current limit stays between ``nominal - lendable`` and
``nominal + borrowing``.  Where in that range is decided by demand, as upstream does it:

- ``SeatDemand`` integrates a level's seat demand (seats executing plus seats waiting) over the
  period, time-weighted, and gives its average, standard deviation and maximum;
- the smoothed demand is the larger of this period's envelope (average plus deviation) and the
  previous smoothed value decayed toward it (coefficient 0.977), so demand rises at once and
  falls slowly;
- ``allocate`` shares the sum of the nominal limits among the levels: every level gets its
  target (the smoothed demand, within its bounds) scaled by one fair proportion, clamped to its
  bounds, the proportion chosen so that the limits add up to the sum; then rounded to whole
  seats, the sum kept.

The exempt level takes no part (it is never limited).  Nothing here keeps time or state beyond
one level's integrator: the controller calls ``SeatDemand.set`` when a level's demand changes
and ``adjust`` every period.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

PERIOD = 10.0
"""Seconds between adjustments (upstream's borrowing adjustment period)."""
SMOOTHING = 0.977
"""How much of the previous smoothed demand a period keeps."""


class Observation(NamedTuple):
    """A level's seat demand over one period."""

    average: float
    deviation: float
    maximum: float


class SeatDemand:
    """A level's seat demand over time: a time-weighted average, deviation and maximum."""

    def __init__(self, now: float) -> None:
        self.value = 0.0
        self._since = now
        self._start = now
        self._sum = self._squares = 0.0
        self._max = 0.0

    def set(self, value: float, now: float) -> None:
        self._integrate(now)
        self.value = value
        self._max = max(self._max, value)

    def reset(self, now: float) -> Observation:
        """What the demand was since the last reset; a new period starts at ``now``."""
        self._integrate(now)
        span = now - self._start
        if span <= 0:
            observation = Observation(self.value, 0.0, self.value)
        else:
            average = self._sum / span
            variance = max(0.0, self._squares / span - average * average)
            observation = Observation(average, math.sqrt(variance), self._max)
        self._start = self._since = now
        self._sum = self._squares = 0.0
        self._max = self.value
        return observation

    def _integrate(self, now: float) -> None:
        elapsed = max(0.0, now - self._since)
        self._sum += self.value * elapsed
        self._squares += self.value * self.value * elapsed
        self._since = now


def smooth(previous: float, observation: Observation) -> float:
    """The smoothed demand after a period: up at once, down slowly."""
    envelope = observation.average + observation.deviation
    return max(envelope, SMOOTHING * previous + (1 - SMOOTHING) * envelope)


@dataclasses.dataclass(frozen=True)
class Bounds:
    """What one level may have: at least ``lower`` seats, at most ``upper``, ideally
    ``target``."""

    lower: int
    upper: int
    target: float


def bounds(
    nominal: int, lendable_percent: int, borrowing_percent: int | None, total: int
) -> tuple[int, int]:
    """A level's (lowest, highest) limit: its nominal limit less what it lends, plus what it
    may borrow (the whole server's seats when the borrowing limit is unset)."""
    lendable = _round(nominal * lendable_percent / 100)
    borrowing = total if borrowing_percent is None else _round(nominal * borrowing_percent / 100)
    return nominal - lendable, nominal + borrowing


def _round(value: float) -> int:
    """Halves away from zero, as Go's math.Round (Python's round goes to even)."""
    return math.floor(value + 0.5)


def allocate(total: int, levels: Sequence[Bounds]) -> list[int]:
    """Whole-seat limits within each level's bounds adding up to ``total`` (as near as the
    bounds allow), proportional to the targets."""
    if not levels:
        return []
    targets = [max(b.lower, min(b.upper, b.target)) for b in levels]

    def limits(proportion: float) -> list[float]:
        return [
            max(b.lower, min(b.upper, proportion * t)) for b, t in zip(levels, targets, strict=True)
        ]

    low, high = 0.0, 1.0
    while sum(limits(high)) < total and high < 1e9:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        if sum(limits(middle)) < total:
            low = middle
        else:
            high = middle
    shares = limits(high)
    floors = [math.floor(share) for share in shares]
    left = min(total, _round(sum(shares))) - sum(floors)
    by_fraction = sorted(range(len(shares)), key=lambda i: floors[i] - shares[i])
    for i in by_fraction[: max(0, left)]:
        floors[i] += 1
    return floors
