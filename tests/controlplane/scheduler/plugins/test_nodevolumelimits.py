from __future__ import annotations

import hashlib
from typing import Any, cast

import pytest

from controlplane.scheduler.framework.interface import (
    SUCCESS,
    Code,
    CycleState,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import PodInfo
from controlplane.scheduler.plugins import nodevolumelimits
from controlplane.scheduler.plugins.nodevolumelimits import (
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    csi_attach_limit_key,
)
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import (
    CSIPersistentVolumeSource,
    EmptyDirVolumeSource,
    EphemeralVolumeSource,
    HostPathVolumeSource,
    PersistentVolume,
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    PersistentVolumeClaimTemplate,
    PersistentVolumeClaimVolumeSource,
    PersistentVolumeSpec,
    Volume,
)
from kube.api.kinds.storage_v1 import StorageClass
from kube.api.meta_v1 import ObjectMeta, Resource
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"


def claim_volume(name: str) -> Volume:
    return Volume(
        name=name, persistent_volume_claim=PersistentVolumeClaimVolumeSource(claim_name=name)
    )


def pvc(
    name: str, volume: str | None = None, storage_class: str | None = None
) -> PersistentVolumeClaim:
    return PersistentVolumeClaim(
        metadata=ObjectMeta(name=name, namespace="default"),
        spec=PersistentVolumeClaimSpec(volume_name=volume, storage_class_name=storage_class),
    )


def csi_pv(name: str, driver: str = EBS) -> PersistentVolume:
    return PersistentVolume(
        metadata=ObjectMeta(name=name),
        spec=PersistentVolumeSpec(csi=CSIPersistentVolumeSource(driver=driver, volume_handle=name)),
    )


def bound(name: str, driver: str = EBS) -> list[Resource]:
    """A claim ``name`` bound to a CSI volume ``pv-<name>`` of ``driver``."""
    return [pvc(name, f"pv-{name}"), csi_pv(f"pv-{name}", driver)]


def limits(per_driver: dict[str, str]) -> dict[str, str]:
    """Allocatable with an attach limit per CSI driver."""
    return {"cpu": "4", "memory": "8Gi", "pods": "110"} | {
        csi_attach_limit_key(driver): count for driver, count in per_driver.items()
    }


EBS_LIMIT_2 = limits({EBS: "2"})
EBS_LIMIT_1 = limits({EBS: "1"})
EXCEEDED = Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)


def _run(
    objects: list[Resource], allocatable: dict[str, str], existing: list[list[str]], new: list[str]
) -> tuple[Status, Status | None]:
    node = make_node_info(
        make_node(allocatable=allocatable),
        *(
            make_pod(f"e{i}", node_name="n", volumes=[claim_volume(c) for c in claims])
            for i, claims in enumerate(existing)
        ),
    )
    plugin = nodevolumelimits.new(None, cast(Any, FakeHandle([node], objects)))
    pod = PodInfo.of(make_pod(volumes=[claim_volume(c) for c in new]))
    state = CycleState()
    _, pre_filter = plugin.pre_filter(state, pod, [node])
    return pre_filter, plugin.filter(state, pod, node) if pre_filter.is_success else None


@pytest.mark.parametrize(
    ("objects", "allocatable", "existing", "new", "want"),
    [
        pytest.param(bound("a") + bound("b"), EBS_LIMIT_2, [["a"]], ["b"], Status(), id="at-limit"),
        pytest.param(
            bound("a") + bound("b") + bound("c"),
            EBS_LIMIT_2,
            [["a"], ["b"]],
            ["c"],
            EXCEEDED,
            id="over-limit",
        ),
        pytest.param(
            bound("a") + bound("b"),
            EBS_LIMIT_1,
            [],
            ["a", "b"],
            EXCEEDED,
            id="pod-alone-over-limit",
        ),
        pytest.param(
            bound("a"), EBS_LIMIT_1, [["a"]], ["a"], Status(), id="shared-volume-counts-once"
        ),
        pytest.param(
            bound("a") + bound("b", GCE),
            EBS_LIMIT_1,
            [["a"]],
            ["b"],
            Status(),
            id="other-driver-unlimited",
        ),
        pytest.param(
            bound("a") + bound("b", GCE),
            limits({EBS: "1", GCE: "1"}),
            [["a"]],
            ["b"],
            Status(),
            id="limits-per-driver",
        ),
        pytest.param(
            bound("a") + bound("b"),
            {"cpu": "4", "pods": "110"},
            [["a"]],
            ["b"],
            Status(),
            id="node-without-limits",
        ),
        pytest.param(
            [
                *bound("a"),
                pvc("b", storage_class="ebs"),
                StorageClass(metadata=ObjectMeta(name="ebs"), provisioner=EBS),
            ],
            EBS_LIMIT_1,
            [["a"]],
            ["b"],
            EXCEEDED,
            id="unbound-counts-by-class-provisioner",
        ),
        pytest.param(
            [*bound("a"), pvc("b", storage_class="missing")],
            EBS_LIMIT_1,
            [["a"]],
            ["b"],
            Status(),
            id="unbound-class-missing-not-counted",
        ),
        pytest.param(
            [
                *bound("a"),
                pvc("b", volume="pv-b"),
                PersistentVolume(
                    metadata=ObjectMeta(name="pv-b"),
                    spec=PersistentVolumeSpec(host_path=HostPathVolumeSource(path="/d")),
                ),
            ],
            EBS_LIMIT_1,
            [["a"]],
            ["b"],
            Status(),
            id="non-csi-volume-not-counted",
        ),
        pytest.param(
            bound("b"),
            EBS_LIMIT_1,
            [["gone"]],
            ["b"],
            Status(),
            id="existing-pod-missing-claim-ignored",
        ),
        pytest.param(
            bound("a"),
            EBS_LIMIT_1,
            [],
            ["data"],
            Status.unresolvable(
                'looking up PVC default/data: persistentvolumeclaim "data" not found'
            ),
            id="missing-claim-unresolvable",
        ),
    ],
)
def test_filter(
    objects: list[Resource],
    allocatable: dict[str, str],
    existing: list[list[str]],
    new: list[str],
    want: Status,
) -> None:
    assert _run(objects, allocatable, existing, new) == (Status(), want)


