"""The routing table without any server: the kubernetes.io Ingress page's path-type examples
and host wildcard table as the matrix, then precedence between Ingresses, default backends,
endpoints from EndpointSlices, and certificates by server name."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import pytest

from controlplane.ingress.routing import RoutingTable, build, request_host
from kube.api.codec import from_builtins
from kube.api.kinds.core_v1.cluster import Secret
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import EndpointSlice
from kube.api.kinds.networking_v1 import Ingress


@dataclass
class View:
    """routing.ClusterView over dicts."""

    services: dict[str, Service] = field(default_factory=dict)
    slices: dict[str, list[EndpointSlice]] = field(default_factory=dict)
    secrets: dict[str, Secret] = field(default_factory=dict)

    def service(self, namespace: str, name: str) -> Service | None:
        return self.services.get(f"{namespace}/{name}")

    def endpoint_slices(self, namespace: str, service: str) -> list[EndpointSlice]:
        return self.slices.get(f"{namespace}/{service}", [])

    def secret(self, namespace: str, name: str) -> Secret | None:
        return self.secrets.get(f"{namespace}/{name}")

    def add_service(
        self, name: str, endpoints: list[tuple[str, bool | None]], *, port_name: str = ""
    ) -> None:
        """Service ``name`` (port 80, named ``port_name``) with one slice of ``endpoints``
        (address, ready condition) on target port 8080."""
        port: dict[str, Any] = {"port": 80, "targetPort": 8080, "protocol": "TCP"}
        if port_name:
            port["name"] = port_name
        self.services[f"default/{name}"] = from_builtins(
            {"metadata": {"name": name, "namespace": "default"}, "spec": {"ports": [port]}},
            Service,
        ).obj
        listed = [
            {"addresses": [a], **({"conditions": {"ready": r}} if r is not None else {})}
            for a, r in endpoints
        ]
        raw = {
            "metadata": {"name": f"{name}-1", "namespace": "default"},
            "addressType": "IPv4",
            "endpoints": listed,
            "ports": [{"name": port_name, "port": 8080, "protocol": "TCP"}],
        }
        self.slices[f"default/{name}"] = [from_builtins(raw, EndpointSlice).obj]


def backend(service: str, port: int | str = 80) -> dict[str, Any]:
    key = "number" if isinstance(port, int) else "name"
    return {"service": {"name": service, "port": {key: port}}}


def ingress(
    name: str,
    rules: list[dict[str, Any]] | None = None,
    *,
    created: str = "2026-01-01T00:00:00Z",
    **spec: Any,
) -> Ingress:
    raw = {
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
        "spec": {"rules": rules, **spec} if rules is not None else spec,
    }
    obj: Ingress = from_builtins(raw, Ingress).obj
    return obj


def rule(paths: list[tuple[str, str, str]], host: str | None = None) -> dict[str, Any]:
    """A rule of (path, pathType, service) paths."""
    http = {"paths": [{"path": p, "pathType": t, "backend": backend(s)} for p, t, s in paths]}
    return {"http": http, **({"host": host} if host else {})}


def routed(table: RoutingTable, host: str, path: str) -> str | None:
    """The Service (its name alone) a request goes to, or None."""
    found = table.route(host, path)
    return found.name.split("/")[1].split(":")[0] if found else None


# The examples table of kubernetes.io/docs/concepts/services-networking/ingress/#examples:
# (the rule's paths as (type, path), the request paths, whether each matches).
EXAMPLES = [
    ("prefix-root", [("Prefix", "/")], ["/", "/anything", "/a/b/"], True),
    ("exact", [("Exact", "/foo")], ["/foo"], True),
    ("exact-other", [("Exact", "/foo")], ["/bar"], False),
    ("exact-trailing-request", [("Exact", "/foo")], ["/foo/"], False),
    ("exact-trailing-rule", [("Exact", "/foo/")], ["/foo"], False),
    ("prefix", [("Prefix", "/foo")], ["/foo", "/foo/"], True),
    ("prefix-trailing-rule", [("Prefix", "/foo/")], ["/foo", "/foo/"], True),
    ("prefix-not-element", [("Prefix", "/aaa/bb")], ["/aaa/bbb"], False),
    ("prefix-same", [("Prefix", "/aaa/bbb")], ["/aaa/bbb"], True),
    ("prefix-ignores-trailing-slash", [("Prefix", "/aaa/bbb/")], ["/aaa/bbb"], True),
    ("prefix-matches-trailing-slash", [("Prefix", "/aaa/bbb")], ["/aaa/bbb/"], True),
    ("prefix-subpath", [("Prefix", "/aaa/bbb")], ["/aaa/bbb/ccc"], True),
    ("prefix-not-string-prefix", [("Prefix", "/aaa/bbb")], ["/aaa/bbbxyz"], False),
    ("implementation-specific-as-prefix", [("ImplementationSpecific", "/aaa")], ["/aaa/c"], True),
]


@pytest.mark.parametrize(
    ("paths", "requests", "matches"),
    [pytest.param(p, r, m, id=i) for i, p, r, m in EXAMPLES],
)
def test_path_type_examples(
    paths: list[tuple[str, str]], requests: list[str], matches: bool
) -> None:
    table = build([ingress("one", [rule([(p, t, "svc") for t, p in paths])])], View())
    for path in requests:
        assert (routed(table, "example.com", path) == "svc") is matches, path


# The rows with several paths: which one wins.
PRECEDENCE = [
    ("longest-aaa", [("Prefix", "/"), ("Prefix", "/aaa")], "/aaa/ccc", "/aaa"),
    (
        "longest-aaa-bbb",
        [("Prefix", "/"), ("Prefix", "/aaa"), ("Prefix", "/aaa/bbb")],
        "/aaa/bbb",
        "/aaa/bbb",
    ),
    ("root", [("Prefix", "/"), ("Prefix", "/aaa"), ("Prefix", "/aaa/bbb")], "/ccc", "/"),
    ("default-backend", [("Prefix", "/aaa")], "/ccc", "default"),
    ("exact-beats-prefix", [("Prefix", "/foo"), ("Exact", "/foo")], "/foo", "Exact /foo"),
    ("prefix-after-exact-misses", [("Prefix", "/foo"), ("Exact", "/foo")], "/foo/x", "/foo"),
]


def _service_for(path_type: str, path: str) -> str:
    return f"{path_type.lower()}{path.replace('/', '-')}"


@pytest.mark.parametrize(
    ("paths", "request_path", "winner"),
    [pytest.param(p, r, w, id=i) for i, p, r, w in PRECEDENCE],
)
def test_the_longest_match_wins_and_exact_beats_prefix(
    paths: list[tuple[str, str]], request_path: str, winner: str
) -> None:
    rules = [rule([(p, t, _service_for(t, p)) for t, p in paths])]
    table = build([ingress("one", rules, defaultBackend=backend("default"))], View())
    path_type, _, path = winner.rpartition(" ")
    expected = "default" if winner == "default" else _service_for(path_type or "Prefix", path)
    assert routed(table, "example.com", request_path) == expected


# The hostname wildcards table, plus an exact host and the rules without a host.
HOSTS = [
    ("wildcard-one-label", "bar.foo.com", "wild"),
    ("wildcard-two-labels", "baz.bar.foo.com", "anyhost"),
    ("wildcard-no-label", "foo.com", "anyhost"),
    ("exact-beats-wildcard", "exact.foo.com", "exact"),
    ("case-and-port", "BAR.foo.com:8080", "wild"),
    ("no-host-header", "", "anyhost"),
]


@pytest.mark.parametrize(("header", "service"), [pytest.param(h, s, id=i) for i, h, s in HOSTS])
def test_hosts_exact_then_wildcard_of_one_label_then_any(header: str, service: str) -> None:
    rules = [
        rule([("/", "Prefix", "wild")], "*.foo.com"),
        rule([("/", "Prefix", "exact")], "exact.foo.com"),
        rule([("/", "Prefix", "anyhost")]),
    ]
    table = build([ingress("one", rules)], View())
    assert routed(table, request_host(header), "/x") == service


def test_a_host_without_a_matching_path_gets_its_ingress_default_backend_or_none() -> None:
    own = ingress("own", [rule([("/app", "Prefix", "app")], "a.com")], defaultBackend=backend("a"))
    other = ingress("other", [rule([("/app", "Prefix", "app")], "b.com")])
    assert routed(build([own, other], View()), "a.com", "/else") == "a"
    assert routed(build([own, other], View()), "b.com", "/else") == "a"  # the global default
    assert routed(build([other], View()), "b.com", "/else") is None
    assert routed(build([other], View()), "c.com", "/app") is None


def test_ingresses_merge_by_host_and_the_oldest_wins_a_path() -> None:
    older = ingress(
        "older", [rule([("/", "Prefix", "old")], "a.com")], created="2026-01-01T00:00:00Z"
    )
    newer = ingress(
        "newer",
        [rule([("/", "Prefix", "new"), ("/api", "Prefix", "api")], "a.com")],
        created="2026-02-01T00:00:00Z",
    )
    table = build([newer, older], View())
    assert routed(table, "a.com", "/") == "old"
    assert routed(table, "a.com", "/api/v1") == "api"


def test_backends_are_the_ready_endpoints_of_the_service_port_in_turn() -> None:
    view = View()
    view.add_service(
        "web",
        [("10.0.0.1", True), ("10.0.0.2", None), ("10.0.0.3", False)],
        port_name="http",
    )
    by_number = ingress("n", [rule([("/", "Prefix", "web")], "a.com")])
    by_name = ingress(
        "m",
        [
            {
                "host": "b.com",
                "http": {
                    "paths": [
                        {"path": "/", "pathType": "Prefix", "backend": backend("web", "http")}
                    ]
                },
            }
        ],
    )
    table = build([by_number, by_name], view)
    web = table.route("a.com", "/")
    assert web is not None and web.endpoints == (("10.0.0.1", 8080), ("10.0.0.2", 8080))
    assert [web.in_turn()[0] for _ in range(3)] == [
        ("10.0.0.1", 8080),
        ("10.0.0.2", 8080),
        ("10.0.0.1", 8080),
    ]
    named = table.route("b.com", "/")
    assert named is not None and named.endpoints == web.endpoints
    assert table.problems == ()


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        pytest.param(backend("missing"), "service default/missing not found", id="no-service"),
        pytest.param(backend("web", 81), "service default/web has no port 81", id="no-port"),
        pytest.param(backend("web", "grpc"), "has no port grpc", id="no-port-name"),
        pytest.param(
            {"resource": {"apiGroup": "k8s.example.com", "kind": "Bucket", "name": "b"}},
            "resource backends are not served",
            id="resource",
        ),
    ],
)
def test_unresolvable_backends_have_no_endpoints_and_say_why(
    target: dict[str, Any], problem: str
) -> None:
    view = View()
    view.add_service("web", [("10.0.0.1", True)])
    table = build([ingress("bad", defaultBackend=target)], view)
    found = table.route("a.com", "/")
    assert found is not None and found.endpoints == ()
    assert len(table.problems) == 1 and problem in table.problems[0]
    assert table.problems[0].startswith("ingress default/bad: ")


def tls_secret(name: str, cert: bytes, *, kind: str = "kubernetes.io/tls") -> Secret:
    data = {"tls.crt": base64.b64encode(cert).decode(), "tls.key": base64.b64encode(b"k").decode()}
    raw = {"metadata": {"name": name, "namespace": "default"}, "type": kind, "data": data}
    secret: Secret = from_builtins(raw, Secret).obj
    return secret


def test_certificates_by_server_name_from_tls_secrets() -> None:
    view = View()
    view.secrets = {
        "default/wild": tls_secret("wild", b"wild"),
        "default/site": tls_secret("site", b"site"),
        "default/opaque": tls_secret("opaque", b"x", kind="Opaque"),
    }
    named = ingress(
        "named",
        [rule([("/", "Prefix", "web")], "a.foo.com")],
        tls=[
            {"hosts": ["*.foo.com"], "secretName": "wild"},
            {"hosts": ["x.com"], "secretName": "gone"},
        ],
    )
    implied = ingress(
        "implied",
        [rule([("/", "Prefix", "web")], "site.com")],
        tls=[{"secretName": "site"}, {"hosts": ["o.com"], "secretName": "opaque"}],
    )
    table = build([named, implied], view)
    certificate = table.certificate("A.FOO.COM")
    assert certificate is not None and certificate.cert_pem == b"wild"
    assert certificate.source == "default/wild"
    site = table.certificate("site.com")
    assert site is not None and site.cert_pem == b"site"
    assert table.certificate("b.a.foo.com") is None
    assert table.certificate("x.com") is None and table.certificate("o.com") is None
    assert sorted(p for p in table.problems if "secret" in p) == [
        "ingress default/implied: secret default/opaque is not a kubernetes.io/tls secret",
        "ingress default/named: secret default/gone not found",
    ]


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("Example.COM", "example.com"),
        ("example.com:8443", "example.com"),
        ("example.com.", "example.com"),
        ("[::1]:80", "[::1]"),
    ],
)
def test_request_hosts_are_looked_up_without_case_port_or_final_dot(header: str, host: str) -> None:
    assert request_host(header) == host
