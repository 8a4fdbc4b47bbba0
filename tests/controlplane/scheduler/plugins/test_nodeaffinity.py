from __future__ import annotations

from typing import Any

import pytest

from controlplane.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    Code,
    CycleState,
    PreFilterResult,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins import nodeaffinity
from kube.api.kinds.core_v1.pod import Affinity, NodeAffinity, Pod, PreferredSchedulingTerm
from kube.api.kinds.core_v1.volume import (
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
)
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

MISMATCH = Status.unresolvable("node(s) didn't match Pod's node affinity/selector")
ENFORCED = Status.unresolvable("node(s) didn't match scheduler-enforced node affinity")


def expr(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key=key, operator=operator, values=list(values) or None)


def term(
    *expressions: NodeSelectorRequirement, fields: tuple[NodeSelectorRequirement, ...] = ()
) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        match_expressions=list(expressions) or None, match_fields=list(fields) or None
    )


def name_in(*names: str) -> NodeSelectorTerm:
    return term(fields=(expr("metadata.name", "In", *names),))


def required(*terms: NodeSelectorTerm) -> Affinity:
    return Affinity(
        node_affinity=NodeAffinity(
            required_during_scheduling_ignored_during_execution=NodeSelector(
                node_selector_terms=list(terms)
            )
        )
    )


def preferred(*weighted: tuple[int, NodeSelectorTerm]) -> Affinity:
    return Affinity(
        node_affinity=NodeAffinity(
            preferred_during_scheduling_ignored_during_execution=[
                PreferredSchedulingTerm(weight=w, preference=t) for w, t in weighted
            ]
        )
    )


def run_filter(
    plugin: nodeaffinity.NodeAffinity, pod: Pod, labels: dict[str, str], name: str = "n1"
) -> Status:
    node = make_node_info(make_node(name, labels=labels))
    state = CycleState()
    _, status = plugin.pre_filter(state, PodInfo.of(pod), [node])
    if status.is_skip:
        return SUCCESS
    if not status.is_success:
        return status
    return plugin.filter(state, PodInfo.of(pod), node)


