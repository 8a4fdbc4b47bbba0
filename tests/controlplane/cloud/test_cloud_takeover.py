"""A second cloud-controller-manager taking over (restart or leader change) finds what the
first one made and creates nothing twice."""

from __future__ import annotations

from typing import cast

import pytest

from controlplane.cloud import cloudnode, route, service
from controlplane.cloud.context import CloudContext
from controlplane.controllers.context import ControllerContext
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.service import Service
from kube.client.events import EventRecorder
from kube.client.informers import SharedInformerFactory
from tests.controlplane.cloud.cloudfixtures import cloud_harness, lb_service, node
from tests.controlplane.controllers.fakes import FakeRecorder
from tests.fakeapi import FakeApi


async def successor(client: FakeApi) -> ControllerContext:
    """A fresh process's context over the same API, its caches filled from it."""
    informers = SharedInformerFactory(client, clock=client.clock)
    ctx = ControllerContext(
        client=client,
        informers=informers,
        recorder=cast(EventRecorder, FakeRecorder()),
        clock=client.clock,
    )
    for cls in (Node, Service):
        for obj in (await client.list(cls)).items:
            informers.informer_for(cls).lister.add(obj)
    return ctx


async def run_all(ctx: ControllerContext, cloud_ctx: CloudContext) -> None:
    await cloudnode.new(ctx, cloud_ctx).sync("node1")
    await route.new(ctx, cloud_ctx).sync(route.ROUTES_KEY)
    await service.new(ctx, cloud_ctx).sync("default/web")


async def test_successor_creates_no_second_route_or_load_balancer() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    cloud.add_instance("node1", "10.0.0.11")
    h.store(
        node("node1", uninitialized=True, ip="10.0.0.11", pod_cidr="10.244.1.0/24"),
        lb_service(),
    )
    await run_all(h.ctx, cloud_ctx)
    ip = next(iter(cloud.balancers.values())).ip
    assert len(cloud.route_table["kubernetes"]) == 1

    h.client.actions.clear()
    await run_all(await successor(h.client), cloud_ctx)

    assert len(cloud.route_table["kubernetes"]) == 1
    assert len(cloud.called("create_route")) == 1
    assert [b.ip for b in cloud.balancers.values()] == [ip]
    assert h.client.actions == []  # Node initialized, status and finalizer already right


async def test_successor_finishes_a_deletion_the_first_left_half_done() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    h.store(node("node1"), lb_service())
    await service.new(h.ctx, cloud_ctx).sync("default/web")
    svc = await h.client.get(Service, "web", "default")
    assert svc.spec is not None
    svc.spec.type = "NodePort"
    h.client.seed(svc)
    cloud.failures["ensure_load_balancer_deleted"] = RuntimeError("leader lost mid-way")
    with pytest.raises(RuntimeError, match="leader lost"):
        await service.new(await successor(h.client), cloud_ctx).sync("default/web")
    assert len(cloud.balancers) == 1
    await service.new(await successor(h.client), cloud_ctx).sync("default/web")
    assert cloud.balancers == {}
    assert (await h.client.get(Service, "web", "default")).metadata.finalizers is None
