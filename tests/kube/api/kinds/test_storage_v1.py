"""storage.k8s.io/v1 CSIDriver, CSINode, VolumeAttachment, CSIStorageCapacity and
VolumeAttributesClass: defaults, validation with upstream's messages and paths, immutability,
printer cells and registration (StorageClass's are in test_small_groups.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.codec import to_builtins
from kube.api.errors import ErrorType
from kube.api.kinds.storage_v1 import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    VolumeAttachment,
    VolumeAttributesClass,
)
from kube.api.meta_v1 import Resource
from tests.kube.api.kinds.helpers import (
    CREATED,
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    cells,
    decode,
    merge,
    ordered,
    problems,
    update_problems,
)

V1 = "storage.k8s.io/v1"
DRIVER: dict[str, Any] = {
    "apiVersion": V1,
    "kind": "CSIDriver",
    "metadata": {"name": "csi.example.com", "creationTimestamp": CREATED},
    "spec": {},
}
NODE: dict[str, Any] = {
    "apiVersion": V1,
    "kind": "CSINode",
    "metadata": {"name": "node1", "creationTimestamp": CREATED},
    "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1", "topologyKeys": ["zone"]}]},
}
ATTACHMENT: dict[str, Any] = {
    "apiVersion": V1,
    "kind": "VolumeAttachment",
    "metadata": {"name": "va", "creationTimestamp": CREATED},
    "spec": {
        "attacher": "csi.example.com",
        "nodeName": "node1",
        "source": {"persistentVolumeName": "pv-1"},
    },
}
CAPACITY: dict[str, Any] = {
    "apiVersion": V1,
    "kind": "CSIStorageCapacity",
    "metadata": {"name": "c", "namespace": "default", "creationTimestamp": CREATED},
    "storageClassName": "fast",
    "capacity": "1024Mi",
}
VAC: dict[str, Any] = {
    "apiVersion": V1,
    "kind": "VolumeAttributesClass",
    "metadata": {"name": "silver", "creationTimestamp": CREATED},
    "driverName": "pd.csi.storage.gke.io",
    "parameters": {"iops": "3000"},
}


INLINE: dict[str, Any] = {
    "accessModes": ["ReadWriteOnce"],
    "capacity": {"storage": "1Gi"},
    "csi": {"driver": "csi.example.com", "volumeHandle": "vol-1"},
}


def driver(**spec: Any) -> dict[str, Any]:
    return merge(DRIVER, {"spec": spec})


def node_driver(**fields: Any) -> dict[str, Any]:
    return merge(
        NODE, {"spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1", **fields}]}}
    )


def attachment(**spec: Any) -> dict[str, Any]:
    return merge(ATTACHMENT, {"spec": spec})


def test_csi_driver_defaults() -> None:
    assert to_builtins(decode(DRIVER, CSIDriver))["spec"] == {
        "attachRequired": True,
        "podInfoOnMount": False,
        "volumeLifecycleModes": ["Persistent"],
        "storageCapacity": False,
        "fsGroupPolicy": "ReadWriteOnceWithFSType",
        "requiresRepublish": False,
        "seLinuxMount": False,
    }
    kept = to_builtins(decode(driver(volumeLifecycleModes=["Ephemeral"]), CSIDriver))
    assert kept["spec"]["volumeLifecycleModes"] == ["Ephemeral"]


Cases = list[tuple[str, dict[str, Any], type[Resource], list[tuple[str, ErrorType]]]]

CASES: Cases = [
    ("driver-valid", DRIVER, CSIDriver, []),
    (
        "driver-fs-group-policy",
        driver(fsGroupPolicy="Always"),
        CSIDriver,
        [("spec.fsGroupPolicy", NOT_SUPPORTED)],
    ),
    (
        "driver-lifecycle-mode",
        driver(volumeLifecycleModes=["Sometimes"]),
        CSIDriver,
        [("spec.volumeLifecycleModes", NOT_SUPPORTED)],
    ),
    (
        "driver-duplicate-audience",
        driver(tokenRequests=[{"audience": ""}, {}]),
        CSIDriver,
        [("spec.tokenRequests[1].audience", DUPLICATE)],
    ),
    (
        "driver-short-token",
        driver(tokenRequests=[{"audience": "a", "expirationSeconds": 599}]),
        CSIDriver,
        [("spec.tokenRequests[0].expirationSeconds", INVALID)],
    ),
    (
        "driver-long-token",
        driver(tokenRequests=[{"audience": "a", "expirationSeconds": (1 << 32) + 1}]),
        CSIDriver,
        [("spec.tokenRequests[0].expirationSeconds", INVALID)],
    ),
    (
        "driver-update-period",
        driver(nodeAllocatableUpdatePeriodSeconds=9),
        CSIDriver,
        [("spec.nodeAllocatableUpdatePeriodSeconds", INVALID)],
    ),
    ("node-valid", NODE, CSINode, []),
    ("node-no-node-id", node_driver(nodeID=None), CSINode, [("spec.drivers[0].nodeID", REQUIRED)]),
    (
        "node-long-node-id",
        node_driver(nodeID="x" * 257),
        CSINode,
        [("spec.drivers[0].nodeID", INVALID)],
    ),
    (
        "node-driver-name",
        node_driver(name="Not_A_Driver"),
        CSINode,
        [("spec.drivers[0].name", INVALID)],
    ),
    (
        "node-driver-name-too-long",
        node_driver(name="a" * 64),
        CSINode,
        [("spec.drivers[0].name", TOO_LONG)],
    ),
    (
        "node-topology-keys",
        node_driver(topologyKeys=["zone", "zone", "-bad"]),
        CSINode,
        [("spec.drivers[0]", DUPLICATE), ("spec.drivers[0]", INVALID)],
    ),
    (
        "node-negative-count",
        node_driver(allocatable={"count": -1}),
        CSINode,
        [("spec.drivers[0].allocatable.count", INVALID)],
    ),
    ("attachment-valid", ATTACHMENT, VolumeAttachment, []),
    (
        "attachment-inline",
        attachment(source={"persistentVolumeName": None, "inlineVolumeSpec": INLINE}),
        VolumeAttachment,
        [],
    ),
    (
        "attachment-no-source",
        attachment(source={"persistentVolumeName": None}),
        VolumeAttachment,
        [("spec.source", REQUIRED)],
    ),
    (
        "attachment-two-sources",
        attachment(source={"persistentVolumeName": "pv", "inlineVolumeSpec": INLINE}),
        VolumeAttachment,
        [("spec.source", FORBIDDEN)],
    ),
    (
        "attachment-empty-pv",
        attachment(source={"persistentVolumeName": ""}),
        VolumeAttachment,
        [("spec.source.persistentVolumeName", REQUIRED)],
    ),
    (
        "attachment-attacher",
        attachment(attacher="Not A Driver"),
        VolumeAttachment,
        [("spec.attacher", INVALID)],
    ),
    (
        "attachment-node",
        attachment(nodeName="Node_1"),
        VolumeAttachment,
        [("spec.nodeName", INVALID)],
    ),
    (
        "attachment-error-code",
        merge(ATTACHMENT, {"status": {"attachError": {"errorCode": -1}}}),
        VolumeAttachment,
        [("status.attachError.errorCode", INVALID)],
    ),
    ("capacity-valid", CAPACITY, CSIStorageCapacity, []),
    (
        "capacity-negative",
        merge(CAPACITY, {"capacity": "-1"}),
        CSIStorageCapacity,
        [("capacity", INVALID)],
    ),
    (
        "capacity-class",
        merge(CAPACITY, {"storageClassName": "Fast"}),
        CSIStorageCapacity,
        [("storageClassName", INVALID)],
    ),
    (
        "capacity-topology",
        merge(CAPACITY, {"nodeTopology": {"matchLabels": {"zone": "-"}}}),
        CSIStorageCapacity,
        [("nodeTopology.matchLabels", INVALID)],
    ),
    ("vac-valid", VAC, VolumeAttributesClass, []),
    (
        "vac-no-parameters",
        merge(VAC, {"parameters": None}),
        VolumeAttributesClass,
        [("parameters", REQUIRED)],
    ),
    (
        "vac-empty-key",
        merge(VAC, {"parameters": {"": "x"}}),
        VolumeAttributesClass,
        [("parameters", INVALID)],
    ),
    (
        "vac-driver",
        merge(VAC, {"driverName": "a/b/c"}),
        VolumeAttributesClass,
        [("driverName", INVALID)],
    ),
    (
        "vac-no-driver",
        merge(VAC, {"driverName": None}),
        VolumeAttributesClass,
        [("driverName", REQUIRED)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "cls", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_validation(
    raw: dict[str, Any], cls: type[Resource], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(raw, cls)) == ordered(expected)


def test_messages() -> None:
    raw = driver(
        fsGroupPolicy="Always",
        tokenRequests=[{"audience": "a", "expirationSeconds": 60}],
    )
    assert [str(e) for e in walk.validate(decode(raw, CSIDriver))] == [
        'spec.fsGroupPolicy: Unsupported value: "Always": supported values: "File", "None", '
        '"ReadWriteOnceWithFSType"',
        "spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration "
        "less than 10 minutes",
    ]
    no_source = walk.validate(
        decode(attachment(source={"persistentVolumeName": None}), VolumeAttachment)
    )
    assert [str(e) for e in no_source] == [
        "spec.source: Required value: must specify exactly one of inlineVolumeSpec and "
        "persistentVolumeName"
    ]
    empty = walk.validate(decode(merge(VAC, {"parameters": None}), VolumeAttributesClass))
    assert [str(e) for e in empty] == [
        "parameters: Required value: must contain at least one key/value pair"
    ]
    long_id = walk.validate(decode(node_driver(nodeID="x" * 257), CSINode))
    assert str(long_id[0]).endswith(": must be 256 characters or less")


def test_csi_driver_immutability() -> None:
    """attachRequired (at upstream's ``spec.attachedRequired``) and the lifecycle modes are
    fixed; the rest may change."""
    assert update_problems(DRIVER, driver(attachRequired=False), CSIDriver) == [
        ("spec.attachedRequired", INVALID)
    ]
    modes = driver(volumeLifecycleModes=["Persistent", "Ephemeral"])
    assert update_problems(DRIVER, modes, CSIDriver) == [("spec.volumeLifecycleModes", INVALID)]
    mutable = driver(
        podInfoOnMount=True, storageCapacity=True, fsGroupPolicy="File", requiresRepublish=True
    )
    assert update_problems(DRIVER, mutable, CSIDriver) == []


def test_csi_node_drivers_keep_all_but_their_count() -> None:
    counted = node_driver(topologyKeys=["zone"], allocatable={"count": 4})
    assert update_problems(NODE, counted, CSINode) == []
    moved = node_driver(nodeID="n2", topologyKeys=["zone"])
    assert update_problems(NODE, moved, CSINode) == [("spec.drivers", INVALID)]
    added = merge(
        NODE, {"spec": {"drivers": [*NODE["spec"]["drivers"], {"name": "b.io", "nodeID": "x"}]}}
    )
    assert update_problems(NODE, added, CSINode) == []


def test_other_immutable_fields() -> None:
    assert update_problems(ATTACHMENT, attachment(nodeName="node2"), VolumeAttachment) == [
        ("spec", INVALID)
    ]
    attached = merge(ATTACHMENT, {"status": {"attached": True}})
    assert update_problems(ATTACHMENT, attached, VolumeAttachment) == []
    assert update_problems(
        CAPACITY, merge(CAPACITY, {"storageClassName": "slow"}), CSIStorageCapacity
    ) == [("storageClassName", INVALID)]
    assert update_problems(CAPACITY, merge(CAPACITY, {"nodeTopology": {}}), CSIStorageCapacity) == [
        ("nodeTopology", INVALID)
    ]
    assert update_problems(CAPACITY, merge(CAPACITY, {"capacity": "2Gi"}), CSIStorageCapacity) == []
    assert update_problems(
        VAC, merge(VAC, {"driverName": "b.io", "parameters": {"iops": "1"}}), VolumeAttributesClass
    ) == [("driverName", FORBIDDEN), ("parameters", FORBIDDEN)]


def test_cells() -> None:
    full = driver(
        podInfoOnMount=True,
        volumeLifecycleModes=["Persistent", "Ephemeral"],
        tokenRequests=[{"audience": "gcp"}, {"audience": ""}],
    )
    assert cells(decode(full, CSIDriver)) == [
        "csi.example.com",
        True,
        True,
        False,
        "gcp,",
        False,
        "Persistent,Ephemeral",
        "5m",
    ]
    assert cells(decode(DRIVER, CSIDriver))[4] == "<unset>"
    assert cells(decode(NODE, CSINode)) == ["node1", 1, "5m"]
    assert cells(decode(ATTACHMENT, VolumeAttachment)) == [
        "va",
        "csi.example.com",
        "pv-1",
        "node1",
        False,
        "5m",
    ]
    assert cells(decode(CAPACITY, CSIStorageCapacity)) == ["c", "fast", "1Gi"]
    unset = merge(CAPACITY, {"capacity": None})
    assert cells(decode(unset, CSIStorageCapacity)) == ["c", "fast", "<unset>"]
    assert cells(decode(VAC, VolumeAttributesClass)) == ["silver", "pd.csi.storage.gke.io", "5m"]


@pytest.mark.parametrize(
    ("cls", "plural", "namespaced", "short_names", "subresources", "columns"),
    [
        (
            CSIDriver,
            "csidrivers",
            False,
            (),
            (),
            [
                "Name",
                "AttachRequired",
                "PodInfoOnMount",
                "StorageCapacity",
                "TokenRequests",
                "RequiresRepublish",
                "Modes",
                "Age",
            ],
        ),
        (CSINode, "csinodes", False, (), (), ["Name", "Drivers", "Age"]),
        (
            VolumeAttachment,
            "volumeattachments",
            False,
            (),
            ("status",),
            ["Name", "Attacher", "PV", "Node", "Attached", "Age"],
        ),
        (
            CSIStorageCapacity,
            "csistoragecapacities",
            True,
            (),
            (),
            ["Name", "StorageClassName", "Capacity"],
        ),
        (
            VolumeAttributesClass,
            "volumeattributesclasses",
            False,
            ("vac",),
            (),
            ["Name", "DriverName", "Age"],
        ),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_registration(
    cls: type[Resource],
    plural: str,
    namespaced: bool,
    short_names: tuple[str, ...],
    subresources: tuple[str, ...],
    columns: list[str],
) -> None:
    info = cls.kind_info
    assert (info.plural, info.namespaced, info.short_names, info.subresources) == (
        plural,
        namespaced,
        short_names,
        subresources,
    )
    assert [c.name for c in info.columns] == columns
    assert info.returns_deleted is not namespaced
