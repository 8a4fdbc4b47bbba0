"""Seats lent and borrowed between levels: demand integrated over time, smoothed, and the
server's seats shared within each level's bounds; then, through the controller with a fake
clock, a busy level borrowing an idle one's seats, and a request refused after waiting too
long."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from controlplane.apiserver.errors import ApiError
from controlplane.apiserver.flowcontrol import bootstrap
from controlplane.apiserver.flowcontrol.borrowing import (
    Bounds,
    Observation,
    SeatDemand,
    allocate,
    bounds,
    smooth,
)
from controlplane.apiserver.flowcontrol.controller import Classification, FlowControl, Width
from kube.clock import FakeClock


def test_demand_is_time_weighted() -> None:
    demand = SeatDemand(now=0)
    demand.set(4, now=0)
    demand.set(0, now=5)
    observed = demand.reset(now=10)
    assert (observed.average, observed.deviation, observed.maximum) == (2.0, 2.0, 4)
    assert demand.reset(now=20) == Observation(0.0, 0.0, 0)


def test_smoothing_rises_at_once_and_falls_slowly() -> None:
    assert smooth(0.0, Observation(5.0, 1.0, 7.0)) == 6.0
    fallen = smooth(6.0, Observation(0.0, 0.0, 0.0))
    assert 5.8 < fallen < 6.0


def test_bounds() -> None:
    assert bounds(10, 50, None, 100) == (5, 110)
    assert bounds(10, 0, 20, 100) == (10, 12)
    assert bounds(1, 50, 50, 100) == (0, 2), "halves round up, as Go's math.Round"


@pytest.mark.parametrize(
    ("total", "levels", "expected"),
    [
        pytest.param(
            14,
            [Bounds(10, 24, 0), Bounds(0, 16, 0), Bounds(2, 16, 5)],
            [10, 0, 4],
            id="idle-lends-busy-borrows",
        ),
        pytest.param(10, [Bounds(2, 20, 1), Bounds(2, 20, 1)], [5, 5], id="even"),
        pytest.param(
            10, [Bounds(2, 20, 3), Bounds(2, 20, 1)], [6, 4], id="targets-raised-to-the-lower"
        ),
        pytest.param(10, [Bounds(0, 20, 2), Bounds(0, 20, 1)], [7, 3], id="proportional-rounded"),
        pytest.param(10, [Bounds(8, 8, 0), Bounds(0, 1, 9)], [8, 1], id="bounds-win"),
        pytest.param(4, [Bounds(3, 9, 0), Bounds(3, 9, 0)], [3, 3], id="lower-bounds-over"),
    ],
)
def test_allocation(total: int, levels: list[Bounds], expected: list[int]) -> None:
    assert allocate(total, levels) == expected


async def test_a_busy_level_borrows_an_idle_levels_seats(
    flowcontrol: tuple[FlowControl, FakeClock],
) -> None:
    control, clock = flowcontrol
    control._refresh()
    busy = control._levels["busy"]
    flow = Classification(bootstrap.MANDATORY_SCHEMAS[1], busy, "")
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(2):
            await stack.enter_async_context(control.seat(flow, Width(1), {}))
        waiting: list[asyncio.Task[Any]] = [
            asyncio.create_task(stack.enter_async_context(control.seat(flow, Width(1), {})))
            for _ in range(3)
        ]
        await asyncio.sleep(0.01)
        assert busy.queues is not None and busy.queues.waiting == 3
        await clock.advance(10)
        control.adjust()
        limits = {n: lv.queues.limit for n, lv in control._levels.items() if lv.queues}
        assert limits == {"busy": 4, "idle": 0, "catch-all": 10}
        await asyncio.sleep(0.01)
        assert [t.done() for t in waiting] == [True, True, False], "two more started"
        waiting[2].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting[2]
        assert busy.queues.waiting == 0 and busy.queues.cancelled == 1


async def test_a_request_waiting_too_long_gets_429(
    flowcontrol: tuple[FlowControl, FakeClock],
) -> None:
    control, _ = flowcontrol
    control.wait_limit = 0.05
    control._refresh()
    flow = Classification(bootstrap.MANDATORY_SCHEMAS[1], control._levels["idle"], "")
    async with control.seat(flow, Width(2), {}):  # the level's two seats
        with pytest.raises(ApiError) as refused:
            async with control.seat(flow, Width(1), {}):
                pass
    assert (refused.value.code, refused.value.retry_after) == (429, 1)
    rows = [line.split() for line in control.dump("dump_priority_levels").splitlines()]
    idle = next(row for row in rows if row[0] == "idle,")
    assert idle[4:] == ["0,", "0,", "1,", "0,", "1,", "0"], "waiting, executing ... timed out"
