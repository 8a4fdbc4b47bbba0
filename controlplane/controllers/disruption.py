"""The disruption controller: keeps each PodDisruptionBudget's status current, so that
evictions know how many of its pods may go right now.

Keys are budgets (``namespace/name``); a pod event enqueues every budget in its namespace
whose selector matches the pod.  The sync, as upstream's ``trySync``:

* **expected pods**: with an integer ``minAvailable``, the number of pods the budget selects;
  otherwise (``maxUnavailable``, or a percentage) the sum of the desired replicas of the
  controllers of those pods, each counted once: a ReplicaSet (or the Deployment that controls
  it), a StatefulSet, a ReplicationController.  A pod without a controller cannot be counted
  and is reported (``UnmanagedPods``); a controller none of those informers knows is an error.
* **desired healthy**: the integer ``minAvailable``, or ``minAvailable``% of the expected pods
  rounded up, or the expected pods minus ``maxUnavailable`` (a percentage of them rounded up),
  never below zero.
* **current healthy**: the selected pods that are Ready, not being deleted, and not listed in
  ``status.disruptedPods`` by an eviction less than two minutes ago.  Listed pods that are gone,
  being deleted or older than that are dropped from the list, and the budget is looked at again
  when the next one expires.
* **disruptions allowed**: healthy minus desired, and zero when that is negative or nothing is
  expected, with the ``DisruptionAllowed`` condition (``SufficientPods`` / ``InsufficientPods``).

Status is written only when something in it changed.  When the computation fails the budget
is made safe, as upstream's ``failSafe``: no disruptions allowed, condition reason
``SyncFailed`` carrying the error, and the key is retried.
"""

from __future__ import annotations

import copy
import datetime
import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from kube.api.kinds.apps_v1 import Deployment, ReplicaSet, StatefulSet
from kube.api.kinds.core_v1.pod import Pod, ReplicationController
from kube.api.kinds.policy_v1 import PodDisruptionBudget, PodDisruptionBudgetStatus
from kube.api.labels import selector_of
from kube.api.meta_v1 import Condition, OwnerReference
from kube.api.owners import controller_of
from kube.api.struct import IntOrString
from kube.client.informers import SharedInformer

NAME = "disruption"
DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"
DELETION_TIMEOUT = datetime.timedelta(minutes=2)
"""How long an eviction's entry in ``disruptedPods`` keeps the pod out of the healthy count."""
APPS_GROUPS = ("apps", "extensions")


class ExpectedPodsError(Exception):
    """The expected number of pods cannot be computed (an unknown controller, a bad value)."""


def scaled(value: IntOrString, total: int) -> int:
    """An integer, or a percentage of ``total`` rounded up (upstream
    ``GetScaledValueFromIntOrPercent`` with ``roundUp``)."""
    if isinstance(value, int):
        return value
    if not value.endswith("%") or not value[:-1].isdigit():
        raise ExpectedPodsError(f"invalid value for IntOrString: invalid value {value!r}")
    return math.ceil(Fraction(int(value[:-1]) * total, 100))


def is_pod_ready(pod: Pod) -> bool:
    conditions = pod.status.conditions if pod.status else None
    return any(c.type == "Ready" and c.status == "True" for c in conditions or ())


def set_condition(
    conditions: list[Condition], new: Condition, now: datetime.datetime
) -> list[Condition]:
    """``conditions`` with ``new`` in place of the one of its type; the transition time moves
    only when the status changes (upstream ``meta.SetStatusCondition``)."""
    for i, current in enumerate(conditions):
        if current.type == new.type:
            moved = current.status != new.status or current.last_transition_time is None
            new.last_transition_time = now if moved else current.last_transition_time
            return [*conditions[:i], new, *conditions[i + 1 :]]
    new.last_transition_time = now
    return [*conditions, new]


def _group_of(ref: OwnerReference) -> str:
    api_version = ref.api_version or ""
    return api_version.split("/")[0] if "/" in api_version else ""


