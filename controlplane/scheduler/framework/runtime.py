"""The framework runtime: one ``Framework`` per profile runs its plugins at each extension point.

A framework is built from a ``Profile`` (already merged with the defaults), a registry (plugin
name → factory) and the ``Services`` the scheduler lends it (snapshot, caches, clock, API).
Every plugin the profile enables is instantiated once, however many extension points it runs
at; the framework itself is the ``Handle`` the factories receive, so preemption can re-run the
framework's own filters.

Multi-point plugins are expanded into the extension points they implement, after the plugins
the profile names at that point explicitly (upstream's order: explicit overrides of multi-point
plugins first, then the multi-point plugins, then the other explicit ones); a plugin disabled
at a point is skipped there, and ``"*"`` skips the expansion at that point entirely.

The runners follow upstream's ``frameworkImpl`` status by status, including which plugin a
rejection is attributed to (``Status.plugin``: the queue requeues the pod on the events that
plugin registered) and the wording of the errors.  Two additions serve explainability and
metrics, both free when unused: the filter and score runners take an optional
``DecisionRecord`` that keeps every node's verdict and every plugin's raw, normalized and
weighted score, and the runners observe their latency into an optional histogram.

Permit may hold a pod (``waiting.WaitingPod``); the binding cycle awaits its verdict in
``wait_on_permit``.  What the runners record for explain is ``decisions``, the per-node answers
they reuse across cycles ``memo``.  Plugins are dispatched on the interfaces they implement
(``interface``'s runtime-checkable protocols), resolved once per plugin when the framework is
built: the Filter and Score loops call what was resolved.
"""

from __future__ import annotations

import functools
import itertools
import operator
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from controlplane.scheduler.config import ExtensionPoint, Profile
from controlplane.scheduler.framework import interface
from controlplane.scheduler.framework.decisions import DecisionRecord, FeasibleNodes, NodeScores
from controlplane.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    SKIP,
    SUCCESS,
    ActionType,
    BatchFilterPlugin,
    BatchScorePlugin,
    BindPlugin,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    EventResource,
    FilterCacheKey,
    FilterPlugin,
    Lister,
    NodeInfoLister,
    PermitPlugin,
    Plugin,
    PluginFactory,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScoreCacheKey,
    ScorePlugin,
    Services,
    Status,
)
from controlplane.scheduler.framework.memo import NodeMemo
from controlplane.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo
from controlplane.scheduler.framework.waiting import WaitingPod, WaitingPods
from kube.metrics import Histogram, Registry

if TYPE_CHECKING:
    from kube.api.kinds.core_v1.pod import Pod
    from kube.client.events import EventRecorder
    from kube.client.interface import ApiClient
    from kube.clock import Clock

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")

MAX_PERMIT_TIMEOUT = 15 * 60.0
"""The longest a Permit plugin may hold a pod, in seconds; longer requests are cut to this."""

EXTENSION_POINT_DURATION = "scheduler_framework_extension_point_duration_seconds"

FILTER_BATCH = 64
"""Nodes judged per batch: large enough that batch plugins pay their call once per many
nodes, small enough that a search stopping at ``num_to_find`` wastes little."""

FILTER_MEMO_KEYS = 16
"""Filter keys whose verdicts are kept at once: enough for the turns a few spread domains
take being full (PodTopologySpread's key is the domains it rejects)."""

_ALL_EVENTS = [ClusterEventWithHint(ClusterEvent(EventResource.WILDCARD, ActionType.ALL))]
"""What a plugin that registers no events is assumed to care about: everything."""

_REQUEUEING_POINTS = (
    ExtensionPoint.PRE_ENQUEUE,
    ExtensionPoint.PRE_FILTER,
    ExtensionPoint.FILTER,
    ExtensionPoint.RESERVE,
    ExtensionPoint.PERMIT,
)
"""Only plugins at these points can leave a pod unschedulable, so only they register events."""

_CODE_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


class FrameworkError(Exception):
    """The profile cannot be turned into a framework (unknown plugin, wrong extension point,
    a plugin's factory refused its args, no queue sort or bind plugin)."""


def extension_point_histogram(registry: Registry) -> Histogram:
    """The latency histogram every framework of a scheduler observes into (create it once)."""
    return registry.histogram(
        EXTENSION_POINT_DURATION,
        "Latency for running all plugins of a specific extension point.",
        ("extension_point", "status", "profile"),
        buckets=tuple(0.0001 * 2**i for i in range(12)),
    )


def _status_of(result: object) -> Status:
    if isinstance(result, Status):
        return result
    if isinstance(result, tuple):
        return next((item for item in result if isinstance(item, Status)), SUCCESS)
    return SUCCESS


