"""The cloud node controller against a fake cloud."""

from __future__ import annotations

import pytest

from controlplane.cloud import cloudnode
from controlplane.cloud.context import TAINT_UNINITIALIZED, CapabilityUnsupported
from controlplane.cloud.provider import InstanceNotFound
from kube.api.kinds.core_v1.node import (
    LABEL_FAILURE_DOMAIN_BETA_ZONE,
    LABEL_INSTANCE_TYPE_STABLE,
    LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE,
    Node,
)
from tests.controlplane.cloud.cloudfixtures import cloud_harness, node


async def test_uninitialized_node_gets_provider_id_labels_addresses_and_loses_the_taint() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    cloud.add_instance("node1", "10.0.0.11", zone="zone-b", instance_type="big")
    h.store(node("node1", uninitialized=True))
    controller = cloudnode.new(h.ctx, cloud_ctx)
    await controller.sync("node1")

    [status_patch] = h.client.writes("patch", "Node")
    assert status_patch.subresource == "status"
    assert status_patch.obj["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.11"},
        {"type": "Hostname", "address": "node1"},
    ]
    [update] = h.client.writes("update", "Node")
    written: Node = update.obj
    assert written.spec is not None
    assert written.spec.provider_id == "fake://node1"
    assert written.spec.taints is None
    labels = written.metadata.labels or {}
    assert labels[LABEL_INSTANCE_TYPE_STABLE] == "big"
    assert labels[LABEL_TOPOLOGY_ZONE] == "zone-b"
    assert labels[LABEL_TOPOLOGY_REGION] == "region-1"
    assert labels[LABEL_FAILURE_DOMAIN_BETA_ZONE] == "zone-b"


async def test_other_taints_and_an_existing_provider_id_are_kept() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    cloud.add_instance("node1", "10.0.0.11")
    n = node("node1", uninitialized=True, provider_id="fake://node1", ip="10.0.0.11")
    assert n.spec is not None and n.spec.taints is not None
    n.spec.taints.append(n.spec.taints[0].__class__(key="dedicated", effect="NoSchedule"))
    h.store(n)
    await cloudnode.new(h.ctx, cloud_ctx).sync("node1")
    [update] = h.client.writes("update", "Node")
    assert [t.key for t in update.obj.spec.taints] == ["dedicated"]
    assert update.obj.spec.provider_id == "fake://node1"


async def test_unknown_instance_leaves_the_node_tainted_and_is_retried() -> None:
    h, _, cloud_ctx = cloud_harness()
    h.store(node("ghost", uninitialized=True))
    with pytest.raises(InstanceNotFound):
        await cloudnode.new(h.ctx, cloud_ctx).sync("ghost")
    assert h.client.actions == []


async def test_initialized_node_only_gets_changed_addresses() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    cloud.add_instance("node1", "10.0.0.11")
    current = node("node1", provider_id="fake://node1", ip="10.0.0.11")
    h.store(current)
    controller = cloudnode.new(h.ctx, cloud_ctx)
    await controller.sync("node1")
    [patch] = h.client.writes("patch", "Node")  # the Hostname address was missing
    assert patch.obj["status"]["addresses"][1] == {"type": "Hostname", "address": "node1"}
    h.cache(await h.client.get(Node, "node1"))
    h.client.actions.clear()
    await controller.sync("node1")
    assert h.client.actions == []


async def test_handlers_enqueue_only_tainted_nodes_and_resync_enqueues_all() -> None:
    h, _, cloud_ctx = cloud_harness()
    controller = cloudnode.new(h.ctx, cloud_ctx)
    controller._enqueue_tainted(node("plain"))
    controller._enqueue_tainted(node("new", uninitialized=True))
    assert len(controller.queue) == 1
    h.cache(node("plain"), node("other"))
    controller.resync()
    assert len(controller.queue) == 3


def test_a_cloud_without_instances_cannot_run_it() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    cloud.supported -= {"instances", "instances_v2"}
    with pytest.raises(CapabilityUnsupported):
        cloudnode.new(h.ctx, cloud_ctx)


async def test_instances_v1_with_zones_gives_the_same_metadata() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    cloud.supported.discard("instances_v2")
    cloud.add_instance("node1", "10.0.0.11", zone="zone-c")
    h.store(node("node1", uninitialized=True))
    await cloudnode.new(h.ctx, cloud_ctx).sync("node1")
    [update] = h.client.writes("update", "Node")
    assert update.obj.spec.provider_id == "fake://node1"
    assert update.obj.metadata.labels[LABEL_TOPOLOGY_ZONE] == "zone-c"
    assert TAINT_UNINITIALIZED not in [t.key for t in update.obj.spec.taints or ()]