class DisruptionController(Controller):
    NAME = NAME
    EVENT_SOURCE = "controllermanager"  # upstream's disruption controller's, as it is

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.budgets = ctx.informers.informer_for(PodDisruptionBudget)
        self.pods = ctx.informers.informer_for(Pod)
        self.replica_sets = ctx.informers.informer_for(ReplicaSet)
        self.deployments = ctx.informers.informer_for(Deployment)
        self.stateful_sets = ctx.informers.informer_for(StatefulSet)
        self.replication_controllers = ctx.informers.informer_for(ReplicationController)
        self.budgets.add_event_handler(self.enqueue, self.enqueue_update, self.enqueue)
        self.pods.add_event_handler(self._pod_changed, self._pod_updated, self._pod_changed)

    def _pod_changed(self, obj: Any) -> None:
        pod = unwrap(obj)
        for budget in self.budgets.lister.list(pod.metadata.namespace):
            if budget.spec is not None and selector_of(budget.spec.selector).matches(
                pod.metadata.labels or {}
            ):
                self.enqueue(budget)

    def _pod_updated(self, old: Any, new: Any) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._pod_changed(new)
            if old.metadata.labels != new.metadata.labels:
                self._pod_changed(old)

    async def sync_key(self, key: str) -> None:
        budget = self.budgets.lister.get(key)
        if budget is None:
            return
        try:
            await self._try_sync(budget)
        except ExpectedPodsError as error:
            await self._fail_safe(budget, error)
            raise

    def _pods_of(self, budget: PodDisruptionBudget) -> list[Pod]:
        selector = selector_of(budget.spec.selector if budget.spec else None)
        return [
            pod
            for pod in self.pods.lister.list(budget.metadata.namespace)
            if selector.matches(pod.metadata.labels or {})
        ]

    async def _try_sync(self, budget: PodDisruptionBudget) -> None:
        pods = self._pods_of(budget)
        if not pods:
            self.ctx.recorder.event(budget, "Normal", "NoPods", "No matching pods found")
        try:
            expected, desired, unmanaged = self._expected_pods(budget, pods)
        except ExpectedPodsError as error:
            self.ctx.recorder.event(
                budget,
                "Warning",
                "CalculateExpectedPodCountFailed",
                f"Failed to calculate the number of expected pods: {error}",
            )
            raise
        if unmanaged:
            selector = selector_of(budget.spec.selector if budget.spec else None)
            self.ctx.recorder.event(
                budget,
                "Warning",
                "UnmanagedPods",
                f"Pods selected by this PodDisruptionBudget (selector: {selector}) were found to "
                "be unmanaged. As a result, the status of the PDB cannot be calculated correctly, "
                "which may result in undefined behavior. To account for these pods please set "
                '".spec.minAvailable" field of the PDB to an integer value.',
            )
        now = self.ctx.clock.now()
        disrupted, recheck = self._disrupted_pods(budget, pods, now)
        healthy = sum(
            1
            for pod in pods
            if pod.metadata.deletion_timestamp is None
            and pod.metadata.name not in disrupted
            and is_pod_ready(pod)
        )
        await self._update_status(budget, healthy, desired, expected, disrupted)
        if recheck is not None:
            self.enqueue_after(budget, (recheck - now).total_seconds())

    def _expected_pods(
        self, budget: PodDisruptionBudget, pods: list[Pod]
    ) -> tuple[int, int, list[str]]:
        """Expected pods, desired healthy pods, and the names of pods without a controller."""
        spec = budget.spec
        if spec is None:
            return 0, 0, []
        if spec.max_unavailable is not None:
            expected, unmanaged = self._expected_scale(pods)
            desired = max(expected - scaled(spec.max_unavailable, expected), 0)
            return expected, desired, unmanaged
        if isinstance(spec.min_available, int):
            return len(pods), spec.min_available, []
        if spec.min_available is not None:
            expected, unmanaged = self._expected_scale(pods)
            return expected, scaled(spec.min_available, expected), unmanaged
        return 0, 0, []

    def _expected_scale(self, pods: Iterable[Pod]) -> tuple[int, list[str]]:
        scales: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = controller_of(pod)
            if ref is None:
                unmanaged.append(pod.metadata.name or "")
                continue
            if ref.uid in scales:
                continue
            found = self._controller_scale(ref, pod.metadata.namespace or "")
            if found is None:
                raise ExpectedPodsError(f'found no controllers for pod "{pod.metadata.name}"')
            uid, replicas = found
            scales[uid] = replicas
        return sum(scales.values()), unmanaged

    def _controller_scale(self, ref: OwnerReference, namespace: str) -> tuple[str, int] | None:
        """The uid and desired replicas of the workload ``ref`` leads to, if one is known."""
        group = _group_of(ref)
        if ref.kind == "ReplicaSet" and group in APPS_GROUPS:
            rs = self._owner(self.replica_sets, ref, namespace)
            if rs is None:
                return None
            rs_ref = controller_of(rs)
            if (
                rs_ref is not None
                and rs_ref.kind == "Deployment"
                and _group_of(rs_ref) in APPS_GROUPS
            ):
                deployment = self._owner(self.deployments, rs_ref, namespace)
                if deployment is None:
                    return None
                return rs_ref.uid or "", _replicas(deployment)
            return ref.uid or "", _replicas(rs)
        if ref.kind == "StatefulSet" and group in APPS_GROUPS:
            owner: Any = self._owner(self.stateful_sets, ref, namespace)
        elif ref.kind == "ReplicationController" and group == "":
            owner = self._owner(self.replication_controllers, ref, namespace)
        else:
            return None
        return None if owner is None else (ref.uid or "", _replicas(owner))

    @staticmethod
    def _owner(informer: SharedInformer[Any], ref: OwnerReference, namespace: str) -> Any:
        owner = informer.lister.get(f"{namespace}/{ref.name}")
        return owner if owner is not None and owner.metadata.uid == ref.uid else None

    def _disrupted_pods(
        self, budget: PodDisruptionBudget, pods: list[Pod], now: datetime.datetime
    ) -> tuple[dict[str, datetime.datetime], datetime.datetime | None]:
        """The still-valid ``disruptedPods`` entries and when the earliest of them expires."""
        listed = (budget.status.disrupted_pods if budget.status else None) or {}
        by_name = {pod.metadata.name: pod for pod in pods}
        kept: dict[str, datetime.datetime] = {}
        recheck: datetime.datetime | None = None
        for name, evicted in listed.items():
            pod = by_name.get(name)
            if pod is None or pod.metadata.deletion_timestamp is not None:
                continue
            expires = evicted + DELETION_TIMEOUT
            if expires < now:
                continue
            kept[name] = evicted
            recheck = expires if recheck is None else min(recheck, expires)
        return kept, recheck

    async def _update_status(
        self,
        budget: PodDisruptionBudget,
        healthy: int,
        desired: int,
        expected: int,
        disrupted: dict[str, datetime.datetime],
    ) -> None:
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        old = budget.status or PodDisruptionBudgetStatus()
        generation = budget.metadata.generation
        condition = Condition(
            type=DISRUPTION_ALLOWED,
            status="True" if allowed > 0 else "False",
            reason=SUFFICIENT_PODS if allowed > 0 else INSUFFICIENT_PODS,
            observed_generation=generation,
        )
        status = PodDisruptionBudgetStatus(
            observed_generation=generation,
            disrupted_pods=disrupted or None,
            disruptions_allowed=allowed,
            current_healthy=healthy,
            desired_healthy=desired,
            expected_pods=expected,
            conditions=set_condition(list(old.conditions or ()), condition, self.ctx.clock.now()),
        )
        if status != old:
            await self._write_status(budget, status)

    async def _fail_safe(self, budget: PodDisruptionBudget, error: Exception) -> None:
        status = copy.deepcopy(budget.status) or PodDisruptionBudgetStatus()
        status.disruptions_allowed = 0
        condition = Condition(
            type=DISRUPTION_ALLOWED,
            status="False",
            reason=SYNC_FAILED,
            message=str(error),
            observed_generation=status.observed_generation,
        )
        status.conditions = set_condition(
            list(status.conditions or ()), condition, self.ctx.clock.now()
        )
        await self._write_status(budget, status)

    async def _write_status(
        self, budget: PodDisruptionBudget, status: PodDisruptionBudgetStatus
    ) -> None:
        updated = copy.deepcopy(budget)
        updated.status = status
        await self.ctx.client.update_status(updated)


def _replicas(workload: Any) -> int:
    replicas = workload.spec.replicas if workload.spec is not None else None
    return 1 if replicas is None else int(replicas)


def new(ctx: ControllerContext) -> DisruptionController:
    return DisruptionController(ctx)
