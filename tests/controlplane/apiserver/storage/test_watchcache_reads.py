"""Which lists and gets the API server answers from its watch cache, and which from the store.

Upstream's rule, request by request against an in-process server on SQLite whose store records
every read: ``resourceVersion`` "0" (any freshness) and "N" not older than N come from the
cache (no store read), an unset one (a consistent read), ``Exact``, ``continue`` and paged
lists other than at "0" from the store; "0" ignores ``limit``; a version the cache cannot
reach in time is a 504 "Too large resource version"; a version made by a write to another
resource is reached by one catch-up read of the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controlplane.storage.interface import KeyValue, ListResult
from controlplane.storage.sqlite import SQLiteStore
from tests.controlplane.apiserver.inprocess import serving

NS = "reads"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
ROOT = "/registry/configmaps/"


class RecordingStore(SQLiteStore):
    """SQLite that remembers the keys and prefixes of configmap reads."""

    reads: list[str] = []

    async def get(self, key: str) -> KeyValue:
        self.reads.append(key)
        return await super().get(key)

    async def list(
        self, prefix: str, *, limit: int = 0, start_after: str | None = None, revision: int = 0
    ) -> ListResult:
        self.reads.append(prefix)
        return await super().list(prefix, limit=limit, start_after=start_after, revision=revision)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[aiohttp.ClientSession, RecordingStore]]:
    store = await RecordingStore.open(tmp_path / "store.db")
    assert isinstance(store, RecordingStore)
    store.reads = []
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    try:
        async with serving(store, data_dir) as (_, session):
            namespace = {"metadata": {"name": NS}}
            async with session.post("/api/v1/namespaces", json=namespace) as response:
                assert response.status == 201
            for name, tier in (("a", "web"), ("b", "db"), ("c", "web")):
                body = {"metadata": {"name": name, "labels": {"tier": tier}}}
                async with session.post(CMS, json=body) as response:
                    assert response.status == 201
            yield session, store
    finally:
        await store.close()


async def read(session: aiohttp.ClientSession, path: str) -> tuple[int, dict[str, Any]]:
    async with session.get(path) as response:
        return response.status, await response.json()


async def cache_current(session: aiohttp.ClientSession) -> str:
    """The configmaps' list revision once the cache has it (an RV=N list is served)."""
    status, body = await read(session, CMS)
    assert status == 200
    version: str = body["metadata"]["resourceVersion"]
    status, _ = await read(session, f"{CMS}?resourceVersion={version}")
    assert status == 200
    return version


def configmap_reads(store: RecordingStore) -> list[str]:
    return [key for key in store.reads if key.startswith(ROOT)]


LIST_CASES = [
    # (query, from the cache, names, continue token expected)
    ("", False, ["a", "b", "c"], False),
    ("resourceVersion=0", True, ["a", "b", "c"], False),
    ("resourceVersion=0&limit=1", True, ["a", "b", "c"], False),
    ("resourceVersion=0&labelSelector=tier%3Dweb", True, ["a", "c"], False),
    ("resourceVersion=0&fieldSelector=metadata.name%3Db", True, ["b"], False),
    ("resourceVersion={rv}", True, ["a", "b", "c"], False),
    ("resourceVersion={rv}&resourceVersionMatch=NotOlderThan", True, ["a", "b", "c"], False),
    ("resourceVersion={rv}&resourceVersionMatch=Exact", False, ["a", "b", "c"], False),
    ("resourceVersion={rv}&limit=2", False, ["a", "b"], True),
    ("limit=2", False, ["a", "b"], True),
]


