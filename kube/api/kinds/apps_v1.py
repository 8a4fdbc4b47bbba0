"""apps/v1: the workload controllers: Deployment, ReplicaSet, DaemonSet, StatefulSet, and the
ControllerRevision history that DaemonSets and StatefulSets keep.

Each controller kind owns pods through a label selector that must match its pod template.  The
selector never changes once the object exists; a StatefulSet's spec is frozen apart from the
fields its controller can roll out.  The helpers that print a selector and check int-or-percent
values are shared with batch/v1 and policy/v1.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Annotated, Any, Self

import msgspec

from kube.api import labels, names
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.kinds.core_v1.pod import (
    PodTemplateSpec,
    format_labels,
    template_columns,
)
from kube.api.kinds.core_v1.volume import PersistentVolumeClaim, validate_template_metadata
from kube.api.meta_v1 import LabelSelector, Resource
from kube.api.owners import controller_of
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import DNS1123_LABEL, IntOrString, RawJSON, Struct, Time, atomic, meta

GROUP = "apps"

CONDITION_STATUSES = ("True", "False", "Unknown")

# Shared pieces: int-or-percent values, selectors against templates, template printing.


# The fields every controller spec declares alike.
Replicas = Annotated[int | None, meta(minimum=0, doc="Number of desired pods. Defaults to 1.")]
PodSelector = Annotated[
    LabelSelector | None,
    meta(
        required=True,
        immutable=True,
        doc="Label query over the pods; must match the template's labels.",
    ),
]
MinReadySeconds = Annotated[
    int | None,
    meta(minimum=0, doc="Seconds a new pod must be ready before it counts as available."),
]


class WorkloadCondition(Struct):
    """One aspect of a controller's state (upstream's ReplicaSet, DaemonSet and StatefulSet
    conditions, which share these fields and protobuf numbers)."""

    type: Annotated[str | None, meta(required=True, proto=1)] = None
    status: Annotated[str | None, meta(required=True, enum=CONDITION_STATUSES, proto=2)] = None
    last_transition_time: Annotated[Time | None, meta(proto=3, omitempty=True)] = None
    reason: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=5, omitempty=True)] = None


def status_count(attr: str) -> Callable[[Any, datetime.datetime], int]:
    """A printer cell: the count ``attr`` of the object's status (0 without a status)."""
    return lambda o, now: (getattr(o.status, attr) or 0) if o.status is not None else 0


def ready_of_desired(o: Any, now: datetime.datetime) -> str:
    """The READY cell of a Deployment or StatefulSet: ready replicas / desired replicas."""
    ready = o.status.ready_replicas if o.status is not None else None
    desired = o.spec.replicas if o.spec is not None else None
    return f"{ready or 0}/{desired or 0}"


def _percent(value: IntOrString | None) -> int | None:
    """The number of a valid percent string (``"25%"`` -> 25), else None."""
    if isinstance(value, str) and not names.is_percent(value):
        return int(value[:-1])
    return None


def int_or_percent_value(value: IntOrString | None) -> int:
    """What upstream compares against zero: the percent, the int, or 0 for anything else."""
    percent = _percent(value)
    if percent is not None:
        return percent
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value):
        return int(value)
    return 0


def validate_int_or_percent(value: IntOrString | None, path: Path, errors: ErrorList) -> None:
    """A non-negative integer or a percent string (``"25%"``)."""
    if isinstance(value, str):
        errors.extend_checked(path, value, names.is_percent(value))
    elif isinstance(value, int) and value < 0:
        errors.invalid(path, value, "must be greater than or equal to 0")


def validate_at_most_100_percent(value: IntOrString | None, path: Path, errors: ErrorList) -> None:
    """A percent string is at most 100% (other values are not percents and pass)."""
    percent = _percent(value)
    if percent is not None and percent > 100:
        errors.invalid(path, value, "must not be greater than 100%")


def validate_selector_and_template(
    selector: LabelSelector | None,
    template: PodTemplateSpec | None,
    path: Path,
    errors: ErrorList,
    *,
    resource: str,
) -> None:
    """The selector is not empty and selects the pods its template makes.

    A missing selector (reported as required by its declaration) selects nothing, so the
    template's labels are reported too, as upstream does.  ``resource`` names the kind in
    upstream's message about an empty selector (upstream's ReplicaSet message says
    "deployment"; it is kept, since users search for it).
    """
    if selector is not None and not selector.match_labels and not selector.match_expressions:
        errors.invalid(
            path.child("selector"),
            msgspec.to_builtins(selector),
            f"empty selector is invalid for {resource}",
        )
        return
    validate_template_selected(selector, template, path, errors)


