from __future__ import annotations

import datetime
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import pytest

from controlplane.scheduler.framework.interface import (
    SUCCESS,
    Code,
    CycleState,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterResult,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins import defaultpreemption, noderesourcesfit
from controlplane.scheduler.plugins.defaultpreemption import Candidate
from kube.api.kinds.core_v1.pod import Pod, PodCondition, PodStatus
from kube.api.kinds.policy_v1 import (
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
    PodDisruptionBudgetStatus,
)
from kube.api.meta_v1 import LabelSelector, ObjectMeta, Resource
from kube.api.meta_v1 import Status as ApiStatus
from kube.client.errors import ApiError
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod
from tests.fakeapi import FakeApi

T0 = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
"""The FakeClock's time."""


def pod(
    name: str,
    priority: int,
    cpu: str = "1",
    *,
    node: str | None = "n1",
    labels: Mapping[str, str] | None = None,
    started: int | None = None,
    nominated: str | None = None,
    terminating: bool = False,
) -> Pod:
    """A pod requesting ``cpu``; ``started`` is its start time in minutes after T0."""
    built = make_pod(name, priority=priority, requests={"cpu": cpu}, node_name=node, labels=labels)
    built.status = PodStatus(
        start_time=T0 + datetime.timedelta(minutes=started) if started is not None else None,
        nominated_node_name=nominated,
        conditions=[
            PodCondition(type="DisruptionTarget", status="True", reason="PreemptionByScheduler")
        ]
        if terminating
        else None,
    )
    if terminating:
        built.metadata.deletion_timestamp = T0
    return built


def node(name: str, *pods: Pod, cpu: str = "4") -> NodeInfo:
    return make_node_info(make_node(name, allocatable={"cpu": cpu, "pods": "110"}), *pods)


def pdb(name: str, labels: Mapping[str, str] | None, allowed: int, *disrupted: str) -> Resource:
    return PodDisruptionBudget(
        metadata=ObjectMeta(name=name, namespace="default"),
        spec=PodDisruptionBudgetSpec(
            selector=LabelSelector(match_labels=dict(labels)) if labels is not None else None
        ),
        status=PodDisruptionBudgetStatus(
            disruptions_allowed=allowed,
            disrupted_pods=dict.fromkeys(disrupted, T0) or None,
        ),
    )


@dataclass
class FakeRecorder:
    events: list[tuple[str, str, str, str, str | None, str | None]] = field(default_factory=list)

    def event(
        self,
        obj: Pod,
        type: str,
        reason: str,
        message: str,
        *,
        action: str | None = None,
        related: Pod | None = None,
    ) -> None:
        related_name = related.metadata.name if related is not None else None
        self.events.append((obj.metadata.name or "", type, reason, message, action, related_name))


@dataclass
class FakeWaitingPod:
    pod: Pod
    rejected: list[tuple[str, str]] = field(default_factory=list)

    def allow(self, plugin: str) -> None:
        raise AssertionError("preemption never allows")

    def reject(self, plugin: str, message: str) -> None:
        self.rejected.append((plugin, message))


class FixedOffset(random.Random):
    """Starts the dry run at node ``offset``."""

    def __init__(self, offset: int) -> None:
        super().__init__()
        self.offset = offset

    def randrange(self, *args: Any, **kwargs: Any) -> int:
        return self.offset


@dataclass
class _Conflicts:
    count: int

    def clone(self) -> _Conflicts:
        return _Conflicts(self.count)


class NoConflict:
    """A PreFilter/Filter pair keeping its count of ``conflict``-labelled pods in the cycle
    state, as InterPodAffinity keeps its anti-affinity counts: preemption must update it
    through the PreFilter extensions, on a clone."""

    NAME: ClassVar[str] = "NoConflict"
    KEY = "NoConflict"

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        count = sum(1 for n in nodes for p in n.pods if self._conflicts(p))
        state.write(self.KEY, _Conflicts(count))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        state.read(self.KEY, _Conflicts).count += self._conflicts(to_add)
        return SUCCESS

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        state.read(self.KEY, _Conflicts).count -= self._conflicts(to_remove)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if state.read(self.KEY, _Conflicts).count:
            return Status.unschedulable("conflicting pod")
        return SUCCESS

    @staticmethod
    def _conflicts(info: PodInfo) -> bool:
        return "conflict" in (info.pod.metadata.labels or {})


@dataclass
class Setup:
    handle: FakeHandle
    client: FakeApi
    recorder: FakeRecorder
    plugin: defaultpreemption.DefaultPreemption
    state: CycleState = field(default_factory=CycleState)

    async def preempt(self, preemptor: Pod) -> tuple[PostFilterResult | None, Status]:
        """Run PreFilter and Filter as the framework would, then PostFilter."""
        info = PodInfo.of(preemptor)
        nodes = self.handle.nodes
        for plugin in self.handle.pre_filter_plugins:
            plugin.pre_filter(self.state, info, nodes)
        statuses = {
            n.name: status
            for n in nodes
            if not (
                status := self.handle.run_filter_plugins_with_nominated_pods(self.state, info, n)
            ).is_success
        }
        return await self.plugin.post_filter(self.state, info, statuses)


def setup(
    nodes: Iterable[NodeInfo],
    objects: Iterable[Resource] = (),
    *,
    offset: int = 0,
    absolute: int = 100,
    extra: Iterable[Any] = (),
) -> Setup:
    handle = FakeHandle(nodes, objects)
    fit = noderesourcesfit.new(None, cast(Any, handle))
    plugins = [fit, *extra]
    handle.filter_plugins = plugins
    handle.pre_filter_plugins = plugins
    client, recorder = handle.client, FakeRecorder()
    client.seed(*(info.pod for node in handle.nodes for info in node.pods))
    handle.recorder = recorder
    plugin = defaultpreemption.DefaultPreemption(
        cast(Any, handle), 10, absolute, rng=FixedOffset(offset)
    )
    return Setup(handle, client, recorder, plugin)


def calls(client: FakeApi) -> list[tuple[Any, ...]]:
    """The writes: pod deletes (by default grace) with their uid precondition, and patches of
    pod status with their type and body."""
    made: list[tuple[Any, ...]] = []
    for action in client.actions:
        assert action.kind == "Pod"
        if action.verb == "delete":
            assert action.obj["gracePeriodSeconds"] is None
            made.append(("delete", action.name, action.obj["preconditions"].uid))
        else:
            assert (action.verb, action.subresource) == ("patch", "status")
            made.append(("patch", action.name, action.patch_type, action.obj))
    return made


def deleted(calls: Iterable[tuple[Any, ...]]) -> list[str]:
    return sorted(call[1] for call in calls if call[0] == "delete")


@pytest.mark.parametrize(
    ("nodes", "objects", "preemptor", "want_node", "want_deleted"),
    [
        pytest.param(
            [node("n1", pod("low", 1, "2"), pod("mid", 5, "2"))],
            [],
            pod("p", 10, "2", node=None),
            "n1",
            ["low"],
            id="lowest-priority-victim",
        ),
        pytest.param(
            [node("n1", pod("a", 1), pod("b", 2), pod("c", 3, "2"))],
            [],
            pod("p", 10, "2", node=None),
            "n1",
            ["a", "b"],
            id="reprieves-most-important-first",
        ),
        pytest.param(
            [node("n1", pod("a", 1, "2", started=10), pod("b", 1, "2", started=5))],
            [],
            pod("p", 10, "2", node=None),
            "n1",
            ["a"],
            id="equal-priority-younger-pod-evicted",
        ),
        pytest.param(
            [
                node(
                    "n1",
                    pod("a", 1, "2", started=10, labels={"app": "x"}),
                    pod("b", 1, "2", started=5),
                )
            ],
            [pdb("budget", {"app": "x"}, 0)],
            pod("p", 10, "2", node=None),
            "n1",
            ["b"],
            id="pdb-protected-pod-reprieved-first",
        ),
        pytest.param(
            [node("n1", pod("a", 1, "4", labels={"app": "x"}))],
            [pdb("budget", {"app": "x"}, 0)],
            pod("p", 10, "2", node=None),
            "n1",
            ["a"],
            id="pdb-violated-when-unavoidable",
        ),
        pytest.param(
            [
                node("n1", pod("a", 1, "4", labels={"app": "x"})),
                node("n2", pod("b", 5, "4", node="n2")),
            ],
            [pdb("budget", {"app": "x"}, 0)],
            pod("p", 10, "2", node=None),
            "n2",
            ["b"],
            id="node-without-pdb-violation-preferred",
        ),
        pytest.param(
            [node("n1", pod("a", 5, "4")), node("n2", pod("b", 1, "4", node="n2"))],
            [],
            pod("p", 10, "2", node=None),
            "n2",
            ["b"],
            id="node-with-lower-victim-priority-preferred",
        ),
        pytest.param(
            [
                node("n1", pod("a", 1, "2"), pod("b", 1, "2")),
                node("n2", pod("c", 1, "4", node="n2")),
            ],
            [],
            pod("p", 10, "4", node=None),
            "n2",
            ["c"],
            id="node-with-smaller-priority-sum-preferred",
        ),
        pytest.param(
            [
                node("n1", pod("h", 20, "3"), pod("a", 1, "1")),
                node("n2", pod("b", 1, "2", node="n2"), pod("c", 20, "2", node="n2")),
            ],
            [],
            pod("p", 10, "1", node=None),
            "n1",
            ["a"],
            id="only-lower-priority-victims-ties-to-first-node",
        ),
    ],
)
async def test_preempt(
    nodes: list[NodeInfo],
    objects: list[Resource],
    preemptor: Pod,
    want_node: str,
    want_deleted: list[str],
) -> None:
    s = setup(nodes, objects)

    result, status = await s.preempt(preemptor)

    assert status == SUCCESS
    assert result == PostFilterResult(want_node)
    assert deleted(calls(s.client)) == want_deleted


def never(built: Pod) -> Pod:
    assert built.spec is not None
    built.spec.preemption_policy = "Never"
    return built


@pytest.mark.parametrize(
    ("nodes", "preemptor", "want_result", "want"),
    [
        pytest.param(
            [node("n1", pod("a", 1, "4"))],
            never(pod("p", 10, "2", node=None)),
            None,
            "preemption: not eligible due to preemptionPolicy=Never.",
            id="preemption-policy-never",
        ),
        pytest.param(
            [node("n1", pod("t", 1, "2", terminating=True), pod("a", 1, "2"))],
            pod("p", 10, "2", node=None, nominated="n1"),
            None,
            "preemption: not eligible due to a terminating pod on the nominated node.",
            id="waits-for-terminating-victim-on-nominated-node",
        ),
        pytest.param(
            [node("n1", pod("t", 1, "2", terminating=True), pod("a", 1, "2"))],
            pod("p", 10, "8", node=None, nominated="n1"),
            PostFilterResult(""),
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            id="nominated-node-unresolvable-preempts-again",
        ),
        pytest.param(
            [
                node("n1", pod("h", 20, "4")),
                node("n2", cpu="1"),
                node("n3", cpu="1"),
            ],
            pod("p", 10, "2", node=None),
            PostFilterResult(""),
            "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
            "2 Preemption is not helpful for scheduling.",
            id="no-candidate",
        ),
        pytest.param(
            [node("n1", pod("h", 20, "3"), pod("l", 1, "1"))],
            pod("p", 10, "2", node=None),
            PostFilterResult(""),
            "preemption: 0/1 nodes are available: 1 Insufficient cpu.",
            id="does-not-fit-without-victims",
        ),
    ],
)
async def test_no_preemption(
    nodes: list[NodeInfo], preemptor: Pod, want_result: PostFilterResult | None, want: str
) -> None:
    s = setup(nodes)

    result, status = await s.preempt(preemptor)

    assert (result, status) == (want_result, Status.unschedulable(want))
    assert calls(s.client) == []


async def test_no_nodes() -> None:
    s = setup([])

    result, status = await s.preempt(pod("p", 10, node=None))

    assert result is None
    assert (status.code, status.reasons) == (Code.ERROR, ("preemption: no nodes available",))


CONDITION = PodCondition(
    type="DisruptionTarget",
    status="True",
    last_transition_time=NOW,
    reason="PreemptionByScheduler",
    message="default-scheduler: preempting to accommodate a higher priority pod",
)
MARK_V = ("patch", "v", "strategic", {"status": {"conditions": [CONDITION]}})
EVENT_V = (
    "v",
    "Normal",
    "Preempted",
    "Preempted by pod uid-default-p on node n1",
    "Preempting",
    "p",
)
INTERNAL = ApiError(ApiStatus(code=500, reason="InternalError", message="boom"))
NOT_FOUND = ApiError(ApiStatus(code=404, reason="NotFound", message='pods "v" not found'))


@pytest.mark.parametrize(
    ("victim", "waiting", "error", "want_status", "want_calls", "want_events"),
    [
        pytest.param(
            pod("v", 1, "4"),
            False,
            None,
            SUCCESS,
            [MARK_V, ("delete", "v", "uid-default-v")],
            [EVENT_V],
            id="marks-and-deletes-with-uid-precondition",
        ),
        pytest.param(
            pod("v", 1, "4", terminating=True),
            False,
            None,
            SUCCESS,
            [],
            [],
            id="victim-already-terminating-left-alone",
        ),
        pytest.param(
            pod("v", 1, "4"),
            True,
            None,
            SUCCESS,
            [],
            [EVENT_V],
            id="waiting-victim-rejected-not-deleted",
        ),
        pytest.param(
            pod("v", 1, "4"),
            False,
            NOT_FOUND,
            SUCCESS,
            [MARK_V],
            [],
            id="victim-already-gone",
        ),
        pytest.param(
            pod("v", 1, "4"),
            False,
            INTERNAL,
            Status(Code.ERROR, ("preemption: 500 InternalError: boom",)),
            [MARK_V],
            [],
            id="delete-fails",
        ),
    ],
)
async def test_evicts_victims(
    victim: Pod,
    waiting: bool,
    error: Exception | None,
    want_status: Status,
    want_calls: list[tuple[Any, ...]],
    want_events: list[tuple[str, ...]],
) -> None:
    s = setup([node("n1", victim)])
    waiting_pod = FakeWaitingPod(victim)
    if waiting:
        s.handle.waiting[victim.metadata.uid or ""] = waiting_pod
    if error is not None:
        s.client.fail_next("delete", error)

    result, status = await s.preempt(pod("p", 10, "2", node=None))

    assert status == want_status
    assert result == (PostFilterResult("n1") if status.is_success else None)
    assert calls(s.client) == want_calls
    assert s.recorder.events == want_events
    assert waiting_pod.rejected == ([("DefaultPreemption", "preempted")] if waiting else [])


async def test_clears_lower_priority_nominations() -> None:
    s = setup([node("n1", pod("v", 1, "4"))])
    lower = pod("lower", 5, node=None, nominated="n1")
    higher = pod("higher", 20, node=None, nominated="n1")
    s.handle.nominated = {"n1": [PodInfo.of(lower), PodInfo.of(higher)]}
    s.client.seed(lower, higher)

    result, status = await s.preempt(pod("p", 10, "2", node=None))

    assert (result, status) == (PostFilterResult("n1"), SUCCESS)
    assert calls(s.client)[-1] == (
        "patch",
        "lower",
        "merge",
        {"status": {"nominatedNodeName": None}},
    )
    assert [call[1] for call in calls(s.client)] == ["v", "v", "lower"]


@pytest.mark.parametrize(
    ("offset", "want_node"),
    [
        pytest.param(0, "n1", id="offset-0"),
        pytest.param(1, "n2", id="offset-1"),
        pytest.param(2, "n3", id="offset-2-wraps"),
    ],
)
async def test_candidate_search_starts_at_random_offset(offset: int, want_node: str) -> None:
    nodes = [node(n, pod(f"v-{n}", 1, "4", node=n)) for n in ("n1", "n2", "n3")]
    s = setup(nodes, offset=offset, absolute=1)

    result, status = await s.preempt(pod("p", 10, "2", node=None))

    assert (result, status) == (PostFilterResult(want_node), SUCCESS)
    assert deleted(calls(s.client)) == [f"v-{want_node}"]


async def test_dry_run_updates_cloned_cycle_state() -> None:
    conflicting = pod("c", 1, started=5, labels={"conflict": "yes"})
    s = setup([node("n1", pod("k", 1, started=1), conflicting)], extra=[NoConflict()])

    result, status = await s.preempt(pod("p", 10, node=None))

    assert (result, status) == (PostFilterResult("n1"), SUCCESS)
    assert deleted(calls(s.client)) == ["c"]
    assert s.state.read(NoConflict.KEY, _Conflicts).count == 1


def victim(priority: int, started: int | None = None) -> Pod:
    return pod(f"v{priority}-{started}", priority, started=started)


MIN_PRIORITY = -(2**31)


@pytest.mark.parametrize(
    ("candidates", "want"),
    [
        pytest.param(
            [Candidate("a", (victim(1),), 1), Candidate("b", (victim(5),), 0)],
            "b",
            id="fewest-pdb-violations",
        ),
        pytest.param(
            [Candidate("a", (victim(5), victim(1)), 0), Candidate("b", (victim(3), victim(3)), 0)],
            "b",
            id="lowest-highest-priority",
        ),
        pytest.param(
            [Candidate("a", (victim(3), victim(2)), 0), Candidate("b", (victim(3), victim(1)), 0)],
            "b",
            id="smallest-priority-sum",
        ),
        pytest.param(
            [
                Candidate("a", (victim(-5), victim(-5)), 0),
                Candidate("b", (victim(-5),), 0),
            ],
            "b",
            id="negative-priorities-do-not-favour-more-victims",
        ),
        pytest.param(
            [
                Candidate("a", (victim(MIN_PRIORITY), victim(MIN_PRIORITY)), 0),
                Candidate("b", (victim(MIN_PRIORITY),), 0),
            ],
            "b",
            id="fewest-victims",
        ),
        pytest.param(
            [Candidate("a", (victim(1, 1),), 0), Candidate("b", (victim(1, 5),), 0)],
            "b",
            id="latest-start-time",
        ),
        pytest.param(
            [
                Candidate("a", (victim(5, 10), victim(1, 0)), 0),
                Candidate("b", (victim(5, 2), victim(1, 20)), 0),
            ],
            "a",
            id="start-time-of-highest-priority-victims-only",
        ),
        pytest.param(
            [Candidate("a", (victim(1),), 0), Candidate("b", (victim(1),), 0)],
            "a",
            id="ties-go-to-first",
        ),
    ],
)
def test_select_candidate(candidates: list[Candidate], want: str) -> None:
    assert defaultpreemption.select_candidate(candidates, NOW).node_name == want


def budget(obj: Resource) -> defaultpreemption.Budget:
    parsed = defaultpreemption.Budget.of(cast(PodDisruptionBudget, obj))
    assert parsed is not None
    return parsed


X = {"app": "x"}


@pytest.mark.parametrize(
    ("pods", "pdbs", "want_violating"),
    [
        pytest.param(
            [pod("a", 1, labels=X), pod("b", 1, labels=X)],
            [pdb("one", X, 1)],
            ["b"],
            id="allowance-spent-in-order",
        ),
        pytest.param(
            [pod("a", 1, labels=X), pod("b", 1, labels=X)],
            [pdb("one", X, 1, "a")],
            [],
            id="already-disrupted-spends-nothing",
        ),
        pytest.param(
            [make_pod("a", "other", labels=X)],
            [pdb("zero", X, 0)],
            [],
            id="other-namespace",
        ),
        pytest.param([pod("a", 1, labels=X)], [pdb("empty", {}, 0)], [], id="empty-selector"),
        pytest.param([pod("a", 1, labels=X)], [pdb("none", None, 0)], [], id="no-selector"),
        pytest.param([pod("a", 1)], [pdb("zero", X, 0)], [], id="unlabelled-pod"),
        pytest.param(
            [pod("a", 1, labels=X), pod("b", 1)],
            [pdb("zero", X, 0), pdb("two", X, 2)],
            ["a"],
            id="any-violated-budget-counts",
        ),
    ],
)
def test_split_by_pdb_violation(
    pods: list[Pod], pdbs: list[Resource], want_violating: list[str]
) -> None:
    infos = [PodInfo.of(p) for p in pods]

    violating, non_violating = defaultpreemption.split_by_pdb_violation(
        infos, [budget(p) for p in pdbs]
    )

    assert [i.pod.metadata.name for i in violating] == want_violating
    assert [i for i in infos if i not in violating] == non_violating


@pytest.mark.parametrize(
    ("args", "want"),
    [
        pytest.param(
            {"minCandidateNodesPercentage": 101},
            "minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]",
            id="percentage-too-large",
        ),
        pytest.param(
            {"minCandidateNodesAbsolute": -1},
            "minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
            id="absolute-negative",
        ),
        pytest.param(
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
            "[minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
            "minCandidateNodesAbsolute, minCandidateNodesAbsolute: Invalid value: 0: cannot be "
            "zero at the same time as minCandidateNodesPercentage]",
            id="both-zero",
        ),
    ],
)
def test_new_rejects_invalid_args(args: dict[str, Any], want: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(want)}$"):
        defaultpreemption.new(args, cast(Any, FakeHandle()))


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(None, id="defaults"),
        pytest.param(
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 5}, id="zero-percentage"
        ),
    ],
)
def test_new_accepts_valid_args(args: dict[str, Any] | None) -> None:
    assert isinstance(
        defaultpreemption.new(args, cast(Any, FakeHandle())), defaultpreemption.DefaultPreemption
    )
