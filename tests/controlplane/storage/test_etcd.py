"""etcd specifics: endpoints and failover, unreachable clusters, restarts, compaction numbers."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aetcd
import grpc
import pytest

from controlplane.storage.etcd import EtcdStore
from controlplane.storage.interface import (
    ADDED,
    DELETED,
    MODIFIED,
    Event,
    Expired,
    KeyNotFound,
    Progress,
    Unavailable,
)
from tests.controlplane.storage.etcd_server import (
    EtcdServer,
)
from tests.servers import free_ports

pytestmark = pytest.mark.etcd

T = TypeVar("T")
_unique = itertools.count()


def _prefix(name: str) -> str:
    """Keys of their own for tests sharing the session's etcd."""
    return f"/registry/etcd-tests/{name}-{next(_unique)}/"


def _dead_endpoint() -> str:
    return f"127.0.0.1:{free_ports(1)[0]}"


async def _take(
    events: AsyncIterator[Event | Progress], count: int, seconds: float = 10
) -> list[Event]:
    taken: list[Event] = []
    async with asyncio.timeout(seconds):
        async for event in events:
            assert isinstance(event, Event)
            taken.append(event)
            if len(taken) == count:
                break
    return taken


async def _eventually(
    attempt: Callable[[], Awaitable[T]],
    seconds: float = 20,
    exceptions: tuple[type[Exception], ...] = (Unavailable,),
) -> T:
    """``attempt()`` once it stops raising ``exceptions`` (etcd coming back, say)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await attempt()
        except exceptions:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


class TcpProxy:
    """A loopback port forwarded to ``upstream``; ``stop`` drops it and every connection."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._muted = False
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def mute(self) -> None:
        """Keep forwarding to the upstream but drop everything it sends back."""
        self._muted = True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
            self._writers.add(up_writer)
            await asyncio.gather(
                self._pipe(reader, up_writer), self._pipe(up_reader, writer, replies=True)
            )
        except OSError:
            pass
        finally:
            writer.close()
            self._tasks.discard(task)

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, replies: bool = False
    ) -> None:
        try:
            while data := await reader.read(65536):
                if replies and self._muted:
                    continue
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in tuple(self._writers):
            writer.transport.abort()
        self._writers.clear()
        for task in tuple(self._tasks):
            with contextlib.suppress(BaseException):
                await task


async def test_open_skips_an_unreachable_endpoint(etcd_endpoint: str) -> None:
    prefix = _prefix("skip")
    store = await EtcdStore.open([_dead_endpoint(), etcd_endpoint])
    try:
        assert store.endpoint == etcd_endpoint
        kv = await store.create(prefix + "a", b"1")
    finally:
        await store.close()
    direct = await EtcdStore.open([etcd_endpoint])
    try:
        assert await direct.get(prefix + "a") == kv
    finally:
        await direct.close()


async def test_unavailable_when_no_endpoint_answers_within_a_bound() -> None:
    # A listener that never accepts: the TCP handshake completes and gRPC then hears nothing,
    # the case a deadline has to end (a refused port fails at once).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoints = [_dead_endpoint(), f"127.0.0.1:{silent.getsockname()[1]}", _dead_endpoint()]
        started = time.monotonic()
        with pytest.raises(Unavailable) as failure:
            await EtcdStore.open(endpoints, connect_timeout=0.5)
        elapsed = time.monotonic() - started
    assert elapsed < 0.5 * len(endpoints) + 2
    for endpoint in endpoints:
        assert endpoint in str(failure.value)


async def test_reads_and_watches_fail_over_when_the_endpoint_goes_away(
    etcd_endpoint: str,
) -> None:
    prefix = _prefix("failover")
    proxy = TcpProxy(etcd_endpoint)
    await proxy.start()
    store = await EtcdStore.open([proxy.endpoint, etcd_endpoint])
    try:
        assert store.endpoint == proxy.endpoint
        a = await store.create(prefix + "a", b"1")
        events = store.watch(prefix, a.mod_revision - 1)
        first = await _take(events, 1)
        assert [(e.type, e.kv) for e in first] == [(ADDED, a)]

        await proxy.stop()  # the endpoint in use goes away, with the watch's stream on it
        assert await store.get(prefix + "a") == a, "a read is retried on the next endpoint"
        assert store.endpoint == etcd_endpoint
        b = await store.create(prefix + "b", b"1")
        a2 = await store.update(prefix + "a", b"2", a.mod_revision)

        rest = await _take(events, 2)  # the watch resumed after the last event it gave
        assert [(e.type, e.kv) for e in rest] == [(ADDED, b), (MODIFIED, a2)]
        assert rest[1].prev == a
        await events.aclose()
    finally:
        await store.close()
        await proxy.stop()


async def test_a_write_that_was_never_sent_goes_to_the_next_endpoint(etcd_endpoint: str) -> None:
    prefix = _prefix("unsent")
    proxy = TcpProxy(etcd_endpoint)
    await proxy.start()
    store = await EtcdStore.open([proxy.endpoint, etcd_endpoint])
    try:
        await proxy.stop()
        # Until gRPC has seen the connection go, a write still goes out on it (and then is not
        # retried, the next test): wait for the channel to leave READY.
        channel = store._clients[0].channel
        async with asyncio.timeout(5):
            while channel.get_state() == grpc.ChannelConnectivity.READY:
                await channel.wait_for_state_change(grpc.ChannelConnectivity.READY)
        assert (await store.create(prefix + "a", b"1")).value == b"1"
        assert store.endpoint == etcd_endpoint
    finally:
        await store.close()


