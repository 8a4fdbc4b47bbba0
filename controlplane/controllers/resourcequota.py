"""The resourcequota controller: keeps each ResourceQuota's ``status.used`` (and
``status.hard``, a copy of ``spec.hard``) current, so that quota admission charges against
the truth.

Keys are quotas (``namespace/name``).  A quota is recomputed when its spec changes, when an
object of a kind it may count is added, changed or deleted in its namespace (every quota of
that namespace is enqueued), and every five minutes regardless (upstream's full resync), which
also catches pods whose deletion grace ran out.  ``used`` holds exactly the resources ``hard``
names; usage is written only when it (or ``hard``) changed.

What is counted, as upstream's evaluators:

* **pods**: ``count/pods`` counts every pod; ``pods`` and the compute resources only pods that
  are not terminal (Succeeded/Failed) and not stuck terminating past their grace period.
  ``requests.cpu`` (also ``cpu``), ``requests.memory`` (``memory``), ``limits.cpu``,
  ``limits.memory``, the ephemeral-storage ones, hugepages and ``requests.<extended>`` are what
  the pod needs as a whole: containers and sidecars add up, each other init container may need
  more, overhead is added, pod-level resources win.
* **services** (with ``services.loadbalancers`` and ``services.nodeports``), **configmaps**,
  **secrets**, **replicationcontrollers**, **resourcequotas**: counts (``X`` and ``count/X``).
* **persistentvolumeclaims**: counts and ``requests.storage``, also per storage class
  (``<class>.storageclass.storage.k8s.io/...``).
* ``count/<resource>.<group>`` for any other served kind: the objects in the namespace, read
  with a list call, since this controller keeps no informer for kinds it does not know.

Scopes (``spec.scopes`` and ``spec.scopeSelector``) select pods: ``Terminating``,
``NotTerminating``, ``BestEffort``, ``NotBestEffort`` and ``PriorityClass`` (with its
operators).  Other kinds match no scope, so a scoped quota counts nothing but pods.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from kube.api.kinds.core_v1 import resources as resource_names
from kube.api.kinds.core_v1.cluster import (
    ConfigMap,
    ResourceQuota,
    ResourceQuotaStatus,
    ScopedResourceSelectorRequirement,
    Secret,
)
from kube.api.kinds.core_v1.pod import (
    Pod,
    Quantities,
    ReplicationController,
    containers_together,
    qos_class,
)
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.core_v1.volume import PersistentVolumeClaim, claim_class
from kube.api.quantity import Quantity
from kube.api.scheme import SCHEME
from kube.client.informers import SharedInformer

NAME = "resourcequota"
RESYNC_SECONDS = 5 * 60
COMPUTE = ("cpu", "memory", "ephemeral-storage")
STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
ONE = Quantity(1)
ZERO = Quantity(0)

Usage = dict[str, Quantity]


def add(total: Usage, more: Usage) -> None:
    for resource, amount in more.items():
        total[resource] = total[resource] + amount if resource in total else amount


def _amounts(resources: Any, which: str) -> Usage:
    values = getattr(resources, which, None) if resources is not None else None
    return {name: Quantity.parse(value) for name, value in (values or {}).items()}


def pod_resources(pod: Pod, which: str) -> Usage:
    """The pod's ``requests`` or ``limits`` as a whole (upstream ``PodRequests`` and
    ``PodLimits``): its containers together (``containers_together``), pod-level values
    instead where set, and overhead added (to limits only where something is limited)."""
    spec = pod.spec
    if spec is None:
        return {}
    total: Usage = containers_together(
        spec, lambda c: Quantities(_amounts(c.resources, which)), Quantities
    )
    for resource, amount in _amounts(spec.resources, which).items():
        if resource in ("cpu", "memory") or resource_names.is_hugepages(resource):
            total[resource] = amount
    overhead = {
        resource: amount
        for resource, amount in _amounts(spec, "overhead").items()
        if which == "requests" or resource in total
    }
    add(total, overhead)
    return total


def counts_against_quota(pod: Pod, now: datetime.datetime) -> bool:
    """Whether a pod's compute resources are charged (upstream ``QuotaV1Pod``): not terminal,
    and not stuck terminating past its grace period (on a lost node, say)."""
    if pod.status is not None and pod.status.phase in ("Succeeded", "Failed"):
        return False
    meta = pod.metadata
    if meta.deletion_timestamp is not None and meta.deletion_grace_period_seconds is not None:
        grace = datetime.timedelta(seconds=meta.deletion_grace_period_seconds)
        return now <= meta.deletion_timestamp + grace
    return True


def pod_usage(pod: Pod, now: datetime.datetime) -> Usage:
    usage: Usage = {"count/pods": ONE}
    if not counts_against_quota(pod, now):
        return usage
    usage["pods"] = ONE
    requests, limits = pod_resources(pod, "requests"), pod_resources(pod, "limits")
    for resource in COMPUTE:
        if resource in requests:
            usage[resource] = usage[f"requests.{resource}"] = requests[resource]
        if resource in limits:
            usage[f"limits.{resource}"] = limits[resource]
    for resource, amount in requests.items():
        if resource_names.is_hugepages(resource):
            usage[resource] = usage[f"requests.{resource}"] = amount
        elif resource_names.is_extended(resource):
            usage[f"requests.{resource}"] = amount
    return usage


def _is_pod_resource(resource: str) -> bool:
    if resource in ("pods", "count/pods", *COMPUTE) or resource_names.is_hugepages(resource):
        return True
    return resource != "requests.storage" and resource.startswith(("requests.", "limits."))


def pod_matches_scope(pod: Pod, requirement: ScopedResourceSelectorRequirement) -> bool:
    spec = pod.spec
    scope = requirement.scope_name
    if scope in ("Terminating", "NotTerminating"):
        deadline = spec.active_deadline_seconds if spec else None
        terminating = deadline is not None and deadline >= 0
        return terminating == (scope == "Terminating")
    if scope in ("BestEffort", "NotBestEffort"):
        return (qos_class(spec) == "BestEffort") == (scope == "BestEffort")
    if scope == "PriorityClass":
        priority_class = (spec.priority_class_name if spec else None) or ""
        values = requirement.values or []
        if requirement.operator == "In":
            return priority_class in values
        if requirement.operator == "NotIn":
            return priority_class not in values
        if requirement.operator == "Exists":
            return priority_class != ""
        return priority_class == ""
    return False


def service_usage(service: Service) -> Usage:
    usage: Usage = {"services": ONE, "count/services": ONE}
    spec = service.spec
    if spec is None or spec.type not in ("NodePort", "LoadBalancer"):
        return usage
    ports = spec.ports or []
    node_ports = len(ports)
    if spec.type == "LoadBalancer":
        usage["services.loadbalancers"] = ONE
        if spec.allocate_load_balancer_node_ports is False:
            node_ports = sum(1 for port in ports if port.node_port)
    usage["services.nodeports"] = Quantity(node_ports)
    return usage


def claim_usage(claim: PersistentVolumeClaim) -> Usage:
    usage: Usage = {"persistentvolumeclaims": ONE, "count/persistentvolumeclaims": ONE}
    storage_class = claim_class(claim)
    prefix = f"{storage_class}{STORAGE_CLASS_SUFFIX}" if storage_class else ""
    if prefix:
        usage[f"{prefix}persistentvolumeclaims"] = ONE
    requested = _amounts(claim.spec.resources if claim.spec else None, "requests").get("storage")
    allocated = _amounts(claim.status, "allocated_resources").get("storage")
    if allocated is not None and (requested is None or allocated > requested):
        requested = allocated
    if requested is not None:
        usage["requests.storage"] = requested
        if prefix:
            usage[f"{prefix}requests.storage"] = requested
    return usage


def _counts(plural: str) -> Callable[[Any], Usage]:
    def usage(obj: Any) -> Usage:
        return {plural: ONE, f"count/{plural}": ONE}

    return usage


@dataclass(frozen=True)
class Evaluator:
    """How one kind is charged: which quota resources it answers for, and an object's usage."""

    informer: SharedInformer[Any]
    matches: Callable[[str], bool]
    usage: Callable[[Any], Usage]
    scoped: bool = False
    """Whether quota scopes can select objects of the kind (only pods)."""


