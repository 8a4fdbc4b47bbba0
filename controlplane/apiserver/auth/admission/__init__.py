"""Admission: the plugins every write passes between defaulting and validation.

``enabled`` turns ``--enable-admission-plugins`` / ``--disable-admission-plugins`` into the
plugins to run, in upstream's order; ``plugins`` builds them over the server's watch caches,
each as its two halves (``Plugin``): the mutating one (upstream's ``Admit``) and the
validating one (``Validate``).  ``chain`` runs them as upstream's admission chain does: every
mutating half in order (NamespaceLifecycle, LimitRanger's defaults, ServiceAccount's,
NodeRestriction, TaintNodesByCondition, AlwaysPullImages, Priority, DefaultTolerationSeconds,
DefaultStorageClass, RuntimeClass, DefaultIngressClass, then the MutatingAdmissionPolicies
(``mutatingpolicy``) and the mutating webhooks), all of them once more when a policy or a
mutating webhook changed the object (``webhook.Reinvocation``), and only
then every validating half (LimitRanger's bounds, ServiceAccount's checks, AlwaysPullImages',
PodSecurity, RuntimeClass's overhead check, the server's own checks, the
ValidatingAdmissionPolicies (``policy``), the validating webhooks, and ResourceQuota last, so
that a write refused by another plugin never consumes quota).  So what a mutating webhook did
is checked as what the client sent is.  NamespaceLifecycle and NodeRestriction are mutating
halves, as upstream's (they only refuse, but before any webhook sees the request).  The small
built-in plugins live here:

- **NamespaceLifecycle**: objects are created only in namespaces that exist and are not
  terminating; the system namespaces cannot be deleted.
- **DefaultTolerationSeconds**: a pod that does not say how long it tolerates its node being
  not-ready or unreachable tolerates it for 300 seconds, after which the taint eviction of
  the node-lifecycle controller moves it.
- **TaintNodesByCondition**: a new Node is tainted ``node.kubernetes.io/not-ready:NoSchedule``
  until the node-lifecycle controller sees it Ready, so nothing is scheduled to a node that
  has not reported yet.
- **AlwaysPullImages** (optional): every new image of a pod is pulled (``imagePullPolicy:
  Always``), so a pod cannot use an image another pod's credentials pulled onto its node;
  its validating half refuses a pod a mutating webhook set back to another policy.
- **DefaultStorageClass**: a claim that names no class (``storageClassName`` absent, not "")
  gets the default class, the newest if several are marked default.
- **DefaultIngressClass**: a new Ingress that names no class (neither ``ingressClassName`` nor
  the deprecated ``kubernetes.io/ingress.class`` annotation) gets the IngressClass annotated
  ``ingressclass.kubernetes.io/is-default-class: "true"``, the newest if several are.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from controlplane.apiserver import errors
from controlplane.apiserver.auth import Authorizer
from controlplane.apiserver.auth.admission import (
    limitranger,
    mutatingpolicy,
    noderestriction,
    podsecurity,
    policy,
    quota,
    runtimeclass,
    serviceaccount,
    webhook,
)
from controlplane.apiserver.registry.store import Admission, RequestContext
from controlplane.apiserver.storage.watchcache import WatchCache
from kube.api.kinds.core_v1.node import Node, NodeSpec, Taint
from kube.api.kinds.core_v1.pod import Container, Pod, Toleration
from kube.api.kinds.core_v1.volume import PersistentVolumeClaim
from kube.api.kinds.networking_v1 import INGRESS_CLASS_ANNOTATION, Ingress, IngressClass
from kube.api.kinds.networking_v1 import is_default_class as is_default_ingress_class
from kube.api.kinds.scheduling_v1 import PriorityClass
from kube.api.kinds.storage_v1 import StorageClass, is_default_class
from kube.api.meta_v1 import Resource
from kube.api.scheme import KindInfo

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


def always_pull_images() -> tuple[Admission, Admission]:
    """Its ``Admit`` (new images are pulled ``Always``) and its ``Validate`` (a mutating webhook
    has not set them back)."""

    def new_images(
        operation: str, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> list[tuple[str, Container]]:
        """The containers (with their field path) whose image the pod did not have before."""
        if operation not in ("CREATE", "UPDATE") or not isinstance(obj, Pod) or obj.spec is None:
            return []
        if ctx.subresource not in ("", "ephemeralcontainers"):
            return []
        before = old.spec if isinstance(old, Pod) else None
        known = {
            c.image
            for field in CONTAINER_FIELDS
            for c in (getattr(before, field, None) or () if before else ())
        }
        return [
            (f"spec.{encoded}[{i}]", container)
            for field, encoded in CONTAINER_FIELDS.items()
            for i, container in enumerate(getattr(obj.spec, field, None) or ())
            if container.image not in known
        ]

    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        for _, container in new_images(operation, obj, old, ctx):
            container.image_pull_policy = "Always"

    async def validate(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        for path, container in new_images(operation, obj, old, ctx):
            if container.image_pull_policy != "Always":
                name = obj.metadata.name or ""
                raise errors.forbidden(
                    info,
                    name,
                    f'pods "{name}" is forbidden: {path}.imagePullPolicy: Unsupported value: '
                    f'"{container.image_pull_policy or ""}": supported values: "Always"',
                )

    return admit, validate


CONTAINER_FIELDS = {
    "init_containers": "initContainers",
    "containers": "containers",
    "ephemeral_containers": "ephemeralContainers",
}
"""A pod spec's container lists: attribute and JSON name."""


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
            obj.spec.storage_class_name = _newest(defaults)

    return admit


