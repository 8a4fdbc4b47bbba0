"""The official Kubernetes Python client (pinned 36.0.3) against a real ``kubelab apiserver``."""

from __future__ import annotations

import copy
import pathlib
import threading
import time
from typing import Any

import kubernetes
import pytest
from kubernetes import client as k8s
from kubernetes import dynamic, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic.exceptions import ConflictError

import kube.api.kinds  # noqa: F401  (registers every kind)
from kube.api import codec
from kube.api.scheme import SCHEME
from tests.servers import BARE_APISERVER, start_server, stop_server

MANIFESTS = pathlib.Path(__file__).parents[2] / "kube" / "api" / "manifests"


def _configmap(name: str, **data: str) -> k8s.V1ConfigMap:
    return k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=name), data=data)


def test_typed_crud(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    created = core.create_namespaced_config_map(namespace, _configmap("one", a="1"))
    assert created.metadata.uid and created.metadata.resource_version
    got = core.read_namespaced_config_map("one", namespace)
    assert got.data == {"a": "1"}
    got.data["b"] = "2"
    replaced = core.replace_namespaced_config_map("one", namespace, got)
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    got.data["c"] = "stale"
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_config_map("one", namespace, got)
    assert conflict.value.status == 409
    listed = core.list_namespaced_config_map(namespace)
    assert [c.metadata.name for c in listed.items] == ["one"]
    core.delete_namespaced_config_map("one", namespace)
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("one", namespace)
    assert missing.value.status == 404


def test_patch_types(api_client: k8s.ApiClient, namespace: str) -> None:
    apps = k8s.AppsV1Api(api_client)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
            },
        },
    }
    apps.create_namespaced_deployment(namespace, deployment)
    # The client sends a dict body as strategic merge patch for this call.
    apps.patch_namespaced_deployment(
        "web",
        namespace,
        {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "y2"}]}}}},
    )
    api_client.call_api(
        f"/apis/apps/v1/namespaces/{namespace}/deployments/web",
        "PATCH",
        header_params={"Content-Type": "application/merge-patch+json"},
        body={"spec": {"minReadySeconds": 3}},
        response_types_map={200: "object", 201: "object"},
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
    )
    api_client.call_api(
        f"/apis/apps/v1/namespaces/{namespace}/deployments/web",
        "PATCH",
        header_params={"Content-Type": "application/json-patch+json"},
        body=[{"op": "replace", "path": "/spec/replicas", "value": 5}],
        response_types_map={200: "object", 201: "object"},
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
    )
    result = apps.read_namespaced_deployment("web", namespace)
    images = [(c.name, c.image) for c in result.spec.template.spec.containers]
    assert images == [("a", "x"), ("b", "y2")]
    assert (result.spec.min_ready_seconds, result.spec.replicas) == (3, 5)


