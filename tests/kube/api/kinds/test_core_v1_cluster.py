"""core/v1 Namespace, ConfigMap, Secret, ServiceAccount, Event, ResourceQuota and LimitRange:
defaults, validation (create and update), printer cells, field selectors and registration."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from kube.api import walk
from kube.api.codec import to_builtins
from kube.api.errors import ErrorType
from kube.api.kinds.core_v1.cluster import (
    ConfigMap,
    Event,
    LimitRange,
    Namespace,
    ResourceQuota,
    Secret,
    ServiceAccount,
)
from kube.api.printing import DEFAULT_COLUMNS
from tests.kube.api.kinds.helpers import (
    CREATED,
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    REQUIRED,
    TOO_LONG,
    cells,
    decode,
    merge,
    ordered,
    problems,
    update_problems,
)


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def meta(kind: str, name: str = "demo", namespace: str | None = "default") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "creationTimestamp": CREATED}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": kind, "metadata": metadata}


# Namespace.

NAMESPACE = meta("Namespace", "team-a", None)


def test_namespace_defaults() -> None:
    raw = to_builtins(decode(NAMESPACE, Namespace))
    assert raw["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}
    assert "spec" not in raw  # the API server's create adds the finalizer, not defaulting
    assert raw["status"] == {"phase": "Active"}


def test_namespace_with_spec_keeps_its_finalizers() -> None:
    # The namespace controller removes "kubernetes" through finalize; it must not come back.
    raw = to_builtins(decode(merge(NAMESPACE, {"spec": {}}), Namespace))
    assert raw["spec"] == {}


def test_namespace_name_label_follows_the_name() -> None:
    labelled = merge(
        NAMESPACE, {"metadata": {"labels": {"kubernetes.io/metadata.name": "x", "team": "a"}}}
    )
    assert to_builtins(decode(labelled, Namespace))["metadata"]["labels"] == {
        "kubernetes.io/metadata.name": "team-a",
        "team": "a",
    }


NAMESPACE_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", NAMESPACE, []),
    (
        "qualified-finalizer",
        merge(NAMESPACE, {"spec": {"finalizers": ["example.com/cleanup"]}}),
        [],
    ),
    (
        "unknown-finalizer",
        merge(NAMESPACE, {"spec": {"finalizers": ["kubernetes", "cleanup"]}}),
        [("spec.finalizers", INVALID)],
    ),
    (
        "name-is-label",
        merge(NAMESPACE, {"metadata": {"name": "team.a"}}),
        [("metadata.name", INVALID)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in NAMESPACE_CASES], ids=[c[0] for c in NAMESPACE_CASES]
)
def test_namespace_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, Namespace)) == ordered(expected)


def test_namespace_cells_and_selectors() -> None:
    terminating = decode(merge(NAMESPACE, {"status": {"phase": "Terminating"}}), Namespace)
    assert cells(terminating) == ["team-a", "Terminating", "5m"]
    assert Namespace.kind_info.selectable_fields(terminating) == {
        "metadata.name": "team-a",
        "status.phase": "Terminating",
    }
    info = Namespace.kind_info
    assert (info.namespaced, info.short_names, info.subresources) == (
        False,
        ("ns",),
        ("status", "finalize"),
    )


# ConfigMap.

CONFIG_MAP = merge(meta("ConfigMap"), {"data": {"game.properties": "lives=3", "ui": "dark"}})


CONFIG_MAP_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", CONFIG_MAP, []),
    ("valid-binary", merge(CONFIG_MAP, {"binaryData": {"logo.png": b64(b"\x89PNG")}}), []),
    ("key", merge(CONFIG_MAP, {"data": {"bad key": "x"}}), [("data[bad key]", INVALID)]),
    (
        "binary-key",
        merge(CONFIG_MAP, {"binaryData": {"..": b64("x")}}),
        [("binaryData[..]", INVALID)],
    ),
    ("key-in-both", merge(CONFIG_MAP, {"binaryData": {"ui": b64("x")}}), [("data[ui]", INVALID)]),
    (
        "base64",
        merge(CONFIG_MAP, {"binaryData": {"logo.png": "not base64!"}}),
        [("binaryData[logo.png]", INVALID)],
    ),
    ("too-large", merge(CONFIG_MAP, {"data": {"big": "x" * (1024 * 1024)}}), [("", TOO_LONG)]),
    (
        "binary-counts-decoded",
        merge(CONFIG_MAP, {"binaryData": {"b": b64(b"\0" * 1024 * 1000)}}),
        [],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[1:] for c in CONFIG_MAP_CASES],
    ids=[c[0] for c in CONFIG_MAP_CASES],
)
def test_config_map_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, ConfigMap)) == ordered(expected)


def test_base64_message() -> None:
    raw = merge(CONFIG_MAP, {"binaryData": {"b": "QUJD$A=="}})
    assert [str(e) for e in walk.validate(decode(raw, ConfigMap))] == [
        'binaryData[b]: Invalid value: "QUJD$A==": illegal base64 data at input byte 4'
    ]


IMMUTABLE = merge(CONFIG_MAP, {"immutable": True})

CONFIG_MAP_UPDATES: list[
    tuple[str, dict[str, Any], dict[str, Any], list[tuple[str, ErrorType]]]
] = [
    ("mutable", CONFIG_MAP, merge(CONFIG_MAP, {"data": {"ui": "light"}}), []),
    ("freeze", CONFIG_MAP, IMMUTABLE, []),
    ("frozen-metadata", IMMUTABLE, merge(IMMUTABLE, {"metadata": {"labels": {"a": "b"}}}), []),
    ("frozen-data", IMMUTABLE, merge(IMMUTABLE, {"data": {"ui": "light"}}), [("data", FORBIDDEN)]),
    (
        "frozen-binary",
        IMMUTABLE,
        merge(IMMUTABLE, {"binaryData": {"b": b64("x")}}),
        [("binaryData", FORBIDDEN)],
    ),
    ("thaw", IMMUTABLE, merge(IMMUTABLE, {"immutable": False}), [("immutable", FORBIDDEN)]),
]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [c[1:] for c in CONFIG_MAP_UPDATES],
    ids=[c[0] for c in CONFIG_MAP_UPDATES],
)
def test_config_map_update(
    old: dict[str, Any], new: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert update_problems(old, new, ConfigMap) == ordered(expected)


def test_config_map_cells() -> None:
    raw = merge(CONFIG_MAP, {"binaryData": {"logo.png": b64("x")}})
    assert cells(decode(raw, ConfigMap)) == ["demo", 3, "5m"]
    assert ConfigMap.kind_info.short_names == ("cm",)


# Secret.

SECRET = merge(meta("Secret"), {"data": {"password": b64("s3cret")}})


def secret(type_: str, **data: str) -> dict[str, Any]:
    return merge(meta("Secret"), {"type": type_, "data": {k: b64(v) for k, v in data.items()}})


DOCKER_CONFIG = json.dumps({"auths": {"registry.example.com": {"auth": b64("u:p")}}})

SECRET_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", SECRET, []),
    ("base64", merge(SECRET, {"data": {"token": "%%%"}}), [("data[token]", INVALID)]),
    ("key", merge(SECRET, {"data": {"pass word": b64("x")}}), [("data[pass word]", INVALID)]),
    ("string-data-key", merge(SECRET, {"stringData": {"a/b": "x"}}), [("data[a/b]", INVALID)]),
    (
        "too-large",
        merge(SECRET, {"stringData": {"big": "x" * (1024 * 1024)}}),
        [("data", TOO_LONG)],
    ),
    ("tls", secret("kubernetes.io/tls", **{"tls.crt": "c", "tls.key": "k"}), []),
    (
        "tls-missing-key",
        secret("kubernetes.io/tls", **{"tls.crt": "c"}),
        [("data[tls.key]", REQUIRED)],
    ),
    (
        "tls-from-string-data",
        merge(secret("kubernetes.io/tls", **{"tls.crt": "c"}), {"stringData": {"tls.key": "k"}}),
        [],
    ),
    (
        "dockerconfigjson",
        secret("kubernetes.io/dockerconfigjson", **{".dockerconfigjson": DOCKER_CONFIG}),
        [],
    ),
    (
        "dockerconfigjson-missing",
        secret("kubernetes.io/dockerconfigjson"),
        [("data[.dockerconfigjson]", REQUIRED)],
    ),
    (
        "dockerconfigjson-not-json",
        secret("kubernetes.io/dockerconfigjson", **{".dockerconfigjson": "{auths"}),
        [("data[.dockerconfigjson]", INVALID)],
    ),
    (
        "dockercfg-not-object",
        secret("kubernetes.io/dockercfg", **{".dockercfg": "[]"}),
        [("data[.dockercfg]", INVALID)],
    ),
    ("basic-auth", secret("kubernetes.io/basic-auth", username="admin"), []),
    (
        "basic-auth-missing",
        secret("kubernetes.io/basic-auth"),
        [("data[password]", REQUIRED), ("data[username]", REQUIRED)],
    ),
    (
        "ssh-auth",
        secret("kubernetes.io/ssh-auth", **{"ssh-privatekey": ""}),
        [("data[ssh-privatekey]", REQUIRED)],
    ),
    (
        "sa-token",
        secret("kubernetes.io/service-account-token"),
        [("metadata.annotations[kubernetes.io/service-account.name]", REQUIRED)],
    ),
    (
        "sa-token-annotated",
        merge(
            secret("kubernetes.io/service-account-token"),
            {"metadata": {"annotations": {"kubernetes.io/service-account.name": "builder"}}},
        ),
        [],
    ),
    ("custom-type", secret("example.com/anything"), []),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in SECRET_CASES], ids=[c[0] for c in SECRET_CASES]
)
def test_secret_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, Secret)) == ordered(expected)


def test_secret_defaults_and_decoded_data() -> None:
    obj = decode(merge(SECRET, {"stringData": {"user": "ann", "password": "override"}}), Secret)
    assert obj.type == "Opaque"
    assert obj.decoded_data() == {"password": b"override", "user": b"ann"}
    assert to_builtins(decode(secret("kubernetes.io/tls"), Secret))["type"] == "kubernetes.io/tls"


def test_secret_contents_stay_out_of_messages() -> None:
    raw = secret("kubernetes.io/dockerconfigjson", **{".dockerconfigjson": "[1]"})
    assert [str(e) for e in walk.validate(decode(raw, Secret))] == [
        'data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": '
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    ]


FROZEN = merge(SECRET, {"immutable": True})

SECRET_UPDATES: list[tuple[str, dict[str, Any], dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("rotate", SECRET, merge(SECRET, {"data": {"password": b64("new")}}), []),
    ("type", SECRET, merge(SECRET, {"type": "example.com/x"}), [("type", INVALID)]),
    (
        "frozen-data",
        FROZEN,
        merge(FROZEN, {"data": {"password": b64("new")}}),
        [("data", FORBIDDEN)],
    ),
    ("thaw", FROZEN, merge(FROZEN, {"immutable": None}), [("immutable", FORBIDDEN)]),
]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [c[1:] for c in SECRET_UPDATES],
    ids=[c[0] for c in SECRET_UPDATES],
)
def test_secret_update(
    old: dict[str, Any], new: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert update_problems(old, new, Secret) == ordered(expected)


def test_secret_cells_and_selectors() -> None:
    obj = decode(merge(SECRET, {"stringData": {"user": "ann", "password": "x"}}), Secret)
    assert cells(obj) == ["demo", "Opaque", 2, "5m"]
    assert Secret.kind_info.selectable_fields(obj) == {
        "metadata.name": "demo",
        "metadata.namespace": "default",
        "type": "Opaque",
    }


# ServiceAccount.


def test_service_account() -> None:
    raw = merge(
        meta("ServiceAccount", "builder"),
        {
            "secrets": [{"name": "builder-token"}, {"name": "builder-dockercfg"}],
            "imagePullSecrets": [{"name": "registry"}],
            "automountServiceAccountToken": False,
        },
    )
    obj = decode(raw, ServiceAccount)
    assert walk.validate(obj) == []
    assert cells(obj) == ["builder", 2, "5m"]
    assert to_builtins(obj) == raw
    info = ServiceAccount.kind_info
    assert (info.short_names, info.subresources) == (("sa",), ("token",))


# Event.

EVENT: dict[str, Any] = merge(
    meta("Event", "web-0.17a8b"),
    {
        "involvedObject": {
            "kind": "Pod",
            "namespace": "default",
            "name": "web-0",
            "uid": "u-1",
            "apiVersion": "v1",
            "fieldPath": "spec.containers{web}",
        },
        "reason": "BackOff",
        "message": "Back-off restarting failed container\n",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-01-01T11:00:00Z",
        "lastTimestamp": "2026-01-01T11:58:00Z",
        "count": 7,
        "type": "Warning",
    },
)
NEW_EVENT: dict[str, Any] = merge(
    meta("Event", "web-0.17a8c"),
    {
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-0"},
        "reason": "Scheduled",
        "message": "Successfully assigned default/web-0 to node-1",
        "type": "Normal",
        "eventTime": "2026-01-01T11:59:30.000000Z",
        "action": "Binding",
        "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler-cp-1",
    },
)

EVENT_CELLS: list[tuple[str, dict[str, Any], list[Any]]] = [
    (
        "old-style",
        EVENT,
        [
            "2m",
            "Warning",
            "BackOff",
            "pod/web-0",
            "spec.containers{web}",
            "kubelet, node-1",
            "Back-off restarting failed container",
            "60m",
            7,
            "web-0.17a8b",
        ],
    ),
    (
        "new-style",
        NEW_EVENT,
        [
            "30s",
            "Normal",
            "Scheduled",
            "pod/web-0",
            "",
            "default-scheduler, default-scheduler-cp-1",
            "Successfully assigned default/web-0 to node-1",
            "30s",
            1,
            "web-0.17a8c",
        ],
    ),
    (
        "series",
        merge(
            NEW_EVENT, {"series": {"count": 4, "lastObservedTime": "2026-01-01T11:59:50.000000Z"}}
        ),
        [
            "10s",
            "Normal",
            "Scheduled",
            "pod/web-0",
            "",
            "default-scheduler, default-scheduler-cp-1",
            "Successfully assigned default/web-0 to node-1",
            "30s",
            4,
            "web-0.17a8c",
        ],
    ),
    (
        "no-last-timestamp",
        merge(
            EVENT,
            {"lastTimestamp": None, "source": {"host": None}, "involvedObject": {"name": None}},
        ),
        [
            "60m",
            "Warning",
            "BackOff",
            "pod",
            "spec.containers{web}",
            "kubelet",
            "Back-off restarting failed container",
            "60m",
            7,
            "web-0.17a8b",
        ],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in EVENT_CELLS], ids=[c[0] for c in EVENT_CELLS]
)
def test_event_cells(raw: dict[str, Any], expected: list[Any]) -> None:
    obj = decode(raw, Event)
    assert cells(obj) == expected
    assert cells(obj, wide=False) == [expected[i] for i in (0, 1, 2, 3, 6)]


def test_event_columns() -> None:
    assert [(c.name, c.priority) for c in Event.kind_info.columns] == [
        ("Last Seen", 0),
        ("Type", 0),
        ("Reason", 0),
        ("Object", 0),
        ("Subobject", 1),
        ("Source", 1),
        ("Message", 0),
        ("First Seen", 1),
        ("Count", 1),
        ("Name", 1),
    ]


EVENT_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("old-style", EVENT, []),
    ("new-style", NEW_EVENT, []),
    (
        "old-style-other-namespace",
        merge(EVENT, {"involvedObject": {"namespace": "kube-system"}}),
        [("involvedObject.namespace", INVALID)],
    ),
    (
        "old-style-cluster-object-in-default",
        merge(EVENT, {"involvedObject": {"kind": "Node", "name": "node-1", "namespace": None}}),
        [],
    ),
    (
        "old-style-cluster-object-elsewhere",
        merge(
            EVENT,
            {
                "metadata": {"namespace": "team-a"},
                "involvedObject": {"kind": "Node", "name": "node-1", "namespace": None},
            },
        ),
        [("involvedObject.namespace", INVALID)],
    ),
    (
        "new-style-cluster-object",
        merge(
            NEW_EVENT,
            {
                "metadata": {"namespace": "kube-system"},
                "involvedObject": {"kind": "Node", "name": "node-1", "namespace": None},
            },
        ),
        [],
    ),
    (
        "new-style-needs-reporting",
        merge(
            NEW_EVENT,
            {"reportingComponent": None, "reportingInstance": None, "action": None, "reason": None},
        ),
        [
            ("action", REQUIRED),
            ("reason", REQUIRED),
            ("reportingComponent", INVALID),
            ("reportingComponent", INVALID),
            ("reportingComponent", REQUIRED),
            ("reportingInstance", REQUIRED),
        ],
    ),
    (
        "new-style-lengths",
        merge(NEW_EVENT, {"action": "x" * 129, "message": "m" * 1025}),
        [("action", INVALID), ("message", INVALID)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in EVENT_CASES], ids=[c[0] for c in EVENT_CASES]
)
def test_event_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, Event)) == ordered(expected)


def test_event_field_selectors() -> None:
    fields = Event.kind_info.selectable_fields(decode(EVENT, Event))
    assert fields == {
        "metadata.name": "web-0.17a8b",
        "metadata.namespace": "default",
        "involvedObject.kind": "Pod",
        "involvedObject.namespace": "default",
        "involvedObject.name": "web-0",
        "involvedObject.uid": "u-1",
        "involvedObject.apiVersion": "v1",
        "involvedObject.resourceVersion": "",
        "involvedObject.fieldPath": "spec.containers{web}",
        "reason": "BackOff",
        "reportingComponent": "",
        "source": "kubelet",
        "type": "Warning",
    }
    assert Event.kind_info.selectable_fields(decode(NEW_EVENT, Event))["source"] == (
        "default-scheduler"
    )


# ResourceQuota.

QUOTA = merge(
    meta("ResourceQuota", "compute"),
    {
        "spec": {
            "hard": {
                "requests.cpu": "1",
                "requests.memory": "1Gi",
                "limits.cpu": "2",
                "pods": "10",
                "count/deployments.apps": "5",
            }
        },
    },
)


def quota(**spec: Any) -> dict[str, Any]:
    """QUOTA with ``spec`` merged into its spec (a given ``hard`` replaces QUOTA's)."""
    return merge(merge(QUOTA, {"spec": {"hard": None}} if "hard" in spec else {}), {"spec": spec})


QUOTA_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", QUOTA, []),
    ("valid-scopes", quota(hard={"pods": "5"}, scopes=["BestEffort", "Terminating"]), []),
    (
        "valid-selector",
        quota(
            scopeSelector={
                "matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}
                ]
            }
        ),
        [],
    ),
    (
        "resource-name",
        quota(hard={"gpus": "1"}),
        [("spec.hard[gpus]", INVALID), ("spec.hard[gpus]", INVALID)],
    ),
    ("storage-not-quota", quota(hard={"storage": "1Gi"}), [("spec.hard[storage]", INVALID)]),
    ("negative", quota(hard={"requests.cpu": "-1"}), [("spec.hard[requests.cpu]", INVALID)]),
    ("whole-pods", quota(hard={"pods": "1500m"}), [("spec.hard[pods]", INVALID)]),
    ("scope", quota(scopes=["Everything"]), [("spec.scopes", INVALID)]),
    (
        "conflicting-scopes",
        quota(hard={"pods": "1"}, scopes=["BestEffort", "NotBestEffort"]),
        [("spec.scopes", INVALID)],
    ),
    (
        "best-effort-cpu",
        quota(hard={"requests.cpu": "1"}, scopes=["BestEffort"]),
        [("spec.scopes", INVALID)],
    ),
    (
        "selector-exists-only",
        quota(
            hard={"pods": "1"},
            scopeSelector={
                "matchExpressions": [
                    {"scopeName": "Terminating", "operator": "In", "values": ["x"]}
                ]
            },
        ),
        [("spec.scopeSelector.matchExpressions.operator", INVALID)],
    ),
    (
        "selector-values-required",
        quota(
            scopeSelector={
                "matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn"}]
            }
        ),
        [("spec.scopeSelector.matchExpressions.values", REQUIRED)],
    ),
    (
        "selector-operator",
        quota(
            scopeSelector={
                "matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "Equals", "values": ["x"]}
                ]
            }
        ),
        [("spec.scopeSelector.matchExpressions.operator", INVALID)],
    ),
    (
        "status-used",
        merge(QUOTA, {"status": {"used": {"pods": "-2"}}}),
        [("status.used[pods]", INVALID)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in QUOTA_CASES], ids=[c[0] for c in QUOTA_CASES]
)
def test_quota_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, ResourceQuota)) == ordered(expected)


