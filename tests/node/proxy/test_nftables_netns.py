"""The nftables proxier against the real ``nft`` in a "node" namespace of this test's own,
with two TCP servers in a "pod" namespace behind a veth (tests/node/proxy/node_and_pod.py).

One run, in the order a node sees it: the iptables mode ran first (its rules and another
component's iptables-nft chain are there), then the nftables mode starts: it removes the
iptables mode's rules and leaves the other chain, and its full sync makes a ClusterIP, a
NodePort on the node's address, a refusal for a Service without endpoints and for another port
of a ClusterIP work; an endpoint change goes through a partial sync; a restarted proxier whose
Service was deleted meanwhile deletes its chains; finally the iptables mode's start removes the
table.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.node.proxy.node_and_pod import ECHO_SERVER, NODE_IP, node_and_pod

pytestmark = pytest.mark.privileged

POD_IPS = ("10.77.0.2", "10.77.0.3")

PROXY = """
import asyncio, json, socket, subprocess, sys
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.discovery_v1 import Endpoint, EndpointPort, EndpointSlice
from kube.api.meta_v1 import ObjectMeta
from kube.clock import RealClock
from node.iptables import RestoreIptables
from node.nftables import SubprocessNftables
from node.proxy.cleanup import cleanup_iptables, cleanup_nftables
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL
from node.proxy.nftproxier import NftablesProxier
from node.proxy.proxier import IptablesProxier

first_ip, second_ip = sys.argv[1:3]

def service(name, vip, kind="ClusterIP", node_port=None):
    return Service(metadata=ObjectMeta(namespace="ns", name=name), spec=ServiceSpec(
        type=kind, cluster_ip=vip, external_traffic_policy="Cluster" if node_port else None,
        ports=[ServicePort(name="http", protocol="TCP", port=80, node_port=node_port)]))

def endpoints(name, ip):
    return [EndpointSlice(
        metadata=ObjectMeta(namespace="ns", name=f"{name}-1", labels={SERVICE_NAME_LABEL: name}),
        address_type="IPv4", ports=[EndpointPort(name="http", protocol="TCP", port=8080)],
        endpoints=[Endpoint(addresses=[ip], node_name="node")])]

services = {
    "ns/web": service("web", "10.96.0.50", "NodePort", 30080),
    "ns/gone": service("gone", "10.96.0.52"),
    "ns/empty": service("empty", "10.96.0.51"),
}
slices = {"ns/web": endpoints("web", first_ip), "ns/gone": endpoints("gone", first_ip)}

def connect(host, port):
    try:
        with socket.create_connection((host, port), timeout=3) as s:
            return s.recv(100).decode()
    except OSError as e:
        return type(e).__name__

def sh(*argv):
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

async def synced(proxier, keys):
    proxier.set_lookups(services.get, lambda key: slices.get(key, []))
    proxier.ensure_sysctls()
    for key in keys:
        proxier.tracker.service_changed(key)
    return await proxier.sync()

async def main():
    results = {}
    sh("iptables", "-t", "nat", "-N", "OTHER-AGENT")
    sh("iptables", "-t", "nat", "-A", "POSTROUTING", "-j", "OTHER-AGENT")
    await synced(IptablesProxier(RestoreIptables(), "node", RealClock()), services)
    results["iptables_before"] = "KUBE-SERVICES" in sh("iptables-save", "-t", "nat")
    cleanup_iptables(RestoreIptables())
    nat = sh("iptables-save", "-t", "nat")
    results["iptables_after"] = [line for line in nat.splitlines() if "KUBE-" in line]
    results["other_agent_kept"] = "-A POSTROUTING -j OTHER-AGENT" in nat
    proxier = NftablesProxier(SubprocessNftables(), "node", RealClock(),
                              cluster_cidr="10.244.0.0/16")
    results["full"] = await synced(proxier, services)
    results["cluster_ip"] = connect("10.96.0.50", 80)
    results["node_port"] = connect(sys.argv[3], 30080)
    results["no_endpoints"] = connect("10.96.0.51", 80)
    results["other_port"] = connect("10.96.0.50", 81)
    slices["ns/web"] = endpoints("web", second_ip)
    results["partial"] = await synced(proxier, ["ns/web"])
    results["after_partial"] = connect("10.96.0.50", 80)
    del services["ns/gone"], slices["ns/gone"]
    restarted = NftablesProxier(SubprocessNftables(), "node", RealClock(),
                                cluster_cidr="10.244.0.0/16")
    results["restarted"] = await synced(restarted, services)
    results["chains"] = SubprocessNftables().list_names("chains")
    results["gone"] = connect("10.96.0.52", 80)
    cleanup_nftables(SubprocessNftables())
    results["tables_after_cleanup"] = sh("nft", "list", "tables")
    print(json.dumps(results))

asyncio.run(main())
"""


def test_nftables_mode_in_a_namespace_beside_and_after_the_iptables_mode() -> None:
    with node_and_pod("klnft", POD_IPS) as lab:
        servers = [lab.popen(lab.pod, sys.executable, "-c", ECHO_SERVER, ip) for ip in POD_IPS]
        try:
            for server in servers:
                assert server.stdout is not None
                assert server.stdout.readline().strip() == "listening"
            done = lab.run(lab.node, sys.executable, "-c", PROXY, *POD_IPS, NODE_IP)
        finally:
            for server in servers:
                server.kill()
                server.communicate()
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results["iptables_before"]
    assert results["iptables_after"] == []
    assert results["other_agent_kept"]
    assert results["full"] and results["partial"] and results["restarted"]
    assert results["cluster_ip"] == f"pong from {NODE_IP} at {POD_IPS[0]}"
    assert results["node_port"] == f"pong from {NODE_IP} at {POD_IPS[0]}"
    assert results["no_endpoints"] == "ConnectionRefusedError"
    assert results["other_port"] == "ConnectionRefusedError"
    assert results["after_partial"] == f"pong from {NODE_IP} at {POD_IPS[1]}"
    assert not [c for c in results["chains"] if "/gone/" in c]
    assert [c for c in results["chains"] if "/web/" in c]
    assert results["gone"] != f"pong from {NODE_IP} at {POD_IPS[0]}"
    assert "kube-proxy" not in results["tables_after_cleanup"]
