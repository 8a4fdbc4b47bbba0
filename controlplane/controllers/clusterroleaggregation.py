"""The clusterrole-aggregation controller: an aggregated ClusterRole's rules are the union of
the rules of the ClusterRoles its ``aggregationRule`` selects.

Keys are ClusterRole names.  Any change to any ClusterRole may change what an aggregated role
should hold (a label added, a rule removed, a role deleted), so every ClusterRole event enqueues
every aggregating ClusterRole; the sync recomputes the union from the cache.  The union keeps a
stable order (selectors in order, the roles each one selects by name, their rules in order,
each rule once) so that an unchanged input gives an identical list and nothing is written.  As
upstream, the rules are written with a forced server-side apply under the controller's own
field manager, so the controller owns ``rules`` and nothing else.
"""

from __future__ import annotations

from typing import Any

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller
from kube.api import codec
from kube.api.kinds.rbac_v1 import ClusterRole, PolicyRule
from kube.api.labels import selector_of

NAME = "clusterrole-aggregation"
FIELD_MANAGER = "clusterrole-aggregation-controller"


def aggregated_rules(role: ClusterRole, roles: list[ClusterRole]) -> list[PolicyRule]:
    """The rules ``role`` aggregates from ``roles``, in a stable order, without repeats."""
    rules: list[PolicyRule] = []
    selectors = role.aggregation_rule.cluster_role_selectors if role.aggregation_rule else None
    for label_selector in selectors or ():
        selector = selector_of(label_selector)
        matching = sorted(
            (r for r in roles if selector.matches(r.metadata.labels or {})),
            key=lambda r: r.metadata.name or "",
        )
        for other in matching:
            if other.metadata.name == role.metadata.name:
                continue
            rules.extend(rule for rule in other.rules or () if rule not in rules)
    return rules


class ClusterRoleAggregationController(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.roles = ctx.informers.informer_for(ClusterRole)
        self.roles.add_event_handler(
            lambda obj: self._enqueue_aggregated(),
            self._role_updated,
            lambda obj: self._enqueue_aggregated(),
        )

    def _role_updated(self, old: Any, new: Any) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._enqueue_aggregated()

    def _enqueue_aggregated(self) -> None:
        for role in self.roles.lister.list():
            if role.aggregation_rule is not None:
                self.enqueue(role)

    async def sync_key(self, key: str) -> None:
        role = self.roles.lister.get(key)
        if role is None or role.aggregation_rule is None:
            return
        rules = aggregated_rules(role, self.roles.lister.list())
        if rules == (role.rules or []):
            return
        body = {
            "apiVersion": ClusterRole.kind_info.api_version,
            "kind": ClusterRole.kind_info.kind,
            "metadata": {"name": key},
            "rules": [codec.to_builtins(rule) for rule in rules],
        }
        await self.ctx.client.patch(
            ClusterRole,
            key,
            None,
            body,
            patch_type="apply",
            field_manager=FIELD_MANAGER,
            force=True,
        )


def new(ctx: ControllerContext) -> ClusterRoleAggregationController:
    return ClusterRoleAggregationController(ctx)