def test_quota_scopes_are_immutable() -> None:
    old = quota(hard={"pods": "1"}, scopes=["BestEffort", "Terminating"])
    assert (
        update_problems(
            old, quota(hard={"pods": "2"}, scopes=["Terminating", "BestEffort"]), ResourceQuota
        )
        == []
    )
    assert update_problems(
        old, quota(hard={"pods": "1"}, scopes=["BestEffort"]), ResourceQuota
    ) == [("spec.scopes", INVALID)]


def test_quota_cells() -> None:
    raw = merge(
        QUOTA,
        {
            "status": {
                "hard": {
                    "requests.cpu": "1",
                    "requests.memory": "1Gi",
                    "limits.cpu": "2",
                    "pods": "10",
                },
                "used": {"requests.cpu": "500m", "limits.cpu": "1", "pods": "3"},
            }
        },
    )
    assert cells(decode(raw, ResourceQuota)) == [
        "compute",
        "pods: 3/10, requests.cpu: 500m/1, requests.memory: 0/1Gi",
        "limits.cpu: 1/2",
        "5m",
    ]
    assert cells(decode(QUOTA, ResourceQuota)) == ["compute", "", "", "5m"]
    assert ResourceQuota.kind_info.short_names == ("quota",)


# LimitRange.


def limit_range(*items: dict[str, Any]) -> dict[str, Any]:
    return merge(meta("LimitRange", "limits"), {"spec": {"limits": list(items)}})


