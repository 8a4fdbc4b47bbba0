"""An informer on a resource nobody writes, as client-go runs one: it lists with
``resourceVersion=0`` (from the watch cache), watches from the list's version with bookmarks,
and resumes from the newest bookmark.  Writes to other resources move the store on and
compaction forgets their history; neither version may be one the compaction has taken, or the
informer is sent back with 410 Gone to list everything again.

An in-process server on SQLite whose compactor and bookmarks run every fraction of a second,
so what takes minutes in a cluster takes a second here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controlplane.apiserver.storage.watchcache import PROGRESS_INTERVAL
from controlplane.storage.sqlite import SQLiteStore
from tests.controlplane.apiserver.inprocess import serving

NS = "quiet"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
SECRETS = f"/api/v1/namespaces/{NS}/secrets"


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    store = await SQLiteStore.open(tmp_path / "store.db")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    fast = {"compaction_interval": 0.2, "bookmark_interval": 0.3}
    try:
        async with serving(store, data_dir, **fast) as (_, admin):
            await post(admin, "/api/v1/namespaces", NS)
            await post(admin, CMS, "only")
            yield admin
    finally:
        await store.close()


async def post(session: aiohttp.ClientSession, path: str, name: str) -> int:
    """Create ``name`` under ``path``; its resourceVersion."""
    async with session.post(path, json={"metadata": {"name": name}}) as response:
        assert response.status == 201, await response.text()
        return int((await response.json())["metadata"]["resourceVersion"])


async def informer_list(session: aiohttp.ClientSession) -> int:
    """A reflector's first list: from the watch cache, whatever its freshness."""
    async with session.get(f"{CMS}?limit=500&resourceVersion=0") as response:
        assert response.status == 200
        body = await response.json()
    assert [item["metadata"]["name"] for item in body["items"]] == ["only"]
    return int(body["metadata"]["resourceVersion"])


async def watch(session: aiohttp.ClientSession, version: int, seconds: int) -> list[Any]:
    """The events of a reflector's watch from ``version`` until the server ends it."""
    path = (
        f"{CMS}?allowWatchBookmarks=true&resourceVersion={version}"
        f"&timeoutSeconds={seconds}&watch=true"
    )
    async with session.get(path) as response:
        assert response.status == 200, await response.text()
        return [json.loads(line) async for line in response.content if line.strip()]


async def move_the_store_on_and_compact(session: aiohttp.ClientSession, since: int) -> int:
    """Write secrets (the configmaps' watch hears nothing of them) until compaction has taken
    the revision ``since``; the last secret's revision."""
    for attempt in range(100):
        top = await post(session, SECRETS, f"s{attempt}")
        events = await watch(session, since, 1)
        if events and events[0]["type"] == "ERROR":
            assert events[0]["object"]["code"] == 410
            return top
        await asyncio.sleep(0.1)
    raise AssertionError(f"revision {since} was never compacted")


async def test_a_list_at_zero_answers_with_a_version_a_watch_can_start_from(
    session: aiohttp.ClientSession,
) -> None:
    stale = await informer_list(session)
    top = await move_the_store_on_and_compact(session, stale)
    version = stale
    async with asyncio.timeout(PROGRESS_INTERVAL + 5):
        while version < top:  # until the cache's watch brings the store's progress
            await asyncio.sleep(0.2)
            version = await informer_list(session)
    watching = asyncio.create_task(watch(session, version, 2))
    await asyncio.sleep(0.5)
    created = await post(session, CMS, "later")
    events = await watching
    assert [e["type"] for e in events if e["type"] != "BOOKMARK"] == ["ADDED"]
    added = next(e for e in events if e["type"] == "ADDED")["object"]["metadata"]
    assert (added["name"], int(added["resourceVersion"])) == ("later", created)


async def test_a_quiet_watchs_bookmarks_carry_the_stores_progress(
    session: aiohttp.ClientSession,
) -> None:
    start = await informer_list(session)
    watching = asyncio.create_task(watch(session, start, 2))
    await asyncio.sleep(0.2)
    written = [await post(session, SECRETS, f"s{i}") for i in range(3)]
    events = await watching
    assert events and {e["type"] for e in events} == {"BOOKMARK"}
    bookmarks = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert bookmarks == sorted(bookmarks)
    assert bookmarks[-1] >= written[-1], "the last bookmark is at the store's revision"
