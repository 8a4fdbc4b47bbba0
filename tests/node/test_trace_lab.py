"""``kubelab lab trace`` on the node tests' shared labs (``tests/node/nodelabs.py``), run as a
user runs it (``kubelab lab trace ... -o json``), its JSON checked hop by hop.

The workload, in a namespace of its own (``trace``, so the proxy suite's ``default`` and the
truth tables' ``x``, ``y``, ``z`` are left alone): busybox web servers ``a`` and ``b`` on node1
and ``c`` and ``guarded`` on node2; ``web``, a LoadBalancer Service (NodePort 30029, its
load-balancer address routed by the router to node1, a ``loadBalancerClass`` of its own so
the lab cloud leaves it alone) whose one endpoint is ``c``, so the endpoint every mode picks
is known; ``empty``, a Service without endpoints; ``guard``, a NetworkPolicy letting nothing
in to ``guarded``.

Every case runs on the iptables mode (restore backend, rules in iptables-nft, so nftrace
sees them), a stopped kube-proxy among them; a pod to a ClusterIP on every mode (libiptc's
legacy rules as counters, userspace's relay as a note), the drops on nftables mode too.  A
trace must leave no table behind in any namespace.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubelab.cli import main
from kubelab.lab.processes import run
from node.proxy import names
from tests.node.nodelabs import IPTABLES, LIBIPTC, NFTABLES, USERSPACE, NodeLab, web_server_pod
from tests.servers import Kubectl

pytestmark = [
    pytest.mark.lab,
    pytest.mark.privileged,
    pytest.mark.containerd,
    pytest.mark.slow,
    pytest.mark.timeout(600),
]
EVERY_MODE = pytest.mark.parametrize(
    "node_lab", [IPTABLES, LIBIPTC, USERSPACE, NFTABLES], indirect=True
)
ON_IPTABLES = pytest.mark.parametrize("node_lab", [IPTABLES], indirect=True)
DROPS = pytest.mark.parametrize("node_lab", [IPTABLES, NFTABLES], indirect=True)

NAMESPACE = "trace"
PORT = 8080
NODE_PORT = 30029  # in the static band (30000-30085): no port chosen for a Service takes it
LB_IP = "192.0.2.30"
PODS = {"a": "node1", "b": "node1", "c": "node2", "guarded": "node2"}


def manifests() -> list[dict[str, Any]]:
    def service(name: str, app: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name},
            "spec": {"selector": {"app": app}, **spec},
        }

    web_port = {"port": 80, "targetPort": PORT, "nodePort": NODE_PORT}
    return [
        *(web_server_pod(name, node, PORT) for name, node in PODS.items()),
        service(
            "web",
            "c",
            type="LoadBalancer",
            loadBalancerClass="kubelab.test/trace",
            ports=[web_port],
        ),
        service("empty", "nobody", ports=[{"port": 80, "targetPort": PORT}]),
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "guard"},
            "spec": {
                "podSelector": {"matchLabels": {"app": "guarded"}},
                "policyTypes": ["Ingress"],
            },
        },
    ]


@pytest.fixture(scope="module")
def traced(node_lab: NodeLab) -> Iterator[NodeLab]:
    """The mode's lab with the workload, every proxy serving ``web``."""
    lab = node_lab.lab
    admin = node_lab.kubectl
    admin.run("create", "namespace", NAMESPACE, namespaced=False)
    kubectl = Kubectl(admin.kubeconfig, admin.cache_dir, NAMESPACE)
    router = lab.router.netns_path
    try:
        kubectl.run("apply", "-f", "-", input="\n---\n".join(json.dumps(m) for m in manifests()))
        status = {"status": {"loadBalancer": {"ingress": [{"ip": LB_IP}]}}}
        kubectl.run(
            "patch", "service", "web", "--subresource=status", "--type=merge",
            "-p", json.dumps(status),
        )  # fmt: skip
        run("ip", "route", "replace", f"{LB_IP}/32", "via", lab.node("node1").ip, netns=router)
        kubectl.run("wait", "--for=condition=Ready", "pod", *PODS, "--timeout=90s")
        yield node_lab
    finally:
        run("ip", "route", "del", f"{LB_IP}/32", netns=router, check=False)
        admin.run("delete", "namespace", NAMESPACE, "--wait=false", namespaced=False)


def trace(
    lab: NodeLab,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    code: int = 0,
    until: Callable[[dict[str, Any]], bool] = lambda found: True,
) -> dict[str, Any]:
    """``kubelab lab trace --name LAB ARGS -o json``: its JSON, once its exit code is
    ``code`` and ``until`` holds of it.  A Service just written may not be in every proxy's
    rules yet, and once (nftables mode, the first trace after the pods came up, while the
    proxies still synced their endpoints) ``nft monitor`` printed the jump to a Service's
    chain and none of that chain's rules, so a first answer that disagrees is retried a few
    times."""
    argv = ["lab", "trace", "--name", lab.lab.name, *args, "-o", "json"]
    for _ in range(10):
        got = main(argv)
        out = capsys.readouterr().out
        if got == code and until(json.loads(out)):
            break
    assert got == code, out
    found: dict[str, Any] = json.loads(out)
    return found


