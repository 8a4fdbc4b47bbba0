"""A minimal SPDY/3.1 session, server or client: what the kubelet's streams need, no more.

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

The same ``SpdySession`` serves both ends:

- server (kubectl's port-forward, tunnelled): it accepts the peer's streams (SYN_STREAM →
  SYN_REPLY with no headers) and hands each to a callback;
- client (exec/attach to the runtime's streaming server, ``SpdyClient``): ``open_stream``
  sends SYN_STREAM with headers on the next odd stream id (even ids are the server's) and the
  stream's ``wait_reply`` returns once the peer's SYN_REPLY came.  ``SpdyClient.connect`` does
  the HTTP/1.1 ``Upgrade: SPDY/3.1`` handshake over a plain asyncio connection and then feeds
  the session from it.

Either end answers PING by echoing it, ends on GOAWAY, and honours FIN and RST_STREAM.
It does no flow control: spdystream neither sends WINDOW_UPDATE nor waits for one, so neither
do we (received SETTINGS and WINDOW_UPDATE are ignored).  Server push, priorities and
unidirectional streams are not used by kubectl and not implemented.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import struct
import urllib.parse
import zlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

log = logging.getLogger(__name__)

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


def _header_map(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    headers: dict[str, list[str]] = {}
    for name, value in pairs:
        headers.setdefault(name.lower(), []).extend(value.split("\0"))
    return headers


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
        self.reply_headers: Headers | None = None
        self._reset_event = asyncio.Event()
        self._reply_event = asyncio.Event()
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

    async def wait_reply(self) -> Headers:
        """For a stream we opened: the headers of the peer's SYN_REPLY, once it came.

        Raises ``SpdyError`` if the stream was reset (or the session closed) first."""
        await self._reply_event.wait()
        if self.reply_headers is None:
            raise SpdyError(f"stream {self.id} was reset before the peer replied")
        return self.reply_headers

    def _mark_replied(self, headers: Headers) -> None:
        if self.reply_headers is None and not self.reset:
            self.reply_headers = headers
            self._reply_event.set()

    def _mark_reset(self) -> None:
        if self.reset:
            return
        self.reset = True
        self._reset_event.set()
        self._reply_event.set()
        self._local_closed = True
        self._incoming.put_nowait(None)


class SpdySession:
    """One end of a SPDY/3.1 connection, the server's unless ``client``.

    ``send`` writes raw bytes to the peer (calls are serialized here); ``on_stream`` is called
    for each stream the peer opens, after the SYN_REPLY went out (None: such streams are
    refused with RST_STREAM, as a client that expects no pushed streams does).  ``feed`` takes
    bytes as they arrive and raises ``SpdyError`` when the peer breaks the protocol.
    ``open_stream`` opens a stream of our own: odd ids for a client, even for a server.
    """

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[None]],
        on_stream: Callable[[SpdyStream], None] | None = None,
        *,
        client: bool = False,
    ) -> None:
        self._send = send
        self._on_stream = on_stream
        self._lock = asyncio.Lock()
        self._reader = FrameReader()
        self._inflate = HeaderDecompressor()
        self._deflate = HeaderCompressor()
        self._next_id = 1 if client else 2
        self.streams: dict[int, SpdyStream] = {}
        self.closed = False

    async def open_stream(
        self, headers: Iterable[tuple[str, str]], *, fin: bool = False
    ) -> SpdyStream:
        """Send SYN_STREAM with ``headers`` (FIN: we will send no data); the peer's reply
        comes later (``SpdyStream.wait_reply``)."""
        if self.closed:
            raise SpdyError("the session is closed")
        pairs = list(headers)
        async with self._lock:
            # Ids must increase in the order SYN_STREAMs go out, and the peer inflates header
            # blocks in that order too: allocate, compress and send under one lock.
            stream_id, self._next_id = self._next_id, self._next_id + 2
            stream = SpdyStream(self, stream_id, _header_map(pairs))
            self.streams[stream_id] = stream
            payload = struct.pack(">IIH", stream_id, 0, 0) + self._deflate.compress(pairs)
            flags = FLAG_FIN if fin else 0
            await self._send(encode_control(FrameType.SYN_STREAM, payload, flags))
        if fin:
            stream._local_closed = True
        return stream

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
        elif frame.type == FrameType.SYN_REPLY:
            headers = self._inflate.decompress(frame.payload[4:])
            stream = self.streams.get(_stream_id(frame.payload))
            if stream is not None:
                stream._mark_replied(headers)
                if frame.fin:
                    stream._deliver(b"", True)
        elif frame.type == FrameType.HEADERS:
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
        if self._on_stream is None:
            await self._reset(stream_id, RstStatus.REFUSED_STREAM)
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


class UpgradeError(Exception):
    """The server did not switch to SPDY/3.1; ``status`` and ``body`` are its answer."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"upgrade to SPDY/3.1 refused ({status}): {body.strip()}")
        self.status = status
        self.body = body


