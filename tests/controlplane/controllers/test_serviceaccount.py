"""The serviceaccount controller, with fake informers and a fake API."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import serviceaccount
from kube.api.kinds.core_v1.cluster import Namespace, NamespaceStatus, ServiceAccount
from kube.api.meta_v1 import ObjectMeta
from tests.controlplane.controllers.fakes import harness, stamp


def namespace(name: str, *, terminating: bool = False) -> Namespace:
    ns = stamp(Namespace(metadata=ObjectMeta(name=name)))
    if terminating:
        ns.metadata.deletion_timestamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        ns.status = NamespaceStatus(phase="Terminating")
    return ns


@pytest.mark.parametrize(
    ("terminating", "existing", "created"),
    [
        pytest.param(False, False, ["default"], id="creates-default"),
        pytest.param(False, True, [], id="already-there"),
        pytest.param(True, False, [], id="terminating-namespace-left-alone"),
    ],
)
async def test_default_account(terminating: bool, existing: bool, created: list[str]) -> None:
    h = harness()
    h.cache(namespace("team", terminating=terminating))
    if existing:
        h.store(stamp(ServiceAccount(metadata=ObjectMeta(name="default", namespace="team"))))
    controller = serviceaccount.new(h.ctx)
    await controller.sync("team")
    assert [a.name for a in h.client.writes("create", "ServiceAccount")] == created


async def test_missing_namespace_is_nothing_to_do() -> None:
    h = harness()
    await serviceaccount.new(h.ctx).sync("gone")
    assert h.client.actions == []


async def test_deleting_the_default_account_requeues_its_namespace() -> None:
    h = harness()
    controller = serviceaccount.new(h.ctx)
    account = stamp(ServiceAccount(metadata=ObjectMeta(name="default", namespace="team")))
    controller._account_deleted(account)
    assert await controller.queue.get() == "team"


async def test_an_account_created_meanwhile_is_not_an_error() -> None:
    h = harness()
    h.cache(namespace("team"))
    h.client.seed(stamp(ServiceAccount(metadata=ObjectMeta(name="default", namespace="team"))))
    await serviceaccount.new(h.ctx).sync("team")
    assert h.client.writes("create") == []
