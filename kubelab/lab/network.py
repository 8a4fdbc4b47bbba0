"""The lab's underlay: network namespaces, veth pairs, addresses and routes.

Every lab address lives inside namespaces the lab creates, never on the host (lab traffic
must never reach the host's own interfaces): the ``router`` namespace holds the bridge ``lab0``
(10.240.0.1/24), and each other node is a namespace whose ``eth0`` is one end of a veth pair
whose other end (``r-NODE``) is a port of ``lab0``.  Nodes route everything via the router (a
default route also covers the Service range, without which connect() to a VIP fails before
kube-proxy's OUTPUT DNAT runs).  The router learns each node's pod CIDR from the
cloud-controller-manager's route controller (the lab cloud provider writes ``proto 200``
routes into it), and holds the load balancers' IPs; this module creates none of those.  In
the HA lab the router also holds the API address 10.240.0.10 (a /32 on ``lab0``), where the
lab's load balancer listens.

``partition`` cuts one node off from some others inside the router (never the host):
nodes on ``lab0`` talk bridged, so it turns on ``bridge-nf-call-iptables`` in the router and
DROPs, in a chain of its own (``KUBELAB-PARTITION``, jumped to from ``FORWARD``), the
traffic between the node's address and theirs, both ways; ``heal`` removes that node's rules.

Sysctls, per namespace: ``ip_forward`` in the router and the Kubernetes nodes (pods'
traffic crosses them), no ICMP redirects from the router (a node must never learn to bypass
the routes the route controller made), ``route_localnet`` in the Kubernetes nodes
(NodePorts on 127.0.0.1), and ``bridge-nf-call-iptables`` in them (pod → VIP → pod on one
node; default 1 but set so it does not depend on the kernel's default).

The router also holds the host's nameserver addresses (``LabSpec.nameservers``, a /32 each
on its ``lo``), where ``kubelab.lab.resolver`` answers: the nodes' processes read the host's
resolv.conf, and a lookup that reached no server would wait out its timeout.

``attach`` / ``detach`` add and remove one node of a running lab (``kubelab lab
node add`` / ``node rm``).

Everything goes through ``ip`` and ``sysctl`` commands (``kubelab.lab.processes.run``), so a
failure names the command and its output.  ``create`` expects no namespace of the lab to
exist (``destroy`` first); ``destroy`` is idempotent and removes the namespaces, which takes
the bridge and every veth with them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from pathlib import Path

from kubelab.lab.processes import CommandError, run
from kubelab.lab.topology import BRIDGE, CONTROLPLANE_IP, ROUTER_IP, Lab, Node

ROUTER_SYSCTLS = (
    "net.ipv4.ip_forward=1",
    "net.ipv4.conf.all.send_redirects=0",
    f"net.ipv4.conf.{BRIDGE}.send_redirects=0",
)
PARTITION_CHAIN = "KUBELAB-PARTITION"
NODE_SYSCTLS = (
    "net.ipv4.ip_forward=1",
    "net.ipv4.conf.all.route_localnet=1",
    "net.bridge.bridge-nf-call-iptables=1",
)


def host_nameservers(resolv_conf: Path = Path("/etc/resolv.conf")) -> tuple[str, ...]:
    """The IPv4 nameservers of the host's resolv.conf that the lab must stand in for: not
    loopback ones (a node's own loopback answers those at once, refusing)."""
    try:
        lines = resolv_conf.read_text().splitlines()
    except OSError:
        return ()
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) < 2 or fields[0] != "nameserver":
            continue
        try:
            address = ipaddress.ip_address(fields[1])
        except ValueError:
            continue
        if address.version == 4 and not address.is_loopback:
            found.append(str(address))
    return tuple(dict.fromkeys(found))


def existing_namespaces() -> set[str]:
    """The names ``ip netns list`` shows."""
    return {line.split()[0] for line in run("ip", "netns", "list").splitlines() if line.strip()}


def create(lab: Lab) -> None:
    """Create the lab's namespaces, bridge, links, addresses, routes and sysctls."""
    router = lab.router
    _add_namespace(router)
    run("ip", "-n", router.netns, "link", "add", BRIDGE, "type", "bridge")
    run("ip", "-n", router.netns, "addr", "add", f"{ROUTER_IP}/{lab.prefix_len}", "dev", BRIDGE)
    run("ip", "-n", router.netns, "link", "set", BRIDGE, "up")
    if lab.ha:
        run("ip", "-n", router.netns, "addr", "add", f"{CONTROLPLANE_IP}/32", "dev", BRIDGE)
    for nameserver in lab.spec.nameservers:
        run("ip", "-n", router.netns, "addr", "add", f"{nameserver}/32", "dev", "lo")
    sysctl(router, ROUTER_SYSCTLS)
    for node in lab.hosts:
        attach(lab, node)


