from __future__ import annotations

from collections.abc import Callable

import pytest

from controlplane.scheduler.cache import CacheError, SchedulerCache, Snapshot
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import (
    Affinity,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
)
from kube.api.meta_v1 import LabelSelector
from kube.clock import FakeClock
from tests.controlplane.scheduler.builders import make_node, make_pod

TERM = PodAffinityTerm(
    label_selector=LabelSelector(match_labels={"app": "a"}),
    topology_key="kubernetes.io/hostname",
)
WITH_AFFINITY = Affinity(
    pod_affinity=PodAffinity(required_during_scheduling_ignored_during_execution=[TERM])
)
WITH_ANTI_AFFINITY = Affinity(
    pod_anti_affinity=PodAntiAffinity(required_during_scheduling_ignored_during_execution=[TERM])
)


def bound(name: str, node: str, **kwargs: object) -> Pod:
    return make_pod(name, node_name=node, **kwargs)  # type: ignore[arg-type]


def cache_with(*nodes: str) -> SchedulerCache:
    cache = SchedulerCache(FakeClock())
    for name in nodes:
        cache.add_node(make_node(name))
    return cache


def snapshot_of(cache: SchedulerCache) -> Snapshot:
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    return snapshot


def summary(snapshot: Snapshot) -> dict[str, object]:
    """Everything a plugin could read, in comparable form."""

    def node(info: NodeInfo) -> tuple[object, ...]:
        return (
            info.name,
            sorted(pod.uid for pod in info.pods),
            info.requested.milli_cpu,
            info.requested.memory,
            info.allocatable.milli_cpu,
            sorted(info.image_states.items()),
            info.node.metadata.labels if info.node else None,
        )

    return {
        "nodes": sorted(node(info) for info in snapshot.list()),
        "affinity": sorted(info.name for info in snapshot.have_pods_with_affinity()),
        "anti": sorted(info.name for info in snapshot.have_pods_with_required_anti_affinity()),
        "map": sorted(snapshot.node_info_map),
        "num_nodes": snapshot.num_nodes,
    }


def requested_cpu(cache: SchedulerCache, node: str) -> int:
    return snapshot_of(cache).get(node).requested.milli_cpu


def test_assume_then_confirm() -> None:
    cache = cache_with("n1")
    pod = make_pod("p", requests={"cpu": "500m"})
    cache.assume_pod(PodInfo.of(pod), "n1")
    assert cache.is_assumed(pod)
    assert requested_cpu(cache, "n1") == 500
    cache.finish_binding(pod)
    cache.add_pod(bound("p", "n1", requests={"cpu": "500m"}))
    assert not cache.is_assumed(pod)
    assert requested_cpu(cache, "n1") == 500
    assert cache.pod_count == 1
    with pytest.raises(CacheError):
        cache.add_pod(bound("p", "n1"))


def test_confirmed_on_another_node() -> None:
    cache = cache_with("n1", "n2")
    pod = make_pod("p", requests={"cpu": "1"})
    cache.assume_pod(PodInfo.of(pod), "n1")
    cache.add_pod(bound("p", "n2", requests={"cpu": "1"}))
    assert (requested_cpu(cache, "n1"), requested_cpu(cache, "n2")) == (0, 1000)


def test_forget() -> None:
    cache = cache_with("n1")
    pod = make_pod("p", requests={"cpu": "1"})
    cache.assume_pod(PodInfo.of(pod), "n1")
    with pytest.raises(CacheError):
        cache.assume_pod(PodInfo.of(pod), "n1")
    cache.forget_pod(pod)
    assert requested_cpu(cache, "n1") == 0
    assert cache.pod_count == 0
    with pytest.raises(CacheError):
        cache.forget_pod(pod)


def test_forget_refuses_confirmed_pod() -> None:
    cache = cache_with("n1")
    pod = bound("p", "n1")
    cache.add_pod(pod)
    with pytest.raises(CacheError):
        cache.forget_pod(pod)


