"""The side effects of the CNI plugin: netlink through pyroute2, NAT through iptables-restore.

The plugin process runs in the node's network namespace (it inherits containerd's), so the
bridge, the host ends of the veths and the NAT rules land there; only the pod's end of a veth
is in the pod's namespace.  Both sides are behind narrow interfaces (:class:`PodNetwork`,
:class:`Iptables`) so that the protocol layer is tested with fakes and without root.

Netlink (:class:`Pyroute2Network`):

- the bridge (``cni0`` by default) is created on first use, holds the gateway address (the
  first IP of the podCIDR) and is up; it is never removed by a DEL;
- the veth pair is created with its peer *born* inside the pod netns under its final name
  (``eth0``): one netlink request instead of create + move + rename, and no window in which a
  stray ``eth0`` sits in the node's namespace;
- the host end's name is derived from (container id, ifname), so that DEL finds it without the
  pod netns (CNI_NETNS may be empty on DEL) and a repeated ADD replaces a half-made pair;
- DEL removes the host end, which takes the peer with it; a missing link or netns is success,
  because the runtime calls DEL twice per pod and after the netns is gone.

pyroute2 0.9 traps (verified): ``IPRoute(netns=path)`` creates a missing namespace unless
``flags=0``; ``brport("set", hairpin_mode=1)`` is silently ignored, ``mode=1`` is the keyword
that sets hairpin.

NAT (:class:`NatRules`) builds the whole change for one call and applies it with a single
``iptables-restore --noflush`` (on the backend the node uses: nft unless the node's rules
are in the legacy tables): a ``KUBELAB-CNI-MASQ`` chain in ``nat/POSTROUTING`` masquerading the
podCIDR's traffic that leaves the cluster CIDR, rewritten whole on every ADD (declaring a chain in a
``--noflush`` restore flushes it), and per pod a ``KUBELAB-HP-<hash>`` chain of hostPort DNAT
rules jumped to from ``PREROUTING`` and ``OUTPUT`` for local destinations.  The jumps from
built-in chains are added only when ``iptables-save`` does not show them yet.
The iptables backend is the node's shared one (:mod:`node.iptables`): it refuses to run
unless the current netns
is one bind-mounted under /run/netns (a lab node's), and its errors are turned into
:class:`NetworkError` here so the plugin reports them as CNI errors.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import hashlib
import ipaddress
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from node.iptables import Iptables, IptablesError

MASQ_CHAIN = "KUBELAB-CNI-MASQ"
HAIRPIN_MARK = "0x2000/0x2000"
"""Marks a pod's packets to its own hostPort, which must be masqueraded to come back."""
IP_FORWARD = "/proc/sys/net/ipv4/ip_forward"
HOSTPORT_CHAIN_PREFIX = "KUBELAB-HP-"


class NetworkError(Exception):
    """A netlink or iptables operation failed; the message says which and why."""


@dataclass(frozen=True)
class Attachment:
    """What one ADD/CHECK wires: the pod end ``ifname`` in ``netns`` on ``bridge``."""

    container_id: str
    netns: str
    ifname: str
    bridge: str
    gateway: ipaddress.IPv4Interface
    address: ipaddress.IPv4Interface
    mtu: int
    hairpin: bool


@dataclass(frozen=True)
class Link:
    """One interface of a CNI result; ``sandbox`` is the netns path for the pod's own."""

    name: str
    mac: str
    sandbox: str = ""


@dataclass(frozen=True)
class Attached:
    """The three interfaces an ADD reports, in result order."""

    bridge: Link
    host: Link
    pod: Link


@dataclass(frozen=True)
class PortMapping:
    """One hostPort: the ``portMappings`` capability entry of the runtime config."""

    host_port: int
    container_port: int
    protocol: str = "tcp"
    host_ip: str = ""


class PodNetwork(Protocol):
    """The netlink side of the plugin."""

    def attach(self, attachment: Attachment) -> Attached:
        """Wire the pod; idempotent per (container id, ifname)."""
        ...

    def detach(self, container_id: str, ifname: str) -> None:
        """Remove the pod's veth pair; idempotent, needs no netns."""
        ...

    def check(self, attachment: Attachment) -> None:
        """Raise :class:`NetworkError` unless the pod is wired as ``attachment`` says."""
        ...


def host_veth_name(container_id: str, ifname: str) -> str:
    """The host end's name: deterministic, 15 characters (the kernel's IFNAMSIZ - 1)."""
    return "veth" + hashlib.sha256(f"{container_id}/{ifname}".encode()).hexdigest()[:11]