@pytest.mark.parametrize(
    ("pod", "labels", "expected"),
    [
        pytest.param(make_pod(), {}, SUCCESS, id="nothing-required"),
        pytest.param(
            make_pod(node_selector={"foo": "bar"}), {"foo": "bar"}, SUCCESS, id="selector-match"
        ),
        pytest.param(
            make_pod(node_selector={"foo": "bar"}), {"foo": "baz"}, MISMATCH, id="selector-value"
        ),
        pytest.param(
            make_pod(node_selector={"foo": "bar"}), {}, MISMATCH, id="selector-missing-label"
        ),
        pytest.param(
            make_pod(affinity=required(term(expr("foo", "In", "bar", "value2")))),
            {"foo": "bar"},
            SUCCESS,
            id="in",
        ),
        pytest.param(
            make_pod(affinity=required(term(expr("foo", "NotIn", "bar")))),
            {"foo": "bar"},
            MISMATCH,
            id="not-in",
        ),
        pytest.param(
            make_pod(affinity=required(term(expr("foo", "NotIn", "bar")))),
            {},
            SUCCESS,
            id="not-in-missing-label",
        ),
        pytest.param(
            make_pod(affinity=required(term(expr("foo", "Exists")))),
            {"foo": ""},
            SUCCESS,
            id="exists",
        ),
        pytest.param(
            make_pod(affinity=required(term(expr("foo", "DoesNotExist")))),
            {"foo": "x"},
            MISMATCH,
            id="does-not-exist",
        ),
        pytest.param(
            make_pod(affinity=required(term(expr("cpus", "Gt", "4")))),
            {"cpus": "8"},
            SUCCESS,
            id="gt",
        ),
        pytest.param(
            make_pod(affinity=required(term(expr("cpus", "Lt", "4")))),
            {"cpus": "8"},
            MISMATCH,
            id="lt",
        ),
        pytest.param(
            make_pod(affinity=required(term(expr("cpus", "Gt", "four")))),
            {"cpus": "8"},
            MISMATCH,
            id="gt-not-integer",
        ),
        pytest.param(
            make_pod(affinity=required(term(expr("foo", "In", "bar"), expr("zone", "In", "a")))),
            {"foo": "bar"},
            MISMATCH,
            id="expressions-anded",
        ),
        pytest.param(
            make_pod(
                affinity=required(term(expr("foo", "In", "x")), term(expr("zone", "In", "a")))
            ),
            {"zone": "a"},
            SUCCESS,
            id="terms-ored",
        ),
        pytest.param(
            make_pod(
                affinity=required(term(expr("foo", "Bogus", "x")), term(expr("zone", "In", "a")))
            ),
            {"zone": "a"},
            SUCCESS,
            id="invalid-term-ignored",
        ),
        pytest.param(
            make_pod(affinity=required(term())), {"foo": "bar"}, MISMATCH, id="empty-term"
        ),
        pytest.param(make_pod(affinity=required()), {"foo": "bar"}, MISMATCH, id="no-terms"),
        pytest.param(
            make_pod(node_selector={"foo": "bar"}, affinity=required(term(expr("zone", "Exists")))),
            {"foo": "bar"},
            MISMATCH,
            id="selector-and-affinity-both-needed",
        ),
        pytest.param(make_pod(affinity=required(name_in("n1"))), {}, SUCCESS, id="field-name"),
        pytest.param(
            make_pod(affinity=required(term(fields=(expr("metadata.name", "NotIn", "n1"),)))),
            {},
            MISMATCH,
            id="field-name-not-in",
        ),
        pytest.param(
            make_pod(affinity=required(name_in("n1", "n2"))),
            {},
            MISMATCH,
            id="field-two-values-invalid",
        ),
        pytest.param(
            make_pod(affinity=required(name_in("n2"), name_in("n3"))),
            {},
            MISMATCH,
            id="field-other-names",
        ),
        pytest.param(
            make_pod(affinity=preferred((10, term(expr("foo", "In", "x"))))),
            {},
            SUCCESS,
            id="preferred-only",
        ),
    ],
)
def test_filter(pod: Pod, labels: dict[str, str], expected: Status) -> None:
    assert run_filter(nodeaffinity.new(None, FakeHandle()), pod, labels) == expected


def test_filter_without_pre_filter() -> None:
    plugin = nodeaffinity.new(None, FakeHandle())
    pod = PodInfo.of(make_pod(node_selector={"foo": "bar"}))
    node = make_node_info(make_node(labels={"foo": "baz"}))
    assert plugin.filter(CycleState(), pod, node) == MISMATCH


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod(), (None, SKIP), id="nothing-to-check"),
        pytest.param(make_pod(node_selector={"a": "b"}), (None, SUCCESS), id="selector-only"),
        pytest.param(
            make_pod(affinity=required(name_in("n1"))),
            (PreFilterResult(frozenset({"n1"})), SUCCESS),
            id="one-name",
        ),
        pytest.param(
            make_pod(affinity=required(name_in("n1"), name_in("n2"))),
            (PreFilterResult(frozenset({"n1", "n2"})), SUCCESS),
            id="names-of-terms-unioned",
        ),
        pytest.param(
            make_pod(
                affinity=required(
                    term(
                        fields=(
                            expr("metadata.name", "In", "n1", "n2"),
                            expr("metadata.name", "In", "n2"),
                        )
                    )
                )
            ),
            (PreFilterResult(frozenset({"n2"})), SUCCESS),
            id="names-in-term-intersected",
        ),
        pytest.param(
            make_pod(affinity=required(name_in("n1"), term(expr("foo", "Exists")))),
            (None, SUCCESS),
            id="term-without-name-allows-all",
        ),
        pytest.param(
            make_pod(
                affinity=required(
                    term(
                        fields=(
                            expr("metadata.name", "In", "n1"),
                            expr("metadata.name", "In", "n2"),
                        )
                    )
                )
            ),
            (None, Status.unresolvable("pod affinity terms conflict")),
            id="conflict",
        ),
    ],
)
def test_pre_filter(pod: Pod, expected: tuple[PreFilterResult | None, Status]) -> None:
    plugin = nodeaffinity.new(None, FakeHandle())
    assert plugin.pre_filter(CycleState(), PodInfo.of(pod), []) == expected


