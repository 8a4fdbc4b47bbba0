"""OpenAPI documents derived from the declarations are complete and self-consistent."""

from __future__ import annotations

from typing import Any

import pytest

import kube.api.kinds  # noqa: F401  (registers every kind)
from kube.api import openapi
from kube.api.scheme import SCHEME

GROUP_VERSIONS = SCHEME.group_versions()


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


@pytest.mark.parametrize(
    ("group", "version"),
    GROUP_VERSIONS,
    ids=[openapi.group_version_path(*gv) for gv in GROUP_VERSIONS],
)
def test_every_reference_resolves_and_every_kind_is_named(group: str, version: str) -> None:
    doc = openapi.document(group, version)
    schemas = doc["components"]["schemas"]
    prefix = "#/components/schemas/"
    assert {r.removeprefix(prefix) for r in _refs(doc)} <= set(schemas)
    gvks = {
        (g["group"], g["version"], g["kind"])
        for s in schemas.values()
        for g in s.get("x-kubernetes-group-version-kind", [])
        if (g["group"], g["version"]) == (group, version)
    }
    expected = {(i.group, i.version, i.kind) for i in SCHEME if i.group_version == (group, version)}
    assert gvks == expected


def test_pod_schema_carries_merge_keys_and_server_side_validation() -> None:
    doc = openapi.document("", "v1")
    spec = doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]
    containers = spec["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert containers["x-kubernetes-list-type"] == "map"
    assert "containers" in spec.get("required", [])
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert {p["name"] for p in patch["parameters"]} >= {"fieldValidation", "fieldManager"}
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "Pod"


def test_root_lists_every_group_version_with_a_content_hash() -> None:
    def hashes() -> dict[tuple[str, str], str]:
        return {gv: openapi.document_hash(openapi.encoded_document(*gv)) for gv in GROUP_VERSIONS}

    root = openapi.root(hashes())
    assert set(root["paths"]) == {openapi.group_version_path(*gv) for gv in GROUP_VERSIONS}
    url = root["paths"]["api/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/api/v1?hash=")
    assert openapi.root(hashes()) == root, "hashes are stable"


def test_write_operations_take_the_bodies_upstream_lists() -> None:
    paths = openapi.document("apps", "v1")["paths"]
    one = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    patch_ref = {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}
    assert one["patch"]["requestBody"] == {
        "content": {
            "application/apply-patch+yaml": {"schema": patch_ref},
            "application/json-patch+json": {"schema": patch_ref},
            "application/merge-patch+json": {"schema": patch_ref},
            "application/strategic-merge-patch+json": {"schema": patch_ref},
        },
        "required": True,
    }
    deployment_ref = {"$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment"}
    assert one["put"]["requestBody"] == {
        "content": {"*/*": {"schema": deployment_ref}},
        "required": True,
    }
    collection = paths["/apis/apps/v1/namespaces/{namespace}/deployments"]
    assert collection["post"]["requestBody"] == one["put"]["requestBody"]
