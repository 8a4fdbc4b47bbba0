"""autoscaling/v1: Scale, and the HorizontalPodAutoscaler as v1 shows it.

Scale is the view of any scalable object that its ``/scale`` subresource serves: ``kubectl
scale`` and the HorizontalPodAutoscaler read and write a Deployment's, ReplicaSet's or
StatefulSet's replica count through this kind; it has no resource path of its own.

The HorizontalPodAutoscaler here is autoscaling/v2's (``kube.api.kinds.autoscaling_v2``) in
v1's older shape: one CPU utilization target (``spec.targetCPUUtilizationPercentage``, the first
CPU metric's) and its current value (``status.currentCPUUtilizationPercentage``).  The objects
are stored at v2; ``to_v1`` and ``to_v2`` convert as upstream's v1 conversion does, so nothing a
v1 client reads and writes back is lost: the other metrics, the current metrics, the behavior
and the conditions travel in ``autoscaling.alpha.kubernetes.io/*`` annotations, which are never
stored.  A v1 HPA that names no target gets v2's default 80% CPU metric on the way.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

import msgspec

from kube.api import walk
from kube.api.errors import ErrorList, Path
from kube.api.kinds import autoscaling_v2 as v2
from kube.api.meta_v1 import Resource
from kube.api.scheme import NOT_SERVED, SCHEME, kind
from kube.api.struct import Struct, meta


class ScaleSpec(Struct):
    """The desired replica count of the scaled object."""

    replicas: Annotated[
        int | None,
        meta(
            minimum=0,
            doc="Desired number of instances of the scaled object.",
            proto=1,
            omitempty=True,
        ),
    ] = None


class ScaleStatus(Struct):
    """The observed replica count, and the selector of the pods counted (as a string)."""

    replicas: Annotated[
        int | None, meta(doc="Actual number of observed instances of the scaled object.", proto=1)
    ] = None
    selector: Annotated[
        str | None,
        meta(
            doc="Label query over the pods counted, in label selector syntax.",
            proto=2,
            omitempty=True,
        ),
    ] = None


@kind(group="autoscaling", version="v1", plural="scales", verbs=NOT_SERVED)
class Scale(Resource):
    """The replica count of a scalable object, as its /scale subresource reads and writes it."""

    spec: Annotated[ScaleSpec | None, meta(doc="The desired state of the object.", proto=2)] = None
    status: Annotated[
        ScaleStatus | None, meta(doc="The current state of the object; read-only.", proto=3)
    ] = None


# HorizontalPodAutoscaler: the same objects as autoscaling/v2's, stored at v2.

ANNOTATION_PREFIX = "autoscaling.alpha.kubernetes.io/"
METRICS_ANNOTATION = ANNOTATION_PREFIX + "metrics"
CURRENT_METRICS_ANNOTATION = ANNOTATION_PREFIX + "current-metrics"
CONDITIONS_ANNOTATION = ANNOTATION_PREFIX + "conditions"
BEHAVIOR_ANNOTATION = ANNOTATION_PREFIX + "behavior"
ROUND_TRIP_ANNOTATIONS = (
    METRICS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
    ANNOTATION_PREFIX + "scale-down-tolerance",
    ANNOTATION_PREFIX + "scale-up-tolerance",
    CURRENT_METRICS_ANNOTATION,
    CONDITIONS_ANNOTATION,
)
"""What v1 carries of v2 in annotations; never stored, dropped whichever way an object goes."""


class CrossVersionObjectReference(v2.CrossVersionObjectReference):
    """The object scaled: kind, name, apiVersion."""


class HorizontalPodAutoscalerSpec(Struct):
    """What to scale, between which bounds, on which average CPU utilization."""

    scale_target_ref: Annotated[
        CrossVersionObjectReference | None,
        meta(proto=1, doc="The scalable object (its scale subresource) to scale."),
    ] = None
    min_replicas: v2.MinReplicas = None
    max_replicas: v2.MaxReplicas = None
    target_cpu_utilization_percentage: Annotated[
        int | None,
        meta(proto=4, doc="The target average CPU utilization, in percent of the requests."),
    ] = msgspec.field(default=None, name="targetCPUUtilizationPercentage")

    def set_defaults(self) -> None:
        if self.min_replicas is None:
            self.min_replicas = 1


class HorizontalPodAutoscalerStatus(Struct):
    """What the autoscaler last observed: replicas and the average CPU utilization."""

    observed_generation: v2.ObservedGeneration = None
    last_scale_time: v2.LastScaleTime = None
    current_replicas: Annotated[int | None, meta(proto=3)] = None
    desired_replicas: Annotated[int | None, meta(proto=4)] = None
    current_cpu_utilization_percentage: Annotated[int | None, meta(proto=5)] = msgspec.field(
        default=None, name="currentCPUUtilizationPercentage"
    )


def _targets(o: HorizontalPodAutoscaler, now: datetime.datetime) -> str:
    stored = to_v2(o)
    spec = stored.spec or v2.HorizontalPodAutoscalerSpec()
    statuses = (stored.status.current_metrics if stored.status else None) or []
    return v2.format_metrics(spec.metrics or [], statuses)


@kind(
    group="autoscaling",
    version="v1",
    plural="horizontalpodautoscalers",
    short_names=("hpa",),
    categories=("all",),
    subresources=("status",),
    columns=v2.hpa_columns(_targets),
    storage_version="v2",
)
class HorizontalPodAutoscaler(Resource):
    """An autoscaling/v2 HorizontalPodAutoscaler as v1 shows it (module docstring)."""

    spec: Annotated[
        HorizontalPodAutoscalerSpec | None,
        meta(proto=2, validated=False, doc="The specification of the autoscaler's behaviour."),
    ] = None
    status: Annotated[
        HorizontalPodAutoscalerStatus | None,
        meta(proto=3, validated=False, doc="The current information about the autoscaler."),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        # As upstream, the object validated is the one stored: errors name v2's fields
        # (a zero targetCPUUtilizationPercentage is spec.metrics[0]...averageUtilization).
        stored = to_v2(self)
        for field, value in (("spec", stored.spec), ("status", stored.status)):
            if value is not None:
                errors.extend(walk.validate_struct(value, path.child(field)))


# Conversion.  The annotations hold JSON as Go's encoding/json writes it: compact, fields in
# the Go structs' order, value (non-pointer) fields always, zero quantities as "0".

JSONObject = dict[str, Any]
T = TypeVar("T")


def _go_json(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _put(out: JSONObject, key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def _zero(value: Any) -> Any:
    return "0" if value is None else value


def _ref_v1(ref: v2.CrossVersionObjectReference | None) -> JSONObject:
    ref = ref or v2.CrossVersionObjectReference()
    out = {"kind": ref.kind or "", "name": ref.name or ""}
    _put(out, "apiVersion", ref.api_version)
    return out


def _metric_name(metric: v2.MetricIdentifier | None) -> str:
    return (metric.name if metric else None) or ""


def _selector(metric: v2.MetricIdentifier | None) -> Any:
    return msgspec.to_builtins(metric.selector) if metric and metric.selector else None


def _always(out: JSONObject, key: str, value: Any) -> None:
    out[key] = _zero(value)


def _metric_v1(metric: v2.MetricSpec | v2.MetricStatus) -> JSONObject:
    """A v2 metric, spec or status, in v1's annotation shape (upstream's autoscaling/v1
    MetricSpec and MetricStatus): a spec's numbers are ``target*`` keys, a status's
    ``current*`` ones, and a status's values are Go values where a spec's are pointers."""
    status = isinstance(metric, v2.MetricStatus)
    word = "current" if status else "target"
    maybe = _always if status else _put

    def numbers(source: Any) -> Any:
        return getattr(source, word) or v2.MetricTarget()

    out: JSONObject = {"type": metric.type or ""}
    if metric.object is not None:
        got = numbers(metric.object)
        source: JSONObject = {
            "target": _ref_v1(metric.object.described_object),
            "metricName": _metric_name(metric.object.metric),
            f"{word}Value": _zero(got.value),
        }
        _put(source, "selector", _selector(metric.object.metric))
        _put(source, "averageValue", got.average_value)
        out["object"] = source
    if metric.pods is not None:
        source = {
            "metricName": _metric_name(metric.pods.metric),
            f"{word}AverageValue": _zero(numbers(metric.pods).average_value),
        }
        _put(source, "selector", _selector(metric.pods.metric))
        out["pods"] = source
    for attr, key in (("resource", "resource"), ("container_resource", "containerResource")):
        resource = getattr(metric, attr)
        if resource is None:
            continue
        got = numbers(resource)
        source = {"name": resource.name or ""}
        _put(source, f"{word}AverageUtilization", got.average_utilization)
        maybe(source, f"{word}AverageValue", got.average_value)
        if attr == "container_resource":
            source["container"] = resource.container or ""
        out[key] = source
    if metric.external is not None:
        got = numbers(metric.external)
        source = {"metricName": _metric_name(metric.external.metric)}
        _put(source, "metricSelector", _selector(metric.external.metric))
        maybe(source, f"{word}Value", got.value)
        _put(source, f"{word}AverageValue", got.average_value)
        out["external"] = source
    return out


def _identifier_v2(source: JSONObject, selector_key: str) -> JSONObject:
    out: JSONObject = {"name": source.get("metricName", "")}
    _put(out, "selector", source.get(selector_key))
    return out


def _numbers_v2(target_type: str | None, **values: Any) -> JSONObject:
    """A v2 MetricTarget (given its type) or MetricValueStatus (type None), unset values out."""
    out: JSONObject = {} if target_type is None else {"type": target_type}
    for key, value in values.items():
        _put(out, key, value)
    return out


def _metric_v2(raw: JSONObject, cls: type[Any]) -> JSONObject:
    """The inverse of ``_metric_v1``: a v1 annotation's metric as v2 JSON of ``cls`` (upstream's
    v1 conversion picks a spec's target type from the values present)."""
    status = cls is v2.MetricStatus
    word = "current" if status else "target"

    def maybe(value: Any) -> Any:
        """A value Go's status holds as a value, its spec as a pointer."""
        return _zero(value) if status else value

    out: JSONObject = {"type": raw.get("type")}
    if isinstance(found := raw.get("object"), dict):
        average = found.get("averageValue")
        kind = None if status else (v2.VALUE if average is None else v2.AVERAGE_VALUE)
        out["object"] = {
            "describedObject": found.get("target") or {},  # the same fields in both
            "metric": _identifier_v2(found, "selector"),
            word: _numbers_v2(kind, value=_zero(found.get(f"{word}Value")), averageValue=average),
        }
    if isinstance(found := raw.get("pods"), dict):
        kind = None if status else v2.AVERAGE_VALUE
        average = _zero(found.get(f"{word}AverageValue"))
        out["pods"] = {
            "metric": _identifier_v2(found, "selector"),
            word: _numbers_v2(kind, averageValue=average),
        }
    for key in ("resource", "containerResource"):
        if not isinstance(found := raw.get(key), dict):
            continue
        utilization = found.get(f"{word}AverageUtilization")
        kind = None if status else (v2.AVERAGE_VALUE if utilization is None else v2.UTILIZATION)
        source: JSONObject = {"name": found.get("name")}
        if key == "containerResource":
            source["container"] = found.get("container")
        source[word] = _numbers_v2(
            kind,
            averageValue=maybe(found.get(f"{word}AverageValue")),
            averageUtilization=utilization,
        )
        out[key] = source
    if isinstance(found := raw.get("external"), dict):
        value = found.get(f"{word}Value")
        kind = None if status else (v2.AVERAGE_VALUE if value is None else v2.VALUE)
        out["external"] = {
            "metric": _identifier_v2(found, "metricSelector"),
            word: _numbers_v2(
                kind, value=maybe(value), averageValue=found.get(f"{word}AverageValue")
            ),
        }
    return out


