"""The replica calculator against upstream's replica_calculator_test.go cases (requests,
levels, readiness, targets and the counts and utilizations upstream expects), with fake
metrics and a fake clock's time."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers.hpametrics import MetricsError
from controlplane.controllers.replicacalculator import (
    Proposal,
    ReplicaCalculator,
    Scope,
    Tolerances,
    ValueTarget,
    pod_requests,
)
from kube.api.kinds.autoscaling_v2 import CrossVersionObjectReference
from kube.api.kinds.core_v1.pod import Pod, ResourceRequirements
from kube.api.labels import Selector, parse_selector
from kube.api.meta_v1 import LabelSelector
from tests.controlplane.controllers.hpafixtures import NAMESPACE, FakeMetrics, pod

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
SELECTOR = parse_selector("app=web")
DEFAULT = Tolerances(down=0.1, up=0.1)
SCOPE = Scope(NAMESPACE, SELECTOR, DEFAULT)


def calculator(metrics: FakeMetrics, *pods: Pod) -> ReplicaCalculator:
    def matching(namespace: str, selector: Selector) -> list[Pod]:
        return [p for p in pods if selector.matches(p.metadata.labels)]

    return ReplicaCalculator(metrics, matching, lambda: NOW, 300.0, 30.0)


def fleet(
    levels: list[int | None],
    requests: list[str] | None = None,
    ready: list[bool] | None = None,
) -> tuple[FakeMetrics, list[Pod]]:
    """Pods web-0.. with those CPU requests (1 core each by default) and readiness, and
    metrics at those levels (millicores; None: no metric)."""
    metrics = FakeMetrics(timestamp=NOW)
    pods = [
        pod(
            f"web-{i}",
            cpu=(requests or ["1"] * len(levels))[i],
            ready=(ready or [True] * len(levels))[i],
        )
        for i in range(len(levels))
    ]
    metrics.resources["cpu"] = {
        f"web-{i}": level for i, level in enumerate(levels) if level is not None
    }
    return metrics, pods


async def cpu_replicas(
    current: int,
    target: int,
    levels: list[int | None],
    requests: list[str] | None = None,
    ready: list[bool] | None = None,
    tolerances: Tolerances = DEFAULT,
) -> Proposal:
    metrics, pods = fleet(levels, requests, ready)
    return await calculator(metrics, *pods).resource_replicas(
        Scope(NAMESPACE, SELECTOR, tolerances), current, target, "cpu", ""
    )


@pytest.mark.parametrize(
    ("current", "target", "levels", "requests", "ready", "expected", "utilization", "value"),
    [
        pytest.param(3, 30, [300, 500, 700], None, None, 5, 50, 500, id="scale-up"),
        pytest.param(
            3, 30, [300, 500, 700], None, [False, True, True], 4, 60, 600, id="unready-less-scale"
        ),
        pytest.param(
            3, 30, [400, 500, 700], None, [True, False, False], 3, 40, 400, id="unready-no-scale"
        ),
        pytest.param(5, 50, [100, 300, 500, 250, 250], None, None, 3, 28, 280, id="scale-down"),
        pytest.param(
            3, 100, [1010, 1030, 1020], ["0.9", "1.0", "1.1"], None, 3, 102, 1020, id="tolerance"
        ),
        pytest.param(4, 50, [100, 100, 100, None], None, None, 3, 10, 100, id="missing-down"),
        pytest.param(3, 50, [1000, 1000, None], None, None, 4, 100, 1000, id="missing-up"),
        pytest.param(2, 50, [400, None], None, None, 2, 40, 400, id="missing-turns-direction"),
    ],
)
async def test_resource_utilization(
    current: int,
    target: int,
    levels: list[int | None],
    requests: list[str] | None,
    ready: list[bool] | None,
    expected: int,
    utilization: int,
    value: int,
) -> None:
    proposal = await cpu_replicas(current, target, levels, requests, ready)
    assert (proposal.replicas, proposal.utilization, proposal.usage) == (
        expected,
        utilization,
        value,
    )


async def test_tolerance_per_direction() -> None:
    """A ratio of 1.08: kept by the default 10%, acted on by a 5% scale-up tolerance."""
    assert (await cpu_replicas(2, 50, [540, 540])).replicas == 2
    own = Tolerances(down=0.1, up=0.05)
    assert (await cpu_replicas(2, 50, [540, 540], tolerances=own)).replicas == 3


@pytest.mark.parametrize(
    ("started_ago", "ready", "changed_after_start", "counted"),
    [
        pytest.param(60, True, 10, True, id="ready-since-long-enough"),
        pytest.param(60, True, 45, False, id="ready-less-than-a-window-ago"),
        pytest.param(60, False, 10, False, id="unready-in-initialization"),
        pytest.param(600, False, 10, False, id="never-ready-after-initialization"),
        pytest.param(600, False, 300, True, id="was-ready-after-initialization"),
    ],
)
async def test_cpu_readiness_rules(
    started_ago: float, ready: bool, changed_after_start: float, counted: bool
) -> None:
    """Upstream's groupPods for CPU: within the 5 min initialization period a sample counts
    from one window (30 s here) after the pod became Ready; later, a not-Ready pod counts
    unless it was never Ready since the 30 s initial readiness delay."""
    started = NOW - datetime.timedelta(seconds=started_ago)
    changed = started + datetime.timedelta(seconds=changed_after_start)
    metrics = FakeMetrics(timestamp=NOW)
    metrics.resources["cpu"] = {"web-0": 500}
    calc = calculator(metrics, pod("web-0", ready=ready, started=started, ready_since=changed))
    groups = calc.group_pods(
        calc.pods(NAMESPACE, SELECTOR),
        (await metrics.resource_metric("cpu", NAMESPACE, SELECTOR, ""))[0],
        "cpu",
    )
    assert (groups.ready == 1) is counted
    assert (groups.unready == {"web-0"}) is not counted


async def test_pending_deleted_and_failed_pods() -> None:
    metrics, pods = fleet([500, 500, 500, 500])
    assert pods[1].status is not None and pods[2].status is not None
    pods[1].status.phase = "Pending"
    pods[2].status.phase = "Failed"
    pods[3].metadata.deletion_timestamp = NOW
    calc = calculator(metrics, *pods)
    groups = calc.group_pods(
        pods, (await metrics.resource_metric("cpu", "", SELECTOR, ""))[0], "cpu"
    )
    assert (groups.ready, groups.unready, groups.ignored) == (1, {"web-1"}, {"web-2", "web-3"})


async def test_raw_resource_average_value() -> None:
    """An AverageValue target of 400m: three pods averaging 600m want 5."""
    metrics, pods = fleet([500, 600, 700])
    proposal = await calculator(metrics, *pods).raw_resource_replicas(SCOPE, 3, 400, "cpu", "")
    assert (proposal.replicas, proposal.usage, proposal.utilization) == (5, 600, None)


async def test_pods_metric() -> None:
    """Upstream's TestReplicaCalcScaleUpCM: qps 20, 10, 30 against 15 each: 4."""
    metrics = FakeMetrics(timestamp=NOW)
    metrics.pods["qps"] = {"web-0": 20_000, "web-1": 10_000, "web-2": 30_000}
    calc = calculator(metrics, pod("web-0"), pod("web-1"), pod("web-2"))
    proposal = await calc.metric_replicas(SCOPE, 3, 15_000, "qps", Selector.everything())
    assert (proposal.replicas, proposal.usage) == (4, 20_000)


