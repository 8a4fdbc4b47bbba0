"""The etcd v3 store: the ``Store`` contracts mapped onto etcd's KV, Watch and Compact RPCs.

etcd already is the store ``interface.py`` describes: one revision counter for the whole
keyspace, every key carrying ``create_revision`` and ``mod_revision``, multi-version reads,
watches that replay history, compaction.  So each operation is one etcd request, and every
check-then-write is one transaction evaluated atomically by the leader, never a read followed
by a write from here (another client could write in between):

- ``create``: ``Txn(if create_revision(key) == 0 then Put)``.  A key that does not exist has
  create_revision 0, so the compare is "not live"; the txn's header revision is the new
  revision, which is both the mod and the create revision.  A failed compare is ``KeyExists``.
- ``update``: ``Txn(if create_revision(key) > 0 and mod_revision(key) == expected then
  Put(prev_kv) else Range(key))``.  The first compare stops an update with expected 0 from
  creating a missing key (etcd compares a missing key as all zeros).  On failure the ``Range``
  in the else branch runs in the same transaction, at the same revision as the compares, so
  "no value" means ``KeyNotFound`` and "a value" means ``Conflict`` without a race between
  deciding and reporting.  The create revision comes from ``prev_kv``.
- ``delete``: the same shape with ``DeleteRange(prev_kv)``, the revision compare only when an
  expected revision is given.  The deleted value is ``prev_kv``; its revision is the txn's
  header revision, the revision of the delete itself, as the contract wants.
- ``get``: ``Range(key)``; ``count``: ``Range(count_only)``; ``current_revision``: the header
  revision of a ``count_only`` range of one key (a linearizable read, so it is at least every
  revision acknowledged before it).
- ``list``: ``Range([max(prefix, start_after + "\\0"), prefix_end(prefix)), limit, revision)``,
  linearizable (``serializable=False``).  Range returns the keys in key order, ``more``, and
  ``count`` (every key in the range, not just the page), so ``remaining`` is ``count`` minus
  the page.  A list without a revision reports the header revision and the next pages pass it
  back, so all pages come from one snapshot.  etcd's "required revision has been compacted" is
  ``Expired``; the error carries no number, so the compacted revision is asked of a watch from
  the requested revision (etcd answers it with ``compact_revision``).  A revision beyond the
  store's is read at the current revision, as the SQLite backend does.
- ``watch``: one gRPC Watch stream per call, ``prev_kv`` on, over ``[prefix, prefix_end)``.
  It starts *at* ``from_revision`` (etcd's start is inclusive) and drops events at or below
  it: etcd then reports compaction exactly when ``from_revision`` is below the compacted
  revision, as the SQLite backend does (starting at ``from_revision + 1`` would accept
  ``compacted - 1``, whose following revision may have been a tombstone compaction removed).
  A put is ADDED when create_revision == mod_revision, else MODIFIED; etcd's delete event
  carries only the key and the delete revision, so DELETED takes the value and create
  revision of ``prev_kv``.  etcd sends each revision's events in one response, so a resume
  after losing the stream (from the last revision delivered, on the next endpoint) repeats and
  loses nothing.  ``compact_revision`` in a response is ``Expired``.  A watch asked for
  progress sets ``progress_notify``: etcd then sends, on the watch's own channel and so after
  every event below it, a response with no events at its current revision when the watch has
  been quiet for its ``--experimental-watch-progress-notify-interval`` (10 min unless set; the
  lab sets 5 s).  The on-demand ``progress_request`` is not used: in the etcd 3.4 here
  (3.4.23) it answers on the stream's control channel, which can overtake events still on
  their way (etcd issue 15220).
- ``compact``: ``Compact(min(revision, current), physical=True)``, so it returns once the old
  revisions are gone; compacting at or below the compacted revision is a no-op, as in SQLite.

Endpoints: ``open`` probes them in order and uses the first that answers.  The first endpoint is
the preferred one (the API server lists its local member first).  While the store has more than
one endpoint a health check runs every ``HEALTH_INTERVAL`` seconds, as etcd's client
health-checks its endpoints: it probes the endpoint in use and, when that is not the preferred
one, the preferred one too.  A preferred endpoint that answers again is used again at once (the
local member whenever it is up; requests already sent elsewhere finish there).  An endpoint in
use that does not answer within ``HEALTH_TIMEOUT`` is left for the first of the others that
answers a probe, and the requests and watch streams waiting on it are abandoned: a member that
stops answering without closing its connections (partitioned, frozen) is noticed within a couple
of seconds, not after ``REQUEST_TIMEOUT``.  If no other endpoint answers either (no quorum
anywhere), nothing moves and requests keep their own deadline: abandoning them would gain
nothing.  An abandoned request is handled like one that failed after it was sent (below).  A read
that fails with UNAVAILABLE or a deadline moves to the next endpoint and is retried there (once
per endpoint).  A write is retried elsewhere only if gRPC never had a connection to send it on
("failed to connect to all addresses"); one that failed after it was sent also moves on but is
not retried, because etcd may have applied it before the connection broke (a retried create
would then report ``KeyExists`` for its own write; etcd's client draws the same line): it raises
``Unavailable`` and the caller, who knows the expected revision, decides.  Every other gRPC error
is ``Unavailable`` too ("answered with an error").

A watch is one gRPC stream of its own: closing the store cancels the streams and the watches
end, as SQLite's do; a lost stream is resumed as above, once per endpoint, then ``Unavailable``.

TLS: with ``EtcdTLS`` (the API server's ``--etcd-cafile/--etcd-certfile/--etcd-keyfile``) every
channel is a TLS channel that verifies the member against the CA and presents the client
certificate, as etcd's ``--client-cert-auth`` wants; the endpoint's host must be a name or
address in the member's certificate.

aetcd supplies the generated messages (``aetcd.rpc``); the channel per endpoint is made here
(aetcd's ``Client`` only makes insecure ones).  Its convenience methods do not reach far enough:
``transaction`` returns no response header (the revision a write got), its range requests
cannot carry ``limit``, ``revision`` or ``count_only``, and its watcher multiplexes all watches
on one stream whose creation waits without bound and hides the stream's own responses.  So
requests are built from ``aetcd.rpc`` and sent on the client's stubs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from aetcd import rpc

from controlplane.storage.interface import (
    ADDED,
    DELETED,
    MODIFIED,
    Conflict,
    Event,
    Expired,
    KeyExists,
    KeyNotFound,
    KeyValue,
    ListResult,
    Progress,
    StorageError,
    Unavailable,
    prefix_end,
)

REQUEST_TIMEOUT = 10.0
"""Seconds one request may take before it counts as the endpoint being unreachable."""

CONNECT_TIMEOUT = 3.0
"""Seconds ``open`` waits for each endpoint to answer its first request."""

HEALTH_INTERVAL = 1.0
"""Seconds between health checks of the endpoint in use and of the preferred endpoint."""

HEALTH_TIMEOUT = 1.0
"""Seconds a health probe may take before its endpoint counts as down."""

_CHANNEL_OPTIONS: dict[str, int] = {
    # A list is one Range response: lift gRPC's 4 MiB default, as etcd's own client does.
    "grpc.max_receive_message_length": 2**31 - 1,
    # Reconnect soon after etcd restarts instead of after up to 2 minutes of backoff.  (Not
    # grpc.min_reconnect_backoff_ms: gRPC also takes it as the connect timeout, 20 s otherwise.)
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
    # Notice a dead peer under a quiet watch (etcd permits pings every 5 s by default).
    "grpc.keepalive_time_ms": 30_000,
    "grpc.keepalive_timeout_ms": 10_000,
    # etcd endpoints are dialled directly, never through http_proxy (etcd's client does too).
    "grpc.enable_http_proxy": 0,
}

_CONNECTION_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"
_PROBE_KEY = b"\x00"
"""A key nothing stores (keys are paths): cheap requests whose answer is only the header."""


def _parse_endpoint(endpoint: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or ``http://host:port`` → (host, port)."""
    address = endpoint.split("://", 1)[-1].rstrip("/")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"etcd endpoint {endpoint!r} is not host:port")
    return host, int(port)


