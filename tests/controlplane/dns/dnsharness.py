"""Helpers for the cluster DNS tests: asking a server over real sockets, waiting for the
informers to catch up, building Services and EndpointSlices, and a fake upstream resolver."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import dns.asyncquery
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset

from controlplane.dns.server import DNSServer
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.discovery_v1 import (
    SERVICE_NAME_LABEL,
    Endpoint,
    EndpointConditions,
    EndpointPort,
    EndpointSlice,
)
from kube.api.meta_v1 import ObjectMeta

LOOPBACK = "127.0.0.1"
PATIENCE = 15.0
"""Seconds a change may take to reach the DNS (through the API server's watch)."""
UPSTREAM_ADDRESS = "192.0.2.53"


async def ask(
    port: int, name: str, rdtype: str = "A", *, tcp: bool = False, payload: int | None = None
) -> dns.message.Message:
    """The server's answer to one question, over UDP (or TCP)."""
    query = dns.message.make_query(name, rdtype, use_edns=payload is not None, payload=payload)
    if tcp:
        return await dns.asyncquery.tcp(query, LOOPBACK, timeout=5, port=port)
    return await dns.asyncquery.udp(query, LOOPBACK, timeout=5, port=port)


def texts(response: dns.message.Message, rdtype: str = "A", section: str = "answer") -> set[str]:
    """The data of the ``rdtype`` records in a section, as text."""
    rrsets: list[dns.rrset.RRset] = getattr(response, section)
    kind = dns.rdatatype.from_text(rdtype)
    return {rdata.to_text() for rrset in rrsets if rrset.rdtype == kind for rdata in rrset}


async def eventually(
    probe: Callable[[], Awaitable[dns.message.Message]],
    check: Callable[[dns.message.Message], bool],
) -> dns.message.Message:
    """The first answer of ``probe`` that passes ``check``; AssertionError with the last one
    if none does within PATIENCE."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    while True:
        response = await probe()
        if check(response):
            return response
        if loop.time() > deadline:
            raise AssertionError(f"no answer passed the check; the last was:\n{response}")
        await asyncio.sleep(0.05)


def service(
    name: str,
    namespace: str,
    ports: Sequence[tuple[str | None, int, str]] = (("http", 80, "TCP"),),
    *,
    headless: bool = False,
    external_name: str | None = None,
) -> Service:
    spec = ServiceSpec(
        ports=[ServicePort(name=n, port=p, protocol=proto) for n, p, proto in ports] or None,
        selector={"app": name},
    )
    if headless:
        spec.cluster_ip = "None"
    if external_name is not None:
        spec = ServiceSpec(type="ExternalName", external_name=external_name)
    return Service(metadata=ObjectMeta(name=name, namespace=namespace), spec=spec)


def endpoint_slice(
    name: str,
    namespace: str,
    service_name: str,
    endpoints: Sequence[tuple[str, str | None, bool]],
    ports: Sequence[tuple[str | None, int, str]] = (("http", 8080, "TCP"),),
    address_type: str = "IPv4",
) -> EndpointSlice:
    """A slice of ``service_name`` with endpoints given as (address, hostname, ready)."""
    return EndpointSlice(
        metadata=ObjectMeta(
            name=name, namespace=namespace, labels={SERVICE_NAME_LABEL: service_name}
        ),
        address_type=address_type,
        endpoints=[
            Endpoint(
                addresses=[address],
                hostname=hostname,
                conditions=EndpointConditions(ready=ready),
            )
            for address, hostname, ready in endpoints
        ],
        ports=[EndpointPort(name=n, port=p, protocol=proto) for n, p, proto in ports],
    )


class FakeUpstream:
    """A resolver on loopback (UDP and TCP) answering every A question with UPSTREAM_ADDRESS
    and remembering the questions and transports it saw."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.server = DNSServer(self)
        self.port = 0

    async def start(self) -> int:
        self.port = await self.server.start(LOOPBACK, 0)
        return self.port

    async def respond(self, wire: bytes, proto: str) -> bytes | None:
        query = dns.message.from_wire(wire)
        question = query.question[0]
        self.seen.append((question.name.to_text(), proto))
        response = dns.message.make_response(query)
        response.flags |= dns.flags.RA
        if question.rdtype == dns.rdatatype.A:
            response.answer.append(
                dns.rrset.from_text(question.name, 60, "IN", "A", UPSTREAM_ADDRESS)
            )
        return response.to_wire()

    async def close(self) -> None:
        await self.server.close()
