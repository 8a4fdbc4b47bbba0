"""PodTopologySpread: Filter, its PreFilter extensions, Score, default constraints and
requeueing hints, on cases modelled on upstream's filtering_test.go, scoring_test.go and
plugin_test.go.

The cluster is upstream's usual one: nodes a and b in zone z1, x and y in zone z2, each with
its hostname label; pods labelled ``foo`` are the ones the constraints select.
"""

from __future__ import annotations

import datetime
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
from controlplane.scheduler.plugins import podtopologyspread
from kube.api.kinds.apps_v1 import ReplicaSet, ReplicaSetSpec, StatefulSet, StatefulSetSpec
from kube.api.kinds.core_v1.node import LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE, Node, Taint
from kube.api.kinds.core_v1.pod import (
    Pod,
    ReplicationController,
    ReplicationControllerSpec,
    Toleration,
    TopologySpreadConstraint,
)
from kube.api.kinds.core_v1.service import Service, ServiceSpec
from kube.api.meta_v1 import (
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
    OwnerReference,
)
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

ZONE = "zone"
NOT_MATCH = Status.unschedulable(podtopologyspread.ERR_REASON_CONSTRAINTS_NOT_MATCH)
MISSING_LABEL = Status.unresolvable(podtopologyspread.ERR_REASON_NODE_LABEL_NOT_MATCH)
FOO = {"foo": ""}
FOO_EXISTS = LabelSelector(
    match_expressions=[LabelSelectorRequirement(key="foo", operator="Exists")]
)


def spread(
    key: str = ZONE,
    max_skew: int = 1,
    hard: bool = True,
    selector: LabelSelector | None = FOO_EXISTS,
    **extra: Any,
) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable="DoNotSchedule" if hard else "ScheduleAnyway",
        label_selector=selector,
        **extra,
    )


def pod(
    name: str = "incoming",
    node: str | None = None,
    labels: Mapping[str, str] | None = FOO,
    constraints: Sequence[TopologySpreadConstraint] = (),
    namespace: str = "default",
    **extra: Any,
) -> Pod:
    return make_pod(
        name, namespace, labels=labels, node_name=node, topology_spread=constraints, **extra
    )


def pods_on(**counts: int) -> list[Pod]:
    """``counts`` matching pods on each named node."""
    return [pod(f"{node}{i}", node) for node, count in counts.items() for i in range(count)]


NODES = {
    "a": {ZONE: "z1", LABEL_HOSTNAME: "a"},
    "b": {ZONE: "z1", LABEL_HOSTNAME: "b"},
    "x": {ZONE: "z2", LABEL_HOSTNAME: "x"},
    "y": {ZONE: "z2", LABEL_HOSTNAME: "y"},
}


def cluster(
    existing: Sequence[Pod],
    extra_labels: Mapping[str, Mapping[str, str]] | None = None,
    taints: Mapping[str, Sequence[Taint]] | None = None,
    nodes: Mapping[str, Mapping[str, str]] = NODES,
) -> list[NodeInfo]:
    return [
        make_node_info(
            make_node(
                name,
                labels={**labels, **(extra_labels or {}).get(name, {})},
                taints=(taints or {}).get(name, ()),
            ),
            *(p for p in existing if p.spec is not None and p.spec.node_name == name),
        )
        for name, labels in nodes.items()
    ]


def run_filter(
    incoming: Pod, nodes: list[NodeInfo], handle: FakeHandle | None = None
) -> dict[str, Status]:
    handle = handle or FakeHandle(nodes)
    plugin = podtopologyspread.new(None, handle)
    state = CycleState()
    info = PodInfo.of(incoming)
    _, status = plugin.pre_filter(state, info, handle.nodes)
    if status.is_skip:
        return {node.name: SUCCESS for node in nodes}
    assert status.is_success
    return {node.name: plugin.filter(state, info, node) for node in handle.nodes}


def expect(*failing: str, **others: Status) -> dict[str, Status]:
    """Every node of NODES and ``others``: NOT_MATCH for ``failing``, SUCCESS by default."""
    names = [*NODES, *(name for name in others if name not in NODES)]
    return {name: NOT_MATCH if name in failing else others.get(name, SUCCESS) for name in names}