def _timed(
    point: str,
) -> Callable[[Callable[Concatenate[Framework, P], R]], Callable[Concatenate[Framework, P], R]]:
    """Observe the decorated runner's latency under ``point`` and the code it returned."""

    def decorate(
        run: Callable[Concatenate[Framework, P], R],
    ) -> Callable[Concatenate[Framework, P], R]:
        def timed(self: Framework, /, *args: P.args, **kwargs: P.kwargs) -> R:
            if self._durations is None:
                return run(self, *args, **kwargs)
            start = time.perf_counter()
            result = run(self, *args, **kwargs)
            self._observe(point, start, _status_of(result))
            return result

        functools.update_wrapper(timed, run)
        return timed

    return decorate


def _timed_async(
    point: str,
) -> Callable[
    [Callable[Concatenate[Framework, P], Awaitable[R]]],
    Callable[Concatenate[Framework, P], Awaitable[R]],
]:
    """``_timed`` for the coroutine runners."""

    def decorate(
        run: Callable[Concatenate[Framework, P], Awaitable[R]],
    ) -> Callable[Concatenate[Framework, P], Awaitable[R]]:
        async def timed(self: Framework, /, *args: P.args, **kwargs: P.kwargs) -> R:
            if self._durations is None:
                return await run(self, *args, **kwargs)
            start = time.perf_counter()
            result = await run(self, *args, **kwargs)
            self._observe(point, start, _status_of(result))
            return result

        functools.update_wrapper(timed, run)
        return timed

    return decorate


def _q(name: str) -> str:
    """A name quoted as Go's ``%q`` does, for messages that follow upstream's."""
    return f'"{name}"'


def _failed(context: str, status: Status, plugin: str) -> Status:
    """An ERROR status saying what failed and where, keeping the original exception."""
    return Status(Code.ERROR, (f"{context}: {status.message}",), plugin, status.error)


Judge = Callable[[CycleState, PodInfo, list[NodeInfo]], list[Status]]
"""A Filter plugin's verdicts on a batch of nodes."""
Scores = Callable[[CycleState, PodInfo, list[NodeInfo]], tuple[list[int], Status]]
"""A Score plugin's scores of a batch of nodes, or the first failure."""
CacheKey = Callable[[CycleState, PodInfo], Hashable | None]
_Rejection = tuple[int, Status]
"""A node's first Filter rejection: the plugin's position in the cycle's order, its status."""


@dataclass(frozen=True, slots=True)
class _FilterPlan:
    """One cycle's Filter plugins (position, name), split by whether a node's verdict may be
    reused across cycles: ``key`` is every keyed plugin's position, name and cache key."""

    keyed: tuple[tuple[int, str], ...]
    unkeyed: tuple[tuple[int, str], ...]
    key: tuple[tuple[int, str, Hashable], ...]


def _judge(plugin: FilterPlugin) -> Judge:
    """The plugin's batch Filter, or its Filter node by node."""
    if isinstance(plugin, BatchFilterPlugin):
        return plugin.filter_nodes
    return lambda state, pod, nodes: [plugin.filter(state, pod, node) for node in nodes]


def _scores(plugin: ScorePlugin) -> Scores:
    """The plugin's batch Score, or its Score node by node (stopping at the first failure)."""
    if isinstance(plugin, BatchScorePlugin):
        return plugin.score_nodes

    def each(state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> tuple[list[int], Status]:
        scores: list[int] = []
        for node in nodes:
            score, status = plugin.score(state, pod, node)
            if not status.is_success:
                return scores, status
            scores.append(score)
        return scores, SUCCESS

    return each


def _raw_scores(
    scores: Scores, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], *, failure: list[Status]
) -> list[int] | None:
    """The scores of ``nodes``, or None with the failure appended to ``failure``."""
    raw, status = scores(state, pod, nodes)
    if not status.is_success:
        failure.append(status)
        return None
    return list(raw)


PLUGIN_INTERFACES: dict[ExtensionPoint, Any] = {  # Protocol classes, which mypy calls abstract
    ExtensionPoint.PRE_ENQUEUE: PreEnqueuePlugin,
    ExtensionPoint.QUEUE_SORT: QueueSortPlugin,
    ExtensionPoint.PRE_FILTER: PreFilterPlugin,
    ExtensionPoint.FILTER: FilterPlugin,
    ExtensionPoint.POST_FILTER: PostFilterPlugin,
    ExtensionPoint.PRE_SCORE: PreScorePlugin,
    ExtensionPoint.SCORE: ScorePlugin,
    ExtensionPoint.RESERVE: ReservePlugin,
    ExtensionPoint.PERMIT: PermitPlugin,
    ExtensionPoint.PRE_BIND: PreBindPlugin,
    ExtensionPoint.BIND: BindPlugin,
    ExtensionPoint.POST_BIND: PostBindPlugin,
}
"""The interface that makes a plugin one of each extension point's."""


