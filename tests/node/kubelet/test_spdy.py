"""The SPDY/3.1 framing and session: the server end driven by a small client built from the
same framing functions, the client end (stream ids, SYN_REPLY, refused pushes), a client and
a server session talking to each other, the HTTP upgrade, and the header dictionary checked
against a real browser's frame."""

from __future__ import annotations

import asyncio
import struct
import zlib

import pytest

from node.kubelet.spdy import (
    DICTIONARY_ID,
    FLAG_FIN,
    HEADER_DICTIONARY,
    Frame,
    FrameReader,
    FrameType,
    HeaderCompressor,
    HeaderDecompressor,
    RstStatus,
    SpdyClient,
    SpdyError,
    SpdySession,
    SpdyStream,
    UpgradeError,
    encode_control,
    encode_data,
)

# The start of a SYN_STREAM header block Firefox sent over SPDY/3 (proxygen's SPDYCodec test
# fixture "a request from firefox for facebook.com"): a zlib stream using the dictionary.
FIREFOX_BLOCK_PREFIX = bytes.fromhex(
    "38 ea e3 c6 a7 c2 02 65 57 50 22 b4 c2 9e 20 d9 ad 10 a9 d9 dd 35 04 94 f1 ac a0 45"
    "87 14 30 ed eb 25 a6 15 65 e6 a5 e8 15 27 e9 a5 01 8b e9 24 60 42 d5 4b 06 17 30 ec"
    "56 c5 c0 a2 33 17 5c be 66 94 94 14 14 83 b5 16 24 82 8b 3b 6e 80 00 d2 2f 2e 49 2c"
    "29 2d d6 2b c8 28 00 08 20 94 22 80 03 20 80 f2 f2 75 93 13 93 33"
)


def test_dictionary_is_spdy3s() -> None:
    assert len(HEADER_DICTIONARY) == 1423
    assert zlib.adler32(HEADER_DICTIONARY) == DICTIONARY_ID
    inflated = zlib.decompressobj(zdict=HEADER_DICTIONARY).decompress(FIREFOX_BLOCK_PREFIX)
    assert inflated.startswith(b"\x00\x00\x00\x0d\x00\x00\x00\x08:version\x00\x00\x00\x08HTTP/1.1")
    assert b"www.afrind.sb.facebook.com" in inflated


def test_header_blocks_round_trip_with_shared_state() -> None:
    compressor, decompressor = HeaderCompressor(), HeaderDecompressor()
    first = compressor.compress([("StreamType", "error"), ("port", "8080")])
    assert first[2:6] == DICTIONARY_ID.to_bytes(4, "big")
    second = compressor.compress([("streamtype", "data"), ("multi", "a\0b")])
    assert decompressor.decompress(first) == {"streamtype": ["error"], "port": ["8080"]}
    assert decompressor.decompress(second) == {"streamtype": ["data"], "multi": ["a", "b"]}


def test_bad_header_block() -> None:
    with pytest.raises(SpdyError, match="bad header block"):
        HeaderDecompressor().decompress(b"not zlib at all")


@pytest.mark.parametrize("split", [1, 3, 7, 1000], ids=["bytewise", "3", "7", "whole"])
def test_reader_reassembles_frames_split_anywhere(split: int) -> None:
    wire = (
        encode_control(FrameType.PING, struct.pack(">I", 1))
        + encode_data(5, b"hello", fin=True)
        + encode_data(7, b"")
    )
    reader = FrameReader()
    frames: list[Frame] = []
    for start in range(0, len(wire), split):
        frames += reader.feed(wire[start : start + split])
    assert frames == [
        Frame(FrameType.PING, 0, b"\x00\x00\x00\x01"),
        Frame(None, FLAG_FIN, b"hello", 5),
        Frame(None, 0, b"", 7),
    ]


def test_reader_refuses_other_versions() -> None:
    spdy2_ping = struct.pack(">II", 0x80020006, 4) + b"\x00\x00\x00\x01"
    with pytest.raises(SpdyError, match="version 2"):
        FrameReader().feed(spdy2_ping)


