from __future__ import annotations

from typing import Any

import pytest

from controlplane.scheduler.framework.interface import (
    SUCCESS,
    Code,
    CycleState,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins import noderesourcesfit
from kube.api.kinds.core_v1.pod import Container, PodStatus, ResourceRequirements
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

SMALL = {"cpu": "4", "memory": "10000", "pods": "110"}


def _filter(
    args: dict[str, Any] | None,
    requests: dict[str, str] | None,
    allocatable: dict[str, str],
    existing: list[dict[str, str]],
    init_containers: list[Container] | None = None,
) -> Status:
    plugin = noderesourcesfit.new(args, FakeHandle())
    pod = PodInfo.of(make_pod(requests=requests, init_containers=init_containers))
    node = make_node_info(
        make_node(allocatable=allocatable),
        *(make_pod(f"e{i}", requests=r, node_name="n") for i, r in enumerate(existing)),
    )
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, [node])
    assert status.is_success
    return plugin.filter(state, pod, node)


@pytest.mark.parametrize(
    ("args", "requests", "allocatable", "existing", "want"),
    [
        pytest.param(None, None, SMALL, [{"cpu": "4"}], Status(), id="no-requests-fit-full-node"),
        pytest.param(
            None, {"cpu": "1", "memory": "5000"}, SMALL, [{"cpu": "3"}], Status(), id="exact-fit"
        ),
        pytest.param(
            None,
            {"cpu": "2"},
            SMALL,
            [{"cpu": "3"}],
            Status.unschedulable("Insufficient cpu"),
            id="insufficient-cpu",
        ),
        pytest.param(
            None,
            {"cpu": "2", "memory": "6000"},
            SMALL,
            [{"cpu": "3", "memory": "5000"}],
            Status.unschedulable("Insufficient cpu", "Insufficient memory"),
            id="insufficient-cpu-and-memory",
        ),
        pytest.param(
            None,
            {"memory": "20000"},
            SMALL,
            [],
            Status.unresolvable("Insufficient memory"),
            id="larger-than-node-unresolvable",
        ),
        pytest.param(
            None,
            {"ephemeral-storage": "2Gi"},
            {**SMALL, "ephemeral-storage": "1Gi"},
            [],
            Status.unresolvable("Insufficient ephemeral-storage"),
            id="ephemeral-storage",
        ),
        pytest.param(
            None,
            None,
            {**SMALL, "pods": "1"},
            [{}],
            Status.unschedulable("Too many pods"),
            id="too-many-pods",
        ),
        pytest.param(
            None,
            {"cpu": "2"},
            {**SMALL, "pods": "1"},
            [{"cpu": "3"}],
            Status.unschedulable("Too many pods", "Insufficient cpu"),
            id="too-many-pods-and-cpu",
        ),
        pytest.param(
            None,
            {"example.com/gpu": "2"},
            {**SMALL, "example.com/gpu": "2"},
            [{"example.com/gpu": "1"}],
            Status.unschedulable("Insufficient example.com/gpu"),
            id="insufficient-extended",
        ),
        pytest.param(
            None,
            {"example.com/gpu": "1"},
            SMALL,
            [],
            Status.unresolvable("Insufficient example.com/gpu"),
            id="extended-missing-on-node",
        ),
        pytest.param(
            {"ignoredResources": ["example.com/gpu"]},
            {"example.com/gpu": "1"},
            SMALL,
            [],
            Status(),
            id="ignored-resource",
        ),
        pytest.param(
            {"ignoredResourceGroups": ["example.com"]},
            {"example.com/gpu": "1"},
            SMALL,
            [],
            Status(),
            id="ignored-resource-group",
        ),
        pytest.param(
            {"ignoredResourceGroups": ["hugepages-2Mi"]},
            {"hugepages-2Mi": "2Mi"},
            SMALL,
            [],
            Status.unresolvable("Insufficient hugepages-2Mi"),
            id="native-resources-never-ignored",
        ),
    ],
)
def test_filter(
    args: dict[str, Any] | None,
    requests: dict[str, str] | None,
    allocatable: dict[str, str],
    existing: list[dict[str, str]],
    want: Status,
) -> None:
    assert _filter(args, requests, allocatable, existing) == want


def test_filter_counts_the_largest_init_container() -> None:
    init = [Container(name="i", image="i", resources=ResourceRequirements(requests={"cpu": "3"}))]
    status = _filter(None, {"cpu": "1"}, SMALL, [{"cpu": "2"}], init_containers=init)
    assert status == Status.unschedulable("Insufficient cpu")


