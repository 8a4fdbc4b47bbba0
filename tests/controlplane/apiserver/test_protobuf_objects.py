"""Objects created with a protobuf body through a real API server are the objects the same
manifest makes as JSON.

Each document of the docs corpus (tests/kube/api/manifests) named below is created twice through
the official Python client, once as JSON and once as the protobuf body client-go would send
(``encode_body``, which writes what Go writes), under two names, and read back as JSON.  The
two objects, as Go would write them to protobuf (explicit zeros of ``omitempty`` fields and the
TypeMeta of embedded objects, such as a StatefulSet's claim templates, are not on the wire),
are equal but for what the server sets per object: name, uid, resourceVersion, creation time
and managed fields (a JSON body's explicit zeros are fields it manages).  The server answers in
JSON only (it does not serve protobuf responses), so that is the reading side of the round
trip.  The field numbers themselves are held to upstream's by the hand-built bodies of
test_protobuf.py: a round trip through one table cannot see a wrong number.

Namespaced documents are moved into the test's namespace (their references to their own
namespace with them); cluster-scoped ones carry the test's namespace in their names, since the
module's server is shared.
"""

from __future__ import annotations

import functools
from typing import Any

import kubernetes
import pytest
import yaml

from controlplane.apiserver.protobuf import decode_body, encode_body, tables
from kube.api.scheme import SCHEME, KindInfo
from kube.client.rest import ResourcePath
from tests.controlplane.apiserver.corpus import CORPUS

PROTOBUF = "application/vnd.kubernetes.protobuf"

MANIFESTS = [
    "core-node-worker.yaml",
    "core-persistentvolume-hostpath.yaml",
    "core-persistentvolume-local-ssd.yaml",
    "core-persistentvolume-nfs.yaml",
    "core-persistentvolumeclaim-dynamic.yaml",
    "core-podtemplate-worker.yaml",
    "core-replicationcontroller-nginx.yaml",
    "core-event-backoff.yaml",
    "core-limitrange-defaults.yaml",
    "core-endpoints-external-postgres.yaml",
    "discovery-endpointslice-example.yaml",
    "events-event-scheduled.yaml",
    "apps-replicaset-frontend.yaml",
    "apps-daemonset-fluentd-elasticsearch.yaml",
    "apps-daemonset-node-exporter.yaml",
    "apps-statefulset-web-nginx.yaml",
    "apps-statefulset-zookeeper-parallel.yaml",
    "apps-controllerrevision-statefulset-history.yaml",
    "coordination-lease-leader-election.yaml",
    "storage-storageclass-local-and-csi.yaml",
    "storage-volumeattachment-pv.yaml",
    "resource-resourceslice-cat-slice.yaml",
]
"""Docs manifests of the kinds numbered for issue 22; every document in them whose kind has a
protobuf message is created both ways, but for Services (their cluster IPs differ)."""

SET_PER_OBJECT = ("name", "uid", "resourceVersion", "creationTimestamp", "managedFields")


def _info(document: dict[str, Any]) -> KindInfo:
    info = SCHEME.by_kind(document["apiVersion"], document["kind"])
    assert info is not None, document["kind"]
    return info


def _documents(manifest: str) -> list[dict[str, Any]]:
    documents = yaml.safe_load_all((CORPUS / "manifests" / manifest).read_text())
    return [
        d
        for d in documents
        if d is not None
        and (d["apiVersion"], d["kind"]) in tables().kinds
        and d["kind"] != "Service"
    ]


def _moved(value: Any, old: str, new: str) -> Any:
    """``value`` with every ``namespace: old`` in it made ``namespace: new``."""
    if isinstance(value, dict):
        return {
            k: new if k == "namespace" and v == old else _moved(v, old, new)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_moved(item, old, new) for item in value]
    return value


def _named(document: dict[str, Any], namespace: str, how: str) -> dict[str, Any]:
    """The document as this test creates it ``how`` (``pb`` or ``json``)."""
    metadata = document["metadata"]
    if _info(document).namespaced:
        document = _moved(document, metadata.get("namespace", "default"), namespace)
        named = {"name": f"{metadata['name']}-{how}", "namespace": namespace}
    else:
        named = {"name": f"{namespace}-{metadata['name']}-{how}"}
    return {**document, "metadata": {**document["metadata"], **named}}


