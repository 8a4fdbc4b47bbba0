"""The SPDY/3.1 framing and server session, driven by a small client built from the same
framing functions, and the header dictionary checked against a real browser's frame."""

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
    SpdyError,
    SpdySession,
    SpdyStream,
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
