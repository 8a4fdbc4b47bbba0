"""VolumeRestrictions: volumes that only one pod (or one node) may use at a time.

Two kinds of exclusivity are enforced:

* Inline disks a node attaches read-write for one pod: the same GCE persistent disk, AWS EBS
  volume, Ceph RBD image or iSCSI target used by a pod already on the node conflicts, unless
  every user mounts it read-only (EBS: always).  Reason: "node(s) had no available disk".
* PersistentVolumeClaims with the ReadWriteOncePod access mode: if any scheduled pod anywhere
  uses such a claim, the pod cannot go anywhere until that pod is gone.  PreFilter counts those
  users once per cycle from the snapshot's per-node claim reference counts; preemption's
  what-if add/remove adjusts the count, since evicting the user is exactly what would help.

A claim the pod names that does not exist makes the pod unresolvable until it is created.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from controlplane.scheduler import names
from controlplane.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EventResource,
    Handle,
    PreFilterExtensions,
    PreFilterResult,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins.volumeclaims import after_own_claim_change
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import PersistentVolumeClaim, Volume

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)
READ_WRITE_ONCE_POD = "ReadWriteOncePod"

_DISK_CONFLICT = Status.unschedulable(ERR_REASON_DISK_CONFLICT)
_CLAIM_IN_USE = Status.unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)

_PRE_FILTER_KEY = "PreFilter" + names.VOLUME_RESTRICTIONS


def _volumes(pod: Pod) -> list[Volume]:
    return list((pod.spec.volumes if pod.spec else None) or ())


def _claim_names(pod: Pod) -> set[str]:
    return {
        volume.persistent_volume_claim.claim_name
        for volume in _volumes(pod)
        if volume.persistent_volume_claim is not None and volume.persistent_volume_claim.claim_name
    }


def needs_restrictions_check(volume: Volume) -> bool:
    """Whether the volume is of a kind that may conflict with another pod's on the node."""
    return (
        volume.gce_persistent_disk is not None
        or volume.aws_elastic_block_store is not None
        or volume.rbd is not None
        or volume.iscsi is not None
    )


def is_volume_conflict(volume: Volume, pod: Pod) -> bool:
    """Whether ``volume`` is a disk ``pod`` already uses in a way that excludes sharing."""
    for existing in _volumes(pod):
        disk, other_disk = volume.gce_persistent_disk, existing.gce_persistent_disk
        if (
            disk is not None
            and other_disk is not None
            and disk.pd_name == other_disk.pd_name
            and not (disk.read_only and other_disk.read_only)
        ):
            return True
        ebs, other_ebs = volume.aws_elastic_block_store, existing.aws_elastic_block_store
        if ebs is not None and other_ebs is not None and ebs.volume_id == other_ebs.volume_id:
            return True
        iscsi, other_iscsi = volume.iscsi, existing.iscsi
        if (
            iscsi is not None
            and other_iscsi is not None
            and iscsi.iqn == other_iscsi.iqn
            and not (iscsi.read_only and other_iscsi.read_only)
        ):
            return True
        rbd, other_rbd = volume.rbd, existing.rbd
        if (
            rbd is not None
            and other_rbd is not None
            and set(rbd.monitors or ()) & set(other_rbd.monitors or ())
            and rbd.pool == other_rbd.pool
            and rbd.image == other_rbd.image
            and not (rbd.read_only and other_rbd.read_only)
        ):
            return True
    return False


def satisfies_volume_conflicts(pod: Pod, pods: Iterable[Pod]) -> bool:
    """Whether none of ``pod``'s exclusive disks is in use by ``pods``."""
    return _satisfies(_checked_volumes(pod), pods)


def _checked_volumes(pod: Pod) -> list[Volume]:
    return [volume for volume in _volumes(pod) if needs_restrictions_check(volume)]


def _satisfies(checked: list[Volume], pods: Iterable[Pod]) -> bool:
    return not any(is_volume_conflict(volume, other) for volume in checked for other in pods)


@dataclass(slots=True)
class _PreFilterState:
    read_write_once_pod_claims: frozenset[str]
    """Names of the pod's claims with the ReadWriteOncePod access mode."""
    conflicting_references: int
    """How many scheduled pods use one of those claims."""

    def update_with_pod(self, pod: PodInfo, sign: int) -> None:
        shared = _claim_names(pod.pod) & self.read_write_once_pod_claims
        self.conflicting_references += sign * len(shared)

    def clone(self) -> _PreFilterState:
        return _PreFilterState(self.read_write_once_pod_claims, self.conflicting_references)


class VolumeRestrictions:
    NAME: ClassVar[str] = names.VOLUME_RESTRICTIONS

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        needs_check = any(needs_restrictions_check(volume) for volume in _volumes(pod.pod))
        namespace = pod.pod.metadata.namespace or ""
        exclusive: set[str] = set()
        for volume in _volumes(pod.pod):
            source = volume.persistent_volume_claim
            if source is None:
                continue
            claims = self._handle.lister(PersistentVolumeClaim)
            claim_name = source.claim_name or ""
            claim = claims.get(f"{namespace}/{claim_name}")
            if claim is None:
                return None, Status.unresolvable(f'persistentvolumeclaim "{claim_name}" not found')
            if READ_WRITE_ONCE_POD in ((claim.spec.access_modes if claim.spec else None) or ()):
                exclusive.add(claim_name)
        conflicts = 0
        if exclusive:
            in_use = {key for node in self._handle.snapshot.list() for key in node.pvc_ref_counts}
            conflicts = sum(1 for name in exclusive if f"{namespace}/{name}" in in_use)
        if not needs_check and conflicts == 0:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, _PreFilterState(frozenset(exclusive), conflicts))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        return self._update(state, to_add, 1)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        return self._update(state, to_remove, -1)

    def _update(self, state: CycleState, other: PodInfo, sign: int) -> Status:
        try:
            state.read(_PRE_FILTER_KEY, _PreFilterState).update_with_pod(other, sign)
        except (KeyError, TypeError) as error:
            return Status.failed(f"cannot read {_PRE_FILTER_KEY!r} from cycleState: {error}")
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.filter_nodes(state, pod, (node,))[0]

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]:
        """A disk conflict on the node first; then the ReadWriteOncePod verdict, which is the
        same for every node."""
        try:
            pre_filter = state.read(_PRE_FILTER_KEY, _PreFilterState)
        except (KeyError, TypeError) as error:
            otherwise = Status.failed(f"cannot read {_PRE_FILTER_KEY!r} from cycleState: {error}")
        else:
            otherwise = _CLAIM_IN_USE if pre_filter.conflicting_references > 0 else SUCCESS
        checked = _checked_volumes(pod.pod)
        if not checked:
            return [otherwise] * len(nodes)
        return [
            otherwise if _satisfies(checked, (info.pod for info in node.pods)) else _DISK_CONFLICT
            for node in nodes
        ]

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.DELETE), _after_pod_deleted
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
            ClusterEventWithHint(
                ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
                after_own_claim_change,
            ),
        ]


def _after_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """The deleted pod held a disk or a claim the pod wants."""
    deleted: Pod = old
    if deleted.metadata.namespace != pod.metadata.namespace:
        return QueueingHint.SKIP
    if not satisfies_volume_conflicts(pod, [deleted]) or _claim_names(pod) & _claim_names(deleted):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: Mapping[str, Any] | None, handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions(handle)
