"""A real ``kubelab apiserver`` process on each storage backend, and real clients for it.

One server (tests/servers.py) serves a whole test module; each test gets a namespace of its
own.  The process is stopped by PID at the end and its data directory removed with the tmp
path.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import kubernetes
import pytest

from tests.controlplane.apiserver.admission_servers import BACKENDS, serve
from tests.controlplane.apiserver.proxy_backends import Backend, serve_backend
from tests.servers import BARE_APISERVER, KUBECTL, Kubectl, ServerProcess


@pytest.fixture(scope="module", params=BACKENDS)
def apiserver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One API server per test module and backend: every API test runs on SQLite and etcd."""
    yield from serve(request.param, tmp_path_factory, *BARE_APISERVER)


@pytest.fixture
def namespace(apiserver: ServerProcess) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(apiserver.kubeconfig), "create", "-f", "-"],
        input=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return name


@pytest.fixture
def kubectl(apiserver: ServerProcess, namespace: str, tmp_path: Path) -> Kubectl:
    return Kubectl(apiserver.kubeconfig, tmp_path / "kube-cache", namespace)


@pytest.fixture
def api_client(apiserver: ServerProcess) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    """An HTTP server for ``pods/proxy`` and ``services/proxy`` to reach (proxy_backends)."""
    async with serve_backend() as served:
        yield served
