"""kubelab.lab.trace without a lab: SOURCE and DESTINATION read against an inventory and a
cluster snapshot, the hops built from output recorded on a lab (``tests/node/traces``), the
verdict, and both renderings; the CLI's answer to bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kube.api.kinds.core_v1.pod import ContainerStatus, Pod, PodSpec, PodStatus
from kube.api.kinds.core_v1.service import (
    LoadBalancerIngress,
    LoadBalancerStatus,
    Service,
    ServicePort,
    ServiceSpec,
    ServiceStatus,
)
from kube.api.meta_v1 import ObjectMeta
from kubelab.cli import main
from kubelab.lab import trace
from kubelab.lab.topology import Lab, LabSpec
from node import trace as kernel
from node.cni.network import host_veth_name

TRACES = Path(__file__).parents[2] / "node" / "traces"
LAB = Lab(LabSpec(name="kltr9"))


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((TRACES / f"{name}.json").read_text())
    return data


def hops_of(name: str) -> list[trace.Hop]:
    data = recorded(name)
    events = {ns: kernel.parse_trace(text) for ns, text in data["outputs"].items()}
    return trace.build_hops(events, data["source"], data["port"], kernel.Origins())


def snapshot() -> trace.Snapshot:
    dns = Service(
        metadata=ObjectMeta(namespace="kube-system", name="kube-dns"),
        spec=ServiceSpec(
            cluster_ip="10.96.0.10",
            ports=[
                ServicePort(name="dns", protocol="UDP", port=53),
                ServicePort(name="dns-tcp", protocol="TCP", port=53),
            ],
        ),
    )
    lb = Service(
        metadata=ObjectMeta(namespace="default", name="web"),
        spec=ServiceSpec(
            type="LoadBalancer", cluster_ip="10.96.5.5", ports=[ServicePort(port=80, name="http")]
        ),
        status=ServiceStatus(
            load_balancer=LoadBalancerStatus(ingress=[LoadBalancerIngress(ip="10.240.0.200")])
        ),
    )
    pending = Pod(
        metadata=ObjectMeta(namespace="default", name="pending"), spec=PodSpec(), status=PodStatus()
    )
    return trace.Snapshot(pods=[pending], services=[dns, lb])


def place(text: str, *, source: bool = False, udp: bool = False) -> trace.Place:
    return trace.resolve(LAB, snapshot(), text, source=source, udp=udp)


def test_places_of_the_lab_and_its_services() -> None:
    client = place("client", source=True)
    assert (client.ip, client.netns) == ("10.240.0.100", LAB.client.netns_path)
    assert place("node/node1:10250").ip == "10.240.0.11"
    nodeport = place("nodeport/node2:30080")
    assert (nodeport.ip, nodeport.port, nodeport.netns) == ("10.240.0.12", 30080, None)
    dns = place("svc/kube-system/kube-dns:53", udp=True)
    assert (dns.ip, dns.port, dns.protocol) == ("10.96.0.10", 53, "udp")
    assert place("svc/kube-system/kube-dns:dns-tcp").protocol == "tcp"
    web = place("lb/default/web:http")
    assert (web.ip, web.port, web.label) == (
        "10.240.0.200",
        80,
        "LoadBalancer 10.240.0.200 of Service default/web:80/tcp",
    )
    assert place("10.240.0.12", source=True).label == "node node2"
    assert place("192.0.2.7:443").ip == "192.0.2.7"


@pytest.mark.parametrize(
    ("text", "source", "says"),
    [
        ("pod/default/nope:80", False, "no pod 'nope' in namespace 'default'"),
        ("pod/default/pending", True, "not running yet"),
        ("svc/default/web:81", False, "has no port 81 (http)"),
        ("svc/default/nothing:80", False, "no Service 'nothing'"),
        ("lb/kube-system/kube-dns:53", False, "has no load-balancer address"),
        ("node/node9:80", False, "has no node 'node9'"),
        ("nodeport/node1", False, "needs :PORT"),
        ("192.0.2.7", False, "needs :PORT"),
        ("client:80", True, "a source takes no port"),
        ("192.0.2.7", True, "no node or pod of lab kltr9 has this address"),
        ("web", False, "expected pod/NS/NAME"),
        ("nodeport/node1:", False, "empty port"),
    ],
    ids=lambda v: str(v)[:20],
)
def test_what_the_lab_has_no_such_thing_for_is_said(text: str, source: bool, says: str) -> None:
    with pytest.raises(trace.TraceError, match=says.replace("(", r"\(").replace(")", r"\)")):
        place(text, source=source)


def test_hops_across_nodes_come_in_the_order_the_probe_crossed_them() -> None:
    hops = hops_of("iptables-pod-to-pod")
    assert [h.namespace for h in hops] == [
        "pod default/a1",
        "node1",
        "router",
        "node2",
        "pod default/b2",
    ]
    assert (hops[0].iif, hops[0].oif) == ("", "eth0")
    assert (hops[1].iif, hops[1].oif) == ("cni0", "eth0")
    assert (hops[3].iif, hops[3].oif) == ("eth0", "cni0")
    assert not hops[0].rules
    assert any(r.chain == "ip nat PREROUTING" for r in hops[1].rules)


def test_a_nodeport_hop_has_its_dnat_and_masquerade() -> None:
    hops = hops_of("iptables-nodeport")
    # The router bridged the client's packet to node2 (no TTL lost), which sent it to b2.
    assert [h.namespace for h in hops] == ["client", "router", "node2", "pod default/b2"]
    assert (hops[1].ttl, hops[1].last_ttl, hops[1].oif) == (64, 64, "")
    assert hops[2].nat == [
        "DNAT to 10.244.0.2:8080",
        "masquerade (source: the outgoing interface's address)",
    ]


def test_the_verdicts() -> None:
    to_pod = trace.Place("pod default/b2", "10.244.0.2", 8080, veth="veth0")
    answered = trace.judge("answered", hops_of("iptables-pod-to-pod"), to_pod)
    assert answered == ("answered", "pod default/b2", "")
    verdict, where, why = trace.judge("refused", hops_of("iptables-no-endpoints"), to_pod)
    assert (verdict, where) == ("dropped", "node1")
    assert why.startswith("rejected by ip filter KUBE-SERVICES: meta l4proto tcp ip daddr")
    verdict, where, why = trace.judge("timeout", hops_of("iptables-policy-drop"), to_pod)
    assert (verdict, where) == ("dropped", "node2")
    assert why == (
        "dropped: NetworkPolicy default/deny-b2 (ingress) selects the pod and allows none of it"
    )
    lost = [
        trace.Hop(
            "node1",
            iif="eth0",
            daddr="10.244.0.2",
            route="no route: RTNETLINK answers: No route to host",
        )
    ]
    assert trace.judge("timeout", lost, to_pod) == (
        "dropped",
        "node1",
        "no route to 10.244.0.2 (RTNETLINK answers: No route to host)",
    )
    rp = [
        trace.Hop(
            "node1", iif="eth0", saddr="10.0.0.9", route="no route: Invalid cross-device link"
        )
    ]
    assert trace.judge("timeout", rp, to_pod)[2] == (
        "rp_filter: the source 10.0.0.9 is not reachable back through eth0"
    )
    refused = trace.judge("refused", hops_of("iptables-pod-to-pod"), to_pod)
    assert refused == ("answered", "pod default/b2", "refused: nothing listens on 8080/tcp there")
    assert trace.judge("sent", [trace.Hop("pod default/b2")], to_pod)[0] == "delivered"
    assert trace.judge("reset", hops_of("iptables-pod-to-pod"), to_pod)[2] == (
        "reset by the destination"
    )
    relayed = [trace.Hop("node1", nat=["REDIRECT to the proxy's port 40000"])]
    assert trace.judge("reset", relayed, to_pod) == (
        "dropped",
        "node1",
        "reset by the userspace proxy: no endpoint it could relay to",
    )
    assert trace.judge("refused", relayed, to_pod)[2] == (
        "refused at the userspace proxy's port: is kube-proxy running there?"
    )
    assert trace.judge("failed: Permission denied", hops_of("iptables-pod-to-pod"), to_pod) == (
        "dropped",
        "pod default/a1",
        "failed: Permission denied",
    )
    refusing_source = trace.judge("unreachable: Network is unreachable", [], to_pod)
    assert refusing_source == ("dropped", "", "unreachable: Network is unreachable")


def test_an_icmp_error_is_judged_where_the_probe_could_go_no_further() -> None:
    """The client's probe to a ClusterIP reaches the router, which has no route to the
    Service range and answers with an ICMP error: the source's connect fails, but the drop
    is the router's (issue 25: "dropped with where and why")."""
    data = recorded("iptables-client-no-route")
    hops = hops_of("iptables-client-no-route")
    assert [(h.namespace, h.iif, h.oif) for h in hops] == [
        ("client", "", "eth0"),
        ("router", "lab0", ""),
    ]
    hops[1].route = "no route: RTNETLINK answers: Network is unreachable"  # as `_route` puts it
    to_service = trace.Place("Service default/web:80/tcp", "10.105.119.106", 80)
    assert trace.judge(data["outcome"], hops, to_service) == (
        "dropped",
        "router",
        "no route to 10.105.119.106 (RTNETLINK answers: Network is unreachable); "
        "the source was told: Network is unreachable",
    )