UPGRADE_PROTOCOL: Final = "SPDY/3.1"
_MAX_RESPONSE_HEAD: Final = 64 * 1024


class SpdyClient:
    """A client SPDY session over an HTTP/1.1 connection upgraded to ``SPDY/3.1``.

    ``connect`` sends ``POST`` with ``Connection: Upgrade`` and ``Upgrade: SPDY/3.1`` plus the
    caller's headers (client-go's SPDY round tripper does the same), expects ``101 Switching
    Protocols`` and from then on feeds every byte read to the session in a task of its own.
    ``response_headers`` are the 101's headers (names lower case).  ``closed`` is set once the
    connection is gone, by either side; every stream then reads EOF.  Only ``http://`` URLs:
    the runtime's streaming server listens on loopback without TLS.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        response_headers: dict[str, list[str]],
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.response_headers = response_headers
        self.session = SpdySession(self._write, client=True)
        self.closed = asyncio.Event()
        self._task = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, url: str, headers: Iterable[tuple[str, str]] = ()) -> SpdyClient:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"cannot upgrade {url!r}: only http:// URLs are supported")
        port = parts.port or 80
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        reader, writer = await asyncio.open_connection(parts.hostname, port)
        try:
            host = parts.netloc.rsplit("@", 1)[-1]
            lines = [
                f"POST {target} HTTP/1.1",
                f"Host: {host}",
                "Content-Length: 0",
                "Connection: Upgrade",
                f"Upgrade: {UPGRADE_PROTOCOL}",
                *(f"{name}: {value}" for name, value in headers),
            ]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            await writer.drain()
            status, response_headers = await _read_response_head(reader)
            if status != 101:
                raise UpgradeError(status, await _read_body(reader, response_headers))
            upgrade = response_headers.get("upgrade", [""])[0]
            if upgrade.lower() != UPGRADE_PROTOCOL.lower():
                raise UpgradeError(status, f"the server upgraded to {upgrade!r}")
        except BaseException:
            writer.close()
            raise
        return cls(reader, writer, response_headers)

    async def open_stream(self, headers: Iterable[tuple[str, str]]) -> SpdyStream:
        return await self.session.open_stream(headers)

    async def _write(self, data: bytes) -> None:
        if self.closed.is_set():
            raise ConnectionResetError("the SPDY connection is closed")
        self._writer.write(data)
        await self._writer.drain()

    async def _read(self) -> None:
        # Bytes the server sent right after the 101 are still in the reader's buffer.
        try:
            while data := await self._reader.read(65536):
                await self.session.feed(data)
        except (SpdyError, OSError) as error:
            log.debug("SPDY connection ended: %r", error)
        finally:
            self._finish()

    def _finish(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            self.session.close()
            self._writer.close()

    async def close(self) -> None:
        """Drop the connection (idempotent): every stream is reset on our side."""
        self._finish()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def _read_response_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, list[str]]]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        raise UpgradeError(0, f"connection closed before a response: {error.partial!r}") from None
    except asyncio.LimitOverrunError:
        raise UpgradeError(0, "response head too large") from None
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    try:
        status = int(status_line[1])
    except (IndexError, ValueError):
        raise UpgradeError(0, f"bad status line {lines[0]!r}") from None
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.setdefault(name.strip().lower(), []).append(value.strip())
    return status, headers


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, list[str]]) -> str:
    """The body of a refusal, for the error message (bounded; best effort)."""
    try:
        length = int(headers.get("content-length", ["-1"])[0])
    except ValueError:
        length = -1
    try:
        if length >= 0:
            body = await reader.readexactly(min(length, _MAX_RESPONSE_HEAD))
        else:
            body = await asyncio.wait_for(reader.read(_MAX_RESPONSE_HEAD), 1)
    except (asyncio.IncompleteReadError, TimeoutError, OSError):
        body = b""
    return body.decode(errors="replace")
