"""The two interfaces the doctor's checks read a node through, the real ones and fakes.

:class:`Host` is the node itself: files (sysctls are files under /proc/sys), commands in
``PATH``, the route the kernel picks for an address, the links and their MTUs, whether a unix
socket answers, an HTTP GET on the node (kube-proxy's ``/healthz``), the kernel's build
configuration, and the node's iptables and nftables through ``node.iptables`` and
``node.nftables``.  Safe repairs write through ``write`` (sysctls) and iptables restores;
:class:`SystemHost` refuses both outside a network namespace named under /run/netns (a lab
node's) unless the machine opted in as a node, as every rule writer of ``node`` does, so a
doctor run on the lab's host never changes the host.

:class:`Cluster` is what the checks ask of the API: the Nodes, this node's Lease, the
Services, and the API server's clock.  :class:`ApiCluster` asks a real API server with the
node's own credentials (everything here is readable by ``system:node:NAME``).

:class:`FakeHost` and :class:`FakeCluster` hold the same in memory for unit tests.
"""

from __future__ import annotations

import datetime
import gzip
import json
import os
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from kube.api.kinds.coordination_v1 import Lease
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.service import Service
from kube.client.errors import ApiError
from kube.client.rest import Client
from node.iptables import FakeIptables, Iptables, RestoreIptables, may_change_current_netns
from node.nftables import FakeNftables, Nftables, SubprocessNftables

NODE_LEASE_NAMESPACE = "kube-node-lease"


class HostError(Exception):
    """A read or write of the node failed; the message says what and why."""


class Route(NamedTuple):
    """The route the kernel picks for one address (``ip route get``)."""

    kind: str
    """``unicast``, ``local``, ``blackhole``, ``unreachable``, ``prohibit``..."""
    dev: str
    gateway: str | None


class Link(NamedTuple):
    name: str
    mtu: int
    master: str | None
    """The bridge this link is a port of."""


class Host(Protocol):
    def read(self, path: str) -> str | None:
        """The file's text, or None when it does not exist; read-only."""
        ...

    def write(self, path: str, text: str) -> None:
        """Write ``text`` to an existing file (a sysctl); raise HostError."""
        ...

    def listdir(self, path: str) -> list[str] | None:
        """The directory's entries, sorted, or None when it does not exist."""
        ...

    def which(self, name: str) -> str | None:
        """The path of the command ``name`` in PATH, or None."""
        ...

    def route(self, address: str) -> Route:
        """The route to ``address``; raise HostError when there is none."""
        ...

    def links(self) -> list[Link]: ...

    def socket_answers(self, path: str) -> str | None:
        """None when the unix socket at ``path`` accepts a connection, else why not."""
        ...

    def http_get(self, url: str) -> tuple[int, str]:
        """The status and body of GET ``url``; raise HostError when nothing answers."""
        ...

    def iptables(self, backend: str) -> Iptables:
        """The node's iptables through ``iptables-<backend>-save``/``-restore``."""
        ...

    def nftables(self, family: str, table: str) -> Nftables:
        """One nftables table of the node (kube-proxy's ``ip kube-proxy``)."""
        ...

    def kernel_config(self) -> str | None:
        """The running kernel's build configuration (/proc/config.gz, else
        /boot/config-RELEASE), or None when neither is there."""
        ...

    def now(self) -> datetime.datetime: ...


class Cluster(Protocol):
    async def nodes(self) -> list[Node]: ...

    async def lease(self, node: str) -> Lease | None:
        """The node's Lease in kube-node-lease, or None when there is none."""
        ...

    async def services(self) -> list[Service]: ...

    async def server_time(self) -> datetime.datetime: ...


def sysctl_path(name: str) -> str:
    """``net.ipv4.ip_forward`` -> ``/proc/sys/net/ipv4/ip_forward``."""
    return "/proc/sys/" + name.replace(".", "/")


class SystemHost:
    """:class:`Host` on this machine, in the current network namespace."""

    def read(self, path: str) -> str | None:
        try:
            return Path(path).read_text(errors="replace")
        except FileNotFoundError:
            return None
        except OSError as error:
            raise HostError(f"cannot read {path}: {error.strerror}") from None

    def write(self, path: str, text: str) -> None:
        if not may_change_current_netns():
            raise HostError(f"refusing to write {path}: not inside a node's network namespace")
        try:
            Path(path).write_text(text)
        except OSError as error:
            raise HostError(f"cannot write {path}: {error.strerror}") from None

    def listdir(self, path: str) -> list[str] | None:
        try:
            return sorted(p.name for p in Path(path).iterdir())
        except FileNotFoundError:
            return None
        except OSError as error:
            raise HostError(f"cannot list {path}: {error.strerror}") from None

    def which(self, name: str) -> str | None:
        return shutil.which(name)

    def route(self, address: str) -> Route:
        done = _ip("route", "get", address)
        if done.returncode != 0:
            raise HostError(done.stderr.strip() or f"ip route get {address} failed")
        found = json.loads(done.stdout)[0]
        return Route(found.get("type", "unicast"), found.get("dev", ""), found.get("gateway"))

    def links(self) -> list[Link]:
        done = _ip("link", "show")
        if done.returncode != 0:
            raise HostError(done.stderr.strip() or "ip link show failed")
        return [
            Link(link["ifname"], int(link.get("mtu", 0)), link.get("master"))
            for link in json.loads(done.stdout)
        ]

    def socket_answers(self, path: str) -> str | None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            try:
                sock.connect(path)
            except OSError as error:
                return error.strerror or str(error)
        return None

    def http_get(self, url: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, timeout=3) as answer:
                return int(answer.status), answer.read().decode(errors="replace")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as error:
            raise HostError(f"GET {url}: {getattr(error, 'reason', error)}") from None

    def iptables(self, backend: str) -> Iptables:
        return RestoreIptables(backend)

    def nftables(self, family: str, table: str) -> Nftables:
        return SubprocessNftables(family, table)

    def kernel_config(self) -> str | None:
        try:
            return gzip.decompress(Path("/proc/config.gz").read_bytes()).decode()
        except FileNotFoundError:
            return self.read(f"/boot/config-{os.uname().release}")
        except (OSError, EOFError, gzip.BadGzipFile) as error:
            raise HostError(f"cannot read /proc/config.gz: {error}") from None

    def now(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC)


