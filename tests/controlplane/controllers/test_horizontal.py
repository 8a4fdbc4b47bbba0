"""The horizontal pod autoscaler controller, with fake metrics, a fake API serving the target's
scale subresource and a fake clock: the rules of upstream's horizontal.go and of the
kubernetes.io HPA pages (the algorithm, the walkthrough, the behavior examples), with the
conditions, events and status upstream writes."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import pytest

from controlplane.controllers.context import AutoscalerOptions, ControllerOptions
from controlplane.controllers.horizontal import HorizontalController
from kube.api import codec
from kube.api.kinds.apps_v1 import Deployment, DeploymentSpec, DeploymentStatus
from kube.api.kinds.autoscaling_v1 import Scale, ScaleStatus
from kube.api.kinds.autoscaling_v2 import (
    ContainerResourceMetricSource,
    ContainerResourceMetricStatus,
    CrossVersionObjectReference,
    ExternalMetricSource,
    HorizontalPodAutoscaler,
    HorizontalPodAutoscalerBehavior,
    HorizontalPodAutoscalerSpec,
    HorizontalPodAutoscalerStatus,
    HPAScalingPolicy,
    HPAScalingRules,
    MetricIdentifier,
    MetricSpec,
    MetricStatus,
    MetricTarget,
    MetricValueStatus,
    ObjectMetricSource,
    ObjectMetricStatus,
    PodsMetricSource,
    PodsMetricStatus,
    ResourceMetricStatus,
    cpu_utilization_metric,
)
from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from kube.api.walk import set_defaults
from tests.controlplane.controllers.fakes import Harness, harness, stamp
from tests.controlplane.controllers.hpafixtures import (
    NAMESPACE,
    FakeMetrics,
    ScaleTarget,
    condition,
    pod,
)

KEY = f"{NAMESPACE}/web"
CPU_ABOVE = "New size: {}; reason: cpu resource utilization (percentage of request) above target"
VALID_CPU = (
    "True",
    "ValidMetricFound",
    "the HPA was able to successfully calculate a replica count from cpu resource utilization "
    "(percentage of request)",
)

QUEUE = MetricSpec(
    type="External",
    external=ExternalMetricSource(
        metric=MetricIdentifier(name="queue_messages"),
        target=MetricTarget(type="AverageValue", average_value="30"),
    ),
)
"""An External metric: 30 messages a pod of the queue."""


def autoscaler(
    *,
    minimum: int = 1,
    maximum: int = 10,
    metrics: list[MetricSpec] | None = None,
    behavior: HorizontalPodAutoscalerBehavior | None = None,
) -> HorizontalPodAutoscaler:
    """``kubectl autoscale deployment web --cpu-percent=50 --min=1 --max=10``, as stored."""
    hpa = HorizontalPodAutoscaler(
        metadata=ObjectMeta(name="web", namespace=NAMESPACE),
        spec=HorizontalPodAutoscalerSpec(
            scale_target_ref=CrossVersionObjectReference(
                kind="Deployment", name="web", api_version="apps/v1"
            ),
            min_replicas=minimum,
            max_replicas=maximum,
            metrics=metrics or [cpu_utilization_metric(50)],
            behavior=behavior,
        ),
    )
    set_defaults(hpa)
    return stamp(hpa)


@dataclass
class Rig:
    h: Harness
    metrics: FakeMetrics
    target: ScaleTarget
    controller: HorizontalController

    async def sync(self) -> HorizontalPodAutoscalerStatus:
        """One sync; the HPA's status as stored after it (the cache follows, as the informer
        would)."""
        await self.controller.sync(KEY)
        stored = self.h.client.stored(HorizontalPodAutoscaler, "web", NAMESPACE)
        self.h.cache(stored)
        assert stored.status is not None
        return stored.status

    def cpu(self, **usage: int) -> None:
        """Each pod's CPU use, in millicores."""
        self.metrics.resources["cpu"] = dict(usage)

    def pods(self, *pods: Pod) -> None:
        for old in self.h.ctx.informers.informer_for(Pod).lister.list(NAMESPACE):
            self.h.uncache(old)
        self.h.cache(*pods)

    async def advance(self, seconds: float) -> None:
        await self.h.clock.advance(seconds)
        self.metrics.timestamp = self.h.clock.now()

    def events(self) -> list[tuple[str, str, str]]:
        return [(type, reason, message) for type, reason, message, _ in self.h.recorder.events]


