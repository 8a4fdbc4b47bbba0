"""NodeVolumeLimits: a node can attach only so many volumes of each CSI driver.

A node advertises its limit per driver as the allocatable resource
``attachable-volumes-csi-<driver>`` (upstream reads it from the CSINode object first and the
node's allocatable second; our object model has no CSINode, so allocatable is the only
source).  Filter counts the distinct volumes, keyed ``<driver>/<volume handle>``, that the
pods on the node already use and the ones the pod would add, and rejects the node with
"node(s) exceed max volume count" when a driver would go over its limit.  A volume several
pods share counts once.

Volumes are found through the pod's PersistentVolumeClaims (and the claims of generic
ephemeral volumes, named ``<pod>-<volume>``): a bound claim's PersistentVolume names its CSI
driver and handle; an unbound one counts against its StorageClass's provisioner under a handle
made up for the claim, because the volume it will get does not exist yet.  Upstream also
counts in-tree volumes migrated to CSI (through the CSI translation library); we do not model
CSI migration, so only volumes with a ``csi`` source count.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
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
from controlplane.scheduler.plugins.volumeclaims import (
    after_own_claim_change,
    claim_name_for,
    is_controlled_by,
)
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import PersistentVolume, PersistentVolumeClaim, claim_class
from kube.api.kinds.storage_v1 import StorageClass

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"
CSI_ATTACH_LIMIT_PREFIX = "attachable-volumes-csi-"
RESOURCE_NAME_LENGTH_LIMIT = 63

_EXCEEDED = Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)


def csi_attach_limit_key(driver: str) -> str:
    """The allocatable resource holding ``driver``'s limit; drivers whose key would be too
    long are shortened to 23 characters plus 16 hex digits of their SHA-1."""
    if len(CSI_ATTACH_LIMIT_PREFIX) + len(driver) < RESOURCE_NAME_LENGTH_LIMIT:
        return CSI_ATTACH_LIMIT_PREFIX + driver
    digest = hashlib.sha1(driver.encode()).hexdigest()[:16]
    return CSI_ATTACH_LIMIT_PREFIX + driver[:23] + digest


class _ClaimNotFoundError(LookupError):
    pass


class NodeVolumeLimits:
    NAME: ClassVar[str] = names.NODE_VOLUME_LIMITS

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._random_prefix = uuid.uuid4().hex

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        volumes = (pod.pod.spec.volumes if pod.pod.spec else None) or ()
        if any(claim_name_for(pod.pod, volume) is not None for volume in volumes):
            return None, SUCCESS
        return None, SKIP

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.filter_nodes(state, pod, (node,))[0]

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]:
        """The pod's own volumes are looked up once; a node is only counted if it has
        limits."""
        try:
            new_volumes = self._attachable_volumes(pod.pod, new_pod=True)
        except _ClaimNotFoundError as error:
            return [Status.unresolvable(str(error))] * len(nodes)
        except ValueError as error:
            return [Status.failed(error)] * len(nodes)
        if not new_volumes:
            return [SUCCESS] * len(nodes)
        return [self._fits(new_volumes, node) for node in nodes]

    def _fits(self, new_volumes: Mapping[str, str], node: NodeInfo) -> Status:
        limits = {
            name: amount
            for name, amount in node.allocatable.scalar.items()
            if name.startswith(ATTACHABLE_VOLUMES_PREFIX)
        }
        if not limits:
            return SUCCESS
        attached: dict[str, str] = {}
        try:
            for existing in node.pods:
                attached.update(self._attachable_volumes(existing.pod, new_pod=False))
        except ValueError as error:
            return Status.failed(error)
        added = Counter(limit for volume, limit in new_volumes.items() if volume not in attached)
        attached_count = Counter(attached.values())
        for key, count in added.items():
            limit = limits.get(key)
            if limit is not None and attached_count[key] + count > limit:
                return _EXCEEDED
        return SUCCESS

    def _attachable_volumes(self, pod: Pod, new_pod: bool) -> dict[str, str]:
        """``<driver>/<handle>`` → limit key of each CSI volume ``pod`` uses.

        A missing claim stops a new pod (_ClaimNotFoundError) but is not counted for a running
        one; an ephemeral volume's claim owned by another pod is an error (ValueError).
        """
        result: dict[str, str] = {}
        namespace = pod.metadata.namespace or ""
        claims = self._handle.lister(PersistentVolumeClaim)
        for volume in (pod.spec.volumes if pod.spec else None) or ():
            claim_name = claim_name_for(pod, volume)
            if claim_name is None:
                continue
            if not claim_name:
                raise ValueError("PersistentVolumeClaim had no name")
            claim = claims.get(f"{namespace}/{claim_name}")
            if claim is None:
                if new_pod:
                    raise _ClaimNotFoundError(
                        f"looking up PVC {namespace}/{claim_name}: "
                        f'persistentvolumeclaim "{claim_name}" not found'
                    )
                continue
            if volume.ephemeral is not None and not is_controlled_by(claim, pod):
                raise ValueError(
                    f"PVC {namespace}/{claim_name} was not created for pod "
                    f"{namespace}/{pod.metadata.name} (pod is not owner)"
                )
            driver, handle = self._csi_driver_info(claim)
            if driver and handle:
                result[f"{driver}/{handle}"] = csi_attach_limit_key(driver)
        return result

    def _csi_driver_info(self, claim: PersistentVolumeClaim) -> tuple[str, str]:
        """The CSI driver and volume handle of the claim's volume ("" if none counts)."""
        volume_name = claim.spec.volume_name if claim.spec else None
        if volume_name:
            volume = self._handle.lister(PersistentVolume).get(volume_name)
            if volume is not None:
                csi = volume.spec.csi if volume.spec else None
                if csi is None:
                    return "", ""
                return csi.driver or "", csi.volume_handle or ""
        class_name = claim_class(claim)
        if not class_name:
            return "", ""
        storage_class = self._handle.lister(StorageClass).get(class_name)
        if storage_class is None:
            return "", ""
        handle = f"{self._random_prefix}-{claim.metadata.namespace}/{claim.metadata.name}"
        return storage_class.provisioner or "", handle

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE
                )
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.DELETE), _after_pod_deleted
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
                after_own_claim_change,
            ),
        ]


def _after_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A scheduled pod with claim-backed volumes went away, freeing attachments."""
    deleted: Pod = old
    spec = deleted.spec
    if spec is None or not spec.node_name:
        return QueueingHint.SKIP
    if any(claim_name_for(deleted, volume) is not None for volume in spec.volumes or ()):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: Mapping[str, Any] | None, handle: Handle) -> NodeVolumeLimits:
    return NodeVolumeLimits(handle)