def finished(verdict: str = "answered") -> trace.Trace:
    hop = trace.Hop("node1", iif="cni0", oif="eth0", route="10.244.0.2 via 10.240.0.1 dev eth0")
    hop.rules.append(trace.Rule("ip nat KUBE-SVC-X", "jump KUBE-SEP-Y", "jump KUBE-SEP-Y", "web"))
    hop.nat.append("DNAT to 10.244.0.2:8080")
    return trace.Trace(
        source="pod default/a1 (10.244.2.2:24680)",
        destination="Service default/web:80/tcp (10.96.5.5:80)",
        protocol="tcp",
        probe=verdict,
        verdict=verdict,
        where="node1",
        why="",
        endpoint="10.244.0.2:8080",
        hops=[hop],
        conntrack=["node1: tcp ..."],
        counters=[],
        notes=["a note"],
        seconds=0.5,
    )


def test_the_table_and_the_json() -> None:
    table = trace.render_table(finished())
    lines = table.splitlines()
    assert lines[0] == (
        "pod default/a1 (10.244.2.2:24680) → Service default/web:80/tcp (10.96.5.5:80) (tcp): "
        "ANSWERED"
    )
    assert lines[1] == "endpoint: 10.244.0.2:8080"
    assert lines[2].split() == ["HOP", "IN", "OUT", "CHAIN", "RULE", "VERDICT", "MADE", "BY"]
    assert lines[3].split()[:4] == ["node1", "cni0", "eth0", "ip"]
    assert "node1: route: 10.244.0.2 via 10.240.0.1 dev eth0; DNAT to 10.244.0.2:8080" in lines
    assert "note: a note" in lines and lines[-1] == "(0.50s)"
    data = json.loads(trace.render_json(finished()))
    assert data["verdict"] == "answered" and data["endpoint"] == "10.244.0.2:8080"
    assert data["hops"][0]["rules"][0]["origin"] == "web"


