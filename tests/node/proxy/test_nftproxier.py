"""The nftables proxier's syncs against FakeNftables: full and partial transactions, stale
chains and sets, verdicts that change, recovery after a failed transaction and NodePort
addresses (the conntrack cleanup is the iptables mode's code, tested in test_proxier.py)."""

from __future__ import annotations

import pytest

from kube.clock import FakeClock
from node.nftables import FakeNftables
from node.proxy import names
from node.proxy.model import ServicePortName
from node.proxy.nftproxier import NftablesProxier
from tests.node.proxy.test_proxier import NODE, Cluster, FakeConntrack


class Env:
    def __init__(self, nodeport_cidrs: list[str] | None = None) -> None:
        self.clock = FakeClock()
        self.nft = FakeNftables()
        self.cluster = Cluster()
        self.conntrack = FakeConntrack()
        self.proxier = NftablesProxier(
            self.nft,
            NODE,
            self.clock,
            cluster_cidr="10.244.0.0/16",
            nodeport_cidrs=nodeport_cidrs,
            conntrack=self.conntrack,
            sysctl=lambda name, value: None,
            addresses=lambda: ["127.0.0.1", "10.0.0.5", "192.168.1.9"],
        )
        self.proxier.set_lookups(self.cluster.services.get, self.cluster.slices_of)

    def change(self, name: str, *ips: str, protocol: str = "TCP") -> None:
        self.proxier.on_service(self.cluster.put(name, *ips, protocol=protocol))

    def syncs(self, kind: str) -> int:
        return self.proxier.metrics.sync_duration.count(kind)

    @property
    def chains(self) -> dict[str, list[str]]:
        return self.nft.current.chains

    def elements(self, container: str) -> dict[str, str]:
        table = self.nft.current
        found = table.containers(container)
        assert found is not None
        return found


def base(name: str, protocol: str = "TCP") -> str:
    return names.nft_service_base(ServicePortName("ns", name, "p", protocol))


def svc(name: str) -> str:
    return "service-" + base(name)


def ep(name: str, ip: str) -> str:
    return "endpoint-" + names.nft_endpoint_base(ServicePortName("ns", name, "p", "TCP"), ip, 8080)


@pytest.fixture
def env() -> Env:
    return Env()


async def test_first_sync_writes_the_whole_table_in_one_transaction(env: Env) -> None:
    env.change("a", "10.244.1.1")
    assert await env.proxier.sync()
    assert env.syncs("full") == 1 and len(env.nft.scripts) == 1
    assert env.chains["nat-prerouting"] == ["jump services"]
    assert env.chains["filter-input"] == [
        "ct state new jump nodeport-endpoints-check",
        "ct state new jump service-endpoints-check",
    ]
    assert "nat-output" in env.nft.current.base_chains
    vip = env.cluster.services["ns/a"].spec.cluster_ip  # type: ignore[union-attr]
    assert env.elements("service-ips") == {f"{vip} . tcp . 80": f"goto {svc('a')}"}
    assert env.elements("cluster-ips") == {str(vip): ""}
    assert env.chains[ep("a", "10.244.1.1")][-1] == "meta l4proto tcp dnat to 10.244.1.1:8080"
    # Base chains are recreated by the first sync of a process only.
    env.proxier.needs_full = True
    assert await env.proxier.sync()
    assert not [line for line in env.nft.scripts[-1] if line.startswith("delete chain")]


async def test_partial_sync_touches_only_the_changed_service(env: Env) -> None:
    env.change("a", "10.244.1.1")
    env.change("b", "10.244.1.2")
    await env.proxier.sync()
    env.change("b", "10.244.1.2", "10.244.1.3")
    assert await env.proxier.sync()
    assert env.syncs("partial") == 1
    script = env.nft.scripts[-1]
    assert not [line for line in script if "/a/" in line]
    assert f"flush chain ip kube-proxy {svc('b')}" in script
    assert not [line for line in script if "element" in line]  # same verdicts as before
    assert not [line for line in script if " services" in line or "add table" in line]
    assert env.chains[svc("b")][-2].startswith("numgen random mod 2 0 goto endpoint-")
    assert env.chains[svc("a")]  # untouched, still there


async def test_removed_endpoints_and_services_leave_no_chains_or_elements(env: Env) -> None:
    env.change("a", "10.244.1.1", "10.244.1.2")
    await env.proxier.sync()
    env.change("a", "10.244.1.1")
    await env.proxier.sync()
    assert ep("a", "10.244.1.2") not in env.chains
    env.proxier.on_service(env.cluster.delete("a"))
    await env.proxier.sync()
    assert not [c for c in env.chains if names.is_nft_per_service(c)]
    assert env.elements("service-ips") == {} and env.elements("cluster-ips") == {}


