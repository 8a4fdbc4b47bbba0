"""The service controller against a fake cloud."""

from __future__ import annotations

import datetime

import pytest

from controlplane.cloud import service
from kube.api.kinds.core_v1.node import LABEL_NODE_EXCLUDE_BALANCERS
from kube.api.kinds.core_v1.service import Service
from tests.controlplane.cloud.cloudfixtures import cloud_harness, lb_service, node
from tests.controlplane.controllers.fakes import Harness


async def current(h: Harness, name: str = "web") -> Service:
    svc = await h.client.get(Service, name, "default")
    h.cache(svc)
    return svc


async def test_load_balancer_is_ensured_over_ready_nodes_with_finalizer_status_events() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    excluded = node("node3", labels={LABEL_NODE_EXCLUDE_BALANCERS: ""})
    h.store(node("node1"), node("node2", ready=False), excluded, lb_service())
    await service.new(h.ctx, cloud_ctx).sync("default/web")

    assert cloud.called("ensure_load_balancer") == [("web", ["node1"])]
    finalizer, status = h.client.writes("patch", "Service")
    assert finalizer.obj["metadata"]["finalizers"] == [service.FINALIZER]
    assert status.subresource == "status"
    svc = await current(h)
    assert svc.status and svc.status.load_balancer and svc.status.load_balancer.ingress
    assert svc.status.load_balancer.ingress[0].ip == "203.0.113.10"
    assert h.recorder.reasons() == ["EnsuringLoadBalancer", "EnsuredLoadBalancer"]


async def test_resync_of_an_ensured_service_writes_nothing_and_creates_nothing() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    h.store(node("node1"), lb_service())
    controller = service.new(h.ctx, cloud_ctx)
    await controller.sync("default/web")
    await current(h)
    h.client.actions.clear()
    await controller.sync("default/web")
    assert h.client.actions == []
    assert len(cloud.balancers) == 1


async def test_no_ready_node_is_a_warning_but_still_ensures() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    h.store(lb_service())
    await service.new(h.ctx, cloud_ctx).sync("default/web")
    assert "UnAvailableLoadBalancer" in h.recorder.reasons()
    assert cloud.called("ensure_load_balancer") == [("web", [])]


async def test_node_changes_update_the_hosts() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    h.store(node("node1"), lb_service())
    controller = service.new(h.ctx, cloud_ctx)
    await controller.sync("default/web")
    await current(h)
    h.cache(node("node2"))
    await controller.sync(service.NODES_KEY)
    assert cloud.called("update_load_balancer") == [("web", ["node1", "node2"])]
    assert h.recorder.reasons()[-1] == "UpdatedLoadBalancer"
    await controller.sync(service.NODES_KEY)
    assert len(cloud.called("update_load_balancer")) == 1


async def test_node_sync_of_a_service_not_ensured_here_enqueues_it() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    controller = service.new(h.ctx, cloud_ctx)
    h.store(node("node1"), lb_service())
    before = len(controller.queue)
    await controller.sync(service.NODES_KEY)
    assert cloud.called("update_load_balancer") == []
    assert len(controller.queue) == before + 1


async def test_failed_update_is_an_event_and_a_retry() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    h.store(node("node1"), lb_service())
    controller = service.new(h.ctx, cloud_ctx)
    await controller.sync("default/web")
    await current(h)
    h.cache(node("node2"))
    cloud.failures["update_load_balancer"] = RuntimeError("busy")
    with pytest.raises(RuntimeError, match="default/web"):
        await controller.sync(service.NODES_KEY)
    assert h.recorder.reasons()[-1] == "UpdateLoadBalancerFailed"
    await controller.sync(service.NODES_KEY)
    assert cloud.balancers[next(iter(cloud.balancers))].hosts == ["node1", "node2"]


async def test_type_change_deletes_the_load_balancer_clears_status_and_finalizer() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    h.store(node("node1"), lb_service())
    controller = service.new(h.ctx, cloud_ctx)
    await controller.sync("default/web")
    svc = await current(h)
    assert svc.spec is not None
    svc.spec.type = "ClusterIP"
    h.client.seed(svc)
    h.cache(svc)
    h.recorder.events.clear()
    await controller.sync("default/web")
    assert cloud.balancers == {}
    after = await h.client.get(Service, "web", "default")
    assert after.metadata.finalizers is None
    assert (
        after.status is None
        or not (after.status.load_balancer or None)
        or not (after.status.load_balancer.ingress)
    )
    assert h.recorder.reasons() == ["DeletingLoadBalancer", "DeletedLoadBalancer"]


async def test_deletion_with_finalizer_removes_the_load_balancer_first() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    h.store(node("node1"), lb_service())
    controller = service.new(h.ctx, cloud_ctx)
    await controller.sync("default/web")
    svc = await current(h)
    svc.metadata.deletion_timestamp = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)
    h.client.seed(svc)
    h.cache(svc)
    await controller.sync("default/web")
    assert cloud.balancers == {}
    assert (await h.client.get(Service, "web", "default")).metadata.finalizers is None


async def test_service_gone_without_finalizer_still_loses_its_load_balancer() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    h.store(node("node1"), lb_service())
    controller = service.new(h.ctx, cloud_ctx)
    await controller.sync("default/web")
    h.uncache(await current(h))
    await controller.sync("default/web")
    assert cloud.balancers == {}


async def test_failed_ensure_is_an_event_and_an_error() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    cloud.failures["ensure_load_balancer"] = RuntimeError("no capacity")
    h.store(node("node1"), lb_service())
    controller = service.new(h.ctx, cloud_ctx)
    with pytest.raises(RuntimeError, match="no capacity"):
        await controller.sync("default/web")
    assert h.recorder.reasons()[-1] == "SyncLoadBalancerFailed"


def test_handlers_enqueue_load_balancers_only() -> None:
    h, _, cloud_ctx = cloud_harness()
    controller = service.new(h.ctx, cloud_ctx)
    before = len(controller.queue)
    plain = lb_service("plain")
    assert plain.spec is not None
    plain.spec.type = "ClusterIP"
    controller._added(plain)
    assert len(controller.queue) == before
    controller._added(lb_service())
    assert len(controller.queue) == before + 1
