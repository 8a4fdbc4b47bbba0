"""InterPodAffinity: Filter, its PreFilter extensions, Score and requeueing hints, on cases
modelled on upstream's filtering_test.go, scoring_test.go and plugin_test.go."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from controlplane.scheduler.framework.interface import (
    SUCCESS,
    ActionType,
    Code,
    CycleState,
    EventResource,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins import interpodaffinity
from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import (
    Affinity,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    WeightedPodAffinityTerm,
)
from kube.api.meta_v1 import LabelSelector, LabelSelectorRequirement, ObjectMeta
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

AFFINITY = interpodaffinity.ERR_REASON_AFFINITY_RULES_NOT_MATCH
ANTI = interpodaffinity.ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH
EXISTING_ANTI = interpodaffinity.ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH


def term(
    values: Sequence[str] = ("S1",),
    topology: str = "region",
    key: str = "security",
    operator: str = "In",
    namespaces: Sequence[str] | None = None,
    namespace_selector: LabelSelector | None = None,
) -> PodAffinityTerm:
    return PodAffinityTerm(
        label_selector=LabelSelector(
            match_expressions=[
                LabelSelectorRequirement(key=key, operator=operator, values=list(values) or None)
            ]
        ),
        topology_key=topology,
        namespaces=list(namespaces) if namespaces is not None else None,
        namespace_selector=namespace_selector,
    )


def weighted(weight: int, affinity_term: PodAffinityTerm) -> WeightedPodAffinityTerm:
    return WeightedPodAffinityTerm(weight=weight, pod_affinity_term=affinity_term)


def affinity(
    required: Sequence[PodAffinityTerm] = (),
    anti: Sequence[PodAffinityTerm] = (),
    preferred: Sequence[WeightedPodAffinityTerm] = (),
    preferred_anti: Sequence[WeightedPodAffinityTerm] = (),
) -> Affinity:
    return Affinity(
        pod_affinity=PodAffinity(
            required_during_scheduling_ignored_during_execution=list(required) or None,
            preferred_during_scheduling_ignored_during_execution=list(preferred) or None,
        ),
        pod_anti_affinity=PodAntiAffinity(
            required_during_scheduling_ignored_during_execution=list(anti) or None,
            preferred_during_scheduling_ignored_during_execution=list(preferred_anti) or None,
        ),
    )


def pod(
    name: str = "incoming",
    labels: Mapping[str, str] | None = None,
    node: str | None = None,
    namespace: str = "default",
    aff: Affinity | None = None,
) -> Pod:
    return make_pod(name, namespace, labels=labels, node_name=node, affinity=aff)


def namespace(name: str, labels: Mapping[str, str]) -> Namespace:
    return Namespace(metadata=ObjectMeta(name=name, labels=dict(labels)))


NODE_LABELS = {
    "n1": {"region": "r1", "zone": "z11", "kubernetes.io/hostname": "n1"},
    "n2": {"region": "r1", "zone": "z12", "kubernetes.io/hostname": "n2"},
    "n3": {"region": "r2", "zone": "z21", "kubernetes.io/hostname": "n3"},
    "n4": {"zone": "z41", "kubernetes.io/hostname": "n4"},
}


def cluster(existing: Sequence[Pod]) -> list[NodeInfo]:
    """Nodes n1..n4 (n4 has no region) with ``existing`` placed by their node names."""
    return [
        make_node_info(
            make_node(name, labels=labels),
            *(p for p in existing if p.spec is not None and p.spec.node_name == name),
        )
        for name, labels in NODE_LABELS.items()
    ]


def run_filter(
    incoming: Pod, existing: Sequence[Pod], objects: Sequence[Any] = ()
) -> dict[str, Status]:
    handle = FakeHandle(cluster(existing), objects)
    plugin = interpodaffinity.new(None, handle)
    state = CycleState()
    info = PodInfo.of(incoming)
    _, status = plugin.pre_filter(state, info, handle.nodes)
    if status.is_skip:
        return dict.fromkeys(NODE_LABELS, SUCCESS)
    assert status.is_success
    return {node.name: plugin.filter(state, info, node) for node in handle.nodes}


def expect(**statuses: Status) -> dict[str, Status]:
    return {name: statuses.get(name, SUCCESS) for name in NODE_LABELS}


S1 = {"security": "S1"}
S2 = {"security": "S2"}


@pytest.mark.parametrize(
    ("incoming", "existing", "objects", "want"),
    [
        pytest.param(pod(), [], [], expect(), id="no-affinity-anywhere"),
        pytest.param(
            pod(aff=affinity(required=[term()])),
            [pod("e", S1, "n1")],
            [],
            expect(n3=Status.unresolvable(AFFINITY), n4=Status.unresolvable(AFFINITY)),
            id="affinity-satisfied-in-the-region-of-a-matching-pod",
        ),
        pytest.param(
            pod(aff=affinity(required=[term(operator="NotIn", values=["S2"])])),
            [pod("e", S1, "n3")],
            [],
            expect(
                n1=Status.unresolvable(AFFINITY),
                n2=Status.unresolvable(AFFINITY),
                n4=Status.unresolvable(AFFINITY),
            ),
            id="affinity-with-notin",
        ),
        pytest.param(
            pod(aff=affinity(required=[term()])),
            [pod("e", S2, "n1")],
            [],
            expect(**{n: Status.unresolvable(AFFINITY) for n in NODE_LABELS}),
            id="affinity-matches-no-pod-and-not-itself",
        ),
        pytest.param(
            pod(labels=S1, aff=affinity(required=[term()])),
            [pod("e", S2, "n1")],
            [],
            expect(n4=Status.unresolvable(AFFINITY)),
            id="first-pod-with-affinity-to-itself-goes-where-the-topology-key-is",
        ),
        pytest.param(
            pod(labels=S1, aff=affinity(required=[term()])),
            [pod("e", S1, "n3")],
            [],
            expect(
                n1=Status.unresolvable(AFFINITY),
                n2=Status.unresolvable(AFFINITY),
                n4=Status.unresolvable(AFFINITY),
            ),
            id="affinity-to-itself-once-a-matching-pod-exists",
        ),
        pytest.param(
            pod(aff=affinity(required=[term(), term(["z11"], "zone", key="zone")])),
            [pod("e", S1, "n1"), pod("f", {"zone": "z11"}, "n1")],
            [],
            expect(**{n: Status.unresolvable(AFFINITY) for n in NODE_LABELS}),
            id="affinity-terms-must-all-match-one-pod",
        ),
        pytest.param(
            pod(aff=affinity(required=[term(), term(["z11"], "zone", key="zone")])),
            [pod("e", {**S1, "zone": "z11"}, "n1")],
            [],
            expect(
                n2=Status.unresolvable(AFFINITY),
                n3=Status.unresolvable(AFFINITY),
                n4=Status.unresolvable(AFFINITY),
            ),
            id="affinity-terms-all-matched-by-one-pod",
        ),
        pytest.param(
            pod(aff=affinity(required=[term(namespaces=["other"])])),
            [pod("e", S1, "n1")],
            [],
            expect(**{n: Status.unresolvable(AFFINITY) for n in NODE_LABELS}),
            id="affinity-in-another-namespace",
        ),
        pytest.param(
            pod(
                aff=affinity(
                    required=[term(namespace_selector=LabelSelector(match_labels={"team": "a"}))]
                )
            ),
            [pod("e", S1, "n1", namespace="team-a")],
            [namespace("team-a", {"team": "a"}), namespace("team-b", {"team": "b"})],
            expect(n3=Status.unresolvable(AFFINITY), n4=Status.unresolvable(AFFINITY)),
            id="affinity-namespace-selector-resolved-from-namespace-labels",
        ),
        pytest.param(
            pod(
                aff=affinity(
                    required=[term(namespace_selector=LabelSelector(match_labels={"team": "b"}))]
                )
            ),
            [pod("e", S1, "n1", namespace="team-a")],
            [namespace("team-a", {"team": "a"}), namespace("team-b", {"team": "b"})],
            expect(**{n: Status.unresolvable(AFFINITY) for n in NODE_LABELS}),
            id="affinity-namespace-selector-not-matching",
        ),
        pytest.param(
            pod(aff=affinity(required=[term(namespace_selector=LabelSelector())])),
            [pod("e", S1, "n3", namespace="anywhere")],
            [],
            expect(
                n1=Status.unresolvable(AFFINITY),
                n2=Status.unresolvable(AFFINITY),
                n4=Status.unresolvable(AFFINITY),
            ),
            id="empty-namespace-selector-selects-all-namespaces",
        ),
        pytest.param(
            pod(aff=affinity(anti=[term(topology="zone")])),
            [pod("e", S1, "n1")],
            [],
            expect(n1=Status.unschedulable(ANTI)),
            id="anti-affinity-blocks-the-zone-of-a-matching-pod",
        ),
        pytest.param(
            pod(aff=affinity(anti=[term(topology="region")])),
            [pod("e", S1, "n1")],
            [],
            expect(n1=Status.unschedulable(ANTI), n2=Status.unschedulable(ANTI)),
            id="anti-affinity-blocks-the-region-of-a-matching-pod",
        ),
        pytest.param(
            pod(aff=affinity(anti=[term(topology="region")])),
            [pod("e", S2, "n1")],
            [],
            expect(),
            id="anti-affinity-matching-no-pod",
        ),
        pytest.param(
            pod(labels=S1),
            [pod("e", S2, "n1", aff=affinity(anti=[term(topology="region")]))],
            [],
            expect(n1=Status.unschedulable(EXISTING_ANTI), n2=Status.unschedulable(EXISTING_ANTI)),
            id="existing-pod-anti-affinity-blocks-its-region",
        ),
        pytest.param(
            pod(labels=S2),
            [pod("e", S2, "n1", aff=affinity(anti=[term(topology="region")]))],
            [],
            expect(),
            id="existing-pod-anti-affinity-not-matching",
        ),
        pytest.param(
            pod(labels=S1, namespace="team-a"),
            [
                pod(
                    "e",
                    S2,
                    "n3",
                    aff=affinity(
                        anti=[
                            term(
                                topology="zone",
                                namespace_selector=LabelSelector(match_labels={"team": "a"}),
                            )
                        ]
                    ),
                )
            ],
            [namespace("team-a", {"team": "a"})],
            expect(n3=Status.unschedulable(EXISTING_ANTI)),
            id="existing-anti-affinity-namespace-selector-uses-incoming-namespace-labels",
        ),
        pytest.param(
            pod(labels=S1, namespace="team-a"),
            [
                pod(
                    "e",
                    S2,
                    "n3",
                    aff=affinity(
                        anti=[
                            term(
                                topology="zone",
                                namespace_selector=LabelSelector(match_labels={"team": "a"}),
                            )
                        ]
                    ),
                )
            ],
            [],
            expect(),
            id="existing-anti-affinity-namespace-selector-unknown-namespace",
        ),
        pytest.param(
            pod(labels=S1, aff=affinity(required=[term()], anti=[term(topology="zone")])),
            [pod("e", S1, "n1")],
            [],
            expect(
                n1=Status.unschedulable(ANTI),
                n3=Status.unresolvable(AFFINITY),
                n4=Status.unresolvable(AFFINITY),
            ),
            id="affinity-region-anti-affinity-zone",
        ),
    ],
)
def test_filter(
    incoming: Pod, existing: list[Pod], objects: list[Any], want: dict[str, Status]
) -> None:
    assert run_filter(incoming, existing, objects) == want


def test_pre_filter_skips_without_required_terms_anywhere() -> None:
    handle = FakeHandle(cluster([pod("e", S1, "n1")]))
    plugin = interpodaffinity.new(None, handle)
    _, status = plugin.pre_filter(CycleState(), PodInfo.of(pod()), handle.nodes)
    assert status.code is Code.SKIP


@pytest.mark.parametrize(
    ("incoming", "existing", "change", "want"),
    [
        pytest.param(
            pod(labels=S1),
            [pod("e", S2, "n1", aff=affinity(anti=[term(topology="region")]))],
            "remove",
            expect(),
            id="removing-the-pod-whose-anti-affinity-blocked",
        ),
        pytest.param(
            pod(aff=affinity(anti=[term(topology="zone")])),
            [pod("e", S1, "n1")],
            "remove",
            expect(),
            id="removing-the-pod-anti-affinity-matched",
        ),
        pytest.param(
            pod(aff=affinity(required=[term()])),
            [pod("e", S1, "n1")],
            "remove",
            expect(**{n: Status.unresolvable(AFFINITY) for n in NODE_LABELS}),
            id="removing-the-pod-affinity-needed",
        ),
        pytest.param(
            pod(labels=S1, aff=affinity(anti=[term(topology="zone")])),
            [pod("e", S1, "n1", aff=affinity(anti=[term(topology="region")]))],
            "add",
            expect(n1=Status.unschedulable(ANTI), n2=Status.unschedulable(EXISTING_ANTI)),
            id="adding-a-pod-with-anti-affinity",
        ),
    ],
)
def test_pre_filter_extensions(
    incoming: Pod, existing: list[Pod], change: str, want: dict[str, Status]
) -> None:
    """Preemption's what-ifs: the counts of a cloned state follow pods added or removed on
    n1, and the original state keeps its own."""
    nodes = cluster(existing if change == "remove" else [])
    handle = FakeHandle(nodes)
    plugin = interpodaffinity.new(None, handle)
    info = PodInfo.of(incoming)
    state = CycleState()
    _, status = plugin.pre_filter(state, info, handle.nodes)
    before = (
        {node.name: plugin.filter(state, info, node) for node in nodes}
        if not status.is_skip
        else None
    )
    what_if = state.clone()
    extensions = plugin.pre_filter_extensions()
    n1 = nodes[0]
    for existing_pod in existing:
        if change == "remove":
            n1.remove_pod(existing_pod)
            result = extensions.remove_pod(what_if, info, PodInfo.of(existing_pod), n1)
        else:
            n1.add_pod(PodInfo.of(existing_pod))
            result = extensions.add_pod(what_if, info, PodInfo.of(existing_pod), n1)
        assert result.is_success
    assert {node.name: plugin.filter(what_if, info, node) for node in nodes} == want
    if before is not None:
        assert {node.name: plugin.filter(state, info, node) for node in nodes} == before


def run_score(
    incoming: Pod, existing: Sequence[Pod], args: Mapping[str, Any] | None = None
) -> dict[str, int] | None:
    """Normalized scores of n1..n4, or None when PreScore skips."""
    handle = FakeHandle(cluster(existing))
    plugin = interpodaffinity.new(args, handle)
    state = CycleState()
    info = PodInfo.of(incoming)
    status = plugin.pre_score(state, info, handle.nodes)
    if status.is_skip:
        return None
    scores = []
    for node in handle.nodes:
        score, status = plugin.score(state, info, node)
        assert status.is_success
        scores.append(score)
    names = [node.name for node in handle.nodes]
    assert plugin.score_extensions().normalize_score(state, info, names, scores).is_success
    return dict(zip(names, scores, strict=True))


def scores(n1: int = 0, n2: int = 0, n3: int = 0, n4: int = 0) -> dict[str, int]:
    return {"n1": n1, "n2": n2, "n3": n3, "n4": n4}


@pytest.mark.parametrize(
    ("incoming", "existing", "args", "want"),
    [
        pytest.param(pod(), [pod("e", S1, "n1")], None, None, id="nothing-to-score"),
        pytest.param(
            pod(aff=affinity(preferred=[weighted(5, term())])),
            [pod("e", S1, "n1")],
            None,
            scores(100, 100),
            id="preferred-affinity-favours-the-region",
        ),
        pytest.param(
            pod(
                aff=affinity(
                    preferred=[weighted(8, term()), weighted(2, term(["z21"], "zone", "zone"))]
                )
            ),
            [pod("e", S1, "n1"), pod("f", {"zone": "z21"}, "n3")],
            None,
            scores(100, 100, 25),
            id="preferred-affinity-weights",
        ),
        pytest.param(
            pod(aff=affinity(preferred_anti=[weighted(5, term(topology="zone"))])),
            [pod("e", S1, "n1")],
            None,
            scores(0, 100, 100, 100),
            id="preferred-anti-affinity-avoids-the-zone",
        ),
        pytest.param(
            pod(labels=S1),
            [pod("e", S2, "n3", aff=affinity(preferred=[weighted(10, term())]))],
            None,
            scores(n3=100),
            id="existing-pods-preferred-affinity-is-symmetric",
        ),
        pytest.param(
            pod(labels=S1),
            [pod("e", S2, "n3", aff=affinity(preferred_anti=[weighted(10, term())]))],
            None,
            scores(100, 100, 0, 100),
            id="existing-pods-preferred-anti-affinity-is-symmetric",
        ),
        pytest.param(
            pod(labels=S1),
            [pod("e", S2, "n3", aff=affinity(required=[term()]))],
            None,
            scores(n3=100),
            id="existing-pods-required-affinity-at-hard-weight",
        ),
        pytest.param(
            pod(labels=S1),
            [pod("e", S2, "n3", aff=affinity(required=[term()]))],
            {"hardPodAffinityWeight": 0},
            None,
            id="hard-weight-zero-ignores-required-terms",
        ),
        pytest.param(
            pod(labels=S1),
            [pod("e", S2, "n3", aff=affinity(preferred=[weighted(10, term())]))],
            {"ignorePreferredTermsOfExistingPods": True},
            None,
            id="ignoring-existing-pods-preferred-terms",
        ),
        pytest.param(
            pod(labels=S1, aff=affinity(preferred=[weighted(4, term(topology="zone"))])),
            [
                pod("e", S1, "n1"),
                pod("f", S2, "n3", aff=affinity(preferred=[weighted(2, term())])),
            ],
            {"ignorePreferredTermsOfExistingPods": True},
            scores(n1=100, n3=50),
            id="ignore-flag-still-counts-when-the-pod-has-preferred-terms",
        ),
        pytest.param(
            pod(
                labels=S1,
                aff=affinity(
                    preferred=[weighted(5, term(topology="zone"))],
                    preferred_anti=[weighted(5, term(topology="zone"))],
                ),
            ),
            [pod("e", S1, "n1")],
            None,
            scores(),
            id="weights-cancelling-out-score-all-zero",
        ),
    ],
)
def test_score(
    incoming: Pod,
    existing: list[Pod],
    args: Mapping[str, Any] | None,
    want: dict[str, int] | None,
) -> None:
    assert run_score(incoming, existing, args) == want


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param([5, 5, 5], [0, 0, 0], id="all-equal"),
        pytest.param([0, 10, 5], [0, 100, 50], id="positive"),
        pytest.param([-10, 0, -5], [0, 100, 50], id="negative"),
        pytest.param([-3, 0, 3], [0, 50, 100], id="mixed"),
        pytest.param([0, 3, 1], [0, 100, 33], id="truncates"),
        pytest.param([0, 100, 29], [0, 100, 28], id="divides-before-scaling"),
    ],
)
def test_normalize_score(raw: list[int], want: list[int]) -> None:
    plugin = interpodaffinity.new(None, FakeHandle())
    state = CycleState()
    state.write(
        interpodaffinity.PRE_SCORE_STATE_KEY,
        interpodaffinity._PreScoreState({"zone": {"z": 1}}),
    )
    names = [f"n{i}" for i in range(len(raw))]
    normalized = list(raw)
    assert plugin.normalize_score(state, PodInfo.of(pod()), names, normalized).is_success
    assert normalized == want


@pytest.mark.parametrize(
    "args",
    [
        pytest.param({"hardPodAffinityWeight": 101}, id="weight-above-100"),
        pytest.param({"hardPodAffinityWeight": -1}, id="negative-weight"),
    ],
)
def test_new_rejects_invalid_args(args: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="not in valid range"):
        interpodaffinity.new(args, FakeHandle())


def test_events_to_register() -> None:
    events = [e.event for e in interpodaffinity.new(None, FakeHandle()).events_to_register()]
    assert [(e.resource, e.action) for e in events] == [
        (
            EventResource.ASSIGNED_POD,
            ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
        ),
        (EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
    ]


TARGET = pod(aff=affinity(required=[term()], anti=[term(["S2"], "zone")]))


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, pod("e", S1), QueueingHint.SKIP, id="unscheduled-pod-added"),
        pytest.param(None, pod("e", S1, "n1"), QueueingHint.QUEUE, id="matching-pod-added"),
        pytest.param(None, pod("e", S2, "n1"), QueueingHint.SKIP, id="unrelated-pod-added"),
        pytest.param(
            pod("e", S2, "n1"), pod("e", S1, "n1"), QueueingHint.QUEUE, id="now-matches-affinity"
        ),
        pytest.param(
            pod("e", S2, "n1"),
            pod("e", {"security": "S3"}, "n1"),
            QueueingHint.QUEUE,
            id="stops-matching-anti-affinity",
        ),
        pytest.param(
            pod("e", S1, "n1"), pod("e", S1, "n1"), QueueingHint.SKIP, id="no-relevant-change"
        ),
        pytest.param(
            pod("e", S2, "n1"), None, QueueingHint.QUEUE, id="anti-affinity-match-deleted"
        ),
        pytest.param(pod("e", S1, "n1"), None, QueueingHint.SKIP, id="unrelated-pod-deleted"),
    ],
)
def test_pod_change_hint(old: Pod | None, new: Pod | None, want: QueueingHint) -> None:
    events = interpodaffinity.new(None, FakeHandle()).events_to_register()
    hint = events[0].hint
    assert hint is not None
    assert hint(TARGET, old, new) is want


@pytest.mark.parametrize(
    ("node", "want"),
    [
        pytest.param(
            make_node("x", labels={"region": "r9"}), QueueingHint.QUEUE, id="affinity-key"
        ),
        pytest.param(make_node("x", labels={"zone": "z9"}), QueueingHint.QUEUE, id="anti-key"),
        pytest.param(make_node("x", labels={"rack": "a"}), QueueingHint.SKIP, id="no-key"),
    ],
)
def test_node_change_hint(node: Node, want: QueueingHint) -> None:
    events = interpodaffinity.new(None, FakeHandle()).events_to_register()
    hint = events[1].hint
    assert hint is not None
    assert hint(TARGET, None, node) is want


def test_counts_follow_nodes_that_change_between_cycles() -> None:
    """PreFilter remembers each node's matches across cycles until the node changes."""
    incoming = pod(labels=S1, aff=affinity(anti=[term(topology="zone")]))
    nodes = cluster([pod("e", S1, "n1", aff=affinity(anti=[term(topology="region")]))])
    handle = FakeHandle(nodes)
    plugin = interpodaffinity.new(None, handle)
    info = PodInfo.of(incoming)

    def filtered() -> dict[str, Status]:
        state = CycleState()
        _, status = plugin.pre_filter(state, info, handle.nodes)
        if status.is_skip:
            return dict.fromkeys(NODE_LABELS, SUCCESS)
        return {node.name: plugin.filter(state, info, node) for node in handle.nodes}

    assert filtered() == expect(
        n1=Status.unschedulable(ANTI), n2=Status.unschedulable(EXISTING_ANTI)
    )
    nodes[0].remove_pod(nodes[0].pods[0].pod)
    nodes[2].add_pod(PodInfo.of(pod("f", S1, "n3")))
    assert filtered() == expect(n3=Status.unschedulable(ANTI))


