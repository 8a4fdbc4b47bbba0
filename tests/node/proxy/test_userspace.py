"""Userspace mode: round robin and affinity, rule rendering, jumps and cleanup against
FakeIptables, and the relays themselves with real asyncio sockets on loopback (the listeners
are reached directly, without the REDIRECT; the netns test covers that part)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
from collections.abc import AsyncIterator

import pytest

from kube.api.kinds.core_v1.service import (
    ClientIPConfig,
    Service,
    ServicePort,
    ServiceSpec,
    SessionAffinityConfig,
)
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, Endpoint, EndpointPort, EndpointSlice
from kube.api.meta_v1 import ObjectMeta
from kube.clock import FakeClock
from node.iptables import FakeIptables
from node.proxy import userspace
from node.proxy.model import EndpointInfo, ServicePortInfo, ServicePortName
from node.proxy.userspace import (
    CHAINS,
    NODEPORT_CONTAINER,
    NODEPORT_HOST,
    PORTALS_CONTAINER,
    PORTALS_HOST,
    Portal,
    RoundRobin,
    UserspaceProxier,
    render_rules,
)

NODE = "node-a"
BACKENDS = ("127.0.0.2", "127.0.0.3")
DEAD = "127.0.0.4"


# Round robin and affinity.


def endpoint(ip: str, **conditions: bool) -> EndpointInfo:
    return EndpointInfo(ip=ip, port=8080, **conditions)


def picks(balancer: RoundRobin, client: str, count: int) -> list[str]:
    chosen = [balancer.next(client) for _ in range(count)]
    return [e.ip if e else "" for e in chosen]


def test_round_robin_in_turn() -> None:
    balancer = RoundRobin(FakeClock())
    balancer.update([endpoint("10.0.0.1"), endpoint("10.0.0.2"), endpoint("10.0.0.3")], 0)
    assert picks(balancer, "1.1.1.1", 4) == ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.1"]
    assert picks(balancer, "2.2.2.2", 2) == ["10.0.0.2", "10.0.0.3"]


def test_round_robin_skips_excluded_and_empty_is_none() -> None:
    balancer = RoundRobin(FakeClock())
    assert balancer.next("1.1.1.1") is None
    balancer.update([endpoint("10.0.0.1"), endpoint("10.0.0.2")], 0)
    chosen = balancer.next("1.1.1.1", exclude=["10.0.0.1:8080"])
    assert chosen is not None and chosen.ip == "10.0.0.2"
    assert balancer.next("1.1.1.1", exclude=["10.0.0.1:8080", "10.0.0.2:8080"]) is None


def test_terminating_endpoints_only_as_fallback() -> None:
    balancer = RoundRobin(FakeClock())
    terminating = endpoint("10.0.0.9", ready=False, serving=True, terminating=True)
    balancer.update([endpoint("10.0.0.1"), terminating], 0)
    assert picks(balancer, "c", 3) == ["10.0.0.1"] * 3
    balancer.update([terminating, endpoint("10.0.0.1", ready=False, serving=False)], 0)
    assert picks(balancer, "c", 2) == ["10.0.0.9"] * 2


async def test_client_ip_affinity_sticks_until_the_timeout() -> None:
    clock = FakeClock()
    balancer = RoundRobin(clock)
    balancer.update([endpoint("10.0.0.1"), endpoint("10.0.0.2"), endpoint("10.0.0.3")], 10)
    assert picks(balancer, "1.1.1.1", 3) == ["10.0.0.1"] * 3
    assert picks(balancer, "2.2.2.2", 1) == ["10.0.0.2"]
    await clock.advance(9.5)  # each use refreshes the timeout
    assert picks(balancer, "1.1.1.1", 1) == ["10.0.0.1"]
    await clock.advance(9.5)
    assert picks(balancer, "1.1.1.1", 1) == ["10.0.0.1"]
    await clock.advance(10)
    assert picks(balancer, "1.1.1.1", 2) == ["10.0.0.3"] * 2  # expired: the next in turn


def test_affinity_reset_and_removed_endpoint() -> None:
    balancer = RoundRobin(FakeClock())
    balancer.update([endpoint("10.0.0.1"), endpoint("10.0.0.2")], 100)
    assert picks(balancer, "c", 2) == ["10.0.0.1", "10.0.0.1"]
    again = balancer.next("c", reset_affinity=True)
    assert again is not None and again.ip == "10.0.0.2"
    assert picks(balancer, "c", 1) == ["10.0.0.2"]
    balancer.update([endpoint("10.0.0.1")], 100)
    assert picks(balancer, "c", 1) == ["10.0.0.1"]


# Rules.


def port_info(name: str = "web", **kwargs: object) -> ServicePortInfo:
    values: dict[str, object] = {"cluster_ip": "10.96.0.10", "port": 80}
    values.update(kwargs)
    protocol = str(values.pop("protocol", "TCP"))
    return ServicePortInfo(name=ServicePortName("ns", name, "http", protocol), **values)  # type: ignore[arg-type]


def test_render_rules_cluster_ip_external_ip_and_node_port() -> None:
    web = port_info(node_port=30080, external_ips=("192.0.2.7",))
    dns = port_info("dns", cluster_ip="10.96.0.53", port=53, protocol="UDP")
    lines = render_rules([Portal(web, 40001), Portal(dns, 40002)])
    redirect_dns = '-m comment --comment "ns/dns:http" -m udp -p udp -d 10.96.0.53/32 --dport 53'
    redirect_web = '-m comment --comment "ns/web:http" -m tcp -p tcp'
    assert lines == [
        f":{PORTALS_CONTAINER} - [0:0]",
        f":{PORTALS_HOST} - [0:0]",
        f":{NODEPORT_CONTAINER} - [0:0]",
        f":{NODEPORT_HOST} - [0:0]",
        f"-A {PORTALS_CONTAINER} {redirect_dns} -j REDIRECT --to-ports 40002",
        f"-A {PORTALS_CONTAINER} {redirect_web} -d 10.96.0.10/32 --dport 80 "
        "-j REDIRECT --to-ports 40001",
        f"-A {PORTALS_CONTAINER} {redirect_web} -d 192.0.2.7/32 --dport 80 "
        "-j REDIRECT --to-ports 40001",
        f"-A {PORTALS_HOST} {redirect_dns} -j REDIRECT --to-ports 40002",
        f"-A {PORTALS_HOST} {redirect_web} -d 10.96.0.10/32 --dport 80 "
        "-j REDIRECT --to-ports 40001",
        f"-A {PORTALS_HOST} {redirect_web} -d 192.0.2.7/32 --dport 80 -j REDIRECT --to-ports 40001",
        f"-A {NODEPORT_CONTAINER} {redirect_web} --dport 30080 -j REDIRECT --to-ports 40001",
        f"-A {NODEPORT_HOST} {redirect_web} --dport 30080 -j REDIRECT --to-ports 40001",
    ]


def test_render_rules_node_ips_and_bound_listener() -> None:
    web = port_info(node_port=30080)
    lines = render_rules(
        [Portal(web, 40001)], listen_ip="10.1.0.5", node_ips=("10.1.0.5", "127.0.0.1")
    )
    head = '-m comment --comment "ns/web:http" -m tcp -p tcp'
    dnat = "-j DNAT --to-destination 10.1.0.5:40001"
    assert [line for line in lines if line.startswith(f"-A {NODEPORT_HOST}")] == [
        f"-A {NODEPORT_HOST} {head} -d 10.1.0.5/32 --dport 30080 {dnat}",
        f"-A {NODEPORT_HOST} {head} -d 127.0.0.1/32 --dport 30080 {dnat}",
    ]
    assert f"-A {PORTALS_HOST} {head} -d 10.96.0.10/32 --dport 80 {dnat}" in lines


def test_jumps_once_and_cleanup_against_fake_iptables() -> None:
    fake = FakeIptables()
    fake.tables["nat"]["PREROUTING"].append("-A PREROUTING -j SOMEONE-ELSES")
    fake.tables["nat"]["SOMEONE-ELSES"] = []
    lines = render_rules([Portal(port_info(node_port=30080), 40001)])
    fake.restore("nat", lines + userspace.missing_jumps(fake.save("nat")))
    assert userspace.missing_jumps(fake.save("nat")) == []
    prerouting = fake.rules("nat", "PREROUTING")
    assert [rule.split()[-1] for rule in prerouting] == [
        PORTALS_CONTAINER,
        "SOMEONE-ELSES",
        NODEPORT_CONTAINER,
    ]
    assert [rule.split()[-1] for rule in fake.rules("nat", "OUTPUT")] == [
        PORTALS_HOST,
        NODEPORT_HOST,
    ]
    assert "-m addrtype --dst-type LOCAL" in prerouting[-1]
    fake.restore("nat", userspace.cleanup_lines(fake.save("nat")))
    assert not set(CHAINS) & set(fake.tables["nat"])
    assert fake.rules("nat", "PREROUTING") == ["-A PREROUTING -j SOMEONE-ELSES"]
    assert fake.rules("nat", "OUTPUT") == []
    assert userspace.cleanup_lines(fake.save("nat")) == []


# The proxier with real sockets.


class Cluster:
    def __init__(self) -> None:
        self.services: dict[str, Service] = {}
        self.slices: dict[str, list[EndpointSlice]] = {}

    def put(
        self,
        name: str,
        *ips: str,
        port: int = 0,
        protocol: str = "TCP",
        affinity: int = 0,
        node_port: int = 0,
    ) -> Service:
        spec = ServiceSpec(
            type="NodePort" if node_port else "ClusterIP",
            cluster_ip=f"10.96.0.{len(self.services) + 10}",
            ports=[ServicePort(name="p", protocol=protocol, port=80, node_port=node_port or None)],
        )
        if affinity:
            spec.session_affinity = "ClientIP"
            spec.session_affinity_config = SessionAffinityConfig(
                client_ip=ClientIPConfig(timeout_seconds=affinity)
            )
        old = self.services.get(f"ns/{name}")
        if old is not None and old.spec is not None:
            spec.cluster_ip = old.spec.cluster_ip
        service = Service(metadata=ObjectMeta(namespace="ns", name=name), spec=spec)
        self.services[f"ns/{name}"] = service
        self.slices[f"ns/{name}"] = [
            EndpointSlice(
                metadata=ObjectMeta(
                    namespace="ns", name=f"{name}-1", labels={SERVICE_NAME_LABEL: name}
                ),
                address_type="IPv4",
                ports=[EndpointPort(name="p", protocol=protocol, port=port)],
                endpoints=[Endpoint(addresses=[ip], node_name=NODE) for ip in ips],
            )
        ]
        return service

    def delete(self, name: str) -> Service:
        self.slices.pop(f"ns/{name}", None)
        return self.services.pop(f"ns/{name}")


class Env:
    def __init__(self, port: int) -> None:
        self.port = port
        """The port every backend listens on (TCP and UDP), on each of BACKENDS."""
        self.clock = FakeClock()
        self.iptables = FakeIptables()
        self.cluster = Cluster()
        self.proxier = UserspaceProxier(
            self.iptables,
            NODE,
            self.clock,
            udp_idle_timeout=0.2,
            addresses=lambda: ["127.0.0.1"],
        )
        self.proxier.set_lookups(
            self.cluster.services.get, lambda key: self.cluster.slices.get(key, [])
        )

    async def put(self, name: str, *ips: str, **kwargs: object) -> int:
        """Create or change a Service, sync, and return its listener's port."""
        self.proxier.on_service(self.cluster.put(name, *ips, port=self.port, **kwargs))  # type: ignore[arg-type]
        assert await self.proxier.sync()
        protocol = str(kwargs.get("protocol", "TCP"))
        return self.proxier.proxies[ServicePortName("ns", name, "p", protocol)].port


