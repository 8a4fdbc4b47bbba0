"""rbac.authorization.k8s.io/v1: Roles and ClusterRoles, and the bindings that grant them.

A Role lists what may be done inside one namespace, a ClusterRole what may be done anywhere
(and on non-resource URLs such as ``/healthz``); a RoleBinding or ClusterRoleBinding grants one
of them to users, groups and service accounts.  Names of all four only need to be valid URL
path segments (``system:node`` is a valid name), and a binding's ``roleRef`` never changes.
"""

from __future__ import annotations

import datetime
from typing import Annotated, ClassVar, Self

import msgspec

from kube.api import names
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.meta_v1 import LabelSelector, Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import PATH_SEGMENT, kind
from kube.api.struct import Struct, atomic, meta

GROUP = "rbac.authorization.k8s.io"
SERVICE_ACCOUNT, USER, GROUP_KIND = "ServiceAccount", "User", "Group"
SUBJECT_KINDS = (SERVICE_ACCOUNT, USER, GROUP_KIND)


class PolicyRule(Struct):
    """Verbs allowed on resources of API groups, or (cluster roles only) on non-resource URLs."""

    verbs: Annotated[list[str] | None, atomic(proto=1)] = None
    api_groups: Annotated[list[str] | None, atomic(proto=2)] = None
    resources: Annotated[list[str] | None, atomic(proto=3)] = None
    resource_names: Annotated[list[str] | None, atomic(proto=4)] = None
    non_resource_urls: Annotated[list[str] | None, atomic(proto=5)] = msgspec.field(
        default=None, name="nonResourceURLs"
    )

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.verbs:
            errors.required(path.child("verbs"), "verbs must contain at least one value")
        if self.non_resource_urls:
            if self.api_groups or self.resources or self.resource_names:
                errors.invalid(
                    path.child("nonResourceURLs"),
                    self.non_resource_urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                )
            return
        if not self.api_groups:
            errors.required(
                path.child("apiGroups"), "resource rules must supply at least one api group"
            )
        if not self.resources:
            errors.required(
                path.child("resources"), "resource rules must supply at least one resource"
            )


