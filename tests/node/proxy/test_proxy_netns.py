"""Smoke test of the real thing: the proxier's full ruleset applied by RestoreIptables in a
"node" namespace, and connections from that node to a ClusterIP, a NodePort on 127.0.0.1 and
a Service without endpoints, reaching (or not) a Python TCP server in a "pod" namespace.

Both namespaces and the veth between them are this test's own and are deleted afterwards;
kubelab's CNI is not involved (the pod is wired by hand).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.node.proxy.node_and_pod import ECHO_SERVER, NODE_IP, NodeAndPod, node_and_pod

pytestmark = pytest.mark.privileged

POD_IP = "10.77.0.2"

PROXY = """
import asyncio, json, socket, sys
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.discovery_v1 import Endpoint, EndpointPort, EndpointSlice
from kube.api.meta_v1 import ObjectMeta
from kube.clock import RealClock
from node.iptables import RestoreIptables
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL
from node.proxy.proxier import IptablesProxier

pod_ip = sys.argv[1]
services = {
    "ns/web": Service(metadata=ObjectMeta(namespace="ns", name="web"), spec=ServiceSpec(
        type="NodePort", cluster_ip="10.96.0.50", external_traffic_policy="Cluster",
        ports=[ServicePort(name="http", protocol="TCP", port=80, node_port=30080)])),
    "ns/empty": Service(metadata=ObjectMeta(namespace="ns", name="empty"), spec=ServiceSpec(
        type="ClusterIP", cluster_ip="10.96.0.51",
        ports=[ServicePort(name="http", protocol="TCP", port=80)])),
}
slices = {"ns/web": [EndpointSlice(
    metadata=ObjectMeta(namespace="ns", name="web-1", labels={SERVICE_NAME_LABEL: "web"}),
    address_type="IPv4", ports=[EndpointPort(name="http", protocol="TCP", port=8080)],
    endpoints=[Endpoint(addresses=[pod_ip], node_name="node")])]}

def connect(host, port):
    try:
        with socket.create_connection((host, port), timeout=3) as s:
            return s.recv(100).decode()
    except OSError as e:
        return type(e).__name__

async def main():
    results = {}
    for run in ("first", "restart"):
        proxier = IptablesProxier(RestoreIptables(), "node", RealClock(),
                                  cluster_cidr="10.244.0.0/16")
        proxier.set_lookups(services.get, lambda key: slices.get(key, []))
        proxier.ensure_sysctls()
        for key, service in services.items():
            proxier.on_service(service)
        results[run] = await proxier.sync()
    results["cluster_ip"] = connect("10.96.0.50", 80)
    results["node_port"] = connect("127.0.0.1", 30080)
    results["no_endpoints"] = connect("10.96.0.51", 80)
    print(json.dumps(results))

asyncio.run(main())
"""


@pytest.fixture
def lab() -> Iterator[NodeAndPod]:
    with node_and_pod("kl-px", [POD_IP]) as pair:
        yield pair


def test_cluster_ip_node_port_and_reject_through_restored_rules(lab: NodeAndPod) -> None:
    server = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{lab.pod}", sys.executable, "-c", ECHO_SERVER, POD_IP],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "listening"
        done = lab.run(lab.node, sys.executable, "-c", PROXY, POD_IP)
        assert done.returncode == 0, done.stderr
        results = json.loads(done.stdout.strip().splitlines()[-1])
        saved = lab.run(lab.node, "iptables-save", "-t", "nat").stdout
    finally:
        server.kill()
        server.communicate()
    assert results["first"] and results["restart"]
    assert results["cluster_ip"] == f"pong from {NODE_IP} at {POD_IP}"
    assert results["node_port"] == f"pong from {NODE_IP} at {POD_IP}"
    assert results["no_endpoints"] == "ConnectionRefusedError"
    # The restart reused its chains: no duplicates of jumps or chains.
    declared = [line for line in saved.splitlines() if line.startswith(":KUBE-")]
    assert len(declared) == len(set(declared))
    jumps = [line for line in saved.splitlines() if line.startswith("-A PREROUTING")]
    assert jumps == [
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'
    ]
