"""apiregistration.k8s.io/v1 APIService: validation with upstream's paths and messages (the
name as VERSION.GROUP, the priorities' ranges, local against service-backed), defaults, printer
cells and registration."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.errors import ErrorType
from kube.api.kinds.apiregistration_v1 import APIService
from tests.kube.api.kinds.helpers import (
    CREATED,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    cells,
    decode,
    merge,
    ordered,
    problems,
)

SERVICE: dict[str, Any] = {
    "apiVersion": "apiregistration.k8s.io/v1",
    "kind": "APIService",
    "metadata": {"name": "v1alpha1.wardle.example.com", "creationTimestamp": CREATED},
    "spec": {
        "group": "wardle.example.com",
        "version": "v1alpha1",
        "groupPriorityMinimum": 1000,
        "versionPriority": 15,
        "service": {"namespace": "wardle", "name": "api"},
        "caBundle": "LS0tLS1CRUdJTg==",
    },
}
LOCAL: dict[str, Any] = {
    "apiVersion": "apiregistration.k8s.io/v1",
    "kind": "APIService",
    "metadata": {"name": "v1.", "creationTimestamp": CREATED},
    "spec": {"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1},
}


@pytest.mark.parametrize(
    ("base", "patch", "expected"),
    [
        pytest.param(SERVICE, {}, [], id="valid"),
        pytest.param(LOCAL, {}, [], id="local-core"),
        pytest.param(
            SERVICE,
            {"metadata": {"name": "v1.wardle.example.com"}},
            [("metadata.name", INVALID)],
            id="name-not-version-group",
        ),
        pytest.param(
            SERVICE,
            {"metadata": {"name": "a/b"}},
            [("metadata.name", INVALID)],
            id="name-not-a-path-segment",
        ),
        pytest.param(
            LOCAL,
            {"metadata": {"name": "v2."}, "spec": {"version": "v2"}},
            [("spec.group", REQUIRED)],
            id="empty-group-not-v1",
        ),
        pytest.param(
            SERVICE,
            {"metadata": {"name": "v1alpha1.Wardle"}, "spec": {"group": "Wardle"}},
            [("spec.group", INVALID)],
            id="group-not-a-subdomain",
        ),
        pytest.param(
            SERVICE,
            {"metadata": {"name": "1v.wardle.example.com"}, "spec": {"version": "1v"}},
            [("spec.version", INVALID)],
            id="version-not-a-label",
        ),
        pytest.param(
            SERVICE,
            {"spec": {"groupPriorityMinimum": 0}},
            [("spec.groupPriorityMinimum", INVALID)],
            id="group-priority-zero",
        ),
        pytest.param(
            SERVICE,
            {"spec": {"groupPriorityMinimum": 20001}},
            [("spec.groupPriorityMinimum", INVALID)],
            id="group-priority-too-high",
        ),
        pytest.param(
            SERVICE,
            {"spec": {"versionPriority": 1001}},
            [("spec.versionPriority", INVALID)],
            id="version-priority-too-high",
        ),
        pytest.param(
            SERVICE,
            {"spec": {"versionPriority": None}},
            [("spec.versionPriority", REQUIRED)],
            id="version-priority-missing",
        ),
        pytest.param(
            LOCAL,
            {"spec": {"caBundle": "YWJj"}},
            [("spec.caBundle", INVALID)],
            id="local-with-ca-bundle",
        ),
        pytest.param(
            LOCAL,
            {"spec": {"insecureSkipTLSVerify": True}},
            [("spec.insecureSkipTLSVerify", INVALID)],
            id="local-insecure",
        ),
        pytest.param(
            SERVICE,
            {"spec": {"insecureSkipTLSVerify": True}},
            [("spec.insecureSkipTLSVerify", INVALID)],
            id="insecure-with-ca-bundle",
        ),
        pytest.param(
            SERVICE,
            {"spec": {"service": {"namespace": "", "name": None}}},
            [("spec.service.name", REQUIRED), ("spec.service.namespace", REQUIRED)],
            id="service-without-name",
        ),
        pytest.param(
            SERVICE,
            {"status": {"conditions": [{"type": "Available", "status": "Maybe"}]}},
            [("status.conditions[0].status", NOT_SUPPORTED)],
            id="bad-condition-status",
        ),
    ],
)
def test_validation(
    base: dict[str, Any], patch: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(merge(base, patch), APIService)) == ordered(expected)


def test_messages() -> None:
    wrong = merge(SERVICE, {"metadata": {"name": "v1.wardle"}, "spec": {"versionPriority": 0}})
    assert [str(e) for e in walk.validate(decode(wrong, APIService))] == [
        'metadata.name: Invalid value: "v1.wardle": must be `spec.version+"."+spec.group`: '
        '"v1alpha1.wardle.example.com"',
        "spec.versionPriority: Invalid value: 0: must be positive and less than 1000",
    ]
    local = merge(LOCAL, {"spec": {"caBundle": "YWJj", "insecureSkipTLSVerify": True}})
    assert [str(e) for e in walk.validate(decode(local, APIService))] == [
        'spec.caBundle: Invalid value: "3 bytes": local APIServices may not have a caBundle',
        "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have "
        "insecureSkipTLSVerify",
    ]


def test_service_port_defaults_to_443() -> None:
    service = decode(SERVICE, APIService)
    assert service.spec.service.port == 443


@pytest.mark.parametrize(
    ("base", "status", "expected"),
    [
        pytest.param(SERVICE, None, ["wardle/api", "Unknown"], id="unchecked"),
        pytest.param(
            LOCAL,
            {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]},
            ["Local", "True"],
            id="local",
        ),
        pytest.param(
            SERVICE,
            {
                "conditions": [
                    {"type": "Available", "status": "False", "reason": "MissingEndpoints"}
                ]
            },
            ["wardle/api", "False (MissingEndpoints)"],
            id="unavailable",
        ),
    ],
)
def test_cells(base: dict[str, Any], status: dict[str, Any] | None, expected: list[str]) -> None:
    service = decode(merge(base, {"status": status}), APIService)
    assert cells(service) == [service.metadata.name, *expected, "5m"]


def test_registration() -> None:
    info = APIService.kind_info
    assert (info.group, info.version, info.plural, info.namespaced) == (
        "apiregistration.k8s.io",
        "v1",
        "apiservices",
        False,
    )
    assert (info.categories, info.subresources) == (("api-extensions",), ("status",))
    assert [c.name for c in info.columns] == ["Name", "Service", "Available", "Age"]
