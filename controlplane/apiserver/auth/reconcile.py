"""Reconciliation of the bootstrap RBAC policy (``bootstrappolicy``) at every start.

Upstream's ``auth reconcile`` without removal: a missing object is created;
an existing one whose ``rbac.authorization.kubernetes.io/autoupdate`` annotation is not
``"false"`` gets the rules (or subjects, or aggregation selectors) it lacks added and its
missing labels and annotations set, keeping everything the cluster's users added; a binding
whose ``roleRef`` differs is recreated (``roleRef`` cannot change in place).  A rule counts as
present when existing rules already cover it, so a second start writes nothing.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from controlplane.apiserver import errors
from controlplane.apiserver.auth.bootstrappolicy import (
    AUTOUPDATE,
    cluster_role_bindings,
    cluster_roles,
    controller_roles,
    namespace_role_bindings,
    namespace_roles,
)
from controlplane.apiserver.auth.rbac import covers
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api.kinds.rbac_v1 import GROUP, AggregationRule, ClusterRole, Role, RoleBindingBase
from kube.api.meta_v1 import DeleteOptions, ObjectMeta, Resource

if TYPE_CHECKING:
    from controlplane.apiserver.registry.rest import Lookup

log = logging.getLogger(__name__)
RoleT = TypeVar("RoleT", bound=Role | ClusterRole)
BindingT = TypeVar("BindingT", bound=RoleBindingBase)


def _merged_metadata(existing: ObjectMeta, wanted: ObjectMeta) -> bool:
    """Add the labels and annotations ``existing`` lacks; whether anything changed."""
    changed = False
    for attribute in ("labels", "annotations"):
        current = dict(getattr(existing, attribute) or {})
        for key, value in (getattr(wanted, attribute) or {}).items():
            if key not in current:
                current[key] = value
                changed = True
        setattr(existing, attribute, current or None)
    return changed


def reconcile_role(existing: RoleT, wanted: RoleT) -> RoleT | None:
    """The role to write, or ``None`` if ``existing`` already has everything (or opts out)."""
    if (existing.metadata.annotations or {}).get(AUTOUPDATE) == "false":
        return None
    result = copy.deepcopy(existing)
    changed = _merged_metadata(result.metadata, wanted.metadata)
    if isinstance(wanted, ClusterRole) and wanted.aggregation_rule is not None:
        assert isinstance(result, ClusterRole)
        selectors = list(
            result.aggregation_rule.cluster_role_selectors or ()
            if result.aggregation_rule is not None
            else ()
        )
        for selector in wanted.aggregation_rule.cluster_role_selectors or ():
            if selector not in selectors:
                selectors.append(selector)
                changed = True
        result.aggregation_rule = AggregationRule(cluster_role_selectors=selectors)
    else:
        rules = list(result.rules or ())
        for wanted_rule in wanted.rules or ():
            if not covers(rules, wanted_rule):
                rules.append(wanted_rule)
                changed = True
        result.rules = rules
    return result if changed else None


def reconcile_binding(existing: BindingT, wanted: BindingT) -> BindingT | None:
    """The binding to write, or ``None``; a different roleRef means delete and recreate."""
    if (existing.metadata.annotations or {}).get(AUTOUPDATE) == "false":
        return None
    result = copy.deepcopy(existing)
    changed = _merged_metadata(result.metadata, wanted.metadata)
    subjects = list(result.subjects or ())
    for subject in wanted.subjects or ():
        if subject not in subjects:
            subjects.append(subject)
            changed = True
    result.subjects = subjects or None
    if result.role_ref != wanted.role_ref:
        result.role_ref = wanted.role_ref
        changed = True
    return result if changed else None


async def reconcile(registry: Lookup) -> int:
    """Bring the bootstrap policy into the store; the number of objects written."""
    ctx = RequestContext(user="system:apiserver", groups=("system:masters",))
    roles = registry.lookup(GROUP, "v1", "clusterroles")
    bindings = registry.lookup(GROUP, "v1", "clusterrolebindings")
    assert roles is not None and bindings is not None
    written = 0
    for role in (*cluster_roles(), *controller_roles()):
        written += await _reconcile_one(roles, role, ctx)
    for binding in cluster_role_bindings():
        written += await _reconcile_one(bindings, binding, ctx)
    namespaced_roles = registry.lookup(GROUP, "v1", "roles")
    namespaced_bindings = registry.lookup(GROUP, "v1", "rolebindings")
    assert namespaced_roles is not None and namespaced_bindings is not None
    for namespaced_role in namespace_roles():
        written += await _reconcile_one(namespaced_roles, namespaced_role, ctx)
    for namespaced_binding in namespace_role_bindings():
        written += await _reconcile_one(namespaced_bindings, namespaced_binding, ctx)
    if written:
        log.info("bootstrap RBAC policy: %d objects created or updated", written)
    return written


async def _reconcile_one(store: ResourceStore, wanted: Resource, ctx: RequestContext) -> int:
    name, namespace = wanted.metadata.name or "", wanted.metadata.namespace or ""
    try:
        existing = await store.get(namespace, name)
    except errors.ApiError as error:
        if error.code != 404:
            raise
        return await _written(store.create(namespace, copy.deepcopy(wanted), ctx))
    updated: Resource | None
    if isinstance(existing, ClusterRole | Role):
        assert isinstance(wanted, ClusterRole | Role)
        updated = reconcile_role(existing, wanted)
    else:
        assert isinstance(existing, RoleBindingBase) and isinstance(wanted, RoleBindingBase)
        updated = reconcile_binding(existing, wanted)
        if updated is not None and existing.role_ref != wanted.role_ref:
            await store.delete(namespace, name, DeleteOptions(), ctx)
            updated.metadata = ObjectMeta(
                name=name,
                namespace=wanted.metadata.namespace,
                labels=updated.metadata.labels,
                annotations=updated.metadata.annotations,
            )
            return await _written(store.create(namespace, updated, ctx))
    if updated is None:
        return 0
    return await _written(store.update(namespace, name, updated, ctx))


async def _written(write: Awaitable[object]) -> int:
    """1 once ``write`` is done; 0 if another API server starting at the same time wrote
    first (409: it created the object, or changed it since it was read)."""
    try:
        await write
    except errors.ApiError as error:
        if error.code != 409:
            raise
        return 0
    return 1