def _bounds(prefix: str, start_after: str | None = None) -> tuple[bytes, bytes]:
    """etcd's [key, range_end) for the keys under ``prefix`` after ``start_after``."""
    low = prefix if start_after is None else max(prefix, start_after + "\x00")
    # etcd has no empty key: b"\0" is the lowest; a range_end of b"\0" means "to the end".
    return low.encode() or b"\x00", prefix_end(prefix).encode()


def _kv(raw: Any) -> KeyValue:
    return KeyValue(
        bytes(raw.key).decode(),
        bytes(raw.value),
        int(raw.mod_revision),
        int(raw.create_revision),
    )


def _event(raw: Any) -> Event:
    prev = _kv(raw.prev_kv) if raw.HasField("prev_kv") else None
    if raw.type == rpc.Event.DELETE:
        # The delete event holds the key and the delete's revision; the value is prev_kv's.
        key, revision = bytes(raw.kv.key).decode(), int(raw.kv.mod_revision)
        if prev is None:  # etcd lost the previous value to compaction: nothing to show
            return Event(DELETED, KeyValue(key, b"", revision, 0))
        return Event(DELETED, KeyValue(key, prev.value, revision, prev.create_revision), prev)
    kv = _kv(raw.kv)
    return Event(ADDED if kv.create_revision == kv.mod_revision else MODIFIED, kv, prev)


