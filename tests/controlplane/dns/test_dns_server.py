"""The cluster DNS end to end: real informers on a real API server feed the zone, and
dnspython asks over real UDP and TCP sockets on loopback."""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdatatype
import pytest

from controlplane.dns.firstanswers import FirstAnswers
from controlplane.dns.forward import Upstream, UpstreamForwarder
from controlplane.dns.health import DNSMetrics
from controlplane.dns.server import DNSServer, Responder
from controlplane.dns.source import InformerState
from controlplane.dns.zone import ClusterZone
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import EndpointSlice
from kube.client.informers import SharedInformerFactory
from kube.client.rest import Client
from tests.controlplane.dns.dnsharness import (
    LOOPBACK,
    UPSTREAM_ADDRESS,
    FakeUpstream,
    ask,
    endpoint_slice,
    eventually,
    service,
    texts,
)
from tests.eventsinks import Told

TTL = 7


@dataclass
class Cluster:
    port: int
    namespace: str
    client: Client
    upstream: FakeUpstream
    metrics: DNSMetrics
    told: Told

    def name(self, *labels: str) -> str:
        return ".".join(labels) + f".{self.namespace}.svc.cluster.local."


@pytest.fixture
async def cluster(client: Client, namespace: str) -> AsyncIterator[Cluster]:
    upstream = FakeUpstream()
    await upstream.start()
    factory = SharedInformerFactory(client)
    state = InformerState(factory)
    metrics = DNSMetrics()
    zone = ClusterZone(state, "cluster.local", TTL)
    forwarder = UpstreamForwarder([Upstream(LOOPBACK, upstream.port)], timeout=2)
    told = Told()
    first_answers = FirstAnswers(state, zone.origin, told)
    server = DNSServer(Responder(zone, forwarder, metrics, first_answers), idle_timeout=1)
    port = await server.start(LOOPBACK, 0)
    factory.start()
    try:
        assert await factory.wait_for_cache_sync(timeout=30)
        assert state.synced
        yield Cluster(port, namespace, client, upstream, metrics, told)
    finally:
        await factory.shutdown()
        await server.close()
        await upstream.close()


def rcode(expected: dns.rcode.Rcode) -> Callable[[dns.message.Message], bool]:
    return lambda response: response.rcode() == expected


async def test_cluster_ip_service_has_a_and_srv_records(cluster: Cluster) -> None:
    created = await cluster.client.create(
        service("web", cluster.namespace, [("http", 80, "TCP"), ("dns", 53, "UDP")])
    )
    await cluster.client.create(service("plain", cluster.namespace, [(None, 80, "TCP")]))
    assert created.spec is not None
    vip = created.spec.cluster_ip
    name = cluster.name("web")

    response = await eventually(lambda: ask(cluster.port, name), lambda r: bool(r.answer))
    assert texts(response) == {vip}
    assert response.flags & dns.flags.AA
    assert response.answer[0].ttl == TTL
    assert texts(await ask(cluster.port, name, tcp=True)) == {vip}

    srv = await ask(cluster.port, cluster.name("_http", "_tcp", "web"), "SRV")
    assert texts(srv, "SRV") == {f"0 100 80 {name}"}
    # The first answer for the name, told once however often it is asked; SRV names are not
    # the Service's own.
    assert cluster.told.seen == [
        ("web", "Answered", f"Answered {name} A {vip} (first answer since this server started)")
    ]
    assert texts(srv, "A", "additional") == {vip}
    udp_srv = await ask(cluster.port, cluster.name("_dns", "_udp", "web"), "SRV")
    assert texts(udp_srv, "SRV") == {f"0 100 53 {name}"}
    assert (await ask(cluster.port, cluster.name("_http", "_udp", "web"), "SRV")).rcode() == (
        dns.rcode.NXDOMAIN
    )
    # A port without a name has no SRV record.
    plain = await eventually(
        lambda: ask(cluster.port, cluster.name("plain")), lambda r: bool(r.answer)
    )
    assert plain.rcode() == dns.rcode.NOERROR
    assert (await ask(cluster.port, cluster.name("_tcp", "plain"), "SRV")).rcode() == (
        dns.rcode.NXDOMAIN
    )
    # The protocol label is an empty non-terminal.
    ent = await ask(cluster.port, cluster.name("_tcp", "web"), "SRV")
    assert (ent.rcode(), ent.answer) == (dns.rcode.NOERROR, [])

    # A name that exists, asked for a type it does not have: NODATA with the zone's SOA.
    nodata = await ask(cluster.port, name, "AAAA")
    assert (nodata.rcode(), nodata.answer) == (dns.rcode.NOERROR, [])
    assert [rrset.rdtype for rrset in nodata.authority] == [dns.rdatatype.SOA]
    # ClusterIP Services have no per-endpoint names.
    assert (await ask(cluster.port, cluster.name("web-0", "web"))).rcode() == dns.rcode.NXDOMAIN

    assert vip is not None
    ptr = await ask(cluster.port, _reverse(vip), "PTR")
    assert texts(ptr, "PTR") == {name}


