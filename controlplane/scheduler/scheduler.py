"""The scheduler: informers feed the cache and the queue; one loop places pods one at a time.

``Scheduler`` wires upstream's pieces together:

- **informers** (one shared factory): pods not yet finished, nodes, and the kinds plugins read
  (namespaces, volumes and claims, disruption budgets, the owners of spread constraints).
  Assigned pods and nodes go to the **cache**; pending pods of this scheduler's profiles go to
  the **queue**; every change that may help a rejected pod becomes a cluster event for the
  queue.  Pods for other schedulers are left alone.
- the **scheduling cycle** (``schedule_one``), serial: pop a pod, refresh the snapshot
  incrementally, run PreFilter and Filter over the nodes (starting where the last cycle
  stopped, and stopping once ``percentageOfNodesToScore`` of them fit), PostFilter when none
  fit, Score when more than one does, pick the best (ties broken uniformly at random),
  *assume* the pod on that node in the cache, Reserve and Permit.
- the **binding cycle**, one task per pod, concurrent: wait for Permit, PreBind, Bind,
  PostBind; on failure everything from Reserve on is undone and the pod goes back to the
  queue.
- **failures** update the pod's ``PodScheduled`` condition, emit ``FailedScheduling`` with
  upstream's message (``0/3 nodes are available: 1 node(s) had untolerated taint {...}, 2
  Insufficient cpu. preemption: ...``) and hand the pod back to the queue, remembering which
  plugins rejected it so only events they care about bring it back.

Every decision is recorded (``DecisionLog``): each examined node's Filter verdict and each
plugin's raw, normalized and weighted score, which ``kubelab scheduler explain`` prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import random
import time
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from controlplane.scheduler.cache import SchedulerCache, Snapshot
from controlplane.scheduler.config import (
    KubeSchedulerConfiguration,
    num_feasible_nodes_to_find,
)
from controlplane.scheduler.framework.decisions import DecisionRecord, NodeScores
from controlplane.scheduler.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EventResource,
    Lister,
    PluginFactory,
    Status,
)
from controlplane.scheduler.framework.runtime import Framework, extension_point_histogram
from controlplane.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo
from controlplane.scheduler.framework.waiting import WaitingPods
from controlplane.scheduler.plugins.registry import REGISTRY
from controlplane.scheduler.queue import Closed, SchedulingQueue
from kube.api.kinds.apps_v1 import ReplicaSet, StatefulSet
from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.core_v1.volume import PersistentVolume, PersistentVolumeClaim
from kube.api.kinds.policy_v1 import PodDisruptionBudget
from kube.api.kinds.storage_v1 import StorageClass
from kube.client.errors import ApiError, ClientError
from kube.client.events import EventRecorder
from kube.client.informers import DeletedFinalStateUnknown, SharedInformerFactory
from kube.client.interface import ApiClient
from kube.clock import Clock
from kube.metrics import Registry

LOG = logging.getLogger("kubelab.scheduler")

T = TypeVar("T")

NO_NODE_AVAILABLE = "0/{} nodes are available"
NO_NODES = "no nodes available to schedule pods"
PLUGIN_READ_KINDS: tuple[type[Any], ...] = (
    Namespace,
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
    PodDisruptionBudget,
    Service,
    ReplicaSet,
    StatefulSet,
)
"""Kinds the default plugins read through ``Handle.lister``: their informers start with the
scheduler, so the caches are warm before the first cycle."""
ACTIVE_POD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"

NODE_ADD = ClusterEvent(EventResource.NODE, ActionType.ADD, "NodeAdd")
ASSIGNED_POD_DELETE = ClusterEvent(
    EventResource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"
)
_KIND_EVENTS: dict[type[Any], EventResource] = {
    PersistentVolumeClaim: EventResource.PERSISTENT_VOLUME_CLAIM,
    PersistentVolume: EventResource.PERSISTENT_VOLUME,
    StorageClass: EventResource.STORAGE_CLASS,
}


def node_update_events(old: Node, new: Node) -> list[ClusterEvent]:
    """What changed about a node, as the cluster events plugins register for."""
    action = ActionType(0)
    if (old.status.allocatable if old.status else None) != (
        new.status.allocatable if new.status else None
    ):
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if (old.metadata.labels or {}) != (new.metadata.labels or {}):
        action |= ActionType.UPDATE_NODE_LABEL
    old_spec, new_spec = old.spec, new.spec
    if (old_spec.taints if old_spec else None) != (new_spec.taints if new_spec else None) or (
        old_spec.unschedulable if old_spec else None
    ) != (new_spec.unschedulable if new_spec else None):
        action |= ActionType.UPDATE_NODE_TAINT
    if _conditions(old) != _conditions(new):
        action |= ActionType.UPDATE_NODE_CONDITION
    return [ClusterEvent(EventResource.NODE, action, "NodeUpdate")] if action else []


def _conditions(node: Node) -> dict[str, str]:
    conditions = node.status.conditions if node.status else None
    return {c.type or "": c.status or "" for c in conditions or ()}


def fit_error_message(
    num_nodes: int, pre_filter: str, statuses: Mapping[str, Status], post_filter: str
) -> str:
    """Upstream's FitError text: a histogram of the nodes' reasons, then PostFilter's."""
    message = NO_NODE_AVAILABLE.format(num_nodes) + ":"
    if pre_filter:
        message += f" {pre_filter}."
    else:
        reasons = Counter(reason for status in statuses.values() for reason in status.reasons)
        histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
        if histogram:
            message += f" {', '.join(histogram)}."
    if post_filter:
        message += f" {post_filter}"
        if not post_filter.endswith("."):
            message += "."
    return message


