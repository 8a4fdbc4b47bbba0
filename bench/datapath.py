"""kube-proxy data path: HTTP through a Service's ClusterIP beside the same pod's IP directly.

Three network namespaces stand for one node and two pods on it: ``server`` and ``client``
pods, each joined to the ``node`` by its own veth and routed through it (as a routed CNI
does, so pod-to-pod traffic crosses the node's IP stack with or without a Service, and no
bridge netfilter is involved).  The proxier runs in a worker process inside the node's
namespace, fed in-memory Services as in ``bench.proxy`` (no API server): the ``web`` Service
(ClusterIP 10.96.0.10:80 → the server pod's :8080) and ``--others`` other ClusterIP Services
with one endpoint each.  Chains are ordered by Service name, and ``web`` sorts after every
``svc-NNNN``, so a new connection to it walks the whole ``KUBE-SERVICES`` chain: the worst
case of iptables mode's linear match.

The server pod runs a small asyncio HTTP/1.1 server answering every request with the same
200 (keep-alive unless asked to close).  The client pod runs one closed-loop client (one
request in flight, blocking sockets): ``keep-alive`` reuses one connection, ``new conn`` opens
one per request (``Connection: close``).  On a shared 2-core machine a single long run of each
side measures mostly who else was running, so the client alternates: ``ROUNDS`` rounds, each a
``SLICE``-second slice direct and one through the VIP (which goes first alternates too).
Reported: requests/s (median over the slices), latency p50 and p99 (over all requests), and
the VIP/direct throughput ratio as the median of the per-round ratios, so drifting load hits
both sides alike.  Target (issue 7): at least 0.95 in iptables mode.  Userspace mode (the proxy
relays every byte in Python) is measured the same way beside it.

``python -m bench.datapath [--others 0,1000] [--modes iptables,userspace] [--backend legacy]``
needs root; everything it creates lives in namespaces it deletes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OTHERS = (0, 1_000)
MODES = ("iptables", "userspace")
KINDS = ("keep-alive", "new conn")
TARGET = 0.95
ROUNDS = 30
SLICE = 0.2
VIP = "10.96.0.10"
SERVER_IP = "10.78.1.2"
CLIENT_IP = "10.78.2.2"
SERVER_PORT = 8080
BODY = b"hello from the server pod\n"
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (
    len(BODY),
    BODY,
)
CLOSING = RESPONSE.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)


# -- the server pod ---------------------------------------------------------------------------


class _Http(asyncio.Protocol):
    """Answers each request (head up to the blank line; no bodies) with RESPONSE."""

    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            if b"connection: close" in head.lower():
                self.transport.write(CLOSING)
                self.transport.close()
                return
            self.transport.write(RESPONSE)


async def serve() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Http, "0.0.0.0", SERVER_PORT, backlog=1024)
    print("serving", flush=True)
    async with server:
        await loop.run_in_executor(None, sys.stdin.read)  # until the bench closes stdin


# -- the client pod ---------------------------------------------------------------------------


class Client:
    """A closed-loop HTTP client of one target; ``keep_alive`` False: a connection per
    request."""

    def __init__(self, ip: str, port: int, keep_alive: bool) -> None:
        self.address = (ip, port)
        self.keep_alive = keep_alive
        request = f"GET / HTTP/1.1\r\nHost: {ip}\r\n".encode()
        self.request = request + (b"\r\n" if keep_alive else b"Connection: close\r\n\r\n")
        self.expected = len(RESPONSE) if keep_alive else len(CLOSING)
        self.sock: socket.socket | None = None
        self.latencies: list[float] = []

    def run(self, seconds: float) -> float:
        """Requests for ``seconds``; the requests/s of this slice."""
        start = now = time.perf_counter()
        deadline, count = start + seconds, 0
        while now < deadline:
            began = now
            if self.sock is None:
                self.sock = socket.create_connection(self.address, timeout=5)
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock.sendall(self.request)
            received = 0
            while received < self.expected:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise SystemExit(f"{self.address} closed after {received} bytes")
                received += len(chunk)
            if not self.keep_alive:
                self.sock.close()
                self.sock = None
            now = time.perf_counter()
            self.latencies.append(now - began)
            count += 1
        if self.sock is not None:  # a keep-alive connection per slice, not one long one
            self.sock.close()
            self.sock = None
        return count / (now - start)


def alternate(kind: str) -> dict[str, dict[str, float]]:
    """In the client pod: ROUNDS rounds of a slice direct and a slice through the VIP;
    per side rps (median), p50 and p99 (ms), and the median per-round VIP/direct ratio."""
    keep_alive = kind == "keep-alive"
    sides = {
        "direct": Client(SERVER_IP, SERVER_PORT, keep_alive),
        "vip": Client(VIP, 80, keep_alive),
    }
    rates: dict[str, list[float]] = {"direct": [], "vip": []}
    ratios = []
    for round_ in range(ROUNDS):
        order = ["direct", "vip"] if round_ % 2 else ["vip", "direct"]
        slice_ = {side: sides[side].run(SLICE) for side in order}
        for side, rate in slice_.items():
            rates[side].append(rate)
        ratios.append(slice_["vip"] / slice_["direct"])
    result = {}
    for side, client in sides.items():
        latencies = sorted(client.latencies)
        result[side] = {
            "rps": statistics.median(rates[side]),
            "p50": latencies[len(latencies) // 2] * 1e3,
            "p99": latencies[int(len(latencies) * 0.99)] * 1e3,
        }
    result["ratio"] = {"median": statistics.median(ratios)}
    return result


# -- the node: the proxier --------------------------------------------------------------------


def proxier_worker(mode: str, others: int, backend: str) -> None:
    """Inside the node netns: program the Services, say "ready", keep the proxier's event
    loop running (userspace mode relays in it) until stdin closes."""
    from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
    from kube.api.kinds.discovery_v1 import (
        SERVICE_NAME_LABEL,
        Endpoint,
        EndpointPort,
        EndpointSlice,
    )
    from kube.api.meta_v1 import ObjectMeta
    from kube.clock import RealClock
    from node.iptables import RestoreIptables
    from node.proxy.base import Proxier
    from node.proxy.proxier import IptablesProxier
    from node.proxy.userspace import UserspaceProxier

    def service(name: str, cluster_ip: str) -> Service:
        return Service(
            metadata=ObjectMeta(namespace="bench", name=name),
            spec=ServiceSpec(
                type="ClusterIP",
                cluster_ip=cluster_ip,
                ports=[ServicePort(name="http", protocol="TCP", port=80)],
            ),
        )

    def endpoint_slice(name: str, ip: str) -> EndpointSlice:
        return EndpointSlice(
            metadata=ObjectMeta(
                namespace="bench", name=f"{name}-1", labels={SERVICE_NAME_LABEL: name}
            ),
            address_type="IPv4",
            ports=[EndpointPort(name="http", protocol="TCP", port=SERVER_PORT)],
            endpoints=[Endpoint(addresses=[ip], node_name="node")],
        )

    services = {"bench/web": service("web", VIP)}
    slices = {"bench/web": [endpoint_slice("web", SERVER_IP)]}
    for i in range(others):
        name = f"svc-{i:04d}"
        services[f"bench/{name}"] = service(name, f"10.97.{i // 256}.{i % 256}")
        slices[f"bench/{name}"] = [endpoint_slice(name, f"10.79.{i // 256}.{i % 256}")]
    iptables = RestoreIptables(backend)
    proxier: Proxier
    if mode == "userspace":
        proxier = UserspaceProxier(iptables, "node", RealClock())
    else:
        proxier = IptablesProxier(iptables, "node", RealClock(), cluster_cidr="10.78.0.0/16")
    proxier.set_lookups(services.get, lambda key: slices.get(key, []))

    async def run() -> None:
        for key in services:
            proxier.tracker.service_changed(key)
        proxier.ensure_sysctls()
        assert await proxier.sync(), "sync failed"
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await proxier.close()

    asyncio.run(run())


# -- the bench --------------------------------------------------------------------------------


def ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True)


@dataclass(frozen=True)
class Namespaces:
    node: str
    server: str
    client: str


@contextmanager
def namespaces() -> Iterator[Namespaces]:
    """A node with a server pod and a client pod, each on a routed veth; deleted after."""
    suffix = uuid.uuid4().hex[:6]
    names = Namespaces(f"kl-dpn-{suffix}", f"kl-dps-{suffix}", f"kl-dpc-{suffix}")
    try:
        for name in (names.node, names.server, names.client):
            ip("netns", "add", name)
            ip("-n", name, "link", "set", "lo", "up")
        for pod, link, pod_ip, net in (
            (names.server, "vsrv", SERVER_IP, "10.78.1"),
            (names.client, "vcli", CLIENT_IP, "10.78.2"),
        ):
            ip("-n", names.node, "link", "add", link, "type", "veth", "peer", "eth0", "netns", pod)
            ip("-n", names.node, "addr", "add", f"{net}.1/24", "dev", link)
            ip("-n", pod, "addr", "add", f"{pod_ip}/24", "dev", "eth0")
            ip("-n", names.node, "link", "set", link, "up")
            ip("-n", pod, "link", "set", "eth0", "up")
            ip("-n", pod, "route", "add", "default", "via", f"{net}.1")
        in_node = ["nsenter", f"--net=/run/netns/{names.node}"]
        subprocess.run([*in_node, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
        yield names
    finally:
        for name in (names.client, names.server, names.node):
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


def started(netns: str, *args: str) -> subprocess.Popen[str]:
    """``python -m bench.datapath ARGS`` in ``netns``, once it printed its first line."""
    process = subprocess.Popen(
        ["nsenter", f"--net=/run/netns/{netns}", sys.executable, "-m", "bench.datapath", *args],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    if not process.stdout.readline():
        process.kill()
        raise SystemExit(f"bench.datapath {' '.join(args)} failed to start")
    return process


def stopped(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_client(netns: str, kind: str) -> dict[str, dict[str, float]]:
    done = subprocess.run(
        [
            *("nsenter", f"--net=/run/netns/{netns}", sys.executable, "-m", "bench.datapath"),
            *("--client", kind),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"client {kind} failed:\n{done.stderr}")
    result: dict[str, dict[str, float]] = json.loads(done.stdout)
    return result


Result = dict[str, dict[str, dict[str, float]]]
"""kind → "direct" | "vip" → rps, p50, p99; and kind → "ratio" → median."""


def measure(mode: str, others: int, backend: str) -> Result:
    with namespaces() as names:
        server = started(names.server, "--serve")
        try:
            proxy = started(names.node, "--proxier", mode, str(others), backend)
            try:
                return {kind: run_client(names.client, kind) for kind in KINDS}
            finally:
                stopped(proxy)
        finally:
            stopped(server)


def report(results: dict[tuple[str, int], Result], backend: str) -> None:
    print(
        f"kube-proxy data path: one closed-loop HTTP client pod → server pod, direct vs "
        f"ClusterIP (iptables-{backend}), {ROUNDS} alternating rounds of {SLICE} s slices"
    )
    for (mode, others), result in results.items():
        for kind in KINDS:
            direct, vip = result[kind]["direct"], result[kind]["vip"]
            ratio = result[kind]["ratio"]["median"]
            verdict = ""
            if mode == "iptables":
                verdict = " meets" if ratio >= TARGET else " MISSES"
                verdict += f" {TARGET}"
            print(
                f"  {mode:>9}, {others:>4} other Services, {kind:>10}: "
                f"direct {direct['rps']:,.0f}/s (p50 {direct['p50']:.3f} ms, "
                f"p99 {direct['p99']:.3f} ms); VIP {vip['rps']:,.0f}/s "
                f"(p50 {vip['p50']:.3f} ms, p99 {vip['p99']:.3f} ms): "
                f"VIP/direct {ratio:.2f}{verdict}"
            )


def main(argv: Sequence[str] | None = None) -> dict[tuple[str, int], Result]:
    parser = argparse.ArgumentParser(prog="python -m bench.datapath")
    parser.add_argument(
        "--others",
        type=lambda text: [int(n) for n in text.split(",")],
        default=list(OTHERS),
        help="how many other Services are installed (default: 0,1000)",
    )
    parser.add_argument(
        "--modes",
        type=lambda text: text.split(","),
        default=list(MODES),
        help="proxy modes (default: iptables,userspace)",
    )
    parser.add_argument(
        "--backend",
        choices=("nft", "legacy"),
        default="legacy",
        help="iptables backend of the node (default: legacy, as bench.proxy at scale)",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--proxier", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve())
        return {}
    if args.client:
        print(json.dumps(alternate(args.client)))
        return {}
    if args.proxier:
        mode, others, backend = args.proxier
        proxier_worker(mode, int(others), backend)
        return {}
    results = {
        (mode, others): measure(mode, others, args.backend)
        for mode in args.modes
        for others in args.others
    }
    report(results, args.backend)
    return results


if __name__ == "__main__":
    main()
