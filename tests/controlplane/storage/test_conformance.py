"""What every storage backend promises (controlplane/storage/interface.py), tested once."""

from __future__ import annotations

import asyncio
import json

import pytest

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
    Progress,
    Store,
    guaranteed_update,
)

PODS = "/registry/pods/"


async def _collect(store: Store, prefix: str, after: int, count: int) -> list[Event]:
    events: list[Event] = []
    async with asyncio.timeout(10):
        async for event in store.watch(prefix, after):
            assert isinstance(event, Event), "no progress unless asked for"
            events.append(event)
            if len(events) == count:
                break
    return events


async def test_create_get_and_duplicates(store: Store) -> None:
    kv = await store.create(PODS + "default/a", b"1")
    assert kv.create_revision == kv.mod_revision > 0
    assert await store.get(PODS + "default/a") == kv
    with pytest.raises(KeyExists):
        await store.create(PODS + "default/a", b"2")
    with pytest.raises(KeyNotFound):
        await store.get(PODS + "default/b")
    assert (await store.get(PODS + "default/a")).value == b"1", "a failed create writes nothing"


async def test_revisions_increase_strictly_across_keys(store: Store) -> None:
    revisions = [(await store.create(f"/registry/k/{i}", b"x")).mod_revision for i in range(5)]
    updated = await store.update("/registry/k/0", b"y", revisions[0])
    assert revisions == sorted(set(revisions))
    assert updated.mod_revision > revisions[-1]
    assert updated.create_revision == revisions[0]
    assert await store.current_revision() == updated.mod_revision


async def test_update_is_compare_and_swap(store: Store) -> None:
    first = await store.create(PODS + "ns/a", b"1")
    second = await store.update(PODS + "ns/a", b"2", first.mod_revision)
    with pytest.raises(Conflict):
        await store.update(PODS + "ns/a", b"3", first.mod_revision)
    with pytest.raises(KeyNotFound):
        await store.update(PODS + "ns/missing", b"3", 1)
    assert await store.get(PODS + "ns/a") == second


async def test_delete_with_and_without_precondition(store: Store) -> None:
    a = await store.create(PODS + "ns/a", b"1")
    await store.create(PODS + "ns/b", b"2")
    with pytest.raises(Conflict):
        await store.delete(PODS + "ns/a", a.mod_revision + 100)
    gone = await store.delete(PODS + "ns/a", a.mod_revision)
    assert (gone.value, gone.create_revision) == (b"1", a.create_revision)
    assert gone.mod_revision > a.mod_revision
    await store.delete(PODS + "ns/b")
    with pytest.raises(KeyNotFound):
        await store.delete(PODS + "ns/b")
    again = await store.create(PODS + "ns/a", b"new")
    assert again.create_revision == again.mod_revision, "a re-created key starts afresh"


async def test_list_by_prefix_does_not_bleed(store: Store) -> None:
    for key in ("/registry/pods/a/1", "/registry/pods/b/1", "/registry/podsx/1", "/registry/p"):
        await store.create(key, b"x")
    listed = await store.list("/registry/pods/")
    assert [kv.key for kv in listed.items] == ["/registry/pods/a/1", "/registry/pods/b/1"]
    assert listed.revision == await store.current_revision()
    assert await store.count("/registry/pods/") == 2


async def test_pages_stay_at_one_revision_while_writes_go_on(store: Store) -> None:
    for i in range(7):
        await store.create(f"{PODS}ns/{i}", b"old")
    first = await store.list(PODS, limit=3)
    assert (len(first.items), first.more, first.remaining) == (3, True, 4)
    await store.update(f"{PODS}ns/5", b"new", (await store.get(f"{PODS}ns/5")).mod_revision)
    await store.delete(f"{PODS}ns/6")
    await store.create(f"{PODS}ns/7", b"new")
    second = await store.list(
        PODS, limit=3, start_after=first.items[-1].key, revision=first.revision
    )
    third = await store.list(
        PODS, limit=3, start_after=second.items[-1].key, revision=first.revision
    )
    assert second.revision == third.revision == first.revision
    keys = [kv.key for page in (first, second, third) for kv in page.items]
    assert keys == [f"{PODS}ns/{i}" for i in range(7)]
    assert {kv.value for page in (second, third) for kv in page.items} == {b"old"}
    assert not third.more


async def test_list_at_an_old_revision_sees_the_past(store: Store) -> None:
    a = await store.create(PODS + "a", b"1")
    await store.update(PODS + "a", b"2", a.mod_revision)
    await store.create(PODS + "b", b"1")
    past = await store.list(PODS, revision=a.mod_revision)
    assert [(kv.key, kv.value) for kv in past.items] == [(PODS + "a", b"1")]
    assert past.revision == a.mod_revision


async def test_watch_replays_then_follows(store: Store) -> None:
    start = await store.current_revision()
    a = await store.create(PODS + "a", b"1")
    await store.update(PODS + "a", b"2", a.mod_revision)
    watching = asyncio.create_task(_collect(store, PODS, start, 4))
    await asyncio.sleep(0.05)
    await store.create("/registry/other/x", b"ignored")
    await store.delete(PODS + "a")
    await store.create(PODS + "b", b"1")
    events = await watching
    assert [(e.type, e.kv.key, e.kv.value) for e in events] == [
        (ADDED, PODS + "a", b"1"),
        (MODIFIED, PODS + "a", b"2"),
        (DELETED, PODS + "a", b"2"),
        (ADDED, PODS + "b", b"1"),
    ]
    assert events[1].prev is not None and events[1].prev.value == b"1"
    revisions = [e.revision for e in events]
    assert revisions == sorted(revisions)


