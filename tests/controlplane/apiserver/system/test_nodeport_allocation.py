"""The NodePort allocator (``bootstrap.PortAllocator``): upstream's static subrange, so a port
chosen for a Service never takes one from the low band while the upper band has room, and a
Service that asks for a low port gets it however many ports were chosen before."""

from __future__ import annotations

import random

import pytest

from controlplane.apiserver.system.bootstrap import PortAllocator
from controlplane.apiserver.system.clusterip import AllocationError

LOW, HIGH = 30000, 32767


@pytest.mark.parametrize(
    ("low", "high", "offset"),
    [
        pytest.param(30000, 32767, 86, id="default-range"),
        pytest.param(30000, 30015, 0, id="16-ports-no-band"),
        pytest.param(30000, 30099, 16, id="small-range-16"),
        pytest.param(20000, 32767, 128, id="wide-range-128"),
    ],
)
def test_the_static_band_is_upstreams_offset(low: int, high: int, offset: int) -> None:
    assert PortAllocator(low, high).offset == offset


def test_chosen_ports_leave_the_low_band_until_the_upper_one_is_full() -> None:
    ports = PortAllocator(LOW, HIGH, random.Random(7))
    upper = HIGH - LOW + 1 - ports.offset
    chosen = [ports.allocate() for _ in range(upper)]
    assert sorted(chosen) == list(range(LOW + ports.offset, HIGH + 1))
    assert ports.allocate() < LOW + ports.offset


def test_a_requested_low_port_is_free_after_many_chosen_ones() -> None:
    ports = PortAllocator(LOW, HIGH, random.Random(1))
    for _ in range(2000):
        ports.allocate()
    assert ports.allocate(30080) == 30080
    with pytest.raises(AllocationError, match=r"^provided port is already allocated$"):
        ports.allocate(30080)


def test_out_of_range_and_full() -> None:
    ports = PortAllocator(30000, 30003, random.Random(3))
    with pytest.raises(AllocationError) as outside:
        ports.allocate(29999)
    assert str(outside.value) == (
        "provided port is not in the valid range. The range of valid ports is 30000-30003"
    )
    assert sorted(ports.allocate() for _ in range(4)) == [30000, 30001, 30002, 30003]
    with pytest.raises(AllocationError, match=r"^range is full$"):
        ports.allocate()
    ports.release(30002)
    assert ports.allocate() == 30002
