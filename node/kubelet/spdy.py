"""A minimal SPDY/3.1 server session: what ``kubectl port-forward`` needs, nothing more.

kubectl (client-go ``tools/portforward``) still speaks SPDY/3.1 for port-forwarding.  Since
Kubernetes 1.30 it tunnels that SPDY byte stream through a WebSocket whose subprotocol is
``SPDY/3.1+portforward.k8s.io``: every binary message carries the next raw bytes of the stream,
split anywhere (client-go ``TunnelingConnection``).  So the session here is fed bytes and writes
bytes; it knows nothing of WebSockets.

Wire format (SPDY/3 draft, as moby/spdystream implements it):

- control frame: ``1 | version(15)=3 | type(16) | flags(8) | length(24) | payload``;
- data frame: ``0 | stream id(31) | flags(8) | length(24) | data``; FLAG_FIN ends a direction;
- header blocks (SYN_STREAM, SYN_REPLY, HEADERS) are zlib streams with the SPDY/3 dictionary,
  one compressor and one decompressor per direction for the whole session, each block ending
  in a sync flush; every received block must be inflated, even of frames we ignore, or the
  shared zlib state drifts.  Uncompressed: ``count(32)`` then ``len(32) name len(32) value``
  pairs, names lower case, multiple values joined by NUL.

The session accepts client-initiated streams (SYN_STREAM → SYN_REPLY with no headers) and hands
each to a callback, answers PING by echoing it, ends on GOAWAY, and honours FIN and RST_STREAM.
It does no flow control: spdystream neither sends WINDOW_UPDATE nor waits for one, so neither
do we (received SETTINGS and WINDOW_UPDATE are ignored).  Server push, priorities and
unidirectional streams are not used by kubectl and not implemented.
"""

from __future__ import annotations

import asyncio
import enum
import struct
import zlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

VERSION: Final = 3
FLAG_FIN: Final = 0x01
MAX_FRAME_LENGTH: Final = 0xFFFFFF
_HEADER = struct.Struct(">II")


class FrameType(enum.IntEnum):
    SYN_STREAM = 1
    SYN_REPLY = 2
    RST_STREAM = 3
    SETTINGS = 4
    PING = 6
    GOAWAY = 7
    HEADERS = 8
    WINDOW_UPDATE = 9


class RstStatus(enum.IntEnum):
    PROTOCOL_ERROR = 1
    INVALID_STREAM = 2
    REFUSED_STREAM = 3
    UNSUPPORTED_VERSION = 4
    CANCEL = 5
    INTERNAL_ERROR = 6
    FLOW_CONTROL_ERROR = 7
    STREAM_IN_USE = 8
    STREAM_ALREADY_CLOSED = 9


def _dictionary() -> bytes:
    """The SPDY/3 header dictionary (section 2.6.10.1): length-prefixed words, then a tail."""
    words = (
        *[
            "options",
            "head",
            "post",
            "put",
            "delete",
            "trace",
            "accept",
            "accept-charset",
            "accept-encoding",
        ],
        *["accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control"],
        *["connection", "content-base", "content-encoding", "content-language", "content-length"],
        *[
            "content-location",
            "content-md5",
            "content-range",
            "content-type",
            "date",
            "etag",
            "expect",
        ],
        *["expires", "from", "host", "if-match", "if-modified-since", "if-none-match", "if-range"],
        *["if-unmodified-since", "last-modified", "location", "max-forwards", "pragma"],
        *[
            "proxy-authenticate",
            "proxy-authorization",
            "range",
            "referer",
            "retry-after",
            "server",
            "te",
        ],
        *["trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning"],
        *["www-authenticate", "method", "get", "status"],
        "200 OK",
        *["version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin"],
    )
    tail = (
        "100101201202205206300302303304305306307402405406407408409410411412413414415416417"
        "502504505203 Non-Authoritative Information204 No Content301 Moved Permanently"
        "400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error"
        "501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct "
        "Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,"
        "image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
        "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset="
        "iso-8859-1,utf-,*,enq=0."
    )
    words_block = b"".join(len(w).to_bytes(4, "big") + w.encode() for w in words)
    return words_block + tail.encode()


HEADER_DICTIONARY: Final = _dictionary()
DICTIONARY_ID: Final = 0xE3C6A7C2  # adler32 of HEADER_DICTIONARY, what the zlib header names


class SpdyError(Exception):
    """The peer broke the protocol; the session cannot continue."""


