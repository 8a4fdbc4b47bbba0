"""The etcd store's endpoint health check on a real three-member cluster.

The store prefers its first endpoint (an API server's local member) and health-checks the
endpoint it uses: it returns to the first endpoint once that member is back, and leaves a
member that stops answering without closing its connections (SIGSTOP stands in for a network
partition) within a couple of seconds, abandoning the requests and watches waiting on it,
instead of waiting for ``REQUEST_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from controlplane.storage.etcd import HEALTH_INTERVAL, HEALTH_TIMEOUT, EtcdStore
from controlplane.storage.interface import ADDED, Event
from kubelab.lab.etcd import EtcdRunner
from tests.controlplane.storage.etcd_server import loopback_cluster

pytestmark = [pytest.mark.etcd, pytest.mark.slow]

FAILOVER_BOUND = HEALTH_INTERVAL + 2 * HEALTH_TIMEOUT + 1.0
"""Seconds from a member freezing to the store answering elsewhere: one interval, the probe
that fails, the probes of the others, and a second for an election if it was the leader."""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EtcdRunner]:
    with loopback_cluster(tmp_path / "etcd", 3) as runner:
        yield runner


async def until_endpoint(store: EtcdStore, wanted: Callable[[str], bool]) -> None:
    """Wait for the health check to move ``store`` to a ``wanted`` endpoint (one interval
    and a probe, with a second to spare)."""
    async with asyncio.timeout(HEALTH_INTERVAL + 2 * HEALTH_TIMEOUT + 1):
        while not wanted(store.endpoint):  # noqa: ASYNC110 (polled: the store signals nothing)
            await asyncio.sleep(0.05)


async def test_the_store_returns_to_its_first_endpoint_once_it_is_back(
    cluster: EtcdRunner,
) -> None:
    endpoints = cluster.cluster.endpoints()
    first = cluster.cluster.members[0]
    store = await EtcdStore.open(endpoints)
    try:
        cluster[first.name].kill()
        await until_endpoint(store, lambda endpoint: endpoint != endpoints[0])
        cluster[first.name].start()  # returns once the member reports healthy
        await until_endpoint(store, lambda endpoint: endpoint == endpoints[0])
        assert (await store.create("/registry/health/back", b"1")).value == b"1"
        assert store.endpoint == endpoints[0]
    finally:
        await store.close()


async def test_a_frozen_member_is_left_within_seconds(cluster: EtcdRunner) -> None:
    endpoints = cluster.cluster.endpoints()
    frozen = cluster[cluster.cluster.members[0].name]
    store = await EtcdStore.open(endpoints)
    pid = frozen.pid
    assert pid is not None
    try:
        before = await store.create("/registry/health/before", b"1")
        events = store.watch("/registry/health/", before.mod_revision)
        os.kill(pid, signal.SIGSTOP)  # it keeps its connections and answers nothing
        started = time.monotonic()
        # A read already waiting on the frozen member is abandoned and retried elsewhere.
        assert await store.get("/registry/health/before") == before
        after = await store.create("/registry/health/after", b"1")
        elapsed = time.monotonic() - started
        assert store.endpoint != endpoints[0]
        assert elapsed < FAILOVER_BOUND, f"{elapsed:.1f}s to leave the frozen member"
        # The watch's stream on the frozen member was abandoned too and resumed elsewhere.
        async with asyncio.timeout(5):
            event = await anext(events)
        assert isinstance(event, Event)
        assert (event.type, event.kv) == (ADDED, after)
        await events.aclose()
    finally:
        os.kill(pid, signal.SIGCONT)
        await store.close()
