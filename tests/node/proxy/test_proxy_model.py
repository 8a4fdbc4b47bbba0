"""Services and EndpointSlices into service ports and endpoints, and change tracking."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from kube.api.kinds.core_v1.service import (
    ClientIPConfig,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Service,
    ServicePort,
    ServiceSpec,
    ServiceStatus,
    SessionAffinityConfig,
)
from kube.api.kinds.discovery_v1 import (
    SERVICE_NAME_LABEL,
    Endpoint,
    EndpointConditions,
    EndpointPort,
    EndpointSlice,
)
from kube.api.meta_v1 import ObjectMeta
from node.proxy.model import (
    ChangeTracker,
    EndpointInfo,
    ServicePortName,
    endpoints_for,
    service_key_of_slice,
    service_ports,
    usable,
)

NODE = "node-a"


def service(name: str = "web", protocol: str = "TCP", **spec: Any) -> Service:
    fields: dict[str, Any] = {
        "type": "ClusterIP",
        "cluster_ip": "10.96.0.10",
        "ports": [ServicePort(name="http", protocol=protocol, port=80, node_port=30080)],
        **spec,
    }
    return Service(metadata=ObjectMeta(namespace="ns", name=name), spec=ServiceSpec(**fields))


def endpoint_slice(
    *addresses: str,
    service_name: str = "web",
    protocol: str = "TCP",
    ready: bool | None = True,
    terminating: bool | None = None,
    node: str = "node-b",
) -> EndpointSlice:
    return EndpointSlice(
        metadata=ObjectMeta(
            namespace="ns", name=f"{service_name}-abc", labels={SERVICE_NAME_LABEL: service_name}
        ),
        address_type="IPv4",
        ports=[EndpointPort(name="http", protocol=protocol, port=8080)],
        endpoints=[
            Endpoint(
                addresses=[a],
                conditions=EndpointConditions(ready=ready, serving=True, terminating=terminating),
                node_name=node,
            )
            for a in addresses
        ],
    )


def test_cluster_ip_service_port() -> None:
    (port,) = service_ports(service())
    assert port.name == ServicePortName("ns", "web", "http", "TCP")
    assert str(port.name) == "ns/web:http"
    assert (port.cluster_ip, port.port, port.node_port, port.affinity_seconds) == (
        "10.96.0.10",
        80,
        0,
        0,
    )


def test_load_balancer_service_port() -> None:
    svc = service(
        type="LoadBalancer",
        external_traffic_policy="Local",
        health_check_node_port=32000,
        external_ips=["192.0.2.7"],
        session_affinity="ClientIP",
        session_affinity_config=SessionAffinityConfig(client_ip=ClientIPConfig(timeout_seconds=60)),
    )
    svc.status = ServiceStatus(
        load_balancer=LoadBalancerStatus(
            ingress=[
                LoadBalancerIngress(ip="198.51.100.5", ip_mode="VIP"),
                LoadBalancerIngress(ip="198.51.100.6", ip_mode="Proxy"),
                LoadBalancerIngress(hostname="lb.example.com"),
            ]
        )
    )
    (port,) = service_ports(svc)
    assert port.node_port == 30080
    assert port.load_balancer_ips == ("198.51.100.5",)
    assert port.external_ips == ("192.0.2.7",)
    assert port.external_policy_local and port.health_check_node_port == 32000
    assert port.affinity_seconds == 60


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"cluster_ip": "None", "cluster_ips": ["None"]}, id="headless"),
        pytest.param({"type": "ExternalName", "cluster_ip": None}, id="external-name"),
        pytest.param({"cluster_ip": "fd00::10"}, id="ipv6"),
    ],
)
def test_services_without_ipv4_vip_have_no_ports(spec: dict[str, Any]) -> None:
    assert service_ports(service(**spec)) == []


def test_endpoints_match_port_name_and_protocol_and_sort_by_ip() -> None:
    (port,) = service_ports(service())
    slices = [
        endpoint_slice("10.244.0.10", "10.244.0.9", node=NODE),
        endpoint_slice("10.244.0.9"),
        endpoint_slice("10.244.0.50", protocol="UDP"),
    ]
    found = endpoints_for(port, slices, NODE)
    assert [(e.address, e.local) for e in found] == [
        ("10.244.0.9:8080", True),
        ("10.244.0.10:8080", True),
    ]


def test_usable_prefers_ready_then_serving_terminating() -> None:
    ready = EndpointInfo("10.0.0.1", 80)
    draining = EndpointInfo("10.0.0.2", 80, ready=False, terminating=True)
    down = EndpointInfo("10.0.0.3", 80, ready=False, serving=False)
    assert usable([ready, draining, down]) == [ready]
    assert usable([draining, down]) == [draining]
    assert usable([down]) == []


class Cache:
    def __init__(self) -> None:
        self.services: dict[str, Service] = {}
        self.slices: dict[str, list[EndpointSlice]] = {}

    def service(self, key: str) -> Service | None:
        return self.services.get(key)

    def slices_of(self, key: str) -> Sequence[EndpointSlice]:
        return self.slices.get(key, [])


def test_tracker_reports_changed_ports_and_stale_udp_endpoints() -> None:
    cache, tracker = Cache(), ChangeTracker(NODE)
    cache.services["ns/dns"] = service("dns", protocol="UDP")
    cache.slices["ns/dns"] = [
        endpoint_slice("10.244.0.1", "10.244.0.2", service_name="dns", protocol="UDP")
    ]
    assert not tracker.pending
    tracker.service_changed("ns/dns")
    changes = tracker.apply(cache.service, cache.slices_of)
    name = ServicePortName("ns", "dns", "http", "UDP")
    assert changes.changed == {name} and changes.stale_udp == []
    # A no-op update changes nothing.
    tracker.service_changed("ns/dns")
    assert tracker.apply(cache.service, cache.slices_of).changed == set()
    # An endpoint goes: its UDP flows are stale.
    cache.slices["ns/dns"] = [endpoint_slice("10.244.0.1", service_name="dns", protocol="UDP")]
    tracker.service_changed("ns/dns")
    changes = tracker.apply(cache.service, cache.slices_of)
    assert changes.changed == {name}
    assert [(p.cluster_ip, e.ip) for p, e in changes.stale_udp] == [("10.96.0.10", "10.244.0.2")]
    # The service goes: everything is stale and the port is forgotten.
    del cache.services["ns/dns"]
    tracker.service_changed("ns/dns")
    changes = tracker.apply(cache.service, cache.slices_of)
    assert changes.changed == {name}
    assert [e.ip for _, e in changes.stale_udp] == ["10.244.0.1"]
    assert tracker.ports == {} and tracker.endpoints == {}


def test_slice_key() -> None:
    assert service_key_of_slice(endpoint_slice("10.0.0.1")) == "ns/web"
    unlabelled = endpoint_slice("10.0.0.1")
    unlabelled.metadata.labels = {}
    assert service_key_of_slice(unlabelled) is None
