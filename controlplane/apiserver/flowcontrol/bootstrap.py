"""The API server's own FlowSchemas and priority levels, and keeping them in the store.

Upstream's configuration (k8s.io/apiserver's apis/flowcontrol/bootstrap, as of 1.36), as data:
the mandatory objects every server needs (the ``exempt`` level and schema for system:masters,
the ``catch-all`` ones for everybody else) and the suggested ones (system components, nodes,
leader election, controllers, service accounts, and ``global-default`` just before
catch-all).

``ensure`` is upstream's configuration ensurer, run at start and then every minute:

- a mandatory object is created if missing and its spec put back if changed (it is always
  annotated ``apf.kubernetes.io/autoupdate-spec: "true"``);
- a suggested object is created if missing (annotated "true"); an existing one has its spec
  kept current only while the annotation says "true".  An object without the annotation gets
  one: "true" (and the current spec) if it was never changed (``generation`` 1), "false"
  otherwise, so a user's edits are not overwritten.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api import walk
from kube.api.codec import from_builtins
from kube.api.kinds.flowcontrol_v1 import (
    ALL_USERS,
    EVERYTHING,
    EXEMPT,
    GROUP,
    MANDATORY_SPECS,
    NAME_ALL,
    FlowSchema,
    PriorityLevelConfiguration,
    group_subjects,
)
from kube.api.meta_v1 import Resource

log = logging.getLogger(__name__)

AUTOUPDATE = "apf.kubernetes.io/autoupdate-spec"
SYSTEM = RequestContext(user="system:apiserver", groups=("system:masters",))

_LEASES = {
    "verbs": ["get", "create", "update"],
    "apiGroups": ["coordination.k8s.io"],
    "resources": ["leases"],
    "namespaces": [NAME_ALL],
}


def _users(*names: str) -> list[dict[str, Any]]:
    return [{"kind": "User", "user": {"name": name}} for name in names]


def _kube_system_accounts(*names: str) -> list[dict[str, Any]]:
    return [
        {"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": name}}
        for name in names
    ]


def _schema(
    name: str, level: str, precedence: int, method: str | None, *rules: dict[str, Any]
) -> FlowSchema:
    spec: dict[str, Any] = {
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": list(rules),
    }
    if method is not None:
        spec["distinguisherMethod"] = {"type": method}
    raw = {"metadata": {"name": name}, "spec": spec}
    return from_builtins(raw, FlowSchema).obj


def _level(name: str, shares: int, lendable: int, queuing: tuple[int, int, int] | None) -> Any:
    response: dict[str, Any] = {"type": "Reject"}
    if queuing is not None:
        queues, hand, length = queuing
        response = {
            "type": "Queue",
            "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length},
        }
    limited = {
        "nominalConcurrencyShares": shares,
        "lendablePercent": lendable,
        "limitResponse": response,
    }
    raw = {"metadata": {"name": name}, "spec": {"type": "Limited", "limited": limited}}
    return from_builtins(raw, PriorityLevelConfiguration).obj


MANDATORY_LEVELS: tuple[PriorityLevelConfiguration, ...] = tuple(
    from_builtins({"metadata": {"name": name}, "spec": spec}, PriorityLevelConfiguration).obj
    for (kind, name), spec in MANDATORY_SPECS.items()
    if kind == "PriorityLevelConfiguration"
)
MANDATORY_SCHEMAS: tuple[FlowSchema, ...] = tuple(
    from_builtins({"metadata": {"name": name}, "spec": spec}, FlowSchema).obj
    for (kind, name), spec in MANDATORY_SPECS.items()
    if kind == "FlowSchema"
)
SUGGESTED_LEVELS: tuple[PriorityLevelConfiguration, ...] = (
    _level("system", 30, 33, (64, 6, 50)),
    _level("node-high", 40, 25, (64, 6, 50)),
    _level("leader-election", 10, 0, (16, 4, 50)),
    _level("workload-high", 40, 50, (128, 6, 50)),
    _level("workload-low", 100, 90, (128, 6, 50)),
    _level("global-default", 20, 50, (128, 6, 50)),
)
SUGGESTED_SCHEMAS: tuple[FlowSchema, ...] = (
    _schema(
        "system-nodes",
        "system",
        500,
        "ByUser",
        {"subjects": group_subjects("system:nodes"), **EVERYTHING},
    ),
    _schema(
        "system-node-high",
        "node-high",
        400,
        "ByUser",
        {
            "subjects": group_subjects("system:nodes"),
            "resourceRules": [
                {
                    "verbs": [NAME_ALL],
                    "apiGroups": [""],
                    "resources": ["nodes", "nodes/status"],
                    "clusterScope": True,
                    "namespaces": [NAME_ALL],
                },
                {**_LEASES, "verbs": [NAME_ALL]},
            ],
        },
    ),
    _schema(
        "probes",
        EXEMPT,
        2,
        None,
        {
            "subjects": group_subjects(*ALL_USERS),
            "nonResourceRules": [
                {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}
            ],
        },
    ),
    _schema(
        "system-leader-election",
        "leader-election",
        100,
        "ByUser",
        {
            "subjects": [
                *_users("system:kube-controller-manager", "system:kube-scheduler"),
                *_kube_system_accounts(NAME_ALL),
            ],
            "resourceRules": [
                {
                    "verbs": ["get", "create", "update"],
                    "apiGroups": [""],
                    "resources": ["endpoints", "configmaps"],
                    "namespaces": ["kube-system"],
                },
                _LEASES,
            ],
        },
    ),
    _schema(
        "endpoint-controller",
        "workload-high",
        150,
        "ByUser",
        {
            "subjects": [
                *_users("system:kube-controller-manager"),
                *_kube_system_accounts("endpoint-controller", "endpointslicemirroring-controller"),
            ],
            "resourceRules": [
                {
                    "verbs": ["get", "create", "update"],
                    "apiGroups": [""],
                    "resources": ["endpoints"],
                    "namespaces": [NAME_ALL],
                }
            ],
        },
    ),
    _schema(
        "workload-leader-election",
        "leader-election",
        200,
        "ByUser",
        {
            "subjects": _kube_system_accounts(NAME_ALL),
            "resourceRules": [
                {
                    "verbs": ["get", "create", "update"],
                    "apiGroups": [""],
                    "resources": ["endpoints", "configmaps"],
                    "namespaces": [NAME_ALL],
                },
                _LEASES,
            ],
        },
    ),
    _schema(
        "kube-controller-manager",
        "workload-high",
        800,
        "ByNamespace",
        {"subjects": _users("system:kube-controller-manager"), **EVERYTHING},
    ),
    _schema(
        "kube-scheduler",
        "workload-high",
        800,
        "ByNamespace",
        {"subjects": _users("system:kube-scheduler"), **EVERYTHING},
    ),
    _schema(
        "kube-system-service-accounts",
        "workload-high",
        900,
        "ByNamespace",
        {"subjects": _kube_system_accounts(NAME_ALL), **EVERYTHING},
    ),
    _schema(
        "service-accounts",
        "workload-low",
        9000,
        "ByUser",
        {"subjects": group_subjects("system:serviceaccounts"), **EVERYTHING},
    ),
    _schema(
        "global-default",
        "global-default",
        9900,
        "ByUser",
        {"subjects": group_subjects(*ALL_USERS), **EVERYTHING},
    ),
)

for _obj in (*MANDATORY_LEVELS, *MANDATORY_SCHEMAS, *SUGGESTED_LEVELS, *SUGGESTED_SCHEMAS):
    walk.set_defaults(_obj)


def _spec(obj: Resource) -> Any:
    return msgspec.to_builtins(getattr(obj, "spec", None))


def mandatory_changed(levels: Iterable[Resource], schemas: Iterable[Resource]) -> bool:
    """Whether a mandatory object is missing from, or differs in spec in, the given (cached)
    objects: then ``ensure`` should run now rather than at its next round."""
    for present, mandatory in ((levels, MANDATORY_LEVELS), (schemas, MANDATORY_SCHEMAS)):
        specs = {obj.metadata.name: _spec(obj) for obj in present}
        if any(specs.get(obj.metadata.name) != _spec(obj) for obj in mandatory):
            return True
    return False


async def ensure(schemas: ResourceStore, levels: ResourceStore) -> None:
    """Bring the stored configuration in line with the bootstrap one (see the docstring);
    idempotent, and safe beside other API servers doing the same (conflicts are retried on
    the next round)."""
    assert schemas.info.group == levels.info.group == GROUP
    for store, mandatory, suggested in (
        (levels, MANDATORY_LEVELS, SUGGESTED_LEVELS),
        (schemas, MANDATORY_SCHEMAS, SUGGESTED_SCHEMAS),
    ):
        await _ensure_each(store, mandatory, always=True)
        await _ensure_each(store, suggested, always=False)


async def _ensure_each(store: ResourceStore, wanted: Sequence[Resource], *, always: bool) -> None:
    for bootstrap in wanted:
        name = bootstrap.metadata.name or ""
        try:
            current = await store.get("", name)
        except errors.ApiError as error:
            if error.code != 404:
                raise
            await _write(store, bootstrap, None)
            continue
        annotation = (current.metadata.annotations or {}).get(AUTOUPDATE)
        if always:
            update = True
        elif annotation is not None:
            update = annotation.lower() == "true"
        else:
            update = current.metadata.generation == 1
        if update and (_spec(current) != _spec(bootstrap) or annotation != "true"):
            await _write(store, bootstrap, current)
        elif not update and annotation is None:
            await _write(store, current, current, autoupdate="false")


async def _write(
    store: ResourceStore, source: Resource, current: Resource | None, autoupdate: str = "true"
) -> None:
    """Create ``source`` (``current`` None) or update ``current`` with ``source``'s spec, and
    the autoupdate annotation; a conflict with a concurrent writer is left to the next round."""
    obj = copy.deepcopy(source)
    base = current.metadata if current is not None else source.metadata
    obj.metadata = msgspec.structs.replace(
        base, annotations={**(base.annotations or {}), AUTOUPDATE: autoupdate}
    )
    if current is not None:
        obj.status = getattr(current, "status", None)  # type: ignore[attr-defined]
    try:
        if current is None:
            await store.create("", obj, SYSTEM)
        else:
            await store.update("", obj.metadata.name or "", obj, SYSTEM)
    except errors.ApiError as error:
        if error.code != 409:
            raise
        log.info("%s %s changed meanwhile; next round", store.info.kind, obj.metadata.name)
