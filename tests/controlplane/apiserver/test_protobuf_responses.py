"""Protobuf answers from a real ``kubelab apiserver``, asked for as client-go asks.

client-go sends ``Accept: application/vnd.kubernetes.protobuf, */*`` for built-in kinds (the
controller-manager, the kubelet, kube-proxy and the scheduler all do).  Each built-in object,
list, error Status and watch event must then come back as upstream's protobuf, decoding
(``decode_body``) to exactly what the same request answers in JSON; a custom resource has no
protobuf message, so the same header gets JSON, and protobuf alone a 406.  The legacy
discovery documents (``/api``, ``/apis``, ``/apis/G``, ``/apis/G/V``) are meta/v1 messages
too.  A watch is ``…protobuf;stream=watch`` in protobuf and plain ``application/json`` in JSON,
Tables (``kubectl get -w``) included, as upstream names a stream by its serializer alone.  The
objects are the kubernetes.io docs' examples (the corpus in tests/kube/api/manifests).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from controlplane.apiserver.protobuf import MAGIC, decode_body
from tests.controlplane.apiserver.corpus import CORPUS

PROTOBUF = "application/vnd.kubernetes.protobuf"
JSON = "application/json"
CLIENT_GO = f"{PROTOBUF}, */*"
METADATA_CLIENT = (
    f"{PROTOBUF};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
    f"{JSON};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,{JSON}"
)


def _manifest(name: str, kind: str) -> dict[str, Any]:
    """The document of ``kind`` in a docs manifest of the corpus, for the test's namespace."""
    documents = yaml.safe_load_all((CORPUS / "manifests" / name).read_text())
    document: dict[str, Any] = next(d for d in documents if d["kind"] == kind)
    document["metadata"].pop("namespace", None)
    return document


POD = _manifest("core-pod-nginx-simple.yaml", "Pod")
DEPLOYMENT = _manifest("apps-deployment-nginx-tutorial.yaml", "Deployment")
CONFIGMAP = _manifest("core-configmap-game-config.yaml", "ConfigMap")
NODE = _manifest("core-node-worker.yaml", "Node")
CRD = _manifest("apiextensions-customresourcedefinition-crontab.yaml", "CustomResourceDefinition")
CRONTAB = _manifest("stable.example.com-crontab-my-new-cron-object.yaml", "CronTab")


def _raw(
    api_client: k8s.ApiClient,
    method: str,
    path: str,
    accept: str,
    body: Any = None,
    query: tuple[tuple[str, str], ...] = (),
) -> tuple[int, str, bytes]:
    """One request through the client's REST layer: its status, Content-Type and body, errors
    included (``call_api`` would read an error's body as UTF-8 text, which protobuf is not)."""
    headers = {"Accept": accept, "Content-Type": JSON}
    api_client.update_params_for_auth(headers, [], ["BearerToken"])
    try:
        answer = api_client.rest_client.request(
            method,
            api_client.configuration.host + path,
            query_params=list(query),
            headers=headers,
            body=body,
            _preload_content=False,
        )
    except k8s.ApiException as error:
        return error.status, error.headers["Content-Type"], error.body
    data: bytes = answer.read()
    answer.release_conn()
    return answer.status, answer.headers["Content-Type"], data


def _json(api_client: k8s.ApiClient, method: str, path: str, body: Any = None) -> dict[str, Any]:
    status, content_type, data = _raw(api_client, method, path, JSON, body)
    assert status < 300, data
    assert content_type == JSON
    result: dict[str, Any] = json.loads(data)
    return result


def _protobuf(api_client: k8s.ApiClient, path: str, accept: str = CLIENT_GO) -> dict[str, Any]:
    status, content_type, data = _raw(api_client, "GET", path, accept)
    assert status == 200, data
    assert content_type == PROTOBUF
    assert data.startswith(MAGIC)
    return decode_body(data)


@pytest.mark.parametrize(
    ("manifest", "collection"),
    [
        (POD, "/api/v1/namespaces/{ns}/pods"),
        (DEPLOYMENT, "/apis/apps/v1/namespaces/{ns}/deployments"),
        (CONFIGMAP, "/api/v1/namespaces/{ns}/configmaps"),
        (NODE, "/api/v1/nodes"),
    ],
    ids=["pod", "deployment", "configmap", "node"],
)
def test_built_in_kinds_answer_protobuf(
    api_client: k8s.ApiClient, namespace: str, manifest: dict[str, Any], collection: str
) -> None:
    path = collection.format(ns=namespace)
    _json(api_client, "POST", path, manifest)
    item = f"{path}/{manifest['metadata']['name']}"
    try:
        assert _protobuf(api_client, item) == _json(api_client, "GET", item)
        listed = _protobuf(api_client, path)
        assert listed["kind"] == f"{manifest['kind']}List"
        from_json = _json(api_client, "GET", path)
        # The list's resourceVersion moves with any write in the cluster meanwhile; items carry
        # no kind or apiVersion in protobuf (the list's message says what they are).
        del listed["metadata"]["resourceVersion"], from_json["metadata"]["resourceVersion"]
        for obj in from_json["items"]:
            obj.pop("kind", None), obj.pop("apiVersion", None)
        assert listed == from_json
    finally:
        _json(api_client, "DELETE", item)


