"""Stream relays: protocol negotiation, the Status translation for old channel protocols,
kubectl's SPDY port-forward (stream pairing, pumping, errors, resets) over a SpdySession with
an in-memory pod port, and exec/attach's SPDY session with a fake of containerd's streaming
server (``FakeStreamingServer``, also used by test_kubelet_server.py, where the whole relay
from the client's WebSocket is exercised)."""

from __future__ import annotations

import asyncio
import json
import secrets
import struct
from collections.abc import AsyncIterator, Callable

import pytest

from node.kubelet.spdy import (
    Frame,
    FrameReader,
    FrameType,
    HeaderCompressor,
    RstStatus,
    SpdySession,
    SpdyStream,
    encode_control,
    encode_data,
)
from node.kubelet.streams import (
    CHANNEL_PROTOCOLS,
    Options,
    PortForwardError,
    PortStream,
    RemoteCommand,
    RemoteCommandError,
    SpdyPortForward,
    legacy_status,
    negotiate,
)


@pytest.mark.parametrize(
    ("offered", "expected"),
    [
        ("v4.channel.k8s.io, v5.channel.k8s.io", "v5.channel.k8s.io"),
        ("channel.k8s.io", "channel.k8s.io"),
        ("base64.channel.k8s.io", None),
        ("", None),
    ],
    ids=["prefers-v5", "v1", "unsupported", "none"],
)
def test_negotiate(offered: str, expected: str | None) -> None:
    assert negotiate(offered, CHANNEL_PROTOCOLS) == expected


def test_legacy_status() -> None:
    assert legacy_status(json.dumps({"status": "Success"}).encode()) is None
    failure = {"status": "Failure", "message": "command terminated with non-zero exit code"}
    assert legacy_status(json.dumps(failure).encode()) == failure["message"].encode()
    assert legacy_status(b"plain text") == b"plain text"