TERMINATING = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


def terminating(p: Pod) -> Pod:
    p.metadata.deletion_timestamp = TERMINATING
    return p


@pytest.mark.parametrize(
    ("incoming", "nodes", "want"),
    [
        pytest.param(pod(), cluster(pods_on(a=3)), expect(), id="no-constraints"),
        pytest.param(
            pod(constraints=[spread(hard=False)]),
            cluster(pods_on(a=3)),
            expect(),
            id="only-soft-constraints",
        ),
        pytest.param(
            pod(constraints=[spread()]),
            cluster([]),
            expect(),
            id="no-existing-pods",
        ),
        pytest.param(
            pod(constraints=[spread()]),
            cluster(pods_on(a=1, b=1, x=1)),
            expect("a", "b"),
            id="zone-skew",
        ),
        pytest.param(
            pod(constraints=[spread(max_skew=2)]),
            cluster(pods_on(a=1, b=1, x=1)),
            expect(),
            id="zone-skew-within-max-skew",
        ),
        pytest.param(
            pod(constraints=[spread(LABEL_HOSTNAME)]),
            cluster(pods_on(a=1, b=1, x=1)),
            expect("a", "b", "x"),
            id="hostname-skew",
        ),
        pytest.param(
            pod(labels={"bar": ""}, constraints=[spread(LABEL_HOSTNAME)]),
            cluster(pods_on(a=1, b=1, x=1)),
            expect(),
            id="incoming-pod-does-not-match-itself",
        ),
        pytest.param(
            pod(constraints=[spread(LABEL_HOSTNAME, selector=LabelSelector())]),
            cluster(pods_on(a=3)),
            expect(),
            id="empty-selector-counts-no-pods",
        ),
        pytest.param(
            pod(constraints=[spread(LABEL_HOSTNAME, selector=None)]),
            cluster(pods_on(a=3)),
            expect(),
            id="missing-selector-matches-nothing",
        ),
        pytest.param(
            pod(constraints=[spread()]),
            cluster([], nodes={**NODES, "n": {LABEL_HOSTNAME: "n"}}),
            expect(n=MISSING_LABEL),
            id="node-without-the-topology-key",
        ),
        pytest.param(
            pod(constraints=[spread(min_domains=3)]),
            cluster(pods_on(a=1, x=1)),
            expect("a", "b", "x", "y"),
            id="fewer-domains-than-min-domains-makes-the-minimum-zero",
        ),
        pytest.param(
            pod(constraints=[spread(min_domains=2)]),
            cluster(pods_on(a=1, x=1)),
            expect(),
            id="enough-domains-for-min-domains",
        ),
        pytest.param(
            pod(constraints=[spread(), spread(LABEL_HOSTNAME)]),
            cluster(pods_on(a=1, b=1, x=1)),
            expect("a", "b", "x"),
            id="zone-and-hostname",
        ),
        pytest.param(
            pod(constraints=[spread()]),
            cluster([*pods_on(a=2), pod("other", "x", namespace="elsewhere")]),
            expect("a", "b"),
            id="pods-in-other-namespaces-do-not-count",
        ),
        pytest.param(
            pod(constraints=[spread()]),
            cluster([*pods_on(x=1), terminating(pod("t1", "a")), terminating(pod("t2", "a"))]),
            expect("x", "y"),
            id="terminating-pods-do-not-count",
        ),
        pytest.param(
            pod(node_selector={"env": "prod"}, constraints=[spread()]),
            cluster(pods_on(x=2), extra_labels={"x": {"env": "prod"}, "y": {"env": "prod"}}),
            expect(),
            id="node-affinity-policy-honor-ignores-other-zones",
        ),
        pytest.param(
            pod(
                node_selector={"env": "prod"},
                constraints=[spread(node_affinity_policy="Ignore")],
            ),
            cluster(pods_on(x=2), extra_labels={"x": {"env": "prod"}, "y": {"env": "prod"}}),
            expect("x", "y"),
            id="node-affinity-policy-ignore-counts-all-zones",
        ),
        pytest.param(
            pod(constraints=[spread(LABEL_HOSTNAME)]),
            cluster(pods_on(a=1, b=1, y=1), taints={"x": [Taint(key="k", effect="NoSchedule")]}),
            expect("a", "b", "y"),
            id="node-taints-policy-ignore-by-default",
        ),
        pytest.param(
            pod(constraints=[spread(LABEL_HOSTNAME, node_taints_policy="Honor")]),
            cluster(pods_on(a=1, b=1, y=1), taints={"x": [Taint(key="k", effect="NoSchedule")]}),
            expect(),
            id="node-taints-policy-honor-drops-tainted-domains",
        ),
        pytest.param(
            pod(
                tolerations=[Toleration(key="k", operator="Exists")],
                constraints=[spread(LABEL_HOSTNAME, node_taints_policy="Honor")],
            ),
            cluster(pods_on(a=1, b=1, y=1), taints={"x": [Taint(key="k", effect="NoSchedule")]}),
            expect("a", "b", "y"),
            id="node-taints-policy-honor-keeps-tolerated-domains",
        ),
        pytest.param(
            pod(
                constraints=[spread(LABEL_HOSTNAME, node_taints_policy="Honor")],
            ),
            cluster(
                pods_on(a=1, b=1, y=1), taints={"x": [Taint(key="k", effect="PreferNoSchedule")]}
            ),
            expect("a", "b", "y"),
            id="node-taints-policy-honor-only-counts-do-not-schedule-taints",
        ),
        pytest.param(
            pod(labels={**FOO, "rev": "2"}, constraints=[spread(match_label_keys=["rev"])]),
            cluster(
                [
                    pod("a1", "a", {**FOO, "rev": "1"}),
                    pod("b1", "b", {**FOO, "rev": "1"}),
                    pod("x1", "x", {**FOO, "rev": "2"}),
                ]
            ),
            expect("x", "y"),
            id="match-label-keys-count-only-the-same-revision",
        ),
    ],
)
def test_filter(incoming: Pod, nodes: list[NodeInfo], want: dict[str, Status]) -> None:
    assert run_filter(incoming, nodes) == want