def _named(*plurals: str) -> Callable[[str], bool]:
    names = {name for plural in plurals for name in (plural, f"count/{plural}")}
    return names.__contains__


def _claim_resource(resource: str) -> bool:
    if resource in ("persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage"):
        return True
    _, suffix, rest = resource.partition(STORAGE_CLASS_SUFFIX)
    return bool(suffix) and rest in ("persistentvolumeclaims", "requests.storage")


class ResourceQuotaController(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.quotas = ctx.informers.informer_for(ResourceQuota)
        self.quotas.add_event_handler(self.enqueue, self._quota_updated)
        informers = ctx.informers
        self.evaluators = [
            Evaluator(
                informers.informer_for(Pod),
                _is_pod_resource,
                lambda pod: pod_usage(pod, self.ctx.clock.now()),
                scoped=True,
            ),
            Evaluator(
                informers.informer_for(Service),
                _named("services", "services.loadbalancers", "services.nodeports"),
                service_usage,
            ),
            Evaluator(informers.informer_for(PersistentVolumeClaim), _claim_resource, claim_usage),
            Evaluator(
                informers.informer_for(ConfigMap), _named("configmaps"), _counts("configmaps")
            ),
            Evaluator(informers.informer_for(Secret), _named("secrets"), _counts("secrets")),
            Evaluator(
                informers.informer_for(ReplicationController),
                _named("replicationcontrollers"),
                _counts("replicationcontrollers"),
            ),
            Evaluator(self.quotas, _named("resourcequotas"), _counts("resourcequotas")),
        ]
        for evaluator in self.evaluators:
            evaluator.informer.add_event_handler(
                self._object_changed, self._object_updated, self._object_changed
            )

    def _quota_updated(self, old: Any, new: Any) -> None:
        if old.spec != new.spec:
            self.enqueue(new)

    def _object_changed(self, obj: Any) -> None:
        for quota in self.quotas.lister.list(unwrap(obj).metadata.namespace):
            self.enqueue(quota)

    def _object_updated(self, old: Any, new: Any) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._object_changed(new)

    async def sync_key(self, key: str) -> None:
        quota = self.quotas.lister.get(key)
        if quota is None:
            return
        hard = dict((quota.spec.hard if quota.spec else None) or {})
        old = quota.status or ResourceQuotaStatus()
        used = await self._usage(quota, list(hard))
        # Resources nothing here can count keep what was observed before, as upstream.
        previous = old.used or {}
        for resource in hard:
            if resource not in used and resource in previous:
                used[resource] = Quantity.parse(previous[resource])
        used_text: dict[str, Any] = {r: str(amount) for r, amount in used.items()}
        if not (_same(hard, old.hard) and _same(used_text, old.used)):
            updated = copy.deepcopy(quota)
            updated.status = ResourceQuotaStatus(hard=hard or None, used=used_text or None)
            await self.ctx.client.update_status(updated)
        self.enqueue_after(quota, RESYNC_SECONDS)

    async def _usage(self, quota: ResourceQuota, hard: list[str]) -> Usage:
        namespace = quota.metadata.namespace or ""
        spec = quota.spec
        scopes = [
            ScopedResourceSelectorRequirement(scope_name=scope, operator="Exists")
            for scope in (spec.scopes if spec else None) or ()
        ]
        if spec is not None and spec.scope_selector is not None:
            scopes.extend(spec.scope_selector.match_expressions or ())
        used: Usage = {}
        for evaluator in self.evaluators:
            tracked = [resource for resource in hard if evaluator.matches(resource)]
            if not tracked:
                continue
            used.update(dict.fromkeys(tracked, ZERO))
            for obj in evaluator.informer.lister.list(namespace):
                if scopes and not (
                    evaluator.scoped and all(pod_matches_scope(obj, s) for s in scopes)
                ):
                    continue
                usage = evaluator.usage(obj)
                add(used, {r: q for r, q in usage.items() if r in tracked})
        for resource in hard:
            if resource.startswith("count/") and resource not in used:
                count = await self._count(resource.removeprefix("count/"), namespace)
                if count is not None:
                    used[resource] = Quantity(0 if scopes else count)
        return used

    async def _count(self, group_resource: str, namespace: str) -> int | None:
        """How many objects of ``plural.group`` the namespace holds; None for an unknown kind."""
        for info in SCHEME.served():
            if info.group_resource == group_resource and info.namespaced:
                result = await self.ctx.client.list(info.cls, namespace)
                return len(result.items)
        return None


def _same(new: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """Whether two resource lists hold the same amounts (``1Gi`` equals ``1073741824``)."""
    old = old or {}
    return new.keys() == old.keys() and all(
        Quantity.parse(value) == Quantity.parse(old[resource]) for resource, value in new.items()
    )


def new(ctx: ControllerContext) -> ResourceQuotaController:
    return ResourceQuotaController(ctx)