@pytest.mark.parametrize(
    ("ttl", "finish", "wait", "expired"),
    [
        pytest.param(10.0, True, 11.0, True, id="expires-after-ttl"),
        pytest.param(10.0, True, 9.0, False, id="not-yet"),
        pytest.param(10.0, False, 1000.0, False, id="binding-still-running"),
        pytest.param(0.0, True, 1e6, False, id="ttl-zero-never-expires"),
    ],
)
async def test_expiry(ttl: float, finish: bool, wait: float, expired: bool) -> None:
    clock = FakeClock()
    cache = SchedulerCache(clock, ttl=ttl)
    cache.add_node(make_node("n1"))
    pod = make_pod("p", requests={"cpu": "1"})
    cache.assume_pod(PodInfo.of(pod), "n1")
    if finish:
        cache.finish_binding(pod)
    await clock.advance(wait)
    assert cache.cleanup_expired_assumed_pods() == ([pod] if expired else [])
    assert cache.is_assumed(pod) is not expired
    assert requested_cpu(cache, "n1") == (0 if expired else 1000)


async def test_expired_pod_added_back_by_informer() -> None:
    clock = FakeClock()
    cache = SchedulerCache(clock, ttl=1.0)
    cache.add_node(make_node("n1"))
    pod = make_pod("p")
    cache.assume_pod(PodInfo.of(pod), "n1")
    cache.finish_binding(pod)
    await clock.advance(2)
    cache.cleanup_expired_assumed_pods()
    cache.add_pod(bound("p", "n1"))
    assert cache.pod_count == 1


def test_update_and_remove_pod() -> None:
    cache = cache_with("n1")
    old = bound("p", "n1", requests={"cpu": "1"})
    cache.add_pod(old)
    cache.update_pod(old, bound("p", "n1", requests={"cpu": "2"}))
    assert requested_cpu(cache, "n1") == 2000
    cache.remove_pod(old)
    assert requested_cpu(cache, "n1") == 0
    with pytest.raises(CacheError):
        cache.remove_pod(old)
    with pytest.raises(CacheError):
        cache.update_pod(old, old)


def test_placeholder_for_pod_before_node() -> None:
    cache = SchedulerCache(FakeClock())
    cache.add_pod(bound("p", "late", requests={"cpu": "1"}))
    snapshot = snapshot_of(cache)
    assert snapshot.num_nodes == 0
    assert "late" in cache.dump().nodes
    cache.add_node(make_node("late"))
    cache.update_snapshot(snapshot)
    assert [info.name for info in snapshot.list()] == ["late"]
    assert snapshot.get("late").requested.milli_cpu == 1000


def test_removed_node_with_pods_stays_as_placeholder() -> None:
    cache = cache_with("n1")
    pod = bound("p", "n1")
    cache.add_pod(pod)
    snapshot = snapshot_of(cache)
    cache.remove_node(make_node("n1"))
    cache.update_snapshot(snapshot)
    assert snapshot.num_nodes == 0
    with pytest.raises(KeyError):
        snapshot.get("n1")
    assert cache.node_count == 0
    assert "n1" in cache.dump().nodes
    cache.remove_pod(pod)
    assert cache.dump().nodes == {}


def add_pod(name: str, node: str, **kwargs: object) -> Callable[[SchedulerCache], None]:
    return lambda cache: cache.add_pod(bound(name, node, **kwargs))


def remove_pod(name: str, node: str) -> Callable[[SchedulerCache], None]:
    return lambda cache: cache.remove_pod(bound(name, node))


def add_node(name: str, **kwargs: object) -> Callable[[SchedulerCache], None]:
    return lambda cache: cache.add_node(make_node(name, **kwargs))  # type: ignore[arg-type]


def remove_node(name: str) -> Callable[[SchedulerCache], None]:
    return lambda cache: cache.remove_node(make_node(name))


def assume(name: str, node: str) -> Callable[[SchedulerCache], None]:
    return lambda cache: cache.assume_pod(PodInfo.of(make_pod(name, requests={"cpu": "1"})), node)