def test_pods_without_claims_skip() -> None:
    pod = make_pod(volumes=[Volume(name="tmp", empty_dir=EmptyDirVolumeSource())])
    plugin = nodevolumelimits.new(None, cast(Any, FakeHandle()))
    _, status = plugin.pre_filter(CycleState(), PodInfo.of(pod), [])
    assert status.code is Code.SKIP


def test_ephemeral_claim_of_another_pod_is_an_error() -> None:
    node = make_node_info(make_node(allocatable=EBS_LIMIT_1))
    ephemeral = Volume(
        name="scratch",
        ephemeral=EphemeralVolumeSource(
            volume_claim_template=PersistentVolumeClaimTemplate(spec=PersistentVolumeClaimSpec())
        ),
    )
    plugin = nodevolumelimits.new(None, cast(Any, FakeHandle([node], [pvc("p-scratch")])))
    status = plugin.filter(CycleState(), PodInfo.of(make_pod(volumes=[ephemeral])), node)
    assert status.code is Code.ERROR
    assert "(pod is not owner)" in status.message


@pytest.mark.parametrize(
    ("driver", "want"),
    [
        pytest.param(EBS, "attachable-volumes-csi-ebs.csi.aws.com", id="short"),
        pytest.param(
            "a" * 40,
            "attachable-volumes-csi-" + "a" * 23 + hashlib.sha1(b"a" * 40).hexdigest()[:16],
            id="too-long-hashed",
        ),
    ],
)
def test_csi_attach_limit_key(driver: str, want: str) -> None:
    assert csi_attach_limit_key(driver) == want


def _hint(resource: str, old: Any, new: Any) -> QueueingHint:
    plugin = nodevolumelimits.new(None, cast(Any, FakeHandle()))
    (registered,) = [e for e in plugin.events_to_register() if e.event.resource.value == resource]
    assert registered.hint is not None
    return registered.hint(make_pod(volumes=[claim_volume("data")]), old, new)


@pytest.mark.parametrize(
    ("deleted", "want"),
    [
        pytest.param(
            make_pod("x", node_name="n", volumes=[claim_volume("a")]),
            QueueingHint.QUEUE,
            id="scheduled-with-claim",
        ),
        pytest.param(
            make_pod("x", volumes=[claim_volume("a")]), QueueingHint.SKIP, id="unscheduled"
        ),
        pytest.param(make_pod("x", node_name="n"), QueueingHint.SKIP, id="no-volumes"),
    ],
)
def test_pod_deleted_hint(deleted: Pod, want: QueueingHint) -> None:
    assert _hint("Pod", deleted, None) is want


@pytest.mark.parametrize(
    ("added", "want"),
    [
        pytest.param(pvc("data"), QueueingHint.QUEUE, id="wanted"),
        pytest.param(pvc("other"), QueueingHint.SKIP, id="unrelated"),
    ],
)
def test_claim_added_hint(added: PersistentVolumeClaim, want: QueueingHint) -> None:
    assert _hint("PersistentVolumeClaim", None, added) is want


@pytest.mark.parametrize(
    ("objects", "new"),
    [
        pytest.param(bound("a") + bound("b") + bound("c"), ["c"], id="limits-differ-per-node"),
        pytest.param(bound("a") + bound("b"), ["a", "b"], id="shared-and-new"),
        pytest.param(bound("a"), ["missing"], id="claim-missing"),
        pytest.param(bound("a"), [], id="no-claims"),
    ],
)
def test_filter_nodes_matches_filter(objects: list[Resource], new: list[str]) -> None:
    """Nodes without limits, at their limit, over it, and sharing the pod's volume."""
    nodes = [
        make_node_info(
            make_node(f"n{i}", allocatable=allocatable),
            *(make_pod(f"e{i}-{c}", node_name=f"n{i}", volumes=[claim_volume(c)]) for c in used),
        )
        for i, (allocatable, used) in enumerate(
            [
                (EBS_LIMIT_2, ["a"]),
                (EBS_LIMIT_2, ["a", "b"]),
                (EBS_LIMIT_1, []),
                (limits({}), ["a", "b"]),
            ]
        )
    ]
    plugin = nodevolumelimits.new(None, cast(Any, FakeHandle(nodes, objects)))
    pod = PodInfo.of(make_pod(volumes=[claim_volume(c) for c in new]))
    state = CycleState()
    statuses = plugin.filter_nodes(state, pod, nodes)
    assert statuses == [plugin.filter(state, pod, node) for node in nodes]
    assert all(status is SUCCESS for status in statuses if status.is_success)
    assert plugin.filter_nodes(state, pod, []) == []
