"""Fixtures for tests of any package: a real API server (one per module), a client connected
to it, and a namespace of its own for each test.  Packages may override them (the API server's
own tests run each module on both storage backends)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from kubelab.api.kinds.core_v1.cluster import Namespace
from kubelab.api.meta_v1 import ObjectMeta
from kubelab.client.rest import Client
from tests.servers import BARE_APISERVER, ServerProcess, start_server, stop_server


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