def test_filter_without_pre_filter_is_an_error() -> None:
    plugin = noderesourcesfit.new(None, FakeHandle())
    node = make_node_info(make_node())
    status = plugin.filter(CycleState(), PodInfo.of(make_pod()), node)
    assert status.code is Code.ERROR


SHAPE_UP = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
SHAPE_DOWN_STEEP = [
    {"utilization": 0, "score": 10},
    {"utilization": 30, "score": 0},
    {"utilization": 100, "score": 0},
]


@pytest.mark.parametrize(
    ("strategy", "requests", "allocatable", "existing", "want"),
    [
        pytest.param({}, {"cpu": "1", "memory": "2000"}, SMALL, [], 77, id="least-default"),
        pytest.param(
            {},
            {"cpu": "1", "memory": "2000"},
            SMALL,
            [{"cpu": "1", "memory": "3000"}],
            50,
            id="least-with-existing",
        ),
        pytest.param(
            {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": 3}, {"name": "memory"}],
            },
            {"cpu": "1", "memory": "2000"},
            SMALL,
            [],
            76,
            id="least-weighted",
        ),
        pytest.param({}, None, {"cpu": "4", "memory": "8Gi"}, [], 97, id="least-non-zero-defaults"),
        pytest.param(
            {}, {"cpu": "5", "memory": "2000"}, SMALL, [], 40, id="least-overcommitted-zero"
        ),
        pytest.param(
            {"type": "MostAllocated"}, {"cpu": "1", "memory": "2000"}, SMALL, [], 22, id="most"
        ),
        pytest.param(
            {"type": "MostAllocated"},
            {"cpu": "8", "memory": "2000"},
            SMALL,
            [],
            60,
            id="most-overcommitted-full",
        ),
        pytest.param(
            {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": SHAPE_UP}},
            {"cpu": "1", "memory": "2000"},
            SMALL,
            [],
            23,
            id="ratio-rounds-half-up",
        ),
        pytest.param(
            {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": SHAPE_DOWN_STEEP},
            },
            {"cpu": "1", "memory": "2000"},
            SMALL,
            [],
            26,
            id="ratio-descending-truncates-toward-zero",
        ),
        pytest.param(
            {
                "resources": [
                    {"name": "cpu"},
                    {"name": "memory"},
                    {"name": "example.com/gpu", "weight": 5},
                ]
            },
            {"cpu": "1", "memory": "2000"},
            {**SMALL, "example.com/gpu": "4"},
            [],
            77,
            id="unrequested-extended-left-out",
        ),
        pytest.param(
            {
                "resources": [
                    {"name": "cpu"},
                    {"name": "memory"},
                    {"name": "example.com/gpu", "weight": 2},
                ]
            },
            {"cpu": "1", "memory": "2000", "example.com/gpu": "1"},
            {**SMALL, "example.com/gpu": "4"},
            [],
            76,
            id="requested-extended-counts",
        ),
    ],
)
def test_score(
    strategy: dict[str, Any],
    requests: dict[str, str] | None,
    allocatable: dict[str, str],
    existing: list[dict[str, str]],
    want: int,
) -> None:
    plugin = noderesourcesfit.new({"scoringStrategy": strategy}, FakeHandle())
    pod = PodInfo.of(make_pod(requests=requests))
    node = make_node_info(
        make_node(allocatable=allocatable),
        *(make_pod(f"e{i}", requests=r, node_name="n") for i, r in enumerate(existing)),
    )
    state = CycleState()
    assert plugin.pre_score(state, pod, [node]).is_success
    assert plugin.score(state, pod, node) == (want, Status())
    assert plugin.score(CycleState(), pod, node) == (want, Status()), "without PreScore"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            {"scoringStrategy": {"type": "Balanced"}},
            "scoring strategy Balanced is not supported",
            id="unknown-strategy",
        ),
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}},
            "resource weight of cpu not in valid range [1, 100]",
            id="weight-out-of-range",
        ),
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": "cpu"}, {"name": "cpu"}]}},
            "Duplicate value: 'cpu'",
            id="duplicate-resource",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            "shape: Required value",
            id="ratio-without-shape",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]
                    },
                }
            },
            "utilization values must be sorted in increasing order",
            id="ratio-shape-unsorted",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 50, "score": 11}]},
                }
            },
            "not in valid range [0, 10]",
            id="ratio-score-out-of-range",
        ),
        pytest.param(
            {"ignoredResourceGroups": ["example.com/gpu"]},
            "resource group name can't contain '/'",
            id="group-with-slash",
        ),
    ],
)
def test_invalid_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        noderesourcesfit.new(args, FakeHandle())