async def test_watch_under_concurrent_writes_sees_each_change_once(store: Store) -> None:
    start = await store.current_revision()
    writers = 20

    async def write(i: int) -> int:
        return (await store.create(f"{PODS}w/{i}", b"x")).mod_revision

    watching = asyncio.create_task(_collect(store, PODS, start, writers))
    written = await asyncio.gather(*(write(i) for i in range(writers)))
    events = await watching
    assert [e.revision for e in events] == sorted(written)


async def test_compaction_expires_old_revisions_only(store: Store) -> None:
    a = await store.create(PODS + "a", b"1")
    b = await store.create(PODS + "b", b"1")
    await store.update(PODS + "b", b"2", b.mod_revision)
    c = await store.create(PODS + "c", b"1")
    await store.delete(PODS + "c")
    keep_from = await store.current_revision()
    await store.compact(keep_from)
    with pytest.raises(Expired):
        await store.list(PODS, revision=a.mod_revision)
    with pytest.raises(Expired):
        await _collect(store, PODS, c.mod_revision - 1, 1)
    listed = await store.list(PODS, revision=keep_from)
    assert [(kv.key, kv.value) for kv in listed.items] == [(PODS + "a", b"1"), (PODS + "b", b"2")]
    later = await store.create(PODS + "d", b"1")
    events = await _collect(store, PODS, keep_from, 1)
    assert events[0].kv == later
    assert await store.current_revision() == later.mod_revision


async def test_concurrent_read_modify_write_loses_no_update(store: Store) -> None:
    await store.create("/registry/configmaps/ns/counter", json.dumps({"n": 0}).encode())

    def increment(current: KeyValue) -> bytes:
        return json.dumps({"n": json.loads(current.value)["n"] + 1}).encode()

    clients = 25
    await asyncio.gather(
        *(
            guaranteed_update(store, "/registry/configmaps/ns/counter", increment, attempts=100)
            for _ in range(clients)
        )
    )
    final = await store.get("/registry/configmaps/ns/counter")
    assert json.loads(final.value) == {"n": clients}


async def test_guaranteed_update_can_leave_the_key_alone(store: Store) -> None:
    kv = await store.create("/registry/x/a", b"1")
    assert await guaranteed_update(store, "/registry/x/a", lambda current: None) == kv
    with pytest.raises(KeyNotFound):
        await guaranteed_update(store, "/registry/x/missing", lambda current: b"2")


async def test_update_expecting_revision_zero_does_not_create(store: Store) -> None:
    with pytest.raises(KeyNotFound):
        await store.update(PODS + "missing", b"x", 0)
    with pytest.raises(KeyNotFound):
        await store.get(PODS + "missing")


async def test_empty_prefix_covers_every_key(store: Store) -> None:
    await store.create("/registry/a", b"1")
    await store.create("/registry/b/c", b"1")
    assert [kv.key for kv in (await store.list("")).items] == ["/registry/a", "/registry/b/c"]
    assert await store.count("") == 2


async def test_start_after_never_leaves_the_prefix(store: Store) -> None:
    await store.create("/registry/a", b"1")
    await store.create("/registry/b", b"1")
    listed = await store.list("/registry/b", start_after="/registry/")
    assert [kv.key for kv in listed.items] == ["/registry/b"]


async def test_watch_from_just_before_the_compacted_revision_expires(store: Store) -> None:
    await store.create(PODS + "a", b"1")
    await store.delete(PODS + "a")
    compacted = await store.current_revision()
    await store.compact(compacted)
    with pytest.raises(Expired) as raised:
        await _collect(store, PODS, compacted - 1, 1)
    assert raised.value.requested == compacted - 1
    assert raised.value.compacted == compacted
    later = await store.create(PODS + "b", b"1")
    assert [e.kv for e in await _collect(store, PODS, compacted, 1)] == [later]


async def test_a_quiet_watch_asked_for_progress_moves_with_the_store(store: Store) -> None:
    """Writes elsewhere reach a watch on a prefix nobody writes as a ``Progress``, and no
    ``Progress`` comes before a change at or below its revision (etcd's come at the
    interval its lab flags set: 5 s)."""
    start = await store.current_revision()
    seen: list[Event | Progress] = []

    async def watch_until(top: asyncio.Future[int]) -> None:
        async for item in store.watch(PODS, start, progress_after=0.05):
            seen.append(item)
            if isinstance(item, Progress) and top.done() and item.revision >= top.result():
                return

    top: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    async with asyncio.timeout(20):
        watching = asyncio.create_task(watch_until(top))
        pods = []
        for i in range(12):
            await store.create(f"/registry/other/{i}", b"x")
            if i % 4 == 0:
                pods.append((await store.create(f"{PODS}{i}", b"x")).mod_revision)
            await asyncio.sleep(0.02)
        top.set_result((await store.create("/registry/other/last", b"x")).mod_revision)
        await watching
    events = [item.revision for item in seen if isinstance(item, Event)]
    assert events == pods
    progress = [(i, item.revision) for i, item in enumerate(seen) if isinstance(item, Progress)]
    assert [revision for _, revision in progress] == sorted(r for _, r in progress)
    for position, revision in progress:
        before = {item.revision for item in seen[:position] if isinstance(item, Event)}
        assert {r for r in pods if r <= revision} <= before, (position, revision, seen)