async def test_a_verdict_that_changes_is_replaced(env: Env) -> None:
    env.change("a")
    await env.proxier.sync()
    vip = env.cluster.services["ns/a"].spec.cluster_ip  # type: ignore[union-attr]
    key = f"{vip} . tcp . 80"
    assert env.elements("no-endpoint-services") == {key: "goto reject-chain"}
    env.change("a", "10.244.1.1")
    assert await env.proxier.sync()
    assert env.elements("no-endpoint-services") == {}
    assert env.elements("service-ips") == {key: f"goto {svc('a')}"}
    env.cluster.services["ns/a"].spec.internal_traffic_policy = "Local"  # type: ignore[union-attr]
    env.change("a", "10.244.1.1")
    assert await env.proxier.sync()  # the fake refuses an add over a different verdict
    assert env.elements("service-ips") == {key: f"goto local-{base('a')}"}
    assert svc("a") not in env.chains


async def test_full_sync_deletes_chains_and_sets_left_by_an_earlier_run(env: Env) -> None:
    old_chain, old_set = svc("old"), "affinity-" + base("old")
    env.nft.run(
        [
            "add table ip kube-proxy",
            f"add chain ip kube-proxy {old_chain}",
            f"add set ip kube-proxy {old_set} {{ type ipv4_addr ; }}",
            f"add rule ip kube-proxy {old_chain} ip saddr @{old_set} drop",
        ]
    )
    env.change("a", "10.244.1.1")
    assert await env.proxier.sync()
    assert old_chain not in env.chains and old_set not in env.nft.current.sets
    assert svc("a") in env.chains


async def test_affinity_sets_come_and_go_with_their_endpoints(env: Env) -> None:
    service = env.cluster.put("a", "10.244.1.1", "10.244.1.2")
    assert service.spec is not None
    service.spec.session_affinity = "ClientIP"
    env.proxier.on_service(service)
    await env.proxier.sync()
    sets = [s for s in env.nft.current.sets if s.startswith("affinity-")]
    assert len(sets) == 2
    env.change("a", "10.244.1.1")
    assert await env.proxier.sync()
    assert [s for s in env.nft.current.sets if s.startswith("affinity-")] == [
        "affinity-"
        + names.nft_endpoint_base(ServicePortName("ns", "a", "p", "TCP"), "10.244.1.1", 8080)
    ]


async def test_failed_transaction_logs_context_and_next_sync_is_full(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    env.change("a", "10.244.1.1")
    await env.proxier.sync()
    env.nft.fail_on = "10.244.1.9"
    env.change("a", "10.244.1.9")
    assert not await env.proxier.sync()
    assert "sync failed" in caplog.text and "> " in caplog.text and "10.244.1.9" in caplog.text
    assert ep("a", "10.244.1.9") not in env.chains  # nothing of it applied
    env.nft.fail_on = None
    assert await env.proxier.sync()
    assert env.syncs("full") == 2
    assert ep("a", "10.244.1.9") in env.chains and ep("a", "10.244.1.1") not in env.chains


async def test_nodeport_addresses_fill_the_nodeport_ips_set_without_loopback() -> None:
    env = Env(nodeport_cidrs=["127.0.0.0/8", "10.0.0.0/8"])
    env.change("a", "10.244.1.1")
    assert await env.proxier.sync()
    assert env.nft.current.sets["nodeport-ips"] == {"10.0.0.5": ""}
    assert env.chains["services"][-1].startswith("ip daddr @nodeport-ips ")


async def test_nothing_changed_writes_nothing(env: Env) -> None:
    env.change("a", "10.244.1.1")
    await env.proxier.sync()
    env.change("a", "10.244.1.1")
    assert await env.proxier.sync()
    assert len(env.nft.scripts) == 1


async def test_a_kernel_before_6_2_gets_its_stale_chains_deleted_at_a_later_sync() -> None:
    env = Env()
    env.nft = FakeNftables(late_release=True)
    env.proxier = NftablesProxier(env.nft, NODE, env.clock, sysctl=lambda name, value: None)
    env.proxier.set_lookups(env.cluster.services.get, env.cluster.slices_of)
    env.change("a", "10.244.1.1")
    env.change("b", "10.244.1.2")
    await env.proxier.sync()
    env.proxier.on_service(env.cluster.delete("a"))
    assert await env.proxier.sync()  # the chains emptied, their deletion refused for now
    assert env.chains[svc("a")] == [] and env.syncs("partial") == 1
    env.change("b", "10.244.1.2", "10.244.1.3")
    assert await env.proxier.sync()
    assert svc("a") not in env.chains and ep("a", "10.244.1.1") not in env.chains