def rig(
    replicas: int,
    hpa: HorizontalPodAutoscaler,
    *pods: Pod,
    options: AutoscalerOptions | None = None,
) -> Rig:
    h = harness(ControllerOptions(autoscaler=options or AutoscalerOptions()))
    metrics = FakeMetrics(timestamp=h.clock.now())
    target = ScaleTarget(replicas)
    target.serve(h.client)
    controller = HorizontalController(h.ctx, metrics)
    # Syncs requeue themselves after the sync period; tests call sync themselves.
    controller.queue.shutdown()
    h.store(hpa)
    h.cache(*pods)
    return Rig(h, metrics, target, controller)


def cpu_status(utilization: int, average: str) -> list[MetricStatus]:
    return [
        MetricStatus(
            type="Resource",
            resource=ResourceMetricStatus(
                name="cpu",
                current=MetricValueStatus(average_value=average, average_utilization=utilization),
            ),
        )
    ]


async def test_walkthrough_scales_up_on_cpu_and_reports_it() -> None:
    """The walkthrough's php-apache: one pod requesting 200m uses 610m (305% of its request,
    target 50%): 7 wanted, 4 allowed at once (twice the current count, at least 4)."""
    r = rig(1, autoscaler(), pod("web-1", cpu="200m"))
    r.cpu(**{"web-1": 610})
    status = await r.sync()
    assert r.target.puts == [4]
    assert status.current_replicas == 1
    assert status.desired_replicas == 4
    assert status.last_scale_time == r.h.clock.now()
    assert status.current_metrics == cpu_status(305, "610m")
    assert condition(status, "AbleToScale") == (
        "True",
        "SucceededRescale",
        "the HPA controller was able to update the target scale to 4",
    )
    assert condition(status, "ScalingActive") == VALID_CPU
    assert condition(status, "ScalingLimited") == (
        "True",
        "ScaleUpLimit",
        "the desired replica count is increasing faster than the maximum scale rate",
    )
    assert r.events() == [("Normal", "SuccessfulRescale", CPU_ABOVE.format(4))]


async def test_within_tolerance_nothing_changes() -> None:
    """A ratio of 1.08 is within the 10% tolerance: the count stays and the status says so."""
    r = rig(2, autoscaler(), pod("web-1"), pod("web-2"))
    r.cpu(**{"web-1": 540, "web-2": 540})
    status = await r.sync()
    assert r.target.puts == []
    assert status.desired_replicas == 2
    assert status.last_scale_time is None
    assert status.current_metrics == cpu_status(54, "540m")
    assert condition(status, "AbleToScale") == (
        "True",
        "ReadyForNewScale",
        "recommended size matches current size",
    )
    assert condition(status, "ScalingLimited") == (
        "False",
        "DesiredWithinRange",
        "the desired count is within the acceptable range",
    )
    assert r.events() == []


@pytest.mark.parametrize(
    ("tolerance", "expected"),
    [pytest.param(0.1, [], id="default-10pct"), pytest.param(0.05, [3], id="own-5pct")],
)
async def test_tolerance_per_hpa(tolerance: float, expected: list[int]) -> None:
    """An HPA's own ``behavior.scaleUp.tolerance`` replaces the cluster-wide 10%."""
    behavior = HorizontalPodAutoscalerBehavior(scale_up=HPAScalingRules(tolerance=str(tolerance)))
    r = rig(2, autoscaler(behavior=behavior), pod("web-1"), pod("web-2"))
    r.cpu(**{"web-1": 540, "web-2": 540})
    await r.sync()
    assert r.target.puts == expected


async def test_scale_down_waits_out_the_stabilization_window() -> None:
    """Without behavior, a scale-down takes the highest recommendation of the last 5 minutes:
    the load goes, the count stays (ScaleDownStabilized) until the window has passed."""
    r = rig(4, autoscaler(), *(pod(f"web-{i}") for i in range(4)))
    r.cpu(**{f"web-{i}": 500 for i in range(4)})
    status = await r.sync()
    assert r.target.puts == []
    r.cpu(**{f"web-{i}": 100 for i in range(4)})
    for _ in range(19):
        await r.advance(15)
        status = await r.sync()
        assert r.target.puts == []
    assert condition(status, "AbleToScale") == (
        "True",
        "ScaleDownStabilized",
        "recent recommendations were higher than current one, applying the highest recent "
        "recommendation",
    )
    await r.advance(30)
    status = await r.sync()
    assert r.target.puts == [1]
    assert r.events()[-1] == (
        "Normal",
        "SuccessfulRescale",
        "New size: 1; reason: All metrics below target",
    )
    assert status.desired_replicas == 1


