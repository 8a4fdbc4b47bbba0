"""The cloud node lifecycle controller against a fake cloud."""

from __future__ import annotations

from controlplane.cloud import cloudnodelifecycle
from controlplane.cloud.context import TAINT_SHUTDOWN
from kube.api.kinds.core_v1.node import Taint
from tests.controlplane.cloud.cloudfixtures import cloud_harness, node


async def test_not_ready_node_without_instance_is_deleted_with_an_event() -> None:
    h, _, cloud_ctx = cloud_harness()
    gone = node("node1", ready=False, provider_id="fake://node1")
    h.store(gone)
    await cloudnodelifecycle.new(h.ctx, cloud_ctx).sync("node1")
    [delete] = h.client.writes("delete", "Node")
    assert delete.name == "node1"
    assert h.recorder.reasons() == ["DeletingNode"]


async def test_ready_node_is_never_deleted() -> None:
    h, _, cloud_ctx = cloud_harness()
    h.store(node("node1", provider_id="fake://node1"))
    await cloudnodelifecycle.new(h.ctx, cloud_ctx).sync("node1")
    assert h.client.actions == []


async def test_not_ready_node_whose_instance_exists_is_kept() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    cloud.add_instance("node1", "10.0.0.11")
    h.store(node("node1", ready=False, provider_id="fake://node1"))
    await cloudnodelifecycle.new(h.ctx, cloud_ctx).sync("node1")
    assert h.client.actions == []


async def test_shutdown_instance_gets_the_taint_and_loses_it_when_ready() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    cloud.add_instance("node1", "10.0.0.11", shutdown=True)
    h.store(node("node1", ready=False, provider_id="fake://node1"))
    controller = cloudnodelifecycle.new(h.ctx, cloud_ctx)
    await controller.sync("node1")
    [update] = h.client.writes("update", "Node")
    assert [(t.key, t.effect) for t in update.obj.spec.taints] == [(TAINT_SHUTDOWN, "NoSchedule")]

    back = node("node1", provider_id="fake://node1", rv=update.obj.metadata.resource_version)
    assert back.spec is not None
    back.spec.taints = [Taint(key=TAINT_SHUTDOWN, effect="NoSchedule")]
    h.store(back)
    h.client.actions.clear()
    await controller.sync("node1")
    [update] = h.client.writes("update", "Node")
    assert update.obj.spec.taints is None


async def test_deleted_node_is_nothing_to_do_and_resync_enqueues_every_node() -> None:
    h, _, cloud_ctx = cloud_harness()
    controller = cloudnodelifecycle.new(h.ctx, cloud_ctx)
    await controller.sync("gone")
    assert h.client.actions == []
    h.cache(node("a"), node("b"))
    controller.resync()
    assert len(controller.queue) == 2