def _is_connection_error(error: grpc.aio.AioRpcError) -> bool:
    return error.code() in _CONNECTION_CODES


def _never_sent(error: grpc.aio.AioRpcError) -> bool:
    """gRPC had no connection to send the request on: sending it elsewhere cannot repeat it."""
    return (
        error.code() == grpc.StatusCode.UNAVAILABLE
        and "failed to connect to all addresses" in _details(error)
    )


def _rejected(error: grpc.aio.AioRpcError, key: str) -> Unavailable:
    return Unavailable(key, f"etcd: {error.code().name}: {_details(error)} ({key})")


def _details(error: grpc.aio.AioRpcError) -> str:
    return error.details() or ""


# Request builders over aetcd's generated messages.


def _created(key: bytes, result: Any, revision: int) -> Any:
    return rpc.Compare(key=key, target=rpc.Compare.CREATE, result=result, create_revision=revision)


def _modified_at(key: bytes, revision: int) -> Any:
    return rpc.Compare(
        key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=revision
    )


def _range_op(key: bytes) -> Any:
    return rpc.RequestOp(request_range=rpc.RangeRequest(key=key))


def _watch_create(
    low: bytes, high: bytes, start_revision: int, progress_notify: bool = False
) -> Any:
    return rpc.WatchRequest(
        create_request=rpc.WatchCreateRequest(
            key=low,
            range_end=high,
            start_revision=start_revision,
            prev_kv=True,
            progress_notify=progress_notify,
        )
    )


@dataclass(frozen=True, slots=True)
class EtcdTLS:
    """PEM files for TLS to etcd: the CA that signed the members' certificates and, for
    members that require client certificates, this client's certificate and key."""

    ca_file: Path
    cert_file: Path | None = None
    key_file: Path | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("an etcd client certificate needs both a certificate and a key")
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca_file.read_bytes(),
            private_key=self.key_file.read_bytes() if self.key_file else None,
            certificate_chain=self.cert_file.read_bytes() if self.cert_file else None,
        )


@dataclass(frozen=True, slots=True)
class _Connection:
    """One endpoint's gRPC channel and the KV stub on it (gRPC dials lazily)."""

    channel: grpc.aio.Channel
    kvstub: Any

    @classmethod
    def open(cls, target: str, credentials: grpc.ChannelCredentials | None) -> _Connection:
        options = list(_CHANNEL_OPTIONS.items())
        channel = (
            grpc.aio.insecure_channel(target, options)
            if credentials is None
            else grpc.aio.secure_channel(target, credentials, options)
        )
        return cls(channel, rpc.KVStub(channel))

    async def close(self) -> None:
        await self.channel.close(None)


def _task_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class _Abandoned(Exception):
    """The request's call was cancelled under it: its endpoint failed its health check, or
    the store was closed."""


