"""The lab cloud provider with its router replaced by memory (no root needed)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

import pytest

from controlplane.cloud.provider import ClientBuilder, InstanceNotFound, Route
from kubelab.lab import cloud as lab
from node.iptables import FakeIptables
from tests.controlplane.cloud.cloudfixtures import lb_service, node


class FakeRouter:
    def __init__(self) -> None:
        self.routes: dict[str, str] = {}
        self.addrs: set[str] = set()
        self.tables = FakeIptables()
        self.health: dict[tuple[str, int], int] = {}

    def list_routes(self) -> list[tuple[str, str]]:
        return sorted(self.routes.items())

    def replace_route(self, cidr: str, gateway: str) -> None:
        self.routes[cidr] = gateway

    def delete_route(self, cidr: str) -> None:
        self.routes.pop(cidr, None)

    def add_address(self, ip: str) -> None:
        self.addrs.add(ip)

    def delete_address(self, ip: str) -> None:
        self.addrs.discard(ip)

    def addresses(self) -> set[str]:
        return set(self.addrs)

    def iptables(self) -> FakeIptables:
        return self.tables

    def http_status(self, ip: str, port: int, path: str, timeout: float) -> int | None:
        return self.health.get((ip, port))


def config(tmp_path: Path) -> str:
    for name in ("node1", "node2"):
        (tmp_path / name).touch()  # stands for the node's netns
    return f"""
lab: t
routerNetns: /run/netns/t-router
loadBalancerPool: 10.240.0.200-10.240.0.201
nodes:
  - {{name: node1, netns: {tmp_path}/node1, internalIP: 10.240.0.11, zone: lab-a,
      instanceType: lab.standard}}
  - {{name: node2, netns: {tmp_path}/node2, internalIP: 10.240.0.12, zone: lab-b,
      instanceType: lab.standard}}