async def test_pods_metric_missing_pod_counts_at_target_on_scale_down() -> None:
    metrics = FakeMetrics(timestamp=NOW)
    metrics.pods["qps"] = {"web-0": 1_000, "web-1": 1_000}
    calc = calculator(metrics, pod("web-0"), pod("web-1"), pod("web-2"))
    proposal = await calc.metric_replicas(SCOPE, 3, 10_000, "qps", Selector.everything())
    assert proposal.replicas == 3 - 1


INGRESS = CrossVersionObjectReference(
    kind="Ingress", name="main", api_version="networking.k8s.io/v1"
)


@pytest.mark.parametrize(
    ("current", "usage", "expected"),
    [
        pytest.param(3, 20_666, 7, id="scale-up"),
        pytest.param(3, 10_500, 3, id="tolerance"),
        pytest.param(0, 20_666, 3, id="from-zero"),
    ],
)
async def test_object_value(current: int, usage: int, expected: int) -> None:
    """Upstream's TestReplicaCalcScaleUpCMObject: a value of 20.666 against 10 over 3 ready
    pods: 7; from zero replicas, the ratio rounded up."""
    metrics = FakeMetrics(timestamp=NOW)
    metrics.objects["requests-per-second"] = usage
    calc = calculator(metrics, pod("web-0"), pod("web-1"), pod("web-2"))
    proposal = await calc.object_replicas(
        SCOPE,
        ValueTarget(current, 10_000, per_pod=False),
        "requests-per-second",
        INGRESS,
        Selector.everything(),
    )
    assert (proposal.replicas, proposal.usage) == (expected, usage)
    assert metrics.asked == [("requests-per-second", "Ingress/main")]


