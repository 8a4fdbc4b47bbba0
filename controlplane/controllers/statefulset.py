"""The statefulset controller: replicas with stable names, stable storage and ordered
rollout (upstream ``pkg/controller/statefulset``).

Keys are StatefulSets.  Replica *i* is the pod ``<set>-<i>`` (ordinals start at
``spec.ordinals.start``), labelled ``statefulset.kubernetes.io/pod-name`` and
``apps.kubernetes.io/pod-index``, with ``hostname`` its name and ``subdomain`` the set's
``serviceName`` so the headless Service gives it a stable DNS name.  For each
``volumeClaimTemplate`` it gets its own claim ``<claim>-<set>-<i>``, created before the pod
and never deleted by this controller (``persistentVolumeClaimRetentionPolicy`` is not
implemented), so a replacement pod finds its predecessor's data.

Each sync works out the set's revisions (ControllerRevisions, see ``history``): the *update*
revision is the current template's, the *current* revision the one ``status.currentRevision``
names.  Then, replica by replica in ordinal order, it deletes finished pods (so the next sync
recreates them), creates missing ones and repairs identity and storage; replicas beyond
``replicas`` are condemned and deleted highest ordinal first.  Under ``OrderedReady`` (the
default) the walk stops at the first replica that is not yet created, Running and Ready (and
available for ``minReadySeconds``), and a condemned pod is deleted only when all the others
are healthy, so the set grows and shrinks one pod at a time.  ``Parallel`` does not wait.

Under ``RollingUpdate`` pods not at the update revision are deleted from the highest ordinal
down to ``partition``, no more at once than ``maxUnavailable`` (1 by default) minus the
replicas already unavailable; the walk above recreates them from the new template.  Pods
below the partition are recreated from the current revision.  ``OnDelete`` replaces a pod
only when someone deletes it.  Once every replica is updated and ready the update revision
becomes the current one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from controlplane.controllers.history import (
    CONTROLLER_REVISION_HASH_LABEL,
    History,
    equal_revision,
    new_revision,
    next_revision,
    owned_revisions,
    scaled_count,
    sort_revisions,
    template_of,
)
from controlplane.controllers.podcontrol import (
    ORPHAN_INDEX,
    claim_pods,
    is_pod_available,
    is_pod_ready,
    orphan_index,
    pod_from_template,
    pods_to_claim,
)
from kube.api.kinds.apps_v1 import (
    ControllerRevision,
    StatefulSet,
    StatefulSetStatus,
)
from kube.api.kinds.core_v1.pod import Pod, PodSpec, PodTemplateSpec
from kube.api.kinds.core_v1.volume import (
    PersistentVolumeClaim,
    PersistentVolumeClaimVolumeSource,
    Volume,
)
from kube.api.labels import Selector, SelectorError, selector_of
from kube.api.owners import controller_of
from kube.client.errors import ApiError

NAME = "statefulset"

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"

_NAME = re.compile(r"^(.*)-([0-9]+)$")


class ClaimsError(Exception):
    """A replica's claims could not all be made (or one is being deleted)."""


# Identity.


def parent_and_ordinal(pod: Pod) -> tuple[str, int]:
    """The set name and ordinal in a pod's name; ("", -1) if it has none."""
    match = _NAME.match(pod.metadata.name or "")
    if match is None:
        return "", -1
    return match.group(1), int(match.group(2))


def ordinal_of(pod: Pod) -> int:
    return parent_and_ordinal(pod)[1]


def pod_name(sts: StatefulSet, ordinal: int) -> str:
    return f"{sts.metadata.name}-{ordinal}"


def claim_name(template: PersistentVolumeClaim, sts: StatefulSet, ordinal: int) -> str:
    return f"{template.metadata.name}-{sts.metadata.name}-{ordinal}"


def start_ordinal(sts: StatefulSet) -> int:
    ordinals = sts.spec.ordinals if sts.spec else None
    return (ordinals.start if ordinals else None) or 0


def _replicas(sts: StatefulSet) -> int:
    replicas = sts.spec.replicas if sts.spec else None
    return 1 if replicas is None else replicas