def test_events() -> None:
    plugin = noderesourcesfit.new(None, FakeHandle())
    events = [(e.event.resource.value, e.event.action.name) for e in plugin.events_to_register()]
    assert events == [
        ("Pod", "DELETE|UPDATE_POD_SCALE_DOWN"),
        ("Node", "ADD|UPDATE_NODE_ALLOCATABLE"),
    ]


def _hint(resource: str, old: Any, new: Any) -> QueueingHint:
    plugin = noderesourcesfit.new(None, FakeHandle())
    target = make_pod("target", requests={"cpu": "2"})
    (registered,) = [e for e in plugin.events_to_register() if e.event.resource.value == resource]
    assert registered.hint is not None
    return registered.hint(target, old, new)


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(
            make_pod("x", node_name="n"), None, QueueingHint.QUEUE, id="scheduled-deleted"
        ),
        pytest.param(make_pod("x"), None, QueueingHint.SKIP, id="unscheduled-deleted"),
        pytest.param(
            make_pod("x", node_name="n", requests={"cpu": "3"}),
            make_pod("x", node_name="n", requests={"cpu": "1"}),
            QueueingHint.QUEUE,
            id="scheduled-scaled-down-cpu",
        ),
        pytest.param(
            make_pod("x", node_name="n", requests={"memory": "3Gi"}),
            make_pod("x", node_name="n", requests={"memory": "1Gi"}),
            QueueingHint.SKIP,
            id="scaled-down-unrequested-resource",
        ),
        pytest.param(
            make_pod("x", requests={"cpu": "3"}),
            make_pod("x", requests={"cpu": "1"}),
            QueueingHint.SKIP,
            id="unscheduled-scaled-down",
        ),
    ],
)
def test_pod_hint(old: Any, new: Any, want: QueueingHint) -> None:
    assert _hint("Pod", old, new) is want


def test_pod_hint_nominated_pod_deleted() -> None:
    nominated = make_pod("x")
    nominated.status = PodStatus(nominated_node_name="n")
    assert _hint("Pod", nominated, None) is QueueingHint.QUEUE


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, make_node(allocatable=SMALL), QueueingHint.QUEUE, id="added-fits"),
        pytest.param(
            None,
            make_node(allocatable={**SMALL, "cpu": "1"}),
            QueueingHint.SKIP,
            id="added-too-small",
        ),
        pytest.param(
            make_node(allocatable={**SMALL, "cpu": "1"}),
            make_node(allocatable=SMALL),
            QueueingHint.QUEUE,
            id="cpu-grew",
        ),
        pytest.param(
            make_node(allocatable=SMALL),
            make_node(allocatable={**SMALL, "memory": "20000"}),
            QueueingHint.SKIP,
            id="unrequested-memory-grew",
        ),
        pytest.param(
            make_node(allocatable=SMALL),
            make_node(allocatable={**SMALL, "pods": "200"}),
            QueueingHint.QUEUE,
            id="pod-count-grew",
        ),
    ],
)
def test_node_hint(old: Any, new: Any, want: QueueingHint) -> None:
    assert _hint("Node", old, new) is want


def _varied_nodes() -> list[NodeInfo]:
    """Nodes that pass, run out of pods, cpu, memory, storage or a GPU, or have none at all."""
    shapes: list[tuple[dict[str, str], list[dict[str, str]]]] = [
        (SMALL, []),
        (SMALL, [{"cpu": "3", "memory": "8000"}]),
        ({**SMALL, "pods": "2"}, [{}, {"cpu": "1"}]),
        ({"cpu": "2", "memory": "1Gi", "pods": "110", "ephemeral-storage": "1Gi"}, []),
        ({**SMALL, "example.com/gpu": "2"}, [{"example.com/gpu": "1", "cpu": "1"}]),
        ({"memory": "1Gi", "pods": "10"}, []),
        ({"cpu": "1", "pods": "10"}, [{"cpu": "500m"}]),
        ({}, []),
        ({"cpu": "64", "memory": "256Gi", "pods": "1"}, [{"cpu": "1"}]),
    ]
    return [
        make_node_info(
            make_node(f"n{i}", allocatable=allocatable),
            *(make_pod(f"e{i}-{j}", requests=r, node_name=f"n{i}") for j, r in enumerate(pods)),
        )
        for i, (allocatable, pods) in enumerate(shapes)
    ]


