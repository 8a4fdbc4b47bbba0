"""The proxier's sync loop against FakeIptables and a FakeClock: full and partial syncs,
coalescing under min-sync-period, recovery after a failed restore, jumps, stale chains,
conntrack cleanup and read-only sysctls."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

import pytest

from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, Endpoint, EndpointPort, EndpointSlice
from kube.api.meta_v1 import ObjectMeta
from kube.client.informers import SharedInformerFactory
from kube.client.rest import Client
from kube.clock import FakeClock
from node.iptables import FakeIptables
from node.proxy import names
from node.proxy.health import ServiceHealth, ServiceHealthServer
from node.proxy.proxier import IptablesProxier
from node.proxy.ruleset import JUMPS
from tests.eventsinks import Told

NODE = "node-a"


class Cluster:
    """Services and slices as the informer caches would hold them."""

    def __init__(self) -> None:
        self.services: dict[str, Service] = {}
        self.slices: dict[str, list[EndpointSlice]] = {}

    def put(self, name: str, *ips: str, protocol: str = "TCP", vip: str = "") -> Service:
        service = Service(
            metadata=ObjectMeta(namespace="ns", name=name),
            spec=ServiceSpec(
                type="ClusterIP",
                cluster_ip=vip or f"10.96.0.{len(self.services) + 10}",
                ports=[ServicePort(name="p", protocol=protocol, port=80)],
            ),
        )
        self.services[f"ns/{name}"] = self.services.get(f"ns/{name}", service)
        self.slices[f"ns/{name}"] = [
            EndpointSlice(
                metadata=ObjectMeta(
                    namespace="ns", name=f"{name}-1", labels={SERVICE_NAME_LABEL: name}
                ),
                address_type="IPv4",
                ports=[EndpointPort(name="p", protocol=protocol, port=8080)],
                endpoints=[Endpoint(addresses=[ip], node_name=NODE) for ip in ips],
            )
        ]
        return self.services[f"ns/{name}"]

    def delete(self, name: str) -> Service:
        self.slices.pop(f"ns/{name}", None)
        return self.services.pop(f"ns/{name}")

    def slices_of(self, key: str) -> Sequence[EndpointSlice]:
        return self.slices.get(key, [])


class FakeConntrack:
    def __init__(self) -> None:
        self.deleted: list[tuple[str, int, str]] = []

    def delete_udp(self, original_dst: str, port: int, endpoint_ip: str) -> None:
        self.deleted.append((original_dst, port, endpoint_ip))


class Env:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.iptables = FakeIptables()
        self.cluster = Cluster()
        self.conntrack = FakeConntrack()
        self.sysctls: list[tuple[str, str]] = []
        self.proxier = IptablesProxier(
            self.iptables,
            NODE,
            self.clock,
            cluster_cidr="10.244.0.0/16",
            sync_period=30.0,
            min_sync_period=1.0,
            conntrack=self.conntrack,
            sysctl=self.sysctl,
        )
        self.proxier.set_lookups(self.cluster.services.get, self.cluster.slices_of)

    def sysctl(self, name: str, value: str) -> None:
        self.sysctls.append((name, value))
        if "conntrack" in name:
            raise PermissionError(30, "Read-only file system")

    def change(self, name: str, *ips: str, protocol: str = "TCP") -> None:
        self.proxier.on_service(self.cluster.put(name, *ips, protocol=protocol))

    def syncs(self, kind: str) -> int:
        return self.proxier.metrics.sync_duration.count(kind)

    def declared(self, index: int = -1) -> list[str]:
        nat = [lines for table, lines in self.iptables.restores if table == "nat"][index]
        return [line[1:].split()[0] for line in nat if line.startswith(":")]


async def until(condition: Callable[[], bool]) -> None:
    """Wait for the proxier, whose iptables calls run in worker threads, to get somewhere."""
    async with asyncio.timeout(5):
        while not condition():  # noqa: ASYNC110 (the state changes in threads, not on events)
            await asyncio.sleep(0.005)


@pytest.fixture
def env() -> Env:
    return Env()


@pytest.fixture
async def running(env: Env) -> AsyncIterator[Env]:
    task = asyncio.create_task(env.proxier.run())
    await until(lambda: env.syncs("full") == 1 and env.clock.sleepers == 1)
    try:
        yield env
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def svc_chain(name: str, protocol: str = "TCP") -> str:
    return names.service_chain(f"ns/{name}:p", protocol)


async def test_first_sync_is_full_and_writes_jumps_once(env: Env) -> None:
    env.change("a", "10.244.1.1")
    assert await env.proxier.sync()
    assert env.syncs("full") == 1
    assert svc_chain("a") in env.iptables.tables["nat"]
    env.proxier.needs_full = True
    assert await env.proxier.sync()
    assert env.syncs("full") == 2
    for jump in JUMPS:
        rules = env.iptables.rules(jump.table, jump.parent)
        assert sum(rule.endswith(f"-j {jump.chain}") for rule in rules) == 1


async def test_partial_sync_rewrites_only_the_changed_service(env: Env) -> None:
    env.change("a", "10.244.1.1")
    env.change("b", "10.244.1.2")
    await env.proxier.sync()
    env.change("b", "10.244.1.2", "10.244.1.3")
    assert await env.proxier.sync()
    assert env.syncs("partial") == 1
    declared = env.declared()
    assert svc_chain("b") in declared and svc_chain("a") not in declared
    assert len(env.iptables.rules("nat", svc_chain("b"))) == 3  # masquerade + 2 endpoints
    assert env.iptables.rules("nat", svc_chain("a"))  # untouched, still there


async def test_removed_endpoints_and_services_leave_no_chains(env: Env) -> None:
    env.change("a", "10.244.1.1", "10.244.1.2")
    await env.proxier.sync()
    env.change("a", "10.244.1.1")
    await env.proxier.sync()
    gone = names.endpoint_chain("ns/a:p", "TCP", "10.244.1.2:8080")
    assert gone not in env.iptables.tables["nat"]
    env.proxier.on_service(env.cluster.delete("a"))
    await env.proxier.sync()
    assert not [c for c in env.iptables.tables["nat"] if names.is_per_service(c)]


async def test_full_sync_deletes_chains_left_by_an_earlier_run(env: Env) -> None:
    stale = svc_chain("old")
    env.iptables.restore("nat", [f":{stale} - [0:0]", f"-A {stale} -j RETURN"])
    env.change("a", "10.244.1.1")
    await env.proxier.sync()
    assert stale not in env.iptables.tables["nat"]
    assert svc_chain("a") in env.iptables.tables["nat"]


async def test_restore_failure_logs_context_and_next_sync_is_full(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    env.change("a", "10.244.1.1")
    await env.proxier.sync()
    env.iptables.fail_on = "10.244.1.9"
    env.change("a", "10.244.1.9")
    assert not await env.proxier.sync()
    assert "sync failed" in caplog.text and "> " in caplog.text
    assert env.proxier.metrics.failures.values[()] == 1
    env.iptables.fail_on = None
    assert await env.proxier.sync()
    assert env.syncs("full") == 2
    assert names.endpoint_chain("ns/a:p", "TCP", "10.244.1.9:8080") in env.iptables.tables["nat"]


async def test_udp_endpoint_removal_deletes_conntrack_flows(env: Env) -> None:
    env.change("dns", "10.244.1.1", "10.244.1.2", protocol="UDP")
    await env.proxier.sync()
    env.change("dns", "10.244.1.1", protocol="UDP")
    await env.proxier.sync()
    vip = env.cluster.services["ns/dns"].spec.cluster_ip  # type: ignore[union-attr]
    assert env.conntrack.deleted == [(vip, 80, "10.244.1.2")]


async def test_changes_are_coalesced_by_min_sync_period(running: Env) -> None:
    env = running
    await env.clock.advance(5.0)
    restores = len(env.iptables.restores)
    env.change("a", "10.244.1.1")
    await until(lambda: env.syncs("partial") == 1)  # long after the last sync: at once
    env.change("b", "10.244.1.2")
    env.change("c", "10.244.1.3")
    env.change("a", "10.244.1.1", "10.244.1.4")
    await until(lambda: env.clock.sleepers == 1)
    await asyncio.sleep(0.02)
    assert env.syncs("partial") == 1  # held back by min-sync-period
    await env.clock.advance(1.0)
    await until(lambda: env.syncs("partial") == 2)
    declared = env.declared()
    assert {svc_chain("a"), svc_chain("b"), svc_chain("c")} <= set(declared)
    assert len(env.iptables.restores) == restores + 4  # two syncs, filter + nat each


async def test_full_sync_every_sync_period(running: Env) -> None:
    env = running
    await env.clock.advance(29.0)
    await asyncio.sleep(0.02)
    assert env.syncs("full") == 1
    await env.clock.advance(1.0)
    await until(lambda: env.syncs("full") == 2)


async def test_read_only_sysctls_do_not_stop_the_proxier(running: Env) -> None:
    assert ("net/ipv4/conf/all/route_localnet", "1") in running.sysctls
    assert any("conntrack" in name for name, _ in running.sysctls)


async def test_own_node_change_makes_next_sync_full(env: Env) -> None:
    from kube.api.kinds.core_v1.node import Node

    await env.proxier.sync()
    env.proxier.on_node(Node(metadata=ObjectMeta(name="other")))
    env.change("a", "10.244.1.1")
    await env.proxier.sync()
    assert env.syncs("partial") == 1
    env.proxier.on_node(Node(metadata=ObjectMeta(name=NODE)))
    await env.proxier.sync()
    assert env.syncs("full") == 2


async def test_informers_feed_the_proxier(client: Client, namespace: str) -> None:
    """Against a real API server: a Service and its slice created there become chains."""
    env = Env()
    created = await client.create(
        Service(
            metadata=ObjectMeta(namespace=namespace, name="web"),
            spec=ServiceSpec(type="ClusterIP", ports=[ServicePort(name="p", port=80)]),
        )
    )
    await client.create(
        EndpointSlice(
            metadata=ObjectMeta(
                namespace=namespace, name="web-1", labels={SERVICE_NAME_LABEL: "web"}
            ),
            address_type="IPv4",
            ports=[EndpointPort(name="p", protocol="TCP", port=8080)],
            endpoints=[Endpoint(addresses=["10.244.1.1"], node_name=NODE)],
        )
    )
    informers = SharedInformerFactory(client)
    env.proxier.bind(informers)
    informers.start()
    try:
        await informers.wait_for_cache_sync()
        assert await env.proxier.sync()
    finally:
        await informers.shutdown()
    chain = names.service_chain(f"{namespace}/web:p", "TCP")
    assert created.spec is not None and created.spec.cluster_ip
    assert any(
        created.spec.cluster_ip in rule for rule in env.iptables.rules("nat", "KUBE-SERVICES")
    )
    assert env.iptables.rules("nat", chain)[-1].endswith(
        names.endpoint_chain(f"{namespace}/web:p", "TCP", "10.244.1.1:8080")
    )


class RecordingHealth(ServiceHealthServer):
    def __init__(self) -> None:
        super().__init__()
        self.updates: list[dict[int, ServiceHealth]] = []

    async def update(self, wanted: Mapping[int, ServiceHealth]) -> None:
        self.updates.append(dict(wanted))


async def test_health_check_node_ports_follow_local_endpoints(env: Env) -> None:
    health = RecordingHealth()
    env.proxier.service_health = health
    service = env.cluster.put("lb", "10.244.1.1")
    service.spec = ServiceSpec(
        type="LoadBalancer",
        cluster_ip="10.96.0.99",
        external_traffic_policy="Local",
        health_check_node_port=32000,
        ports=[ServicePort(name="p", protocol="TCP", port=80, node_port=30080)],
    )
    env.proxier.on_service(service)
    await env.proxier.sync()
    assert health.updates[-1] == {32000: ServiceHealth("ns", "lb", 1)}
    env.cluster.slices["ns/lb"][0].endpoints[0].node_name = "elsewhere"  # type: ignore[index]
    env.proxier.on_service(service)
    await env.proxier.sync()
    assert health.updates[-1] == {32000: ServiceHealth("ns", "lb", 0)}


async def test_syncs_that_change_a_service_are_told_once_each(env: Env) -> None:
    told = Told()
    env.proxier.events = told
    env.change("a", "10.244.1.1")
    await env.proxier.sync()
    assert told.seen == []  # the first sync programs what there is: nothing to tell
    env.change("a", "10.244.1.1", "10.244.1.2")
    env.change("b")
    await env.proxier.sync()
    assert told.seen == [
        ("a", "EndpointsSynced", "port 80/TCP (p) → 10.244.1.1:8080, 10.244.1.2:8080"),
        ("b", "EndpointsSynced", "port 80/TCP (p) → no endpoints"),
    ]
    told.seen.clear()
    env.change("a", "10.244.1.1", "10.244.1.2")
    await env.proxier.sync()
    assert told.seen == []  # no change, nothing told
    env.change("a", *(f"10.244.2.{i}" for i in range(1, 13)))
    await env.proxier.sync()
    ((_, _, message),) = told.seen
    assert message.endswith("10.244.2.10:8080 (+2)") and message.count(":8080") == 10
