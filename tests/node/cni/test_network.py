"""The real plugin (its ``main`` in a subprocess) inside a node netns this test creates.

Each test makes a "node" namespace (where the plugin runs, as under containerd) and two "pod"
namespaces, and deletes all of them afterwards; the addresses exist only inside them and
iptables changes only the node namespace's tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from node.cni.network import host_veth_name, hostport_chain
from tests.netns import NetnsFactory

pytestmark = pytest.mark.privileged

REPO = Path(__file__).resolve().parents[3]
SUBNET = "10.250.7.0/24"
BRIDGE_IP = "10.250.7.1"


@dataclass
class Lab:
    node: str
    pods: dict[str, str]
    data_dir: Path

    def config(self, **extra: Any) -> dict[str, Any]:
        return {
            "cniVersion": "1.0.0",
            "name": "kubelab",
            "type": "kubelab",
            "mtu": 1400,
            "dataDir": str(self.data_dir),
            "clusterCIDR": "10.250.0.0/16",
            "ipam": {"type": "host-local", "ranges": [[{"subnet": SUBNET}]]},
            **extra,
        }

    def cni(self, command: str, pod: str, netns: str | None = None, **extra: Any) -> Any:
        env = {
            "PATH": os.environ["PATH"],
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": f"cid-{pod}",
            "CNI_NETNS": f"/run/netns/{self.pods[pod]}" if netns is None else netns,
            "CNI_IFNAME": "eth0",
            "CNI_PATH": "/usr/lib/cni",
        }
        done = subprocess.run(
            [
                "nsenter",
                f"--net=/run/netns/{self.node}",
                sys.executable,
                "-c",
                "from node.cni.plugin import main; main()",
            ],
            input=json.dumps(self.config(**extra)),
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    def run_in(self, netns: str, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", netns, *argv],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )

    def allocated(self) -> list[str]:
        return sorted(p.name for p in (self.data_dir / "networks" / "kubelab").glob("10.*"))


@pytest.fixture
def lab(tmp_path: Path, make_netns: NetnsFactory) -> Lab:
    pods = {p: make_netns(f"cnit-{p}").name for p in ("a", "b")}
    return Lab(node=make_netns("cnit-node").name, pods=pods, data_dir=tmp_path)


def test_add_connects_pods_bridge_and_node(lab: Lab) -> None:
    result_a = lab.cni("ADD", "a")
    result_b = lab.cni("ADD", "b")
    ip_a = result_a["ips"][0]["address"].split("/")[0]
    ip_b = result_b["ips"][0]["address"].split("/")[0]
    assert result_a["interfaces"][2] | {"mac": ""} == {
        "name": "eth0",
        "mac": "",
        "sandbox": f"/run/netns/{lab.pods['a']}",
    }
    assert ip_a != ip_b

    pod_a, pod_b = lab.pods["a"], lab.pods["b"]
    for source, target in ((pod_a, ip_b), (pod_b, ip_a), (pod_a, BRIDGE_IP)):
        ping = lab.run_in(source, "ping", "-c1", "-W1", target)
        assert ping.returncode == 0, ping.stdout + ping.stderr
    assert lab.run_in(lab.node, "ping", "-c1", "-W1", ip_a).returncode == 0

    eth0 = lab.run_in(pod_a, "ip", "-d", "link", "show", "eth0").stdout
    assert "mtu 1400" in eth0
    assert "default via 10.250.7.1" in lab.run_in(pod_a, "ip", "route").stdout
    veth = host_veth_name("cid-a", "eth0")
    details = lab.run_in(lab.node, "ip", "-d", "link", "show", veth).stdout
    assert "master cni0" in details
    assert "hairpin on" in details

    nat = lab.run_in(lab.node, "iptables-save", "-t", "nat").stdout
    assert "-A POSTROUTING -j KUBELAB-CNI-MASQ" in nat
    assert f"-A KUBELAB-CNI-MASQ -s {SUBNET} ! -d 10.250.0.0/16 -j MASQUERADE" in nat


def test_add_is_idempotent_and_del_is_safe(lab: Lab) -> None:
    first = lab.cni("ADD", "a")
    again = lab.cni("ADD", "a")
    assert again["ips"] == first["ips"]
    assert lab.allocated() == ["10.250.7.2"]

    assert lab.cni("DEL", "a") is None
    assert lab.cni("DEL", "a") is None
    assert lab.cni("DEL", "a", netns="") is None
    assert lab.allocated() == []
    links = lab.run_in(lab.node, "ip", "-o", "link", "show", "type", "veth").stdout
    assert links == ""


def test_del_after_the_pod_netns_is_gone(lab: Lab) -> None:
    lab.cni("ADD", "b")
    subprocess.run(["ip", "netns", "del", lab.pods["b"]], check=True)
    gone = f"/run/netns/{lab.pods['b']}"
    assert lab.cni("DEL", "b", netns=gone) is None
    assert lab.cni("DEL", "b", netns="") is None
    assert lab.allocated() == []
    assert lab.run_in(lab.node, "ip", "-o", "link", "show", "type", "veth").stdout == ""


def test_host_port_dnat_and_cleanup(lab: Lab) -> None:
    ports: dict[str, Any] = {
        "runtimeConfig": {"portMappings": [{"hostPort": 18080, "containerPort": 8080}]}
    }
    ip_a = lab.cni("ADD", "a", **ports)["ips"][0]["address"].split("/")[0]
    server = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            lab.pods["a"],
            sys.executable,
            "-c",
            "import socket\n"
            "s = socket.create_server(('0.0.0.0', 8080)); print('ready', flush=True)\n"
            "c, _ = s.accept(); c.sendall(b'hello'); c.close(); s.close()",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    try:
        assert server.stdout.readline().strip() == "ready"
        client = lab.run_in(
            lab.node,
            sys.executable,
            "-c",
            "import socket\n"
            f"c = socket.create_connection(('{BRIDGE_IP}', 18080), timeout=5)\n"
            "print(c.recv(5).decode()); c.close()",
        )
        assert client.stdout.strip() == "hello", client.stderr
    finally:
        server.kill()
        server.wait()
        server.stdout.close()
    assert ip_a in lab.run_in(lab.node, "iptables-save", "-t", "nat").stdout

    lab.cni("DEL", "a", **ports)
    lab.cni("DEL", "a", **ports)
    nat = lab.run_in(lab.node, "iptables-save", "-t", "nat").stdout
    assert hostport_chain("cid-a", "eth0") not in nat
