"""``/openapi/v3`` as clients cache it: the root links each group-version's document by its
content hash; a document asked for by that hash is immutable for caches, has the hash as its
ETag (a matching ``If-None-Match`` gets 304), and a stale hash is redirected to the current
link.  So kubectl, whose disk cache keeps the documents, need not fetch them before every
``create``.  A PATCH takes the patch types the resource accepts."""

from __future__ import annotations

import http.client
import json

from controlplane.apiserver.crd.customresources import served_versions
from kube.api import codec, openapi
from kube.api.kinds.apiextensions_v1 import CustomResourceDefinition
from tests.controlplane.apiserver.corpus import CORPUS
from tests.controlplane.apiserver.inprocess import admin_ssl
from tests.servers import ServerProcess


def get(
    server: ServerProcess, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=admin_ssl(server.data_dir), timeout=60
    )
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_documents_are_linked_by_hash_and_cacheable(apiserver: ServerProcess) -> None:
    status, _, body = get(apiserver, "/openapi/v3")
    assert status == 200
    link = json.loads(body)["paths"]["apis/apps/v1"]["serverRelativeURL"]
    digest = link.partition("?hash=")[2]
    assert link == f"/openapi/v3/apis/apps/v1?hash={digest}"

    status, headers, body = get(apiserver, link)
    assert status == 200
    assert "io.k8s.api.apps.v1.Deployment" in json.loads(body)["components"]["schemas"]
    assert headers["ETag"] == f'"{digest}"'
    assert headers["Cache-Control"] == "public, immutable"
    assert headers["Expires"].endswith(" UTC")

    status, headers, body = get(apiserver, link, {"If-None-Match": f'"{digest}"'})
    assert (status, body) == (304, b"")

    status, headers, _ = get(apiserver, "/openapi/v3/apis/apps/v1?hash=0BSOLETE")
    assert (status, headers["Location"]) == (301, link)

    status, headers, _ = get(apiserver, "/openapi/v3/apis/apps/v1")
    assert status == 200
    assert "Cache-Control" not in headers


def test_a_custom_resource_is_patched_without_strategic_merge() -> None:
    """The CronTab CRD of the kubernetes.io task page."""
    manifest = CORPUS / "manifests" / "apiextensions-customresourcedefinition-crontab.yaml"
    raw = codec.load_yaml_documents(manifest.read_text())[0]
    crd = codec.from_builtins(raw, CustomResourceDefinition).obj
    kinds = [served.info for served in served_versions(crd)]
    paths = openapi.document("stable.example.com", "v1", kinds)["paths"]
    patch = paths["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]["patch"]
    assert sorted(patch["requestBody"]["content"]) == [
        "application/apply-patch+yaml",
        "application/json-patch+json",
        "application/merge-patch+json",
    ]