class Framework:
    """The plugins of one profile, and the runners the scheduler calls at each extension point.

    Also the ``Handle`` its plugins receive.  Scheduling-cycle runners are plain methods (the
    cycle is serial and Filter/Score run per node); binding-cycle runners are coroutines.
    """

    def __init__(
        self,
        profile: Profile,
        registry: Mapping[str, PluginFactory],
        services: Services,
        *,
        waiting_pods: WaitingPods | None = None,
        durations: Histogram | None = None,
    ) -> None:
        self.profile_name = profile.scheduler_name
        self.percentage_of_nodes_to_score = profile.percentage_of_nodes_to_score
        self._services = services
        self._waiting = waiting_pods if waiting_pods is not None else WaitingPods()
        self._durations = durations
        self._plugins = self._instantiate(profile, registry)
        self._points = {point: self._plugins_at(profile, point) for point in ExtensionPoint}
        self._weights = self._score_weights(profile)
        if len(self._points[ExtensionPoint.QUEUE_SORT]) != 1:
            raise FrameworkError(
                "only one queue sort plugin required for profile with scheduler name "
                f"{_q(self.profile_name)}, but got {len(self._points[ExtensionPoint.QUEUE_SORT])}"
            )
        if not self._points[ExtensionPoint.BIND]:
            raise FrameworkError(
                "at least one bind plugin is needed for profile with scheduler name "
                f"{_q(self.profile_name)}"
            )
        self._pre_enqueue: list[tuple[str, PreEnqueuePlugin]] = self._at(ExtensionPoint.PRE_ENQUEUE)
        self._queue_sort: QueueSortPlugin = self._at(ExtensionPoint.QUEUE_SORT)[0][1]
        self._pre_filter: list[tuple[str, PreFilterPlugin]] = self._at(ExtensionPoint.PRE_FILTER)
        self._filter: list[tuple[str, FilterPlugin]] = self._at(ExtensionPoint.FILTER)
        self._post_filter: list[tuple[str, PostFilterPlugin]] = self._at(ExtensionPoint.POST_FILTER)
        self._pre_score: list[tuple[str, PreScorePlugin]] = self._at(ExtensionPoint.PRE_SCORE)
        self._score: list[tuple[str, ScorePlugin]] = self._at(ExtensionPoint.SCORE)
        self._reserve: list[tuple[str, ReservePlugin]] = self._at(ExtensionPoint.RESERVE)
        self._permit: list[tuple[str, PermitPlugin]] = self._at(ExtensionPoint.PERMIT)
        self._pre_bind: list[tuple[str, PreBindPlugin]] = self._at(ExtensionPoint.PRE_BIND)
        self._bind: list[tuple[str, BindPlugin]] = self._at(ExtensionPoint.BIND)
        self._post_bind: list[tuple[str, PostBindPlugin]] = self._at(ExtensionPoint.POST_BIND)
        self._filter_memo: NodeMemo[_Rejection | None] = NodeMemo(FILTER_MEMO_KEYS)
        self._score_memo: defaultdict[str, NodeMemo[Any]] = defaultdict(NodeMemo)
        # What the Filter and Score loops call, resolved once per plugin: they run per node.
        self._judges = {name: _judge(plugin) for name, plugin in self._filter}
        self._filter_keys: dict[str, CacheKey | None] = {
            name: plugin.filter_cache_key if isinstance(plugin, FilterCacheKey) else None
            for name, plugin in self._filter
        }
        self._scorers = {name: _scores(plugin) for name, plugin in self._score}
        self._score_keys: dict[str, CacheKey | None] = {
            name: plugin.score_cache_key if isinstance(plugin, ScoreCacheKey) else None
            for name, plugin in self._score
        }

    # Construction.

    def _instantiate(
        self, profile: Profile, registry: Mapping[str, PluginFactory]
    ) -> dict[str, Plugin]:
        plugins: dict[str, Plugin] = {}
        for name in profile.plugins.names():
            factory = registry.get(name)
            if factory is None:
                raise FrameworkError(f"plugin {_q(name)} does not exist in the registry")
            try:
                plugins[name] = factory(profile.args(name), self)
            except Exception as error:
                raise FrameworkError(f"initializing plugin {_q(name)}: {error}") from error
        return plugins

    def _implements(self, name: str, point: ExtensionPoint) -> bool:
        return isinstance(self._plugins[name], PLUGIN_INTERFACES[point])

    def _plugins_at(self, profile: Profile, point: ExtensionPoint) -> list[str]:
        """The names of the plugins that run at ``point``, in order (see the module doc)."""
        plugin_set = profile.plugins.at(point)
        explicit: list[str] = []
        for ref in plugin_set.enabled:
            if not self._implements(ref.name, point):
                raise FrameworkError(f"plugin {_q(ref.name)} does not extend {point.label} plugin")
            if ref.name in explicit:
                raise FrameworkError(
                    f"plugin {_q(ref.name)} already registered as {_q(point.label)}"
                )
            explicit.append(ref.name)
        if "*" in plugin_set.disabled:
            return explicit
        overrides: list[str] = []
        multi_point: list[str] = []
        for ref in profile.plugins.multi_point.enabled:
            if not self._implements(ref.name, point) or ref.name in plugin_set.disabled:
                continue
            if ref.name in explicit:
                overrides.append(ref.name)
            elif ref.name in multi_point:
                raise FrameworkError(
                    f"plugin {_q(ref.name)} already registered as {_q(point.label)}"
                )
            else:
                multi_point.append(ref.name)
        first = [name for name in explicit if name in overrides]
        rest = [name for name in explicit if name not in overrides]
        return first + multi_point + rest

    def _score_weights(self, profile: Profile) -> dict[str, int]:
        """Each Score plugin's weight: from ``score``, else ``multiPoint``; unset means 1."""
        weights: dict[str, int] = {}
        refs = (
            *profile.plugins.at(ExtensionPoint.SCORE).enabled,
            *profile.plugins.multi_point.enabled,
        )
        for ref in refs:
            if self._implements(ref.name, ExtensionPoint.SCORE) and ref.name not in weights:
                weights[ref.name] = ref.weight or 1
        return weights

    def _at(self, point: ExtensionPoint) -> list[tuple[str, Any]]:
        """``(name, plugin)`` at ``point``; typed by the caller (protocols cannot be checked
        at run time, ``_implements`` already did)."""
        return [(name, self._plugins[name]) for name in self._points[point]]

    def _observe(self, point: str, start: float, status: Status) -> None:
        assert self._durations is not None
        self._durations.observe(
            time.perf_counter() - start, point, _CODE_LABELS[status.code], self.profile_name
        )

    # What the scheduler and the queue ask about the profile.

    def list_plugins(self) -> dict[ExtensionPoint, list[str]]:
        """The plugins at each extension point, in the order they run."""
        return {point: list(names) for point, names in self._points.items() if names}

    def plugin(self, name: str) -> Plugin:
        """The instance of plugin ``name``; KeyError if the profile does not enable it."""
        return self._plugins[name]

    def score_weight(self, plugin: str) -> int:
        return self._weights[plugin]

    @property
    def has_filter_plugins(self) -> bool:
        return bool(self._filter)

    @property
    def has_post_filter_plugins(self) -> bool:
        return bool(self._post_filter)

    @property
    def has_score_plugins(self) -> bool:
        return bool(self._score)

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint]]:
        """Plugin → the cluster events that may make a pod it rejected schedulable.

        Only plugins that can reject a pod are asked; one that does not say is assumed to
        care about every event.
        """
        events: dict[str, list[ClusterEventWithHint]] = {}
        for name, plugin in self._plugins.items():
            if not any(self._implements(name, point) for point in _REQUEUEING_POINTS):
                continue
            registered = (
                plugin.events_to_register() if isinstance(plugin, EnqueueExtensions) else None
            )
            events[name] = list(registered) if registered is not None else list(_ALL_EVENTS)
        return events

    # The scheduling queue.

    def pre_enqueue(self, pod: Pod) -> Status:
        """Whether ``pod`` may enter the active queue; a refusal names its plugin."""
        for name, plugin in self._pre_enqueue:
            status = plugin.pre_enqueue(pod)
            if not status.is_success:
                return status.with_plugin(name)
        return SUCCESS

    def queue_sort_less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self._queue_sort.less(a, b)

    # The scheduling cycle.

    @_timed(ExtensionPoint.PRE_FILTER.label)
    def run_pre_filter_plugins(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: list[NodeInfo],
        record: DecisionRecord | None = None,
    ) -> tuple[PreFilterResult | None, Status, frozenset[str]]:
        """Run PreFilter; returns the nodes still possible (None: all), the status, and the
        plugins that narrowed the nodes (they count as rejectors for requeueing).

        A plugin answering SKIP has nothing to filter: its Filter is skipped this cycle.  An
        UNSCHEDULABLE verdict lets the other plugins still run (preemption needs their
        state); UNSCHEDULABLE_AND_UNRESOLVABLE and errors stop at once.
        """
        result, status, narrowing = self._pre_filter_plugins(state, pod, nodes)
        if record is not None:
            record.pre_filter = status
        return result, status, narrowing

    def _pre_filter_plugins(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status, frozenset[str]]:
        state.skip_filter_plugins = set()
        result: PreFilterResult | None = None
        narrowing: set[str] = set()
        returned = SUCCESS
        for name, plugin in self._pre_filter:
            plugin_result, status = plugin.pre_filter(state, pod, nodes)
            if status.is_skip:
                state.skip_filter_plugins.add(name)
                continue
            if not status.is_success:
                status = status.with_plugin(name)
                if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    return None, status, frozenset()
                if status.code is Code.UNSCHEDULABLE:
                    returned = status
                    continue
                return (
                    None,
                    _failed(f"running PreFilter plugin {_q(name)}", status, name),
                    frozenset(),
                )
            if plugin_result is not None and plugin_result.node_names is not None:
                narrowing.add(name)
            result = plugin_result if result is None else result.merge(plugin_result)
            if result is not None and result.node_names is not None and not result.node_names:
                plugins = sorted(narrowing)
                message = (
                    f"node(s) didn't satisfy plugin {plugins[0]}"
                    if len(plugins) == 1
                    else f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}] simultaneously"
                )
                return result, Status.unresolvable(message), frozenset(narrowing)
        return result, returned, frozenset(narrowing)

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo
    ) -> Status:
        """Tell each PreFilter plugin's state that ``to_add`` now runs on ``node``."""
        return self._pre_filter_extensions(
            state, "AddPod", lambda ext: ext.add_pod(state, pod, to_add, node)
        )

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        """Tell each PreFilter plugin's state that ``to_remove`` no longer runs on ``node``."""
        return self._pre_filter_extensions(
            state, "RemovePod", lambda ext: ext.remove_pod(state, pod, to_remove, node)
        )

    def _pre_filter_extensions(
        self, state: CycleState, operation: str, call: Callable[[Any], Status]
    ) -> Status:
        for name, plugin in self._pre_filter:
            if name in state.skip_filter_plugins:
                continue
            extensions = plugin.pre_filter_extensions()
            if extensions is None:
                continue
            status = call(extensions)
            if not status.is_success:
                return _failed(f"running {operation} on PreFilter plugin {_q(name)}", status, name)
        return SUCCESS

    def run_filter_plugins(
        self,
        state: CycleState,
        pod: PodInfo,
        node: NodeInfo,
        record: DecisionRecord | None = None,
    ) -> Status:
        """Whether ``pod`` fits ``node``: the first plugin that does not say SUCCESS decides."""
        status = self._filter_plugins(state, pod, node)
        if record is not None:
            record.filter_verdicts[node.name] = status
        return status

    def _filter_plugins(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        skip = state.skip_filter_plugins
        for name, plugin in self._filter:
            if name in skip:
                continue
            status = plugin.filter(state, pod, node)
            if not status.is_success:
                if not status.is_rejected:
                    return _failed(f"running {_q(name)} filter plugin", status, name)
                return status.with_plugin(name)
        return SUCCESS

    def run_filter_plugins_with_nominated_pods(
        self,
        state: CycleState,
        pod: PodInfo,
        node: NodeInfo,
        record: DecisionRecord | None = None,
    ) -> Status:
        """Filter, counting pods nominated to ``node`` with at least ``pod``'s priority.

        The pod must not take room preemption freed for a pod it would have to yield to, so
        the filters first run with those nominated pods added.  If they pass, they run again
        without them: a nominated pod may never arrive, and filters such as pod affinity
        could pass only because of it.
        """
        status = self._filter_with_nominated_pods(state, pod, node)
        if record is not None:
            record.filter_verdicts[node.name] = status
        return status

    def _filter_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> Status:
        nominated = [
            info
            for info in self._services.nominated_pods_for_node(node.name)
            if info.priority >= pod.priority and info.uid != pod.uid
        ]
        if not nominated:
            return self._filter_plugins(state, pod, node)
        state_with, node_with = state.clone(), node.clone()
        for info in nominated:
            node_with.add_pod(info)
            added = self.run_pre_filter_extension_add_pod(state_with, pod, info, node_with)
            if not added.is_success:
                return added
        status = self._filter_plugins(state_with, pod, node_with)
        if not status.is_success:
            return status
        return self._filter_plugins(state, pod, node)

    def find_nodes_that_pass_filters(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: list[NodeInfo],
        num_to_find: int,
        *,
        start: int = 0,
        record: DecisionRecord | None = None,
    ) -> FeasibleNodes:
        """Filter ``nodes`` from index ``start`` round, until ``num_to_find`` fit.

        Rotating ``start`` across cycles (by ``processed``) spreads the search over the
        cluster when it stops early.  An ERROR stops the search.

        Nodes are judged in batches, plugin by plugin: each plugin sees only the nodes every
        plugin before it passed, so a node's verdict is the first rejection in plugin order,
        exactly as node by node, while a plugin with ``filter_nodes`` decides a batch in one
        call.  Nodes with nominated pods to account for go through
        ``run_filter_plugins_with_nominated_pods`` one by one.
        """
        outcome = FeasibleNodes([], {})
        count = len(nodes)
        ordered = nodes[start:] + nodes[:start] if start else nodes
        plan = self._filter_plan(state, pod)
        feasible, statuses = outcome.nodes, outcome.statuses
        verdicts_of = record.filter_verdicts if record is not None else None
        for offset in range(0, count, FILTER_BATCH):
            batch = ordered[offset : offset + FILTER_BATCH]
            verdicts = self._filter_batch(state, pod, batch, plan)
            for node, status in zip(batch, verdicts, strict=True):
                if verdicts_of is not None:
                    verdicts_of[node.name] = status
                if status is SUCCESS:
                    feasible.append(node)
                    if len(feasible) >= num_to_find:
                        return outcome
                elif status.code is Code.ERROR:
                    outcome.error = status
                    return outcome
                else:
                    statuses[node.name] = status
        return outcome

    def _filter_plan(self, state: CycleState, pod: PodInfo) -> _FilterPlan:
        """This cycle's Filter plugins by position, split by whether they name a cache key."""
        keyed: list[tuple[int, str]] = []
        unkeyed: list[tuple[int, str]] = []
        keys: list[tuple[int, str, Hashable]] = []
        names = (name for name, _ in self._filter if name not in state.skip_filter_plugins)
        for position, name in enumerate(names):
            key_of = self._filter_keys[name]
            key = None if key_of is None else key_of(state, pod)
            if key is None:
                unkeyed.append((position, name))
            else:
                keyed.append((position, name))
                keys.append((position, name, key))
        return _FilterPlan(tuple(keyed), tuple(unkeyed), tuple(keys))

    def _filter_batch(
        self, state: CycleState, pod: PodInfo, batch: list[NodeInfo], plan: _FilterPlan
    ) -> list[Status]:
        """Each node's verdict: SUCCESS or the first plugin's rejection (or error); nodes
        with nominated pods to account for go one by one."""
        nominated = self._services.nominated_nodes()
        if not nominated:
            return self._judge_batch(state, pod, batch, plan)
        verdicts: list[Status] = [SUCCESS] * len(batch)
        others: list[int] = []
        for i, node in enumerate(batch):
            if node.name in nominated and self._has_nominated_pods(pod, node):
                verdicts[i] = self._filter_with_nominated_pods(state, pod, node)
            else:
                others.append(i)
        judged = self._judge_batch(state, pod, [batch[i] for i in others], plan)
        for i, status in zip(others, judged, strict=True):
            verdicts[i] = status
        return verdicts

    def _judge_batch(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], plan: _FilterPlan
    ) -> list[Status]:
        """The keyed plugins' first rejection of a node is reused from ``_filter_memo`` while
        the node and every keyed plugin's key are unchanged (one lookup a node, however many
        plugins); the unkeyed plugins then judge only the nodes no earlier plugin rejected."""
        firsts: list[_Rejection | None]
        if plan.keyed:
            firsts = self._filter_memo.reuse(
                nodes,
                plan.key,
                functools.partial(self._first_rejections, state, pod, plan.keyed, None),
            )
        else:
            firsts = [None] * len(nodes)
        if plan.unkeyed:
            firsts = self._first_rejections(state, pod, plan.unkeyed, firsts, nodes)
        return [SUCCESS if first is None else first[1] for first in firsts]

    def _first_rejections(
        self,
        state: CycleState,
        pod: PodInfo,
        plugins: tuple[tuple[int, str], ...],
        found: list[_Rejection | None] | None,
        nodes: list[NodeInfo],
    ) -> list[_Rejection | None]:
        """Per node, the first rejection (position and status, tagged with the plugin) among
        ``found`` (rejections already known) and ``plugins`` (in position order), or None.

        A plugin judges only the nodes nothing at an earlier position rejected.
        """
        firsts: list[_Rejection | None] = list(found) if found is not None else [None] * len(nodes)
        tagged: dict[int, Status] = {}
        for position, name in plugins:
            alive = [i for i, first in enumerate(firsts) if first is None or first[0] > position]
            if not alive:
                break
            results = self._judges[name](state, pod, [nodes[i] for i in alive])
            for i, status in zip(alive, results, strict=True):
                if status is SUCCESS or status.code is Code.SUCCESS:
                    continue
                tag = tagged.get(id(status))
                if tag is None:
                    tag = tagged[id(status)] = (
                        status.with_plugin(name)
                        if status.is_rejected
                        else _failed(f"running {_q(name)} filter plugin", status, name)
                    )
                firsts[i] = (position, tag)
        return firsts

    def _has_nominated_pods(self, pod: PodInfo, node: NodeInfo) -> bool:
        return any(
            info.priority >= pod.priority and info.uid != pod.uid
            for info in self._services.nominated_pods_for_node(node.name)
        )

    @_timed_async(ExtensionPoint.POST_FILTER.label)
    async def run_post_filter_plugins(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """Try to make room (preemption): the first plugin that succeeds, errors, or finds the
        pod unresolvable decides; otherwise the pod stays unschedulable with every reason."""
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        for name, plugin in self._post_filter:
            plugin_result, status = await plugin.post_filter(state, pod, statuses)
            if status.is_success:
                return plugin_result, status
            if status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return plugin_result, status.with_plugin(name)
            if not status.is_rejected:
                return None, Status(Code.ERROR, status.reasons, name, status.error)
            if plugin_result is not None:
                result = plugin_result
            reasons += status.reasons
            rejector = rejector or name
        return result, Status(Code.UNSCHEDULABLE, tuple(reasons), rejector)

    @_timed(ExtensionPoint.PRE_SCORE.label)
    def run_pre_score_plugins(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> Status:
        """Run PreScore; a plugin answering SKIP is not scored this cycle."""
        state.skip_score_plugins = set()
        for name, plugin in self._pre_score:
            status = plugin.pre_score(state, pod, nodes)
            if status.is_skip:
                state.skip_score_plugins.add(name)
            elif not status.is_success:
                return _failed(f"running PreScore plugin {_q(name)}", status, name)
        return SUCCESS

    @_timed(ExtensionPoint.SCORE.label)
    def run_score_plugins(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: list[NodeInfo],
        record: DecisionRecord | None = None,
    ) -> tuple[NodeScores, Status]:
        """Score every node with every plugin, normalize each plugin's scores to 0..100, and
        weight them.  A score still out of range after normalizing is an error.

        A plugin with ``score_nodes`` scores all nodes in one call; the others node by node.
        """
        names = [node.name for node in nodes]
        result = NodeScores(names, [0] * len(nodes))
        for name, plugin in self._score:
            if name in state.skip_score_plugins:
                continue
            failure: list[Status] = []
            raw = self._score_memo[name].reuse(
                nodes,
                None if (key := self._score_keys[name]) is None else key(state, pod),
                functools.partial(_raw_scores, self._scorers[name], state, pod, failure=failure),
            )
            status = failure[0] if failure else SUCCESS
            if not status.is_success:
                return result, _failed(
                    f"running Score plugins: plugin {_q(name)} failed with", status, name
                )
            normalized = raw
            extensions = plugin.score_extensions()
            if extensions is not None:
                normalized = list(raw)
                status = extensions.normalize_score(state, pod, names, normalized)
                if not status.is_success:
                    return result, _failed(
                        f"running Normalize on Score plugins: plugin {_q(name)} failed with",
                        status,
                        name,
                    )
            if normalized and not (
                min(normalized) >= MIN_NODE_SCORE and max(normalized) <= MAX_NODE_SCORE
            ):
                bad = next(x for x in normalized if not MIN_NODE_SCORE <= x <= MAX_NODE_SCORE)
                return result, Status.failed(
                    "applying score defaultWeights on Score plugins: plugin "
                    f"{_q(name)} returns an invalid score {bad}, it should in the range of "
                    f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
                ).with_plugin(name)
            weight = self._weights[name]
            # Summed in C (map over operator functions): a Python loop here costs a visit per
            # node per plugin.
            weighted = (
                normalized
                if weight == 1
                else map(operator.mul, normalized, itertools.repeat(weight))
            )
            result.totals = list(map(operator.add, result.totals, weighted))
            result.raw[name] = raw
            result.normalized[name] = normalized
            result.weights[name] = weight
        if record is not None:
            record.scores = result
        return result, SUCCESS

    @_timed(ExtensionPoint.RESERVE.label)
    def run_reserve_plugins_reserve(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> Status:
        """Claim ``node_name`` for ``pod`` in every Reserve plugin's bookkeeping; on failure the
        caller must run ``run_reserve_plugins_unreserve``."""
        for name, plugin in self._reserve:
            status = plugin.reserve(state, pod, node_name)
            if not status.is_success:
                if status.is_rejected:
                    return status.with_plugin(name)
                return _failed(f"running Reserve plugin {_q(name)}", status, name)
        return SUCCESS

    @_timed("Unreserve")
    def run_reserve_plugins_unreserve(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> None:
        """Undo Reserve in every plugin, in reverse order (each must tolerate never having
        reserved)."""
        for _, plugin in reversed(self._reserve):
            plugin.unreserve(state, pod, node_name)

    @_timed(ExtensionPoint.PERMIT.label)
    def run_permit_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Ask each Permit plugin; if any says WAIT and none rejects, the pod becomes a
        ``WaitingPod`` (call within the event loop) and the answer is WAIT."""
        timeouts: dict[str, float] = {}
        for name, plugin in self._permit:
            status, timeout = plugin.permit(state, pod, node_name)
            if status.is_success:
                continue
            if status.is_rejected:
                return status.with_plugin(name)
            if status.code is not Code.WAIT:
                return _failed(f"running Permit plugin {_q(name)}", status, name)
            timeouts[name] = min(timeout, MAX_PERMIT_TIMEOUT)
        if not timeouts:
            return SUCCESS
        self._waiting.add(pod.uid, WaitingPod(pod.pod, timeouts, self._services.clock))
        return Status(
            Code.WAIT,
            (
                "one or more plugins asked to wait and no plugin rejected pod "
                f"{_q(pod.pod.metadata.name or '')}",
            ),
        )

    # The binding cycle.

    async def wait_on_permit(self, pod: PodInfo) -> Status:
        """If ``pod`` is waiting at Permit, its verdict once it has one; else SUCCESS."""
        waiting = self._waiting.get(pod.uid)
        if waiting is None:
            return SUCCESS
        try:
            status = await waiting.verdict()
        finally:
            self._waiting.remove(pod.uid)
        if status.is_success or status.is_rejected:
            return status
        return _failed("waiting on permit for pod", status, status.plugin)

    @_timed_async(ExtensionPoint.PRE_BIND.label)
    async def run_pre_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        for name, plugin in self._pre_bind:
            status = await plugin.pre_bind(state, pod, node_name)
            if not status.is_success:
                if status.is_rejected:
                    return status.with_plugin(name)
                return _failed(f"running PreBind plugin {_q(name)}", status, name)
        return SUCCESS

    @_timed_async(ExtensionPoint.BIND.label)
    async def run_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """The first Bind plugin that does not SKIP binds; SKIP if all of them skip."""
        status = SKIP
        for name, plugin in self._bind:
            status = await plugin.bind(state, pod, node_name)
            if status.is_skip:
                continue
            if status.is_success:
                return status
            if status.is_rejected:
                return status.with_plugin(name)
            return _failed(f"running Bind plugin {_q(name)}", status, name)
        return status

    @_timed_async(ExtensionPoint.POST_BIND.label)
    async def run_post_bind_plugins(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for _, plugin in self._post_bind:
            await plugin.post_bind(state, pod, node_name)

    # The Handle plugins see.

    @property
    def snapshot(self) -> NodeInfoLister:
        return self._services.snapshot

    @property
    def clock(self) -> Clock:
        return self._services.clock

    @property
    def client(self) -> ApiClient:
        return self._services.client

    @property
    def recorder(self) -> EventRecorder:
        return self._services.recorder

    def lister(self, cls: type[T]) -> Lister[T]:
        return self._services.lister(cls)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self._services.nominated_pods_for_node(node_name)

    def nominated_nodes(self) -> Collection[str]:
        return self._services.nominated_nodes()

    def waiting_pod(self, uid: str) -> WaitingPod | None:
        return self._waiting.get(uid)

    def iterate_over_waiting_pods(self) -> list[interface.WaitingPod]:
        return self._waiting.list()

    def reject_waiting_pod(self, uid: str) -> bool:
        """Reject the pod if it waits at Permit (it was deleted); whether it was waiting."""
        waiting = self._waiting.get(uid)
        if waiting is None:
            return False
        waiting.reject("", "removed")
        return True
