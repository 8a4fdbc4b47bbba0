"""node.trace on output recorded from a lab (``tests/node/traces/*.json``: each namespace's
``nft monitor trace`` lines of one probe, iptables proxy mode, nft backend) and on
``conntrack``/``iptables-legacy-save`` text as those tools print it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, Endpoint, EndpointPort, EndpointSlice
from kube.api.meta_v1 import ObjectMeta
from node import trace
from node.proxy import names

TRACES = Path(__file__).parent / "traces"
WEB_IP = "10.108.189.33"
EMPTY_IP = "10.101.9.200"
ENDPOINTS = ("10.244.0.2", "10.244.2.2")


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((TRACES / f"{name}.json").read_text())
    return data


def service(name: str, ip: str, node_port: int | None = None) -> Service:
    return Service(
        metadata=ObjectMeta(namespace="default", name=name),
        spec=ServiceSpec(
            type="NodePort" if node_port else "ClusterIP",
            cluster_ip=ip,
            ports=[ServicePort(protocol="TCP", port=80, node_port=node_port)],
        ),
    )


def web_slice() -> EndpointSlice:
    return EndpointSlice(
        metadata=ObjectMeta(namespace="default", name="web-1", labels={SERVICE_NAME_LABEL: "web"}),
        address_type="IPv4",
        ports=[EndpointPort(name="", protocol="TCP", port=8080)],
        endpoints=[Endpoint(addresses=[ip], node_name="node1") for ip in ENDPOINTS],
    )


def lab_origins() -> trace.Origins:
    """The recorded lab's Services: ``web`` (NodePort 30280, two endpoints) and ``empty``."""
    return trace.Origins([service("web", WEB_IP, 30280), service("empty", EMPTY_IP)], [web_slice()])


def test_the_marking_table_traces_only_the_probe_and_is_removed_whole() -> None:
    script = trace.marking_table(24680, dscp=45)
    assert script[0] == "add table inet kubelab-trace"
    assert any("hook prerouting priority -350" in line for line in script)
    assert any("hook output priority -350" in line for line in script)
    rules = [line for line in script if line.startswith("add rule")]
    assert rules and all(line.endswith("meta nftrace set 1") for line in rules)
    assert all("ip dscp 45" in r or "dport 24680" in r for r in rules)
    assert trace.unmarking_table() == [
        "add table inet kubelab-trace",
        "delete table inet kubelab-trace",
    ]


def test_a_trace_line_gives_chain_rule_verdict_and_the_packet_its_hook_saw() -> None:
    events = trace.parse_trace(recorded("iptables-no-endpoints")["outputs"]["node1"])
    reject = events[-1]
    assert (reject.family, reject.table, reject.chain) == ("ip", "filter", "KUBE-SERVICES")
    assert reject.rule == "meta l4proto tcp ip daddr 10.101.9.200 tcp dport 80 reject"
    assert reject.verdict == "drop"
    assert reject.packet == trace.Packet(
        iif="cni0", oif="eth0", saddr="10.244.2.2", daddr=EMPTY_IP, sport=24680, dport=80, ttl=63
    )
    ours = [e for e in events if e.ours]
    assert ours and all(e.table == "kubelab-trace" for e in ours)
    assert any(e.is_policy and e.verdict == "accept" for e in events)


def test_lines_that_are_no_trace_are_skipped() -> None:
    assert trace.parse_trace("listening\n\ntrace id\nsomething else") == []


def test_dnat_and_masquerade_are_read_from_the_rules() -> None:
    events = trace.parse_trace(recorded("iptables-nodeport")["outputs"]["node2"])
    assert [e.dnat for e in events if e.dnat] == ["10.244.0.2:8080"]
    assert any("masquerade" in e.rule and e.verdict == "accept" for e in events)