def validate_template_selected(
    selector: LabelSelector | None, template: PodTemplateSpec | None, path: Path, errors: ErrorList
) -> None:
    """The selector selects the labels of the template (``path`` is the spec's)."""
    template_labels = template.labels() if template is not None else {}
    try:
        matches = labels.selector_of(selector).matches(template_labels)
    except labels.SelectorError:
        return  # the selector's own validation reports what is wrong with it
    if not matches:
        errors.invalid(
            path.child("template").child("metadata").child("labels"),
            template_labels,
            "`selector` does not match template `labels`",
        )


def validate_restart_policy_always(
    template: PodTemplateSpec | None, path: Path, errors: ErrorList, *, kind_name: str
) -> None:
    """Pods of long-running controllers always restart and have no active deadline."""
    spec = template.spec if template is not None else None
    if spec is None:
        return
    if spec.restart_policy != "Always":
        errors.not_supported(
            path.child("spec").child("restartPolicy"), spec.restart_policy or "", ("Always",)
        )
    if spec.active_deadline_seconds is not None:
        errors.forbidden(
            path.child("spec").child("activeDeadlineSeconds"),
            f"activeDeadlineSeconds in {kind_name} is not Supported",
        )


def format_selector(selector: LabelSelector | None) -> str:
    """A selector as ``kubectl get -o wide`` shows it (``<none>`` when it selects nothing)."""
    try:
        text = str(labels.selector_of(selector))
    except labels.SelectorError:
        return "<error>"
    return text or "<none>"


def selector_column(selector_of: Callable[[Any], LabelSelector | None]) -> Column:
    """The ``-o wide`` SELECTOR column."""
    return Column(
        "Selector",
        lambda o, now: format_selector(selector_of(o)),
        priority=1,
        description="A label query over pods that should match the replica count.",
    )


def _spec_template(o: Any) -> PodTemplateSpec | None:
    return o.spec.template if o.spec is not None else None


def _spec_selector(o: Any) -> LabelSelector | None:
    return o.spec.selector if o.spec is not None else None


def _not_above(
    path: Path, errors: ErrorList, limit: int | None, limit_name: str, counters: dict[str, Any]
) -> None:
    """Status counters that cannot exceed another one (``readyReplicas <= replicas``)."""
    for name, value in counters.items():
        if (value or 0) > (limit or 0):
            errors.invalid(path.child(name), value, f"cannot be greater than {limit_name}")


# Deployment.


class RollingUpdateDeployment(Struct):
    """How many pods a rolling update may add above, or take below, the desired count."""

    max_unavailable: Annotated[IntOrString | None, meta(proto=1)] = None
    max_surge: Annotated[IntOrString | None, meta(proto=2)] = None

    def check(self, path: Path, errors: ErrorList) -> None:
        """Validation that applies only under the RollingUpdate strategy type."""
        unavailable_path = path.child("maxUnavailable")
        validate_int_or_percent(self.max_unavailable, unavailable_path, errors)
        validate_int_or_percent(self.max_surge, path.child("maxSurge"), errors)
        if (
            int_or_percent_value(self.max_unavailable) == 0
            and int_or_percent_value(self.max_surge) == 0
        ):
            errors.invalid(
                unavailable_path,
                self.max_unavailable if self.max_unavailable is not None else 0,
                "may not be 0 when `maxSurge` is 0",
            )
        validate_at_most_100_percent(self.max_unavailable, unavailable_path, errors)


class DeploymentStrategy(Struct):
    """Replace pods all at once (Recreate) or a few at a time (RollingUpdate)."""

    type: Annotated[
        str | None, meta(enum=("Recreate", "RollingUpdate"), proto=1, omitempty=True)
    ] = None
    rolling_update: Annotated[RollingUpdateDeployment | None, meta(proto=2)] = None

    def set_defaults(self) -> None:
        if not self.type:
            self.type = "RollingUpdate"
        if self.type == "RollingUpdate":
            if self.rolling_update is None:
                self.rolling_update = RollingUpdateDeployment()
            if self.rolling_update.max_unavailable is None:
                self.rolling_update.max_unavailable = "25%"
            if self.rolling_update.max_surge is None:
                self.rolling_update.max_surge = "25%"

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.type == "Recreate" and self.rolling_update is not None:
            errors.forbidden(
                path.child("rollingUpdate"),
                "may not be specified when strategy `type` is 'Recreate'",
            )
        if self.type == "RollingUpdate":
            if self.rolling_update is None:
                errors.required(
                    path.child("rollingUpdate"), "this should be defaulted and never be nil"
                )
            else:
                self.rolling_update.check(path.child("rollingUpdate"), errors)


