"""``/openapi/v2`` in JSON and in kubectl's protobuf: it answers (a schema with a property
named ``$ref`` once broke it), and kubectl validates kinds on the client with it, so creating
a SubjectAccessReview or replacing a List needs no ``--validate=false``."""

from __future__ import annotations

import http.client
import json

from kube.api import openapi, openapi_proto
from tests.controlplane.apiserver.inprocess import admin_ssl
from tests.servers import Kubectl, ServerProcess


def test_a_property_named_ref_is_not_a_reference() -> None:
    converted = openapi._v2_refs(
        {
            "properties": {
                "$ref": {"type": "string"},
                "child": {"$ref": "#/components/schemas/x.Child"},
            }
        }
    )
    assert converted == {
        "properties": {
            "$ref": {"type": "string"},
            "child": {"$ref": "#/definitions/x.Child"},
        }
    }


def test_schemas_encode_as_gnostic_messages() -> None:
    encoded = openapi_proto.schema(
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    )
    # Schema.type (22) = TypeItem{value: "object"}; properties (25) = Properties{NamedSchema
    # {name: "a", value: Schema{type: ["string"]}}}; required (19) = "a".
    assert encoded == (
        b"\xb2\x01\x08\n\x06object"
        + b"\xca\x01\x12\n\x10\n\x01a\x12\x0b\xb2\x01\x08\n\x06string"
        + b"\x9a\x01\x01a"
    )


def get(server: ServerProcess, path: str, accept: str) -> tuple[int, str, bytes]:
    connection = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=admin_ssl(server.data_dir), timeout=60
    )
    try:
        connection.request("GET", path, headers={"Accept": accept})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


def test_openapi_v2_answers(apiserver: ServerProcess) -> None:
    status, media, body = get(apiserver, "/openapi/v2", "application/json")
    assert (status, media) == (200, "application/json")
    definitions = json.loads(body)["definitions"]
    props = definitions["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"]
    assert "$ref" in props["properties"]
    status, media, body = get(
        apiserver,
        "/openapi/v2",
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json",
    )
    assert (status, media) == (200, openapi_proto.MEDIA_TYPE)
    assert body.startswith(b"\n\x032.0")


def test_kubectl_validates_with_it(kubectl: Kubectl) -> None:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "alice",
            "groups": ["system:authenticated"],
            "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"},
        },
    }
    created = kubectl.run("create", "-f", "-", "-o", "json", input=json.dumps(review))
    assert "allowed" in json.loads(created.stdout)["status"]
    review["spec"]["bogus"] = 1  # type: ignore[index]
    refused = kubectl.run("create", "-f", "-", input=json.dumps(review), check=False)
    assert refused.returncode != 0 and 'unknown field "spec.bogus"' in refused.stderr

    kubectl.run("create", "configmap", "c1", "--from-literal=a=b")
    listed = kubectl.run("get", "configmaps", "-o", "json").stdout
    assert "replaced" in kubectl.run("replace", "-f", "-", input=listed).stdout