async def test_a_write_cut_off_after_it_was_sent_is_not_retried(etcd_endpoint: str) -> None:
    """etcd applied it but the answer was lost: retried, the create would report KeyExists."""
    prefix = _prefix("cut-off")
    proxy = TcpProxy(etcd_endpoint)
    await proxy.start()
    store = await EtcdStore.open([proxy.endpoint, etcd_endpoint])
    direct = await EtcdStore.open([etcd_endpoint])
    try:
        proxy.mute()  # requests still reach etcd, answers no longer come back
        creating = asyncio.create_task(store.create(prefix + "a", b"1"))
        await _eventually(lambda: direct.get(prefix + "a"), exceptions=(KeyNotFound,))
        await proxy.stop()
        with pytest.raises(Unavailable):
            await creating
        assert store.endpoint == etcd_endpoint
        assert (await store.get(prefix + "a")).value == b"1", "it was written all the same"
    finally:
        await direct.close()
        await store.close()
        await proxy.stop()


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "kill-9"])
async def test_restart_keeps_data_and_revisions(tmp_path: Path, crash: bool) -> None:
    server = EtcdServer(tmp_path / "etcd")
    server.start()
    try:
        store = await EtcdStore.open([server.endpoint], request_timeout=2, connect_timeout=2)
        try:
            a = await store.create("/registry/a", b"1")
            b = await store.create("/registry/b", b"1")
            b2 = await store.update("/registry/b", b"2", b.mod_revision)
            gone = await store.delete("/registry/a")
            top = await store.current_revision()
            assert top == gone.mod_revision
            watching = asyncio.create_task(_take(store.watch("/registry/", top), 1))
            await asyncio.sleep(0.2)

            server.kill() if crash else server.stop()
            with pytest.raises(Unavailable):
                await watching  # the only endpoint is gone: the watch says so
            with pytest.raises(Unavailable):
                await store.get("/registry/b")

            server.start()
            assert await _eventually(lambda: store.get("/registry/b")) == b2
            assert await store.current_revision() == top
            c = await store.create("/registry/c", b"1")
            assert c.mod_revision == top + 1
            history = await _take(store.watch("/registry/", a.mod_revision - 1), 5)
            assert [(e.type, e.kv.key, e.revision) for e in history] == [
                (ADDED, "/registry/a", a.mod_revision),
                (ADDED, "/registry/b", b.mod_revision),
                (MODIFIED, "/registry/b", b2.mod_revision),
                (DELETED, "/registry/a", gone.mod_revision),
                (ADDED, "/registry/c", c.mod_revision),
            ]
            assert history[3].kv == gone
        finally:
            await store.close()
    finally:
        server.stop()


async def test_expired_carries_the_compacted_revision(etcd_endpoint: str) -> None:
    prefix = _prefix("compact")
    store = await EtcdStore.open([etcd_endpoint])
    try:
        a = await store.create(prefix + "a", b"1")
        await store.update(prefix + "a", b"2", a.mod_revision)
        top = await store.current_revision()
        await store.compact(top)
        await store.compact(top)  # again: nothing left to do, no error
        with pytest.raises(Expired) as listed:
            await store.list(prefix, revision=a.mod_revision)
        assert (listed.value.requested, listed.value.compacted) == (a.mod_revision, top)
        with pytest.raises(Expired) as watched:
            await _take(store.watch(prefix, top - 1), 1)
        assert (watched.value.requested, watched.value.compacted) == (top - 1, top)
        later = await store.create(prefix + "b", b"1")
        assert [e.kv for e in await _take(store.watch(prefix, top), 1)] == [later]
        await store.compact(later.mod_revision + 1000)  # beyond the store: up to its revision
        with pytest.raises(Expired):
            await store.list(prefix, revision=top)
    finally:
        await store.close()


async def test_list_ahead_of_the_store_reads_the_current_revision(etcd_endpoint: str) -> None:
    prefix = _prefix("ahead")
    store = await EtcdStore.open([etcd_endpoint])
    try:
        kv = await store.create(prefix + "a", b"1")
        listed = await store.list(prefix, revision=kv.mod_revision + 1000)
        assert (listed.items, listed.revision) == ([kv], await store.current_revision())
    finally:
        await store.close()


async def test_one_revision_with_many_events_is_delivered_whole(etcd_endpoint: str) -> None:
    """A range delete is one revision with an event per key: none of them may be dropped."""
    prefix = _prefix("range-delete")
    store = await EtcdStore.open([etcd_endpoint])
    try:
        created = [await store.create(f"{prefix}{i}", f"v{i}".encode()) for i in range(3)]
        events = store.watch(prefix, created[-1].mod_revision)
        host, port = etcd_endpoint.rsplit(":", 1)
        async with aetcd.Client(host, int(port)) as client:
            await client.delete_prefix(prefix.encode())
        deleted = await _take(events, 3)
        await events.aclose()
        assert [(e.type, e.kv.key, e.kv.value) for e in deleted] == [
            (DELETED, kv.key, kv.value) for kv in created
        ]
        assert len({e.revision for e in deleted}) == 1
    finally:
        await store.close()


async def test_close_ends_watches(etcd_endpoint: str) -> None:
    store = await EtcdStore.open([etcd_endpoint])
    watching = asyncio.create_task(_take(store.watch("/", await store.current_revision()), 1))
    await asyncio.sleep(0.2)
    await store.close()
    async with asyncio.timeout(5):
        assert await watching == []