def _ip(*argv: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["ip", "-j", *argv], capture_output=True, text=True, check=False, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HostError(f"ip {' '.join(argv)}: {error}") from None


@dataclass
class FakeHost:
    """:class:`Host` in memory: ``files`` by path (a directory is any path prefix of a file),
        ``commands`` found in PATH, ``routes`` by address (missing: no route), ``links``,
        ``sockets`` that answer, ``http`` answers by URL, one :class:`FakeIptables` per backend,
    one :class:`FakeNftables` (``ip kube-proxy``), the ``kernel`` configuration."""

    files: dict[str, str] = field(default_factory=dict)
    commands: set[str] = field(default_factory=set)
    routes: dict[str, Route] = field(default_factory=dict)
    link_list: list[Link] = field(default_factory=list)
    sockets: set[str] = field(default_factory=set)
    http: dict[str, tuple[int, str]] = field(default_factory=dict)
    tables: dict[str, FakeIptables] = field(
        default_factory=lambda: {b: FakeIptables(b) for b in ("nft", "legacy")}
    )
    nft: FakeNftables = field(default_factory=FakeNftables)
    kernel: str | None = None
    clock: datetime.datetime = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC)

    def read(self, path: str) -> str | None:
        return self.files.get(path)

    def write(self, path: str, text: str) -> None:
        if path not in self.files:
            raise HostError(f"cannot write {path}: No such file or directory")
        self.files[path] = text

    def listdir(self, path: str) -> list[str] | None:
        prefix = path.rstrip("/") + "/"
        names = {p[len(prefix) :].split("/")[0] for p in self.files if p.startswith(prefix)}
        return sorted(names) if names else None

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if name in self.commands else None

    def route(self, address: str) -> Route:
        if address not in self.routes:
            raise HostError("RTNETLINK answers: Network is unreachable")
        return self.routes[address]

    def links(self) -> list[Link]:
        return list(self.link_list)

    def socket_answers(self, path: str) -> str | None:
        return None if path in self.sockets else "No such file or directory"

    def http_get(self, url: str) -> tuple[int, str]:
        if url not in self.http:
            raise HostError(f"GET {url}: Connection refused")
        return self.http[url]

    def iptables(self, backend: str) -> Iptables:
        return self.tables[backend]

    def nftables(self, family: str, table: str) -> Nftables:
        if (family, table) != (self.nft.family, self.nft.table):
            raise HostError(f"the fake holds only {self.nft.family} {self.nft.table}")
        return self.nft

    def kernel_config(self) -> str | None:
        return self.kernel

    def now(self) -> datetime.datetime:
        return self.clock


class ApiCluster:
    """:class:`Cluster` through a client of the API server with the node's credentials, and
    another one for the Nodes: a kubelet may read only its own Node (upstream's Node
    authorizer with selectors), kube-proxy every Node, so ``nodes_client`` is kube-proxy's."""

    def __init__(self, client: Client, nodes_client: Client | None = None) -> None:
        self.client = client
        self.nodes_client = nodes_client or client

    async def nodes(self) -> list[Node]:
        return (await self.nodes_client.list(Node)).items

    async def lease(self, node: str) -> Lease | None:
        try:
            return await self.client.get(Lease, node, NODE_LEASE_NAMESPACE)
        except ApiError as error:
            if error.code == 404:
                return None
            raise

    async def services(self) -> list[Service]:
        return (await self.client.list(Service)).items

    async def server_time(self) -> datetime.datetime:
        return await self.client.server_date()


@dataclass
class FakeCluster:
    """:class:`Cluster` in memory."""

    node_list: list[Node] = field(default_factory=list)
    leases: dict[str, Lease] = field(default_factory=dict)
    service_list: list[Service] = field(default_factory=list)
    time: datetime.datetime = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC)

    async def nodes(self) -> list[Node]:
        return list(self.node_list)

    async def lease(self, node: str) -> Lease | None:
        return self.leases.get(node)

    async def services(self) -> list[Service]:
        return list(self.service_list)

    async def server_time(self) -> datetime.datetime:
        return self.time
