"""Counts per topology domain kept across cycles (PodTopologySpread's PreFilter,
InterPodAffinity's PreScore): after random binds, assumptions, deletions and node changes
through the real scheduler cache and snapshot, they equal a full recount, and later cycles
visit only the nodes that changed."""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable

import pytest

from controlplane.scheduler.cache import SchedulerCache, Snapshot
from controlplane.scheduler.framework.interface import CycleState
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins import interpodaffinity, podtopologyspread
from kube.api.kinds.core_v1.node import LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE, Node
from kube.api.kinds.core_v1.pod import (
    Affinity,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from kube.api.meta_v1 import LabelSelector
from kube.clock import FakeClock
from tests.controlplane.scheduler.builders import SnapshotHandle, make_node, make_pod

ZONES = ("a", "b", "c")


def constraint(key: str, app: str) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        max_skew=1,
        topology_key=key,
        when_unsatisfiable="DoNotSchedule",
        label_selector=LabelSelector(match_labels={"app": app}),
    )


INCOMING = {
    "zone and hostname, app=web": make_pod(
        "in-web",
        labels={"app": "web"},
        topology_spread=[constraint(LABEL_TOPOLOGY_ZONE, "web"), constraint(LABEL_HOSTNAME, "web")],
    ),
    "zone, app=api": make_pod(
        "in-api", labels={"app": "api"}, topology_spread=[constraint(LABEL_TOPOLOGY_ZONE, "api")]
    ),
}


def recount(nodes: list[NodeInfo], pod: Pod) -> list[dict[str, int]]:
    """Matching pods per domain, from scratch, over every node carrying all the keys."""
    constraints = pod.spec.topology_spread_constraints if pod.spec else None
    assert constraints
    keys = [c.topology_key or "" for c in constraints]
    counts: list[dict[str, int]] = [{} for _ in keys]
    for info in nodes:
        labels = info.node.metadata.labels or {} if info.node else {}
        if not all(key in labels for key in keys):
            continue
        for i, c in enumerate(constraints):
            app = (c.label_selector.match_labels or {})["app"] if c.label_selector else ""
            matching = sum(
                1
                for p in info.pods
                if p.pod.metadata.namespace == "default"
                and p.pod.metadata.deletion_timestamp is None
                and (p.pod.metadata.labels or {}).get("app") == app
            )
            value = labels[keys[i]]
            counts[i][value] = counts[i].get(value, 0) + matching
    return counts


class World:
    """Random changes to a scheduler cache, as the informers and the scheduler make them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.cache = SchedulerCache(FakeClock())
        self.nodes: dict[str, Node] = {}
        self.assumed: dict[str, Pod] = {}
        self.bound: dict[str, Pod] = {}
        self.serial = 0

    def node(self, name: str) -> Node:
        labels = {LABEL_HOSTNAME: name}
        if self.rng.random() < 0.85:
            labels[LABEL_TOPOLOGY_ZONE] = self.rng.choice(ZONES)
        return make_node(name, labels=labels)

    def pod(self, node_name: str | None) -> Pod:
        self.serial += 1
        pod = make_pod(
            f"p{self.serial}",
            self.rng.choice(["default", "default", "other"]),
            labels={"app": self.rng.choice(["web", "web", "api", "db"])},
            node_name=node_name,
        )
        if self.rng.random() < 0.1:
            pod.metadata.deletion_timestamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        return pod

    def some_node(self) -> str:
        return self.rng.choice(sorted(self.nodes))

    def add_node(self) -> None:
        self.serial += 1
        name = f"n{self.serial}"
        self.nodes[name] = self.node(name)
        self.cache.add_node(self.nodes[name])

    def relabel_node(self) -> None:
        name = self.some_node()
        new = self.node(name)
        self.cache.update_node(self.nodes[name], new)
        self.nodes[name] = new

    def remove_node(self) -> None:
        name = self.some_node()
        self.cache.remove_node(self.nodes.pop(name))

    def assume(self) -> None:
        pod = self.pod(None)
        self.cache.assume_pod(PodInfo.of(pod), self.some_node())
        self.assumed[pod.metadata.uid or ""] = pod

    def confirm(self) -> None:
        """The informer delivers an assumed pod bound (sometimes to another node)."""
        uid = self.rng.choice(sorted(self.assumed))
        pod = self.assumed.pop(uid)
        assert pod.spec is not None
        pod.spec.node_name = self.some_node()
        self.cache.add_pod(pod)
        self.bound[uid] = pod

    def forget(self) -> None:
        self.cache.forget_pod(self.assumed.pop(self.rng.choice(sorted(self.assumed))))

    def bind_elsewhere(self) -> None:
        """A pod bound by someone else, now and then to a node not seen yet."""
        name = self.some_node() if self.rng.random() < 0.9 else f"late{self.serial}"
        pod = self.pod(name)
        self.cache.add_pod(pod)
        self.bound[pod.metadata.uid or ""] = pod

    def delete(self) -> None:
        self.cache.remove_pod(self.bound.pop(self.rng.choice(sorted(self.bound))))

    def step(self) -> None:
        moves: list[tuple[float, Callable[[], None]]] = [
            (3 if len(self.nodes) < 40 else 0.5, self.add_node),
            (1 if self.nodes else 0, self.relabel_node),
            (0.5 if len(self.nodes) > 3 else 0, self.remove_node),
            (6 if self.nodes else 0, self.assume),
            (4 if self.assumed and self.nodes else 0, self.confirm),
            (1 if self.assumed else 0, self.forget),
            (3 if self.nodes else 0, self.bind_elsewhere),
            (3 if self.bound else 0, self.delete),
        ]
        weights, actions = zip(*moves, strict=True)
        self.rng.choices(actions, weights)[0]()


SEEDS = pytest.mark.parametrize("seed", [1, 2, 3, 4, 5], ids=lambda seed: f"seed {seed}")


def counting_full_walks(snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-element list counting the calls of ``snapshot.list`` (a full walk) from now."""
    walks = [0]
    listing = snapshot.list

    def counted() -> list[NodeInfo]:
        walks[0] += 1
        return listing()

    monkeypatch.setattr(snapshot, "list", counted)
    return walks


