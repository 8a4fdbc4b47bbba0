from __future__ import annotations

import datetime
from typing import Any, cast

import pytest

from controlplane.scheduler.framework.interface import (
    SUCCESS,
    Code,
    CycleState,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import NodeInfo, PodInfo
from controlplane.scheduler.plugins import volumebinding
from controlplane.scheduler.plugins.volumebinding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_PV_NOT_EXIST,
    ERR_REASON_UNBOUND_IMMEDIATE,
    SELECTED_NODE_ANNOTATION,
)
from kube.api.kinds.core_v1.node import LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import (
    EphemeralVolumeSource,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectReference,
    PersistentVolume,
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    PersistentVolumeClaimTemplate,
    PersistentVolumeClaimVolumeSource,
    PersistentVolumeSpec,
    PersistentVolumeStatus,
    Volume,
    VolumeNodeAffinity,
    VolumeResourceRequirements,
)
from kube.api.kinds.storage_v1 import (
    StorageClass,
    TopologySelectorLabelRequirement,
    TopologySelectorTerm,
)
from kube.api.meta_v1 import LabelSelector, ObjectMeta, OwnerReference, Resource
from kube.api.meta_v1 import Status as ApiStatus
from kube.client.errors import ApiError
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

DELETED = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def storage_class(
    name: str,
    mode: str = "WaitForFirstConsumer",
    provisioner: str = "kubernetes.io/no-provisioner",
    zones: list[str] | None = None,
) -> StorageClass:
    topologies = (
        [
            TopologySelectorTerm(
                match_label_expressions=[
                    TopologySelectorLabelRequirement(key=LABEL_TOPOLOGY_ZONE, values=zones)
                ]
            )
        ]
        if zones
        else None
    )
    return StorageClass(
        metadata=ObjectMeta(name=name),
        provisioner=provisioner,
        volume_binding_mode=mode,
        allowed_topologies=topologies,
    )


def pvc(
    name: str = "data",
    *,
    size: str = "8Gi",
    storage_class: str | None = "local",
    volume_name: str | None = None,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    annotations: dict[str, str] | None = None,
    selector: dict[str, str] | None = None,
    deleted: bool = False,
    owner_uid: str | None = None,
) -> PersistentVolumeClaim:
    owners = (
        [OwnerReference(api_version="v1", kind="Pod", name="p", uid=owner_uid, controller=True)]
        if owner_uid
        else None
    )
    return PersistentVolumeClaim(
        metadata=ObjectMeta(
            name=name,
            namespace="default",
            uid=f"uid-{name}",
            annotations=annotations,
            deletion_timestamp=DELETED if deleted else None,
            owner_references=owners,
        ),
        spec=PersistentVolumeClaimSpec(
            access_modes=list(modes),
            resources=VolumeResourceRequirements(requests={"storage": size}),
            storage_class_name=storage_class,
            volume_name=volume_name,
            selector=LabelSelector(match_labels=selector) if selector else None,
        ),
    )


def pv(
    name: str,
    *,
    size: str = "10Gi",
    storage_class: str = "local",
    node: str | None = None,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    phase: str = "Available",
    claim: str | None = None,
    labels: dict[str, str] | None = None,
) -> PersistentVolume:
    affinity = (
        VolumeNodeAffinity(
            required=NodeSelector(
                node_selector_terms=[
                    NodeSelectorTerm(
                        match_expressions=[
                            NodeSelectorRequirement(
                                key=LABEL_HOSTNAME, operator="In", values=[node]
                            )
                        ]
                    )
                ]
            )
        )
        if node
        else None
    )
    return PersistentVolume(
        metadata=ObjectMeta(name=name, labels=labels),
        spec=PersistentVolumeSpec(
            capacity={"storage": size},
            access_modes=list(modes),
            storage_class_name=storage_class,
            node_affinity=affinity,
            claim_ref=ObjectReference(name=claim, namespace="default") if claim else None,
        ),
        status=PersistentVolumeStatus(phase=phase),
    )


def claim_volume(name: str = "data") -> Volume:
    return Volume(
        name=name, persistent_volume_claim=PersistentVolumeClaimVolumeSource(claim_name=name)
    )


def nodes() -> list[NodeInfo]:
    return [
        make_node_info(make_node(name, labels={LABEL_HOSTNAME: name, LABEL_TOPOLOGY_ZONE: zone}))
        for name, zone in (("n1", "a"), ("n2", "b"))
    ]


LOCAL = storage_class("local")
DYNAMIC = storage_class("fast", provisioner="csi.example.com")