class DeploymentSpec(Struct):
    """The pods a Deployment should run, and how it replaces them when the template changes."""

    replicas: Annotated[Replicas, meta(proto=1)] = None
    selector: Annotated[PodSelector, meta(proto=2)] = None
    template: Annotated[
        PodTemplateSpec | None, meta(required=True, doc="The pods that will be created.", proto=3)
    ] = None
    strategy: Annotated[
        DeploymentStrategy | None,
        meta(
            patch_strategy="retainKeys",
            doc="How existing pods are replaced by new ones (RollingUpdate by default).",
            proto=4,
        ),
    ] = None
    min_ready_seconds: Annotated[MinReadySeconds, meta(proto=5, omitempty=True)] = None
    revision_history_limit: Annotated[
        int | None,
        meta(minimum=0, doc="Old ReplicaSets kept to allow rollback. Defaults to 10.", proto=6),
    ] = None
    paused: Annotated[
        bool | None, meta(doc="Whether rollouts are paused.", proto=7, omitempty=True)
    ] = None
    progress_deadline_seconds: Annotated[
        int | None,
        meta(
            minimum=0, doc="Seconds before a stalled rollout is reported. Defaults to 600.", proto=9
        ),
    ] = None

    def set_defaults(self) -> None:
        if self.replicas is None:
            self.replicas = 1
        if self.strategy is None:
            self.strategy = DeploymentStrategy()
        if self.revision_history_limit is None:
            self.revision_history_limit = 10
        if self.progress_deadline_seconds is None:
            self.progress_deadline_seconds = 600

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_selector_and_template(
            self.selector, self.template, path, errors, resource="deployment"
        )
        validate_restart_policy_always(
            self.template, path.child("template"), errors, kind_name="ReplicaSet"
        )
        deadline = self.progress_deadline_seconds
        if deadline is not None and deadline <= (self.min_ready_seconds or 0):
            errors.invalid(
                path.child("progressDeadlineSeconds"),
                deadline,
                "must be greater than minReadySeconds",
            )


class DeploymentCondition(Struct):
    """One aspect of a Deployment's state: Available, Progressing, ReplicaFailure."""

    type: Annotated[str | None, meta(required=True, proto=1)] = None
    status: Annotated[str | None, meta(required=True, enum=CONDITION_STATUSES, proto=2)] = None
    last_update_time: Annotated[Time | None, meta(proto=6)] = None
    last_transition_time: Annotated[Time | None, meta(proto=7)] = None
    reason: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=5, omitempty=True)] = None


