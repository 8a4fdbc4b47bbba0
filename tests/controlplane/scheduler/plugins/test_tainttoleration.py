from __future__ import annotations

from typing import Any

import pytest

from controlplane.scheduler.framework.interface import (
    SUCCESS,
    Code,
    CycleState,
    EventResource,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins import tainttoleration
from kube.api.kinds.core_v1.node import Taint
from kube.api.kinds.core_v1.pod import Pod, Toleration
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod


def taint(key: str, value: str | None, effect: str) -> Taint:
    return Taint(key=key, value=value, effect=effect)


def equal(key: str, value: str, effect: str | None = None) -> Toleration:
    return Toleration(key=key, operator="Equal", value=value, effect=effect)


@pytest.mark.parametrize(
    ("tolerations", "taints", "expected"),
    [
        pytest.param([], [], SUCCESS, id="no-taints"),
        pytest.param(
            [],
            [taint("dedicated", "user1", "NoSchedule")],
            Status.unresolvable("node(s) had untolerated taint {dedicated: user1}"),
            id="untolerated-no-schedule",
        ),
        pytest.param(
            [],
            [taint("dedicated", None, "NoExecute")],
            Status.unresolvable("node(s) had untolerated taint {dedicated: }"),
            id="untolerated-no-execute-empty-value",
        ),
        pytest.param(
            [equal("dedicated", "user1", "NoSchedule")],
            [taint("dedicated", "user1", "NoSchedule")],
            SUCCESS,
            id="tolerated-equal",
        ),
        pytest.param(
            [equal("dedicated", "user2", "NoSchedule")],
            [taint("dedicated", "user1", "NoSchedule")],
            Status.unresolvable("node(s) had untolerated taint {dedicated: user1}"),
            id="different-value",
        ),
        pytest.param(
            [Toleration(key="dedicated", operator="Exists", effect="NoSchedule")],
            [taint("dedicated", "user1", "NoSchedule")],
            SUCCESS,
            id="exists-any-value",
        ),
        pytest.param(
            [Toleration(key="dedicated", value="user1")],
            [taint("dedicated", "user1", "NoExecute")],
            SUCCESS,
            id="empty-operator-and-effect",
        ),
        pytest.param(
            [Toleration(operator="Exists")],
            [taint("a", "1", "NoSchedule"), taint("b", "2", "NoExecute")],
            SUCCESS,
            id="exists-without-key-tolerates-all",
        ),
        pytest.param(
            [equal("foo", "bar", "PreferNoSchedule")],
            [taint("foo", "bar", "NoSchedule")],
            Status.unresolvable("node(s) had untolerated taint {foo: bar}"),
            id="effect-mismatch",
        ),
        pytest.param(
            [], [taint("foo", "bar", "PreferNoSchedule")], SUCCESS, id="prefer-ignored-by-filter"
        ),
        pytest.param(
            [equal("a", "1")],
            [taint("a", "1", "NoSchedule"), taint("b", "2", "NoSchedule")],
            Status.unresolvable("node(s) had untolerated taint {b: 2}"),
            id="reports-first-untolerated",
        ),
        pytest.param(
            [Toleration(key="a", operator="Lt", value="1")],
            [taint("a", "1", "NoSchedule")],
            Status.unresolvable("node(s) had untolerated taint {a: 1}"),
            id="unknown-operator-tolerates-nothing",
        ),
    ],
)
def test_filter(tolerations: list[Toleration], taints: list[Taint], expected: Status) -> None:
    plugin = tainttoleration.new(None, FakeHandle())
    node = make_node_info(make_node(taints=taints))
    pod = PodInfo.of(make_pod(tolerations=tolerations))
    assert plugin.filter(CycleState(), pod, node) == expected


PREFER = "PreferNoSchedule"


@pytest.mark.parametrize(
    ("tolerations", "node_taints", "expected"),
    [
        pytest.param(
            [equal("foo", "bar", PREFER)],
            {"n1": [], "n2": [taint("foo", "bar", PREFER)], "n3": [taint("foo", "baz", PREFER)]},
            [100, 100, 0],
            id="tolerated-taint-counts-nothing",
        ),
        pytest.param(
            [],
            {
                "n1": [],
                "n2": [taint("a", "1", PREFER)],
                "n3": [taint("a", "1", PREFER), taint("b", "2", PREFER)],
            },
            [100, 50, 0],
            id="more-intolerable-taints-lower-score",
        ),
        pytest.param(
            [],
            {"n1": [taint("a", "1", "NoSchedule")], "n2": []},
            [100, 100],
            id="only-prefer-no-schedule-counts",
        ),
        pytest.param(
            [equal("a", "1", "NoSchedule")],
            {"n1": [taint("a", "1", PREFER)], "n2": []},
            [0, 100],
            id="toleration-of-other-effect-ignored",
        ),
        pytest.param(
            [equal("a", "1")],
            {"n1": [taint("a", "1", PREFER)], "n2": []},
            [100, 100],
            id="toleration-without-effect-counts",
        ),
    ],
)
def test_score(
    tolerations: list[Toleration], node_taints: dict[str, list[Taint]], expected: list[int]
) -> None:
    nodes = [make_node_info(make_node(name, taints=t)) for name, t in node_taints.items()]
    plugin = tainttoleration.new(None, FakeHandle(nodes))
    pod = PodInfo.of(make_pod(tolerations=tolerations))
    state = CycleState()
    assert plugin.pre_score(state, pod, nodes) == SUCCESS
    scores = []
    for node in nodes:
        score, status = plugin.score(state, pod, node)
        assert status == SUCCESS
        scores.append(score)
    names = [node.name for node in nodes]
    assert plugin.score_extensions().normalize_score(state, pod, names, scores) == SUCCESS
    assert scores == expected


def test_score_without_pre_score_fails() -> None:
    plugin = tainttoleration.new(None, FakeHandle())
    _, status = plugin.score(CycleState(), PodInfo.of(make_pod()), make_node_info(make_node()))
    assert status.code.name == "ERROR"


NO_SCHEDULE = taint("a", "1", "NoSchedule")


@pytest.mark.parametrize(
    ("resource", "pod", "old", "new", "expected"),
    [
        pytest.param(
            EventResource.NODE, make_pod(), None, make_node(), QueueingHint.QUEUE, id="clean-add"
        ),
        pytest.param(
            EventResource.NODE,
            make_pod(),
            None,
            make_node(taints=[NO_SCHEDULE]),
            QueueingHint.SKIP,
            id="tainted-add",
        ),
        pytest.param(
            EventResource.NODE,
            make_pod(),
            make_node(taints=[NO_SCHEDULE]),
            make_node(),
            QueueingHint.QUEUE,
            id="taint-removed",
        ),
        pytest.param(
            EventResource.NODE,
            make_pod(),
            make_node(),
            make_node(labels={"x": "y"}),
            QueueingHint.SKIP,
            id="was-already-tolerated",
        ),
        pytest.param(
            EventResource.NODE,
            make_pod(tolerations=[equal("a", "1")]),
            None,
            make_node(taints=[NO_SCHEDULE]),
            QueueingHint.QUEUE,
            id="tolerated-add",
        ),
        pytest.param(
            EventResource.POD,
            make_pod(),
            make_pod(),
            make_pod(tolerations=[equal("a", "1")]),
            QueueingHint.QUEUE,
            id="own-toleration-added",
        ),
        pytest.param(
            EventResource.POD,
            make_pod(),
            make_pod("other"),
            make_pod("other", tolerations=[equal("a", "1")]),
            QueueingHint.SKIP,
            id="another-pod",
        ),
    ],
)
def test_events_to_register(
    resource: EventResource, pod: Pod, old: Any, new: Any, expected: QueueingHint
) -> None:
    events = tainttoleration.new(None, FakeHandle()).events_to_register()
    [registered] = [e for e in events if e.event.resource is resource]
    assert registered.hint is not None
    assert registered.hint(pod, old, new) is expected


NOT_FOUND = Status.failed("node not found")
UNTOLERATED_A = Status.unresolvable("node(s) had untolerated taint {a: 1}")
UNTOLERATED_B = Status.unresolvable("node(s) had untolerated taint {b: 2}")
NODE_TAINTS: list[list[Taint] | None] = [
    [],
    [taint("a", "1", "NoSchedule")],
    [],
    [taint("a", "1", "NoSchedule")],
    [taint("b", "2", "NoExecute"), taint("a", "1", "NoSchedule")],
    [taint("c", "3", PREFER)],
    [taint("c", "3", PREFER), taint("d", "4", PREFER), taint("a", "1", PREFER)],
    None,
]


def batch_nodes() -> list[NodeInfo]:
    """Untainted nodes, repeated taints, several effects, and a NodeInfo without its node."""
    return [
        NodeInfo() if taints is None else make_node_info(make_node(f"n{i}", taints=taints))
        for i, taints in enumerate(NODE_TAINTS)
    ]


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param(
            [],
            [
                SUCCESS,
                UNTOLERATED_A,
                SUCCESS,
                UNTOLERATED_A,
                UNTOLERATED_B,
                SUCCESS,
                SUCCESS,
                NOT_FOUND,
            ],
            id="no-tolerations",
        ),
        pytest.param(
            [equal("a", "1")],
            [SUCCESS, SUCCESS, SUCCESS, SUCCESS, UNTOLERATED_B, SUCCESS, SUCCESS, NOT_FOUND],
            id="tolerates-a",
        ),
        pytest.param(
            [Toleration(operator="Exists")],
            [SUCCESS, SUCCESS, SUCCESS, SUCCESS, SUCCESS, SUCCESS, SUCCESS, NOT_FOUND],
            id="tolerates-everything",
        ),
    ],
)
def test_filter_nodes_matches_filter(tolerations: list[Toleration], expected: list[Status]) -> None:
    plugin = tainttoleration.new(None, FakeHandle())
    nodes = batch_nodes()
    pod = PodInfo.of(make_pod(tolerations=tolerations))
    state = CycleState()
    statuses = plugin.filter_nodes(state, pod, nodes)
    assert statuses == expected
    assert [plugin.filter(state, pod, node) for node in nodes] == statuses
    assert all(status is SUCCESS for status in statuses if status.is_success)


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param([], [0, 0, 0, 0, 0, 1, 3], id="no-tolerations"),
        pytest.param([equal("c", "3", PREFER)], [0, 0, 0, 0, 0, 0, 2], id="tolerates-c"),
        pytest.param([equal("a", "1", "NoSchedule")], [0, 0, 0, 0, 0, 1, 3], id="other-effect"),
        pytest.param([Toleration(operator="Exists")], [0] * 7, id="tolerates-everything"),
    ],
)
def test_score_nodes_matches_score(tolerations: list[Toleration], expected: list[int]) -> None:
    plugin = tainttoleration.new(None, FakeHandle())
    nodes = batch_nodes()[:-1]
    pod = PodInfo.of(make_pod(tolerations=tolerations))
    state = CycleState()
    assert plugin.pre_score(state, pod, nodes) == SUCCESS
    assert plugin.score_nodes(state, pod, nodes) == (expected, SUCCESS)
    assert [plugin.score(state, pod, node) for node in nodes] == [
        (score, SUCCESS) for score in expected
    ]


@pytest.mark.parametrize(
    ("pre_score", "error"),
    [
        pytest.param(False, "failed to read", id="without-pre-score"),
        pytest.param(True, "node not found", id="node-not-found"),
    ],
)
def test_score_nodes_error(pre_score: bool, error: str) -> None:
    plugin = tainttoleration.new(None, FakeHandle())
    pod = PodInfo.of(make_pod())
    state = CycleState()
    if pre_score:
        plugin.pre_score(state, pod, [])
    scores, status = plugin.score_nodes(state, pod, batch_nodes())
    assert scores == []
    assert status.code is Code.ERROR
    assert error in status.message