def revision_of(pod: Pod) -> str:
    return (pod.metadata.labels or {}).get(CONTROLLER_REVISION_HASH_LABEL, "")


def claims_for(sts: StatefulSet, ordinal: int) -> dict[str, PersistentVolumeClaim]:
    """The claims of replica ``ordinal``, by the name of their template (upstream
    ``getPersistentVolumeClaims``): the template's labels plus the selector's matchLabels."""
    selector = sts.spec.selector if sts.spec else None
    match_labels = (selector.match_labels if selector else None) or {}
    claims = {}
    for template in (sts.spec.volume_claim_templates if sts.spec else None) or ():
        meta = msgspec.structs.replace(
            template.metadata,
            name=claim_name(template, sts, ordinal),
            namespace=sts.metadata.namespace,
            labels={**(template.metadata.labels or {}), **match_labels},
        )
        claims[template.metadata.name or ""] = msgspec.structs.replace(
            template, metadata=meta, status=None
        )
    return claims


def identity_matches(sts: StatefulSet, pod: Pod) -> bool:
    parent, ordinal = parent_and_ordinal(pod)
    labels = pod.metadata.labels or {}
    return (
        ordinal >= 0
        and parent == sts.metadata.name
        and pod.metadata.namespace == sts.metadata.namespace
        and labels.get(POD_NAME_LABEL) == pod.metadata.name
        and labels.get(POD_INDEX_LABEL) == str(ordinal)
    )


def storage_matches(sts: StatefulSet, pod: Pod) -> bool:
    volumes = {v.name: v for v in (pod.spec.volumes if pod.spec else None) or ()}
    for name, claim in claims_for(sts, ordinal_of(pod)).items():
        volume = volumes.get(name)
        source = volume.persistent_volume_claim if volume else None
        if source is None or source.claim_name != claim.metadata.name:
            return False
    return True


def set_identity(sts: StatefulSet, pod: Pod, ordinal: int) -> None:
    """Name, namespace and identity labels of replica ``ordinal``, in place."""
    pod.metadata.name = pod_name(sts, ordinal)
    pod.metadata.namespace = sts.metadata.namespace
    pod.metadata.labels = {
        **(pod.metadata.labels or {}),
        POD_NAME_LABEL: pod.metadata.name,
        POD_INDEX_LABEL: str(ordinal),
    }


def set_storage(sts: StatefulSet, pod: Pod) -> None:
    """Point the claim templates' volumes at this replica's claims, in place; the pod's
    other volumes stay."""
    claims = claims_for(sts, ordinal_of(pod))
    spec = pod.spec or PodSpec()
    volumes = [
        Volume(
            name=name,
            persistent_volume_claim=PersistentVolumeClaimVolumeSource(
                claim_name=claim.metadata.name, read_only=False
            ),
        )
        for name, claim in claims.items()
    ]
    volumes += [v for v in spec.volumes or () if v.name not in claims]
    spec.volumes = volumes
    pod.spec = spec


def new_pod(sts: StatefulSet, template: PodTemplateSpec, revision: str, ordinal: int) -> Pod:
    """Replica ``ordinal`` made from ``template`` (not yet created)."""
    pod = pod_from_template(template, sts)
    pod.metadata.generate_name = None
    set_identity(sts, pod, ordinal)
    spec = pod.spec or PodSpec()
    spec.hostname = pod.metadata.name
    spec.subdomain = sts.spec.service_name if sts.spec else None
    pod.spec = spec
    set_storage(sts, pod)
    pod.metadata.labels = {**(pod.metadata.labels or {}), CONTROLLER_REVISION_HASH_LABEL: revision}
    return pod


# Pod state, as the controller reads it.


def _phase(pod: Pod) -> str:
    return (pod.status.phase if pod.status else None) or ""


def is_created(pod: Pod) -> bool:
    """Whether the pod exists (a replica still to be created has no phase)."""
    return _phase(pod) != ""


def is_terminating(pod: Pod) -> bool:
    return pod.metadata.deletion_timestamp is not None


