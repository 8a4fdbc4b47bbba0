"""core/v1 storage: volume sources, PersistentVolume and PersistentVolumeClaim.

Defaults, every validation hook (field path and error type), what a claim and a volume accept
on update, and printer cells.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import codec, walk
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import (
    PersistentVolume,
    PersistentVolumeClaim,
    access_modes_text,
    image_pull_policy,
)
from tests.kube.api.kinds.helpers import (
    CREATED,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    Problem,
    cells,
    decode,
    merge,
    ordered,
    problems,
)

PV = {
    "apiVersion": "v1",
    "kind": "PersistentVolume",
    "metadata": {"name": "pv-1", "creationTimestamp": CREATED},
    "spec": {
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "nfs": {"server": "nfs.local", "path": "/exports/a"},
    },
}
PVC = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "data", "namespace": "default", "creationTimestamp": CREATED},
    "spec": {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": "standard",
    },
}


# Defaults.


def test_persistent_volume_defaults() -> None:
    out = codec.to_builtins(decode(PV, PersistentVolume))
    assert out["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert out["spec"]["volumeMode"] == "Filesystem"
    assert out["status"] == {"phase": "Pending"}


def test_claim_defaults() -> None:
    out = codec.to_builtins(decode(PVC, PersistentVolumeClaim))
    assert out["spec"]["volumeMode"] == "Filesystem"
    assert out["status"] == {"phase": "Pending"}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            {"rbd": {"monitors": ["m"], "image": "i"}},
            {
                "rbd": {
                    "monitors": ["m"],
                    "image": "i",
                    "pool": "rbd",
                    "user": "admin",
                    "keyring": "/etc/ceph/keyring",
                }
            },
        ),
        (
            {
                "iscsi": {
                    "targetPortal": "10.0.0.1:3260",
                    "iqn": "iqn.2001-04.com.example:storage",
                    "lun": 0,
                }
            },
            {
                "iscsi": {
                    "targetPortal": "10.0.0.1:3260",
                    "iqn": "iqn.2001-04.com.example:storage",
                    "lun": 0,
                    "iscsiInterface": "default",
                }
            },
        ),
        (
            {"azureDisk": {"diskName": "d", "diskURI": "https://a.blob.core.windows.net/c/d.vhd"}},
            {
                "azureDisk": {
                    "diskName": "d",
                    "diskURI": "https://a.blob.core.windows.net/c/d.vhd",
                    "cachingMode": "ReadWrite",
                    "fsType": "ext4",
                    "readOnly": False,
                    "kind": "Shared",
                }
            },
        ),
        (
            {
                "scaleIO": {
                    "gateway": "g",
                    "system": "s",
                    "volumeName": "v",
                    "secretRef": {"name": "s"},
                }
            },
            {
                "scaleIO": {
                    "gateway": "g",
                    "system": "s",
                    "volumeName": "v",
                    "secretRef": {"name": "s"},
                    "storageMode": "ThinProvisioned",
                    "fsType": "xfs",
                }
            },
        ),
        (
            {
                "downwardAPI": {
                    "items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {
                            "path": "labels",
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"},
                        }
                    ],
                    "defaultMode": 420,
                }
            },
        ),
        (
            {
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        }
                    }
                }
            },
            {
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                            "volumeMode": "Filesystem",
                        }
                    }
                }
            },
        ),
    ],
    ids=["rbd", "iscsi", "azure-disk", "scale-io", "downward-api", "ephemeral"],
)
def test_pod_volume_source_defaults(source: dict[str, Any], expected: dict[str, Any]) -> None:
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "a", "image": "a"}], "volumes": [{"name": "v"} | source]},
    }
    assert codec.to_builtins(decode(raw, Pod))["spec"]["volumes"] == [{"name": "v"} | expected]


def test_persistent_source_defaults() -> None:
    raw = merge(PV, {"spec": {"nfs": None, "rbd": {"monitors": ["m"], "image": "i"}}})
    assert codec.to_builtins(decode(raw, PersistentVolume))["spec"]["rbd"]["pool"] == "rbd"


@pytest.mark.parametrize(
    ("reference", "policy"),
    [
        ("tools", "Always"),
        ("tools:v1", "IfNotPresent"),
        ("localhost:5000/tools", "Always"),
        (None, "Always"),
    ],
    ids=["no-tag", "tag", "registry-port", "none"],
)
def test_image_pull_policy(reference: str | None, policy: str) -> None:
    assert image_pull_policy(reference) == policy


# PersistentVolume validation.


PV_CASES: list[tuple[str, dict[str, Any], list[Problem]]] = [
    ("valid", PV, []),
    (
        "capacity-required",
        merge(PV, {"spec": {"capacity": None}}),
        [("spec.capacity", REQUIRED), ("spec.capacity", NOT_SUPPORTED)],
    ),
    (
        "capacity-only-storage",
        merge(PV, {"spec": {"capacity": {"cpu": "1"}}}),
        [("spec.capacity", NOT_SUPPORTED)],
    ),
    (
        "capacity-positive",
        merge(PV, {"spec": {"capacity": {"storage": "0"}}}),
        [("spec.capacity[storage]", INVALID)],
    ),
    (
        "access-modes-required",
        merge(PV, {"spec": {"accessModes": None}}),
        [("spec.accessModes", REQUIRED)],
    ),
    (
        "access-mode-unknown",
        merge(PV, {"spec": {"accessModes": ["ReadWriteSome"]}}),
        [("spec.accessModes[0]", NOT_SUPPORTED)],
    ),
    (
        "read-write-once-pod-alone",
        merge(PV, {"spec": {"accessModes": ["ReadWriteOncePod", "ReadOnlyMany"]}}),
        [("spec.accessModes", FORBIDDEN)],
    ),
    ("no-source", merge(PV, {"spec": {"nfs": None}}), [("spec", REQUIRED)]),
    (
        "two-sources",
        merge(PV, {"spec": {"hostPath": {"path": "/data"}}}),
        [("spec.nfs", FORBIDDEN)],
    ),
    (
        "nfs-relative-path",
        merge(PV, {"spec": {"nfs": {"path": "exports"}}}),
        [("spec.nfs.path", INVALID)],
    ),
    (
        "nfs-server-required",
        merge(PV, {"spec": {"nfs": {"server": None}}}),
        [("spec.nfs.server", REQUIRED)],
    ),
    (
        "reclaim-policy",
        merge(PV, {"spec": {"persistentVolumeReclaimPolicy": "Keep"}}),
        [("spec.persistentVolumeReclaimPolicy", NOT_SUPPORTED)],
    ),
    (
        "recycle-root-host-path",
        merge(
            PV,
            {
                "spec": {
                    "nfs": None,
                    "hostPath": {"path": "/"},
                    "persistentVolumeReclaimPolicy": "Recycle",
                }
            },
        ),
        [("spec.persistentVolumeReclaimPolicy", FORBIDDEN)],
    ),
    (
        "local-needs-node-affinity",
        merge(PV, {"spec": {"nfs": None, "local": {"path": "/mnt/disks/ssd1"}}}),
        [("spec.nodeAffinity", REQUIRED)],
    ),
    (
        "node-affinity-required",
        merge(PV, {"spec": {"nodeAffinity": {}}}),
        [("spec.nodeAffinity.required", REQUIRED)],
    ),
    (
        "node-affinity-label-value",
        merge(
            PV,
            {
                "spec": {
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "host", "operator": "In", "values": ["bad value"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
        ),
        [
            (
                "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]",
                INVALID,
            )
        ],
    ),
    (
        "storage-class-name",
        merge(PV, {"spec": {"storageClassName": "Fast_SSD"}}),
        [("spec.storageClassName", INVALID)],
    ),
    (
        "volume-mode",
        merge(PV, {"spec": {"volumeMode": "Raw"}}),
        [("spec.volumeMode", NOT_SUPPORTED)],
    ),
    (
        "attributes-class-needs-csi",
        merge(PV, {"spec": {"volumeAttributesClassName": "gold"}}),
        [("spec.csi", REQUIRED)],
    ),
    (
        "csi-secret-needs-namespace",
        merge(
            PV,
            {
                "spec": {
                    "nfs": None,
                    "csi": {
                        "driver": "ebs.csi.aws.com",
                        "volumeHandle": "vol-1",
                        "nodeStageSecretRef": {"name": "s"},
                    },
                }
            },
        ),
        [("spec.csi.nodeStageSecretRef.namespace", REQUIRED)],
    ),
    (
        "csi-driver-name",
        merge(PV, {"spec": {"nfs": None, "csi": {"driver": "Bad_Driver", "volumeHandle": "v"}}}),
        [("spec.csi.driver", INVALID)],
    ),
    (
        "iscsi-iqn-format",
        merge(PV, {"spec": {"nfs": None, "iscsi": {"targetPortal": "p", "iqn": "iqn.bad"}}}),
        [("spec.iscsi.iqn", INVALID)],
    ),
    (
        "iscsi-chap-needs-secret",
        merge(
            PV,
            {
                "spec": {
                    "nfs": None,
                    "iscsi": {
                        "targetPortal": "p",
                        "iqn": "eui.0123456789ABCDEF",
                        "chapAuthSession": True,
                    },
                }
            },
        ),
        [("spec.iscsi.secretRef", REQUIRED)],
    ),
    (
        "fc-needs-targets",
        merge(PV, {"spec": {"nfs": None, "fc": {}}}),
        [("spec.fc.targetWWNs", REQUIRED)],
    ),
    (
        "azure-managed-disk-uri",
        merge(
            PV,
            {
                "spec": {
                    "nfs": None,
                    "azureDisk": {"diskName": "d", "diskURI": "https://x", "kind": "Managed"},
                }
            },
        ),
        [("spec.azureDisk.diskURI", NOT_SUPPORTED)],
    ),
    (
        "flex-reserved-option",
        merge(
            PV,
            {
                "spec": {
                    "nfs": None,
                    "flexVolume": {"driver": "d", "options": {"kubernetes.io/secret": "x"}},
                }
            },
        ),
        [("spec.flexVolume.options[kubernetes.io/secret]", INVALID)],
    ),
    (
        "glusterfs-endpoints-namespace",
        merge(
            PV,
            {
                "spec": {
                    "nfs": None,
                    "glusterfs": {"endpoints": "e", "path": "p", "endpointsNamespace": ""},
                }
            },
        ),
        [("spec.glusterfs.endpointsNamespace", INVALID)],
    ),
    (
        "namespaced-volume",
        merge(PV, {"metadata": {"namespace": "default"}}),
        [("metadata.namespace", FORBIDDEN)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in PV_CASES], ids=[c[0] for c in PV_CASES]
)
def test_persistent_volume_validation(raw: dict[str, Any], expected: list[Problem]) -> None:
    assert problems(decode(raw, PersistentVolume)) == ordered(expected)


PV_UPDATES: list[tuple[str, dict[str, Any], list[Problem]]] = [
    ("capacity", {"spec": {"capacity": {"storage": "20Gi"}}}, []),
    ("reclaim-policy", {"spec": {"persistentVolumeReclaimPolicy": "Delete"}}, []),
    ("claim-ref", {"spec": {"claimRef": {"namespace": "default", "name": "data"}}}, []),
    (
        "source",
        {"spec": {"nfs": {"path": "/exports/b"}}},
        [("spec.persistentvolumesource", FORBIDDEN)],
    ),
    ("volume-mode", {"spec": {"volumeMode": "Block"}}, [("volumeMode", INVALID)]),
]


@pytest.mark.parametrize(
    ("patch", "expected"), [c[1:] for c in PV_UPDATES], ids=[c[0] for c in PV_UPDATES]
)
def test_persistent_volume_update(patch: dict[str, Any], expected: list[Problem]) -> None:
    old, new = decode(PV, PersistentVolume), decode(merge(PV, patch), PersistentVolume)
    assert ordered((e.field, e.type) for e in walk.validate_update(new, old)) == ordered(expected)


def test_persistent_volume_source_message() -> None:
    old = decode(PV, PersistentVolume)
    new = decode(merge(PV, {"spec": {"nfs": {"path": "/exports/b"}}}), PersistentVolume)
    (error,) = walk.validate_update(new, old)
    assert error.detail.startswith("spec.persistentvolumesource is immutable after creation\n")
    assert '+ nfs: {"server":"nfs.local","path":"/exports/b"}' in error.detail


def test_csi_volume_may_gain_expand_secret() -> None:
    csi = merge(
        PV, {"spec": {"nfs": None, "csi": {"driver": "d.example.com", "volumeHandle": "v"}}}
    )
    grown = merge(
        csi, {"spec": {"csi": {"controllerExpandSecretRef": {"name": "s", "namespace": "ns"}}}}
    )
    old, new = decode(csi, PersistentVolume), decode(grown, PersistentVolume)
    assert list(walk.validate_update(new, old)) == []


# PersistentVolumeClaim validation.


PVC_CASES: list[tuple[str, dict[str, Any], list[Problem]]] = [
    ("valid", PVC, []),
    (
        "access-modes-required",
        merge(PVC, {"spec": {"accessModes": None}}),
        [("spec.accessModes", REQUIRED)],
    ),
    (
        "access-mode-unknown",
        merge(PVC, {"spec": {"accessModes": ["Once"]}}),
        [("spec.accessModes[0]", NOT_SUPPORTED)],
    ),
    (
        "storage-required",
        merge(PVC, {"spec": {"resources": None}}),
        [("spec.resources[storage]", REQUIRED)],
    ),
    (
        "storage-positive",
        merge(PVC, {"spec": {"resources": {"requests": {"storage": "0"}}}}),
        [("spec.resources[storage]", INVALID)],
    ),
    (
        "storage-class",
        merge(PVC, {"spec": {"storageClassName": "Standard"}}),
        [("spec.storageClassName", INVALID)],
    ),
    (
        "data-source-kind",
        merge(PVC, {"spec": {"dataSource": {"kind": "Secret", "name": "s"}}}),
        [("spec.dataSource", INVALID)],
    ),
    (
        "data-source-ref-must-match",
        merge(
            PVC,
            {
                "spec": {
                    "dataSource": {"kind": "PersistentVolumeClaim", "name": "a"},
                    "dataSourceRef": {"kind": "PersistentVolumeClaim", "name": "b"},
                }
            },
        ),
        [("spec", INVALID)],
    ),
    (
        "snapshot-source",
        merge(
            PVC,
            {
                "spec": {
                    "dataSource": {
                        "apiGroup": "snapshot.storage.k8s.io",
                        "kind": "VolumeSnapshot",
                        "name": "snap",
                    }
                }
            },
        ),
        [],
    ),
    (
        "selector",
        merge(PVC, {"spec": {"selector": {"matchLabels": {"tier": "a b"}}}}),
        [("spec.selector.matchLabels", INVALID)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in PVC_CASES], ids=[c[0] for c in PVC_CASES]
)
def test_claim_validation(raw: dict[str, Any], expected: list[Problem]) -> None:
    assert problems(decode(raw, PersistentVolumeClaim)) == ordered(expected)


BOUND = merge(
    PVC,
    {"spec": {"volumeName": "pv-1"}, "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}},
)

PVC_UPDATES: list[tuple[str, dict[str, Any], dict[str, Any], list[Problem]]] = [
    ("bind-volume-name", PVC, {"spec": {"volumeName": "pv-1"}}, []),
    ("rebind", BOUND, {"spec": {"volumeName": "pv-2"}}, [("spec", FORBIDDEN)]),
    ("resize-bound", BOUND, {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}, []),
    (
        "resize-unbound",
        PVC,
        {"spec": {"resources": {"requests": {"storage": "2Gi"}}}},
        [("spec", FORBIDDEN)],
    ),
    (
        "shrink-bound",
        merge(BOUND, {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
        {"spec": {"resources": {"requests": {"storage": "1Gi"}}}},
        [("spec.resources.requests.storage", FORBIDDEN)],
    ),
    ("access-modes", BOUND, {"spec": {"accessModes": ["ReadWriteMany"]}}, [("spec", FORBIDDEN)]),
    ("attributes-class-bound", BOUND, {"spec": {"volumeAttributesClassName": "gold"}}, []),
    (
        "attributes-class-removed",
        merge(BOUND, {"spec": {"volumeAttributesClassName": "gold"}}),
        {"spec": {"volumeAttributesClassName": None}},
        [("spec.volumeAttributesClassName", FORBIDDEN)],
    ),
    (
        "storage-class-from-unset",
        merge(PVC, {"spec": {"storageClassName": None}}),
        {"spec": {"storageClassName": "standard"}},
        [],
    ),
    ("storage-class-changed", PVC, {"spec": {"storageClassName": "fast"}}, [("spec", FORBIDDEN)]),
    (
        "volume-mode",
        PVC,
        {"spec": {"volumeMode": "Block"}},
        [("spec", FORBIDDEN), ("volumeMode", INVALID)],
    ),
]


@pytest.mark.parametrize(
    ("base", "patch", "expected"), [c[1:] for c in PVC_UPDATES], ids=[c[0] for c in PVC_UPDATES]
)
def test_claim_update(base: dict[str, Any], patch: dict[str, Any], expected: list[Problem]) -> None:
    old = decode(base, PersistentVolumeClaim)
    new = decode(merge(base, patch), PersistentVolumeClaim)
    assert ordered((e.field, e.type) for e in walk.validate_update(new, old)) == ordered(expected)


def test_claim_update_message() -> None:
    old = decode(BOUND, PersistentVolumeClaim)
    new = decode(merge(BOUND, {"spec": {"accessModes": ["ReadWriteMany"]}}), PersistentVolumeClaim)
    (error,) = walk.validate_update(new, old)
    assert error.detail == (
        "spec is immutable after creation except resources.requests and "
        "volumeAttributesClassName for bound claims\n"
        '- accessModes: ["ReadWriteOnce"]\n'
        '+ accessModes: ["ReadWriteMany"]'
    )


# Pod volumes.


def pod_with(volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [{"name": "a", "image": "a"}],
            "volumes": volumes,
            "serviceAccountName": "sa",
        },
    }


VOLUME_CASES: list[tuple[str, list[dict[str, Any]], list[Problem]]] = [
    (
        "config-map-name",
        [{"name": "v", "configMap": {}}],
        [("spec.volumes[0].configMap.name", REQUIRED)],
    ),
    (
        "key-to-path-absolute",
        [{"name": "v", "secret": {"secretName": "s", "items": [{"key": "k", "path": "/etc/k"}]}}],
        [("spec.volumes[0].secret.items[0].path", INVALID)],
    ),
    (
        "key-to-path-dotdot",
        [{"name": "v", "configMap": {"name": "c", "items": [{"key": "k", "path": "..data"}]}}],
        [("spec.volumes[0].configMap.items[0].path", INVALID)],
    ),
    (
        "default-mode-range",
        [{"name": "v", "configMap": {"name": "c", "defaultMode": 1000}}],
        [("spec.volumes[0].configMap.defaultMode", INVALID)],
    ),
    (
        "host-path-type",
        [{"name": "v", "hostPath": {"path": "/x", "type": "Folder"}}],
        [("spec.volumes[0].hostPath.type", NOT_SUPPORTED)],
    ),
    (
        "host-path-backsteps",
        [{"name": "v", "hostPath": {"path": "/var/../etc"}}],
        [("spec.volumes[0].hostPath.path", INVALID)],
    ),
    (
        "empty-dir-negative-size",
        [{"name": "v", "emptyDir": {"sizeLimit": "-1Gi"}}],
        [("spec.volumes[0].emptyDir.sizeLimit", FORBIDDEN)],
    ),
    (
        "downward-api-field",
        [
            {
                "name": "v",
                "downwardAPI": {
                    "items": [{"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}}]
                },
            }
        ],
        [("spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath", NOT_SUPPORTED)],
    ),
    (
        "downward-api-resource-needs-container",
        [
            {
                "name": "v",
                "downwardAPI": {
                    "items": [{"path": "cpu", "resourceFieldRef": {"resource": "limits.cpu"}}]
                },
            }
        ],
        [("spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName", REQUIRED)],
    ),
    (
        "downward-api-no-source",
        [{"name": "v", "downwardAPI": {"items": [{"path": "x"}]}}],
        [("spec.volumes[0].downwardAPI.items[0]", REQUIRED)],
    ),
    (
        "projection-two-sources",
        [
            {
                "name": "v",
                "projected": {"sources": [{"secret": {"name": "s"}, "configMap": {"name": "c"}}]},
            }
        ],
        [("spec.volumes[0].projected.sources[0]", FORBIDDEN)],
    ),
    (
        "projection-duplicate-paths",
        [
            {
                "name": "v",
                "projected": {
                    "sources": [
                        {"secret": {"name": "s", "items": [{"key": "a", "path": "x"}]}},
                        {"configMap": {"name": "c", "items": [{"key": "b", "path": "x"}]}},
                    ]
                },
            }
        ],
        [("spec.volumes[0].projected", INVALID)],
    ),
    (
        "token-expiration",
        [
            {
                "name": "v",
                "projected": {
                    "sources": [{"serviceAccountToken": {"path": "t", "expirationSeconds": 60}}]
                },
            }
        ],
        [("spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds", INVALID)],
    ),
    (
        "cluster-trust-bundle-name-and-signer",
        [
            {
                "name": "v",
                "projected": {
                    "sources": [
                        {"clusterTrustBundle": {"name": "a", "signerName": "b", "path": "ca"}}
                    ]
                },
            }
        ],
        [("spec.volumes[0].projected.sources[0].clusterTrustBundle", INVALID)],
    ),
    (
        "pvc-claim-name",
        [{"name": "v", "persistentVolumeClaim": {}}],
        [("spec.volumes[0].persistentVolumeClaim.claimName", REQUIRED)],
    ),
    (
        "ephemeral-template-spec",
        [
            {
                "name": "v",
                "ephemeral": {
                    "volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}
                },
            }
        ],
        [("spec.volumes[0].ephemeral.volumeClaimTemplate.spec.accessModes", REQUIRED)],
    ),
    (
        "ephemeral-template-metadata",
        [
            {
                "name": "v",
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "metadata": {"name": "x"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                },
            }
        ],
        [("spec.volumes[0].ephemeral.volumeClaimTemplate.metadata.name", FORBIDDEN)],
    ),
    (
        "csi-driver-too-long",
        [{"name": "v", "csi": {"driver": "d" * 64}}],
        [("spec.volumes[0].csi.driver", TOO_LONG)],
    ),
    (
        "nfs-and-git-repo",
        [
            {
                "name": "v",
                "gitRepo": {"repository": "https://x"},
                "nfs": {"server": "s", "path": "/p"},
            }
        ],
        [("spec.volumes[0].nfs", FORBIDDEN)],
    ),
    (
        "iscsi-name-too-long",
        [
            {
                "name": "v" * 45,
                "iscsi": {
                    "targetPortal": "portal.example.com:3260",
                    "iqn": "iqn.2001-04.com.example:storage",
                    "initiatorName": "iqn.2001-04.com.example:client",
                },
            }
        ],
        [("spec.volumes[0].name", INVALID)],
    ),
]


@pytest.mark.parametrize(
    ("volumes", "expected"), [c[1:] for c in VOLUME_CASES], ids=[c[0] for c in VOLUME_CASES]
)
def test_pod_volume_validation(volumes: list[dict[str, Any]], expected: list[Problem]) -> None:
    assert problems(decode(pod_with(volumes), Pod)) == ordered(expected)


# Printer cells.


def test_persistent_volume_cells() -> None:
    bound = merge(
        PV,
        {
            "spec": {
                "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                "claimRef": {"namespace": "default", "name": "data"},
                "storageClassName": "nfs",
            },
            "status": {"phase": "Bound"},
        },
    )
    assert cells(decode(bound, PersistentVolume)) == [
        "pv-1",
        "10Gi",
        "RWO,RWX",
        "Retain",
        "Bound",
        "default/data",
        "nfs",
        "<unset>",
        "",
        "5m",
        "Filesystem",
    ]
    released = merge(
        PV,
        {
            "metadata": {
                "deletionTimestamp": "2026-01-01T11:59:00Z",
                "annotations": {"volume.beta.kubernetes.io/storage-class": "old"},
            },
            "status": {"phase": "Released", "reason": "Gone"},
        },
    )
    assert cells(decode(released, PersistentVolume), wide=False) == [
        "pv-1",
        "10Gi",
        "RWO",
        "Retain",
        "Terminating",
        "",
        "old",
        "<unset>",
        "Gone",
        "5m",
    ]
    assert [c.name for c in PersistentVolume.kind_info.columns] == [
        "Name",
        "Capacity",
        "Access Modes",
        "Reclaim Policy",
        "Status",
        "Claim",
        "StorageClass",
        "VolumeAttributesClass",
        "Reason",
        "Age",
        "VolumeMode",
    ]


def test_claim_cells() -> None:
    assert cells(decode(PVC, PersistentVolumeClaim)) == [
        "data",
        "Pending",
        "",
        "",
        "",
        "standard",
        "<unset>",
        "5m",
        "Filesystem",
    ]
    bound = merge(
        BOUND,
        {
            "status": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1024Mi"}},
            "spec": {"volumeAttributesClassName": "gold"},
        },
    )
    assert cells(decode(bound, PersistentVolumeClaim)) == [
        "data",
        "Bound",
        "pv-1",
        "1Gi",
        "RWO",
        "standard",
        "gold",
        "5m",
        "Filesystem",
    ]
    assert [c.name for c in PersistentVolumeClaim.kind_info.columns] == [
        "Name",
        "Status",
        "Volume",
        "Capacity",
        "Access Modes",
        "StorageClass",
        "VolumeAttributesClass",
        "Age",
        "VolumeMode",
    ]


@pytest.mark.parametrize(
    ("modes", "text"),
    [
        (None, ""),
        (["ReadWriteOncePod"], "RWOP"),
        (["ReadWriteMany", "ReadOnlyMany", "ReadWriteOnce", "ReadWriteOnce"], "RWO,ROX,RWX"),
    ],
    ids=["none", "once-pod", "ordered-deduplicated"],
)
def test_access_modes_text(modes: list[str] | None, text: str) -> None:
    assert access_modes_text(modes) == text


def test_registrations() -> None:
    pv, pvc = PersistentVolume.kind_info, PersistentVolumeClaim.kind_info
    assert (pv.plural, pv.namespaced, pv.short_names, pv.subresources) == (
        "persistentvolumes",
        False,
        ("pv",),
        ("status",),
    )
    assert (pvc.plural, pvc.namespaced, pvc.short_names, pvc.subresources) == (
        "persistentvolumeclaims",
        True,
        ("pvc",),
        ("status",),
    )
    assert pv.selectable_fields(decode(PV, PersistentVolume)) == {"metadata.name": "pv-1"}
