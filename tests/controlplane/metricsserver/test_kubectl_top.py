"""``kubectl top`` against real processes: ``kubelab server`` (aggregator routing to endpoint
addresses), ``kubelab hollow-nodes`` serving each node's kubelet API with synthetic usage, and
``kubelab metrics-server`` behind the APIService ``v1beta1.metrics.k8s.io`` as upstream's
manifest registers it.  The pinned kubectl's ``top nodes`` and ``top pods --containers`` are
checked line for line, and against each kubelet's /stats/summary read through the API server's
node proxy; the metrics API itself through the official Python client."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest
import requests

from tests.controlplane.metricsserver.processes import (
    hollow_kubelets,
    metrics_server,
    registration,
)
from tests.servers import Kubectl, ServerProcess, serve_all_in_one

WAIT = 60.0
NAMESPACE = "default"
MI = 1024 * 1024


@dataclass(frozen=True)
class Cluster:
    """kubectl on the cluster, and where the metrics-server listens."""

    kubectl: Kubectl
    metrics_url: str


def _until(found: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT
    while not (result := found()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)
    return result


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from serve_all_in_one(tmp_path_factory, "--enable-aggregator-routing=true")


@pytest.fixture(scope="module")
def kubectl(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(server.kubeconfig, tmp_path_factory.mktemp("kube-cache"), NAMESPACE)


def _pod(name: str, node: str, usage: dict[str, Any] | None) -> dict[str, Any]:
    annotations = {"kubelab.io/hollow-usage": json.dumps(usage)} if usage else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "app", "image": "app"}, {"name": "sidecar", "image": "side"}],
        },
    }


@pytest.fixture(scope="module")
def cluster(
    server: ServerProcess, kubectl: Kubectl, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Two hollow nodes, two pods on the first, the metrics-server registered and serving."""
    work = tmp_path_factory.mktemp("top")
    hollow = hollow_kubelets(
        server,
        work,
        2,
        "--node-usage",
        "cpu=100m,memory=512Mi",
        "--container-usage",
        "cpu=10m,memory=16Mi",
    )
    metrics = None
    try:
        metrics, address, port = metrics_server(server, work, "1s")
        documents = [
            _pod("web", "hollow-node-0", {"app": {"cpu": "250m", "memory": "64Mi"}}),
            _pod("worker", "hollow-node-0", None),
            *registration(address, port),
        ]
        listed = {"apiVersion": "v1", "kind": "List", "items": documents}
        kubectl.run("create", "-f", "-", input=json.dumps(listed), namespaced=False)
        _until(
            lambda: kubectl.run("top", "pods", check=False).returncode == 0,
            "metrics of both pods",
        )
        yield Cluster(kubectl, f"https://{address}:{port}")
    finally:
        if metrics is not None:
            metrics.stop()
        hollow.stop()


TOP_NODES = [
    "NAME            CPU(cores)   CPU(%)   MEMORY(bytes)   MEMORY(%)   ",
    "hollow-node-0   380m         9%       624Mi           3%          ",
    "hollow-node-1   100m         2%       512Mi           3%          ",
]
"""What kubectl prints, trailing padding included: node 0 runs 100m and 512Mi of its own plus
web (250m + 10m, 64Mi + 16Mi) and worker (2 x 10m, 2 x 16Mi), of 4 cores and 16Gi."""
TOP_PODS = [
    "POD      NAME      CPU(cores)   MEMORY(bytes)   ",
    "web      app       250m         64Mi            ",
    "web      sidecar   10m          16Mi            ",
    "worker   app       10m          16Mi            ",
    "worker   sidecar   10m          16Mi            ",
]


def _printed(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def test_kubectl_top_nodes(cluster: Cluster) -> None:
    assert cluster.kubectl.run("top", "nodes", namespaced=False).stdout == _printed(TOP_NODES)


def test_kubectl_top_pods_containers(cluster: Cluster) -> None:
    assert cluster.kubectl.run("top", "pods", "--containers").stdout == _printed(TOP_PODS)
    assert cluster.kubectl.run("top", "pod", "web").stdout.splitlines()[1].split() == [
        "web",
        "260m",
        "80Mi",
    ]


def _summary(kubectl: Kubectl, node: str) -> dict[str, Any]:
    path = f"/api/v1/nodes/{node}/proxy/stats/summary"
    loaded: dict[str, Any] = json.loads(kubectl.run("get", "--raw", path, namespaced=False).stdout)
    return loaded


def _cores(stats: dict[str, Any]) -> str:
    return f"{-(-stats['cpu']['usageNanoCores'] // 1_000_000)}m"


def _mebibytes(stats: dict[str, Any]) -> str:
    return f"{stats['memory']['workingSetBytes'] // MI}Mi"


def test_top_equals_the_kubelets_summary(cluster: Cluster) -> None:
    nodes = {row.split()[0]: row.split() for row in TOP_NODES[1:]}
    pods = [row.split() for row in TOP_PODS[1:]]
    for name in ("hollow-node-0", "hollow-node-1"):
        summary = _summary(cluster.kubectl, name)
        assert nodes[name][1] == _cores(summary["node"])
        assert nodes[name][3] == _mebibytes(summary["node"])
        for pod in summary["pods"]:
            for container in pod["containers"]:
                row = [
                    pod["podRef"]["name"],
                    container["name"],
                    _cores(container),
                    _mebibytes(container),
                ]
                assert row in pods


def test_metrics_api_through_the_python_client(cluster: Cluster, server: ServerProcess) -> None:
    api = kubernetes.client.CustomObjectsApi(
        kubernetes.config.new_client_from_config(str(server.kubeconfig))
    )
    node = api.get_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes", "hollow-node-1")
    assert (node["kind"], node["usage"]) == (
        "NodeMetrics",
        {"cpu": "100m", "memory": "512Mi"},
    )
    assert re.fullmatch(r"\d+(\.\d+)?s", node["window"])
    listed = api.list_namespaced_custom_object(
        "metrics.k8s.io", "v1beta1", NAMESPACE, "pods", label_selector="missing=label"
    )
    assert (listed["kind"], listed["items"]) == ("PodMetricsList", [])
    with pytest.raises(kubernetes.client.ApiException) as missing:
        api.get_namespaced_custom_object("metrics.k8s.io", "v1beta1", NAMESPACE, "pods", "nope")
    assert missing.value.status == 404
    assert json.loads(missing.value.body)["message"] == 'pods.metrics.k8s.io "nope" not found'
    table = cluster.kubectl.run("get", "nodes.metrics.k8s.io", namespaced=False).stdout
    assert table.splitlines()[0].split() == ["NAME", "CPU", "MEMORY", "WINDOW"]


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_only_the_front_proxy_is_believed_and_users_are_authorized(cluster: Cluster) -> None:
    """Headers naming a user count for nothing without the front proxy's client certificate
    (its self-signed serving certificate is not what is checked here); a user the API server
    does not authorize gets upstream's 403."""
    direct = requests.get(
        f"{cluster.metrics_url}/apis/metrics.k8s.io/v1beta1/nodes",
        headers={"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"},
        verify=False,
        timeout=10,
    )
    assert (direct.status_code, direct.json()["reason"]) == (401, "Unauthorized")
    denied = cluster.kubectl.run("top", "nodes", "--as=nobody", check=False, namespaced=False)
    assert denied.returncode == 1
    assert denied.stderr.strip() == (
        'Error from server (Forbidden): nodes.metrics.k8s.io is forbidden: User "nobody" cannot '
        'list resource "nodes" in API group "metrics.k8s.io" at the cluster scope'
    )