def test_pre_filter_reports_a_selector_that_does_not_parse() -> None:
    bad = LabelSelector(match_expressions=[LabelSelectorRequirement(key="foo", operator="Is")])
    handle = FakeHandle(cluster([]))
    plugin = podtopologyspread.new(None, handle)
    _, status = plugin.pre_filter(
        CycleState(), PodInfo.of(pod(constraints=[spread(selector=bad)])), handle.nodes
    )
    assert status.code is Code.ERROR


@pytest.mark.parametrize(
    ("constraints", "existing", "changes", "want"),
    [
        pytest.param(
            [spread()],
            pods_on(a=1, b=1, x=1),
            [("remove", "a")],
            expect(),
            id="removing-from-the-crowded-zone",
        ),
        pytest.param(
            [spread()],
            pods_on(a=1, x=1),
            [("remove", "x")],
            expect("a", "b"),
            id="removing-from-the-minimum-lowers-it",
        ),
        pytest.param(
            [spread(LABEL_HOSTNAME)],
            pods_on(a=1, b=1, x=1),
            [("add", "y")],
            expect(),
            id="adding-to-the-only-minimum-raises-it",
        ),
        pytest.param(
            [spread(LABEL_HOSTNAME)],
            pods_on(b=1, x=1),
            [("add", "a"), ("add", "y"), ("remove", "a")],
            expect("b", "x", "y"),
            id="several-updates-keep-the-minimum-exact",
        ),
        pytest.param(
            [spread(LABEL_HOSTNAME)],
            pods_on(a=1, b=1, x=1),
            [("add-other-namespace", "y")],
            expect("a", "b", "x"),
            id="pods-of-other-namespaces-are-ignored",
        ),
    ],
)
def test_pre_filter_extensions(
    constraints: list[TopologySpreadConstraint],
    existing: list[Pod],
    changes: list[tuple[str, str]],
    want: dict[str, Status],
) -> None:
    """Preemption's what-ifs on a cloned state (``changes``: a matching pod added to or removed
    from a node); the original state keeps its counts."""
    nodes = cluster(existing)
    handle = FakeHandle(nodes)
    plugin = podtopologyspread.new(None, handle)
    info = PodInfo.of(pod(constraints=constraints))
    state = CycleState()
    assert plugin.pre_filter(state, info, handle.nodes)[1].is_success
    before = {node.name: plugin.filter(state, info, node) for node in nodes}
    what_if = state.clone()
    extensions = plugin.pre_filter_extensions()
    by_name = {node.name: node for node in nodes}
    for i, (action, node_name) in enumerate(changes):
        node = by_name[node_name]
        namespace = "elsewhere" if action.endswith("other-namespace") else "default"
        changed = PodInfo.of(pod(f"changed{i}", node_name, namespace=namespace))
        update = extensions.remove_pod if action == "remove" else extensions.add_pod
        assert update(what_if, info, changed, node).is_success
    assert {node.name: plugin.filter(what_if, info, node) for node in nodes} == want
    assert {node.name: plugin.filter(state, info, node) for node in nodes} == before


