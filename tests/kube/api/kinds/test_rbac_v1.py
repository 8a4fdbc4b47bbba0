"""rbac.authorization.k8s.io/v1: defaults, validation, roleRef immutability and printer cells."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.errors import ErrorType
from kube.api.kinds.rbac_v1 import ClusterRole, ClusterRoleBinding, Role, RoleBinding
from kube.api.meta_v1 import Resource
from kube.api.scheme import PATH_SEGMENT
from tests.kube.api.kinds.helpers import (
    CREATED,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    cells,
    decode,
    merge,
    problems,
)

GROUP = "rbac.authorization.k8s.io"


RULE = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}
ROLE = {
    "apiVersion": f"{GROUP}/v1",
    "kind": "Role",
    "metadata": {"name": "pod-reader", "namespace": "default", "creationTimestamp": CREATED},
    "rules": [RULE],
}
CLUSTER_ROLE = merge(
    ROLE, {"kind": "ClusterRole", "metadata": {"name": "system:node", "namespace": None}}
)
ROLE_BINDING = {
    "apiVersion": f"{GROUP}/v1",
    "kind": "RoleBinding",
    "metadata": {"name": "read-pods", "namespace": "default", "creationTimestamp": CREATED},
    "roleRef": {"kind": "Role", "name": "pod-reader"},
    "subjects": [
        {"kind": "User", "name": "jane"},
        {"kind": "Group", "name": "devs"},
        {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
    ],
}
CLUSTER_ROLE_BINDING = merge(
    ROLE_BINDING,
    {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "read-pods-everywhere", "namespace": None},
        "roleRef": {"kind": "ClusterRole", "name": "view"},
    },
)


def test_bindings_default_role_ref_and_user_and_group_api_groups() -> None:
    binding = decode(ROLE_BINDING, RoleBinding)
    assert isinstance(binding, RoleBinding)
    assert binding.role_ref is not None
    assert binding.role_ref.api_group == GROUP
    assert [s.api_group for s in binding.subjects or ()] == [GROUP, GROUP, None]


def test_missing_role_ref_is_defaulted_like_upstream_value() -> None:
    binding = decode(merge(ROLE_BINDING, {"roleRef": None}), RoleBinding)
    assert isinstance(binding, RoleBinding) and binding.role_ref is not None
    assert (binding.role_ref.api_group, binding.role_ref.kind) == (GROUP, None)


def test_all_four_take_path_segment_names_and_have_no_short_names() -> None:
    for cls in (Role, ClusterRole, RoleBinding, ClusterRoleBinding):
        assert cls.kind_info.name_format == PATH_SEGMENT
        assert cls.kind_info.short_names == ()
    assert Role.kind_info.namespaced and not ClusterRole.kind_info.namespaced
    assert ClusterRoleBinding.kind_info.plural == "clusterrolebindings"


VALIDATION = [
    ("role-valid", Role, ROLE, []),
    ("role-name-colon-ok", Role, merge(ROLE, {"metadata": {"name": "system:reader"}}), []),
    ("role-name-slash", Role, merge(ROLE, {"metadata": {"name": "a/b"}}), [
        ("metadata.name", INVALID)]),
    ("rule-without-verbs", Role, merge(ROLE, {"rules": [{"apiGroups": [""], "resources": ["x"]}]}),
     [("rules[0].verbs", REQUIRED)]),
    ("rule-without-groups-and-resources", Role, merge(ROLE, {"rules": [{"verbs": ["get"]}]}),
     [("rules[0].apiGroups", REQUIRED), ("rules[0].resources", REQUIRED)]),
    ("role-non-resource-url", Role,
     merge(ROLE, {"rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}),
     [("rules[0].nonResourceURLs", INVALID)]),
    ("cluster-role-valid", ClusterRole, CLUSTER_ROLE, []),
    ("cluster-role-non-resource-url", ClusterRole,
     merge(CLUSTER_ROLE, {"rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]}), []),
    ("cluster-role-urls-and-resources", ClusterRole,
     merge(CLUSTER_ROLE, {"rules": [dict(RULE, nonResourceURLs=["/metrics"])]}),
     [("rules[0].nonResourceURLs", INVALID)]),
    ("aggregation-without-selectors", ClusterRole,
     merge(CLUSTER_ROLE, {"aggregationRule": {}}),
     [("aggregationRule.clusterRoleSelectors", REQUIRED)]),
    ("aggregation-with-selector", ClusterRole,
     merge(CLUSTER_ROLE, {"aggregationRule": {"clusterRoleSelectors": [
         {"matchLabels": {"rbac.example.com/aggregate-to-view": "true"}}]}}), []),
    ("binding-valid", RoleBinding, ROLE_BINDING, []),
    ("binding-cluster-role", RoleBinding,
     merge(ROLE_BINDING, {"roleRef": {"kind": "ClusterRole", "name": "view"}}), []),
    ("binding-without-role-ref", RoleBinding, merge(ROLE_BINDING, {"roleRef": None}),
     [("roleRef.kind", NOT_SUPPORTED), ("roleRef.name", REQUIRED)]),
    ("role-ref-kind", RoleBinding, merge(ROLE_BINDING, {"roleRef": {"kind": "Policy"}}),
     [("roleRef.kind", NOT_SUPPORTED)]),
    ("role-ref-group", RoleBinding, merge(ROLE_BINDING, {"roleRef": {"apiGroup": "example.com"}}),
     [("roleRef.apiGroup", NOT_SUPPORTED)]),
    ("role-ref-without-name", RoleBinding, merge(ROLE_BINDING, {"roleRef": {"name": None}}),
     [("roleRef.name", REQUIRED)]),
    ("role-ref-name-slash", RoleBinding, merge(ROLE_BINDING, {"roleRef": {"name": "a/b"}}),
     [("roleRef.name", INVALID)]),
    ("subject-kind", RoleBinding,
     merge(ROLE_BINDING, {"subjects": [{"kind": "Robot", "name": "r"}]}),
     [("subjects[0].kind", NOT_SUPPORTED)]),
    ("subject-without-name", RoleBinding, merge(ROLE_BINDING, {"subjects": [{"kind": "User"}]}),
     [("subjects[0].name", REQUIRED)]),
    ("subject-without-kind", RoleBinding, merge(ROLE_BINDING, {"subjects": [{"name": "jane"}]}),
     [("subjects[0].kind", NOT_SUPPORTED)]),
    ("service-account-with-api-group", RoleBinding, merge(ROLE_BINDING, {"subjects": [
        {"kind": "ServiceAccount", "name": "sa", "apiGroup": GROUP}]}),
     [("subjects[0].apiGroup", NOT_SUPPORTED)]),
    ("service-account-bad-name", RoleBinding, merge(ROLE_BINDING, {"subjects": [
        {"kind": "ServiceAccount", "name": "Bad_Name"}]}),
     [("subjects[0].name", INVALID)]),
    ("user-other-api-group", RoleBinding, merge(ROLE_BINDING, {"subjects": [
        {"kind": "User", "name": "jane", "apiGroup": "example.com"}]}),
     [("subjects[0].apiGroup", NOT_SUPPORTED)]),
    ("service-account-without-namespace-in-role-binding", RoleBinding, merge(ROLE_BINDING, {
        "subjects": [{"kind": "ServiceAccount", "name": "builder"}]}), []),
    ("cluster-binding-valid", ClusterRoleBinding, CLUSTER_ROLE_BINDING, []),
    ("cluster-binding-to-role", ClusterRoleBinding,
     merge(CLUSTER_ROLE_BINDING, {"roleRef": {"kind": "Role"}}), [("roleRef.kind", NOT_SUPPORTED)]),
    ("cluster-binding-service-account-without-namespace", ClusterRoleBinding,
     merge(CLUSTER_ROLE_BINDING, {"subjects": [{"kind": "ServiceAccount", "name": "builder"}]}),
     [("subjects[0].namespace", REQUIRED)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("cls", "raw", "expected"), [c[1:] for c in VALIDATION], ids=[c[0] for c in VALIDATION]
)
def test_validation(
    cls: type[Resource], raw: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(raw, cls)) == sorted(expected)


UPDATES = [
    ("subjects-may-change", {"subjects": [{"kind": "User", "name": "joe"}]}, []),
    ("role-ref-name-may-not", {"roleRef": {"name": "other"}}, [("roleRef", INVALID)]),
    ("role-ref-kind-may-not", {"roleRef": {"kind": "ClusterRole"}}, [("roleRef", INVALID)]),
]


@pytest.mark.parametrize(
    ("patch", "expected"), [c[1:] for c in UPDATES], ids=[c[0] for c in UPDATES]
)
def test_role_ref_is_immutable(
    patch: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    old = decode(ROLE_BINDING, RoleBinding)
    new = decode(merge(ROLE_BINDING, patch), RoleBinding)
    errors = walk.validate_update(new, old)
    assert sorted((e.field, e.type) for e in errors) == expected
    if expected:
        assert errors[0].detail == "cannot change roleRef"


PRINTING = [
    ("role", Role, ROLE, ["pod-reader", CREATED]),
    ("cluster-role", ClusterRole, CLUSTER_ROLE, ["system:node", CREATED]),
    ("role-binding", RoleBinding, ROLE_BINDING,
     ["read-pods", "Role/pod-reader", "5m", "jane", "devs", "ci/builder"]),
    ("cluster-role-binding", ClusterRoleBinding, merge(CLUSTER_ROLE_BINDING, {"subjects": [
        {"kind": "User", "name": "a"}, {"kind": "User", "name": "b"},
        {"kind": "ServiceAccount", "name": "x", "namespace": "n"}]}),
     ["read-pods-everywhere", "ClusterRole/view", "5m", "a, b", "", "n/x"]),
    ("binding-without-subjects", RoleBinding, merge(ROLE_BINDING, {"subjects": None}),
     ["read-pods", "Role/pod-reader", "5m", "", "", ""]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("cls", "raw", "expected"), [c[1:] for c in PRINTING], ids=[c[0] for c in PRINTING]
)
def test_printer_cells(cls: type[Resource], raw: dict[str, Any], expected: list[Any]) -> None:
    assert cells(decode(raw, cls)) == expected


def test_columns_as_kubectl_shows_them() -> None:
    roles = Role.kind_info.columns
    assert [(c.name, c.type) for c in roles] == [("Name", "string"), ("Created At", "date")]
    bindings = ClusterRoleBinding.kind_info.columns
    assert [(c.name, c.priority) for c in bindings] == [
        ("Name", 0),
        ("Role", 0),
        ("Age", 0),
        ("Users", 1),
        ("Groups", 1),
        ("ServiceAccounts", 1),
    ]


def test_created_at_without_timestamp_is_go_zero_time() -> None:
    role = decode(merge(ROLE, {"metadata": {"creationTimestamp": None}}), Role)
    assert cells(role) == ["pod-reader", "0001-01-01T00:00:00Z"]
