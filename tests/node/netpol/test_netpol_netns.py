"""The compiled table in a real kernel: packets between "pods" (network namespaces) decide.

This test's own topology, no containerd: a ``node`` namespace with a bridge ``cni0``
(10.77.1.1/24, ``bridge-nf-call-iptables`` on as on a lab node) holding two pods, ``x/a``
(10.77.1.2) and ``y/b`` (10.77.1.3), and a pod of another node, ``z/c`` (10.77.2.2), reached
through a routed veth, as cross-node traffic arrives. Every pod serves TCP on 80 and 81 and UDP
on 53 (``tests.node.netpol.probes``); a prober per source pod connects to every target at once
with a short timeout. Each case applies the ruleset :func:`compile_ruleset` makes for ``node``
with :class:`SubprocessNftables` and compares the reachability of every (source, target, port)
probed with the expected one. A Service is a DNAT rule in the node (10.96.0.80:80 → x/a:80), as
kube-proxy's: policies see the endpoint pod after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass

import pytest

from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.networking_v1 import NetworkPolicy
from node.netpol.compiler import FAMILY, TABLE, compile_ruleset
from node.nftables import SubprocessNftables
from tests.netns import Netns, NetnsFactory
from tests.node.netpol.cluster import namespace, pod, policy
from tests.node.netpol.probes import PROBER, SERVER
from tests.servers import REPO

pytestmark = pytest.mark.privileged

NODE_GATEWAY = "10.77.1.1"
SERVICE = "10.96.0.80"
IPS = {"x/a": "10.77.1.2", "y/b": "10.77.1.3", "z/c": "10.77.2.2"}
PODS: list[Pod] = [
    pod("x", "a", IPS["x/a"], ports=[("web", 81, "TCP")]),
    pod("y", "b", IPS["y/b"], ports=[("web", 80, "TCP")]),
    pod("z", "c", IPS["z/c"], node="node2", ports=[("dns", 53, "UDP")]),
]
NAMESPACES = [namespace("x"), namespace("y", {"team": "blue"}), namespace("z")]


@dataclass(frozen=True)
class Topology:
    node: Netns
    pods: dict[str, Netns]

    def apply(self, *policies: NetworkPolicy) -> None:
        ruleset = compile_ruleset("node1", PODS, NAMESPACES, policies)
        assert not ruleset.problems
        SubprocessNftables(FAMILY, TABLE, netns=str(self.node.path)).run(ruleset.commands())

    def reachable(self, source: str, targets: Sequence[tuple[str, str, int]]) -> list[bool]:
        """From pod ``source`` (or "node") to each ``(ip, tcp|udp, port)``."""
        where = self.node if source == "node" else self.pods[source]
        done = where.run(sys.executable, "-c", PROBER, json.dumps(targets), timeout=30)
        assert done.returncode == 0, done.stderr
        found: list[bool] = json.loads(done.stdout)
        return found

    def matrix(self, port: int = 80, proto: str = "tcp") -> dict[str, set[str]]:
        """Which pods each pod (and the node) reaches on ``port``."""
        keys = list(IPS)
        return {
            source: {
                target
                for target, ok in zip(
                    keys, self.reachable(source, [(IPS[k], proto, port) for k in keys]), strict=True
                )
                if ok and target != source
            }
            for source in [*keys, "node"]
        }


def ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True)


@pytest.fixture(scope="module")
def topology() -> Iterator[Topology]:
    with closing(NetnsFactory("klnp")) as make:
        node = make("klnp-node")
        pods = {key: make("klnp-pod") for key in IPS}
        servers: list[subprocess.Popen[str]] = []
        try:
            yield wire(node, pods, servers)
        finally:
            for server in servers:
                server.kill()
                server.communicate()


def wire(node: Netns, pods: dict[str, Netns], servers: list[subprocess.Popen[str]]) -> Topology:
    """The bridge, the veths, the servers (appended to ``servers`` as they start), the DNAT."""
    ip("-n", node.name, "link", "add", "cni0", "type", "bridge")
    ip("-n", node.name, "addr", "add", f"{NODE_GATEWAY}/24", "dev", "cni0")
    ip("-n", node.name, "link", "set", "cni0", "up")
    node.run("sysctl", "-qw", "net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1")
    for index, (key, netns) in enumerate(pods.items()):
        host = f"veth{index}"
        ip("-n", node.name, "link", "add", host, "type", "veth", "peer", "eth0", "netns",
           netns.name)  # fmt: skip
        ip("-n", netns.name, "addr", "add", f"{IPS[key]}/24", "dev", "eth0")
        ip("-n", netns.name, "link", "set", "eth0", "up")
        if key == "z/c":  # another node's pod: routed, not bridged
            ip("-n", node.name, "addr", "add", "10.77.2.1/24", "dev", host)
            ip("-n", netns.name, "route", "add", "default", "via", "10.77.2.1")
        else:
            ip("-n", node.name, "link", "set", host, "master", "cni0")
            ip("-n", netns.name, "route", "add", "default", "via", NODE_GATEWAY)
        ip("-n", node.name, "link", "set", host, "up")
        server = subprocess.Popen(
            ["nsenter", f"--net={netns.path}", sys.executable, "-c", SERVER],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        servers.append(server)
        assert server.stdout is not None and server.stdout.readline() == "serving\n"
    dnat = (
        "table ip klnp-service {\n chain prerouting {\n type nat hook prerouting priority dstnat;\n"
        f"ip daddr {SERVICE} tcp dport 80 dnat to {IPS['x/a']}:80\n }}\n}}\n"
    )
    done = node.run("nft", "-f", "-", input=dnat)
    assert done.returncode == 0, done.stderr
    return Topology(node, pods)


ALL = {"x/a", "y/b", "z/c"}


def everyone_but(*keys: str) -> dict[str, set[str]]:
    return {source: ALL - {source} - set(keys) for source in [*IPS, "node"]}


def test_without_policies_every_pod_reaches_every_pod(topology: Topology) -> None:
    topology.apply()
    assert topology.matrix() == {**everyone_but(), "node": ALL}


def test_default_deny_ingress_isolates_x_a_but_its_own_connections_and_the_node_pass(
    topology: Topology,
) -> None:
    topology.apply(policy(DENY_INGRESS))
    expected = everyone_but("x/a")
    expected["x/a"] = {"y/b", "z/c"}  # egress is not isolated, replies come back (conntrack)
    expected["node"] = ALL  # kubelet probes
    assert topology.matrix() == expected


def test_allow_from_a_namespace_on_one_port_through_a_service_too(topology: Topology) -> None:
    topology.apply(
        policy("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-blue, namespace: x}
spec:
  podSelector: {}
  ingress:
  - from: [{namespaceSelector: {matchLabels: {team: blue}}}]
    ports: [{port: 80}]
""")
    )
    assert topology.matrix(80)["y/b"] == {"x/a", "z/c"}
    assert topology.matrix(80)["z/c"] == {"y/b"}
    assert topology.matrix(81)["y/b"] == {"z/c"}
    assert topology.reachable("y/b", [(SERVICE, "tcp", 80)]) == [True]
    assert topology.reachable("z/c", [(SERVICE, "tcp", 80)]) == [False]


