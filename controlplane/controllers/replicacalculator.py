"""How many replicas one metric asks for: upstream's ``replica_calculator.go``, rule for rule.

The core is a usage ratio, the current value over the target.  Within the tolerance of 1 (10%
by default, per direction when an HPA's ``behavior`` sets its own) nothing changes; otherwise
the ratio times the number of pods, rounded up.  Per-pod metrics (Resource, ContainerResource,
Pods) first sort the pods the selector matches:

* deleted or failed pods are ignored, pending ones count as unready;
* a pod without a metric is *missing*;
* for CPU only, a pod is *unready* when it is not Ready or has no start time, or, within the
  CPU initialization period (5 min) after its start, when it is not Ready or its metric was
  read less than one window after its readiness last changed, or, later, when it is not Ready
  and never was since the initial readiness delay (30 s) after it started;
* the rest are ready, and the first ratio is computed over them.

With no missing pods and no unready pods on a scale-up, the ratio decides.  Otherwise the
missing pods are counted as using 100% of their request (or the target, if above 100%) on a
scale-down and 0% on a scale-up, unready pods as 0% on a scale-up, and the ratio is computed
again; if the new ratio is within the tolerance, or points the other way, or the new count
would move against the ratio, nothing changes.  This keeps a half-reporting fleet from being
scaled on guesses.

Object and External metrics compare one value to a target (``Value``: the ratio times the ready
pods; ``AverageValue``: the value over the target per pod).  All values are in thousandths of
their unit, as upstream's.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from dataclasses import dataclass

from controlplane.controllers.endpointutil import is_pod_ready
from controlplane.controllers.hpametrics import (
    MetricsClient,
    MetricsError,
    PodMetric,
    PodMetricsInfo,
    milli,
)
from kube.api.kinds.autoscaling_v2 import CrossVersionObjectReference
from kube.api.kinds.core_v1.pod import Pod, PodSpec
from kube.api.labels import Selector
from kube.api.meta_v1 import LabelSelector

CPU = "cpu"
NO_PODS = "no pods returned by selector while calculating replica count"


@dataclass(frozen=True)
class Tolerances:
    """How far below (``down``) and above (``up``) 1 a usage ratio may be without a change."""

    down: float
    up: float

    def within(self, ratio: float) -> bool:
        return 1.0 - self.down <= ratio <= 1.0 + self.up


@dataclass(frozen=True)
class Scope:
    """What every metric of one HPA is read within: its namespace, the selector of its
    target's pods, its tolerances."""

    namespace: str
    selector: Selector
    tolerances: Tolerances


@dataclass(frozen=True)
class ValueTarget:
    """An Object or External metric's target: ``amount`` (thousandths) in all (``Value``,
    against the scale's desired ``replicas``) or per pod (``AverageValue``, against its
    current ``replicas``)."""

    replicas: int
    amount: int
    per_pod: bool


@dataclass(frozen=True)
class Proposal:
    """A metric's replica count, its current value (thousandths), when it was read, and for
    utilization targets the current utilization (percent)."""

    replicas: int
    usage: int
    timestamp: datetime.datetime
    utilization: int | None = None