async def test_headless_service_publishes_ready_endpoints(cluster: Cluster) -> None:
    await cluster.client.create(service("db", cluster.namespace, headless=True))
    await cluster.client.create(
        endpoint_slice(
            "db-a",
            cluster.namespace,
            "db",
            [("10.244.1.5", "db-0", True), ("10.244.2.6", None, True), ("10.244.3.7", None, False)],
        )
    )
    name = cluster.name("db")
    response = await eventually(lambda: ask(cluster.port, name), lambda r: len(texts(r)) == 2)
    assert texts(response) == {"10.244.1.5", "10.244.2.6"}

    assert texts(await ask(cluster.port, cluster.name("db-0", "db"))) == {"10.244.1.5"}
    # Without a hostname an endpoint is named by its address, as CoreDNS does.
    assert texts(await ask(cluster.port, cluster.name("10-244-2-6", "db"))) == {"10.244.2.6"}
    not_ready = await ask(cluster.port, cluster.name("10-244-3-7", "db"))
    assert not_ready.rcode() == dns.rcode.NXDOMAIN

    srv = await ask(cluster.port, cluster.name("_http", "_tcp", "db"), "SRV")
    assert texts(srv, "SRV") == {
        f"0 50 8080 {cluster.name('db-0', 'db')}",
        f"0 50 8080 {cluster.name('10-244-2-6', 'db')}",
    }
    assert texts(srv, "A", "additional") == {"10.244.1.5", "10.244.2.6"}

    ptr = await ask(cluster.port, _reverse("10.244.1.5"), "PTR")
    assert texts(ptr, "PTR") == {cluster.name("db-0", "db")}
    assert ptr.flags & dns.flags.AA


async def test_external_name_is_a_cname(cluster: Cluster) -> None:
    await cluster.client.create(service("ext", cluster.namespace, external_name="example.org"))
    response = await eventually(
        lambda: ask(cluster.port, cluster.name("ext")), lambda r: bool(r.answer)
    )
    assert texts(response, "CNAME") == {"example.org."}
    # The target is outside the cluster: its address comes from upstream.
    assert texts(response) == {UPSTREAM_ADDRESS}
    assert ("example.org.", "udp") in cluster.upstream.seen
    cname = await ask(cluster.port, cluster.name("ext"), "CNAME")
    assert texts(cname, "CNAME") == {"example.org."}
    assert texts(cname) == set()


async def test_names_that_do_not_exist(cluster: Cluster) -> None:
    missing = await ask(cluster.port, cluster.name("missing"))
    assert missing.rcode() == dns.rcode.NXDOMAIN
    assert missing.flags & dns.flags.AA
    (soa,) = missing.authority
    assert soa.rdtype == dns.rdatatype.SOA
    assert soa[0].mname.to_text() == "ns.dns.cluster.local."
    assert soa[0].minimum == TTL

    nxdomain = dns.rcode.NXDOMAIN
    assert (await ask(cluster.port, "nosuchns-x1.svc.cluster.local.")).rcode() == nxdomain
    assert (await ask(cluster.port, "foo.bar.cluster.local.")).rcode() == nxdomain
    assert (await ask(cluster.port, "x.y.z.w.v.svc.cluster.local.")).rcode() == nxdomain
    # Empty non-terminals exist: the namespace, svc and pod.
    for name in (f"{cluster.namespace}.svc.cluster.local.", "svc.cluster.local."):
        response = await eventually(
            functools.partial(ask, cluster.port, name), rcode(dns.rcode.NOERROR)
        )
        assert response.answer == []