"""


@pytest.fixture
def cloud(tmp_path: Path) -> lab.LabCloud:
    return lab.LabCloud(lab.parse_config(config(tmp_path)), router=FakeRouter())


def router(cloud: lab.LabCloud) -> FakeRouter:
    assert isinstance(cloud.router, FakeRouter)
    return cloud.router


async def test_instances_are_configured_nodes_whose_netns_exists(
    cloud: lab.LabCloud, tmp_path: Path
) -> None:
    meta = await cloud.instance_metadata(node("node2"))
    assert (meta.provider_id, meta.zone, meta.region) == ("lab://t/node2", "lab-b", "lab")
    assert meta.node_addresses[0].address == "10.240.0.12"
    assert await cloud.instance_exists(node("node1", provider_id="lab://t/node1"))
    (tmp_path / "node1").unlink()
    assert not await cloud.instance_exists(node("node1", provider_id="lab://t/node1"))
    with pytest.raises(InstanceNotFound):
        await cloud.instance_metadata(node("node9"))


async def test_on_vms_the_router_is_this_namespace_and_listed_instances_exist() -> None:
    config = lab.parse_config(
        "lab: t\nbridge: eth1\nloadBalancerPool: 10.240.0.200-10.240.0.201\nnodes:\n"
        "  - {name: node1, internalIP: 10.240.0.11, zone: lab-a}\n"
    )
    assert config.router_netns is None
    assert config.nodes[0].netns is None
    cloud = lab.LabCloud(config, router=FakeRouter())
    assert await cloud.instance_exists(node("node1", provider_id="lab://t/node1"))
    assert not await cloud.instance_exists(node("node2", provider_id="lab://t/node2"))


async def test_routes_go_via_the_node_and_unknown_gateways_are_blackholes(
    cloud: lab.LabCloud,
) -> None:
    await cloud.create_route(
        "t", "uid", Route(target_node="node1", destination_cidr="10.244.1.0/24")
    )
    await cloud.create_route(
        "t", "uid", Route(target_node="node1", destination_cidr="10.244.1.0/24")
    )
    router(cloud).routes["10.244.7.0/24"] = "10.240.0.77"
    listed = await cloud.list_routes("t")
    assert [(r.target_node, r.destination_cidr, r.blackhole) for r in listed] == [
        ("node1", "10.244.1.0/24", False),
        ("", "10.244.7.0/24", True),
    ]
    assert router(cloud).routes["10.244.1.0/24"] == "10.240.0.11"
    await cloud.delete_route("t", listed[1])
    assert list(router(cloud).routes) == ["10.244.1.0/24"]
    with pytest.raises(ValueError, match="--cluster-name"):
        await cloud.list_routes("kubernetes")


async def test_load_balancer_dnats_to_node_ports_and_survives_a_restart(
    cloud: lab.LabCloud, tmp_path: Path
) -> None:
    svc = lb_service()
    status = await cloud.ensure_load_balancer("t", svc, [node("node1"), node("node2")])
    assert status.ingress and status.ingress[0].ip == "10.240.0.200"
    assert router(cloud).addrs == {"10.240.0.200"}
    nat = router(cloud).tables.tables["nat"]
    [chain] = [c for c in nat if c.startswith("KLB-")]
    assert nat[chain][1:] == [
        f"-A {chain} -p tcp -m statistic --mode random --probability 0.50000000000 "
        "-j DNAT --to-destination 10.240.0.11:30080",
        f"-A {chain} -p tcp -j DNAT --to-destination 10.240.0.12:30080",
    ]
    assert nat["PREROUTING"] == [f"-A PREROUTING -j {lab.DISPATCH}"]

    restarted = lab.LabCloud(lab.parse_config(config(tmp_path)), router=router(cloud))
    assert (await restarted.get_load_balancer("t", svc))[1]
    other = lb_service("other")
    again = await restarted.ensure_load_balancer("t", svc, [node("node1")])
    second = await restarted.ensure_load_balancer("t", other, [node("node1")])
    assert again.ingress and again.ingress[0].ip == "10.240.0.200"
    assert second.ingress and second.ingress[0].ip == "10.240.0.201"
    with pytest.raises(ValueError, match="exhausted"):
        await restarted.ensure_load_balancer("t", lb_service("third"), [])

    await restarted.ensure_load_balancer_deleted("t", svc)
    await restarted.ensure_load_balancer_deleted("t", svc)
    assert not (await restarted.get_load_balancer("t", svc))[1]
    assert router(cloud).addrs == {"10.240.0.201"}
    assert len([c for c in nat if c.startswith("KLB-")]) == 1


async def test_local_traffic_policy_targets_only_nodes_with_local_endpoints(
    cloud: lab.LabCloud,
) -> None:
    svc = lb_service(external_traffic_policy="Local", health_check_node_port=31000)
    router(cloud).health[("10.240.0.12", 31000)] = 200
    router(cloud).health[("10.240.0.11", 31000)] = 503
    await cloud.ensure_load_balancer("t", svc, [node("node1"), node("node2")])
    nat = router(cloud).tables.tables["nat"]
    [chain] = [c for c in nat if c.startswith("KLB-")]
    assert nat[chain][1:] == [f"-A {chain} -p tcp -j DNAT --to-destination 10.240.0.12:30080"]


async def test_health_checks_follow_local_endpoints_until_stopped(tmp_path: Path) -> None:
    text = config(tmp_path).replace("lab: t", "lab: t\nhealthCheckInterval: 0.05")
    cloud = lab.LabCloud(lab.parse_config(text), router=FakeRouter())
    stop = asyncio.Event()
    cloud.initialize(cast(ClientBuilder, None), stop)
    svc = lb_service(external_traffic_policy="Local", health_check_node_port=31000)
    router(cloud).health[("10.240.0.11", 31000)] = 200
    await cloud.ensure_load_balancer("t", svc, [node("node1"), node("node2")])
    nat = router(cloud).tables.tables["nat"]
    [chain] = [c for c in nat if c.startswith("KLB-")]
    assert [r.split()[-1] for r in nat[chain][1:]] == ["10.240.0.11:30080"]

    router(cloud).health[("10.240.0.11", 31000)] = 503
    router(cloud).health[("10.240.0.12", 31000)] = 200

    def targets() -> list[str]:
        return [r.split()[-1] for r in router(cloud).tables.tables["nat"][chain][1:]]

    for _ in range(100):
        if targets() == ["10.240.0.12:30080"]:
            break
        await asyncio.sleep(0.02)
    assert targets() == ["10.240.0.12:30080"]
    stop.set()
    await asyncio.gather(*cloud._tasks)


def test_config_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="lacks 'lab'"):
        lab.parse_config("routerNetns: x\n")
    with pytest.raises(ValueError, match="ends before"):
        lab.parse_config("lab: t\nrouterNetns: x\nloadBalancerPool: 10.0.0.9-10.0.0.1\n")
