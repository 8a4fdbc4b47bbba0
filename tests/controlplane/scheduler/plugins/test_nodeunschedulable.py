from __future__ import annotations

from typing import Any

import pytest

from controlplane.scheduler.framework.interface import (
    SUCCESS,
    CycleState,
    EventResource,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins import nodeunschedulable
from kube.api.kinds.core_v1.pod import Pod, Toleration
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

UNSCHEDULABLE = Status.unresolvable("node(s) were unschedulable")
TOLERATE = Toleration(
    key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule"
)


@pytest.mark.parametrize(
    ("pod", "unschedulable", "expected"),
    [
        pytest.param(make_pod(), False, SUCCESS, id="schedulable-node"),
        pytest.param(make_pod(), True, UNSCHEDULABLE, id="cordoned-node"),
        pytest.param(make_pod(tolerations=[TOLERATE]), True, SUCCESS, id="tolerates-taint"),
        pytest.param(
            make_pod(tolerations=[Toleration(operator="Exists")]), True, SUCCESS, id="tolerates-all"
        ),
        pytest.param(
            make_pod(
                tolerations=[
                    Toleration(
                        key="node.kubernetes.io/unschedulable",
                        operator="Exists",
                        effect="NoExecute",
                    )
                ]
            ),
            True,
            UNSCHEDULABLE,
            id="wrong-effect",
        ),
    ],
)
def test_filter(pod: Pod, unschedulable: bool, expected: Status) -> None:
    plugin = nodeunschedulable.new(None, FakeHandle())
    node = make_node_info(make_node(unschedulable=unschedulable))
    assert plugin.filter(CycleState(), PodInfo.of(pod), node) == expected


def test_filter_without_node() -> None:
    plugin = nodeunschedulable.new(None, FakeHandle())
    status = plugin.filter(CycleState(), PodInfo.of(make_pod()), NodeInfo())
    assert status == Status.unresolvable("node(s) had unknown conditions")


@pytest.mark.parametrize(
    ("resource", "old", "new", "expected"),
    [
        pytest.param(EventResource.NODE, None, make_node(), QueueingHint.QUEUE, id="node-added"),
        pytest.param(
            EventResource.NODE,
            None,
            make_node(unschedulable=True),
            QueueingHint.SKIP,
            id="cordoned-node-added",
        ),
        pytest.param(
            EventResource.NODE,
            make_node(unschedulable=True),
            make_node(),
            QueueingHint.QUEUE,
            id="node-uncordoned",
        ),
        pytest.param(
            EventResource.NODE, make_node(), make_node(), QueueingHint.SKIP, id="node-unchanged"
        ),
        pytest.param(
            EventResource.POD,
            make_pod(),
            make_pod(tolerations=[TOLERATE]),
            QueueingHint.QUEUE,
            id="pod-tolerates",
        ),
        pytest.param(
            EventResource.POD,
            make_pod(),
            make_pod(tolerations=[Toleration(key="other", operator="Exists")]),
            QueueingHint.SKIP,
            id="pod-other-toleration",
        ),
        pytest.param(
            EventResource.POD,
            make_pod("other"),
            make_pod("other", tolerations=[TOLERATE]),
            QueueingHint.SKIP,
            id="another-pod",
        ),
    ],
)
def test_events_to_register(
    resource: EventResource, old: Any, new: Any, expected: QueueingHint
) -> None:
    events = nodeunschedulable.new(None, FakeHandle()).events_to_register()
    [registered] = [e for e in events if e.event.resource is resource]
    assert registered.hint is not None
    assert registered.hint(make_pod(), old, new) is expected


UNKNOWN = Status.unresolvable("node(s) had unknown conditions")


def batch_nodes() -> list[NodeInfo]:
    """Schedulable and cordoned nodes, and a NodeInfo without its node."""
    return [
        make_node_info(make_node("n0")),
        make_node_info(make_node("n1", unschedulable=True)),
        make_node_info(make_node("n2")),
        NodeInfo(),
        make_node_info(make_node("n4", unschedulable=True)),
    ]


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            make_pod(),
            [SUCCESS, UNSCHEDULABLE, SUCCESS, UNKNOWN, UNSCHEDULABLE],
            id="no-toleration",
        ),
        pytest.param(
            make_pod(tolerations=[TOLERATE]),
            [SUCCESS, SUCCESS, SUCCESS, UNKNOWN, SUCCESS],
            id="tolerates-taint",
        ),
    ],
)
def test_filter_nodes_matches_filter(pod: Pod, expected: list[Status]) -> None:
    plugin = nodeunschedulable.new(None, FakeHandle())
    nodes = batch_nodes()
    info = PodInfo.of(pod)
    state = CycleState()
    statuses = plugin.filter_nodes(state, info, nodes)
    assert statuses == expected
    assert [plugin.filter(state, info, node) for node in nodes] == statuses
    assert all(status is SUCCESS for status in statuses if status.is_success)
