"""Admission: the plugins every write passes between defaulting and validation.

``enabled`` turns ``--enable-admission-plugins`` / ``--disable-admission-plugins`` into the
plugins to run, in upstream's fixed order (mutating ones first, ResourceQuota last, so that a
write refused by another plugin never consumes quota); ``plugins`` builds them over the
server's watch caches.  The small built-in ones live here:

- **NamespaceLifecycle**: objects are created only in namespaces that exist and are not
  terminating; the system namespaces cannot be deleted.
- **DefaultTolerationSeconds**: a pod that does not say how long it tolerates its node being
  not-ready or unreachable tolerates it for 300 seconds, after which the taint eviction of
  the node-lifecycle controller moves it.
- **TaintNodesByCondition**: a new Node is tainted ``node.kubernetes.io/not-ready:NoSchedule``
  until the node-lifecycle controller sees it Ready, so nothing is scheduled to a node that
  has not reported yet.
- **AlwaysPullImages** (optional): every new image of a pod is pulled (``imagePullPolicy:
  Always``), so a pod cannot use an image another pod's credentials pulled onto its node.
- **DefaultStorageClass**: a claim that names no class (``storageClassName`` absent, not "")
  gets the default class, the newest if several are marked default.
- **Priority**: a pod's ``priorityClassName`` (or the cluster's global default class) becomes
  its ``spec.priority`` and ``spec.preemptionPolicy``; an unknown class is refused, as are
  values the pod sets itself that disagree with its class, and the two system classes outside
  ``kube-system``.

The others have a module each.  All read through watch caches (``WatchCache``), falling back
to the store when the cache has not seen an object yet, so a pod created right after its
namespace is still admitted.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence

from controlplane.apiserver import errors
from controlplane.apiserver.admission import (
    limitranger,
    noderestriction,
    podsecurity,
    quota,
    serviceaccount,
    webhook,
)
from controlplane.apiserver.registry import Admission, RequestContext
from controlplane.apiserver.watchcache import WatchCache
from kubelab.api.kinds.core_v1.node import Node, NodeSpec, Taint
from kubelab.api.kinds.core_v1.pod import Pod, Toleration
from kubelab.api.kinds.core_v1.volume import PersistentVolumeClaim
from kubelab.api.kinds.scheduling_v1 import PriorityClass
from kubelab.api.kinds.storage_v1 import StorageClass, is_default_class
from kubelab.api.meta_v1 import Resource
from kubelab.api.scheme import KindInfo

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_PRIORITY_CLASSES = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}
"""The classes every cluster has, for the components that must never be preempted."""


def namespace_lifecycle(namespaces: WatchCache) -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if info.kind == "Namespace" and operation == "DELETE":
            if obj.metadata.name in SYSTEM_NAMESPACES:
                raise errors.forbidden(
                    info,
                    obj.metadata.name or "",
                    f'namespaces "{obj.metadata.name}" is forbidden: this namespace may not be '
                    "deleted",
                )
            return
        if operation != "CREATE" or not info.namespaced:
            return
        name = obj.metadata.namespace or ""
        namespace = await namespaces.lookup("", name)
        if namespace is None:
            raise errors.not_found(namespaces.store.info, name)
        if namespace.metadata.deletion_timestamp is not None:
            raise errors.forbidden(
                info,
                obj.metadata.name or "",
                f'{info.plural} "{obj.metadata.name}" is forbidden: unable to create new content '
                f"in namespace {name} because it is being terminated",
            )

    return admit


def priority(classes: WatchCache) -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if operation != "CREATE" or not isinstance(obj, Pod) or obj.spec is None:
            return
        spec = obj.spec
        name = obj.metadata.name or ""

        def refuse(message: str) -> errors.ApiError:
            return errors.forbidden(info, name, f'pods "{name}" is forbidden: {message}')

        wanted = spec.priority_class_name
        if wanted:
            found = await classes.lookup("", wanted)
            if not isinstance(found, PriorityClass):
                raise refuse(f"no PriorityClass with name {wanted} was found")
            if wanted in SYSTEM_PRIORITY_CLASSES and obj.metadata.namespace != "kube-system":
                raise refuse(
                    f"pods with {wanted} priorityClass is not permitted in "
                    f"{obj.metadata.namespace} namespace"
                )
            chosen: PriorityClass | None = found
        else:
            defaults = [
                c for c in classes.objects() if isinstance(c, PriorityClass) and c.global_default
            ]
            chosen = min(defaults, key=lambda c: c.value or 0) if defaults else None
        value = (chosen.value or 0) if chosen else 0
        policy = (chosen.preemption_policy if chosen else None) or "PreemptLowerPriority"
        if spec.priority is not None and spec.priority != value:
            raise refuse(
                f"the integer value of priority ({spec.priority}) must not be provided in pod "
                f"spec; priority admission controller computed {value} from the given "
                "PriorityClass name"
            )
        if spec.preemption_policy is not None and spec.preemption_policy != policy:
            raise refuse(
                f"the string value of PreemptionPolicy ({spec.preemption_policy}) must not be "
                f"provided in pod spec; priority admission controller computed {policy} from "
                "the given PriorityClass name"
            )
        if chosen is not None and not wanted:
            spec.priority_class_name = chosen.metadata.name
        spec.priority = value
        spec.preemption_policy = policy

    return admit


DEFAULT_TOLERATION_SECONDS = 300
NODE_CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def default_toleration_seconds() -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if operation != "CREATE" or not isinstance(obj, Pod) or obj.spec is None:
            return
        tolerations = list(obj.spec.tolerations or ())
        for key in NODE_CONDITION_TAINTS:
            if not any(_tolerates_no_execute(t, key) for t in tolerations):
                tolerations.append(
                    Toleration(
                        key=key,
                        operator="Exists",
                        effect="NoExecute",
                        toleration_seconds=DEFAULT_TOLERATION_SECONDS,
                    )
                )
        obj.spec.tolerations = tolerations

    return admit


def _tolerates_no_execute(toleration: Toleration, key: str) -> bool:
    """Whether the pod already says how it treats ``key``'s NoExecute taint: a toleration of
    that key or of every key, for NoExecute or every effect (as upstream checks)."""
    return toleration.key in (key, None, "") and toleration.effect in (None, "", "NoExecute")


NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def taint_nodes_by_condition() -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if operation != "CREATE" or not isinstance(obj, Node) or ctx.subresource:
            return
        spec = obj.spec = obj.spec or NodeSpec()
        taints = list(spec.taints or ())
        if not any(t.key == NOT_READY_TAINT and t.effect == "NoSchedule" for t in taints):
            taints.append(Taint(key=NOT_READY_TAINT, effect="NoSchedule"))
        spec.taints = taints

    return admit


def always_pull_images() -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if operation not in ("CREATE", "UPDATE") or not isinstance(obj, Pod) or obj.spec is None:
            return
        if ctx.subresource not in ("", "ephemeralcontainers"):
            return
        before = old.spec if isinstance(old, Pod) else None
        known = {
            c.image
            for c in [
                *((before.init_containers or []) if before else []),
                *((before.containers or []) if before else []),
                *((before.ephemeral_containers or []) if before else []),
            ]
        }
        spec = obj.spec
        for container in [
            *(spec.init_containers or ()),
            *(spec.containers or ()),
            *(spec.ephemeral_containers or ()),
        ]:
            if container.image not in known:
                container.image_pull_policy = "Always"

    return admit


def default_storage_class(classes: WatchCache) -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if operation != "CREATE" or not isinstance(obj, PersistentVolumeClaim):
            return
        if obj.spec is None or obj.spec.storage_class_name is not None:
            return
        defaults = [
            c for c in classes.objects() if isinstance(c, StorageClass) and is_default_class(c)
        ]
        if defaults:
            newest = max(
                defaults,
                key=lambda c: (
                    c.metadata.creation_timestamp or datetime.datetime.min,
                    c.metadata.name or "",
                ),
            )
            obj.spec.storage_class_name = newest.metadata.name

    return admit


CacheFor = Callable[[tuple[str, str, str]], WatchCache]
"""The server's watch cache of a resource (group, version, plural), made on first use."""