async def test_downscale_stabilization_flag() -> None:
    r = rig(
        4,
        autoscaler(),
        *(pod(f"web-{i}") for i in range(4)),
        options=AutoscalerOptions(downscale_stabilization=60),
    )
    r.cpu(**{f"web-{i}": 100 for i in range(4)})
    await r.sync()
    assert r.target.puts == []
    await r.advance(61)
    await r.sync()
    assert r.target.puts == [1]


async def test_scale_up_policies_limit_the_rate() -> None:
    """The docs' example: ``scaleUp`` of at most 1 pod a minute: +1, then nothing until the
    minute has passed since that scale event, then +1 again."""
    behavior = HorizontalPodAutoscalerBehavior(
        scale_up=HPAScalingRules(
            policies=[HPAScalingPolicy(type="Pods", value=1, period_seconds=60)]
        )
    )
    hpa = autoscaler(behavior=behavior)
    r = rig(2, hpa, pod("web-1"), pod("web-2"))
    r.cpu(**{"web-1": 1000, "web-2": 1000})
    status = await r.sync()
    assert r.target.puts == [3]
    assert condition(status, "ScalingLimited")[1] == "ScaleUpLimit"
    r.pods(pod("web-1"), pod("web-2"), pod("web-3"))
    r.cpu(**{"web-1": 1000, "web-2": 1000, "web-3": 1000})
    await r.advance(15)
    status = await r.sync()
    assert r.target.puts == [3]
    assert condition(status, "ScalingLimited") == (
        "True",
        "ScaleUpLimit",
        "the desired replica count is increasing faster than the maximum scale rate",
    )
    await r.advance(46)
    await r.sync()
    assert r.target.puts == [3, 4]


async def test_select_policy_min_and_max() -> None:
    """Two scale-down policies (4 pods or 10% a minute): Max takes the bigger change, Min
    the smaller; stabilization 0 so the limit alone decides."""

    def rules(select: str) -> HorizontalPodAutoscalerBehavior:
        return HorizontalPodAutoscalerBehavior(
            scale_down=HPAScalingRules(
                stabilization_window_seconds=0,
                select_policy=select,
                policies=[
                    HPAScalingPolicy(type="Pods", value=4, period_seconds=60),
                    HPAScalingPolicy(type="Percent", value=10, period_seconds=60),
                ],
            )
        )

    pods = [pod(f"web-{i}") for i in range(20)]
    for select, expected in (("Max", 16), ("Min", 18)):
        r = rig(20, autoscaler(maximum=30, behavior=rules(select)), *pods)
        r.cpu(**{f"web-{i}": 50 for i in range(20)})
        status = await r.sync()
        assert r.target.puts == [expected], select
        assert condition(status, "ScalingLimited")[1] == "ScaleDownLimit"


async def test_disabled_scale_down_never_scales_down() -> None:
    behavior = HorizontalPodAutoscalerBehavior(
        scale_down=HPAScalingRules(select_policy="Disabled", stabilization_window_seconds=0)
    )
    r = rig(4, autoscaler(behavior=behavior), *(pod(f"web-{i}") for i in range(4)))
    r.cpu(**{f"web-{i}": 10 for i in range(4)})
    await r.sync()
    await r.advance(600)
    status = await r.sync()
    assert r.target.puts == []
    assert status.desired_replicas == 4


async def test_scale_up_stabilization_window() -> None:
    """A scale-up window takes the lowest recommendation of the window: one spike does not
    scale up, a spike that lasts the window does."""
    behavior = HorizontalPodAutoscalerBehavior(
        scale_up=HPAScalingRules(stabilization_window_seconds=60)
    )
    r = rig(2, autoscaler(behavior=behavior), pod("web-1"), pod("web-2"))
    r.cpu(**{"web-1": 500, "web-2": 500})
    await r.sync()
    r.cpu(**{"web-1": 1000, "web-2": 1000})
    await r.advance(15)
    status = await r.sync()
    assert r.target.puts == []
    assert condition(status, "AbleToScale")[1] == "ScaleUpStabilized"
    for _ in range(4):
        await r.advance(15)
        await r.sync()
    assert r.target.puts == [4]


