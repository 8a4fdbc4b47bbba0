"""What the volume plugins (VolumeBinding, VolumeRestrictions, NodeVolumeLimits) share
about a pod's claims: which claim stands behind a pod volume, a claim's or volume's
StorageClass, whether the pod owns a claim, and the queueing hint for a claim of the pod's
that appeared or changed.  Plugins stay independent of one another; what two of them need
lives here.
"""

from __future__ import annotations

from typing import Any

from controlplane.scheduler.framework.interface import QueueingHint
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import (
    PersistentVolumeClaim,
    Volume,
)


def claim_name_for(pod: Pod, volume: Volume) -> str | None:
    """The claim behind a pod volume: named, or generated for a generic ephemeral volume."""
    if volume.persistent_volume_claim is not None:
        return volume.persistent_volume_claim.claim_name or ""
    if volume.ephemeral is not None:
        return f"{pod.metadata.name}-{volume.name}"
    return None


def is_controlled_by(claim: PersistentVolumeClaim, pod: Pod) -> bool:
    """Whether the pod is the claim's controlling owner (as for its ephemeral volumes)."""
    return claim.metadata.namespace == pod.metadata.namespace and any(
        ref.controller and ref.uid == pod.metadata.uid
        for ref in claim.metadata.owner_references or ()
    )


def after_own_claim_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """Queue the pod when one of its own claims appeared or changed (the volume plugins'
    shared hint)."""
    claim: PersistentVolumeClaim = new
    if claim.metadata.namespace != pod.metadata.namespace:
        return QueueingHint.SKIP
    volumes = (pod.spec.volumes if pod.spec else None) or ()
    wanted = {claim_name_for(pod, volume) for volume in volumes}
    return QueueingHint.QUEUE if claim.metadata.name in wanted else QueueingHint.SKIP