POD_REQUESTS = [
    pytest.param(None, id="best-effort"),
    pytest.param({"cpu": "500m", "memory": "512Mi"}, id="cpu-memory"),
    pytest.param({"cpu": "3"}, id="cpu-only"),
    pytest.param({"memory": "6Gi"}, id="memory-only"),
    pytest.param({"ephemeral-storage": "2Gi", "cpu": "1"}, id="ephemeral-storage"),
    pytest.param({"example.com/gpu": "1", "cpu": "100m"}, id="extended"),
    pytest.param({"hugepages-2Mi": "2Mi"}, id="hugepages"),
    pytest.param({"cpu": "100", "memory": "1Ti", "example.com/gpu": "5"}, id="too-big-for-all"),
]
FILTER_ARGS = [
    pytest.param(None, id="default"),
    pytest.param({"ignoredResources": ["example.com/gpu"]}, id="ignored-resource"),
    pytest.param({"ignoredResourceGroups": ["example.com"]}, id="ignored-group"),
]


@pytest.mark.parametrize("args", FILTER_ARGS)
@pytest.mark.parametrize("requests", POD_REQUESTS)
def test_filter_nodes_equals_filter(
    args: dict[str, Any] | None, requests: dict[str, str] | None
) -> None:
    plugin = noderesourcesfit.new(args, FakeHandle())
    pod = PodInfo.of(make_pod(requests=requests))
    nodes = _varied_nodes()
    state = CycleState()
    plugin.pre_filter(state, pod, nodes)
    batch = plugin.filter_nodes(state, pod, nodes)
    assert batch == [plugin.filter(state, pod, node) for node in nodes]
    assert all(status is SUCCESS for status in batch if status.is_success)


def test_filter_nodes_reuses_verdicts() -> None:
    plugin = noderesourcesfit.new(None, FakeHandle())
    pod = PodInfo.of(make_pod(requests={"cpu": "3"}))
    full = make_node_info(make_node(allocatable=SMALL), make_pod("e", requests={"cpu": "2"}))
    state = CycleState()
    plugin.pre_filter(state, pod, [full])
    first, second = plugin.filter_nodes(state, pod, [full, full])
    assert first == Status.unschedulable("Insufficient cpu")
    assert first is second


def test_filter_nodes_without_pre_filter_is_an_error() -> None:
    plugin = noderesourcesfit.new(None, FakeHandle())
    statuses = plugin.filter_nodes(CycleState(), PodInfo.of(make_pod()), _varied_nodes())
    assert {status.code for status in statuses} == {Code.ERROR}


@pytest.mark.parametrize(
    "strategy",
    [
        pytest.param({}, id="least-default"),
        pytest.param({"type": "MostAllocated"}, id="most"),
        pytest.param(
            {"resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 2}]},
            id="least-weighted",
        ),
        pytest.param(
            {"resources": [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 3}]},
            id="least-weighted-memory-first",
        ),
        pytest.param(
            {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu"}]},
            id="least-with-extended",
        ),
        pytest.param(
            {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": SHAPE_UP}},
            id="ratio",
        ),
    ],
)
@pytest.mark.parametrize("requests", POD_REQUESTS)
def test_score_nodes_equals_score(
    strategy: dict[str, Any], requests: dict[str, str] | None
) -> None:
    plugin = noderesourcesfit.new({"scoringStrategy": strategy}, FakeHandle())
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
    "kind",
    [pytest.param("LeastAllocated", id="least"), pytest.param("MostAllocated", id="most")],
)
@pytest.mark.parametrize("requests", POD_REQUESTS)
def test_cpu_memory_shortcut_matches_general_scoring(
    kind: str, requests: dict[str, str] | None
) -> None:
    """Configured as exactly [cpu, memory] scoring takes a shortcut; listing memory first
    takes the general path, which must weigh the same."""
    weights = {"cpu": 3, "memory": 5}

    def scores(order: list[str]) -> list[int]:
        resources = [{"name": name, "weight": weights[name]} for name in order]
        args = {"scoringStrategy": {"type": kind, "resources": resources}}
        plugin = noderesourcesfit.new(args, FakeHandle())
        pod = PodInfo.of(make_pod(requests=requests))
        return plugin.score_nodes(CycleState(), pod, _varied_nodes())[0]

    assert scores(["cpu", "memory"]) == scores(["memory", "cpu"])


def test_pre_filter_and_pre_score_never_skip() -> None:
    """Upstream's Fit always checks the pod count, so even a best-effort pod is filtered."""
    plugin = noderesourcesfit.new(None, FakeHandle())
    pod = PodInfo.of(make_pod())
    nodes = _varied_nodes()
    state = CycleState()
    assert plugin.pre_filter(state, pod, nodes) == (None, SUCCESS)
    assert plugin.pre_score(state, pod, nodes) is SUCCESS
