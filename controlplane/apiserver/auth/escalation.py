"""RBAC escalation prevention: nobody grants permissions they do not hold.

Upstream enforces this in the RBAC storage, and so do we, as an admission stage on the four
RBAC kinds (it must see the object being written):

- creating or updating a Role or ClusterRole is allowed if the user may ``escalate`` roles
  (asked of the authorizer), or already holds every rule in it (in the Role's namespace, or
  cluster-wide for a ClusterRole).  An ``aggregationRule`` needs ``escalate``: it can pull in
  any rule.
- creating or updating a binding is allowed if the user may ``bind`` the referenced role (by
  name), or already holds every rule of that role where the binding applies.

Members of ``system:masters`` hold everything, so the bootstrap policy and the admin always
pass; under ``AlwaysAllow`` every authenticated user may escalate, as upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from controlplane.apiserver import errors
from controlplane.apiserver.auth import User
from controlplane.apiserver.auth.rbac import covers
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from controlplane.apiserver.registry.store import Admission, RequestContext
from kube.api.kinds.rbac_v1 import (
    GROUP,
    ClusterRole,
    PolicyRule,
    Role,
    RoleBindingBase,
)
from kube.api.meta_v1 import Resource
from kube.api.scheme import KindInfo

RulesResolver = Callable[[User, str], tuple[list[PolicyRule], bool]]


class RoleLookup(Protocol):
    async def lookup(self, namespace: str, name: str) -> Resource | None: ...


def _format(rule: PolicyRule) -> str:
    parts = []
    for label, values in (
        ("APIGroups", rule.api_groups),
        ("Resources", rule.resources),
        ("ResourceNames", rule.resource_names),
        ("NonResourceURLs", rule.non_resource_urls),
        ("Verbs", rule.verbs),
    ):
        if values:
            quoted = " ".join(f'"{v}"' for v in values)
            parts.append(f"{label}:[{quoted}]")
    return "{" + ", ".join(parts) + "}"


def _refuse(
    info: KindInfo, obj: Resource, user: User, missing: list[PolicyRule]
) -> errors.ApiError:
    groups = "[" + " ".join(f'"{g}"' for g in user.groups) + "]"
    lines = "\n".join(_format(r) for r in missing)
    return errors.forbidden(
        info,
        obj.metadata.name or "",
        f'{info.plural}.{GROUP} "{obj.metadata.name}" is forbidden: user "{user.name}" '
        f"(groups={groups}) is attempting to grant RBAC permissions not currently held:\n{lines}",
    )


def prevent_escalation(
    authorize: Callable[[User, RequestInfo], bool],
    rules_for: RulesResolver,
    roles: RoleLookup,
    cluster_roles: RoleLookup,
) -> Admission:
    def may(user: User, verb: str, plural: str, namespace: str, name: str) -> bool:
        return authorize(
            user,
            RequestInfo(
                path="",
                verb=verb,
                is_resource_request=True,
                group=GROUP,
                namespace=namespace,
                resource=plural,
                name=name,
            ),
        )

    def missing(user: User, namespace: str, rules: list[PolicyRule]) -> list[PolicyRule]:
        held, _ = rules_for(user, namespace)
        return [r for r in rules if not covers(held, r)]

    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if operation not in ("CREATE", "UPDATE") or info.group != GROUP:
            return
        user = User(ctx.user, ctx.groups)
        namespace = obj.metadata.namespace or ""
        name = obj.metadata.name or ""
        if isinstance(obj, Role | ClusterRole):
            if may(user, "escalate", info.plural, namespace, name):
                return
            if isinstance(obj, ClusterRole) and obj.aggregation_rule is not None:
                raise errors.forbidden(
                    info,
                    name,
                    f'{info.plural}.{GROUP} "{name}" is forbidden: must have cluster-admin '
                    "privileges to use the aggregationRule",
                )
            lacking = missing(user, namespace, list(obj.rules or ()))
            if lacking:
                raise _refuse(info, obj, user, lacking)
            return
        if not isinstance(obj, RoleBindingBase) or obj.role_ref is None:
            return
        ref = obj.role_ref
        cluster_wide = ref.kind == "ClusterRole"
        plural = "clusterroles" if cluster_wide else "roles"
        if may(user, "bind", plural, "" if cluster_wide else namespace, ref.name or ""):
            return
        lookup = cluster_roles if cluster_wide else roles
        role = await lookup.lookup("" if cluster_wide else namespace, ref.name or "")
        if not isinstance(role, Role | ClusterRole):
            raise errors.not_found(
                (ClusterRole if cluster_wide else Role).kind_info, ref.name or ""
            )
        lacking = missing(user, namespace, list(role.rules or ()))
        if lacking:
            raise _refuse(info, obj, user, lacking)

    return admit
