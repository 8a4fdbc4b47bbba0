"""policy/v1: PodDisruptionBudget, and the Eviction that asks to delete a pod within its budget.

A budget says how many of the pods it selects must stay up (``minAvailable``) or may be down
(``maxUnavailable``) during voluntary disruptions such as a drain; the disruption controller keeps
``status.disruptionsAllowed`` current and the eviction subresource of pods refuses evictions that
would break it.  An Eviction is only ever created, through ``pods/NAME/eviction``.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from kube.api.errors import ErrorList, Path
from kube.api.kinds.apps_v1 import validate_at_most_100_percent, validate_int_or_percent
from kube.api.meta_v1 import Condition, DeleteOptions, LabelSelector, Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import NOT_SERVED, kind
from kube.api.struct import IntOrString, Struct, Time, meta

GROUP = "policy"
UNHEALTHY_POD_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")


class PodDisruptionBudgetSpec(Struct):
    """Which pods the budget covers and how many of them must stay available."""

    min_available: Annotated[
        IntOrString | None,
        meta(doc="Pods (a number or a percentage) that must remain available.", proto=1),
    ] = None
    selector: Annotated[
        LabelSelector | None,
        meta(patch_strategy="replace", doc="The pods the budget covers.", proto=2),
    ] = None
    max_unavailable: Annotated[
        IntOrString | None,
        meta(doc="Pods (a number or a percentage) that may be unavailable at once.", proto=3),
    ] = None
    unhealthy_pod_eviction_policy: Annotated[
        str | None,
        meta(
            enum=UNHEALTHY_POD_EVICTION_POLICIES,
            doc="When running but not ready pods may be evicted.",
            proto=4,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.min_available is not None and self.max_unavailable is not None:
            errors.invalid(
                path,
                msgspec.to_builtins(self),
                "minAvailable and maxUnavailable cannot be both set",
            )
        for value, name in (
            (self.min_available, "minAvailable"),
            (self.max_unavailable, "maxUnavailable"),
        ):
            if value is not None:
                validate_int_or_percent(value, path.child(name), errors)
                validate_at_most_100_percent(value, path.child(name), errors)


class PodDisruptionBudgetStatus(Struct):
    """What the disruption controller last computed for the budget."""

    observed_generation: Annotated[int | None, meta(proto=1, int64=True, omitempty=True)] = None
    disrupted_pods: Annotated[dict[str, Time] | None, meta(proto=2)] = None
    disruptions_allowed: Annotated[int | None, meta(proto=3)] = None
    current_healthy: Annotated[int | None, meta(proto=4)] = None
    desired_healthy: Annotated[int | None, meta(proto=5)] = None
    expected_pods: Annotated[int | None, meta(proto=6)] = None
    conditions: Annotated[list[Condition] | None, meta(merge_key="type", proto=7)] = None


def _budget_cell(value: IntOrString | None) -> str:
    return "N/A" if value is None else str(value)


def _spec(obj: Any) -> PodDisruptionBudgetSpec:
    return obj.spec or PodDisruptionBudgetSpec()


@kind(
    group=GROUP,
    version="v1",
    plural="poddisruptionbudgets",
    short_names=("pdb",),
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column(
            "Min Available",
            lambda o, now: _budget_cell(_spec(o).min_available),
            description="The minimum number of pods that must be available.",
        ),
        Column(
            "Max Unavailable",
            lambda o, now: _budget_cell(_spec(o).max_unavailable),
            description="The maximum number of pods that may be unavailable.",
        ),
        Column(
            "Allowed Disruptions",
            lambda o, now: (o.status.disruptions_allowed or 0) if o.status else 0,
            type="integer",
            description="Calculated number of pods that may be disrupted at this time.",
        ),
        AGE_COLUMN,
    ),
)
class PodDisruptionBudget(Resource):
    """A bound on the voluntary disruptions a set of pods may suffer at once."""

    spec: Annotated[
        PodDisruptionBudgetSpec | None, meta(doc="The pods covered and the budget.", proto=2)
    ] = None
    status: Annotated[
        PodDisruptionBudgetStatus | None,
        meta(doc="Healthy pods and allowed disruptions, as last observed.", proto=3),
    ] = None


@kind(group=GROUP, version="v1", plural="evictions", verbs=NOT_SERVED)
class Eviction(Resource):
    """A request to evict (gracefully delete) the pod of the same name, within its budgets."""

    delete_options: Annotated[
        DeleteOptions | None,
        meta(doc="How the pod is deleted once eviction is allowed.", proto=2),
    ] = None
