"""Bad input gets a 4xx Status and changes nothing: never a 500, never a partial write."""

from __future__ import annotations

import http.client
import json
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from kube.client import kubeconfig
from tests.servers import ServerProcess


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: dict[str, object]


class RawClient:
    """Plain HTTPS with the admin certificate: every byte of the request is the test's."""

    def __init__(self, server: ServerProcess) -> None:
        config = kubeconfig.load(server.kubeconfig)
        self.context = ssl.create_default_context(cadata=(config.ca_pem or b"").decode())
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = Path(tmp) / "c.pem", Path(tmp) / "k.pem"
            cert.write_bytes(config.cert_pem or b"")
            key.write_bytes(config.key_pem or b"")
            self.context.load_cert_chain(cert, key)
        self.port = server.port

    def request(
        self,
        method: str,
        path: str,
        body: bytes | str = b"",
        content_type: str = "application/json",
    ) -> Answer:
        connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context)
        try:
            data = body.encode() if isinstance(body, str) else body
            connection.request(method, path, body=data, headers={"Content-Type": content_type})
            response = connection.getresponse()
            raw = response.read()
            parsed = json.loads(raw) if raw.startswith(b"{") else {}
            return Answer(response.status, response.headers, parsed)
        finally:
            connection.close()


@pytest.fixture
def raw(apiserver: ServerProcess) -> RawClient:
    return RawClient(apiserver)


def _configmap(name: str, **extra: object) -> str:
    body: dict[str, object] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    body.update(extra)
    return json.dumps(body)


def _state(raw: RawClient, namespace: str) -> list[tuple[str, str]]:
    listed = raw.request("GET", f"/api/v1/namespaces/{namespace}/configmaps")
    assert listed.status == 200
    items = listed.body["items"]
    assert isinstance(items, list)
    return sorted((i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in items)


CM = "/api/v1/namespaces/{ns}/configmaps"
ONE = "/api/v1/namespaces/{ns}/configmaps/base"

CASES = [
    ("POST", CM, b"{", "application/json", 400, "malformed-json"),
    ("POST", CM, b"kind: [", "application/yaml", 400, "malformed-yaml"),
    ("POST", CM, b"[1, 2]", "application/json", 400, "not-an-object"),
    ("POST", CM, _configmap("x", data={"a": 1}), "application/json", 400, "wrong-type"),
    (
        "POST",
        CM + "?fieldValidation=Strict",
        _configmap("x", colour="red"),
        "application/json",
        400,
        "unknown-field-strict",
    ),
    (
        "POST",
        CM + "?fieldValidation=Bogus",
        _configmap("x"),
        "application/json",
        400,
        "bad-field-validation",
    ),
    ("POST", CM, _configmap("Upper"), "application/json", 422, "upper-case-name"),
    ("POST", CM, _configmap(".."), "application/json", 422, "dot-dot-name"),
    ("POST", CM, _configmap("a" * 254), "application/json", 422, "long-name"),
    ("POST", CM, _configmap("a_b"), "application/json", 422, "underscore-name"),
    ("POST", CM, _configmap("ok", data={"bad/key": "v"}), "application/json", 422, "bad-key"),
    (
        "POST",
        CM,
        json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
        "application/json",
        400,
        "wrong-kind",
    ),
    (
        "POST",
        CM,
        json.dumps({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "p"}}),
        "application/json",
        400,
        "wrong-api-version",
    ),
    ("POST", CM, _configmap("x"), "text/plain", 415, "wrong-content-type"),
    (
        "POST",
        CM,
        b'{"a":"' + b"x" * (4 * 1024 * 1024) + b'"}',
        "application/json",
        413,
        "huge-body",
    ),
    (
        "POST",
        CM,
        _configmap("x", metadata={"name": "x", "resourceVersion": "5"}),
        "application/json",
        400,
        "resource-version-on-create",
    ),
    ("GET", CM + "?labelSelector=a%20in%20(", b"", "application/json", 400, "bad-label-selector"),
    (
        "GET",
        CM + "?fieldSelector=spec.bogus%3Dx",
        b"",
        "application/json",
        400,
        "unsupported-field-selector",
    ),
    ("GET", CM + "?limit=-1", b"", "application/json", 400, "negative-limit"),
    ("GET", CM + "?limit=x", b"", "application/json", 400, "bad-limit"),
    ("GET", CM + "?continue=bm9wZQ", b"", "application/json", 400, "bad-continue"),
    (
        "GET",
        CM + "?resourceVersion=abc&resourceVersionMatch=Exact",
        b"",
        "application/json",
        400,
        "bad-resource-version",
    ),
    (
        "GET",
        CM + "?resourceVersionMatch=Sometimes&resourceVersion=1",
        b"",
        "application/json",
        400,
        "bad-resource-version-match",
    ),
    ("PUT", ONE, _configmap("other"), "application/json", 400, "name-mismatch"),
    (
        "PUT",
        ONE,
        _configmap("base", metadata={"name": "base", "resourceVersion": "1"}),
        "application/json",
        409,
        "stale-resource-version",
    ),
    (
        "PATCH",
        ONE,
        b'[{"op":"frobnicate","path":"/data"}]',
        "application/json-patch+json",
        400,
        "bad-json-patch-op",
    ),
    (
        "PATCH",
        ONE,
        b'[{"op":"remove","path":"/data/missing"}]',
        "application/json-patch+json",
        422,
        "json-patch-missing-path",
    ),
    (
        "PATCH",
        ONE,
        b'[{"op":"test","path":"/data/a","value":"no"}]',
        "application/json-patch+json",
        422,
        "json-patch-failed-test",
    ),
    (
        "PATCH",
        ONE,
        b'{"metadata":{"name":"Renamed"}}',
        "application/merge-patch+json",
        422,
        "merge-patch-to-invalid",
    ),
    (
        "PATCH",
        ONE,
        b'{"data":{"$patch":"bogus"}}',
        "application/strategic-merge-patch+json",
        400,
        "bad-smp-directive",
    ),
    ("PATCH", ONE, b"{", "application/merge-patch+json", 400, "malformed-patch"),
    ("PATCH", ONE, b"{}", "text/plain", 415, "patch-without-patch-type"),
    ("DELETE", ONE, b"{", "application/json", 400, "malformed-delete-options"),
    (
        "DELETE",
        ONE,
        b'{"propagationPolicy":"Sideways"}',
        "application/json",
        400,
        "bad-propagation-policy",
    ),
    (
        "DELETE",
        ONE,
        b'{"preconditions":{"uid":"not-the-uid"}}',
        "application/json",
        409,
        "failed-uid-precondition",
    ),
    (
        "GET",
        "/api/v1/namespaces/{ns}/nosuchthings",
        b"",
        "application/json",
        404,
        "unknown-resource",
    ),
    (
        "POST",
        "/api/v1/namespaces/{ns}/configmaps/base/scale",
        b"{}",
        "application/json",
        404,
        "unknown-subresource",
    ),
    ("GET", "/apis/authentication.k8s.io/v1/tokenreviews", b"", "", 405, "unserved-verb"),
    ("GET", "/apis/authentication.k8s.io/v1/tokenreviews/x", b"", "", 404, "unserved-path"),
]


