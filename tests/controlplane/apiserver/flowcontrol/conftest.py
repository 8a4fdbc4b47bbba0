"""A FlowControl over real watch caches of a SQLite store, with a fake clock: two limited
levels of one share each beside the mandatory ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane.apiserver.flowcontrol import bootstrap
from controlplane.apiserver.flowcontrol.controller import FlowControl
from controlplane.apiserver.registry.store import ResourceStore
from controlplane.apiserver.storage.watchcache import WatchCache
from controlplane.storage.sqlite import SQLiteStore
from kube.api.codec import from_builtins
from kube.api.kinds.flowcontrol_v1 import FlowSchema, PriorityLevelConfiguration
from kube.clock import FakeClock
from kube.metrics import Registry


def level(name: str, shares: int, lendable: int) -> PriorityLevelConfiguration:
    raw = {
        "metadata": {"name": name},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": shares,
                "lendablePercent": lendable,
                "limitResponse": {
                    "type": "Queue",
                    "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 10},
                },
            },
        },
    }
    return from_builtins(raw, PriorityLevelConfiguration).obj


@pytest.fixture
async def flowcontrol(tmp_path: Path) -> AsyncIterator[tuple[FlowControl, FakeClock]]:
    store = await SQLiteStore.open(tmp_path / "db")
    clock = FakeClock()
    schemas = ResourceStore(FlowSchema.kind_info, store, clock)
    levels = ResourceStore(PriorityLevelConfiguration.kind_info, store, clock)
    # Shares 1, 1 and catch-all's 5 of 14 seats: nominal limits 2, 2 and 10.
    for config in (level("busy", 1, 0), level("idle", 1, 100)):
        await levels.create("", config, bootstrap.SYSTEM)
    caches = WatchCache(schemas), WatchCache(levels)
    for cache in caches:
        await cache.start()
    try:
        yield FlowControl(*caches, 14, clock, Registry()), clock
    finally:
        for cache in caches:
            cache.stop()
        await store.close()
