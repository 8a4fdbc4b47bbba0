"""The garbage collector: objects whose owners are gone are deleted, and deletions propagate.

Ownership is the graph of ``metadata.ownerReferences``.  Upstream keeps that graph in a
structure of its own, fed by informers; here the informers' indexes are the graph: every
watched kind is indexed by uid and by owner uid (``OWNER_UID_INDEX``), so "the object with
this uid" and "the dependents of this uid" are index lookups over the kinds in ``KINDS``,
and the graph can never disagree with the caches.  Keys are uids.

Syncing a uid (upstream's attemptToDelete and attemptToOrphan in one, level-triggered):

- the object is read live (the cache may lag); gone, or replaced by another uid: done.
- being deleted with the ``orphan`` finalizer (``propagationPolicy=Orphan``, recorded by the
  API server): each dependent loses its ownerReference to it, then the finalizer goes.
- being deleted with ``foregroundDeletion`` (``propagationPolicy=Foreground``): dependents not
  yet being deleted are queued, and each is deleted by its own sync since its owner is
  waiting for it; once no dependent with ``blockOwnerDeletion`` remains, the finalizer goes
  and the API server removes the owner.
- being deleted otherwise: nothing; its dependents are queued when it disappears.
- with owners: each is *solid* (present), *dangling* (absent, or present under another uid)
  or *waiting* (being deleted in the foreground).  An owner missing from the caches is
  looked up live, by name, and compared by uid, before anyone concludes it is gone, as
  upstream does.  With a solid owner left, references to dangling and waiting owners are
  removed; otherwise the object is deleted, with its uid as precondition: in the
  foreground if a waiting owner needs its dependents gone first and it has dependents of
  its own, else with the policy its own finalizers ask for, Background by default.

Handlers queue an object when it may need work: when it has an owner the caches do not
know or one being deleted, when it carries a deletion finalizer, and when it disappears
(its dependents, and its owners waiting on it).  Owners of kinds outside the scheme, such
as custom resources, are found through discovery.  A reference across namespaces, or from a
cluster-scoped object to a namespaced kind, is reported with an ``OwnerRefInvalidNamespace``
warning; the first counts as dangling, the second is left alone (it cannot resolve).
Not done: upstream's cycle breaking (unblocking references when owner and dependent both
wait on each other in the foreground) and its cache of owners known to be absent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from controlplane.controllers import discovery
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from kube.api import codec
from kube.api.kinds.apps_v1 import (
    ControllerRevision,
    DaemonSet,
    Deployment,
    ReplicaSet,
    StatefulSet,
)
from kube.api.kinds.batch_v1 import CronJob, Job
from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.api.kinds.core_v1.pod import Pod, ReplicationController
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.core_v1.volume import PersistentVolumeClaim
from kube.api.kinds.discovery_v1 import EndpointSlice
from kube.api.meta_v1 import (
    FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
    OwnerReference,
    Preconditions,
    Resource,
)
from kube.api.scheme import SCHEME
from kube.client.errors import ApiError, ClientError
from kube.client.informers import OWNER_UID_INDEX, SharedInformer
from kube.client.rest import ResourcePath

NAME = "garbage-collector"
UID_INDEX = "uid"
KINDS: tuple[type[Resource], ...] = (
    Pod,
    ReplicaSet,
    Deployment,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
    ControllerRevision,
    ConfigMap,
    Secret,
    Service,
    EndpointSlice,
    PersistentVolumeClaim,
    ReplicationController,
)
"""The kinds whose objects the collector watches, as owners and as dependents."""


def index_by_uid(obj: Resource) -> list[str]:
    return [obj.metadata.uid] if obj.metadata.uid else []


def being_deleted(obj: Resource) -> bool:
    return obj.metadata.deletion_timestamp is not None


def deleting_dependents(obj: Resource) -> bool:
    """Deleted in the foreground: waiting for its dependents to go first."""
    return being_deleted(obj) and FINALIZER_FOREGROUND in (obj.metadata.finalizers or ())


def _reference_string(ref: OwnerReference, namespace: str) -> str:
    """How upstream prints an owner's identity in events."""
    return (
        f"[{ref.api_version}/{ref.kind}, namespace: {namespace}, name: {ref.name}, uid: {ref.uid}]"
    )


class UnknownOwnerKindError(ClientError):
    """An ownerReference names a kind the server does not serve (yet): retried."""


