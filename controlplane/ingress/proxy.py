"""The Ingress controller's reverse proxy: HTTP/1.1 on asyncio streams, plain and TLS.

One coroutine per client connection reads requests one after another (keep-alive), routes each
through the :class:`~controlplane.ingress.routing.RoutingTable` current at that moment, and
relays it to one endpoint of the chosen backend over a connection of its own, which carries
that one request (``Connection: close`` upstream: no pool to invalidate when endpoints change).
Bodies stream both ways as they arrive, never held whole: ``Content-Length`` and chunked bodies
are relayed with their framing, and a response that ends when the backend closes is passed on
chunked to an HTTP/1.1 client, so its connection stays usable.  1xx responses are passed on
before the final one; protocol upgrades (WebSocket) are not relayed.

The table is swapped (:meth:`IngressProxy.swap`) by assigning a new object: a request already
routed keeps its backend connection and finishes, whatever the new table says, which is how a
configuration change never drops an established connection.

Answers of the proxy's own: 404 (``default backend - 404``, as ingress-nginx's default backend
says) when no rule matches and there is no default backend; 503 when the backend has no ready
endpoint (or cannot be resolved); 502 when no endpoint accepts a connection (each is tried once,
in round-robin order) or the backend breaks off before its response's head; 400 for a request
that is not HTTP/1.x.  Requests carry ``X-Forwarded-For`` and ``X-Real-IP`` (the client's
address: those a client sends are not trusted, as ingress-nginx's default
``use-forwarded-headers: false`` has it), ``X-Forwarded-Host``, ``X-Forwarded-Proto`` and
``X-Forwarded-Port``.

TLS: the listening context's ``sni_callback`` gives each handshake the context of the
certificate the table holds for the server name, else the default one (the controller makes a
self-signed "Kubernetes Ingress Controller Fake Certificate", as ingress-nginx does).  Contexts
are made when a table is swapped in, never during a handshake; a certificate that does not load
is logged and its hosts get the default.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from controlplane.ingress.routing import Address, Backend, Certificate, RoutingTable, request_host
from kube.pki import load_certificate

log = logging.getLogger("kubelab.ingress")

HEAD_LIMIT = 64 * 1024
"""The longest request or response head (request line or status line and headers)."""
COPY_SIZE = 64 * 1024
CONNECT_TIMEOUT = 5.0
IDLE_TIMEOUT = 75.0
"""Seconds a kept-alive client connection may wait for its next request (ingress-nginx's
keepalive_timeout)."""
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
FORWARDED = frozenset(
    {"x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port", "x-real-ip"}
)
REASONS = {
    400: "Bad Request",
    404: "Not Found",
    502: "Bad Gateway",
    503: "Service Temporarily Unavailable",
}

Headers = list[tuple[str, str]]


class Sink(Protocol):
    """Where a body is copied to: a stream writer, or :class:`Discard`."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class Discard:
    """A sink that drops what it is given (the body of a request the proxy answers itself)."""

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass


class BadMessage(Exception):
    """A request or response that is not HTTP/1.x as this proxy reads it."""


@dataclass(frozen=True)
class Head:
    """A message's first line, split in three, and its headers in order."""

    first: tuple[str, str, str]
    headers: Headers

    def get(self, name: str) -> str | None:
        """The last value of header ``name`` (case-insensitive)."""
        values = [v for k, v in self.headers if k.lower() == name]
        return values[-1] if values else None

    def tokens(self, name: str) -> set[str]:
        """The comma-separated tokens of every ``name`` header, in lower case."""
        return {
            token.strip().lower()
            for k, v in self.headers
            if k.lower() == name
            for token in v.split(",")
            if token.strip()
        }


async def read_head(reader: asyncio.StreamReader) -> Head | None:
    """The next message head, or None when the peer closed before sending one."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if error.partial.strip():
            raise BadMessage("the connection closed within a message head") from None
        return None
    except asyncio.LimitOverrunError:
        raise BadMessage("message head too long") from None
    lines = raw.decode("latin-1").split("\r\n")[:-2]
    parts = lines[0].split(" ", 2)
    if len(parts) < 2:
        raise BadMessage(f"malformed first line {lines[0]!r}")
    headers: Headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise BadMessage(f"malformed header line {line!r}")
        headers.append((name, value.strip()))
    return Head((parts[0], parts[1], parts[2] if len(parts) > 2 else ""), headers)


def _framing(head: Head, *, response_to: str | None = None) -> str | int:
    """How a body ends: a byte count, ``"chunked"``, or ``"close"`` (a response read until
    the backend closes).  ``response_to`` is the request's method for a response."""
    if response_to is not None:
        status = head.first[1]
        if response_to == "HEAD" or status.startswith("1") or status in ("204", "304"):
            return 0
    if "chunked" in head.tokens("transfer-encoding"):
        return "chunked"
    length = head.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise BadMessage(f"bad Content-Length {length!r}")
        return int(length)
    return 0 if response_to is None else "close"


