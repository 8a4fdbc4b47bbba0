"""A node namespace and a pod namespace joined by a veth, for privileged proxy tests.

Not a test file.  The node side (``vpod``) holds ``NODE_IP`` and a route to the Service range;
the pod side (``eth0``) holds the pod addresses asked for and a default route via the node.
Commands run in either namespace with ``nsenter --net`` from the repository root, so the
proxy under test runs in the node's namespace, never in the pytest process's own.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass

from tests.netns import Netns, NetnsFactory
from tests.servers import REPO

ECHO_SERVER = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 8080))
s.listen(64)
print("listening", flush=True)
while True:
    c, peer = s.accept()
    c.sendall(f"pong from {peer[0]} at {sys.argv[1]}".encode())
    c.close()
"""
"""A TCP server on ``argv[1]``:8080 (run in the pod's namespace) answering who called whom."""
NODE_IP = "10.77.0.1"
SERVICE_RANGE = "10.96.0.0/16"


@dataclass(frozen=True)
class NodeAndPod:
    node: str
    pod: str

    def run(self, netns: str, *argv: str) -> subprocess.CompletedProcess[str]:
        return Netns(netns).run(*argv, timeout=60)

    def popen(self, netns: str, *argv: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{netns}", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )


def ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True)


@contextmanager
def node_and_pod(prefix: str, pod_ips: Sequence[str]) -> Iterator[NodeAndPod]:
    """The two namespaces, deleted afterwards whatever happened."""
    with closing(NetnsFactory()) as make:
        pair = NodeAndPod(node=make(f"{prefix}n").name, pod=make(f"{prefix}p").name)
        ip(
            "-n",
            pair.node,
            "link",
            "add",
            "vpod",
            "type",
            "veth",
            "peer",
            "eth0",
            "netns",
            pair.pod,
        )
        ip("-n", pair.node, "addr", "add", f"{NODE_IP}/24", "dev", "vpod")
        for address in pod_ips:
            ip("-n", pair.pod, "addr", "add", f"{address}/24", "dev", "eth0")
        for netns, link in ((pair.node, "vpod"), (pair.pod, "eth0")):
            ip("-n", netns, "link", "set", link, "up")
        ip("-n", pair.pod, "route", "add", "default", "via", NODE_IP)
        ip("-n", pair.node, "route", "add", SERVICE_RANGE, "dev", "vpod")
        yield pair
