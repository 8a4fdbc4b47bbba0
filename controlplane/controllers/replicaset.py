"""The replicaset controller: keep ``spec.replicas`` active pods matching each ReplicaSet.

Upstream's ``pkg/controller/replicaset``, which also runs ReplicationControllers (see
``replicationcontroller.py``): ``ReplicaSetController`` is written against what the two kinds
share, and the few differences (the selector's shape, the status and condition types,
``terminatingReplicas``) are behind ``KIND``.

A sync of ``namespace/name``:

1. If the owner is gone, forget its expectations.  Otherwise it may act only when its
   expectations are satisfied: the creations and deletions it asked for have all been seen
   by the pod informer (whose handlers lower them), or five minutes passed.  The cache does
   not show a controller's own writes yet, and acting on it would create pods twice.
2. Claim pods (``podcontrol.claim_pods``): the active pods it controls or can adopt, found
   through ``OWNER_UID_INDEX`` and ``ORPHAN_INDEX``; owned pods that stopped matching are
   released.
3. Too few: expect the creations, create in slow-start batches (1, 2, 4, ... at most 500),
   and stop expecting the ones a failed batch skipped.  Too many: rank the pods
   (``rank_pods_for_deletion``, with siblings under the same Deployment counted per node),
   expect those deletions by pod key and delete them concurrently.
4. Recompute the status (replicas, fullyLabeledReplicas, readyReplicas, availableReplicas
   after minReadySeconds, terminatingReplicas, observedGeneration, a ReplicaFailure
   condition while creating or deleting fails) and write it only if it changed.  When every
   pod is ready but some not yet available, look again after minReadySeconds.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any, ClassVar, cast

import msgspec

from controlplane.controllers import podcontrol
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, key_of, unwrap
from kube.api.keys import object_key, split_key
from kube.api.kinds.apps_v1 import ReplicaSet, ReplicaSetCondition, ReplicaSetStatus
from kube.api.kinds.core_v1.pod import (
    Pod,
    ReplicationController,
    ReplicationControllerCondition,
    ReplicationControllerStatus,
)
from kube.api.labels import Selector, SelectorError, selector_of
from kube.api.meta_v1 import OwnerReference
from kube.api.owners import controller_of
from kube.client.errors import ApiError
from kube.client.informers import OWNER_UID_INDEX, DeletedFinalStateUnknown, SharedInformer

NAME = "replicaset"
BURST_REPLICAS = 500
"""The most pods one sync creates or deletes (upstream's burstReplicas)."""
REPLICA_FAILURE = "ReplicaFailure"
STATUS_UPDATE_RETRIES = 1

Owner = ReplicaSet | ReplicationController
Status = ReplicaSetStatus | ReplicationControllerStatus


def selector_for(owner: Owner) -> Selector:
    """The owner's pod selector; raises ``SelectorError`` for an invalid one."""
    if isinstance(owner, ReplicationController):
        return Selector.from_label_selector(owner.spec.selector if owner.spec else None, None)
    return selector_of(owner.spec.selector if owner.spec else None)


class ReplicaSetController(Controller):
    NAME = NAME
    EVENT_SOURCE = "replicaset-controller"
    KIND: ClassVar[type[Owner]] = ReplicaSet

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.expectations = podcontrol.UIDTrackingExpectations(ctx.clock)
        self.owners: SharedInformer[Any] = ctx.informers.informer_for(self.KIND)
        self.pods = ctx.informers.informer_for(
            Pod, indexers={podcontrol.ORPHAN_INDEX: podcontrol.orphan_index}
        )
        self.owners.add_event_handler(self.enqueue, self._owner_updated, self._owner_deleted)
        self.pods.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)

    # Handlers: keep the expectations current and enqueue the owners concerned.

    def _owner_updated(self, old: Owner, new: Owner) -> None:
        if old.metadata.uid != new.metadata.uid:
            # Deleted and made again under the same name while the watch was away: the old
            # owner's expectations would hold the new one back until they expired.
            self._owner_deleted(DeletedFinalStateUnknown(object_key(old), old))
        self.enqueue_update(old, new)

    def _owner_deleted(self, obj: object) -> None:
        key = key_of(cast(Any, obj))
        self.expectations.delete_expectations(key)
        self.queue.add(key)

    def _resolve(self, namespace: str, ref: OwnerReference | None) -> Owner | None:
        """The owner a controller reference names, if it is one of ours and still there."""
        if ref is None or ref.kind != self.KIND.kind_info.kind:
            return None
        owner = cast(Owner | None, self.owners.lister.get(f"{namespace}/{ref.name}"))
        if owner is None or owner.metadata.uid != ref.uid:
            return None
        return owner

    def _matching_owners(self, pod: Pod) -> list[Owner]:
        """Owners whose selector matches an orphan (an empty selector matches nothing here)."""
        found = []
        for owner in cast(list[Owner], self.owners.lister.list(pod.metadata.namespace or "")):
            try:
                selector = selector_for(owner)
            except SelectorError:
                continue
            if not selector.empty and selector.matches(pod.metadata.labels):
                found.append(owner)
        return found

    def _pod_added(self, obj: object) -> None:
        pod = cast(Pod, obj)
        if pod.metadata.deletion_timestamp is not None:
            # Seen for the first time already being deleted (e.g. after a re-list).
            self._pod_deleted(pod)
            return
        ref = controller_of(pod)
        if ref is not None:
            owner = self._resolve(pod.metadata.namespace or "", ref)
            if owner is not None:
                self.expectations.creation_observed(object_key(owner))
                self.enqueue(owner)
            return
        for owner in self._matching_owners(pod):
            self.enqueue(owner)

    def _pod_updated(self, old_obj: object, new_obj: object) -> None:
        old, pod = cast(Pod, old_obj), cast(Pod, new_obj)
        if old.metadata.resource_version == pod.metadata.resource_version:
            return
        labels_changed = old.metadata.labels != pod.metadata.labels
        if pod.metadata.deletion_timestamp is not None:
            # A graceful deletion began: the owner may make a replacement now.
            self._pod_deleted(pod)
            if labels_changed:
                self._pod_deleted(old)
            return
        namespace = pod.metadata.namespace or ""
        ref, old_ref = controller_of(pod), controller_of(old)
        ref_changed = ref != old_ref
        if ref_changed and old_ref is not None:
            previous = self._resolve(namespace, old_ref)
            if previous is not None:
                self.enqueue(previous)
        if ref is not None:
            owner = self._resolve(namespace, ref)
            if owner is None:
                return
            self.enqueue(owner)
            min_ready = (owner.spec.min_ready_seconds if owner.spec else None) or 0
            if min_ready > 0 and not podcontrol.is_pod_ready(old) and podcontrol.is_pod_ready(pod):
                # Available only after minReadySeconds: look again then.
                self.enqueue_after(owner, min_ready)
            return
        if labels_changed or ref_changed:
            for owner in self._matching_owners(pod):
                self.enqueue(owner)

    def _pod_deleted(self, obj: object) -> None:
        pod = cast(Pod, unwrap(obj))
        owner = self._resolve(pod.metadata.namespace or "", controller_of(pod))
        if owner is None:
            return
        key = object_key(owner)
        self.expectations.deletion_observed_of(key, object_key(pod))
        self.queue.add(key)

    # Sync.

    async def sync_key(self, key: str) -> None:
        cached = cast(Owner | None, self.owners.lister.get(key))
        if cached is None:
            self.expectations.delete_expectations(key)
            return
        needs_sync = self.expectations.satisfied(key)
        try:
            selector = selector_for(cached)
        except SelectorError:
            return  # validation keeps these out; retrying would not help
        candidates = podcontrol.pods_to_claim(self.pods.lister, cached)
        active = [pod for pod in candidates if podcontrol.is_pod_active(pod)]
        pods = await podcontrol.claim_pods(self.ctx, cached, selector, active)
        terminating = [
            pod
            for pod in candidates
            if podcontrol.is_pod_terminating(pod)
            and (ref := controller_of(pod)) is not None
            and ref.uid == cached.metadata.uid
            and selector.matches(pod.metadata.labels)
        ]
        error: Exception | None = None
        if needs_sync and cached.metadata.deletion_timestamp is None:
            try:
                await self._manage_replicas(key, cached, pods)
            except (ApiError, podcontrol.CreatePodsError) as failure:
                error = failure
        owner = copy.deepcopy(cached)
        status = self._calculate_status(owner, pods, terminating, error)
        updated = await self._update_status(owner, status)
        spec = updated.spec
        replicas = (spec.replicas if spec else None) or 0
        min_ready = (spec.min_ready_seconds if spec else None) or 0
        ready = (updated.status.ready_replicas if updated.status else None) or 0
        available = (updated.status.available_replicas if updated.status else None) or 0
        if error is None and min_ready > 0 and ready == replicas and available != replicas:
            # A last line of defence against clock skew between here and the kubelets.
            self.queue.add_after(key, min_ready)
        if isinstance(error, podcontrol.CreatePodsError):
            raise error.error
        if error is not None:
            raise error

    async def _manage_replicas(self, key: str, owner: Owner, pods: list[Pod]) -> None:
        spec = owner.spec
        desired = (spec.replicas if spec else None) or 0
        namespace = owner.metadata.namespace or ""
        diff = len(pods) - desired
        if diff < 0:
            count = min(-diff, BURST_REPLICAS)
            if spec is None or spec.template is None:
                return
            self.expectations.expect_creations(key, count)
            try:
                await podcontrol.create_pods(self.ctx, namespace, spec.template, owner, count)
            except podcontrol.CreatePodsError as failure:
                # The informer will never see the pods that were not made.
                self.expectations.lower_expectations(key, count - failure.created, 0)
                raise
        elif diff > 0:
            count = min(diff, BURST_REPLICAS)
            doomed = pods[:count]
            if count < len(pods):
                ranked = podcontrol.rank_pods_for_deletion(
                    pods, self._related_pods(owner), self.ctx.clock.now()
                )
                doomed = ranked[:count]
            self.expectations.expect_deletions_of(key, podcontrol.pod_keys(doomed))
            results = await asyncio.gather(
                *(self._delete(key, owner, pod) for pod in doomed), return_exceptions=True
            )
            for result in results:
                if isinstance(result, BaseException):
                    raise result

    async def _delete(self, key: str, owner: Owner, pod: Pod) -> None:
        try:
            await podcontrol.delete_pod(
                self.ctx, pod.metadata.namespace or "", pod.metadata.name or "", owner
            )
        except ApiError as error:
            # The informer will not see this deletion.
            self.expectations.deletion_observed_of(key, object_key(pod))
            if not error.not_found:
                raise

    def _related_pods(self, owner: Owner) -> list[Pod]:
        """Pods of every owner with the same controller (the ReplicaSets of one Deployment),
        counted per node so scale-down spreads; none when the owner has no controller."""
        ref = controller_of(owner)
        if ref is None or ref.uid is None:
            return []
        siblings = [
            sibling
            for sibling in cast(list[Owner], self.owners.lister.by_index(OWNER_UID_INDEX, ref.uid))
            if (sibling_ref := controller_of(sibling)) is not None and sibling_ref.uid == ref.uid
        ]
        namespace_pods = self.pods.lister.list(owner.metadata.namespace or "")
        related: dict[str, Pod] = {}
        for sibling in siblings:
            try:
                selector = selector_for(sibling)
            except SelectorError:
                continue
            for pod in namespace_pods:
                if selector.matches(pod.metadata.labels):
                    related.setdefault(pod.metadata.uid or "", pod)
        return list(related.values())

    def _calculate_status(
        self, owner: Owner, pods: list[Pod], terminating: list[Pod], error: Exception | None
    ) -> Status:
        spec = owner.spec
        template = spec.template if spec else None
        template_labels = Selector.from_label_selector(
            template.labels() if template else None, None
        )
        min_ready = (spec.min_ready_seconds if spec else None) or 0
        now = self.ctx.clock.now()
        labeled = sum(template_labels.matches(pod.metadata.labels) for pod in pods)
        ready = [pod for pod in pods if podcontrol.is_pod_ready(pod)]
        available = sum(podcontrol.is_pod_available(pod, min_ready, now) for pod in ready)
        old = owner.status
        conditions: list[Any] = list(old.conditions or ()) if old else []
        failing = any(c.type == REPLICA_FAILURE for c in conditions)
        if error is not None and not failing:
            diff = len(pods) - ((spec.replicas if spec else None) or 0)
            reason = "FailedCreate" if diff < 0 else "FailedDelete" if diff > 0 else ""
            message = str(error.error if isinstance(error, podcontrol.CreatePodsError) else error)
            condition_cls = (
                ReplicationControllerCondition
                if isinstance(owner, ReplicationController)
                else ReplicaSetCondition
            )
            conditions.append(
                condition_cls(
                    type=REPLICA_FAILURE,
                    status="True",
                    last_transition_time=now.replace(microsecond=0),
                    reason=reason,
                    message=message,
                )
            )
        elif error is None and failing:
            conditions = [c for c in conditions if c.type != REPLICA_FAILURE]
        counts: dict[str, Any] = {
            "replicas": len(pods),
            "fully_labeled_replicas": labeled,
            "ready_replicas": len(ready),
            "available_replicas": available,
            "conditions": conditions or None,
        }
        if isinstance(owner, ReplicationController):
            return msgspec.structs.replace(old or ReplicationControllerStatus(), **counts)
        counts["terminating_replicas"] = len(terminating)
        return msgspec.structs.replace(old or ReplicaSetStatus(), **counts)

    async def _update_status(self, owner: Owner, status: Status) -> Owner:
        """Write ``status`` (with observedGeneration) unless it is what is stored; after a
        failure, re-read the owner and try once more."""
        generation = owner.metadata.generation
        if owner.status == status and status.observed_generation == generation:
            return owner
        status = msgspec.structs.replace(status, observed_generation=generation)
        attempt = 0
        while True:
            owner.status = cast(Any, status)
            try:
                return cast(Owner, await self.ctx.client.update_status(owner))
            except ApiError:
                if attempt >= STATUS_UPDATE_RETRIES:
                    raise
            attempt += 1
            namespace, name = split_key(object_key(owner))
            owner = cast(Owner, await self.ctx.client.get(type(owner), name, namespace))


def new(ctx: ControllerContext) -> ReplicaSetController:
    return ReplicaSetController(ctx)
