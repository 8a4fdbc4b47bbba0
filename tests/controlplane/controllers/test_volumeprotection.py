"""The pvc-protection and pv-protection controllers, with fake informers and a fake API."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import volumeprotection
from kube.api.kinds.core_v1.pod import Container, Pod
from kube.api.kinds.core_v1.volume import (
    PersistentVolume,
    PersistentVolumeClaim,
    PersistentVolumeClaimVolumeSource,
    PersistentVolumeStatus,
    Volume,
)
from kube.api.meta_v1 import ObjectMeta
from tests import builders
from tests.controlplane.controllers.fakes import harness, stamp

DELETED = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)
PVC = volumeprotection.PVC_FINALIZER
PV = volumeprotection.PV_FINALIZER


def claim(*, finalizers: list[str] | None = None, deleted: bool = False) -> PersistentVolumeClaim:
    meta = ObjectMeta(name="data", namespace="team", finalizers=finalizers)
    meta.deletion_timestamp = DELETED if deleted else None
    return stamp(PersistentVolumeClaim(metadata=meta))


def pod(*, node: str | None = "n1", phase: str = "Running", claim_name: str = "data") -> Pod:
    volume = Volume(
        name="v", persistent_volume_claim=PersistentVolumeClaimVolumeSource(claim_name=claim_name)
    )
    return stamp(
        builders.pod(
            "app",
            "team",
            node_name=node,
            containers=[Container(name="c")],
            phase=phase,
            volumes=[volume],
        )
    )


@pytest.mark.parametrize(
    ("obj", "pods", "finalizers"),
    [
        pytest.param(claim(), [], [PVC], id="adds-finalizer"),
        pytest.param(claim(finalizers=["other"]), [], ["other", PVC], id="keeps-others"),
        pytest.param(claim(finalizers=[PVC]), [], None, id="already-there"),
        pytest.param(claim(finalizers=[PVC], deleted=True), [], [], id="unused-released"),
        pytest.param(claim(finalizers=[PVC], deleted=True), [pod()], None, id="running-pod-keeps"),
        pytest.param(
            claim(finalizers=[PVC], deleted=True),
            [pod(phase="Succeeded")],
            [],
            id="terminal-pod-does-not-keep",
        ),
        pytest.param(
            claim(finalizers=[PVC], deleted=True),
            [pod(node=None)],
            [],
            id="unscheduled-pod-does-not-keep",
        ),
        pytest.param(
            claim(finalizers=[PVC], deleted=True),
            [pod(claim_name="other")],
            [],
            id="pod-of-another-claim",
        ),
        pytest.param(claim(deleted=True), [], None, id="deleted-without-finalizer"),
    ],
)
async def test_pvc_protection(
    obj: PersistentVolumeClaim, pods: list[Pod], finalizers: list[str] | None
) -> None:
    h = harness()
    h.store(obj, *pods)
    await volumeprotection.new_pvc_protection(h.ctx).sync("team/data")
    updates = h.client.writes("update", "PersistentVolumeClaim")
    if finalizers is None:
        assert updates == []
    else:
        assert [u.obj.metadata.finalizers or [] for u in updates] == [finalizers]


async def test_pod_events_enqueue_the_claims_it_mounts() -> None:
    h = harness()
    controller = volumeprotection.new_pvc_protection(h.ctx)
    controller._pod_changed(pod())
    assert await controller.queue.get() == "team/data"


def volume(
    phase: str, *, finalizers: list[str] | None = None, deleted: bool = False
) -> PersistentVolume:
    meta = ObjectMeta(name="pv1", finalizers=finalizers)
    meta.deletion_timestamp = DELETED if deleted else None
    return stamp(PersistentVolume(metadata=meta, status=PersistentVolumeStatus(phase=phase)))


@pytest.mark.parametrize(
    ("obj", "finalizers"),
    [
        pytest.param(volume("Available"), [PV], id="adds-finalizer"),
        pytest.param(volume("Bound", finalizers=[PV], deleted=True), None, id="bound-kept"),
        pytest.param(volume("Released", finalizers=[PV], deleted=True), [], id="released-freed"),
        pytest.param(volume("Available", finalizers=[PV]), None, id="nothing-to-do"),
    ],
)
async def test_pv_protection(obj: PersistentVolume, finalizers: list[str] | None) -> None:
    h = harness()
    h.store(obj)
    await volumeprotection.new_pv_protection(h.ctx).sync("pv1")
    updates = h.client.writes("update", "PersistentVolume")
    if finalizers is None:
        assert updates == []
    else:
        assert [u.obj.metadata.finalizers or [] for u in updates] == [finalizers]


async def test_missing_objects_are_nothing_to_do() -> None:
    h = harness()
    await volumeprotection.new_pvc_protection(h.ctx).sync("team/gone")
    await volumeprotection.new_pv_protection(h.ctx).sync("gone")
    assert h.client.actions == []
