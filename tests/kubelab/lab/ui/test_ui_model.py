"""What ``kubelab lab ui``'s page is fed, from fake inputs: the topology and Services document
(``kubelab.lab.ui.model``), namespaces read from recorded ``ip -j`` output, and a Service's
proxy rules as a graph from an ``iptables-save`` and an ``nft list table`` recorded in
throwaway namespaces (``kubelab.lab.ui.facts``)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from kube.api.kinds.core_v1.node import Node as NodeObject
from kube.api.kinds.core_v1.node import NodeCondition, NodeSpec, NodeStatus
from kube.api.kinds.core_v1.pod import Pod, PodIP
from kube.api.kinds.core_v1.service import (
    LoadBalancerIngress,
    LoadBalancerStatus,
    Service,
    ServicePort,
    ServiceSpec,
    ServiceStatus,
)
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.kinds.discovery_v1 import Endpoint, EndpointConditions, EndpointPort, EndpointSlice
from kube.api.meta_v1 import ObjectMeta
from kubelab.lab.topology import Lab, LabSpec
from kubelab.lab.ui.facts import chain_graph, parse_network
from kubelab.lab.ui.model import Cluster, NodeNetwork, Route, topology
from tests.builders import pod

HERE = Path(__file__).parent
LAB = Lab(LabSpec(name="demo", workers=2))


def node(name: str, cidr: str, ready: bool = True) -> NodeObject:
    return NodeObject(
        metadata=ObjectMeta(name=name),
        spec=NodeSpec(pod_cidr=cidr),
        status=NodeStatus(
            conditions=[NodeCondition(type="Ready", status="True" if ready else "False")]
        ),
    )


def running(name: str, node_name: str, ip: str) -> Pod:
    made = pod(name, node_name=node_name, phase="Running")
    assert made.status is not None
    made.status.pod_ips = [PodIP(ip=ip)]
    return made


def web_service() -> tuple[Service, EndpointSlice]:
    service = Service(
        metadata=ObjectMeta(name="web", namespace="default"),
        spec=ServiceSpec(
            type="LoadBalancer",
            cluster_ip="10.96.0.20",
            ports=[ServicePort(name="http", port=80, protocol="TCP", node_port=30080)],
        ),
        status=ServiceStatus(
            load_balancer=LoadBalancerStatus(ingress=[LoadBalancerIngress(ip="10.240.0.200")])
        ),
    )
    slice_ = EndpointSlice(
        metadata=ObjectMeta(
            name="web-x1",
            namespace="default",
            labels={"kubernetes.io/service-name": "web"},
        ),
        address_type="IPv4",
        ports=[EndpointPort(name="http", port=80, protocol="TCP")],
        endpoints=[
            Endpoint(
                addresses=["10.244.1.5"],
                conditions=EndpointConditions(ready=True),
                target_ref=ObjectReference(kind="Pod", namespace="default", name="web-a"),
                node_name="node1",
            ),
            Endpoint(
                addresses=["10.244.2.6"],
                conditions=EndpointConditions(ready=False),
                target_ref=ObjectReference(kind="Pod", namespace="default", name="web-b"),
            ),
        ],
    )
    return service, slice_


def test_every_namespace_of_the_lab_is_drawn_with_its_node_state() -> None:
    cluster = Cluster(nodes=[node("node1", "10.244.1.0/24"), node("node2", "", ready=False)])
    document = topology(LAB, cluster, {}, {})
    drawn = {n["id"]: n for n in document["nodes"]}
    assert list(drawn) == [
        "node/router",
        "node/controlplane",
        "node/node1",
        "node/node2",
        "node/client",
    ]
    assert drawn["node/node1"] | {"bridges": [], "routes": []} == drawn["node/node1"]
    assert (drawn["node/node1"]["ready"], drawn["node/node1"]["podCIDR"]) == (
        True,
        "10.244.1.0/24",
    )
    assert drawn["node/node2"]["ready"] is False
    assert drawn["node/controlplane"]["ready"] is None  # no Node object (yet)
    assert drawn["node/router"]["kubernetes"] is False
    assert drawn["node/node1"]["uplink"] == "r-node1"
    assert document["balancer"] is None


def test_the_ha_lab_has_its_balancer_in_front_of_every_control_plane() -> None:
    ha = Lab(LabSpec(name="ha", workers=1, store="etcd", control_planes=3))
    balancer = topology(ha, Cluster(), {}, {})["balancer"]
    assert balancer == {
        "address": "10.240.0.10:6443",
        "backends": ["node/controlplane1", "node/controlplane2", "node/controlplane3"],
    }


def test_pods_sit_on_their_nodes_with_ip_phase_and_veth() -> None:
    deleted = pod("old", node_name="node2", phase="Running")
    deleted.metadata.deletion_timestamp = datetime.datetime(2026, 11, 29, tzinfo=datetime.UTC)
    cluster = Cluster(
        pods=[
            running("web-a", "node1", "10.244.1.5"),
            pod("pending"),
            deleted,
        ]
    )
    pods = topology(LAB, cluster, {}, {"pod/default/web-a": "veth0123456789a"})["pods"]
    assert [(p["id"], p["node"], p["ip"], p["phase"], p["veth"]) for p in pods] == [
        ("pod/default/pending", "", "", "Pending", ""),
        ("pod/default/web-a", "node1", "10.244.1.5", "Running", "veth0123456789a"),
        ("pod/default/old", "node2", "", "Terminating", ""),
    ]


def test_routes_name_the_lab_node_they_lead_to() -> None:
    network = NodeNetwork(
        routes=(Route("10.244.2.0/24", "10.240.0.12", "lab0"), Route("10.240.0.0/24", "", "lab0"))
    )
    router = topology(LAB, Cluster(), {"router": network}, {})["nodes"][0]
    assert router["routes"] == [
        {
            "destination": "10.244.2.0/24",
            "via": "10.240.0.12",
            "device": "lab0",
            "toward": "node/node2",
        },
        {"destination": "10.240.0.0/24", "via": "", "device": "lab0", "toward": ""},
    ]


def test_services_list_vip_ports_load_balancer_ips_and_endpoints() -> None:
    service, slice_ = web_service()
    cluster = Cluster(
        services=[service],
        slices=[slice_],
        pods=[pod("web-b", node_name="node2")],
    )
    (listed,) = topology(LAB, cluster, {}, {})["services"]
    assert listed == {
        "id": "svc/default/web",
        "namespace": "default",
        "name": "web",
        "type": "LoadBalancer",
        "clusterIP": "10.96.0.20",
        "ports": [
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": "", "nodePort": 30080}
        ],
        "loadBalancerIPs": ["10.240.0.200"],
        "endpoints": [
            {
                "address": "10.244.1.5",
                "ports": ["80/TCP"],
                "ready": True,
                "pod": "pod/default/web-a",
                "node": "node1",
            },
            {  # its node from the pod, the slice not saying
                "address": "10.244.2.6",
                "ports": ["80/TCP"],
                "ready": False,
                "pod": "pod/default/web-b",
                "node": "node2",
            },
        ],
    }


def test_a_namespace_read_with_ip_json() -> None:
    network = parse_network(
        (HERE / "ip-links.json").read_text(), (HERE / "ip-routes.json").read_text()
    )
    assert network.bridges == {"cni0": "10.244.1.1/24"}
    ports = [(v.name, v.bridge) for v in network.veths if v.bridge]
    assert ports == [("veth1a2b3c4d5e6", "cni0")]
    assert Route("10.244.2.0/24", "10.240.0.12", "eth0") in network.routes
    assert Route("default", "10.240.0.1", "eth0") in network.routes


def test_an_unreadable_namespace_is_said_not_raised() -> None:
    shown = topology(LAB, Cluster(), {"node1": NodeNetwork(error="nsenter: no such file")}, {})
    assert shown["nodes"][2]["error"] == "nsenter: no such file"


@pytest.mark.parametrize("mode", ["iptables", "nftables"], ids=["iptables", "nftables"])
def test_a_services_proxy_chains_as_a_graph(mode: str) -> None:
    graph = chain_graph((HERE / f"proxy-{mode}.txt").read_text(), "default", "web")
    chains = {c["name"]: c["rules"] for c in graph["chains"]}
    edges = {(j["from"], j["to"]) for j in graph["jumps"]}
    text = " ".join(r for rules in chains.values() for r in rules)
    assert "webby" not in text  # a Service whose name starts with this one's is left out
    assert "kube-dns" not in text
    assert "10.244.1.5:80" in text and "10.244.2.6:80" in text  # both endpoints' DNATs
    # every shown chain but the entry is reached by a jump from another shown one
    entries = {c for c in chains if not any(to == c for _, to in edges)}
    if mode == "iptables":
        assert entries == {"KUBE-SERVICES", "KUBE-NODEPORTS"}
        assert chains["KUBE-SERVICES"] == [
            '-d 10.96.0.20/32 -p tcp -m comment --comment "default/web:http cluster IP" '
            "-m tcp --dport 80 -j KUBE-SVC-CDGGSHYLG3RE2FKL"
        ]
        assert ("KUBE-SVC-CDGGSHYLG3RE2FKL", "KUBE-SEP-THCUGE4PYEGQIHCR") in edges
        assert ("KUBE-EXT-CDGGSHYLG3RE2FKL", "KUBE-SVC-CDGGSHYLG3RE2FKL") in edges
    else:
        assert entries == {"service-ips"}
        assert chains["service-ips"] == [
            "10.96.0.20 . tcp . 80 : goto service-CCCCCCCC-default/web/tcp/http"
        ]
        assert (
            "service-CCCCCCCC-default/web/tcp/http",
            "endpoint-BBBBBBBB-default/web/tcp/http__10.244.2.6/80",
        ) in edges


def test_a_service_without_rules_is_an_empty_graph() -> None:
    listing = (HERE / "proxy-iptables.txt").read_text()
    assert chain_graph(listing, "default", "nothing") == {"chains": [], "jumps": []}