def run_score(
    incoming: Pod, nodes: list[NodeInfo], handle: FakeHandle | None = None
) -> dict[str, int] | None:
    """Normalized scores of every node (all of them candidates), or None when PreScore
    skips."""
    handle = handle or FakeHandle(nodes)
    plugin = podtopologyspread.new(None, handle)
    state = CycleState()
    info = PodInfo.of(incoming)
    if plugin.pre_score(state, info, handle.nodes).is_skip:
        return None
    scores = []
    for node in handle.nodes:
        score, status = plugin.score(state, info, node)
        assert status.is_success
        scores.append(score)
    names = [node.name for node in handle.nodes]
    assert plugin.score_extensions().normalize_score(state, info, names, scores).is_success
    return dict(zip(names, scores, strict=True))


def web(name: str, node: str | None = None) -> Pod:
    return pod(name, node, labels={"app": "web"})


@pytest.mark.parametrize(
    ("incoming", "nodes", "objects", "want"),
    [
        pytest.param(pod(), cluster(pods_on(a=2)), [], None, id="no-constraints"),
        pytest.param(pod(constraints=[spread()]), cluster(pods_on(a=2)), [], None, id="only-hard"),
        pytest.param(
            pod(constraints=[spread(LABEL_HOSTNAME, hard=False)]),
            cluster(pods_on(a=2, b=1)),
            [],
            # weight log(4 + 2): a 3.58 -> 4, b 1.79 -> 2, x and y 0.
            {"a": 0, "b": 50, "x": 100, "y": 100},
            id="hostname",
        ),
        pytest.param(
            pod(constraints=[spread(LABEL_HOSTNAME, max_skew=2, hard=False)]),
            cluster(pods_on(a=2, b=1)),
            [],
            # maxSkew - 1 added: a 5, b 3, x and y 1.
            {"a": 20, "b": 60, "x": 100, "y": 100},
            id="hostname-max-skew-waters-down",
        ),
        pytest.param(
            pod(constraints=[spread(hard=False)]),
            cluster(pods_on(a=2, b=1)),
            [],
            # weight log(2 + 2): z1 holds 3 -> 4.16 -> 4.
            {"a": 0, "b": 0, "x": 100, "y": 100},
            id="zone",
        ),
        pytest.param(
            pod(constraints=[spread(hard=False)]),
            cluster(pods_on(a=2, b=1), nodes={**NODES, "n": {LABEL_HOSTNAME: "n"}}),
            [],
            {"a": 0, "b": 0, "x": 100, "y": 100, "n": 0},
            id="node-without-the-key-is-ignored",
        ),
        pytest.param(
            pod(constraints=[spread(hard=False)]),
            cluster([]),
            [],
            {"a": 100, "b": 100, "x": 100, "y": 100},
            id="no-matching-pods",
        ),
        pytest.param(
            web("incoming"),
            cluster(
                [web("a0", "a"), web("a1", "a"), web("x0", "x")],
                nodes={
                    "a": {LABEL_TOPOLOGY_ZONE: "z1", LABEL_HOSTNAME: "a"},
                    "b": {LABEL_TOPOLOGY_ZONE: "z1", LABEL_HOSTNAME: "b"},
                    "x": {LABEL_TOPOLOGY_ZONE: "z2", LABEL_HOSTNAME: "x"},
                    "n": {LABEL_HOSTNAME: "n"},
                },
            ),
            [
                Service(
                    metadata=ObjectMeta(name="web", namespace="default"),
                    spec=ServiceSpec(selector={"app": "web"}),
                )
            ],
            # System defaults: hostname (maxSkew 3, weight log 6) and zone (maxSkew 5, three
            # domains counting n's missing label, weight log 5): a 12.8, b 9.2, x 9.4, n 2.
            {"a": 15, "b": 46, "x": 46, "n": 100},
            id="system-defaults-spread-a-service",
        ),
    ],
)
def test_score(
    incoming: Pod, nodes: list[NodeInfo], objects: list[Any], want: dict[str, int] | None
) -> None:
    assert run_score(incoming, nodes, FakeHandle(nodes, objects)) == want


