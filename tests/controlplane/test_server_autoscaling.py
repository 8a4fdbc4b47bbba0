"""The horizontal pod autoscaler end to end: ``kubelab server`` with hollow nodes, a tiny
resource metrics API registered by an APIService (``controllers/podmetrics_server.py``,
reporting the CPU use the test sets), and the pinned kubectl as a user drives it: ``kubectl
autoscale`` a Deployment as the walkthrough does (``--cpu-percent=50 --min=1 --max=10``), load
goes up and the HPA scales it up, load goes away and it scales it back down; ``get hpa`` and
``describe hpa`` read as upstream's.  A custom resource with a scale subresource is scaled the
same way.

The server syncs HPAs every second and stabilizes scale-downs over 5 s (the flags upstream
has for this, instead of 15 s and 5 min), so the whole story takes seconds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from kube.api import codec
from kube.pki import CertificateAuthority
from tests.controlplane.apiserver.extensions import Extension, expose, register, until
from tests.servers import REPO, Kubectl, ServerProcess, host_address, serve_all_in_one

NAMESPACE = "shop"
WAIT = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from serve_all_in_one(
        tmp_path_factory,
        "--enable-aggregator-routing=true",
        "--horizontal-pod-autoscaler-sync-period",
        "1s",
        "--horizontal-pod-autoscaler-downscale-stabilization",
        "5s",
    )


@pytest.fixture(scope="module")
def kubectl(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(server.kubeconfig, tmp_path_factory.mktemp("kube-cache"), NAMESPACE)


@pytest.fixture(scope="module")
def nodes(server: ServerProcess) -> Iterator[None]:
    """Two hollow nodes: pods bound to them are Running and Ready at once."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubelab",
            "hollow-nodes",
            "--kubeconfig",
            str(server.kubeconfig),
            "--count",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    try:
        yield
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


@dataclass(frozen=True)
class MetricsFiles:
    """What the metrics APIs answer, read on every request: each pod's CPU and memory use, its
    custom metrics, and the external metrics' series."""

    usage: Path
    custom: Path
    series: Path

    def set_usage(self, cpu: str) -> None:
        self.usage.write_text(json.dumps({"cpu": cpu, "memory": "20Mi"}))


@pytest.fixture(scope="module")
def metrics(
    server: ServerProcess, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MetricsFiles]:
    """The metrics APIs up behind Service ``shop/api`` and the APIServices
    v1beta1.metrics.k8s.io, v1beta2.custom.metrics.k8s.io and v1beta1.external.metrics.k8s.io."""
    work = tmp_path_factory.mktemp("metrics")
    files = MetricsFiles(work / "usage.json", work / "custom.json", work / "series.json")
    files.set_usage("100m")
    files.custom.write_text(json.dumps({}))
    files.series.write_text(json.dumps({}))
    ca = CertificateAuthority.create("metrics-ca")
    cert, key = ca.issue("api.shop.svc", server=True, dns_names=["api.shop.svc"]).write(
        work, "serving"
    )
    extension = Extension(
        [
            sys.executable,
            "-m",
            "tests.controlplane.controllers.podmetrics_server",
            "--kubeconfig",
            str(server.kubeconfig),
            "--cert",
            str(cert),
            "--key",
            str(key),
            "--usage",
            str(files.usage),
            "--custom",
            str(files.custom),
            "--external",
            str(files.series),
        ],
        work / "unused",
        host_address(),
    )
    extension.start()
    try:
        kubectl.run("create", "namespace", NAMESPACE, namespaced=False)
        expose(kubectl, extension)
        register(kubectl, "v1beta1.metrics.k8s.io", "metrics.k8s.io", "v1beta1", ca.cert_pem)
        for group, version in (
            ("custom.metrics.k8s.io", "v1beta2"),
            ("external.metrics.k8s.io", "v1beta1"),
        ):
            register(kubectl, f"{version}.{group}", group, version, ca.cert_pem)
        yield files
    finally:
        extension.stop()


def hpa_row(kubectl: Kubectl) -> list[str]:
    """The HPA's row of ``kubectl get hpa``, split on spaces (TARGETS is two words)."""
    lines = kubectl.run("get", "hpa", "web").stdout.splitlines()
    assert lines[0].split() == [
        "NAME",
        "REFERENCE",
        "TARGETS",
        "MINPODS",
        "MAXPODS",
        "REPLICAS",
        "AGE",
    ]
    return lines[1].split()