def test_a_scale_subresource_answers_protobuf(api_client: k8s.ApiClient, namespace: str) -> None:
    """autoscaling/v1 Scale, which only travels through /scale, as client-go's scale client
    reads it."""
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    _json(api_client, "POST", path, DEPLOYMENT)
    scale = f"{path}/{DEPLOYMENT['metadata']['name']}/scale"
    try:
        answered = _protobuf(api_client, scale)
        assert answered["kind"] == "Scale" and answered["spec"]["replicas"] == 3
        assert answered == _json(api_client, "GET", scale)
    finally:
        _json(api_client, "DELETE", f"{path}/{DEPLOYMENT['metadata']['name']}")


def test_partial_object_metadata_in_protobuf(api_client: k8s.ApiClient, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = _json(api_client, "POST", path, CONFIGMAP)
    accept = f"{PROTOBUF};as=PartialObjectMetadata;g=meta.k8s.io;v=v1, {JSON}"
    status, content_type, data = _raw(
        api_client, "GET", f"{path}/{CONFIGMAP['metadata']['name']}", accept
    )
    assert (status, content_type) == (
        200,
        f"{PROTOBUF};as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
    )
    assert decode_body(data) == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": created["metadata"],
    }


def test_errors_are_protobuf_statuses(api_client: k8s.ApiClient, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods/missing"
    status, content_type, data = _raw(api_client, "GET", path, CLIENT_GO)
    assert (status, content_type) == (404, PROTOBUF)
    assert decode_body(data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "missing" not found',
        "reason": "NotFound",
        "details": {"name": "missing", "kind": "pods"},
        "code": 404,
    }


def _frames(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The events of a protobuf watch stream: 4-byte big-endian lengths, each followed by a
    WatchEvent {1: type, 2: RawExtension {1: the object's enveloped body}}."""
    events = []
    while data:
        size = int.from_bytes(data[:4], "big")
        event, data = data[4 : 4 + size], data[4 + size :]
        assert len(event) == size
        # type: key 0x0a, a one-byte length (the types are short); object: key 0x12.
        assert event[0] == 0x0A
        event_type = event[2 : 2 + event[1]].decode()
        rest = event[2 + event[1] :]
        assert rest[0] == 0x12
        extension, end = _length(rest, 1)
        assert end == len(rest)
        assert extension[0] == 0x0A
        raw, end = _length(extension, 1)
        assert end == len(extension)
        events.append((event_type, decode_body(raw)))
    return events


def _length(data: bytes, pos: int) -> tuple[bytes, int]:
    """The length-delimited value at ``pos`` (a varint length, then the bytes)."""
    size = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        size |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return data[pos : pos + size], pos + size


def test_watch_in_protobuf_framing(api_client: k8s.ApiClient, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    version = _json(api_client, "GET", path)["metadata"]["resourceVersion"]
    created = _json(api_client, "POST", path, CONFIGMAP)
    changed = _json(
        api_client,
        "PUT",
        f"{path}/{CONFIGMAP['metadata']['name']}",
        {**created, "data": {**created["data"], "player_initial_lives": "5"}},
    )
    _json(api_client, "DELETE", f"{path}/{CONFIGMAP['metadata']['name']}")
    status, content_type, data = _raw(
        api_client,
        "GET",
        path,
        CLIENT_GO,
        query=(("watch", "true"), ("resourceVersion", version), ("timeoutSeconds", "2")),
    )
    assert (status, content_type) == (200, f"{PROTOBUF};stream=watch")
    events = _frames(data)
    assert [(t, o["metadata"]["resourceVersion"]) for t, o in events[:2]] == [
        ("ADDED", created["metadata"]["resourceVersion"]),
        ("MODIFIED", changed["metadata"]["resourceVersion"]),
    ]
    assert events[0][1] == created
    assert events[1][1] == changed
    assert events[2][0] == "DELETED"


def test_a_table_watch_is_plain_json(api_client: k8s.ApiClient, namespace: str) -> None:
    """``kubectl get -w``'s Accept: the events carry Tables, the stream says application/json."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    version = _json(api_client, "GET", path)["metadata"]["resourceVersion"]
    created = _json(api_client, "POST", path, {"metadata": {"name": "table-watch"}})
    kubectl_get = (
        f"{JSON};as=Table;v=v1;g=meta.k8s.io,{JSON};as=Table;v=v1beta1;g=meta.k8s.io,{JSON}"
    )
    query = (("watch", "true"), ("resourceVersion", version), ("timeoutSeconds", "1"))
    status, content_type, data = _raw(api_client, "GET", path, kubectl_get, query=query)
    assert (status, content_type) == (200, JSON)
    event = json.loads(data.splitlines()[0])
    assert (event["type"], event["object"]["kind"]) == ("ADDED", "Table")
    assert event["object"]["rows"][0]["cells"][0] == created["metadata"]["name"]


def _crontabs(api_client: k8s.ApiClient, namespace: str) -> str:
    _, _, existing = _raw(
        api_client,
        "GET",
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD['metadata']['name']}",
        JSON,
    )
    if b"NotFound" in existing:
        _json(api_client, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    path = f"/apis/stable.example.com/v1/namespaces/{namespace}/crontabs"
    deadline = time.monotonic() + 30
    while _raw(api_client, "GET", path, JSON)[0] != 200:
        assert time.monotonic() < deadline, "the CRD was never served"
        time.sleep(0.2)
    return path


def test_custom_resources_answer_json(api_client: k8s.ApiClient, namespace: str) -> None:
    path = _crontabs(api_client, namespace)
    created = _json(api_client, "POST", path, CRONTAB)
    item = f"{path}/{CRONTAB['metadata']['name']}"
    status, content_type, data = _raw(api_client, "GET", item, CLIENT_GO)
    assert (status, content_type) == (200, JSON)
    assert json.loads(data) == created
    # client-go's metadata client: PartialObjectMetadata has a message, whatever the kind.
    status, content_type, data = _raw(api_client, "GET", path, METADATA_CLIENT)
    assert (status, content_type) == (
        200,
        f"{PROTOBUF};as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
    )
    partial = decode_body(data)
    assert partial["kind"] == "PartialObjectMetadataList"
    assert [item["metadata"] for item in partial["items"]] == [created["metadata"]]
    status, content_type, data = _raw(api_client, "GET", item, PROTOBUF)
    assert (status, content_type) == (406, JSON)
    assert json.loads(data)["message"] == (
        "only the following media types are accepted: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )


def test_delete_answers_a_protobuf_status(api_client: k8s.ApiClient, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = _json(api_client, "POST", path, CONFIGMAP)
    name = CONFIGMAP["metadata"]["name"]
    status, content_type, data = _raw(api_client, "DELETE", f"{path}/{name}", CLIENT_GO)
    assert (status, content_type) == (200, PROTOBUF)
    assert decode_body(data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "kind": "configmaps", "uid": created["metadata"]["uid"]},
    }


@pytest.mark.parametrize("path", ["/api", "/apis", "/apis/apps", "/api/v1", "/apis/apps/v1"])
def test_legacy_discovery_answers_protobuf(api_client: k8s.ApiClient, path: str) -> None:
    """APIVersions, APIGroupList, APIGroup and APIResourceList in meta/v1's messages, as
    client-go's discovery gets them with protobuf preferred, decoding to the JSON documents."""
    assert _protobuf(api_client, path) == _json(api_client, "GET", path)


def test_aggregated_discovery_stays_json(api_client: k8s.ApiClient) -> None:
    """kubectl's Accept (aggregated discovery, then the legacy document) is answered as
    before; protobuf listed after JSON does not win."""
    accept = f"{JSON};g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,{JSON}"
    status, content_type, data = _raw(api_client, "GET", "/apis", accept)
    assert status == 200 and content_type.startswith(JSON)
    assert json.loads(data)["kind"] == "APIGroupDiscoveryList"
    status, content_type, data = _raw(api_client, "GET", "/api/v1", f"{JSON}, {PROTOBUF}")
    assert (status, content_type) == (200, JSON)
    assert json.loads(data)["kind"] == "APIResourceList"


def test_no_table_in_protobuf(api_client: k8s.ApiClient, namespace: str) -> None:
    """Tables travel in JSON or YAML only: asked for in protobuf alone, a 406 in JSON."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    status, content_type, data = _raw(
        api_client, "GET", path, f"{PROTOBUF};as=Table;v=v1;g=meta.k8s.io"
    )
    assert (status, content_type) == (406, JSON)
    assert json.loads(data)["reason"] == "NotAcceptable"