async def _copy_exactly(reader: asyncio.StreamReader, writer: Sink, n: int) -> None:
    while n > 0:
        data = await reader.read(min(n, COPY_SIZE))
        if not data:
            raise BadMessage("the connection closed within a body")
        writer.write(data)
        await writer.drain()
        n -= len(data)


async def _copy_chunked(reader: asyncio.StreamReader, writer: Sink) -> None:
    """A chunked body as it is, trailers included."""
    while True:
        line = await reader.readuntil(b"\r\n")
        writer.write(line)
        try:
            size = int(line.split(b";")[0], 16)
        except ValueError:
            raise BadMessage(f"bad chunk size line {line!r}") from None
        if size == 0:
            while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                writer.write(trailer)
            writer.write(trailer)
            await writer.drain()
            return
        await _copy_exactly(reader, writer, size + 2)


async def _copy_until_closed(reader: asyncio.StreamReader, writer: Sink, chunked: bool) -> None:
    while data := await reader.read(COPY_SIZE):
        writer.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        await writer.drain()
    if chunked:
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def relay_body(
    framing: str | int,
    reader: asyncio.StreamReader,
    writer: Sink,
    *,
    rechunk: bool = False,
) -> None:
    """Copy one body framed as ``framing`` says; ``rechunk``: a ``close`` body goes out
    chunked."""
    if framing == "chunked":
        await _copy_chunked(reader, writer)
    elif framing == "close":
        await _copy_until_closed(reader, writer, rechunk)
    else:
        assert isinstance(framing, int)
        await _copy_exactly(reader, writer, framing)


def _end_to_end(head: Head) -> Headers:
    """The headers a proxy passes on: not the hop-by-hop ones, nor those ``Connection`` names."""
    named = head.tokens("connection")
    return [(k, v) for k, v in head.headers if k.lower() not in HOP_BY_HOP | named]


def _encode(first: str, headers: Headers) -> bytes:
    lines = [first, *(f"{k}: {v}" for k, v in headers), "", ""]
    return "\r\n".join(lines).encode("latin-1")


def answer(status: int, body: str, *, keep_alive: bool) -> bytes:
    """One of the proxy's own answers."""
    data = body.encode()
    headers = [
        ("Content-Type", "text/plain; charset=utf-8"),
        ("Content-Length", str(len(data))),
        ("Connection", "keep-alive" if keep_alive else "close"),
    ]
    return _encode(f"HTTP/1.1 {status} {REASONS[status]}", headers) + data