def patches(handle: FakeHandle) -> list[tuple[str, str | None, Any]]:
    """The claims patched (all merge patches of PersistentVolumeClaims), with the patch."""
    writes = handle.client.actions
    assert all(
        (a.verb, a.kind, a.patch_type) == ("patch", "PersistentVolumeClaim", "merge")
        for a in writes
    )
    return [(a.name, a.namespace, a.obj) for a in writes]


def _setup(
    objects: list[Resource], pod: Pod
) -> tuple[volumebinding.VolumeBinding, FakeHandle, CycleState, PodInfo, list[NodeInfo]]:
    handle = FakeHandle(nodes(), objects)
    handle.client.seed(*objects)
    plugin = volumebinding.new(None, cast(Any, handle))
    return plugin, handle, CycleState(), PodInfo.of(pod), handle.nodes


@pytest.mark.parametrize(
    ("objects", "volumes", "want"),
    [
        pytest.param([LOCAL], [], Status(Code.SKIP), id="no-claims-skip"),
        pytest.param(
            [LOCAL],
            [claim_volume()],
            Status.unresolvable('persistentvolumeclaim "data" not found'),
            id="claim-missing",
        ),
        pytest.param(
            [LOCAL, pvc(deleted=True)],
            [claim_volume()],
            Status.unresolvable('persistentvolumeclaim "data" is being deleted'),
            id="claim-being-deleted",
        ),
        pytest.param(
            [storage_class("local", mode="Immediate"), pvc()],
            [claim_volume()],
            Status.unresolvable(ERR_REASON_UNBOUND_IMMEDIATE),
            id="unbound-immediate",
        ),
        pytest.param(
            [pvc(storage_class=None)],
            [claim_volume()],
            Status.unresolvable(ERR_REASON_UNBOUND_IMMEDIATE),
            id="unbound-without-class",
        ),
        pytest.param(
            [pvc()],
            [claim_volume()],
            Status.unresolvable(ERR_REASON_UNBOUND_IMMEDIATE),
            id="unbound-class-missing",
        ),
        pytest.param(
            [LOCAL, pvc("p-scratch")],
            [
                Volume(
                    name="scratch",
                    ephemeral=EphemeralVolumeSource(
                        volume_claim_template=PersistentVolumeClaimTemplate(
                            spec=PersistentVolumeClaimSpec()
                        )
                    ),
                )
            ],
            Status.unresolvable(
                "PVC default/p-scratch was not created for pod default/p (pod is not owner)"
            ),
            id="ephemeral-claim-not-owned",
        ),
        pytest.param([LOCAL, pvc(volume_name="pv1")], [claim_volume()], Status(), id="bound-claim"),
        pytest.param([LOCAL, pvc()], [claim_volume()], Status(), id="delayed-claim"),
    ],
)
def test_pre_filter(objects: list[Resource], volumes: list[Volume], want: Status) -> None:
    plugin, _, state, pod, node_infos = _setup(objects, make_pod(volumes=volumes))
    assert plugin.pre_filter(state, pod, node_infos) == (None, want)


def test_pre_filter_rejects_class_without_binding_mode() -> None:
    unset = StorageClass(metadata=ObjectMeta(name="local"), provisioner="x")
    plugin, _, state, pod, node_infos = _setup([unset, pvc()], make_pod(volumes=[claim_volume()]))
    _, status = plugin.pre_filter(state, pod, node_infos)
    assert status.code is Code.ERROR


def test_ephemeral_claim_owned_by_pod() -> None:
    pod = make_pod(
        volumes=[
            Volume(
                name="scratch",
                ephemeral=EphemeralVolumeSource(
                    volume_claim_template=PersistentVolumeClaimTemplate(
                        spec=PersistentVolumeClaimSpec()
                    )
                ),
            )
        ]
    )
    claim = pvc("p-scratch", storage_class="fast", owner_uid=pod.metadata.uid)
    plugin, _, state, info, node_infos = _setup([DYNAMIC, claim], pod)
    assert plugin.pre_filter(state, info, node_infos) == (None, Status())
    assert [plugin.filter(state, info, n) for n in node_infos] == [Status(), Status()]


OK = Status()
NODE_CONFLICT = Status.unresolvable(ERR_REASON_NODE_CONFLICT)
BIND_CONFLICT = Status.unresolvable(ERR_REASON_BIND_CONFLICT)
NOT_EXIST = Status.unresolvable(ERR_REASON_PV_NOT_EXIST)


