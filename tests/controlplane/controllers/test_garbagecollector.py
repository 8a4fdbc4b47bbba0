"""The garbage collector, with fake informers and a fake API."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import msgspec
import pytest

from controlplane.controllers import garbagecollector
from kube.api import codec
from kube.api.kinds.apps_v1 import Deployment, ReplicaSet
from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import PersistentVolume
from kube.api.meta_v1 import ObjectMeta, OwnerReference, Resource, Status
from kube.client.errors import ApiError
from tests import builders
from tests.controlplane.controllers.fakes import Action, Harness, harness, stamp

DELETED_AT = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def ref(owner: Resource, *, block: bool = False) -> OwnerReference:
    return OwnerReference(
        api_version=owner.typed().api_version,
        kind=owner.kind,
        name=owner.metadata.name,
        uid=owner.metadata.uid,
        controller=True,
        block_owner_deletion=block or None,
    )


def replicaset(name: str = "web", *, finalizer: str | None = None) -> ReplicaSet:
    rs = stamp(ReplicaSet(metadata=ObjectMeta(name=name, namespace="team")))
    if finalizer:
        rs.metadata.deletion_timestamp = DELETED_AT
        rs.metadata.finalizers = [finalizer]
    return rs


def pod(name: str, *owners: OwnerReference, namespace: str = "team") -> Pod:
    built = builders.pod(name, namespace)
    built.metadata.owner_references = list(owners) or None
    return stamp(built)


def gone(cls: type[Resource], name: str) -> OwnerReference:
    """A reference to an owner that no longer exists."""
    return OwnerReference(
        api_version=cls.kind_info.api_version, kind=cls.kind_info.kind, name=name, uid="dead"
    )


async def drain(controller: garbagecollector.GarbageCollector) -> set[str]:
    """The keys queued so far, taken off the queue."""
    keys = set()
    while len(controller.queue):
        key = await controller.queue.get()
        controller.queue.done(key)
        keys.add(key)
    return keys


def deletes(h: Harness) -> list[tuple[str, str, Any]]:
    return [(a.kind, a.name, a.obj["propagationPolicy"]) for a in h.client.writes("delete")]


def patched_refs(h: Harness, name: str) -> list[str] | None:
    stored = h.client.objects[(Pod, "team", name)]
    return [r.name or "" for r in stored.metadata.owner_references or ()] or None


async def test_a_pod_whose_owner_is_gone_is_deleted_in_the_background() -> None:
    h = harness()
    orphan = pod("web-1", gone(ReplicaSet, "web"))
    h.store(orphan)
    await garbagecollector.new(h.ctx).sync(orphan.metadata.uid or "")
    assert deletes(h) == [("Pod", "web-1", "Background")]


@pytest.mark.parametrize(
    ("live_uid", "collected"),
    [
        pytest.param("same", False, id="owner-only-missing-from-cache-is-kept"),
        pytest.param("other", True, id="owner-recreated-under-new-uid-is-dangling"),
    ],
)
async def test_absence_is_verified_live_by_uid(live_uid: str, collected: bool) -> None:
    h = harness()
    owner = replicaset()
    dependent = pod("web-1", ref(owner))
    h.store(dependent)
    if live_uid == "other":
        owner = msgspec.structs.replace(owner, metadata=ObjectMeta(name="web", namespace="team"))
        stamp(owner)
    h.client.seed(owner)
    await garbagecollector.new(h.ctx).sync(dependent.metadata.uid or "")
    assert deletes(h) == ([("Pod", "web-1", "Background")] if collected else [])


async def test_a_surviving_owner_keeps_the_object_and_dangling_references_go() -> None:
    h = harness()
    alive = replicaset("alive")
    h.store(alive)
    dependent = pod("web-1", ref(alive), gone(ReplicaSet, "dead"))
    h.store(dependent)
    await garbagecollector.new(h.ctx).sync(dependent.metadata.uid or "")
    assert deletes(h) == []
    assert patched_refs(h, "web-1") == ["alive"]


async def test_nothing_happens_to_an_object_with_live_owners() -> None:
    h = harness()
    owner = replicaset()
    h.store(owner)
    dependent = pod("web-1", ref(owner))
    h.store(dependent)
    await garbagecollector.new(h.ctx).sync(dependent.metadata.uid or "")
    assert h.client.actions == []


async def test_orphan_policy_removes_references_then_the_finalizer() -> None:
    h = harness()
    owner = replicaset(finalizer="orphan")
    h.store(owner, pod("web-1", ref(owner)), pod("web-2", ref(owner)))
    await garbagecollector.new(h.ctx).sync(owner.metadata.uid or "")
    assert patched_refs(h, "web-1") is None
    assert patched_refs(h, "web-2") is None
    assert [a.name for a in h.client.writes("patch")] == ["web-1", "web-2", "web"]
    assert h.client.objects[(ReplicaSet, "team", "web")].metadata.finalizers is None
    assert deletes(h) == []


@pytest.mark.parametrize(
    ("block", "finalized"),
    [
        pytest.param(True, False, id="blocking-dependent-holds-the-owner"),
        pytest.param(False, True, id="non-blocking-dependent-does-not"),
    ],
)
async def test_foreground_owner_waits_for_blocking_dependents(block: bool, finalized: bool) -> None:
    h = harness()
    owner = replicaset(finalizer="foregroundDeletion")
    dependent = pod("web-1", ref(owner, block=block))
    h.store(owner, dependent)
    controller = garbagecollector.new(h.ctx)
    await drain(controller)
    await controller.sync(owner.metadata.uid or "")
    assert (h.client.writes("patch") != []) == finalized
    assert await drain(controller) == {dependent.metadata.uid}


async def test_foreground_dependents_are_deleted_then_the_owner_is_finalized() -> None:
    h = harness()
    owner = replicaset(finalizer="foregroundDeletion")
    dependent = pod("web-1", ref(owner, block=True))
    h.store(owner, dependent)
    controller = garbagecollector.new(h.ctx)
    await controller.sync(dependent.metadata.uid or "")
    assert deletes(h) == [("Pod", "web-1", "Background")]
    h.uncache(dependent)
    await drain(controller)
    controller._deleted(dependent)
    assert await drain(controller) == {owner.metadata.uid}
    await controller.sync(owner.metadata.uid or "")
    assert h.client.objects[(ReplicaSet, "team", "web")].metadata.finalizers is None


async def test_a_dependent_with_dependents_of_its_own_goes_in_the_foreground() -> None:
    h = harness()
    deployment = stamp(Deployment(metadata=ObjectMeta(name="web", namespace="team")))
    deployment.metadata.deletion_timestamp = DELETED_AT
    deployment.metadata.finalizers = ["foregroundDeletion"]
    rs = replicaset()
    rs.metadata.owner_references = [ref(deployment, block=True)]
    h.store(deployment, rs, pod("web-1", ref(rs, block=True)))
    await garbagecollector.new(h.ctx).sync(rs.metadata.uid or "")
    assert deletes(h) == [("ReplicaSet", "web", "Foreground")]


async def test_an_owner_in_another_namespace_is_reported_and_counts_as_absent() -> None:
    h = harness()
    elsewhere = stamp(ConfigMap(metadata=ObjectMeta(name="cfg", namespace="other")))
    h.store(elsewhere)
    dependent = pod("web-1", ref(elsewhere))
    h.store(dependent)
    await garbagecollector.new(h.ctx).sync(dependent.metadata.uid or "")
    assert deletes(h) == [("Pod", "web-1", "Background")]
    [(kind, reason, message, name)] = h.recorder.events
    assert (kind, reason, name) == ("Warning", "OwnerRefInvalidNamespace", "web-1")
    assert message == (
        f"ownerRef [v1/ConfigMap, namespace: team, name: cfg, uid: {elsewhere.metadata.uid}] "
        'does not exist in namespace "team"'
    )


async def test_a_cluster_scoped_object_cannot_be_owned_by_a_namespaced_kind() -> None:
    h = harness()
    volume = stamp(
        PersistentVolume(metadata=ObjectMeta(name="pv", owner_references=[gone(Pod, "x")]))
    )
    h.store(volume)
    collector = garbagecollector.GarbageCollector(
        h.ctx, (*garbagecollector.KINDS, PersistentVolume)
    )
    await collector.sync(volume.metadata.uid or "")
    assert deletes(h) == []
    assert h.recorder.reasons() == ["OwnerRefInvalidNamespace"]


class CustomResources:
    """Discovery and GETs of one custom kind, ``widgets.example.com``, over ``request``."""

    def __init__(self, widgets: dict[str, str]) -> None:
        self.widgets = widgets
        """name → uid of the widgets that exist in namespace team."""

    def answer(self, action: Action) -> bytes:
        path = action.name
        if path == "/apis/example.com/v1":
            resource = {"name": "widgets", "namespaced": True, "kind": "Widget", "verbs": ["get"]}
            return codec.encode_json({"resources": [resource]})
        name = path.rsplit("/", 1)[-1]
        if path.startswith("/apis/example.com/v1/namespaces/team/widgets/") and (
            name in self.widgets
        ):
            return codec.encode_json({"metadata": {"name": name, "uid": self.widgets[name]}})
        raise ApiError(Status(code=404, reason="NotFound", message=f"{path} not found"))


@pytest.mark.parametrize(
    ("widgets", "collected"),
    [
        pytest.param({"w": "widget-uid"}, False, id="custom-owner-exists"),
        pytest.param({}, True, id="custom-owner-gone"),
    ],
)
async def test_owners_of_custom_kinds_are_found_through_discovery(
    widgets: dict[str, str], collected: bool
) -> None:
    h = harness()
    h.client.react("request", "*", CustomResources(widgets).answer)
    owner = OwnerReference(api_version="example.com/v1", kind="Widget", name="w", uid="widget-uid")
    dependent = pod("web-1", owner)
    h.store(dependent)
    await garbagecollector.new(h.ctx).sync(dependent.metadata.uid or "")
    assert bool(deletes(h)) == collected


async def test_an_unknown_owner_kind_is_retried() -> None:
    h = harness()
    h.client.react("request", "*", CustomResources({}).answer)
    owner = OwnerReference(
        api_version="nowhere.io/v1", kind="Thing", name="t", uid=str(uuid.uuid4())
    )
    dependent = pod("web-1", owner)
    h.store(dependent)
    with pytest.raises(garbagecollector.UnknownOwnerKindError):
        await garbagecollector.new(h.ctx).sync(dependent.metadata.uid or "")


@pytest.mark.parametrize(
    ("state", "queued"),
    [
        pytest.param("owner-cached", False, id="owner-known"),
        pytest.param("owner-missing", True, id="owner-unknown-to-caches"),
        pytest.param("owner-deleting", True, id="owner-being-deleted"),
    ],
)
async def test_objects_are_queued_when_their_owners_need_checking(state: str, queued: bool) -> None:
    h = harness()
    owner = replicaset(finalizer="foregroundDeletion" if state == "owner-deleting" else None)
    if state != "owner-missing":
        h.cache(owner)
    controller = garbagecollector.new(h.ctx)
    await drain(controller)
    dependent = pod("web-1", ref(owner))
    controller._added(dependent)
    assert await drain(controller) == ({dependent.metadata.uid} if queued else set())


async def test_deleting_an_owner_queues_its_dependents() -> None:
    h = harness()
    owner = replicaset()
    dependent = pod("web-1", ref(owner))
    h.cache(dependent)
    controller = garbagecollector.new(h.ctx)
    await drain(controller)
    controller._deleted(owner)
    assert await drain(controller) == {dependent.metadata.uid}


async def test_an_object_gone_or_replaced_is_left_alone() -> None:
    h = harness()
    dependent = pod("web-1", gone(ReplicaSet, "web"))
    h.cache(dependent)
    await garbagecollector.new(h.ctx).sync(dependent.metadata.uid or "")
    assert h.client.actions == []