def test_system_defaults_need_a_selecting_workload() -> None:
    nodes = cluster([web("a0", "a")])
    assert run_score(web("incoming"), nodes, FakeHandle(nodes, [_replica_set("other")])) is None


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param([1, 2, 6], [0, 100, 33], id="ignored-node-left-out-of-range"),
        pytest.param([5, 0, 0], [0, 100, 100], id="counted-all-zero"),
    ],
)
def test_normalize_score_gives_ignored_nodes_zero(raw: list[int], want: list[int]) -> None:
    plugin = podtopologyspread.new(None, FakeHandle())
    state = CycleState()
    state.write(
        podtopologyspread.PRE_SCORE_STATE_KEY,
        podtopologyspread._PreScoreState((), [], {"ignored"}, [], []),
    )
    names = ["ignored", "low", "high"]
    normalized = list(raw)
    assert plugin.normalize_score(state, PodInfo.of(pod()), names, normalized).is_success
    assert normalized == want


def _owned(kind: str, api_version: str = "apps/v1") -> Pod:
    owned = web("p")
    owned.metadata.labels = {"app": "web", "tier": "front"}
    owned.metadata.owner_references = [
        OwnerReference(api_version=api_version, kind=kind, name="owner", uid="u", controller=True)
    ]
    return owned


def _replica_set(name: str = "owner") -> ReplicaSet:
    return ReplicaSet(
        metadata=ObjectMeta(name=name, namespace="default"),
        spec=ReplicaSetSpec(selector=LabelSelector(match_labels={"tier": "front"})),
    )


@pytest.mark.parametrize(
    ("incoming", "objects", "want"),
    [
        pytest.param(web("p"), [], "", id="nothing-selects-the-pod"),
        pytest.param(
            web("p"),
            [
                Service(
                    metadata=ObjectMeta(name="s", namespace="default"),
                    spec=ServiceSpec(selector={"app": "web"}),
                ),
                Service(
                    metadata=ObjectMeta(name="t", namespace="default"),
                    spec=ServiceSpec(selector={"app": "db"}),
                ),
                Service(
                    metadata=ObjectMeta(name="u", namespace="elsewhere"),
                    spec=ServiceSpec(selector={"zone": "z"}),
                ),
                Service(metadata=ObjectMeta(name="v", namespace="default"), spec=ServiceSpec()),
            ],
            "app=web",
            id="services-selecting-the-pod",
        ),
        pytest.param(_owned("ReplicaSet"), [_replica_set()], "tier=front", id="replica-set"),
        pytest.param(
            _owned("ReplicaSet", "apps/v1beta2"), [_replica_set()], "", id="other-api-version"
        ),
        pytest.param(_owned("ReplicaSet"), [], "", id="owner-not-cached"),
        pytest.param(
            _owned("StatefulSet"),
            [
                StatefulSet(
                    metadata=ObjectMeta(name="owner", namespace="default"),
                    spec=StatefulSetSpec(selector=LabelSelector(match_labels={"tier": "front"})),
                )
            ],
            "tier=front",
            id="stateful-set",
        ),
        pytest.param(
            _owned("ReplicationController", "v1"),
            [
                ReplicationController(
                    metadata=ObjectMeta(name="owner", namespace="default"),
                    spec=ReplicationControllerSpec(selector={"tier": "front"}),
                ),
                Service(
                    metadata=ObjectMeta(name="s", namespace="default"),
                    spec=ServiceSpec(selector={"app": "web"}),
                ),
            ],
            "app=web,tier=front",
            id="replication-controller-and-service",
        ),
    ],
)
def test_default_selector(incoming: Pod, objects: list[Any], want: str) -> None:
    plugin = podtopologyspread.new(None, FakeHandle(objects=objects))
    assert str(plugin._default_selector(incoming)) == want