ORDER = (
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "PodSecurity",
    "Priority",
    "DefaultTolerationSeconds",
    "DefaultStorageClass",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
)
"""Every plugin this server knows, in the order they run (upstream's)."""
DEFAULT_PLUGINS = (
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "TaintNodesByCondition",
    "PodSecurity",
    "Priority",
    "DefaultTolerationSeconds",
    "DefaultStorageClass",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
)
"""Upstream's default set, of the plugins above (NodeRestriction and AlwaysPullImages are
opt-in there too)."""


def enabled(enable: Sequence[str] = (), disable: Sequence[str] = ()) -> list[str]:
    """The plugins to run: the defaults, plus ``enable``, minus ``disable``, in ``ORDER``."""
    for flag, names in (("enable", enable), ("disable", disable)):
        for name in names:
            if name not in ORDER:
                raise ValueError(f'{flag}-admission-plugins plugin "{name}" is unknown')
    for name in sorted(set(enable) & set(disable)):
        raise ValueError(f'"{name}" both in enable-admission-plugins and disable-admission-plugins')
    chosen = (set(DEFAULT_PLUGINS) | set(enable)) - set(disable)
    return [name for name in ORDER if name in chosen]


def plugins(names: Sequence[str], cache: CacheFor, stores: webhook.Stores) -> list[Admission]:
    """The admission stages named, over the server's caches (and its stores, where webhooks'
    services are looked up)."""
    hooks = ("admissionregistration.k8s.io", "v1")
    factories: dict[str, Callable[[], Admission]] = {
        "NamespaceLifecycle": lambda: namespace_lifecycle(cache(("", "v1", "namespaces"))),
        "LimitRanger": lambda: limitranger.limit_ranger(cache(("", "v1", "limitranges"))),
        "ServiceAccount": lambda: serviceaccount.service_account(
            cache(("", "v1", "serviceaccounts"))
        ),
        "NodeRestriction": lambda: noderestriction.node_restriction(cache(("", "v1", "pods"))),
        "TaintNodesByCondition": taint_nodes_by_condition,
        "AlwaysPullImages": always_pull_images,
        "PodSecurity": lambda: podsecurity.pod_security(
            cache(("", "v1", "namespaces")), cache(("", "v1", "pods"))
        ),
        "DefaultStorageClass": lambda: default_storage_class(
            cache(("storage.k8s.io", "v1", "storageclasses"))
        ),
        "Priority": lambda: priority(cache(("scheduling.k8s.io", "v1", "priorityclasses"))),
        "DefaultTolerationSeconds": default_toleration_seconds,
        "MutatingAdmissionWebhook": lambda: webhook.mutating(
            cache((*hooks, "mutatingwebhookconfigurations")),
            cache(("", "v1", "namespaces")),
            stores,
        ),
        "ValidatingAdmissionWebhook": lambda: webhook.validating(
            cache((*hooks, "validatingwebhookconfigurations")),
            cache(("", "v1", "namespaces")),
            stores,
        ),
        "ResourceQuota": lambda: quota.resource_quota(
            cache(("", "v1", "resourcequotas")), cache(("", "v1", "resourcequotas")).store
        ),
    }
    return [factories[name]() for name in names]