def default_ingress_class(classes: WatchCache) -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if operation != "CREATE" or not isinstance(obj, Ingress) or ctx.subresource:
            return
        if obj.spec is None or obj.spec.ingress_class_name is not None:
            return
        if INGRESS_CLASS_ANNOTATION in (obj.metadata.annotations or {}):
            return
        defaults = [
            c
            for c in classes.objects()
            if isinstance(c, IngressClass) and is_default_ingress_class(c)
        ]
        if defaults:
            obj.spec.ingress_class_name = _newest(defaults)

    return admit


def _newest(classes: Sequence[Resource]) -> str | None:
    """The name of the most recently created class; of those created in the same second, the
    first by name (as upstream sorts default classes)."""
    newest = min(
        classes,
        key=lambda c: (
            -(c.metadata.creation_timestamp or _EPOCH).timestamp(),
            c.metadata.name or "",
        ),
    )
    return newest.metadata.name


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


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
    "RuntimeClass",
    "DefaultIngressClass",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
)
"""Every plugin this server knows, in upstream's order (``AllOrderedPlugins``)."""
DEFAULT_PLUGINS = (
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "TaintNodesByCondition",
    "PodSecurity",
    "Priority",
    "DefaultTolerationSeconds",
    "DefaultStorageClass",
    "RuntimeClass",
    "DefaultIngressClass",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
)
"""Upstream's default set, of the plugins above (NodeRestriction and AlwaysPullImages are
opt-in there too)."""
LAST = (
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
)
"""The plugins upstream keeps at the end of the order: the server's own checks (``chain``'s
``checks``) go before them, so that webhooks see what they settled and quota is charged
last."""

Mutation = webhook.Mutation


@dataclass(frozen=True)
class Plugin:
    """One plugin's two halves, upstream's ``Admit`` (may change the object) and ``Validate``
    (may only refuse it)."""

    mutate: Mutation | None = None
    validate: Admission | None = None


def mutating(admit: Admission) -> Mutation:
    """A built-in mutating step: it runs again whole when the request is reinvoked, as upstream
    reinvokes every in-tree plugin."""

    async def mutate(
        operation: str,
        info: KindInfo,
        obj: Resource,
        old: Resource | None,
        ctx: RequestContext,
        rounds: webhook.Reinvocation,
    ) -> None:
        await admit(operation, info, obj, old, ctx)

    return mutate


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