def batch_cluster(existing: Sequence[Pod]) -> list[NodeInfo]:
    """n1..n4 with ``existing``, plus a NodeInfo with no Node at all."""
    return [*cluster(existing), NodeInfo()]


BATCH_EXISTING = [
    pod("e", S1, "n1"),
    pod("f", S2, "n3", aff=affinity(anti=[term(["S2"], "zone")])),
    pod("g", S1, "n4", aff=affinity(preferred=[weighted(3, term(["S2"], "zone"))])),
]


@pytest.mark.parametrize(
    ("incoming", "picked"),
    [
        pytest.param(pod(labels=S2), None, id="existing-anti-affinity-only"),
        pytest.param(pod(aff=affinity(required=[term()])), None, id="affinity"),
        pytest.param(
            pod(labels=S1, aff=affinity(required=[term(topology="rack")])),
            None,
            id="first-of-group-needs-the-key",
        ),
        pytest.param(
            pod(labels=S1, aff=affinity(required=[term(["S3"])])), None, id="unmatched-affinity"
        ),
        pytest.param(
            pod(labels=S2, aff=affinity(required=[term()], anti=[term(topology="zone")])),
            [4, 2, 0],
            id="everything-on-a-subset",
        ),
        pytest.param(pod(aff=affinity(anti=[term(topology="zone")])), [], id="no-nodes"),
    ],
)
def test_filter_nodes_matches_filter(incoming: Pod, picked: list[int] | None) -> None:
    nodes = batch_cluster(BATCH_EXISTING)
    handle = FakeHandle(nodes)
    plugin = interpodaffinity.new(None, handle)
    state = CycleState()
    info = PodInfo.of(incoming)
    assert plugin.pre_filter(state, info, handle.nodes)[1].is_success
    batch = nodes if picked is None else [nodes[i] for i in picked]
    statuses = plugin.filter_nodes(state, info, batch)
    assert statuses == [plugin.filter(state, info, node) for node in batch]
    assert all(status is SUCCESS for status in statuses if status.is_success)


