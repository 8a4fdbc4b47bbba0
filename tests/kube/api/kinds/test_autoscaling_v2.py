"""autoscaling/v2 and v1 HorizontalPodAutoscaler: defaults, validation, the TARGETS cell and the
conversion between the versions (upstream's pkg/apis/autoscaling and its v1 conversion)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from kube.api.kinds import autoscaling_v1 as v1
from kube.api.kinds import autoscaling_v2 as v2
from kube.api.scheme import SCHEME
from tests.kube.api.kinds.helpers import (
    CREATED,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    decode,
    merge,
    named_cells,
    problems,
)

REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
BASE: dict[str, Any] = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "web", "namespace": "default", "creationTimestamp": CREATED},
    "spec": {"scaleTargetRef": REF, "maxReplicas": 5},
}


def _cpu(percent: int) -> dict[str, Any]:
    return {
        "type": "Resource",
        "resource": {
            "name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": percent},
        },
    }


def _hpa(**spec: Any) -> v2.HorizontalPodAutoscaler:
    hpa: v2.HorizontalPodAutoscaler = decode(
        merge(BASE, {"spec": spec}), v2.HorizontalPodAutoscaler
    )
    return hpa


def _builtins(obj: Any) -> Any:
    return msgspec.to_builtins(obj)


def test_defaults_fill_min_replicas_the_cpu_metric_and_a_given_behavior() -> None:
    hpa = _hpa(
        behavior={"scaleDown": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}
    )
    spec = _builtins(hpa.spec)
    assert spec["minReplicas"] == 1
    assert spec["metrics"] == [_cpu(80)]
    assert spec["behavior"] == {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15},
            ],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 300,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
        },
    }
    assert "behavior" not in _builtins(_hpa().spec)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, [], id="valid"),
        pytest.param(
            {"minReplicas": 0}, [("spec.minReplicas", INVALID)], id="scale-to-zero-gate-off"
        ),
        pytest.param(
            {"minReplicas": 6},
            [("spec.maxReplicas", INVALID)],
            id="max-below-min",
        ),
        pytest.param(
            {"scaleTargetRef": {"kind": None}},
            [("spec.scaleTargetRef.kind", REQUIRED)],
            id="reference-without-kind",
        ),
        pytest.param(
            {"scaleTargetRef": {"kind": "Deploy/ment", "name": ".."}},
            [("spec.scaleTargetRef.kind", INVALID), ("spec.scaleTargetRef.name", INVALID)],
            id="reference-not-path-segments",
        ),
        pytest.param(
            {"metrics": [{"type": "Memory"}]},
            [("spec.metrics[0].type", NOT_SUPPORTED)],
            id="unknown-metric-type",
        ),
        pytest.param(
            {
                "metrics": [
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {"name": "qps"},
                            "target": {"type": "Value", "value": "1"},
                        },
                    }
                ]
            },
            [("spec.metrics[0].pods.target.averageValue", REQUIRED)],
            id="pods-needs-average-value",
        ),
        pytest.param(
            {
                "metrics": [
                    {
                        "type": "External",
                        "external": {
                            "metric": {"name": "queue"},
                            "target": {"type": "Value", "value": "-1", "averageValue": "2"},
                        },
                    }
                ]
            },
            [
                ("spec.metrics[0].external.target.value", FORBIDDEN),
                ("spec.metrics[0].external.target.value", INVALID),
            ],
            id="external-value-and-average",
        ),
        pytest.param(
            {
                "metrics": [
                    {
                        "type": "ContainerResource",
                        "containerResource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 0},
                        },
                    }
                ]
            },
            [
                ("spec.metrics[0].containerResource.container", REQUIRED),
                ("spec.metrics[0].containerResource.target.averageUtilization", INVALID),
            ],
            id="container-resource",
        ),
        pytest.param(
            {"behavior": {"scaleUp": {"stabilizationWindowSeconds": -1, "policies": []}}},
            [
                ("spec.behavior.scaleUp.policies", REQUIRED),
                ("spec.behavior.scaleUp.stabilizationWindowSeconds", INVALID),
            ],
            id="empty-policies-negative-window",
        ),
        pytest.param(
            {"behavior": {"scaleDown": {"tolerance": "-0.1"}}},
            [("spec.behavior.scaleDown.tolerance", INVALID)],
            id="negative-tolerance",
        ),
    ],
)
def test_validation(spec: dict[str, Any], expected: list[tuple[str, Any]]) -> None:
    assert problems(_hpa(**spec)) == expected


@pytest.mark.parametrize(
    ("metrics", "current", "targets"),
    [
        pytest.param([], [], "cpu: <unknown>/80%", id="default"),
        pytest.param([_cpu(50)], [], "cpu: <unknown>/50%", id="unknown"),
        pytest.param(
            [_cpu(50)],
            [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "current": {"averageUtilization": 72}},
                }
            ],
            "cpu: 72%/50%",
            id="utilization",
        ),
        pytest.param(
            [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "memory",
                        "target": {"type": "AverageValue", "averageValue": "512Mi"},
                    },
                }
            ],
            [
                {
                    "type": "Resource",
                    "resource": {"name": "memory", "current": {"averageValue": "300Mi"}},
                }
            ],
            "memory: 300Mi/512Mi",
            id="average-value",
        ),
        pytest.param(
            [
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": "q"},
                        "target": {"type": "AverageValue", "averageValue": "30"},
                    },
                },
                {
                    "type": "Object",
                    "object": {
                        "describedObject": {"kind": "Ingress", "name": "main"},
                        "metric": {"name": "rps"},
                        "target": {"type": "Value", "value": "10k"},
                    },
                },
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "qps"},
                        "target": {"type": "AverageValue", "averageValue": "1"},
                    },
                },
            ],
            [],
            "<unknown>/30 (avg), <unknown>/10k + 1 more...",
            id="three-metrics",
        ),
    ],
)
def test_targets_cell(metrics: list[Any], current: list[Any], targets: str) -> None:
    hpa = _hpa(metrics=metrics)
    assert hpa.status is not None
    hpa.status.current_metrics = msgspec.convert(current, list[v2.MetricStatus])
    cells = named_cells(hpa)
    assert cells == {
        "Name": "web",
        "Reference": "Deployment/web",
        "Targets": targets,
        "MinPods": "1",
        "MaxPods": 5,
        "Replicas": 0,
        "Age": "5m",
    }
    assert named_cells(SCHEME.convert(hpa, v1.HorizontalPodAutoscaler))["Targets"] == targets


def test_v1_shows_the_cpu_target_and_carries_the_rest_in_annotations() -> None:
    pods = {
        "type": "Pods",
        "pods": {
            "metric": {"name": "qps"},
            "target": {"type": "AverageValue", "averageValue": "1k"},
        },
    }
    hpa = _hpa(metrics=[_cpu(50), pods], behavior={"scaleUp": {"selectPolicy": "Disabled"}})
    assert hpa.status is not None
    hpa.status.current_metrics = [
        v2.MetricStatus(
            type="Resource",
            resource=v2.ResourceMetricStatus(
                name="cpu",
                current=v2.MetricValueStatus(average_utilization=40, average_value="200m"),
            ),
        )
    ]
    hpa.status.conditions = [v2.HorizontalPodAutoscalerCondition(type="AbleToScale", status="True")]
    shown = SCHEME.convert(hpa, v1.HorizontalPodAutoscaler)
    assert _builtins(shown.spec) == {
        "scaleTargetRef": REF,
        "minReplicas": 1,
        "maxReplicas": 5,
        "targetCPUUtilizationPercentage": 50,
    }
    assert _builtins(shown.status) == {
        "currentReplicas": 0,
        "desiredReplicas": 0,
        "currentCPUUtilizationPercentage": 40,
    }
    annotations = shown.metadata.annotations or {}
    assert json.loads(annotations[v1.METRICS_ANNOTATION]) == [
        {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "1k"}}
    ]
    assert annotations[v1.CURRENT_METRICS_ANNOTATION] == (
        '[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":40,'
        '"currentAverageValue":"200m"}}]'
    )
    assert json.loads(annotations[v1.CONDITIONS_ANNOTATION]) == [
        {"type": "AbleToScale", "status": "True"}
    ]
    assert json.loads(annotations[v1.BEHAVIOR_ANNOTATION])["ScaleUp"]["SelectPolicy"] == "Disabled"
    assert hpa.metadata.annotations is None  # the stored object is left as it was

    back = SCHEME.convert(shown, v2.HorizontalPodAutoscaler)
    assert back.metadata.annotations is None
    assert _builtins(back.spec) == {**_builtins(hpa.spec), "metrics": [pods, _cpu(50)]}
    assert _builtins(back.status) == _builtins(hpa.status)


def test_v1_objects_convert_to_the_stored_version() -> None:
    written = decode(
        {
            "apiVersion": "autoscaling/v1",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {
                "name": "web",
                "namespace": "default",
                "annotations": {
                    v1.METRICS_ANNOTATION: "not json",
                    # Not what a v2 object can hold: ignored, as unreadable annotations are.
                    v1.CURRENT_METRICS_ANNOTATION: '[{"type":"Pods","pods":{"metricName":5}}]',
                    "team": "blue",
                },
            },
            "spec": {"scaleTargetRef": REF, "maxReplicas": 3},
            "status": {
                "currentReplicas": 2,
                "desiredReplicas": 2,
                "currentCPUUtilizationPercentage": 90,
            },
        },
        v1.HorizontalPodAutoscaler,
    )
    assert problems(written) == []
    stored = SCHEME.convert(written, v2.HorizontalPodAutoscaler)
    assert stored.metadata.annotations == {"team": "blue"}
    assert _builtins(stored.spec) == {
        "scaleTargetRef": REF,
        "minReplicas": 1,
        "maxReplicas": 3,
        "metrics": [_cpu(80)],
    }
    assert _builtins(stored.status) == {
        "currentReplicas": 2,
        "desiredReplicas": 2,
        "currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 90}}}
        ],
    }


def test_v1_validation() -> None:
    bad = decode(
        merge(
            BASE,
            {
                "apiVersion": "autoscaling/v1",
                "spec": {"maxReplicas": 0, "targetCPUUtilizationPercentage": 0},
            },
        ),
        v1.HorizontalPodAutoscaler,
    )
    # Upstream validates the stored form, so the errors name v2's fields.
    assert problems(bad) == [
        ("spec.maxReplicas", INVALID),
        ("spec.maxReplicas", INVALID),
        ("spec.metrics[0].resource.target.averageUtilization", INVALID),
    ]


def test_both_versions_are_one_resource_stored_at_v2() -> None:
    stored = SCHEME.for_class(v2.HorizontalPodAutoscaler)
    shown = SCHEME.for_class(v1.HorizontalPodAutoscaler)
    assert (shown.plural, shown.short_names, shown.categories) == (
        stored.plural,
        ("hpa",),
        ("all",),
    )
    assert SCHEME.storage_class(shown) is SCHEME.storage_class(stored) is v2.HorizontalPodAutoscaler
    assert shown.storage_api_version == stored.storage_api_version == "autoscaling/v2"


SELECTOR = {"matchLabels": {"queue": "jobs"}}
EVERY_SOURCE: list[dict[str, Any]] = [
    {
        "type": "Object",
        "object": {
            "describedObject": {
                "kind": "Ingress",
                "name": "main",
                "apiVersion": "networking.k8s.io/v1",
            },
            "metric": {"name": "rps", "selector": SELECTOR},
            "target": {"type": "AverageValue", "value": "10", "averageValue": "2"},
        },
    },
    {
        "type": "Pods",
        "pods": {
            "metric": {"name": "qps"},
            "target": {"type": "AverageValue", "averageValue": "1k"},
        },
    },
    {
        "type": "Resource",
        "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "512Mi"}},
    },
    {
        "type": "ContainerResource",
        "containerResource": {
            "name": "cpu",
            "container": "app",
            "target": {"type": "Utilization", "averageUtilization": 60},
        },
    },
    {
        "type": "External",
        "external": {
            "metric": {"name": "queue", "selector": SELECTOR},
            "target": {"type": "Value", "value": "30"},
        },
    },
]
EVERY_STATUS: list[dict[str, Any]] = [
    {
        "type": "Object",
        "object": {
            "metric": {"name": "rps"},
            "current": {"value": "12", "averageValue": "3"},
            "describedObject": {"kind": "Ingress", "name": "main"},
        },
    },
    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "current": {"averageValue": "900"}}},
    {
        "type": "Resource",
        "resource": {
            "name": "memory",
            "current": {"averageValue": "300Mi", "averageUtilization": 40},
        },
    },
    {
        "type": "ContainerResource",
        "containerResource": {
            "name": "cpu",
            "container": "app",
            "current": {"averageValue": "250m", "averageUtilization": 70},
        },
    },
    {
        "type": "External",
        "external": {
            "metric": {"name": "queue", "selector": SELECTOR},
            "current": {"value": "25", "averageValue": "5"},
        },
    },
]


def test_every_metric_source_survives_a_trip_through_v1() -> None:
    hpa = _hpa(metrics=EVERY_SOURCE)
    assert problems(hpa) == []
    assert hpa.status is not None
    hpa.status.current_metrics = msgspec.convert(EVERY_STATUS, list[v2.MetricStatus])
    shown = SCHEME.convert(hpa, v1.HorizontalPodAutoscaler)
    annotations = shown.metadata.annotations or {}
    assert json.loads(annotations[v1.METRICS_ANNOTATION])[0] == {
        "type": "Object",
        "object": {
            "target": {"kind": "Ingress", "name": "main", "apiVersion": "networking.k8s.io/v1"},
            "metricName": "rps",
            "targetValue": "10",
            "selector": SELECTOR,
            "averageValue": "2",
        },
    }
    assert json.loads(annotations[v1.CURRENT_METRICS_ANNOTATION])[4] == {
        "type": "External",
        "external": {
            "metricName": "queue",
            "metricSelector": SELECTOR,
            "currentValue": "25",
            "currentAverageValue": "5",
        },
    }
    back = SCHEME.convert(shown, v2.HorizontalPodAutoscaler)
    assert _builtins(back.spec)["metrics"] == EVERY_SOURCE
    assert _builtins(back.status)["currentMetrics"] == EVERY_STATUS