@dataclass
class Decision:
    """What the scheduler decided for one attempt at one pod, and why."""

    pod: str
    uid: str
    profile: str
    attempt: int
    result: str
    """Scheduled, Unschedulable or Error."""
    node: str
    message: str
    nodes_total: int
    record: DecisionRecord
    timestamp: float = field(default_factory=time.time)


class DecisionLog:
    """The latest decision per pod, for the last ``capacity`` pods."""

    def __init__(self, capacity: int = 1000) -> None:
        self.capacity = capacity
        self._decisions: OrderedDict[str, Decision] = OrderedDict()

    def add(self, decision: Decision) -> None:
        self._decisions.pop(decision.pod, None)
        self._decisions[decision.pod] = decision
        while len(self._decisions) > self.capacity:
            self._decisions.popitem(last=False)

    def get(self, pod: str) -> Decision | None:
        return self._decisions.get(pod)

    def __len__(self) -> int:
        return len(self._decisions)


class Scheduler:
    """Places pending pods for every profile of ``config``; ``run`` until cancelled."""

    def __init__(
        self,
        client: ApiClient,
        informers: SharedInformerFactory,
        config: KubeSchedulerConfiguration,
        recorder: EventRecorder,
        clock: Clock,
        *,
        registry: Mapping[str, PluginFactory] = REGISTRY,
        metrics: Registry | None = None,
        decisions: DecisionLog | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self._informers = informers
        self._recorder = recorder
        self._clock = clock
        self.config = config
        self.metrics = metrics or Registry()
        self.decisions = decisions or DecisionLog()
        self.rng = rng or random.Random()
        self.cache = SchedulerCache(clock)
        self._snapshot = Snapshot()
        self._next_start_node = 0
        self._bindings: set[asyncio.Task[None]] = set()
        self.synced = False
        for kind in PLUGIN_READ_KINDS:
            informers.informer_for(kind)
        waiting = WaitingPods()
        durations = extension_point_histogram(self.metrics)
        self.frameworks = {
            profile.scheduler_name: Framework(
                profile, registry, self, waiting_pods=waiting, durations=durations
            )
            for profile in config.profiles
        }
        first = next(iter(self.frameworks.values()))
        events: dict[str, list[ClusterEventWithHint]] = {}
        for framework in self.frameworks.values():
            for plugin, registered in framework.events_to_register().items():
                events.setdefault(plugin, []).extend(registered)
        self.queue = SchedulingQueue(
            first.queue_sort_less,
            clock,
            pre_enqueue=lambda pod: self._framework_for(pod).pre_enqueue(pod),
            events_by_plugin=events,
            namespace_labels=self._namespace_labels,
            initial_backoff=config.pod_initial_backoff_seconds,
            max_backoff=config.pod_max_backoff_seconds,
        )
        self._attempts = self.metrics.counter(
            "scheduler_schedule_attempts_total",
            "Scheduling attempts by result and profile.",
            ("result", "profile"),
        )
        self._attempt_duration = self.metrics.histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency (scheduling cycle and binding), by result and profile.",
            ("result", "profile"),
        )
        self._pending = self.metrics.gauge(
            "scheduler_pending_pods", "Pending pods, by queue.", ("queue",)
        )
        self._sli_duration = self.metrics.histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "Latency from a pod's first scheduling attempt until it is bound, by attempts.",
            ("attempts",),
        )
        self._preemption_attempts = self.metrics.counter(
            "scheduler_preemption_attempts_total", "Preemption attempts in the cluster."
        )
        self._watch_pods_and_nodes()

    # Services the frameworks (and through them the plugins) use.

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def client(self) -> ApiClient:
        return self._client

    @property
    def recorder(self) -> EventRecorder:
        return self._recorder

    def lister(self, cls: type[T]) -> Lister[T]:
        lister: Lister[T] = self._informers.informer_for(cls).lister  # type: ignore[type-var]
        return lister

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self.queue.nominated_pods_for_node(node_name)

    def nominated_nodes(self) -> set[str]:
        return self.queue.nominated_nodes()

    def _namespace_labels(self, name: str) -> Mapping[str, str]:
        namespace = self._informers.informer_for(Namespace).lister.get(name)
        return (namespace.metadata.labels or {}) if namespace else {}

    # Informer handlers: keep the cache and the queue current.

    def _responsible_for(self, pod: Pod) -> bool:
        return bool(
            pod.spec and (pod.spec.scheduler_name or "default-scheduler") in self.frameworks
        )

    def _framework_for(self, pod: Pod) -> Framework:
        name = (pod.spec.scheduler_name if pod.spec else None) or "default-scheduler"
        return self.frameworks[name]

    def _watch_pods_and_nodes(self) -> None:
        pods = self._informers.informer_for(Pod, field_selector=ACTIVE_POD_SELECTOR)
        pods.add_event_handler(self._on_pod_add, self._on_pod_update, self._on_pod_delete)
        nodes = self._informers.informer_for(Node)
        nodes.add_event_handler(self._on_node_add, self._on_node_update, self._on_node_delete)
        for kind, resource in _KIND_EVENTS.items():
            self._informers.informer_for(kind).add_event_handler(
                functools.partial(self._on_kind_added, resource),
                functools.partial(self._on_kind_updated, resource),
            )

    def _on_pod_add(self, pod: Pod) -> None:
        if _assigned(pod):
            self.cache.add_pod(pod)
            self.queue.assigned_pod_added(pod)
        elif self._responsible_for(pod) and not pod.metadata.deletion_timestamp:
            self.queue.add(pod)

    def _on_pod_update(self, old: Pod, new: Pod) -> None:
        if old.metadata.resource_version == new.metadata.resource_version:
            return
        if _assigned(new):
            if _assigned(old):
                self.cache.update_pod(old, new)
                self.queue.assigned_pod_updated(old, new)
            else:
                self.queue.delete(old)
                self.cache.add_pod(new)
                self.queue.assigned_pod_added(new)
        elif self._responsible_for(new):
            if new.metadata.deletion_timestamp:
                self.queue.delete(new)
            elif not self.cache.is_assumed(new):
                self.queue.update(old, new)

    def _on_pod_delete(self, obj: Pod | DeletedFinalStateUnknown[Pod]) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if _assigned(pod):
            self.cache.remove_pod(pod)
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, pod, None)
        else:
            self.queue.delete(pod)
            for framework in self.frameworks.values():
                waiting = framework.waiting_pod(pod.metadata.uid or "")
                if waiting is not None:
                    waiting.reject("", "removed")

    def _on_node_add(self, node: Node) -> None:
        self.cache.add_node(node)
        self.queue.move_all_to_active_or_backoff(NODE_ADD, None, node)

    def _on_node_update(self, old: Node, new: Node) -> None:
        self.cache.update_node(old, new)
        for event in node_update_events(old, new):
            self.queue.move_all_to_active_or_backoff(event, old, new)

    def _on_node_delete(self, obj: Node | DeletedFinalStateUnknown[Node]) -> None:
        self.cache.remove_node(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)

    def _on_kind_added(self, resource: EventResource, obj: Any) -> None:
        self.queue.move_all_to_active_or_backoff(ClusterEvent(resource, ActionType.ADD), None, obj)

    def _on_kind_updated(self, resource: EventResource, old: Any, new: Any) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            event = ClusterEvent(resource, ActionType.UPDATE)
            self.queue.move_all_to_active_or_backoff(event, old, new)

    # Running.

    async def sync(self) -> None:
        """Start the informers and wait for their caches (a standby does this before it
        leads, so it can take over at once)."""
        self._informers.start()
        await self._informers.wait_for_cache_sync()
        self.synced = True

    async def run(self) -> None:
        """Schedule until cancelled (syncing the caches first if ``sync`` was not awaited)."""
        if not self.synced:
            await self.sync()
        LOG.info("caches synced; scheduling for %s", ", ".join(self.frameworks))
        background = [
            asyncio.create_task(self.queue.run()),
            asyncio.create_task(self.cache.run()),
        ]
        try:
            while True:
                try:
                    await self.schedule_one()
                except Closed:
                    return
        finally:
            self.queue.close()
            for task in [*background, *self._bindings]:
                task.cancel()
            for task in [*background, *self._bindings]:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def update_pending_gauge(self) -> None:
        pending = self.queue.pending_pods()
        for queue, count in pending._asdict().items():
            self._pending.set(queue, value=count)

    # The scheduling cycle.

    async def schedule_one(self) -> None:
        """Take the next pod and run its scheduling cycle; its binding cycle goes on alone."""
        qpi = await self.queue.pop()
        pod = qpi.pod
        framework = self._framework_for(pod)
        if self._skip(pod):
            self.queue.done(qpi.info.uid)
            return
        cycle = self.queue.scheduling_cycle
        started = self._clock.monotonic()
        self.cache.update_snapshot(self._snapshot)
        state = CycleState()
        record = DecisionRecord()
        decision = Decision(
            pod=qpi.info.key,
            uid=qpi.info.uid,
            profile=framework.profile_name,
            attempt=qpi.attempts,
            result="Error",
            node="",
            message="",
            nodes_total=self._snapshot.num_nodes,
            record=record,
        )
        node_name, failure, nominated = await self._place(framework, state, qpi, record)
        if failure is not None:
            decision.result = "Error" if failure.code is Code.ERROR else "Unschedulable"
            decision.message = failure.message
            self.decisions.add(decision)
            await self._failed(framework, qpi, failure, cycle, started, nominated)
            return
        assert node_name is not None
        decision.result, decision.node = "Scheduled", node_name
        self.decisions.add(decision)
        assumed = qpi.info
        self.cache.assume_pod(assumed, node_name)
        status = framework.run_reserve_plugins_reserve(state, assumed, node_name)
        if status.is_success:
            status = framework.run_permit_plugins(state, assumed, node_name)
            if status.code is Code.WAIT:
                status = Status()
        if not status.is_success:
            framework.run_reserve_plugins_unreserve(state, assumed, node_name)
            self.cache.forget_pod(assumed.pod)
            decision.result, decision.message = "Unschedulable", status.message
            await self._failed(framework, qpi, status, cycle, started)
            return
        self.queue.done(assumed.uid)
        task = asyncio.create_task(
            self._bind(framework, state, qpi, node_name, cycle, started),
            name=f"bind {assumed.key}",
        )
        self._bindings.add(task)
        task.add_done_callback(self._bindings.discard)

    def _skip(self, pod: Pod) -> bool:
        """A deleted pod, or one already assumed (its update raced the binding)."""
        return bool(pod.metadata.deletion_timestamp) or self.cache.is_assumed(pod)

    async def _place(
        self, framework: Framework, state: CycleState, qpi: QueuedPodInfo, record: DecisionRecord
    ) -> tuple[str | None, Status | None, str | None]:
        """The node for the pod, or why there is none (with PostFilter already tried) and
        the node preemption nominated it to, if any."""
        pod = qpi.info
        all_nodes = self._snapshot.list()
        if not all_nodes:
            return None, Status.unresolvable(NO_NODES), None
        result, status, narrowing = framework.run_pre_filter_plugins(state, pod, all_nodes, record)
        statuses: dict[str, Status] = {}
        pre_filter_message = ""
        if status.code is Code.ERROR:
            return None, status, None
        if not status.is_success:
            pre_filter_message = status.message
            statuses = {node.name: status for node in all_nodes}
            qpi.unschedulable_plugins = {status.plugin} if status.plugin else set()
            feasible: list[NodeInfo] = []
        else:
            nodes = all_nodes
            if result is not None and result.node_names is not None:
                nodes = [node for node in all_nodes if node.name in result.node_names]
                absent = Status.unresolvable(
                    f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowing))}]"
                )
                statuses = {n.name: absent for n in all_nodes if n.name not in result.node_names}
            feasible = self._nominated_node_fits(framework, state, qpi, record)
            if not feasible:
                found = framework.find_nodes_that_pass_filters(
                    state,
                    pod,
                    nodes,
                    num_feasible_nodes_to_find(self._percentage(framework), len(nodes)),
                    start=self._next_start_node % max(1, len(nodes)),
                    record=record,
                )
                if found.error is not None:
                    return None, found.error, None
                self._next_start_node += found.processed
                feasible = found.nodes
                statuses.update(found.statuses)
            qpi.unschedulable_plugins = set(narrowing) | {
                s.plugin for s in statuses.values() if s.plugin
            }
        if not feasible:
            post_filter_message, nominated = "", None
            if framework.has_post_filter_plugins:
                self._preemption_attempts.inc()
                post, post_status = await framework.run_post_filter_plugins(state, pod, statuses)
                if post_status.code is Code.ERROR:
                    return None, post_status, None
                post_filter_message = post_status.message
                if post is not None and post.nominated_node_name:
                    nominated = post.nominated_node_name
                    await self._set_nominated(pod, nominated)
            message = fit_error_message(
                len(all_nodes), pre_filter_message, statuses, post_filter_message
            )
            return None, Status(Code.UNSCHEDULABLE, (message,)), nominated
        if len(feasible) == 1:
            return feasible[0].name, None, None
        status = framework.run_pre_score_plugins(state, pod, feasible)
        if not status.is_success:
            return None, status, None
        scores, status = framework.run_score_plugins(state, pod, feasible, record)
        if not status.is_success:
            return None, status, None
        return self._select_host(scores), None, None

    def _percentage(self, framework: Framework) -> int:
        own = framework.percentage_of_nodes_to_score
        return own if own is not None else self.config.percentage_of_nodes_to_score

    def _nominated_node_fits(
        self, framework: Framework, state: CycleState, qpi: QueuedPodInfo, record: DecisionRecord
    ) -> list[NodeInfo]:
        """Upstream first tries the node preemption nominated the pod to; if it fits, that
        node alone is feasible."""
        status = qpi.pod.status
        name = status.nominated_node_name if status else None
        if not name:
            return []
        try:
            node = self._snapshot.get(name)
        except KeyError:
            return []
        verdict = framework.run_filter_plugins_with_nominated_pods(state, qpi.info, node, record)
        return [node] if verdict.is_success else []

    def _select_host(self, scores: NodeScores) -> str:
        """The best-scoring node; among equals, each is chosen with the same probability."""
        totals = scores.totals
        best = max(totals)
        if totals.count(best) == 1:
            return scores.names[totals.index(best)]
        # In C (compress over map): hundreds of nodes are scored, and often many tie.
        tied = list(itertools.compress(scores.names, map(best.__eq__, totals)))
        return self.rng.choice(tied)

    # The binding cycle.

    async def _bind(
        self,
        framework: Framework,
        state: CycleState,
        qpi: QueuedPodInfo,
        node_name: str,
        cycle: int,
        started: float,
    ) -> None:
        pod = qpi.info
        status = await framework.wait_on_permit(pod)
        if status.is_success:
            status = await framework.run_pre_bind_plugins(state, pod, node_name)
        if status.is_success:
            status = await framework.run_bind_plugins(state, pod, node_name)
        if not status.is_success:
            framework.run_reserve_plugins_unreserve(state, pod, node_name)
            self.cache.forget_pod(pod.pod)
            self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, pod.pod, None)
            await self._failed(framework, qpi, status, cycle, started)
            return
        self.cache.finish_binding(pod.pod)
        await framework.run_post_bind_plugins(state, pod, node_name)
        self._observe("scheduled", framework, started)
        first = qpi.initial_attempt_timestamp
        if first is not None:
            self._sli_duration.observe(self._clock.monotonic() - first, str(qpi.attempts))
        self._recorder.event(
            pod.pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {pod.key} to {node_name}",
            action="Binding",
        )

    # Failures.

    async def _failed(
        self,
        framework: Framework,
        qpi: QueuedPodInfo,
        status: Status,
        cycle: int,
        started: float,
        nominated: str | None = None,
    ) -> None:
        """Report why the pod did not go anywhere and give it back to the queue (nominated
        to the node preemption freed, if any)."""
        error = status.code is Code.ERROR
        self._observe("error" if error else "unschedulable", framework, started)
        if error:
            LOG.warning("scheduling %s: %s", qpi.info.key, status.message)
            qpi.unschedulable_plugins = set()
        self.queue.add_unschedulable_if_not_present(qpi, cycle)
        if nominated:
            self.queue.nominate(qpi.info, nominated)
        self.queue.done(qpi.info.uid)
        self._recorder.event(
            qpi.pod, "Warning", "FailedScheduling", status.message, action="Scheduling"
        )
        await self._set_condition(
            qpi.info, "SchedulerError" if error else "Unschedulable", status.message
        )

    def _observe(self, result: str, framework: Framework, started: float) -> None:
        self._attempts.inc(result, framework.profile_name)
        self._attempt_duration.observe(
            self._clock.monotonic() - started, result, framework.profile_name
        )

    async def _set_condition(self, pod: PodInfo, reason: str, message: str) -> None:
        """Set PodScheduled=False with the reason, unless it already says exactly that."""
        status = pod.pod.status
        for condition in (status.conditions if status else None) or ():
            if (
                condition.type == "PodScheduled"
                and condition.status == "False"
                and condition.reason == reason
                and condition.message == message
            ):
                return
        scheduled = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": self._clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        await self._patch_status(pod, {"conditions": [scheduled]})

    async def _set_nominated(self, pod: PodInfo, node_name: str) -> None:
        await self._patch_status(pod, {"nominatedNodeName": node_name})

    async def _patch_status(self, pod: PodInfo, status: dict[str, Any]) -> None:
        namespace, name = pod.pod.metadata.namespace, pod.pod.metadata.name or ""
        try:
            await self._client.patch(
                Pod,
                name,
                namespace,
                {"status": status},
                patch_type="strategic",
                subresource="status",
            )
        except (ApiError, ClientError) as error:
            LOG.info("updating the status of %s: %s", pod.key, error)


def _assigned(pod: Pod) -> bool:
    return bool(pod.spec and pod.spec.node_name)


__all__ = [
    "Decision",
    "DecisionLog",
    "Scheduler",
    "fit_error_message",
    "node_update_events",
]
