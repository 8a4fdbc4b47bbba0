"""HorizontalPodAutoscalers through the pinned kubectl and the official Python client against a
real ``kubelab apiserver``: served in autoscaling/v2 and v1, the same objects in both."""

from __future__ import annotations

import json
import pathlib
import re
import threading
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException

from tests.servers import Kubectl

MANIFESTS = pathlib.Path(__file__).parents[2] / "kube" / "api" / "manifests"
DOCS_HPA = MANIFESTS / "autoscaling-horizontalpodautoscaler-php-apache-behavior.yaml"
V1 = "horizontalpodautoscalers.v1.autoscaling"
HEADER = ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
AGE = re.compile(r"^\d+s$")


def _rows(text: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


def _without_age(rows: list[list[str]]) -> list[list[str]]:
    """The table without its AGE column, once that column is checked."""
    assert rows[0][-1] == "AGE" and all(AGE.match(row[-1]) for row in rows[1:]), rows
    return [row[:-1] for row in rows]


def _deployment(kubectl: Kubectl, name: str) -> None:
    kubectl.run("create", "deployment", name, "--image=nginx")


def test_kubectl_autoscale_then_get_hpa(kubectl: Kubectl) -> None:
    _deployment(kubectl, "web")
    out = kubectl.run("autoscale", "deployment", "web", "--cpu-percent=50", "--min=1", "--max=5")
    assert out.stdout.strip() == "horizontalpodautoscaler.autoscaling/web autoscaled"
    table = kubectl.run("get", "hpa").stdout
    assert table.splitlines()[0].split() == HEADER
    # kubectl pads every column to its widest cell plus three spaces.
    assert re.fullmatch(
        r"NAME   REFERENCE        TARGETS              MINPODS   MAXPODS   REPLICAS   AGE\n"
        r"web    Deployment/web   cpu: <unknown>/50%   1         5         0          \d+s\n",
        table,
    ), table
    created = kubectl.json("get", "hpa", "web")
    assert created["apiVersion"] == "autoscaling/v2"
    assert created["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50},
            },
        }
    ]
    assert "behavior" not in created["spec"]  # defaults fill a given behavior, never add one
    assert created["status"] == {"desiredReplicas": 0}
    assert _without_age(_rows(kubectl.run("get", "hpa", "-o", "wide").stdout)) == [
        HEADER[:-1],
        ["web", "Deployment/web", "cpu: <unknown>/50%", "1", "5", "0"],
    ]


def test_the_walkthrough_autoscale(kubectl: Kubectl) -> None:
    """kubernetes.io's HorizontalPodAutoscaler walkthrough, as written."""
    _deployment(kubectl, "php-apache")
    kubectl.run("autoscale", "deployment", "php-apache", "--cpu-percent=50", "--min=1", "--max=10")
    assert _without_age(_rows(kubectl.run("get", "hpa").stdout)) == [
        HEADER[:-1],
        ["php-apache", "Deployment/php-apache", "cpu: <unknown>/50%", "1", "10", "0"],
    ]
    # `kubectl get all` lists it too (category all).
    assert "horizontalpodautoscaler.autoscaling/php-apache" in kubectl.run("get", "all").stdout


