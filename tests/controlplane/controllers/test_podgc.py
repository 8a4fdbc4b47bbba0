"""The pod-garbage-collector controller, with fake informers, a fake API and a fake clock."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import podgc
from controlplane.controllers.context import ControllerOptions
from kube.api.kinds.core_v1.node import Node, NodeSpec, Taint
from kube.api.kinds.core_v1.pod import Pod, PodStatus
from kube.api.meta_v1 import ObjectMeta
from tests import builders
from tests.controlplane.controllers.fakes import Harness, harness, stamp

START = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def pod(
    name: str,
    phase: str = "Running",
    *,
    node: str | None = "n1",
    age: int = 0,
    reason: str | None = None,
    terminating: bool = False,
) -> Pod:
    p = stamp(builders.pod(name, node_name=node), created=START - datetime.timedelta(seconds=age))
    p.status = PodStatus(phase=phase, reason=reason)
    if terminating:
        p.metadata.deletion_timestamp = START
    return p


def node(name: str = "n1", *taints: str) -> Node:
    spec = NodeSpec(taints=[Taint(key=k, effect="NoExecute") for k in taints] or None)
    return stamp(Node(metadata=ObjectMeta(name=name), spec=spec))


def deleted(h: Harness) -> list[str]:
    return [a.name for a in h.client.writes("delete", "Pod")]


@pytest.mark.parametrize(
    ("threshold", "pods", "expected"),
    [
        pytest.param(
            2,
            [
                pod("new", "Succeeded", age=1),
                pod("old", "Failed", age=3),
                pod("mid", "Succeeded", age=2),
                pod("running", age=9),
            ],
            ["old"],
            id="oldest-beyond-threshold",
        ),
        pytest.param(
            1,
            [pod("old", "Succeeded", age=9), pod("evicted", "Failed", reason="Evicted")],
            ["evicted"],
            id="evicted-first",
        ),
        pytest.param(
            0, [pod("a", "Succeeded"), pod("b", "Failed")], [], id="threshold-zero-disables"
        ),
        pytest.param(5, [pod("a", "Succeeded")], [], id="under-threshold"),
    ],
)
async def test_terminated_pods(threshold: int, pods: list[Pod], expected: list[str]) -> None:
    h = harness(ControllerOptions(terminated_pod_gc_threshold=threshold))
    h.store(node(), *pods)
    await podgc.new(h.ctx).sync(podgc.GC_KEY)
    assert deleted(h) == expected
    assert all(a.obj["gracePeriodSeconds"] == 0 for a in h.client.writes("delete"))
    assert h.client.writes("patch") == []


async def test_orphaned_pods_are_deleted_after_quarantine() -> None:
    h = harness()
    h.store(pod("orphan", node="gone"))
    controller = podgc.new(h.ctx)
    await controller.sync(podgc.GC_KEY)
    assert h.client.actions == []
    await h.clock.advance(podgc.QUARANTINE_TIME)
    await controller.sync(podgc.GC_KEY)
    patch, delete = h.client.actions
    assert (patch.verb, patch.subresource, delete.verb) == ("patch", "status", "delete")
    assert patch.obj["status"]["phase"] == "Failed"
    condition = patch.obj["status"]["conditions"][0]
    assert (condition["type"], condition["reason"], condition["message"]) == (
        "DisruptionTarget",
        "DeletionByPodGC",
        "PodGC: node no longer exists",
    )
    assert delete.obj["gracePeriodSeconds"] == 0


async def test_a_node_the_cache_misses_but_the_api_has_is_not_orphaning() -> None:
    h = harness()
    h.store(pod("web"))
    h.client.seed(node())
    controller = podgc.new(h.ctx)
    await controller.sync(podgc.GC_KEY)
    await h.clock.advance(podgc.QUARANTINE_TIME)
    await controller.sync(podgc.GC_KEY)
    assert h.client.actions == []


@pytest.mark.parametrize(
    ("pods", "nodes", "expected"),
    [
        pytest.param(
            [pod("pending", "Pending", node=None, terminating=True)],
            [],
            ["pending"],
            id="unscheduled-terminating",
        ),
        pytest.param([pod("pending", "Pending", node=None)], [], [], id="unscheduled-alive"),
        pytest.param(
            [pod("stuck", terminating=True)],
            [node("n1", "node.kubernetes.io/out-of-service")],
            ["stuck"],
            id="terminating-on-out-of-service-node",
        ),
        pytest.param([pod("stuck", terminating=True)], [node()], [], id="terminating-elsewhere"),
    ],
)
async def test_terminating_pods(pods: list[Pod], nodes: list[Node], expected: list[str]) -> None:
    h = harness()
    h.store(*nodes, *pods)
    await podgc.new(h.ctx).sync(podgc.GC_KEY)
    assert deleted(h) == expected


async def test_the_pass_re_enqueues_itself() -> None:
    h = harness()
    controller = podgc.new(h.ctx)
    await controller.sync(podgc.GC_KEY)
    await h.clock.advance(podgc.GC_CHECK_PERIOD)
    assert await controller.queue.get() == podgc.GC_KEY