def test_list_defaults_apply_to_pods_without_constraints() -> None:
    nodes = cluster([_with_owner(web("a0", "a")), _with_owner(web("b0", "b"))])
    handle = FakeHandle(nodes, [_replica_set()])
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
        ],
    }
    plugin = podtopologyspread.new(args, handle)
    info = PodInfo.of(_owned("ReplicaSet"))
    state = CycleState()
    assert plugin.pre_filter(state, info, handle.nodes)[1].is_success
    assert {node.name: plugin.filter(state, info, node) for node in nodes} == expect("a", "b")


def _with_owner(p: Pod) -> Pod:
    p.metadata.labels = {"app": "web", "tier": "front"}
    return p


@pytest.mark.parametrize(
    ("args", "match"),
    [
        pytest.param({"defaultingType": "Magic"}, "Unsupported value", id="unknown-defaulting"),
        pytest.param(
            {
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            "defaultConstraints are not empty",
            id="system-defaulting-with-constraints",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": ZONE,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"a": "b"}},
                    }
                ],
            },
            "must not define a selector",
            id="default-constraint-with-selector",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            "must be greater than zero",
            id="zero-max-skew",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                ],
            },
            "Duplicate value",
            id="duplicate-constraints",
        ),
    ],
)
def test_new_rejects_invalid_args(args: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        podtopologyspread.new(args, FakeHandle())


def test_events_to_register() -> None:
    events = [e.event for e in podtopologyspread.new(None, FakeHandle()).events_to_register()]
    assert [(e.resource, e.action) for e in events] == [
        (
            EventResource.POD,
            ActionType.ADD
            | ActionType.UPDATE_POD_LABEL
            | ActionType.UPDATE_POD_TOLERATION
            | ActionType.DELETE,
        ),
        (
            EventResource.NODE,
            ActionType.ADD
            | ActionType.DELETE
            | ActionType.UPDATE_NODE_LABEL
            | ActionType.UPDATE_NODE_TAINT,
        ),
    ]


TARGET = pod(constraints=[spread(node_taints_policy="Honor")])


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, pod("e"), QueueingHint.SKIP, id="unscheduled-pod-added"),
        pytest.param(None, pod("e", "a"), QueueingHint.QUEUE, id="matching-pod-added"),
        pytest.param(
            None, pod("e", "a", labels={"bar": ""}), QueueingHint.SKIP, id="unrelated-pod-added"
        ),
        pytest.param(
            None,
            pod("e", "a", namespace="elsewhere"),
            QueueingHint.SKIP,
            id="pod-in-other-namespace",
        ),
        pytest.param(pod("e", "a"), None, QueueingHint.QUEUE, id="matching-pod-deleted"),
        pytest.param(
            pod("e", "a", labels={"bar": ""}),
            pod("e", "a"),
            QueueingHint.QUEUE,
            id="label-update-now-matches",
        ),
        pytest.param(
            pod("e", "a", labels={**FOO, "x": "1"}),
            pod("e", "a", labels={**FOO, "x": "2"}),
            QueueingHint.SKIP,
            id="label-update-unrelated",
        ),
        pytest.param(
            TARGET,
            pod(
                constraints=[spread(node_taints_policy="Honor")],
                tolerations=[Toleration(key="k", operator="Exists")],
            ),
            QueueingHint.QUEUE,
            id="target-gains-a-toleration",
        ),
    ],
)
def test_pod_change_hint(old: Pod | None, new: Pod | None, want: QueueingHint) -> None:
    hint = podtopologyspread.new(None, FakeHandle()).events_to_register()[0].hint
    assert hint is not None
    assert hint(TARGET, old, new) is want