def test_docs_manifest_read_back_as_v2_and_v1(kubectl: Kubectl) -> None:
    manifest = DOCS_HPA.read_text()
    assert kubectl.run("apply", "-f", "-", input=manifest).stdout.strip() == (
        "horizontalpodautoscaler.autoscaling/php-apache created"
    )
    assert kubectl.run("apply", "-f", "-", input=manifest).stdout.strip() == (
        "horizontalpodautoscaler.autoscaling/php-apache unchanged"
    )
    as_v2 = yaml.safe_load(kubectl.run("get", "hpa", "php-apache", "-o", "yaml").stdout)
    written = yaml.safe_load(manifest)
    assert as_v2["apiVersion"] == "autoscaling/v2"
    assert as_v2["spec"]["metrics"] == written["spec"]["metrics"]
    # The given rules are kept; the scale-down rules' unset selectPolicy is defaulted.
    assert as_v2["spec"]["behavior"] == {
        "scaleUp": written["spec"]["behavior"]["scaleUp"],
        "scaleDown": {**written["spec"]["behavior"]["scaleDown"], "selectPolicy": "Max"},
    }

    as_v1 = yaml.safe_load(kubectl.run("get", V1, "php-apache", "-o", "yaml").stdout)
    assert as_v1["apiVersion"] == "autoscaling/v1"
    assert as_v1["spec"] == {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "php-apache"},
        "minReplicas": 1,
        "maxReplicas": 10,
        "targetCPUUtilizationPercentage": 50,
    }
    assert as_v1["status"] == {"currentReplicas": 0, "desiredReplicas": 0}
    annotations = as_v1["metadata"]["annotations"]
    assert annotations["autoscaling.alpha.kubernetes.io/metrics"] == (
        '[{"type":"Pods","pods":{"metricName":"packets-per-second","targetAverageValue":"1k"}}]'
    )
    assert annotations["autoscaling.alpha.kubernetes.io/behavior"] == (
        '{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":'
        '[{"Type":"Percent","Value":100,"PeriodSeconds":15},'
        '{"Type":"Pods","Value":4,"PeriodSeconds":15}],"Tolerance":null},'
        '"ScaleDown":{"StabilizationWindowSeconds":300,"SelectPolicy":"Max","Policies":'
        '[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}'
    )

    # A v1 client writing back what it read loses nothing v2 holds.
    as_v1["spec"]["maxReplicas"] = 12
    kubectl.run("replace", "-f", "-", input=json.dumps(as_v1))
    again = kubectl.json("get", "hpa", "php-apache")
    assert again["spec"]["maxReplicas"] == 12
    assert again["spec"]["behavior"] == as_v2["spec"]["behavior"]
    # Upstream's v1 conversion puts the CPU metric after those of the annotation.
    assert again["spec"]["metrics"] == [
        written["spec"]["metrics"][1],
        written["spec"]["metrics"][0],
    ]
    assert "annotations" not in again["metadata"] or not any(
        key.startswith("autoscaling.alpha.kubernetes.io/")
        for key in again["metadata"]["annotations"]
    )


def test_v1_without_a_target_gets_the_default_cpu_metric(kubectl: Kubectl) -> None:
    kubectl.run(
        "create",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "autoscaling/v1",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "plain"},
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
                    "maxReplicas": 3,
                },
            }
        ),
    )
    assert _without_age(_rows(kubectl.run("get", V1).stdout)) == [
        HEADER[:-1],
        ["plain", "Deployment/x", "cpu: <unknown>/80%", "1", "3", "0"],
    ]
    # Stored with the default metric, the object reads back in v1 with that target.
    assert kubectl.json("get", V1, "plain")["spec"]["targetCPUUtilizationPercentage"] == 80
    assert kubectl.json("get", "hpa", "plain")["spec"]["metrics"][0]["resource"] == {
        "name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": 80},
    }


INVALID = [
    pytest.param(
        "autoscaling/v2",
        {"scaleTargetRef": {"kind": "Deployment"}, "minReplicas": 0, "maxReplicas": 3},
        [
            "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
            "spec.scaleTargetRef.name: Required value",
        ],
        id="no-name-min-zero",
    ),
    pytest.param(
        "autoscaling/v2",
        {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 3,
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Percent"}}}
            ],
        },
        [
            'spec.metrics[0].resource.target.type: Unsupported value: "Percent": supported '
            'values: "AverageValue", "Utilization", "Value"',
            "spec.metrics[0].resource.target.averageUtilization: Required value: must set "
            "either a target raw value or a target utilization",
        ],
        id="bad-target",
    ),
    pytest.param(
        "autoscaling/v2",
        {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 3,
            "behavior": {
                "scaleUp": {
                    "selectPolicy": "Most",
                    "policies": [{"type": "Pods", "value": 0, "periodSeconds": 1801}],
                }
            },
        },
        [
            'spec.behavior.scaleUp.selectPolicy: Unsupported value: "Most": supported values: '
            '"Disabled", "Max", "Min"',
            "spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero",
            "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less "
            "than or equal to 1800",
        ],
        id="bad-behavior",
    ),
    pytest.param(
        "autoscaling/v1",
        {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "minReplicas": 5,
            "maxReplicas": 2,
        },
        ["spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"],
        id="v1-max-below-min",
    ),
]