def is_running_and_ready(pod: Pod) -> bool:
    return _phase(pod) == "Running" and is_pod_ready(pod)


def is_healthy(pod: Pod) -> bool:
    return is_running_and_ready(pod) and not is_terminating(pod)


@dataclass
class _Pass:
    """One sync's view of a set: its revisions and its pods, sorted into replicas (by
    ordinal) and condemned pods (highest ordinal first)."""

    sts: StatefulSet
    current: ControllerRevision
    update: ControllerRevision
    current_template: PodTemplateSpec
    update_template: PodTemplateSpec
    replicas: list[Pod] = field(default_factory=list)
    condemned: list[Pod] = field(default_factory=list)

    @property
    def monotonic(self) -> bool:
        policy = self.sts.spec.pod_management_policy if self.sts.spec else None
        return policy != "Parallel"

    @property
    def min_ready(self) -> int:
        return (self.sts.spec.min_ready_seconds if self.sts.spec else None) or 0

    def versioned_pod(self, ordinal: int) -> Pod:
        """Replica ``ordinal`` at the revision it should have (upstream
        ``newVersionedStatefulSetPod``): below the partition, the current one."""
        sts = self.sts
        strategy = sts.spec.update_strategy if sts.spec else None
        rolling = strategy.rolling_update if strategy else None
        start = start_ordinal(sts)
        current_count = (sts.status.current_replicas if sts.status else None) or 0
        stays_current = (rolling is not None and ordinal < start + (rolling.partition or 0)) or (
            strategy is not None
            and strategy.type == "RollingUpdate"
            and rolling is None
            and ordinal < start + current_count
        )
        if stays_current:
            return new_pod(sts, self.current_template, self.current.metadata.name or "", ordinal)
        return new_pod(sts, self.update_template, self.update.metadata.name or "", ordinal)