def _node(labels: Mapping[str, str], taints: Sequence[Taint] = ()) -> Node:
    return make_node("n", labels=labels, taints=taints)


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, _node({ZONE: "z"}), QueueingHint.QUEUE, id="node-with-key-added"),
        pytest.param(None, _node({}), QueueingHint.SKIP, id="node-without-key-added"),
        pytest.param(_node({ZONE: "z"}), None, QueueingHint.QUEUE, id="node-with-key-deleted"),
        pytest.param(_node({}), _node({ZONE: "z"}), QueueingHint.QUEUE, id="key-added"),
        pytest.param(_node({ZONE: "z"}), _node({ZONE: "w"}), QueueingHint.QUEUE, id="key-moved"),
        pytest.param(
            _node({ZONE: "z"}),
            _node({ZONE: "z"}, [Taint(key="k", effect="NoSchedule")]),
            QueueingHint.QUEUE,
            id="taints-changed",
        ),
        pytest.param(
            _node({ZONE: "z"}), _node({ZONE: "z", "x": "y"}), QueueingHint.SKIP, id="other-label"
        ),
    ],
)
def test_node_change_hint(old: Node | None, new: Node | None, want: QueueingHint) -> None:
    hint = podtopologyspread.new(None, FakeHandle()).events_to_register()[1].hint
    assert hint is not None
    assert hint(TARGET, old, new) is want


def test_counts_follow_nodes_that_change_between_cycles() -> None:
    """Matching pods per node are remembered across cycles until the node changes."""
    nodes = cluster(pods_on(a=1, b=1, x=1))
    handle = FakeHandle(nodes)
    plugin = podtopologyspread.new(None, handle)
    info = PodInfo.of(pod(constraints=[spread()]))

    def filtered() -> dict[str, Status]:
        state = CycleState()
        assert plugin.pre_filter(state, info, handle.nodes)[1].is_success
        return {node.name: plugin.filter(state, info, node) for node in nodes}

    assert filtered() == expect("a", "b")
    nodes[3].add_pod(PodInfo.of(pod("y0", "y")))
    assert filtered() == expect()


def batch_cluster() -> list[NodeInfo]:
    """NODES with matching pods, a node lacking the zone label and one with no Node at all."""
    return [
        *cluster(pods_on(a=2, x=1, b=1), nodes={**NODES, "bare": {LABEL_HOSTNAME: "bare"}}),
        NodeInfo(),
    ]


@pytest.mark.parametrize(
    ("incoming", "picked"),
    [
        pytest.param(pod(constraints=[spread()]), None, id="zone-every-node"),
        pytest.param(
            pod(constraints=[spread(), spread(LABEL_HOSTNAME)]),
            [5, 3, 0],
            id="zone-and-hostname-subset",
        ),
        pytest.param(pod(constraints=[spread(max_skew=3)]), [1, 2], id="loose-skew"),
        pytest.param(
            pod(labels={"bar": ""}, constraints=[spread(LABEL_HOSTNAME)]), None, id="no-self-match"
        ),
        pytest.param(pod(constraints=[spread()]), [], id="no-nodes"),
    ],
)
def test_filter_nodes_matches_filter(incoming: Pod, picked: list[int] | None) -> None:
    nodes = batch_cluster()
    handle = FakeHandle(nodes)
    plugin = podtopologyspread.new(None, handle)
    state = CycleState()
    info = PodInfo.of(incoming)
    assert plugin.pre_filter(state, info, handle.nodes)[1].is_success
    batch = nodes if picked is None else [nodes[i] for i in picked]
    statuses = plugin.filter_nodes(state, info, batch)
    assert statuses == [plugin.filter(state, info, node) for node in batch]
    assert all(status is SUCCESS for status in statuses if status.is_success)


def test_filter_nodes_without_pre_filter_state_fails_every_node() -> None:
    plugin = podtopologyspread.new(None, FakeHandle())
    statuses = plugin.filter_nodes(CycleState(), PodInfo.of(pod()), batch_cluster()[:2])
    assert [status.code for status in statuses] == [Code.ERROR, Code.ERROR]


