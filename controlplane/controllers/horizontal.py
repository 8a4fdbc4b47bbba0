"""The horizontal pod autoscaler: sets the replica count of whatever an HPA targets from the
metrics it names, as upstream's ``pkg/controller/podautoscaler/horizontal.go``.

Keys are HPAs.  Each is synced when it appears (upstream waits one period first) and then
every sync period (15 s), whatever happens: the metrics it reads change without any event.
Updates to an HPA (its own status writes among them) are taken at the next period, not at
once, as upstream's rate-limited queue has them; failures are logged and retried at the next
period too, never sooner, so a missing metric does not hammer the API or flood events.
A period of a second or more is stretched or shortened by under half a second so that it
ends on a whole second of the clock: 1,000 HPAs make 67 syncs a second, and spread evenly
each one woke the controller alone and cost four times the CPU of a sync done among others
(bench/README.md, autoscaling); gathered, they come as one burst a second.

A sync (upstream's ``reconcileAutoscaler``):

1. finds the target's resource by discovery (so custom resources work too) and reads its
   ``scale`` subresource (condition AbleToScale: SucceededGetScale, or FailedGetScale).
   Upstream GETs it on every sync; here the scale of a Deployment, ReplicaSet, StatefulSet or
   ReplicationController is computed from the controller-manager's informers as the API
   server computes it (``kube.api.scale``), since a request per HPA every 15 s was a fifth to
   a quarter of what 1,000 HPAs at rest cost.  The write that follows is guarded by the
   cached object's resourceVersion, so a cache behind the server makes a Conflict, never a
   lost update.
   Other kinds (custom resources), and a target the cache does not hold, are read from the
   API server;
2. a target at zero replicas is left alone (ScalingActive False, ScalingDisabled); one outside
   minReplicas..maxReplicas is brought inside; otherwise each metric proposes a count
   (``replicacalculator``) and the largest wins (ScalingActive True, ValidMetricFound).  A
   metric that fails makes its condition and event; if every metric failed, or some did and
   the others would scale down, nothing is scaled; nor is it when the target's scale has no
   selector, or its pods are matched by another HPA's selector too (AmbiguousSelector);
3. the proposal is stabilized and rate-limited: without ``behavior``, the highest
   recommendation of the downscale stabilization window (5 min) and a scale-up limit of twice
   the current count (at least 4); with ``behavior``, each direction's window, policies and
   selectPolicy over the scale events of the policies' periods (AbleToScale ReadyForNewScale
   or Scale{Up,Down}Stabilized; ScalingLimited with DesiredWithinRange, TooFewReplicas,
   TooManyReplicas, ScaleUpLimit, ScaleDownLimit);
4. a new count is written through the ``scale`` subresource (SuccessfulRescale event
   ``New size: N; reason: ...``; FailedRescale and AbleToScale FailedUpdateScale when
   refused), and the status (current and desired replicas, current metrics, lastScaleTime,
   the conditions) is written when it changed.

Recommendations and scale events are kept in memory per HPA, as upstream's: a restarted
controller starts its windows afresh.
"""

from __future__ import annotations

import copy
import datetime
import functools
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import msgspec

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, key_of
from controlplane.controllers.discovery import APIResource, NoKindMatchError, RESTMapper
from controlplane.controllers.hpametrics import (
    MetricsClient,
    MetricsError,
    RestMetricsClient,
    error_text,
    milli,
)
from controlplane.controllers.replicacalculator import (
    ReplicaCalculator,
    Scope,
    Tolerances,
    ValueTarget,
    go_label_selector,
    metric_selector,
)
from controlplane.controllers.selectors import SelectorIndex
from kube.api import codec, quantity
from kube.api.kinds import autoscaling_v2 as v2
from kube.api.kinds.autoscaling_v1 import Scale, ScaleSpec
from kube.api.kinds.autoscaling_v2 import (
    HorizontalPodAutoscaler,
    HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerStatus,
    HPAScalingRules,
    MetricSpec,
    MetricStatus,
    MetricTarget,
    MetricValueStatus,
)
from kube.api.kinds.core_v1.pod import Pod
from kube.api.labels import Selector, SelectorError, parse_selector
from kube.api.scale import WORKLOADS, workload_scale
from kube.api.struct import QuantityValue, deep_copy
from kube.client.errors import ApiError, ClientError
from kube.client.events import NORMAL, WARNING
from kube.client.informers import LABELS_INDEX, SharedInformer, index_by_labels
from kube.client.rest import ResourcePath

log = logging.getLogger("kubelab.controllers")

NAME = "horizontalpodautoscaling"
SYNC_ALIGNMENT = 1.0
"""Seconds: periodic syncs are due on multiples of this on the clock."""
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0

