"""Relays between the API server's streams and the runtime's streaming server.

For exec, attach and port-forward the CRI runtime does not stream itself over gRPC: Exec,
Attach and PortForward return a URL of its streaming server (containerd 1.6 embeds
``k8s.io/kubelet/cri/streaming``), single-use.  The kubelet accepts the client's WebSocket
(relayed by the API server) and relays:

- exec/attach (``RemoteCommand``): the client's frames are ``[channel, data...]``, channels 0
  stdin, 1 stdout, 2 stderr, 3 status, 4 resize (the same in v1..v5); v5 adds the close frame
  ``[255, channel]``.  Towards the runtime the kubelet speaks SPDY/3.1, not WebSocket, because
  a v4 WebSocket has no way to close stdin while still reading stdout (so ``echo hi | kubectl
  exec -i POD -- cat`` would never end), and SPDY has: a FIN on the stdin stream.  It upgrades
  with ``X-Stream-Protocol-Version: v4.channel.k8s.io`` and opens one stream per channel with
  a ``streamType`` header, in client-go's order: error, stdin, stdout, stderr (never with a
  tty), resize (only with a tty).  The server waits for exactly the streams the CRI request
  asked for (``Options``), so the set must match it.  Then channel 0 → stdin stream; a v5
  close of channel 0 → FIN on it (with a tty, see below); channel 4 → resize stream (JSON
  ``{"Width","Height"}``, decoded there as a JSON stream); stdout/stderr streams → channels
  1/2; the error stream, read to its end, → channel 3 once stdout and stderr ended.  With v4
  it carries a JSON ``Status``: Success, or NonZeroExitCode with the exit code in
  ``details.causes``; v4/v5 clients get it unchanged, clients of ``channel.k8s.io``, v2 and v3
  expect plain text, so they get its message (nothing on Success).  The runtime then resets
  every stream and closes the connection; the kubelet closes the WebSocket.  If the client
  goes away first, the connection to the runtime is dropped, which ends the process's streams
  there.  With a tty the close is a Ctrl-D on stdin instead of a FIN, as a user at the
  terminal would type it: the line discipline makes it the end of file for a reader at the
  start of a line.  On containerd 1.6 a FIN does not (seen: ``cat`` kept running), and a
  Ctrl-D followed at once by a FIN lost all the output, the terminal's echo included (seen in
  every run; without the FIN it arrives: test_exec_stdin.py).
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

from node.kubelet.spdy import SpdyClient, SpdyError, SpdyStream, UpgradeError

log = logging.getLogger(__name__)

V5: Final = "v5.channel.k8s.io"
V4: Final = "v4.channel.k8s.io"
CHANNEL_PROTOCOLS: Final = (V5, V4, "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")
PORT_FORWARD_PROTOCOLS: Final = (V4,)
SPDY_TUNNEL_PROTOCOL: Final = "SPDY/3.1+portforward.k8s.io"
UPSTREAM_PROTOCOL: Final = V4
STREAM_PROTOCOL_HEADER: Final = "X-Stream-Protocol-Version"
STREAM_TYPE_HEADER: Final = "streamType"

STDIN: Final = 0
STDOUT: Final = 1
STDERR: Final = 2
STATUS: Final = 3
RESIZE: Final = 4
CLOSE: Final = 255
END_OF_FILE: Final = b"\x04"  # a terminal's VEOF, Ctrl-D
OPEN_TIMEOUT: Final = 30.0  # upstream's default stream creation timeout


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


async def _pump_frames(
    source: aiohttp.ClientWebSocketResponse | web.WebSocketResponse,
    sink: aiohttp.ClientWebSocketResponse | web.WebSocketResponse,
) -> None:
    async for message in source:
        if message.type == aiohttp.WSMsgType.BINARY and message.data:
            await sink.send_bytes(message.data)


async def relay_channels(
    client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse
) -> None:
    """Relay channel frames unchanged both ways until either side closes; then close both.

    Used for port-forward from a v4 WebSocket client, where both sides frame alike."""
    try:
        await until_first_ends(
            "stream relay", _pump_frames(client, upstream), _pump_frames(upstream, client)
        )
    finally:
        await upstream.close()
        await client.close()


async def until_first_ends(what: str, *work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` side by side until one ends, then cancel the others; how each ended is
    logged, never raised (a relay ends whenever either side goes away)."""
    tasks = [asyncio.ensure_future(w) for w in work]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for result in await asyncio.gather(*tasks, return_exceptions=True):
            if isinstance(result, Exception):
                log.debug("%s ended: %r", what, result)


class RemoteCommandError(Exception):
    """The runtime's streaming server could not be reached or refused the session."""