def create_hpa(kubectl: Kubectl, name: str, maximum: int, metric: dict[str, Any]) -> None:
    """An autoscaling/v2 HPA of Deployment ``name`` on one metric, as a manifest would be."""
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 1,
            "maxReplicas": maximum,
            "metrics": [metric],
        },
    }
    kubectl.run("create", "-f", "-", input=json.dumps(hpa))


def wanted_replicas(kubectl: Kubectl, deployment: str) -> int:
    return int(kubectl.json("get", "deployment", deployment)["spec"]["replicas"])


def describe(kubectl: Kubectl) -> str:
    return kubectl.run("describe", "hpa", "web").stdout


def ready_replicas(kubectl: Kubectl) -> int:
    return int(kubectl.json("get", "deployment", "web").get("status", {}).get("readyReplicas", 0))


def test_autoscale_a_deployment_up_and_down(
    kubectl: Kubectl, nodes: None, metrics: MetricsFiles
) -> None:
    created = kubectl.run("create", "deployment", "web", "--image=nginx", "--replicas=1")
    assert created.stdout.strip() == "deployment.apps/web created"
    kubectl.run("set", "resources", "deployment", "web", "--requests=cpu=200m")
    until(lambda: ready_replicas(kubectl) == 1, "the deployment to be ready", WAIT)
    autoscaled = kubectl.run(
        "autoscale", "deployment", "web", "--cpu-percent=50", "--min=1", "--max=10"
    )
    assert autoscaled.stdout.strip() == "horizontalpodautoscaler.autoscaling/web autoscaled"

    until(lambda: hpa_row(kubectl)[3] == "50%/50%", "the HPA to read 50%", WAIT)
    assert hpa_row(kubectl)[:7] == ["web", "Deployment/web", "cpu:", "50%/50%", "1", "10", "1"]

    metrics.set_usage("400m")
    until(lambda: ready_replicas(kubectl) == 10, "the HPA to scale up to 10", WAIT)
    until(lambda: hpa_row(kubectl)[3:7] == ["200%/50%", "1", "10", "10"], "REPLICAS 10", WAIT)
    # Up by at most double (at least 4) a sync: 4, 8, then the maximum, which holds.
    until(lambda: "TooManyReplicas" in describe(kubectl), "ScalingLimited", WAIT)
    described = describe(kubectl)
    assert "Reference:                                             Deployment/web" in described
    assert "resource cpu on pods  (as a percentage of request):  200% (400m) / 50%" in described
    assert (
        "Deployment pods:                                       10 current / 10 desired"
        in described
    )
    assert "ScalingLimited  True    TooManyReplicas" in described
    assert "the desired replica count is more than the maximum replica count" in described
    # Each controller's events name it, as upstream's: describe's From column.
    rescales = [
        re.split(r"\s{2,}", line.strip())
        for line in described.splitlines()
        if "SuccessfulRescale" in line
    ]
    for size in (4, 8, 10):
        message = (
            f"New size: {size}; reason: cpu resource utilization (percentage of request) above "
            "target"
        )
        assert ["horizontal-pod-autoscaler", message] in [fields[3:] for fields in rescales]
    scaled = kubectl.run("describe", "deployment", "web").stdout
    assert "deployment-controller  Scaled up replica set web-" in scaled
    hpa = kubectl.json("get", "hpa", "web")
    assert hpa["status"]["currentMetrics"] == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "current": {"averageValue": "400m", "averageUtilization": 200},
            },
        }
    ]
    assert hpa["status"]["desiredReplicas"] == 10
    assert "lastScaleTime" in hpa["status"]
    # The official client reads the same status, at v2 and at v1.
    with kubernetes.config.new_client_from_config(config_file=str(kubectl.kubeconfig)) as api:
        v2 = kubernetes.client.AutoscalingV2Api(api).read_namespaced_horizontal_pod_autoscaler(
            "web", NAMESPACE
        )
        assert [c.type for c in v2.status.conditions] == [
            "AbleToScale",
            "ScalingActive",
            "ScalingLimited",
        ]
        assert v2.status.current_metrics[0].resource.current.average_utilization == 200
        v1 = kubernetes.client.AutoscalingV1Api(api).read_namespaced_horizontal_pod_autoscaler(
            "web", NAMESPACE
        )
        assert v1.status.current_cpu_utilization_percentage == 200
        assert v1.spec.target_cpu_utilization_percentage == 50

    metrics.set_usage("20m")
    until(lambda: ready_replicas(kubectl) == 1, "the HPA to scale back down to 1", WAIT)
    until(lambda: hpa_row(kubectl)[3:7] == ["10%/50%", "1", "10", "1"], "REPLICAS 1", WAIT)
    described = describe(kubectl)
    assert "New size: 1; reason: All metrics below target" in described
    assert "ScalingActive   True    ValidMetricFound" in described


