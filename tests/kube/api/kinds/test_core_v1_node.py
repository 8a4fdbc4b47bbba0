"""core/v1 Node: defaults, validation (create and update), printer cells, field selectors and
registration."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.codec import to_builtins
from kube.api.errors import ErrorType
from kube.api.kinds.core_v1.node import Node
from tests.kube.api.kinds.helpers import (
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    cells,
    decode,
    merge,
    problems,
)

CREATED = "2025-12-30T12:00:00Z"


NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "node-1",
        "creationTimestamp": CREATED,
        "labels": {"kubernetes.io/hostname": "node-1"},
    },
    "spec": {"podCIDR": "10.244.1.0/24"},
    "status": {
        "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
        "addresses": [
            {"type": "InternalIP", "address": "192.168.10.11"},
            {"type": "Hostname", "address": "node-1"},
        ],
        "nodeInfo": {
            "kubeletVersion": "v1.36.0",
            "osImage": "Debian GNU/Linux 12 (bookworm)",
            "kernelVersion": "6.1.0-18-amd64",
            "containerRuntimeVersion": "containerd://1.6.20",
        },
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
    },
}


def node(**patch: Any) -> dict[str, Any]:
    return merge(NODE, patch)


# Defaults.


def test_pod_cidr_and_allocatable_defaults() -> None:
    raw = to_builtins(decode(NODE, Node))
    assert raw["spec"] == {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]}
    assert raw["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "110"}
    assert raw["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}


DEFAULT_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "plural-fills-singular",
        {"spec": {"podCIDR": None, "podCIDRs": ["10.244.1.0/24", "fd00::/64"]}},
        {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24", "fd00::/64"]},
    ),
    ("no-cidrs", {"spec": {"podCIDR": None, "unschedulable": True}}, {"unschedulable": True}),
]


@pytest.mark.parametrize(
    ("patch", "spec"), [c[1:] for c in DEFAULT_CASES], ids=[c[0] for c in DEFAULT_CASES]
)
def test_spec_defaults(patch: dict[str, Any], spec: dict[str, Any]) -> None:
    assert to_builtins(decode(node(**patch), Node))["spec"] == spec


def test_allocatable_kept_when_given() -> None:
    raw = to_builtins(decode(node(status={"allocatable": {"cpu": "3800m"}}), Node))
    assert raw["status"]["allocatable"] == {"cpu": "3800m"}


# Validation.

TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}

VALIDATION_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", NODE, []),
    (
        "valid-taints",
        node(
            spec={
                "taints": [
                    TAINT,
                    {**TAINT, "effect": "NoExecute"},
                    {"key": "gpu", "value": "a100", "effect": "NoSchedule"},
                ]
            }
        ),
        [],
    ),
    (
        "taint-key-required",
        node(spec={"taints": [{"effect": "NoSchedule"}]}),
        [("spec.taints[0].key", REQUIRED)],
    ),
    (
        "taint-key-format",
        node(spec={"taints": [{"key": "-bad", "effect": "NoSchedule"}]}),
        [("spec.taints[0].key", INVALID)],
    ),
    (
        "taint-effect-required",
        node(spec={"taints": [{"key": "gpu"}]}),
        [("spec.taints[0].effect", REQUIRED)],
    ),
    (
        "taint-effect",
        node(spec={"taints": [{"key": "gpu", "effect": "NoAdmit"}]}),
        [("spec.taints[0].effect", NOT_SUPPORTED)],
    ),
    (
        "taint-value",
        node(spec={"taints": [{"key": "gpu", "value": "a 100", "effect": "NoSchedule"}]}),
        [("spec.taints[0].value", INVALID)],
    ),
    (
        "taint-duplicate",
        node(spec={"taints": [TAINT, {**TAINT, "value": "x"}]}),
        [("spec.taints[1]", DUPLICATE)],
    ),
    ("pod-cidr", node(spec={"podCIDR": "10.244.1.0/33"}), [("spec.podCIDRs[0]", INVALID)]),
    ("pod-cidrs-dual-stack", node(spec={"podCIDRs": ["10.244.1.0/24", "fd00::/64"]}), []),
    (
        "pod-cidrs-same-family",
        node(spec={"podCIDRs": ["10.244.1.0/24", "10.244.2.0/24"]}),
        [("spec.podCIDRs", INVALID)],
    ),
    (
        "pod-cidrs-duplicate",
        node(spec={"podCIDRs": ["10.244.1.0/24", "10.244.1.0/24"]}),
        [("spec.podCIDRs", INVALID), ("spec.podCIDRs[1]", DUPLICATE)],
    ),
    (
        "pod-cidrs-three",
        node(spec={"podCIDRs": ["10.244.1.0/24", "fd00::/64", "fd01::/64"]}),
        [("spec.podCIDRs", INVALID)],
    ),
    (
        "capacity-negative",
        node(status={"capacity": {"cpu": "-1"}}),
        [("status.allocatable.cpu", INVALID), ("status.capacity.cpu", INVALID)],
    ),
    (
        "capacity-pods-whole",
        node(status={"capacity": {"pods": "110500m"}}),
        [("status.allocatable.pods", INVALID), ("status.capacity.pods", INVALID)],
    ),
    (
        "capacity-extended-whole",
        node(status={"allocatable": {"example.com/gpu": "0.5"}}),
        [("status.allocatable.example.com/gpu", INVALID)],
    ),
    ("name", node(metadata={"name": "Node_1"}), [("metadata.name", INVALID)]),
    ("no-namespace", node(metadata={"namespace": "default"}), [("metadata.namespace", FORBIDDEN)]),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[1:] for c in VALIDATION_CASES],
    ids=[c[0] for c in VALIDATION_CASES],
)
def test_node_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, Node)) == sorted(expected)


def test_duplicate_taint_message() -> None:
    errors = walk.validate(decode(node(spec={"taints": [TAINT, TAINT]}), Node))
    assert [str(e) for e in errors] == [
        'spec.taints[1]: Duplicate value: {"effect": "NoSchedule", '
        '"key": "node-role.kubernetes.io/control-plane"}: '
        "taints must be unique by key and effect pair"
    ]


CONFIG = {
    "configMap": {"namespace": "kube-system", "name": "kubelet", "kubeletConfigKey": "kubelet"}
}

UPDATE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("unchanged", NODE, NODE, []),
    ("cordon-and-taint", NODE, node(spec={"unschedulable": True, "taints": [TAINT]}), []),
    ("assign-pod-cidr", node(spec={"podCIDR": None}), NODE, []),
    (
        "change-pod-cidr",
        NODE,
        node(spec={"podCIDR": "10.244.2.0/24", "podCIDRs": None}),
        [("spec.podCIDRs", FORBIDDEN)],
    ),
    (
        "add-pod-cidr",
        NODE,
        node(spec={"podCIDRs": ["10.244.1.0/24", "fd00::/64"]}),
        [("spec.podCIDRs", FORBIDDEN)],
    ),
    ("set-provider-id", NODE, node(spec={"providerID": "kubelab://node-1"}), []),
    (
        "change-provider-id",
        node(spec={"providerID": "kubelab://node-1"}),
        node(spec={"providerID": "kubelab://node-2"}),
        [("spec.providerID", FORBIDDEN)],
    ),
    ("external-id", NODE, node(spec={"externalID": "i-123"}), [("spec.externalID", FORBIDDEN)]),
    (
        "duplicate-address",
        NODE,
        node(
            status={
                "addresses": [
                    {"type": "InternalIP", "address": "192.168.10.11"},
                    {"type": "InternalIP", "address": "192.168.10.11"},
                ]
            }
        ),
        [("status.addresses[1]", DUPLICATE)],
    ),
    ("config-source", NODE, node(spec={"configSource": CONFIG}), []),
    (
        "config-source-empty",
        NODE,
        node(spec={"configSource": {}}),
        [("spec.configSource", INVALID)],
    ),
    (
        "config-source-spec-fields",
        NODE,
        node(
            spec={
                "configSource": merge(
                    CONFIG,
                    {"configMap": {"uid": "u", "kubeletConfigKey": None, "name": "Bad_Name"}},
                )
            }
        ),
        [
            ("spec.configSource.configMap.kubeletConfigKey", REQUIRED),
            ("spec.configSource.configMap.name", INVALID),
            ("spec.configSource.configMap.uid", FORBIDDEN),
        ],
    ),
    (
        "config-status-needs-uid",
        NODE,
        node(status={"config": {"active": CONFIG}}),
        [
            ("status.config.active.configMap.resourceVersion", REQUIRED),
            ("status.config.active.configMap.uid", REQUIRED),
        ],
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [c[1:] for c in UPDATE_CASES],
    ids=[c[0] for c in UPDATE_CASES],
)
def test_node_update(
    old: dict[str, Any], new: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    errors = walk.validate_update(decode(new, Node), decode(old, Node))
    assert sorted((e.field, e.type) for e in errors) == sorted(expected)


# Printer cells and field selectors.

WIDE_KNOWN = [
    "192.168.10.11",
    "<none>",
    "Debian GNU/Linux 12 (bookworm)",
    "6.1.0-18-amd64",
    "containerd://1.6.20",
]

CELL_CASES: list[tuple[str, dict[str, Any], list[Any]]] = [
    ("ready", NODE, ["node-1", "Ready", "<none>", "2d", "v1.36.0", *WIDE_KNOWN]),
    (
        "not-ready",
        node(status={"conditions": [{"type": "Ready", "status": "False"}]}),
        ["node-1", "NotReady", "<none>", "2d", "v1.36.0", *WIDE_KNOWN],
    ),
    (
        "unknown-condition",
        node(status={"conditions": [{"type": "Ready", "status": "Unknown"}]}),
        ["node-1", "NotReady", "<none>", "2d", "v1.36.0", *WIDE_KNOWN],
    ),
    (
        "no-ready-condition",
        node(status={"conditions": [{"type": "DiskPressure", "status": "False"}]}),
        ["node-1", "Unknown", "<none>", "2d", "v1.36.0", *WIDE_KNOWN],
    ),
    (
        "cordoned",
        node(spec={"unschedulable": True}),
        ["node-1", "Ready,SchedulingDisabled", "<none>", "2d", "v1.36.0", *WIDE_KNOWN],
    ),
    (
        "roles",
        node(
            metadata={
                "labels": {
                    "node-role.kubernetes.io/worker": "",
                    "node-role.kubernetes.io/control-plane": "",
                    "node-role.kubernetes.io/": "",
                    "kubernetes.io/role": "ingress",
                }
            }
        ),
        ["node-1", "Ready", "control-plane,ingress,worker", "2d", "v1.36.0", *WIDE_KNOWN],
    ),
    (
        "empty-role-label",
        node(metadata={"labels": {"kubernetes.io/role": ""}}),
        ["node-1", "Ready", "<none>", "2d", "v1.36.0", *WIDE_KNOWN],
    ),
    (
        "bare",
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-2"}},
        [
            "node-2",
            "Unknown",
            "<none>",
            "<unknown>",
            "",
            "<none>",
            "<none>",
            "<unknown>",
            "<unknown>",
            "<unknown>",
        ],
    ),
    (
        "external-ip",
        node(
            status={
                "addresses": [
                    {"type": "ExternalIP", "address": "203.0.113.4"},
                    {"type": "InternalIP", "address": "10.0.0.4"},
                    {"type": "ExternalIP", "address": "203.0.113.5"},
                ]
            }
        ),
        ["node-1", "Ready", "<none>", "2d", "v1.36.0", "10.0.0.4", "203.0.113.4", *WIDE_KNOWN[2:]],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in CELL_CASES], ids=[c[0] for c in CELL_CASES]
)
def test_node_cells(raw: dict[str, Any], expected: list[Any]) -> None:
    assert cells(decode(raw, Node)) == expected


def test_node_columns() -> None:
    assert [(c.name, c.priority) for c in Node.kind_info.columns] == [
        ("Name", 0),
        ("Status", 0),
        ("Roles", 0),
        ("Age", 0),
        ("Version", 0),
        ("Internal-IP", 1),
        ("External-IP", 1),
        ("OS-Image", 1),
        ("Kernel-Version", 1),
        ("Container-Runtime", 1),
    ]


@pytest.mark.parametrize(
    ("raw", "value"),
    [(NODE, "false"), (node(spec={"unschedulable": True}), "true")],
    ids=["schedulable", "cordoned"],
)
def test_node_field_selectors(raw: dict[str, Any], value: str) -> None:
    assert Node.kind_info.selectable_fields(decode(raw, Node)) == {
        "metadata.name": "node-1",
        "spec.unschedulable": value,
    }


def test_registration() -> None:
    info = Node.kind_info
    assert (info.plural, info.namespaced, info.short_names) == ("nodes", False, ("no",))
    assert info.subresources == ("status", "proxy")
