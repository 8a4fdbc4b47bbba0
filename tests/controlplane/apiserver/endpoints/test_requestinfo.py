"""Request parsing follows upstream's RequestInfoFactory."""

from __future__ import annotations

import pytest

from controlplane.apiserver.endpoints.requestinfo import parse

CASES = [
    ("GET", "/api/v1/pods", {}, ("list", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/namespaces/default/pods", {}, ("list", "", "v1", "default", "pods", "", "")),
    (
        "GET",
        "/api/v1/namespaces/default/pods/web",
        {},
        ("get", "", "v1", "default", "pods", "web", ""),
    ),
    (
        "GET",
        "/api/v1/namespaces/default/pods",
        {"watch": "True"},
        ("watch", "", "v1", "default", "pods", "", ""),
    ),
    (
        "GET",
        "/api/v1/watch/namespaces/default/pods",
        {},
        ("watch", "", "v1", "default", "pods", "", ""),
    ),
    (
        "POST",
        "/api/v1/namespaces/default/pods/web/binding",
        {},
        ("create", "", "v1", "default", "pods", "web", "binding"),
    ),
    (
        "PATCH",
        "/apis/apps/v1/namespaces/ns/deployments/web/scale",
        {},
        ("patch", "apps", "v1", "ns", "deployments", "web", "scale"),
    ),
    (
        "DELETE",
        "/apis/apps/v1/namespaces/ns/deployments",
        {},
        ("deletecollection", "apps", "v1", "ns", "deployments", "", ""),
    ),
    ("GET", "/api/v1/namespaces", {}, ("list", "", "v1", "", "namespaces", "", "")),
    (
        "GET",
        "/api/v1/namespaces/kube-system",
        {},
        ("get", "", "v1", "kube-system", "namespaces", "kube-system", ""),
    ),
    (
        "PUT",
        "/api/v1/namespaces/gone/finalize",
        {},
        ("update", "", "v1", "gone", "namespaces", "gone", "finalize"),
    ),
    (
        "GET",
        "/api/v1/nodes/node1/proxy/metrics",
        {},
        ("get", "", "v1", "", "nodes", "node1", "proxy"),
    ),
    (
        "POST",
        "/api/v1/namespaces/ns/services/http:web:8080/proxy/a/b",
        {},
        ("create", "", "v1", "ns", "services", "http:web:8080", "proxy"),
    ),
    # upstream knows no verb for other methods: only a rule for "*" allows them
    (
        "OPTIONS",
        "/api/v1/namespaces/ns/pods/web/proxy/",
        {},
        ("", "", "v1", "ns", "pods", "web", "proxy"),
    ),
    (
        "GET",
        "/apis/coordination.k8s.io/v1/leases",
        {"watch": "1"},
        ("watch", "coordination.k8s.io", "v1", "", "leases", "", ""),
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"), CASES, ids=[f"{m} {p}" for m, p, _, _ in CASES]
)
def test_resource_requests(
    method: str, path: str, query: dict[str, str], expected: tuple[str, ...]
) -> None:
    info = parse(method, path, query)
    assert info.is_resource_request
    got = (
        info.verb,
        info.group,
        info.version,
        info.namespace,
        info.resource,
        info.name,
        info.subresource,
    )
    assert got == expected


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/healthz"),
        ("GET", "/api"),
        ("GET", "/apis"),
        ("GET", "/apis/apps"),
        ("GET", "/api/v1"),
        ("GET", "/apis/apps/v1"),
        ("GET", "/openapi/v3"),
        ("GET", ""),
    ],
    ids=["healthz", "api", "apis", "group", "core-version", "group-version", "openapi", "empty"],
)
def test_non_resource_requests(method: str, path: str) -> None:
    info = parse(method, path, {})
    assert not info.is_resource_request
    assert info.verb == "get"
