"""The batched, memoized Filter search (``find_nodes_that_pass_filters``) against the plain
one (every Filter plugin node by node, in order, nothing reused): on random clusters, through
random cycles that place pods and change nodes, both give every node the same verdict, the
same rejecting plugin and the same reasons, with the default profile's real plugins.  Scores
reused across those cycles equal a fresh framework's, and each node's total is its plugins'
normalized scores times their weights, summed."""

from __future__ import annotations

import random

import pytest

from controlplane.scheduler.cache import SchedulerCache, Snapshot
from controlplane.scheduler.config import Profile, default_plugins
from controlplane.scheduler.framework.interface import SUCCESS, Code, CycleState
from controlplane.scheduler.framework.runtime import Framework
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins.registry import REGISTRY
from kube.api.kinds.core_v1.node import LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE, Node, Taint
from kube.api.kinds.core_v1.pod import (
    Affinity,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from kube.api.meta_v1 import LabelSelector
from kube.clock import FakeClock
from tests.controlplane.scheduler.builders import SnapshotHandle, make_node, make_pod

TAINTS = (
    Taint(key="gpu", effect="NoSchedule"),
    Taint(key="spot", value="yes", effect="NoExecute"),
    Taint(key="slow", effect="PreferNoSchedule"),
)
IMAGES = ("app:1", "sidecar:1")
TOLERATIONS = (
    Toleration(key="gpu", operator="Exists"),
    Toleration(key="spot", value="yes", effect="NoExecute"),
    Toleration(key="node.kubernetes.io/unschedulable", operator="Exists"),
    Toleration(key="slow", operator="Exists", effect="PreferNoSchedule"),
)


def random_node(rng: random.Random, name: str) -> Node:
    labels = {LABEL_HOSTNAME: name, "disk": rng.choice(["ssd", "hdd"])}
    if rng.random() < 0.9:
        labels[LABEL_TOPOLOGY_ZONE] = rng.choice("abc")
    return make_node(
        name,
        labels=labels,
        taints=[taint for taint in TAINTS if rng.random() < 0.15],
        allocatable={"cpu": rng.choice(["1", "2", "4"]), "memory": "4Gi", "pods": "8"},
        unschedulable=rng.random() < 0.1,
        images={image: 300 * 1024 * 1024 for image in IMAGES if rng.random() < 0.3},
    )


def random_pod(rng: random.Random, name: str) -> Pod:
    app = rng.choice(["web", "api"])
    spread = [
        TopologySpreadConstraint(
            max_skew=rng.choice([1, 2]),
            topology_key=key,
            when_unsatisfiable="DoNotSchedule",
            label_selector=LabelSelector(match_labels={"app": app}),
        )
        for key in (LABEL_TOPOLOGY_ZONE, LABEL_HOSTNAME)
        if rng.random() < 0.5
    ]
    selector = LabelSelector(match_labels={"app": app})
    preferred = [
        WeightedPodAffinityTerm(
            weight=rng.choice([1, 50, 100]),
            pod_affinity_term=PodAffinityTerm(label_selector=selector, topology_key=key),
        )
        for key in (LABEL_TOPOLOGY_ZONE, LABEL_HOSTNAME)
        if rng.random() < 0.4
    ]
    cut = rng.randrange(len(preferred) + 1)
    affinity = Affinity(
        pod_affinity=PodAffinity(
            preferred_during_scheduling_ignored_during_execution=preferred[:cut] or None
        ),
        pod_anti_affinity=PodAntiAffinity(
            preferred_during_scheduling_ignored_during_execution=preferred[cut:] or None
        ),
    )
    return make_pod(
        name,
        labels={"app": app},
        images=[image for image in IMAGES if rng.random() < 0.6],
        affinity=affinity if preferred else None,
        requests={"cpu": rng.choice(["100m", "500m", "1500m"]), "memory": "256Mi"},
        host_ports=[8080] if rng.random() < 0.2 else [],
        tolerations=[t for t in TOLERATIONS if rng.random() < 0.3],
        node_selector={"disk": "ssd"} if rng.random() < 0.2 else None,
        topology_spread=spread,
    )


def scores(framework: Framework, pod: PodInfo, nodes: list[NodeInfo]) -> dict[str, list[int]]:
    """Each Score plugin's normalized scores of ``nodes`` (PreScore run first)."""
    state = CycleState()
    assert framework.run_pre_score_plugins(state, pod, nodes).is_success
    result, status = framework.run_score_plugins(state, pod, nodes)
    assert status.is_success
    assert result.totals == [
        sum(
            normalized[i] * result.weights[plugin]
            for plugin, normalized in result.normalized.items()
        )
        for i in range(len(nodes))
    ]
    return result.normalized


@pytest.mark.parametrize("seed", range(8), ids=lambda seed: f"seed {seed}")
def test_the_fast_search_judges_every_node_as_the_plain_one(seed: int) -> None:
    rng = random.Random(seed)
    cache = SchedulerCache(FakeClock())
    nodes = {f"n{i}": random_node(rng, f"n{i}") for i in range(60)}
    for node in nodes.values():
        cache.add_node(node)
    snapshot = Snapshot()

    def fresh() -> Framework:
        return Framework(Profile(plugins=default_plugins()), REGISTRY, SnapshotHandle(snapshot))

    framework = fresh()
    # A few pod shapes (the seeds that make them), repeated, so verdicts get reused.
    shapes = [rng.random() for _ in range(4)]
    for cycle in range(40):
        cache.update_snapshot(snapshot)
        pod = random_pod(random.Random(rng.choice(shapes)), f"c{cycle}")
        info = PodInfo.of(pod)
        state = CycleState()
        all_nodes = snapshot.list()
        _, status, _ = framework.run_pre_filter_plugins(state, info, all_nodes)
        if not status.is_success:
            continue
        plain = {node.name: framework.run_filter_plugins(state, info, node) for node in all_nodes}
        start = rng.randrange(len(all_nodes))
        found = framework.find_nodes_that_pass_filters(
            state, info, all_nodes, len(all_nodes), start=start
        )
        assert found.error is None
        ordered = all_nodes[start:] + all_nodes[:start]
        assert [node.name for node in found.nodes] == [
            node.name for node in ordered if plain[node.name] is SUCCESS
        ]
        assert found.statuses == {
            name: verdict for name, verdict in plain.items() if verdict is not SUCCESS
        }
        assert all(verdict.code is not Code.ERROR for verdict in plain.values())
        if len(found.nodes) > 1:
            assert scores(framework, info, found.nodes) == scores(fresh(), info, found.nodes)
        if found.nodes:
            cache.assume_pod(info, rng.choice(found.nodes).name)
        if rng.random() < 0.3:
            name = rng.choice(sorted(nodes))
            new = random_node(rng, name)
            cache.update_node(nodes[name], new)
            nodes[name] = new