class AggregationRule(Struct):
    """Label selectors whose matching ClusterRoles' rules are combined into this one."""

    cluster_role_selectors: Annotated[list[LabelSelector] | None, atomic(proto=1)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.cluster_role_selectors:
            errors.required(
                path.child("clusterRoleSelectors"),
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            )


class Subject(Struct):
    """Who a binding grants its role to: a user, a group or a service account."""

    kind: Annotated[str | None, meta(doc="ServiceAccount, User or Group.", proto=1)] = None
    api_group: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    name: Annotated[str | None, meta(required=True, proto=3)] = None
    namespace: Annotated[str | None, meta(proto=4, omitempty=True)] = None

    def set_defaults(self) -> None:
        if not self.api_group and self.kind in (USER, GROUP_KIND):
            self.api_group = GROUP

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.kind == SERVICE_ACCOUNT:
            if self.name:
                errors.extend_checked(
                    path.child("name"), self.name, names.is_dns1123_subdomain(self.name)
                )
            if self.api_group:
                errors.not_supported(path.child("apiGroup"), self.api_group, ("",))
        elif self.kind in (USER, GROUP_KIND):
            if self.api_group != GROUP:
                errors.not_supported(path.child("apiGroup"), self.api_group or "", (GROUP,))
        else:
            errors.not_supported(path.child("kind"), self.kind or "", SUBJECT_KINDS)


class RoleRef(Struct):
    """The Role or ClusterRole a binding grants."""

    api_group: Annotated[str | None, meta(required=True, enum=(GROUP,), proto=1)] = None
    kind: Annotated[
        str | None,
        meta(
            doc="Role or ClusterRole (ClusterRole only for bindings that are cluster-wide).",
            proto=2,
        ),
    ] = None
    name: Annotated[str | None, meta(required=True, proto=3)] = None

    def set_defaults(self) -> None:
        if not self.api_group:
            self.api_group = GROUP

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.name:
            errors.extend_checked(
                path.child("name"), self.name, names.is_path_segment_name(self.name)
            )


RULES_DOC = "The rules of this role: verbs allowed on resources or non-resource URLs."


@kind(
    group=GROUP,
    version="v1",
    plural="roles",
    name_format=PATH_SEGMENT,
)
class Role(Resource):
    """Verbs allowed on resources within one namespace."""

    rules: Annotated[list[PolicyRule] | None, atomic(doc=RULES_DOC, proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        for i, rule in enumerate(self.rules or ()):
            if rule.non_resource_urls:
                errors.invalid(
                    path.child("rules").index(i).child("nonResourceURLs"),
                    rule.non_resource_urls,
                    "namespaced rules cannot apply to non-resource URLs",
                )


@kind(
    group=GROUP,
    version="v1",
    plural="clusterroles",
    namespaced=False,
    name_format=PATH_SEGMENT,
)
class ClusterRole(Resource):
    """Verbs allowed on resources in every namespace, on cluster-scoped ones and on URLs."""

    rules: Annotated[list[PolicyRule] | None, atomic(doc=RULES_DOC, proto=2)] = None
    aggregation_rule: Annotated[
        AggregationRule | None,
        meta(doc="Selects ClusterRoles whose rules the controller copies into this one.", proto=3),
    ] = None


def _subject_names(subjects: list[Subject] | None, wanted: str) -> str:
    """The subjects of one kind as the wide binding columns list them."""
    shown = []
    for subject in subjects or ():
        if subject.kind != wanted:
            continue
        if wanted == SERVICE_ACCOUNT:
            shown.append(f"{subject.namespace or ''}/{subject.name or ''}")
        else:
            shown.append(subject.name or "")
    return ", ".join(shown)


def _binding_columns(noun: str, role_doc: str) -> tuple[Column, ...]:
    def role(o: RoleBindingBase, now: datetime.datetime) -> str:
        ref = o.role_ref or RoleRef()
        return f"{ref.kind or ''}/{ref.name or ''}"

    return (
        NAME_COLUMN,
        Column("Role", role, description=role_doc),
        AGE_COLUMN,
        Column(
            "Users",
            lambda o, now: _subject_names(o.subjects, USER),
            priority=1,
            description=f"Users in the {noun}",
        ),
        Column(
            "Groups",
            lambda o, now: _subject_names(o.subjects, GROUP_KIND),
            priority=1,
            description=f"Groups in the {noun}",
        ),
        Column(
            "ServiceAccounts",
            lambda o, now: _subject_names(o.subjects, SERVICE_ACCOUNT),
            priority=1,
            description=f"ServiceAccounts in the {noun}",
        ),
    )


class RoleBindingBase(Resource):
    """What RoleBinding and ClusterRoleBinding share: subjects and a roleRef that never changes."""

    ROLE_KINDS: ClassVar[tuple[str, ...]]

    subjects: Annotated[
        list[Subject] | None, atomic(doc="The users, groups and service accounts granted.", proto=2)
    ] = None
    role_ref: Annotated[
        RoleRef | None, meta(required=True, doc="The role granted; it cannot be changed.", proto=3)
    ] = None

    def set_defaults(self) -> None:
        if self.role_ref is None:
            self.role_ref = RoleRef()

    def validate(self, path: Path, errors: ErrorList) -> None:
        kind = self.role_ref.kind if self.role_ref is not None else None
        if kind not in self.ROLE_KINDS:
            errors.not_supported(path.child("roleRef").child("kind"), kind or "", self.ROLE_KINDS)

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        if self.role_ref != old.role_ref:
            errors.invalid(
                ROOT.child("roleRef"), msgspec.to_builtins(self.role_ref), "cannot change roleRef"
            )


@kind(
    group=GROUP,
    version="v1",
    plural="rolebindings",
    columns=_binding_columns(
        "roleBinding",
        "RoleRef can reference a Role in the current namespace or a ClusterRole in the global "
        "namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. "
        "This field is immutable.",
    ),
    name_format=PATH_SEGMENT,
)
class RoleBinding(RoleBindingBase):
    """Grants a Role, or a ClusterRole's rules, within the binding's namespace."""

    ROLE_KINDS: ClassVar[tuple[str, ...]] = ("Role", "ClusterRole")


@kind(
    group=GROUP,
    version="v1",
    plural="clusterrolebindings",
    namespaced=False,
    columns=_binding_columns(
        "clusterRoleBinding",
        "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef "
        "cannot be resolved, the Authorizer must return an error. This field is immutable.",
    ),
    name_format=PATH_SEGMENT,
)
class ClusterRoleBinding(RoleBindingBase):
    """Grants a ClusterRole in every namespace and on cluster-scoped resources."""

    ROLE_KINDS: ClassVar[tuple[str, ...]] = ("ClusterRole",)

    def validate(self, path: Path, errors: ErrorList) -> None:
        super().validate(path, errors)
        for i, subject in enumerate(self.subjects or ()):
            if subject.kind == SERVICE_ACCOUNT and not subject.namespace:
                errors.required(path.child("subjects").index(i).child("namespace"))
