"""The namespace controller: a deleted namespace is emptied, then released.

Deleting a namespace only marks it (deletionTimestamp, phase Terminating); the API server
keeps it while ``spec.finalizers`` holds ``kubernetes``.  This controller then deletes
everything in it, of every namespaced resource discovery lists as deletable, custom
resources included (the program's own scheme would miss those), and once nothing is left
it removes ``kubernetes`` through the namespace's ``finalize`` subresource, the only way to
change that list.

A sync, as upstream's ``namespacedResourcesDeleter``:

1. reads the namespace live (other controllers edit it while it terminates) and sets phase
   Terminating if it was not;
2. discovers the resources; a group that fails is reported, the others are still emptied;
3. deletes pods first and waits for them to go before anything else (ordered namespace
   deletion: their volumes, secrets and service accounts stay while they run down), then
   each other resource with one ``deletecollection`` (or list and delete one by one where
   that is not supported), with Background propagation so no ``orphan`` finalizer appears;
4. lists what is left and records it in the namespace's conditions
   (``NamespaceDeletionDiscoveryFailure``, ``NamespaceDeletionContentFailure``,
   ``NamespaceContentRemaining``, ``NamespaceFinalizersRemaining``, each set to False with
   upstream's "ok" reason once it no longer applies);
5. while something remains, comes back after half the estimated wait plus a second: the
   longest grace period of the running pods, or 15 seconds when objects wait on
   finalizers; objects that remain for no reason are an error and retried with backoff;
6. finalizes the namespace when it is empty.

Handlers only queue namespaces being deleted, five seconds late as upstream does, so that
content created at the last moment is seen.

At start, before its workers, the controller also deletes what lives in namespaces that no
longer exist.  Only a server that let a namespace go without the ``kubernetes`` finalizer
(kubelab's did, for namespaces created with a ``spec``) leaves such content behind, and
nothing else would ever remove it; each namespace found is logged with what it held.
"""

from __future__ import annotations

import datetime
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import msgspec

from controlplane.controllers import discovery
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller
from kube.api import codec
from kube.api.kinds.core_v1.cluster import (
    KUBERNETES_FINALIZER,
    Namespace,
    NamespaceCondition,
    NamespaceSpec,
    NamespaceStatus,
)
from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import DeleteOptions
from kube.client.errors import ApiError, ClientError

log = logging.getLogger("kubelab.controllers.namespace")

NAME = "namespace"
DELETION_DELAY = 5.0
"""Seconds between seeing a namespace deleted and acting on it (upstream's grace period)."""
FINALIZER_ESTIMATE_SECONDS = 15
"""The wait assumed for objects held by finalizers."""