class Client:
    """The client end: builds frames with the module's encoders, parses with FrameReader."""

    def __init__(self) -> None:
        self.deflate = HeaderCompressor()
        self.inflate = HeaderDecompressor()
        self.reader = FrameReader()
        self.received: list[Frame] = []
        self.arrived = asyncio.Event()

    async def sink(self, data: bytes) -> None:
        self.received += self.reader.feed(data)
        self.arrived.set()

    def syn_stream(
        self, stream_id: int, headers: list[tuple[str, str]], fin: bool = False
    ) -> bytes:
        payload = struct.pack(">IIH", stream_id, 0, 0) + self.deflate.compress(headers)
        return encode_control(FrameType.SYN_STREAM, payload, FLAG_FIN if fin else 0)


async def test_session_opens_streams_echoes_data_and_answers_ping() -> None:
    client = Client()
    opened: list[SpdyStream] = []
    session = SpdySession(client.sink, opened.append)

    await session.feed(client.syn_stream(1, [("streamType", "error"), ("requestID", "0")]))
    await session.feed(client.syn_stream(3, [("streamType", "data"), ("requestID", "0")]))
    assert [s.id for s in opened] == [1, 3]
    assert opened[1].header("STREAMTYPE") == "data" and opened[1].header("absent") == ""
    replies = [f for f in client.received if f.type == FrameType.SYN_REPLY]
    assert [struct.unpack(">I", f.payload[:4])[0] for f in replies] == [1, 3]
    assert [client.inflate.decompress(f.payload[4:]) for f in replies] == [{}, {}]

    wire = encode_data(3, b"abc") + encode_data(3, b"def", fin=True)
    await session.feed(wire[:5])
    await session.feed(wire[5:])
    data = opened[1]
    assert await data.read() == b"abc"
    assert await data.read() == b"def"
    assert await data.read() == b""
    await data.write(b"xyz")
    await data.close()
    await data.close()

    await session.feed(encode_control(FrameType.PING, b"\x00\x00\x00\x07"))
    await session.feed(encode_control(FrameType.SETTINGS, b"\x00\x00\x00\x00"))
    await session.feed(encode_control(FrameType.WINDOW_UPDATE, struct.pack(">II", 3, 100)))
    tail = client.received[len(replies) :]
    assert tail == [
        Frame(None, 0, b"xyz", 3),
        Frame(None, FLAG_FIN, b"", 3),
        Frame(FrameType.PING, 0, b"\x00\x00\x00\x07"),
    ]


async def test_reset_and_unknown_streams() -> None:
    client = Client()
    opened: list[SpdyStream] = []
    session = SpdySession(client.sink, opened.append)
    await session.feed(client.syn_stream(1, [("streamType", "data")]))
    stream = opened[0]

    await session.feed(
        encode_control(FrameType.RST_STREAM, struct.pack(">II", 1, RstStatus.CANCEL))
    )
    assert await stream.read() == b"" and stream.reset
    await stream.write(b"dropped after reset")

    await session.feed(encode_data(9, b"nobody"))
    rst = client.received[-1]
    assert rst.type == FrameType.RST_STREAM
    assert struct.unpack(">II", rst.payload) == (9, RstStatus.INVALID_STREAM)

    await session.feed(client.syn_stream(1, [("streamType", "data")]))
    assert struct.unpack(">II", client.received[-1].payload) == (1, RstStatus.PROTOCOL_ERROR)


async def test_server_reset_and_goaway() -> None:
    client = Client()
    opened: list[SpdyStream] = []
    session = SpdySession(client.sink, opened.append)
    await session.feed(client.syn_stream(1, [("a", "b")]))
    await session.feed(client.syn_stream(3, [("a", "b")], fin=True))
    await opened[0].send_reset(RstStatus.REFUSED_STREAM)
    assert struct.unpack(">II", client.received[-1].payload) == (1, RstStatus.REFUSED_STREAM)
    assert await opened[1].read() == b""

    await session.feed(encode_control(FrameType.GOAWAY, struct.pack(">II", 3, 0)))
    assert session.closed


