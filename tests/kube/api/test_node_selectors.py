"""Node selector terms and required node affinity, as the scheduler and the DaemonSet
controller match them."""

from __future__ import annotations

import pytest

from kube.api import nodeaffinity
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Container, Pod
from kube.api.kinds.core_v1.volume import NodeSelectorRequirement, NodeSelectorTerm
from kube.api.meta_v1 import ObjectMeta
from tests import builders


def make_node(name: str = "n", *, labels: dict[str, str] | None = None) -> Node:
    return Node(metadata=ObjectMeta(name=name, labels=labels))


def make_pod(*, node_selector: dict[str, str] | None = None) -> Pod:
    c = Container(name="c", image="i")
    return builders.pod("p", containers=[c], node_selector=node_selector)


def req(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key=key, operator=operator, values=list(values) or None)


def labels_term(*requirements: NodeSelectorRequirement) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=list(requirements))


def fields_term(*requirements: NodeSelectorRequirement) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_fields=list(requirements))


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        pytest.param(None, False, id="no-terms"),
        pytest.param([NodeSelectorTerm()], False, id="empty-term"),
        pytest.param([labels_term(req("zone", "In", "a", "b"))], True, id="in"),
        pytest.param([labels_term(req("zone", "NotIn", "a"))], False, id="not-in"),
        pytest.param([labels_term(req("zone", "Exists"))], True, id="exists"),
        pytest.param([labels_term(req("gpu", "DoesNotExist"))], True, id="does-not-exist"),
        pytest.param([labels_term(req("cores", "Gt", "7"))], True, id="gt"),
        pytest.param([labels_term(req("cores", "Lt", "8"))], False, id="lt-equal"),
        pytest.param([labels_term(req("zone", "Gt", "1"))], False, id="gt-non-integer-label"),
        pytest.param([labels_term(req("cores", "Gt", "1", "2"))], False, id="gt-two-values"),
        pytest.param([labels_term(req("zone", "In"))], False, id="in-without-values"),
        pytest.param([labels_term(req("zone", "Exists", "a"))], False, id="exists-with-values"),
        pytest.param([labels_term(req("bad key!", "Exists"))], False, id="invalid-key"),
        pytest.param([fields_term(req("metadata.name", "In", "node-a"))], True, id="name-in"),
        pytest.param(
            [fields_term(req("metadata.name", "NotIn", "node-a"))], False, id="name-not-in"
        ),
        pytest.param([fields_term(req("metadata.uid", "NotIn", "x"))], True, id="unknown-field"),
        pytest.param([fields_term(req("metadata.name", "Exists"))], False, id="field-operator"),
        pytest.param(
            [
                NodeSelectorTerm(
                    match_expressions=[req("zone", "In", "a")],
                    match_fields=[req("metadata.name", "In", "node-b")],
                )
            ],
            False,
            id="labels-and-fields-anded",
        ),
        pytest.param(
            [
                labels_term(req("zone", "In", "x")),
                fields_term(req("metadata.name", "In", "node-a")),
            ],
            True,
            id="terms-ored",
        ),
    ],
)
def test_node_matches_selector_terms(terms: list[NodeSelectorTerm] | None, expected: bool) -> None:
    node = make_node("node-a", labels={"zone": "a", "cores": "8"})
    assert nodeaffinity.node_matches_selector_terms(node, terms) is expected


def test_strict_selector_rejects_invalid_term() -> None:
    with pytest.raises(nodeaffinity.NodeSelectorError, match="nodeSelectorTerms\\[1\\]"):
        nodeaffinity.NodeSelectorMatcher.strict(
            [labels_term(req("zone", "In", "a")), labels_term(req("zone", "Near", "a"))]
        )


def test_required_node_affinity_reports_parse_error() -> None:
    pod = make_pod(node_selector={"zone": "a"})
    assert nodeaffinity.RequiredNodeAffinity.of(pod).match(make_node(labels={"zone": "a"})) == (
        True,
        False,
    )
    assert nodeaffinity.pod_matches_node_affinity(pod, make_node(labels={"zone": "b"})) is False
