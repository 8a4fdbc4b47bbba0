"""A reflector (the informers' list+watch loop) across restarts of its API server.

The API server runs as a process on a fixed port with its data dir kept, over SQLite and over
a one-member etcd; it is stopped and started again while a reflector follows a namespace of
ConfigMaps.  Resuming must not re-list when the reflector's resourceVersion is still in the
store's history: the new server replays the watch from it.  When the history was compacted
past it while the server was down (another writer, then a compaction, straight on the store),
the watch answers 410 Gone and the reflector re-lists once.  Throughout, the versions the
reflector sees never go backwards and every object is added exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from controlplane.storage.etcd import EtcdStore
from controlplane.storage.interface import Store
from controlplane.storage.sqlite import SQLiteStore
from kube.api.kinds.core_v1.cluster import ConfigMap, Namespace
from kube.api.meta_v1 import ObjectMeta
from kube.client.reflector import ListerWatcher, Reflector, client_lister_watcher
from kube.client.rest import Client, ListResult, WatchEvent
from tests.controlplane.storage.etcd_server import EtcdServer
from tests.servers import BARE_APISERVER, ServerProcess, free_port, start_server, stop_server

pytestmark = pytest.mark.slow
NAMESPACE = "restarts"
WAIT = 30.0
"""Seconds a test waits for the reflector to catch up."""


@dataclass
class Recorder:
    """A reflector ``Store`` that keeps the objects and the order of what it was told."""

    objects: dict[str, ConfigMap] = field(default_factory=dict)
    versions: list[int] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    replaced: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def _seen(self, obj: ConfigMap) -> None:
        self.versions.append(int(obj.metadata.resource_version or 0))
        self.objects[obj.metadata.name or ""] = obj
        self.changed.set()

    def replace(self, items: Sequence[ConfigMap], resource_version: str) -> None:
        self.replaced += 1
        self.versions.append(int(resource_version))
        self.objects = {o.metadata.name or "": o for o in items}
        self.changed.set()

    def add(self, obj: ConfigMap) -> None:
        self.added.append(obj.metadata.name or "")
        self._seen(obj)

    def update(self, obj: ConfigMap) -> None:
        self._seen(obj)

    def delete(self, obj: ConfigMap) -> None:
        self.versions.append(int(obj.metadata.resource_version or 0))
        self.objects.pop(obj.metadata.name or "", None)
        self.changed.set()


class CountingListerWatcher:
    """Counts the list calls a reflector makes (first pages only: one per re-list)."""

    def __init__(self, inner: ListerWatcher[ConfigMap]) -> None:
        self.inner = inner
        self.lists = 0

    async def list(
        self,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListResult[ConfigMap]:
        if continue_token is None:
            self.lists += 1
        return await self.inner.list(
            limit=limit, continue_token=continue_token, resource_version=resource_version
        )

    def watch(
        self,
        *,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent[ConfigMap]]:
        return self.inner.watch(
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=allow_bookmarks,
        )


class Restartable:
    """An API server process on one port and data dir, over ``store_args``."""

    def __init__(self, data_dir: Path, store_args: list[str]) -> None:
        self.data_dir = data_dir
        self.args = [*store_args, "--secure-port", str(free_port())]
        self.server: ServerProcess | None = None

    def start(self) -> ServerProcess:
        self.server = start_server(self.data_dir, *BARE_APISERVER, *self.args)
        return self.server

    def stop(self) -> None:
        if self.server is not None:
            stop_server(self.server)
            self.server = None


@pytest.fixture(params=["sqlite", pytest.param("etcd", marks=pytest.mark.etcd)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Restartable, str]]:
    """The restartable API server and the store it runs on (``sqlite:PATH`` or etcd's)."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    if request.param == "sqlite":
        yield Restartable(data_dir, []), f"sqlite:{data_dir / 'state.db'}"
        return
    with EtcdServer(tmp_path / "etcd") as etcd:
        yield Restartable(data_dir, ["--store", f"etcd://{etcd.endpoint}"]), etcd.endpoint


async def open_store(where: str) -> Store:
    if where.startswith("sqlite:"):
        return await SQLiteStore.open(where.removeprefix("sqlite:"))
    return await EtcdStore.open([where])


async def wait_for(recorder: Recorder, condition: Callable[[], bool]) -> None:
    """Until ``condition`` holds, re-checked after each change the reflector makes."""
    async with asyncio.timeout(WAIT):
        while not condition():
            recorder.changed.clear()
            await recorder.changed.wait()


async def create(client: Client, names: Sequence[str]) -> None:
    for name in names:
        await client.create(ConfigMap(metadata=ObjectMeta(name=name, namespace=NAMESPACE)))


@contextlib.asynccontextmanager
async def reflecting(
    server: ServerProcess,
) -> AsyncIterator[tuple[Recorder, CountingListerWatcher]]:
    async with Client.from_kubeconfig(server.kubeconfig, user_agent="restart-tests") as client:
        lw = CountingListerWatcher(client_lister_watcher(client, ConfigMap, NAMESPACE))
        recorder = Recorder()
        task = asyncio.create_task(Reflector(lw, recorder).run())
        try:
            yield recorder, lw
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def check_invariants(recorder: Recorder) -> None:
    assert recorder.versions == sorted(recorder.versions), "a resourceVersion went backwards"
    assert len(recorder.added) == len(set(recorder.added)), "an object was added twice"


async def test_watch_resumes_without_relist_after_restart(
    backend: tuple[Restartable, str],
) -> None:
    apiserver, _ = backend
    server = apiserver.start()
    try:
        async with Client.from_kubeconfig(server.kubeconfig) as client:
            await client.create(Namespace(metadata=ObjectMeta(name=NAMESPACE)))
            await create(client, ["a", "b"])
        async with reflecting(server) as (recorder, lw):
            # The first list is at resourceVersion=0, answered from the server's watch cache
            # however far it has caught up (as upstream's); the watch delivers the rest.
            await wait_for(recorder, lambda: {"a", "b"} <= recorder.objects.keys())
            async with Client.from_kubeconfig(server.kubeconfig) as client:
                await create(client, ["c"])
            await wait_for(recorder, lambda: "c" in recorder.objects)

            apiserver.stop()
            server = apiserver.start()
            async with Client.from_kubeconfig(server.kubeconfig) as client:
                await create(client, ["d", "e"])
            await wait_for(recorder, lambda: {"d", "e"} <= recorder.objects.keys())

            assert lw.lists == 1
            assert sorted(recorder.objects) == ["a", "b", "c", "d", "e"]
            assert [name for name in recorder.added if name not in ("a", "b")] == ["c", "d", "e"]
            check_invariants(recorder)
    finally:
        apiserver.stop()


async def test_relists_on_gone_after_compaction_while_down(
    backend: tuple[Restartable, str],
) -> None:
    apiserver, where = backend
    server = apiserver.start()
    try:
        async with Client.from_kubeconfig(server.kubeconfig) as client:
            await client.create(Namespace(metadata=ObjectMeta(name=NAMESPACE)))
            await create(client, ["a"])
        async with reflecting(server) as (recorder, lw):
            await wait_for(recorder, lambda: "a" in recorder.objects)
            apiserver.stop()
            # Meanwhile another writer moves the store on and history is compacted past the
            # reflector's version (keys outside /registry: no object changes in between).
            store = await open_store(where)
            try:
                for i in range(5):
                    await store.create(f"/ha-restart-filler/{i}", b"x")
                await store.compact(await store.current_revision())
            finally:
                await store.close()
            server = apiserver.start()
            async with Client.from_kubeconfig(server.kubeconfig) as client:
                await create(client, ["b"])
            await wait_for(recorder, lambda: "b" in recorder.objects)

            assert lw.lists == 2
            assert sorted(recorder.objects) == ["a", "b"]
            check_invariants(recorder)
    finally:
        apiserver.stop()