def test_server_side_apply(api_client: k8s.ApiClient, namespace: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "applied"},
        "data": {"k": "v"},
    }
    for manager in ("alpha", "alpha"):
        api_client.call_api(
            f"/api/v1/namespaces/{namespace}/configmaps/applied",
            "PATCH",
            query_params=[("fieldManager", manager)],
            header_params={"Content-Type": "application/apply-patch+yaml"},
            body=body,
            response_types_map={200: "object", 201: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
    conflicting = copy.deepcopy(body)
    conflicting["data"] = {"k": "other"}
    with pytest.raises(ApiException) as conflict:
        api_client.call_api(
            f"/api/v1/namespaces/{namespace}/configmaps/applied",
            "PATCH",
            query_params=[("fieldManager", "beta")],
            header_params={"Content-Type": "application/apply-patch+yaml"},
            body=conflicting,
            response_types_map={200: "object", 201: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
    assert conflict.value.status == 409
    assert "alpha" in conflict.value.body


def test_watch_resumes(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    listed = core.list_namespaced_config_map(namespace)
    start = listed.metadata.resource_version
    events: list[tuple[str, str]] = []
    done = threading.Event()

    def consume() -> None:
        stream = watch.Watch()
        for event in stream.stream(
            core.list_namespaced_config_map, namespace, resource_version=start, timeout_seconds=10
        ):
            events.append((event["type"], event["object"].metadata.name))
            if len(events) == 3:
                stream.stop()
        done.set()

    consumer = threading.Thread(target=consume)
    consumer.start()
    core.create_namespaced_config_map(namespace, _configmap("w1"))
    core.create_namespaced_config_map(namespace, _configmap("w2"))
    core.delete_namespaced_config_map("w1", namespace)
    assert done.wait(15)
    consumer.join()
    assert events == [("ADDED", "w1"), ("ADDED", "w2"), ("DELETED", "w1")]


def test_delete_collection_by_label(api_client: k8s.ApiClient, namespace: str) -> None:
    core = k8s.CoreV1Api(api_client)
    for name, team in (("a", "red"), ("b", "red"), ("c", "blue")):
        cm = _configmap(name)
        cm.metadata.labels = {"team": team}
        core.create_namespaced_config_map(namespace, cm)
    core.delete_collection_namespaced_config_map(namespace, label_selector="team=red")
    left = core.list_namespaced_config_map(namespace)
    assert [c.metadata.name for c in left.items] == ["c"]


def _samples() -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for document in codec.load_yaml_documents(path.read_text()):
            for item in codec.iter_objects(document):
                key = (item["apiVersion"], item["kind"])
                if SCHEME.by_kind(*key) is not None:
                    found.setdefault(key, item)
    return found


SAMPLES = _samples()
SERVED = [
    i for i in SCHEME.served() if set(i.verbs) >= {"create", "get", "list", "update", "delete"}
]


@pytest.mark.parametrize("info", SERVED, ids=[f"{i.api_version}/{i.kind}" for i in SERVED])
def test_dynamic_crud_of_every_kind(api_client: k8s.ApiClient, namespace: str, info: Any) -> None:
    sample = SAMPLES.get((info.api_version, info.kind))
    if sample is None:
        pytest.fail(f"the manifest corpus has no {info.api_version} {info.kind}")
    obj = copy.deepcopy(sample)
    obj["metadata"] = {
        "name": f"{namespace}-sample"
        if not info.namespaced
        else obj["metadata"].get("name", "sample"),
        "labels": {"test": "dynamic"},
    }
    if isinstance(obj.get("involvedObject"), dict) and info.namespaced:
        obj["involvedObject"]["namespace"] = namespace  # an Event's object is in its namespace
    if info.kind in ("CustomResourceDefinition", "IPAddress", "APIService"):
        # A CRD is named after its group and plural, an IPAddress after its address, an
        # APIService after its version and group.
        obj["metadata"]["name"] = sample["metadata"]["name"]
    client = dynamic.DynamicClient(api_client)
    resource = client.resources.get(api_version=info.api_version, kind=info.kind)
    kwargs = {"namespace": namespace} if info.namespaced else {}
    created = resource.create(body=obj, **kwargs)
    name = created.metadata.name
    try:
        got = resource.get(name=name, **kwargs)
        assert got.metadata.uid == created.metadata.uid
        listed = resource.get(label_selector="test=dynamic", **kwargs)
        assert name in [i.metadata.name for i in listed.items]
        for _ in range(5):  # a controller may write between the read and the write: retry
            body = resource.get(name=name, **kwargs).to_dict()
            body["metadata"]["annotations"] = {"touched": "yes"}
            try:
                replaced = resource.replace(body=body, **kwargs)
                break
            except ConflictError:
                continue
        assert replaced.metadata.annotations["touched"] == "yes"
    finally:
        resource.delete(name=name, **kwargs)


def test_discovery_and_version(api_client: k8s.ApiClient) -> None:
    version = k8s.VersionApi(api_client).get_code()
    assert (version.major, version.minor) == ("1", "36")
    groups = {g.name for g in k8s.ApisApi(api_client).get_api_versions().groups}
    assert {
        "apps",
        "batch",
        "rbac.authorization.k8s.io",
        "coordination.k8s.io",
        "networking.k8s.io",
    } <= groups
    assert kubernetes.__version__ == "36.0.3"


def test_watch_from_a_compacted_revision_is_410(tmp_path: pathlib.Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = start_server(data_dir, *BARE_APISERVER, "--etcd-compaction-interval", "1s")
    try:
        client = kubernetes.config.new_client_from_config(config_file=str(server.kubeconfig))
        core = k8s.CoreV1Api(client)
        first = core.create_namespaced_config_map("default", _configmap("old"))
        core.delete_namespaced_config_map("old", "default")
        time.sleep(2.5)  # two compaction ticks: the first create's revision is gone
        with pytest.raises(ApiException) as expired:
            for _ in watch.Watch().stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=first.metadata.resource_version,
                timeout_seconds=5,
            ):
                pass
        assert expired.value.status == 410
        client.close()
    finally:
        stop_server(server)


def test_bodies_are_upstreams_bytes(api_client: k8s.ApiClient, namespace: str) -> None:
    """Objects, lists, Status and watch events as upstream writes them: ``kind``,
    ``apiVersion``, ``metadata``, then the rest, and a newline after each document.  The
    client's own e2e suite compares a conflict's body with exactly these bytes."""
    core = k8s.CoreV1Api(api_client)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "mock", "labels": {"app": "mock"}},
        "spec": {"selector": {"app": "mock"}, "ports": [{"port": 99, "targetPort": 9949}]},
    }
    core.create_namespaced_service(namespace, service)
    with pytest.raises(ApiException) as conflict:
        core.create_namespaced_service(namespace, service)
    assert conflict.value.body == (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        '"message":"services \\"mock\\" already exists","reason":"AlreadyExists",'
        '"details":{"name":"mock","kind":"services"},"code":409}\n'
    )

    def raw(**options: Any) -> bytes:
        path = f"/api/v1/namespaces/{namespace}/services"
        answer = api_client.call_api(
            path + ("/mock" if options.pop("one", False) else ""),
            "GET",
            query_params=list(options.items()),
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
        data: bytes = answer.read()
        answer.release_conn()
        return data

    one = raw(one=True)
    assert one.startswith(b'{"kind":"Service","apiVersion":"v1","metadata":{"name":"mock",')
    assert one.endswith(b"}\n") and one.count(b"\n") == 1
    listed = raw()
    assert listed.startswith(b'{"kind":"ServiceList","apiVersion":"v1","metadata":{')
    assert b'"items":[{"kind":"Service","apiVersion":"v1","metadata":' in listed
    assert listed.endswith(b"}\n") and listed.count(b"\n") == 1
    events = raw(watch="true", timeoutSeconds=1, resourceVersion="0")
    assert events.startswith(
        b'{"type":"ADDED","object":{"kind":"Service","apiVersion":"v1","metadata":'
    )
    assert events.endswith(b"}}\n") and events.count(b"\n") == 1