def forget(name: str) -> Callable[[SchedulerCache], None]:
    return lambda cache: cache.forget_pod(make_pod(name))


Op = Callable[[SchedulerCache], None]


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param([[add_pod("a", "n1", requests={"cpu": "1"})]], id="pod-added"),
        pytest.param([[add_pod("a", "n1")], [remove_pod("a", "n1")]], id="pod-removed"),
        pytest.param([[add_node("n9")], [add_pod("a", "n9")]], id="node-added"),
        pytest.param([[remove_node("n2")]], id="node-removed"),
        pytest.param(
            [[add_pod("a", "n2")], [remove_node("n2")], [add_node("n2")]],
            id="node-removed-with-pods-and-back",
        ),
        pytest.param(
            [[add_node("n1", labels={"zone": "x"}, allocatable={"cpu": "8"})]],
            id="node-updated",
        ),
        pytest.param([[assume("a", "n3")], [forget("a")]], id="assume-forget"),
        pytest.param(
            [[add_pod("a", "n1", affinity=WITH_AFFINITY)], [remove_pod("a", "n1")]],
            id="affinity-comes-and-goes",
        ),
        pytest.param(
            [
                [add_pod("a", "n1", affinity=WITH_ANTI_AFFINITY)],
                [add_pod("b", "n2", affinity=WITH_ANTI_AFFINITY)],
                [remove_pod("a", "n1")],
            ],
            id="anti-affinity-comes-and-goes",
        ),
        pytest.param(
            [[add_pod("a", "ghost")], [add_node("ghost")], [remove_pod("a", "ghost")]],
            id="placeholder-becomes-node",
        ),
        pytest.param(
            [[add_node("n1", images={"img:1": 100})], [add_node("n2", images={"img:1": 100})]],
            id="images",
        ),
        pytest.param(
            [[add_pod("a", "n1"), remove_node("n3"), add_node("n4"), add_pod("b", "n4")]],
            id="many-changes-in-one-step",
        ),
    ],
)
def test_incremental_snapshot_matches_full(steps: list[list[Op]]) -> None:
    cache = cache_with("n1", "n2", "n3")
    snapshot = snapshot_of(cache)
    for step in steps:
        for op in step:
            op(cache)
        cache.update_snapshot(snapshot)
        assert summary(snapshot) == summary(snapshot_of(cache))


def test_snapshot_copies_only_changed_nodes() -> None:
    cache = cache_with("n1", "n2", "n3")
    snapshot = snapshot_of(cache)
    before = {info.name: info for info in snapshot.list()}
    generations = {name: info.generation for name, info in before.items()}
    cache.add_pod(bound("a", "n2"))
    cache.update_snapshot(snapshot)
    after = {info.name: info for info in snapshot.list()}
    assert all(after[name] is before[name] for name in before)
    changed = {name for name, info in after.items() if info.generation != generations[name]}
    assert changed == {"n2"}
    assert [pod.uid for pod in snapshot.get("n2").pods] == ["uid-default-a"]


def test_snapshot_is_isolated_from_later_changes() -> None:
    cache = cache_with("n1")
    snapshot = snapshot_of(cache)
    cache.add_pod(bound("a", "n1", requests={"cpu": "1"}))
    assert snapshot.get("n1").requested.milli_cpu == 0
    assert snapshot.get("n1").pods == []


@pytest.mark.parametrize(
    ("affinity", "with_affinity", "with_anti"),
    [
        pytest.param(None, [], [], id="none"),
        pytest.param(WITH_AFFINITY, ["n1"], [], id="affinity"),
        pytest.param(WITH_ANTI_AFFINITY, ["n1"], ["n1"], id="anti-affinity"),
    ],
)
def test_affinity_lists(
    affinity: Affinity | None, with_affinity: list[str], with_anti: list[str]
) -> None:
    cache = cache_with("n1", "n2")
    cache.add_pod(bound("a", "n1", affinity=affinity))
    snapshot = snapshot_of(cache)
    assert [info.name for info in snapshot.have_pods_with_affinity()] == with_affinity
    assert [info.name for info in snapshot.have_pods_with_required_anti_affinity()] == with_anti


