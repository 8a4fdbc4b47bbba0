"""The taint-eviction controller, with fake informers, a fake API and a fake clock."""

from __future__ import annotations

import pytest

from controlplane.controllers import tainteviction
from kube.api.kinds.core_v1.node import Node, NodeSpec, Taint
from kube.api.kinds.core_v1.pod import Pod, Toleration
from kube.api.meta_v1 import ObjectMeta
from tests import builders
from tests.controlplane.controllers.fakes import Harness, harness, stamp

UNREACHABLE = "node.kubernetes.io/unreachable"


def node(*taints: Taint) -> Node:
    return stamp(Node(metadata=ObjectMeta(name="n1"), spec=NodeSpec(taints=list(taints) or None)))


def pod(*tolerations: Toleration) -> Pod:
    return stamp(
        builders.pod(node_name="n1", phase="Running", tolerations=list(tolerations) or None)
    )


def tolerate(seconds: int | None, key: str = UNREACHABLE) -> Toleration:
    return Toleration(key=key, operator="Exists", effect="NoExecute", toleration_seconds=seconds)


NO_EXECUTE = Taint(key=UNREACHABLE, effect="NoExecute")


def deleted(h: Harness) -> list[str]:
    return [a.name for a in h.client.writes("delete", "Pod")]


@pytest.mark.parametrize(
    ("taints", "tolerations", "now", "after_300"),
    [
        pytest.param([NO_EXECUTE], [], True, True, id="untolerated-deleted-now"),
        pytest.param(
            [NO_EXECUTE, Taint(key="other", effect="NoExecute")],
            [tolerate(None)],
            True,
            True,
            id="one-taint-untolerated",
        ),
        pytest.param([NO_EXECUTE], [tolerate(None)], False, False, id="tolerated-forever"),
        pytest.param([NO_EXECUTE], [tolerate(300)], False, True, id="toleration-seconds"),
        pytest.param([NO_EXECUTE], [tolerate(0)], True, True, id="zero-seconds-now"),
        pytest.param(
            [NO_EXECUTE, Taint(key="other", effect="NoExecute")],
            [tolerate(600), tolerate(300, "other")],
            False,
            True,
            id="shortest-toleration-wins",
        ),
        pytest.param(
            [Taint(key=UNREACHABLE, effect="NoSchedule")],
            [],
            False,
            False,
            id="no-schedule-ignored",
        ),
    ],
)
async def test_eviction(
    taints: list[Taint], tolerations: list[Toleration], now: bool, after_300: bool
) -> None:
    h = harness()
    h.store(node(*taints), pod(*tolerations))
    controller = tainteviction.new(h.ctx)
    await controller.sync("default/web")
    assert deleted(h) == (["web"] if now else [])
    if not now:
        await h.clock.advance(299)
        await controller.sync("default/web")
        assert deleted(h) == []
        await h.clock.advance(1)
        await controller.sync("default/web")
        assert deleted(h) == (["web"] if after_300 else [])


async def test_deletion_marks_the_pod_and_records_an_event() -> None:
    h = harness()
    h.store(node(NO_EXECUTE), pod())
    await tainteviction.new(h.ctx).sync("default/web")
    assert [(a.verb, a.subresource) for a in h.client.actions] == [
        ("patch", "status"),
        ("delete", ""),
    ]
    condition = h.client.actions[0].obj["status"]["conditions"][0]
    assert (condition["type"], condition["reason"]) == (
        "DisruptionTarget",
        "DeletionByTaintManager",
    )
    assert h.client.actions[1].obj["gracePeriodSeconds"] is None
    assert h.recorder.events == [
        ("Normal", "TaintManagerEviction", "Marking for deletion Pod default/web", "web")
    ]


async def test_removing_the_taint_cancels_the_deletion() -> None:
    h = harness()
    h.store(node(NO_EXECUTE), pod(tolerate(300)))
    controller = tainteviction.new(h.ctx)
    await controller.sync("default/web")
    h.cache(node())
    await controller.sync("default/web")
    await h.clock.advance(300)
    await controller.sync("default/web")
    assert deleted(h) == []
    assert h.recorder.events == [
        ("Normal", "TaintManagerEviction", "Cancelling deletion of Pod default/web", "web")
    ]


async def test_a_pod_gone_meanwhile_is_not_an_error() -> None:
    h = harness()
    h.cache(node(NO_EXECUTE), pod())
    await tainteviction.new(h.ctx).sync("default/web")
    assert deleted(h) == []


async def test_a_new_no_execute_taint_enqueues_the_pods_of_the_node() -> None:
    h = harness()
    h.cache(pod())
    controller = tainteviction.new(h.ctx)
    controller._node_updated(node(), node(NO_EXECUTE))
    assert await controller.queue.get() == "default/web"