def go_label_selector(selector: LabelSelector | None) -> str:
    """A LabelSelector as Go's ``%+v`` prints one (upstream's external metric names show it)."""
    if selector is None:
        return "nil"
    labels = "".join(f"{k}: {v}," for k, v in sorted((selector.match_labels or {}).items()))
    expressions = "".join(
        f"LabelSelectorRequirement{{Key:{e.key or ''},Operator:{e.operator or ''},"
        f"Values:[{' '.join(e.values or [])}],}},"
        for e in selector.match_expressions or []
    )
    return (
        f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
        f"MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )


def metric_selector(selector: LabelSelector | None) -> Selector:
    """A metric's selector; none selects every series.  Raises SelectorError."""
    if selector is None:
        return Selector.everything()
    return Selector.from_label_selector(selector.match_labels, selector.match_expressions)


def pod_requests(pods: list[Pod], resource: str, container: str) -> dict[str, int]:
    """Each pod's request of ``resource`` in thousandths (upstream's ``calculateRequests``)."""
    return {pod.metadata.name or "": pod_request(pod, resource, container) for pod in pods}


def pod_request(pod: Pod, resource: str, container: str) -> int:
    """One container's request, or the pod-level one when the pod sets pod-level resources,
    or else the sum over its containers and sidecars; a container without a request is an
    error, as upstream's."""
    name = pod.metadata.name
    spec = pod.spec or PodSpec()
    pod_level = spec.resources
    if not container and pod_level is not None and (pod_level.requests or pod_level.limits):
        request = (pod_level.requests or {}).get(resource)
        if request is None:
            raise MetricsError(f"missing pod-level request for {resource} in Pod {name}")
        return milli(request)
    containers = [
        *(spec.containers or []),
        *(c for c in spec.init_containers or [] if c.is_sidecar()),
    ]
    total = 0
    for c in containers:
        if container and c.name != container:
            continue
        request = ((c.resources.requests if c.resources else None) or {}).get(resource)
        if request is None:
            raise MetricsError(
                f"missing request for {resource} in container {c.name} of Pod {name}"
            )
        if container:
            return milli(request)
        total += milli(request)
    if container:
        raise MetricsError(f"container {container} not found in Pod {name}")
    return total


def utilization_ratio(
    metrics: PodMetricsInfo, requests: dict[str, int], target: int
) -> tuple[float, int, int]:
    """The ratio of utilization to ``target`` (percent), the average raw value and the
    utilization, over the pods that have both a metric and a request."""
    used = requested = counted = 0
    for name, metric in metrics.items():
        if name in requests:
            used += metric.value
            requested += requests[name]
            counted += 1
    if requested == 0:
        raise MetricsError("no metrics returned matched known pods")
    utilization = used * 100 // requested
    return utilization / target, used // counted, utilization


def usage_ratio(metrics: PodMetricsInfo, target: int) -> tuple[float, int]:
    """The ratio of the pods' average value to ``target``, and that average."""
    average = sum(metric.value for metric in metrics.values()) // len(metrics)
    return average / target, average


@dataclass
class PodGroups:
    """The pods a selector matches, sorted as upstream's ``groupPods``."""

    ready: int
    unready: set[str]
    missing: set[str]
    ignored: set[str]


def _ready_condition_change(pod: Pod) -> tuple[bool, datetime.datetime | None] | None:
    """The Ready condition: whether True and when it last changed; None without one."""
    for condition in (pod.status.conditions if pod.status else None) or ():
        if condition.type == "Ready":
            return condition.status == "True", condition.last_transition_time
    return None


def _unready_cpu(
    pod: Pod,
    metric: PodMetric,
    now: datetime.datetime,
    cpu_initialization_period: float,
    initial_readiness_delay: float,
) -> bool:
    ready = _ready_condition_change(pod)
    started = pod.status.start_time if pod.status else None
    if ready is None or started is None:
        return True
    is_ready, changed = ready
    changed = changed or started
    if started + datetime.timedelta(seconds=cpu_initialization_period) > now:
        window = datetime.timedelta(seconds=metric.window)
        return not is_ready or metric.timestamp < changed + window
    delay = datetime.timedelta(seconds=initial_readiness_delay)
    return not is_ready and started + delay > changed


@dataclass(frozen=True)
class ReplicaCalculator:
    """The replica count each kind of metric proposes, from the metrics client and the pods
    in the informer cache (``pods(namespace, selector)``)."""

    metrics: MetricsClient
    pods: Callable[[str, Selector], list[Pod]]
    now: Callable[[], datetime.datetime]
    cpu_initialization_period: float
    """Seconds after a pod's start during which its CPU samples may be skipped (see
    ``group_pods``)."""
    initial_readiness_delay: float

    def group_pods(self, pods: list[Pod], metrics: PodMetricsInfo, resource: str) -> PodGroups:
        groups = PodGroups(0, set(), set(), set())
        now = self.now()
        for pod in pods:
            name = pod.metadata.name or ""
            phase = pod.status.phase if pod.status else None
            if pod.metadata.deletion_timestamp is not None or phase == "Failed":
                groups.ignored.add(name)
            elif phase == "Pending":
                groups.unready.add(name)
            elif name not in metrics:
                groups.missing.add(name)
            elif resource == CPU and _unready_cpu(
                pod,
                metrics[name],
                now,
                self.cpu_initialization_period,
                self.initial_readiness_delay,
            ):
                groups.unready.add(name)
            else:
                groups.ready += 1
        return groups

    def _pods(self, scope: Scope) -> list[Pod]:
        pods = self.pods(scope.namespace, scope.selector)
        if not pods:
            raise MetricsError(NO_PODS)
        return pods

    async def resource_replicas(
        self, scope: Scope, current: int, target_utilization: int, resource: str, container: str
    ) -> Proposal:
        """Upstream's ``GetResourceReplicas``: a Utilization target (percent of requests);
        a missing pod is taken to use all its request (or the target, if above) on a
        scale-down."""
        metrics, timestamp = await self._resource_metric(scope, resource, container)
        pods = self._pods(scope)
        requests = pod_requests(pods, resource, container)
        fallback = max(100, target_utilization)
        return self._counted(
            scope,
            metrics,
            pods,
            resource,
            current,
            lambda found: utilization_ratio(found, requests, target_utilization),
            lambda name: requests.get(name, 0) * fallback // 100,
            timestamp,
        )

    async def raw_resource_replicas(
        self, scope: Scope, current: int, target: int, resource: str, container: str
    ) -> Proposal:
        """Upstream's ``GetRawResourceReplicas``: an AverageValue target of a resource."""
        metrics, timestamp = await self._resource_metric(scope, resource, container)
        return self._plain(scope, metrics, current, target, resource, timestamp)

    async def metric_replicas(
        self, scope: Scope, current: int, target: int, name: str, metric_selector: Selector
    ) -> Proposal:
        """Upstream's ``GetMetricReplicas``: a Pods metric's AverageValue target."""
        try:
            metrics, timestamp = await self.metrics.raw_metric(
                name, scope.namespace, scope.selector, metric_selector
            )
        except MetricsError as error:
            raise MetricsError(f"unable to get metric {name}: {error}") from None
        return self._plain(scope, metrics, current, target, "", timestamp)

    def _plain(
        self,
        scope: Scope,
        metrics: PodMetricsInfo,
        current: int,
        target: int,
        resource: str,
        timestamp: datetime.datetime,
    ) -> Proposal:
        """Upstream's ``calcPlainMetricReplicas``: averages against an average, no requests;
        a missing pod is taken to be at the target on a scale-down."""

        def ratio(found: PodMetricsInfo) -> tuple[float, int, int | None]:
            value, average = usage_ratio(found, target)
            return value, average, None

        pods = self._pods(scope)
        return self._counted(
            scope, metrics, pods, resource, current, ratio, lambda _: target, timestamp
        )

    def _counted(
        self,
        scope: Scope,
        metrics: PodMetricsInfo,
        pods: list[Pod],
        resource: str,
        current: int,
        ratio_of: Callable[[PodMetricsInfo], tuple[float, int, int | None]],
        assumed_on_scale_down: Callable[[str], int],
        timestamp: datetime.datetime,
    ) -> Proposal:
        """The count for per-pod values, with the missing- and unready-pod rules (see the
        module); ``ratio_of`` gives the usage ratio, the value and the utilization."""
        groups = self.group_pods(pods, metrics, resource)
        metrics = {
            name: metric
            for name, metric in metrics.items()
            if name not in groups.ignored and name not in groups.unready
        }
        if not metrics:
            raise MetricsError("did not receive metrics for targeted pods (pods might be unready)")
        ratio, usage, utilization = ratio_of(metrics)

        def proposal(replicas: int) -> Proposal:
            return Proposal(replicas, usage, timestamp, utilization)

        tolerances = scope.tolerances
        scale_up_with_unready = bool(groups.unready) and ratio > 1.0
        if not scale_up_with_unready and not groups.missing:
            return proposal(
                current if tolerances.within(ratio) else math.ceil(ratio * groups.ready)
            )
        assumed = {name: 0 for name in groups.unready} if scale_up_with_unready else {}
        if ratio < 1.0:
            assumed |= {name: assumed_on_scale_down(name) for name in groups.missing}
        elif ratio > 1.0:
            assumed |= {name: 0 for name in groups.missing}
        metrics |= {name: PodMetric(value, timestamp, 0.0) for name, value in assumed.items()}
        new_ratio = ratio_of(metrics)[0]
        return proposal(_settled(current, ratio, new_ratio, len(metrics), tolerances))

    def ready_pods(self, scope: Scope) -> int:
        """Running and Ready pods the selector matches (upstream's ``getReadyPodsCount``)."""
        return sum(
            1
            for pod in self._pods(scope)
            if pod.status is not None and pod.status.phase == "Running" and is_pod_ready(pod)
        )

    def _value_proposal(
        self,
        scope: Scope,
        target: ValueTarget,
        usage: int,
        timestamp: datetime.datetime,
    ) -> Proposal:
        """One value against a target: upstream's ``getUsageRatioReplicaCount`` for a Value
        (the ratio times the ready pods; from zero replicas, the ratio), the
        ``Get*PerPodMetricReplicas`` rule for an AverageValue (the value over the target)."""
        replicas, tolerances = target.replicas, scope.tolerances
        if target.per_pod:
            ratio = usage / (target.amount * replicas) if replicas else math.inf
            if not tolerances.within(ratio):
                replicas = math.ceil(usage / target.amount)
            average = math.ceil(usage / target.replicas) if target.replicas else usage
            return Proposal(replicas, average, timestamp)
        ratio = usage / target.amount
        if replicas == 0:
            replicas = math.ceil(ratio)
        elif not tolerances.within(ratio):
            try:
                replicas = math.ceil(ratio * self.ready_pods(scope))
            except MetricsError as error:
                raise MetricsError(f"unable to calculate ready pods: {error}") from None
        return Proposal(replicas, usage, timestamp)

    async def object_replicas(
        self,
        scope: Scope,
        target: ValueTarget,
        name: str,
        described: CrossVersionObjectReference,
        metric_selector: Selector,
    ) -> Proposal:
        """Upstream's ``GetObjectMetricReplicas`` and ``GetObjectPerPodMetricReplicas``."""
        try:
            usage, timestamp = await self.metrics.object_metric(
                name, scope.namespace, described, metric_selector
            )
        except MetricsError as error:
            raise MetricsError(
                f"unable to get metric {name}: {described.kind} on {scope.namespace} "
                f"{described.name}/{error}"
            ) from None
        return self._value_proposal(scope, target, usage, timestamp)

    async def external_replicas(
        self, scope: Scope, target: ValueTarget, name: str, selector: LabelSelector | None
    ) -> Proposal:
        """Upstream's ``GetExternalMetricReplicas`` and ``GetExternalPerPodMetricReplicas``:
        the values of the series ``selector`` picks, summed.  Raises SelectorError too."""
        try:
            values, timestamp = await self.metrics.external_metric(
                name, scope.namespace, metric_selector(selector)
            )
        except MetricsError as error:
            raise MetricsError(
                f"unable to get external metric {scope.namespace}/{name}/"
                f"{go_label_selector(selector)}: {error}"
            ) from None
        return self._value_proposal(scope, target, sum(values), timestamp)

    async def _resource_metric(
        self, scope: Scope, resource: str, container: str
    ) -> tuple[PodMetricsInfo, datetime.datetime]:
        try:
            return await self.metrics.resource_metric(
                resource, scope.namespace, scope.selector, container
            )
        except MetricsError as error:
            raise MetricsError(f"unable to get metrics for resource {resource}: {error}") from None


def _settled(
    current: int, ratio: float, new_ratio: float, counted: int, tolerances: Tolerances
) -> int:
    """The count after missing and unready pods were filled in: the current one when the
    new ratio is within tolerance, turns the direction around, or the new count would."""
    if tolerances.within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current
    replicas = math.ceil(new_ratio * counted)
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return current
    return replicas