def test_the_command_refuses_a_lab_that_is_not_up(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert main(["lab", "trace", "--name", "kltr9", "client", "nodeport/node1:30080"]) == 2
    assert "kubelab lab trace: lab kltr9 is not up" in capsys.readouterr().err


def test_a_pod_is_found_in_its_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its network namespace is its processes', its veth named from its sandbox: the one
    container directory of the pod's cgroup that is none of its containers."""
    pod_dir = tmp_path / "kubelab" / "kltr9" / "node1" / "besteffort" / "poduid-1"
    (pod_dir / "c0ffee").mkdir(parents=True)
    (pod_dir / "5a4db0c5").mkdir()
    (pod_dir / "cgroup.procs").write_text("")
    (pod_dir / "c0ffee" / "cgroup.procs").write_text("4242\n")
    (pod_dir / "5a4db0c5" / "cgroup.procs").write_text("4241\n")
    monkeypatch.setattr(trace, "CGROUP_PIDS", tmp_path)
    web = Pod(
        metadata=ObjectMeta(namespace="default", name="web", uid="uid-1"),
        spec=PodSpec(node_name="node1"),
        status=PodStatus(
            pod_ip="10.244.1.5",
            container_statuses=[ContainerStatus(name="web", container_id="containerd://c0ffee")],
        ),
    )
    found = trace.resolve(LAB, trace.Snapshot(pods=[web]), "pod/default/web:80", source=False)
    assert found.netns == Path("/proc/4241/ns/net")
    assert (found.ip, found.port, found.node) == ("10.244.1.5", 80, "node1")
    assert found.veth == host_veth_name("5a4db0c5", "eth0")
