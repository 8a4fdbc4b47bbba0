"""The daemonset controller, with fake informers and a fake API."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import daemonset
from controlplane.controllers.history import CONTROLLER_REVISION_HASH_LABEL, new_revision
from kube.api.kinds.apps_v1 import (
    ControllerRevision,
    DaemonSet,
    DaemonSetSpec,
    DaemonSetUpdateStrategy,
    RollingUpdateDaemonSet,
)
from kube.api.kinds.core_v1.node import Node, NodeSpec, Taint
from kube.api.kinds.core_v1.pod import (
    Container,
    Pod,
    PodSpec,
    PodTemplateSpec,
    Toleration,
)
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from tests import builders
from tests.controlplane.controllers.fakes import Harness, harness, stamp

LABELS = {"app": "agent"}


def daemon_set(
    *,
    image: str = "agent:1",
    node_selector: dict[str, str] | None = None,
    max_unavailable: int | str = 1,
    host_network: bool = False,
) -> DaemonSet:
    ds = DaemonSet(
        metadata=ObjectMeta(name="agent", namespace="kube-system", generation=2),
        spec=DaemonSetSpec(
            selector=LabelSelector(match_labels=LABELS),
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels=LABELS),
                spec=PodSpec(
                    containers=[Container(name="agent", image=image)],
                    node_selector=node_selector,
                    host_network=host_network or None,
                ),
            ),
            update_strategy=DaemonSetUpdateStrategy(
                type="RollingUpdate",
                rolling_update=RollingUpdateDaemonSet(max_unavailable=max_unavailable),
            ),
            revision_history_limit=10,
        ),
    )
    return stamp(ds)


def node(name: str, *taints: Taint, labels: dict[str, str] | None = None) -> Node:
    return stamp(
        Node(
            metadata=ObjectMeta(name=name, labels=labels),
            spec=NodeSpec(taints=list(taints) or None),
        )
    )


def revision_of(ds: DaemonSet) -> ControllerRevision:
    assert ds.spec is not None
    return stamp(new_revision(ds, ds.spec.template, 1, 0))


def pod(
    ds: DaemonSet,
    name: str,
    on: str,
    *,
    hash_: str,
    ready: bool = True,
    phase: str = "Running",
    created: datetime.datetime | None = None,
) -> Pod:
    return stamp(
        builders.pod(
            name,
            "kube-system",
            labels={**LABELS, CONTROLLER_REVISION_HASH_LABEL: hash_},
            owner=ds,
            node_name=on,
            containers=[Container(name="agent", image="agent:1")],
            phase=phase,
            ready=ready,
        ),
        created=created,
    )


def current_hash(h: Harness, ds: DaemonSet) -> str:
    revision = revision_of(ds)
    h.store(revision)
    return (revision.metadata.labels or {})[CONTROLLER_REVISION_HASH_LABEL]


async def test_one_pod_per_eligible_node_pinned_and_tolerating() -> None:
    h = harness()
    ds = daemon_set(node_selector={"role": "worker"})
    worker = {"role": "worker"}
    h.store(ds)
    h.cache(
        node("a", labels=worker),
        node("b", Taint(key="dedicated", value="db", effect="NoSchedule"), labels=worker),
        node("c"),
        node("d", Taint(key="node.kubernetes.io/not-ready", effect="NoExecute"), labels=worker),
    )
    await daemonset.new(h.ctx).sync("kube-system/agent")

    created = [a.obj for a in h.client.writes("create", "Pod")]
    assert sorted(daemonset.target_node(p) for p in created) == ["a", "d"]
    made = created[0]
    assert made.metadata.generate_name == "agent-"
    revision = h.client.writes("create", "ControllerRevision")[0].obj
    assert (
        made.metadata.labels[CONTROLLER_REVISION_HASH_LABEL]
        == (revision.metadata.labels[CONTROLLER_REVISION_HASH_LABEL])
    )
    required = made.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    field = required.node_selector_terms[0].match_fields[0]
    assert (field.key, field.operator) == ("metadata.name", "In")
    keys = {(t.key, t.effect) for t in made.spec.tolerations}
    assert ("node.kubernetes.io/unreachable", "NoExecute") in keys
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
    assert ("node.kubernetes.io/network-unavailable", "NoSchedule") not in keys
    assert h.recorder.reasons() == ["SuccessfulCreate", "SuccessfulCreate"]
    status = h.client.writes("update", "DaemonSet")[0].obj.status
    assert (status.desired_number_scheduled, status.current_number_scheduled) == (2, 0)
    assert (status.number_unavailable, status.observed_generation) == (2, 2)


def test_host_network_pods_tolerate_network_unavailable() -> None:
    ds = daemon_set(host_network=True)
    assert ds.spec is not None and ds.spec.template is not None
    spec = daemonset.with_daemon_tolerations(ds.spec.template).spec
    assert spec is not None
    assert Toleration(
        key="node.kubernetes.io/network-unavailable", operator="Exists", effect="NoSchedule"
    ) in (spec.tolerations or [])


@pytest.mark.parametrize(
    ("effect", "deleted"),
    [
        pytest.param("NoSchedule", [], id="noschedule-taint-keeps-running-pod"),
        pytest.param("NoExecute", ["agent-a"], id="noexecute-taint-evicts"),
    ],
)
async def test_untolerated_taint_on_a_node_with_a_pod(effect: str, deleted: list[str]) -> None:
    h = harness()
    ds = daemon_set()
    h.store(ds)
    hash_ = current_hash(h, ds)
    h.cache(node("a", Taint(key="gpu", value="yes", effect=effect)))
    h.store(pod(ds, "agent-a", "a", hash_=hash_))
    await daemonset.new(h.ctx).sync("kube-system/agent")
    assert [a.name for a in h.client.writes("delete", "Pod")] == deleted
    assert h.client.writes("create", "Pod") == []


async def test_extra_pods_on_a_node_keep_the_oldest_and_failed_ones_go() -> None:
    h = harness()
    ds = daemon_set()
    h.store(ds)
    hash_ = current_hash(h, ds)
    h.cache(node("a"), node("b"))
    old = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
    h.store(
        pod(ds, "agent-old", "a", hash_=hash_, created=old),
        pod(ds, "agent-new", "a", hash_=hash_),
        pod(ds, "agent-b", "b", hash_=hash_, phase="Failed"),
    )
    await daemonset.new(h.ctx).sync("kube-system/agent")
    assert sorted(a.name for a in h.client.writes("delete", "Pod")) == ["agent-b", "agent-new"]
    assert "FailedDaemonPod" in h.recorder.reasons()


@pytest.mark.parametrize(
    ("max_unavailable", "ready", "deleted"),
    [
        pytest.param(1, (True, True, True, True), 1, id="one-at-a-time"),
        pytest.param("50%", (True, True, True, True), 2, id="percent-of-desired"),
        pytest.param(
            1, (False, True, True, True), 2, id="unavailable-old-pod-replaced-outside-budget"
        ),
    ],
)
async def test_rolling_update_respects_max_unavailable(
    max_unavailable: int | str, ready: tuple[bool, ...], deleted: int
) -> None:
    h = harness()
    old_ds = daemon_set(image="agent:1")
    old_hash = current_hash(h, old_ds)
    ds = daemon_set(image="agent:2", max_unavailable=max_unavailable)
    ds.metadata.uid = old_ds.metadata.uid
    h.store(ds)
    names = "abcd"
    h.cache(*(node(n) for n in names))
    h.store(
        *(
            pod(ds, f"agent-{n}", n, hash_=old_hash, ready=r)
            for n, r in zip(names, ready, strict=True)
        )
    )
    controller = daemonset.new(h.ctx)
    await controller.sync("kube-system/agent")
    gone = [a.name for a in h.client.writes("delete", "Pod")]
    assert len(gone) == deleted
    if not ready[0]:
        assert gone[0] == "agent-a"
    assert h.client.writes("create", "Pod") == []


async def test_on_delete_leaves_old_pods() -> None:
    h = harness()
    old_ds = daemon_set(image="agent:1")
    old_hash = current_hash(h, old_ds)
    ds = daemon_set(image="agent:2")
    ds.metadata.uid = old_ds.metadata.uid
    assert ds.spec is not None
    ds.spec.update_strategy = DaemonSetUpdateStrategy(type="OnDelete")
    h.store(ds)
    h.cache(node("a"))
    h.store(pod(ds, "agent-a", "a", hash_=old_hash))
    await daemonset.new(h.ctx).sync("kube-system/agent")
    assert h.client.writes("delete", "Pod") == []
    status = h.client.writes("update", "DaemonSet")[0].obj.status
    assert (status.updated_number_scheduled, status.number_available) == (0, 1)


async def test_status_counts() -> None:
    h = harness()
    ds = daemon_set(node_selector={"role": "worker"})
    h.store(ds)
    hash_ = current_hash(h, ds)
    worker = {"role": "worker"}
    h.cache(node("a", labels=worker), node("b", labels=worker), node("c"))
    h.store(
        pod(ds, "agent-a", "a", hash_=hash_),
        pod(ds, "agent-b", "b", hash_="other", ready=False),
        pod(ds, "agent-c", "c", hash_=hash_),
    )
    await daemonset.new(h.ctx).sync("kube-system/agent")
    status = h.client.writes("update", "DaemonSet")[0].obj.status
    assert status.desired_number_scheduled == 2
    assert status.current_number_scheduled == 2
    assert status.number_misscheduled == 1
    assert status.number_ready == 1
    assert status.number_available == 1
    assert status.number_unavailable == 1
    assert status.updated_number_scheduled == 1
    assert [a.name for a in h.client.writes("delete", "Pod")] == ["agent-c"]


async def test_expectations_stop_a_second_creation_until_observed() -> None:
    h = harness()
    ds = daemon_set()
    h.store(ds)
    h.cache(node("a"))
    controller = daemonset.new(h.ctx)
    await controller.sync("kube-system/agent")
    await controller.sync("kube-system/agent")
    assert len(h.client.writes("create", "Pod")) == 1
    controller._pod_added(h.client.writes("create", "Pod")[0].obj)
    assert controller.expectations.satisfied("kube-system/agent")


async def test_selecting_everything_is_refused() -> None:
    h = harness()
    ds = daemon_set()
    assert ds.spec is not None
    ds.spec.selector = LabelSelector()
    h.store(ds)
    h.cache(node("a"))
    await daemonset.new(h.ctx).sync("kube-system/agent")
    assert h.recorder.reasons() == ["SelectingAll"]
    assert h.client.actions == []


async def test_old_revisions_beyond_the_limit_are_deleted() -> None:
    h = harness()
    ds = daemon_set(image="agent:9")
    assert ds.spec is not None
    ds.spec.revision_history_limit = 1
    h.store(ds)
    for i in range(3):
        old = daemon_set(image=f"agent:{i}")
        old.metadata.uid = ds.metadata.uid
        assert old.spec is not None
        h.store(stamp(new_revision(old, old.spec.template, i + 1, 0)))
    await daemonset.new(h.ctx).sync("kube-system/agent")
    assert len(h.client.writes("delete", "ControllerRevision")) == 2
    assert h.client.writes("create", "ControllerRevision")[0].obj.revision == 4
