"""The persistentvolume-binder controller: binds claims to volumes, provisions volumes for
the lab's hostPath StorageClass, and reclaims volumes whose claim is gone.

One queue holds two kinds of keys, told apart by their shape: a claim's ``namespace/name``
and a volume's bare ``name`` (volumes are cluster-scoped, and a name never holds ``/``).
Upstream keeps two queues for the same reason.  Every step is level-triggered and idempotent:
a sync looks at both sides and writes only what is missing, so an interrupted binding is
completed by the next sync of either side.

Claims:

* an unbound claim (no ``spec.volumeName``) whose class binds ``WaitForFirstConsumer`` waits,
  unless the scheduler has chosen a node (``volume.kubernetes.io/selected-node``);
* otherwise it gets the smallest volume that is Available (or pre-bound to it), of the same
  class, offering every access mode asked for, at least as large as the request, with the
  same volume mode and labels the claim's selector accepts;
* with no such volume: a claim of the ``kubelab.io/hostpath`` class gets a new volume
  ``pvc-<claim uid>`` (``hostPath`` ``/var/lib/kubelab/volumes/<name>``, the class's reclaim
  policy and mount options, pinned to the selected node if there is one); a claim of another
  provisioner's class is annotated for that provisioner to act on; a claim without a class
  waits for an administrator (``FailedBinding``);
* binding writes the volume first (``claimRef``, then phase ``Bound``), then the claim
  (``volumeName`` with ``pv.kubernetes.io/bind-completed``, then phase ``Bound`` with the
  volume's capacity and access modes), as upstream, so that a crash in between leaves a volume
  that points at its claim, which the next sync finishes;
* a bound claim whose volume disappeared is ``Lost``.

Volumes: without a claim (or pre-bound to a claim not yet bound) a volume is ``Available``;
bound to an existing claim it is ``Bound``; when its claim is gone it is ``Released`` and then
reclaimed: ``Delete`` deletes the PersistentVolume object (the hostPath directory on the node
is never touched from here), ``Retain`` leaves it ``Released`` for an administrator.
"""

from __future__ import annotations

import copy
from typing import Any

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from controlplane.controllers.volumeutil import (
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_PROVISIONED_BY,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
)
from kube.api.kinds.core_v1.node import LABEL_HOSTNAME
from kube.api.kinds.core_v1.volume import (
    HostPathVolumeSource,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectReference,
    PersistentVolume,
    PersistentVolumeClaim,
    PersistentVolumeClaimStatus,
    PersistentVolumeSpec,
    PersistentVolumeStatus,
    VolumeNodeAffinity,
    claim_class,
    volume_class,
)
from kube.api.kinds.storage_v1 import StorageClass
from kube.api.labels import selector_of
from kube.api.meta_v1 import ObjectMeta
from kube.api.quantity import Quantity
from kube.client.errors import ApiError

NAME = "persistentvolume-binder"
HOSTPATH_PROVISIONER = "kubelab.io/hostpath"
VOLUMES_DIR = "/var/lib/kubelab/volumes"
YES = "yes"


def _storage(resources: dict[str, Any] | None) -> Quantity | None:
    value = (resources or {}).get("storage")
    return None if value is None else Quantity.parse(value)


def claim_request(claim: PersistentVolumeClaim) -> Quantity | None:
    return _storage(claim.spec.requests() if claim.spec else None)


def volume_capacity(volume: PersistentVolume) -> Quantity:
    return _storage(volume.spec.capacity if volume.spec else None) or Quantity(0)


