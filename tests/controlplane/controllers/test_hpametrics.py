"""Reading metrics over REST: PodMetrics listed from metrics.k8s.io (a pod's containers summed,
or one container), custom metrics of pods and of objects, external metrics, and upstream's
errors, against the fake API (the aggregated groups answered by reactors)."""

from __future__ import annotations

import datetime
import json

import pytest

from controlplane.controllers.discovery import NoKindMatchError, RESTMapper
from controlplane.controllers.hpametrics import MetricsError, PodMetric, RestMetricsClient
from controlplane.controllers.replicacalculator import go_label_selector
from kube.api.kinds.autoscaling_v2 import CrossVersionObjectReference
from kube.api.kinds.metrics_v1beta1 import ContainerMetrics, PodMetrics
from kube.api.labels import Selector, parse_selector
from kube.api.meta_v1 import LabelSelector, LabelSelectorRequirement, ObjectMeta
from kube.api.struct import QuantityValue
from tests.fakeapi import Action, FakeApi, RawRequest, api_error

AT = datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.UTC)
WEB = parse_selector("app=web")


def pod_metrics(
    name: str, labels: dict[str, str], **containers: dict[str, QuantityValue]
) -> PodMetrics:
    return PodMetrics(
        metadata=ObjectMeta(name=name, namespace="team", labels=labels),
        timestamp=AT,
        window="15s",
        containers=[ContainerMetrics(name=c, usage=dict(usage)) for c, usage in containers.items()],
    )


def rest(client: FakeApi) -> RestMetricsClient:
    return RestMetricsClient(client, RESTMapper(client))


async def test_resource_metric_sums_a_pods_containers() -> None:
    client = FakeApi()
    client.seed(
        pod_metrics(
            "web-1",
            {"app": "web"},
            app={"cpu": "250m", "memory": "64Mi"},
            sidecar={"cpu": "50m", "memory": "16Mi"},
        ),
        pod_metrics("web-2", {"app": "web"}, app={"cpu": "1", "memory": "64Mi"}),
        pod_metrics("other", {"app": "other"}, app={"cpu": "2", "memory": "64Mi"}),
    )
    found, when = await rest(client).resource_metric("cpu", "team", WEB, "")
    assert found == {
        "web-1": PodMetric(300, AT, 15.0),
        "web-2": PodMetric(1000, AT, 15.0),
    }
    assert when == AT
    assert [(a.verb, a.kind) for a in client.reads] == [("list", "PodMetrics")]


async def test_resource_metric_of_one_container() -> None:
    client = FakeApi()
    client.seed(
        pod_metrics("web-1", {"app": "web"}, app={"cpu": "250m"}, sidecar={"cpu": "50m"}),
    )
    found, _ = await rest(client).resource_metric("cpu", "team", WEB, "sidecar")
    assert found == {"web-1": PodMetric(50, AT, 15.0)}
    with pytest.raises(MetricsError) as raised:
        await rest(client).resource_metric("cpu", "team", WEB, "nginx")
    assert str(raised.value) == (
        "failed to get container metrics: container nginx not present in metrics for pod team/web-1"
    )


async def test_a_pod_missing_the_resource_in_a_container_is_left_out() -> None:
    client = FakeApi()
    client.seed(
        pod_metrics("web-1", {"app": "web"}, app={"cpu": "250m"}, sidecar={"memory": "1Mi"}),
        pod_metrics("web-2", {"app": "web"}),
    )
    found, _ = await rest(client).resource_metric("cpu", "team", WEB, "")
    assert found == {}


async def test_no_resource_metrics() -> None:
    with pytest.raises(MetricsError, match=r"^no metrics returned from resource metrics API$"):
        await rest(FakeApi()).resource_metric("cpu", "team", WEB, "")
    client = FakeApi()
    client.fail_next("list", api_error(503, "ServiceUnavailable", "the server is down"))
    with pytest.raises(MetricsError) as raised:
        await rest(client).resource_metric("cpu", "team", WEB, "")
    assert str(raised.value) == (
        "unable to fetch metrics from resource metrics API: the server is down"
    )


def serve(client: FakeApi, answers: dict[str, object]) -> list[RawRequest]:
    """Answer GETs of these paths with these JSON bodies; keep what was asked."""
    asked: list[RawRequest] = []

    def react(action: Action) -> bytes | None:
        raw: RawRequest = action.obj
        if raw.path not in answers:
            return None
        asked.append(raw)
        return json.dumps(answers[raw.path]).encode()

    client.react("request", "*", react)
    return asked


def value(name: str, amount: str, window: int | None = 30, kind: str = "Pod") -> dict[str, object]:
    return {
        "describedObject": {"kind": kind, "namespace": "team", "name": name},
        "metric": {"name": "qps"},
        "timestamp": "2026-01-01T12:00:00Z",
        "windowSeconds": window,
        "value": amount,
    }


