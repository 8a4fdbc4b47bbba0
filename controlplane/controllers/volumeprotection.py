"""The pvc-protection and pv-protection controllers: storage in use is not deleted under its
users.

Both put a finalizer on every object of their kind that is not being deleted
(``kubernetes.io/pvc-protection`` on claims, ``kubernetes.io/pv-protection`` on volumes) and
take it off a deleted object only once nothing uses it any more, so the API server keeps the
object until then:

* a claim is in use while a pod in its namespace that is scheduled (the kubelet only starts
  scheduled pods, and never one whose claim is being deleted), not terminal and not already
  shut down mounts it, directly or as the pod's generic ephemeral volume
  (``<pod>-<volume>``);
* a volume is in use while its phase is ``Bound``.

Keys are those of the protected objects.  Pod events enqueue the claims the pod mounts, so a
claim waiting for its last pod is finished when that pod ends or goes.  Upstream double-checks
"unused" with a live pod list; here the shared pod cache is the only source, which is as
current as the informers that every controller trusts.  The two controllers share this module
because they are one mechanism applied to two kinds.
"""

from __future__ import annotations

import copy
from typing import Any

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from controlplane.controllers.volumeutil import claim_names
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import PersistentVolume, PersistentVolumeClaim
from kube.api.meta_v1 import Resource

PVC_NAME = "pvc-protection"
PV_NAME = "pv-protection"
PVC_FINALIZER = "kubernetes.io/pvc-protection"
PV_FINALIZER = "kubernetes.io/pv-protection"
TERMINAL_PHASES = ("Succeeded", "Failed")


def needs_finalizer(obj: Resource, finalizer: str) -> bool:
    """Whether ``obj`` lives and lacks ``finalizer`` (upstream ``NeedToAddFinalizer``)."""
    return obj.metadata.deletion_timestamp is None and finalizer not in (
        obj.metadata.finalizers or ()
    )


def is_deletion_candidate(obj: Resource, finalizer: str) -> bool:
    """Whether ``obj`` is being deleted and still held by ``finalizer``."""
    return obj.metadata.deletion_timestamp is not None and finalizer in (
        obj.metadata.finalizers or ()
    )


def pod_uses_claim(pod: Pod, claim: str) -> bool:
    """Whether ``pod`` keeps claim ``claim`` (of its namespace) in use."""
    if pod.spec is None or not pod.spec.node_name:
        return False
    if pod.status is not None and pod.status.phase in TERMINAL_PHASES:
        return False
    # Deleted with no grace left (done by the kubelet, or forced): only waiting to be removed.
    meta = pod.metadata
    if meta.deletion_timestamp is not None and meta.deletion_grace_period_seconds == 0:
        return False
    return claim in claim_names(pod)


class _ProtectionController(Controller):
    """Adds ``FINALIZER`` to live objects and removes it from unused deleted ones."""

    FINALIZER: str

    def _enqueue_if_relevant(self, obj: Any) -> None:
        obj = unwrap(obj)
        if needs_finalizer(obj, self.FINALIZER) or is_deletion_candidate(obj, self.FINALIZER):
            self.enqueue(obj)

    def _updated(self, old: Any, new: Any) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._enqueue_if_relevant(new)

    def _in_use(self, obj: Any) -> bool:
        raise NotImplementedError

    async def _protect(self, obj: Any) -> None:
        if needs_finalizer(obj, self.FINALIZER):
            updated = copy.deepcopy(obj)
            updated.metadata.finalizers = [*(obj.metadata.finalizers or ()), self.FINALIZER]
            await self.ctx.client.update(updated)
        elif is_deletion_candidate(obj, self.FINALIZER) and not self._in_use(obj):
            updated = copy.deepcopy(obj)
            updated.metadata.finalizers = [
                f for f in obj.metadata.finalizers or () if f != self.FINALIZER
            ] or None
            await self.ctx.client.update(updated)


class PVCProtectionController(_ProtectionController):
    NAME = PVC_NAME
    FINALIZER = PVC_FINALIZER

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.claims = ctx.informers.informer_for(PersistentVolumeClaim)
        self.pods = ctx.informers.informer_for(Pod)
        self.claims.add_event_handler(self._enqueue_if_relevant, self._updated)
        self.pods.add_event_handler(self._pod_changed, self._pod_updated, self._pod_changed)

    def _pod_changed(self, obj: Any) -> None:
        pod = unwrap(obj)
        for name in claim_names(pod):
            self.queue.add(f"{pod.metadata.namespace}/{name}")

    def _pod_updated(self, old: Any, new: Any) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._pod_changed(new)

    def _in_use(self, obj: Any) -> bool:
        name = obj.metadata.name or ""
        return any(
            pod_uses_claim(pod, name) for pod in self.pods.lister.list(obj.metadata.namespace)
        )

    async def sync_key(self, key: str) -> None:
        claim = self.claims.lister.get(key)
        if claim is not None:
            await self._protect(claim)


class PVProtectionController(_ProtectionController):
    NAME = PV_NAME
    FINALIZER = PV_FINALIZER

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.volumes = ctx.informers.informer_for(PersistentVolume)
        self.volumes.add_event_handler(self._enqueue_if_relevant, self._updated)

    def _in_use(self, obj: Any) -> bool:
        return obj.status is not None and obj.status.phase == "Bound"

    async def sync_key(self, key: str) -> None:
        volume = self.volumes.lister.get(key)
        if volume is not None:
            await self._protect(volume)


def new_pvc_protection(ctx: ControllerContext) -> PVCProtectionController:
    return PVCProtectionController(ctx)


def new_pv_protection(ctx: ControllerContext) -> PVProtectionController:
    return PVProtectionController(ctx)