def _add_namespace(node: Node) -> None:
    run("ip", "netns", "add", node.netns)
    run("ip", "-n", node.netns, "link", "set", "lo", "up")


def attach(lab: Lab, node: Node) -> None:
    """Create a node's namespace and link it to ``lab0`` (the router's must exist)."""
    _add_namespace(node)
    router = lab.router.netns
    # The peer is born in the node's namespace, already named eth0.
    run(
        "ip", "-n", router, "link", "add", node.uplink, "type", "veth",
        "peer", "name", "eth0", "netns", node.netns,
    )  # fmt: skip
    run("ip", "-n", router, "link", "set", node.uplink, "master", BRIDGE, "up")
    run("ip", "-n", node.netns, "addr", "add", f"{node.ip}/{lab.prefix_len}", "dev", "eth0")
    run("ip", "-n", node.netns, "link", "set", "eth0", "up")
    run("ip", "-n", node.netns, "route", "add", "default", "via", ROUTER_IP, "dev", "eth0")
    if node.is_kubernetes_node:
        sysctl(node, NODE_SYSCTLS)


def sysctl(node: Node, settings: tuple[str, ...]) -> None:
    """Set sysctls inside the node's namespace (``sysctl`` under ``nsenter --net``)."""
    run("sysctl", "-q", "-w", *settings, netns=node.netns_path)


def detach(node: Node) -> None:
    """Delete a node's namespace (its veth goes with it); nothing if it is gone already."""
    if node.netns in existing_namespaces():
        run("ip", "netns", "delete", node.netns)


def router_routes(lab: Lab) -> str:
    """The router's routing table (``ip route`` output), for status and tests."""
    return run("ip", "-n", lab.router.netns, "route", "show")


def destroy(lab: Lab) -> list[str]:
    """Delete every namespace of the lab that exists; the names deleted.  Processes still
    inside keep a namespace alive until they exit: stop them first."""
    present = existing_namespaces()
    deleted = []
    for name in lab.netns_names():
        if name in present:
            run("ip", "netns", "delete", name)
            deleted.append(name)
    return deleted


def partition(lab: Lab, node: Node, others: Sequence[Node]) -> None:
    """Drop, in the router, all traffic between ``node`` and each of ``others``."""
    sysctl(lab.router, ("net.bridge.bridge-nf-call-iptables=1",))
    if not _holds(lab, "-S", PARTITION_CHAIN):
        _iptables(lab, "-N", PARTITION_CHAIN)
    if not _holds(lab, "-C", "FORWARD", "-j", PARTITION_CHAIN):
        _iptables(lab, "-I", "FORWARD", "1", "-j", PARTITION_CHAIN)
    for other in others:
        for source, destination in ((node.ip, other.ip), (other.ip, node.ip)):
            rule = ("-s", source, "-d", destination, "-j", "DROP")
            if not _holds(lab, "-C", PARTITION_CHAIN, *rule):
                _iptables(lab, "-A", PARTITION_CHAIN, *rule)


def heal(lab: Lab, node: Node) -> None:
    """Remove every partition rule naming ``node``'s address (nothing if there is none)."""
    listed = _iptables(lab, "-S", PARTITION_CHAIN, check=False)
    for line in listed.splitlines():
        words = line.split()
        if words[:2] == ["-A", PARTITION_CHAIN] and f"{node.ip}/32" in words:
            _iptables(lab, "-D", *words[1:])


def partitioned(lab: Lab) -> list[tuple[str, str]]:
    """The (source, destination) addresses the router drops between."""
    pairs = []
    for line in _iptables(lab, "-S", PARTITION_CHAIN, check=False).splitlines():
        words = line.split()
        if words[:2] == ["-A", PARTITION_CHAIN] and "-s" in words and "-d" in words:
            source = words[words.index("-s") + 1].removesuffix("/32")
            pairs.append((source, words[words.index("-d") + 1].removesuffix("/32")))
    return pairs


def _iptables(lab: Lab, *args: str, check: bool = True) -> str:
    """``iptables -w`` in the router's namespace (``check=False``: a missing chain lists
    nothing useful rather than failing)."""
    return run("iptables", "-w", *args, netns=lab.router.netns_path, check=check)


def _holds(lab: Lab, *args: str) -> bool:
    """The router's iptables has the chain (``-S``) or rule (``-C``) ``args`` name."""
    try:
        _iptables(lab, *args)
    except CommandError:
        return False
    return True