async def test_missing_metrics_count_as_zero_on_scale_up() -> None:
    """Three pods, one without a metric: the others at 100% of a 50% target would double,
    but the missing one counts as 0%, so 66% over 3 pods: 4."""
    r = rig(3, autoscaler(), pod("web-1"), pod("web-2"), pod("web-3"))
    r.cpu(**{"web-1": 1000, "web-2": 1000})
    status = await r.sync()
    assert r.target.puts == [4]
    assert status.current_metrics == cpu_status(100, "1")


async def test_missing_metrics_count_as_full_on_scale_down() -> None:
    """On a scale-down a pod without a metric counts as using all its request: 2 pods at 10%
    and one missing at 100%, of a 50% target, is 40% over 3 pods, which rounds up to the 3
    there are: nothing changes (on the two reporting pods alone it would be 1)."""
    behavior = HorizontalPodAutoscalerBehavior(
        scale_down=HPAScalingRules(stabilization_window_seconds=0)
    )
    r = rig(3, autoscaler(behavior=behavior), pod("web-1"), pod("web-2"), pod("web-3"))
    r.cpu(**{"web-1": 100, "web-2": 100})
    await r.sync()
    assert r.target.puts == []


async def test_unready_pods_are_left_out_of_a_scale_up() -> None:
    """A pod not yet Ready within the CPU initialization period counts as 0% on a scale-up:
    one pod at 150% and one unready, of a 50% target, is 75% over 2 pods: 3 (on both at
    150%, 6)."""
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    r = rig(
        2,
        autoscaler(),
        pod("web-1"),
        pod("web-2", ready=False, started=now - datetime.timedelta(seconds=20), ready_since=now),
    )
    r.cpu(**{"web-1": 1500, "web-2": 1500})
    await r.sync()
    assert r.target.puts == [3]


async def test_failing_metrics_are_reported_and_nothing_scales() -> None:
    r = rig(2, autoscaler(), pod("web-1"), pod("web-2"))
    r.metrics.error = "unable to fetch metrics from resource metrics API: the server is down"
    status = await r.sync()
    assert r.target.puts == []
    inner = (
        "failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch "
        "metrics from resource metrics API: the server is down"
    )
    assert condition(status, "ScalingActive") == (
        "False",
        "FailedGetResourceMetric",
        f"the HPA was unable to compute the replica count: {inner}",
    )
    assert status.current_replicas == 2
    assert status.current_metrics == [MetricStatus(type="")]
    assert r.events() == [
        ("Warning", "FailedGetResourceMetric", inner),
        (
            "Warning",
            "FailedComputeMetricsReplicas",
            "invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource "
            f"metric value: {inner}",
        ),
    ]


async def test_one_failing_metric_still_allows_a_scale_up() -> None:
    """Of two metrics one fails: the other may still scale up (not down)."""
    r = rig(2, autoscaler(metrics=[cpu_utilization_metric(50), QUEUE]), pod("web-1"), pod("web-2"))
    r.cpu(**{"web-1": 1000, "web-2": 1000})
    status = await r.sync()
    assert r.target.puts == [4]
    assert condition(status, "ScalingActive") == VALID_CPU
    r.cpu(**{"web-1": 10, "web-2": 10})
    await r.advance(600)
    await r.sync()
    assert r.target.puts == [4]


async def test_the_largest_proposal_wins() -> None:
    r = rig(2, autoscaler(metrics=[cpu_utilization_metric(50), QUEUE]), pod("web-1"), pod("web-2"))
    r.cpu(**{"web-1": 500, "web-2": 500})
    r.metrics.external["queue_messages"] = [90_000, 30_000]
    status = await r.sync()
    assert r.target.puts == [4]
    assert r.events() == [
        (
            "Normal",
            "SuccessfulRescale",
            "New size: 4; reason: external metric queue_messages(nil) above target",
        )
    ]
    assert status.current_metrics is not None
    assert status.current_metrics[1].external is not None
    assert status.current_metrics[1].external.current == MetricValueStatus(average_value="60")


@pytest.mark.parametrize(
    ("replicas", "expected", "reason"),
    [
        pytest.param(12, 10, "Current number of replicas above Spec.MaxReplicas", id="above-max"),
        pytest.param(1, 2, "Current number of replicas below Spec.MinReplicas", id="below-min"),
    ],
)
async def test_bounds_are_enforced_first(replicas: int, expected: int, reason: str) -> None:
    r = rig(replicas, autoscaler(minimum=2))
    status = await r.sync()
    assert r.target.puts == [expected]
    assert r.events() == [
        ("Normal", "SuccessfulRescale", f"New size: {expected}; reason: {reason}")
    ]
    assert status.current_metrics is None