@pytest.mark.parametrize(
    ("objects", "want", "static", "dynamic"),
    [
        pytest.param(
            [LOCAL, pvc(volume_name="pv1"), pv("pv1", node="n1", claim="data")],
            [OK, NODE_CONFLICT],
            [],
            [],
            id="bound-volume-affinity",
        ),
        pytest.param(
            [LOCAL, pvc(volume_name="pv1"), pv("pv1", claim="data")],
            [OK, OK],
            [],
            [],
            id="bound-volume-anywhere",
        ),
        pytest.param(
            [LOCAL, pvc(volume_name="gone")],
            [NOT_EXIST, NOT_EXIST],
            [],
            [],
            id="bound-volume-missing",
        ),
        pytest.param(
            [LOCAL, pvc(), pv("pv1", node="n1")],
            [OK, BIND_CONFLICT],
            ["pv1"],
            [],
            id="local-volume-on-one-node",
        ),
        pytest.param(
            [
                LOCAL,
                pvc(),
                pv("big", size="20Gi"),
                pv("fits", size="10Gi"),
                pv("small", size="5Gi"),
            ],
            [OK, OK],
            ["fits"],
            [],
            id="smallest-that-fits",
        ),
        pytest.param(
            [LOCAL, pvc(), pv("small", size="5Gi")],
            [BIND_CONFLICT, BIND_CONFLICT],
            [],
            [],
            id="too-small",
        ),
        pytest.param(
            [LOCAL, pvc(modes=("ReadWriteMany",)), pv("pv1")],
            [BIND_CONFLICT, BIND_CONFLICT],
            [],
            [],
            id="access-modes-missing",
        ),
        pytest.param(
            [LOCAL, pvc(), pv("pv1", storage_class="other")],
            [BIND_CONFLICT, BIND_CONFLICT],
            [],
            [],
            id="other-class",
        ),
        pytest.param(
            [LOCAL, pvc(), pv("pv1", phase="Released")],
            [BIND_CONFLICT, BIND_CONFLICT],
            [],
            [],
            id="not-available",
        ),
        pytest.param(
            [LOCAL, pvc(), pv("pv1", claim="someone-else")],
            [BIND_CONFLICT, BIND_CONFLICT],
            [],
            [],
            id="claimed-by-another",
        ),
        pytest.param(
            [LOCAL, pvc(selector={"tier": "gold"}), pv("pv1", labels={"tier": "silver"})],
            [BIND_CONFLICT, BIND_CONFLICT],
            [],
            [],
            id="selector-mismatch",
        ),
        pytest.param(
            [LOCAL, pvc(selector={"tier": "gold"}), pv("pv1", labels={"tier": "gold"})],
            [OK, OK],
            ["pv1"],
            [],
            id="selector-match",
        ),
        pytest.param(
            [
                LOCAL,
                pvc(),
                pv("free", size="10Gi"),
                pv("prebound", size="50Gi", claim="data", phase="Pending"),
            ],
            [OK, OK],
            ["prebound"],
            [],
            id="pre-bound-wins",
        ),
        pytest.param(
            [LOCAL, pvc(), pv("free"), pv("prebound", node="n2", claim="data")],
            [BIND_CONFLICT, OK],
            [],
            [],
            id="pre-bound-elsewhere-means-no-match",
        ),
        pytest.param(
            [DYNAMIC, pvc(storage_class="fast")],
            [OK, OK],
            [],
            ["data"],
            id="dynamic-provisioning",
        ),
        pytest.param(
            [
                storage_class("fast", provisioner="csi.example.com", zones=["a"]),
                pvc(storage_class="fast"),
            ],
            [OK, BIND_CONFLICT],
            [],
            ["data"],
            id="provisioning-allowed-topologies",
        ),
        pytest.param(
            [DYNAMIC, pvc(storage_class="fast", annotations={SELECTED_NODE_ANNOTATION: "n2"})],
            [BIND_CONFLICT, OK],
            [],
            [],
            id="already-selected-node",
        ),
        pytest.param(
            [DYNAMIC, pvc(storage_class="fast", size="1Gi"), pv("pv1", storage_class="fast")],
            [OK, OK],
            ["pv1"],
            [],
            id="static-before-dynamic",
        ),
        pytest.param(
            [
                LOCAL,
                pvc(volume_name="pv0"),
                pv("pv0", node="n2", claim="data"),
                pvc("logs", size="1Gi"),
                pv("pv1", node="n2"),
            ],
            [Status.unresolvable(ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT), OK],
            [],
            [],
            id="all-reasons-reported",
        ),
    ],
)
def test_filter(
    objects: list[Resource], want: list[Status], static: list[str], dynamic: list[str]
) -> None:
    volumes = [claim_volume("data")] + (
        [claim_volume("logs")] if any(o.metadata.name == "logs" for o in objects) else []
    )
    plugin, _, state, pod, node_infos = _setup(objects, make_pod(volumes=volumes))
    _, status = plugin.pre_filter(state, pod, node_infos)
    assert status.is_success
    assert [plugin.filter(state, pod, node) for node in node_infos] == want
    assert plugin.reserve(state, pod, "n1").is_success
    chosen = state.read("VolumeBinding", volumebinding._State).by_node.get("n1")
    got_static = [v.metadata.name for _, v in chosen.static_bindings] if chosen else []
    got_dynamic = [c.metadata.name for c in chosen.dynamic_provisions] if chosen else []
    assert (got_static, got_dynamic) == (static, dynamic)