# The behavior annotation holds upstream's internal type, which has no JSON tags: its keys are
# the Go field names, and unset pointers are null.

_RULES_FIELDS = (
    ("StabilizationWindowSeconds", "stabilizationWindowSeconds"),
    ("SelectPolicy", "selectPolicy"),
    ("Policies", "policies"),
    ("Tolerance", "tolerance"),
)
_POLICY_FIELDS = (("Type", "type"), ("Value", "value"), ("PeriodSeconds", "periodSeconds"))


def _behavior_annotation(behavior: v2.HorizontalPodAutoscalerBehavior) -> str:
    def rules(value: v2.HPAScalingRules | None) -> JSONObject | None:
        if value is None:
            return None
        raw = msgspec.to_builtins(value)
        out: JSONObject = {go: raw.get(name) for go, name in _RULES_FIELDS}
        if value.policies is not None:
            out["Policies"] = [
                {
                    "Type": p.type or "",
                    "Value": p.value or 0,
                    "PeriodSeconds": p.period_seconds or 0,
                }
                for p in value.policies
            ]
        return out

    return _go_json({"ScaleUp": rules(behavior.scale_up), "ScaleDown": rules(behavior.scale_down)})


def _go_field(raw: Any, go: str) -> Any:
    """``raw[go]`` matched case-insensitively, as Go's encoding/json reads it (None: absent)."""
    if isinstance(raw, dict):
        for key, value in raw.items():
            if key.lower() == go.lower():
                return value
    return None