@pytest.mark.parametrize(("api_version", "spec", "errors"), INVALID)
def test_invalid_objects_are_refused_naming_the_field(
    kubectl: Kubectl, api_version: str, spec: dict[str, Any], errors: list[str]
) -> None:
    body = {
        "apiVersion": api_version,
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "bad"},
        "spec": spec,
    }
    refused = kubectl.run("create", "-f", "-", input=json.dumps(body), check=False)
    assert refused.returncode != 0
    assert 'The HorizontalPodAutoscaler "bad" is invalid' in refused.stderr
    for error in errors:
        assert error in refused.stderr, refused.stderr


def test_discovery_and_explain(kubectl: Kubectl) -> None:
    rows = _rows(kubectl.run("api-resources", "--api-group=autoscaling", namespaced=False).stdout)
    assert rows[1:] == [
        ["horizontalpodautoscalers", "hpa", "autoscaling/v2", "true", "HorizontalPodAutoscaler"]
    ]
    versions = kubectl.run("api-versions", namespaced=False).stdout.split()
    assert {"autoscaling/v1", "autoscaling/v2"} <= set(versions)
    group = json.loads(kubectl.run("get", "--raw", "/apis/autoscaling", namespaced=False).stdout)
    assert group["preferredVersion"]["version"] == "v2"
    assert [v["version"] for v in group["versions"]] == ["v2", "v1"]
    explained = kubectl.run("explain", "hpa.spec", namespaced=False).stdout
    assert "VERSION:    v2" in explained
    for field in ("behavior", "maxReplicas", "metrics", "minReplicas", "scaleTargetRef"):
        assert f"  {field}\t<" in explained


def _hpa_v2(name: str, target: str = "web") -> k8s.V2HorizontalPodAutoscaler:
    return k8s.V2HorizontalPodAutoscaler(
        metadata=k8s.V1ObjectMeta(name=name),
        spec=k8s.V2HorizontalPodAutoscalerSpec(
            scale_target_ref=k8s.V2CrossVersionObjectReference(
                api_version="apps/v1", kind="Deployment", name=target
            ),
            max_replicas=4,
            metrics=[
                k8s.V2MetricSpec(
                    type="Resource",
                    resource=k8s.V2ResourceMetricSource(
                        name="cpu",
                        target=k8s.V2MetricTarget(type="Utilization", average_utilization=50),
                    ),
                )
            ],
        ),
    )