Dialer = Callable[[Address], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
"""How the proxy connects to an endpoint (tests map endpoint addresses to loopback ones,
which EndpointSlices may not hold)."""


async def open_endpoint(address: Address) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to an endpoint, given up after CONNECT_TIMEOUT."""
    return await asyncio.wait_for(
        asyncio.open_connection(*address, limit=HEAD_LIMIT), CONNECT_TIMEOUT
    )


async def _final_response(reader: asyncio.StreamReader, client: Sink) -> Head:
    """The backend's final response head; informational (1xx) ones are passed on first."""
    while (response := await read_head(reader)) is not None and response.first[1][:1] == "1":
        client.write(_encode(f"HTTP/1.1 {response.first[1]} {response.first[2]}", response.headers))
    if response is None:
        raise BadMessage("the backend closed without answering")
    return response


class IngressProxy:
    """The proxy over the current routing table; see the module docstring."""

    def __init__(
        self, table: RoutingTable, default_certificate: Certificate, dial: Dialer = open_endpoint
    ) -> None:
        self.table = table
        self._dial = dial
        self._contexts: dict[Certificate, ssl.SSLContext | None] = {}
        self.tls = self._context(default_certificate)
        if self.tls is None:
            raise ValueError(f"the default certificate ({default_certificate.source}) is unusable")
        self.tls.sni_callback = self._choose_certificate
        self._servers: list[asyncio.Server] = []
        self.swap(table)

    def swap(self, table: RoutingTable) -> None:
        """Route new requests by ``table`` from now on (see the module docstring)."""
        wanted = set(table.certificates.values())
        for certificate in wanted - self._contexts.keys():
            self._contexts[certificate] = self._context(certificate)
        for certificate in self._contexts.keys() - wanted:
            if self._contexts[certificate] is not self.tls:
                del self._contexts[certificate]
        self.table = table

    def _context(self, certificate: Certificate) -> ssl.SSLContext | None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            load_certificate(context, certificate.cert_pem, certificate.key_pem)
        except ssl.SSLError as error:
            log.warning("certificate of secret %s does not load: %s", certificate.source, error)
            return None
        return context

    def _choose_certificate(
        self, connection: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext
    ) -> None:
        certificate = self.table.certificate(server_name) if server_name else None
        context = self._contexts.get(certificate) if certificate is not None else None
        if context is not None:
            connection.context = context

    async def start(self, http: tuple[str, int], https: tuple[str, int]) -> tuple[int, int]:
        """Listen for HTTP and HTTPS; the ports bound (0 picks a free one)."""
        plain = await asyncio.start_server(
            lambda r, w: self.serve(r, w, "http"), *http, limit=HEAD_LIMIT
        )
        secure = await asyncio.start_server(
            lambda r, w: self.serve(r, w, "https"), *https, ssl=self.tls, limit=HEAD_LIMIT
        )
        self._servers = [plain, secure]
        http_port, https_port = (int(s.sockets[0].getsockname()[1]) for s in self._servers)
        return http_port, https_port

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()

    async def serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, scheme: str
    ) -> None:
        """One client connection, request after request."""
        try:
            while True:
                try:
                    head = await asyncio.wait_for(read_head(reader), IDLE_TIMEOUT)
                except BadMessage as error:
                    log.info("bad request from %s: %s", writer.get_extra_info("peername"), error)
                    writer.write(answer(400, "bad request\n", keep_alive=False))
                    break
                if head is None or not await self._request(head, reader, writer, scheme):
                    break
            await writer.drain()
        except (OSError, TimeoutError, BadMessage, asyncio.IncompleteReadError):
            pass  # the client went away or broke off mid-message: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()

    async def _request(
        self,
        head: Head,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        scheme: str,
    ) -> bool:
        """Answer one request; whether the connection may carry another."""
        method, target, version = head.first
        if not version.startswith("HTTP/1."):
            raise BadMessage(f"unsupported version {version!r}")
        keep_alive = version == "HTTP/1.1" and "close" not in head.tokens("connection")
        request_framing = _framing(head)
        if "://" in target:  # absolute form: the path is what follows the authority
            target = "/" + target.split("://", 1)[1].partition("/")[2]
        host = request_host(head.get("host") or "")
        path = target.partition("?")[0]
        backend = self.table.route(host, path)
        if backend is None:
            status, text = 404, "default backend - 404\n"
        elif not backend.endpoints:
            status, text = 503, f"no endpoints for {backend.name}\n"
        else:
            upstream = await self._connect(backend)
            if upstream is not None:
                return await self._forward(
                    head, target, request_framing, upstream, reader, writer, scheme, keep_alive
                )
            status, text = 502, f"no endpoint of {backend.name} accepts connections\n"
        log.info("%s %s%s: %d", method, host, path, status)
        await relay_body(request_framing, reader, Discard())
        writer.write(answer(status, text, keep_alive=keep_alive))
        await writer.drain()
        return keep_alive

    async def _connect(
        self, backend: Backend
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for address in backend.in_turn():
            try:
                return await self._dial(address)
            except (OSError, TimeoutError) as error:
                log.warning("endpoint %s:%d of %s: %s", *address, backend.name, error)
        return None

    async def _forward(
        self,
        head: Head,
        target: str,
        request_framing: str | int,
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        scheme: str,
        keep_alive: bool,
    ) -> bool:
        method = head.first[0]
        up_reader, up_writer = upstream
        try:
            try:
                up_writer.write(
                    _encode(f"{method} {target} HTTP/1.1", self._headers(head, writer, scheme))
                )
                await relay_body(request_framing, reader, up_writer)
                response = await _final_response(up_reader, writer)
            except (OSError, BadMessage, asyncio.IncompleteReadError) as error:
                peer = up_writer.get_extra_info("peername")
                log.warning("%s %s: backend %s: %s", method, target, peer, error)
                writer.write(answer(502, "bad gateway\n", keep_alive=False))
                return False
            framing = _framing(response, response_to=method)
            rechunk = framing == "close" and keep_alive
            keep_alive = keep_alive and (framing != "close" or rechunk)
            headers = _end_to_end(response)
            if framing == "chunked" or rechunk:
                headers.append(("Transfer-Encoding", "chunked"))
            headers.append(("Connection", "keep-alive" if keep_alive else "close"))
            _, status, reason = response.first
            log.info(
                "%s %s%s -> %s: %s",
                method,
                head.get("host") or "",
                target,
                up_writer.get_extra_info("peername"),
                status,
            )
            writer.write(_encode(f"HTTP/1.1 {status} {reason}", headers))
            await relay_body(framing, up_reader, writer, rechunk=rechunk)
            return keep_alive
        finally:
            up_writer.close()

    @staticmethod
    def _headers(head: Head, writer: asyncio.StreamWriter, scheme: str) -> Headers:
        """The request's headers as the backend gets them."""
        peer = writer.get_extra_info("peername")
        client = str(peer[0]) if peer else ""
        port = writer.get_extra_info("sockname")
        headers = [(k, v) for k, v in _end_to_end(head) if k.lower() not in FORWARDED]
        if "chunked" in head.tokens("transfer-encoding"):
            headers.append(("Transfer-Encoding", "chunked"))
        return [
            *headers,
            ("X-Forwarded-For", client),
            ("X-Forwarded-Host", head.get("host") or ""),
            ("X-Forwarded-Proto", scheme),
            ("X-Forwarded-Port", str(port[1]) if port else ""),
            ("X-Real-IP", client),
            ("Connection", "close"),
        ]