def _from_go(raw: Any, fields: Sequence[tuple[str, str]]) -> JSONObject:
    found = ((name, _go_field(raw, go)) for go, name in fields)
    return {name: value for name, value in found if value is not None}


def _behavior_of(text: str) -> v2.HorizontalPodAutoscalerBehavior | None:
    """The behavior an annotation holds; None if it holds none or is not readable."""
    raw = _loads(text)
    out: JSONObject = {}
    for go, name in (("ScaleUp", "scaleUp"), ("ScaleDown", "scaleDown")):
        found = _go_field(raw, go)
        if not isinstance(found, dict):
            continue
        rules = _from_go(found, _RULES_FIELDS)
        if isinstance(rules.get("policies"), list):
            rules["policies"] = [_from_go(p, _POLICY_FIELDS) for p in rules["policies"]]
        out[name] = rules
    if not out:
        return None
    try:
        return msgspec.convert(out, v2.HorizontalPodAutoscalerBehavior)
    except msgspec.ValidationError:
        return None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _without_round_trip(annotations: dict[str, str] | None) -> dict[str, str] | None:
    if not annotations or not any(key in annotations for key in ROUND_TRIP_ANNOTATIONS):
        return annotations
    kept = {k: v for k, v in annotations.items() if k not in ROUND_TRIP_ANNOTATIONS}
    return kept or None