class GarbageCollector(Controller):
    NAME = NAME
    EVENT_SOURCE = "garbage-collector-controller"

    def __init__(self, ctx: ControllerContext, kinds: Sequence[type[Resource]] = KINDS) -> None:
        super().__init__(ctx)
        self.informers: list[SharedInformer[Any]] = []
        for cls in kinds:
            informer = ctx.informers.informer_for(cls, indexers={UID_INDEX: index_by_uid})
            informer.add_event_handler(self._added, self._updated, self._deleted)
            self.informers.append(informer)
        self._paths: dict[tuple[str, str], tuple[ResourcePath, type[Resource] | None]] = {}

    # The graph, read from the caches.

    def cached(self, uid: str) -> Resource | None:
        for informer in self.informers:
            found = informer.lister.by_index(UID_INDEX, uid)
            if found:
                obj: Resource = found[0]
                return obj
        return None

    def dependents(self, uid: str) -> list[Resource]:
        return [
            obj
            for informer in self.informers
            for obj in informer.lister.by_index(OWNER_UID_INDEX, uid)
        ]

    # Handlers.

    def _added(self, obj: Resource) -> None:
        meta = obj.metadata
        if being_deleted(obj) and {FINALIZER_ORPHAN, FINALIZER_FOREGROUND} & set(
            meta.finalizers or ()
        ):
            self.queue.add(meta.uid or "")
        for ref in meta.owner_references or ():
            owner = self.cached(ref.uid or "")
            if owner is None or being_deleted(owner):
                self.queue.add(meta.uid or "")
                break

    def _updated(self, old: Resource, new: Resource) -> None:
        if old.metadata.resource_version == new.metadata.resource_version:
            return
        self._added(new)
        self._queue_waiting_owners(old.metadata.owner_references or ())

    def _deleted(self, obj: Any) -> None:
        gone: Resource = unwrap(obj)
        for dependent in self.dependents(gone.metadata.uid or ""):
            self.queue.add(dependent.metadata.uid or "")
        self._queue_waiting_owners(gone.metadata.owner_references or ())

    def _queue_waiting_owners(self, refs: Iterable[OwnerReference]) -> None:
        """Owners deleted in the foreground re-check what still blocks them."""
        for ref in refs:
            owner = self.cached(ref.uid or "")
            if owner is not None and deleting_dependents(owner):
                self.queue.add(ref.uid or "")

    # Sync.

    async def sync_key(self, key: str) -> None:
        item = self.cached(key)
        if item is None:
            return
        meta = item.metadata
        try:
            latest = await self.ctx.client.get(type(item), meta.name or "", meta.namespace)
        except ApiError as error:
            if error.not_found:
                return
            raise
        if latest.metadata.uid != key:
            return
        finalizers = latest.metadata.finalizers or []
        if being_deleted(latest):
            if FINALIZER_ORPHAN in finalizers:
                await self._orphan_dependents(latest)
            elif FINALIZER_FOREGROUND in finalizers:
                await self._delete_dependents(latest)
            return
        if latest.metadata.owner_references:
            await self._collect(latest)

    async def _collect(self, item: Resource) -> None:
        meta = item.metadata
        refs = meta.owner_references or []
        solid: list[OwnerReference] = []
        dangling: list[OwnerReference] = []
        waiting: list[OwnerReference] = []
        for ref in refs:
            path, _ = await self._resolve(ref)
            if path.namespaced and not meta.namespace:
                self._invalid_namespace(item, ref)
                return
            owner = await self._owner(ref, path, meta.namespace)
            if owner is None:
                dangling.append(ref)
                elsewhere = self.cached(ref.uid or "")
                if path.namespaced and elsewhere is not None:
                    self._invalid_namespace(item, ref)
            elif owner:
                waiting.append(ref)
            else:
                solid.append(ref)
        if solid:
            if dangling or waiting:
                doomed = {ref.uid for ref in [*dangling, *waiting]}
                await self._patch_owner_references(
                    item, [ref for ref in refs if ref.uid not in doomed]
                )
            return
        if waiting and self.dependents(meta.uid or ""):
            policy = "Foreground"
        elif FINALIZER_ORPHAN in (meta.finalizers or ()):
            policy = "Orphan"
        elif FINALIZER_FOREGROUND in (meta.finalizers or ()):
            policy = "Foreground"
        else:
            policy = "Background"
        try:
            await self.ctx.client.delete(
                type(item),
                meta.name or "",
                meta.namespace,
                propagation_policy=policy,
                preconditions=Preconditions(uid=meta.uid),
            )
        except ApiError as error:
            if not (error.not_found or error.conflict):
                raise

    async def _owner(
        self, ref: OwnerReference, path: ResourcePath, namespace: str | None
    ) -> bool | None:
        """Whether the owner ``ref`` names waits for its dependents; None if it is absent.

        The caches answer when they hold it, else it is read live, by name, and compared
        by uid."""
        scope = namespace if path.namespaced else None
        cached = self.cached(ref.uid or "")
        if cached is not None and cached.metadata.namespace == scope:
            return deleting_dependents(cached)
        _, cls = await self._resolve(ref)
        try:
            if cls is not None:
                found = await self.ctx.client.get(cls, ref.name or "", scope)
                uid, deleting = found.metadata.uid, deleting_dependents(found)
            else:
                data = await self.ctx.client.request("GET", path.url(scope, ref.name))
                metadata = msgspec.json.decode(data).get("metadata", {})
                uid = metadata.get("uid")
                deleting = bool(metadata.get("deletionTimestamp")) and (
                    FINALIZER_FOREGROUND in (metadata.get("finalizers") or ())
                )
        except ApiError as error:
            if not error.not_found:
                raise
            uid = None
        return deleting if uid == ref.uid else None

    def _invalid_namespace(self, dependent: Resource, ref: OwnerReference) -> None:
        namespace = dependent.metadata.namespace or ""
        self.ctx.recorder.event(
            dependent,
            "Warning",
            "OwnerRefInvalidNamespace",
            f"ownerRef {_reference_string(ref, namespace)} does not exist in namespace "
            f'"{namespace}"',
        )

    async def _resolve(self, ref: OwnerReference) -> tuple[ResourcePath, type[Resource] | None]:
        """Where the owner's kind is served, and its class when the scheme knows it."""
        key = (ref.api_version or "", ref.kind or "")
        if key in self._paths:
            return self._paths[key]
        info = SCHEME.by_kind(*key)
        if info is not None:
            resolved: tuple[ResourcePath, type[Resource] | None] = (
                ResourcePath.of(info),
                info.cls,
            )
        else:
            try:
                listed = await discovery.resource_list(self.ctx.client, key[0])
            except ApiError as error:
                if not error.not_found:
                    raise
                listed = []
            match = next((r for r in listed if r.kind == key[1]), None)
            if match is None:
                raise UnknownOwnerKindError(f"unable to get REST mapping for {key[0]}/{key[1]}")
            resolved = (match.path, None)
        self._paths[key] = resolved
        return resolved

    # Propagation.

    async def _orphan_dependents(self, owner: Resource) -> None:
        uid = owner.metadata.uid
        for dependent in self.dependents(uid or ""):
            refs = dependent.metadata.owner_references or []
            try:
                await self._patch_owner_references(dependent, [r for r in refs if r.uid != uid])
            except ApiError as error:
                if not error.not_found:
                    raise
        await self._remove_finalizer(owner, FINALIZER_ORPHAN)

    async def _delete_dependents(self, owner: Resource) -> None:
        uid = owner.metadata.uid or ""
        blocking = False
        for dependent in self.dependents(uid):
            if not being_deleted(dependent):
                self.queue.add(dependent.metadata.uid or "")
            blocking = blocking or any(
                ref.uid == uid and ref.block_owner_deletion
                for ref in dependent.metadata.owner_references or ()
            )
        if not blocking:
            await self._remove_finalizer(owner, FINALIZER_FOREGROUND)

    async def _patch_owner_references(self, obj: Resource, refs: list[OwnerReference]) -> None:
        """Keep only ``refs``; the resourceVersion makes it fail if the object moved on."""
        meta = obj.metadata
        patch = {
            "metadata": {
                "resourceVersion": meta.resource_version,
                "ownerReferences": codec.to_builtins(refs) if refs else None,
            }
        }
        await self.ctx.client.patch(type(obj), meta.name or "", meta.namespace, patch)

    async def _remove_finalizer(self, obj: Resource, finalizer: str) -> None:
        meta = obj.metadata
        remaining = [f for f in meta.finalizers or () if f != finalizer]
        patch = {
            "metadata": {"resourceVersion": meta.resource_version, "finalizers": remaining or None}
        }
        try:
            await self.ctx.client.patch(type(obj), meta.name or "", meta.namespace, patch)
        except ApiError as error:
            if not error.not_found:
                raise


def new(ctx: ControllerContext) -> GarbageCollector:
    return GarbageCollector(ctx)
