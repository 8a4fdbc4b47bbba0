"""VolumeBinding: place a pod where its PersistentVolumeClaims can be satisfied, and bind them.

What it does, per extension point:

* PreFilter finds the pod's claims (named ones and the ``<pod>-<volume>`` claims of generic
  ephemeral volumes) in the claim cache.  A missing claim, one being deleted, or an
  ephemeral claim the pod does not own makes the pod unresolvable until that changes; a pod
  without claims skips the plugin.  A claim is *bound* when it names its volume
  (``spec.volumeName``).  An unbound claim whose StorageClass binds ``Immediate`` (or that has
  no class) is the PV controller's job, so the pod waits: "pod has unbound immediate
  PersistentVolumeClaims".  Unbound claims of a ``WaitForFirstConsumer`` class are bound here.
* Filter, per node: a bound claim's volume must exist ("node(s) unavailable due to one or more
  pvc(s) bound to non-existent pv(s)") and its node affinity must admit the node ("node(s)
  had volume node affinity conflict").  Each delayed claim, smallest request first, takes the
  smallest available volume of its class that is big enough, has the claim's access modes and
  volume mode, matches its selector and admits the node (a volume pre-bound to the claim wins
  outright); failing that, the class must be able to provision one there (a provisioner other
  than ``kubernetes.io/no-provisioner``, allowed topologies matching the node's labels), else
  "node(s) didn't find available persistent volumes to bind".  A claim already annotated
  ``volume.kubernetes.io/selected-node`` can only be provisioned on that node.  These
  rejections are UNSCHEDULABLE_AND_UNRESOLVABLE: evicting pods frees no volume.  The choice
  for each node is kept in the cycle state.
* Reserve takes the chosen node's choice and marks its volumes as assumed, so pods scheduled
  before this one's binding lands do not pick them too; Unreserve forgets it.
* PreBind writes the choice through the API: a merge patch of the claim's ``spec.volumeName``
  for a static binding, of the ``volume.kubernetes.io/selected-node`` annotation for dynamic
  provisioning.

What upstream does that this does not:

* Upstream counts a claim as bound only once the PV controller has annotated it
  ``pv.kubernetes.io/bind-completed``; we have no such controller yet, so ``volumeName`` alone
  counts.
* Upstream PreBind binds from the volume's side (it updates the PersistentVolume's
  ``claimRef``) and then waits, up to ``bindTimeoutSeconds``, for the PV controller to finish
  binding and provisioning before the pod is bound.  We patch the claim and return at once;
  the kubelet waits for the volume instead.
* No in-tree to CSI translation, no storage capacity tracking (CSIStorageCapacity: the "did
  not have enough free storage" rejection and the capacity Score), no PreFilterResult
  narrowing nodes by the bound volumes' hostname affinity, no volume attributes classes.
* Assumed provisioning decisions are not remembered between cycles (only assumed volumes
  are), so two pods sharing one unprovisioned claim could select different nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import (
    PersistentVolume,
    PersistentVolumeClaim,
    claim_class,
    volume_class,
)
from kube.api.kinds.storage_v1 import StorageClass
from kube.api.labels import selector_of
from kube.api.nodeaffinity import node_matches_selector_terms
from kube.api.quantity import Quantity
from kube.client.errors import ApiError, ClientError

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_PV_NOT_EXIST = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)
ERR_REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
FILESYSTEM = "Filesystem"
AVAILABLE = "Available"

_STATE_KEY = names.VOLUME_BINDING


def _key(claim: PersistentVolumeClaim) -> str:
    return f"{claim.metadata.namespace}/{claim.metadata.name}"


def _storage(resources: Mapping[str, Any] | None) -> int:
    value = (resources or {}).get("storage")
    return Quantity.parse(value).value() if value is not None else 0


def _claim_size(claim: PersistentVolumeClaim) -> int:
    return _storage(claim.spec.requests() if claim.spec else None)


def _volume_size(volume: PersistentVolume) -> int:
    return _storage(volume.spec.capacity if volume.spec else None)


def volume_admits_node(volume: PersistentVolume, node: Node) -> bool:
    """Whether the volume's required node affinity (if any) matches the node."""
    affinity = volume.spec.node_affinity if volume.spec else None
    if affinity is None or affinity.required is None:
        return True
    return node_matches_selector_terms(node, affinity.required.node_selector_terms)