def is_bound_to(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """Whether the volume's claimRef names the claim (and its uid, when it has one)."""
    ref = volume.spec.claim_ref if volume.spec else None
    return (
        ref is not None
        and ref.namespace == claim.metadata.namespace
        and ref.name == claim.metadata.name
        and ref.uid in (None, "", claim.metadata.uid)
    )


def volume_fits(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """Class, access modes, capacity, volume mode and selector (upstream
    ``FindMatchingVolume``'s checks, without topology)."""
    spec, claim_spec = volume.spec or PersistentVolumeSpec(), claim.spec
    if claim_spec is None or volume_class(volume) != claim_class(claim):
        return False
    if not set(claim_spec.access_modes or ()) <= set(spec.access_modes or ()):
        return False
    request = claim_request(claim)
    if request is not None and volume_capacity(volume) < request:
        return False
    if (spec.volume_mode or "Filesystem") != (claim_spec.volume_mode or "Filesystem"):
        return False
    return claim_spec.selector is None or selector_of(claim_spec.selector).matches(
        volume.metadata.labels or {}
    )


def find_matching_volume(
    claim: PersistentVolumeClaim, volumes: list[PersistentVolume]
) -> PersistentVolume | None:
    """A volume pre-bound to the claim if one fits, else the smallest fitting Available one."""
    smallest: PersistentVolume | None = None
    for volume in volumes:
        if volume.metadata.deletion_timestamp is not None or not volume_fits(volume, claim):
            continue
        if is_bound_to(volume, claim):
            return volume
        claimed = volume.spec is not None and volume.spec.claim_ref is not None
        available = volume.status is not None and volume.status.phase == "Available"
        if claimed or not available:
            continue
        if smallest is None or volume_capacity(volume) < volume_capacity(smallest):
            smallest = volume
    return smallest


def _phase(obj: PersistentVolume | PersistentVolumeClaim) -> str:
    return (obj.status.phase if obj.status else None) or ""


class PersistentVolumeController(Controller):
    NAME = NAME
    EVENT_SOURCE = "persistentvolume-controller"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.claims = ctx.informers.informer_for(PersistentVolumeClaim)
        self.volumes = ctx.informers.informer_for(PersistentVolume)
        self.classes = ctx.informers.informer_for(StorageClass)
        self.claims.add_event_handler(self.enqueue, self.enqueue_update, self._claim_deleted)
        self.volumes.add_event_handler(
            self._volume_added, self._volume_updated, self._volume_deleted
        )
        self.classes.add_event_handler(
            lambda obj: self._enqueue_pending_claims(), self._class_updated
        )

    # Handlers.

    def _claim_deleted(self, obj: Any) -> None:
        claim = unwrap(obj)
        if claim.spec is not None and claim.spec.volume_name:
            self.queue.add(claim.spec.volume_name)

    def _volume_added(self, obj: Any) -> None:
        self.enqueue(obj)
        self._enqueue_pending_claims()

    def _volume_updated(self, old: Any, new: Any) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._volume_added(new)

    def _volume_deleted(self, obj: Any) -> None:
        ref = unwrap(obj).spec.claim_ref if unwrap(obj).spec else None
        if ref is not None and ref.name:
            self.queue.add(f"{ref.namespace}/{ref.name}")

    def _class_updated(self, old: Any, new: Any) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._enqueue_pending_claims()

    def _enqueue_pending_claims(self) -> None:
        for claim in self.claims.lister.list():
            if claim.spec is not None and not claim.spec.volume_name:
                self.enqueue(claim)

    # Sync.

    async def sync_key(self, key: str) -> None:
        if "/" in key:
            claim = self.claims.lister.get(key)
            if claim is not None:
                await self._sync_claim(claim)
        else:
            volume = self.volumes.lister.get(key)
            if volume is not None:
                await self._sync_volume(volume)

    async def _sync_claim(self, claim: PersistentVolumeClaim) -> None:
        volume_name = claim.spec.volume_name if claim.spec else None
        if not volume_name:
            await self._sync_unbound_claim(claim)
            return
        volume = self.volumes.lister.get(volume_name)
        if volume is None:
            if (claim.metadata.annotations or {}).get(ANN_BIND_COMPLETED) and _phase(
                claim
            ) != "Lost":
                await self._set_claim_phase(claim, "Lost")
                self.ctx.recorder.event(
                    claim,
                    "Warning",
                    "ClaimLost",
                    "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
                )
            return
        ref = volume.spec.claim_ref if volume.spec else None
        if ref is None or is_bound_to(volume, claim):
            await self._bind(volume, claim)
        elif _phase(claim) != "Bound":
            self.ctx.recorder.event(
                claim,
                "Warning",
                "FailedBinding",
                f'volume "{volume_name}" already bound to a different claim.',
            )

    async def _sync_unbound_claim(self, claim: PersistentVolumeClaim) -> None:
        class_name = claim_class(claim)
        storage_class = self.classes.lister.get(class_name) if class_name else None
        selected_node = (claim.metadata.annotations or {}).get(ANN_SELECTED_NODE)
        if (
            storage_class is not None
            and storage_class.volume_binding_mode == "WaitForFirstConsumer"
            and not selected_node
        ):
            self.ctx.recorder.event(
                claim,
                "Normal",
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
            )
            return
        volume = find_matching_volume(claim, self.volumes.lister.list())
        if volume is not None:
            await self._bind(volume, claim)
        elif not class_name:
            self.ctx.recorder.event(
                claim,
                "Normal",
                "FailedBinding",
                "no persistent volumes available for this claim and no storage class is set",
            )
        elif storage_class is None:
            self.ctx.recorder.event(
                claim,
                "Warning",
                "ProvisioningFailed",
                f'storageclass.storage.k8s.io "{class_name}" not found',
            )
        else:
            await self._provision(claim, storage_class, selected_node)

    # Binding.

    async def _bind(self, volume: PersistentVolume, claim: PersistentVolumeClaim) -> None:
        """Complete whatever part of the binding is missing, volume first."""
        if volume.spec is None or volume.spec.claim_ref is None or not volume.spec.claim_ref.uid:
            updated = copy.deepcopy(volume)
            spec = updated.spec = updated.spec or PersistentVolumeSpec()
            if spec.claim_ref is None:
                updated.metadata.annotations = {
                    **(updated.metadata.annotations or {}),
                    ANN_BOUND_BY_CONTROLLER: YES,
                }
            spec.claim_ref = ObjectReference(
                kind="PersistentVolumeClaim",
                namespace=claim.metadata.namespace,
                name=claim.metadata.name,
                uid=claim.metadata.uid,
                api_version="v1",
                resource_version=claim.metadata.resource_version,
            )
            volume = await self.ctx.client.update(updated)
        if _phase(volume) != "Bound":
            updated = copy.deepcopy(volume)
            updated.status = PersistentVolumeStatus(phase="Bound")
            volume = await self.ctx.client.update_status(updated)
        name = volume.metadata.name
        annotations = claim.metadata.annotations or {}
        if (
            claim.spec is None
            or claim.spec.volume_name != name
            or not annotations.get(ANN_BIND_COMPLETED)
        ):
            updated_claim = copy.deepcopy(claim)
            added = {ANN_BIND_COMPLETED: YES}
            if updated_claim.spec is not None and updated_claim.spec.volume_name != name:
                added[ANN_BOUND_BY_CONTROLLER] = YES
                updated_claim.spec.volume_name = name
            updated_claim.metadata.annotations = {**annotations, **added}
            claim = await self.ctx.client.update(updated_claim)
        spec = volume.spec or PersistentVolumeSpec()
        status = copy.deepcopy(claim.status) or PersistentVolumeClaimStatus()
        status.phase = "Bound"
        status.access_modes = list(spec.access_modes or ()) or None
        status.capacity = dict(spec.capacity or {}) or None
        if status != claim.status:
            updated_claim = copy.deepcopy(claim)
            updated_claim.status = status
            await self.ctx.client.update_status(updated_claim)

    async def _set_claim_phase(self, claim: PersistentVolumeClaim, phase: str) -> None:
        updated = copy.deepcopy(claim)
        updated.status = updated.status or PersistentVolumeClaimStatus()
        updated.status.phase = phase
        await self.ctx.client.update_status(updated)

    async def _set_volume_phase(self, volume: PersistentVolume, phase: str) -> PersistentVolume:
        updated = copy.deepcopy(volume)
        updated.status = PersistentVolumeStatus(phase=phase)
        return await self.ctx.client.update_status(updated)

    # Provisioning.

    async def _provision(
        self, claim: PersistentVolumeClaim, storage_class: StorageClass, selected_node: str | None
    ) -> None:
        provisioner = storage_class.provisioner or ""
        annotations = claim.metadata.annotations or {}
        if annotations.get(ANN_STORAGE_PROVISIONER) != provisioner:
            updated = copy.deepcopy(claim)
            updated.metadata.annotations = {
                **annotations,
                ANN_STORAGE_PROVISIONER: provisioner,
                ANN_BETA_STORAGE_PROVISIONER: provisioner,
            }
            claim = await self.ctx.client.update(updated)
        if provisioner != HOSTPATH_PROVISIONER:
            self.ctx.recorder.event(
                claim,
                "Normal",
                "ExternalProvisioning",
                "Waiting for a volume to be created either by the external provisioner "
                f"'{provisioner}' or manually by the system administrator. If volume creation "
                "is delayed, please verify that the provisioner is running and correctly "
                "registered.",
            )
            return
        name = f"pvc-{claim.metadata.uid}"
        if self.volumes.lister.get(name) is not None:
            return
        try:
            await self.ctx.client.create(
                self._hostpath_volume(name, claim, storage_class, selected_node)
            )
        except ApiError as error:
            if not error.already_exists:
                self.ctx.recorder.event(
                    claim,
                    "Warning",
                    "ProvisioningFailed",
                    "Failed to provision volume with StorageClass "
                    f'"{storage_class.metadata.name}": {error}',
                )
                raise
            return
        self.ctx.recorder.event(
            claim,
            "Normal",
            "ProvisioningSucceeded",
            f"Successfully provisioned volume {name} using {HOSTPATH_PROVISIONER}",
        )

    @staticmethod
    def _hostpath_volume(
        name: str,
        claim: PersistentVolumeClaim,
        storage_class: StorageClass,
        selected_node: str | None,
    ) -> PersistentVolume:
        claim_spec = claim.spec
        affinity = None
        if selected_node:
            requirement = NodeSelectorRequirement(
                key=LABEL_HOSTNAME, operator="In", values=[selected_node]
            )
            affinity = VolumeNodeAffinity(
                required=NodeSelector(
                    node_selector_terms=[NodeSelectorTerm(match_expressions=[requirement])]
                )
            )
        request = claim_request(claim)
        return PersistentVolume(
            metadata=ObjectMeta(
                name=name,
                annotations={
                    ANN_PROVISIONED_BY: HOSTPATH_PROVISIONER,
                    ANN_BOUND_BY_CONTROLLER: YES,
                },
            ),
            spec=PersistentVolumeSpec(
                host_path=HostPathVolumeSource(
                    path=f"{VOLUMES_DIR}/{name}", type="DirectoryOrCreate"
                ),
                capacity={"storage": str(request)} if request is not None else None,
                access_modes=list(claim_spec.access_modes or ()) if claim_spec else None,
                claim_ref=ObjectReference(
                    kind="PersistentVolumeClaim",
                    namespace=claim.metadata.namespace,
                    name=claim.metadata.name,
                    uid=claim.metadata.uid,
                    api_version="v1",
                    resource_version=claim.metadata.resource_version,
                ),
                persistent_volume_reclaim_policy=storage_class.reclaim_policy or "Delete",
                storage_class_name=storage_class.metadata.name,
                mount_options=storage_class.mount_options,
                volume_mode=(claim_spec.volume_mode if claim_spec else None) or "Filesystem",
                node_affinity=affinity,
            ),
        )

    # Volumes.

    async def _sync_volume(self, volume: PersistentVolume) -> None:
        ref = volume.spec.claim_ref if volume.spec else None
        if ref is None or not ref.uid:
            if _phase(volume) != "Available":
                await self._set_volume_phase(volume, "Available")
            return
        claim = self.claims.lister.get(f"{ref.namespace}/{ref.name}")
        if claim is not None and claim.metadata.uid != ref.uid:
            claim = None
        if claim is None:
            await self._release(volume)
        elif claim.spec is None or not claim.spec.volume_name:
            # Provisioned for the claim, or bound halfway: the claim's sync completes it.
            self.enqueue(claim)
        elif claim.spec.volume_name == volume.metadata.name:
            if _phase(volume) != "Bound":
                await self._set_volume_phase(volume, "Bound")
        elif (volume.metadata.annotations or {}).get(ANN_BOUND_BY_CONTROLLER):
            # The claim went to another volume: undo the half of a binding this controller made.
            updated = copy.deepcopy(volume)
            if updated.spec is not None:
                updated.spec.claim_ref = None
            updated.metadata.annotations = {
                k: v
                for k, v in (volume.metadata.annotations or {}).items()
                if k != ANN_BOUND_BY_CONTROLLER
            } or None
            await self._set_volume_phase(await self.ctx.client.update(updated), "Available")

    async def _release(self, volume: PersistentVolume) -> None:
        if _phase(volume) not in ("Released", "Failed"):
            volume = await self._set_volume_phase(volume, "Released")
        policy = volume.spec.persistent_volume_reclaim_policy if volume.spec else None
        if policy == "Delete" and volume.metadata.deletion_timestamp is None:
            try:
                await self.ctx.client.delete(PersistentVolume, volume.metadata.name or "")
            except ApiError as error:
                if not error.not_found:
                    raise


def new(ctx: ControllerContext) -> PersistentVolumeController:
    return PersistentVolumeController(ctx)
