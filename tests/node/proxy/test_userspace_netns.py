"""Userspace mode for real: the proxier runs in a subprocess inside a "node" namespace (where
its listeners and REDIRECT rules must live), and clients in the node and in a "pod" namespace
reach Python servers in the pod through a ClusterIP (TCP and UDP), a NodePort and a Service
without endpoints.

The pod namespace holds three endpoint addresses: two with servers, one without (refused).
Both namespaces and the veth between them are this test's own and are deleted afterwards; the
proxier deletes its chains when told to stop, which the test checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.node.proxy.node_and_pod import NODE_IP, NodeAndPod, node_and_pod

pytestmark = pytest.mark.privileged

POD_IPS = ("10.77.0.2", "10.77.0.3")
DEAD_IP = "10.77.0.4"
"""An address of the pod with nothing listening: connections to it are refused."""

SERVER = """
import socket, sys, threading
def tcp(ip):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((ip, 8080))
    s.listen(64)
    while True:
        c, peer = s.accept()
        c.sendall(f"pong from {peer[0]} to {ip}\\n".encode())
        total = 0
        while data := c.recv(65536):
            total += len(data)
        c.sendall(f"got {total}\\n".encode())
        c.close()
def udp(ip):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, 8080))
    while True:
        data, peer = s.recvfrom(65536)
        s.sendto(f"udp from {peer[0]} to {ip}: ".encode() + data, peer)
for ip in sys.argv[1:]:
    for target in (tcp, udp):
        threading.Thread(target=target, args=(ip,), daemon=True).start()
print("listening", flush=True)
sys.stdin.read()
"""

PROXY = """
import asyncio, json, logging, sys
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.discovery_v1 import Endpoint, EndpointPort, EndpointSlice
from kube.api.meta_v1 import ObjectMeta
from kube.clock import RealClock
from node.iptables import RestoreIptables
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL
from node.proxy.userspace import UserspaceProxier

logging.basicConfig(level=logging.WARNING)
ips = sys.argv[1:]
def service(name, ip, kind="ClusterIP", protocol="TCP", port=80, node_port=None):
    return Service(metadata=ObjectMeta(namespace="ns", name=name), spec=ServiceSpec(
        type=kind, cluster_ip=ip, external_traffic_policy="Cluster" if node_port else None,
        ports=[ServicePort(name="p", protocol=protocol, port=port, node_port=node_port)]))
def slice_(name, protocol):
    return [EndpointSlice(
        metadata=ObjectMeta(namespace="ns", name=name + "-1", labels={SERVICE_NAME_LABEL: name}),
        address_type="IPv4", ports=[EndpointPort(name="p", protocol=protocol, port=8080)],
        endpoints=[Endpoint(addresses=[ip], node_name="node") for ip in ips])]
services = {
    "ns/web": service("web", "10.96.0.50", "NodePort", node_port=30080),
    "ns/empty": service("empty", "10.96.0.51"),
    "ns/dns": service("dns", "10.96.0.53", protocol="UDP", port=53),
}
slices = {"ns/web": slice_("web", "TCP"), "ns/dns": slice_("dns", "UDP")}

async def main():
    proxier = UserspaceProxier(RestoreIptables(), "node", RealClock(), udp_idle_timeout=2.0)
    proxier.set_lookups(services.get, lambda key: slices.get(key, []))
    for svc in services.values():
        proxier.on_service(svc)
    ok = await proxier.sync()
    print(json.dumps({"synced": ok, "ports": {str(n): p.port for n, p in proxier.proxies.items()}}),
          flush=True)
    command = (await asyncio.to_thread(sys.stdin.readline)).strip()
    await proxier.close()
    if command == "stop":  # else leave the rules, as a proxier that exits does
        await proxier.remove_rules()
    print(f"{command} done", flush=True)

asyncio.run(main())
"""

CLIENT = """
import json, socket, sys, time
def tcp(host, port, payload=b""):
    started = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            f = s.makefile("rb")
            greeting = f.readline().decode().strip()
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            return [greeting, f.read().decode().strip()]
    except OSError as e:
        return [type(e).__name__, round(time.monotonic() - started, 3)]
def udp(host, port, *payloads):
    answers = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(3)
        s.connect((host, port))
        for payload in payloads:
            s.send(payload)
            try:
                answers.append(s.recv(65536).decode())
            except OSError as e:
                answers.append(type(e).__name__)
    return answers
