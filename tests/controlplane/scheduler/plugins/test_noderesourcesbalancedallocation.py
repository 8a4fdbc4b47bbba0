from __future__ import annotations

from typing import Any

import pytest

from controlplane.scheduler.framework.interface import Code, CycleState, Status
from controlplane.scheduler.framework.types import PodInfo
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
