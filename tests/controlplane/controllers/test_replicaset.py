"""The replicaset and replicationcontroller controllers (one implementation), with fakes."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from controlplane.controllers import replicaset, replicationcontroller
from controlplane.controllers.replicaset import ReplicaSetController
from kube.api.kinds.apps_v1 import ReplicaSet, ReplicaSetSpec
from kube.api.kinds.core_v1.pod import (
    Container,
    Pod,
    PodSpec,
    PodTemplateSpec,
    ReplicationController,
    ReplicationControllerSpec,
)
from kube.api.meta_v1 import LabelSelector, ObjectMeta, Status
from kube.client.errors import ApiError
from tests import builders
from tests.controlplane.controllers.fakes import Harness, harness, stamp

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
LABELS = {"app": "web"}
TEMPLATE = PodTemplateSpec(
    metadata=ObjectMeta(labels=LABELS), spec=PodSpec(containers=[Container(name="c", image="i")])
)

KINDS = [
    pytest.param(replicaset, id="replicaset"),
    pytest.param(replicationcontroller, id="replicationcontroller"),
]


def owner(module: Any, replicas: int, min_ready: int = 0) -> Any:
    meta = ObjectMeta(name="web", namespace="ns", generation=1)
    if module is replicaset:
        return stamp(
            ReplicaSet(
                metadata=meta,
                spec=ReplicaSetSpec(
                    replicas=replicas,
                    min_ready_seconds=min_ready,
                    selector=LabelSelector(match_labels=LABELS),
                    template=TEMPLATE,
                ),
            )
        )
    return stamp(
        ReplicationController(
            metadata=meta,
            spec=ReplicationControllerSpec(
                replicas=replicas, min_ready_seconds=min_ready, selector=LABELS, template=TEMPLATE
            ),
        )
    )


def pod(
    name: str,
    of: Any = None,
    *,
    node: str = "n1",
    phase: str = "Running",
    ready_since: datetime.datetime | None = None,
) -> Pod:
    return stamp(
        builders.pod(
            name,
            "ns",
            labels=LABELS,
            owner=of,
            node_name=node or None,
            containers=[Container(name="c", image="i")],
            phase=phase,
            ready_since=ready_since,
        )
    )


def setup(module: Any, *objs: Any) -> tuple[Harness, ReplicaSetController]:
    h = harness()
    controller = module.new(h.ctx)
    h.store(*objs)
    return h, controller


def stored(h: Harness, obj: Any) -> Any:
    return h.client.objects[(type(obj), "ns", obj.metadata.name)]


@pytest.mark.parametrize("module", KINDS)
async def test_expectations_prevent_double_creation(module: Any) -> None:
    rs = owner(module, 3)
    h, controller = setup(module, rs)
    await controller.sync("ns/web")
    created = h.client.writes("create", "Pod")
    assert len(created) == 3
    assert h.recorder.reasons() == ["SuccessfulCreate"] * 3
    await controller.sync("ns/web")  # the watch has not shown the pods yet
    assert len(h.client.writes("create", "Pod")) == 3
    for action in created[:2]:
        h.cache(action.obj)
        controller._pod_added(action.obj)
    assert not controller.expectations.satisfied("ns/web")
    h.cache(created[2].obj)
    controller._pod_added(created[2].obj)
    assert controller.expectations.satisfied("ns/web")
    await controller.sync("ns/web")
    assert len(h.client.writes("create", "Pod")) == 3


@pytest.mark.parametrize("module", KINDS)
async def test_a_failed_batch_stops_creation_and_sets_replica_failure(module: Any) -> None:
    rs = owner(module, 5)
    h, controller = setup(module, rs)
    h.client.fail_next("create", ApiError(Status(code=403, reason="Forbidden", message="quota")))
    with pytest.raises(ApiError):
        await controller.sync("ns/web")
    assert h.client.writes("create", "Pod") == []
    assert h.recorder.reasons() == ["FailedCreate"]
    assert controller.expectations.satisfied("ns/web")  # nothing left to wait for
    [condition] = stored(h, rs).status.conditions
    assert (condition.type, condition.status, condition.reason) == (
        "ReplicaFailure",
        "True",
        "FailedCreate",
    )


@pytest.mark.parametrize("module", KINDS)
async def test_scale_down_deletes_the_cheapest_pods(module: Any) -> None:
    rs = owner(module, 1)
    pods = [
        pod("ready", rs, ready_since=T0),
        pod("not-ready", rs),
        pod("pending", rs, phase="Pending"),
        pod("unscheduled", rs, node="", phase="Pending"),
    ]
    h, controller = setup(module, rs, *pods)
    await controller.sync("ns/web")
    assert sorted(a.name for a in h.client.writes("delete", "Pod")) == [
        "not-ready",
        "pending",
        "unscheduled",
    ]
    assert h.recorder.reasons() == ["SuccessfulDelete"] * 3
    assert not controller.expectations.satisfied("ns/web")
    for p in pods[1:]:
        controller._pod_deleted(p)
        controller._pod_deleted(p)  # a second report of the same deletion counts once
    assert controller.expectations.satisfied("ns/web")


@pytest.mark.parametrize("module", KINDS)
async def test_orphans_are_adopted_and_count(module: Any) -> None:
    rs = owner(module, 1)
    h, controller = setup(module, rs, pod("orphan", ready_since=T0))
    await controller.sync("ns/web")
    [patch] = h.client.writes("patch", "Pod")
    assert patch.obj["metadata"]["ownerReferences"][0]["uid"] == rs.metadata.uid
    assert h.client.writes("create", "Pod") == []
    status = stored(h, rs).status
    assert (status.replicas, status.ready_replicas, status.observed_generation) == (1, 1, 1)


@pytest.mark.parametrize("module", KINDS)
async def test_an_orphan_wakes_its_matching_owner(module: Any) -> None:
    rs = owner(module, 1)
    _, controller = setup(module, rs)
    controller._pod_added(pod("orphan"))
    assert await controller.queue.get() == "ns/web"


@pytest.mark.parametrize("module", KINDS)
async def test_status_counts_and_is_written_only_when_changed(module: Any) -> None:
    rs = owner(module, 3, min_ready=10)
    pods = [
        pod("old", rs, ready_since=T0 - datetime.timedelta(seconds=60)),
        pod("young", rs, ready_since=T0),
        pod("starting", rs),
    ]
    h, controller = setup(module, rs, *pods)
    await controller.sync("ns/web")
    status = stored(h, rs).status
    assert (
        status.replicas,
        status.fully_labeled_replicas,
        status.ready_replicas,
        status.available_replicas,
    ) == (3, 3, 2, 1)
    assert len(h.client.writes("update", type(rs).__name__)) == 1
    h.cache(stored(h, rs))
    await controller.sync("ns/web")
    assert len(h.client.writes("update", type(rs).__name__)) == 1


async def test_all_ready_but_not_available_looks_again_after_min_ready_seconds() -> None:
    rs = owner(replicaset, 1, min_ready=10)
    h, controller = setup(replicaset, rs, pod("young", rs, ready_since=T0))
    await controller.sync("ns/web")
    assert stored(h, rs).status.available_replicas == 0
    await h.clock.advance(10)
    assert await controller.queue.get() == "ns/web"


async def test_terminating_pods_are_counted_for_replicasets() -> None:
    rs = owner(replicaset, 1)
    leaving = pod("leaving", rs)
    leaving.metadata.deletion_timestamp = T0
    h, controller = setup(replicaset, rs, leaving, pod("staying", rs))
    await controller.sync("ns/web")
    status = stored(h, rs).status
    assert (status.replicas, status.terminating_replicas) == (1, 1)


async def test_a_deleted_owner_drops_its_expectations() -> None:
    h, controller = setup(replicaset)
    controller.expectations.expect_creations("ns/web", 2)
    await controller.sync("ns/web")
    assert controller.expectations.satisfied("ns/web")
    assert h.client.actions == []


@pytest.mark.parametrize("module", KINDS)
async def test_an_owner_made_again_under_its_name_is_not_held_by_the_old_ones_expectations(
    module: Any,
) -> None:
    old = owner(module, 2)
    h, controller = setup(module, old)
    await controller.sync("ns/web")
    assert len(h.client.writes("create", "Pod")) == 2
    assert not controller.expectations.satisfied("ns/web")  # the pods were never seen

    # Deleted and created again while the watch was down: only an update reaches the cache.
    again = owner(module, 2)
    again.metadata.uid = "another-uid"
    h.uncache(old)
    h.client.objects.clear()
    h.store(again)
    controller._owner_updated(old, again)
    assert controller.expectations.satisfied("ns/web")
    await controller.sync("ns/web")
    assert len(h.client.writes("create", "Pod")) == 4


async def test_replica_failure_clears_once_managing_succeeds() -> None:
    rs = owner(replicaset, 1)
    h, controller = setup(replicaset, rs)
    h.client.fail_next("create", ApiError(Status(code=403, reason="Forbidden", message="quota")))
    with pytest.raises(ApiError):
        await controller.sync("ns/web")
    h.cache(stored(h, rs))
    await controller.sync("ns/web")
    assert stored(h, rs).status.conditions is None
    assert len(h.client.writes("create", "Pod")) == 1