def _is_cpu(resource: Any) -> bool:
    return resource is not None and resource.name == "cpu"


def to_v1(obj: v2.HorizontalPodAutoscaler) -> HorizontalPodAutoscaler:
    """A stored HPA as autoscaling/v1 shows it (upstream's v1 conversion)."""
    spec = obj.spec or v2.HorizontalPodAutoscalerSpec()
    status = obj.status or v2.HorizontalPodAutoscalerStatus()
    metrics = spec.metrics or []
    annotations = dict(_without_round_trip(obj.metadata.annotations) or {})
    target_cpu = None
    for metric in metrics:
        if metric.type == v2.RESOURCE and _is_cpu(metric.resource):
            assert metric.resource is not None
            target_cpu = (
                metric.resource.target.average_utilization if metric.resource.target else None
            )
            break
    other = [
        _metric_v1(m)
        for m in metrics
        if not (
            m.type == v2.RESOURCE
            and _is_cpu(m.resource)
            and m.resource is not None
            and m.resource.target is not None
            and m.resource.target.average_utilization is not None
        )
    ]
    if other:
        annotations[METRICS_ANNOTATION] = _go_json(other)
    current_cpu = None
    for current in status.current_metrics or []:
        if current.type == v2.RESOURCE and _is_cpu(current.resource):
            assert current.resource is not None
            if (
                current.resource.current
                and current.resource.current.average_utilization is not None
            ):
                current_cpu = current.resource.current.average_utilization
    if status.current_metrics:
        annotations[CURRENT_METRICS_ANNOTATION] = _go_json(
            [_metric_v1(m) for m in status.current_metrics]
        )
    if spec.behavior is not None:
        annotations[BEHAVIOR_ANNOTATION] = _behavior_annotation(spec.behavior)
    if status.conditions:
        annotations[CONDITIONS_ANNOTATION] = _go_json(
            [msgspec.to_builtins(c) for c in status.conditions]
        )
    ref = spec.scale_target_ref
    return HorizontalPodAutoscaler(
        api_version=HorizontalPodAutoscaler.API_VERSION,
        kind=HorizontalPodAutoscaler.KIND,
        metadata=msgspec.structs.replace(obj.metadata, annotations=annotations or None),
        spec=HorizontalPodAutoscalerSpec(
            scale_target_ref=CrossVersionObjectReference(
                kind=ref.kind if ref else "",
                name=ref.name if ref else "",
                api_version=ref.api_version if ref else None,
            ),
            min_replicas=spec.min_replicas,
            max_replicas=spec.max_replicas or 0,
            target_cpu_utilization_percentage=target_cpu,
        ),
        status=HorizontalPodAutoscalerStatus(
            observed_generation=status.observed_generation,
            last_scale_time=status.last_scale_time,
            current_replicas=status.current_replicas or 0,
            desired_replicas=status.desired_replicas or 0,
            current_cpu_utilization_percentage=current_cpu,
        ),
    )