class EtcdStore:
    """``Store`` over an etcd v3 cluster (see the module docstring)."""

    def __init__(
        self,
        endpoints: list[str],
        *,
        request_timeout: float = REQUEST_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        tls: EtcdTLS | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("EtcdStore needs at least one endpoint")
        self._endpoints = list(endpoints)
        self._addresses = [_parse_endpoint(endpoint) for endpoint in endpoints]
        self._timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._credentials = tls.credentials() if tls is not None else None
        self._clients: dict[int, _Connection] = {}  # endpoint index → its channel, made on use
        self._current = 0
        self._calls: dict[Any, int] = {}  # gRPC call in flight → its endpoint index
        self._health: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    async def open(
        cls,
        endpoints: list[str],
        *,
        request_timeout: float = REQUEST_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        tls: EtcdTLS | None = None,
    ) -> EtcdStore:
        """Connect to the first of ``endpoints`` that answers; ``Unavailable`` if none does."""
        store = cls(
            endpoints, request_timeout=request_timeout, connect_timeout=connect_timeout, tls=tls
        )
        try:
            await store._connect_first()
        except BaseException:
            await store.close()
            raise
        if len(endpoints) > 1:
            store._health = asyncio.create_task(store._check_health(), name="etcd-health")
        return store

    def _is_closed(self) -> bool:
        return self._closed

    @property
    def endpoint(self) -> str:
        """The endpoint requests go to now."""
        return self._endpoints[self._current]

    # Connections.

    async def _client(self, index: int) -> _Connection:
        if self._closed:
            raise Unavailable("", "the etcd store is closed")
        client = self._clients.get(index)
        if client is None:
            host, port = self._addresses[index]
            client = _Connection.open(f"{host}:{port}", self._credentials)
            self._clients[index] = client
        return client

    async def _forget(self, index: int) -> None:
        client = self._clients.pop(index, None)
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    def _fail_over(self, index: int) -> None:
        """Move on from endpoint ``index`` (unless a concurrent failure already did)."""
        if self._current == index:
            self._current = (index + 1) % len(self._endpoints)

    async def _probe(self, index: int, within: float) -> str | None:
        """Why endpoint ``index`` did not answer a linearizable read within ``within`` seconds (so
        it can serve this store: it is up and in the quorum), or None if it did."""
        client = await self._client(index)
        try:
            await client.kvstub.Range(
                rpc.RangeRequest(key=_PROBE_KEY, count_only=True), timeout=within
            )
        except grpc.aio.AioRpcError as error:
            return f"{self._endpoints[index]}: {error.code().name} {_details(error)}"
        return None

    async def _connect_first(self) -> None:
        failures = []
        for index in range(len(self._endpoints)):
            failure = await self._probe(index, self._connect_timeout)
            if failure is not None:
                failures.append(failure)
                await self._forget(index)
                continue
            self._current = index
            return
        raise Unavailable("", "no etcd endpoint answered: " + "; ".join(failures))

    async def _check_health(self) -> None:
        """Every ``HEALTH_INTERVAL``: back to the preferred endpoint once it answers, away
        from the endpoint in use once it does not (see the module docstring)."""
        while not self._closed:
            await asyncio.sleep(HEALTH_INTERVAL)
            current = self._current
            probed = [0] if current == 0 else [0, current]
            answers = await asyncio.gather(*(self._probe(i, HEALTH_TIMEOUT) for i in probed))
            if answers[0] is None:
                self._current = 0
            elif answers[-1] is not None and self._current == current:
                await self._leave(current)

    async def _leave(self, index: int) -> None:
        """Move from endpoint ``index``, which failed its health check, to the first other
        endpoint that answers, and abandon the calls waiting on it; stay if none answers."""
        others = [i for i in range(len(self._endpoints)) if i != index]
        answers = await asyncio.gather(*(self._probe(i, HEALTH_TIMEOUT) for i in others))
        healthy = [i for i, failure in zip(others, answers, strict=True) if failure is None]
        if not healthy or self._current != index:
            return
        self._current = healthy[0]
        for call, endpoint in tuple(self._calls.items()):
            if endpoint == index:
                call.cancel()

    async def _send(self, index: int, client: _Connection, method: str, request: Any) -> Any:
        call = getattr(client.kvstub, method)(request, timeout=self._timeout)
        self._calls[call] = index
        try:
            return await call
        except asyncio.CancelledError:
            if _task_cancelled():
                raise
            raise _Abandoned from None  # by _leave or close, not by the caller
        finally:
            self._calls.pop(call, None)

    async def _unary(self, method: str, request: Any, key: str, *, retry: bool) -> Any:
        """Send one KV request; fail over on connection errors, retrying it on the next
        endpoint if ``retry`` (it is a read) or if it was never sent.

        Raises ``Unavailable`` for connection errors and re-raises any other gRPC error.
        """
        failures = []
        for _ in self._endpoints:
            index = self._current
            client = await self._client(index)
            try:
                return await self._send(index, client, method, request)
            except _Abandoned:
                failures.append(f"{self._endpoints[index]}: abandoned (health check or close)")
                if not retry:
                    break
            except grpc.aio.AioRpcError as error:
                if not _is_connection_error(error):
                    raise
                failures.append(f"{self._endpoints[index]}: {error.code().name} {_details(error)}")
                self._fail_over(index)
                if not (retry or _never_sent(error)):
                    break
        raise Unavailable(key, f"etcd unreachable ({key}): " + "; ".join(failures))

    async def _call(self, method: str, request: Any, key: str, *, retry: bool) -> Any:
        try:
            return await self._unary(method, request, key, retry=retry)
        except grpc.aio.AioRpcError as error:
            raise _rejected(error, key) from error

    async def _txn(self, key: str, compare: list[Any], success: Any, failure: Any) -> Any:
        request = rpc.TxnRequest(
            compare=compare,
            success=[success],
            failure=[failure] if failure is not None else [],
        )
        return await self._call("Txn", request, key, retry=False)

    # Writes.

    async def create(self, key: str, value: bytes) -> KeyValue:
        k = key.encode()
        response = await self._txn(
            key,
            [_created(k, rpc.Compare.EQUAL, 0)],
            rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=value)),
            None,
        )
        if not response.succeeded:
            raise KeyExists(key)
        revision = int(response.header.revision)
        return KeyValue(key, value, revision, revision)

    def _refused(self, key: str, response: Any) -> StorageError:
        """What a failed compare meant, from the else branch's Range in the same txn."""
        return Conflict(key) if response.responses[0].response_range.kvs else KeyNotFound(key)

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        k = key.encode()
        response = await self._txn(
            key,
            [_created(k, rpc.Compare.GREATER, 0), _modified_at(k, expected_revision)],
            rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=value, prev_kv=True)),
            _range_op(k),
        )
        if not response.succeeded:
            raise self._refused(key, response)
        prev = response.responses[0].response_put.prev_kv
        return KeyValue(key, value, int(response.header.revision), int(prev.create_revision))

    async def delete(self, key: str, expected_revision: int = 0) -> KeyValue:
        k = key.encode()
        compare = [_created(k, rpc.Compare.GREATER, 0)]
        if expected_revision:
            compare.append(_modified_at(k, expected_revision))
        response = await self._txn(
            key,
            compare,
            rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=k, prev_kv=True)),
            _range_op(k),
        )
        if not response.succeeded:
            raise self._refused(key, response)
        prev = _kv(response.responses[0].response_delete_range.prev_kvs[0])
        return KeyValue(key, prev.value, int(response.header.revision), prev.create_revision)

    # Reads.

    async def get(self, key: str) -> KeyValue:
        response = await self._call("Range", rpc.RangeRequest(key=key.encode()), key, retry=True)
        if not response.kvs:
            raise KeyNotFound(key)
        return _kv(response.kvs[0])

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        start_after: str | None = None,
        revision: int = 0,
    ) -> ListResult:
        low, high = _bounds(prefix, start_after)
        revision = max(revision, 0)
        request = rpc.RangeRequest(
            key=low,
            range_end=high,
            limit=max(limit, 0),
            revision=revision,
            serializable=False,
        )
        try:
            response = await self._unary("Range", request, prefix, retry=True)
        except grpc.aio.AioRpcError as error:
            if _COMPACTED in _details(error):
                raise Expired(revision, await self._compacted_revision(revision)) from None
            if _FUTURE not in _details(error):
                raise _rejected(error, prefix) from error
            # Ahead of the store: read at the current revision, as the SQLite backend does.
            request.revision = 0
            revision = 0
            response = await self._call("Range", request, prefix, retry=True)
        items = [_kv(raw) for raw in response.kvs]
        more = bool(response.more)
        remaining = int(response.count) - len(items) if more else 0
        return ListResult(items, revision or int(response.header.revision), more, remaining)

    async def count(self, prefix: str) -> int:
        low, high = _bounds(prefix)
        request = rpc.RangeRequest(key=low, range_end=high, count_only=True)
        return int((await self._call("Range", request, prefix, retry=True)).count)

    async def current_revision(self) -> int:
        request = rpc.RangeRequest(key=_PROBE_KEY, count_only=True)
        return int((await self._call("Range", request, "", retry=True)).header.revision)

    # Compaction.

    async def compact(self, revision: int) -> None:
        """Forget history before ``revision`` (etcd keeps the newest value of every key)."""
        target = min(revision, await self.current_revision())
        if target <= 0:
            return
        request = rpc.CompactionRequest(revision=target, physical=True)
        try:
            await self._unary("Compact", request, "", retry=True)
        except grpc.aio.AioRpcError as error:
            if _COMPACTED not in _details(error):  # already compacted that far: nothing to do
                raise _rejected(error, "") from error

    async def _compacted_revision(self, requested: int) -> int:
        """etcd's compacted revision, which only a watch from before it reports (0 if unknown)."""
        client = await self._client(self._current)
        call = rpc.WatchStub(client.channel).Watch()
        try:
            async with asyncio.timeout(self._timeout):
                await call.write(_watch_create(_PROBE_KEY, b"", max(requested, 1)))
                while True:
                    response = await call.read()
                    if response is grpc.aio.EOF:  # type: ignore[attr-defined]
                        return 0
                    if response.compact_revision:
                        return int(response.compact_revision)
        except (TimeoutError, grpc.aio.AioRpcError):
            return 0
        finally:
            call.cancel()

    # Watch.

    async def watch(
        self, prefix: str, from_revision: int, *, progress_after: float | None = None
    ) -> AsyncGenerator[Event | Progress, None]:
        """Every change under ``prefix`` after ``from_revision`` (see the module docstring).

        Ends when the store is closed; raises ``Expired`` if ``from_revision`` is compacted and
        ``Unavailable`` once no endpoint will carry the watch.  With ``progress_after`` the
        stream asks for etcd's progress notifications, and each ``progress_after`` seconds
        without an event brings a ``Progress`` at the newest revision etcd has vouched for.
        """
        low, high = _bounds(prefix)
        delivered = from_revision  # every event at or below this has been yielded
        failures: list[str] = []
        progress = progress_after is not None
        loop = asyncio.get_running_loop()
        yielded = loop.time()

        def silence() -> float | None:
            """Seconds until the next ``Progress`` is due (None: never)."""
            return None if progress_after is None else yielded + progress_after - loop.time()

        while not self._closed:
            index = self._current
            client = await self._client(index)
            call = rpc.WatchStub(client.channel).Watch()
            self._calls[call] = index
            reading: asyncio.Task[Any] | None = None
            try:
                async with asyncio.timeout(self._timeout):
                    await call.write(_watch_create(low, high, max(delivered, 1), progress))
                    response = await call.read()
                while response is not grpc.aio.EOF:  # type: ignore[attr-defined]
                    if response.compact_revision:
                        raise Expired(delivered, int(response.compact_revision))
                    if response.canceled:
                        raise Unavailable(prefix, f"etcd ended the watch: {response.cancel_reason}")
                    if response.created:
                        failures.clear()
                    elif not response.events:  # a progress notification
                        delivered = max(delivered, int(response.header.revision))
                    floor = delivered
                    for raw in response.events:
                        event = _event(raw)
                        if event.revision > floor:
                            delivered = event.revision
                            yield event
                            yielded = loop.time()
                    # Cancelling a read cancels its call, so a silence is waited out beside it.
                    reading = asyncio.ensure_future(call.read())
                    while not (await asyncio.wait({reading}, timeout=silence()))[0]:
                        yield Progress(delivered)
                        yielded = loop.time()
                    response, reading = reading.result(), None
                failures.append(f"{self._endpoints[index]}: the watch stream ended")
            except grpc.aio.AioRpcError as error:
                if not _is_connection_error(error):
                    raise _rejected(error, prefix) from error
                failures.append(f"{self._endpoints[index]}: {error.code().name} {_details(error)}")
            except TimeoutError:
                failures.append(f"{self._endpoints[index]}: no answer in {self._timeout}s")
            except asyncio.CancelledError:
                if _task_cancelled():
                    raise
                if self._is_closed():
                    return  # close() cancelled the stream
                failures.append(f"{self._endpoints[index]}: failed its health check")
            finally:
                self._calls.pop(call, None)
                call.cancel()
                if reading is not None:
                    with contextlib.suppress(BaseException):
                        await reading
            if len(failures) >= len(self._endpoints):
                raise Unavailable(prefix, "etcd watch lost: " + "; ".join(failures))
            self._fail_over(index)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._health is not None:
            self._health.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._health
        for call in tuple(self._calls):
            call.cancel()
        self._calls.clear()
        for index in tuple(self._clients):
            await self._forget(index)
