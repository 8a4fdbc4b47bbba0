"""The ``store`` fixture: every conformance test runs against each backend.

The etcd backend runs against one real etcd per session (``etcd_endpoint``); each test starts
from an empty keyspace (every key deleted before it).  Revisions are global to that etcd, so
a test sees revisions left by earlier tests: the conformance tests only rely on revisions
relative to ones they read themselves, and a compaction by one test only removes history that
no later test reads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aetcd
import pytest

from controlplane.storage.etcd import EtcdStore
from controlplane.storage.interface import Store
from controlplane.storage.sqlite import SQLiteStore
from tests.controlplane.storage.etcd_server import EtcdServer


@pytest.fixture(scope="session")
def etcd_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real etcd for the session, on loopback with free ports; stopped at the end."""
    server = EtcdServer(tmp_path_factory.mktemp("etcd"))
    server.start()
    try:
        yield server.endpoint
    finally:
        server.stop()


async def wipe_etcd(endpoint: str) -> None:
    """Delete every key: the range from the lowest key, b"\\0", to the end (range_end b"\\0")."""
    host, port = endpoint.rsplit(":", 1)
    client = aetcd.Client(host, int(port))
    try:
        await client.delete_range(b"\x00", b"\x00")
    finally:
        await client.close()


async def open_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    if backend == "sqlite":
        return await SQLiteStore.open(tmp_path / "state.db")
    if backend == "etcd":
        endpoint: str = request.getfixturevalue("etcd_endpoint")
        await wipe_etcd(endpoint)
        return await EtcdStore.open([endpoint])
    raise AssertionError(f"unknown backend {backend}")


@pytest.fixture(params=["sqlite", pytest.param("etcd", marks=pytest.mark.etcd)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(request.param, tmp_path, request)
    try:
        yield opened
    finally:
        await opened.close()