def crontab_definition() -> dict[str, Any]:
    """The kubernetes.io CronTab definition (tests/kube/api/manifests), with the scale
    subresource the same page adds to it (and the status field its selector is read from)."""
    manifest = REPO / "tests/kube/api/manifests/apiextensions-customresourcedefinition-crontab.yaml"
    definition: dict[str, Any] = codec.load_yaml_documents(manifest.read_text())[0]
    stored = definition["spec"]["versions"][1]
    stored["subresources"]["scale"] = {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.labelSelector",
    }
    status = stored["schema"]["openAPIV3Schema"]["properties"]["status"]
    status["properties"]["labelSelector"] = {"type": "string"}
    return definition


def test_autoscale_a_custom_resource_through_its_scale_subresource(
    kubectl: Kubectl, nodes: None, metrics: MetricsFiles
) -> None:
    """A CronTab whose pods are a Deployment's (its status names their selector): the HPA
    reads their metrics and scales the CronTab's spec.replicas, up to its maximum."""
    kubectl.run("create", "-f", "-", input=json.dumps(crontab_definition()), namespaced=False)
    kubectl.run("create", "deployment", "worker", "--image=nginx", "--replicas=1")
    kubectl.run("set", "resources", "deployment", "worker", "--requests=cpu=200m")
    crontab = {
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": "nightly"},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 1},
    }
    until(
        lambda: (
            kubectl.run("create", "-f", "-", input=json.dumps(crontab), check=False).returncode == 0
        ),
        "the CronTab to be created",
        WAIT,
    )
    kubectl.run(
        "patch",
        "crontab",
        "nightly",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"replicas": 1, "labelSelector": "app=worker"}}),
    )
    metrics.set_usage("400m")
    autoscaled = kubectl.run(
        "autoscale", "crontab", "nightly", "--cpu-percent=50", "--min=1", "--max=3"
    )
    assert autoscaled.stdout.strip() == "horizontalpodautoscaler.autoscaling/nightly autoscaled"

    def replicas() -> int:
        return int(kubectl.json("get", "crontab", "nightly")["spec"]["replicas"])

    until(lambda: replicas() == 3, "the HPA to scale the CronTab to 3", WAIT)
    row = kubectl.run("get", "hpa", "nightly").stdout.splitlines()[1].split()
    assert row[:6] == ["nightly", "CronTab/nightly", "cpu:", "200%/50%", "1", "3"]
    events = kubectl.run(
        "get", "events", "--field-selector", "involvedObject.name=nightly,reason=SuccessfulRescale"
    ).stdout
    assert (
        "New size: 3; reason: cpu resource utilization (percentage of request) above target"
        in events
    )