@pytest.mark.parametrize(
    ("incoming", "picked"),
    [
        pytest.param(pod(constraints=[spread(hard=False)]), None, id="zone-every-node"),
        pytest.param(
            pod(constraints=[spread(hard=False), spread(LABEL_HOSTNAME, max_skew=2, hard=False)]),
            [4, 0, 2],
            id="zone-and-hostname-subset",
        ),
        pytest.param(pod(constraints=[spread(LABEL_HOSTNAME, hard=False)]), [], id="no-nodes"),
    ],
)
def test_score_nodes_matches_score(incoming: Pod, picked: list[int] | None) -> None:
    nodes = batch_cluster()
    handle = FakeHandle(nodes)
    plugin = podtopologyspread.new(None, handle)
    state = CycleState()
    info = PodInfo.of(incoming)
    assert plugin.pre_score(state, info, handle.nodes).is_success
    batch = nodes if picked is None else [nodes[i] for i in picked]
    scores, status = plugin.score_nodes(state, info, batch)
    assert status is SUCCESS
    assert scores == [plugin.score(state, info, node)[0] for node in batch]


def test_score_nodes_without_pre_score_state_fails() -> None:
    plugin = podtopologyspread.new(None, FakeHandle())
    scores, status = plugin.score_nodes(CycleState(), PodInfo.of(pod()), batch_cluster())
    assert (scores, status.code) == ([], Code.ERROR)


@pytest.mark.parametrize(
    ("incoming", "pre_filter_skips", "pre_score_skips"),
    [
        pytest.param(pod(constraints=[spread()]), False, True, id="only-do-not-schedule"),
        pytest.param(pod(constraints=[spread(hard=False)]), True, False, id="only-schedule-anyway"),
        pytest.param(
            pod(constraints=[spread(), spread(LABEL_HOSTNAME, hard=False)]), False, False, id="both"
        ),
        pytest.param(pod(), True, True, id="none-and-no-selecting-workload"),
    ],
)
def test_skips_without_constraints_of_the_kind(
    incoming: Pod, pre_filter_skips: bool, pre_score_skips: bool
) -> None:
    handle = FakeHandle(cluster(pods_on(a=1)))
    plugin = podtopologyspread.new(None, handle)
    info = PodInfo.of(incoming)
    _, pre_filter = plugin.pre_filter(CycleState(), info, handle.nodes)
    assert pre_filter.is_skip is pre_filter_skips
    assert plugin.pre_score(CycleState(), info, handle.nodes).is_skip is pre_score_skips


@pytest.mark.parametrize(
    ("constraints", "nodes", "want"),
    [
        pytest.param([spread()], NODES, ((ZONE, frozenset({"z1"})),), id="the-crowded-zone"),
        pytest.param([spread(max_skew=3)], NODES, ((ZONE, frozenset()),), id="none-rejected"),
        pytest.param(
            [spread(), spread(LABEL_HOSTNAME)],
            NODES,
            ((ZONE, frozenset({"z1"})), (LABEL_HOSTNAME, frozenset({"a", "b", "x"}))),
            id="each-constraint",
        ),
        pytest.param(
            [spread(LABEL_HOSTNAME)],
            {f"n{i}": {ZONE: "z1", LABEL_HOSTNAME: f"n{i}"} for i in range(17)},
            None,
            id="too-many-domains",
        ),
    ],
)
def test_filter_cache_key_names_the_rejected_domains(
    constraints: list[TopologySpreadConstraint],
    nodes: Mapping[str, Mapping[str, str]],
    want: object,
) -> None:
    """z1 holds 3 matching pods (a: 2, b: 1), z2 one (x: 1, y: none): the zones' minimum is
    1, the hostnames' 0."""
    handle = FakeHandle(cluster(pods_on(a=2, b=1, x=1), nodes=nodes))
    plugin = podtopologyspread.new(None, handle)
    state = CycleState()
    info = PodInfo.of(pod(constraints=constraints))
    assert plugin.filter_cache_key(state, info) is None  # no PreFilter state yet
    assert plugin.pre_filter(state, info, handle.nodes)[1].is_success
    assert plugin.filter_cache_key(state, info) == want
