"""autoscaling/v2: the HorizontalPodAutoscaler, in the version it is stored at.

An HPA names a scalable object (``scaleTargetRef``), the bounds of its replica count and the
metrics to scale on; ``behavior`` limits how fast it may scale each way.  The controller that
acts on it is ``controlplane.controllers.horizontal``; the API is complete here: upstream's
validation
(``pkg/apis/autoscaling/validation``: one metric source matching ``type``, target rules, scaling
policies and windows), upstream's defaults (``minReplicas`` 1, the 80% CPU metric when none is
given, every unset part of a given ``behavior`` filled from the default rules) and the server-side
table of ``kubectl get hpa``, whose TARGETS cell is rendered here as upstream's printer renders it
(``cpu: <unknown>/50%``).

autoscaling/v1 serves the same objects (``kube.api.kinds.autoscaling_v1``); they are stored at
this version.  The HPAScaleToZero gate is off, as upstream's default: ``minReplicas`` 0 is
refused.  ``tolerance`` (HPAConfigurableTolerance) is served, kept and checked.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from kube.api import names, quantity
from kube.api.errors import ErrorList, Path
from kube.api.kinds.apps_v1 import CONDITION_STATUSES
from kube.api.meta_v1 import LabelSelector, Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import DNS1123_LABEL, QuantityValue, Struct, Time, atomic, meta

GROUP = "autoscaling"

DEFAULT_CPU_UTILIZATION = 80
"""The target of the metric an HPA gets when it names none (upstream's DefaultCPUUtilization)."""
MAX_PERIOD_SECONDS = 1800
MAX_STABILIZATION_WINDOW_SECONDS = 3600

RESOURCE, CONTAINER_RESOURCE, PODS, OBJECT, EXTERNAL = (
    "Resource",
    "ContainerResource",
    "Pods",
    "Object",
    "External",
)
METRIC_SOURCE_TYPES = (CONTAINER_RESOURCE, EXTERNAL, OBJECT, PODS, RESOURCE)
UTILIZATION, VALUE, AVERAGE_VALUE = "Utilization", "Value", "AverageValue"
METRIC_TARGET_TYPES = (AVERAGE_VALUE, UTILIZATION, VALUE)
POLICY_TYPES = ("Percent", "Pods")
SELECT_POLICIES = ("Disabled", "Max", "Min")


def absent_reference(path: Path, errors: ErrorList) -> None:
    """What a missing CrossVersionObjectReference lacks: its kind and its name."""
    errors.required(path.child("kind"))
    errors.required(path.child("name"))


class CrossVersionObjectReference(Struct):
    """The object scaled (or described by an Object metric): kind, name, apiVersion."""

    kind: Annotated[str | None, meta(required=True, proto=1, doc="Kind of the referent.")] = None
    name: Annotated[str | None, meta(required=True, proto=2, doc="Name of the referent.")] = None
    api_version: Annotated[
        str | None, meta(proto=3, omitempty=True, doc="API version of the referent.")
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        for field, value in (("kind", self.kind), ("name", self.name)):
            if value:
                errors.extend_checked(path.child(field), value, names.is_path_segment_name(value))


def _sign(value: QuantityValue) -> int:
    """-1, 0 or 1; 1 for text that is no quantity (the quantity format check reports it)."""
    try:
        fraction = quantity.Quantity.parse(value).as_fraction()
    except quantity.QuantityError:
        return 1
    return (fraction > 0) - (fraction < 0)


def _positive(value: QuantityValue | None) -> bool:
    return value is None or _sign(value) > 0


def _not_negative(value: QuantityValue) -> bool:
    return _sign(value) >= 0


class MetricTarget(Struct):
    """The target of a metric: a value, an average value or an average utilization."""

    type: Annotated[str | None, meta(proto=1, doc="Utilization, Value or AverageValue.")] = None
    value: Annotated[QuantityValue | None, meta(proto=2, doc="The target value.")] = None
    average_value: Annotated[
        QuantityValue | None,
        meta(proto=3, doc="The target average of the metric across the relevant pods."),
    ] = None
    average_utilization: Annotated[
        int | None,
        meta(proto=4, doc="The target average utilization, in percent of the pods' requests."),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.type:
            errors.required(path.child("type"), "must specify a metric target type")
        elif self.type not in METRIC_TARGET_TYPES:
            errors.not_supported(path.child("type"), self.type, METRIC_TARGET_TYPES)
        for field, value in (("value", self.value), ("averageValue", self.average_value)):
            if not _positive(value):
                errors.invalid(path.child(field), value, "must be positive")
        if self.average_utilization is not None and self.average_utilization < 1:
            errors.invalid(
                path.child("averageUtilization"),
                self.average_utilization,
                "must be greater than 0",
            )


class MetricIdentifier(Struct):
    """A metric's name, and the selector passed to the metrics API with it."""

    name: Annotated[str | None, meta(proto=1, doc="The name of the metric.")] = None
    selector: Annotated[LabelSelector | None, meta(proto=2, doc="Scopes the metric further.")] = (
        None
    )

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.name:
            errors.required(path.child("name"), "must specify a metric name")
        else:
            errors.extend_checked(
                path.child("name"), self.name, names.is_path_segment_name(self.name)
            )


def _validate_utilization_or_value(
    target: MetricTarget | None, path: Path, errors: ErrorList
) -> None:
    """A Resource or ContainerResource target: an average utilization or an average value."""
    if target is None or (target.average_utilization is None and target.average_value is None):
        errors.required(
            path.child("target").child("averageUtilization"),
            "must set either a target raw value or a target utilization",
        )
    elif target.average_utilization is not None and target.average_value is not None:
        errors.forbidden(
            path.child("target").child("averageValue"),
            "may not set both a target raw value and a target utilization",
        )


def _required_target(target: MetricTarget | None, path: Path, errors: ErrorList) -> None:
    if target is None:
        errors.required(path.child("target").child("type"), "must specify a metric target type")


def _required_metric_and_target(
    metric: MetricIdentifier | None, target: MetricTarget | None, path: Path, errors: ErrorList
) -> None:
    if metric is None:
        errors.required(path.child("metric").child("name"), "must specify a metric name")
    _required_target(target, path, errors)


class ResourceMetricSource(Struct):
    """Scale on a resource (cpu, memory) of the target's pods, averaged over them."""

    name: Annotated[str | None, meta(proto=1, doc="The name of the resource.")] = None
    target: Annotated[MetricTarget | None, meta(proto=2, doc="The target value.")] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.name:
            errors.required(path.child("name"), "must specify a resource name")
        _required_target(self.target, path, errors)
        _validate_utilization_or_value(self.target, path, errors)


class ContainerResourceMetricSource(ResourceMetricSource):
    """Scale on a resource of one container of the target's pods."""

    container: Annotated[
        str | None, meta(proto=3, format=DNS1123_LABEL, doc="The name of the container.")
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        super().validate(path, errors)
        if not self.container:
            errors.required(path.child("container"), "must specify a container")


class PodsMetricSource(Struct):
    """Scale on a metric of each pod of the target (transactions per second), averaged."""

    metric: Annotated[MetricIdentifier | None, meta(proto=1, doc="The metric.")] = None
    target: Annotated[MetricTarget | None, meta(proto=2, doc="The target value.")] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _required_metric_and_target(self.metric, self.target, path, errors)
        if self.target is not None and self.target.average_value is None:
            errors.required(
                path.child("target").child("averageValue"),
                "must specify a positive target averageValue",
            )


class ObjectMetricSource(Struct):
    """Scale on a metric describing one object (hits per second of an Ingress)."""

    described_object: Annotated[
        CrossVersionObjectReference | None, meta(proto=1, doc="The object described.")
    ] = None
    target: Annotated[MetricTarget | None, meta(proto=2, doc="The target value.")] = None
    metric: Annotated[MetricIdentifier | None, meta(proto=3, doc="The metric.")] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.described_object is None:
            absent_reference(path.child("describedObject"), errors)
        _required_metric_and_target(self.metric, self.target, path, errors)
        if (
            self.target is not None
            and self.target.value is None
            and self.target.average_value is None
        ):
            errors.required(
                path.child("target").child("value"),
                "must set either a target value or averageValue",
            )


class ExternalMetricSource(Struct):
    """Scale on a metric from outside the cluster (the length of a queue)."""

    metric: Annotated[MetricIdentifier | None, meta(proto=1, doc="The metric.")] = None
    target: Annotated[MetricTarget | None, meta(proto=2, doc="The target value.")] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _required_metric_and_target(self.metric, self.target, path, errors)
        target = self.target
        if target is None:
            return
        if target.value is None and target.average_value is None:
            errors.required(
                path.child("target").child("value"),
                "must set either a target value for metric or a per-pod target",
            )
        elif target.value is not None and target.average_value is not None:
            errors.forbidden(
                path.child("target").child("value"),
                "may not set both a target value for metric and a per-pod target",
            )


_SOURCE_FIELDS = {
    OBJECT: ("object", "object"),
    PODS: ("pods", "pods"),
    RESOURCE: ("resource", "resource"),
    CONTAINER_RESOURCE: ("container_resource", "containerResource"),
    EXTERNAL: ("external", "external"),
}
"""Metric type -> (attribute, JSON name) of the source it needs."""


class MetricSpec(Struct):
    """One metric to scale on: its ``type`` and the one source of that type."""

    type: Annotated[
        str | None,
        meta(proto=1, doc="ContainerResource, External, Object, Pods or Resource."),
    ] = None
    object: Annotated[ObjectMetricSource | None, meta(proto=2)] = None
    pods: Annotated[PodsMetricSource | None, meta(proto=3)] = None
    resource: Annotated[ResourceMetricSource | None, meta(proto=4)] = None
    container_resource: Annotated[ContainerResourceMetricSource | None, meta(proto=7)] = None
    external: Annotated[ExternalMetricSource | None, meta(proto=5)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        """``type`` required and known, its source given, and no other source."""
        if not self.type:
            errors.required(path.child("type"), "must specify a metric source type")
        elif self.type not in METRIC_SOURCE_TYPES:
            errors.not_supported(path.child("type"), self.type, METRIC_SOURCE_TYPES)
        expected = _SOURCE_FIELDS.get(self.type or "")
        if expected is not None and getattr(self, expected[0]) is None:
            errors.required(
                path.child(expected[1]), "must populate information for the given metric source"
            )
        present = [
            json for attr, json in _SOURCE_FIELDS.values() if getattr(self, attr) is not None
        ]
        if len(present) > 1:
            for json in present:
                if expected is None or json != expected[1]:
                    errors.forbidden(path.child(json), "must populate the given metric source only")


class HPAScalingPolicy(Struct):
    """At most ``value`` pods (or percent of them) changed per ``periodSeconds``."""

    type: Annotated[str | None, meta(proto=1, doc="Pods or Percent.")] = None
    value: Annotated[int | None, meta(proto=2, doc="The change permitted; above zero.")] = None
    period_seconds: Annotated[
        int | None, meta(proto=3, doc="The window the policy holds over (1 to 1800 s).")
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.type not in POLICY_TYPES:
            errors.not_supported(path.child("type"), self.type or "", POLICY_TYPES)
        if (self.value or 0) <= 0:
            errors.invalid(path.child("value"), self.value or 0, "must be greater than zero")
        period = self.period_seconds or 0
        if period <= 0:
            errors.invalid(path.child("periodSeconds"), period, "must be greater than zero")
        elif period > MAX_PERIOD_SECONDS:
            errors.invalid(
                path.child("periodSeconds"),
                period,
                f"must be less than or equal to {MAX_PERIOD_SECONDS}",
            )


class HPAScalingRules(Struct):
    """How one direction of scaling is limited: a stabilization window and policies."""

    stabilization_window_seconds: Annotated[
        int | None,
        meta(proto=3, doc="Seconds of past recommendations considered (0 to 3600)."),
    ] = None
    select_policy: Annotated[
        str | None, meta(proto=1, doc="Which policy applies: Max (default), Min or Disabled.")
    ] = None
    policies: Annotated[
        list[HPAScalingPolicy] | None, atomic(proto=2, doc="The policies; at least one.")
    ] = None
    tolerance: Annotated[
        QuantityValue | None,
        meta(
            proto=4,
            doc="The ratio of current to desired metric value under which nothing "
            "changes (0.01 for 1%); the cluster-wide 10% when unset.",
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        window = self.stabilization_window_seconds
        if window is not None and window < 0:
            errors.invalid(
                path.child("stabilizationWindowSeconds"),
                window,
                "must be greater than or equal to zero",
            )
        elif window is not None and window > MAX_STABILIZATION_WINDOW_SECONDS:
            errors.invalid(
                path.child("stabilizationWindowSeconds"),
                window,
                f"must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}",
            )
        if self.select_policy is not None and self.select_policy not in SELECT_POLICIES:
            errors.not_supported(path.child("selectPolicy"), self.select_policy, SELECT_POLICIES)
        if not self.policies:
            errors.required(path.child("policies"), "must specify at least one Policy")
        if self.tolerance is not None and not _not_negative(self.tolerance):
            errors.invalid(
                path.child("tolerance"), self.tolerance, "must be greater than or equal to zero"
            )

    def filled_from(self, default: HPAScalingRules) -> None:
        """Give every unset field the default's value (upstream's GenerateHPA*Rules)."""
        if self.stabilization_window_seconds is None:
            self.stabilization_window_seconds = default.stabilization_window_seconds
        if self.select_policy is None:
            self.select_policy = default.select_policy
        if self.policies is None:
            self.policies = default.policies


def default_scale_up() -> HPAScalingRules:
    """Upstream's scale-up rules: no window; 4 pods or double, every 15 s, whichever is more."""
    return HPAScalingRules(
        stabilization_window_seconds=0,
        select_policy="Max",
        policies=[
            HPAScalingPolicy(type="Pods", value=4, period_seconds=15),
            HPAScalingPolicy(type="Percent", value=100, period_seconds=15),
        ],
    )


def default_scale_down() -> HPAScalingRules:
    """Upstream's scale-down rules: a 300 s window, then down to minReplicas at once."""
    return HPAScalingRules(
        stabilization_window_seconds=300,
        select_policy="Max",
        policies=[HPAScalingPolicy(type="Percent", value=100, period_seconds=15)],
    )


class HorizontalPodAutoscalerBehavior(Struct):
    """The scaling rules of each direction; unset parts get the defaults."""

    scale_up: Annotated[HPAScalingRules | None, meta(proto=1)] = None
    scale_down: Annotated[HPAScalingRules | None, meta(proto=2)] = None

    def set_defaults(self) -> None:
        for attr, default in (("scale_up", default_scale_up), ("scale_down", default_scale_down)):
            rules = getattr(self, attr)
            if rules is None:
                setattr(self, attr, default())
            else:
                rules.filled_from(default())


def cpu_utilization_metric(percent: int) -> MetricSpec:
    """A Resource metric on the pods' average CPU utilization."""
    return MetricSpec(
        type=RESOURCE,
        resource=ResourceMetricSource(
            name="cpu", target=MetricTarget(type=UTILIZATION, average_utilization=percent)
        ),
    )


# Fields both versions declare alike.
MinReplicas = Annotated[
    int | None, meta(proto=2, doc="The lower limit of the replica count; defaults to 1.")
]
MaxReplicas = Annotated[int | None, meta(proto=3, doc="The upper limit; not below minReplicas.")]
ObservedGeneration = Annotated[
    int | None, meta(proto=1, int64=True, doc="The generation the autoscaler last observed.")
]
LastScaleTime = Annotated[
    Time | None, meta(proto=2, doc="When the autoscaler last changed the replica count.")
]


class HorizontalPodAutoscalerSpec(Struct):
    """What to scale, between which bounds, on which metrics and how fast."""

    scale_target_ref: Annotated[
        CrossVersionObjectReference | None,
        meta(proto=1, doc="The scalable object (its scale subresource) to scale."),
    ] = None
    min_replicas: MinReplicas = None
    max_replicas: MaxReplicas = None
    metrics: Annotated[
        list[MetricSpec] | None,
        atomic(proto=4, doc="The metrics to scale on; defaults to 80% average CPU utilization."),
    ] = None
    behavior: Annotated[
        HorizontalPodAutoscalerBehavior | None,
        meta(proto=5, doc="The scaling behavior in each direction."),
    ] = None

    def set_defaults(self) -> None:
        if self.min_replicas is None:
            self.min_replicas = 1
        if not self.metrics:
            self.metrics = [cpu_utilization_metric(DEFAULT_CPU_UTILIZATION)]

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.scale_target_ref is None:
            absent_reference(path.child("scaleTargetRef"), errors)
        minimum, maximum = self.min_replicas, self.max_replicas or 0
        if minimum is not None and minimum < 1:
            errors.invalid(path.child("minReplicas"), minimum, "must be greater than or equal to 1")
        if maximum < 1:
            errors.invalid(path.child("maxReplicas"), maximum, "must be greater than 0")
        if minimum is not None and maximum < minimum:
            errors.invalid(
                path.child("maxReplicas"), maximum, "must be greater than or equal to `minReplicas`"
            )


class MetricValueStatus(Struct):
    """A metric's current value, average value or average utilization."""

    value: Annotated[QuantityValue | None, meta(proto=1)] = None
    average_value: Annotated[QuantityValue | None, meta(proto=2)] = None
    average_utilization: Annotated[int | None, meta(proto=3)] = None


class ResourceMetricStatus(Struct):
    """The current value of a resource metric of the target's pods."""

    name: Annotated[str | None, meta(proto=1)] = None
    current: Annotated[MetricValueStatus | None, meta(proto=2)] = None


class ContainerResourceMetricStatus(ResourceMetricStatus):
    """The current value of a resource metric of one container of the target's pods."""

    container: Annotated[str | None, meta(proto=3)] = None


class PodsMetricStatus(Struct):
    """The current value of a metric of each pod of the target."""

    metric: Annotated[MetricIdentifier | None, meta(proto=1)] = None
    current: Annotated[MetricValueStatus | None, meta(proto=2)] = None


class ObjectMetricStatus(PodsMetricStatus):
    """The current value of a metric describing one object."""

    described_object: Annotated[CrossVersionObjectReference | None, meta(proto=3)] = None


class ExternalMetricStatus(PodsMetricStatus):
    """The current value of a metric from outside the cluster."""


class MetricStatus(Struct):
    """The last value read of one metric, in the shape of its spec."""

    type: Annotated[str | None, meta(proto=1)] = None
    object: Annotated[ObjectMetricStatus | None, meta(proto=2)] = None
    pods: Annotated[PodsMetricStatus | None, meta(proto=3)] = None
    resource: Annotated[ResourceMetricStatus | None, meta(proto=4)] = None
    container_resource: Annotated[ContainerResourceMetricStatus | None, meta(proto=7)] = None
    external: Annotated[ExternalMetricStatus | None, meta(proto=5)] = None


class HorizontalPodAutoscalerCondition(Struct):
    """AbleToScale, ScalingActive or ScalingLimited, and why."""

    type: Annotated[str | None, meta(required=True, proto=1)] = None
    status: Annotated[str | None, meta(required=True, enum=CONDITION_STATUSES, proto=2)] = None
    last_transition_time: Annotated[Time | None, meta(proto=3)] = None
    reason: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=5, omitempty=True)] = None


class HorizontalPodAutoscalerStatus(Struct):
    """What the autoscaler last observed and decided."""

    observed_generation: ObservedGeneration = None
    last_scale_time: LastScaleTime = None
    current_replicas: Annotated[int | None, meta(minimum=0, proto=3, omitempty=True)] = None
    desired_replicas: Annotated[int | None, meta(minimum=0, proto=4)] = None
    current_metrics: Annotated[list[MetricStatus] | None, atomic(proto=5)] = None
    conditions: Annotated[
        list[HorizontalPodAutoscalerCondition] | None, meta(merge_key="type", proto=6)
    ] = None


# The table.


def _quantity_text(value: QuantityValue | None) -> str:
    """A quantity as Go's ``Quantity.String()`` prints it (``0`` when unset)."""
    if value is None:
        return "0"
    try:
        return quantity.canonicalize(value)
    except quantity.QuantityError:
        return str(value)


def _status_source(statuses: Sequence[MetricStatus], i: int, attr: str) -> Any:
    return getattr(statuses[i], attr) if i < len(statuses) else None


def _current(source: Any, field: str) -> Any:
    return getattr(source.current, field) if source is not None and source.current else None


def _metric_cell(spec: MetricSpec, statuses: Sequence[MetricStatus], i: int) -> str:
    """One metric as upstream's ``formatHPAMetrics`` prints it: ``current/target``."""
    if spec.type in (EXTERNAL, OBJECT):
        attr = "external" if spec.type == EXTERNAL else "object"
        source = getattr(spec, attr)
        target = source.target if source is not None and source.target else MetricTarget()
        status = _status_source(statuses, i, attr)
        if target.average_value is not None:
            got = _current(status, "average_value")
            current = "<unknown>" if got is None else _quantity_text(got)
            return f"{current}/{_quantity_text(target.average_value)} (avg)"
        current = "<unknown>" if status is None else _quantity_text(_current(status, "value"))
        return f"{current}/{_quantity_text(target.value)}"
    if spec.type == PODS:
        pods = spec.pods
        status = _status_source(statuses, i, "pods")
        current = (
            "<unknown>" if status is None else _quantity_text(_current(status, "average_value"))
        )
        target_value = pods.target.average_value if pods and pods.target else None
        return f"{current}/{_quantity_text(target_value)}"
    if spec.type in (RESOURCE, CONTAINER_RESOURCE):
        attr = "resource" if spec.type == RESOURCE else "container_resource"
        resource = getattr(spec, attr)
        name = (resource.name if resource else None) or ""
        target = resource.target if resource is not None and resource.target else MetricTarget()
        status = _status_source(statuses, i, attr)
        if target.average_value is not None:
            current = (
                "<unknown>" if status is None else _quantity_text(_current(status, "average_value"))
            )
            return f"{name}: {current}/{_quantity_text(target.average_value)}"
        utilization = _current(status, "average_utilization")
        current = "<unknown>" if utilization is None else f"{utilization}%"
        wanted = target.average_utilization
        return f"{name}: {current}/{'<auto>' if wanted is None else f'{wanted}%'}"
    return "<unknown type>"


def format_metrics(specs: Sequence[MetricSpec], statuses: Sequence[MetricStatus]) -> str:
    """The TARGETS cell: the first two metrics, then how many more."""
    if not specs:
        return "<none>"
    cells = [_metric_cell(spec, statuses, i) for i, spec in enumerate(specs)]
    shown = ", ".join(cells[:2])
    return f"{shown} + {len(cells) - 2} more..." if len(cells) > 2 else shown


def _targets(o: HorizontalPodAutoscaler, now: datetime.datetime) -> str:
    spec = o.spec or HorizontalPodAutoscalerSpec()
    statuses = (o.status.current_metrics if o.status else None) or []
    return format_metrics(spec.metrics or [], statuses)


def reference_cell(ref: Any) -> str:
    """``Kind/name`` of the scaled object."""
    return f"{(ref.kind if ref else None) or ''}/{(ref.name if ref else None) or ''}"


def _reference(o: Any, now: datetime.datetime) -> str:
    return reference_cell(o.spec.scale_target_ref if o.spec else None)


def _min_pods(o: Any, now: datetime.datetime) -> str:
    minimum = o.spec.min_replicas if o.spec else None
    return "<unset>" if minimum is None else str(minimum)


def _max_pods(o: Any, now: datetime.datetime) -> int:
    return (o.spec.max_replicas if o.spec else None) or 0


def _replicas(o: Any, now: datetime.datetime) -> int:
    return (o.status.current_replicas if o.status else None) or 0


def hpa_columns(targets: Callable[[Any, datetime.datetime], str]) -> tuple[Column, ...]:
    """The columns of ``kubectl get hpa`` (upstream's: every one a string, described by the
    v2 field it shows), around a version's way to the TARGETS cell."""
    return (
        NAME_COLUMN,
        Column(
            "Reference",
            _reference,
            description="scaleTargetRef points to the target resource to scale, and is used to "
            "the pods for which metrics should be collected, as well as to actually change the "
            "replica count.",
        ),
        Column(
            "Targets",
            targets,
            description="metrics contains the specifications for which to use to calculate the "
            "desired replica count (the maximum replica count across all metrics will be used). "
            " The desired replica count is calculated multiplying the ratio between the target "
            "value and the current value by the current number of pods.  Ergo, metrics used must "
            "decrease as the pod count is increased, and vice-versa.  See the individual metric "
            "source types for more information about how each type of metric must respond. If "
            "not set, the default metric will be set to 80% average CPU utilization.",
        ),
        Column(
            "MinPods",
            _min_pods,
            description="minReplicas is the lower limit for the number of replicas to which the "
            "autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if "
            "the alpha feature gate HPAScaleToZero is enabled and at least one Object or External "
            "metric is configured.  Scaling is active as long as at least one metric value is "
            "available.",
        ),
        Column(
            "MaxPods",
            _max_pods,
            description="maxReplicas is the upper limit for the number of replicas to which the "
            "autoscaler can scale up. It cannot be less that minReplicas.",
        ),
        Column(
            "Replicas",
            _replicas,
            description="currentReplicas is current number of replicas of pods managed by this "
            "autoscaler, as last seen by the autoscaler.",
        ),
        AGE_COLUMN,
    )


@kind(
    group=GROUP,
    version="v2",
    plural="horizontalpodautoscalers",
    short_names=("hpa",),
    categories=("all",),
    subresources=("status",),
    columns=hpa_columns(_targets),
)
class HorizontalPodAutoscaler(Resource):
    """Scales a scalable object between bounds on the metrics it names."""

    spec: Annotated[
        HorizontalPodAutoscalerSpec | None,
        meta(proto=2, doc="The specification of the autoscaler's behaviour."),
    ] = None
    status: Annotated[
        HorizontalPodAutoscalerStatus | None,
        meta(proto=3, doc="The current information about the autoscaler."),
    ] = None

    def set_defaults(self) -> None:
        # Upstream's status is a value whose desiredReplicas is always written.
        if self.status is None:
            self.status = HorizontalPodAutoscalerStatus(desired_replicas=0)