async def test_client_session_opens_odd_streams_and_waits_for_replies() -> None:
    server = Client()  # parses what the client session sends
    session = SpdySession(server.sink, client=True)
    first = await session.open_stream([("streamType", "error")])
    second = await session.open_stream([("streamType", "stdin")], fin=True)
    assert (first.id, second.id) == (1, 3)
    assert second.header("streamtype") == "stdin"
    syns = [f for f in server.received if f.type == FrameType.SYN_STREAM]
    assert [struct.unpack(">I", f.payload[:4])[0] for f in syns] == [1, 3]
    assert [f.fin for f in syns] == [False, True]
    assert [server.inflate.decompress(f.payload[10:]) for f in syns] == [
        {"streamtype": ["error"]},
        {"streamtype": ["stdin"]},
    ]

    deflate = HeaderCompressor()
    reply = encode_control(FrameType.SYN_REPLY, struct.pack(">I", 1) + deflate.compress([]))
    await session.feed(reply)
    assert await asyncio.wait_for(first.wait_reply(), 1) == {}
    await session.feed(encode_control(FrameType.RST_STREAM, struct.pack(">II", 3, 5)))
    with pytest.raises(SpdyError, match="reset before the peer replied"):
        await second.wait_reply()

    # A stream pushed by the server is refused: this end has no on_stream.
    syn = struct.pack(">IIH", 2, 1, 0) + deflate.compress([("a", "b")])
    await session.feed(encode_control(FrameType.SYN_STREAM, syn))
    assert struct.unpack(">II", server.received[-1].payload) == (2, RstStatus.REFUSED_STREAM)
    session.close()
    with pytest.raises(SpdyError, match="closed"):
        await session.open_stream([("streamType", "stdout")])


async def test_client_and_server_sessions_talk() -> None:
    accepted: list[SpdyStream] = []
    to_client: list[bytes] = []

    async def client_sends(data: bytes) -> None:
        await server.feed(data)

    async def server_sends(data: bytes) -> None:
        to_client.append(data)

    server = SpdySession(server_sends, accepted.append)
    client = SpdySession(client_sends, client=True)
    stream = await client.open_stream([("streamType", "stdin"), ("x", "1\x002")])
    assert accepted[0].headers == {"streamtype": ["stdin"], "x": ["1", "2"]}
    for data in to_client:
        await client.feed(data)
    assert await stream.wait_reply() == {}
    await stream.write(b"hello")
    await stream.close()
    assert [await accepted[0].read(), await accepted[0].read()] == [b"hello", b""]
    await accepted[0].write(b"back")
    await accepted[0].send_reset()
    for data in to_client[1:]:
        await client.feed(data)
    assert [await stream.read(), await stream.read()] == [b"back", b""]
    assert stream.reset


async def test_spdy_client_upgrades_then_speaks_spdy() -> None:
    requests: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(await reader.readuntil(b"\r\n\r\n"))
        # The first frame comes in the same write as the 101: it must not be lost.
        ping = encode_control(FrameType.PING, b"\x00\x00\x00\x02")
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\nX-A: b\r\n\r\n")
        writer.write(ping)
        echoed = FrameReader().feed(await reader.readexactly(len(ping)))
        assert echoed == [Frame(FrameType.PING, 0, b"\x00\x00\x00\x02")]
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        connection = await SpdyClient.connect(
            f"http://127.0.0.1:{port}/exec/t?x=1", [("X-Stream-Protocol-Version", "v4")]
        )
        assert connection.response_headers["x-a"] == ["b"]
        await asyncio.wait_for(connection.closed.wait(), 5)
        await connection.close()
        head = requests[0].decode()
        assert head.startswith("POST /exec/t?x=1 HTTP/1.1\r\n")
        for line in ("Connection: Upgrade", "Upgrade: SPDY/3.1", "X-Stream-Protocol-Version: v4"):
            assert f"\r\n{line}\r\n" in head
    finally:
        server.close()
        await server.wait_closed()


async def test_spdy_client_refused() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 13\r\n\r\nno such token")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(UpgradeError, match=r"\(403\): no such token") as refused:
            await SpdyClient.connect(f"http://127.0.0.1:{port}/exec/x")
        assert refused.value.status == 403
    finally:
        server.close()
        await server.wait_closed()
