"""The ``kubernetes`` Service's endpoints over several API servers, and their identity leases.

Two in-process API servers share one SQLite store, with different advertise addresses and host
names and leases renewed every 0.2 s that last 1 s: both addresses are in the Endpoints and
the EndpointSlice, sorted; each server holds an identity Lease.  A server that stops
gracefully takes its address out at once; one that stops renewing (as a killed one does)
leaves once its lease expires.  The last server never erases every address.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controlplane.apiserver.server import APIServer, Running, ServerConfig, serve
from controlplane.apiserver.system.apiserverleases import (
    IDENTITY_LABEL,
    IDENTITY_LEASE_DURATION,
    identity_lease_name,
)
from controlplane.storage.sqlite import SQLiteStore
from tests.controlplane.apiserver.inprocess import admin_ssl

INTERVAL, TTL = 0.2, 1.0
ENDPOINTS = "/api/v1/namespaces/default/endpoints/kubernetes"
SLICE = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"


async def start(store: SQLiteStore, data_dir: Path, address: str, hostname: str) -> Running:
    """An API server advertising ``address`` whose leases renew every ``INTERVAL``."""
    config = ServerConfig(
        data_dir=data_dir, secure_port=0, advertise_address=address, hostname=hostname
    )
    server = APIServer(store, config)
    server.leases.interval, server.leases.ttl = INTERVAL, TTL
    return await serve(server)


@contextlib.asynccontextmanager
async def session_to(running: Running, data_dir: Path) -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(ssl=admin_ssl(data_dir))
    async with aiohttp.ClientSession(
        f"https://127.0.0.1:{running.port}", connector=connector
    ) as session:
        yield session


async def get(session: aiohttp.ClientSession, path: str) -> dict[str, Any]:
    async with session.get(path) as response:
        assert response.status == 200, await response.text()
        body: dict[str, Any] = await response.json()
        return body


async def addresses(session: aiohttp.ClientSession) -> tuple[list[str], list[str]]:
    """The addresses of the Endpoints and of the EndpointSlice."""
    endpoints = await get(session, ENDPOINTS)
    subset = endpoints["subsets"][0]
    slice_ = await get(session, SLICE)
    return (
        [a["ip"] for a in subset["addresses"]],
        [e["addresses"][0] for e in slice_["endpoints"]],
    )


async def eventually(check: Callable[[], Any], within: float) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            await check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.05)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """The two servers' data directories."""
    made = (tmp_path / "a", tmp_path / "b")
    for path in made:
        path.mkdir()
    return made


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    sqlite = await SQLiteStore.open(tmp_path / "store.db")
    yield sqlite
    await sqlite.close()


@contextlib.asynccontextmanager
async def two_servers(
    store: SQLiteStore, dirs: tuple[Path, Path], first_address: str, second_address: str
) -> AsyncIterator[tuple[Running, Running, aiohttp.ClientSession]]:
    """Servers ``cp-a`` and ``cp-b``, both addresses in the endpoints, and a session to
    ``cp-a``; each is stopped at the end unless the test stopped it."""
    first = await start(store, dirs[0], first_address, "cp-a")
    second = await start(store, dirs[1], second_address, "cp-b")
    try:
        async with session_to(first, dirs[0]) as session:
            both = sorted([first_address, second_address])
            assert await addresses(session) == (both, both)
            yield first, second, session
    finally:
        for running in (second, first):
            if not running.stopped.is_set():
                await running.stop()


async def test_both_servers_are_endpoints_and_a_stopped_one_leaves(
    store: SQLiteStore, dirs: tuple[Path, Path]
) -> None:
    async with two_servers(store, dirs, "10.0.0.2", "10.0.0.1") as (first, second, session):
        (port,) = (await get(session, ENDPOINTS))["subsets"][0]["ports"]
        # Each writes its own port (a real cluster's servers share one; these cannot).
        assert port["name"] == "https" and port["port"] in (first.port, second.port)

        leases = await get(session, f"{LEASES}?labelSelector={IDENTITY_LABEL}%3Dkube-apiserver")
        by_name = {lease["metadata"]["name"]: lease for lease in leases["items"]}
        assert sorted(by_name) == sorted(identity_lease_name(h) for h in ("cp-a", "cp-b"))
        lease = by_name[identity_lease_name("cp-a")]
        assert lease["spec"]["holderIdentity"].startswith(identity_lease_name("cp-a") + "_")
        assert lease["spec"]["leaseDurationSeconds"] == IDENTITY_LEASE_DURATION
        assert lease["metadata"]["labels"]["kubernetes.io/hostname"] == "cp-a"
        renewed = lease["spec"]["renewTime"]

        async def renewed_since() -> None:
            lease = await get(session, f"{LEASES}/{identity_lease_name('cp-a')}")
            assert lease["spec"]["renewTime"] > renewed

        await eventually(renewed_since, within=5)

        await second.stop()  # gracefully: its address leaves at once
        assert await addresses(session) == (["10.0.0.2"], ["10.0.0.2"])


async def test_a_server_that_stops_renewing_leaves_after_the_ttl(
    store: SQLiteStore, dirs: tuple[Path, Path]
) -> None:
    async with two_servers(store, dirs, "10.0.0.1", "10.0.0.2") as (_, second, session):
        assert second.server.leases._task is not None
        second.server.leases._task.cancel()  # as if killed: no renewal, no goodbye
        started = time.monotonic()

        async def second_gone() -> None:
            assert await addresses(session) == (["10.0.0.1"], ["10.0.0.1"])

        await eventually(second_gone, within=5 * TTL)
        assert time.monotonic() - started >= TTL - 2 * INTERVAL


async def test_the_last_server_keeps_its_address(
    store: SQLiteStore, dirs: tuple[Path, Path]
) -> None:
    """One server behaves as before: its address stays after it stops."""
    only = await start(store, dirs[0], "10.0.0.1", "cp-a")
    await only.stop()
    stored = await store.get("/registry/endpoints/default/kubernetes")
    assert json.loads(stored.value)["subsets"][0]["addresses"] == [{"ip": "10.0.0.1"}]
    again = await start(store, dirs[1], "10.0.0.3", "cp-a")
    try:
        async with session_to(again, dirs[1]) as session:
            assert await addresses(session) == (["10.0.0.3"], ["10.0.0.3"])
    finally:
        await again.stop()


async def test_servers_starting_at_once_all_start(
    store: SQLiteStore, dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    """Three servers starting together all find the ``kubernetes`` endpoints missing and
    write them; the ones that lose the race carry on (before, one died of the 409)."""
    third = tmp_path / "c"
    third.mkdir()
    started = await asyncio.gather(
        *(
            start(store, data_dir, address, f"cp-{n}")
            for n, (data_dir, address) in enumerate(
                zip((*dirs, third), ("10.0.0.1", "10.0.0.2", "10.0.0.3"), strict=True)
            )
        ),
        return_exceptions=True,
    )
    running = [r for r in started if isinstance(r, Running)]
    try:
        assert len(running) == 3, [r for r in started if not isinstance(r, Running)]
        async with session_to(running[0], dirs[0]) as session:
            every = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]

            async def all_listed() -> None:
                assert await addresses(session) == (every, every)

            await eventually(all_listed, within=5.0)
    finally:
        for server in running:
            await server.stop()
