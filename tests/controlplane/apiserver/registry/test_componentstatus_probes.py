"""ComponentStatus probes without a server: a store that fails or hangs, a component that
never answers, and selection over the probed components."""

from __future__ import annotations

import asyncio

from controlplane.apiserver.registry.componentstatus import (
    ComponentStatusREST,
    HTTPProbe,
    StoreProbe,
)
from controlplane.apiserver.registry.store import Selection
from controlplane.storage.interface import Unavailable
from kube.api.kinds.core_v1.cluster import ComponentStatus


async def test_a_failing_store_is_unhealthy_with_its_error() -> None:
    async def fail() -> None:
        raise Unavailable("etcd: no leader")

    assert await StoreProbe(fail).check() == ("False", "", "Unavailable: etcd: no leader")


async def test_a_hanging_store_times_out_as_upstream_says() -> None:
    async def hang() -> None:
        await asyncio.Event().wait()

    probe = StoreProbe(hang, timeout=0.05)
    assert await probe.check() == ("False", "", "context deadline exceeded")


async def test_a_silent_component_times_out() -> None:
    connections: list[asyncio.StreamWriter] = []

    async def silent(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        url = f"http://127.0.0.1:{port}/healthz"
        status, message, error = await HTTPProbe(url, timeout=0.1).check()
        for writer in connections:
            writer.close()
            await writer.wait_closed()
    assert (status, message, error) == ("False", f'Get "{url}": context deadline exceeded', "")


async def test_list_probes_every_component_and_selects() -> None:
    async def ok() -> None:
        return None

    rest = ComponentStatusREST({"etcd-1": StoreProbe(ok), "etcd-0": StoreProbe(ok)})
    listed = await rest.list("", Selection())
    assert [s.metadata.name for s in listed.items] == ["etcd-0", "etcd-1"]
    info = ComponentStatus.kind_info
    only = await rest.list("", Selection.parse(info, None, "metadata.name=etcd-1"))
    assert [s.metadata.name for s in only.items] == ["etcd-1"]
