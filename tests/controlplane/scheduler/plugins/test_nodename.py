from __future__ import annotations

import pytest

from controlplane.scheduler.framework.interface import (
    SUCCESS,
    ActionType,
    CycleState,
    EventResource,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins import nodename
from kube.api.kinds.core_v1.pod import Pod
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

MISMATCH = Status.unresolvable("node(s) didn't match the requested node name")


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod(), SUCCESS, id="no-node-name"),
        pytest.param(make_pod(node_name="n1"), SUCCESS, id="same-name"),
        pytest.param(make_pod(node_name="n2"), MISMATCH, id="other-name"),
    ],
)
def test_filter(pod: Pod, expected: Status) -> None:
    plugin = nodename.new(None, FakeHandle())
    node = make_node_info(make_node("n1"))
    assert plugin.filter(CycleState(), PodInfo.of(pod), node) == expected


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod(), [SUCCESS, SUCCESS, SUCCESS, MISMATCH], id="no-node-name"),
        pytest.param(
            make_pod(node_name="n1"), [MISMATCH, SUCCESS, MISMATCH, MISMATCH], id="names-n1"
        ),
        pytest.param(
            make_pod(node_name="n9"), [MISMATCH, MISMATCH, MISMATCH, MISMATCH], id="names-absent"
        ),
    ],
)
def test_filter_nodes_matches_filter(pod: Pod, expected: list[Status]) -> None:
    plugin = nodename.new(None, FakeHandle())
    nodes = [make_node_info(make_node(name)) for name in ("n0", "n1", "n2")] + [NodeInfo()]
    info = PodInfo.of(pod)
    state = CycleState()
    statuses = plugin.filter_nodes(state, info, nodes)
    assert statuses == expected
    assert [plugin.filter(state, info, node) for node in nodes] == statuses
    assert all(status is SUCCESS for status in statuses if status.is_success)


@pytest.mark.parametrize(
    ("node_name", "expected"),
    [
        pytest.param("n1", QueueingHint.QUEUE, id="the-named-node"),
        pytest.param("n2", QueueingHint.SKIP, id="another-node"),
    ],
)
def test_events_to_register(node_name: str, expected: QueueingHint) -> None:
    [registered] = nodename.new(None, FakeHandle()).events_to_register()
    assert registered.event.resource is EventResource.NODE
    assert registered.event.action == ActionType.ADD
    assert registered.hint is not None
    assert registered.hint(make_pod(node_name="n1"), None, make_node(node_name)) is expected
