"""The lab cloud provider on real namespaces: a router with the lab0 bridge, two nodes and a
client, all created here (names ccm-*) and removed afterwards, with every rule and address
the provider made."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane.cloud.provider import Route
from kubelab.lab import cloud as lab
from tests.controlplane.cloud.cloudfixtures import lb_service, node
from tests.netns import NetnsFactory

pytestmark = pytest.mark.privileged

ROUTER, CLIENT = "ccm-router", "ccm-client"
NODES = {"node1": ("ccm-node1", "10.240.0.11"), "node2": ("ccm-node2", "10.240.0.12")}
NAMESPACES = (ROUTER, CLIENT, *(ns for ns, _ in NODES.values()))


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def link(ns: str, ip: str, port: str) -> None:
    """A veth from ``ns`` (eth0, ``ip``/24, default via the router) to the router's lab0."""
    sh("ip", "-n", ROUTER, "link", "add", port, "type", "veth", "peer", "eth0", "netns", ns)
    sh("ip", "-n", ROUTER, "link", "set", port, "master", "lab0", "up")
    sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
    sh("ip", "-n", ns, "link", "set", "eth0", "up")
    sh("ip", "-n", ns, "route", "add", "default", "via", "10.240.0.1")


@pytest.fixture
def network(tmp_path: Path, make_netns: NetnsFactory) -> Path:
    """router (lab0 10.240.0.1/24, forwarding) ── node1 .11, node2 .12, client .100; the
    cloud config describing it."""
    for ns in NAMESPACES:
        make_netns.named(ns)
    sh("ip", "-n", ROUTER, "link", "add", "lab0", "type", "bridge")
    sh("ip", "-n", ROUTER, "addr", "add", "10.240.0.1/24", "dev", "lab0")
    sh("ip", "-n", ROUTER, "link", "set", "lab0", "up")
    sh("ip", "netns", "exec", ROUTER, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    link(CLIENT, "10.240.0.100", "r-client")
    nodes = ""
    for i, (name, (ns, ip)) in enumerate(NODES.items()):
        link(ns, ip, f"r-{name}")
        nodes += (
            f"  - {{name: {name}, netns: /run/netns/{ns}, internalIP: {ip},"
            f" zone: lab-{'ab'[i % 2]}, instanceType: lab.standard}}\n"
        )
    config = tmp_path / "cloud.yaml"
    config.write_text(
        f"lab: ccm\nrouterNetns: /run/netns/{ROUTER}\n"
        f"loadBalancerPool: 10.240.0.200-10.240.0.201\nnodes:\n{nodes}"
    )
    return config


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[None]:
    """On each node, HTTP on its NodePort 30080 answering with the node's name, and a health
    check port 31000 answering 200 on node2 only (its "local endpoints")."""
    started: list[asyncio.subprocess.Process] = []
    listening: list[tuple[str, int]] = []
    for name, (ns, ip) in NODES.items():
        root = tmp_path / name
        root.mkdir()
        (root / "index.html").write_text(name)
        (root / "healthz").write_text("ok")  # kube-proxy's health check answers /healthz
        ports = ["30080", "31000"] if name == "node2" else ["30080"]
        for port in ports:
            listening.append((ip, int(port)))
            started.append(
                await asyncio.create_subprocess_exec(
                    *("ip", "netns", "exec", ns, sys.executable, "-m", "http.server", port),
                    *("--bind", ip, "--directory", str(root)),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
    try:
        router = lab.NetnsRouter(f"/run/netns/{ROUTER}", "lab0")
        for ip, number in listening:  # a loaded machine may take seconds to start them
            for _ in range(300):
                if await asyncio.to_thread(router.http_status, ip, number, "/", 1.0):
                    break
                await asyncio.sleep(0.1)
        yield
    finally:
        for process in started:
            process.terminate()
            await process.wait()


FETCH = """
import sys, urllib.request
seen = []
for _ in range(int(sys.argv[1])):
    try:
        seen.append(urllib.request.urlopen("http://10.240.0.200:80/", timeout=2).read().decode())
    except OSError as error:
        seen.append(type(error).__name__)
print(" ".join(sorted(set(seen))))
"""


async def answers(count: int) -> set[str]:
    """Which nodes answered ``count`` requests to the load balancer from the client."""
    process = await asyncio.create_subprocess_exec(
        *("ip", "netns", "exec", CLIENT, sys.executable, "-c", FETCH, str(count)),
        stdout=subprocess.PIPE,
    )
    out, _ = await process.communicate()
    return set(out.decode().split())


async def eventually_answers(wanted: set[str], count: int = 30) -> None:
    for _ in range(50):
        if await answers(count) == wanted:
            return
        await asyncio.sleep(0.1)
    assert await answers(count) == wanted


def provider(config: Path) -> lab.LabCloud:
    with config.open() as file:
        return lab.new(file)


async def test_routes_appear_and_disappear_in_the_router(network: Path) -> None:
    cloud = provider(network)
    route = Route(target_node="node1", destination_cidr="10.244.1.0/24")
    await cloud.create_route("ccm", "u", route)
    await cloud.create_route("ccm", "u", route)
    shown = sh("ip", "-n", ROUTER, "route", "show", "proto", "200").strip()
    assert shown == "10.244.1.0/24 via 10.240.0.11 dev lab0"
    [listed] = await cloud.list_routes("ccm")
    assert (listed.target_node, listed.destination_cidr) == ("node1", "10.244.1.0/24")
    await cloud.delete_route("ccm", listed)
    await cloud.delete_route("ccm", listed)
    assert sh("ip", "-n", ROUTER, "route", "show", "proto", "200").strip() == ""
    assert await cloud.list_routes("ccm") == []


async def test_load_balancer_spreads_follows_nodes_and_is_removed_whole(
    network: Path, servers: None
) -> None:
    cloud = provider(network)
    svc = lb_service()
    status = await cloud.ensure_load_balancer("ccm", svc, [node("node1"), node("node2")])
    assert status.ingress and status.ingress[0].ip == "10.240.0.200"
    await eventually_answers({"node1", "node2"})

    await cloud.update_load_balancer("ccm", svc, [node("node2")])
    assert await answers(10) == {"node2"}

    assert (await provider(network).get_load_balancer("ccm", svc))[1]
    await cloud.ensure_load_balancer_deleted("ccm", svc)
    saved = sh("ip", "netns", "exec", ROUTER, "iptables-nft-save", "-t", "nat")
    assert "KLB-" not in saved and "lb=" not in saved
    assert "10.240.0.200" not in sh("ip", "-n", ROUTER, "addr", "show", "lab0")
    assert not (await cloud.get_load_balancer("ccm", svc))[1]


async def test_local_traffic_policy_sends_only_to_nodes_with_local_endpoints(
    network: Path, servers: None
) -> None:
    cloud = provider(network)
    svc = lb_service(external_traffic_policy="Local", health_check_node_port=31000)
    await cloud.ensure_load_balancer("ccm", svc, [node("node1"), node("node2")])
    await eventually_answers({"node2"})
    await cloud.ensure_load_balancer_deleted("ccm", svc)