ADDED = {
    "addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
            ]
        }
    }
}


@pytest.mark.parametrize(
    ("pod", "labels", "expected"),
    [
        pytest.param(make_pod(), {"zone": "a"}, SUCCESS, id="added-match"),
        pytest.param(make_pod(), {"zone": "b"}, ENFORCED, id="added-mismatch"),
        pytest.param(
            make_pod(node_selector={"x": "y"}), {"zone": "a"}, MISMATCH, id="pod-still-checked"
        ),
    ],
)
def test_filter_added_affinity(pod: Pod, labels: dict[str, str], expected: Status) -> None:
    assert run_filter(nodeaffinity.new(ADDED, FakeHandle()), pod, labels) == expected


def test_invalid_added_affinity_rejected() -> None:
    args = {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Bogus"}]}]
            }
        }
    }
    with pytest.raises(ValueError, match="parsing addedAffinity"):
        nodeaffinity.new(args, FakeHandle())


NODE_LABELS = {
    "n1": {"foo": "bar"},
    "n2": {"key": "value"},
    "n3": {"foo": "bar", "key": "value", "az": "az1"},
}


@pytest.mark.parametrize(
    ("pod", "args", "expected"),
    [
        pytest.param(
            make_pod(affinity=preferred((2, term(expr("foo", "In", "bar"))))),
            None,
            [100, 0, 100],
            id="one-term",
        ),
        pytest.param(
            make_pod(
                affinity=preferred(
                    (2, term(expr("foo", "In", "bar"))),
                    (4, term(expr("key", "In", "value"))),
                    (5, term(expr("az", "In", "az1"))),
                )
            ),
            None,
            [18, 36, 100],
            id="weights-summed-and-normalized",
        ),
        pytest.param(
            make_pod(affinity=preferred((2, term(expr("none", "Exists"))))),
            None,
            [0, 0, 0],
            id="nothing-matches",
        ),
        pytest.param(
            make_pod(affinity=preferred((3, term()))), None, [0, 0, 0], id="empty-term-ignored"
        ),
        pytest.param(
            make_pod(),
            {
                "addedAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 5,
                            "preference": {
                                "matchExpressions": [{"key": "key", "operator": "Exists"}]
                            },
                        }
                    ]
                }
            },
            [0, 100, 100],
            id="added-preferred",
        ),
    ],
)
def test_score(pod: Pod, args: dict[str, Any] | None, expected: list[int]) -> None:
    nodes = [make_node_info(make_node(name, labels=labels)) for name, labels in NODE_LABELS.items()]
    plugin = nodeaffinity.new(args, FakeHandle(nodes))
    info = PodInfo.of(pod)
    state = CycleState()
    assert plugin.pre_score(state, info, nodes) == SUCCESS
    scores = []
    for node in nodes:
        score, status = plugin.score(state, info, node)
        assert status == SUCCESS
        scores.append(score)
    names = [node.name for node in nodes]
    assert plugin.score_extensions().normalize_score(state, info, names, scores) == SUCCESS
    assert scores == expected


def test_invalid_preferred_term_fails_score() -> None:
    plugin = nodeaffinity.new(None, FakeHandle())
    pod = PodInfo.of(make_pod(affinity=preferred((1, term(expr("foo", "Gt", "x"))))))
    assert plugin.pre_score(CycleState(), pod, []).code is Code.ERROR
    _, status = plugin.score(CycleState(), pod, make_node_info(make_node()))
    assert status.code is Code.ERROR


