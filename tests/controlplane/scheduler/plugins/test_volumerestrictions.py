from __future__ import annotations

from typing import Any

import pytest

from controlplane.scheduler.framework.interface import (
    SUCCESS,
    Code,
    CycleState,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import PodInfo
from controlplane.scheduler.plugins import volumerestrictions
from controlplane.scheduler.plugins.volumerestrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
)
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import (
    AWSElasticBlockStoreVolumeSource,
    EmptyDirVolumeSource,
    GCEPersistentDiskVolumeSource,
    ISCSIVolumeSource,
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource,
    RBDVolumeSource,
    Volume,
)
from kube.api.meta_v1 import ObjectMeta
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod


def gce(pd: str, read_only: bool = False) -> Volume:
    return Volume(
        name="v", gce_persistent_disk=GCEPersistentDiskVolumeSource(pd_name=pd, read_only=read_only)
    )


def ebs(volume_id: str, read_only: bool = False) -> Volume:
    return Volume(
        name="v",
        aws_elastic_block_store=AWSElasticBlockStoreVolumeSource(
            volume_id=volume_id, read_only=read_only
        ),
    )


def iscsi(iqn: str, read_only: bool = False) -> Volume:
    return Volume(
        name="v",
        iscsi=ISCSIVolumeSource(target_portal="127.0.0.1:3260", iqn=iqn, read_only=read_only),
    )


def rbd(monitors: list[str], pool: str, image: str, read_only: bool = False) -> Volume:
    return Volume(
        name="v",
        rbd=RBDVolumeSource(monitors=monitors, pool=pool, image=image, read_only=read_only),
    )


def claim_volume(claim: str) -> Volume:
    return Volume(
        name=claim, persistent_volume_claim=PersistentVolumeClaimVolumeSource(claim_name=claim)
    )


def claim(name: str, *modes: str, namespace: str = "default") -> PersistentVolumeClaim:
    return PersistentVolumeClaim(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=PersistentVolumeClaimSpec(access_modes=list(modes)),
    )


@pytest.mark.parametrize(
    ("volume", "existing", "want"),
    [
        pytest.param(gce("a"), [gce("b")], Status(), id="gce-different-disk"),
        pytest.param(
            gce("a"), [gce("a")], Status.unschedulable(ERR_REASON_DISK_CONFLICT), id="gce-same"
        ),
        pytest.param(
            gce("a", read_only=True),
            [gce("a", read_only=True)],
            Status(),
            id="gce-both-read-only",
        ),
        pytest.param(
            gce("a", read_only=True),
            [gce("a")],
            Status.unschedulable(ERR_REASON_DISK_CONFLICT),
            id="gce-one-writer",
        ),
        pytest.param(ebs("vol-1"), [ebs("vol-2")], Status(), id="ebs-different"),
        pytest.param(
            ebs("vol-1", read_only=True),
            [ebs("vol-1", read_only=True)],
            Status.unschedulable(ERR_REASON_DISK_CONFLICT),
            id="ebs-same-even-read-only",
        ),
        pytest.param(
            iscsi("iqn.a"),
            [iscsi("iqn.a")],
            Status.unschedulable(ERR_REASON_DISK_CONFLICT),
            id="iscsi-same",
        ),
        pytest.param(
            iscsi("iqn.a", read_only=True),
            [iscsi("iqn.a", read_only=True)],
            Status(),
            id="iscsi-both-read-only",
        ),
        pytest.param(
            rbd(["m1", "m2"], "p", "i"),
            [rbd(["m2", "m3"], "p", "i")],
            Status.unschedulable(ERR_REASON_DISK_CONFLICT),
            id="rbd-shared-monitor",
        ),
        pytest.param(
            rbd(["m1"], "p", "i"), [rbd(["m2"], "p", "i")], Status(), id="rbd-no-shared-monitor"
        ),
        pytest.param(rbd(["m1"], "p", "i"), [rbd(["m1"], "q", "i")], Status(), id="rbd-other-pool"),
        pytest.param(gce("a"), [ebs("a")], Status(), id="different-kinds"),
    ],
)
def test_disk_conflicts(volume: Volume, existing: list[Volume], want: Status) -> None:
    plugin = volumerestrictions.new(None, FakeHandle())
    pod = PodInfo.of(make_pod(volumes=[volume]))
    node = make_node_info(
        make_node(),
        *(make_pod(f"e{i}", node_name="n", volumes=[v]) for i, v in enumerate(existing)),
    )
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, [node])
    assert status.is_success
    assert plugin.filter(state, pod, node) == want