@pytest.fixture
def seeded(raw: RawClient, namespace: str) -> str:
    created = raw.request("POST", CM.format(ns=namespace), _configmap("base", data={"a": "1"}))
    assert created.status == 201
    return namespace


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "code", "case"), CASES, ids=[c[-1] for c in CASES]
)
def test_bad_input_is_4xx_and_writes_nothing(
    raw: RawClient,
    seeded: str,
    method: str,
    path: str,
    body: bytes | str,
    content_type: str,
    code: int,
    case: str,
) -> None:
    before = _state(raw, seeded)
    answer = raw.request(method, path.format(ns=seeded), body, content_type)
    assert answer.status == code, answer.body
    assert answer.body.get("kind") == "Status"
    assert answer.body.get("code") == code
    assert answer.body.get("status") == "Failure"
    assert answer.body.get("message")
    assert _state(raw, seeded) == before


@pytest.mark.parametrize(
    ("path", "code", "reason", "message"),
    [
        (
            "/api/v1/nosuchthings",
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
        ("/nosuchpath", 404, "NotFound", "the server could not find the requested resource"),
        (
            "/apis/authentication.k8s.io/v1/tokenreviews",
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        ),
    ],
)
def test_what_no_route_serves_is_upstreams_generic_status(
    raw: RawClient, path: str, code: int, reason: str, message: str
) -> None:
    """Byte for byte what upstream's router answers (``NewGenericServerResponse``)."""
    answer = raw.request("GET", path, b"", "")
    assert (answer.status, answer.body) == (
        code,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "details": {},
            "code": code,
        },
    )


def test_unknown_fields_warn_by_default(raw: RawClient, namespace: str) -> None:
    answer = raw.request("POST", CM.format(ns=namespace), _configmap("warned", colour="red"))
    assert answer.status == 201
    assert answer.headers.get_all("Warning") == ['299 - "unknown field \\"colour\\""']


def test_invalid_objects_report_every_cause(raw: RawClient, namespace: str) -> None:
    body = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "Bad_Name"},
            "spec": {"ports": [{"port": 70000}, {"port": 80, "protocol": "ICMP"}]},
        }
    )
    answer = raw.request("POST", f"/api/v1/namespaces/{namespace}/services", body)
    assert answer.status == 422
    details = answer.body["details"]
    assert isinstance(details, dict)
    fields = {c["field"] for c in details["causes"]}
    assert {"metadata.name", "spec.ports[0].port", "spec.ports[1].protocol"} <= fields
    assert details["kind"] == "Service"


def test_metrics_report_requests_and_storage_latency(raw: RawClient, namespace: str) -> None:
    raw.request("POST", CM.format(ns=namespace), _configmap("counted"))
    connection = http.client.HTTPSConnection("127.0.0.1", raw.port, context=raw.context)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    assert 'etcd_request_duration_seconds_count{operation="create"}' in text
    assert (
        'apiserver_request_total{verb="create",group="",version="v1",resource="configmaps",'
        'subresource="",code="201"}'
    ) in text
    assert "apiserver_request_duration_seconds_bucket{" in text