class EchoPort:
    """A pod port that echoes what it is sent."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.closed = False

    async def read(self) -> bytes:
        return await self.queue.get()

    async def write(self, data: bytes) -> None:
        await self.queue.put(data)

    async def close(self) -> None:
        self.closed = True
        self.queue.put_nowait(b"")


class Kubectl:
    """The client end of the SPDY session: opens stream pairs, watches what comes back."""

    def __init__(self) -> None:
        self.deflate = HeaderCompressor()
        self.reader = FrameReader()
        self.frames: list[Frame] = []
        self.changed = asyncio.Event()

    async def sink(self, data: bytes) -> None:
        self.frames += self.reader.feed(data)
        self.changed.set()

    def open(self, stream_id: int, headers: dict[str, str]) -> bytes:
        block = self.deflate.compress(headers.items())
        return encode_control(FrameType.SYN_STREAM, struct.pack(">IIH", stream_id, 0, 0) + block)

    def data(self, stream_id: int) -> list[Frame]:
        return [f for f in self.frames if f.type is None and f.stream_id == stream_id]

    def text(self, stream_id: int) -> bytes:
        return b"".join(f.payload for f in self.data(stream_id))

    def finished(self, stream_id: int) -> bool:
        return any(f.fin for f in self.data(stream_id))

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 5)


def session(
    dial: Callable[[int], PortStream],
) -> tuple[Kubectl, SpdySession, SpdyPortForward, list[int]]:
    dialed: list[int] = []

    async def dial_port(port: int) -> PortStream:
        dialed.append(port)
        return dial(port)

    kubectl = Kubectl()
    forward = SpdyPortForward(dial_port, "web", "u1")
    return kubectl, SpdySession(kubectl.sink, forward.accept), forward, dialed


async def test_forwards_a_connection_until_reset() -> None:
    port = EchoPort()
    kubectl, spdy, forward, dialed = session(lambda _: port)
    await spdy.feed(kubectl.open(1, {"streamType": "error", "port": "80", "requestID": "0"}))
    await spdy.feed(kubectl.open(3, {"streamType": "data", "port": "80", "requestID": "0"}))
    await spdy.feed(encode_data(3, b"ping"))
    await kubectl.until(lambda: kubectl.text(3) == b"ping")
    assert dialed == [80]

    # kubectl half-closes when its local connection ends: the pod side stays open.
    await spdy.feed(encode_data(3, b"", fin=True))
    await asyncio.sleep(0)
    closed_by_fin = port.closed
    assert not closed_by_fin

    await spdy.feed(encode_control(FrameType.RST_STREAM, struct.pack(">II", 3, RstStatus.CANCEL)))
    await kubectl.until(lambda: kubectl.finished(1))
    assert port.closed
    assert kubectl.text(1) == b""
    await forward.close()


async def test_pod_closing_ends_both_streams() -> None:
    port = EchoPort()
    kubectl, spdy, forward, _ = session(lambda _: port)
    # Without requestID (old clients) the data stream pairs with the error stream id - 2.
    await spdy.feed(kubectl.open(5, {"streamType": "error", "port": "81"}))
    await spdy.feed(kubectl.open(7, {"streamType": "data", "port": "81"}))
    await port.close()
    await kubectl.until(lambda: kubectl.finished(5) and kubectl.finished(7))
    await forward.close()


def refuse(port: int) -> PortStream:
    raise PortForwardError(f"dial tcp 127.0.0.1:{port}: connection refused")


@pytest.mark.parametrize(
    ("port", "message"),
    [
        ("8080", b"error forwarding port 8080 to pod web, uid u1: dial tcp 127.0.0.1:8080"),
        ("http", b"invalid port 'http'"),
        ("0", b"invalid port '0'"),
    ],
    ids=["refused", "not-a-number", "zero"],
)
async def test_errors_go_to_the_error_stream(port: str, message: bytes) -> None:
    kubectl, spdy, forward, _ = session(refuse)
    await spdy.feed(kubectl.open(1, {"streamType": "error", "port": port, "requestID": "7"}))
    await spdy.feed(kubectl.open(3, {"streamType": "data", "port": port, "requestID": "7"}))
    await kubectl.until(lambda: kubectl.finished(1) and kubectl.finished(3))
    assert kubectl.text(1).startswith(message)
    await forward.close()


async def test_unknown_stream_type_is_reset() -> None:
    kubectl, spdy, forward, dialed = session(lambda _: EchoPort())
    await spdy.feed(kubectl.open(1, {"streamType": "stdin"}))
    await kubectl.until(lambda: kubectl.frames[-1].type == FrameType.RST_STREAM)
    assert struct.unpack(">II", kubectl.frames[-1].payload) == (1, RstStatus.CANCEL)
    assert dialed == []
    await forward.close()


async def test_close_cancels_running_forwards() -> None:
    port = EchoPort()
    kubectl, spdy, forward, _ = session(lambda _: port)
    await spdy.feed(kubectl.open(1, {"streamType": "error", "port": "80", "requestID": "0"}))
    await spdy.feed(kubectl.open(3, {"streamType": "data", "port": "80", "requestID": "0"}))
    await spdy.feed(encode_data(3, b"ping"))
    await kubectl.until(lambda: kubectl.text(3) == b"ping")
    spdy.close()
    await forward.close()
    assert port.closed


def exit_status(code: int) -> bytes:
    """The Status containerd writes on the error stream (v4): Go's json.Marshal of it."""
    if code == 0:
        return json.dumps({"metadata": {}, "status": "Success"}).encode()
    return json.dumps(
        {
            "metadata": {},
            "status": "Failure",
            "message": f"command terminated with non-zero exit code: exit status {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
        }
    ).encode()