def is_volume_bound_to_claim(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """Whether the volume's claimRef names the claim (and its uid, if it names one)."""
    ref = volume.spec.claim_ref if volume.spec else None
    return (
        ref is not None
        and ref.name == claim.metadata.name
        and ref.namespace == claim.metadata.namespace
        and (not ref.uid or ref.uid == claim.metadata.uid)
    )


def _matches_claim(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """The claim-independent checks a free volume must pass to be offered to the claim."""
    spec, claim_spec = volume.spec, claim.spec
    if spec is None or claim_spec is None:
        return False
    if (spec.volume_mode or FILESYSTEM) != (claim_spec.volume_mode or FILESYSTEM):
        return False
    if volume.metadata.deletion_timestamp is not None:
        return False
    return _volume_size(volume) >= _claim_size(claim)


def find_matching_volume(
    claim: PersistentVolumeClaim,
    volumes: list[PersistentVolume],
    node: Node,
    excluded: set[str],
) -> PersistentVolume | None:
    """The volume the claim would bind to on ``node``: one pre-bound to it if that admits the
    node (if it does not, none), else the smallest available one that fits."""
    selector = selector_of(claim.spec.selector) if claim.spec and claim.spec.selector else None
    wanted_modes = set((claim.spec.access_modes if claim.spec else None) or ())
    wanted_class = claim_class(claim)
    best: PersistentVolume | None = None
    for volume in volumes:
        name = volume.metadata.name or ""
        spec = volume.spec
        if name in excluded or spec is None:
            continue
        if spec.claim_ref is not None and not is_volume_bound_to_claim(volume, claim):
            continue
        if not _matches_claim(volume, claim):
            continue
        admits = volume_admits_node(volume, node)
        if is_volume_bound_to_claim(volume, claim):
            return volume if admits else None
        if (volume.status.phase if volume.status else None) != AVAILABLE:
            continue
        if selector is not None and not selector.matches(volume.metadata.labels or {}):
            continue
        if volume_class(volume) != wanted_class or not admits:
            continue
        if not wanted_modes <= set(spec.access_modes or ()):
            continue
        if best is None or _volume_size(best) > _volume_size(volume):
            best = volume
    return best


def _topology_admits(storage_class: StorageClass, node: Node) -> bool:
    """Whether the class's allowed topologies (none: anywhere) include the node's labels."""
    terms = storage_class.allowed_topologies
    if not terms:
        return True
    labels = node.metadata.labels or {}
    return any(
        all(
            labels.get(requirement.key or "") in (requirement.values or ())
            for requirement in term.match_label_expressions or ()
        )
        for term in terms
    )


@dataclass(slots=True)
class PodVolumes:
    """What binding the pod's delayed claims on one node takes."""

    static_bindings: list[tuple[PersistentVolumeClaim, PersistentVolume]] = field(
        default_factory=list
    )
    dynamic_provisions: list[PersistentVolumeClaim] = field(default_factory=list)


@dataclass(slots=True)
class _PodVolumeClaims:
    bound: list[PersistentVolumeClaim]
    delayed: list[PersistentVolumeClaim]
    """Unbound claims of WaitForFirstConsumer classes, smallest request first."""
    volumes_by_class: dict[str, list[PersistentVolume]]
    classes: dict[str, StorageClass]


@dataclass(slots=True)
class _State:
    claims: _PodVolumeClaims | None
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = False

    def clone(self) -> _State:
        """Shared, as upstream: only Filter writes, one entry per node."""
        return self


class VolumeBinding:
    NAME: ClassVar[str] = names.VOLUME_BINDING

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._assumed: dict[str, str] = {}
        """Volume name → key of the claim a reserved pod will bind it to."""

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        claims, error = self._pod_claims(pod.pod)
        if error:
            return None, Status.unresolvable(error)
        if not claims:
            state.write(_STATE_KEY, _State(None))
            return None, SKIP
        classes = self._handle.lister(StorageClass)
        bound: list[PersistentVolumeClaim] = []
        delayed: list[PersistentVolumeClaim] = []
        used_classes: dict[str, StorageClass] = {}
        for claim in claims:
            if claim.spec and claim.spec.volume_name:
                bound.append(claim)
                continue
            class_name = claim_class(claim)
            storage_class = classes.get(class_name) if class_name else None
            if storage_class is not None and storage_class.volume_binding_mode is None:
                return None, Status.failed(
                    f'VolumeBindingMode not set for StorageClass "{class_name}"'
                )
            if (
                storage_class is None
                or storage_class.volume_binding_mode != WAIT_FOR_FIRST_CONSUMER
            ):
                return None, Status.unresolvable(ERR_REASON_UNBOUND_IMMEDIATE)
            delayed.append(claim)
            used_classes[class_name] = storage_class
        self._forget_completed_assumptions()
        volumes_by_class: dict[str, list[PersistentVolume]] = {name: [] for name in used_classes}
        for volume in self._handle.lister(PersistentVolume).list():
            volumes_by_class.get(volume_class(volume), []).append(volume)
        delayed.sort(key=_claim_size)
        state.write(
            _STATE_KEY,
            _State(_PodVolumeClaims(bound, delayed, volumes_by_class, used_classes)),
        )
        return None, SUCCESS

    def _pod_claims(self, pod: Pod) -> tuple[list[PersistentVolumeClaim], str]:
        """The pod's claims, or the reason one of them cannot be used."""
        namespace = pod.metadata.namespace or ""
        lister = self._handle.lister(PersistentVolumeClaim)
        claims: list[PersistentVolumeClaim] = []
        for volume in (pod.spec.volumes if pod.spec else None) or ():
            name = claim_name_for(pod, volume)
            if name is None:
                continue
            claim = lister.get(f"{namespace}/{name}")
            if claim is None:
                return [], f'persistentvolumeclaim "{name}" not found'
            if claim.metadata.deletion_timestamp is not None:
                return [], f'persistentvolumeclaim "{name}" is being deleted'
            if volume.ephemeral is not None and not is_controlled_by(claim, pod):
                return [], (
                    f"PVC {namespace}/{name} was not created for pod "
                    f"{namespace}/{pod.metadata.name} (pod is not owner)"
                )
            claims.append(claim)
        return claims, ""

    def _forget_completed_assumptions(self) -> None:
        """Drop assumed volumes the caches now show bound (or whose claim is gone)."""
        volumes = self._handle.lister(PersistentVolume)
        claims = self._handle.lister(PersistentVolumeClaim)
        for volume_name, claim_key in list(self._assumed.items()):
            volume = volumes.get(volume_name)
            claim = claims.get(claim_key)
            if (
                volume is None
                or (volume.spec is not None and volume.spec.claim_ref is not None)
                or claim is None
                or (claim.spec is not None and claim.spec.volume_name)
            ):
                del self._assumed[volume_name]

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return self.filter_nodes(state, pod, (node,))[0]

    def filter_nodes(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> list[Status]:
        """Whether each node can get the pod's claims their volumes; records the choice for
        each node that can."""
        try:
            data = state.read(_STATE_KEY, _State)
        except (KeyError, TypeError) as error:
            failed = Status.failed(f"cannot read {_STATE_KEY!r} from cycleState: {error}")
            return [failed] * len(nodes)
        claims = data.claims
        if claims is None:
            return [SUCCESS] * len(nodes)
        statuses: list[Status] = []
        for node_info in nodes:
            node = node_info.node
            if node is None:
                statuses.append(SUCCESS)
                continue
            reasons, volumes = self._find_pod_volumes(claims, node)
            if reasons:
                statuses.append(Status.unresolvable(*reasons))
            else:
                data.by_node[node_info.name] = volumes
                statuses.append(SUCCESS)
        return statuses

    def _find_pod_volumes(
        self, claims: _PodVolumeClaims, node: Node
    ) -> tuple[list[str], PodVolumes]:
        reasons: list[str] = []
        volumes = PodVolumes()
        lister = self._handle.lister(PersistentVolume)
        for claim in claims.bound:
            volume = lister.get((claim.spec.volume_name if claim.spec else None) or "")
            if volume is None:
                reasons.append(ERR_REASON_PV_NOT_EXIST)
                break
            if not volume_admits_node(volume, node):
                reasons.append(ERR_REASON_NODE_CONFLICT)
                break
        if not self._bind_delayed(claims, node, volumes):
            reasons.append(ERR_REASON_BIND_CONFLICT)
        return reasons, volumes

    def _bind_delayed(self, claims: _PodVolumeClaims, node: Node, volumes: PodVolumes) -> bool:
        """Fill ``volumes`` with how each delayed claim gets a volume on ``node``; False if
        one cannot."""
        to_provision: list[PersistentVolumeClaim] = []
        chosen: set[str] = set()
        for claim in claims.delayed:
            selected = (claim.metadata.annotations or {}).get(SELECTED_NODE_ANNOTATION)
            if selected is not None:
                if selected != node.metadata.name:
                    return False
                to_provision.append(claim)
                continue
            excluded = chosen | {
                name for name, owner in self._assumed.items() if owner != _key(claim)
            }
            volume = find_matching_volume(
                claim, claims.volumes_by_class.get(claim_class(claim), []), node, excluded
            )
            if volume is None:
                to_provision.append(claim)
                continue
            chosen.add(volume.metadata.name or "")
            volumes.static_bindings.append((claim, volume))
        for claim in to_provision:
            storage_class = claims.classes.get(claim_class(claim))
            provisioner = storage_class.provisioner if storage_class else None
            if (
                storage_class is None
                or not provisioner
                or provisioner == NOT_SUPPORTED_PROVISIONER
                or not _topology_admits(storage_class, node)
            ):
                return False
            volumes.dynamic_provisions.append(claim)
        return True

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        try:
            data = state.read(_STATE_KEY, _State)
        except (KeyError, TypeError) as error:
            return Status.failed(f"cannot read {_STATE_KEY!r} from cycleState: {error}")
        volumes = data.by_node.get(node_name)
        if volumes is None:
            data.all_bound = True
            return SUCCESS
        for claim, volume in volumes.static_bindings:
            self._assumed[volume.metadata.name or ""] = _key(claim)
        data.all_bound = not volumes.static_bindings and not volumes.dynamic_provisions
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        data = state.get(_STATE_KEY)
        volumes = data.by_node.get(node_name) if isinstance(data, _State) else None
        for claim, volume in volumes.static_bindings if volumes else ():
            if self._assumed.get(volume.metadata.name or "") == _key(claim):
                del self._assumed[volume.metadata.name or ""]

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        try:
            data = state.read(_STATE_KEY, _State)
        except (KeyError, TypeError) as error:
            return Status.failed(f"cannot read {_STATE_KEY!r} from cycleState: {error}")
        if data.all_bound:
            return SUCCESS
        volumes = data.by_node.get(node_name)
        if volumes is None:
            return Status.failed(f'no pod volumes found for node "{node_name}"')
        patches: list[tuple[PersistentVolumeClaim, dict[str, Any]]] = [
            (claim, {"spec": {"volumeName": volume.metadata.name}})
            for claim, volume in volumes.static_bindings
        ] + [
            (claim, {"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: node_name}}})
            for claim in volumes.dynamic_provisions
        ]
        try:
            for claim, patch in patches:
                await self._handle.client.patch(
                    PersistentVolumeClaim,
                    claim.metadata.name or "",
                    claim.metadata.namespace,
                    patch,
                    patch_type="merge",
                )
        except (ApiError, ClientError) as error:
            return Status.failed(error)
        return SUCCESS

    def events_to_register(self) -> list[ClusterEventWithHint]:
        add_or_update = ActionType.ADD | ActionType.UPDATE
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.STORAGE_CLASS, add_or_update), _after_class_change
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.PERSISTENT_VOLUME_CLAIM, add_or_update),
                after_own_claim_change,
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.PERSISTENT_VOLUME, add_or_update)),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)
            ),
        ]


def _after_class_change(pod: Pod, old: Any, new: Any) -> QueueingHint:
    """A class appeared, or its allowed topologies changed."""
    if old is None:
        return QueueingHint.QUEUE
    before: StorageClass = old
    after: StorageClass = new
    if before.allowed_topologies != after.allowed_topologies:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: Mapping[str, Any] | None, handle: Handle) -> VolumeBinding:
    """``args`` (VolumeBindingArgs: ``bindTimeoutSeconds``, ``shape``) are accepted; the
    features they tune (waiting for binding, capacity scoring) are not implemented."""
    timeout = (args or {}).get("bindTimeoutSeconds", 600)
    if not isinstance(timeout, int) or timeout < 0:
        raise ValueError(
            f"bindTimeoutSeconds: Invalid value: {timeout!r}: invalid BindTimeoutSeconds, "
            "should not be a negative value"
        )
    return VolumeBinding(handle)
