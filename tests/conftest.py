"""What every test shares: the markers' requirements, fresh network namespaces, and a real API
server (one per module) with a client connected to it and a namespace of its own for each test.
Packages may override the server fixtures (the API server's own tests run each module on both
storage backends).

A test marked ``privileged``, ``containerd``, ``etcd`` or ``browser`` is skipped, with the
reason, where its requirement is missing (not root; no containerd on PATH; no etcd binary; no
Chromium), so that the suite runs anywhere and a marker is the only thing a test says about
what it needs."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.meta_v1 import ObjectMeta
from kube.client.rest import Client
from kubelab.lab.etcd import ETCD_BINARY, etcd_available
from tests.netns import NetnsFactory
from tests.servers import BARE_APISERVER, ServerProcess, start_server, stop_server

REQUIREMENTS: dict[str, Callable[[], str | None]] = {
    "privileged": lambda: None if os.geteuid() == 0 else "needs root (network namespaces)",
    "containerd": lambda: None if shutil.which("containerd") else "needs containerd on PATH",
    "etcd": lambda: (
        None if etcd_available() else f"needs etcd at {ETCD_BINARY} (`make setup` installs it)"
    ),
    "browser": lambda: (
        None
        if shutil.which("chromium") and shutil.which("chromedriver")
        else "needs chromium and chromedriver (`make setup` installs chromium-driver)"
    ),
}
"""Marker → why a test so marked cannot run here (None: it can)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = {marker: why() for marker, why in REQUIREMENTS.items()}
    for item in items:
        for marker, reason in missing.items():
            if reason is not None and item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
                break


@pytest.fixture
def make_netns() -> Iterator[NetnsFactory]:
    """Fresh network namespaces for this test (see ``tests/netns.py``), deleted after it."""
    with contextlib.closing(NetnsFactory()) as factory:
        yield factory


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("client-apiserver") / "data"
    data_dir.mkdir()
    server = start_server(data_dir, *BARE_APISERVER)
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture
async def client(apiserver: ServerProcess) -> AsyncIterator[Client]:
    async with Client.from_kubeconfig(apiserver.kubeconfig, user_agent="kubelab-tests") as c:
        yield c


@pytest.fixture
async def namespace(client: Client) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    await client.create(Namespace(metadata=ObjectMeta(name=name)))
    return name