@SEEDS
def test_spread_counts_equal_a_full_recount_after_random_changes(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World(random.Random(seed))
    snapshot = Snapshot()
    plugin = podtopologyspread.new(None, SnapshotHandle(snapshot))
    listing = snapshot.list
    full_walks = counting_full_walks(snapshot, monkeypatch)
    for _ in range(400):
        for _ in range(world.rng.randint(1, 4)):
            world.step()
        world.cache.update_snapshot(snapshot)
        for pod in INCOMING.values():
            state = CycleState()
            _, status = plugin.pre_filter(state, PodInfo.of(pod), listing())
            assert status.is_success
            kept = state.read(podtopologyspread.PRE_FILTER_STATE_KEY, object)
            expected = recount(listing(), pod)
            assert kept.match_counts == expected  # type: ignore[attr-defined]
            histograms = [
                {n: list(counts.values()).count(n) for n in set(counts.values())}
                for counts in expected
            ]
            assert kept.domains_at_count == histograms  # type: ignore[attr-defined]
            for i, counts in enumerate(expected):
                minimum = min(counts.values(), default=0)
                assert kept.min_match_num(i) == minimum  # type: ignore[attr-defined]
    # One full walk per incoming pod's shape, at its first cycle; every later cycle visited
    # only the nodes the snapshot changed.
    assert full_walks == [len(INCOMING)]


def preferred(weight: int, key: str, app: str) -> WeightedPodAffinityTerm:
    return WeightedPodAffinityTerm(
        weight=weight,
        pod_affinity_term=PodAffinityTerm(
            label_selector=LabelSelector(match_labels={"app": app}), topology_key=key
        ),
    )


PREFERRING = make_pod(
    "in-pref",
    labels={"app": "web"},
    affinity=Affinity(
        pod_affinity=PodAffinity(
            preferred_during_scheduling_ignored_during_execution=[
                preferred(50, LABEL_TOPOLOGY_ZONE, "api")
            ]
        ),
        pod_anti_affinity=PodAntiAffinity(
            preferred_during_scheduling_ignored_during_execution=[
                preferred(100, LABEL_HOSTNAME, "web"),
                preferred(30, LABEL_TOPOLOGY_ZONE, "web"),
            ]
        ),
    ),
)


@SEEDS
def test_preferred_affinity_scores_equal_a_full_recount_after_random_changes(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World(random.Random(seed))
    snapshot = Snapshot()
    plugin = interpodaffinity.new(None, SnapshotHandle(snapshot))
    listing = snapshot.list
    pod = PodInfo.of(PREFERRING)
    key = interpodaffinity.PRE_SCORE_STATE_KEY
    scored = walks = 0
    for _ in range(300):
        for _ in range(world.rng.randint(1, 4)):
            world.step()
        world.cache.update_snapshot(snapshot)
        # A plugin of its own walks every node: the reference.
        fresh, kept = CycleState(), CycleState()
        interpodaffinity.new(None, SnapshotHandle(snapshot)).pre_score(fresh, pod, listing())
        full_walks = counting_full_walks(snapshot, monkeypatch)
        plugin.pre_score(kept, pod, listing())
        monkeypatch.setattr(snapshot, "list", listing)
        expected, got = fresh.get(key), kept.get(key)
        assert (got and got.topology_score) == (expected and expected.topology_score)
        scored += expected is not None
        walks += full_walks[0]
    assert scored > 250
    assert walks == 1  # the first cycle's: later ones visited only the changed nodes


def test_preemption_changes_its_own_copy_of_the_kept_counts() -> None:
    cache = SchedulerCache(FakeClock())
    snapshot = Snapshot()
    for name, zone in (("n1", "a"), ("n2", "b")):
        cache.add_node(make_node(name, labels={LABEL_HOSTNAME: name, LABEL_TOPOLOGY_ZONE: zone}))
    cache.add_pod(make_pod("w", labels={"app": "web"}, node_name="n1"))
    cache.update_snapshot(snapshot)
    plugin = podtopologyspread.new(None, SnapshotHandle(snapshot))
    pod = PodInfo.of(INCOMING["zone and hostname, app=web"])
    state = CycleState()
    plugin.pre_filter(state, pod, snapshot.list())
    victim = PodInfo.of(make_pod("w", labels={"app": "web"}, node_name="n1"))
    plugin.remove_pod(state, pod, victim, snapshot.get("n1"))
    changed = state.read(podtopologyspread.PRE_FILTER_STATE_KEY, object)
    assert changed.match_counts[0] == {"a": 0, "b": 0}  # type: ignore[attr-defined]
    again = CycleState()
    plugin.pre_filter(again, pod, snapshot.list())
    kept = again.read(podtopologyspread.PRE_FILTER_STATE_KEY, object)
    assert kept.match_counts[0] == {"a": 1, "b": 0}  # type: ignore[attr-defined]