def test_union_of_policies_and_ip_block_with_except(topology: Topology) -> None:
    topology.apply(
        policy(DENY_INGRESS),
        policy("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: block, namespace: x}
spec:
  podSelector: {}
  ingress: [{from: [{ipBlock: {cidr: 10.77.0.0/16, except: [10.77.1.0/24]}}]}]
"""),
    )
    assert topology.matrix()["z/c"] == {"x/a", "y/b"}
    assert topology.matrix()["y/b"] == {"z/c"}


def test_named_port_resolved_on_the_destination_pod(topology: Topology) -> None:
    topology.apply(
        policy("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: x}
spec:
  podSelector: {}
  ingress: [{ports: [{port: web}]}]
""")
    )
    assert topology.matrix(81)["y/b"] == {"x/a", "z/c"}  # x/a's "web" is 81
    assert topology.matrix(80)["y/b"] == {"z/c"}


def test_egress_to_dns_only_and_the_node_itself(topology: Topology) -> None:
    topology.apply(
        policy("""
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: dns-only, namespace: x}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress: [{ports: [{protocol: UDP, port: 53}]}]
""")
    )
    targets = [(IPS["z/c"], "udp", 53), (IPS["z/c"], "tcp", 80), (IPS["y/b"], "tcp", 80)]
    assert topology.reachable("x/a", targets) == [True, False, False]
    assert topology.reachable("x/a", [(NODE_GATEWAY, "udp", 53)]) == [False]  # input hook
    assert topology.matrix()["y/b"] == {"x/a", "z/c"}  # ingress to x/a is not isolated


def test_replacing_the_table_keeps_it_whole(topology: Topology) -> None:
    topology.apply(policy(DENY_INGRESS))
    topology.apply(policy(DENY_INGRESS))
    listed = topology.node.run("nft", "list", "table", FAMILY, TABLE).stdout
    assert listed.count("chain ingress/x/deny {") == 1
    assert topology.matrix()["y/b"] == {"z/c"}


DENY_INGRESS = """
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: x}
spec: {podSelector: {}}
"""
