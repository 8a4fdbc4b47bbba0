"""storage.k8s.io/v1: StorageClass, the recipe a provisioner follows to create volumes on demand.

A class names its provisioner and the opaque parameters handed to it; neither may change once the
class exists, because volumes already made from it would no longer match.  The class annotated
``storageclass.kubernetes.io/is-default-class: "true"`` serves claims that name no class.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from kube.api import names
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.meta_v1 import Resource
from kube.api.printing import AGE_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import QUALIFIED_NAME, Struct, atomic, meta

RECLAIM_POLICIES = ("Delete", "Retain")
VOLUME_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
MAX_PARAMETERS = 512
MAX_PARAMETERS_SIZE = 256 * 1024


def is_default_class(obj: Any) -> bool:
    """Whether a StorageClass is annotated as the cluster's default (either annotation)."""
    annotations = obj.metadata.annotations or {}
    return any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS)


class TopologySelectorLabelRequirement(Struct):
    """A topology label and the values it may take."""

    key: Annotated[str | None, meta(required=True, format=QUALIFIED_NAME)] = None
    values: Annotated[list[str] | None, atomic(required=True)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        seen: set[str] = set()
        for i, value in enumerate(self.values or ()):
            if value in seen:
                errors.duplicate(path.child("values").index(i), value)
            seen.add(value)


class TopologySelectorTerm(Struct):
    """Topology requirements that must all hold."""

    match_label_expressions: Annotated[list[TopologySelectorLabelRequirement] | None, atomic()] = (
        None
    )

    def validate(self, path: Path, errors: ErrorList) -> None:
        seen: set[str | None] = set()
        for i, requirement in enumerate(self.match_label_expressions or ()):
            if requirement.key in seen:
                errors.duplicate(
                    path.child("matchLabelExpressions").index(i).child("key"), requirement.key
                )
            seen.add(requirement.key)

    def expressions(self) -> dict[str | None, frozenset[str]]:
        """The term as a map from key to allowed values, for comparing terms."""
        return {r.key: frozenset(r.values or ()) for r in self.match_label_expressions or ()}


def _name_cell(obj: Any) -> str:
    return str(obj.metadata.name or "") + (" (default)" if is_default_class(obj) else "")


@kind(
    group="storage.k8s.io",
    version="v1",
    plural="storageclasses",
    namespaced=False,
    short_names=("sc",),
    columns=(
        Column(
            "Name",
            lambda o, now: _name_cell(o),
            format="name",
            description="Name must be unique within a namespace.",
        ),
        Column("Provisioner", lambda o, now: o.provisioner or ""),
        Column("ReclaimPolicy", lambda o, now: o.reclaim_policy or "Delete"),
        Column("VolumeBindingMode", lambda o, now: o.volume_binding_mode or "Immediate"),
        Column("AllowVolumeExpansion", lambda o, now: bool(o.allow_volume_expansion)),
        AGE_COLUMN,
    ),
)
class StorageClass(Resource):
    """How volumes of one class are provisioned, reclaimed and bound."""

    provisioner: Annotated[
        str | None, meta(required=True, doc="The volume plugin that provisions volumes.")
    ] = None
    parameters: Annotated[
        dict[str, str] | None, meta(doc="Opaque settings handed to the provisioner.")
    ] = None
    reclaim_policy: Annotated[
        str | None,
        meta(
            enum=RECLAIM_POLICIES,
            doc="What happens to provisioned volumes when their claim goes: Delete or Retain.",
        ),
    ] = None
    mount_options: Annotated[
        list[str] | None, atomic(doc="Mount options of volumes made from this class.")
    ] = None
    allow_volume_expansion: Annotated[
        bool | None, meta(doc="Whether claims of this class may grow.")
    ] = None
    volume_binding_mode: Annotated[
        str | None,
        meta(
            enum=VOLUME_BINDING_MODES,
            immutable=True,
            doc="When claims are bound: Immediate, or WaitForFirstConsumer (the first pod).",
        ),
    ] = None
    allowed_topologies: Annotated[
        list[TopologySelectorTerm] | None,
        atomic(doc="Where volumes of this class may be provisioned."),
    ] = None

    def set_defaults(self) -> None:
        if self.reclaim_policy is None:
            self.reclaim_policy = "Delete"
        if self.volume_binding_mode is None:
            self.volume_binding_mode = "Immediate"

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.provisioner:
            errors.extend_checked(
                path.child("provisioner"),
                self.provisioner,
                names.is_qualified_name(self.provisioner.lower()),
            )
        self._validate_parameters(path.child("parameters"), errors)
        if self.volume_binding_mode is None:
            errors.required(path.child("volumeBindingMode"))
        seen: list[dict[str | None, frozenset[str]]] = []
        for i, term in enumerate(self.allowed_topologies or ()):
            expressions = term.expressions()
            if expressions in seen:
                errors.duplicate(
                    path.child("allowedTopologies").index(i).child("matchLabelExpressions"), ""
                )
            seen.append(expressions)

    def _validate_parameters(self, path: Path, errors: ErrorList) -> None:
        parameters = self.parameters or {}
        if len(parameters) > MAX_PARAMETERS:
            errors.too_long(path, MAX_PARAMETERS)
            return
        for key in parameters:
            if not key:
                errors.invalid(path, key, "field can not be empty.")
        if sum(len(k) + len(v) for k, v in parameters.items()) > MAX_PARAMETERS_SIZE:
            errors.too_long(path, MAX_PARAMETERS_SIZE)

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        if (self.parameters or {}) != (old.parameters or {}):
            errors.forbidden(ROOT.child("parameters"), "updates to parameters are forbidden.")
        if self.provisioner != old.provisioner:
            errors.forbidden(ROOT.child("provisioner"), "updates to provisioner are forbidden.")
        if self.reclaim_policy != old.reclaim_policy:
            errors.forbidden(ROOT.child("reclaimPolicy"), "updates to reclaimPolicy are forbidden.")
