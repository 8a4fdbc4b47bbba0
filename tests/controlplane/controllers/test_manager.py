"""Choosing controllers with --controllers, and the shape every controller runs in."""

from __future__ import annotations

import asyncio

import pytest

from controlplane.controllers.controller import Controller
from controlplane.controllers.manager import UnknownControllerError, enabled
from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.meta_v1 import ObjectMeta, Status
from kube.client.errors import ApiError
from kube.client.informers import DeletedFinalStateUnknown
from tests.controlplane.controllers.fakes import harness, stamp

KNOWN = ["a", "b", "c", "bootstrap"]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param("*", ["a", "b", "c"], id="all-on-by-default"),
        pytest.param("*,-b", ["a", "c"], id="all-but-one"),
        pytest.param("a,c", ["a", "c"], id="named"),
        pytest.param("*,bootstrap", ["a", "b", "c", "bootstrap"], id="plus-an-off-one"),
        pytest.param("-a,a", [], id="disabling-wins"),
        pytest.param("", [], id="none"),
    ],
)
def test_enabled(spec: str, expected: list[str]) -> None:
    assert enabled(spec, KNOWN, off_by_default=("bootstrap",)) == expected


def test_unknown_controller_is_refused() -> None:
    with pytest.raises(UnknownControllerError, match="'nope' is not a known controller"):
        enabled("*,-nope", KNOWN)


class Counting(Controller):
    NAME = "counting"

    def __init__(self, fail_first: int) -> None:
        super().__init__(harness().ctx)
        self.fail_first = fail_first
        self.synced: list[str] = []

    async def sync_key(self, key: str) -> None:
        self.synced.append(key)
        if len(self.synced) <= self.fail_first:
            raise ApiError(Status(code=500, reason="InternalError", message="boom"))


async def run_until(controller: Counting, count: int) -> None:
    task = asyncio.create_task(controller.run(2))
    clock = controller.ctx.clock
    for _ in range(200):
        if len(controller.synced) >= count:
            break
        await asyncio.sleep(0)
        await clock.advance(0.1)  # type: ignore[attr-defined]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_failed_syncs_are_retried_with_backoff_then_forgotten() -> None:
    controller = Counting(fail_first=2)
    controller.queue.add("ns/a")
    await run_until(controller, 3)
    assert controller.synced == ["ns/a", "ns/a", "ns/a"]
    assert controller.queue.num_requeues("ns/a") == 0


async def test_handlers_only_enqueue_keys() -> None:
    controller = Counting(fail_first=0)
    old = stamp(ConfigMap(metadata=ObjectMeta(name="c", namespace="ns")), rv="1")
    controller.enqueue_update(old, old)  # a resync: nothing changed
    assert len(controller.queue) == 0
    new = stamp(ConfigMap(metadata=ObjectMeta(name="c", namespace="ns")), rv="2")
    controller.enqueue_update(old, new)
    controller.enqueue(DeletedFinalStateUnknown("ns/gone", old))
    assert [await controller.queue.get(), await controller.queue.get()] == ["ns/c", "ns/gone"]
