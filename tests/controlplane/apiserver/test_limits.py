"""Requests beyond the in-flight limits get 429 with Retry-After; reads and writes are
limited separately and watches not at all, as upstream's max-in-flight filter does."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from controlplane.apiserver.auth import AUTHENTICATED, User
from controlplane.apiserver.endpoints.requestinfo import parse
from controlplane.apiserver.errors import ApiError
from controlplane.apiserver.server import APIServer, ServerConfig
from controlplane.storage.sqlite import SQLiteStore

WRITE = ("POST", "/api/v1/namespaces/default/configmaps")
READ = ("GET", "/api/v1/namespaces/default/configmaps")
WATCH = ("GET", "/api/v1/namespaces/default/configmaps?watch=true")


async def test_requests_beyond_the_limits_get_429(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "db")
    admin = User("admin", ("system:masters", AUTHENTICATED))
    config = ServerConfig(
        data_dir=tmp_path, max_requests_inflight=1, max_mutating_requests_inflight=1
    )
    server = APIServer(store, config, authenticators=[lambda request: admin])
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="done")

    def call(method: str, target: str) -> asyncio.Task[web.StreamResponse]:
        request = make_mocked_request(method, target)
        info = parse(method, request.path, request.query)
        return asyncio.ensure_future(server._guarded(request, info, slow))

    try:
        busy = [call(*WRITE), call(*READ), call(*WATCH), call(*WATCH)]
        await asyncio.sleep(0.01)
        for method, target in (WRITE, READ):
            with pytest.raises(ApiError) as refused:
                await asyncio.wait_for(call(method, target), 5)
            assert (refused.value.code, refused.value.retry_after) == (429, 1)
        release.set()
        done = await asyncio.wait_for(asyncio.gather(*busy), 5)
        assert [r.status for r in done] == [200, 200, 200, 200]
        again = await asyncio.wait_for(call(*WRITE), 5)
        assert again.status == 200, "the slot is free again"
    finally:
        await store.close()