@pytest.mark.parametrize(("query", "cached", "names", "paged"), LIST_CASES)
async def test_list_is_served_by_resource_version(
    server: tuple[aiohttp.ClientSession, RecordingStore],
    query: str,
    cached: bool,
    names: list[str],
    paged: bool,
) -> None:
    session, store = server
    version = await cache_current(session)
    store.reads.clear()
    status, body = await read(session, f"{CMS}?{query.format(rv=version)}")
    assert status == 200, body
    assert [item["metadata"]["name"] for item in body["items"]] == names
    assert bool(body["metadata"].get("continue")) == paged
    assert int(body["metadata"]["resourceVersion"]) >= int(version)
    assert (configmap_reads(store) == []) == cached, store.reads


async def test_continue_goes_to_the_store(
    server: tuple[aiohttp.ClientSession, RecordingStore],
) -> None:
    session, store = server
    await cache_current(session)
    _, first = await read(session, f"{CMS}?limit=2")
    store.reads.clear()
    status, body = await read(session, f"{CMS}?limit=2&continue={first['metadata']['continue']}")
    assert status == 200
    assert [item["metadata"]["name"] for item in body["items"]] == ["c"]
    assert configmap_reads(store) != []


@pytest.mark.parametrize(
    ("query", "cached", "status"),
    [("", False, 200), ("?resourceVersion=0", True, 200), ("?resourceVersion={rv}", True, 200)],
)
async def test_get_is_served_by_resource_version(
    server: tuple[aiohttp.ClientSession, RecordingStore], query: str, cached: bool, status: int
) -> None:
    session, store = server
    version = await cache_current(session)
    store.reads.clear()
    got, body = await read(session, f"{CMS}/b{query.format(rv=version)}")
    assert got == status, body
    assert body["metadata"]["name"] == "b"
    assert (configmap_reads(store) == []) == cached, store.reads


async def test_get_of_a_missing_object_from_the_cache_is_not_found(
    server: tuple[aiohttp.ClientSession, RecordingStore],
) -> None:
    session, store = server
    await cache_current(session)
    store.reads.clear()
    status, body = await read(session, f"{CMS}/nothing?resourceVersion=0")
    assert (status, body["reason"]) == (404, "NotFound")
    assert configmap_reads(store) == []


async def test_a_version_from_another_resource_is_reached_by_catching_up(
    server: tuple[aiohttp.ClientSession, RecordingStore],
) -> None:
    """The configmaps' watch never hears of a Secret: the cache reads the store once."""
    session, store = server
    await cache_current(session)
    async with session.post(
        f"/api/v1/namespaces/{NS}/secrets", json={"metadata": {"name": "s"}}
    ) as response:
        assert response.status == 201
        secret_version = (await response.json())["metadata"]["resourceVersion"]
    store.reads.clear()
    status, body = await read(session, f"{CMS}?resourceVersion={secret_version}")
    assert status == 200, body
    assert int(body["metadata"]["resourceVersion"]) >= int(secret_version)
    assert configmap_reads(store) == [ROOT]  # one catch-up list of every configmap
    store.reads.clear()
    status, _ = await read(session, f"{CMS}?resourceVersion={secret_version}")
    assert status == 200
    assert configmap_reads(store) == []


async def test_a_version_from_the_future_times_out_like_upstream(
    server: tuple[aiohttp.ClientSession, RecordingStore],
) -> None:
    session, _ = server
    version = await cache_current(session)
    wanted = int(version) + 1000
    status, body = await read(session, f"{CMS}?resourceVersion={wanted}")
    assert status == 504
    assert body["reason"] == "Timeout"
    assert body["message"].startswith(f"Timeout: Too large resource version: {wanted}, current: ")
    assert body["details"]["causes"] == [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]
    assert body["details"]["retryAfterSeconds"] == 1


async def test_bad_resource_versions_are_refused(
    server: tuple[aiohttp.ClientSession, RecordingStore],
) -> None:
    session, _ = server
    await cache_current(session)
    for path in (f"{CMS}?resourceVersion=x", f"{CMS}/a?resourceVersion=-1"):
        status, body = await read(session, path)
        assert (status, body["reason"]) == (400, "BadRequest"), path