def test_autoscale_on_an_external_metric(
    kubectl: Kubectl, nodes: None, metrics: MetricsFiles
) -> None:
    """The docs' queue example: an External metric, 30 messages a pod of the worker queue's
    series (the other queue's is not counted), read from the external metrics API."""
    kubectl.run("create", "deployment", "consumer", "--image=nginx", "--replicas=1")
    metrics.series.write_text(
        json.dumps(
            {
                "queue_messages_ready": [
                    [{"queue": "worker_tasks"}, "80"],
                    [{"queue": "worker_tasks"}, "10"],
                    [{"queue": "other_tasks"}, "500"],
                ]
            }
        )
    )
    create_hpa(
        kubectl,
        "consumer",
        10,
        {
            "type": "External",
            "external": {
                "metric": {
                    "name": "queue_messages_ready",
                    "selector": {"matchLabels": {"queue": "worker_tasks"}},
                },
                "target": {"type": "AverageValue", "averageValue": "30"},
            },
        },
    )

    until(
        lambda: wanted_replicas(kubectl, "consumer") == 3,
        "the HPA to scale the consumer to 3",
        WAIT,
    )
    # 90 messages over one pod made it 3; over the 3 pods its next sync sees 30 a pod, at target.
    until(
        lambda: kubectl.json("get", "hpa", "consumer")["status"].get("currentReplicas") == 3,
        "the HPA to count the consumer's 3 replicas",
        WAIT,
    )
    row = kubectl.run("get", "hpa", "consumer").stdout.splitlines()[1].split()
    assert row[:7] == ["consumer", "Deployment/consumer", "30/30", "(avg)", "1", "10", "3"]
    status = kubectl.json("get", "hpa", "consumer")["status"]
    assert status["currentMetrics"] == [
        {
            "type": "External",
            "external": {
                "metric": {
                    "name": "queue_messages_ready",
                    "selector": {"matchLabels": {"queue": "worker_tasks"}},
                },
                "current": {"averageValue": "30"},
            },
        }
    ]
    message = next(c for c in status["conditions"] if c["type"] == "ScalingActive")["message"]
    assert message == (
        "the HPA was able to successfully calculate a replica count from external metric "
        "queue_messages_ready(&LabelSelector{MatchLabels:map[string]string{queue: worker_tasks,},"
        "MatchExpressions:[]LabelSelectorRequirement{},})"
    )


def test_autoscale_on_a_pods_metric(kubectl: Kubectl, nodes: None, metrics: MetricsFiles) -> None:
    """The docs' packets-per-second example: a Pods metric from the custom metrics API, an
    AverageValue of 1k; at 2k a pod the Deployment doubles, up to its maximum."""
    kubectl.run("create", "deployment", "frontend", "--image=nginx", "--replicas=1")
    metrics.custom.write_text(json.dumps({"packets-per-second": "2k"}))
    create_hpa(
        kubectl,
        "frontend",
        2,
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "packets-per-second"},
                "target": {"type": "AverageValue", "averageValue": "1k"},
            },
        },
    )

    until(
        lambda: wanted_replicas(kubectl, "frontend") == 2,
        "the HPA to scale the frontend to 2",
        WAIT,
    )
    until(
        lambda: (
            kubectl.run("get", "hpa", "frontend").stdout.splitlines()[1].split()[2:6]
            == ["2k/1k", "1", "2", "2"]
        ),
        "the HPA's row to read 2k/1k with 2 replicas",
        WAIT,
    )
    described = kubectl.run("describe", "hpa", "frontend").stdout
    assert '"packets-per-second" on pods:  2k / 1k' in described
    assert "New size: 2; reason: pods metric packets-per-second above target" in described


def test_autoscale_with_kubectls_cpu_flag(
    kubectl: Kubectl, nodes: None, metrics: MetricsFiles
) -> None:
    """kubectl 1.36 deprecates ``--cpu-percent`` for ``--cpu``, which takes a percentage
    (Utilization) or a quantity (AverageValue, here 100m a pod): what a newcomer types after
    reading kubectl's warning.  At 200m a pod the Deployment doubles.  Last in the module: it
    sets every pod's use."""
    kubectl.run("create", "deployment", "lean", "--image=nginx", "--replicas=1")
    kubectl.run("set", "resources", "deployment", "lean", "--requests=cpu=400m")
    planned = kubectl.json(
        "autoscale", "deployment", "lean", "--cpu=50%", "--max=4", "--dry-run=server"
    )
    assert planned["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50},
            },
        }
    ]
    metrics.set_usage("200m")
    autoscaled = kubectl.run("autoscale", "deployment", "lean", "--cpu=100m", "--min=1", "--max=4")
    assert autoscaled.stdout.strip() == "horizontalpodautoscaler.autoscaling/lean autoscaled"
    assert "deprecated" not in autoscaled.stderr
    assert kubectl.json("get", "hpa", "lean")["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "100m"}},
        }
    ]
    until(lambda: wanted_replicas(kubectl, "lean") == 2, "the HPA to scale lean to 2", WAIT)
    until(
        lambda: (
            kubectl.run("get", "hpa", "lean").stdout.splitlines()[1].split()[2:7]
            == ["cpu:", "200m/100m", "1", "4", "2"]
        ),
        "the HPA's row to read cpu: 200m/100m with 2 replicas",
        WAIT,
    )
    described = kubectl.run("describe", "hpa", "lean").stdout
    assert "resource cpu on pods:  200m / 100m" in described
    assert "New size: 2; reason: cpu resource above target" in described