DISCOVERY_FAILURE = "NamespaceDeletionDiscoveryFailure"
GROUP_VERSION_PARSING_FAILURE = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"
OK: dict[str, tuple[str, str]] = {
    DISCOVERY_FAILURE: ("ResourcesDiscovered", "All resources successfully discovered"),
    GROUP_VERSION_PARSING_FAILURE: (
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    CONTENT_FAILURE: (
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    CONTENT_REMAINING: ("ContentRemoved", "All content successfully removed"),
    FINALIZERS_REMAINING: ("ContentRemoved", "All content successfully removed"),
}
"""Each condition this controller owns, in upstream's order, with its "ok" reason and message."""
UNSUPPORTED = (404, 405)
"""What the server answers for a verb a resource does not support."""


class ContentDeletionError(ClientError):
    """Some content could not be deleted (or discovered); the namespace is retried."""


@dataclass
class _Remaining:
    """What one resource, or the whole namespace, still holds after a round of deletes."""

    estimate: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    """``plural.group`` → objects left."""
    finalizers: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    def add(self, other: _Remaining) -> None:
        self.estimate = max(self.estimate, other.estimate)
        self.counts.update({k: v for k, v in other.counts.items() if v})
        self.finalizers.update(other.finalizers)
        self.errors.extend(other.errors)


class NamespaceController(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.namespaces = ctx.informers.informer_for(Namespace)
        self.namespaces.add_event_handler(self._changed, self._updated)

    def _changed(self, namespace: Namespace) -> None:
        if namespace.metadata.deletion_timestamp is not None:
            self.enqueue_after(namespace, DELETION_DELAY)

    def _updated(self, old: Namespace, new: Namespace) -> None:
        self._changed(new)

    async def run(self, workers: int) -> None:
        await self.ctx.informers.wait_for_cache_sync()
        try:
            await self.delete_orphaned_content()
        except (ApiError, ClientError) as error:
            log.warning("namespace controller: content of deleted namespaces: %s", error)
        await super().run(workers)

    async def delete_orphaned_content(self) -> list[str]:
        """Delete the content of namespaces that do not exist; the namespaces it was in."""
        found = await discovery.discover(self.ctx.client)
        resources = [r for r in found.resources if r.path.namespaced and "delete" in r.verbs]
        held: dict[str, Counter[str]] = {}
        for resource in resources:
            for item in await self._list(resource, ""):
                name = item.get("metadata", {}).get("namespace") or ""
                if name and self.namespaces.lister.get(name) is None:
                    held.setdefault(name, Counter())[resource.group_resource] += 1
        orphaned = [name for name in sorted(held) if not await self._exists(name)]
        for name in orphaned:
            content = ", ".join(f"{n} {gr}" for gr, n in sorted(held[name].items()))
            log.warning("namespace %s does not exist but holds %s: deleting them", name, content)
            now = self.ctx.clock.now()
            for resource in sorted(resources, key=lambda r: r.path.plural != "pods"):
                left = await self._delete_resource(resource, name, now)
                for error in left.errors:
                    log.warning("namespace %s (deleted): %s", name, error)
        return orphaned

    async def _exists(self, name: str) -> bool:
        try:
            await self.ctx.client.get(Namespace, name)
        except ApiError as error:
            if error.not_found:
                return False
            raise
        return True

    async def sync_key(self, key: str) -> None:
        if self.namespaces.lister.get(key) is None:
            return
        estimate = await self.delete(key)
        if estimate > 0:
            self.queue.add_after(key, estimate // 2 + 1)

    async def delete(self, name: str) -> int:
        """Empty and finalize the namespace; seconds to wait if content remains."""
        try:
            namespace = await self.ctx.client.get(Namespace, name)
        except ApiError as error:
            if error.not_found:
                return 0
            raise
        deleted_at = namespace.metadata.deletion_timestamp
        if deleted_at is None:
            return 0
        status = namespace.status or NamespaceStatus()
        if status.phase != "Terminating":
            namespace.status = msgspec.structs.replace(status, phase="Terminating")
            namespace = await self.ctx.client.update_status(namespace)
        if not (namespace.spec and namespace.spec.finalizers):
            return 0
        estimate = await self._delete_all_content(namespace, deleted_at)
        if estimate > 0:
            return estimate
        finalizers = sorted(set(namespace.spec.finalizers) - {KUBERNETES_FINALIZER})
        namespace.spec = NamespaceSpec(finalizers=finalizers)
        try:
            await self.ctx.client.update(namespace, subresource="finalize")
        except ApiError as error:
            if not error.not_found:
                raise
        return 0

    async def _delete_all_content(self, namespace: Namespace, deleted_at: datetime.datetime) -> int:
        name = namespace.metadata.name or ""
        discovery_error = ""
        try:
            found = await discovery.discover(self.ctx.client)
        except (ApiError, ClientError) as error:
            found = discovery.Discovered()
            discovery_error = str(error)
        if found.failed:
            discovery_error = (
                f"Discovery failed for some groups, {len(found.failed)} failing: {found.error()}"
            )
        resources = [r for r in found.resources if r.path.namespaced and "delete" in r.verbs]
        pods = [r for r in resources if (r.path.group, r.path.plural) == ("", "pods")]
        others = [r for r in resources if r not in pods]
        remaining = _Remaining()
        for resource in pods:
            remaining.add(await self._delete_resource(resource, name, deleted_at))
        if not remaining.counts:
            for resource in others:
                remaining.add(await self._delete_resource(resource, name, deleted_at))
        await self._record(namespace, discovery_error, remaining)
        errors = [e for e in (discovery_error, *remaining.errors) if e]
        if errors:
            raise ContentDeletionError("; ".join(errors))
        return remaining.estimate

    async def _delete_resource(
        self, resource: discovery.APIResource, namespace: str, deleted_at: datetime.datetime
    ) -> _Remaining:
        estimate = 0
        try:
            if resource.path.group == "" and resource.path.plural == "pods":
                estimate = await self._pod_grace_estimate(namespace, deleted_at)
            if not await self._delete_collection(resource, namespace):
                await self._delete_each(resource, namespace)
            items = await self._list(resource, namespace)
        except (ApiError, ClientError) as error:
            return _Remaining(estimate, errors=[str(error)])
        if not items:
            return _Remaining()
        left = _Remaining(estimate, {resource.group_resource: len(items)})
        for item in items:
            left.finalizers.update(item.get("metadata", {}).get("finalizers") or ())
        if not estimate and left.finalizers:
            left.estimate = FINALIZER_ESTIMATE_SECONDS
        elif not estimate:
            path = resource.path
            left.errors.append(
                f"unexpected items still remain in namespace: {namespace} for gvr: "
                f"{{{path.group} {path.version} {path.plural}}}"
            )
        return left

    async def _pod_grace_estimate(self, namespace: str, deleted_at: datetime.datetime) -> int:
        """The longest grace period of the namespace's running pods, unless already past."""
        estimate = 0
        for pod in (await self.ctx.client.list(Pod, namespace)).items:
            if pod.status is not None and pod.status.phase in ("Succeeded", "Failed"):
                continue
            grace = pod.spec.termination_grace_period_seconds if pod.spec else None
            estimate = max(estimate, grace or 0)
        elapsed = (self.ctx.clock.now() - deleted_at).total_seconds()
        return 0 if elapsed >= estimate else estimate

    async def _delete_collection(self, resource: discovery.APIResource, namespace: str) -> bool:
        """Delete everything at once; False if the resource does not support it."""
        if "deletecollection" not in resource.verbs:
            return False
        try:
            await self.ctx.client.request("DELETE", resource.path.url(namespace), body=_BACKGROUND)
        except ApiError as error:
            if error.code in UNSUPPORTED:
                return False
            raise
        return True

    async def _delete_each(self, resource: discovery.APIResource, namespace: str) -> None:
        for item in await self._list(resource, namespace):
            url = resource.path.url(namespace, item.get("metadata", {}).get("name", ""))
            try:
                await self.ctx.client.request("DELETE", url, body=_BACKGROUND)
            except ApiError as error:
                if error.code not in UNSUPPORTED:
                    raise

    async def _list(self, resource: discovery.APIResource, namespace: str) -> list[Any]:
        if "list" not in resource.verbs:
            return []
        try:
            data = await self.ctx.client.request("GET", resource.path.url(namespace))
        except ApiError as error:
            if error.code in UNSUPPORTED:
                return []
            raise
        items: list[Any] = msgspec.json.decode(data).get("items") or []
        return items

    async def _record(
        self, namespace: Namespace, discovery_error: str, remaining: _Remaining
    ) -> None:
        """Set the deletion conditions; write the status only if they changed."""
        failing: dict[str, tuple[str, str]] = {}
        if discovery_error:
            failing[DISCOVERY_FAILURE] = ("DiscoveryFailed", discovery_error)
        if remaining.errors:
            errors = ", ".join(sorted(remaining.errors))
            failing[CONTENT_FAILURE] = (
                "ContentDeletionFailed",
                f"Failed to delete all resource types, {len(remaining.errors)} remaining: {errors}",
            )
        if remaining.counts:
            left = sorted(f"{gr} has {n} resource instances" for gr, n in remaining.counts.items())
            failing[CONTENT_REMAINING] = (
                "SomeResourcesRemain",
                f"Some resources are remaining: {', '.join(left)}",
            )
        if remaining.finalizers:
            held = sorted(f"{f} in {n} resource instances" for f, n in remaining.finalizers.items())
            failing[FINALIZERS_REMAINING] = (
                "SomeFinalizerRemain",
                f"Some finalizers are remaining: {', '.join(held)}",
            )
        status = namespace.status or NamespaceStatus()
        conditions = list(status.conditions or ())
        now = self.ctx.clock.now().replace(microsecond=0)
        changed = False
        for kind, ok in OK.items():
            state = "True" if kind in failing else "False"
            reason, message = failing.get(kind, ok)
            current = next((c for c in conditions if c.type == kind), None)
            if current is not None and (current.status, current.reason, current.message) == (
                state,
                reason,
                message,
            ):
                continue
            transition = now
            if current is not None and current.status == state:
                transition = current.last_transition_time or now
            condition = NamespaceCondition(
                type=kind,
                status=state,
                last_transition_time=transition,
                reason=reason,
                message=message,
            )
            if current is None:
                conditions.append(condition)
            else:
                conditions[conditions.index(current)] = condition
            changed = True
        if not changed:
            return
        namespace.status = msgspec.structs.replace(status, conditions=conditions)
        try:
            updated = await self.ctx.client.update_status(namespace)
        except ApiError as error:
            log.info("namespace %s: updating its conditions: %s", namespace.metadata.name, error)
            return
        namespace.metadata.resource_version = updated.metadata.resource_version


_BACKGROUND = codec.encode_json(DeleteOptions(propagation_policy="Background"))


def new(ctx: ControllerContext) -> NamespaceController:
    return NamespaceController(ctx)