Headers = Mapping[str, list[str]]


class HeaderCompressor:
    """Encodes header blocks for one direction of a session (shared zlib state)."""

    def __init__(self) -> None:
        self._zlib = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zdict=HEADER_DICTIONARY)

    def compress(self, headers: Iterable[tuple[str, str]]) -> bytes:
        pairs = list(headers)
        raw = bytearray(len(pairs).to_bytes(4, "big"))
        for name, value in pairs:
            for field in (name.lower().encode(), value.encode()):
                raw += len(field).to_bytes(4, "big") + field
        return self._zlib.compress(bytes(raw)) + self._zlib.flush(zlib.Z_SYNC_FLUSH)


class HeaderDecompressor:
    """Decodes header blocks for one direction of a session (shared zlib state)."""

    def __init__(self) -> None:
        self._zlib = zlib.decompressobj(zdict=HEADER_DICTIONARY)

    def decompress(self, block: bytes) -> dict[str, list[str]]:
        try:
            raw = self._zlib.decompress(block)
        except zlib.error as error:
            raise SpdyError(f"bad header block: {error}") from None
        try:
            (count,) = struct.unpack_from(">I", raw, 0)
            offset = 4
            headers: dict[str, list[str]] = {}
            for _ in range(count):
                fields: list[str] = []
                for _ in range(2):
                    (length,) = struct.unpack_from(">I", raw, offset)
                    offset += 4
                    if offset + length > len(raw):
                        raise SpdyError("header block shorter than its lengths")
                    fields.append(raw[offset : offset + length].decode())
                    offset += length
                headers.setdefault(fields[0].lower(), []).extend(fields[1].split("\0"))
        except (struct.error, UnicodeDecodeError) as error:
            raise SpdyError(f"bad header block: {error}") from None
        return headers


@dataclass(frozen=True)
class Frame:
    """One frame: ``type`` is None for a data frame (then ``stream_id`` says whose)."""

    type: FrameType | int | None
    flags: int
    payload: bytes
    stream_id: int = 0

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


def encode_control(type_: FrameType, payload: bytes, flags: int = 0) -> bytes:
    if len(payload) > MAX_FRAME_LENGTH:
        raise ValueError("control frame too large")
    return _HEADER.pack(0x80000000 | VERSION << 16 | type_, flags << 24 | len(payload)) + payload