def _plugin_and_nodes(
    claims: list[PersistentVolumeClaim], users: list[Pod]
) -> tuple[volumerestrictions.VolumeRestrictions, list[Any]]:
    nodes = [make_node_info(make_node("n1"), *users), make_node_info(make_node("n2"))]
    return volumerestrictions.new(None, FakeHandle(nodes, claims)), nodes


@pytest.mark.parametrize(
    ("claims", "users", "pre_filter", "filter_"),
    [
        pytest.param(
            [],
            [],
            Status.unresolvable('persistentvolumeclaim "data" not found'),
            None,
            id="claim-missing",
        ),
        pytest.param(
            [claim("data", "ReadWriteOnce")],
            [],
            Status(Code.SKIP),
            None,
            id="no-restricted-volumes-skip",
        ),
        pytest.param(
            [claim("data", "ReadWriteOncePod")], [], Status(Code.SKIP), None, id="rwop-unused-skip"
        ),
        pytest.param(
            [claim("data", "ReadWriteOncePod")],
            [make_pod("user", node_name="n1", volumes=[claim_volume("data")])],
            Status(),
            Status.unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT),
            id="rwop-in-use",
        ),
        pytest.param(
            [
                claim("data", "ReadWriteOncePod"),
                claim("data", "ReadWriteOncePod", namespace="other"),
            ],
            [make_pod("user", "other", node_name="n1", volumes=[claim_volume("data")])],
            Status(Code.SKIP),
            None,
            id="rwop-same-name-other-namespace",
        ),
        pytest.param(
            [claim("data", "ReadWriteOnce")],
            [make_pod("user", node_name="n1", volumes=[claim_volume("data")])],
            Status(Code.SKIP),
            None,
            id="rwo-in-use-is-fine",
        ),
    ],
)
def test_read_write_once_pod(
    claims: list[PersistentVolumeClaim],
    users: list[Pod],
    pre_filter: Status,
    filter_: Status | None,
) -> None:
    plugin, nodes = _plugin_and_nodes(claims, users)
    pod = PodInfo.of(make_pod(volumes=[claim_volume("data")]))
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, nodes)
    assert status == pre_filter
    if filter_ is not None:
        assert [plugin.filter(state, pod, node) for node in nodes] == [filter_, filter_]


def test_preemption_what_if_removes_the_conflict() -> None:
    user = PodInfo.of(make_pod("user", node_name="n1", volumes=[claim_volume("data")]))
    plugin, nodes = _plugin_and_nodes([claim("data", "ReadWriteOncePod")], [user.pod])
    pod = PodInfo.of(make_pod(volumes=[claim_volume("data")]))
    state = CycleState()
    plugin.pre_filter(state, pod, nodes)
    extensions = plugin.pre_filter_extensions()
    assert extensions is not None
    what_if = state.clone()
    assert extensions.remove_pod(what_if, pod, user, nodes[0]).is_success
    assert plugin.filter(what_if, pod, nodes[0]) == Status()
    assert plugin.filter(state, pod, nodes[0]).is_rejected, "the real state is untouched"
    assert extensions.add_pod(what_if, pod, user, nodes[0]).is_success
    assert plugin.filter(what_if, pod, nodes[0]).is_rejected


def test_other_volumes_skip() -> None:
    plugin = volumerestrictions.new(None, FakeHandle())
    pod = PodInfo.of(make_pod(volumes=[Volume(name="tmp", empty_dir=EmptyDirVolumeSource())]))
    _, status = plugin.pre_filter(CycleState(), pod, [])
    assert status.code is Code.SKIP


def _hint(resource: str, target: Pod, old: Any, new: Any) -> QueueingHint:
    plugin = volumerestrictions.new(None, FakeHandle())
    (registered,) = [e for e in plugin.events_to_register() if e.event.resource.value == resource]
    assert registered.hint is not None
    return registered.hint(target, old, new)


