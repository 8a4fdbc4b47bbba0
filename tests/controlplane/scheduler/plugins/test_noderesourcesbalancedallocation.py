from __future__ import annotations

from typing import Any

import pytest

from controlplane.scheduler.framework.interface import SKIP, SUCCESS, Code, CycleState, Status
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins import noderesourcesbalancedallocation
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

SMALL = {"cpu": "4", "memory": "10000", "pods": "110"}
WITH_GPU = [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu"}]


@pytest.mark.parametrize(
    ("args", "requests", "allocatable", "existing", "want"),
    [
        pytest.param(None, {"cpu": "1", "memory": "2000"}, SMALL, [], 97, id="nearly-balanced"),
        pytest.param(None, {"cpu": "2", "memory": "5000"}, SMALL, [], 100, id="balanced"),
        pytest.param(
            None,
            {"cpu": "1", "memory": "2000"},
            SMALL,
            [{"cpu": "2", "memory": "6000"}],
            97,
            id="with-existing",
        ),
        pytest.param(None, {"cpu": "3600m", "memory": "1000"}, SMALL, [], 60, id="unbalanced"),
        pytest.param(None, {"cpu": "8", "memory": "5000"}, SMALL, [], 75, id="fraction-capped"),
        pytest.param(
            None,
            {"cpu": "1", "memory": "2000"},
            {"cpu": "4", "pods": "110"},
            [],
            100,
            id="one-resource-on-node",
        ),
        pytest.param(
            None,
            {"cpu": "1"},
            SMALL,
            [{"memory": "5000"}],
            87,
            id="actual-requests-not-non-zero",
        ),
        pytest.param(
            {"resources": WITH_GPU},
            {"cpu": "1", "memory": "2000", "example.com/gpu": "1"},
            {**SMALL, "example.com/gpu": "4"},
            [],
            97,
            id="three-resources",
        ),
        pytest.param(
            {"resources": WITH_GPU},
            {"cpu": "1", "memory": "2000", "example.com/gpu": "4"},
            {**SMALL, "example.com/gpu": "4"},
            [],
            63,
            id="three-resources-unbalanced",
        ),
        pytest.param(
            {"resources": WITH_GPU},
            {"cpu": "1", "memory": "2000"},
            {**SMALL, "example.com/gpu": "4"},
            [],
            97,
            id="unrequested-extended-left-out",
        ),
    ],
)
def test_score(
    args: dict[str, Any] | None,
    requests: dict[str, str],
    allocatable: dict[str, str],
    existing: list[dict[str, str]],
    want: int,
) -> None:
    plugin = noderesourcesbalancedallocation.new(args, FakeHandle())
    pod = PodInfo.of(make_pod(requests=requests))
    node = make_node_info(
        make_node(allocatable=allocatable),
        *(make_pod(f"e{i}", requests=r, node_name="n") for i, r in enumerate(existing)),
    )
    state = CycleState()
    assert plugin.pre_score(state, pod, [node]).is_success
    assert plugin.score(state, pod, node) == (want, Status())
    assert plugin.score(CycleState(), pod, node) == (want, Status()), "without PreScore"


def test_best_effort_pod_skips() -> None:
    plugin = noderesourcesbalancedallocation.new(None, FakeHandle())
    pod = PodInfo.of(make_pod())
    node = make_node_info(make_node(allocatable=SMALL))
    assert plugin.pre_score(CycleState(), pod, [node]).code is Code.SKIP
    assert plugin.score(CycleState(), pod, node) == (0, Status())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            {"resources": [{"name": "cpu", "weight": 2}]}, "must be 1", id="weight-not-one"
        ),
        pytest.param(
            {"resources": [{"name": "cpu"}, {"name": "cpu"}]},
            "Duplicate value: 'cpu'",
            id="duplicate",
        ),
    ],
)
def test_invalid_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        noderesourcesbalancedallocation.new(args, FakeHandle())