class DeploymentStatus(Struct):
    """What the Deployment controller last observed of its ReplicaSets and pods."""

    observed_generation: Annotated[
        int | None, meta(minimum=0, proto=1, int64=True, omitempty=True)
    ] = None
    replicas: Annotated[int | None, meta(minimum=0, proto=2, omitempty=True)] = None
    updated_replicas: Annotated[int | None, meta(minimum=0, proto=3, omitempty=True)] = None
    ready_replicas: Annotated[int | None, meta(minimum=0, proto=7, omitempty=True)] = None
    available_replicas: Annotated[int | None, meta(minimum=0, proto=4, omitempty=True)] = None
    unavailable_replicas: Annotated[int | None, meta(minimum=0, proto=5, omitempty=True)] = None
    terminating_replicas: Annotated[int | None, meta(minimum=0, proto=9)] = None
    conditions: Annotated[list[DeploymentCondition] | None, meta(merge_key="type", proto=6)] = None
    collision_count: Annotated[int | None, meta(minimum=0, proto=8)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _not_above(
            path,
            errors,
            self.replicas,
            "status.replicas",
            {
                "updatedReplicas": self.updated_replicas,
                "readyReplicas": self.ready_replicas,
                "availableReplicas": self.available_replicas,
            },
        )
        _not_above(
            path,
            errors,
            self.ready_replicas,
            "readyReplicas",
            {"availableReplicas": self.available_replicas},
        )


def _deployment_selector(o: Deployment, now: datetime.datetime) -> str:
    # Unlike the other kinds, upstream prints a Deployment's selector without "<none>".
    try:
        return str(labels.selector_of(_spec_selector(o)))
    except labels.SelectorError:
        return "<invalid>"


@kind(
    group=GROUP,
    version="v1",
    plural="deployments",
    short_names=("deploy",),
    categories=("all",),
    subresources=("status", "scale"),
    columns=(
        NAME_COLUMN,
        Column(
            "Ready",
            ready_of_desired,
            description="Number of the pod with ready state",
        ),
        Column(
            "Up-to-date",
            status_count("updated_replicas"),
            description="Total number of non-terminating pods targeted by this deployment "
            "that have the desired template spec.",
        ),
        Column(
            "Available",
            status_count("available_replicas"),
            description="Total number of available non-terminating pods (ready for at least "
            "minReadySeconds) targeted by this deployment.",
        ),
        AGE_COLUMN,
        *template_columns(_spec_template),
        Column(
            "Selector",
            _deployment_selector,
            priority=1,
            description="Label selector for pods.",
        ),
    ),
)
class Deployment(Resource):
    """Declarative updates of pods through ReplicaSets, one per template revision."""

    spec: Annotated[DeploymentSpec | None, meta(required=True, proto=2)] = None
    status: Annotated[DeploymentStatus | None, meta(proto=3)] = None


# ReplicaSet.


class ReplicaSetSpec(Struct):
    """How many pods matching the selector should run, and the template to make them from."""

    replicas: Annotated[Replicas, meta(proto=1)] = None
    min_ready_seconds: Annotated[MinReadySeconds, meta(proto=4, omitempty=True)] = None
    selector: Annotated[PodSelector, meta(proto=2)] = None
    template: Annotated[
        PodTemplateSpec | None,
        meta(required=True, doc="The pods that will be created when too few match.", proto=3),
    ] = None

    def set_defaults(self) -> None:
        if self.replicas is None:
            self.replicas = 1

    def validate(self, path: Path, errors: ErrorList) -> None:
        # Upstream's message for an empty ReplicaSet selector names "deployment".
        validate_selector_and_template(
            self.selector, self.template, path, errors, resource="deployment"
        )
        validate_restart_policy_always(
            self.template, path.child("template"), errors, kind_name="ReplicaSet"
        )


class ReplicaSetCondition(WorkloadCondition):
    """One aspect of a ReplicaSet's state (ReplicaFailure)."""


class ReplicaSetStatus(Struct):
    """What the ReplicaSet controller last observed of its pods."""

    replicas: Annotated[int | None, meta(minimum=0, proto=1)] = None
    fully_labeled_replicas: Annotated[int | None, meta(minimum=0, proto=2, omitempty=True)] = None
    ready_replicas: Annotated[int | None, meta(minimum=0, proto=4, omitempty=True)] = None
    available_replicas: Annotated[int | None, meta(minimum=0, proto=5, omitempty=True)] = None
    terminating_replicas: Annotated[int | None, meta(minimum=0, proto=7)] = None
    observed_generation: Annotated[
        int | None, meta(minimum=0, proto=3, int64=True, omitempty=True)
    ] = None
    conditions: Annotated[list[ReplicaSetCondition] | None, meta(merge_key="type", proto=6)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _not_above(
            path,
            errors,
            self.replicas,
            "status.replicas",
            {
                "fullyLabeledReplicas": self.fully_labeled_replicas,
                "readyReplicas": self.ready_replicas,
                "availableReplicas": self.available_replicas,
            },
        )
        _not_above(
            path,
            errors,
            self.ready_replicas,
            "readyReplicas",
            {"availableReplicas": self.available_replicas},
        )


def _replicaset_status(o: ReplicaSet) -> ReplicaSetStatus:
    return o.status or ReplicaSetStatus()


@kind(
    group=GROUP,
    version="v1",
    plural="replicasets",
    short_names=("rs",),
    categories=("all",),
    subresources=("status", "scale"),
    columns=(
        NAME_COLUMN,
        Column(
            "Desired",
            lambda o, now: (o.spec.replicas or 0) if o.spec is not None else 0,
            type="integer",
            description="Replicas is the number of desired pods.",
        ),
        Column(
            "Current",
            status_count("replicas"),
            type="integer",
            description="Replicas is the most recently observed number of non-terminating pods.",
        ),
        Column(
            "Ready",
            status_count("ready_replicas"),
            type="integer",
            description="The number of non-terminating pods targeted by this ReplicaSet with "
            "a Ready Condition.",
        ),
        AGE_COLUMN,
        *template_columns(_spec_template),
        selector_column(_spec_selector),
    ),
    field_selectors={"status.replicas": lambda o: str(_replicaset_status(o).replicas or 0)},
)
class ReplicaSet(Resource):
    """Keeps a number of identical pods running; Deployments manage them per revision."""

    spec: Annotated[ReplicaSetSpec | None, meta(required=True, proto=2)] = None
    status: Annotated[ReplicaSetStatus | None, meta(proto=3)] = None


# DaemonSet.


class RollingUpdateDaemonSet(Struct):
    """How many nodes may be without, or with an extra, daemon pod during an update."""

    max_unavailable: Annotated[IntOrString | None, meta(proto=1)] = None
    max_surge: Annotated[IntOrString | None, meta(proto=2)] = None

    def check(self, path: Path, errors: ErrorList) -> None:
        """Validation that applies only under the RollingUpdate strategy type."""
        unavailable_path, surge_path = path.child("maxUnavailable"), path.child("maxSurge")
        validate_int_or_percent(self.max_unavailable, unavailable_path, errors)
        validate_int_or_percent(self.max_surge, surge_path, errors)
        validate_at_most_100_percent(self.max_unavailable, unavailable_path, errors)
        validate_at_most_100_percent(self.max_surge, surge_path, errors)
        has_unavailable = int_or_percent_value(self.max_unavailable) != 0
        has_surge = int_or_percent_value(self.max_surge) != 0
        if has_unavailable and has_surge:
            errors.invalid(
                surge_path, self.max_surge, "may not be set when maxUnavailable is non-zero"
            )
        elif not has_unavailable and not has_surge:
            errors.required(unavailable_path, "cannot be 0 when maxSurge is 0")


class DaemonSetUpdateStrategy(Struct):
    """Replace daemon pods node by node (RollingUpdate) or only when deleted (OnDelete)."""

    type: Annotated[
        str | None, meta(enum=("RollingUpdate", "OnDelete"), proto=1, omitempty=True)
    ] = None
    rolling_update: Annotated[RollingUpdateDaemonSet | None, meta(proto=2)] = None

    def set_defaults(self) -> None:
        if not self.type:
            self.type = "RollingUpdate"
        if self.type == "RollingUpdate":
            if self.rolling_update is None:
                self.rolling_update = RollingUpdateDaemonSet()
            if self.rolling_update.max_unavailable is None:
                self.rolling_update.max_unavailable = 1
            if self.rolling_update.max_surge is None:
                self.rolling_update.max_surge = 0

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.type == "RollingUpdate":
            if self.rolling_update is None:
                errors.required(path.child("rollingUpdate"))
            else:
                self.rolling_update.check(path.child("rollingUpdate"), errors)


class DaemonSetSpec(Struct):
    """The pod every eligible node runs, and how it is replaced when the template changes."""

    selector: Annotated[PodSelector, meta(proto=1)] = None
    template: Annotated[
        PodTemplateSpec | None, meta(required=True, doc="The pod each node runs.", proto=2)
    ] = None
    update_strategy: Annotated[
        DaemonSetUpdateStrategy | None,
        meta(doc="How daemon pods are replaced (RollingUpdate by default).", proto=3),
    ] = None
    min_ready_seconds: Annotated[MinReadySeconds, meta(proto=4, omitempty=True)] = None
    revision_history_limit: Annotated[
        int | None,
        meta(
            minimum=0,
            doc="Old ControllerRevisions kept to allow rollback. Defaults to 10.",
            proto=6,
        ),
    ] = None

    def set_defaults(self) -> None:
        if self.update_strategy is None:
            self.update_strategy = DaemonSetUpdateStrategy()
        if self.revision_history_limit is None:
            self.revision_history_limit = 10

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_selector_and_template(
            self.selector, self.template, path, errors, resource="daemonset"
        )
        validate_restart_policy_always(
            self.template, path.child("template"), errors, kind_name="DaemonSet"
        )


class DaemonSetCondition(WorkloadCondition):
    """One aspect of a DaemonSet's state."""


class DaemonSetStatus(Struct):
    """How many nodes run the daemon pod, run it up to date, and should run it."""

    current_number_scheduled: Annotated[int | None, meta(minimum=0, proto=1)] = None
    number_misscheduled: Annotated[int | None, meta(minimum=0, proto=2)] = None
    desired_number_scheduled: Annotated[int | None, meta(minimum=0, proto=3)] = None
    number_ready: Annotated[int | None, meta(minimum=0, proto=4)] = None
    observed_generation: Annotated[
        int | None, meta(minimum=0, proto=5, int64=True, omitempty=True)
    ] = None
    updated_number_scheduled: Annotated[int | None, meta(minimum=0, proto=6, omitempty=True)] = None
    number_available: Annotated[int | None, meta(minimum=0, proto=7, omitempty=True)] = None
    number_unavailable: Annotated[int | None, meta(minimum=0, proto=8, omitempty=True)] = None
    collision_count: Annotated[int | None, meta(minimum=0, proto=9)] = None
    conditions: Annotated[list[DaemonSetCondition] | None, meta(merge_key="type", proto=10)] = None


def _node_selector(o: DaemonSet, now: datetime.datetime) -> str:
    template = _spec_template(o)
    return format_labels(template.spec.node_selector if template and template.spec else None)


@kind(
    group=GROUP,
    version="v1",
    plural="daemonsets",
    short_names=("ds",),
    categories=("all",),
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column(
            "Desired",
            status_count("desired_number_scheduled"),
            type="integer",
            description="The total number of nodes that should be running the daemon pod.",
        ),
        Column(
            "Current",
            status_count("current_number_scheduled"),
            type="integer",
            description="The number of nodes running at least one daemon pod that are "
            "supposed to run it.",
        ),
        Column(
            "Ready",
            status_count("number_ready"),
            type="integer",
            description="The number of nodes that should run the daemon pod and have one or "
            "more of it running and ready.",
        ),
        Column(
            "Up-to-date",
            status_count("updated_number_scheduled"),
            type="integer",
            description="The total number of nodes running an updated daemon pod.",
        ),
        Column(
            "Available",
            status_count("number_available"),
            type="integer",
            description="The number of nodes that should run the daemon pod and have one or "
            "more of it running and available.",
        ),
        Column(
            "Node Selector",
            _node_selector,
            description="The node labels a node must have for the pod to run on it.",
        ),
        AGE_COLUMN,
        *template_columns(_spec_template),
        selector_column(_spec_selector),
    ),
)
class DaemonSet(Resource):
    """Runs a copy of a pod on every node its template's scheduling rules allow."""

    spec: Annotated[DaemonSetSpec | None, meta(required=True, proto=2)] = None
    status: Annotated[DaemonSetStatus | None, meta(proto=3)] = None


# StatefulSet.


class RollingUpdateStatefulSetStrategy(Struct):
    """Which ordinals a rolling update touches, and how many may be down at once."""

    partition: Annotated[int | None, meta(minimum=0, proto=1)] = None
    max_unavailable: Annotated[IntOrString | None, meta(proto=2)] = None

    def check(self, path: Path, errors: ErrorList) -> None:
        """Validation that applies only under the RollingUpdate strategy type."""
        if self.max_unavailable is None:
            return
        max_path = path.child("maxUnavailable")
        validate_int_or_percent(self.max_unavailable, max_path, errors)
        if int_or_percent_value(self.max_unavailable) == 0:
            errors.invalid(max_path, self.max_unavailable, "cannot be 0")
        validate_at_most_100_percent(self.max_unavailable, max_path, errors)


class StatefulSetUpdateStrategy(Struct):
    """Update pods in reverse ordinal order (RollingUpdate) or only when deleted (OnDelete)."""

    type: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    rolling_update: Annotated[RollingUpdateStatefulSetStrategy | None, meta(proto=2)] = None

    def set_defaults(self) -> None:
        if self.type == "RollingUpdate" and self.rolling_update is not None:
            if self.rolling_update.partition is None:
                self.rolling_update.partition = 0
            if self.rolling_update.max_unavailable is None:
                self.rolling_update.max_unavailable = 1

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.type:
            errors.required(path)
        elif self.type == "OnDelete":
            if self.rolling_update is not None:
                errors.invalid(
                    path.child("rollingUpdate"),
                    msgspec.to_builtins(self.rolling_update),
                    "only allowed for updateStrategy 'RollingUpdate'",
                )
        elif self.type != "RollingUpdate":
            errors.invalid(path, msgspec.to_builtins(self), "must be 'RollingUpdate' or 'OnDelete'")
        elif self.rolling_update is not None:
            self.rolling_update.check(path.child("rollingUpdate"), errors)


class StatefulSetPersistentVolumeClaimRetentionPolicy(Struct):
    """Whether the claims made from volumeClaimTemplates go when the set is deleted or shrinks."""

    when_deleted: Annotated[
        str | None, meta(enum=("Retain", "Delete"), proto=1, omitempty=True)
    ] = None
    when_scaled: Annotated[str | None, meta(enum=("Retain", "Delete"), proto=2, omitempty=True)] = (
        None
    )

    def set_defaults(self) -> None:
        if not self.when_deleted:
            self.when_deleted = "Retain"
        if not self.when_scaled:
            self.when_scaled = "Retain"


class StatefulSetOrdinals(Struct):
    """The number the first replica's ordinal starts at."""

    start: Annotated[int | None, meta(minimum=0, proto=1)] = None


_STATEFULSET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "update_strategy",
    "revision_history_limit",
    "persistent_volume_claim_retention_policy",
    "min_ready_seconds",
)