def _call(
    client: kubernetes.client.ApiClient,
    method: str,
    path: str,
    body: bytes | dict[str, Any] | None = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    answer: dict[str, Any] = client.call_api(
        path,
        method,
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
        response_types_map={200: "object", 201: "object"},
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
    )
    return answer


def _created(
    client: kubernetes.client.ApiClient, document: dict[str, Any], protobuf: bool
) -> dict[str, Any]:
    """The object the server keeps for ``document``, posted as protobuf or JSON, read back."""
    info = _info(document)
    path = ResourcePath.of(info)
    namespace = document["metadata"].get("namespace") if info.namespaced else None
    if protobuf:
        _call(client, "POST", path.url(namespace), encode_body(document), PROTOBUF)
    else:
        _call(client, "POST", path.url(namespace), document)
    return _call(client, "GET", path.url(namespace, document["metadata"]["name"]))


def _through_protobuf(obj: dict[str, Any]) -> dict[str, Any]:
    return decode_body(encode_body(obj))


def _per_object_removed(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in obj["metadata"].items() if k not in SET_PER_OBJECT}
    return {**obj, "metadata": metadata}


@functools.cache
def _cases() -> list[tuple[str, int]]:
    return [(m, i) for m in MANIFESTS for i in range(len(_documents(m)))]


@pytest.mark.parametrize(("manifest", "index"), _cases(), ids=lambda v: str(v))
def test_created_from_protobuf_as_from_json(
    api_client: kubernetes.client.ApiClient, namespace: str, manifest: str, index: int
) -> None:
    document = _documents(manifest)[index]
    from_protobuf = _created(api_client, _named(document, namespace, "pb"), protobuf=True)
    from_json = _created(api_client, _named(document, namespace, "json"), protobuf=False)
    assert _per_object_removed(_through_protobuf(from_protobuf)) == _per_object_removed(
        _through_protobuf(from_json)
    )


def test_binding_from_protobuf_binds_the_pod(
    api_client: kubernetes.client.ApiClient, namespace: str
) -> None:
    """A Binding is only created (POST pods/NAME/binding or bindings): its effect is the pod's
    node."""
    pod = yaml.safe_load((CORPUS / "manifests" / "core-pod-nginx-simple.yaml").read_text())
    pod["metadata"] = {"name": "bound", "namespace": namespace}
    _call(api_client, "POST", f"/api/v1/namespaces/{namespace}/pods", pod)
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "bound", "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "worker-1"},
    }
    path = f"/api/v1/namespaces/{namespace}/pods/bound/binding"
    _call(api_client, "POST", path, encode_body(binding), PROTOBUF)
    bound = _call(api_client, "GET", f"/api/v1/namespaces/{namespace}/pods/bound")
    assert bound["spec"]["nodeName"] == "worker-1"


def test_every_numbered_kind_is_created_here() -> None:
    """The manifests above cover the kinds numbered with them (Binding has its own test)."""
    kinds = {(d["apiVersion"], d["kind"]) for m in MANIFESTS for d in _documents(m)}
    assert kinds >= {
        ("v1", "Node"),
        ("v1", "PersistentVolume"),
        ("v1", "PersistentVolumeClaim"),
        ("v1", "PodTemplate"),
        ("v1", "ReplicationController"),
        ("v1", "Event"),
        ("v1", "LimitRange"),
        ("v1", "Endpoints"),
        ("discovery.k8s.io/v1", "EndpointSlice"),
        ("events.k8s.io/v1", "Event"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "DaemonSet"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "ControllerRevision"),
        ("coordination.k8s.io/v1", "Lease"),
        ("storage.k8s.io/v1", "StorageClass"),
        ("storage.k8s.io/v1", "VolumeAttachment"),
        ("resource.k8s.io/v1", "ResourceSlice"),
    }