def test_filter_nodes_without_pre_filter_state_fails_every_node() -> None:
    plugin = interpodaffinity.new(None, FakeHandle())
    statuses = plugin.filter_nodes(CycleState(), PodInfo.of(pod()), cluster([])[:2])
    assert [status.code for status in statuses] == [Code.ERROR, Code.ERROR]


@pytest.mark.parametrize(
    ("incoming", "picked"),
    [
        pytest.param(
            pod(labels=S2, aff=affinity(preferred_anti=[weighted(5, term(topology="zone"))])),
            None,
            id="preferred-anti-affinity",
        ),
        pytest.param(pod(labels=S2), [3, 4, 0], id="existing-pods-terms-on-a-subset"),
        pytest.param(
            pod(aff=affinity(preferred=[weighted(2, term()), weighted(7, term(topology="zone"))])),
            [],
            id="no-nodes",
        ),
    ],
)
def test_score_nodes_matches_score(incoming: Pod, picked: list[int] | None) -> None:
    nodes = batch_cluster(BATCH_EXISTING)
    handle = FakeHandle(nodes)
    plugin = interpodaffinity.new(None, handle)
    state = CycleState()
    info = PodInfo.of(incoming)
    assert plugin.pre_score(state, info, handle.nodes).is_success
    batch = nodes if picked is None else [nodes[i] for i in picked]
    scores, status = plugin.score_nodes(state, info, batch)
    assert status is SUCCESS
    assert scores == [plugin.score(state, info, node)[0] for node in batch]