def test_iptables_chains_map_back_to_services_and_endpoints() -> None:
    origins = lab_origins()
    key = "default/web"
    assert origins.of_chain(names.service_chain(key, "TCP")) == "Service default/web"
    assert origins.of_chain(names.external_chain(key, "TCP")) == "Service default/web"
    sep = names.endpoint_chain(key, "TCP", "10.244.2.2:8080")
    assert origins.of_chain(sep) == "endpoint 10.244.2.2:8080 of Service default/web"
    assert origins.of_chain("KUBE-SVC-AAAAAAAAAAAAAAAA") == (
        "kube-proxy: a Service the cluster no longer has"
    )
    assert origins.of_chain("KUBELAB-CNI-MASQ") == "CNI masquerade"
    assert origins.of_chain("KUBELAB-HP-AAAAAAAAAAAAAAAA") == "hostPort (CNI)"
    assert origins.of_chain("KUBE-NODEPORTS") == "kube-proxy: NodePorts"
    assert origins.of_chain("nothing-we-know") == ""


def test_the_recorded_nodeport_path_names_the_service_and_the_endpoint() -> None:
    origins = lab_origins()
    events = trace.parse_trace(recorded("iptables-nodeport")["outputs"]["node2"])
    made = {origins.of(e) for e in events if e.rule}
    assert "Service default/web" in made
    assert "endpoint 10.244.0.2:8080 of Service default/web" in made
    assert "kube-proxy: mark for masquerade" in made


def test_a_reject_names_the_service_without_endpoints() -> None:
    events = trace.parse_trace(recorded("iptables-no-endpoints")["outputs"]["node1"])
    assert lab_origins().of(events[-1]) == "Service default/empty: no endpoints"


def test_nftables_mode_chain_names_are_read_directly() -> None:
    origins = trace.Origins()
    assert origins.of_chain("service-ULMVA6XW-default/web/tcp/") == "Service default/web"
    assert origins.of_chain("service-ULMVA6XW-default/web/tcp/http") == "Service default/web:http"
    assert origins.of_chain("endpoint-5OJB2RVW-default/web/tcp/__10.244.1.2/8080") == (
        "endpoint 10.244.1.2:8080 of Service default/web"
    )


def test_a_network_policy_drop_names_the_policies_that_select_the_pod() -> None:
    origins = trace.Origins()
    events = trace.parse_trace(recorded("iptables-policy-drop")["outputs"]["node2"])
    drop = next(e for e in events if e.verdict == "drop")
    assert (drop.table, drop.chain) == ("kubelab-network-policy", "ingress")
    assert origins.of(drop) == "NetworkPolicy: no policy selecting the pod allows it (ingress)"
    jumped = {origins.of(e) for e in events if e.verdict.startswith("jump ingress/")}
    assert jumped == {"NetworkPolicy default/deny-b2 (ingress)"}


def test_conntrack_entries_give_the_nat() -> None:
    text = (
        "tcp      6 119 TIME_WAIT src=10.240.0.100 dst=10.240.0.12 sport=24680 dport=30280 "
        "src=10.244.2.2 dst=10.240.0.12 sport=8080 dport=22858 [ASSURED] mark=0 use=1\n"
        "conntrack v1.4.7 (conntrack-tools): 1 flow entries have been shown.\n"
    )
    (entry,) = trace.parse_conntrack(text)
    assert entry.original == ("10.240.0.100", "10.240.0.12", 24680, 30280)
    assert entry.destination == "10.244.2.2:8080"
    assert entry.text() == (
        "tcp 10.240.0.100:24680 → 10.240.0.12:30280, reply 10.244.2.2:8080 → 10.240.0.12:22858"
    )


def test_grown_counters_are_the_rules_the_probe_added_packets_to() -> None:
    sep = names.endpoint_chain("default/web", "TCP", "10.244.2.2:8080")
    before = (
        "*nat\n:PREROUTING ACCEPT [5:300]\n"
        "[7:420] -A PREROUTING -j KUBE-SERVICES\n"
        f"[0:0] -A {sep} -p tcp -j DNAT --to-destination 10.244.2.2:8080\n"
        "COMMIT\n*filter\n[3:180] -A FORWARD -j KUBE-FORWARD\nCOMMIT\n"
    )
    after = before.replace("[7:420]", "[8:480]").replace("[0:0] -A KUBE-SEP", "[1:60] -A KUBE-SEP")
    grown = trace.grown_counters(before, after)
    assert [(g.table, g.chain, g.packets) for g in grown] == [
        ("nat", "PREROUTING", 1),
        ("nat", sep, 1),
    ]
    assert trace.grown_counters(before, before) == []