async def test_custom_metric_of_pods() -> None:
    client = FakeApi()
    asked = serve(
        client,
        {
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team/pods/*/qps": {
                "kind": "MetricValueList",
                "items": [value("web-1", "10500m"), value("web-2", "2", window=None)],
            }
        },
    )
    found, when = await rest(client).raw_metric("qps", "team", WEB, parse_selector("verb=GET"))
    assert found == {"web-1": PodMetric(10_500, AT, 30.0), "web-2": PodMetric(2_000, AT, 60.0)}
    assert when == AT
    assert [r.params for r in asked] == [
        {"labelSelector": "app=web", "metricLabelSelector": "verb=GET"}
    ]


async def test_custom_metric_of_an_object_found_by_discovery() -> None:
    client = FakeApi()
    asked = serve(
        client,
        {
            "/apis/networking.k8s.io/v1": {
                "kind": "APIResourceList",
                "groupVersion": "networking.k8s.io/v1",
                "resources": [{"name": "ingresses", "namespaced": True, "kind": "Ingress"}],
            },
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team/ingresses.networking.k8s.io/"
            "main/requests": {
                "kind": "MetricValueList",
                "items": [value("main", "20", kind="Ingress")],
            },
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team/metrics/requests": {
                "kind": "MetricValueList",
                "items": [value("team", "3", kind="Namespace")],
            },
        },
    )
    ingress = CrossVersionObjectReference(
        kind="Ingress", name="main", api_version="networking.k8s.io/v1"
    )
    metrics = rest(client)
    assert await metrics.object_metric("requests", "team", ingress, Selector.everything()) == (
        20_000,
        AT,
    )
    namespace = CrossVersionObjectReference(kind="Namespace", name="team", api_version="v1")
    assert await metrics.object_metric("requests", "team", namespace, Selector.everything()) == (
        3_000,
        AT,
    )
    assert len(asked) == 3


async def test_custom_metrics_not_registered() -> None:
    with pytest.raises(MetricsError) as raised:
        await rest(FakeApi()).raw_metric("qps", "team", WEB, Selector.everything())
    assert str(raised.value).startswith(
        "unable to fetch metrics from custom metrics API: the server could not find the "
        "requested resource"
    )


async def test_external_metric() -> None:
    client = FakeApi()
    asked = serve(
        client,
        {
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/team/queue_messages": {
                "kind": "ExternalMetricValueList",
                "items": [
                    {
                        "metricName": "queue_messages",
                        "metricLabels": {"queue": "worker"},
                        "timestamp": "2026-01-01T12:00:00Z",
                        "value": "30",
                    },
                    {
                        "metricName": "queue_messages",
                        "metricLabels": {"queue": "worker"},
                        "timestamp": "2026-01-01T12:00:00Z",
                        "value": "1500m",
                    },
                ],
            },
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/team/empty": {"items": []},
        },
    )
    metrics = rest(client)
    queue = parse_selector("queue=worker")
    assert await metrics.external_metric("queue_messages", "team", queue) == ([30_000, 1_500], AT)
    assert asked[0].params == {"labelSelector": "queue=worker"}
    with pytest.raises(MetricsError, match=r"^no metrics returned from external metrics API$"):
        await metrics.external_metric("empty", "team", Selector.everything())


async def test_the_rest_mapper_reads_discovery_again_for_an_unknown_kind() -> None:
    """Kinds are found in their group version's discovery document, read once; a kind not in
    it (a custom resource defined since) reads it again, and only then is refused."""
    client = FakeApi()
    listing: dict[str, object] = {
        "kind": "APIResourceList",
        "groupVersion": "stable.example.com/v1",
        "resources": [],
    }
    asked = serve(client, {"/apis/stable.example.com/v1": listing})
    mapper = RESTMapper(client)
    with pytest.raises(NoKindMatchError, match='no matches for kind "CronTab" in group "stable'):
        await mapper.resource_for("stable.example.com/v1", "CronTab")
    listing["resources"] = [{"name": "crontabs", "namespaced": True, "kind": "CronTab"}]
    found = await mapper.resource_for("stable.example.com/v1", "CronTab")
    assert found.path.url("team", "nightly", "scale") == (
        "/apis/stable.example.com/v1/namespaces/team/crontabs/nightly/scale"
    )
    await mapper.resource_for("stable.example.com/v1", "CronTab")
    assert len(asked) == 2


@pytest.mark.parametrize(
    ("selector", "printed"),
    [
        pytest.param(None, "nil", id="none"),
        pytest.param(
            LabelSelector(
                match_labels={"queue": "worker", "app": "web"},
                match_expressions=[
                    LabelSelectorRequirement(key="tier", operator="In", values=["a", "b"])
                ],
            ),
            "&LabelSelector{MatchLabels:map[string]string{app: web,queue: worker,},"
            "MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,"
            "Operator:In,Values:[a b],},},}",
            id="labels-and-expressions",
        ),
    ],
)
def test_label_selectors_print_as_go_prints_them(
    selector: LabelSelector | None, printed: str
) -> None:
    assert go_label_selector(selector) == printed
