"""The resourceVersions a reflector lists at, as client-go's: "0" first (the server's watch
cache, whatever the page size), then the last version seen (unpaged, so the cache answers it
too), and a consistent read at once when the server can no longer serve that version (410, or
504 "Too large resource version")."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import pytest

from kube.api.meta_v1 import Resource, Status, StatusCause, StatusDetails
from kube.client.errors import ApiError
from kube.client.informers import Indexer
from kube.client.reflector import Reflector
from kube.clock import FakeClock
from tests.kube.client.test_informers import FakeListerWatcher, config_map, gone, until


def too_large() -> ApiError:
    cause = StatusCause(reason="ResourceVersionTooLarge", message="Too large resource version")
    details = StatusDetails(causes=[cause], retry_after_seconds=1)
    return ApiError(Status(code=504, reason="Timeout", message="Timeout", details=details))


async def relist_after_gone_watch(lw: FakeListerWatcher, clock: FakeClock) -> Reflector[Resource]:
    """A reflector that listed, watched, and was told its watch version is gone."""
    lw.put(config_map("a"))
    reflector: Reflector[Resource] = Reflector(lw, Indexer(), clock=clock)
    task = asyncio.create_task(reflector.run())
    await until(lambda: len(lw.streams) == 1, "first watch")
    lw.put(config_map("b"))
    lw.fail(gone())
    await until(lambda: clock.sleepers == 1, "backoff")
    await clock.advance(2)
    await until(lambda: len(lw.streams) == 2, "second watch")
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return reflector


async def test_first_list_at_zero_then_unpaged_at_the_last_version() -> None:
    clock, lw = FakeClock(), FakeListerWatcher()
    reflector = await relist_after_gone_watch(lw, clock)
    assert lw.lists == [
        {"limit": 500, "continue": None, "rv": "0"},
        {"limit": None, "continue": None, "rv": "1"},
    ]
    assert reflector.last_sync_resource_version == "2"


@pytest.mark.parametrize("refusal", [gone, too_large], ids=["gone", "too-large"])
async def test_a_version_the_server_cannot_serve_is_listed_again_consistently(
    refusal: Callable[[], ApiError],
) -> None:
    clock, lw = FakeClock(), FakeListerWatcher()
    lw.put(config_map("a"))
    reflector: Reflector[Resource] = Reflector(lw, Indexer(), clock=clock)
    task = asyncio.create_task(reflector.run())
    try:
        await until(lambda: len(lw.streams) == 1, "first watch")
        lw.list_errors.append(refusal())
        lw.fail(gone())
        await until(lambda: clock.sleepers == 1, "backoff")
        await clock.advance(2)
        await until(lambda: len(lw.streams) == 2, "second watch")
        assert lw.lists == [
            {"limit": 500, "continue": None, "rv": "0"},
            {"limit": None, "continue": None, "rv": "1"},
            {"limit": 500, "continue": None, "rv": None},
        ]
        assert len(lw.watches) == 2
        # Listed fine again: the next re-list asks for the last version seen once more.
        lw.fail(gone())
        await until(lambda: clock.sleepers == 1, "backoff")
        await clock.advance(4)
        await until(lambda: len(lw.streams) == 3, "third watch")
        assert lw.lists[-1] == {"limit": None, "continue": None, "rv": "1"}
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