async def test_zone_apex_version_and_pod_records(cluster: Cluster) -> None:
    soa = await ask(cluster.port, "cluster.local.", "SOA")
    assert texts(soa, "SOA") and soa.flags & dns.flags.AA
    assert texts(await ask(cluster.port, "cluster.local.", "NS"), "NS") == {"ns.dns.cluster.local."}
    version = await ask(cluster.port, "dns-version.cluster.local.", "TXT")
    assert texts(version, "TXT") == {'"1.1.0"'}
    pod = await ask(cluster.port, f"10-244-1-9.{cluster.namespace}.pod.cluster.local.")
    assert texts(pod) == {"10.244.1.9"}
    bad = await ask(cluster.port, f"not-an-ip.{cluster.namespace}.pod.cluster.local.")
    assert bad.rcode() == dns.rcode.NXDOMAIN
    mixed_case = await ask(cluster.port, "DNS-Version.Cluster.Local.", "TXT")
    assert texts(mixed_case, "TXT") == {'"1.1.0"'}


async def test_answers_follow_changes(cluster: Cluster) -> None:
    await cluster.client.create(service("api", cluster.namespace, headless=True))
    await cluster.client.create(
        endpoint_slice("api-a", cluster.namespace, "api", [("10.244.1.10", "api-0", True)])
    )
    name = cluster.name("api")
    await eventually(lambda: ask(cluster.port, name), lambda r: texts(r) == {"10.244.1.10"})

    current = await cluster.client.get(EndpointSlice, "api-a", cluster.namespace)
    current.endpoints = endpoint_slice(
        "api-a",
        cluster.namespace,
        "api",
        [("10.244.1.10", "api-0", False), ("10.244.1.11", "api-1", True)],
    ).endpoints
    await cluster.client.update(current)
    await eventually(lambda: ask(cluster.port, name), lambda r: texts(r) == {"10.244.1.11"})
    gone = await ask(cluster.port, cluster.name("api-0", "api"))
    assert gone.rcode() == dns.rcode.NXDOMAIN

    await cluster.client.delete(Service, "api", cluster.namespace)
    await eventually(lambda: ask(cluster.port, name), rcode(dns.rcode.NXDOMAIN))


async def test_other_names_are_forwarded_upstream(cluster: Cluster) -> None:
    udp = await ask(cluster.port, "example.org.")
    assert texts(udp) == {UPSTREAM_ADDRESS}
    tcp = await ask(cluster.port, "example.org.", tcp=True)
    assert texts(tcp) == {UPSTREAM_ADDRESS}
    assert ("example.org.", "udp") in cluster.upstream.seen
    assert ("example.org.", "tcp") in cluster.upstream.seen
    # A reverse name the cluster does not own goes upstream too.
    await ask(cluster.port, _reverse("192.0.2.1"), "PTR")
    assert (_reverse("192.0.2.1"), "udp") in cluster.upstream.seen
    assert cluster.metrics.forwarded.values[("answered",)] == 3


async def test_without_upstream_other_names_are_refused(client: Client) -> None:
    factory = SharedInformerFactory(client)
    zone = ClusterZone(InformerState(factory))
    metrics = DNSMetrics()
    server = DNSServer(Responder(zone, None, metrics))
    port = await server.start(LOOPBACK, 0)
    try:
        response = await ask(port, "example.org.")
        assert response.rcode() == dns.rcode.REFUSED
        assert metrics.forwarded.values == {("refused",): 1}
    finally:
        await server.close()
        await factory.shutdown()


