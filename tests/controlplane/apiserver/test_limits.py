"""The server's concurrency limit goes through API Priority and Fairness: requests of a level
beyond its seats get 429 with Retry-After, while the exempt level (system:masters) and
long-running requests other than watches (logs here) are never limited.  Before the server
has its configuration, the mandatory levels alone share it."""

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
LOGS = ("GET", "/api/v1/namespaces/default/pods/p/log?follow=true")


async def test_requests_beyond_a_levels_seats_get_429(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "db")
    admin = User("admin", ("system:masters", AUTHENTICATED))
    alice = User("alice", (AUTHENTICATED,))
    users = {"admin": admin, "alice": alice}
    # 2 seats in all; the mandatory catch-all level (5 shares of 5, refusing beyond) has both.
    config = ServerConfig(
        data_dir=tmp_path, max_requests_inflight=1, max_mutating_requests_inflight=1
    )
    server = APIServer(
        store, config, authenticators=[lambda request: users[request.headers["X-Who"]]]
    )
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="done")

    def call(who: str, method: str, target: str) -> asyncio.Task[web.StreamResponse]:
        request = make_mocked_request(method, target, headers={"X-Who": who})
        info = parse(method, request.path, request.query)
        return asyncio.ensure_future(server._guarded(request, info, slow))

    try:
        busy = [call("alice", *WRITE), call("alice", *READ)]
        busy += [call("admin", *READ) for _ in range(5)]
        busy += [call("alice", *LOGS) for _ in range(3)]  # long-running: no seat
        await asyncio.sleep(0.01)
        for method, target in (WRITE, READ):
            with pytest.raises(ApiError) as refused:
                await asyncio.wait_for(call("alice", method, target), 5)
            assert (refused.value.code, refused.value.retry_after) == (429, 1)
            assert refused.value.message == "Too many requests, please try again later."
        release.set()
        done = await asyncio.wait_for(asyncio.gather(*busy), 5)
        assert [r.status for r in done] == [200] * 10
        again = await asyncio.wait_for(call("alice", *WRITE), 5)
        assert again.status == 200, "the seats are free again"
        levels = server.flowcontrol.dump("dump_priority_levels")
        assert levels.splitlines()[1].split()[:8] == [
            "catch-all,",
            "0,",
            "true,",
            "false,",
            "0,",
            "0,",
            "3,",
            "2,",
        ]
    finally:
        await store.close()
