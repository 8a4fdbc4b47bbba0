"""The built-in admission stages: what every write passes between defaulting and validation.

- **NamespaceLifecycle**: objects are created only in namespaces that exist and are not
  terminating; the system namespaces cannot be deleted.
- **DefaultTolerationSeconds**: a pod that does not say how long it tolerates its node being
  not-ready or unreachable tolerates it for 300 seconds, after which the taint eviction of
  the node-lifecycle controller moves it.
- **Priority**: a pod's ``priorityClassName`` (or the cluster's global default class) becomes
  its ``spec.priority`` and ``spec.preemptionPolicy``; an unknown class is refused, as are
  values the pod sets itself that disagree with its class, and the two system classes outside
  ``kube-system``.

Both read through watch caches (``WatchCache``), falling back to the store when the cache
has not seen an object yet, so a pod created right after its namespace is still admitted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controlplane.apiserver import errors
from controlplane.apiserver.registry import Admission, RequestContext
from controlplane.apiserver.watchcache import WatchCache
from kubelab.api.kinds.core_v1.pod import Pod, Toleration
from kubelab.api.kinds.scheduling_v1 import PriorityClass
from kubelab.api.meta_v1 import Resource
from kubelab.api.scheme import KindInfo

if TYPE_CHECKING:
    from controlplane.apiserver.registry import ResourceStore

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


def caches(stores: dict[tuple[str, str, str], ResourceStore]) -> tuple[WatchCache, WatchCache]:
    """The caches the built-in stages read: namespaces and PriorityClasses."""
    return (
        WatchCache(stores[("", "v1", "namespaces")]),
        WatchCache(stores[("scheduling.k8s.io", "v1", "priorityclasses")]),
    )
