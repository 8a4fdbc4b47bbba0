"""The node-lifecycle controller, with fake informers, a fake API and a fake clock."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import nodelifecycle
from controlplane.controllers.context import ControllerOptions
from kube.api.kinds.coordination_v1 import Lease, LeaseSpec
from kube.api.kinds.core_v1.node import Node, NodeCondition, NodeSpec, NodeStatus, Taint
from kube.api.kinds.core_v1.pod import Pod, PodCondition, PodSpec, PodStatus
from kube.api.meta_v1 import ObjectMeta
from kube.api.struct import micro_time
from tests.controlplane.controllers.fakes import Harness, harness, stamp

START = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")


def node(
    name: str,
    ready: str | None = "True",
    *,
    taints: list[tuple[str, str]] | None = None,
    heartbeat: datetime.datetime = START,
) -> Node:
    conditions = (
        [
            NodeCondition(
                type=t,
                status=ready if t == "Ready" else "False",
                last_heartbeat_time=heartbeat,
                last_transition_time=START,
            )
            for t in CONDITIONS
        ]
        if ready is not None
        else None
    )
    return stamp(
        Node(
            metadata=ObjectMeta(name=name),
            spec=NodeSpec(taints=[Taint(key=k, effect=e) for k, e in taints or ()] or None),
            status=NodeStatus(conditions=conditions),
        ),
        created=START,
    )


def lease(name: str, renewed: datetime.datetime = START) -> Lease:
    return stamp(
        Lease(
            metadata=ObjectMeta(name=name, namespace="kube-node-lease"),
            spec=LeaseSpec(holder_identity=name, renew_time=micro_time(renewed)),
        )
    )


def taints(h: Harness) -> list[tuple[str, str]]:
    patches = h.client.writes("patch", "Node")
    return [(t["key"], t["effect"]) for t in patches[-1].obj["spec"]["taints"]] if patches else []


def statuses(h: Harness) -> list[tuple[str, str, str]]:
    [update] = h.client.writes("update", "Node")
    return [(c.type, c.status, c.reason) for c in update.obj.status.conditions]


async def stale(
    *nodes: Node, rate: float = 0.1
) -> tuple[Harness, nodelifecycle.NodeLifecycleController]:
    """A controller that saw ``nodes`` at START; the clock is then past the grace period."""
    h = harness(ControllerOptions(node_eviction_rate=rate))
    h.store(*nodes)
    controller = nodelifecycle.new(h.ctx)
    for n in nodes:
        await controller.sync(n.metadata.name or "")
    h.client.actions.clear()
    h.recorder.events.clear()
    await h.clock.advance(41)
    return h, controller


async def test_silent_node_becomes_unknown_and_tainted() -> None:
    h, controller = await stale(node("n1"), node("n2"))
    h.cache(lease("n2", START + datetime.timedelta(seconds=40)))
    await controller.sync("n2")
    assert h.client.actions == []
    await controller.sync("n1")
    assert statuses(h) == [(t, "Unknown", "NodeStatusUnknown") for t in CONDITIONS]
    [update] = h.client.writes("update", "Node")
    assert update.obj.status.conditions[0].message == "Kubelet stopped posting node status."
    assert taints(h) == [
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    ]
    assert h.client.writes("patch")[0].obj["spec"]["taints"][1]["timeAdded"]
    assert h.recorder.reasons() == ["NodeNotReady"]


async def test_a_renewed_lease_keeps_the_node_healthy() -> None:
    h = harness()
    h.store(node("n1"), lease("n1"))
    controller = nodelifecycle.new(h.ctx)
    await controller.sync("n1")
    await h.clock.advance(30)
    h.cache(lease("n1", START + datetime.timedelta(seconds=30)))
    await controller.sync("n1")
    await h.clock.advance(30)
    await controller.sync("n1")
    assert h.client.actions == []


async def test_a_node_that_never_posted_gets_the_startup_grace() -> None:
    h = harness()
    h.store(node("n1", ready=None), node("n2"))
    controller = nodelifecycle.new(h.ctx)
    await h.clock.advance(41)
    await controller.sync("n1")
    assert h.client.writes("update") == []
    await h.clock.advance(20)
    await controller.sync("n1")
    assert statuses(h) == [(t, "Unknown", "NodeStatusNeverUpdated") for t in CONDITIONS]


@pytest.mark.parametrize(
    ("ready", "existing", "expected"),
    [
        pytest.param(
            "False",
            [],
            [
                ("node.kubernetes.io/not-ready", "NoSchedule"),
                ("node.kubernetes.io/not-ready", "NoExecute"),
            ],
            id="not-ready",
        ),
        pytest.param(
            "False",
            [
                ("node.kubernetes.io/unreachable", "NoSchedule"),
                ("node.kubernetes.io/unreachable", "NoExecute"),
            ],
            [
                ("node.kubernetes.io/not-ready", "NoSchedule"),
                ("node.kubernetes.io/not-ready", "NoExecute"),
            ],
            id="unreachable-swapped-for-not-ready",
        ),
        pytest.param(
            "True",
            [
                ("node.kubernetes.io/unreachable", "NoSchedule"),
                ("node.kubernetes.io/unreachable", "NoExecute"),
                ("dedicated", "NoSchedule"),
            ],
            [("dedicated", "NoSchedule")],
            id="ready-again-taints-removed",
        ),
        pytest.param("True", [], None, id="healthy-untouched"),
    ],
)
async def test_taints_follow_conditions(
    ready: str, existing: list[tuple[str, str]], expected: list[tuple[str, str]] | None
) -> None:
    h = harness()
    h.store(node("n1", ready, taints=existing), node("n2"))
    await nodelifecycle.new(h.ctx).sync("n1")
    if expected is None:
        assert h.client.actions == []
    else:
        assert sorted(taints(h)) == sorted(expected)


async def test_unschedulable_node_gets_its_taint() -> None:
    h = harness()
    n1 = node("n1")
    assert n1.spec is not None
    n1.spec.unschedulable = True
    h.store(n1)
    await nodelifecycle.new(h.ctx).sync("n1")
    assert taints(h) == [("node.kubernetes.io/unschedulable", "NoSchedule")]


async def test_no_execute_taints_are_rate_limited() -> None:
    h, controller = await stale(node("n1"), node("n2"), node("n3"), rate=0.1)
    h.cache(lease("n3", START + datetime.timedelta(seconds=41)))
    await controller.sync("n1")
    assert ("node.kubernetes.io/unreachable", "NoExecute") in taints(h)
    await controller.sync("n2")
    assert taints(h) == [("node.kubernetes.io/unreachable", "NoSchedule")]
    h.client.actions.clear()
    h.cache(h.client.objects[(Node, None, "n2")])
    await h.clock.advance(10)
    await controller.sync("n2")
    assert ("node.kubernetes.io/unreachable", "NoExecute") in taints(h)


async def test_no_eviction_when_no_node_is_ready() -> None:
    h, controller = await stale(node("n1"))
    await controller.sync("n1")
    assert [u.name for u in h.client.writes("update", "Node")] == ["n1"]
    assert taints(h) == [("node.kubernetes.io/unreachable", "NoSchedule")]


async def test_pods_on_a_silent_node_are_marked_not_ready() -> None:
    pod = stamp(
        Pod(
            metadata=ObjectMeta(name="web", namespace="default"),
            spec=PodSpec(node_name="n1"),
            status=PodStatus(
                phase="Running", conditions=[PodCondition(type="Ready", status="True")]
            ),
        )
    )
    h, controller = await stale(node("n1"), node("n2"))
    h.store(pod)
    await controller.sync("n1")
    [update] = h.client.writes("update", "Pod")
    assert update.subresource == "status"
    assert update.obj.status.conditions[0].status == "False"
    assert ("Warning", "NodeNotReady", "Node is not ready", "web") in h.recorder.events


async def test_registered_and_removed_nodes_are_reported() -> None:
    h = harness()
    n1 = node("n1")
    h.store(n1)
    controller = nodelifecycle.new(h.ctx)
    await controller.sync("n1")
    h.uncache(n1)
    await controller.sync("n1")
    assert [m for _, _, m, _ in h.recorder.events] == [
        "Node n1 event: Registered Node n1 in Controller",
        "Node n1 event: Removing Node n1 from Controller",
    ]


async def test_monitor_key_enqueues_every_node_and_itself() -> None:
    h = harness()
    h.cache(node("n1"), node("n2"))
    controller = nodelifecycle.new(h.ctx)
    await controller.sync(nodelifecycle.MONITOR_KEY)
    assert {await controller.queue.get(), await controller.queue.get()} == {"n1", "n2"}
    await h.clock.advance(nodelifecycle.NODE_MONITOR_PERIOD)
    assert await controller.queue.get() == nodelifecycle.MONITOR_KEY
