"""The persistentvolume-binder controller, with fake informers and a fake API."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.controllers import persistentvolume
from kube.api.kinds.core_v1.volume import (
    HostPathVolumeSource,
    ObjectReference,
    PersistentVolume,
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus,
    PersistentVolumeSpec,
    PersistentVolumeStatus,
    VolumeResourceRequirements,
)
from kube.api.kinds.storage_v1 import StorageClass
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from tests.controlplane.controllers.fakes import Harness, harness, stamp

RWO, RWX = "ReadWriteOnce", "ReadWriteMany"


def claim(
    *,
    size: str = "1Gi",
    modes: tuple[str, ...] = (RWO,),
    cls: str | None = "",
    volume: str | None = None,
    annotations: dict[str, str] | None = None,
    selector: dict[str, str] | None = None,
) -> PersistentVolumeClaim:
    return stamp(
        PersistentVolumeClaim(
            metadata=ObjectMeta(name="data", namespace="team", annotations=annotations),
            spec=PersistentVolumeClaimSpec(
                access_modes=list(modes),
                resources=VolumeResourceRequirements(requests={"storage": size}),
                storage_class_name=cls,
                volume_name=volume,
                selector=LabelSelector(match_labels=selector) if selector else None,
            ),
            status=PersistentVolumeClaimStatus(phase="Pending"),
        )
    )


def volume(
    name: str,
    size: str = "1Gi",
    *,
    modes: tuple[str, ...] = (RWO,),
    cls: str = "",
    phase: str = "Available",
    ref: PersistentVolumeClaim | None = None,
    policy: str = "Retain",
    labels: dict[str, str] | None = None,
) -> PersistentVolume:
    claim_ref = None
    if ref is not None:
        claim_ref = ObjectReference(
            kind="PersistentVolumeClaim",
            namespace=ref.metadata.namespace,
            name=ref.metadata.name,
            uid=ref.metadata.uid,
        )
    return stamp(
        PersistentVolume(
            metadata=ObjectMeta(name=name, labels=labels),
            spec=PersistentVolumeSpec(
                host_path=HostPathVolumeSource(path="/tmp/x"),
                capacity={"storage": size},
                access_modes=list(modes),
                storage_class_name=cls or None,
                claim_ref=claim_ref,
                persistent_volume_reclaim_policy=policy,
                volume_mode="Filesystem",
            ),
            status=PersistentVolumeStatus(phase=phase),
        )
    )


def storage_class(name: str, provisioner: str, mode: str = "Immediate") -> StorageClass:
    return stamp(
        StorageClass(
            metadata=ObjectMeta(name=name),
            provisioner=provisioner,
            reclaim_policy="Delete",
            volume_binding_mode=mode,
        )
    )


def bound_volume(h: Harness) -> str | None:
    updates = [a for a in h.client.writes("update", "PersistentVolumeClaim") if not a.subresource]
    return updates[-1].obj.spec.volume_name if updates else None


@pytest.mark.parametrize(
    ("pvc", "volumes", "expected"),
    [
        pytest.param(
            claim(),
            [volume("big", "10Gi"), volume("small", "2Gi"), volume("tiny", "500Mi")],
            "small",
            id="smallest-that-fits",
        ),
        pytest.param(claim(modes=(RWO, RWX)), [volume("a", modes=(RWO,))], None, id="modes"),
        pytest.param(
            claim(modes=(RWO,)), [volume("a", modes=(RWO, RWX))], "a", id="modes-superset"
        ),
        pytest.param(claim(cls="fast"), [volume("a")], None, id="class-must-match"),
        pytest.param(claim(), [volume("a", phase="Released")], None, id="only-available"),
        pytest.param(
            claim(selector={"tier": "gold"}),
            [volume("a", "1Gi"), volume("b", "5Gi", labels={"tier": "gold"})],
            "b",
            id="selector",
        ),
    ],
)
async def test_binding_picks_a_volume(
    pvc: PersistentVolumeClaim, volumes: list[PersistentVolume], expected: str | None
) -> None:
    h = harness()
    h.store(pvc, *volumes)
    await persistentvolume.new(h.ctx).sync("team/data")
    assert bound_volume(h) == expected


async def test_binding_writes_both_sides_in_order() -> None:
    h = harness()
    pvc = claim()
    h.store(pvc, volume("pv1", "2Gi"))
    await persistentvolume.new(h.ctx).sync("team/data")
    steps = [(a.verb, a.kind, a.subresource) for a in h.client.actions]
    assert steps == [
        ("update", "PersistentVolume", ""),
        ("update", "PersistentVolume", "status"),
        ("update", "PersistentVolumeClaim", ""),
        ("update", "PersistentVolumeClaim", "status"),
    ]
    pv, pv_status, pvc_spec, pvc_status = (a.obj for a in h.client.actions)
    assert pv.spec.claim_ref.uid == pvc.metadata.uid
    assert pv.metadata.annotations == {"pv.kubernetes.io/bound-by-controller": "yes"}
    assert pv_status.status.phase == "Bound"
    assert pvc_spec.spec.volume_name == "pv1"
    assert pvc_spec.metadata.annotations == {
        "pv.kubernetes.io/bind-completed": "yes",
        "pv.kubernetes.io/bound-by-controller": "yes",
    }
    assert pvc_status.status.phase == "Bound"
    assert pvc_status.status.capacity == {"storage": "2Gi"}
    assert pvc_status.status.access_modes == [RWO]


async def test_completed_binding_writes_nothing() -> None:
    h = harness()
    pvc = claim(volume="pv1", annotations={"pv.kubernetes.io/bind-completed": "yes"})
    pvc.status = PersistentVolumeClaimStatus(
        phase="Bound", access_modes=[RWO], capacity={"storage": "1Gi"}
    )
    h.store(pvc, volume("pv1", ref=pvc, phase="Bound"))
    controller = persistentvolume.new(h.ctx)
    await controller.sync("team/data")
    await controller.sync("pv1")
    assert h.client.actions == []


@pytest.mark.parametrize(
    ("cls", "reason"),
    [
        pytest.param("", "FailedBinding", id="no-class"),
        pytest.param("missing", "ProvisioningFailed", id="unknown-class"),
        pytest.param("wait", "WaitForFirstConsumer", id="wait-for-first-consumer"),
        pytest.param("ext", "ExternalProvisioning", id="external-provisioner"),
    ],
)
async def test_unbound_claim_events(cls: str, reason: str) -> None:
    h = harness()
    h.store(
        claim(cls=cls),
        storage_class("wait", persistentvolume.HOSTPATH_PROVISIONER, "WaitForFirstConsumer"),
        storage_class("ext", "example.com/csi"),
    )
    await persistentvolume.new(h.ctx).sync("team/data")
    assert h.recorder.reasons() == [reason]
    assert h.client.writes("create") == []


async def test_hostpath_provisioning() -> None:
    h = harness()
    pvc = claim(
        cls="local",
        size="3Gi",
        annotations={"volume.kubernetes.io/selected-node": "node-1"},
    )
    h.store(
        pvc, storage_class("local", persistentvolume.HOSTPATH_PROVISIONER, "WaitForFirstConsumer")
    )
    await persistentvolume.new(h.ctx).sync("team/data")
    [annotate] = h.client.writes("update", "PersistentVolumeClaim")
    assert annotate.obj.metadata.annotations["volume.kubernetes.io/storage-provisioner"] == (
        "kubelab.io/hostpath"
    )
    [create] = h.client.writes("create", "PersistentVolume")
    pv: Any = create.obj
    name = f"pvc-{pvc.metadata.uid}"
    assert pv.metadata.name == name
    assert pv.metadata.annotations["pv.kubernetes.io/provisioned-by"] == "kubelab.io/hostpath"
    assert pv.spec.host_path.path == f"/var/lib/kubelab/volumes/{name}"
    assert pv.spec.capacity == {"storage": "3Gi"}
    assert pv.spec.claim_ref.uid == pvc.metadata.uid
    assert pv.spec.persistent_volume_reclaim_policy == "Delete"
    assert pv.spec.storage_class_name == "local"
    [term] = pv.spec.node_affinity.required.node_selector_terms
    assert term.match_expressions[0].values == ["node-1"]
    assert h.recorder.events == [
        (
            "Normal",
            "ProvisioningSucceeded",
            f"Successfully provisioned volume {name} using kubelab.io/hostpath",
            "data",
        ),
    ]


async def test_a_provisioned_volume_is_bound_to_its_claim() -> None:
    h = harness()
    pvc = claim(cls="local", size="3Gi")
    h.store(
        pvc,
        storage_class("local", persistentvolume.HOSTPATH_PROVISIONER),
        volume("pvc-x", "3Gi", cls="local", phase="Pending", ref=pvc),
    )
    await persistentvolume.new(h.ctx).sync("team/data")
    assert bound_volume(h) == "pvc-x"
    assert h.client.writes("create") == []


@pytest.mark.parametrize(
    ("policy", "verbs"),
    [
        pytest.param("Retain", [("update", "status")], id="retain-released"),
        pytest.param("Delete", [("update", "status"), ("delete", "")], id="delete"),
    ],
)
async def test_volume_of_a_deleted_claim_is_reclaimed(
    policy: str, verbs: list[tuple[str, str]]
) -> None:
    h = harness()
    h.store(volume("pv1", ref=claim(), phase="Bound", policy=policy))
    await persistentvolume.new(h.ctx).sync("pv1")
    assert [(a.verb, a.subresource) for a in h.client.actions] == verbs
    assert h.client.actions[0].obj.status.phase == "Released"


async def test_unclaimed_volume_becomes_available() -> None:
    h = harness()
    h.store(volume("pv1", phase="Pending"))
    await persistentvolume.new(h.ctx).sync("pv1")
    [write] = h.client.writes("update", "PersistentVolume")
    assert write.obj.status.phase == "Available"


async def test_claim_whose_volume_vanished_is_lost() -> None:
    h = harness()
    h.store(claim(volume="pv1", annotations={"pv.kubernetes.io/bind-completed": "yes"}))
    await persistentvolume.new(h.ctx).sync("team/data")
    [write] = h.client.writes("update", "PersistentVolumeClaim")
    assert write.obj.status.phase == "Lost"
    assert h.recorder.reasons() == ["ClaimLost"]


async def test_deleting_a_bound_claim_enqueues_its_volume() -> None:
    h = harness()
    controller = persistentvolume.new(h.ctx)
    controller._claim_deleted(claim(volume="pv1"))
    assert await controller.queue.get() == "pv1"
