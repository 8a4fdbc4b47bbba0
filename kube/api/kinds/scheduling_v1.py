"""scheduling.k8s.io/v1: PriorityClass, the named priorities pods refer to by
``priorityClassName``.

A class's value orders pods in the scheduling queue and decides who may preempt whom.  Names
starting with ``system-`` belong to the two classes the API server creates itself; user classes
stay at or below one billion so that system-critical pods always win.
"""

from __future__ import annotations

from typing import Annotated, Self

from kube.api.errors import ROOT, ErrorList, Path
from kube.api.meta_v1 import Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import meta

PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}
"""The classes the API server creates, by name, with their fixed values (never global default)."""


def _system_class_problem(name: str, value: int | None, global_default: bool) -> str | None:
    """Why a ``system-`` class is not one of the known ones, or None when it is."""
    if name not in SYSTEM_PRIORITY_CLASSES:
        return f"{name} is not a known system priority class"
    expected = SYSTEM_PRIORITY_CLASSES[name]
    if (value or 0) != expected:
        return f"value of {name} PriorityClass must be {expected}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return None


@kind(
    group="scheduling.k8s.io",
    version="v1",
    plural="priorityclasses",
    namespaced=False,
    short_names=("pc",),
    columns=(
        NAME_COLUMN,
        Column("Value", lambda o, now: o.value or 0, type="integer"),
        Column("Global-Default", lambda o, now: bool(o.global_default), type="boolean"),
        AGE_COLUMN,
        Column("PreemptionPolicy", lambda o, now: o.preemption_policy or ""),
    ),
)
class PriorityClass(Resource):
    """A named scheduling priority: its value, whether it is the default, whether it preempts."""

    value: Annotated[int | None, meta(doc="The priority pods of this class receive.", proto=2)] = (
        None
    )
    global_default: Annotated[
        bool | None,
        meta(
            doc="Whether pods without a priorityClassName get this class's value.",
            proto=3,
            omitempty=True,
        ),
    ] = None
    description: Annotated[
        str | None, meta(doc="When this class should be used.", proto=4, omitempty=True)
    ] = None
    preemption_policy: Annotated[
        str | None,
        meta(
            enum=PREEMPTION_POLICIES,
            immutable=True,
            doc="Whether pods of this class may preempt lower-priority pods.",
            proto=5,
        ),
    ] = None

    def set_defaults(self) -> None:
        if self.preemption_policy is None:
            self.preemption_policy = "PreemptLowerPriority"

    def validate(self, path: Path, errors: ErrorList) -> None:
        name = self.metadata.name or ""
        if name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
            problem = _system_class_problem(name, self.value, bool(self.global_default))
            if problem is not None:
                errors.forbidden(
                    path.child("metadata").child("name"),
                    f"priority class names with '{SYSTEM_PRIORITY_CLASS_PREFIX}' prefix are "
                    f"reserved for system use only. error: {problem}",
                )
        elif (self.value or 0) > HIGHEST_USER_DEFINABLE_PRIORITY:
            errors.forbidden(
                path.child("value"),
                "maximum allowed value of a user defined priority is "
                f"{HIGHEST_USER_DEFINABLE_PRIORITY}",
            )
        if self.preemption_policy == "":
            errors.required(path.child("preemptionPolicy"))

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        if (self.value or 0) != (old.value or 0):
            errors.forbidden(ROOT.child("value"), "may not be changed in an update.")
