"""DefaultPreemption: when no node fits a pod, evict lower-priority pods from one node so it will.

PostFilter runs after every node rejected the pod.  In upstream's order
(``framework/preemption`` and ``plugins/defaultpreemption``):

1. *Eligibility.*  A pod with ``preemptionPolicy: Never`` never preempts.  A pod that already
   preempted (it has a ``nominatedNodeName``) waits while a lower-priority pod on that node is
   still terminating because of the scheduler's preemption, unless the filters now find that
   node unresolvable.
2. *Candidates.*  Only nodes whose Filter status is UNSCHEDULABLE can be helped by evicting
   pods; UNSCHEDULABLE_AND_UNRESOLVABLE nodes, and nodes without a status (a PreFilter result
   left them out), cannot.  Starting at a random offset, a dry run on each node (on a clone of
   the NodeInfo and of the cycle state) removes every lower-priority pod, checks that the pod
   then fits, and *reprieves* the removed pods one by one, most important first -- those whose
   eviction would violate a PodDisruptionBudget before the others -- keeping each one that still
   leaves room.  The rest are the node's victims.  The search stops once it has
   ``max(minCandidateNodesPercentage% of the nodes, minCandidateNodesAbsolute)`` candidates,
   at least one of them violating no budget.
3. *Choice.*  Fewest budget violations, then the lowest highest-victim priority, the smallest
   sum of priorities, the fewest victims, the latest start among the highest-priority victims,
   and finally the first found.
4. *Preparation.*  Each victim gets a ``DisruptionTarget`` condition and is deleted gracefully
   (a victim waiting at Permit is rejected instead), and lower-priority pods nominated to the
   node lose their nomination, since they may no longer fit there.  The caller records the
   returned node as the pod's ``nominatedNodeName``; the pod is scheduled in a later cycle, once
   the victims are gone.

Victims are evicted before PostFilter returns (upstream's synchronous mode, not the
``SchedulerAsyncPreemption`` goroutine), and extenders take no part.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from controlplane.scheduler import names
from controlplane.scheduler.config import DEFAULT_SCHEDULER_NAME
from controlplane.scheduler.framework.interface import (
    SUCCESS,
    Code,
    CycleState,
    Handle,
    PostFilterResult,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from kube.api.kinds.core_v1.pod import Pod, PodCondition
from kube.api.kinds.policy_v1 import PodDisruptionBudget
from kube.api.labels import Selector, SelectorError, selector_of
from kube.api.meta_v1 import Preconditions
from kube.client.errors import ApiError, ClientError

log = logging.getLogger(__name__)

DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100
PREEMPT_NEVER = "Never"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
_PRIORITY_OFFSET = 2**31
"""Added to every priority before summing, so several negative-priority victims never sum
below fewer of them (upstream adds MaxInt32+1)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node the pod would fit on once ``victims`` (most important first) are gone."""

    node_name: str
    victims: tuple[Pod, ...]
    pdb_violations: int


def _priority(pod: Pod) -> int:
    return (pod.spec.priority if pod.spec else None) or 0


def _start_time(pod: Pod, now: datetime.datetime) -> datetime.datetime:
    """When the pod started; ``now`` for pods assumed or bound but not started yet."""
    return (pod.status.start_time if pod.status else None) or now


def _importance(pod: Pod, now: datetime.datetime) -> tuple[int, datetime.datetime]:
    """Sort key, most important first: higher priority, then running longer (upstream
    ``MoreImportantPod``)."""
    return -_priority(pod), _start_time(pod, now)


def go_aggregate(messages: Sequence[str]) -> str:
    """Several errors as Go's ``utilerrors.NewAggregate`` prints them."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def fit_error_message(num_nodes: int, statuses: Mapping[str, Status], absent: Status) -> str:
    """``0/N nodes are available: <count> <reason>, ....`` with the nodes missing from
    ``statuses`` counted under ``absent``'s reasons (upstream ``FitError.Error``)."""
    counts = Counter(reason for status in statuses.values() for reason in status.reasons)
    missing = num_nodes - len(statuses)
    if missing > 0:
        for reason in absent.reasons:
            counts[reason] += missing
    message = f"0/{num_nodes} nodes are available:"
    histogram = sorted(f"{count} {reason}" for reason, count in counts.items())
    if histogram:
        message += " " + ", ".join(histogram) + "."
    return message


