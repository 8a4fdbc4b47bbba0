"""The resourcequota controller, with fake informers, a fake API and a fake clock."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from controlplane.controllers import resourcequota
from kube.api.kinds.apps_v1 import Deployment
from kube.api.kinds.core_v1.cluster import (
    ConfigMap,
    ResourceQuota,
    ResourceQuotaSpec,
    ResourceQuotaStatus,
    Secret,
)
from kube.api.kinds.core_v1.pod import (
    Container,
    Pod,
    PodSpec,
    PodStatus,
    ResourceRequirements,
)
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.core_v1.volume import (
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    VolumeResourceRequirements,
)
from kube.api.meta_v1 import ObjectMeta, Resource
from tests.controlplane.controllers.fakes import harness, stamp


def meta(name: str) -> ObjectMeta:
    return ObjectMeta(name=name, namespace="team")


def pod(
    name: str,
    *,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    init: dict[str, Any] | None = None,
    phase: str = "Running",
    deadline: int | None = None,
) -> Pod:
    resources = ResourceRequirements(requests=requests, limits=limits)
    init_containers = (
        [Container(name="init", resources=ResourceRequirements(requests=init))] if init else None
    )
    return stamp(
        Pod(
            metadata=meta(name),
            spec=PodSpec(
                containers=[Container(name="c", resources=resources)],
                init_containers=init_containers,
                active_deadline_seconds=deadline,
            ),
            status=PodStatus(phase=phase),
        )
    )


def quota(hard: dict[str, Any], scopes: list[str] | None = None) -> ResourceQuota:
    return stamp(
        ResourceQuota(metadata=meta("q"), spec=ResourceQuotaSpec(hard=hard, scopes=scopes))
    )


async def used(objs: list[Resource], hard: dict[str, Any], scopes: list[str] | None = None) -> Any:
    h = harness()
    h.cache(*objs)
    h.store(quota(hard, scopes))
    await resourcequota.new(h.ctx).sync("team/q")
    [write] = h.client.writes("update", "ResourceQuota")
    assert write.subresource == "status"
    assert write.obj.status.hard == hard
    return write.obj.status.used


@pytest.mark.parametrize(
    ("objs", "hard", "scopes", "expected"),
    [
        pytest.param(
            [
                pod("a", requests={"cpu": "100m", "memory": "64Mi"}, limits={"cpu": "1"}),
                pod("b", requests={"cpu": "200m"}),
                pod("done", requests={"cpu": "5"}, phase="Succeeded"),
            ],
            {
                "pods": "10",
                "count/pods": "10",
                "requests.cpu": "2",
                "cpu": "2",
                "requests.memory": "1Gi",
                "limits.cpu": "4",
                "limits.memory": "1Gi",
            },
            None,
            {
                "pods": "2",
                "count/pods": "3",
                "requests.cpu": "300m",
                "cpu": "300m",
                "requests.memory": "64Mi",
                "limits.cpu": "1",
                "limits.memory": "0",
            },
            id="pods-non-terminal-only",
        ),
        pytest.param(
            [pod("a", requests={"cpu": "100m"}, init={"cpu": "500m"})],
            {"requests.cpu": "2"},
            None,
            {"requests.cpu": "500m"},
            id="init-container-peak",
        ),
        pytest.param(
            [pod("a", requests={"cpu": "1"}, deadline=60), pod("b"), pod("c", deadline=30)],
            {"pods": "10"},
            ["Terminating"],
            {"pods": "2"},
            id="scope-terminating",
        ),
        pytest.param(
            [pod("a", requests={"cpu": "1"}), pod("b"), pod("c")],
            {"pods": "10"},
            ["BestEffort"],
            {"pods": "2"},
            id="scope-best-effort",
        ),
        pytest.param(
            [
                stamp(Service(metadata=meta("s1"), spec=ServiceSpec(type="ClusterIP"))),
                stamp(
                    Service(
                        metadata=meta("s2"),
                        spec=ServiceSpec(
                            type="LoadBalancer",
                            ports=[ServicePort(port=80), ServicePort(port=443)],
                        ),
                    )
                ),
                stamp(ConfigMap(metadata=meta("c"))),
                stamp(Secret(metadata=meta("s"))),
            ],
            {
                "services": "5",
                "services.loadbalancers": "1",
                "services.nodeports": "5",
                "configmaps": "5",
                "count/secrets": "5",
                "replicationcontrollers": "1",
            },
            None,
            {
                "services": "2",
                "services.loadbalancers": "1",
                "services.nodeports": "2",
                "configmaps": "1",
                "count/secrets": "1",
                "replicationcontrollers": "0",
            },
            id="object-counts",
        ),
        pytest.param(
            [
                stamp(
                    PersistentVolumeClaim(
                        metadata=meta(f"c{i}"),
                        spec=PersistentVolumeClaimSpec(
                            storage_class_name="fast" if i else None,
                            resources=VolumeResourceRequirements(requests={"storage": "1Gi"}),
                        ),
                    )
                )
                for i in range(2)
            ],
            {
                "persistentvolumeclaims": "5",
                "requests.storage": "10Gi",
                "fast.storageclass.storage.k8s.io/requests.storage": "5Gi",
            },
            None,
            {
                "persistentvolumeclaims": "2",
                "requests.storage": "2Gi",
                "fast.storageclass.storage.k8s.io/requests.storage": "1Gi",
            },
            id="claims-and-storage",
        ),
        pytest.param([], {"resourcequotas": "1"}, None, {"resourcequotas": "1"}, id="quotas"),
    ],
)
async def test_usage(
    objs: list[Resource],
    hard: dict[str, Any],
    scopes: list[str] | None,
    expected: dict[str, str],
) -> None:
    assert await used(objs, hard, scopes) == expected


async def test_count_of_other_kinds_is_listed() -> None:
    h = harness()
    h.client.seed(stamp(Deployment(metadata=meta("d1"))), stamp(Deployment(metadata=meta("d2"))))
    h.store(quota({"count/deployments.apps": "5"}))
    await resourcequota.new(h.ctx).sync("team/q")
    [write] = h.client.writes("update")
    assert write.obj.status.used == {"count/deployments.apps": "2"}


async def test_pod_stuck_terminating_past_grace_is_not_charged() -> None:
    h = harness()
    stuck = pod("a", requests={"cpu": "1"})
    stuck.metadata.deletion_timestamp = h.clock.now() - datetime.timedelta(minutes=5)
    stuck.metadata.deletion_grace_period_seconds = 30
    h.cache(stuck)
    h.store(quota({"pods": "5", "requests.cpu": "5", "count/pods": "5"}))
    await resourcequota.new(h.ctx).sync("team/q")
    [write] = h.client.writes("update")
    assert write.obj.status.used == {"pods": "0", "requests.cpu": "0", "count/pods": "1"}


async def test_unchanged_usage_is_not_written_but_rechecked() -> None:
    h = harness()
    h.cache(pod("a"))
    q = quota({"pods": "5"})
    q.status = ResourceQuotaStatus(hard={"pods": "5"}, used={"pods": "1"})
    h.store(q)
    controller = resourcequota.new(h.ctx)
    rechecks: list[float] = []
    controller.enqueue_after = lambda obj, seconds: rechecks.append(seconds)  # type: ignore[method-assign]
    await controller.sync("team/q")
    assert h.client.actions == []
    assert rechecks == [300]


async def test_changes_in_the_namespace_enqueue_its_quotas() -> None:
    h = harness()
    h.cache(quota({"pods": "1"}))
    controller = resourcequota.new(h.ctx)
    controller._object_changed(pod("a"))
    assert await controller.queue.get() == "team/q"
