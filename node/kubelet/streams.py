"""Relays between the API server's streams and the runtime's streaming server.

For exec, attach and port-forward the CRI runtime does not stream itself over gRPC: Exec,
Attach and PortForward return a URL of its streaming server (containerd 1.6 embeds
``k8s.io/kubelet/cri/streaming``), single-use, which speaks the Kubernetes channel protocol
over WebSocket up to ``v4.channel.k8s.io``.  The kubelet accepts the client's WebSocket (relayed
by the API server), opens one to that URL as a client with ``v4.channel.k8s.io`` and relays:

- exec/attach (``relay_channels``): frames are ``[channel, data...]``; channels 0 stdin,
  1 stdout, 2 stderr, 3 status (a JSON ``Status``: Success, or NonZeroExitCode with the exit
  code in ``details.causes``), 4 resize (tty) are the same in v1..v5 and pass unchanged.
  v5 adds a close frame ``[255, channel]``; a v4 server has no way to receive it, since the
  only half-close v4 knows is closing the whole WebSocket, which would also cut stdout.  So a
  v5 close of stdin becomes, with a tty, an end-of-file character (Ctrl-D) that the terminal's
  line discipline turns into EOF for the process; without a tty it is dropped, and a process
  reading stdin to its end (``cat``) keeps waiting until the client disconnects.  Clients of
  ``channel.k8s.io``, v2 and v3 expect plain text on channel 3, so the v4 Status is turned into
  its message (and dropped on Success).
- port-forward from a WebSocket client (``v4.channel.k8s.io``, the Python client): the same
  framing with data channel 2i and error channel 2i+1 per requested port, each channel's first
  frame being the port as two little-endian bytes.  Asking the runtime for the same ports in
  the same order (``?port=`` query) makes every frame identical on both sides, so frames are
  relayed unchanged with ``relay_channels``.
- port-forward from kubectl (SPDY/3.1 tunnelled in a WebSocket, see ``spdy``):
  ``SpdyPortForward`` pairs the error and data streams kubectl opens per connection by their
  ``requestID`` header (upstream ``portforward/httpstream.go``), dials the port through a
  fresh runtime URL per connection (``CriPortStream``) and pumps the data; failures are
  written to the error stream as upstream words them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import aiohttp
from aiohttp import web

from node.kubelet.spdy import SpdyStream

log = logging.getLogger(__name__)

V5: Final = "v5.channel.k8s.io"
V4: Final = "v4.channel.k8s.io"
CHANNEL_PROTOCOLS: Final = (V5, V4, "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")
PORT_FORWARD_PROTOCOLS: Final = (V4,)
SPDY_TUNNEL_PROTOCOL: Final = "SPDY/3.1+portforward.k8s.io"
UPSTREAM_PROTOCOL: Final = V4

STDIN: Final = 0
STATUS: Final = 3
CLOSE: Final = 255
END_OF_TRANSMISSION: Final = b"\x04"


def negotiate(offered: str, supported: tuple[str, ...]) -> str | None:
    """The first protocol of ``supported`` the client offered (Sec-WebSocket-Protocol)."""
    names = {p.strip() for p in offered.split(",") if p.strip()}
    return next((p for p in supported if p in names), None)


async def open_upstream(
    session: aiohttp.ClientSession, url: str, params: list[tuple[str, str]] | None = None
) -> aiohttp.ClientWebSocketResponse:
    """Connect to a runtime streaming URL as a v4 channel client."""
    return await session.ws_connect(
        url, params=params, protocols=(UPSTREAM_PROTOCOL,), max_msg_size=0
    )


def legacy_status(payload: bytes) -> bytes | None:
    """A v4 Status as the plain text older protocols carry on channel 3 (None: success)."""
    try:
        status = json.loads(payload)
    except ValueError:
        return payload
    if not isinstance(status, dict) or status.get("status") == "Success":
        return None
    return str(status.get("message", "")).encode()


async def _to_upstream(
    client: web.WebSocketResponse,
    upstream: aiohttp.ClientWebSocketResponse,
    protocol: str,
    tty: bool,
) -> None:
    async for message in client:
        if message.type != aiohttp.WSMsgType.BINARY or not message.data:
            continue
        data: bytes = message.data
        if protocol == V5 and data[0] == CLOSE:
            if len(data) > 1 and data[1] == STDIN and tty:
                await upstream.send_bytes(bytes([STDIN]) + END_OF_TRANSMISSION)
            continue
        await upstream.send_bytes(data)


async def _to_client(
    upstream: aiohttp.ClientWebSocketResponse, client: web.WebSocketResponse, protocol: str
) -> None:
    legacy = protocol not in (V5, V4)
    async for message in upstream:
        if message.type != aiohttp.WSMsgType.BINARY or not message.data:
            continue
        data: bytes = message.data
        if legacy and data[0] == STATUS:
            text = legacy_status(data[1:])
            if text is None:
                continue
            data = bytes([STATUS]) + text
        await client.send_bytes(data)


async def relay_channels(
    client: web.WebSocketResponse,
    upstream: aiohttp.ClientWebSocketResponse,
    protocol: str,
    *,
    tty: bool = False,
) -> None:
    """Relay channel frames both ways until either side closes; then close both."""
    tasks = [
        asyncio.ensure_future(_to_upstream(client, upstream, protocol, tty)),
        asyncio.ensure_future(_to_client(upstream, client, protocol)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                log.debug("stream relay ended: %r", result)
        await upstream.close()
        await client.close()


class PortForwardError(Exception):
    """The runtime could not forward a port; the message is for the user."""


class PortStream(Protocol):
    """A connection to one port of a pod."""

    async def read(self) -> bytes:
        """Next bytes from the pod; b"" at end; PortForwardError if the runtime failed."""
        ...

    async def write(self, data: bytes) -> None: ...

    async def close(self) -> None: ...


class CriPortStream:
    """One pod port through a runtime streaming URL (v4 WebSocket, data 0, error 1)."""

    def __init__(self, session: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse):
        self._session = session
        self._ws = ws
        self._prefixed: set[int] = set()

    @classmethod
    async def open(cls, url: str, port: int) -> CriPortStream:
        session = aiohttp.ClientSession()
        try:
            ws = await open_upstream(session, url, [("port", str(port))])
        except BaseException:
            await session.close()
            raise
        return cls(session, ws)

    async def read(self) -> bytes:
        async for message in self._ws:
            if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                break
            channel, payload = message.data[0], message.data[1:]
            if channel not in self._prefixed:
                # Each channel's first frame is the port number, not data.
                self._prefixed.add(channel)
                continue
            if channel == 1 and payload:
                raise PortForwardError(payload.decode(errors="replace"))
            if channel == 0 and payload:
                return bytes(payload)
        return b""

    async def write(self, data: bytes) -> None:
        await self._ws.send_bytes(b"\x00" + data)

    async def close(self) -> None:
        await self._ws.close()
        await self._session.close()


Dial = Callable[[int], Awaitable[PortStream]]


@dataclass
class _Pair:
    error: SpdyStream | None = None
    data: SpdyStream | None = None
    started: bool = False


@dataclass
class SpdyPortForward:
    """Serves the streams of one kubectl port-forward SPDY session.

    ``accept`` is the session's ``on_stream``; ``close`` cancels the forwards still running
    (the session ended).  A stream whose partner never comes waits until then (upstream
    gives up after its stream creation timeout).  ``pod`` and ``uid`` only appear in error
    messages.
    """

    dial: Dial
    pod: str
    uid: str
    _pairs: dict[str, _Pair] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def accept(self, stream: SpdyStream) -> None:
        kind = stream.header("streamType")
        if kind not in ("error", "data"):
            self._spawn(stream.send_reset())
            return
        request = stream.header("requestID") or self._legacy_request_id(stream, kind)
        pair = self._pairs.setdefault(request, _Pair())
        if kind == "error":
            pair.error = stream
        else:
            pair.data = stream
        if pair.error is not None and pair.data is not None and not pair.started:
            pair.started = True
            self._spawn(self._forward(request, pair.error, pair.data))

    @staticmethod
    def _legacy_request_id(stream: SpdyStream, kind: str) -> str:
        # Clients before requestID open the error stream, then the data stream, two ids later.
        return str(stream.id if kind == "error" else stream.id - 2)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _forward(self, request: str, error: SpdyStream, data: SpdyStream) -> None:
        try:
            port_text = data.header("port")
            try:
                port = int(port_text)
                if not 0 < port < 65536:
                    raise ValueError
            except ValueError:
                await error.write(f"invalid port {port_text!r}".encode())
                return
            try:
                await self._pump(port, data)
            except (PortForwardError, aiohttp.ClientError, OSError) as failure:
                message = (
                    f"error forwarding port {port} to pod {self.pod}, uid {self.uid}: {failure}"
                )
                await error.write(message.encode())
        finally:
            self._pairs.pop(request, None)
            await error.close()
            await data.close()

    async def _pump(self, port: int, data: SpdyStream) -> None:
        connection = await self.dial(port)
        try:
            to_pod = asyncio.ensure_future(_copy_to_pod(data, connection))
            try:
                while chunk := await connection.read():
                    await data.write(chunk)
            finally:
                if not to_pod.done():
                    to_pod.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await to_pod
        finally:
            await connection.close()


async def _copy_to_pod(data: SpdyStream, connection: PortStream) -> None:
    """Client bytes to the pod until the stream is reset, which closes the pod connection
    (and so ends the other direction too).  A FIN is not forwarded: a v4 port stream cannot
    be half-closed, so the pod side stays open until the pod or a reset ends it."""
    while chunk := await data.read():
        await connection.write(chunk)
    await data.wait_reset()
    await connection.close()