def hops(found: dict[str, Any]) -> list[str]:
    return [h["namespace"] for h in found["hops"]]


def chains(found: dict[str, Any], namespace: str) -> list[str]:
    return [r["chain"] for h in found["hops"] if h["namespace"] == namespace for r in h["rules"]]


def origins(found: dict[str, Any]) -> set[str]:
    return {r["origin"] for h in found["hops"] for r in h["rules"]}


def leaves_nothing(lab: NodeLab) -> None:
    for node in lab.lab.nodes:
        assert "kubelab-trace" not in run("nft", "list", "tables", netns=node.netns_path)


@ON_IPTABLES
def test_pod_to_pod_on_one_node(traced: NodeLab, capsys: pytest.CaptureFixture[str]) -> None:
    found = trace(traced, capsys, f"pod/{NAMESPACE}/a", f"pod/{NAMESPACE}/b:{PORT}")
    assert found["verdict"] == "answered"
    assert hops(found) == [f"pod {NAMESPACE}/a", "node1", f"pod {NAMESPACE}/b"]
    node1 = found["hops"][1]
    assert (node1["iif"], node1["oif"]) == ("cni0", "cni0")
    assert found["hops"][0]["peer"].startswith("eth0's veth peer is veth")
    leaves_nothing(traced)


@ON_IPTABLES
def test_pod_to_pod_across_nodes(traced: NodeLab, capsys: pytest.CaptureFixture[str]) -> None:
    found = trace(traced, capsys, f"pod/{NAMESPACE}/a", f"pod/{NAMESPACE}/c:{PORT}")
    assert found["verdict"] == "answered"
    assert hops(found) == [f"pod {NAMESPACE}/a", "node1", "router", "node2", f"pod {NAMESPACE}/c"]
    node1, router, node2 = found["hops"][1:4]
    assert (node1["iif"], node1["oif"], router["iif"], node2["iif"], node2["oif"]) == (
        "cni0", "eth0", "lab0", "eth0", "cni0",
    )  # fmt: skip
    assert "via 10.240.0.1 dev eth0" in node1["route"]
    assert "ip filter FORWARD" in chains(found, "node2")
    assert any(c.startswith("node1: tcp") for c in found["conntrack"])


def web_endpoint(lab: NodeLab) -> str:
    pod: Any = lab.kubectl.json("get", "pod", "c", "-n", NAMESPACE)
    return f"{pod['status']['podIP']}:{PORT}"


@EVERY_MODE
def test_pod_to_a_cluster_ip(traced: NodeLab, capsys: pytest.CaptureFixture[str]) -> None:
    mode = traced.mode
    traced_rules = mode.proxy_mode != "userspace" and mode.iptables_backend != "libiptc"

    def names_the_endpoint(found: dict[str, Any]) -> bool:
        """The chosen endpoint is known (from conntrack) and, where rules are traced, the
        endpoint's rule was seen; in userspace mode, the proxy's REDIRECT was: right after the
        pods come up any of these may come late."""
        if mode.proxy_mode == "userspace":
            return any(n.startswith("relayed by kube-proxy (userspace)") for n in found["notes"])
        if not found["endpoint"]:
            return False
        return not traced_rules or any(o.startswith("endpoint ") for o in origins(found))

    found = trace(
        traced, capsys, f"pod/{NAMESPACE}/a", f"svc/{NAMESPACE}/web:80", until=names_the_endpoint
    )
    assert found["verdict"] == "answered"
    if mode.proxy_mode == "userspace":
        assert any(
            n.startswith("relayed by kube-proxy (userspace) on node1") for n in found["notes"]
        )
        assert any(n.startswith("REDIRECT") for h in found["hops"] for n in h["nat"])
        return
    assert found["endpoint"] == web_endpoint(traced)
    assert hops(found)[:2] == [f"pod {NAMESPACE}/a", "node1"]
    assert hops(found)[-1] == f"pod {NAMESPACE}/c"
    if mode.iptables_backend == "libiptc":
        svc = names.service_chain(f"{NAMESPACE}/web", "TCP")
        assert any(svc in line for line in found["counters"]), found["counters"]
        return
    made = origins(found)
    assert f"Service {NAMESPACE}/web" in made, json.dumps(found, indent=1)
    endpoint = f"endpoint {web_endpoint(traced)} of Service {NAMESPACE}/web"
    assert endpoint in made, json.dumps(found, indent=1)
    if mode.proxy_mode == "iptables":
        assert f"ip nat {names.service_chain(f'{NAMESPACE}/web', 'TCP')}" in chains(found, "node1")
    else:
        assert any(c.startswith("ip kube-proxy service-") for c in chains(found, "node1"))