@dataclass(frozen=True)
class Options:
    """Which streams an exec/attach has: what the CRI request asked for, exactly."""

    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    def stream_types(self) -> list[str]:
        """The SPDY streams to open, in client-go's order."""
        wanted = [
            ("error", True),
            ("stdin", self.stdin),
            ("stdout", self.stdout),
            ("stderr", self.stderr and not self.tty),
            ("resize", self.tty),
        ]
        return [name for name, on in wanted if on]


class RemoteCommand:
    """One exec/attach session with the runtime's streaming server, over SPDY (see above).

    ``open`` connects, upgrades and opens the streams (waiting for their replies), so a
    failure can still be answered with an HTTP error; ``relay`` then serves the client's
    WebSocket until the command ends or the client leaves; ``close`` drops the connection.
    """

    def __init__(
        self, connection: SpdyClient, streams: dict[str, SpdyStream], options: Options
    ) -> None:
        self._connection = connection
        self._streams = streams
        self._options = options

    @classmethod
    async def open(cls, url: str, options: Options) -> RemoteCommand:
        try:
            async with asyncio.timeout(OPEN_TIMEOUT):
                connection = await SpdyClient.connect(url, [(STREAM_PROTOCOL_HEADER, V4)])
                try:
                    negotiated = connection.response_headers.get(
                        STREAM_PROTOCOL_HEADER.lower(), [""]
                    )[0]
                    if negotiated != V4:
                        raise RemoteCommandError(
                            f"the runtime's streaming server chose protocol {negotiated!r},"
                            f" not {V4}"
                        )
                    streams: dict[str, SpdyStream] = {}
                    for kind in options.stream_types():
                        streams[kind] = await connection.open_stream([(STREAM_TYPE_HEADER, kind)])
                    for stream in streams.values():
                        await stream.wait_reply()
                except BaseException:
                    await connection.close()
                    raise
        except (UpgradeError, SpdyError, OSError, ValueError) as error:
            raise RemoteCommandError(str(error)) from None
        except TimeoutError:
            raise RemoteCommandError("timed out opening the runtime's streams") from None
        return cls(connection, streams, options)

    async def close(self) -> None:
        await self._connection.close()

    async def relay(self, client: web.WebSocketResponse, protocol: str) -> None:
        """Serve ``client`` (speaking ``protocol``) until either side ends; closes both."""
        try:
            await until_first_ends(
                "exec relay", self._from_client(client, protocol), self._to_client(client, protocol)
            )
        finally:
            await self.close()
            await client.close()

    async def _from_client(self, client: web.WebSocketResponse, protocol: str) -> None:
        stdin, resize = self._streams.get("stdin"), self._streams.get("resize")
        async for message in client:
            if message.type == aiohttp.WSMsgType.BINARY:
                data = bytes(message.data)
            elif message.type == aiohttp.WSMsgType.TEXT:
                # The Python client sends str data as text frames: chr(channel) + text.
                data = message.data.encode()
            else:
                continue
            if not data:
                continue
            channel, payload = data[0], data[1:]
            closes_stdin = protocol == V5 and channel == CLOSE and payload[:1] == bytes([STDIN])
            try:
                if channel == STDIN and stdin is not None:
                    await stdin.write(payload)
                elif channel == RESIZE and resize is not None:
                    await resize.write(payload)
                elif closes_stdin and stdin is not None:
                    if self._options.tty:
                        await stdin.write(END_OF_FILE)  # see the module docstring
                    else:
                        await stdin.close()
            except OSError as error:
                # The runtime's connection is going away; _to_client sees it end and still
                # delivers what the runtime sent before, the status included.
                log.debug("exec input dropped: %r", error)

    async def _to_client(self, client: web.WebSocketResponse, protocol: str) -> None:
        async with asyncio.TaskGroup() as group:
            # Read the error stream all along, but forward it after the output.
            error = group.create_task(_read_all(self._streams["error"]))
            for kind, channel in (("stdout", STDOUT), ("stderr", STDERR)):
                if kind in self._streams:
                    group.create_task(_copy_stream(self._streams[kind], channel, client))
        status = error.result()
        if status and protocol not in (V5, V4):
            status = legacy_status(status) or b""
        if status:
            await client.send_bytes(bytes([STATUS]) + status)


async def _copy_stream(stream: SpdyStream, channel: int, client: web.WebSocketResponse) -> None:
    prefix = bytes([channel])
    while data := await stream.read():
        await client.send_bytes(prefix + data)


async def _read_all(stream: SpdyStream) -> bytes:
    chunks = []
    while data := await stream.read():
        chunks.append(data)
    return b"".join(chunks)


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