async def test_object_average_value() -> None:
    metrics = FakeMetrics(timestamp=NOW)
    metrics.objects["requests-per-second"] = 20_000
    proposal = await calculator(metrics).object_replicas(
        SCOPE,
        ValueTarget(3, 10_000, per_pod=True),
        "requests-per-second",
        INGRESS,
        Selector.everything(),
    )
    assert (proposal.replicas, proposal.usage) == (2, 6667)


async def test_external_value_and_average_value() -> None:
    """Upstream's TestReplicaCalcScaleUpCMExternal (8.6 against 4.4 with one ready pod: 2) and
    its per-pod twin (8.6 against 2.2 per pod on 3: 4, 2.867 each)."""
    metrics = FakeMetrics(timestamp=NOW)
    metrics.external["queue"] = [8_000, 600]
    calc = calculator(metrics, pod("web-0"))
    queue = LabelSelector(match_labels={"queue": "worker"})
    value = await calc.external_replicas(
        SCOPE, ValueTarget(1, 4_400, per_pod=False), "queue", queue
    )
    assert (value.replicas, value.usage) == (2, 8_600)
    per_pod = await calc.external_replicas(
        SCOPE, ValueTarget(3, 2_200, per_pod=True), "queue", queue
    )
    assert (per_pod.replicas, per_pod.usage) == (4, 2_867)
    assert metrics.asked == [("queue", "queue=worker")] * 2


async def test_external_metric_errors_name_the_selector_as_go_prints_it() -> None:
    metrics = FakeMetrics(timestamp=NOW, error="the adapter is down")
    queue = LabelSelector(match_labels={"queue": "worker"})
    with pytest.raises(MetricsError) as raised:
        await calculator(metrics).external_replicas(
            SCOPE, ValueTarget(1, 1_000, per_pod=False), "queue", queue
        )
    assert str(raised.value) == (
        "unable to get external metric team/queue/&LabelSelector{MatchLabels:map[string]string"
        "{queue: worker,},MatchExpressions:[]LabelSelectorRequirement{},}: the adapter is down"
    )


@pytest.mark.parametrize(
    ("pods", "levels", "message"),
    [
        pytest.param(
            [],
            {"web-0": 1},
            "no pods returned by selector while calculating replica count",
            id="no-pods",
        ),
        pytest.param(
            [pod("web-0", ready=False, started=NOW, ready_since=NOW)],
            {"web-0": 1},
            "did not receive metrics for targeted pods (pods might be unready)",
            id="all-unready",
        ),
        pytest.param(
            [pod("web-0")],
            {"web-9": 1},
            "no metrics returned matched known pods",
            id="metrics-of-other-pods",
        ),
    ],
)
async def test_resource_errors(pods: list[Pod], levels: dict[str, int], message: str) -> None:
    metrics = FakeMetrics(timestamp=NOW)
    metrics.resources["cpu"] = levels
    with pytest.raises(MetricsError) as raised:
        await calculator(metrics, *pods).resource_replicas(SCOPE, 1, 50, "cpu", "")
    assert str(raised.value) == message


async def test_missing_request_is_an_error() -> None:
    metrics = FakeMetrics(timestamp=NOW)
    metrics.resources["memory"] = {"web-0": 1}
    with pytest.raises(
        MetricsError, match="missing request for memory in container app of Pod web-0"
    ):
        await calculator(metrics, pod("web-0")).resource_replicas(SCOPE, 1, 50, "memory", "")


async def test_requests_of_one_container_or_of_the_pod() -> None:
    """A ContainerResource metric's container must exist; pod-level requests, when a pod sets
    them, are its request for a Resource metric (upstream's calculateRequests)."""
    web = pod("web-0", cpu="250m")
    assert pod_requests([web], "cpu", "app") == {"web-0": 250}
    with pytest.raises(MetricsError, match=r"^container nginx not found in Pod web-0$"):
        pod_requests([web], "cpu", "nginx")
    assert web.spec is not None
    web.spec.resources = ResourceRequirements(requests={"cpu": "2"})
    assert pod_requests([web], "cpu", "") == {"web-0": 2000}
    assert pod_requests([web], "cpu", "app") == {"web-0": 250}
    with pytest.raises(MetricsError, match=r"^missing pod-level request for memory in Pod web-0$"):
        pod_requests([web], "memory", "")
