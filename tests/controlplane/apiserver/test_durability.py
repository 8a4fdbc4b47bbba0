"""The API server on each backend: kill -9 loses nothing acknowledged, and concurrent
read-modify-write clients lose no update."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import kubernetes
import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from tests.controlplane.storage.etcd_server import EtcdServer
from tests.servers import BARE_APISERVER, ServerProcess, start_server, stop_server

Launch = Callable[[], ServerProcess]


@pytest.fixture(params=["sqlite", pytest.param("etcd", marks=pytest.mark.etcd)])
def launch(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Launch]:
    """Starts (and restarts) an API server on one data directory and one store."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    extra: list[str] = []
    etcd: EtcdServer | None = None
    if request.param == "etcd":
        etcd = EtcdServer(tmp_path / "etcd")
        etcd.start()
        extra = ["--store", f"etcd://{etcd.endpoint}"]
    started: list[ServerProcess] = []

    def start() -> ServerProcess:
        server = start_server(data_dir, *BARE_APISERVER, *extra)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            stop_server(server)
        if etcd is not None:
            etcd.stop()


def _core(server: ServerProcess) -> tuple[k8s.ApiClient, k8s.CoreV1Api]:
    client = kubernetes.config.new_client_from_config(config_file=str(server.kubeconfig))
    return client, k8s.CoreV1Api(client)


def _configmap(name: str, **data: str) -> k8s.V1ConfigMap:
    return k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=name), data=data)


def test_kill_9_loses_nothing_acknowledged(launch: Launch) -> None:
    server = launch()
    client, core = _core(server)
    acknowledged: dict[str, str] = {}
    enough = threading.Event()

    def write() -> None:
        for i in range(10_000):
            try:
                made = core.create_namespaced_config_map("default", _configmap(f"cm-{i}", i=str(i)))
            except Exception:
                return  # the server is gone
            acknowledged[made.metadata.name] = made.metadata.resource_version
            if len(acknowledged) == 40:
                enough.set()

    writer = threading.Thread(target=write)
    writer.start()
    assert enough.wait(60)
    os.kill(server.process.pid, signal.SIGKILL)
    writer.join(60)
    client.close()

    restarted = launch()
    client, core = _core(restarted)
    try:
        stored = {
            c.metadata.name: c.metadata.resource_version
            for c in core.list_namespaced_config_map("default").items
        }
        for name, version in acknowledged.items():
            assert stored.get(name) == version, f"{name} lost or changed"
        newest = max(int(v) for v in acknowledged.values())
        later = core.create_namespaced_config_map("default", _configmap("after-restart"))
        assert int(later.metadata.resource_version) > newest, "revisions never go back"
    finally:
        client.close()


def test_concurrent_read_modify_write_loses_no_update(launch: Launch) -> None:
    server = launch()
    client, core = _core(server)
    core.create_namespaced_config_map("default", _configmap("counter", n="0"))
    clients, rounds = 8, 5

    def increment() -> None:
        for _ in range(rounds):
            while True:
                current = core.read_namespaced_config_map("counter", "default")
                current.data["n"] = str(int(current.data["n"]) + 1)
                try:
                    core.replace_namespaced_config_map("counter", "default", current)
                    break
                except ApiException as error:
                    if error.status != 409:
                        raise

    threads = [threading.Thread(target=increment) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    try:
        final = core.read_namespaced_config_map("counter", "default")
        assert final.data["n"] == str(clients * rounds)
    finally:
        client.close()
