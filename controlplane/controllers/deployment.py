"""The deployment controller: rolls a Deployment's pods from one template to the next through
ReplicaSets, one per template (upstream ``pkg/controller/deployment``).

Keys are Deployments.  A Deployment is enqueued when it changes, when a ReplicaSet it controls
(or an orphan its selector matches) changes, and, under Recreate, when one of its pods is
deleted, since the new pods wait until the old ones are gone.  A sync follows upstream's
``syncDeployment``:

1. A Deployment whose selector is empty would select every pod: ``SelectingAll`` is reported
   and nothing else happens.
2. ReplicaSets are claimed: orphans the selector matches are adopted (after re-reading the
   Deployment from the API, so one being deleted adopts nothing), owned ones it no longer
   matches are released.
3. Which ReplicaSet is *new* and which are *old* is decided by template (deployment_util).
   Finding the new one also brings its annotations up to date: the revision (largest old
   revision plus one), the Deployment's annotations, ``minReadySeconds``; and the
   Deployment's own ``deployment.kubernetes.io/revision`` follows it.
4. Then exactly one of:

   * being deleted: status only;
   * paused, or a scaling event (an active ReplicaSet's ``desired-replicas`` differs from
     ``spec.replicas``): ``scale`` — the only active ReplicaSet (or the newest) gets every
     replica; otherwise, under RollingUpdate, the change is shared among the active
     ReplicaSets in proportion to their size, leftovers to the largest.  A paused
     Deployment reports Progressing=Unknown ``DeploymentPaused`` and creates nothing;
   * RollingUpdate: create the new ReplicaSet if needed and grow it as far as
     ``replicas + maxSurge`` allows; else shrink old ones, unhealthy replicas first, as far
     as ``replicas - maxUnavailable`` available pods allows;
   * Recreate: shrink every old ReplicaSet to zero, wait until none of their pods runs, then
     create or grow the new one to ``replicas``.

   A finished rollout deletes the oldest zero-sized ReplicaSets beyond
   ``revisionHistoryLimit``.
5. Status is recomputed from the ReplicaSets' status (``calculate_status``), with the
   Progressing condition (``NewReplicaSetCreated``, ``FoundNewReplicaSet``,
   ``ReplicaSetUpdated``, ``NewReplicaSetAvailable``, ``ProgressDeadlineExceeded``) and
   ReplicaSet failures; it is written only when it changed.  A rollout that shows no
   progress comes back (``enqueue_after``) when its deadline would pass.

One divergence from upstream: its status subresource keeps annotations, so upstream writes
the Deployment's revision annotation with its status.  Here ``/status`` leaves metadata alone,
so the annotation is merge-patched onto the Deployment itself (which does not change its
generation).  The resourceVersion each write returns is carried through the sync, so later
writes in the same sync do not conflict.

``kubectl rollout undo`` patches the template back to an old ReplicaSet's; that ReplicaSet
becomes the new one and takes the next revision.  ``kubectl rollout restart`` changes a
template annotation, which is an ordinary rollout.  The deprecated rollback annotation
(``deprecated.deployment.rollback.to``, extensions/v1beta1 only) is not acted on.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from controlplane.controllers import deployment_util as du
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from controlplane.controllers.podcontrol import _check_can_adopt as check_can_adopt
from kube.api import codec
from kube.api.keys import object_key
from kube.api.kinds.apps_v1 import (
    Deployment,
    DeploymentCondition,
    DeploymentStatus,
    ReplicaSet,
    ReplicaSetSpec,
)
from kube.api.kinds.core_v1.pod import Pod
from kube.api.labels import Selector, SelectorError, selector_of
from kube.api.meta_v1 import ObjectMeta, OwnerReference
from kube.api.owners import controller_of, controller_ref
from kube.client.errors import ApiError
from kube.client.informers import OWNER_UID_INDEX

NAME = "deployment"
SCALING_REPLICA_SET = "ScalingReplicaSet"
SELECTING_ALL = "SelectingAll"
_NORMAL, _WARNING = "Normal", "Warning"


@dataclass
class _Sync:
    """One sync's copy of the Deployment and its ReplicaSets; ReplicaSets written during the
    sync replace their cached versions here."""

    d: Deployment
    rss: list[ReplicaSet] = field(default_factory=list)

    @property
    def status(self) -> DeploymentStatus:
        if self.d.status is None:
            self.d.status = DeploymentStatus()
        return self.d.status

    def written(self, rs: ReplicaSet) -> ReplicaSet:
        self.rss = [r for r in self.rss if r.metadata.uid != rs.metadata.uid] + [rs]
        return rs

    def latest(self, rs: ReplicaSet | None) -> ReplicaSet | None:
        if rs is None:
            return None
        return next((r for r in self.rss if r.metadata.uid == rs.metadata.uid), rs)

    def latest_all(self, rss: Sequence[ReplicaSet | None]) -> list[ReplicaSet]:
        return [r for r in (self.latest(rs) for rs in rss) if r is not None]


class DeploymentController(Controller):
    NAME = NAME
    EVENT_SOURCE = "deployment-controller"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.deployments = ctx.informers.informer_for(Deployment)
        self.replica_sets = ctx.informers.informer_for(ReplicaSet)
        self.pods = ctx.informers.informer_for(Pod)
        self.deployments.add_event_handler(self.enqueue, self.enqueue_update, self.enqueue)
        self.replica_sets.add_event_handler(
            self._replica_set_added, self._replica_set_updated, self._replica_set_deleted
        )
        self.pods.add_event_handler(on_delete=self._pod_deleted)

    # Handlers.

    def _owner(self, namespace: str | None, ref: OwnerReference | None) -> Deployment | None:
        if ref is None or ref.kind != "Deployment":
            return None
        d = self.deployments.lister.get(f"{namespace}/{ref.name}")
        return d if d is not None and d.metadata.uid == ref.uid else None

    def _matching_deployments(self, rs: ReplicaSet) -> list[Deployment]:
        """Deployments whose (non-empty) selector matches an orphaned ReplicaSet."""
        found = []
        for d in self.deployments.lister.list(rs.metadata.namespace or ""):
            try:
                selector = selector_of(d.spec.selector if d.spec else None)
            except SelectorError:
                continue
            if not selector.empty and selector.matches(rs.metadata.labels):
                found.append(d)
        return found

    def _enqueue_for(self, rs: ReplicaSet) -> None:
        ref = controller_of(rs)
        if ref is not None:
            owner = self._owner(rs.metadata.namespace, ref)
            if owner is not None:
                self.enqueue(owner)
            return
        for d in self._matching_deployments(rs):
            self.enqueue(d)

    def _replica_set_added(self, rs: ReplicaSet) -> None:
        if rs.metadata.deletion_timestamp is not None:
            self._replica_set_deleted(rs)
        else:
            self._enqueue_for(rs)

    def _replica_set_updated(self, old: ReplicaSet, cur: ReplicaSet) -> None:
        if old.metadata.resource_version == cur.metadata.resource_version:
            return
        old_ref, cur_ref = controller_of(old), controller_of(cur)
        ref_changed = (old_ref and old_ref.uid) != (cur_ref and cur_ref.uid)
        if ref_changed and old_ref is not None:
            owner = self._owner(old.metadata.namespace, old_ref)
            if owner is not None:
                self.enqueue(owner)
        if cur_ref is not None or ref_changed or old.metadata.labels != cur.metadata.labels:
            self._enqueue_for(cur)

    def _replica_set_deleted(self, obj: Any) -> None:
        rs = unwrap(obj)
        owner = self._owner(rs.metadata.namespace, controller_of(rs))
        if owner is not None:
            self.enqueue(owner)

    def _pod_deleted(self, obj: Any) -> None:
        """Recreate waits for old pods to be gone, so their deletion is worth a sync."""
        pod = unwrap(obj)
        ref = controller_of(pod)
        if ref is None or ref.kind != "ReplicaSet":
            return
        rs = self.replica_sets.lister.get(f"{pod.metadata.namespace}/{ref.name}")
        if rs is None or rs.metadata.uid != ref.uid:
            return
        d = self._owner(rs.metadata.namespace, controller_of(rs))
        if d is not None and d.spec and d.spec.strategy and d.spec.strategy.type == "Recreate":
            self.enqueue(d)

    # The sync.

    async def sync_key(self, key: str) -> None:
        cached = self.deployments.lister.get(key)
        if cached is None:
            return
        s = _Sync(copy.deepcopy(cached))
        d = s.d
        selector = d.spec.selector if d.spec else None
        if selector is not None and not selector.match_labels and not selector.match_expressions:
            self.ctx.recorder.event(
                d,
                _WARNING,
                SELECTING_ALL,
                "This deployment is selecting all pods. A non-empty selector is required.",
            )
            if (s.status.observed_generation or 0) < (d.metadata.generation or 0):
                s.status.observed_generation = d.metadata.generation
                await self._update_status(s)
            return
        s.rss = await self._claim_replica_sets(d, selector_of(selector))
        if d.metadata.deletion_timestamp is not None:
            new, old = await self._new_and_old(s, create=False)
            await self._sync_status(s, [*old, new], new)
            return
        await self._check_paused_conditions(s)
        if (d.spec and d.spec.paused) or await self._is_scaling_event(s):
            await self._sync_scale(s)
            return
        strategy = d.spec.strategy.type if d.spec and d.spec.strategy else None
        if strategy == "Recreate":
            await self._rollout_recreate(s)
        elif strategy == "RollingUpdate":
            await self._rollout_rolling(s)
        else:
            raise ValueError(f"unexpected deployment strategy type: {strategy}")

    # Claiming ReplicaSets (upstream ClaimReplicaSets).

    async def _claim_replica_sets(self, d: Deployment, selector: Selector) -> list[ReplicaSet]:
        uid = d.metadata.uid
        deleting = d.metadata.deletion_timestamp is not None
        checked = False
        claimed: list[ReplicaSet] = []
        for rs in self.replica_sets.lister.list(d.metadata.namespace or ""):
            ref = controller_of(rs)
            matches = selector.matches(rs.metadata.labels)
            if ref is not None:
                if ref.uid != uid:
                    continue
                if matches:
                    claimed.append(rs)
                elif not deleting:
                    await self._patch_owner(rs, {"$patch": "delete", "uid": uid})
                continue
            if deleting or not matches or rs.metadata.deletion_timestamp is not None:
                continue
            if not checked:
                await check_can_adopt(self.ctx, d)
                checked = True
            adopted = await self._patch_owner(rs, codec.to_builtins(controller_ref(d)))
            if adopted is not None:
                claimed.append(adopted)
        return claimed

    async def _patch_owner(self, rs: ReplicaSet, ref: dict[str, Any]) -> ReplicaSet | None:
        """Add (or, with ``$patch: delete``, remove) an owner reference; the ReplicaSet's uid
        in the patch keeps it from landing on a namesake.  None if the ReplicaSet is gone."""
        body = {"metadata": {"ownerReferences": [ref], "uid": rs.metadata.uid}}
        try:
            return await self.ctx.client.patch(
                ReplicaSet,
                rs.metadata.name or "",
                rs.metadata.namespace,
                body,
                patch_type="strategic",
            )
        except ApiError as error:
            if error.not_found:
                return None
            raise

    # Writing.

    async def _update_status(self, s: _Sync) -> None:
        updated = await self.ctx.client.update_status(s.d)
        s.d.metadata.resource_version = updated.metadata.resource_version

    async def _save(self, s: _Sync, revision_changed: bool, status_changed: bool) -> None:
        if revision_changed:
            await self._update_revision(s)
        if status_changed:
            await self._update_status(s)

    async def _update_revision(self, s: _Sync, attempts: int = 5) -> None:
        """Write the revision annotation, and only it: the Deployment is read afresh, given
        the annotation and updated (the controller's role may update Deployments, not patch
        them, as upstream's), retried on conflict (client-go's RetryOnConflict).  Updating
        the sync's own copy instead would also write whatever else the sync holds of it, and
        churned the rollout."""
        revision = (s.d.metadata.annotations or {})[du.REVISION_ANNOTATION]
        name, namespace = s.d.metadata.name or "", s.d.metadata.namespace
        for attempt in range(attempts):
            current = await self.ctx.client.get(Deployment, name, namespace)
            current.metadata.annotations = {
                **(current.metadata.annotations or {}),
                du.REVISION_ANNOTATION: revision,
            }
            try:
                updated = await self.ctx.client.update(current)
            except ApiError as error:
                if not error.conflict or attempt == attempts - 1:
                    raise
                continue
            s.d.metadata.resource_version = updated.metadata.resource_version
            return

    async def _update_replica_set(self, s: _Sync, rs: ReplicaSet) -> ReplicaSet:
        return s.written(await self.ctx.client.update(rs))

    async def _scale(
        self, s: _Sync, rs: ReplicaSet, size: int, operation: str
    ) -> tuple[bool, ReplicaSet]:
        """Set a ReplicaSet's size and replicas annotations (upstream ``scaleReplicaSet``);
        whether the size changed, and the ReplicaSet as written."""
        desired = du.replicas_of(s.d)
        maximum = desired + du.max_surge(s.d)
        resize = du.replicas_of(rs) != size
        if not resize and not du.replicas_annotations_need_update(rs, desired, maximum):
            return False, rs
        before = du.replicas_of(rs)
        changed = copy.deepcopy(rs)
        changed.spec = changed.spec or ReplicaSetSpec()
        changed.spec.replicas = size
        du.set_replicas_annotations(changed, desired, maximum)
        updated = await self._update_replica_set(s, changed)
        if resize:
            self.ctx.recorder.event(
                s.d,
                _NORMAL,
                SCALING_REPLICA_SET,
                f"Scaled {operation} replica set {updated.metadata.name} from {before} to {size}",
            )
        return resize, updated

    async def _resize(self, s: _Sync, rs: ReplicaSet, size: int) -> tuple[bool, ReplicaSet]:
        if du.replicas_of(rs) == size:
            return False, rs
        return await self._scale(s, rs, size, "up" if du.replicas_of(rs) < size else "down")

    # New and old ReplicaSets.

    async def _new_and_old(
        self, s: _Sync, create: bool
    ) -> tuple[ReplicaSet | None, list[ReplicaSet]]:
        old = du.find_old_replica_sets(s.d, s.rss)
        return await self._new_replica_set(s, old, create), old

    async def _new_replica_set(
        self, s: _Sync, old: list[ReplicaSet], create: bool
    ) -> ReplicaSet | None:
        """Upstream ``getNewReplicaSet``: bring the new ReplicaSet's annotations and the
        Deployment's revision up to date, or create the new ReplicaSet if ``create``."""
        d = s.d
        new_revision = du.max_revision(old) + 1
        existing = du.find_new_replica_set(d, s.rss)
        if existing is not None:
            rs = copy.deepcopy(existing)
            annotated = du.set_new_replica_set_annotations(d, rs, new_revision, exists=True)
            min_ready = d.spec.min_ready_seconds if d.spec else None
            assert rs.spec is not None
            if annotated or (rs.spec.min_ready_seconds or 0) != (min_ready or 0):
                rs.spec.min_ready_seconds = min_ready
                return await self._update_replica_set(s, rs)
            revision = (rs.metadata.annotations or {}).get(du.REVISION_ANNOTATION, "")
            revision_changed = du.set_deployment_revision(d, revision)
            status_changed = False
            if du.has_progress_deadline(d) and du.get_condition(s.status, du.PROGRESSING) is None:
                du.set_condition(
                    s.status,
                    du.new_condition(
                        du.PROGRESSING,
                        "True",
                        du.FOUND_NEW_RS_REASON,
                        f'Found new replica set "{rs.metadata.name}"',
                        self.ctx.clock.now(),
                    ),
                )
                status_changed = True
            await self._save(s, revision_changed, status_changed)
            return rs
        if not create:
            return None
        return await self._create_new_replica_set(s, old, new_revision)

    async def _create_new_replica_set(
        self, s: _Sync, old: list[ReplicaSet], new_revision: int
    ) -> ReplicaSet:
        d = s.d
        assert d.spec is not None
        template_hash = du.compute_hash(d.spec.template, s.status.collision_count)
        template = du.template_with_hash(d.spec.template, template_hash)
        assert template.metadata is not None
        name = f"{d.metadata.name}-{template_hash}"
        rs = ReplicaSet(
            metadata=ObjectMeta(
                name=name,
                namespace=d.metadata.namespace,
                owner_references=[controller_ref(d)],
                labels=dict(template.metadata.labels or {}),
            ),
            spec=ReplicaSetSpec(
                replicas=0,
                min_ready_seconds=d.spec.min_ready_seconds,
                selector=du.selector_with_hash(d.spec.selector, template_hash),
                template=template,
            ),
        )
        assert rs.spec is not None
        rs.spec.replicas = size = du.new_rs_new_replicas(d, [*old, rs], rs)
        du.set_new_replica_set_annotations(d, rs, new_revision, exists=False)
        now = self.ctx.clock.now()
        try:
            created = await self.ctx.client.create(rs)
            already_exists = False
        except ApiError as error:
            if not error.already_exists:
                await self._report_create_failure(s, name, error)
                raise
            created = await self._existing_or_collision(s, name, error)
            already_exists = True
        if not already_exists and size > 0:
            self.ctx.recorder.event(
                d, _NORMAL, SCALING_REPLICA_SET, f"Scaled up replica set {name} from 0 to {size}"
            )
        revision_changed = du.set_deployment_revision(d, str(new_revision))
        if not already_exists and du.has_progress_deadline(d):
            du.set_condition(
                s.status,
                du.new_condition(
                    du.PROGRESSING,
                    "True",
                    du.NEW_RS_REASON,
                    f'Created new replica set "{name}"',
                    now,
                ),
            )
        await self._save(s, revision_changed, not already_exists and du.has_progress_deadline(d))
        return s.written(created)

    async def _existing_or_collision(self, s: _Sync, name: str, error: ApiError) -> ReplicaSet:
        """The ReplicaSet a create found already there, if it is ours with our template (a
        stale cache); otherwise a hash collision: count it, so the next name differs."""
        d = s.d
        found = self.replica_sets.lister.get(f"{d.metadata.namespace}/{name}")
        if found is None:
            raise error
        ref = controller_of(found)
        template = d.spec.template if d.spec else None
        if (
            ref is not None
            and ref.uid == d.metadata.uid
            and du.equal_ignore_hash(template, found.spec.template if found.spec else None)
        ):
            return found
        s.status.collision_count = (s.status.collision_count or 0) + 1
        with contextlib.suppress(ApiError):  # the create's error is what is retried
            await self._update_status(s)
        raise error

    async def _report_create_failure(self, s: _Sync, name: str, error: ApiError) -> None:
        message = f'Failed to create new replica set "{name}": {error.status.message or error}'
        if du.has_progress_deadline(s.d):
            du.set_condition(
                s.status,
                du.new_condition(
                    du.PROGRESSING,
                    "False",
                    du.FAILED_RS_CREATE_REASON,
                    message,
                    self.ctx.clock.now(),
                ),
            )
            with contextlib.suppress(ApiError):  # the create's error is the one reported
                await self._update_status(s)
        self.ctx.recorder.event(s.d, _WARNING, du.FAILED_RS_CREATE_REASON, message)

    # Pausing and scaling (upstream sync.go).

    async def _check_paused_conditions(self, s: _Sync) -> None:
        """Progressing=Unknown while paused, so the time spent paused never counts against
        the progress deadline."""
        d = s.d
        if not du.has_progress_deadline(d):
            return
        current = du.get_condition(s.status, du.PROGRESSING)
        if current is not None and current.reason == du.TIMED_OUT_REASON:
            return
        paused_recorded = current is not None and current.reason == du.PAUSED_REASON
        paused = bool(d.spec and d.spec.paused)
        if paused and not paused_recorded:
            reason, message = du.PAUSED_REASON, "Deployment is paused"
        elif not paused and paused_recorded:
            reason, message = du.RESUMED_REASON, "Deployment is resumed"
        else:
            return
        du.set_condition(
            s.status,
            du.new_condition(du.PROGRESSING, "Unknown", reason, message, self.ctx.clock.now()),
        )
        await self._update_status(s)

    async def _is_scaling_event(self, s: _Sync) -> bool:
        new, old = await self._new_and_old(s, create=False)
        desired = du.replicas_of(s.d)
        for rs in du.active(s.latest_all([*old, new])):
            annotated = du.desired_replicas_annotation(rs)
            if annotated is not None and annotated != desired:
                return True
        return False

    async def _sync_scale(self, s: _Sync) -> None:
        new, old = await self._new_and_old(s, create=False)
        await self._scale_proportionally(s, new, old)
        if s.d.spec and s.d.spec.paused:
            await self._cleanup(s, old)
        await self._sync_status(s, [*old, new], new)

    async def _scale_proportionally(
        self, s: _Sync, new: ReplicaSet | None, old: list[ReplicaSet]
    ) -> None:
        """Upstream ``scale``."""
        d = s.d
        desired = du.replicas_of(d)
        only = du.find_active_or_latest(new, old)
        if only is not None:
            if du.replicas_of(only) != desired:
                await self._resize(s, only, desired)
            return
        if du.is_saturated(d, new):
            for rs in du.active(old):
                await self._resize(s, rs, 0)
            return
        if not du.is_rolling_update(d):
            return
        running = du.active([*old, new])
        allowed = desired + du.max_surge(d) if desired > 0 else 0
        to_add = allowed - du.total_spec_replicas(running)
        operation = ""
        if to_add > 0:
            running, operation = du.by_size_newer(running), "up"
        elif to_add < 0:
            running, operation = du.by_size_older(running), "down"
        added = 0
        sizes: dict[str, int] = {}
        for rs in running:
            proportion = du.replica_set_proportion(d, rs, to_add, added) if to_add else 0
            sizes[rs.metadata.name or ""] = du.replicas_of(rs) + proportion
            added += proportion
        for i, rs in enumerate(running):
            name = rs.metadata.name or ""
            if i == 0 and to_add != 0:
                sizes[name] = max(sizes[name] + to_add - added, 0)
            await self._scale(s, rs, sizes[name], operation)

    async def _sync_status(
        self, s: _Sync, all_rss: Sequence[ReplicaSet | None], new: ReplicaSet | None
    ) -> None:
        """Upstream ``syncDeploymentStatus``: counts and Available, no progress estimate."""
        status = du.calculate_status(
            s.latest_all(all_rss), s.latest(new), s.d, self.ctx.clock.now()
        )
        if status != s.d.status:
            s.d.status = status
            await self._update_status(s)

    async def _cleanup(self, s: _Sync, old: list[ReplicaSet]) -> None:
        """Delete the oldest revisions beyond ``revisionHistoryLimit`` that have no pods, no
        replicas asked for, and whose latest spec their controller has seen."""
        d = s.d
        if not du.has_revision_history_limit(d):
            return
        limit = (d.spec.revision_history_limit if d.spec else None) or 0
        alive = [rs for rs in s.latest_all(old) if rs.metadata.deletion_timestamp is None]
        for rs in du.by_revision(alive)[: max(len(alive) - limit, 0)]:
            observed = (rs.status.observed_generation if rs.status else None) or 0
            if (
                (rs.status and rs.status.replicas)
                or du.replicas_of(rs) != 0
                or (rs.metadata.generation or 0) > observed
            ):
                continue
            try:
                await self.ctx.client.delete(
                    ReplicaSet, rs.metadata.name or "", rs.metadata.namespace
                )
            except ApiError as error:
                if not error.not_found:
                    raise

    # RollingUpdate (upstream rolling.go).

    async def _rollout_rolling(self, s: _Sync) -> None:
        new, old = await self._new_and_old(s, create=True)
        assert new is not None
        all_rss: list[ReplicaSet] = [*old, new]
        if await self._reconcile_new(s, all_rss, new):
            await self._sync_rollout_status(s, all_rss, new)
            return
        if await self._reconcile_old(s, all_rss, du.active(old), new):
            await self._sync_rollout_status(s, all_rss, new)
            return
        if du.deployment_complete(s.d, s.d.status):
            await self._cleanup(s, old)
        await self._sync_rollout_status(s, all_rss, new)

    async def _reconcile_new(self, s: _Sync, all_rss: list[ReplicaSet], new: ReplicaSet) -> bool:
        desired = du.replicas_of(s.d)
        if du.replicas_of(new) == desired:
            return False
        if du.replicas_of(new) > desired:
            return (await self._resize(s, new, desired))[0]
        return (await self._resize(s, new, du.new_rs_new_replicas(s.d, all_rss, new)))[0]

    async def _reconcile_old(
        self, s: _Sync, all_rss: list[ReplicaSet], old: list[ReplicaSet], new: ReplicaSet
    ) -> bool:
        """Scale old ReplicaSets down as far as availability allows: first their unavailable
        replicas (removing those costs nothing), then available ones while more than
        ``replicas - maxUnavailable`` pods are available."""
        if du.total_spec_replicas(old) == 0:
            return False
        min_available = du.replicas_of(s.d) - du.max_unavailable(s.d)
        new_unavailable = du.replicas_of(new) - du.total_status([new], "available_replicas")
        max_scaled_down = du.total_spec_replicas(all_rss) - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False
        old, cleaned = await self._cleanup_unhealthy(s, old, max_scaled_down)
        scaled = await self._scale_down_old(s, [*old, new], old, min_available)
        return cleaned + scaled > 0

    async def _cleanup_unhealthy(
        self, s: _Sync, old: list[ReplicaSet], limit: int
    ) -> tuple[list[ReplicaSet], int]:
        old = du.by_creation(old)
        total = 0
        for i, rs in enumerate(old):
            if total >= limit:
                break
            size = du.replicas_of(rs)
            available = du.total_status([rs], "available_replicas")
            if size == 0 or size == available:
                continue
            count = min(limit - total, size - available)
            if count < 0:
                raise ValueError(
                    "when cleaning up unhealthy replicas, got invalid request to scale down "
                    f"{rs.metadata.namespace}/{rs.metadata.name} {size} -> {size - count}"
                )
            _, old[i] = await self._resize(s, rs, size - count)
            total += count
        return old, total

    async def _scale_down_old(
        self, s: _Sync, all_rss: list[ReplicaSet], old: list[ReplicaSet], min_available: int
    ) -> int:
        available = du.total_status(all_rss, "available_replicas")
        if available <= min_available:
            return 0
        wanted, total = available - min_available, 0
        for rs in du.by_creation(old):
            if total >= wanted:
                break
            size = du.replicas_of(rs)
            if size == 0:
                continue
            count = min(size, wanted - total)
            await self._resize(s, rs, size - count)
            total += count
        return total

    # Recreate (upstream recreate.go).

    async def _rollout_recreate(self, s: _Sync) -> None:
        # The new ReplicaSet is not created before the old pods are gone.
        new, old = await self._new_and_old(s, create=False)
        scaled_down = False
        for rs in du.active(old):
            scaled_down = (await self._resize(s, rs, 0))[0] or scaled_down
        if scaled_down or self._old_pods_running(s, new, old):
            await self._sync_rollout_status(s, [*old, new], new)
            return
        if new is None:
            new, old = await self._new_and_old(s, create=True)
            assert new is not None
        await self._resize(s, new, du.replicas_of(s.d))
        if du.deployment_complete(s.d, s.d.status):
            await self._cleanup(s, old)
        await self._sync_rollout_status(s, [*old, new], new)

    def _old_pods_running(self, s: _Sync, new: ReplicaSet | None, old: list[ReplicaSet]) -> bool:
        """Whether an old ReplicaSet still reports pods, or a pod of one is not finished."""
        if du.total_status(old, "replicas") > 0:
            return True
        selector = selector_of(s.d.spec.selector if s.d.spec else None)
        for rs in s.rss:
            if new is not None and rs.metadata.uid == new.metadata.uid:
                continue
            for pod in self.pods.lister.by_index(OWNER_UID_INDEX, rs.metadata.uid or ""):
                ref = controller_of(pod)
                if ref is None or ref.uid != rs.metadata.uid:
                    continue
                if not selector.matches(pod.metadata.labels):
                    continue
                phase = pod.status.phase if pod.status else None
                if phase not in ("Succeeded", "Failed"):
                    return True
        return False

    # Progress (upstream progress.go).

    async def _sync_rollout_status(
        self, s: _Sync, all_rss: Sequence[ReplicaSet | None], new: ReplicaSet | None
    ) -> None:
        """The status with the Progressing condition estimated and ReplicaSet failures
        surfaced; when nothing changed, come back when the progress deadline would pass."""
        d, now = s.d, self.ctx.clock.now()
        all_rss, new = s.latest_all(all_rss), s.latest(new)
        status = du.calculate_status(all_rss, new, d, now)
        if not du.has_progress_deadline(d):
            du.remove_condition(status, du.PROGRESSING)
        current = du.get_condition(d.status, du.PROGRESSING)
        settled = (
            status.replicas == status.updated_replicas
            and current is not None
            and current.reason == du.NEW_RS_AVAILABLE_REASON
        )
        if du.has_progress_deadline(d) and not settled:
            self._estimate_progress(d, status, new, current, now)
        failures = _replica_failures(all_rss, new)
        if failures:
            du.set_condition(status, failures[0])
        else:
            du.remove_condition(status, du.REPLICA_FAILURE)
        if status == d.status:
            after = du.progress_check_after(d, status, now)
            if after is not None and after < 1:
                self.queue.add_rate_limited(object_key(d))
            elif after is not None:
                self.enqueue_after(d, after + 1)
            return
        d.status = status
        await self._update_status(s)

    def _estimate_progress(
        self,
        d: Deployment,
        status: DeploymentStatus,
        new: ReplicaSet | None,
        current: DeploymentCondition | None,
        now: datetime.datetime,
    ) -> None:
        subject = (
            f'ReplicaSet "{new.metadata.name}"'
            if new is not None
            else f'Deployment "{d.metadata.name}"'
        )
        if du.deployment_complete(d, status):
            du.set_condition(
                status,
                du.new_condition(
                    du.PROGRESSING,
                    "True",
                    du.NEW_RS_AVAILABLE_REASON,
                    f"{subject} has successfully progressed.",
                    now,
                ),
            )
        elif du.deployment_progressing(d, status):
            condition = du.new_condition(
                du.PROGRESSING, "True", du.RS_UPDATED_REASON, f"{subject} is progressing.", now
            )
            # Progress refreshes lastUpdateTime even when the reason stays the same.
            if current is not None:
                if current.status == "True":
                    condition.last_transition_time = current.last_transition_time
                du.remove_condition(status, du.PROGRESSING)
            du.set_condition(status, condition)
        elif du.deployment_timed_out(d, status, now):
            du.set_condition(
                status,
                du.new_condition(
                    du.PROGRESSING,
                    "False",
                    du.TIMED_OUT_REASON,
                    f"{subject} has timed out progressing.",
                    now,
                ),
            )


def _replica_failures(
    all_rss: Sequence[ReplicaSet], new: ReplicaSet | None
) -> list[DeploymentCondition]:
    """ReplicaFailure conditions of the new ReplicaSet, else of any, as Deployment ones."""
    for group in ([new] if new is not None else [], all_rss):
        found = [
            du.replica_set_to_deployment_condition(c)
            for rs in group
            for c in (rs.status.conditions if rs.status else None) or ()
            if c.type == du.REPLICA_FAILURE
        ]
        if found:
            return found
    return []


def new(ctx: ControllerContext) -> DeploymentController:
    return DeploymentController(ctx)
