"""Unconditional updates (PUT without a resourceVersion) racing one another: each is applied
onto whatever the others wrote, never a 500.  Several API servers starting at once write the
``kubernetes`` Endpoints this way."""

from __future__ import annotations

import asyncio
from pathlib import Path

from controlplane.storage.sqlite import SQLiteStore
from tests.controlplane.apiserver.inprocess import serving

URL = "/api/v1/namespaces/default/configmaps"
WRITERS = 8
"""Fewer than the registry's 16 attempts: a writer loses at most WRITERS - 1 races."""


async def test_concurrent_unconditional_updates_all_succeed(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "state.db")
    try:
        async with serving(store, tmp_path) as (_, session):
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "race"}}
            async with session.post(URL, json=body) as created:
                assert created.status == 201

            async def put(n: int) -> int:
                update = {**body, "data": {"writer": str(n)}}
                async with session.put(f"{URL}/race", json=update) as response:
                    return response.status

            statuses = await asyncio.gather(*(put(n) for n in range(WRITERS)))
            assert statuses == [200] * WRITERS
            async with session.get(f"{URL}/race") as final:
                data = (await final.json())["data"]
            assert data["writer"] in {str(n) for n in range(WRITERS)}
    finally:
        await store.close()
