"""The kubelet's CSINode manager against the in-memory API and a fake clock: what it writes,
how it retries and reports its initialization, and how it gives up as upstream's kubelet."""

from __future__ import annotations

import asyncio

import pytest

from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.storage_v1 import CSINode, CSINodeDriver, CSINodeSpec
from kube.api.meta_v1 import ObjectMeta
from node.kubelet.csinode import (
    MIGRATED_PLUGINS_ANNOTATION,
    NOT_INITIALIZED,
    CSINodeError,
    CSINodeManager,
)
from tests.fakeapi import FakeApi, api_error, stamp

MIGRATED = (
    "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,"
    "kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,"
    "kubernetes.io/vsphere-volume"
)


@pytest.fixture
def api() -> FakeApi:
    fake = FakeApi()
    fake.seed(stamp(Node(metadata=ObjectMeta(name="n1", uid="node-uid"))))
    return fake


async def test_initialize_creates_it_owned_by_the_node(api: FakeApi) -> None:
    manager = CSINodeManager(api, "n1", api.clock)
    assert manager.healthy() == (False, NOT_INITIALIZED)
    await manager.initialize()
    assert manager.healthy() == (True, "")
    csinode = api.stored(CSINode, "n1")
    assert csinode.metadata.annotations == {MIGRATED_PLUGINS_ANNOTATION: MIGRATED}
    owners = csinode.metadata.owner_references or []
    assert [(o.api_version, o.kind, o.name, o.uid) for o in owners] == [
        ("v1", "Node", "n1", "node-uid")
    ]
    assert csinode.spec == CSINodeSpec(drivers=[])


async def test_an_existing_one_is_only_annotated(api: FakeApi) -> None:
    drivers = [CSINodeDriver(name="csi.example.com", node_id="n1")]
    api.seed(stamp(CSINode(metadata=ObjectMeta(name="n1"), spec=CSINodeSpec(drivers=drivers))))
    manager = CSINodeManager(api, "n1", api.clock)
    await manager.initialize()
    assert [a.verb for a in api.writes(kind="CSINode")] == ["update"]
    updated = api.stored(CSINode, "n1")
    assert updated.metadata.annotations == {MIGRATED_PLUGINS_ANNOTATION: MIGRATED}
    assert updated.spec == CSINodeSpec(drivers=drivers)
    await manager.sync()
    assert len(api.writes(kind="CSINode")) == 1  # in order: nothing to write


async def test_failures_keep_the_node_not_ready_then_end_the_kubelet(api: FakeApi) -> None:
    def refuse(_: object) -> None:
        raise api_error(403, "Forbidden", 'csinodes.storage.k8s.io "n1" is forbidden')

    api.react("get", "CSINode", refuse)
    manager = CSINodeManager(api, "n1", api.clock)
    task = asyncio.create_task(manager.initialize())
    while not task.done():
        if api.clock.sleepers == 0:
            await asyncio.sleep(0)
            continue
        healthy, message = manager.healthy()
        assert not healthy and message.startswith("failed to initialize CSINode: ")
        await api.clock.advance(0.001)
    with pytest.raises(CSINodeError, match="Failed to initialize CSINode after retrying"):
        await task
    # Upstream's backoff: six tries, 15 ms before the second, six times longer each time
    # (10% jitter): 23.3 s to 25.7 s in all.
    assert len([a for a in api.reads if a.kind == "CSINode"]) == 6
    assert 23.3 <= api.clock.monotonic() <= 25.7


async def test_run_recreates_a_deleted_one(api: FakeApi) -> None:
    manager = CSINodeManager(api, "n1", api.clock, period=60)
    await manager.initialize()
    first = api.stored(CSINode, "n1")
    await api.delete(CSINode, "n1")
    task = asyncio.create_task(manager.run())
    try:
        for _ in range(20):
            await asyncio.sleep(0)
        assert api.clock.sleepers == 1  # checks after its period, not at once
        await api.clock.advance(60)
        for _ in range(20):
            await asyncio.sleep(0)
        again = api.stored(CSINode, "n1")
        assert again.metadata.uid != first.metadata.uid
        assert again.metadata.owner_references == first.metadata.owner_references
    finally:
        task.cancel()