ABLE_TO_SCALE, SCALING_ACTIVE, SCALING_LIMITED = "AbleToScale", "ScalingActive", "ScalingLimited"
TRUE, FALSE = "True", "False"


class ReconcileError(Exception):
    """The HPA could not be reconciled; already reported in its conditions and events."""


@dataclass(frozen=True)
class Timestamped:
    """A recommendation (a replica count) or a scale event (a change), and when."""

    value: int
    at: datetime.datetime


@dataclass
class History:
    """What the controller remembers of one HPA between syncs."""

    recommendations: list[Timestamped] = field(default_factory=list)
    scale_ups: list[Timestamped] = field(default_factory=list)
    scale_downs: list[Timestamped] = field(default_factory=list)


def set_condition(
    status: HorizontalPodAutoscalerStatus,
    type: str,
    condition_status: str,
    reason: str,
    message: str,
    now: datetime.datetime,
) -> None:
    """Set one condition in place; its transition time moves only when its status changes
    (upstream's ``setConditionInList``)."""
    conditions = status.conditions = list(status.conditions or [])
    existing = next((c for c in conditions if c.type == type), None)
    if existing is None:
        existing = HorizontalPodAutoscalerCondition(type=type)
        conditions.append(existing)
    if existing.status != condition_status:
        existing.last_transition_time = now
    existing.status, existing.reason, existing.message = condition_status, reason, message


_parse_selector = functools.lru_cache(maxsize=4096)(parse_selector)
"""The selector of a scale's text: the same text every sync, and a selector is immutable."""


def _fraction(value: QuantityValue) -> float:
    return float(quantity.Quantity.parse(value).as_fraction())


def tolerances_for(hpa: HorizontalPodAutoscaler, default: float) -> Tolerances:
    """The HPA's own tolerance for each direction (``behavior.*.tolerance``) or the default."""
    behavior = hpa.spec.behavior if hpa.spec else None
    down = behavior.scale_down if behavior else None
    up = behavior.scale_up if behavior else None
    return Tolerances(
        down=_fraction(down.tolerance) if down and down.tolerance is not None else default,
        up=_fraction(up.tolerance) if up and up.tolerance is not None else default,
    )


def _milli_quantity(value: int) -> str:
    """Thousandths as the quantity upstream writes (``NewMilliQuantity``: ``250m``, ``1``)."""
    return quantity.canonicalize(f"{value}m")


def _reference(hpa: HorizontalPodAutoscaler) -> str:
    """The target as upstream's messages name it: ``Kind/namespace/name``."""
    ref = (hpa.spec.scale_target_ref if hpa.spec else None) or v2.CrossVersionObjectReference()
    return f"{ref.kind}/{hpa.metadata.namespace}/{ref.name}"


def _value_status(target: ValueTarget, usage: int) -> MetricValueStatus:
    """An Object or External metric's current value, in the shape of its target."""
    if target.per_pod:
        return MetricValueStatus(average_value=_milli_quantity(usage))
    return MetricValueStatus(value=_milli_quantity(usage))


@dataclass(frozen=True)
class MetricResult:
    """What one metric proposes, and its status and name for the HPA's status and events."""

    replicas: int
    name: str
    status: MetricStatus
    timestamp: datetime.datetime


class MetricFailure(Exception):
    """One metric could not be computed: the reason of its event and condition, what they
    say (``condition``), and the error it adds to the sync's (``outer``, then ``condition``)."""

    def __init__(self, reason: str, condition: str, outer: str) -> None:
        super().__init__(f"{outer}: {condition}" if outer else condition)
        self.reason = reason
        self.condition = condition


def replicas_change_per_period(
    period: float, events: list[Timestamped], now: datetime.datetime
) -> int:
    """The replicas added (or removed) by the events of the last ``period`` seconds."""
    cutoff = now - datetime.timedelta(seconds=period)
    return sum(event.value for event in events if event.at > cutoff)


def _period_starts(
    current: int, history: History, rules: HPAScalingRules, now: datetime.datetime
) -> list[tuple[v2.HPAScalingPolicy, int]]:
    """Each policy, with the replica count at the start of its period."""
    starts = []
    for policy in rules.policies or []:
        period = float(policy.period_seconds or 0)
        added = replicas_change_per_period(period, history.scale_ups, now)
        removed = replicas_change_per_period(period, history.scale_downs, now)
        starts.append((policy, current - added + removed))
    return starts


def scale_up_limit(
    current: int, history: History, rules: HPAScalingRules, now: datetime.datetime
) -> int:
    """The highest count ``rules`` allow now (upstream's
    ``calculateScaleUpLimitWithScalingRules``): each policy's from its period's start, the
    largest (``Max``) or the smallest (``Min``)."""
    if rules.select_policy == "Disabled":
        return current
    proposals = [
        start + (policy.value or 0)
        if policy.type == "Pods"
        else math.ceil(start * (1 + (policy.value or 0) / 100))
        for policy, start in _period_starts(current, history, rules, now)
    ]
    pick = min if rules.select_policy == "Min" else max
    return pick(proposals, default=current)