@pytest.mark.parametrize(
    ("deleted", "want"),
    [
        pytest.param(make_pod("x", volumes=[gce("a")]), QueueingHint.QUEUE, id="disk-freed"),
        pytest.param(make_pod("x", volumes=[gce("b")]), QueueingHint.SKIP, id="other-disk"),
        pytest.param(
            make_pod("x", volumes=[claim_volume("data")]), QueueingHint.QUEUE, id="claim-freed"
        ),
        pytest.param(
            make_pod("x", "other", volumes=[claim_volume("data")]),
            QueueingHint.SKIP,
            id="other-namespace",
        ),
    ],
)
def test_pod_deleted_hint(deleted: Pod, want: QueueingHint) -> None:
    target = make_pod(volumes=[gce("a"), claim_volume("data")])
    assert _hint("Pod", target, deleted, None) is want


@pytest.mark.parametrize(
    ("added", "want"),
    [
        pytest.param(claim("data"), QueueingHint.QUEUE, id="wanted"),
        pytest.param(claim("logs"), QueueingHint.SKIP, id="other-claim"),
        pytest.param(claim("data", namespace="other"), QueueingHint.SKIP, id="other-namespace"),
    ],
)
def test_claim_added_hint(added: PersistentVolumeClaim, want: QueueingHint) -> None:
    target = make_pod(volumes=[claim_volume("data")])
    assert _hint("PersistentVolumeClaim", target, None, added) is want


@pytest.mark.parametrize(
    ("claims", "volumes", "users"),
    [
        pytest.param([], [gce("a")], [[gce("a")], [gce("b")], []], id="disk-conflict-on-one"),
        pytest.param(
            [claim("data", "ReadWriteOncePod")],
            [gce("a"), claim_volume("data")],
            [[gce("a"), claim_volume("data")], [], [ebs("x")]],
            id="disk-conflict-before-claim-in-use",
        ),
        pytest.param(
            [claim("data", "ReadWriteOncePod")],
            [claim_volume("data")],
            [[claim_volume("data")], []],
            id="claim-in-use-everywhere",
        ),
        pytest.param([], [rbd(["m"], "p", "i")], [], id="no-nodes"),
    ],
)
def test_filter_nodes_matches_filter(
    claims: list[PersistentVolumeClaim], volumes: list[Volume], users: list[list[Volume]]
) -> None:
    nodes = [
        make_node_info(make_node(f"n{i}"), make_pod(f"u{i}", node_name=f"n{i}", volumes=used))
        for i, used in enumerate(users)
    ]
    plugin = volumerestrictions.new(None, FakeHandle(nodes, claims))
    pod = PodInfo.of(make_pod(volumes=volumes))
    state = CycleState()
    assert plugin.pre_filter(state, pod, nodes)[1].is_success
    statuses = plugin.filter_nodes(state, pod, nodes)
    assert statuses == [plugin.filter(state, pod, node) for node in nodes]
    assert all(status is SUCCESS for status in statuses if status.is_success)


def test_filter_nodes_without_pre_filter_state() -> None:
    """The disk check needs no state; every other node fails reading it."""
    nodes = [
        make_node_info(make_node("n1"), make_pod("u", node_name="n1", volumes=[gce("a")])),
        make_node_info(make_node("n2")),
    ]
    plugin = volumerestrictions.new(None, FakeHandle(nodes))
    statuses = plugin.filter_nodes(CycleState(), PodInfo.of(make_pod(volumes=[gce("a")])), nodes)
    assert [status.code for status in statuses] == [Code.UNSCHEDULABLE, Code.ERROR]


def test_pods_without_volumes_skip_without_reading_the_snapshot() -> None:
    class NoSnapshot(FakeHandle):
        @property
        def snapshot(self) -> Any:
            raise AssertionError("the snapshot was read")

    plugin = volumerestrictions.new(None, NoSnapshot())
    _, status = plugin.pre_filter(CycleState(), PodInfo.of(make_pod()), [])
    assert status.code is Code.SKIP