results = {
    "cluster_ip": [tcp("10.96.0.50", 80, b"x" * 100000) for _ in range(4)],
    "node_port": [tcp(host, 30080) for host in sys.argv[1:]],
    "no_endpoints": tcp("10.96.0.51", 80),
    "udp": udp("10.96.0.53", 53, b"hello", b"again"),
    "udp_other_client": udp("10.96.0.53", 53, b"next")[0],
}
print(json.dumps(results))
"""


@pytest.fixture
def lab() -> Iterator[NodeAndPod]:
    with node_and_pod("kl-us", (*POD_IPS, DEAD_IP)) as pair:
        yield pair


def client(lab: NodeAndPod, netns: str, *node_port_hosts: str) -> dict[str, Any]:
    done = lab.run(netns, sys.executable, "-c", CLIENT, *node_port_hosts)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def stop(process: subprocess.Popen[str], command: str = "stop") -> str:
    try:
        out, _ = process.communicate(f"{command}\n", timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    return out


def start_proxy(lab: NodeAndPod) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proxy = lab.popen(lab.node, sys.executable, "-c", PROXY, *POD_IPS, DEAD_IP)
    assert proxy.stdout is not None
    line = proxy.stdout.readline()
    if not line:
        proxy.wait(10)
        pytest.fail(f"the proxier exited with {proxy.returncode}")
    started: dict[str, Any] = json.loads(line)
    assert started["synced"], started
    return proxy, started


def check(results: dict[str, Any]) -> None:
    # Round robin over the live endpoints; the refused one is retried on the next.
    greetings = [greeting for greeting, _ in results["cluster_ip"]]
    assert greetings == [f"pong from {NODE_IP} to {ip}" for ip in (*POD_IPS, *POD_IPS)]
    # Half-close relayed: the server saw EOF after all the bytes and could still answer.
    assert {rest for _, rest in results["cluster_ip"]} == {"got 100000"}
    for greeting, rest in results["node_port"]:
        assert greeting.startswith(f"pong from {NODE_IP} to ") and rest == "got 0"
    error, seconds = results["no_endpoints"]
    assert error == "ConnectionResetError" and seconds < 1
    # Replies come back from the VIP (conntrack undid the REDIRECT) through one association
    # (the same endpoint); another client gets another endpoint.
    first, again = results["udp"]
    assert first.startswith(f"udp from {NODE_IP} to ") and first.endswith(": hello")
    assert again == first.replace("hello", "again")
    other = results["udp_other_client"]
    assert other.startswith(f"udp from {NODE_IP} to ") and other[:-6] != first[:-7]


def test_userspace_proxy_through_redirect(lab: NodeAndPod) -> None:
    server = lab.popen(lab.pod, sys.executable, "-c", SERVER, *POD_IPS)
    proxy: subprocess.Popen[str] | None = None
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "listening"
        proxy, started = start_proxy(lab)
        saved = lab.run(lab.node, "iptables-save", "-t", "nat").stdout
        from_node = client(lab, lab.node, "127.0.0.1", NODE_IP)
        from_pod = client(lab, lab.pod, NODE_IP)
        exited = stop(proxy, "exit")
        # A restarted proxier rewrites the rules left behind for its new listeners.
        proxy, restarted = start_proxy(lab)
        resaved = lab.run(lab.node, "iptables-save", "-t", "nat").stdout
        after_restart = client(lab, lab.node, "127.0.0.1", NODE_IP)
        stopped = stop(proxy)
        after = lab.run(lab.node, "iptables-save", "-t", "nat").stdout
    finally:
        if proxy is not None and proxy.poll() is None:
            proxy.kill()
            proxy.communicate()
        server.kill()
        server.communicate()
    web_port = started["ports"]["ns/web:p"]
    assert f"-j REDIRECT --to-ports {web_port}" in saved
    check(from_node)
    check(from_pod)
    check(after_restart)
    assert "exit done" in exited and "stop done" in stopped
    new_port = restarted["ports"]["ns/web:p"]
    assert resaved.count("--to-ports") == saved.count("--to-ports") == 8
    assert f"--to-ports {new_port}" in resaved
    jumps = [line for line in resaved.splitlines() if "-j KUBE-" in line]
    assert len(jumps) == len(set(jumps)) == 4
    assert "KUBE-PORTALS" not in after and "KUBE-NODEPORT" not in after