class FakeStreamingServer:
    """containerd 1.6's streaming server for exec/attach, as far as the kubelet can tell.

    ``register(options)`` plays the CRI Exec/Attach call and returns the single-use URL
    (``default``: the options for tokens it did not hand out, e.g. a FakeRuntime's).  A
    request must upgrade to SPDY/3.1 offering v4.channel.k8s.io; the server then waits for the
    streams the options imply (error, stdin, stdout, stderr unless tty, resize with tty) and
    runs the "process": stdin is echoed to stdout (``err:`` lines to stderr), ``exit N`` ends
    it with code N, a FIN on stdin ends it with 0 (``stdin_fin``; a reset or a dropped
    connection sets ``stdin_dropped`` instead) except with a tty: there, as with containerd
    1.6, only a Ctrl-D ends it and a FIN changes nothing, a resize message is echoed to stdout as
    ``resize:<json>``; without stdin it ends at once with 0.  Then, like upstream, the Status
    goes on the error stream, every stream is reset and the connection closed (GOAWAY)."""

    def __init__(self) -> None:
        self.url = ""
        self.tokens: dict[str, Options] = {}
        self.stdin: list[bytes] = []
        self.stdin_fin = asyncio.Event()
        self.stdin_dropped = asyncio.Event()
        self.default: Options | None = None
        self.headers: list[dict[str, str]] = []
        self.stream_types: list[list[str]] = []
        self._server: asyncio.Server | None = None

    def register(self, options: Options, kind: str = "exec") -> str:
        token = secrets.token_urlsafe(6)
        self.tokens[token] = options
        return f"{self.url}/{kind}/{token}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._session(reader, writer)
        finally:
            writer.close()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lines = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
        method, path, _ = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        self.headers.append(headers)
        options = self.tokens.pop(path.rsplit("/", 1)[-1], self.default)
        if options is None or method not in ("GET", "POST"):
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
            return
        upgrade = headers.get("upgrade", "").lower() == "spdy/3.1"
        if not upgrade or "upgrade" not in headers.get("connection", "").lower():
            writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nbad upgrade")
            return
        if headers.get("x-stream-protocol-version") != "v4.channel.k8s.io":
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 11\r\n\r\nno protocol")
            return
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
            b"Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
        )

        async def send(data: bytes) -> None:
            writer.write(data)
            await writer.drain()

        arrived: asyncio.Queue[SpdyStream] = asyncio.Queue()
        session = SpdySession(send, arrived.put_nowait)
        feeding = asyncio.create_task(self._feed(reader, session))
        try:
            expected = len(options.stream_types())
            streams = {}
            for _ in range(expected):
                stream = await asyncio.wait_for(arrived.get(), 5)
                streams[stream.header("streamType")] = stream
            self.stream_types.append(list(streams))
            code = await self._run(streams)
            await streams["error"].write(exit_status(code))
            for stream in streams.values():
                await stream.send_reset()
            await send(encode_control(FrameType.GOAWAY, struct.pack(">II", 0, 0)))
        finally:
            feeding.cancel()

    @staticmethod
    async def _feed(reader: asyncio.StreamReader, session: SpdySession) -> None:
        while data := await reader.read(65536):
            await session.feed(data)
        session.close()

    async def _run(self, streams: dict[str, SpdyStream]) -> int:
        stdout = streams.get("stdout")
        stderr = streams.get("stderr") or stdout
        resize = streams.get("resize")
        resizing = asyncio.create_task(self._echo_resizes(resize, stdout)) if resize else None
        try:
            stdin = streams.get("stdin")
            if stdin is None:
                return 0
            while data := await stdin.read():
                self.stdin.append(data)
                if data.startswith(b"exit "):
                    return int(data[5:])
                if resize is not None and data == b"\x04":
                    return 0
                target = stderr if data.startswith(b"err:") else stdout
                if target is not None:
                    await target.write(data)
            if stdin.reset:
                self.stdin_dropped.set()
                return 0
            self.stdin_fin.set()
            if resize is not None:
                # The terminal stays open: the process waits until the connection goes.
                await stdin.wait_reset()
                self.stdin_dropped.set()
            return 0
        finally:
            if resizing is not None:
                resizing.cancel()

    @staticmethod
    async def _echo_resizes(resize: SpdyStream, stdout: SpdyStream | None) -> None:
        while data := await resize.read():
            if stdout is not None:
                await stdout.write(b"resize:" + data)


@pytest.fixture
async def streaming_server() -> AsyncIterator[FakeStreamingServer]:
    server = FakeStreamingServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("options", "types"),
    [
        (Options(stdin=True, stdout=True, stderr=True, tty=False), "error stdin stdout stderr"),
        (Options(stdin=True, stdout=True, stderr=False, tty=True), "error stdin stdout resize"),
        (Options(stdin=False, stdout=True, stderr=True, tty=True), "error stdout resize"),
        (Options(stdin=False, stdout=False, stderr=True, tty=False), "error stderr"),
    ],
    ids=["stdio", "tty", "tty-drops-stderr", "stderr-only"],
)
def test_stream_types_follow_client_go(options: Options, types: str) -> None:
    assert options.stream_types() == types.split()


async def test_remote_command_upgrades_and_opens_the_streams(
    streaming_server: FakeStreamingServer,
) -> None:
    options = Options(stdin=True, stdout=True, stderr=True, tty=False)
    remote = await RemoteCommand.open(streaming_server.register(options), options)
    for _ in range(100):
        if streaming_server.stream_types:
            break
        await asyncio.sleep(0.01)
    await remote.close()
    headers = streaming_server.headers[0]
    assert headers["x-stream-protocol-version"] == "v4.channel.k8s.io"
    assert (headers["connection"], headers["upgrade"]) == ("Upgrade", "SPDY/3.1")
    assert streaming_server.stream_types == [["error", "stdin", "stdout", "stderr"]]


async def test_remote_command_reports_a_refusal(streaming_server: FakeStreamingServer) -> None:
    options = Options(stdin=False, stdout=True, stderr=False, tty=False)
    with pytest.raises(RemoteCommandError, match=r"refused \(404\): not found"):
        await RemoteCommand.open(f"{streaming_server.url}/exec/unknown-token", options)
    with pytest.raises(RemoteCommandError, match="only http:// URLs"):
        await RemoteCommand.open("https://127.0.0.1:1/exec/x", options)