def _listed(
    annotations: dict[str, str],
    key: str,
    cls: type[T],
    convert: Callable[[Any, type[T]], JSONObject] | None = None,
) -> list[T] | None:
    """The items an annotation lists, converted to v2 JSON if need be, as ``cls``; None when
    it is absent or holds anything a v2 object could not (it is then ignored)."""
    found = _loads(annotations[key]) if key in annotations else None
    if not isinstance(found, list):
        return None
    try:
        return [
            msgspec.convert(item if convert is None else convert(item, cls), cls) for item in found
        ]
    except (msgspec.ValidationError, TypeError, AttributeError):
        return None


def to_v2(obj: HorizontalPodAutoscaler) -> v2.HorizontalPodAutoscaler:
    """An autoscaling/v1 HPA as it is stored (upstream's v1 conversion, and the 80% CPU
    metric of an HPA that names none)."""
    spec = obj.spec or HorizontalPodAutoscalerSpec()
    status = obj.status or HorizontalPodAutoscalerStatus()
    annotations = obj.metadata.annotations or {}
    metrics: list[v2.MetricSpec] = []
    if spec.target_cpu_utilization_percentage is not None:
        metrics.append(v2.cpu_utilization_metric(spec.target_cpu_utilization_percentage))
    other = _listed(annotations, METRICS_ANNOTATION, v2.MetricSpec, _metric_v2)
    if other is not None:
        metrics = [*other, *metrics]
    if not metrics:
        metrics = [v2.cpu_utilization_metric(v2.DEFAULT_CPU_UTILIZATION)]
    current: list[v2.MetricStatus] | None = None
    if status.current_cpu_utilization_percentage is not None:
        current = [
            v2.MetricStatus(
                type=v2.RESOURCE,
                resource=v2.ResourceMetricStatus(
                    name="cpu",
                    current=v2.MetricValueStatus(
                        average_utilization=status.current_cpu_utilization_percentage
                    ),
                ),
            )
        ]
    statuses = _listed(annotations, CURRENT_METRICS_ANNOTATION, v2.MetricStatus, _metric_v2)
    if statuses is not None:
        current = statuses
    conditions = _listed(annotations, CONDITIONS_ANNOTATION, v2.HorizontalPodAutoscalerCondition)
    behavior = (
        _behavior_of(annotations[BEHAVIOR_ANNOTATION])
        if BEHAVIOR_ANNOTATION in annotations
        else None
    )
    ref = spec.scale_target_ref
    return v2.HorizontalPodAutoscaler(
        api_version=v2.HorizontalPodAutoscaler.API_VERSION,
        kind=v2.HorizontalPodAutoscaler.KIND,
        metadata=msgspec.structs.replace(
            obj.metadata, annotations=_without_round_trip(obj.metadata.annotations)
        ),
        spec=v2.HorizontalPodAutoscalerSpec(
            scale_target_ref=v2.CrossVersionObjectReference(
                kind=ref.kind, name=ref.name, api_version=ref.api_version
            )
            if ref
            else None,
            min_replicas=spec.min_replicas,
            max_replicas=spec.max_replicas,
            metrics=metrics,
            behavior=behavior,
        ),
        status=v2.HorizontalPodAutoscalerStatus(
            observed_generation=status.observed_generation,
            last_scale_time=status.last_scale_time,
            current_replicas=status.current_replicas or None,
            desired_replicas=status.desired_replicas or 0,
            current_metrics=current,
            conditions=conditions,
        ),
    )


SCHEME.add_conversion(v2.HorizontalPodAutoscaler, HorizontalPodAutoscaler, to_v1)
SCHEME.add_conversion(HorizontalPodAutoscaler, v2.HorizontalPodAutoscaler, to_v2)