async def backend_tcp(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Says which address it is, then echoes everything until EOF, then says how much."""
    here = writer.get_extra_info("sockname")[0]
    writer.write(f"{here}\n".encode())
    total = 0
    while data := await reader.read(65536):
        total += len(data)
        writer.write(data)
        await writer.drain()
    writer.write(f"eof after {total}\n".encode())
    writer.close()


class BackendUdp(asyncio.DatagramProtocol):
    def __init__(self, ip: str) -> None:
        self.ip = ip
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        assert self.transport is not None
        self.transport.sendto(self.ip.encode() + b" " + data, addr)


def free_port() -> int:
    """A port free on every backend address, for both TCP and UDP."""
    for _ in range(50):
        with contextlib.ExitStack() as stack:
            probe = stack.enter_context(socket.socket())
            probe.bind((BACKENDS[0], 0))
            port = int(probe.getsockname()[1])
            try:
                for ip in BACKENDS:
                    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                        s = stack.enter_context(socket.socket(socket.AF_INET, kind))
                        if (ip, kind) != (BACKENDS[0], socket.SOCK_STREAM):
                            s.bind((ip, port))
            except OSError:
                continue
            return port
    raise RuntimeError("no common free port")


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    port = free_port()
    loop = asyncio.get_running_loop()
    servers = [await asyncio.start_server(backend_tcp, ip, port) for ip in BACKENDS]
    udp = [
        (await loop.create_datagram_endpoint(functools.partial(BackendUdp, ip), (ip, port)))[0]
        for ip in BACKENDS
    ]
    env = Env(port)
    try:
        yield env
    finally:
        await env.proxier.close()
        for server in servers:
            server.close()
            await server.wait_closed()
        for transport in udp:
            transport.close()


async def hello(port: int, payload: bytes = b"") -> tuple[str, str]:
    """Connect to the listener, send ``payload``, half-close; the backend's greeting and what
    came back after it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        greeting = (await reader.readline()).decode().strip()
        writer.write(payload)
        writer.write_eof()
        rest = await asyncio.wait_for(reader.read(), 5)
        return greeting, rest.decode("latin-1")
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def test_round_robin_over_tcp_with_half_close(env: Env) -> None:
    port = await env.put("web", *BACKENDS)
    seen = [await hello(port, b"ping" * 1000) for _ in range(4)]
    assert [greeting for greeting, _ in seen] == [*BACKENDS, *BACKENDS]
    # The half-close reached the backend, which still answered afterwards.
    assert all(rest == "ping" * 1000 + "eof after 4000\n" for _, rest in seen)


async def test_large_transfer_both_ways(env: Env) -> None:
    port = await env.put("web", BACKENDS[0])
    payload = bytes(range(256)) * 8192  # 2 MiB
    greeting, rest = await hello(port, payload)
    assert greeting == BACKENDS[0]
    assert rest.encode("latin-1")[: len(payload)] == payload
    assert rest.endswith(f"eof after {len(payload)}\n")


async def test_refused_endpoint_is_retried_on_the_next(env: Env) -> None:
    port = await env.put("web", BACKENDS[0], DEAD)
    greetings = [(await hello(port))[0] for _ in range(4)]
    assert greetings == [BACKENDS[0]] * 4


async def test_only_dead_endpoints_reset_the_client(env: Env) -> None:
    port = await env.put("web", DEAD)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


async def test_session_affinity_client_ip(env: Env) -> None:
    port = await env.put("web", *BACKENDS, affinity=60)
    greetings = {(await hello(port))[0] for _ in range(4)}
    assert len(greetings) == 1


async def test_no_endpoints_closes_at_once(env: Env) -> None:
    port = await env.put("empty")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(1):
            with pytest.raises(ConnectionResetError):
                await reader.read()
    finally:
        writer.close()


async def test_endpoint_changes_keep_the_listener(env: Env) -> None:
    port = await env.put("web", BACKENDS[0])
    assert (await hello(port))[0] == BACKENDS[0]
    assert await env.put("web", BACKENDS[1]) == port
    assert [(await hello(port))[0] for _ in range(2)] == [BACKENDS[1]] * 2


async def test_listeners_and_rules_follow_services(env: Env) -> None:
    port = await env.put("web", *BACKENDS, node_port=30080)
    rules = env.iptables.rules("nat", PORTALS_CONTAINER)
    assert len(rules) == 1 and rules[0].endswith(f"--to-ports {port}")
    assert env.iptables.rules("nat", NODEPORT_HOST)[0].endswith(f"--to-ports {port}")
    other = await env.put("other", BACKENDS[0])
    assert len(env.iptables.rules("nat", PORTALS_HOST)) == 2
    env.proxier.on_service(env.cluster.delete("web"))
    assert await env.proxier.sync()
    assert set(env.proxier.proxies) == {ServicePortName("ns", "other", "p", "TCP")}
    assert [r.split()[-1] for r in env.iptables.rules("nat", PORTALS_HOST)] == [str(other)]
    assert env.iptables.rules("nat", NODEPORT_HOST) == []
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", port)
    # Jumps were inserted once, at the first (full) sync.
    assert len(env.iptables.rules("nat", "PREROUTING")) == 2
    assert env.proxier.metrics.sync_duration.count("full") == 1


async def test_restart_rewrites_rules_without_duplicates(env: Env) -> None:
    await env.put("web", *BACKENDS)
    await env.proxier.close()
    second = UserspaceProxier(env.iptables, NODE, env.clock, addresses=lambda: [])
    second.set_lookups(env.cluster.services.get, lambda key: env.cluster.slices.get(key, []))
    second.on_service(env.cluster.services["ns/web"])
    try:
        assert await second.sync()
        new_port = second.proxies[ServicePortName("ns", "web", "p", "TCP")].port
        assert [r.split()[-1] for r in env.iptables.rules("nat", PORTALS_HOST)] == [str(new_port)]
        assert len(env.iptables.rules("nat", "OUTPUT")) == 2
        assert (await hello(new_port))[0] in BACKENDS
        await second.remove_rules()
        assert not set(CHAINS) & set(env.iptables.tables["nat"])
        assert env.iptables.rules("nat", "OUTPUT") == []
    finally:
        await second.close()


async def test_failed_restore_makes_the_next_sync_full(env: Env) -> None:
    env.iptables.fail_on = "REDIRECT"
    env.proxier.on_service(env.cluster.put("web", BACKENDS[0], port=env.port))
    assert not await env.proxier.sync()
    env.iptables.fail_on = None
    saves = len(env.iptables.saves)
    assert await env.proxier.sync()
    assert len(env.iptables.saves) == saves + 1  # full: saved nat again
    assert len(env.iptables.rules("nat", PORTALS_HOST)) == 1


class UdpClient(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.received: asyncio.Queue[tuple[bytes, tuple[str, int]]] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.received.put_nowait((data, addr))


@contextlib.asynccontextmanager
async def udp_client(port: int) -> AsyncIterator[tuple[asyncio.DatagramTransport, UdpClient]]:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_datagram_endpoint(
        UdpClient, remote_addr=("127.0.0.1", port)
    )
    try:
        yield transport, protocol
    finally:
        transport.close()


async def test_udp_relay_associations_and_idle_timeout(env: Env) -> None:
    port = await env.put("dns", *BACKENDS, protocol="UDP")
    proxy = env.proxier.proxies[ServicePortName("ns", "dns", "p", "UDP")]
    assert isinstance(proxy, userspace.UdpProxy)
    async with udp_client(port) as (one, first), udp_client(port) as (two, second):
        one.sendto(b"a")
        data, source = await asyncio.wait_for(first.received.get(), 5)
        assert data == f"{BACKENDS[0]} a".encode() and source == ("127.0.0.1", port)
        one.sendto(b"b")  # the same association: the same endpoint
        assert (await asyncio.wait_for(first.received.get(), 5))[0] == f"{BACKENDS[0]} b".encode()
        two.sendto(b"c")  # another client: the next endpoint
        assert (await asyncio.wait_for(second.received.get(), 5))[0] == f"{BACKENDS[1]} c".encode()
        assert len(proxy.associations) == 2
        async with asyncio.timeout(5):
            while proxy.associations:  # noqa: ASYNC110 (timers, not events)
                await asyncio.sleep(0.05)
        one.sendto(b"d")  # a new association after the idle timeout: round robin goes on
        assert (await asyncio.wait_for(first.received.get(), 5))[0] == f"{BACKENDS[0]} d".encode()


async def test_udp_without_endpoints_drops(env: Env) -> None:
    port = await env.put("dns", protocol="UDP")
    async with udp_client(port) as (transport, client):
        transport.sendto(b"x")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(client.received.get(), 0.3)


async def test_close_aborts_relayed_connections(env: Env) -> None:
    port = await env.put("web", BACKENDS[0])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        assert (await reader.readline()).decode().strip() == BACKENDS[0]
        await env.proxier.close()
        async with asyncio.timeout(5):
            with contextlib.suppress(ConnectionResetError):
                assert await reader.read() == b""
    finally:
        writer.close()


async def test_udp_refused_endpoint_is_retried_on_the_next(env: Env) -> None:
    port = await env.put("dns", BACKENDS[0], DEAD, protocol="UDP")
    for payload in (b"one", b"two", b"three"):  # a new client each: .2, .4 (refused), .2
        async with udp_client(port) as (transport, client):
            transport.sendto(payload)
            data, _ = await asyncio.wait_for(client.received.get(), 5)
            assert data == f"{BACKENDS[0]} ".encode() + payload


async def test_endpoint_change_alone_does_not_rewrite_rules(env: Env) -> None:
    await env.put("web", BACKENDS[0])
    restores = len(env.iptables.restores)
    await env.put("web", *BACKENDS)
    assert len(env.iptables.restores) == restores
    assert env.proxier.metrics.sync_duration.count("partial") == 1


async def test_removed_service_keeps_relayed_connections_until_close(env: Env) -> None:
    port = await env.put("web", BACKENDS[0])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        assert (await reader.readline()).decode().strip() == BACKENDS[0]
        env.proxier.on_service(env.cluster.delete("web"))
        assert await env.proxier.sync()
        assert env.proxier.proxies == {}
        writer.write(b"still here")
        assert await asyncio.wait_for(reader.readexactly(10), 5) == b"still here"
        await env.proxier.close()
        async with asyncio.timeout(5):
            with contextlib.suppress(ConnectionResetError):
                assert await reader.read() == b""
    finally:
        writer.close()