def hostport_chain(container_id: str, ifname: str) -> str:
    """The pod's hostPort chain: deterministic and within the 28-character limit."""
    digest = hashlib.sha256(f"{container_id}/{ifname}".encode()).digest()
    return HOSTPORT_CHAIN_PREFIX + base64.b32encode(digest).decode()[:16]


class Pyroute2Network:
    """:class:`PodNetwork` over netlink in the current (node) netns."""

    def attach(self, attachment: Attachment) -> Attached:
        from pyroute2 import IPRoute

        host_name = host_veth_name(attachment.container_id, attachment.ifname)
        with IPRoute() as ipr:
            bridge = self._ensure_bridge(ipr, attachment)
            self._delete_link(ipr, host_name)
            with _netns_fd(attachment.netns) as fd:
                ipr.link(
                    "add",
                    ifname=host_name,
                    kind="veth",
                    mtu=attachment.mtu,
                    peer={"ifname": attachment.ifname, "net_ns_fd": fd, "mtu": attachment.mtu},
                )
            host_index = ipr.link_lookup(ifname=host_name)[0]
            ipr.link("set", index=host_index, master=bridge, state="up")
            if attachment.hairpin:
                ipr.brport("set", index=host_index, mode=1)
            bridge_mac = ipr.link("get", index=bridge)[0].get("address")
            host_mac = ipr.link("get", index=host_index)[0].get("address")
        pod_mac = self._configure_pod(attachment)
        return Attached(
            bridge=Link(attachment.bridge, bridge_mac),
            host=Link(host_name, host_mac),
            pod=Link(attachment.ifname, pod_mac, sandbox=attachment.netns),
        )

    def detach(self, container_id: str, ifname: str) -> None:
        from pyroute2 import IPRoute

        with IPRoute() as ipr:
            self._delete_link(ipr, host_veth_name(container_id, ifname))

    def check(self, attachment: Attachment) -> None:
        from pyroute2 import IPRoute

        host_name = host_veth_name(attachment.container_id, attachment.ifname)
        with IPRoute() as ipr:
            bridges = ipr.link_lookup(ifname=attachment.bridge)
            hosts = ipr.link_lookup(ifname=host_name)
            if not bridges or not hosts:
                raise NetworkError(f"bridge {attachment.bridge} or veth {host_name} is missing")
            if ipr.link("get", index=hosts[0])[0].get("master") != bridges[0]:
                raise NetworkError(f"veth {host_name} is not a port of {attachment.bridge}")
        with _pod_iproute(attachment.netns) as pod:
            links = pod.link_lookup(ifname=attachment.ifname)
            if not links:
                raise NetworkError(f"{attachment.ifname} is missing in {attachment.netns}")
            addresses = {
                ipaddress.IPv4Interface(f"{a.get('address')}/{a['prefixlen']}")
                for a in pod.addr("dump", index=links[0], family=2)
            }
        if attachment.address not in addresses:
            raise NetworkError(f"{attachment.ifname} lacks address {attachment.address}")

    def _ensure_bridge(self, ipr: Any, attachment: Attachment) -> int:
        found = ipr.link_lookup(ifname=attachment.bridge)
        if not found:
            _tolerate(errno.EEXIST, ipr.link, "add", ifname=attachment.bridge, kind="bridge")
            found = ipr.link_lookup(ifname=attachment.bridge)
        index: int = found[0]
        gateway = attachment.gateway
        _tolerate(
            errno.EEXIST,
            ipr.addr,
            "add",
            index=index,
            address=str(gateway.ip),
            prefixlen=gateway.network.prefixlen,
        )
        ipr.link("set", index=index, state="up")
        _enable_forwarding()
        return index

    def _configure_pod(self, attachment: Attachment) -> str:
        with _pod_iproute(attachment.netns) as pod:
            index = pod.link_lookup(ifname=attachment.ifname)[0]
            pod.addr(
                "add",
                index=index,
                address=str(attachment.address.ip),
                prefixlen=attachment.address.network.prefixlen,
            )
            pod.link("set", index=index, state="up")
            pod.route("add", dst="0.0.0.0/0", gateway=str(attachment.gateway.ip))
            mac: str = pod.link("get", index=index)[0].get("address")
        return mac

    @staticmethod
    def _delete_link(ipr: Any, name: str) -> None:
        _tolerate(errno.ENODEV, ipr.link, "del", ifname=name)


def _enable_forwarding() -> None:
    """Route between the bridge and the node's other links (hostPort DNAT, other nodes),
    as the reference bridge plugin does with ``isGateway``; in the current netns only."""
    with open(IP_FORWARD, "r+") as setting:
        if setting.read().strip() != "1":
            setting.seek(0)
            setting.write("1")