def zoned(name: str, zone: str) -> Node:
    return make_node(name, labels={"topology.kubernetes.io/zone": zone})


def test_node_list_interleaves_zones() -> None:
    cache = SchedulerCache(FakeClock())
    for name, zone in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c")]:
        cache.add_node(zoned(name, zone))
    assert [info.name for info in snapshot_of(cache).list()] == ["a1", "b1", "c1", "a2", "a3"]


def test_node_changing_zone_reorders_list() -> None:
    cache = SchedulerCache(FakeClock())
    for name, zone in [("a1", "a"), ("a2", "a"), ("b1", "b")]:
        cache.add_node(zoned(name, zone))
    snapshot = snapshot_of(cache)
    cache.update_node(zoned("a2", "a"), zoned("a2", "b"))
    cache.update_snapshot(snapshot)
    assert [info.name for info in snapshot.list()] == ["a1", "b1", "a2"]


def test_image_states_count_nodes() -> None:
    cache = SchedulerCache(FakeClock())
    cache.add_node(make_node("n1", images={"shared": 10, "own": 5}))
    cache.add_node(make_node("n2", images={"shared": 10}))
    snapshot = snapshot_of(cache)
    n2 = snapshot.get("n2").image_states
    assert (n2["shared"].size, n2["shared"].num_nodes) == (10, 2)
    cache.remove_node(make_node("n1"))
    cache.update_node(make_node("n2"), make_node("n2", images={"shared": 10}))
    cache.update_snapshot(snapshot)
    assert snapshot.get("n2").image_states["shared"].num_nodes == 1


def test_dump() -> None:
    cache = cache_with("n1")
    cache.add_pod(bound("a", "n1", requests={"cpu": "1"}))
    cache.assume_pod(PodInfo.of(make_pod("b")), "n1")
    dump = cache.dump()
    assert dump.assumed_pods == frozenset({"uid-default-b"})
    assert [pod.key for pod in dump.nodes["n1"].pods] == ["default/a", "default/b"]
    assert "node n1:" in str(dump)
    assert "default/a, default/b" in str(dump)


def test_large_cluster_snapshot_update_is_incremental() -> None:
    cache = SchedulerCache(FakeClock())
    for i in range(5000):
        cache.add_node(make_node(f"n{i}"))
    snapshot = snapshot_of(cache)
    first = snapshot.list()
    cache.add_pod(bound("a", "n4999"))
    cache.update_snapshot(snapshot)
    assert snapshot.num_nodes == 5000
    assert snapshot.list() == first
    assert all(a is b for a, b in zip(snapshot.list(), first, strict=True))
    assert len(snapshot.get("n4999").pods) == 1


def test_the_snapshot_names_the_nodes_each_update_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = cache_with("n1", "n2", "n3")
    snapshot = Snapshot()
    assert snapshot.changed_since(0) == (None, 1)
    cache.update_snapshot(snapshot)
    names, mark = snapshot.changed_since(1)
    assert sorted(names or ()) == ["n1", "n2", "n3"]
    assert snapshot.changed_since(mark) == ([], mark)
    cache.assume_pod(PodInfo.of(make_pod("p")), "n2")
    cache.update_snapshot(snapshot)
    assert snapshot.changed_since(mark) == (["n2"], mark + 1)
    cache.remove_node(make_node("n3"))
    cache.update_snapshot(snapshot)
    assert snapshot.changed_since(mark + 1) == (["n3"], mark + 2)
    # Beyond twice the nodes (at least MIN_CHANGES), the oldest half is forgotten.
    monkeypatch.setattr("controlplane.scheduler.cache.MIN_CHANGES", 4)
    for i in range(3):
        cache.assume_pod(PodInfo.of(make_pod(f"q{i}")), "n1")
        cache.update_snapshot(snapshot)
    names, latest = snapshot.changed_since(mark + 1)
    assert names is None and latest == mark + 5
    assert snapshot.changed_since(latest - 1) == (["n1"], latest)