def _varied_nodes() -> list[NodeInfo]:
    """Nodes empty or busy in cpu, memory or a GPU, over-committed, or lacking a resource."""
    shapes: list[tuple[dict[str, str], list[dict[str, str]]]] = [
        (SMALL, []),
        (SMALL, [{"cpu": "3", "memory": "1000"}]),
        (SMALL, [{"cpu": "500m", "memory": "9000"}]),
        (SMALL, [{"cpu": "6", "memory": "20000"}]),
        ({**SMALL, "example.com/gpu": "4"}, [{"example.com/gpu": "3"}]),
        ({"memory": "1Gi", "pods": "10"}, []),
        ({"cpu": "1", "pods": "10"}, [{"cpu": "500m"}]),
        ({}, []),
    ]
    return [
        make_node_info(
            make_node(f"n{i}", allocatable=allocatable),
            *(make_pod(f"e{i}-{j}", requests=r, node_name=f"n{i}") for j, r in enumerate(pods)),
        )
        for i, (allocatable, pods) in enumerate(shapes)
    ]


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(None, id="cpu-memory"),
        pytest.param({"resources": [{"name": "memory"}, {"name": "cpu"}]}, id="memory-cpu"),
        pytest.param({"resources": WITH_GPU}, id="three-resources"),
        pytest.param({"resources": [{"name": "cpu"}]}, id="cpu-alone"),
    ],
)
@pytest.mark.parametrize(
    "requests",
    [
        pytest.param({"cpu": "1", "memory": "2000"}, id="cpu-memory"),
        pytest.param({"cpu": "1"}, id="cpu-only"),
        pytest.param({"cpu": "500m", "memory": "2000", "example.com/gpu": "1"}, id="with-gpu"),
        pytest.param({"cpu": "8", "memory": "50000"}, id="over-committing"),
    ],
)
def test_score_nodes_equals_score(args: dict[str, Any] | None, requests: dict[str, str]) -> None:
    plugin = noderesourcesbalancedallocation.new(args, FakeHandle())
    pod = PodInfo.of(make_pod(requests=requests))
    nodes = _varied_nodes()
    state = CycleState()
    assert plugin.pre_score(state, pod, nodes).is_success
    scores, status = plugin.score_nodes(state, pod, nodes)
    assert status is SUCCESS
    assert [(score, SUCCESS) for score in scores] == [
        plugin.score(state, pod, node) for node in nodes
    ]
    assert plugin.score_nodes(CycleState(), pod, nodes) == (scores, SUCCESS), "without PreScore"


@pytest.mark.parametrize(
    "requests",
    [
        pytest.param({"cpu": "1", "memory": "2000"}, id="cpu-memory"),
        pytest.param({"cpu": "1"}, id="cpu-only"),
        pytest.param({"cpu": "8", "memory": "50000"}, id="over-committing"),
    ],
)
def test_cpu_memory_shortcut_matches_general_scoring(requests: dict[str, str]) -> None:
    """Exactly [cpu, memory] takes a shortcut; memory first takes the general path."""

    def scores(args: dict[str, Any] | None) -> list[int]:
        plugin = noderesourcesbalancedallocation.new(args, FakeHandle())
        pod = PodInfo.of(make_pod(requests=requests))
        return plugin.score_nodes(CycleState(), pod, _varied_nodes())[0]

    assert scores(None) == scores({"resources": [{"name": "memory"}, {"name": "cpu"}]})


@pytest.mark.parametrize(
    ("args", "requests"),
    [
        pytest.param(None, None, id="no-requests"),
        pytest.param(None, {"example.com/gpu": "1"}, id="only-unscored-resources"),
        pytest.param({"resources": [{"name": "cpu"}]}, {"memory": "1Gi"}, id="unconfigured"),
    ],
)
def test_best_effort_pod_skips_every_node(
    args: dict[str, Any] | None, requests: dict[str, str] | None
) -> None:
    plugin = noderesourcesbalancedallocation.new(args, FakeHandle())
    pod = PodInfo.of(make_pod(requests=requests))
    nodes = _varied_nodes()
    assert plugin.pre_score(CycleState(), pod, nodes) is SKIP
    assert plugin.score_nodes(CycleState(), pod, nodes) == ([0] * len(nodes), SUCCESS)
