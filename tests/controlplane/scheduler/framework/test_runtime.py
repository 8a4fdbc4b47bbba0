"""The framework runtime: plugin instantiation and ordering, and every extension point's runner.

Most tests use ``Fake``, a plugin at every extension point whose answers a test sets and whose
calls land in a shared log, placed explicitly at the points under test.  The construction
tests use small single-purpose plugins, because multi-point expansion depends on which
extension points a plugin implements.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar, cast

import pytest

from controlplane.scheduler.config import (
    ExtensionPoint,
    PluginRef,
    Plugins,
    PluginSet,
    Profile,
)
from controlplane.scheduler.framework.decisions import DecisionRecord, ScoreBreakdown
from controlplane.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    WAIT,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EventResource,
    Handle,
    Plugin,
    PluginFactory,
    PostFilterResult,
    PreFilterResult,
    Status,
)
from controlplane.scheduler.framework.memo import NodeMemo
from controlplane.scheduler.framework.runtime import (
    Framework,
    FrameworkError,
    extension_point_histogram,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo
from controlplane.scheduler.framework.waiting import WaitingPods
from kube.api.kinds.core_v1.pod import Pod
from kube.metrics import Registry
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

T = TypeVar("T")

NODE_EVENT = ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD))
ALL_EVENTS = [ClusterEventWithHint(ClusterEvent(EventResource.WILDCARD, ActionType.ALL))]


class Fake:
    """A plugin at every extension point.

    ``answers`` maps a method name to what it returns (per-node methods: a dict node → answer);
    what is not set succeeds.  Every call is appended to ``log`` as ``name.method`` (with the
    node for per-node methods).
    """

    NAME: ClassVar[str] = "Fake"

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.answers: dict[str, Any] = {}

    def _answer(self, call: str, default: T, node: str | None = None) -> T:
        self.log.append(f"{self.name}.{call}" + (f"({node})" if node is not None else ""))
        answer = self.answers.get(call, default)
        if node is not None and isinstance(answer, dict):
            answer = answer.get(node, default)
        return cast(T, answer)

    def pre_enqueue(self, pod: Pod) -> Status:
        return self._answer("pre_enqueue", SUCCESS)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        return self._answer("pre_filter", (None, SUCCESS))

    def pre_filter_extensions(self) -> Fake:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        return self._answer("add_pod", SUCCESS)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        return self._answer("remove_pod", SUCCESS)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self._answer("filter", SUCCESS, node.name)

    async def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        return self._answer("post_filter", (None, Status.unschedulable()))

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        return self._answer("pre_score", SUCCESS)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        answer: int | tuple[int, Status] = self._answer("score", 0, node.name)
        return answer if isinstance(answer, tuple) else (answer, SUCCESS)

    def score_extensions(self) -> Fake | None:
        return self if "normalize_score" in self.answers else None

    def normalize_score(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[str], scores: list[int]
    ) -> Status:
        normalize: Status | Callable[[int], int] = self._answer("normalize_score", SUCCESS)
        if isinstance(normalize, Status):
            return normalize
        scores[:] = [normalize(score) for score in scores]
        return SUCCESS

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return self._answer("reserve", SUCCESS)

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self._answer("unreserve", None)

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return self._answer("permit", (SUCCESS, 0.0))

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return self._answer("pre_bind", SUCCESS)

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return self._answer("bind", SUCCESS)

    async def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self._answer("post_bind", None)


def factory_of(plugin: Plugin, calls: list[str] | None = None) -> PluginFactory:
    def new(args: Mapping[str, Any] | None, handle: Handle) -> Plugin:
        if calls is not None:
            calls.append(plugin.NAME)
        return plugin

    return new


class KeyedFake(Fake):
    """A ``Fake`` whose Filter reads nothing of the pod that changes: one cache key for all."""

    def filter_cache_key(self, state: CycleState, pod: PodInfo) -> str:
        return "same"


class Built:
    """A framework of ``Fake``s placed at the points a test names (``keyed`` ones name a
    Filter cache key), with its log and fakes."""

    def __init__(
        self,
        services: FakeHandle | None = None,
        durations: Any = None,
        keyed: Sequence[str] = (),
        **points: Sequence[str | PluginRef],
    ) -> None:
        self.log: list[str] = []
        self.services = services or FakeHandle()
        points = {"queue_sort": ["Sort"], "bind": ["Bind"], **points}
        sets = {
            ExtensionPoint[key.upper()]: PluginSet(
                tuple(ref if isinstance(ref, PluginRef) else PluginRef(ref) for ref in refs)
            )
            for key, refs in points.items()
        }
        names = {ref.name for plugin_set in sets.values() for ref in plugin_set.enabled}
        self.fakes = {
            name: (KeyedFake if name in keyed else Fake)(name, self.log) for name in names
        }
        self.framework = Framework(
            Profile(plugins=Plugins(points=sets)),
            {name: factory_of(fake) for name, fake in self.fakes.items()},
            self.services,
            durations=durations,
        )

    def __getitem__(self, name: str) -> Fake:
        return self.fakes[name]


POD = PodInfo.of(make_pod("p", uid="p"))
N1 = make_node_info(make_node("n1"))
N2 = make_node_info(make_node("n2"))
N3 = make_node_info(make_node("n3"))


# Construction.


class Sorter:
    NAME: ClassVar[str] = "Sorter"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return False


class Binder:
    NAME: ClassVar[str] = "Binder"

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS


class FilterScore:
    NAME: ClassVar[str] = "FilterScore"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return 0, SUCCESS

    def score_extensions(self) -> None:
        return None


class FilterOnly:
    NAME: ClassVar[str] = "FilterOnly"

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return SUCCESS


class RegisteringFilter(FilterOnly):
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [NODE_EVENT]


class ScoreOnly:
    NAME: ClassVar[str] = "ScoreOnly"

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return 0, SUCCESS

    def score_extensions(self) -> None:
        return None


def registry(calls: list[str] | None = None) -> dict[str, PluginFactory]:
    instances: dict[str, Plugin] = {
        "Sorter": Sorter(),
        "Binder": Binder(),
        "A": FilterScore(),
        "B": FilterScore(),
        "F": FilterOnly(),
        "RegF": RegisteringFilter(),
        "S": ScoreOnly(),
    }
    return {name: factory_of(plugin, calls) for name, plugin in instances.items()}


def plugins(multi_point: Sequence[PluginRef] = (), **points: PluginSet) -> Plugins:
    return Plugins(
        multi_point=PluginSet((PluginRef("Sorter"), PluginRef("Binder"), *multi_point)),
        points={ExtensionPoint[key.upper()]: s for key, s in points.items()},
    )


def test_a_plugin_at_several_extension_points_is_one_instance() -> None:
    calls: list[str] = []
    framework = Framework(
        Profile(plugins=plugins([PluginRef("A")], filter=PluginSet((PluginRef("A"),)))),
        registry(calls),
        FakeHandle(),
    )
    assert sorted(calls) == ["Binder", "FilterScore", "Sorter"]
    assert framework.list_plugins() == {
        ExtensionPoint.QUEUE_SORT: ["Sorter"],
        ExtensionPoint.FILTER: ["A"],
        ExtensionPoint.SCORE: ["A"],
        ExtensionPoint.BIND: ["Binder"],
    }


@pytest.mark.parametrize(
    ("profile_plugins", "filters", "scores"),
    [
        pytest.param(
            plugins([PluginRef("A"), PluginRef("B")]), ["A", "B"], ["A", "B"], id="multi-point"
        ),
        pytest.param(
            plugins([PluginRef("A"), PluginRef("B")], filter=PluginSet((PluginRef("F"),))),
            ["A", "B", "F"],
            ["A", "B"],
            id="explicit-plugins-after-multi-point",
        ),
        pytest.param(
            plugins(
                [PluginRef("A"), PluginRef("B")],
                filter=PluginSet((PluginRef("F"), PluginRef("B"))),
            ),
            ["B", "A", "F"],
            ["A", "B"],
            id="explicit-override-of-multi-point-comes-first",
        ),
        pytest.param(
            plugins([PluginRef("A"), PluginRef("B")], score=PluginSet(disabled=("A",))),
            ["A", "B"],
            ["B"],
            id="disabled-at-one-point-runs-at-the-others",
        ),
        pytest.param(
            plugins(
                [PluginRef("A"), PluginRef("B")],
                filter=PluginSet((PluginRef("F"),), disabled=("*",)),
            ),
            ["F"],
            ["A", "B"],
            id="star-disables-the-expansion",
        ),
    ],
)
def test_multi_point_expansion(
    profile_plugins: Plugins, filters: list[str], scores: list[str]
) -> None:
    framework = Framework(Profile(plugins=profile_plugins), registry(), FakeHandle())
    listed = framework.list_plugins()
    assert listed.get(ExtensionPoint.FILTER) == filters
    assert listed.get(ExtensionPoint.SCORE, []) == scores


def failing_factory(args: Mapping[str, Any] | None, handle: Handle) -> Plugin:
    raise ValueError("bad args")


@pytest.mark.parametrize(
    ("profile_plugins", "message"),
    [
        pytest.param(
            plugins([PluginRef("Nope")]),
            'plugin "Nope" does not exist in the registry',
            id="unknown",
        ),
        pytest.param(
            plugins(score=PluginSet((PluginRef("F"),))),
            'plugin "F" does not extend Score plugin',
            id="wrong-extension-point",
        ),
        pytest.param(
            plugins(filter=PluginSet((PluginRef("F"), PluginRef("F")))),
            'plugin "F" already registered as "Filter"',
            id="twice-at-a-point",
        ),
        pytest.param(
            plugins([PluginRef("A"), PluginRef("A")]),
            'plugin "A" already registered as "Filter"',
            id="twice-in-multi-point",
        ),
        pytest.param(
            Plugins(multi_point=PluginSet((PluginRef("Binder"),))),
            "only one queue sort plugin required for profile with scheduler name "
            '"default-scheduler", but got 0',
            id="no-queue-sort",
        ),
        pytest.param(
            Plugins(multi_point=PluginSet((PluginRef("Sorter"),))),
            "at least one bind plugin is needed for profile with scheduler name "
            '"default-scheduler"',
            id="no-bind",
        ),
        pytest.param(
            plugins([PluginRef("Failing")]),
            'initializing plugin "Failing": bad args',
            id="factory-refuses-args",
        ),
    ],
)
def test_bad_profiles(profile_plugins: Plugins, message: str) -> None:
    with pytest.raises(FrameworkError) as raised:
        Framework(
            Profile(plugins=profile_plugins),
            {**registry(), "Failing": failing_factory},
            FakeHandle(),
        )
    assert str(raised.value) == message


def test_plugins_get_their_args_and_the_framework_as_handle() -> None:
    received: list[tuple[Mapping[str, Any] | None, Handle]] = []

    def new(args: Mapping[str, Any] | None, handle: Handle) -> Plugin:
        received.append((args, handle))
        return FilterOnly()

    framework = Framework(
        Profile(plugins=plugins([PluginRef("F")]), plugin_config={"F": {"x": 1}}),
        {**registry(), "F": new},
        FakeHandle(),
    )
    assert received == [({"x": 1}, framework)]


def test_score_weights_prefer_the_score_set_and_default_to_one() -> None:
    framework = Framework(
        Profile(
            plugins=plugins(
                [PluginRef("A", 3), PluginRef("B")], score=PluginSet((PluginRef("A", 5),))
            )
        ),
        registry(),
        FakeHandle(),
    )
    assert (framework.score_weight("A"), framework.score_weight("B")) == (5, 1)


def test_events_to_register_come_from_plugins_that_can_reject() -> None:
    framework = Framework(
        Profile(plugins=plugins([PluginRef("RegF"), PluginRef("F"), PluginRef("S")])),
        registry(),
        FakeHandle(),
    )
    assert framework.events_to_register() == {"RegF": [NODE_EVENT], "F": ALL_EVENTS}


# The queue.


def test_pre_enqueue_refusal_names_its_plugin() -> None:
    built = Built(pre_enqueue=["Gate1", "Gate2", "Gate3"])
    built["Gate2"].answers["pre_enqueue"] = Status.unresolvable("gated")
    assert built.framework.pre_enqueue(POD.pod) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("gated",), "Gate2"
    )
    assert built.log == ["Gate1.pre_enqueue", "Gate2.pre_enqueue"]


def test_queue_sort_less_asks_the_queue_sort_plugin() -> None:
    framework = Built().framework
    early, late = QueuedPodInfo(POD, 1.0), QueuedPodInfo(POD, 2.0)
    assert framework.queue_sort_less(early, late)
    assert not framework.queue_sort_less(late, early)


# PreFilter.

ONLY_N1 = PreFilterResult(frozenset({"n1"}))
ONLY_N2 = PreFilterResult(frozenset({"n2"}))


@pytest.mark.parametrize(
    ("answers", "result", "status", "narrowing", "calls"),
    [
        pytest.param({}, None, SUCCESS, set(), ["A", "B", "C"], id="all-succeed"),
        pytest.param(
            {"A": (ONLY_N1, SUCCESS), "B": (None, SUCCESS)},
            ONLY_N1,
            SUCCESS,
            {"A"},
            ["A", "B", "C"],
            id="a-plugin-narrows-the-nodes",
        ),
        pytest.param(
            {"A": (ONLY_N1, SUCCESS), "B": (PreFilterResult(frozenset({"n1", "n2"})), SUCCESS)},
            ONLY_N1,
            SUCCESS,
            {"A", "B"},
            ["A", "B", "C"],
            id="results-intersect",
        ),
        pytest.param(
            {"A": (ONLY_N1, SUCCESS)},
            ONLY_N1,
            SUCCESS,
            {"A"},
            ["A", "B", "C"],
            id="one-result",
        ),
        pytest.param(
            {"A": (ONLY_N1, SUCCESS), "B": (ONLY_N2, SUCCESS)},
            PreFilterResult(frozenset()),
            Status.unresolvable("node(s) didn't satisfy plugin(s) [A B] simultaneously"),
            {"A", "B"},
            ["A", "B"],
            id="disjoint-results",
        ),
        pytest.param(
            {"B": (PreFilterResult(frozenset()), SUCCESS)},
            PreFilterResult(frozenset()),
            Status.unresolvable("node(s) didn't satisfy plugin B"),
            {"B"},
            ["A", "B"],
            id="empty-result",
        ),
        pytest.param(
            {"A": (None, Status.unschedulable("no")), "B": (ONLY_N1, SUCCESS)},
            ONLY_N1,
            Status(Code.UNSCHEDULABLE, ("no",), "A"),
            {"B"},
            ["A", "B", "C"],
            id="unschedulable-lets-the-rest-run",
        ),
        pytest.param(
            {"B": (None, Status.unresolvable("never"))},
            None,
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("never",), "B"),
            set(),
            ["A", "B"],
            id="unresolvable-stops",
        ),
        pytest.param(
            {"A": (None, Status.failed("boom"))},
            None,
            Status(Code.ERROR, ('running PreFilter plugin "A": boom',), "A"),
            set(),
            ["A"],
            id="error-stops",
        ),
    ],
)
def test_pre_filter(
    answers: dict[str, tuple[PreFilterResult | None, Status]],
    result: PreFilterResult | None,
    status: Status,
    narrowing: set[str],
    calls: list[str],
) -> None:
    built = Built(pre_filter=["A", "B", "C"])
    for name, answer in answers.items():
        built[name].answers["pre_filter"] = answer
    record = DecisionRecord()
    assert built.framework.run_pre_filter_plugins(CycleState(), POD, [N1, N2], record) == (
        result,
        status,
        frozenset(narrowing),
    )
    assert built.log == [f"{name}.pre_filter" for name in calls]
    assert record.pre_filter == status


def test_pre_filter_skip_skips_the_plugins_filter_and_extensions() -> None:
    built = Built(pre_filter=["A", "B"], filter=["A", "B"])
    built["A"].answers["pre_filter"] = (None, SKIP)
    state = CycleState()
    framework = built.framework
    assert framework.run_pre_filter_plugins(state, POD, [N1])[1] == SUCCESS
    assert state.skip_filter_plugins == {"A"}
    built.log.clear()
    assert framework.run_filter_plugins(state, POD, N1) == SUCCESS
    assert framework.run_pre_filter_extension_add_pod(state, POD, POD, N1) == SUCCESS
    assert framework.run_pre_filter_extension_remove_pod(state, POD, POD, N1) == SUCCESS
    assert built.log == ["B.filter(n1)", "B.add_pod", "B.remove_pod"]


@pytest.mark.parametrize(
    ("method", "operation"),
    [
        pytest.param("add_pod", "AddPod", id="add"),
        pytest.param("remove_pod", "RemovePod", id="remove"),
    ],
)
def test_pre_filter_extension_failure(method: str, operation: str) -> None:
    built = Built(pre_filter=["A", "B"])
    built["A"].answers[method] = Status.failed("broken")
    run = getattr(built.framework, f"run_pre_filter_extension_{method}")
    assert run(CycleState(), POD, POD, N1) == Status(
        Code.ERROR, (f'running {operation} on PreFilter plugin "A": broken',), "A"
    )
    assert built.log == [f"A.{method}"]


# Filter.


@pytest.mark.parametrize(
    ("answers", "status", "calls"),
    [
        pytest.param({}, SUCCESS, ["A", "B", "C"], id="all-pass"),
        pytest.param(
            {"B": Status.unschedulable("Insufficient cpu"), "C": Status.unschedulable("later")},
            Status(Code.UNSCHEDULABLE, ("Insufficient cpu",), "B"),
            ["A", "B"],
            id="first-rejection-wins",
        ),
        pytest.param(
            {"A": Status.unresolvable("node(s) had untolerated taint {k: v}")},
            Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) had untolerated taint {k: v}",), "A"
            ),
            ["A"],
            id="unresolvable",
        ),
        pytest.param(
            {"B": Status.failed("boom")},
            Status(Code.ERROR, ('running "B" filter plugin: boom',), "B"),
            ["A", "B"],
            id="error",
        ),
        pytest.param(
            {"B": WAIT},
            Status(Code.ERROR, ('running "B" filter plugin: ',), "B"),
            ["A", "B"],
            id="a-code-filter-may-not-return-is-an-error",
        ),
    ],
)
def test_filter(answers: dict[str, Status], status: Status, calls: list[str]) -> None:
    built = Built(filter=["A", "B", "C"])
    for name, answer in answers.items():
        built[name].answers["filter"] = {"n1": answer}
    record = DecisionRecord()
    assert built.framework.run_filter_plugins(CycleState(), POD, N1, record) == status
    assert built.log == [f"{name}.filter(n1)" for name in calls]
    assert record.filter_verdicts == {"n1": status}


class Capacity:
    """Fits ``capacity`` pods per node; records how many pods each Filter call saw."""

    NAME: ClassVar[str] = "Capacity"

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.seen: list[int] = []
        self.added: list[str] = []

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS

    def pre_filter_extensions(self) -> Capacity:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        self.added.append(to_add.pod.metadata.name or "")
        return SUCCESS

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        self.seen.append(len(node.pods))
        return Status.unschedulable("full") if len(node.pods) >= self.capacity else SUCCESS


def nominated(name: str, priority: int, uid: str | None = None) -> PodInfo:
    return PodInfo.of(make_pod(name, uid=uid, priority=priority))


@pytest.mark.parametrize(
    ("capacity", "nominated_pods", "code", "seen", "added"),
    [
        pytest.param(2, [], Code.SUCCESS, [0], [], id="none-nominated"),
        pytest.param(
            2, [nominated("hi", 10)], Code.SUCCESS, [1, 0], ["hi"], id="higher-priority-counts"
        ),
        pytest.param(
            2, [nominated("same", 5)], Code.SUCCESS, [1, 0], ["same"], id="equal-priority-counts"
        ),
        pytest.param(2, [nominated("lo", 1)], Code.SUCCESS, [0], [], id="lower-priority-ignored"),
        pytest.param(
            2, [nominated("me", 10, uid="p")], Code.SUCCESS, [0], [], id="the-pod-itself-ignored"
        ),
        pytest.param(
            1,
            [nominated("hi", 10)],
            Code.UNSCHEDULABLE,
            [1],
            ["hi"],
            id="no-room-left-for-the-nominated-pod",
        ),
    ],
)
def test_filter_with_nominated_pods(
    capacity: int,
    nominated_pods: list[PodInfo],
    code: Code,
    seen: list[int],
    added: list[str],
) -> None:
    plugin = Capacity(capacity)
    services = FakeHandle()
    services.nominated = {"n1": nominated_pods}
    framework = Framework(
        Profile(plugins=plugins([PluginRef("Capacity")])),
        {**registry(), "Capacity": factory_of(plugin)},
        services,
    )
    pod = PodInfo.of(make_pod("p", uid="p", priority=5))
    node = make_node_info(make_node("n1"))
    record = DecisionRecord()
    status = framework.run_filter_plugins_with_nominated_pods(CycleState(), pod, node, record)
    assert (status.code, plugin.seen, plugin.added) == (code, seen, added)
    assert node.pods == []
    assert record.filter_verdicts == {"n1": status}


@pytest.mark.parametrize(
    ("num_to_find", "start", "rejected", "feasible", "statuses", "processed"),
    [
        pytest.param(3, 0, {}, ["n1", "n2", "n3"], [], 3, id="all"),
        pytest.param(2, 0, {}, ["n1", "n2"], [], 2, id="stops-when-enough"),
        pytest.param(2, 2, {}, ["n3", "n1"], [], 2, id="starts-where-told"),
        pytest.param(2, 0, {"n1"}, ["n2", "n3"], ["n1"], 3, id="rejections-recorded"),
    ],
)
def test_find_nodes_that_pass_filters(
    num_to_find: int,
    start: int,
    rejected: set[str],
    feasible: list[str],
    statuses: list[str],
    processed: int,
) -> None:
    built = Built(filter=["A"])
    built["A"].answers["filter"] = {name: Status.unschedulable("no") for name in rejected}
    outcome = built.framework.find_nodes_that_pass_filters(
        CycleState(), POD, [N1, N2, N3], num_to_find, start=start
    )
    assert [node.name for node in outcome.nodes] == feasible
    assert list(outcome.statuses) == statuses
    assert (outcome.processed, outcome.error) == (processed, None)


@pytest.mark.parametrize(
    ("answers", "feasible", "statuses"),
    [
        pytest.param({"n2": Status.failed("boom")}, ["n1"], [], id="after-a-fit"),
        pytest.param(
            {"n1": Status.unschedulable("no"), "n2": Status.failed("boom")},
            [],
            ["n1"],
            id="after-a-rejection",
        ),
    ],
)
def test_find_nodes_that_pass_filters_stops_at_an_error(
    answers: dict[str, Status], feasible: list[str], statuses: list[str]
) -> None:
    built = Built(filter=["A"])
    built["A"].answers["filter"] = answers
    record = DecisionRecord()
    outcome = built.framework.find_nodes_that_pass_filters(
        CycleState(), POD, [N1, N2, N3], 3, record=record
    )
    assert [node.name for node in outcome.nodes] == feasible
    assert list(outcome.statuses) == statuses
    assert outcome.error == Status(Code.ERROR, ('running "A" filter plugin: boom',), "A")
    assert list(record.filter_verdicts) == ["n1", "n2"]


# PostFilter.


NOMINATED = PostFilterResult("n1")


@pytest.mark.parametrize(
    ("answers", "expected", "calls"),
    [
        pytest.param(
            {"A": (NOMINATED, SUCCESS)}, (NOMINATED, SUCCESS), ["A"], id="first-success-wins"
        ),
        pytest.param(
            {"A": (None, Status.unschedulable("a")), "B": (NOMINATED, Status.unschedulable("b"))},
            (NOMINATED, Status(Code.UNSCHEDULABLE, ("a", "b"), "A")),
            ["A", "B"],
            id="all-unschedulable",
        ),
        pytest.param(
            {"A": (None, Status.unresolvable("hopeless"))},
            (None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("hopeless",), "A")),
            ["A"],
            id="unresolvable-stops",
        ),
        pytest.param(
            {"A": (None, Status.failed("boom"))},
            (None, Status(Code.ERROR, ("boom",), "A")),
            ["A"],
            id="error-stops",
        ),
    ],
)
async def test_post_filter(
    answers: dict[str, tuple[PostFilterResult | None, Status]],
    expected: tuple[PostFilterResult | None, Status],
    calls: list[str],
) -> None:
    built = Built(post_filter=["A", "B"])
    for name, answer in answers.items():
        built[name].answers["post_filter"] = answer
    framework = built.framework
    assert framework.has_post_filter_plugins
    assert await framework.run_post_filter_plugins(CycleState(), POD, {}) == expected
    assert built.log == [f"{name}.post_filter" for name in calls]


# PreScore and Score.


def test_pre_score_skip_leaves_the_plugin_unscored() -> None:
    built = Built(pre_score=["A", "B"], score=["A", "B"])
    built["A"].answers["pre_score"] = SKIP
    built["B"].answers["score"] = {"n1": 7}
    state = CycleState()
    assert built.framework.run_pre_score_plugins(state, POD, [N1]) == SUCCESS
    assert state.skip_score_plugins == {"A"}
    built.log.clear()
    scores, status = built.framework.run_score_plugins(state, POD, [N1])
    assert status == SUCCESS
    assert (scores.names, scores.totals, scores.normalized) == (["n1"], [7], {"B": [7]})
    assert built.log == ["B.score(n1)"]


def test_pre_score_error() -> None:
    built = Built(pre_score=["A", "B"])
    built["A"].answers["pre_score"] = Status.failed("boom")
    assert built.framework.run_pre_score_plugins(CycleState(), POD, [N1]) == Status(
        Code.ERROR, ('running PreScore plugin "A": boom',), "A"
    )


def test_score_normalizes_then_weights_and_records() -> None:
    built = Built(score=[PluginRef("A", 2), PluginRef("B", 3)])
    built["A"].answers["score"] = {"n1": 1, "n2": 4}
    built["A"].answers["normalize_score"] = lambda score: score * 25
    built["B"].answers["score"] = {"n1": 10, "n2": 0}
    record = DecisionRecord()
    scores, status = built.framework.run_score_plugins(CycleState(), POD, [N1, N2], record)
    assert status == SUCCESS
    assert (scores.names, scores.totals) == (["n1", "n2"], [80, 200])
    assert record.scores is scores
    assert scores.breakdown() == {
        "n1": {"A": ScoreBreakdown(1, 25, 50), "B": ScoreBreakdown(10, 10, 30)},
        "n2": {"A": ScoreBreakdown(4, 100, 200), "B": ScoreBreakdown(0, 0, 0)},
    }
    assert scores.total() == {"n1": 80, "n2": 200}


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        pytest.param(
            {"score": {"n2": (0, Status.failed("boom"))}},
            'running Score plugins: plugin "A" failed with: boom',
            id="score-fails",
        ),
        pytest.param(
            {"normalize_score": Status.failed("boom")},
            'running Normalize on Score plugins: plugin "A" failed with: boom',
            id="normalize-fails",
        ),
        pytest.param(
            {"score": {"n1": 101}},
            'applying score defaultWeights on Score plugins: plugin "A" returns an invalid '
            "score 101, it should in the range of [0, 100] after normalizing",
            id="raw-score-out-of-range",
        ),
        pytest.param(
            {"score": {"n1": 10}, "normalize_score": lambda score: -score},
            'applying score defaultWeights on Score plugins: plugin "A" returns an invalid '
            "score -10, it should in the range of [0, 100] after normalizing",
            id="normalized-score-out-of-range",
        ),
    ],
)
def test_score_errors(answers: dict[str, Any], message: str) -> None:
    built = Built(score=["A"])
    built["A"].answers.update(answers)
    _, status = built.framework.run_score_plugins(CycleState(), POD, [N1, N2])
    assert status == Status(Code.ERROR, (message,), "A")


# Reserve.


@pytest.mark.parametrize(
    ("answer", "status", "calls"),
    [
        pytest.param(SUCCESS, SUCCESS, ["A", "B", "C"], id="all-reserve"),
        pytest.param(
            Status.unschedulable("taken"),
            Status(Code.UNSCHEDULABLE, ("taken",), "B"),
            ["A", "B"],
            id="rejection",
        ),
        pytest.param(
            Status.failed("boom"),
            Status(Code.ERROR, ('running Reserve plugin "B": boom',), "B"),
            ["A", "B"],
            id="error",
        ),
    ],
)
def test_reserve_then_unreserve_in_reverse(
    answer: Status, status: Status, calls: list[str]
) -> None:
    built = Built(reserve=["A", "B", "C"])
    built["B"].answers["reserve"] = answer
    state = CycleState()
    assert built.framework.run_reserve_plugins_reserve(state, POD, "n1") == status
    assert built.log == [f"{name}.reserve" for name in calls]
    built.log.clear()
    built.framework.run_reserve_plugins_unreserve(state, POD, "n1")
    assert built.log == ["C.unreserve", "B.unreserve", "A.unreserve"]


# Permit.


@pytest.mark.parametrize(
    ("answers", "status", "calls"),
    [
        pytest.param({}, SUCCESS, ["A", "B"], id="all-allow"),
        pytest.param(
            {"A": (WAIT, 5.0), "B": (Status.unschedulable("no"), 0.0)},
            Status(Code.UNSCHEDULABLE, ("no",), "B"),
            ["A", "B"],
            id="rejection-beats-wait",
        ),
        pytest.param(
            {"A": (Status.failed("boom"), 0.0)},
            Status(Code.ERROR, ('running Permit plugin "A": boom',), "A"),
            ["A"],
            id="error",
        ),
    ],
)
async def test_permit_without_waiting(
    answers: dict[str, tuple[Status, float]], status: Status, calls: list[str]
) -> None:
    built = Built(permit=["A", "B"])
    for name, answer in answers.items():
        built[name].answers["permit"] = answer
    framework = built.framework
    assert framework.run_permit_plugins(CycleState(), POD, "n1") == status
    assert built.log == [f"{name}.permit" for name in calls]
    assert framework.waiting_pod(POD.uid) is None
    assert await framework.wait_on_permit(POD) == SUCCESS


WAITING = Status(Code.WAIT, ('one or more plugins asked to wait and no plugin rejected pod "p"',))


async def start_waiting(built: Built, timeouts: dict[str, float]) -> asyncio.Task[Status]:
    for name, timeout in timeouts.items():
        built[name].answers["permit"] = (WAIT, timeout)
    assert built.framework.run_permit_plugins(CycleState(), POD, "n1") == WAITING
    waiting = asyncio.create_task(built.framework.wait_on_permit(POD))
    await asyncio.sleep(0)
    return waiting


async def test_permit_wait_until_every_waiting_plugin_allows() -> None:
    built = Built(permit=["A", "B", "C"])
    waiting = await start_waiting(built, {"A": 10, "C": 10})
    waiting_pod = built.framework.waiting_pod(POD.uid)
    assert waiting_pod is not None
    assert built.framework.iterate_over_waiting_pods() == [waiting_pod]
    assert waiting_pod.pod is POD.pod
    assert sorted(waiting_pod.pending_plugins) == ["A", "C"]
    waiting_pod.allow("A")
    await asyncio.sleep(0)
    assert not waiting.done()
    waiting_pod.allow("C")
    assert await waiting == SUCCESS
    assert built.framework.waiting_pod(POD.uid) is None


async def test_permit_wait_ends_at_the_first_rejection() -> None:
    built = Built(permit=["A", "B"])
    waiting = await start_waiting(built, {"A": 10, "B": 10})
    waiting_pod = built.framework.waiting_pod(POD.uid)
    assert waiting_pod is not None
    waiting_pod.reject("B", "gang incomplete")
    waiting_pod.allow("A")
    assert await waiting == Status(Code.UNSCHEDULABLE, ("gang incomplete",), "B")


@pytest.mark.parametrize(
    ("timeouts", "advance", "message", "plugin"),
    [
        pytest.param(
            {"A": 10.0, "B": 3.0},
            5,
            "rejected due to timeout after waiting 3s at plugin B",
            "B",
            id="shortest-timer-rejects",
        ),
        pytest.param(
            {"A": 3600.0},
            900,
            "rejected due to timeout after waiting 15m0s at plugin A",
            "A",
            id="timeout-capped-at-fifteen-minutes",
        ),
    ],
)
async def test_permit_wait_times_out(
    timeouts: dict[str, float], advance: float, message: str, plugin: str
) -> None:
    built = Built(permit=["A", "B"])
    waiting = await start_waiting(built, timeouts)
    await built.services.clock.advance(advance)
    assert await waiting == Status(Code.UNSCHEDULABLE, (message,), plugin)


async def test_waiting_pods_are_shared_and_rejected_when_removed() -> None:
    shared = WaitingPods()
    built = Built(permit=["A"])
    framework = Framework(
        Profile(scheduler_name="other", plugins=plugins(permit=PluginSet((PluginRef("A"),)))),
        {**registry(), "A": factory_of(built["A"])},
        built.services,
        waiting_pods=shared,
    )
    built["A"].answers["permit"] = (WAIT, 10.0)
    assert framework.run_permit_plugins(CycleState(), POD, "n1") == WAITING
    assert shared.get(POD.uid) is framework.waiting_pod(POD.uid)
    assert framework.reject_waiting_pod(POD.uid)
    assert not framework.reject_waiting_pod("other-uid")
    assert await framework.wait_on_permit(POD) == Status(Code.UNSCHEDULABLE, ("removed",))


# The binding cycle.


@pytest.mark.parametrize(
    ("answers", "status", "calls"),
    [
        pytest.param({}, SUCCESS, ["A"], id="first-binds"),
        pytest.param({"A": SKIP}, SUCCESS, ["A", "B"], id="skip-passes-to-the-next"),
        pytest.param({"A": SKIP, "B": SKIP}, SKIP, ["A", "B"], id="all-skip"),
        pytest.param(
            {"A": SKIP, "B": Status.unschedulable("gone")},
            Status(Code.UNSCHEDULABLE, ("gone",), "B"),
            ["A", "B"],
            id="rejection",
        ),
        pytest.param(
            {"A": Status.failed("conflict")},
            Status(Code.ERROR, ('running Bind plugin "A": conflict',), "A"),
            ["A"],
            id="error",
        ),
    ],
)
async def test_bind_chain(answers: dict[str, Status], status: Status, calls: list[str]) -> None:
    built = Built(bind=["A", "B"])
    for name, answer in answers.items():
        built[name].answers["bind"] = answer
    assert await built.framework.run_bind_plugins(CycleState(), POD, "n1") == status
    assert built.log == [f"{name}.bind" for name in calls]


@pytest.mark.parametrize(
    ("answer", "status", "calls"),
    [
        pytest.param(SUCCESS, SUCCESS, ["A", "B"], id="all-succeed"),
        pytest.param(
            Status.unschedulable("volume gone"),
            Status(Code.UNSCHEDULABLE, ("volume gone",), "A"),
            ["A"],
            id="rejection",
        ),
        pytest.param(
            Status.failed("timeout"),
            Status(Code.ERROR, ('running PreBind plugin "A": timeout',), "A"),
            ["A"],
            id="error",
        ),
    ],
)
async def test_pre_bind(answer: Status, status: Status, calls: list[str]) -> None:
    built = Built(pre_bind=["A", "B"])
    built["A"].answers["pre_bind"] = answer
    assert await built.framework.run_pre_bind_plugins(CycleState(), POD, "n1") == status
    assert built.log == [f"{name}.pre_bind" for name in calls]


async def test_post_bind_runs_every_plugin_in_order() -> None:
    built = Built(post_bind=["A", "B"])
    await built.framework.run_post_bind_plugins(CycleState(), POD, "n1")
    assert built.log == ["A.post_bind", "B.post_bind"]


# Metrics.


async def test_extension_point_latency_is_observed_per_status_and_profile() -> None:
    metrics = Registry()
    durations = extension_point_histogram(metrics)
    built = Built(durations=durations, pre_filter=["A"], reserve=["A"])
    built["A"].answers["reserve"] = Status.unschedulable("no")
    framework = built.framework
    framework.run_pre_filter_plugins(CycleState(), POD, [N1])
    framework.run_reserve_plugins_reserve(CycleState(), POD, "n1")
    framework.run_reserve_plugins_unreserve(CycleState(), POD, "n1")
    await framework.run_bind_plugins(CycleState(), POD, "n1")
    assert [
        durations.count("PreFilter", "Success", "default-scheduler"),
        durations.count("Reserve", "Unschedulable", "default-scheduler"),
        durations.count("Unreserve", "Success", "default-scheduler"),
        durations.count("Bind", "Success", "default-scheduler"),
    ] == [1, 1, 1, 1]
    assert (
        'scheduler_framework_extension_point_duration_seconds_count{extension_point="PreFilter",'
        'status="Success",profile="default-scheduler"} 1'
    ) in metrics.render()


# Reusing a node's answer while neither it nor the pod's key changed.


def test_node_memo_asks_only_about_changed_nodes() -> None:
    memo: NodeMemo[str] = NodeMemo()
    nodes = [make_node_info(make_node(name)) for name in ("a", "b", "c")]
    asked: list[list[str]] = []

    def compute(fresh: list[NodeInfo]) -> list[str]:
        asked.append([node.name for node in fresh])
        return [f"{node.name}@{node.generation}" for node in fresh]

    first = memo.reuse(nodes, ("1",), compute)
    assert memo.reuse(nodes, ("1",), compute) == first
    nodes[1].add_pod(PodInfo.of(make_pod("p", node_name="b")))
    third = memo.reuse(nodes, ("1",), compute)
    assert third[0] == first[0] and third[2] == first[2] and third[1] != first[1]
    memo.reuse(nodes, ("2",), compute)
    memo.reuse(nodes, None, compute)
    assert asked == [["a", "b", "c"], ["b"], ["a", "b", "c"], ["a", "b", "c"]]


def test_node_memo_keeps_one_answer_a_node() -> None:
    """A node's answer for its previous state is dropped when it gets one for its new state:
    the memo does not grow with the number of changes."""
    memo: NodeMemo[str] = NodeMemo()
    node = make_node_info(make_node("a"))
    before = node.clone()
    asked: list[int] = []

    def compute(fresh: list[NodeInfo]) -> list[str]:
        asked.extend(info.generation for info in fresh)
        return [f"{info.name}@{info.generation}" for info in fresh]

    assert memo.reuse([node], "k", compute) == [f"a@{before.generation}"]
    assert memo.reuse([before], "k", compute) == [f"a@{before.generation}"]
    node.add_pod(PodInfo.of(make_pod("p", node_name="a")))
    assert memo.reuse([node], "k", compute) == [f"a@{node.generation}"]
    assert memo.reuse([before], "k", compute) == [f"a@{before.generation}"]
    assert asked == [before.generation, node.generation, before.generation]


def test_node_memo_keeps_the_answers_of_its_most_recent_keys() -> None:
    memo: NodeMemo[str] = NodeMemo(keys=2)
    nodes = [N1, N2]
    asked: list[str] = []

    def compute(key: str) -> Callable[[list[NodeInfo]], list[str]]:
        def answers(fresh: list[NodeInfo]) -> list[str]:
            asked.append(key)
            return [f"{key}:{node.name}" for node in fresh]

        return answers

    for key in ("a", "b", "a", "b", "c", "a"):
        assert memo.reuse(nodes, key, compute(key)) == [f"{key}:n1", f"{key}:n2"]
    # "a" and "b" were each asked once while both were kept; "c" pushed "a" out.
    assert asked == ["a", "b", "c", "a"]


def test_node_memo_passes_failures_on_without_keeping_them() -> None:
    memo: NodeMemo[int] = NodeMemo()
    nodes = [N1, N2]
    assert memo.reuse(nodes, "k", lambda fresh: None) == []
    assert memo.reuse(nodes, "k", lambda fresh: [1] * len(fresh)) == [1, 1]


def test_filter_answers_are_reused_only_for_plugins_that_name_a_key() -> None:
    built = Built(filter=["A", "B"], keyed=["A"])
    nodes = [make_node_info(make_node(name)) for name in ("x", "y")]
    for _ in range(2):
        state = CycleState()
        built.framework.find_nodes_that_pass_filters(state, POD, nodes, 10)
    assert built.log.count("A.filter(x)") == 1 and built.log.count("B.filter(x)") == 2


def test_a_reused_rejection_yields_to_an_earlier_unkeyed_plugin() -> None:
    built = Built(filter=["A", "B", "C"], keyed=["B"])
    built["A"].answers["filter"] = {"y": Status.unschedulable("a")}
    built["B"].answers["filter"] = {"x": Status.unschedulable("b"), "y": Status.unschedulable("b")}
    built["C"].answers["filter"] = {"x": Status.unschedulable("c")}
    nodes = [make_node_info(make_node(name)) for name in ("x", "y")]
    for _ in range(2):
        outcome = built.framework.find_nodes_that_pass_filters(CycleState(), POD, nodes, 10)
        assert outcome.statuses == {
            "x": Status(Code.UNSCHEDULABLE, ("b",), "B"),
            "y": Status(Code.UNSCHEDULABLE, ("a",), "A"),
        }
    # B judged both nodes once; C never saw x, which B had already rejected.
    assert built.log.count("B.filter(x)") == 1 and built.log.count("B.filter(y)") == 1
    assert "C.filter(x)" not in built.log