async def test_a_dead_upstream_gives_servfail(client: Client) -> None:
    factory = SharedInformerFactory(client)
    dead = FakeUpstream()
    dead_port = await dead.start()
    await dead.close()
    forwarder = UpstreamForwarder([Upstream(LOOPBACK, dead_port)], timeout=0.2)
    server = DNSServer(Responder(ClusterZone(InformerState(factory)), forwarder, DNSMetrics()))
    port = await server.start(LOOPBACK, 0)
    try:
        assert (await ask(port, "example.org.")).rcode() == dns.rcode.SERVFAIL
        assert (await ask(port, "example.org.", tcp=True)).rcode() == dns.rcode.SERVFAIL
    finally:
        await server.close()
        await factory.shutdown()


async def _udp_exchange(port: int, payload: bytes, wait: float = 0.5) -> bytes | None:
    loop = asyncio.get_running_loop()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        await loop.sock_sendto(sock, payload, (LOOPBACK, port))
        try:
            data, _ = await asyncio.wait_for(loop.sock_recvfrom(sock, 65535), wait)
        except TimeoutError:
            return None
        return data


async def test_bad_packets_are_answered_or_dropped_never_obeyed(cluster: Cluster) -> None:
    assert await _udp_exchange(cluster.port, b"\x01\x02\x03") is None  # no header: no ID
    garbage = await _udp_exchange(cluster.port, b"\xbe\xef\x01\x00\x00\x05" + b"\xff" * 30)
    assert garbage is not None
    formerr = dns.message.from_wire(garbage)
    assert (formerr.id, formerr.rcode()) == (0xBEEF, dns.rcode.FORMERR)
    assert formerr.flags & dns.flags.QR

    query = dns.message.make_query("example.org.", "A")
    query.flags |= dns.flags.QR  # a response: answering it could start a loop
    assert await _udp_exchange(cluster.port, query.to_wire()) is None
    notify = dns.message.make_query("cluster.local.", "SOA")
    notify.set_opcode(dns.opcode.NOTIFY)
    answer = await _udp_exchange(cluster.port, notify.to_wire())
    assert answer is not None
    assert dns.message.from_wire(answer).rcode() == dns.rcode.NOTIMP
    two = dns.message.make_query("a.cluster.local.", "A")
    two.question.append(dns.message.make_query("b.cluster.local.", "A").question[0])
    answer = await _udp_exchange(cluster.port, two.to_wire())
    assert answer is not None
    assert dns.message.from_wire(answer).rcode() == dns.rcode.FORMERR

    # TCP: garbage in a frame gets FORMERR; a stalled frame is dropped after the idle timeout.
    reader, writer = await asyncio.open_connection(LOOPBACK, cluster.port)
    bad = b"\x12\x34\x01\x00\x00\x07" + b"\xff" * 20
    writer.write(len(bad).to_bytes(2, "big") + bad)
    await writer.drain()
    length = int.from_bytes(await reader.readexactly(2), "big")
    assert dns.message.from_wire(await reader.readexactly(length)).id == 0x1234
    writer.write(b"\x00\x40\x00")  # promises 64 bytes, sends one
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    await writer.wait_closed()

    assert cluster.metrics.malformed.values[()] >= 4
    assert texts(await ask(cluster.port, "example.org.")) == {UPSTREAM_ADDRESS}


async def test_large_answers_are_truncated_over_udp(cluster: Cluster) -> None:
    await cluster.client.create(service("big", cluster.namespace, headless=True))
    addresses = [(f"10.244.7.{i}", None, True) for i in range(1, 61)]
    await cluster.client.create(endpoint_slice("big-a", cluster.namespace, "big", addresses))
    name = cluster.name("big")
    full = await eventually(
        lambda: ask(cluster.port, name, tcp=True), lambda r: len(texts(r)) == 60
    )
    assert not full.flags & dns.flags.TC
    truncated = await ask(cluster.port, name)
    assert truncated.flags & dns.flags.TC
    assert len(truncated.to_wire()) <= 512
    with_edns = await ask(cluster.port, name, payload=4096)
    assert not with_edns.flags & dns.flags.TC
    assert len(texts(with_edns)) == 60


def _reverse(address: str) -> str:
    import dns.reversename

    return dns.reversename.from_address(address).to_text()