class StatefulSetSpec(Struct):
    """Replicas with stable names and storage, created and updated in ordinal order."""

    replicas: Annotated[Replicas, meta(proto=1)] = None
    selector: Annotated[PodSelector, meta(proto=2)] = None
    # Upstream validates only the template's labels, annotations and volume names (see
    # ``validate``): the pod spec's volumes lack the claim templates the controller adds.
    template: Annotated[
        PodTemplateSpec | None,
        meta(required=True, validated=False, doc="The pods, named <set name>-<ordinal>.", proto=3),
    ] = None
    volume_claim_templates: Annotated[
        list[PersistentVolumeClaim] | None,
        atomic(
            doc="Claims each pod gets its own copy of, mounted by name in the template.", proto=4
        ),
    ] = None
    service_name: Annotated[
        str | None, meta(doc="The headless Service that gives the pods their DNS names.", proto=5)
    ] = None
    pod_management_policy: Annotated[
        str | None,
        meta(doc="OrderedReady (one at a time, the default) or Parallel.", proto=6, omitempty=True),
    ] = None
    update_strategy: Annotated[
        StatefulSetUpdateStrategy | None,
        meta(
            doc="How pods are replaced when the template changes (RollingUpdate by default).",
            proto=7,
        ),
    ] = None
    revision_history_limit: Annotated[
        int | None,
        meta(doc="Old ControllerRevisions kept to allow rollback. Defaults to 10.", proto=8),
    ] = None
    min_ready_seconds: Annotated[MinReadySeconds, meta(proto=9, omitempty=True)] = None
    persistent_volume_claim_retention_policy: Annotated[
        StatefulSetPersistentVolumeClaimRetentionPolicy | None,
        meta(doc="What happens to the claims when the set is deleted or scaled down.", proto=10),
    ] = None
    ordinals: Annotated[
        StatefulSetOrdinals | None,
        meta(doc="Where replica ordinals start (0 by default).", proto=11),
    ] = None

    def set_defaults(self) -> None:
        if not self.pod_management_policy:
            self.pod_management_policy = "OrderedReady"
        if self.update_strategy is None:
            self.update_strategy = StatefulSetUpdateStrategy()
        if not self.update_strategy.type:
            self.update_strategy.type = "RollingUpdate"
            if self.update_strategy.rolling_update is None:
                self.update_strategy.rolling_update = RollingUpdateStatefulSetStrategy()
        if self.persistent_volume_claim_retention_policy is None:
            self.persistent_volume_claim_retention_policy = (
                StatefulSetPersistentVolumeClaimRetentionPolicy()
            )
        if self.replicas is None:
            self.replicas = 1
        if self.revision_history_limit is None:
            self.revision_history_limit = 10

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.pod_management_policy:
            errors.required(path.child("podManagementPolicy"))
        elif self.pod_management_policy not in ("OrderedReady", "Parallel"):
            errors.invalid(
                path.child("podManagementPolicy"),
                self.pod_management_policy,
                "must be 'OrderedReady' or 'Parallel'",
            )
        if self.update_strategy is None:
            errors.required(path.child("updateStrategy"))
        validate_selector_and_template(
            self.selector, self.template, path, errors, resource="statefulset"
        )
        if self.template is not None:
            template_path = path.child("template").child("metadata")
            validate_template_metadata(self.template.metadata, template_path, errors)
        validate_restart_policy_always(
            self.template, path.child("template"), errors, kind_name="StatefulSet"
        )
        self._validate_volume_names(path.child("template").child("spec"), errors)

    def _validate_volume_names(self, path: Path, errors: ErrorList) -> None:
        """Mounts and devices name a volume of the template or a volume claim template."""
        pod_spec = self.template.spec if self.template is not None else None
        if pod_spec is None:
            return
        known = {volume.name for volume in pod_spec.volumes or ()}
        known |= {c.metadata.name for c in self.volume_claim_templates or ()}
        for container_path, container in pod_spec.all_containers(path):
            for field, used in (
                ("volumeMounts", [m.name for m in container.volume_mounts or ()]),
                ("volumeDevices", [d.name for d in container.volume_devices or ()]),
            ):
                for i, name in enumerate(used):
                    if name not in known:
                        errors.not_found(container_path.child(field).index(i).child("name"), name)