@ON_IPTABLES
def test_client_to_a_node_port_and_to_a_load_balancer(
    traced: NodeLab, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = web_endpoint(traced)
    found = trace(traced, capsys, "client", f"nodeport/node1:{NODE_PORT}")
    assert found["verdict"] == "answered" and found["endpoint"] == endpoint
    # The router bridges the client's packet to node1 (seen there if its bridge passes it
    # through netfilter), then routes node1's to node2.  Hops after the pod are the answer's
    # way back (node2 again, when its monitor caught the SYN-ACK).
    to_pod = hops(found)[: hops(found).index(f"pod {NAMESPACE}/c") + 1]
    assert [h for h in to_pod if h != "router"] == [
        "client",
        "node1",
        "node2",
        f"pod {NAMESPACE}/c",
    ]
    assert "router" in hops(found)[2:4]
    assert "ip nat KUBE-NODEPORTS" in chains(found, "node1")
    node1 = next(h for h in found["hops"] if h["namespace"] == "node1")
    assert node1["nat"][0] == f"DNAT to {endpoint}" and node1["nat"][1].startswith("masquerade")
    found = trace(traced, capsys, "client", f"lb/{NAMESPACE}/web:80")
    assert found["verdict"] == "answered" and found["endpoint"] == endpoint
    assert hops(found)[:2] == ["client", "router"] and hops(found)[-1] == f"pod {NAMESPACE}/c"
    ext = names.external_chain(f"{NAMESPACE}/web", "TCP")
    assert f"ip nat {ext}" in chains(found, "node1")


@ON_IPTABLES
def test_pod_to_the_cluster_dns(traced: NodeLab, capsys: pytest.CaptureFixture[str]) -> None:
    found = trace(traced, capsys, f"pod/{NAMESPACE}/a", "svc/kube-system/kube-dns:53", "--udp")
    assert found["protocol"] == "udp"
    assert found["verdict"] in ("answered", "delivered")
    assert found["endpoint"].endswith(":53")
    assert "Service kube-system/kube-dns:dns" in origins(found)


@DROPS
def test_no_endpoints_is_traced_to_the_reject(
    traced: NodeLab, capsys: pytest.CaptureFixture[str]
) -> None:
    found = trace(traced, capsys, f"pod/{NAMESPACE}/a", f"svc/{NAMESPACE}/empty:80", code=1)
    assert (found["verdict"], found["where"]) == ("dropped", "node1")
    assert found["why"].startswith("rejected by ")
    assert found["why"].endswith(f"(Service {NAMESPACE}/empty: no endpoints)")
    leaves_nothing(traced)


@ON_IPTABLES
def test_no_route_to_a_cluster_ip_is_the_routers(
    traced: NodeLab, capsys: pytest.CaptureFixture[str]
) -> None:
    """ClusterIPs are not routed outside the cluster: the client's probe dies in the router,
    whose ICMP error fails the client's connect."""
    service: Any = traced.kubectl.json("get", "service", "web", "-n", NAMESPACE)
    cluster_ip = service["spec"]["clusterIP"]
    found = trace(traced, capsys, "client", f"svc/{NAMESPACE}/web:80", code=1)
    assert (found["verdict"], found["where"]) == ("dropped", "router")
    assert found["why"].startswith(f"no route to {cluster_ip} (")
    assert found["why"].endswith("; the source was told: Network is unreachable")
    assert hops(found) == ["client", "router"]
    leaves_nothing(traced)


@DROPS
def test_a_network_policy_drop_is_traced_to_the_policy(
    traced: NodeLab, capsys: pytest.CaptureFixture[str]
) -> None:
    found = trace(traced, capsys, f"pod/{NAMESPACE}/a", f"pod/{NAMESPACE}/guarded:{PORT}", code=1)
    assert (found["verdict"], found["where"]) == ("dropped", "node2")
    assert found["why"] == (
        f"dropped: NetworkPolicy {NAMESPACE}/guard (ingress) selects the pod and allows none of it"
    )
    assert "inet kubelab-network-policy ingress" in chains(found, "node2")


@ON_IPTABLES
def test_a_stopped_proxy_is_named(traced: NodeLab, capsys: pytest.CaptureFixture[str]) -> None:
    """kube-proxy's rules outlive it: the Service still answers, and the trace says whose
    rules those are."""
    lab = traced.lab.name
    assert main(["lab", "stop", "--name", lab, "node1", "proxy"]) == 0
    capsys.readouterr()
    try:
        found = trace(traced, capsys, f"pod/{NAMESPACE}/a", f"svc/{NAMESPACE}/web:80")
    finally:
        assert main(["lab", "start", "--name", lab, "node1", "proxy"]) == 0
    assert found["verdict"] == "answered"
    assert "kube-proxy on node1 is not running: its rules are as it left them" in found["notes"]
    assert not any("node2" in note for note in found["notes"])
