"""Reflector, indexer, shared informer and factory.

Unit tests drive a ``FakeListerWatcher``: a tiny server state (objects and a revision counter)
that lists, and watch streams the test feeds event by event, with scripted failures.  Time is
a ``FakeClock``, so backoffs and resyncs happen when the test advances it.  The integration
tests at the end run the informers against a real API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from controlplane.scheduler.framework.interface import Lister
from kube.api.keys import object_key
from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.kinds.core_v1.pod import Binding, Container, Pod
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.labels import parse_selector
from kube.api.meta_v1 import ObjectMeta, OwnerReference, Resource, Status
from kube.client.errors import ApiError, ClientError
from kube.client.informers import (
    LABELS_INDEX,
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    OWNER_UID_INDEX,
    DeletedFinalStateUnknown,
    Indexer,
    IndexFunc,
    SharedInformer,
    SharedInformerFactory,
    index_by_labels,
    wait_for_cache_sync,
)
from kube.client.reflector import (
    ADDED,
    BOOKMARK,
    DELETED,
    MODIFIED,
    Backoff,
    Reflector,
)
from kube.client.rest import Client, ListResult, WatchEvent
from kube.clock import FakeClock
from tests import builders


def gone() -> ApiError:
    return ApiError(Status(code=410, reason="Expired", message="too old"))


def config_map(name: str, namespace: str = "ns", **data: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace=namespace), data=data or None)


def pod(
    name: str, namespace: str = "ns", node: str | None = None, owners: Sequence[str] = ()
) -> Pod:
    refs = [
        OwnerReference(api_version="apps/v1", kind="ReplicaSet", name=uid, uid=uid)
        for uid in owners
    ]
    built = builders.pod(
        name, namespace, node_name=node, containers=[Container(name="c", image="busybox")]
    )
    built.metadata.owner_references = refs or None
    return built


def rv(obj: Resource) -> str:
    return obj.metadata.resource_version or ""


_CLOSE = object()


class FakeListerWatcher:
    """Lists the current ``objects``; each watch is a stream the test feeds with ``send``.

    ``list_errors`` / ``watch_errors`` are raised by the next list / the next watch as it
    opens.  ``page_limit`` makes lists with a ``limit`` come in pages of at most that many.
    """

    def __init__(self) -> None:
        self.objects: dict[str, Resource] = {}
        self.revision = 0
        self.list_errors: deque[Exception] = deque()
        self.watch_errors: deque[Exception] = deque()
        self.page_limit: int | None = None
        self.expire_continue = False
        self.lists: list[dict[str, Any]] = []
        self.watches: list[dict[str, Any]] = []
        self.streams: list[asyncio.Queue[object]] = []
        self.open_streams = 0

    # The server side.

    def put(self, obj: Resource) -> Resource:
        """Store ``obj`` at a new revision (no event: ``send`` one if the watch should see it)."""
        self.revision += 1
        obj.metadata.resource_version = str(self.revision)
        self.objects[object_key(obj)] = obj
        return obj

    def remove(self, key: str) -> Resource:
        self.revision += 1
        obj = copy.deepcopy(self.objects.pop(key))
        obj.metadata.resource_version = str(self.revision)
        return obj

    def send(self, type_: str, obj: Resource) -> None:
        self.streams[-1].put_nowait(WatchEvent(type_, obj))

    def bookmark(self, version: str) -> None:
        self.send(BOOKMARK, ConfigMap(metadata=ObjectMeta(resource_version=version)))

    def fail(self, error: Exception) -> None:
        """The current stream raises ``error``."""
        self.streams[-1].put_nowait(error)

    def close(self) -> None:
        """The current stream ends normally (the server's timeout)."""
        self.streams[-1].put_nowait(_CLOSE)

    # The ListerWatcher side.

    async def list(
        self,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListResult[Resource]:
        self.lists.append({"limit": limit, "continue": continue_token, "rv": resource_version})
        if self.list_errors:
            raise self.list_errors.popleft()
        if continue_token and self.expire_continue:
            raise gone()
        items = [self.objects[key] for key in sorted(self.objects)]
        start = int(continue_token or 0)
        if limit and self.page_limit:
            end = start + min(limit, self.page_limit)
            token = str(end) if end < len(items) else None
            return ListResult(items[start:end], str(self.revision), token)
        return ListResult(items, str(self.revision))

    async def watch(
        self,
        *,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent[Resource]]:
        self.watches.append(
            {"rv": resource_version, "timeout": timeout_seconds, "bookmarks": allow_bookmarks}
        )
        if self.watch_errors:
            raise self.watch_errors.popleft()
        queue: asyncio.Queue[object] = asyncio.Queue()
        self.streams.append(queue)
        self.open_streams += 1
        try:
            while True:
                item = await queue.get()
                if item is _CLOSE:
                    return
                if isinstance(item, Exception):
                    raise item
                assert isinstance(item, WatchEvent)
                yield item
        finally:
            self.open_streams -= 1


@dataclass
class Recorder:
    """Handlers that write down what they were told."""

    events: list[tuple[str, ...]] = field(default_factory=list)
    updates: list[tuple[Resource, Resource]] = field(default_factory=list)
    tombstones: list[DeletedFinalStateUnknown[Resource]] = field(default_factory=list)

    def on_add(self, obj: Resource) -> None:
        self.events.append(("add", object_key(obj), rv(obj)))

    def on_update(self, old: Resource, new: Resource) -> None:
        self.updates.append((old, new))
        self.events.append(("update", object_key(new), rv(old), rv(new)))

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self.tombstones.append(obj)
            self.events.append(("tombstone", obj.key, rv(obj.obj)))
        else:
            self.events.append(("delete", object_key(obj), rv(obj)))

    def register(self, informer: SharedInformer[Any]) -> Recorder:
        informer.add_event_handler(self.on_add, self.on_update, self.on_delete)
        return self


async def until(predicate: Callable[[], object], what: str = "condition") -> None:
    """Let the loop run until ``predicate`` holds (the fake clock never moves by itself)."""
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


def no_jitter(clock: FakeClock) -> Backoff:
    return Backoff(clock, rng=lambda: 0.0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def lw() -> FakeListerWatcher:
    return FakeListerWatcher()


@pytest.fixture
async def informer(
    lw: FakeListerWatcher, clock: FakeClock
) -> AsyncIterator[SharedInformer[Resource]]:
    inf: SharedInformer[Resource] = SharedInformer(
        lw, clock=clock, backoff=no_jitter(clock), name="test"
    )
    yield inf
    await inf.stop()
    assert lw.open_streams == 0, "a watch was left open"


async def start_synced(informer: SharedInformer[Resource], lw: FakeListerWatcher) -> None:
    informer.start()
    await until(lambda: informer.has_synced and lw.streams, "first list and watch")


# The reflector, through the informer.


async def test_list_then_watch_delivers_events_and_fills_cache(
    informer: SharedInformer[Resource], lw: FakeListerWatcher
) -> None:
    lw.put(config_map("a"))
    lw.put(config_map("b"))
    rec = Recorder().register(informer)
    assert not informer.has_synced

    await start_synced(informer, lw)
    assert rec.events == [("add", "ns/a", "1"), ("add", "ns/b", "2")]
    assert lw.lists == [{"limit": 500, "continue": None, "rv": "0"}]
    assert lw.watches[0]["rv"] == "2" and lw.watches[0]["bookmarks"] is True
    assert 300 <= lw.watches[0]["timeout"] <= 600

    lw.send(ADDED, lw.put(config_map("c")))
    lw.send(MODIFIED, lw.put(config_map("a", x="1")))
    lw.send(DELETED, lw.remove("ns/b"))
    await until(lambda: len(rec.events) == 5)
    assert rec.events[2:] == [
        ("add", "ns/c", "3"),
        ("update", "ns/a", "1", "4"),
        ("delete", "ns/b", "5"),
    ]
    assert sorted(informer.lister.keys()) == ["ns/a", "ns/c"]
    cached = informer.lister.get("ns/a")
    assert isinstance(cached, ConfigMap) and cached.data == {"x": "1"}
    assert informer.last_sync_resource_version == "5"


async def test_a_change_handler_hears_the_object_of_every_add_update_and_delete(
    informer: SharedInformer[Resource], lw: FakeListerWatcher
) -> None:
    lw.put(config_map("a"))
    heard: list[tuple[str, str | None]] = []

    def changed(obj: Resource | DeletedFinalStateUnknown[Resource]) -> None:
        assert not isinstance(obj, DeletedFinalStateUnknown)
        heard.append((object_key(obj), obj.metadata.resource_version))

    informer.add_change_handler(changed)
    await start_synced(informer, lw)
    lw.send(MODIFIED, lw.put(config_map("a", x="1")))
    lw.send(DELETED, lw.remove("ns/a"))
    await until(lambda: len(heard) == 3)
    assert heard == [("ns/a", "1"), ("ns/a", "2"), ("ns/a", "3")]
    assert informer.lister.get("ns/a") is None


async def test_relist_on_gone_replaces_cache_and_tombstones_missed_deletes(
    informer: SharedInformer[Resource], lw: FakeListerWatcher, clock: FakeClock
) -> None:
    lw.put(config_map("a"))
    lw.put(config_map("b"))
    lw.put(config_map("c"))
    rec = Recorder().register(informer)
    await start_synced(informer, lw)
    last_b = informer.lister.get("ns/b")

    # While nobody watches: b and c go, a changes, d arrives.  Then the watch expires.
    lw.remove("ns/b")
    lw.remove("ns/c")
    lw.put(config_map("a", x="1"))
    lw.put(config_map("d"))
    lw.fail(gone())
    await until(lambda: clock.sleepers == 1, "backoff before re-list")
    await clock.advance(0.8)
    await until(lambda: len(lw.lists) == 2 and len(lw.streams) == 2, "re-list and watch")

    assert rec.events[3:] == [
        ("update", "ns/a", "1", "6"),
        ("add", "ns/d", "7"),
        ("tombstone", "ns/b", "2"),
        ("tombstone", "ns/c", "3"),
    ]
    assert last_b is not None
    assert rec.tombstones[0] == DeletedFinalStateUnknown("ns/b", last_b)
    assert sorted(informer.lister.keys()) == ["ns/a", "ns/d"]
    assert lw.watches[-1]["rv"] == "7"


async def test_broken_stream_rewatches_from_last_version(
    informer: SharedInformer[Resource], lw: FakeListerWatcher, clock: FakeClock
) -> None:
    lw.put(config_map("a"))
    await start_synced(informer, lw)
    lw.send(MODIFIED, lw.put(config_map("a", x="1")))
    lw.fail(ClientError("connection reset"))
    await until(lambda: clock.sleepers == 1, "backoff")
    await clock.advance(0.8)
    await until(lambda: len(lw.streams) == 2, "re-watch")
    assert [w["rv"] for w in lw.watches] == ["1", "2"]
    assert len(lw.lists) == 1, "a broken watch must not re-list"


async def test_rewatch_answered_with_gone_relists(
    informer: SharedInformer[Resource], lw: FakeListerWatcher, clock: FakeClock
) -> None:
    lw.put(config_map("a"))
    await start_synced(informer, lw)
    lw.watch_errors.append(gone())
    lw.fail(ClientError("connection reset"))
    await until(lambda: clock.sleepers == 1, "backoff before re-watch")
    await clock.advance(0.8)
    await until(lambda: len(lw.watches) == 2 and clock.sleepers == 1, "backoff before list")
    assert len(lw.lists) == 1
    await clock.advance(1.6)
    await until(lambda: len(lw.lists) == 2 and len(lw.streams) == 2, "re-list and watch")


async def test_bookmark_only_advances_resource_version(
    informer: SharedInformer[Resource], lw: FakeListerWatcher, clock: FakeClock
) -> None:
    lw.put(config_map("a"))
    rec = Recorder().register(informer)
    await start_synced(informer, lw)
    lw.bookmark("42")
    await until(lambda: informer.last_sync_resource_version == "42", "bookmark")
    assert rec.events == [("add", "ns/a", "1")]
    assert informer.lister.keys() == ["ns/a"]

    lw.fail(ClientError("reset"))
    await until(lambda: clock.sleepers == 1)
    await clock.advance(0.8)
    await until(lambda: len(lw.streams) == 2)
    assert lw.watches[-1]["rv"] == "42"


async def test_watch_ending_normally_rewatches_at_once(
    informer: SharedInformer[Resource], lw: FakeListerWatcher, clock: FakeClock
) -> None:
    await start_synced(informer, lw)
    lw.send(ADDED, lw.put(config_map("a")))
    lw.close()
    await until(lambda: len(lw.streams) == 2, "immediate re-watch")
    assert clock.sleepers == 0
    assert lw.watches[-1]["rv"] == "1"


async def test_watch_ending_at_once_without_events_backs_off(
    informer: SharedInformer[Resource], lw: FakeListerWatcher, clock: FakeClock
) -> None:
    await start_synced(informer, lw)
    lw.close()
    await until(lambda: clock.sleepers == 1, "backoff after a very short watch")
    assert len(lw.watches) == 1
    await clock.advance(0.8)
    await until(lambda: len(lw.streams) == 2)


async def test_failures_back_off_exponentially_on_the_clock(
    informer: SharedInformer[Resource], lw: FakeListerWatcher, clock: FakeClock
) -> None:
    lw.list_errors.extend([ClientError("refused")] * 3)
    lw.watch_errors.extend([ClientError("refused")] * 2)
    informer.start()
    delays = [0.8, 1.6, 3.2, 6.4, 12.8]
    deadline = 0.0
    for attempt, delay in enumerate(delays, start=1):
        await until(lambda: clock.sleepers == 1, f"backoff {attempt}")
        calls = len(lw.lists) + len(lw.watches)
        deadline += delay
        await clock.advance(deadline - 0.01 - clock.monotonic())
        await asyncio.sleep(0)
        assert len(lw.lists) + len(lw.watches) == calls, f"retried before {delay} s"
        await clock.advance(0.02)  # a hair past the deadline, whatever the float rounding
        await until(lambda: len(lw.lists) + len(lw.watches) > calls, f"retry {attempt}")  # noqa: B023
    await until(lambda: bool(lw.streams), "a watch finally open")
    assert len(lw.lists) == 4 and len(lw.watches) == 3
    assert informer.has_synced


@pytest.mark.parametrize(
    ("rng", "steps", "expected"),
    [
        pytest.param(0.0, 8, [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0], id="capped-at-30s"),
        pytest.param(0.5, 3, [1.2, 2.4, 4.8], id="jitter-stretches-by-half"),
        pytest.param(0.999, 1, [0.8 * 1.999], id="jitter-below-double"),
    ],
)
def test_backoff_sequence(rng: float, steps: int, expected: list[float]) -> None:
    backoff = Backoff(FakeClock(), rng=lambda: rng)
    assert [backoff.next_delay() for _ in range(steps)] == pytest.approx(expected)


async def test_backoff_resets_after_a_healthy_period(clock: FakeClock) -> None:
    backoff = no_jitter(clock)
    assert [backoff.next_delay() for _ in range(3)] == [0.8, 1.6, 3.2]
    await clock.advance(60)
    assert backoff.next_delay() == 6.4
    await clock.advance(121)
    assert backoff.next_delay() == 0.8


async def test_pages_are_followed_and_an_expired_token_falls_back_to_one_list(
    clock: FakeClock, lw: FakeListerWatcher
) -> None:
    for name in "abcde":
        lw.put(config_map(name))
    lw.page_limit = 2
    store: Indexer[Resource] = Indexer()
    reflector = Reflector(lw, store, clock=clock)
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: bool(lw.streams))
        assert len(store) == 5
        assert [call["continue"] for call in lw.lists] == [None, "2", "4"]

        lw.expire_continue = True
        lw.put(config_map("f"))
        lw.fail(gone())
        await until(lambda: clock.sleepers == 1)
        await clock.advance(2)
        await until(lambda: len(lw.streams) == 2)
        # The server paged: the re-list at the last version seen pages too.
        assert lw.lists[3:] == [
            {"limit": 500, "continue": None, "rv": "5"},
            {"limit": 500, "continue": "2", "rv": None},
            {"limit": None, "continue": None, "rv": "5"},
        ]
        assert len(store) == 6
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_reflector_runs_once_at_a_time(clock: FakeClock, lw: FakeListerWatcher) -> None:
    reflector = Reflector(lw, Indexer[Resource](), clock=clock)
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: bool(lw.streams))
        with pytest.raises(RuntimeError, match="already running"):
            await reflector.run()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# Handlers, resync, start/stop.


async def test_resync_redelivers_every_object_as_an_update(
    lw: FakeListerWatcher, clock: FakeClock
) -> None:
    lw.put(config_map("a"))
    lw.put(config_map("b"))
    informer: SharedInformer[Resource] = SharedInformer(lw, clock=clock, resync_period=30)
    rec = Recorder().register(informer)
    try:
        await start_synced(informer, lw)
        await clock.advance(29)
        assert rec.updates == []
        await clock.advance(1)
        await until(lambda: len(rec.updates) == 2, "resync")
        assert all(old is new for old, new in rec.updates)
        assert rec.events[2:] == [("update", "ns/a", "1", "1"), ("update", "ns/b", "2", "2")]
        await clock.advance(30)
        await until(lambda: len(rec.updates) == 4, "second resync")
    finally:
        await informer.stop()


async def test_handler_added_late_gets_adds_for_cached_objects(
    informer: SharedInformer[Resource], lw: FakeListerWatcher
) -> None:
    lw.put(config_map("a"))
    lw.put(config_map("b"))
    early = Recorder().register(informer)
    await start_synced(informer, lw)

    late = Recorder().register(informer)
    assert late.events == [("add", "ns/a", "1"), ("add", "ns/b", "2")]
    lw.send(ADDED, lw.put(config_map("c")))
    await until(lambda: len(late.events) == 3)
    assert early.events == late.events


async def test_failing_handler_does_not_stop_the_others(
    informer: SharedInformer[Resource], lw: FakeListerWatcher, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(obj: Resource) -> None:
        raise RuntimeError("handler bug")

    informer.add_event_handler(on_add=broken)
    rec = Recorder().register(informer)
    await start_synced(informer, lw)
    lw.send(ADDED, lw.put(config_map("a")))
    await until(lambda: len(rec.events) == 1)
    assert "handler bug" in caplog.text


async def test_removed_handler_hears_nothing_more(
    informer: SharedInformer[Resource], lw: FakeListerWatcher
) -> None:
    rec = Recorder()
    registration = informer.add_event_handler(rec.on_add)
    await start_synced(informer, lw)
    informer.remove_event_handler(registration)
    lw.send(ADDED, lw.put(config_map("a")))
    await until(lambda: len(informer.lister) == 1)
    assert rec.events == []


async def test_stop_closes_the_watch_and_leaves_no_task(
    informer: SharedInformer[Resource], lw: FakeListerWatcher
) -> None:
    before = asyncio.all_tasks()
    await start_synced(informer, lw)
    running = informer.started
    assert running and lw.open_streams == 1
    assert informer.start() is informer.start(), "start is idempotent while running"
    with pytest.raises(RuntimeError, match="already running"):
        await informer.run()
    await informer.stop()
    assert not informer.started
    assert lw.open_streams == 0
    assert asyncio.all_tasks() == before


async def test_run_cancelled_from_outside_is_clean(
    informer: SharedInformer[Resource], lw: FakeListerWatcher, clock: FakeClock
) -> None:
    informer.resync_period = 10
    task = asyncio.create_task(informer.run())
    await until(lambda: informer.has_synced and lw.streams)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert lw.open_streams == 0


async def test_wait_for_cache_sync(
    informer: SharedInformer[Resource], lw: FakeListerWatcher, clock: FakeClock
) -> None:
    lw.list_errors.append(ClientError("refused"))
    informer.start()
    waiting = asyncio.create_task(wait_for_cache_sync(informer, timeout=0.5, clock=clock))
    await until(lambda: clock.sleepers == 2, "list backoff and sync timeout")
    await clock.advance(0.5)
    assert await waiting is False

    waiting = asyncio.create_task(wait_for_cache_sync(informer))
    await clock.advance(0.3)
    assert await waiting is True
    assert await wait_for_cache_sync(informer, timeout=1, clock=clock) is True


async def test_wait_for_cache_sync_is_false_when_the_informer_stops(
    informer: SharedInformer[Resource], lw: FakeListerWatcher
) -> None:
    lw.list_errors.append(ClientError("refused"))
    informer.start()
    waiting = asyncio.create_task(wait_for_cache_sync(informer))
    await asyncio.sleep(0)
    await informer.stop()
    assert await waiting is False


# The indexer.


def by_label_app(obj: Resource) -> list[str]:
    return [obj.metadata.labels["app"]] if obj.metadata.labels else []


@pytest.mark.parametrize(
    ("index", "value", "expected"),
    [
        pytest.param(NAMESPACE_INDEX, "ns", ["ns/p1", "ns/p2", "ns/p3"], id="namespace"),
        pytest.param(NAMESPACE_INDEX, "other", ["other/p4"], id="namespace-other"),
        pytest.param(NODE_NAME_INDEX, "node-a", ["ns/p1", "other/p4"], id="node-name"),
        pytest.param(NODE_NAME_INDEX, "", [], id="node-name-unscheduled-not-indexed"),
        pytest.param(OWNER_UID_INDEX, "rs-1", ["ns/p1", "ns/p2"], id="owner-uid"),
        pytest.param(OWNER_UID_INDEX, "rs-2", ["ns/p2"], id="owner-uid-second-owner"),
        pytest.param("app", "web", ["ns/p1", "ns/p3"], id="custom"),
        pytest.param("app", "db", [], id="custom-no-match"),
    ],
)
def test_indexes(index: str, value: str, expected: list[str]) -> None:
    indexer: Indexer[Pod] = Indexer({"app": by_label_app})
    p1 = pod("p1", node="node-a", owners=["rs-1"])
    p1.metadata.labels = {"app": "web"}
    p3 = pod("p3")
    p3.metadata.labels = {"app": "web"}
    indexer.replace([p1, pod("p2", node="node-b", owners=["rs-1", "rs-2"]), p3])
    indexer.add(pod("p4", "other", node="node-a"))
    assert indexer.index_keys(index, value) == expected
    assert [object_key(p) for p in indexer.by_index(index, value)] == expected


def test_index_follows_updates_and_deletes() -> None:
    indexer: Indexer[Pod] = Indexer()
    indexer.add(pod("p1"))
    assert indexer.index_values(NODE_NAME_INDEX) == []
    indexer.update(pod("p1", node="node-a"))
    assert indexer.index_keys(NODE_NAME_INDEX, "node-a") == ["ns/p1"]
    indexer.update(pod("p1", node="node-b"))
    assert indexer.index_values(NODE_NAME_INDEX) == ["node-b"]
    indexer.delete(pod("p1"))
    assert indexer.index_values(NODE_NAME_INDEX) == []
    assert indexer.index_values(NAMESPACE_INDEX) == []
    assert indexer.get("ns/p1") is None


def test_indexer_lists_by_namespace_and_satisfies_the_scheduler_lister() -> None:
    indexer: Indexer[Pod] = Indexer()
    indexer.replace([pod("a"), pod("b", "other"), pod("c")])
    lister: Lister[Pod] = indexer
    assert [p.metadata.name for p in lister.list("ns")] == ["a", "c"]
    assert len(lister.list()) == 3
    got = lister.get("other/b")
    assert got is not None and got.metadata.name == "b"
    assert lister.get("nowhere/b") is None
    assert "ns/a" in indexer and len(indexer) == 3


def test_indexers_added_later_index_existing_objects() -> None:
    indexer: Indexer[Pod] = Indexer()
    web = pod("a")
    web.metadata.labels = {"app": "web"}
    indexer.add(web)
    indexer.add_indexers({"app": by_label_app})
    assert indexer.index_keys("app", "web") == ["ns/a"]
    indexer.add_indexers({"app": by_label_app})  # the same function again: fine

    def other(obj: Pod) -> list[str]:
        return []

    with pytest.raises(ValueError, match="already exists"):
        indexer.add_indexers({"app": other})
    with pytest.raises(KeyError, match="no index named"):
        indexer.by_index("missing", "x")


@pytest.mark.parametrize(
    "text",
    [
        "app=web",
        "app==web,tier=front",
        "app in (web,db)",
        "app in (web),tier!=back",
        "tier",
        "!tier",
        "app notin (db)",
        "",
        "app=nowhere",
    ],
)
@pytest.mark.parametrize("namespace", ["ns", "other", None])
def test_select_through_the_labels_index_finds_what_a_scan_finds(
    text: str, namespace: str | None
) -> None:
    labelled = [
        ("a", "ns", {"app": "web", "tier": "front"}),
        ("b", "ns", {"app": "web", "tier": "back"}),
        ("c", "ns", {"app": "db"}),
        ("d", "ns", {}),
        ("e", "other", {"app": "web"}),
    ]
    pods = [pod(name, where) for name, where, _ in labelled]
    for p, (_, _, labels) in zip(pods, labelled, strict=True):
        p.metadata.labels = labels
    indexed: Indexer[Pod] = Indexer({LABELS_INDEX: index_by_labels})
    indexed.replace(pods)
    selector = parse_selector(text)
    plain: Indexer[Pod] = Indexer()
    plain.replace(pods)
    expected = [object_key(p) for p in plain.list(namespace) if selector.matches(p.metadata.labels)]
    assert [object_key(p) for p in indexed.select(namespace, selector)] == expected
    assert [object_key(p) for p in plain.select(namespace, selector)] == expected


def test_the_labels_index_follows_relabelling() -> None:
    indexer: Indexer[Pod] = Indexer({LABELS_INDEX: index_by_labels})
    web = pod("a")
    web.metadata.labels = {"app": "web"}
    indexer.add(web)
    relabelled = pod("a")
    relabelled.metadata.labels = {"app": "db"}
    indexer.update(relabelled)
    assert indexer.select("ns", parse_selector("app=web")) == []
    assert indexer.select("ns", parse_selector("app=db")) == [relabelled]
    indexer.delete(relabelled)
    assert indexer.select("ns", parse_selector("app=db")) == []
    assert indexer.index_values(LABELS_INDEX) == []


# The factory (it needs a Client, so these use the real API server's).


async def test_factory_hands_out_one_informer_per_kind_and_selectors(client: Client) -> None:
    factory = SharedInformerFactory(client, namespace="default")
    pods = factory.informer_for(Pod)
    assert factory.informer_for(Pod) is pods
    assert factory.informer_for(Pod, field_selector="") is pods
    on_node = factory.informer_for(Pod, field_selector="spec.nodeName=x")
    assert on_node is not pods
    assert factory.informer_for(Pod, field_selector="spec.nodeName=x") is on_node
    assert factory.informer_for(Pod, label_selector="app=web") is not pods
    assert factory.informer_for(ConfigMap) is not pods  # type: ignore[comparison-overlap]

    app: IndexFunc[Pod] = by_label_app
    assert factory.informer_for(Pod, indexers={"app": app}) is pods
    assert "app" in pods.lister.indexers
    assert factory.lister_for(Pod) is pods.lister
    assert len(factory.informers) == 4
    await factory.shutdown()


async def test_factory_starts_syncs_and_shuts_down(client: Client, namespace: str) -> None:
    before = asyncio.all_tasks()
    factory = SharedInformerFactory(client, namespace=namespace)
    config_maps = factory.informer_for(ConfigMap)
    factory.start()
    assert await factory.wait_for_cache_sync(timeout=10)
    assert config_maps.has_synced
    pods = factory.informer_for(Pod)
    was_started = pods.started
    factory.start()
    now_started = pods.started
    assert not was_started and now_started
    assert await factory.wait_for_cache_sync(timeout=10)
    await factory.shutdown()
    assert not config_maps.started and not pods.started
    assert asyncio.all_tasks() == before
    with pytest.raises(RuntimeError, match="shut down"):
        factory.start()


# Against a real API server.


async def eventually(predicate: Callable[[], object], what: str, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def started(factory: SharedInformerFactory) -> AsyncIterator[SharedInformerFactory]:
    factory.start()
    try:
        assert await factory.wait_for_cache_sync(timeout=10)
        yield factory
    finally:
        await factory.shutdown()


async def test_informer_sees_config_maps_created_updated_deleted(
    client: Client, namespace: str
) -> None:
    existing = await client.create(config_map("before", namespace))
    factory = SharedInformerFactory(client, namespace=namespace)
    informer = factory.informer_for(ConfigMap)
    rec = Recorder().register(informer)
    async with started(factory):
        assert rec.events == [("add", f"{namespace}/before", rv(existing))]

        created = await client.create(config_map("cm", namespace, k="v1"))
        await eventually(lambda: informer.lister.get(f"{namespace}/cm") is not None, "add")
        created.data = {"k": "v2"}
        updated = await client.update(created)
        await eventually(lambda: len(rec.events) == 3, "update")
        await client.delete(ConfigMap, "cm", namespace)
        await eventually(lambda: len(rec.events) == 4, "delete")

        key = f"{namespace}/cm"
        assert rec.events[1:3] == [
            ("add", key, rv(created)),
            ("update", key, rv(created), rv(updated)),
        ]
        assert rec.events[3][:2] == ("delete", key)
        assert informer.lister.keys() == [f"{namespace}/before"]
        assert informer.lister.list(namespace)[0].metadata.name == "before"


async def test_field_selector_informer_sees_only_matching_pods(
    client: Client, namespace: str
) -> None:
    factory = SharedInformerFactory(client, namespace=namespace)
    on_x = factory.informer_for(Pod, field_selector="spec.nodeName=x")
    unassigned = factory.informer_for(Pod, field_selector="spec.nodeName=")
    on_x_events = Recorder().register(on_x)
    unassigned_events = Recorder().register(unassigned)
    async with started(factory):
        await client.create(pod("on-x", namespace, node="x"))
        await client.create(pod("on-y", namespace, node="y"))
        await client.create(pod("pending", namespace))
        await eventually(lambda: len(on_x.lister) == 1, "the pod on x")
        await eventually(lambda: len(unassigned.lister) == 1, "the pending pod")
        assert on_x.lister.keys() == [f"{namespace}/on-x"]
        assert unassigned.lister.keys() == [f"{namespace}/pending"]

        # Binding moves the pending pod into one selection and out of the other.
        binding = Binding(
            metadata=ObjectMeta(name="pending", namespace=namespace),
            target=ObjectReference(kind="Node", name="x"),
        )
        await client.create_subresource(Pod, "pending", namespace, "binding", binding)
        await eventually(lambda: len(on_x.lister) == 2, "the bound pod joins x")
        await eventually(lambda: len(unassigned.lister) == 0, "the bound pod leaves")
        assert unassigned_events.events[-1][:2] == ("delete", f"{namespace}/pending")
        assert on_x_events.events[-1][:2] == ("add", f"{namespace}/pending")
        assert on_x.lister.index_keys(NODE_NAME_INDEX, "x") == [
            f"{namespace}/on-x",
            f"{namespace}/pending",
        ]

        await client.delete(Pod, "on-x", namespace, grace_period_seconds=0)
        await eventually(lambda: len(on_x.lister) == 1, "the deleted pod leaves")
        assert on_x_events.events[-1][:2] == ("delete", f"{namespace}/on-x")
        assert all(event[1] != f"{namespace}/on-y" for event in on_x_events.events)