def test_container_limit_defaults() -> None:
    raw = limit_range(
        {
            "type": "Container",
            "max": {"cpu": "2", "memory": "1Gi"},
            "min": {"cpu": "100m", "ephemeral-storage": "1Gi"},
            "default": {"cpu": "500m"},
        }
    )
    item = to_builtins(decode(raw, LimitRange))["spec"]["limits"][0]
    assert item["default"] == {"cpu": "500m", "memory": "1Gi"}
    assert item["defaultRequest"] == {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Gi"}


def test_pod_limit_gets_no_defaults() -> None:
    raw = limit_range({"type": "Pod", "max": {"cpu": "2"}})
    assert to_builtins(decode(raw, LimitRange))["spec"]["limits"] == [
        {"type": "Pod", "max": {"cpu": "2"}}
    ]


LIMIT_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    (
        "valid",
        limit_range(
            {
                "type": "Container",
                "max": {"cpu": "2"},
                "min": {"cpu": "100m"},
                "maxLimitRequestRatio": {"cpu": "4"},
            },
            {"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}},
            {"type": "example.com/custom", "max": {"example.com/widgets": "3"}},
        ),
        [],
    ),
    ("type", limit_range({"type": "Deployment"}), [("spec.limits[0].type", INVALID)]),
    (
        "type-duplicate",
        limit_range({"type": "Pod"}, {"type": "Pod"}),
        [("spec.limits[1].type", DUPLICATE)],
    ),
    (
        "min-over-max",
        limit_range({"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "2"}}),
        # the defaults copy max into default and default into defaultRequest
        [
            ("spec.limits[0].default[cpu]", INVALID),
            ("spec.limits[0].defaultRequest[cpu]", INVALID),
            ("spec.limits[0].min[cpu]", INVALID),
        ],
    ),
    (
        "default-over-max",
        limit_range({"type": "Container", "max": {"memory": "1Gi"}, "default": {"memory": "2Gi"}}),
        [
            ("spec.limits[0].default[memory]", INVALID),
            ("spec.limits[0].defaultRequest[memory]", INVALID),
        ],
    ),
    (
        "request-over-default",
        limit_range({"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "2"}}),
        [("spec.limits[0].defaultRequest[cpu]", INVALID)],
    ),
    (
        "ratio-below-one",
        limit_range({"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}}),
        [("spec.limits[0].maxLimitRequestRatio[cpu]", INVALID)],
    ),
    (
        "ratio-above-max-over-min",
        limit_range(
            {
                "type": "Pod",
                "max": {"cpu": "2"},
                "min": {"cpu": "1"},
                "maxLimitRequestRatio": {"cpu": "3"},
            }
        ),
        [("spec.limits[0].maxLimitRequestRatio[cpu]", INVALID)],
    ),
    (
        "pod-defaults",
        limit_range({"type": "Pod", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "1"}}),
        [("spec.limits[0].default", FORBIDDEN), ("spec.limits[0].defaultRequest", FORBIDDEN)],
    ),
    (
        "pvc-needs-storage",
        limit_range({"type": "PersistentVolumeClaim", "max": {"cpu": "1"}}),
        [("spec.limits[0].limits", REQUIRED)],
    ),
    (
        "container-resource",
        limit_range({"type": "Container", "max": {"pods": "1"}}),
        [
            ("spec.limits[0].default[pods]", INVALID),
            ("spec.limits[0].defaultRequest[pods]", INVALID),
            ("spec.limits[0].max[pods]", INVALID),
        ],
    ),
    (
        "resource-name",
        limit_range({"type": "PersistentVolumeClaim", "max": {"storage": "1Gi", "disk": "1"}}),
        [("spec.limits[0].max[disk]", INVALID)],
    ),
    (
        "hugepages-no-overcommit",
        limit_range(
            {
                "type": "Container",
                "default": {"hugepages-2Mi": "4Mi"},
                "defaultRequest": {"hugepages-2Mi": "2Mi"},
            }
        ),
        [("spec.limits[0].defaultRequest[hugepages-2Mi]", INVALID)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in LIMIT_CASES], ids=[c[0] for c in LIMIT_CASES]
)
def test_limit_range_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, LimitRange)) == ordered(expected)


def test_limit_range_messages() -> None:
    raw = limit_range(
        {
            "type": "Pod",
            "max": {"cpu": "2"},
            "min": {"cpu": "500m"},
            "maxLimitRequestRatio": {"cpu": "5"},
        }
    )
    assert [str(e) for e in walk.validate(decode(raw, LimitRange))] == [
        'spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "5": '
        "ratio 5 is greater than max/min = 4.000000"
    ]


def test_limit_range_registration() -> None:
    info = LimitRange.kind_info
    assert (info.plural, info.short_names) == ("limitranges", ("limits",))
    assert info.columns == DEFAULT_COLUMNS  # no printer upstream: NAME, CREATED AT