class StatefulSetController(Controller):
    NAME = NAME
    EVENT_SOURCE = "statefulset-controller"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.history = History(ctx.client)
        self.sets = ctx.informers.informer_for(StatefulSet)
        self.pods = ctx.informers.informer_for(Pod, indexers={ORPHAN_INDEX: orphan_index})
        self.revisions = ctx.informers.informer_for(ControllerRevision)
        self.claims = ctx.informers.informer_for(PersistentVolumeClaim)
        self.sets.add_event_handler(self.enqueue, self.enqueue_update, self.enqueue)
        self.pods.add_event_handler(self._child_changed, self._pod_updated, self._child_changed)
        self.revisions.add_event_handler(
            self._child_changed, lambda old, new: self._child_changed(new), self._child_changed
        )

    # Handlers.

    def _child_changed(self, obj: Any) -> None:
        """Enqueue a pod's or revision's set, or every set that may adopt an orphan pod."""
        child = unwrap(obj)
        ref = controller_of(child)
        namespace = child.metadata.namespace
        if ref is not None:
            sts = self.sets.lister.get(f"{namespace}/{ref.name}")
            if ref.kind == "StatefulSet" and sts is not None and sts.metadata.uid == ref.uid:
                self.enqueue(sts)
            return
        if isinstance(child, Pod):
            for sts in self.sets.lister.list(namespace):
                if _selector(sts).matches(child.metadata.labels):
                    self.enqueue(sts)

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        if old.metadata.resource_version == new.metadata.resource_version:
            return
        if controller_of(old) != controller_of(new):
            self._child_changed(old)
        self._child_changed(new)

    # Sync.

    async def sync_key(self, key: str) -> None:
        sts = self.sets.lister.get(key)
        if sts is None:
            return
        selector = _selector(sts)
        revisions = await self._revisions(sts, selector)
        name = sts.metadata.name

        def member(pod: Pod) -> bool:
            return parent_and_ordinal(pod)[0] == name

        pods = await claim_pods(
            self.ctx, sts, selector, pods_to_claim(self.pods.lister, sts), member
        )
        collisions = [(sts.status.collision_count if sts.status else None) or 0]
        current, update = await self._current_and_update(sts, revisions, collisions)
        error: ApiError | ClaimsError | None = None
        try:
            status = await self._update_set(sts, current, update, collisions[0], pods)
        except (ApiError, ClaimsError) as failure:
            error = failure
            status = self._status(sts, current, update, collisions[0], pods)
        await self._store_status(sts, status)
        await self._truncate_history(sts, pods, revisions, current, update)
        if error is not None:
            raise error
        min_ready = (sts.spec.min_ready_seconds if sts.spec else None) or 0
        if min_ready > 0 and status.available_replicas != _replicas(sts):
            self.enqueue_after(sts, min_ready)

    async def _revisions(self, sts: StatefulSet, selector: Selector) -> list[ControllerRevision]:
        """The set's revisions, oldest first, after adopting orphans its selector matches."""
        listed = self.revisions.lister.list(sts.metadata.namespace)
        owned, orphans = owned_revisions(listed, sts, selector)
        for orphan in orphans:
            owned.append(await self.history.adopt(sts, orphan))
        return sort_revisions(owned)

    async def _current_and_update(
        self, sts: StatefulSet, revisions: list[ControllerRevision], collisions: list[int]
    ) -> tuple[ControllerRevision, ControllerRevision]:
        """(upstream ``getStatefulSetRevisions``) The update revision is the template's: the
        newest revision if it holds it, an older one renumbered (a rollback), or a new one."""
        template = sts.spec.template if sts.spec else None
        update = new_revision(sts, template, next_revision(revisions), collisions[0])
        equal = [r for r in revisions if equal_revision(r, update)]
        if equal and revisions[-1] is equal[-1]:
            update = revisions[-1]
        elif equal:
            update = await self.history.renumber(equal[-1], update.revision or 0)
        else:
            update = await self.history.create(sts, update, collisions)
        wanted = sts.status.current_revision if sts.status else None
        current = next((r for r in revisions if r.metadata.name == wanted), update)
        return current, update

    async def _truncate_history(
        self,
        sts: StatefulSet,
        pods: Sequence[Pod],
        revisions: Sequence[ControllerRevision],
        current: ControllerRevision,
        update: ControllerRevision,
    ) -> None:
        """Delete the oldest revisions no pod uses beyond ``revisionHistoryLimit``."""
        live = {current.metadata.name, update.metadata.name, *(revision_of(p) for p in pods)}

        def is_live(revision: ControllerRevision) -> bool:
            return revision.metadata.name in live

        limit = (sts.spec.revision_history_limit if sts.spec else None) or 0
        history = [r for r in revisions if not is_live(r)]
        await self.history.delete_oldest(history, is_live, len(history) - limit)

    async def _store_status(self, sts: StatefulSet, status: StatefulSetStatus) -> None:
        """Write the status if it changed, first completing a finished rolling update."""
        strategy = sts.spec.update_strategy if sts.spec else None
        if (
            strategy is not None
            and strategy.type == "RollingUpdate"
            and status.updated_replicas == status.replicas
            and status.ready_replicas == status.replicas
        ):
            status.current_replicas = status.updated_replicas
            status.current_revision = status.update_revision
        if status != (sts.status or StatefulSetStatus()):
            await self.ctx.client.update_status(msgspec.structs.replace(sts, status=status))

    def _status(
        self,
        sts: StatefulSet,
        current: ControllerRevision,
        update: ControllerRevision,
        collisions: int,
        *pod_lists: Sequence[Pod],
    ) -> StatefulSetStatus:
        """The counts upstream's ``updateStatus`` takes over the given pods."""
        min_ready = (sts.spec.min_ready_seconds if sts.spec else None) or 0
        now = self.ctx.clock.now()
        replicas = ready = available = current_count = updated = 0
        for pods in pod_lists:
            for pod in pods:
                created = is_created(pod)
                replicas += created
                if is_running_and_ready(pod):
                    ready += 1
                    available += is_pod_available(pod, min_ready, now)
                if created and not is_terminating(pod):
                    current_count += revision_of(pod) == current.metadata.name
                    updated += revision_of(pod) == update.metadata.name
        return msgspec.structs.replace(
            sts.status or StatefulSetStatus(),
            observed_generation=sts.metadata.generation,
            replicas=replicas,
            ready_replicas=ready,
            available_replicas=available,
            current_replicas=current_count,
            updated_replicas=updated,
            current_revision=current.metadata.name,
            update_revision=update.metadata.name,
            collision_count=collisions,
        )

    async def _update_set(
        self,
        sts: StatefulSet,
        current: ControllerRevision,
        update: ControllerRevision,
        collisions: int,
        pods: Sequence[Pod],
    ) -> StatefulSetStatus:
        """Create, repair, delete and roll pods; the status they leave (upstream
        ``updateStatefulSet``)."""
        run = _Pass(sts, current, update, template_of(current), template_of(update))
        start, count = start_ordinal(sts), _replicas(sts)
        slots: list[Pod | None] = [None] * count
        for pod in pods:
            ordinal = ordinal_of(pod)
            if start <= ordinal < start + count:
                slots[ordinal - start] = pod
            elif ordinal >= 0:
                run.condemned.append(pod)
        run.replicas = [pod or run.versioned_pod(start + i) for i, pod in enumerate(slots)]
        run.condemned.sort(key=ordinal_of, reverse=True)

        def status() -> StatefulSetStatus:
            return self._status(sts, current, update, collisions, run.replicas, run.condemned)

        if sts.metadata.deletion_timestamp is not None:
            return self._status(sts, current, update, collisions, pods)
        for i in range(count):
            if await self._process_replica(run, i) and run.monotonic:
                return status()
        unhealthy = [p for p in [*run.replicas, *reversed(run.condemned)] if not is_healthy(p)]
        first_unhealthy = unhealthy[0] if unhealthy else None
        for pod in run.condemned:
            if await self._process_condemned(run, pod, first_unhealthy) and run.monotonic:
                return status()
        result = status()
        strategy = sts.spec.update_strategy if sts.spec else None
        if strategy is None or strategy.type != "OnDelete":
            deleted = await self._roll(run)
            result.current_replicas = (result.current_replicas or 0) - deleted
        return result

    async def _process_replica(self, run: _Pass, i: int) -> bool:
        """Bring replica ``i`` to life; whether an ordered walk must stop here."""
        sts, pod = run.sts, run.replicas[i]
        if _phase(pod) in ("Failed", "Succeeded"):
            if not is_terminating(pod):
                await self._delete_pod(sts, pod)
            return True
        if not is_created(pod):
            await self._create_pod(sts, pod)
            return True
        if _phase(pod) == "Pending":
            await self._create_claims(sts, pod)
        if run.monotonic and (
            is_terminating(pod)
            or not is_running_and_ready(pod)
            or not is_pod_available(pod, run.min_ready, self.ctx.clock.now())
        ):
            return True
        if not (identity_matches(sts, pod) and storage_matches(sts, pod)):
            await self._repair_pod(sts, pod)
        return False

    async def _process_condemned(self, run: _Pass, pod: Pod, first_unhealthy: Pod | None) -> bool:
        """Delete a pod beyond ``replicas``; whether an ordered walk must stop here."""
        if is_terminating(pod):
            return True
        healthy = is_running_and_ready(pod) and is_pod_available(
            pod, run.min_ready, self.ctx.clock.now()
        )
        if run.monotonic and not healthy and pod is not first_unhealthy:
            return True
        await self._delete_pod(run.sts, pod)
        return True

    async def _roll(self, run: _Pass) -> int:
        """Delete pods not at the update revision, highest ordinal first, down to the
        partition and within the maxUnavailable budget; how many were deleted."""
        sts = run.sts
        strategy = sts.spec.update_strategy if sts.spec else None
        rolling = strategy.rolling_update if strategy else None
        partition = (rolling.partition if rolling else None) or 0
        budget = max(
            scaled_count(rolling.max_unavailable if rolling else None, len(run.replicas), 1), 1
        )
        now = self.ctx.clock.now()
        unavailable = sum(
            1
            for pod in run.replicas
            if is_terminating(pod)
            or not (is_running_and_ready(pod) and is_pod_available(pod, run.min_ready, now))
        )
        deleted = 0
        for target in range(len(run.replicas) - 1, partition - 1, -1):
            if deleted >= budget - unavailable:
                break
            pod = run.replicas[target]
            if revision_of(pod) != run.update.metadata.name and not is_terminating(pod):
                await self._delete_pod(sts, pod)
                deleted += 1
        return deleted

    # Writes, with upstream's events.

    def _pod_event(self, sts: StatefulSet, verb: str, pod: Pod, error: Exception | None) -> None:
        name, owner = pod.metadata.name, sts.metadata.name
        if error is None:
            message = f"{verb} Pod {name} in StatefulSet {owner} successful"
            self.ctx.recorder.event(sts, "Normal", f"Successful{verb.title()}", message)
        else:
            message = f"{verb} Pod {name} in StatefulSet {owner} failed error: {error}"
            self.ctx.recorder.event(sts, "Warning", f"Failed{verb.title()}", message)

    async def _create_claims(self, sts: StatefulSet, pod: Pod) -> None:
        """Create the pod's missing claims; raise if one cannot be made or is being deleted."""
        problems: list[str] = []
        for claim in claims_for(sts, ordinal_of(pod)).values():
            name = claim.metadata.name or ""
            existing = self.claims.lister.get(f"{claim.metadata.namespace}/{name}")
            if existing is not None:
                if existing.metadata.deletion_timestamp is not None:
                    problems.append(f"pvc {name} is being deleted")
                continue
            try:
                await self.ctx.client.create(claim)
            except ApiError as error:
                if error.already_exists:
                    continue
                problems.append(f"failed to create PVC {name}: {error}")
                message = (
                    f"create Claim {name} for Pod {pod.metadata.name} in StatefulSet "
                    f"{sts.metadata.name} failed error: {error}"
                )
                self.ctx.recorder.event(sts, "Warning", "FailedCreate", message)
                continue
            message = (
                f"create Claim {name} Pod {pod.metadata.name} in StatefulSet "
                f"{sts.metadata.name} success"
            )
            self.ctx.recorder.event(sts, "Normal", "SuccessfulCreate", message)
        if problems:
            raise ClaimsError("; ".join(problems))

    async def _create_pod(self, sts: StatefulSet, pod: Pod) -> None:
        try:
            await self._create_claims(sts, pod)
            await self.ctx.client.create(pod)
        except (ApiError, ClaimsError) as error:
            if not (isinstance(error, ApiError) and error.already_exists):
                self._pod_event(sts, "create", pod, error)
            raise
        self._pod_event(sts, "create", pod, None)

    async def _repair_pod(self, sts: StatefulSet, pod: Pod) -> None:
        """Restore a replica's identity labels and claim volumes (upstream
        ``UpdateStatefulPod``)."""
        fixed = msgspec.structs.replace(
            pod,
            metadata=msgspec.structs.replace(pod.metadata),
            spec=msgspec.structs.replace(pod.spec or PodSpec()),
        )
        set_identity(sts, fixed, ordinal_of(pod))
        if not storage_matches(sts, fixed):
            set_storage(sts, fixed)
            await self._create_claims(sts, fixed)
        try:
            await self.ctx.client.update(fixed)
        except ApiError as error:
            self._pod_event(sts, "update", pod, error)
            raise
        self._pod_event(sts, "update", pod, None)

    async def _delete_pod(self, sts: StatefulSet, pod: Pod) -> None:
        try:
            await self.ctx.client.delete(Pod, pod.metadata.name or "", pod.metadata.namespace)
        except ApiError as error:
            if error.not_found:
                return
            self._pod_event(sts, "delete", pod, error)
            raise
        self._pod_event(sts, "delete", pod, None)


def _selector(sts: StatefulSet) -> Selector:
    try:
        return selector_of(sts.spec.selector if sts.spec else None)
    except SelectorError:
        return Selector.nothing()


def new(ctx: ControllerContext) -> StatefulSetController:
    return StatefulSetController(ctx)
