"""ResourceQuota admission: a write that would take a namespace over a quota is refused, and
one that is allowed is charged to the quota before it is stored.

For each quota of the object's namespace (whose ``status.hard`` names a resource the object
uses, and whose scopes select it) the plugin adds the object's usage (what the resourcequota
controller would count for it: ``pod_usage``, ``service_usage``, ``claim_usage``, counts; on
an update only what grew) to ``status.used``.  Over ``hard`` → 403 ``exceeded quota: q,
requested: pods=1, used: pods=2, limited: pods=2``; a tracked resource the controller has not
counted yet → 403 ``status unknown for quota``; a quota limiting compute resources refuses a
pod whose containers do not all state them (``must specify limits.cpu``).

Charging is a compare-and-swap: the new ``status.used`` is written with the quota's
resourceVersion, so of two concurrent writes one conflicts, re-reads the quota and checks
again against the usage the other charged — concurrent creates never exceed ``hard``.  The
quotas are listed from a watch cache; the store is read on a conflict, and before refusing or
skipping a write on the cache's word (a cached quota may lag its status).  A quota created a
moment ago and not in the cache yet is not charged, as upstream's lister misses it too.  A
write refused after it was charged (by validation, say) leaves the charge in place until the
controller's next recount, as upstream.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import Admission, RequestContext, ResourceStore
from controlplane.apiserver.storage.watchcache import WatchCache
from controlplane.controllers.resourcequota import (
    ONE,
    Usage,
    claim_usage,
    pod_matches_scope,
    pod_usage,
    service_usage,
)
from kube.api.kinds.core_v1.cluster import (
    ResourceQuota,
    ResourceQuotaStatus,
    ScopedResourceSelectorRequirement,
)
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.core_v1.volume import PersistentVolumeClaim
from kube.api.meta_v1 import Resource
from kube.api.quantity import Quantity
from kube.api.scheme import KindInfo

ATTEMPTS = 32
CONTAINER_RESOURCES = ("cpu", "memory")
"""Resources a quota on ``requests.X`` / ``limits.X`` makes every container state."""
COUNTED = ("configmaps", "secrets", "replicationcontrollers", "resourcequotas")
SYSTEM = RequestContext(user="system:apiserver", subresource="status")


def resource_quota(quotas: WatchCache, store: ResourceStore) -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if ctx.subresource or operation not in ("CREATE", "UPDATE") or not info.namespaced:
            return
        namespace = obj.metadata.namespace or ""
        found = [
            q
            for q in quotas.objects()
            if isinstance(q, ResourceQuota) and q.metadata.namespace == namespace
        ]
        if not found:
            return
        delta = usage(info, obj, store)
        if old is not None:
            before = usage(info, old, store)
            delta = {r: q - before[r] if r in before else q for r, q in delta.items()}
            delta = {r: q for r, q in delta.items() if q > Quantity(0)}
        if not delta:
            return
        for quota in sorted(found, key=lambda q: q.metadata.name or ""):
            await _charge(quota, info, obj, delta, store, ctx.dry_run)

    return admit


def usage(info: KindInfo, obj: Resource, store: ResourceStore) -> Usage:
    """What the object counts against quota: as the resourcequota controller counts it."""
    counted: Usage = {f"count/{info.group_resource}": ONE}
    if isinstance(obj, Pod):
        counted.update(pod_usage(obj, store.clock.now()))
    elif isinstance(obj, Service):
        counted.update(service_usage(obj))
    elif isinstance(obj, PersistentVolumeClaim):
        counted.update(claim_usage(obj))
    elif not info.group and info.plural in COUNTED:
        counted[info.plural] = ONE
    return counted


async def _charge(
    quota: ResourceQuota,
    info: KindInfo,
    obj: Resource,
    delta: Usage,
    store: ResourceStore,
    dry_run: bool,
) -> None:
    name = obj.metadata.name or ""

    def refuse(message: str) -> errors.ApiError:
        return errors.forbidden(info, name, f'{info.plural} "{name}" is forbidden: {message}')

    live = False
    """Whether ``quota`` was just read from the store rather than the (lagging) cache: a
    decision that would skip or refuse the write is only taken on a live copy."""
    for _ in range(ATTEMPTS):
        if not _selects(quota, obj):
            return
        status = quota.status
        hard = _parsed(status.hard if status else None)
        used = _parsed(status.used if status else None)
        tracked = sorted(r for r in delta if r in hard)
        refusal: str | None = None
        if not tracked:
            wanted = (quota.spec.hard if quota.spec else None) or {}
            if live or not any(r in wanted for r in delta):
                return
        elif isinstance(obj, Pod) and (missing := _unstated(obj, hard)):
            refusal = f"failed quota: {quota.metadata.name}: must specify {missing}"
        elif unknown := [r for r in tracked if r not in used]:
            refusal = f"status unknown for quota: {quota.metadata.name}, resources: " + ", ".join(
                unknown
            )
        else:
            new_used = {r: used[r] + delta[r] for r in tracked}
            exceeded = [r for r in tracked if new_used[r] > hard[r]]
            if exceeded:
                refusal = (
                    f"exceeded quota: {quota.metadata.name}, requested: "
                    f"{_show(delta, exceeded)}, used: {_show(used, exceeded)}, limited: "
                    f"{_show(hard, exceeded)}"
                )
            elif dry_run or await _write(quota, new_used, store):
                return
        if refusal is not None and live:
            raise refuse(refusal)
        current = await store.get(quota.metadata.namespace or "", quota.metadata.name or "")
        assert isinstance(current, ResourceQuota)
        quota, live = current, True
    raise errors.ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on resourcequotas "{quota.metadata.name}": too many '
        "concurrent writes; please try again",
    )


async def _write(quota: ResourceQuota, used: Usage, store: ResourceStore) -> bool:
    """Charge ``used`` to the quota if it is still at the version read; False on a conflict."""
    charged = copy.deepcopy(quota)
    charged.status = charged.status or ResourceQuotaStatus()
    charged.status.used = {**(charged.status.used or {}), **_text(used)}
    try:
        await store.update(
            quota.metadata.namespace or "", quota.metadata.name or "", charged, SYSTEM, "status"
        )
    except errors.ApiError as error:
        if error.code == 409:
            return False
        if error.code != 404:
            raise
    return True


def _selects(quota: ResourceQuota, obj: Resource) -> bool:
    """Whether the quota's scopes select the object (only pods can be scoped)."""
    spec = quota.spec
    scopes = [
        ScopedResourceSelectorRequirement(scope_name=scope, operator="Exists")
        for scope in (spec.scopes if spec else None) or ()
    ]
    if spec is not None and spec.scope_selector is not None:
        scopes.extend(spec.scope_selector.match_expressions or ())
    if not scopes:
        return True
    return isinstance(obj, Pod) and all(pod_matches_scope(obj, s) for s in scopes)


def _unstated(pod: Pod, hard: Mapping[str, Quantity]) -> str:
    """The constrained compute resources some container does not state (upstream's pod
    evaluator ``Constraints``), comma-separated; empty when every container states them."""
    spec = pod.spec
    containers = [*(spec.init_containers or ()), *(spec.containers or ())] if spec else []
    missing = []
    for resource in CONTAINER_RESOURCES:
        for which in ("requests", "limits"):
            if f"{which}.{resource}" not in hard and not (which == "requests" and resource in hard):
                continue
            if any(resource not in (getattr(c.resources, which, None) or {}) for c in containers):
                missing.append(f"{which}.{resource}")
    return ",".join(sorted(missing))


def _parsed(values: Mapping[str, Any] | None) -> dict[str, Quantity]:
    return {k: Quantity.parse(v) for k, v in (values or {}).items()}


def _text(values: Mapping[str, Quantity]) -> dict[str, Any]:
    return {k: str(v) for k, v in values.items()}


def _show(values: Mapping[str, Quantity], names: list[str]) -> str:
    return ",".join(f"{r}={values[r]}" for r in sorted(names) if r in values)