NOT_FOUND = Status.failed("node not found")
BATCH_LABELS: dict[str, dict[str, str] | None] = {
    "n0": {"foo": "bar", "zone": "a"},
    "n1": {"foo": "baz", "zone": "a"},
    "n2": {"zone": "b"},
    "n3": {},
    "n4": {"foo": "bar", "zone": "b"},
    "missing": None,
}


def batch_nodes() -> list[NodeInfo]:
    """Nodes matching and missing labels, and a NodeInfo without its node."""
    return [
        NodeInfo() if labels is None else make_node_info(make_node(name, labels=labels))
        for name, labels in BATCH_LABELS.items()
    ]


@pytest.mark.parametrize(
    ("pod", "args", "pre_filter", "expected"),
    [
        pytest.param(
            make_pod(node_selector={"foo": "bar"}),
            None,
            True,
            [SUCCESS, MISMATCH, MISMATCH, MISMATCH, SUCCESS, NOT_FOUND],
            id="selector",
        ),
        pytest.param(
            make_pod(affinity=required(term(expr("zone", "In", "a")), name_in("n3"))),
            None,
            True,
            [SUCCESS, SUCCESS, MISMATCH, SUCCESS, MISMATCH, NOT_FOUND],
            id="required-terms",
        ),
        pytest.param(
            make_pod(node_selector={"foo": "bar"}),
            ADDED,
            True,
            [SUCCESS, MISMATCH, ENFORCED, ENFORCED, ENFORCED, NOT_FOUND],
            id="added-affinity-first",
        ),
        pytest.param(
            make_pod(),
            ADDED,
            True,
            [SUCCESS, SUCCESS, ENFORCED, ENFORCED, ENFORCED, NOT_FOUND],
            id="added-affinity-only",
        ),
        pytest.param(
            make_pod(affinity=required(term(expr("foo", "Exists")))),
            None,
            False,
            [SUCCESS, SUCCESS, MISMATCH, MISMATCH, SUCCESS, NOT_FOUND],
            id="without-pre-filter",
        ),
    ],
)
def test_filter_nodes_matches_filter(
    pod: Pod, args: dict[str, Any] | None, pre_filter: bool, expected: list[Status]
) -> None:
    plugin = nodeaffinity.new(args, FakeHandle())
    nodes = batch_nodes()
    info = PodInfo.of(pod)
    state = CycleState()
    if pre_filter:
        assert plugin.pre_filter(state, info, nodes)[1] == SUCCESS
    statuses = plugin.filter_nodes(state, info, nodes)
    assert statuses == expected
    assert [plugin.filter(state, info, node) for node in nodes] == statuses
    assert all(status is SUCCESS for status in statuses if status.is_success)


ADDED_PREFERRED = {
    "addedAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 7,
                "preference": {
                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]
                },
            }
        ]
    }
}


@pytest.mark.parametrize(
    ("pod", "args", "pre_score", "expected"),
    [
        pytest.param(
            make_pod(
                affinity=preferred(
                    (2, term(expr("foo", "In", "bar"))), (3, term(expr("zone", "In", "a")))
                )
            ),
            None,
            True,
            [5, 3, 0, 0, 2],
            id="preferred",
        ),
        pytest.param(make_pod(), ADDED_PREFERRED, True, [0, 0, 7, 0, 7], id="added-only"),
        pytest.param(
            make_pod(affinity=preferred((2, term(expr("foo", "In", "bar"))))),
            ADDED_PREFERRED,
            True,
            [2, 0, 7, 0, 9],
            id="added-and-preferred",
        ),
        pytest.param(
            make_pod(affinity=preferred((4, term(expr("zone", "Exists"))))),
            None,
            False,
            [4, 4, 4, 0, 4],
            id="without-pre-score",
        ),
    ],
)
def test_score_nodes_matches_score(
    pod: Pod, args: dict[str, Any] | None, pre_score: bool, expected: list[int]
) -> None:
    plugin = nodeaffinity.new(args, FakeHandle())
    nodes = batch_nodes()[:-1]
    info = PodInfo.of(pod)
    state = CycleState()
    if pre_score:
        assert plugin.pre_score(state, info, nodes) == SUCCESS
    assert plugin.score_nodes(state, info, nodes) == (expected, SUCCESS)
    assert [plugin.score(state, info, node) for node in nodes] == [
        (score, SUCCESS) for score in expected
    ]