def scale_down_limit(
    current: int, history: History, rules: HPAScalingRules, now: datetime.datetime
) -> int:
    """The lowest count ``rules`` allow now (upstream's ``calculateScaleDownLimitWithBehaviors``):
    the largest change (``Max``: the smallest count) or the smallest (``Min``)."""
    if rules.select_policy == "Disabled":
        return current
    proposals = [
        start - (policy.value or 0)
        if policy.type == "Pods"
        else int(start * (1 - (policy.value or 0) / 100))
        for policy, start in _period_starts(current, history, rules, now)
    ]
    pick = max if rules.select_policy == "Min" else min
    return pick(proposals, default=current)


@dataclass(frozen=True)
class Normalized:
    """A replica count after a limit, with the ScalingLimited reason and message."""

    replicas: int
    reason: str
    message: str


WITHIN_RANGE = ("DesiredWithinRange", "the desired count is within the acceptable range")
TOO_FEW = ("TooFewReplicas", "the desired replica count is less than the minimum replica count")
TOO_MANY = ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
SCALE_UP_LIMIT = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
)
SCALE_DOWN_LIMIT = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
)
READY_FOR_NEW_SCALE = ("ReadyForNewScale", "recommended size matches current size")
SCALE_UP_STABILIZED = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
)
SCALE_DOWN_STABILIZED = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent "
    "recommendation",
)


def limit_by_rules(current: int, desired: int, minimum: int, maximum: int) -> Normalized:
    """Without ``behavior``: between the bounds, and up by at most twice the current count
    (at least 4), upstream's ``convertDesiredReplicasWithRules``."""
    scale_up = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
    highest, limited = (scale_up, SCALE_UP_LIMIT) if maximum > scale_up else (maximum, TOO_MANY)
    if desired < minimum:
        return Normalized(minimum, *TOO_FEW)
    if desired > highest:
        return Normalized(highest, *limited)
    return Normalized(desired, *WITHIN_RANGE)


def limit_by_behavior(
    current: int,
    desired: int,
    minimum: int,
    maximum: int,
    behavior: v2.HorizontalPodAutoscalerBehavior,
    history: History,
    now: datetime.datetime,
) -> Normalized:
    """With ``behavior``: the policies' rate limits and the bounds, upstream's
    ``convertDesiredReplicasWithBehaviorRate``."""
    if desired > current and behavior.scale_up is not None:
        limit = max(scale_up_limit(current, history, behavior.scale_up, now), current)
        highest, limited = (limit, SCALE_UP_LIMIT) if maximum > limit else (maximum, TOO_MANY)
        if desired > highest:
            return Normalized(highest, *limited)
    elif desired < current and behavior.scale_down is not None:
        limit = min(scale_down_limit(current, history, behavior.scale_down, now), current)
        lowest, limited = (limit, SCALE_DOWN_LIMIT) if minimum < limit else (minimum, TOO_FEW)
        if desired < lowest:
            return Normalized(lowest, *limited)
    return Normalized(desired, *WITHIN_RANGE)


def _record(recommendations: list[Timestamped], new: Timestamped, old: int | None) -> None:
    """Keep ``new``, in the place of an entry out of every window (``old``) if there is one."""
    if old is None:
        recommendations.append(new)
    else:
        recommendations[old] = new


def stabilize(history: History, desired: int, window: float, now: datetime.datetime) -> int:
    """Without ``behavior``: the highest recommendation of the downscale stabilization window
    (upstream's ``stabilizeRecommendation``); records ``desired``."""
    cutoff = now - datetime.timedelta(seconds=window)
    highest, old = desired, None
    for i, rec in enumerate(history.recommendations):
        if rec.at < cutoff:
            old = i
        else:
            highest = max(highest, rec.value)
    _record(history.recommendations, Timestamped(desired, now), old)
    return highest


def stabilize_with_behavior(
    history: History,
    current: int,
    desired: int,
    up_window: float,
    down_window: float,
    now: datetime.datetime,
) -> tuple[int, tuple[str, str]]:
    """With ``behavior``: no higher than the lowest recommendation of the scale-up window, no
    lower than the highest of the scale-down window (upstream's
    ``stabilizeRecommendationWithBehaviors``); records ``desired``."""
    up_cutoff = now - datetime.timedelta(seconds=up_window)
    down_cutoff = now - datetime.timedelta(seconds=down_window)
    up, down, old = desired, desired, None
    for i, rec in enumerate(history.recommendations):
        if rec.at > up_cutoff:
            up = min(up, rec.value)
        if rec.at > down_cutoff:
            down = max(down, rec.value)
        if rec.at < up_cutoff and rec.at < down_cutoff:
            old = i
    recommendation = min(max(current, up), down)
    _record(history.recommendations, Timestamped(desired, now), old)
    return recommendation, SCALE_UP_STABILIZED if desired >= current else SCALE_DOWN_STABILIZED