class StatefulSetCondition(WorkloadCondition):
    """One aspect of a StatefulSet's state."""


class StatefulSetStatus(Struct):
    """What the StatefulSet controller last observed of its pods and revisions."""

    observed_generation: Annotated[
        int | None, meta(minimum=0, proto=1, int64=True, omitempty=True)
    ] = None
    replicas: Annotated[int | None, meta(minimum=0, proto=2)] = None
    ready_replicas: Annotated[int | None, meta(minimum=0, proto=3, omitempty=True)] = None
    current_replicas: Annotated[int | None, meta(minimum=0, proto=4, omitempty=True)] = None
    updated_replicas: Annotated[int | None, meta(minimum=0, proto=5, omitempty=True)] = None
    current_revision: Annotated[str | None, meta(proto=6, omitempty=True)] = None
    update_revision: Annotated[str | None, meta(proto=7, omitempty=True)] = None
    collision_count: Annotated[int | None, meta(minimum=0, proto=9)] = None
    conditions: Annotated[list[StatefulSetCondition] | None, meta(merge_key="type", proto=10)] = (
        None
    )
    available_replicas: Annotated[int | None, meta(minimum=0, proto=11)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _not_above(
            path,
            errors,
            self.replicas,
            "status.replicas",
            {
                "readyReplicas": self.ready_replicas,
                "currentReplicas": self.current_replicas,
                "updatedReplicas": self.updated_replicas,
                "availableReplicas": self.available_replicas,
            },
        )
        _not_above(
            path,
            errors,
            self.ready_replicas,
            "status.readyReplicas",
            {"availableReplicas": self.available_replicas},
        )


@kind(
    group=GROUP,
    version="v1",
    plural="statefulsets",
    short_names=("sts",),
    categories=("all",),
    subresources=("status", "scale"),
    name_format=DNS1123_LABEL,
    columns=(
        NAME_COLUMN,
        Column("Ready", ready_of_desired, description="Number of the pod with ready state"),
        AGE_COLUMN,
        *template_columns(_spec_template),
    ),
)
class StatefulSet(Resource):
    """Pods with stable identities (web-0, web-1, ...) and a volume claim each."""

    spec: Annotated[StatefulSetSpec | None, meta(required=True, proto=2)] = None
    status: Annotated[StatefulSetStatus | None, meta(proto=3)] = None

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        new_spec, old_spec = self.spec or StatefulSetSpec(), old.spec or StatefulSetSpec()
        frozen = {f: getattr(old_spec, f) for f in _STATEFULSET_MUTABLE}
        if msgspec.structs.replace(new_spec, **frozen) != old_spec:
            errors.forbidden(
                ROOT.child("spec"),
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                "'template', 'updateStrategy', 'revisionHistoryLimit', "
                "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            )


# ControllerRevision.


def _controller_cell(o: ControllerRevision, now: datetime.datetime) -> str:
    ref = controller_of(o)
    if ref is None:
        return "<none>"
    api_version = ref.api_version or ""
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    kind_name = f"{ref.kind}.{group}" if group else ref.kind or ""
    return f"{kind_name.lower()}/{ref.name}" if kind_name else ref.name or ""


@kind(
    group=GROUP,
    version="v1",
    plural="controllerrevisions",
    columns=(
        NAME_COLUMN,
        Column("Controller", _controller_cell, description="Controller of the object"),
        Column(
            "Revision",
            lambda o, now: o.revision or 0,
            description="Revision indicates the revision of the state represented by Data.",
        ),
        AGE_COLUMN,
    ),
)
class ControllerRevision(Resource):
    """An immutable snapshot of a controller's template, numbered for rollback."""

    data: Annotated[
        RawJSON,
        meta(
            immutable=True,
            doc="The serialized state (the template) of the revision.",
            proto=2,
            omitempty=True,
        ),
    ] = None
    revision: Annotated[
        int | None,
        meta(
            minimum=0,
            immutable=True,
            doc="The revision number of the state in data.",
            proto=3,
            int64=True,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.data is None:
            errors.required(path.child("data"), "data is mandatory")
