"""Stream relays in memory: protocol negotiation, the Status translation for old channel
protocols, and kubectl's SPDY port-forward (stream pairing, pumping, errors, resets) over a
SpdySession with an in-memory pod port.  The WebSocket relays to a runtime streaming server
are exercised end to end in test_kubelet_server.py."""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Callable

import pytest

from node.kubelet.spdy import (
    Frame,
    FrameReader,
    FrameType,
    HeaderCompressor,
    RstStatus,
    SpdySession,
    encode_control,
    encode_data,
)
from node.kubelet.streams import (
    CHANNEL_PROTOCOLS,
    PortForwardError,
    PortStream,
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