async def test_a_target_at_zero_is_left_alone() -> None:
    r = rig(0, autoscaler())
    status = await r.sync()
    assert r.target.puts == []
    assert condition(status, "ScalingActive") == (
        "False",
        "ScalingDisabled",
        "scaling is disabled since the replica count of the target is zero",
    )


async def test_a_cached_deployment_is_scaled_without_reading_its_scale() -> None:
    """The Deployment in the controller-manager's cache gives the scale (1 replica, while the
    API's scale still says 2); the write is guarded by the cached resourceVersion."""
    r = rig(2, autoscaler(), pod("web-1"))
    deployment = Deployment(
        metadata=ObjectMeta(name="web", namespace=NAMESPACE, resource_version="42"),
        spec=DeploymentSpec(replicas=1, selector=LabelSelector(match_labels={"app": "web"})),
        status=DeploymentStatus(replicas=1),
    )
    r.h.cache(deployment)
    r.cpu(**{"web-1": 2000})
    status = await r.sync()
    assert (status.current_replicas, status.desired_replicas) == (1, 4)
    scale_requests = [
        a.obj for a in r.h.client.reads if a.verb == "request" and a.obj.path == r.target.path
    ]
    assert [raw.method for raw in scale_requests] == ["PUT"]
    sent = codec.decode_json(scale_requests[0].body or b"", Scale).obj
    assert sent.metadata.resource_version == "42"
    assert sent.status == ScaleStatus(replicas=1, selector="app=web")
    assert r.target.puts == [4]


async def test_a_missing_target_fails_to_get_its_scale() -> None:
    r = rig(1, autoscaler())
    r.target.missing = True
    status = await r.sync()
    assert condition(status, "AbleToScale") == (
        "False",
        "FailedGetScale",
        'the HPA controller was unable to get the target\'s current scale: deployments.apps "web" '
        "not found",
    )
    assert r.events() == [("Warning", "FailedGetScale", 'deployments.apps "web" not found')]


async def test_a_refused_rescale_is_reported() -> None:
    r = rig(1, autoscaler(), pod("web-1"))
    r.cpu(**{"web-1": 2000})
    r.target.refuse = "the object has been modified"
    status = await r.sync()
    assert condition(status, "AbleToScale") == (
        "False",
        "FailedUpdateScale",
        "the HPA controller was unable to update the target scale: the object has been modified",
    )
    assert status.desired_replicas == 0
    assert r.events() == [
        (
            "Warning",
            "FailedRescale",
            "New size: 4; reason: cpu resource utilization (percentage of request) above target; "
            "error: the object has been modified",
        )
    ]


async def test_a_scale_without_selector_is_refused() -> None:
    r = rig(1, autoscaler(), pod("web-1"))
    r.target.selector = ""
    status = await r.sync()
    assert condition(status, "ScalingActive") == (
        "False",
        "InvalidSelector",
        "the HPA target's scale is missing a selector",
    )
    assert [reason for _, reason, _ in r.events()] == [
        "SelectorRequired",
        "FailedComputeMetricsReplicas",
    ]


async def test_an_unchanged_status_is_not_written_again() -> None:
    r = rig(2, autoscaler(), pod("web-1"), pod("web-2"))
    r.cpu(**{"web-1": 500, "web-2": 500})
    await r.sync()
    await r.sync()
    assert len(r.h.client.writes("update", "HorizontalPodAutoscaler")) == 1


async def test_each_sync_requeues_after_the_sync_period(monkeypatch: pytest.MonkeyPatch) -> None:
    r = rig(2, autoscaler(), options=AutoscalerOptions(sync_period=3))
    later: list[tuple[str, float]] = []
    monkeypatch.setattr(r.controller.queue, "add_after", lambda key, s: later.append((key, s)))
    r.metrics.error = "down"
    await r.sync()
    assert later == [(KEY, 3)]
    stored = r.h.client.stored(HorizontalPodAutoscaler, "web", NAMESPACE)
    newer = stamp(
        HorizontalPodAutoscaler(metadata=ObjectMeta(name="web", namespace=NAMESPACE)), rv="99"
    )
    r.controller._updated(stored, newer)
    assert later == [(KEY, 3), (KEY, 3)]


