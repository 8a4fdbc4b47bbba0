"""The router's stand-in for the host's nameservers: NXDOMAIN for every name, over UDP and
TCP, at once; what is not a query gets nothing."""

from __future__ import annotations

import asyncio

import dns.asyncquery
import dns.message
import dns.rcode

from kubelab.lab.resolver import answer, serve
from tests.servers import free_port


def test_every_query_is_answered_nxdomain_for_its_question() -> None:
    query = dns.message.make_query("registry-1.docker.io", "AAAA")
    wire = answer(query.to_wire())
    assert wire is not None
    response = dns.message.from_wire(wire)
    assert response.id == query.id
    assert response.rcode() == dns.rcode.NXDOMAIN
    assert response.question == query.question


def test_what_is_not_a_query_gets_no_answer() -> None:
    assert answer(b"\x00\x01garbage") is None
    response = dns.message.make_response(dns.message.make_query("a.example", "A"))
    assert answer(response.to_wire()) is None


async def test_udp_and_tcp_answer_at_once() -> None:
    port = free_port()
    stop = asyncio.Event()
    server = asyncio.create_task(serve([("127.0.0.1", port)], stop))
    try:
        await asyncio.sleep(0.1)
        query = dns.message.make_query("example.com", "A")
        loop = asyncio.get_running_loop()
        started = loop.time()
        over_udp = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=2)
        over_tcp = await dns.asyncquery.tcp(query, "127.0.0.1", port=port, timeout=2)
        assert loop.time() - started < 1
        assert over_udp.rcode() == over_tcp.rcode() == dns.rcode.NXDOMAIN
    finally:
        stop.set()
        await server