def store_scale_event(
    behavior: v2.HorizontalPodAutoscalerBehavior | None,
    history: History,
    previous: int,
    new: int,
    now: datetime.datetime,
) -> None:
    """Remember a rescale for the policies' periods (only with ``behavior``, the only user);
    events older than the direction's longest period are dropped."""
    if behavior is None:
        return
    up = new > previous
    rules = behavior.scale_up if up else behavior.scale_down
    events = history.scale_ups if up else history.scale_downs
    longest = max(
        (p.period_seconds or 0 for p in (rules.policies if rules else None) or []), default=0
    )
    cutoff = now - datetime.timedelta(seconds=longest)
    events[:] = [event for event in events if event.at > cutoff]
    events.append(Timestamped(abs(new - previous), now))


class HorizontalController(Controller):
    NAME = NAME
    EVENT_SOURCE = "horizontal-pod-autoscaler"

    def __init__(self, ctx: ControllerContext, metrics: MetricsClient | None = None) -> None:
        super().__init__(ctx)
        options = ctx.options.autoscaler
        self.sync_period = options.sync_period
        self.downscale_stabilization = options.downscale_stabilization
        self.tolerance = options.tolerance
        self.hpas = ctx.informers.informer_for(HorizontalPodAutoscaler)
        self.pods = ctx.informers.informer_for(Pod)
        self.workloads: dict[ResourcePath, SharedInformer[Any]] = {
            ResourcePath.of(kind.kind_info): ctx.informers.informer_for(kind) for kind in WORKLOADS
        }
        self.mapper = RESTMapper(ctx.client)
        self.calculator = ReplicaCalculator(
            metrics or RestMetricsClient(ctx.client, self.mapper),
            self._pods_matching,
            ctx.clock.now,
            options.cpu_initialization_period,
            options.initial_readiness_delay,
        )
        self.pods.add_indexers({LABELS_INDEX: index_by_labels})
        self.histories: dict[str, History] = {}
        self.selectors = SelectorIndex()
        """The selector of each HPA's pods as last read, to find pods two HPAs scale."""
        self.hpas.add_event_handler(self.enqueue, self._updated, self._deleted)

    def _updated(self, old: Any, new: Any) -> None:
        """Changes wait for the next period, as upstream's rate-limited queue has them: the
        controller's own status writes must not make it sync (and scale) again at once."""
        if old.metadata.resource_version != new.metadata.resource_version:
            self.enqueue_after(new, self._until_next_sync())

    def _until_next_sync(self) -> float:
        """The sync period, ending on the nearest multiple of ``SYNC_ALIGNMENT``."""
        if self.sync_period < SYNC_ALIGNMENT:
            return self.sync_period
        now = self.ctx.clock.monotonic()
        due = math.floor((now + self.sync_period) / SYNC_ALIGNMENT + 0.5) * SYNC_ALIGNMENT
        return due - now

    def _deleted(self, obj: Any) -> None:
        self._forget(key_of(obj))

    def _forget(self, key: str) -> None:
        self.histories.pop(key, None)
        self.selectors.remove(key)

    def _pods_matching(self, namespace: str, selector: Selector) -> list[Pod]:
        return self.pods.lister.select(namespace, selector)

    async def sync_key(self, key: str) -> None:
        hpa = self.hpas.lister.get(key)
        if hpa is None:
            self._forget(key)
            return
        try:
            await self.reconcile(hpa, key)
        except (ReconcileError, ApiError, ClientError) as error:
            log.info("%s controller: %s: %s", NAME, key, error_text(error))
        self.queue.add_after(key, self._until_next_sync())

    # Reconciling one HPA (upstream's reconcileAutoscaler).

    async def reconcile(self, shared: HorizontalPodAutoscaler, key: str) -> None:
        # Only the status is written: the rest stays shared with the cache.
        original = shared.status
        copied = deep_copy(original) if original is not None else None
        hpa = msgspec.structs.replace(shared, status=copied)
        status = hpa.status = hpa.status or HorizontalPodAutoscalerStatus(desired_replicas=0)
        spec = hpa.spec or v2.HorizontalPodAutoscalerSpec()
        ref = spec.scale_target_ref or v2.CrossVersionObjectReference()
        namespace = hpa.metadata.namespace or ""
        reference = _reference(hpa)
        now = self.ctx.clock.now()
        try:
            resource = await self.mapper.resource_for(ref.api_version or "v1", ref.kind or "")
            scale = await self._get_scale(resource, namespace, ref.name or "")
        except (NoKindMatchError, ApiError, ClientError, codec.DecodeError) as error:
            text = error_text(error)
            self.ctx.recorder.event(hpa, WARNING, "FailedGetScale", text)
            set_condition(
                status,
                ABLE_TO_SCALE,
                FALSE,
                "FailedGetScale",
                f"the HPA controller was unable to get the target's current scale: {text}",
                now,
            )
            await self._update_status_if_needed(original, hpa)
            raise ReconcileError(
                f"failed to query scale subresource for {reference}: {text}"
            ) from None
        set_condition(
            status,
            ABLE_TO_SCALE,
            TRUE,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
            now,
        )
        current = (scale.spec.replicas if scale.spec else None) or 0
        history = self.histories.setdefault(key, History())
        if not history.recommendations:
            history.recommendations.append(Timestamped(current, now))
        minimum = spec.min_replicas if spec.min_replicas is not None else 1
        maximum = spec.max_replicas or 0
        statuses: list[MetricStatus] | None = None
        reason = ""
        failure: str | None = None
        if current == 0 and minimum != 0:
            desired, rescale = 0, False
            set_condition(
                status,
                SCALING_ACTIVE,
                FALSE,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
                now,
            )
        elif current > maximum:
            desired, rescale, reason = (
                maximum,
                True,
                "Current number of replicas above Spec.MaxReplicas",
            )
        elif current < minimum:
            desired, rescale, reason = (
                minimum,
                True,
                "Current number of replicas below Spec.MinReplicas",
            )
        else:
            proposed, metric, statuses, failure = await self._replicas_for_metrics(hpa, scale, now)
            if proposed is None:
                self._set_status(status, current, status.desired_replicas or 0, statuses)
                await self._update_status_if_needed(original, hpa)
                self.ctx.recorder.event(hpa, WARNING, "FailedComputeMetricsReplicas", failure or "")
                raise ReconcileError(
                    "failed to compute desired number of replicas based on listed metrics for "
                    f"{reference}: {failure}"
                )
            desired = max(proposed, 0)
            if desired > current:
                reason = f"{metric} above target"
            elif desired < current:
                reason = "All metrics below target"
            desired = self._normalize(hpa, status, history, current, desired, minimum, now)
            rescale = desired != current
        if rescale:
            await self._rescale(hpa, original, resource, scale, desired, reason, statuses, now)
            store_scale_event(spec.behavior, history, current, desired, now)
        else:
            desired = current
        self._set_status(status, current, desired, statuses)
        if rescale:
            status.last_scale_time = now
        await self._update_status_if_needed(original, hpa)
        if failure is not None:
            raise ReconcileError(failure)

    async def _rescale(
        self,
        hpa: HorizontalPodAutoscaler,
        original: HorizontalPodAutoscalerStatus | None,
        resource: APIResource,
        scale: Scale,
        desired: int,
        reason: str,
        statuses: list[MetricStatus] | None,
        now: datetime.datetime,
    ) -> None:
        """Write ``desired`` through the scale subresource and say so; when refused, report
        it, write the status and raise ReconcileError."""
        status = hpa.status or HorizontalPodAutoscalerStatus()
        try:
            await self._update_scale(resource, scale, desired)
        except (ApiError, ClientError) as error:
            text = error_text(error)
            self.ctx.recorder.event(
                hpa,
                WARNING,
                "FailedRescale",
                f"New size: {desired}; reason: {reason}; error: {text}",
            )
            set_condition(
                status,
                ABLE_TO_SCALE,
                FALSE,
                "FailedUpdateScale",
                f"the HPA controller was unable to update the target scale: {text}",
                now,
            )
            current = (scale.spec.replicas if scale.spec else None) or 0
            self._set_status(status, current, status.desired_replicas or 0, statuses)
            await self._update_status_if_needed(original, hpa)
            raise ReconcileError(f"failed to rescale {_reference(hpa)}: {text}") from None
        set_condition(
            status,
            ABLE_TO_SCALE,
            TRUE,
            "SucceededRescale",
            f"the HPA controller was able to update the target scale to {desired}",
            now,
        )
        self.ctx.recorder.event(
            hpa, NORMAL, "SuccessfulRescale", f"New size: {desired}; reason: {reason}"
        )

    def _normalize(
        self,
        hpa: HorizontalPodAutoscaler,
        status: HorizontalPodAutoscalerStatus,
        history: History,
        current: int,
        desired: int,
        minimum: int,
        now: datetime.datetime,
    ) -> int:
        """Stabilize, then limit (upstream's ``normalizeDesiredReplicas`` and its
        ``WithBehaviors`` twin), setting AbleToScale and ScalingLimited on the way."""
        spec = hpa.spec or v2.HorizontalPodAutoscalerSpec()
        maximum = spec.max_replicas or 0
        behavior = spec.behavior
        if behavior is None:
            stabilized = stabilize(history, desired, self.downscale_stabilization, now)
            stabilized_reason = SCALE_DOWN_STABILIZED
            limited = limit_by_rules(current, stabilized, minimum, maximum)
        else:
            up = behavior.scale_up or HPAScalingRules()
            down = behavior.scale_down or HPAScalingRules()
            down_window = down.stabilization_window_seconds
            stabilized, stabilized_reason = stabilize_with_behavior(
                history,
                current,
                desired,
                float(up.stabilization_window_seconds or 0),
                self.downscale_stabilization if down_window is None else float(down_window),
                now,
            )
            limited = limit_by_behavior(
                current, stabilized, minimum, maximum, behavior, history, now
            )
        able = stabilized_reason if stabilized != desired else READY_FOR_NEW_SCALE
        set_condition(status, ABLE_TO_SCALE, TRUE, *able, now)
        set_condition(
            status,
            SCALING_LIMITED,
            FALSE if limited.replicas == stabilized else TRUE,
            limited.reason,
            limited.message,
            now,
        )
        return limited.replicas

    async def _replicas_for_metrics(
        self, hpa: HorizontalPodAutoscaler, scale: Scale, now: datetime.datetime
    ) -> tuple[int | None, str, list[MetricStatus] | None, str | None]:
        """The largest count the metrics propose, the metric that proposed it, the metrics'
        statuses and the first failure (upstream's ``computeReplicasForMetrics``).  The count
        is None when nothing may be scaled: every metric failed, or some did and the rest
        would scale down."""
        status = hpa.status or HorizontalPodAutoscalerStatus()
        spec = hpa.spec or v2.HorizontalPodAutoscalerSpec()
        try:
            selector = self._selector(hpa, scale, now)
        except ReconcileError as error:
            return None, "", None, str(error)
        spec_replicas = (scale.spec.replicas if scale.spec else None) or 0
        status_replicas = (scale.status.replicas if scale.status else None) or 0
        specs = spec.metrics or []
        statuses: list[MetricStatus] = []
        failures: list[MetricFailure] = []
        replicas, metric = 0, ""
        for metric_spec in specs:
            try:
                result = await self._metric(
                    hpa, metric_spec, spec_replicas, status_replicas, selector
                )
            except MetricFailure as failed:
                self.ctx.recorder.event(hpa, WARNING, failed.reason, failed.condition)
                failures.append(failed)
                statuses.append(MetricStatus(type=""))
                continue
            statuses.append(result.status)
            if replicas == 0 or result.replicas > replicas:
                replicas, metric = result.replicas, result.name
        failure = None
        if failures:
            failure = (
                f"invalid metrics ({len(failures)} invalid out of {len(specs)}), first error "
                f"is: {failures[0]}"
            )
        if failures and (len(failures) >= len(specs) or replicas < spec_replicas):
            first = failures[0]
            set_condition(
                status,
                SCALING_ACTIVE,
                FALSE,
                first.reason,
                f"the HPA was unable to compute the replica count: {first.condition}",
                now,
            )
            return None, "", statuses, failure
        set_condition(
            status,
            SCALING_ACTIVE,
            TRUE,
            "ValidMetricFound",
            f"the HPA was able to successfully calculate a replica count from {metric}",
            now,
        )
        return replicas, metric, statuses, failure

    def _selector(
        self, hpa: HorizontalPodAutoscaler, scale: Scale, now: datetime.datetime
    ) -> Selector:
        """The target's pods, from its scale's selector (upstream's
        ``validateAndParseSelector``); raises ReconcileError after reporting a missing or bad
        selector, or pods another HPA's selector also matches."""
        status = hpa.status or HorizontalPodAutoscalerStatus()
        text = scale.status.selector if scale.status else None

        def refuse(event: str, reason: str, message: str, condition: str = "") -> ReconcileError:
            self.ctx.recorder.event(hpa, WARNING, event, message)
            set_condition(status, SCALING_ACTIVE, FALSE, reason, condition or message, now)
            return ReconcileError(message)

        if not text:
            raise refuse(
                "SelectorRequired",
                "InvalidSelector",
                "selector is required",
                "the HPA target's scale is missing a selector",
            )
        try:
            selector = _parse_selector(text)
        except SelectorError as error:
            message = (
                f"couldn't convert selector into a corresponding internal selector object: {error}"
            )
            raise refuse("InvalidSelector", "InvalidSelector", message) from None
        namespace = hpa.metadata.namespace or ""
        self.selectors.put(key_of(hpa), namespace, selector)
        controlling = sorted(
            set().union(
                *(
                    self.selectors.matching(namespace, pod.metadata.labels or {})
                    for pod in self._pods_matching(namespace, selector)
                )
            )
        )
        if len(controlling) > 1:
            message = (
                f"pods by selector {text} are controlled by multiple HPAs: "
                f"[{' '.join(controlling)}]"
            )
            raise refuse("AmbiguousSelector", "AmbiguousSelector", message)
        return selector

    async def _metric(
        self,
        hpa: HorizontalPodAutoscaler,
        spec: MetricSpec,
        spec_replicas: int,
        status_replicas: int,
        selector: Selector,
    ) -> MetricResult:
        """One metric's proposal (upstream's ``computeReplicasForMetric`` and the
        ``computeStatusFor*Metric`` it calls); raises MetricFailure."""
        scope = Scope(hpa.metadata.namespace or "", selector, tolerances_for(hpa, self.tolerance))
        if spec.type in (v2.RESOURCE, v2.CONTAINER_RESOURCE):
            return await self._resource_metric(scope, spec, spec_replicas)
        if spec.type == v2.PODS and spec.pods is not None:
            return await self._pods_metric(scope, spec.pods, spec_replicas)
        if spec.type == v2.OBJECT and spec.object is not None:
            return await self._object_metric(scope, spec.object, spec_replicas, status_replicas)
        if spec.type == v2.EXTERNAL and spec.external is not None:
            return await self._external_metric(scope, spec.external, spec_replicas, status_replicas)
        raise MetricFailure(
            "InvalidMetricSourceType", f'unknown metric source type "{spec.type}"', ""
        )

    async def _resource_metric(
        self, scope: Scope, spec: MetricSpec, spec_replicas: int
    ) -> MetricResult:
        container_source = spec.container_resource if spec.type == v2.CONTAINER_RESOURCE else None
        source = container_source or spec.resource or v2.ResourceMetricSource()
        container = (container_source.container if container_source else None) or ""
        name = source.name or ""
        target = source.target or MetricTarget()
        reason, outer = (
            (
                "FailedGetContainerResourceMetric",
                f"failed to get {container} container metric value",
            )
            if container_source
            else ("FailedGetResourceMetric", f"failed to get {name} resource metric value")
        )
        calc = self.calculator
        if target.average_value is not None:
            try:
                proposal = await calc.raw_resource_replicas(
                    scope, spec_replicas, milli(target.average_value), name, container
                )
            except MetricsError as error:
                raise MetricFailure(reason, f"failed to get {name} usage: {error}", outer) from None
            label = f"{name} resource"
            current = MetricValueStatus(average_value=_milli_quantity(proposal.usage))
        elif target.average_utilization is None:
            raise MetricFailure(
                reason,
                "invalid resource metric source: neither an average utilization target nor an "
                "average value (usage) target was set",
                outer,
            )
        else:
            try:
                proposal = await calc.resource_replicas(
                    scope, spec_replicas, target.average_utilization, name, container
                )
            except MetricsError as error:
                raise MetricFailure(
                    reason, f"failed to get {name} utilization: {error}", outer
                ) from None
            kind = "container resource" if container_source else "resource"
            label = f"{name} {kind} utilization (percentage of request)"
            current = MetricValueStatus(
                average_value=_milli_quantity(proposal.usage),
                average_utilization=proposal.utilization,
            )
        if container_source is not None:
            status = MetricStatus(
                type=v2.CONTAINER_RESOURCE,
                container_resource=v2.ContainerResourceMetricStatus(
                    name=name, current=current, container=container
                ),
            )
        else:
            status = MetricStatus(
                type=v2.RESOURCE, resource=v2.ResourceMetricStatus(name=name, current=current)
            )
        return MetricResult(proposal.replicas, label, status, proposal.timestamp)

    async def _pods_metric(
        self, scope: Scope, source: v2.PodsMetricSource, spec_replicas: int
    ) -> MetricResult:
        identifier = source.metric or v2.MetricIdentifier()
        target = source.target or MetricTarget()
        try:
            proposal = await self.calculator.metric_replicas(
                scope,
                spec_replicas,
                milli(target.average_value),
                identifier.name or "",
                metric_selector(identifier.selector),
            )
        except (MetricsError, SelectorError) as error:
            raise MetricFailure(
                "FailedGetPodsMetric", str(error), "failed to get pods metric value"
            ) from None
        status = MetricStatus(
            type=v2.PODS,
            pods=v2.PodsMetricStatus(
                metric=identifier,
                current=MetricValueStatus(average_value=_milli_quantity(proposal.usage)),
            ),
        )
        return MetricResult(
            proposal.replicas, f"pods metric {identifier.name}", status, proposal.timestamp
        )

    async def _object_metric(
        self,
        scope: Scope,
        source: v2.ObjectMetricSource,
        spec_replicas: int,
        status_replicas: int,
    ) -> MetricResult:
        identifier = source.metric or v2.MetricIdentifier()
        target = source.target or MetricTarget()
        described = source.described_object or v2.CrossVersionObjectReference()
        name = identifier.name or ""
        outer = "failed to get object metric value"
        try:
            if target.type == v2.VALUE and target.value is not None:
                value = ValueTarget(spec_replicas, milli(target.value), per_pod=False)
                label = f"{described.kind} metric {name}"
            elif target.type == v2.AVERAGE_VALUE and target.average_value is not None:
                value = ValueTarget(status_replicas, milli(target.average_value), per_pod=True)
                label = f"external metric {name}({go_label_selector(identifier.selector)})"
                outer += f": failed to get {name} object metric"
            else:
                raise MetricsError(
                    "invalid object metric source: neither a value target nor an average value "
                    "target was set"
                )
            proposal = await self.calculator.object_replicas(
                scope, value, name, described, metric_selector(identifier.selector)
            )
        except (MetricsError, SelectorError) as error:
            raise MetricFailure("FailedGetObjectMetric", str(error), outer) from None
        status = MetricStatus(
            type=v2.OBJECT,
            object=v2.ObjectMetricStatus(
                metric=identifier,
                current=_value_status(value, proposal.usage),
                described_object=described,
            ),
        )
        return MetricResult(proposal.replicas, label, status, proposal.timestamp)

    async def _external_metric(
        self,
        scope: Scope,
        source: v2.ExternalMetricSource,
        spec_replicas: int,
        status_replicas: int,
    ) -> MetricResult:
        identifier = source.metric or v2.MetricIdentifier()
        target = source.target or MetricTarget()
        name = identifier.name or ""
        outer = f"failed to get {name} external metric value"
        try:
            if target.average_value is not None:
                value = ValueTarget(status_replicas, milli(target.average_value), per_pod=True)
                outer += f": failed to get {name} external metric"
            elif target.value is not None:
                value = ValueTarget(spec_replicas, milli(target.value), per_pod=False)
                outer += f": failed to get external metric {name}"
            else:
                raise MetricsError(
                    "invalid external metric source: neither a value target nor an average "
                    "value target was set"
                )
            proposal = await self.calculator.external_replicas(
                scope, value, name, identifier.selector
            )
        except (MetricsError, SelectorError) as error:
            raise MetricFailure("FailedGetExternalMetric", str(error), outer) from None
        status = MetricStatus(
            type=v2.EXTERNAL,
            external=v2.ExternalMetricStatus(
                metric=identifier, current=_value_status(value, proposal.usage)
            ),
        )
        label = f"external metric {name}({go_label_selector(identifier.selector)})"
        return MetricResult(proposal.replicas, label, status, proposal.timestamp)

    # The API.

    async def _get_scale(self, resource: APIResource, namespace: str, name: str) -> Scale:
        informer = self.workloads.get(resource.path)
        cached = informer.lister.get(f"{namespace}/{name}") if informer is not None else None
        if cached is not None:
            return workload_scale(cached)
        data = await self.ctx.client.request("GET", resource.path.url(namespace, name, "scale"))
        return codec.decode_json(data, Scale).obj

    async def _update_scale(self, resource: APIResource, scale: Scale, replicas: int) -> None:
        """Write ``replicas`` through the scale subresource, guarded by the scale's
        resourceVersion."""
        updated = copy.deepcopy(scale)
        updated.spec = ScaleSpec(replicas=replicas)
        url = resource.path.url(scale.metadata.namespace, scale.metadata.name, "scale")
        await self.ctx.client.request("PUT", url, body=codec.encode_json(updated.typed()))

    @staticmethod
    def _set_status(
        status: HorizontalPodAutoscalerStatus,
        current: int,
        desired: int,
        metrics: list[MetricStatus] | None,
    ) -> None:
        status.current_replicas = current
        status.desired_replicas = desired
        status.current_metrics = metrics or None

    async def _update_status_if_needed(
        self, original: HorizontalPodAutoscalerStatus | None, hpa: HorizontalPodAutoscaler
    ) -> None:
        if hpa.status == original:
            return
        try:
            await self.ctx.client.update_status(hpa)
        except (ApiError, ClientError) as error:
            text = error_text(error)
            self.ctx.recorder.event(hpa, WARNING, "FailedUpdateStatus", text)
            raise ReconcileError(
                f"failed to update status for {hpa.metadata.name}: {text}"
            ) from None


def new(ctx: ControllerContext) -> HorizontalController:
    return HorizontalController(ctx)