@dataclass(frozen=True, slots=True)
class Budget:
    """A PodDisruptionBudget as preemption reads it, its selector parsed once per cycle."""

    namespace: str
    selector: Selector
    disruptions_allowed: int
    disrupted_pods: frozenset[str]

    @classmethod
    def of(cls, pdb: PodDisruptionBudget) -> Budget | None:
        """None for a budget whose selector does not parse: it protects nothing."""
        try:
            selector = selector_of(pdb.spec.selector if pdb.spec else None)
        except SelectorError:
            return None
        status = pdb.status
        return cls(
            pdb.metadata.namespace or "",
            selector,
            (status.disruptions_allowed if status else None) or 0,
            frozenset((status.disrupted_pods if status else None) or ()),
        )

    def covers(self, pod: Pod) -> bool:
        """Whether evicting ``pod`` would spend this budget.  An empty selector covers
        nothing; a pod the API server already counts as disrupted spends nothing."""
        return (
            pod.metadata.namespace == self.namespace
            and not self.selector.empty
            and self.selector.matches(pod.metadata.labels)
            and pod.metadata.name not in self.disrupted_pods
        )


def split_by_pdb_violation(
    pods: Iterable[PodInfo], budgets: Sequence[Budget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(pods whose eviction would exceed a budget, the others), each in ``pods``' order.

    Budgets are spent in order: the first pods a budget covers fit in its allowance, the
    following ones violate it.
    """
    allowed = [budget.disruptions_allowed for budget in budgets]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for info in pods:
        violated = False
        if info.pod.metadata.labels:
            for i, budget in enumerate(budgets):
                if budget.covers(info.pod):
                    allowed[i] -= 1
                    violated = violated or allowed[i] < 0
        (violating if violated else non_violating).append(info)
    return violating, non_violating


def select_candidate(candidates: Sequence[Candidate], now: datetime.datetime) -> Candidate:
    """The candidate whose eviction hurts least (upstream ``pickOneNodeForPreemption``)."""

    def score(candidate: Candidate) -> tuple[int, int, int, int, datetime.datetime]:
        priorities = [_priority(victim) for victim in candidate.victims]
        highest = max(priorities)
        earliest_of_highest = min(
            _start_time(victim, now)
            for victim, priority in zip(candidate.victims, priorities, strict=True)
            if priority == highest
        )
        return (
            -candidate.pdb_violations,
            -highest,
            -sum(priority + _PRIORITY_OFFSET for priority in priorities),
            -len(priorities),
            earliest_of_highest,
        )

    return max(candidates, key=score)


def _terminating_by_preemption(pod: Pod) -> bool:
    """Whether the pod is being deleted because the scheduler preempted it."""
    if pod.metadata.deletion_timestamp is None:
        return False
    for condition in (pod.status.conditions if pod.status else None) or ():
        if condition.type == DISRUPTION_TARGET:
            return condition.status == "True" and condition.reason == PREEMPTION_BY_SCHEDULER
    return False


class _ExtensionFailed(Exception):
    """A PreFilter extension failed while adding or removing a pod in the dry run."""


class DefaultPreemption:
    NAME: ClassVar[str] = names.DEFAULT_PREEMPTION

    def __init__(
        self,
        handle: Handle,
        min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE,
        min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE,
        rng: random.Random | None = None,
    ) -> None:
        self._handle = handle
        self._percentage = min_candidate_nodes_percentage
        self._absolute = min_candidate_nodes_absolute
        self._rng = rng or random.Random()

    async def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        result, status = await self._preempt(state, pod, statuses)
        if status.reasons:
            status = Status(status.code, ("preemption: " + status.message,), error=status.error)
        return result, status

    async def _preempt(
        self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        reason = self._ineligibility(pod, statuses)
        if reason:
            return None, Status.unschedulable(reason)
        nodes = self._handle.snapshot.list()
        if not nodes:
            return None, Status.failed("no nodes available")
        candidates, node_statuses, errors = self._find_candidates(state, pod, nodes, statuses)
        if errors and not candidates:
            return None, Status.failed(go_aggregate(errors))
        if not candidates:
            message = fit_error_message(len(nodes), node_statuses, Status.unresolvable(NOT_HELPFUL))
            return PostFilterResult(""), Status.unschedulable(message)
        best = select_candidate(candidates, self._handle.clock.now())
        status = await self._prepare(best, pod.pod)
        if not status.is_success:
            return None, status
        return PostFilterResult(best.node_name), SUCCESS

    def _ineligibility(self, pod: PodInfo, statuses: Mapping[str, Status]) -> str:
        """Why the pod may not preempt now ("" if it may)."""
        spec, status = pod.pod.spec, pod.pod.status
        if spec is not None and spec.preemption_policy == PREEMPT_NEVER:
            return NOT_ELIGIBLE_NEVER
        nominated = status.nominated_node_name if status else None
        if not nominated:
            return ""
        nominated_status = statuses.get(nominated)
        # A node without a status counts as unresolvable, as upstream's absent nodes do.
        if nominated_status is None or nominated_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return ""
        try:
            node = self._handle.snapshot.get(nominated)
        except KeyError:
            return ""
        for info in node.pods:
            if info.priority < pod.priority and _terminating_by_preemption(info.pod):
                return NOT_ELIGIBLE_TERMINATING
        return ""

    def _find_candidates(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: list[NodeInfo],
        statuses: Mapping[str, Status],
    ) -> tuple[list[Candidate], dict[str, Status], list[str]]:
        """Dry-run preemption on the nodes it may help: (candidates, the other nodes'
        statuses, the errors met)."""
        potential = [
            node
            for node in nodes
            if (status := statuses.get(node.name)) is not None and status.code is Code.UNSCHEDULABLE
        ]
        if not potential:
            return [], {}, []
        budgets = [
            budget
            for pdb in self._handle.lister(PodDisruptionBudget).list()
            if (budget := Budget.of(pdb)) is not None
        ]
        offset, wanted = self._offset_and_num_candidates(len(potential))
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        node_statuses: dict[str, Status] = {}
        errors: list[str] = []
        for i in range(len(potential)):
            node = potential[(offset + i) % len(potential)]
            victims, violations, status = self._select_victims(state, pod, node, budgets)
            if status.is_success and not victims:
                status = Status.failed(f'expected at least one victim pod on node "{node.name}"')
            if not status.is_success:
                if status.code is Code.ERROR:
                    errors.append(status.message)
                node_statuses[node.name] = status
                continue
            found = violating if violations else non_violating
            if len(found) < wanted:
                found.append(Candidate(node.name, tuple(victims), violations))
            if non_violating and len(non_violating) + len(violating) >= wanted:
                break
        return non_violating + violating, node_statuses, errors

    def _offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """A random node to start the dry run at, and how many candidates to look for."""
        wanted = max(num_nodes * self._percentage // 100, self._absolute)
        return self._rng.randrange(num_nodes), min(wanted, num_nodes)

    def _select_victims(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, budgets: Sequence[Budget]
    ) -> tuple[list[Pod], int, Status]:
        """The fewest pods on ``node`` whose eviction lets ``pod`` fit, and how many of them
        violate a budget.  Works on clones: ``state`` and ``node`` are left alone."""
        potential = [info for info in node.pods if info.priority < pod.priority]
        if not potential:
            return [], 0, Status.unresolvable(NO_VICTIMS)
        state, node = state.clone(), node.clone()
        now = self._handle.clock.now()
        try:
            for info in potential:
                self._remove(state, pod, info, node)
            status = self._handle.run_filter_plugins_with_nominated_pods(state, pod, node)
            if not status.is_success:
                return [], 0, status
            potential.sort(key=lambda info: _importance(info.pod, now))
            violating, non_violating = split_by_pdb_violation(potential, budgets)
            victims = [info for info in violating if not self._reprieve(state, pod, info, node)]
            violations = len(victims)
            victims += [
                info for info in non_violating if not self._reprieve(state, pod, info, node)
            ]
        except _ExtensionFailed as error:
            return [], 0, Status.failed(error)
        if violating and non_violating:
            victims.sort(key=lambda info: _importance(info.pod, now))
        return [info.pod for info in victims], violations, SUCCESS

    def _reprieve(self, state: CycleState, pod: PodInfo, info: PodInfo, node: NodeInfo) -> bool:
        """Put ``info`` back on the node; take it off again unless ``pod`` still fits."""
        node.add_pod(info)
        self._check(self._handle.run_pre_filter_extension_add_pod(state, pod, info, node))
        if self._handle.run_filter_plugins_with_nominated_pods(state, pod, node).is_success:
            return True
        self._remove(state, pod, info, node)
        return False

    def _remove(self, state: CycleState, pod: PodInfo, info: PodInfo, node: NodeInfo) -> None:
        node.remove_pod(info.pod)
        self._check(self._handle.run_pre_filter_extension_remove_pod(state, pod, info, node))

    @staticmethod
    def _check(status: Status) -> None:
        if not status.is_success:
            raise _ExtensionFailed(status.message)

    async def _prepare(self, candidate: Candidate, preemptor: Pod) -> Status:
        """Evict the victims, then clear the nominations of lower-priority pods nominated to
        the node (failing to clear one is logged, not fatal)."""
        outcomes = await asyncio.gather(
            *(
                self._preempt_victim(candidate.node_name, preemptor, victim)
                for victim in candidate.victims
                if victim.metadata.deletion_timestamp is None
            )
        )
        errors = [error for error in outcomes if error is not None]
        if errors:
            return Status.failed(errors[0])
        client = self._handle.client
        priority = _priority(preemptor)
        for info in self._handle.nominated_pods_for_node(candidate.node_name):
            if info.priority >= priority:
                continue
            meta = info.pod.metadata
            try:
                await client.patch(
                    Pod,
                    meta.name or "",
                    meta.namespace,
                    {"status": {"nominatedNodeName": None}},
                    subresource="status",
                )
            except (ApiError, ClientError) as error:
                log.warning("cannot clear the nominatedNodeName of %s: %s", info.key, error)
        return SUCCESS

    async def _preempt_victim(
        self, node_name: str, preemptor: Pod, victim: Pod
    ) -> ApiError | ClientError | None:
        """Reject the victim if it waits at Permit, else mark and delete it; announce it."""
        meta = victim.metadata
        waiting = self._handle.waiting_pod(meta.uid or "")
        if waiting is not None:
            waiting.reject(self.NAME, "preempted")
        else:
            try:
                condition = self._disruption_condition(preemptor, victim)
                if condition is not None:
                    await self._handle.client.patch(
                        Pod,
                        meta.name or "",
                        meta.namespace,
                        {"status": {"conditions": [condition]}},
                        patch_type="strategic",
                        subresource="status",
                    )
                await self._handle.client.delete(
                    Pod, meta.name or "", meta.namespace, preconditions=Preconditions(uid=meta.uid)
                )
            except ApiError as error:
                if error.not_found:
                    return None
                return error
            except ClientError as error:
                return error
        recorder = self._handle.recorder
        if recorder is not None:
            recorder.event(
                victim,
                "Normal",
                "Preempted",
                f"Preempted by pod {preemptor.metadata.uid} on node {node_name}",
                action="Preempting",
                related=preemptor,
            )
        return None

    def _disruption_condition(self, preemptor: Pod, victim: Pod) -> PodCondition | None:
        """The DisruptionTarget condition to add to the victim, None if it already has it."""
        scheduler = (preemptor.spec.scheduler_name if preemptor.spec else None) or (
            DEFAULT_SCHEDULER_NAME
        )
        message = f"{scheduler}: preempting to accommodate a higher priority pod"
        for existing in (victim.status.conditions if victim.status else None) or ():
            if existing.type == DISRUPTION_TARGET and (
                existing.status,
                existing.reason,
                existing.message,
            ) == ("True", PREEMPTION_BY_SCHEDULER, message):
                return None
        return PodCondition(
            type=DISRUPTION_TARGET,
            observed_generation=victim.metadata.generation,
            status="True",
            last_transition_time=self._handle.clock.now().replace(microsecond=0),
            reason=PREEMPTION_BY_SCHEDULER,
            message=message,
        )


def _int_arg(args: Mapping[str, Any], key: str, default: int) -> int:
    value = args.get(key)
    return default if value is None else int(value)


def new(args: Mapping[str, Any] | None, handle: Handle) -> DefaultPreemption:
    """``args``: DefaultPreemptionArgs (``minCandidateNodesPercentage``,
    ``minCandidateNodesAbsolute``); ValueError if invalid."""
    args = args or {}
    percentage = _int_arg(
        args, "minCandidateNodesPercentage", DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
    )
    absolute = _int_arg(args, "minCandidateNodesAbsolute", DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE)
    errors: list[str] = []
    if not 0 <= percentage <= 100:
        errors.append(
            f"minCandidateNodesPercentage: Invalid value: {percentage}: not in valid range [0, 100]"
        )
    if absolute < 0:
        errors.append(
            f"minCandidateNodesAbsolute: Invalid value: {absolute}: not in valid range [0, inf)"
        )
    if percentage == 0 and absolute == 0:
        errors += [
            "minCandidateNodesPercentage: Invalid value: 0: "
            "cannot be zero at the same time as minCandidateNodesAbsolute",
            "minCandidateNodesAbsolute: Invalid value: 0: "
            "cannot be zero at the same time as minCandidateNodesPercentage",
        ]
    if errors:
        raise ValueError(go_aggregate(errors))
    return DefaultPreemption(handle, percentage, absolute)