def encode_data(stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
    """One data frame; callers split payloads larger than MAX_FRAME_LENGTH."""
    if len(data) > MAX_FRAME_LENGTH:
        raise ValueError("data frame too large")
    flags = FLAG_FIN if fin else 0
    return _HEADER.pack(stream_id & 0x7FFFFFFF, flags << 24 | len(data)) + data


class FrameReader:
    """Splits a byte stream, fed in pieces of any size, into frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= _HEADER.size:
            first, second = _HEADER.unpack_from(self._buffer)
            length = second & 0xFFFFFF
            end = _HEADER.size + length
            if len(self._buffer) < end:
                break
            payload = bytes(self._buffer[_HEADER.size : end])
            del self._buffer[:end]
            flags = second >> 24
            if first & 0x80000000:
                version = (first >> 16) & 0x7FFF
                if version != VERSION:
                    raise SpdyError(f"unsupported SPDY version {version}")
                type_ = first & 0xFFFF
                known = type_ in FrameType._value2member_map_
                frames.append(Frame(FrameType(type_) if known else type_, flags, payload))
            else:
                frames.append(Frame(None, flags, payload, first & 0x7FFFFFFF))
        return frames


def _stream_id(payload: bytes) -> int:
    if len(payload) < 4:
        raise SpdyError("control frame too short")
    return int.from_bytes(payload[:4], "big") & 0x7FFFFFFF


class SpdyStream:
    """One stream of a session: read what the peer sends, write back, FIN or reset."""

    def __init__(self, session: SpdySession, stream_id: int, headers: Headers) -> None:
        self.session = session
        self.id = stream_id
        self.headers = headers
        self.reset = False
        self._reset_event = asyncio.Event()
        self._incoming: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._remote_closed = False
        self._local_closed = False

    def header(self, name: str) -> str:
        """The first value of a header, "" if absent."""
        values = self.headers.get(name.lower())
        return values[0] if values else ""

    async def read(self) -> bytes:
        """The next data the peer sent; b"" once it sent FIN or reset the stream."""
        if self._remote_closed and self._incoming.empty():
            return b""
        data = await self._incoming.get()
        if data is None:
            self._remote_closed = True
            return b""
        return data

    async def write(self, data: bytes) -> None:
        if self._local_closed or self.reset:
            return
        for start in range(0, len(data), MAX_FRAME_LENGTH):
            chunk = data[start : start + MAX_FRAME_LENGTH]
            await self.session.send(encode_data(self.id, chunk))

    async def close(self) -> None:
        """Half-close: send FIN (idempotent)."""
        if self._local_closed or self.reset:
            return
        self._local_closed = True
        await self.session.send(encode_data(self.id, b"", fin=True))

    async def send_reset(self, status: RstStatus = RstStatus.CANCEL) -> None:
        if self.reset:
            return
        self._mark_reset()
        await self.session.send(
            encode_control(FrameType.RST_STREAM, struct.pack(">II", self.id, status))
        )

    def _deliver(self, data: bytes, fin: bool) -> None:
        if data:
            self._incoming.put_nowait(data)
        if fin:
            self._incoming.put_nowait(None)

    async def wait_reset(self) -> None:
        """Return once the stream was reset, by either side."""
        await self._reset_event.wait()

    def _mark_reset(self) -> None:
        if self.reset:
            return
        self.reset = True
        self._reset_event.set()
        self._local_closed = True
        self._incoming.put_nowait(None)


class SpdySession:
    """The server end of one SPDY/3.1 connection.

    ``send`` writes raw bytes to the peer (calls are serialized here); ``on_stream`` is called
    for each stream the peer opens, after the SYN_REPLY went out.  ``feed`` takes bytes as
    they arrive and raises ``SpdyError`` when the peer breaks the protocol.
    """

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[None]],
        on_stream: Callable[[SpdyStream], None],
    ) -> None:
        self._send = send
        self._on_stream = on_stream
        self._lock = asyncio.Lock()
        self._reader = FrameReader()
        self._inflate = HeaderDecompressor()
        self._deflate = HeaderCompressor()
        self.streams: dict[int, SpdyStream] = {}
        self.closed = False

    async def send(self, data: bytes) -> None:
        async with self._lock:
            await self._send(data)

    async def feed(self, data: bytes) -> None:
        for frame in self._reader.feed(data):
            await self._handle(frame)

    def close(self) -> None:
        """The connection is gone: every stream is reset (reads EOF, writes are dropped)."""
        self.closed = True
        for stream in self.streams.values():
            stream._mark_reset()

    async def _handle(self, frame: Frame) -> None:
        if frame.type is None:
            stream = self.streams.get(frame.stream_id)
            if stream is None or stream.reset:
                await self._reset(frame.stream_id, RstStatus.INVALID_STREAM)
            else:
                stream._deliver(frame.payload, frame.fin)
        elif frame.type == FrameType.SYN_STREAM:
            await self._syn_stream(frame)
        elif frame.type in (FrameType.SYN_REPLY, FrameType.HEADERS):
            self._inflate.decompress(frame.payload[4:])
        elif frame.type == FrameType.RST_STREAM:
            stream = self.streams.get(_stream_id(frame.payload))
            if stream is not None:
                stream._mark_reset()
        elif frame.type == FrameType.PING:
            await self.send(encode_control(FrameType.PING, frame.payload))
        elif frame.type == FrameType.GOAWAY:
            self.close()
        # SETTINGS, WINDOW_UPDATE and unknown control frames: nothing to do.

    async def _syn_stream(self, frame: Frame) -> None:
        if len(frame.payload) < 10:
            raise SpdyError("SYN_STREAM too short")
        stream_id = _stream_id(frame.payload)
        headers = self._inflate.decompress(frame.payload[10:])
        if stream_id in self.streams:
            await self._reset(stream_id, RstStatus.PROTOCOL_ERROR)
            return
        stream = SpdyStream(self, stream_id, headers)
        self.streams[stream_id] = stream
        await self._syn_reply(stream_id)
        if frame.fin:
            stream._deliver(b"", True)
        self._on_stream(stream)

    async def _syn_reply(self, stream_id: int) -> None:
        async with self._lock:
            # Compress under the lock: the peer inflates blocks in the order they are sent.
            block = self._deflate.compress(())
            await self._send(
                encode_control(FrameType.SYN_REPLY, struct.pack(">I", stream_id) + block)
            )

    async def _reset(self, stream_id: int, status: RstStatus) -> None:
        await self.send(encode_control(FrameType.RST_STREAM, struct.pack(">II", stream_id, status)))
