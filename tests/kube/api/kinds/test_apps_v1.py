"""apps/v1: defaults, validation, update rules, printer cells and field selectors."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kube.api import walk
from kube.api.errors import ErrorType
from kube.api.kinds.apps_v1 import (
    ControllerRevision,
    DaemonSet,
    Deployment,
    ReplicaSet,
    StatefulSet,
)
from kube.api.meta_v1 import Resource
from kube.api.struct import DNS1123_LABEL
from tests.kube.api.kinds.helpers import (
    CREATED,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    decode,
    merge,
    named_cells,
    problems,
)


def spec_of(obj: Any) -> dict[str, Any]:
    built = msgspec.to_builtins(obj)
    assert isinstance(built, dict)
    return built["spec"]  # type: ignore[no-any-return]


TEMPLATE = {
    "metadata": {"labels": {"app": "web", "tier": "front"}},
    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
}
METADATA = {"name": "web", "namespace": "default", "creationTimestamp": CREATED}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": METADATA,
    "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
}
REPLICA_SET = merge(DEPLOYMENT, {"kind": "ReplicaSet"})
DAEMON_SET = merge(DEPLOYMENT, {"kind": "DaemonSet"})
STATEFUL_SET = merge(DEPLOYMENT, {"kind": "StatefulSet", "spec": {"serviceName": "web"}})
CONTROLLER_REVISION = {
    "apiVersion": "apps/v1",
    "kind": "ControllerRevision",
    "metadata": {
        "name": "web-5d4b9c",
        "namespace": "default",
        "creationTimestamp": CREATED,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "name": "web",
                "uid": "1234",
                "controller": True,
            }
        ],
    },
    "data": {"spec": {"template": TEMPLATE}},
    "revision": 3,
}


# Registration.


@pytest.mark.parametrize(
    ("cls", "plural", "short", "subresources"),
    [
        (Deployment, "deployments", ("deploy",), ("status", "scale")),
        (ReplicaSet, "replicasets", ("rs",), ("status", "scale")),
        (DaemonSet, "daemonsets", ("ds",), ("status",)),
        (StatefulSet, "statefulsets", ("sts",), ("status", "scale")),
        (ControllerRevision, "controllerrevisions", (), ()),
    ],
    ids=["deployment", "replicaset", "daemonset", "statefulset", "controllerrevision"],
)
def test_registration(
    cls: type[Resource], plural: str, short: tuple[str, ...], subresources: tuple[str, ...]
) -> None:
    info = cls.kind_info
    assert (info.group, info.version, info.plural, info.namespaced) == ("apps", "v1", plural, True)
    assert info.short_names == short
    assert info.subresources == subresources
    assert info.categories == (("all",) if cls is not ControllerRevision else ())


def test_statefulset_names_are_dns_labels() -> None:
    assert StatefulSet.kind_info.name_format == DNS1123_LABEL
    assert problems(decode(merge(STATEFUL_SET, {"metadata": {"name": "web.v2"}}), StatefulSet)) == [
        ("metadata.name", INVALID)
    ]


# Defaults.


@pytest.mark.parametrize(
    ("cls", "raw", "expected"),
    [
        (
            Deployment,
            DEPLOYMENT,
            {
                "replicas": 1,
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
                },
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600,
            },
        ),
        (
            Deployment,
            merge(DEPLOYMENT, {"spec": {"strategy": {"type": "Recreate"}}}),
            {"strategy": {"type": "Recreate"}},
        ),
        (
            Deployment,
            merge(
                DEPLOYMENT,
                {
                    "spec": {
                        "replicas": 0,
                        "strategy": {"rollingUpdate": {"maxSurge": 2}},
                        "revisionHistoryLimit": 0,
                        "progressDeadlineSeconds": 30,
                    }
                },
            ),
            {
                "replicas": 0,
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 2},
                },
                "revisionHistoryLimit": 0,
                "progressDeadlineSeconds": 30,
            },
        ),
        (ReplicaSet, REPLICA_SET, {"replicas": 1}),
        (
            DaemonSet,
            DAEMON_SET,
            {
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
                },
                "revisionHistoryLimit": 10,
            },
        ),
        (
            DaemonSet,
            merge(DAEMON_SET, {"spec": {"updateStrategy": {"type": "OnDelete"}}}),
            {"updateStrategy": {"type": "OnDelete"}},
        ),
        (
            StatefulSet,
            STATEFUL_SET,
            {
                "replicas": 1,
                "podManagementPolicy": "OrderedReady",
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"partition": 0, "maxUnavailable": 1},
                },
                "persistentVolumeClaimRetentionPolicy": {
                    "whenDeleted": "Retain",
                    "whenScaled": "Retain",
                },
                "revisionHistoryLimit": 10,
            },
        ),
        (
            StatefulSet,
            merge(
                STATEFUL_SET,
                {
                    "spec": {
                        "updateStrategy": {"type": "OnDelete"},
                        "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"},
                    }
                },
            ),
            {
                "updateStrategy": {"type": "OnDelete"},
                "persistentVolumeClaimRetentionPolicy": {
                    "whenDeleted": "Retain",
                    "whenScaled": "Delete",
                },
            },
        ),
        (
            StatefulSet,
            merge(STATEFUL_SET, {"spec": {"updateStrategy": {"type": "RollingUpdate"}}}),
            {"updateStrategy": {"type": "RollingUpdate"}},
        ),
    ],
    ids=[
        "deployment",
        "deployment-recreate-no-rolling-update",
        "deployment-keeps-user-values",
        "replicaset",
        "daemonset",
        "daemonset-on-delete",
        "statefulset",
        "statefulset-on-delete-and-partial-policy",
        "statefulset-explicit-type-gets-no-rolling-update",
    ],
)
def test_defaults(cls: type[Resource], raw: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = spec_of(decode(raw, cls))
    assert {key: spec.get(key) for key in expected} == expected


CLAIM_TEMPLATES = {
    "spec": {
        "volumeClaimTemplates": [
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        ]
    }
}


def test_statefulset_claim_templates_carry_their_type() -> None:
    claim = spec_of(decode(merge(STATEFUL_SET, CLAIM_TEMPLATES), StatefulSet))[
        "volumeClaimTemplates"
    ][0]
    assert (claim["apiVersion"], claim["kind"], claim["status"]) == (
        "v1",
        "PersistentVolumeClaim",
        {"phase": "Pending"},
    )


def test_statefulset_pod_template_is_defaulted_but_its_spec_not_validated() -> None:
    # Upstream's ValidatePodTemplateSpecForStatefulSet checks only labels and annotations.
    raw = merge(STATEFUL_SET, {"spec": {"template": {"spec": {"containers": [{"name": "web"}]}}}})
    sts = decode(raw, StatefulSet)
    assert spec_of(sts)["template"]["spec"]["restartPolicy"] == "Always"
    assert problems(sts) == []
    bad_label = merge(raw, {"spec": {"template": {"metadata": {"labels": {"a b": "x"}}}}})
    assert problems(decode(bad_label, StatefulSet)) == [(LABELS, INVALID)]


def mounts(*names: str, field: str = "volumeMounts") -> dict[str, Any]:
    """A template whose container mounts (or, for block devices, attaches) the named volumes."""
    key = "mountPath" if field == "volumeMounts" else "devicePath"
    uses = [{"name": name, key: f"/mnt/{name}"} for name in names]
    return {
        "spec": {
            "template": {
                "spec": {
                    "volumes": [{"name": "cache", "emptyDir": {}}],
                    "containers": [{"name": "web", "image": "nginx:1.27", field: uses}],
                }
            }
        }
    }


# Validation.

NO_SELECTOR = {"spec": {"selector": None}}
EMPTY_SELECTOR = {"spec": {"selector": {"matchLabels": None}}}
OTHER_SELECTOR = {"spec": {"selector": {"matchLabels": {"app": "db"}}}}
EXPRESSION_SELECTOR = {
    "spec": {
        "selector": {
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]
        }
    }
}
NEVER_RESTART = {"spec": {"template": {"spec": {"restartPolicy": "Never"}}}}
DEADLINE = {"spec": {"template": {"spec": {"activeDeadlineSeconds": 30}}}}
LABELS = "spec.template.metadata.labels"
RESTART = "spec.template.spec.restartPolicy"
ROLLING = "spec.strategy.rollingUpdate"
DS_ROLLING = "spec.updateStrategy.rollingUpdate"


def rolling(**values: Any) -> dict[str, Any]:
    return {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": values}}}


def ds_rolling(**values: Any) -> dict[str, Any]:
    return {"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": values}}}


def sts_rolling(**values: Any) -> dict[str, Any]:
    return {"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": values}}}


VALIDATION: list[tuple[str, type[Resource], dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("deployment-valid", Deployment, DEPLOYMENT, []),
    ("deployment-expression-selector", Deployment, merge(DEPLOYMENT, EXPRESSION_SELECTOR), []),
    ("deployment-no-spec", Deployment, {**DEPLOYMENT, "spec": None}, [("spec", REQUIRED)]),
    (
        "deployment-no-selector",
        Deployment,
        merge(DEPLOYMENT, NO_SELECTOR),
        [("spec.selector", REQUIRED), (LABELS, INVALID)],
    ),
    (
        "deployment-empty-selector",
        Deployment,
        merge(DEPLOYMENT, EMPTY_SELECTOR),
        [("spec.selector", INVALID)],
    ),
    (
        "deployment-selector-mismatch",
        Deployment,
        merge(DEPLOYMENT, OTHER_SELECTOR),
        [(LABELS, INVALID)],
    ),
    (
        "deployment-negative-replicas",
        Deployment,
        merge(DEPLOYMENT, {"spec": {"replicas": -1}}),
        [("spec.replicas", INVALID)],
    ),
    (
        "deployment-restart-never",
        Deployment,
        merge(DEPLOYMENT, NEVER_RESTART),
        [(RESTART, NOT_SUPPORTED)],
    ),
    (
        "deployment-active-deadline",
        Deployment,
        merge(DEPLOYMENT, DEADLINE),
        [("spec.template.spec.activeDeadlineSeconds", FORBIDDEN)],
    ),
    (
        "deployment-percent-and-int",
        Deployment,
        merge(DEPLOYMENT, rolling(maxSurge=3, maxUnavailable="10%")),
        [],
    ),
    (
        "deployment-bad-percent",
        Deployment,
        merge(DEPLOYMENT, rolling(maxSurge="ten%", maxUnavailable=1)),
        [(f"{ROLLING}.maxSurge", INVALID)],
    ),
    (
        "deployment-negative-surge",
        Deployment,
        merge(DEPLOYMENT, rolling(maxSurge=-1, maxUnavailable=1)),
        [(f"{ROLLING}.maxSurge", INVALID)],
    ),
    (
        "deployment-both-zero",
        Deployment,
        merge(DEPLOYMENT, rolling(maxSurge=0, maxUnavailable="0%")),
        [(f"{ROLLING}.maxUnavailable", INVALID)],
    ),
    (
        "deployment-unavailable-over-100",
        Deployment,
        merge(DEPLOYMENT, rolling(maxSurge=0, maxUnavailable="150%")),
        [(f"{ROLLING}.maxUnavailable", INVALID)],
    ),
    (
        "deployment-surge-over-100-allowed",
        Deployment,
        merge(DEPLOYMENT, rolling(maxSurge="200%", maxUnavailable=0)),
        [],
    ),
    (
        "deployment-recreate-with-rolling",
        Deployment,
        merge(DEPLOYMENT, {"spec": {"strategy": {"type": "Recreate", "rollingUpdate": {}}}}),
        [(ROLLING, FORBIDDEN)],
    ),
    (
        "deployment-unknown-strategy",
        Deployment,
        merge(DEPLOYMENT, {"spec": {"strategy": {"type": "BlueGreen"}}}),
        [("spec.strategy.type", NOT_SUPPORTED)],
    ),
    (
        "deployment-deadline-not-above-min-ready",
        Deployment,
        merge(DEPLOYMENT, {"spec": {"minReadySeconds": 30, "progressDeadlineSeconds": 30}}),
        [("spec.progressDeadlineSeconds", INVALID)],
    ),
    (
        "deployment-negative-history",
        Deployment,
        merge(DEPLOYMENT, {"spec": {"revisionHistoryLimit": -1}}),
        [("spec.revisionHistoryLimit", INVALID)],
    ),
    (
        "deployment-status-counters",
        Deployment,
        merge(
            DEPLOYMENT,
            {
                "status": {
                    "replicas": 2,
                    "readyReplicas": 3,
                    "availableReplicas": 3,
                    "updatedReplicas": -1,
                }
            },
        ),
        [
            ("status.availableReplicas", INVALID),
            ("status.readyReplicas", INVALID),
            ("status.updatedReplicas", INVALID),
        ],
    ),
    ("replicaset-valid", ReplicaSet, REPLICA_SET, []),
    (
        "replicaset-no-selector",
        ReplicaSet,
        merge(REPLICA_SET, NO_SELECTOR),
        [("spec.selector", REQUIRED), (LABELS, INVALID)],
    ),
    (
        "replicaset-empty-selector",
        ReplicaSet,
        merge(REPLICA_SET, EMPTY_SELECTOR),
        [("spec.selector", INVALID)],
    ),
    (
        "replicaset-selector-mismatch",
        ReplicaSet,
        merge(REPLICA_SET, OTHER_SELECTOR),
        [(LABELS, INVALID)],
    ),
    (
        "replicaset-no-template",
        ReplicaSet,
        merge(REPLICA_SET, {"spec": {"template": None}}),
        [("spec.template", REQUIRED), (LABELS, INVALID)],
    ),
    (
        "replicaset-restart-on-failure",
        ReplicaSet,
        merge(REPLICA_SET, {"spec": {"template": {"spec": {"restartPolicy": "OnFailure"}}}}),
        [(RESTART, NOT_SUPPORTED)],
    ),
    (
        "replicaset-available-above-ready",
        ReplicaSet,
        merge(REPLICA_SET, {"status": {"replicas": 3, "readyReplicas": 1, "availableReplicas": 2}}),
        [("status.availableReplicas", INVALID)],
    ),
    ("daemonset-valid", DaemonSet, DAEMON_SET, []),
    (
        "daemonset-no-selector",
        DaemonSet,
        merge(DAEMON_SET, NO_SELECTOR),
        [("spec.selector", REQUIRED), (LABELS, INVALID)],
    ),
    (
        "statefulset-no-selector",
        StatefulSet,
        merge(STATEFUL_SET, NO_SELECTOR),
        [("spec.selector", REQUIRED), (LABELS, INVALID)],
    ),
    (
        "daemonset-empty-selector",
        DaemonSet,
        merge(DAEMON_SET, EMPTY_SELECTOR),
        [("spec.selector", INVALID)],
    ),
    (
        "daemonset-selector-mismatch",
        DaemonSet,
        merge(DAEMON_SET, OTHER_SELECTOR),
        [(LABELS, INVALID)],
    ),
    (
        "daemonset-restart-never",
        DaemonSet,
        merge(DAEMON_SET, NEVER_RESTART),
        [(RESTART, NOT_SUPPORTED)],
    ),
    (
        "daemonset-surge-only",
        DaemonSet,
        merge(DAEMON_SET, ds_rolling(maxSurge=1, maxUnavailable=0)),
        [],
    ),
    (
        "daemonset-surge-and-unavailable",
        DaemonSet,
        merge(DAEMON_SET, ds_rolling(maxSurge=1, maxUnavailable=1)),
        [(f"{DS_ROLLING}.maxSurge", INVALID)],
    ),
    (
        "daemonset-both-zero",
        DaemonSet,
        merge(DAEMON_SET, ds_rolling(maxSurge="0%", maxUnavailable=0)),
        [(f"{DS_ROLLING}.maxUnavailable", REQUIRED)],
    ),
    (
        "daemonset-surge-over-100",
        DaemonSet,
        merge(DAEMON_SET, ds_rolling(maxSurge="101%", maxUnavailable=0)),
        [(f"{DS_ROLLING}.maxSurge", INVALID)],
    ),
    (
        "daemonset-unknown-strategy",
        DaemonSet,
        merge(DAEMON_SET, {"spec": {"updateStrategy": {"type": "Surge"}}}),
        [("spec.updateStrategy.type", NOT_SUPPORTED)],
    ),
    ("statefulset-valid", StatefulSet, STATEFUL_SET, []),
    (
        "statefulset-mounts-claim-template",
        StatefulSet,
        merge(merge(STATEFUL_SET, CLAIM_TEMPLATES), mounts("data", "cache")),
        [],
    ),
    (
        "statefulset-device-from-claim-template",
        StatefulSet,
        merge(merge(STATEFUL_SET, CLAIM_TEMPLATES), mounts("data", field="volumeDevices")),
        [],
    ),
    (
        "statefulset-mounts-unknown-volume",
        StatefulSet,
        merge(merge(STATEFUL_SET, CLAIM_TEMPLATES), mounts("data", "logs")),
        [("spec.template.spec.containers[0].volumeMounts[1].name", ErrorType.NOT_FOUND)],
    ),
    (
        "deployment-mounts-unknown-volume",
        Deployment,
        merge(DEPLOYMENT, mounts("data")),
        [("spec.template.spec.containers[0].volumeMounts[0].name", ErrorType.NOT_FOUND)],
    ),
    (
        "statefulset-parallel",
        StatefulSet,
        merge(STATEFUL_SET, {"spec": {"podManagementPolicy": "Parallel"}}),
        [],
    ),
    (
        "statefulset-unknown-policy",
        StatefulSet,
        merge(STATEFUL_SET, {"spec": {"podManagementPolicy": "Random"}}),
        [("spec.podManagementPolicy", INVALID)],
    ),
    (
        "statefulset-empty-selector",
        StatefulSet,
        merge(STATEFUL_SET, EMPTY_SELECTOR),
        [("spec.selector", INVALID)],
    ),
    (
        "statefulset-selector-mismatch",
        StatefulSet,
        merge(STATEFUL_SET, OTHER_SELECTOR),
        [(LABELS, INVALID)],
    ),
    (
        "statefulset-restart-never",
        StatefulSet,
        merge(STATEFUL_SET, NEVER_RESTART),
        [(RESTART, NOT_SUPPORTED)],
    ),
    (
        "statefulset-active-deadline",
        StatefulSet,
        merge(STATEFUL_SET, DEADLINE),
        [("spec.template.spec.activeDeadlineSeconds", FORBIDDEN)],
    ),
    (
        "statefulset-on-delete-with-rolling",
        StatefulSet,
        merge(
            STATEFUL_SET, {"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": {}}}}
        ),
        [("spec.updateStrategy.rollingUpdate", INVALID)],
    ),
    (
        "statefulset-unknown-strategy",
        StatefulSet,
        merge(STATEFUL_SET, {"spec": {"updateStrategy": {"type": "Recreate"}}}),
        [("spec.updateStrategy", INVALID)],
    ),
    (
        "statefulset-negative-partition",
        StatefulSet,
        merge(STATEFUL_SET, sts_rolling(partition=-1)),
        [("spec.updateStrategy.rollingUpdate.partition", INVALID)],
    ),
    (
        "statefulset-zero-unavailable",
        StatefulSet,
        merge(STATEFUL_SET, sts_rolling(maxUnavailable="0%")),
        [("spec.updateStrategy.rollingUpdate.maxUnavailable", INVALID)],
    ),
    (
        "statefulset-unavailable-over-100",
        StatefulSet,
        merge(STATEFUL_SET, sts_rolling(maxUnavailable="101%")),
        [("spec.updateStrategy.rollingUpdate.maxUnavailable", INVALID)],
    ),
    (
        "statefulset-bad-retention",
        StatefulSet,
        merge(
            STATEFUL_SET,
            {"spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Keep"}}},
        ),
        [("spec.persistentVolumeClaimRetentionPolicy.whenDeleted", NOT_SUPPORTED)],
    ),
    (
        "statefulset-negative-ordinal",
        StatefulSet,
        merge(STATEFUL_SET, {"spec": {"ordinals": {"start": -1}}}),
        [("spec.ordinals.start", INVALID)],
    ),
    (
        "statefulset-current-above-replicas",
        StatefulSet,
        merge(STATEFUL_SET, {"status": {"replicas": 1, "readyReplicas": 1, "currentReplicas": 2}}),
        [("status.currentReplicas", INVALID)],
    ),
    ("controllerrevision-valid", ControllerRevision, CONTROLLER_REVISION, []),
    (
        "controllerrevision-no-data",
        ControllerRevision,
        merge(CONTROLLER_REVISION, {"data": None}),
        [("data", REQUIRED)],
    ),
    (
        "controllerrevision-negative",
        ControllerRevision,
        merge(CONTROLLER_REVISION, {"revision": -1}),
        [("revision", INVALID)],
    ),
]


@pytest.mark.parametrize(
    ("cls", "raw", "expected"),
    [case[1:] for case in VALIDATION],
    ids=[case[0] for case in VALIDATION],
)
def test_validation(
    cls: type[Resource], raw: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(raw, cls)) == sorted(expected)


@pytest.mark.parametrize(
    ("cls", "raw", "field", "message"),
    [
        (
            Deployment,
            merge(DEPLOYMENT, OTHER_SELECTOR),
            LABELS,
            'Invalid value: {"app": "web", "tier": "front"}: `selector` does not match template '
            "`labels`",
        ),
        (
            Deployment,
            merge(DEPLOYMENT, EMPTY_SELECTOR),
            "spec.selector",
            "Invalid value: {}: empty selector is invalid for deployment",
        ),
        (
            ReplicaSet,
            merge(REPLICA_SET, EMPTY_SELECTOR),
            "spec.selector",
            "Invalid value: {}: empty selector is invalid for deployment",
        ),
        (
            DaemonSet,
            merge(DAEMON_SET, EMPTY_SELECTOR),
            "spec.selector",
            "Invalid value: {}: empty selector is invalid for daemonset",
        ),
        (
            Deployment,
            merge(DEPLOYMENT, NEVER_RESTART),
            RESTART,
            'Unsupported value: "Never": supported values: "Always"',
        ),
        (
            Deployment,
            merge(DEPLOYMENT, DEADLINE),
            "spec.template.spec.activeDeadlineSeconds",
            "Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
        ),
        (
            Deployment,
            merge(DEPLOYMENT, rolling(maxSurge="x", maxUnavailable=1)),
            f"{ROLLING}.maxSurge",
            'Invalid value: "x": a valid percent string must be a numeric string followed by an '
            "ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
        ),
        (
            Deployment,
            merge(DEPLOYMENT, rolling(maxSurge=0, maxUnavailable=0)),
            f"{ROLLING}.maxUnavailable",
            "Invalid value: 0: may not be 0 when `maxSurge` is 0",
        ),
        (
            Deployment,
            merge(DEPLOYMENT, {"spec": {"strategy": {"type": "Recreate", "rollingUpdate": {}}}}),
            ROLLING,
            "Forbidden: may not be specified when strategy `type` is 'Recreate'",
        ),
        (
            Deployment,
            merge(DEPLOYMENT, {"spec": {"minReadySeconds": 700}}),
            "spec.progressDeadlineSeconds",
            "Invalid value: 600: must be greater than minReadySeconds",
        ),
        (
            DaemonSet,
            merge(DAEMON_SET, ds_rolling(maxSurge=0, maxUnavailable=0)),
            f"{DS_ROLLING}.maxUnavailable",
            "Required value: cannot be 0 when maxSurge is 0",
        ),
        (
            StatefulSet,
            merge(STATEFUL_SET, {"spec": {"podManagementPolicy": "Random"}}),
            "spec.podManagementPolicy",
            "Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'",
        ),
        (
            ControllerRevision,
            merge(CONTROLLER_REVISION, {"data": None}),
            "data",
            "Required value: data is mandatory",
        ),
    ],
    ids=[
        "selector-mismatch",
        "deployment-empty-selector",
        "replicaset-empty-selector-says-deployment",
        "daemonset-empty-selector",
        "restart-policy",
        "active-deadline",
        "bad-percent",
        "both-zero",
        "recreate-rolling-update",
        "progress-deadline",
        "daemonset-both-zero",
        "pod-management-policy",
        "revision-data",
    ],
)
def test_validation_messages(
    cls: type[Resource], raw: dict[str, Any], field: str, message: str
) -> None:
    assert [e.message for e in walk.validate(decode(raw, cls)) if e.field == field] == [message]


def test_validation_without_defaults_reports_what_defaulting_fills() -> None:
    raw = merge(STATEFUL_SET, {"spec": {"template": {"spec": {"restartPolicy": "Always"}}}})
    got = problems(decode(raw, StatefulSet, defaults=False))
    assert ("spec.podManagementPolicy", REQUIRED) in got
    assert ("spec.updateStrategy", REQUIRED) in got


# Updates.

UPDATES: list[
    tuple[str, type[Resource], dict[str, Any], dict[str, Any], list[tuple[str, ErrorType]]]
] = [
    ("deployment-scale", Deployment, DEPLOYMENT, {"spec": {"replicas": 5}}, []),
    (
        "deployment-new-image",
        Deployment,
        DEPLOYMENT,
        {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}}},
        [],
    ),
    (
        "deployment-selector",
        Deployment,
        DEPLOYMENT,
        {"spec": {"selector": {"matchLabels": {"app": "web", "tier": "front"}}}},
        [("spec.selector", INVALID)],
    ),
    (
        "replicaset-selector",
        ReplicaSet,
        REPLICA_SET,
        {"spec": {"selector": {"matchLabels": {"tier": "front"}}}},
        [("spec.selector", INVALID)],
    ),
    (
        "daemonset-selector",
        DaemonSet,
        DAEMON_SET,
        {"spec": {"selector": {"matchLabels": {"tier": "front"}}}},
        [("spec.selector", INVALID)],
    ),
    (
        "statefulset-mutable-fields",
        StatefulSet,
        STATEFUL_SET,
        {
            "spec": {
                "replicas": 3,
                "minReadySeconds": 5,
                "revisionHistoryLimit": 2,
                "ordinals": {"start": 1},
                "updateStrategy": {"type": "OnDelete", "rollingUpdate": None},
                "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"},
                "template": {"metadata": {"annotations": {"rev": "2"}}},
            }
        },
        [],
    ),
    (
        "statefulset-service-name",
        StatefulSet,
        STATEFUL_SET,
        {"spec": {"serviceName": "other"}},
        [("spec", FORBIDDEN)],
    ),
    (
        "statefulset-pod-management-policy",
        StatefulSet,
        STATEFUL_SET,
        {"spec": {"podManagementPolicy": "Parallel"}},
        [("spec", FORBIDDEN)],
    ),
    (
        "statefulset-selector",
        StatefulSet,
        STATEFUL_SET,
        {"spec": {"selector": {"matchLabels": {"tier": "front"}}}},
        [("spec", FORBIDDEN), ("spec.selector", INVALID)],
    ),
    (
        "controllerrevision-data",
        ControllerRevision,
        CONTROLLER_REVISION,
        {"data": {"x": 1}},
        [("data", INVALID)],
    ),
    (
        "controllerrevision-revision",
        ControllerRevision,
        CONTROLLER_REVISION,
        {"revision": 4},
        [("revision", INVALID)],
    ),
    (
        "controllerrevision-labels",
        ControllerRevision,
        CONTROLLER_REVISION,
        {"metadata": {"labels": {"a": "b"}}},
        [],
    ),
]


@pytest.mark.parametrize(
    ("cls", "raw", "patch", "expected"),
    [case[1:] for case in UPDATES],
    ids=[case[0] for case in UPDATES],
)
def test_update(
    cls: type[Resource],
    raw: dict[str, Any],
    patch: dict[str, Any],
    expected: list[tuple[str, ErrorType]],
) -> None:
    old = decode(raw, cls)  # the stored object, defaults applied
    new = decode(merge(msgspec.to_builtins(old), patch), cls)
    assert sorted((e.field, e.type) for e in walk.validate_update(new, old)) == sorted(expected)


def test_statefulset_update_message() -> None:
    old = decode(STATEFUL_SET, StatefulSet)
    new = decode(merge(STATEFUL_SET, {"spec": {"serviceName": "other"}}), StatefulSet)
    assert [str(e) for e in walk.validate_update(new, old)] == [
        "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', "
        "'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
        "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
    ]


# Printer cells.


def test_column_names() -> None:
    def names(cls: type[Resource]) -> list[tuple[str, int]]:
        return [(c.name, c.priority) for c in cls.kind_info.columns]

    wide = [("Containers", 1), ("Images", 1), ("Selector", 1)]
    assert names(Deployment) == [
        ("Name", 0),
        ("Ready", 0),
        ("Up-to-date", 0),
        ("Available", 0),
        ("Age", 0),
        *wide,
    ]
    assert names(ReplicaSet) == [
        ("Name", 0),
        ("Desired", 0),
        ("Current", 0),
        ("Ready", 0),
        ("Age", 0),
        *wide,
    ]
    assert names(DaemonSet) == [
        ("Name", 0),
        ("Desired", 0),
        ("Current", 0),
        ("Ready", 0),
        ("Up-to-date", 0),
        ("Available", 0),
        ("Node Selector", 0),
        ("Age", 0),
        *wide,
    ]
    assert names(StatefulSet) == [("Name", 0), ("Ready", 0), ("Age", 0), *wide[:2]]
    assert names(ControllerRevision) == [
        ("Name", 0),
        ("Controller", 0),
        ("Revision", 0),
        ("Age", 0),
    ]


TWO_CONTAINERS = {
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {"name": "web", "image": "nginx:1.27"},
                    {"name": "log", "image": "busybox"},
                ]
            }
        }
    }
}


@pytest.mark.parametrize(
    ("cls", "raw", "expected"),
    [
        (
            Deployment,
            merge(
                DEPLOYMENT,
                {
                    "spec": {"replicas": 3, "selector": EXPRESSION_SELECTOR["spec"]["selector"]},
                    "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 1},
                },
            ),
            {
                "Name": "web",
                "Ready": "2/3",
                "Up-to-date": 3,
                "Available": 1,
                "Age": "5m",
                "Containers": "web",
                "Images": "nginx:1.27",
                "Selector": "app=web,tier in (back,front)",
            },
        ),
        (
            Deployment,
            merge(DEPLOYMENT, TWO_CONTAINERS),
            {
                "Name": "web",
                "Ready": "0/1",
                "Up-to-date": 0,
                "Available": 0,
                "Age": "5m",
                "Containers": "web,log",
                "Images": "nginx:1.27,busybox",
                "Selector": "app=web",
            },
        ),
        (
            ReplicaSet,
            merge(
                REPLICA_SET,
                {"spec": {"replicas": 4}, "status": {"replicas": 3, "readyReplicas": 2}},
            ),
            {
                "Name": "web",
                "Desired": 4,
                "Current": 3,
                "Ready": 2,
                "Age": "5m",
                "Containers": "web",
                "Images": "nginx:1.27",
                "Selector": "app=web",
            },
        ),
        (
            DaemonSet,
            merge(
                DAEMON_SET,
                {
                    "spec": {"template": {"spec": {"nodeSelector": {"zone": "a", "disk": "ssd"}}}},
                    "status": {
                        "desiredNumberScheduled": 3,
                        "currentNumberScheduled": 3,
                        "numberReady": 2,
                        "updatedNumberScheduled": 1,
                        "numberAvailable": 2,
                        "numberMisscheduled": 0,
                    },
                },
            ),
            {
                "Name": "web",
                "Desired": 3,
                "Current": 3,
                "Ready": 2,
                "Up-to-date": 1,
                "Available": 2,
                "Node Selector": "disk=ssd,zone=a",
                "Age": "5m",
                "Containers": "web",
                "Images": "nginx:1.27",
                "Selector": "app=web",
            },
        ),
        (
            DaemonSet,
            DAEMON_SET,
            {
                "Name": "web",
                "Desired": 0,
                "Current": 0,
                "Ready": 0,
                "Up-to-date": 0,
                "Available": 0,
                "Node Selector": "<none>",
                "Age": "5m",
                "Containers": "web",
                "Images": "nginx:1.27",
                "Selector": "app=web",
            },
        ),
        (
            StatefulSet,
            merge(
                STATEFUL_SET,
                {"spec": {"replicas": 3}, "status": {"replicas": 3, "readyReplicas": 1}},
            ),
            {
                "Name": "web",
                "Ready": "1/3",
                "Age": "5m",
                "Containers": "web",
                "Images": "nginx:1.27",
            },
        ),
        (
            ControllerRevision,
            CONTROLLER_REVISION,
            {
                "Name": "web-5d4b9c",
                "Controller": "statefulset.apps/web",
                "Revision": 3,
                "Age": "5m",
            },
        ),
        (
            ControllerRevision,
            merge(CONTROLLER_REVISION, {"metadata": {"ownerReferences": None}}),
            {"Name": "web-5d4b9c", "Controller": "<none>", "Revision": 3, "Age": "5m"},
        ),
    ],
    ids=[
        "deployment",
        "deployment-two-containers",
        "replicaset",
        "daemonset",
        "daemonset-no-status",
        "statefulset",
        "controllerrevision",
        "controllerrevision-no-owner",
    ],
)
def test_printer_cells(cls: type[Resource], raw: dict[str, Any], expected: dict[str, Any]) -> None:
    assert named_cells(decode(raw, cls)) == expected


def test_field_selectors() -> None:
    rs = decode(merge(REPLICA_SET, {"status": {"replicas": 2}}), ReplicaSet)
    assert ReplicaSet.kind_info.selectable_fields(rs) == {
        "metadata.name": "web",
        "metadata.namespace": "default",
        "status.replicas": "2",
    }
    assert (
        ReplicaSet.kind_info.selectable_fields(decode(REPLICA_SET, ReplicaSet))["status.replicas"]
        == "0"
    )
    assert not Deployment.kind_info.supports_field("status.replicas")
