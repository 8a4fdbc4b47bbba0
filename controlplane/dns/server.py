"""The cluster DNS server: asyncio UDP and TCP listeners in front of the zone and the forwarder.

:class:`Responder` turns the bytes of one query into the bytes of its response, and is where
every rule about what to say lives: dnspython parses and renders every message; the zone
answers what is its own; anything else goes to the forwarder, or gets REFUSED when there is
no upstream; and bad input is answered, not obeyed:

- a packet too short to have a header is dropped (there is no ID to answer to);
- a packet with a header that dnspython cannot parse gets FORMERR with its ID;
- a packet with the QR bit (a response, not a query) is dropped, so two servers can never
  bounce errors at each other;
- an opcode other than QUERY gets NOTIMP, a message without exactly one question FORMERR;
- an error of our own (a bug, an upstream answer that does not render) gets SERVFAIL.

Given :class:`~controlplane.dns.firstanswers.FirstAnswers`, the first positive answer for
each Service's name is told as an Event on it.

An ExternalName Service's CNAME is completed with the upstream's answer for its target (see
``Responder._chase``).

Over UDP a response is rendered to fit the client's EDNS payload size (512 bytes without
EDNS) and truncated with TC set when it does not, so the client retries over TCP.  Over TCP a
connection may carry several queries (RFC 7766) and is closed after ``idle_timeout`` seconds
without one, so a client that stalls mid-message holds nothing for long.

:class:`DNSServer` binds UDP and TCP on the same port (port 0 picks a free one for both).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import time
from typing import Final, Protocol, cast

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdatatype

from controlplane.dns.firstanswers import FirstAnswers
from controlplane.dns.forward import Forwarder, ForwardError
from controlplane.dns.health import DNSMetrics, type_label
from controlplane.dns.zone import ClusterZone

log = logging.getLogger(__name__)

HEADER_SIZE: Final = 12
MIN_UDP_PAYLOAD: Final = 512
MAX_TCP_MESSAGE: Final = 65535
DEFAULT_IDLE_TIMEOUT: Final = 10.0
PORT_ATTEMPTS: Final = 20


class Respond(Protocol):
    """What the listeners need: the response to one message (None: send nothing)."""

    async def respond(self, wire: bytes, proto: str) -> bytes | None: ...


class Responder:
    """Query bytes in, response bytes out (None: send nothing); see the module docstring."""

    def __init__(
        self,
        zone: ClusterZone,
        forwarder: Forwarder | None,
        metrics: DNSMetrics,
        first_answers: FirstAnswers | None = None,
    ) -> None:
        self.zone = zone
        self.forwarder = forwarder
        self.metrics = metrics
        self.first_answers = first_answers

    async def respond(self, wire: bytes, proto: str) -> bytes | None:
        started = time.monotonic()
        try:
            query = dns.message.from_wire(wire)
        except Exception:  # dnspython raises many kinds for garbage; each is a bad packet
            return self._malformed(wire, proto, started)
        if query.flags & dns.flags.QR:
            self.metrics.malformed.inc()
            return None
        qtype = query.question[0].rdtype if query.question else 0
        self.metrics.requests.inc(proto, type_label(qtype))
        try:
            response = await self._response(query, proto)
        except Exception:
            log.exception("answering %s", query.question)
            response = dns.message.make_response(query)
            response.set_rcode(dns.rcode.SERVFAIL)
        max_size = MAX_TCP_MESSAGE if proto == "tcp" else _udp_payload(query)
        try:
            data = response.to_wire(max_size=max_size, prefer_truncation=True)
        except dns.exception.DNSException:
            log.exception("rendering the answer to %s", query.question)
            response = dns.message.make_response(query)
            response.set_rcode(dns.rcode.SERVFAIL)
            data = response.to_wire(max_size=max_size, prefer_truncation=True)
        self.metrics.answered(proto, response.rcode(), time.monotonic() - started)
        return data

    async def _response(self, query: dns.message.Message, proto: str) -> dns.message.Message:
        response = dns.message.make_response(query)
        response.flags |= dns.flags.RA
        if query.opcode() != dns.opcode.QUERY:
            response.set_rcode(dns.rcode.NOTIMP)
            return response
        if len(query.question) != 1:
            response.set_rcode(dns.rcode.FORMERR)
            return response
        question = query.question[0]
        answer = self.zone.answer(question.name, question.rdtype, question.rdclass)
        if answer is None:
            return await self._forward(query, response, proto)
        response.flags |= dns.flags.AA
        response.set_rcode(answer.rcode)
        response.answer = answer.answer
        response.authority = answer.authority
        response.additional = answer.additional
        if self.first_answers is not None and answer.rcode == dns.rcode.NOERROR:
            self.first_answers.answered(question.name, answer.answer)
        await self._chase(query, response, proto)
        return response

    async def _chase(
        self, query: dns.message.Message, response: dns.message.Message, proto: str
    ) -> None:
        """Complete an answer that ends in a CNAME out of the zone (an ExternalName Service)
        with the upstream's records for its target, as CoreDNS does, since stub resolvers do
        not follow CNAMEs themselves.  Without an upstream, or when it fails, the CNAME stays
        the whole answer."""
        question = query.question[0]
        if not response.answer or question.rdtype in (dns.rdatatype.CNAME, dns.rdatatype.ANY):
            return
        last = response.answer[-1]
        if last.rdtype != dns.rdatatype.CNAME or self.forwarder is None:
            return
        target: dns.name.Name = last[0].target
        if target.is_subdomain(self.zone.origin):
            return
        chased = dns.message.make_query(target, question.rdtype, question.rdclass)
        try:
            upstream = await self.forwarder.forward(chased, tcp=proto == "tcp")
        except ForwardError as error:
            log.warning("resolving CNAME target %s failed: %s", target, error)
            return
        response.set_rcode(upstream.rcode())
        response.answer += upstream.answer
        response.authority = upstream.authority

    async def _forward(
        self, query: dns.message.Message, response: dns.message.Message, proto: str
    ) -> dns.message.Message:
        if self.forwarder is None:
            self.metrics.forwarded.inc("refused")
            response.set_rcode(dns.rcode.REFUSED)
            return response
        try:
            upstream = await self.forwarder.forward(query, tcp=proto == "tcp")
        except ForwardError as error:
            log.warning("forwarding %s failed: %s", query.question[0], error)
            self.metrics.forwarded.inc("failed")
            response.set_rcode(dns.rcode.SERVFAIL)
            return response
        self.metrics.forwarded.inc("answered")
        return upstream

    def _malformed(self, wire: bytes, proto: str, started: float) -> bytes | None:
        self.metrics.malformed.inc()
        if len(wire) < HEADER_SIZE:
            return None
        # The two header fields an error answer needs, read as RFC 1035 lays them out.
        query_id = int.from_bytes(wire[0:2], "big")
        if int.from_bytes(wire[2:4], "big") & dns.flags.QR:
            return None
        response = dns.message.Message(id=query_id)
        response.flags = dns.flags.QR | dns.flags.RA
        response.set_rcode(dns.rcode.FORMERR)
        self.metrics.answered(proto, dns.rcode.FORMERR, time.monotonic() - started)
        return response.to_wire()


def _udp_payload(query: dns.message.Message) -> int:
    return max(MIN_UDP_PAYLOAD, query.payload) if query.edns >= 0 else MIN_UDP_PAYLOAD


class _UDPProtocol(asyncio.DatagramProtocol):
    def __init__(self, responder: Respond) -> None:
        self.responder = responder
        self.transport: asyncio.DatagramTransport | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        task = asyncio.get_running_loop().create_task(self._answer(data, addr))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _answer(self, data: bytes, addr: tuple[str | object, ...]) -> None:
        response = await self.responder.respond(data, "udp")
        if response is not None and self.transport is not None:
            self.transport.sendto(response, addr)

    def error_received(self, exc: Exception) -> None:
        log.debug("udp: %s", exc)


class DNSServer:
    """UDP and TCP listeners on one address and port, answering through ``responder``."""

    def __init__(self, responder: Respond, idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> None:
        self.responder = responder
        self.idle_timeout = idle_timeout
        self._udp: asyncio.DatagramTransport | None = None
        self._udp_protocol: _UDPProtocol | None = None
        self._tcp: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host``:``port`` over UDP and TCP; the port.

        With port 0 the UDP port is picked first and TCP takes the same number; when that one
        is taken over TCP (ephemeral ports are shared by both protocols), another is tried.
        """
        loop = asyncio.get_running_loop()
        attempts = 0
        while True:
            self._udp, self._udp_protocol = await loop.create_datagram_endpoint(
                lambda: _UDPProtocol(self.responder), local_addr=(host, port)
            )
            bound = int(self._udp.get_extra_info("sockname")[1])
            try:
                self._tcp = await asyncio.start_server(
                    self._serve_tcp, host, bound, reuse_address=True
                )
                return bound
            except OSError as error:
                self._udp.close()
                attempts += 1
                if port or error.errno != errno.EADDRINUSE or attempts == PORT_ATTEMPTS:
                    raise

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                # RFC 1035 4.2.2: each message is preceded by its length in two bytes.
                length = int.from_bytes(
                    await asyncio.wait_for(reader.readexactly(2), self.idle_timeout), "big"
                )
                wire = await asyncio.wait_for(reader.readexactly(length), self.idle_timeout)
                response = await self.responder.respond(wire, "tcp")
                if response is None:
                    break
                writer.write(len(response).to_bytes(2, "big") + response)
                await writer.drain()
        except (asyncio.IncompleteReadError, OSError):  # timeouts and resets included
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def close(self) -> None:
        """Stop listening, drop open connections and wait for queries in flight."""
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
        pending = set(self._connections)
        if self._udp_protocol is not None:
            pending |= self._udp_protocol.tasks
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._tcp is not None:
            await self._tcp.wait_closed()