def test_claims_are_matched_smallest_first() -> None:
    objects: list[Resource] = [
        LOCAL,
        pvc("big", size="15Gi"),
        pvc("small", size="5Gi"),
        pv("pv10", size="10Gi"),
        pv("pv20", size="20Gi"),
    ]
    pod = make_pod(volumes=[claim_volume("big"), claim_volume("small")])
    plugin, _, state, info, node_infos = _setup(objects, pod)
    plugin.pre_filter(state, info, node_infos)
    assert plugin.filter(state, info, node_infos[0]) == OK
    chosen = state.read("VolumeBinding", volumebinding._State).by_node["n1"]
    pairs = [(c.metadata.name, v.metadata.name) for c, v in chosen.static_bindings]
    assert pairs == [("small", "pv10"), ("big", "pv20")]


async def test_bind_static_and_dynamic() -> None:
    objects: list[Resource] = [
        LOCAL,
        DYNAMIC,
        pvc(),
        pv("pv1", node="n1"),
        pvc("logs", storage_class="fast"),
    ]
    pod = make_pod(volumes=[claim_volume("data"), claim_volume("logs")])
    plugin, handle, state, info, node_infos = _setup(objects, pod)
    plugin.pre_filter(state, info, node_infos)
    assert plugin.filter(state, info, node_infos[0]) == OK
    assert plugin.reserve(state, info, "n1") == OK
    assert await plugin.pre_bind(state, info, "n1") == OK
    assert patches(handle) == [
        ("data", "default", {"spec": {"volumeName": "pv1"}}),
        ("logs", "default", {"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: "n1"}}}),
    ]


async def test_all_bound_pre_bind_does_nothing() -> None:
    objects: list[Resource] = [LOCAL, pvc(volume_name="pv1"), pv("pv1", claim="data")]
    plugin, handle, state, info, node_infos = _setup(objects, make_pod(volumes=[claim_volume()]))
    plugin.pre_filter(state, info, node_infos)
    plugin.filter(state, info, node_infos[0])
    plugin.reserve(state, info, "n1")
    assert await plugin.pre_bind(state, info, "n1") == OK
    assert handle.client.actions == []


async def test_skipped_pod_reserves_and_binds_nothing() -> None:
    plugin, handle, state, info, node_infos = _setup([], make_pod())
    assert plugin.pre_filter(state, info, node_infos) == (None, Status(Code.SKIP))
    assert plugin.reserve(state, info, "n1") == OK
    assert await plugin.pre_bind(state, info, "n1") == OK
    assert handle.client.actions == []


async def test_api_failure_fails_pre_bind() -> None:
    objects: list[Resource] = [LOCAL, pvc(), pv("pv1")]
    plugin, handle, state, info, node_infos = _setup(objects, make_pod(volumes=[claim_volume()]))
    handle.client.fail_next(
        "patch", ApiError(ApiStatus(code=409, reason="Conflict", message="changed"))
    )
    plugin.pre_filter(state, info, node_infos)
    plugin.filter(state, info, node_infos[0])
    plugin.reserve(state, info, "n1")
    status = await plugin.pre_bind(state, info, "n1")
    assert status.code is Code.ERROR
    assert "changed" in status.message


def test_assumed_volume_is_not_offered_to_another_claim_until_unreserved() -> None:
    objects: list[Resource] = [LOCAL, pvc("a"), pvc("b"), pv("pv1")]
    handle = FakeHandle(nodes(), objects)
    plugin = volumebinding.new(None, cast(Any, handle))
    first, second = (PodInfo.of(make_pod(c, volumes=[claim_volume(c)])) for c in ("a", "b"))

    def filter_(pod: PodInfo) -> tuple[CycleState, Status]:
        state = CycleState()
        plugin.pre_filter(state, pod, handle.nodes)
        return state, plugin.filter(state, pod, handle.nodes[0])

    first_state, status = filter_(first)
    assert status == OK
    assert plugin.reserve(first_state, first, "n1") == OK
    assert filter_(second)[1] == BIND_CONFLICT
    assert filter_(first)[1] == OK, "the claim it is assumed for still gets it"
    plugin.unreserve(first_state, first, "n1")
    assert filter_(second)[1] == OK


def test_assumption_forgotten_once_cache_shows_binding() -> None:
    objects: list[Resource] = [LOCAL, pvc("a"), pvc("b"), pv("pv1")]
    handle = FakeHandle(nodes(), objects)
    plugin = volumebinding.new(None, cast(Any, handle))
    first, second = (PodInfo.of(make_pod(c, volumes=[claim_volume(c)])) for c in ("a", "b"))
    state = CycleState()
    plugin.pre_filter(state, first, handle.nodes)
    plugin.filter(state, first, handle.nodes[0])
    plugin.reserve(state, first, "n1")
    handle.objects[1] = pvc("a", volume_name="pv1")
    handle.objects[3] = pv("pv1", claim="a", phase="Bound")
    state = CycleState()
    plugin.pre_filter(state, second, handle.nodes)
    assert plugin.filter(state, second, handle.nodes[0]) == BIND_CONFLICT
    assert plugin._assumed == {}


def test_invalid_args() -> None:
    with pytest.raises(ValueError, match="should not be a negative value"):
        volumebinding.new({"bindTimeoutSeconds": -1}, cast(Any, FakeHandle()))


def _hint(resource: str, old: Any, new: Any) -> QueueingHint:
    plugin = volumebinding.new(None, cast(Any, FakeHandle()))
    (registered,) = [e for e in plugin.events_to_register() if e.event.resource.value == resource]
    assert registered.hint is not None
    return registered.hint(make_pod(volumes=[claim_volume()]), old, new)


@pytest.mark.parametrize(
    ("resource", "old", "new", "want"),
    [
        pytest.param("PersistentVolumeClaim", None, pvc(), QueueingHint.QUEUE, id="claim-added"),
        pytest.param(
            "PersistentVolumeClaim",
            pvc(),
            pvc(volume_name="x"),
            QueueingHint.QUEUE,
            id="claim-updated",
        ),
        pytest.param(
            "PersistentVolumeClaim", None, pvc("other"), QueueingHint.SKIP, id="other-claim"
        ),
        pytest.param("StorageClass", None, LOCAL, QueueingHint.QUEUE, id="class-added"),
        pytest.param(
            "StorageClass",
            LOCAL,
            storage_class("local", zones=["a"]),
            QueueingHint.QUEUE,
            id="class-topology-changed",
        ),
        pytest.param("StorageClass", LOCAL, LOCAL, QueueingHint.SKIP, id="class-unchanged"),
    ],
)
def test_hints(resource: str, old: Any, new: Any, want: QueueingHint) -> None:
    assert _hint(resource, old, new) is want


@pytest.mark.parametrize(
    ("objects", "volumes", "picked"),
    [
        pytest.param(
            [LOCAL, pvc(volume_name="pv1"), pv("pv1", node="n1", claim="data")],
            [claim_volume()],
            [0, 1],
            id="bound-volume-affinity",
        ),
        pytest.param(
            [LOCAL, pvc(), pv("pv1", node="n2")], [claim_volume()], [1, 0], id="delayed-reversed"
        ),
        pytest.param([LOCAL, pvc(volume_name="gone")], [claim_volume()], [1], id="missing"),
        pytest.param([LOCAL], [], [0, 1], id="no-claims"),
        pytest.param([LOCAL, pvc(), pv("pv1")], [claim_volume()], [], id="no-nodes"),
    ],
)
def test_filter_nodes_matches_filter(
    objects: list[Resource], volumes: list[Volume], picked: list[int]
) -> None:
    plugin, _, state, info, all_nodes = _setup(objects, make_pod(volumes=volumes))
    plugin.pre_filter(state, info, all_nodes)
    batch = [all_nodes[i] for i in picked]
    statuses = plugin.filter_nodes(state, info, batch)
    recorded = dict(state.read(volumebinding._STATE_KEY, volumebinding._State).by_node)
    assert statuses == [plugin.filter(state, info, node) for node in batch]
    assert all(status is SUCCESS for status in statuses if status.is_success)
    assert state.read(volumebinding._STATE_KEY, volumebinding._State).by_node == recorded


def test_filter_nodes_without_pre_filter_state_fails_every_node() -> None:
    plugin, _, state, info, all_nodes = _setup([], make_pod(volumes=[claim_volume()]))
    statuses = plugin.filter_nodes(state, info, all_nodes)
    assert [status.code for status in statuses] == [Code.ERROR, Code.ERROR]
