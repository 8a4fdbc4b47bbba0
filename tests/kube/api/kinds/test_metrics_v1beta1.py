"""metrics.k8s.io/v1beta1 NodeMetrics and PodMetrics: upstream's JSON read and written back in
its field order, metrics-server's table cells (a pod's usage summed over its containers), and a
registration that keeps the API server itself from serving them."""

from __future__ import annotations

from typing import Any

from kube.api import codec
from kube.api.kinds.metrics_v1beta1 import NodeMetrics, PodMetrics, total_usage
from kube.api.quantity import Quantity
from kube.api.scheme import SCHEME
from tests.kube.api.kinds.helpers import CREATED, cells, decode

NODE: dict[str, Any] = {
    "kind": "NodeMetrics",
    "apiVersion": "metrics.k8s.io/v1beta1",
    "metadata": {"name": "node-1", "creationTimestamp": CREATED},
    "timestamp": "2026-01-01T11:59:50Z",
    "window": "10.011s",
    "usage": {"cpu": "251384735n", "memory": "1573036Ki"},
}
POD: dict[str, Any] = {
    "kind": "PodMetrics",
    "apiVersion": "metrics.k8s.io/v1beta1",
    "metadata": {"name": "web-0", "namespace": "default", "creationTimestamp": CREATED},
    "timestamp": "2026-01-01T11:59:50Z",
    "window": "10.011s",
    "containers": [
        {"name": "app", "usage": {"cpu": "1523479n", "memory": "10Mi"}},
        {"name": "sidecar", "usage": {"cpu": "476521n", "memory": "2Mi"}},
    ],
}


def test_upstream_json_round_trips_in_field_order() -> None:
    for raw, cls in ((NODE, NodeMetrics), (POD, PodMetrics)):
        written = codec.to_builtins(decode(raw, cls))
        assert written == raw
        assert list(written) == list(raw)


def test_pod_usage_is_its_containers_summed() -> None:
    assert total_usage(decode(POD, PodMetrics)) == {
        "cpu": Quantity.parse("2m"),
        "memory": Quantity.parse("12Mi"),
    }
    assert total_usage(decode(NODE, NodeMetrics))["cpu"] == Quantity.parse("251384735n")


def test_cells_are_metrics_servers() -> None:
    assert cells(decode(NODE, NodeMetrics)) == ["node-1", "251384735n", "1573036Ki", "10.011s"]
    assert cells(decode(POD, PodMetrics)) == ["web-0", "2m", "12Mi", "10.011s"]
    assert [c.name for c in NodeMetrics.kind_info.columns] == ["Name", "cpu", "memory", "Window"]
    empty = decode({**POD, "containers": []}, PodMetrics)
    assert cells(empty) == ["web-0", "0", "0", "10.011s"]


def test_registered_as_aggregated_read_only_kinds() -> None:
    node, pod = NodeMetrics.kind_info, PodMetrics.kind_info
    assert (node.group, node.version, node.plural, node.namespaced) == (
        "metrics.k8s.io",
        "v1beta1",
        "nodes",
        False,
    )
    assert (pod.plural, pod.namespaced) == ("pods", True)
    assert node.verbs == pod.verbs == ("get", "list")
    assert node.aggregated and pod.aggregated
    assert SCHEME.by_resource("metrics.k8s.io", "v1beta1", "pods") is pod
    assert not any(info.group == "metrics.k8s.io" for info in SCHEME.served())
    assert ("metrics.k8s.io", "v1beta1") not in SCHEME.group_versions()