@pytest.mark.parametrize(
    ("pod", "error"),
    [
        pytest.param(
            make_pod(affinity=preferred((1, term(expr("foo", "In", "bar"))))),
            "node not found",
            id="node-not-found",
        ),
        pytest.param(
            make_pod(affinity=preferred((1, term(expr("foo", "Gt", "x"))))),
            "for 'Gt', 'Lt' operators",
            id="invalid-preferred-term",
        ),
    ],
)
def test_score_nodes_error(pod: Pod, error: str) -> None:
    plugin = nodeaffinity.new(None, FakeHandle())
    scores, status = plugin.score_nodes(CycleState(), PodInfo.of(pod), batch_nodes())
    assert scores == []
    assert status.code is Code.ERROR
    assert error in status.message


@pytest.mark.parametrize(
    ("pod", "args", "expected"),
    [
        pytest.param(make_pod(), None, SKIP, id="nothing-preferred"),
        pytest.param(
            make_pod(affinity=required(term(expr("foo", "Exists")))),
            None,
            SKIP,
            id="required-only",
        ),
        pytest.param(
            make_pod(affinity=preferred((1, term(expr("foo", "Exists"))))),
            None,
            SUCCESS,
            id="preferred",
        ),
        pytest.param(make_pod(), ADDED_PREFERRED, SUCCESS, id="added-preferred"),
        pytest.param(make_pod(), ADDED, SKIP, id="added-required-only"),
    ],
)
def test_pre_score_skip(pod: Pod, args: dict[str, Any] | None, expected: Status) -> None:
    plugin = nodeaffinity.new(args, FakeHandle())
    assert plugin.pre_score(CycleState(), PodInfo.of(pod), []) == expected


@pytest.mark.parametrize(
    ("pod", "args", "expected"),
    [
        pytest.param(
            make_pod(affinity=preferred((1, term(expr("foo", "Exists"))))),
            None,
            SKIP,
            id="preferred-only",
        ),
        pytest.param(make_pod(), ADDED, SUCCESS, id="added-affinity"),
        pytest.param(make_pod(), ADDED_PREFERRED, SKIP, id="added-preferred-only"),
    ],
)
def test_pre_filter_skip(pod: Pod, args: dict[str, Any] | None, expected: Status) -> None:
    plugin = nodeaffinity.new(args, FakeHandle())
    assert plugin.pre_filter(CycleState(), PodInfo.of(pod), []) == (None, expected)


SELECTING = make_pod(affinity=required(term(expr("foo", "In", "bar"))))


@pytest.mark.parametrize(
    ("pod", "args", "old", "new", "expected"),
    [
        pytest.param(
            SELECTING,
            None,
            None,
            make_node(labels={"foo": "bar"}),
            QueueingHint.QUEUE,
            id="matching-add",
        ),
        pytest.param(SELECTING, None, None, make_node(), QueueingHint.SKIP, id="non-matching-add"),
        pytest.param(
            SELECTING,
            None,
            make_node(),
            make_node(labels={"foo": "bar"}),
            QueueingHint.QUEUE,
            id="label-added",
        ),
        pytest.param(
            SELECTING,
            None,
            make_node(labels={"foo": "bar"}),
            make_node(labels={"foo": "bar", "x": "y"}),
            QueueingHint.SKIP,
            id="already-matched",
        ),
        pytest.param(
            make_pod(), ADDED, None, make_node(), QueueingHint.SKIP, id="added-affinity-mismatch"
        ),
    ],
)
def test_events_to_register(
    pod: Pod, args: dict[str, Any] | None, old: Any, new: Any, expected: QueueingHint
) -> None:
    [registered] = nodeaffinity.new(args, FakeHandle()).events_to_register()
    assert registered.hint is not None
    assert registered.hint(pod, old, new) is expected