def plugins(
    names: Sequence[str], cache: CacheFor, stores: webhook.Stores, authorizer: Authorizer
) -> dict[str, Plugin]:
    """The plugins named, over the server's caches (and its stores, where webhooks' services
    and equivalent versions are looked up; its authorizer, for webhooks' match conditions)."""
    hooks = ("admissionregistration.k8s.io", "v1")
    namespaces = ("", "v1", "namespaces")

    def limit_ranger() -> Plugin:
        defaults, bounds = limitranger.limit_ranger(cache(("", "v1", "limitranges")))
        return Plugin(mutating(defaults), bounds)

    def service_account() -> Plugin:
        admit, validate = serviceaccount.service_account(cache(("", "v1", "serviceaccounts")))
        return Plugin(mutating(admit), validate)

    def runtime_class() -> Plugin:
        admit, validate = runtimeclass.runtime_class(cache(("node.k8s.io", "v1", "runtimeclasses")))
        return Plugin(mutating(admit), validate)

    def pull_images() -> Plugin:
        admit, validate = always_pull_images()
        return Plugin(mutating(admit), validate)

    factories: dict[str, Callable[[], Plugin]] = {
        "NamespaceLifecycle": lambda: Plugin(mutating(namespace_lifecycle(cache(namespaces)))),
        "LimitRanger": limit_ranger,
        "ServiceAccount": service_account,
        "NodeRestriction": lambda: Plugin(
            mutating(noderestriction.node_restriction(cache(("", "v1", "pods"))))
        ),
        "TaintNodesByCondition": lambda: Plugin(mutating(taint_nodes_by_condition())),
        "AlwaysPullImages": pull_images,
        "PodSecurity": lambda: Plugin(
            validate=podsecurity.pod_security(cache(namespaces), cache(("", "v1", "pods")))
        ),
        "DefaultStorageClass": lambda: Plugin(
            mutating(default_storage_class(cache(("storage.k8s.io", "v1", "storageclasses"))))
        ),
        "RuntimeClass": runtime_class,
        "DefaultIngressClass": lambda: Plugin(
            mutating(default_ingress_class(cache(("networking.k8s.io", "v1", "ingressclasses"))))
        ),
        "Priority": lambda: Plugin(
            mutating(priority(cache(("scheduling.k8s.io", "v1", "priorityclasses"))))
        ),
        "DefaultTolerationSeconds": lambda: Plugin(mutating(default_toleration_seconds())),
        "MutatingAdmissionPolicy": lambda: Plugin(
            mutate=mutatingpolicy.mutating_policies(
                cache((*hooks, "mutatingadmissionpolicies")),
                cache((*hooks, "mutatingadmissionpolicybindings")),
                cache(namespaces),
                stores,
                authorizer,
            )
        ),
        "MutatingAdmissionWebhook": lambda: Plugin(
            mutate=webhook.mutating(
                cache((*hooks, "mutatingwebhookconfigurations")),
                cache(namespaces),
                stores,
                authorizer,
            )
        ),
        "ValidatingAdmissionPolicy": lambda: Plugin(
            validate=policy.validating_policies(
                cache((*hooks, "validatingadmissionpolicies")),
                cache((*hooks, "validatingadmissionpolicybindings")),
                cache(namespaces),
                stores,
                authorizer,
            )
        ),
        "ValidatingAdmissionWebhook": lambda: Plugin(
            validate=webhook.validating(
                cache((*hooks, "validatingwebhookconfigurations")),
                cache(namespaces),
                stores,
                authorizer,
            )
        ),
        "ResourceQuota": lambda: Plugin(
            validate=quota.resource_quota(
                cache(("", "v1", "resourcequotas")), cache(("", "v1", "resourcequotas")).store
            )
        ),
    }
    return {name: factories[name]() for name in names}


def chain(named: Mapping[str, Plugin], checks: Sequence[Admission] = ()) -> Admission:
    """All of admission as one stage, run as upstream runs it: every mutating step, in order
    (and once more if a mutating webhook changed the object and a webhook asked to be
    reinvoked), then every validating step, in order, so that what a webhook changed is
    checked like what the client sent.  ``checks`` are the server's other validating steps
    (RBAC escalation, CertificateSigningRequest approval), run before ``LAST``."""
    ordered = [plugin for name, plugin in named.items() if name not in LAST]
    ordered += [Plugin(validate=check) for check in checks]
    ordered += [named[name] for name in LAST if name in named]
    mutations = [p.mutate for p in ordered if p.mutate is not None]
    validations = [p.validate for p in ordered if p.validate is not None]

    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        rounds = webhook.Reinvocation()
        for again in (False, True):
            rounds.again = again
            for mutate in mutations:
                await mutate(operation, info, obj, old, ctx, rounds)
            if not rounds.wanted:
                break
        for validate in validations:
            await validate(operation, info, obj, old, ctx)

    return admit