def _tolerate(code: int, call: Any, *args: Any, **kwargs: Any) -> None:
    """Run a netlink ``call``, treating the errno ``code`` (EEXIST, ENODEV) as success."""
    from pyroute2 import NetlinkError

    try:
        call(*args, **kwargs)
    except NetlinkError as e:
        if e.code != code:
            raise NetworkError(f"netlink {args[0]} {kwargs}: {e}") from e


@contextmanager
def _netns_fd(path: str) -> Iterator[int]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise NetworkError(f"cannot open netns {path}: {e}") from e
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def _pod_iproute(netns: str) -> Iterator[Any]:
    from pyroute2 import IPRoute

    if not os.path.exists(netns):
        raise NetworkError(f"netns {netns} does not exist")
    # flags=0: never create the namespace (pyroute2's default would).
    with IPRoute(netns=netns, flags=0) as ipr:
        yield ipr


@contextmanager
def _nat_lock() -> Iterator[None]:
    """Serialises NAT changes within this network namespace, across threads and processes
    (two pods set up at once would otherwise both see the POSTROUTING jump missing and both
    add it): an exclusive flock on the namespace's own nsfs file, so nothing is left behind."""
    fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class NatRules:
    """Masquerade and hostPort DNAT of the node's pods, in the ``nat`` table; each change is a
    save, a decision and one restore, under ``_nat_lock``."""

    def __init__(self, iptables: Iptables) -> None:
        self.iptables = iptables

    def add(
        self,
        container_id: str,
        ifname: str,
        pod_ip: ipaddress.IPv4Address,
        pod_cidr: ipaddress.IPv4Network,
        cluster_cidr: ipaddress.IPv4Network | None,
        mappings: Sequence[PortMapping],
    ) -> None:
        """Ensure the node's masquerade chain and the pod's hostPorts; idempotent.

        The masquerade chain is rewritten whole each time: traffic leaving the cluster CIDR,
        and packets a pod sent to its own hostPort (marked in its hostPort chain), which
        without a new source would come back to the pod from itself and be dropped.
        """
        if cluster_cidr is None and not mappings:
            return
        with _nat_lock():
            saved = self._save()
            lines = [
                f":{MASQ_CHAIN} - [0:0]",
                f"-A {MASQ_CHAIN} -m mark --mark {HAIRPIN_MARK} -j MASQUERADE",
            ]
            if cluster_cidr is not None:
                lines.append(f"-A {MASQ_CHAIN} -s {pod_cidr} ! -d {cluster_cidr} -j MASQUERADE")
            if not _jumps(saved, "POSTROUTING", MASQ_CHAIN):
                lines.append(f"-I POSTROUTING -j {MASQ_CHAIN}")
            if mappings:
                chain = hostport_chain(container_id, ifname)
                lines.append(f":{chain} - [0:0]")
                lines.append(f"-A {chain} -s {pod_ip}/32 -j MARK --set-xmark {HAIRPIN_MARK}")
                lines += [_dnat(chain, pod_ip, m) for m in mappings]
                lines += [
                    f"-A {parent} -m addrtype --dst-type LOCAL -j {chain}"
                    for parent in ("PREROUTING", "OUTPUT")
                    if not _jumps(saved, parent, chain)
                ]
            self._restore(lines)

    def remove(self, container_id: str, ifname: str) -> None:
        """Remove the pod's hostPort chain and its jumps; idempotent."""
        chain = hostport_chain(container_id, ifname)
        with _nat_lock():
            saved = self._save()
            if f":{chain} " not in saved:
                return
            lines = [f":{chain} - [0:0]"]
            lines += [
                f"-D {parent} -m addrtype --dst-type LOCAL -j {chain}"
                for parent in ("PREROUTING", "OUTPUT")
                if _jumps(saved, parent, chain)
            ]
            lines.append(f"-X {chain}")
            self._restore(lines)

    def _save(self) -> str:
        try:
            return self.iptables.save("nat")
        except IptablesError as e:
            raise NetworkError(str(e)) from e

    def _restore(self, lines: list[str]) -> None:
        try:
            self.iptables.restore("nat", lines)
        except IptablesError as e:
            raise NetworkError(f"{e}\n" + "\n".join(e.context())) from e


def _jumps(saved: str, parent: str, chain: str) -> bool:
    return any(
        line.startswith(f"-A {parent} ") and line.endswith(f"-j {chain}")
        for line in saved.splitlines()
    )


def _dnat(chain: str, pod_ip: ipaddress.IPv4Address, mapping: PortMapping) -> str:
    protocol = mapping.protocol.lower()
    destination = f"-d {mapping.host_ip} " if mapping.host_ip else ""
    return (
        f"-A {chain} {destination}-p {protocol} -m {protocol} --dport {mapping.host_port} "
        f"-j DNAT --to-destination {pod_ip}:{mapping.container_port}"
    )