def test_python_client_in_both_versions(
    api_client: kubernetes.client.ApiClient, namespace: str, kubectl: Kubectl
) -> None:
    v2 = k8s.AutoscalingV2Api(api_client)
    v1 = k8s.AutoscalingV1Api(api_client)
    created = v2.create_namespaced_horizontal_pod_autoscaler(namespace, _hpa_v2("py"))
    assert created.spec.min_replicas == 1
    read = v1.read_namespaced_horizontal_pod_autoscaler("py", namespace)
    assert read.spec.target_cpu_utilization_percentage == 50
    assert read.metadata.resource_version == created.metadata.resource_version

    # The autoscaler's status, written through v2's status subresource, as both show it.
    v2.patch_namespaced_horizontal_pod_autoscaler_status(
        "py",
        namespace,
        {
            "status": {
                "currentReplicas": 2,
                "desiredReplicas": 3,
                "currentMetrics": [
                    {
                        "type": "Resource",
                        "resource": {"name": "cpu", "current": {"averageUtilization": 120}},
                    }
                ],
            }
        },
    )
    status = v1.read_namespaced_horizontal_pod_autoscaler_status("py", namespace).status
    assert (status.current_replicas, status.desired_replicas) == (2, 3)
    assert status.current_cpu_utilization_percentage == 120
    assert _without_age(_rows(kubectl.run("get", "hpa", "py").stdout))[1] == [
        "py",
        "Deployment/web",
        "cpu: 120%/50%",
        "1",
        "4",
        "2",
    ]

    # Replace through v1, patch through v2: one object.
    read = v1.read_namespaced_horizontal_pod_autoscaler("py", namespace)
    read.spec.target_cpu_utilization_percentage = 70
    v1.replace_namespaced_horizontal_pod_autoscaler("py", namespace, read)
    patched = v2.patch_namespaced_horizontal_pod_autoscaler(
        "py", namespace, {"spec": {"maxReplicas": 9}}
    )
    assert patched.spec.metrics[0].resource.target.average_utilization == 70
    assert patched.spec.max_replicas == 9
    assert patched.status.current_replicas == 2  # writes to the object leave status alone

    listed_v1 = v1.list_namespaced_horizontal_pod_autoscaler(namespace).items
    listed_v2 = v2.list_namespaced_horizontal_pod_autoscaler(namespace).items
    assert [h.metadata.name for h in listed_v1] == [h.metadata.name for h in listed_v2] == ["py"]

    with pytest.raises(ApiException) as invalid:
        v2.create_namespaced_horizontal_pod_autoscaler(
            namespace,
            k8s.V2HorizontalPodAutoscaler(
                metadata=k8s.V1ObjectMeta(name="bad"),
                spec=k8s.V2HorizontalPodAutoscalerSpec(
                    scale_target_ref=k8s.V2CrossVersionObjectReference(kind="Deployment", name="x"),
                    max_replicas=0,
                ),
            ),
        )
    assert invalid.value.status == 422
    causes = json.loads(invalid.value.body)["details"]["causes"]
    assert {
        "reason": "FieldValueInvalid",
        "message": "Invalid value: 0: must be greater than 0",
        "field": "spec.maxReplicas",
    } in causes

    v1.delete_namespaced_horizontal_pod_autoscaler("py", namespace)
    assert v2.list_namespaced_horizontal_pod_autoscaler(namespace).items == []


def test_a_v1_watch_sees_what_v2_writes(
    api_client: kubernetes.client.ApiClient, namespace: str
) -> None:
    v1 = k8s.AutoscalingV1Api(api_client)
    v2 = k8s.AutoscalingV2Api(api_client)
    start = v1.list_namespaced_horizontal_pod_autoscaler(namespace).metadata.resource_version
    seen: list[tuple[str, str, Any]] = []
    done = threading.Event()

    def follow() -> None:
        stream = watch.Watch()
        for event in stream.stream(
            v1.list_namespaced_horizontal_pod_autoscaler,
            namespace,
            resource_version=start,
            timeout_seconds=20,
        ):
            obj = event["object"]
            seen.append(
                (event["type"], obj.api_version, obj.spec.target_cpu_utilization_percentage)
            )
            if event["type"] == "DELETED":
                stream.stop()
        done.set()

    thread = threading.Thread(target=follow)
    thread.start()
    v2.create_namespaced_horizontal_pod_autoscaler(namespace, _hpa_v2("watched"))
    v2.patch_namespaced_horizontal_pod_autoscaler(
        "watched",
        namespace,
        {
            "spec": {
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 65},
                        },
                    }
                ]
            }
        },
    )
    v2.delete_namespaced_horizontal_pod_autoscaler("watched", namespace)
    assert done.wait(30)
    thread.join()
    assert seen == [
        ("ADDED", "autoscaling/v1", 50),
        ("MODIFIED", "autoscaling/v1", 65),
        ("DELETED", "autoscaling/v1", 65),
    ]