def test_score_nodes_without_pre_score_state_fails() -> None:
    plugin = interpodaffinity.new(None, FakeHandle())
    scores, status = plugin.score_nodes(CycleState(), PodInfo.of(pod()), cluster([]))
    assert (scores, status.code) == ([], Code.ERROR)


@pytest.mark.parametrize(
    ("incoming", "existing", "nodes", "want"),
    [
        pytest.param(
            pod(aff=affinity(preferred=[weighted(1, term())])),
            [pod("e", S1, "n1")],
            [],
            Code.SKIP,
            id="no-nodes",
        ),
        pytest.param(pod(labels=S1), [pod("e", S1, "n1")], None, Code.SKIP, id="nothing-preferred"),
        pytest.param(
            pod(aff=affinity(preferred=[weighted(1, term(["S3"]))])),
            [pod("e", S1, "n1")],
            None,
            Code.SKIP,
            id="preferred-terms-match-nothing",
        ),
        pytest.param(
            pod(aff=affinity(preferred=[weighted(1, term())])),
            [pod("e", S1, "n1")],
            None,
            Code.SUCCESS,
            id="preferred-terms-match",
        ),
    ],
)
def test_pre_score_skips_when_nothing_scores(
    incoming: Pod, existing: list[Pod], nodes: list[NodeInfo] | None, want: Code
) -> None:
    handle = FakeHandle(cluster(existing))
    plugin = interpodaffinity.new(None, handle)
    candidates = handle.nodes if nodes is None else nodes
    assert plugin.pre_score(CycleState(), PodInfo.of(incoming), candidates).code is want


def test_pre_score_follows_nodes_that_change_between_cycles() -> None:
    """PreScore remembers each node's weights across cycles until the node changes."""
    incoming = pod(labels=S2, aff=affinity(preferred_anti=[weighted(5, term(topology="zone"))]))
    nodes = cluster([pod("e", S1, "n1")])
    handle = FakeHandle(nodes)
    plugin = interpodaffinity.new(None, handle)
    info = PodInfo.of(incoming)

    def scored() -> dict[str, int]:
        state = CycleState()
        assert plugin.pre_score(state, info, handle.nodes).is_success
        return dict(zip(NODE_LABELS, plugin.score_nodes(state, info, handle.nodes)[0], strict=True))

    assert scored() == {"n1": -5, "n2": 0, "n3": 0, "n4": 0}
    nodes[0].remove_pod(nodes[0].pods[0].pod)
    nodes[2].add_pod(PodInfo.of(pod("f", S1, "n3")))
    assert scored() == {"n1": 0, "n2": 0, "n3": -5, "n4": 0}