@pytest.mark.parametrize(
    ("period", "elapsed", "delay"),
    [(15, 0.3, 14.7), (15, 0.7, 15.3), (1, 2.2, 0.8), (0.5, 0.3, 0.5)],
)
async def test_periodic_syncs_end_on_whole_seconds(
    monkeypatch: pytest.MonkeyPatch, period: float, elapsed: float, delay: float
) -> None:
    """Syncs of many HPAs come together once a second instead of one by one; a period under
    a second is kept as it is."""
    r = rig(2, autoscaler(), options=AutoscalerOptions(sync_period=period))
    later: list[float] = []
    monkeypatch.setattr(r.controller.queue, "add_after", lambda key, s: later.append(s))
    await r.h.clock.advance(elapsed)
    r.metrics.error = "down"
    await r.sync()
    assert later == [pytest.approx(delay)]


async def test_two_hpas_on_the_same_pods_are_refused() -> None:
    """A second HPA on the same Deployment: both find the pods under two HPAs and scale
    nothing (upstream's AmbiguousSelector)."""
    r = rig(1, autoscaler(), pod("web-1"))
    r.cpu(**{"web-1": 2000})
    second = autoscaler()
    second.metadata.name = "web-2"
    r.h.store(second)
    await r.sync()
    assert r.target.puts == [4]
    await r.controller.sync(f"{NAMESPACE}/web-2")
    status = await r.sync()
    message = "pods by selector app=web are controlled by multiple HPAs: [team/web team/web-2]"
    assert condition(status, "ScalingActive") == ("False", "AmbiguousSelector", message)
    assert r.target.puts == [4]
    assert ("Warning", "AmbiguousSelector", message) in r.events()
    r.controller._deleted(second)
    status = await r.sync()
    assert condition(status, "ScalingActive") == VALID_CPU


async def test_container_resource_and_pods_metrics() -> None:
    """A ContainerResource metric reads one container of the pods; a Pods metric, a custom
    metric of each pod: statuses in the shape of their specs, the larger proposal wins."""
    container = MetricSpec(
        type="ContainerResource",
        container_resource=ContainerResourceMetricSource(
            name="cpu",
            container="app",
            target=MetricTarget(type="Utilization", average_utilization=50),
        ),
    )
    qps = MetricSpec(
        type="Pods",
        pods=PodsMetricSource(
            metric=MetricIdentifier(name="qps"),
            target=MetricTarget(type="AverageValue", average_value="10"),
        ),
    )
    r = rig(2, autoscaler(metrics=[container, qps]), pod("web-1"), pod("web-2"))
    r.cpu(**{"web-1": 750, "web-2": 750})
    r.metrics.pods["qps"] = {"web-1": 25_000, "web-2": 15_000}
    status = await r.sync()
    assert r.metrics.asked == [("cpu", "app"), ("qps", "")]
    assert r.target.puts == [4]
    assert status.current_metrics == [
        MetricStatus(
            type="ContainerResource",
            container_resource=ContainerResourceMetricStatus(
                name="cpu",
                container="app",
                current=MetricValueStatus(average_value="750m", average_utilization=75),
            ),
        ),
        MetricStatus(
            type="Pods",
            pods=PodsMetricStatus(
                metric=MetricIdentifier(name="qps"),
                current=MetricValueStatus(average_value="20"),
            ),
        ),
    ]
    assert r.events() == [
        ("Normal", "SuccessfulRescale", "New size: 4; reason: pods metric qps above target")
    ]


async def test_object_metric() -> None:
    """The docs' Ingress example: requests-per-second of one Ingress, a Value target of 10k,
    read at 25k with 2 ready pods: 5 wanted, 4 at once."""
    ingress = CrossVersionObjectReference(
        kind="Ingress", name="main-route", api_version="networking.k8s.io/v1"
    )
    spec = MetricSpec(
        type="Object",
        object=ObjectMetricSource(
            metric=MetricIdentifier(name="requests-per-second"),
            described_object=ingress,
            target=MetricTarget(type="Value", value="10k"),
        ),
    )
    r = rig(2, autoscaler(metrics=[spec]), pod("web-1"), pod("web-2"))
    r.metrics.objects["requests-per-second"] = 25_000_000
    status = await r.sync()
    assert r.target.puts == [4]
    assert status.current_metrics == [
        MetricStatus(
            type="Object",
            object=ObjectMetricStatus(
                metric=MetricIdentifier(name="requests-per-second"),
                current=MetricValueStatus(value="25k"),
                described_object=ingress,
            ),
        )
    ]
    assert condition(status, "ScalingActive")[2] == (
        "the HPA was able to successfully calculate a replica count from Ingress metric "
        "requests-per-second"
    )
    assert condition(status, "ScalingLimited")[1] == "ScaleUpLimit"
