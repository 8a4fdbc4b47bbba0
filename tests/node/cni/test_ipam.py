"""Host-local IPAM: allocation, idempotence, release, exhaustion and the lock between processes."""

from __future__ import annotations

import ipaddress
import multiprocessing
from pathlib import Path

import pytest

from node.cni.ipam import HostLocalIPAM, IPAMError, RangeExhausted

SUBNET = ipaddress.IPv4Network("10.244.1.0/24")


def ipam(tmp_path: Path, subnet: str = "10.244.1.0/24") -> HostLocalIPAM:
    return HostLocalIPAM(tmp_path, "kubelab", ipaddress.IPv4Network(subnet))


def test_first_address_skips_network_and_gateway(tmp_path: Path) -> None:
    assert ipam(tmp_path).allocate("c1", "eth0") == ipaddress.IPv4Interface("10.244.1.2/24")


def test_allocation_is_one_file_per_address(tmp_path: Path) -> None:
    ipam(tmp_path).allocate("c1", "eth0")
    assert (tmp_path / "networks" / "kubelab" / "10.244.1.2").read_text() == "c1\neth0"


def test_allocation_is_idempotent_per_container_and_ifname(tmp_path: Path) -> None:
    a = ipam(tmp_path)
    first = a.allocate("c1", "eth0")
    assert a.allocate("c1", "eth0") == first
    assert a.allocate("c1", "net1") != first
    assert a.allocate("c2", "eth0") != first


def test_release_frees_and_is_idempotent(tmp_path: Path) -> None:
    a = ipam(tmp_path)
    a.allocate("c1", "eth0")
    a.release("c1", "eth0")
    a.release("c1", "eth0")
    assert a.allocated() == {}
    assert a.get("c1", "eth0") is None


def test_released_address_is_not_reused_at_once(tmp_path: Path) -> None:
    a = ipam(tmp_path)
    first = a.allocate("c1", "eth0")
    a.release("c1", "eth0")
    assert a.allocate("c2", "eth0") != first


def test_exhaustion_then_wraparound_after_release(tmp_path: Path) -> None:
    a = ipam(tmp_path, "10.0.0.0/29")  # hosts .1-.6, gateway .1: five pods
    got = [a.allocate(f"c{i}", "eth0").ip for i in range(5)]
    assert [str(ip) for ip in got] == [f"10.0.0.{i}" for i in range(2, 7)]
    with pytest.raises(RangeExhausted):
        a.allocate("c5", "eth0")
    a.release("c0", "eth0")
    assert str(a.allocate("c5", "eth0").ip) == "10.0.0.2"


@pytest.mark.parametrize(
    ("subnet", "gateway"),
    [
        pytest.param("10.0.0.0/31", None, id="too-small"),
        pytest.param("10.0.0.0/24", "10.0.1.1", id="gateway-outside"),
    ],
)
def test_invalid_ranges(tmp_path: Path, subnet: str, gateway: str | None) -> None:
    with pytest.raises(IPAMError):
        HostLocalIPAM(
            tmp_path,
            "kubelab",
            ipaddress.IPv4Network(subnet),
            ipaddress.IPv4Address(gateway) if gateway else None,
        )


def _allocate_many(data_dir: str, prefix: str, count: int) -> None:
    a = HostLocalIPAM(Path(data_dir), "kubelab", SUBNET)
    for i in range(count):
        a.allocate(f"{prefix}-{i}", "eth0")


def test_concurrent_processes_never_share_an_address(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    workers = [
        ctx.Process(target=_allocate_many, args=(str(tmp_path), f"p{n}", 40)) for n in range(3)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    owners = ipam(tmp_path).allocated()
    expected = {f"p{n}-{i}" for n in range(3) for i in range(40)}
    assert len(owners) == len(expected)
    assert set(owners.values()) == expected
