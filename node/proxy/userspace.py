"""The userspace-mode kube-proxy: the seed's original design, a real proxy in our process.

For every service port the proxier opens a listener of its own on a free local port (an asyncio
TCP server relaying bytes both ways, half-close honoured, or a UDP relay with one association
per client and an idle timeout) and writes iptables ``REDIRECT`` rules that send the service's
addresses to that port.  The chains are upstream's userspace ones, in ``nat``:

``KUBE-PORTALS-CONTAINER`` (from PREROUTING: traffic from pods and other hosts)
    cluster IP, external IPs and load-balancer IPs with their port → REDIRECT to the listener.
``KUBE-PORTALS-HOST`` (from OUTPUT: traffic of the node itself)
    the same destinations; REDIRECT sends local traffic to 127.0.0.1, where the listener (bound
    to 0.0.0.0) also answers.
``KUBE-NODEPORT-CONTAINER`` / ``KUBE-NODEPORT-HOST`` (from PREROUTING / OUTPUT, only for
    local destinations, after every other rule)
    the node port on every local address (or on the addresses inside ``--nodeport-addresses``)
    → REDIRECT to the same listener.

When the listener is bound to one address instead of 0.0.0.0, both portals DNAT to that address
instead (upstream's rule: REDIRECT could not reach it).  A sync writes the four chains whole
in one ``iptables-restore --noflush`` transaction (declaring a chain flushes it, so rules of
removed services vanish), skipped by a partial sync when they would not change (an endpoint
change alone only updates the round robin); full syncs (at start, after a failure, every
``sync_period``) also save ``nat`` and insert the jumps from the built-in chains that are
missing.

Choosing an endpoint is upstream's round robin (pkg/proxy/userspace/roundrobin.go): the usable
endpoints of :func:`node.proxy.model.usable` (ready ones, terminating ones only when nothing
else is left) in turn; with ClientIP session affinity a client keeps its endpoint while it
comes back within the timeout.  A TCP connection to an endpoint that refuses or does not answer
is retried on the next endpoint (with upstream's growing dial timeouts, each endpoint at most
once), and the affinity of that client is reset; likewise the first datagrams of a UDP
association whose endpoint answers with ICMP port unreachable are resent to the next one.  A
service port without endpoints still has a listener: it accepts and resets the connection at
once (a UDP datagram is dropped), as close as a userspace proxy gets to iptables mode's REJECT.

Differences from iptables mode, inherent in the design: endpoints see the node's address as the
source, never the client's; the traffic policies (Local) are not applied, every usable endpoint
is used; there is no REJECT for an unreachable service beyond the connection reset.

The informer wiring, the change tracking, the sync loop and its rate limits are the shared
:class:`~node.proxy.base.Proxier`'s; this mode implements only what a sync programs
(:meth:`UserspaceProxier.apply`: listeners and the REDIRECT chains) and :meth:`close`.

UDP replies must leave from the address the datagram was sent to (after the REDIRECT, that is
127.0.0.1 for the node's own traffic) or conntrack cannot undo the REDIRECT, so the UDP front
socket reads the destination with ``IP_PKTINFO`` and replies through ``sendmsg`` from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from kube.clock import Clock
from node.iptables import Iptables, IptablesError
from node.proxy.base import Applied, Proxier, local_addresses
from node.proxy.health import ProxyMetrics
from node.proxy.model import Changes, EndpointInfo, ServicePortInfo, ServicePortName, usable

log = logging.getLogger(__name__)

PORTALS_CONTAINER = "KUBE-PORTALS-CONTAINER"
PORTALS_HOST = "KUBE-PORTALS-HOST"
NODEPORT_CONTAINER = "KUBE-NODEPORT-CONTAINER"
NODEPORT_HOST = "KUBE-NODEPORT-HOST"
CHAINS = (PORTALS_CONTAINER, PORTALS_HOST, NODEPORT_CONTAINER, NODEPORT_HOST)
"""The nat chains of userspace mode, all written whole at every sync."""

PORTALS_COMMENT = "handle ClusterIPs; NOTE: this must be before the NodePort rules"
NODEPORTS_COMMENT = "handle service NodePorts; NOTE: this must be the last rule in the chain"


@dataclass(frozen=True)
class UserspaceJump:
    """A jump from a built-in nat chain; portals are inserted first, node ports appended."""

    parent: str
    chain: str
    comment: str
    match: str = ""
    first: bool = True

    def spec(self) -> str:
        match = f" {self.match}" if self.match else ""
        return f'-m comment --comment "{self.comment}"{match} -j {self.chain}'


JUMPS = (
    UserspaceJump("PREROUTING", PORTALS_CONTAINER, PORTALS_COMMENT),
    UserspaceJump("OUTPUT", PORTALS_HOST, PORTALS_COMMENT),
    UserspaceJump(
        "PREROUTING", NODEPORT_CONTAINER, NODEPORTS_COMMENT, "-m addrtype --dst-type LOCAL", False
    ),
    UserspaceJump(
        "OUTPUT", NODEPORT_HOST, NODEPORTS_COMMENT, "-m addrtype --dst-type LOCAL", False
    ),
)

DIAL_TIMEOUTS = (0.25, 0.5, 1.0, 2.0)
"""Upstream's EndpointDialTimeouts: attempt n waits DIAL_TIMEOUTS[n] (the last one after)."""
DEFAULT_UDP_IDLE_TIMEOUT = 0.25
"""Upstream's ``--udp-timeout`` default."""
BUFFER = 65536
UNANSWERED_KEPT = 16
SUPPORTED_PROTOCOLS = ("tcp", "udp")
IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)
_PKTINFO = struct.Struct("@i4s4s")
"""struct in_pktinfo: interface index, local (spec_dst) address, header destination."""


# Rules.


@dataclass(frozen=True)
class Portal:
    """A service port as the rules see it: where it is reached and the listener's port."""

    service: ServicePortInfo
    proxy_port: int


def render_rules(
    portals: Iterable[Portal], *, listen_ip: str = "0.0.0.0", node_ips: Sequence[str] | None = None
) -> list[str]:
    """The restore lines (nat) that declare the four chains and fill them, sorted by name.

    ``node_ips`` None: node ports on every local address (the jumps match ``--dst-type
    LOCAL``); otherwise one rule per address.
    """
    lines = [f":{chain} - [0:0]" for chain in CHAINS]
    rules: dict[str, list[str]] = {chain: [] for chain in CHAINS}
    unspecified = ipaddress.IPv4Address(listen_ip).is_unspecified
    for portal in sorted(portals, key=lambda p: p.service.name):
        port = portal.service
        name, protocol = str(port.name), port.protocol
        if unspecified:
            target = f"-j REDIRECT --to-ports {portal.proxy_port}"
        else:
            target = f"-j DNAT --to-destination {listen_ip}:{portal.proxy_port}"
        head = f'-m comment --comment "{name}" -m {protocol} -p {protocol}'
        for ip in (port.cluster_ip, *port.external_ips, *port.load_balancer_ips):
            for chain in (PORTALS_CONTAINER, PORTALS_HOST):
                rules[chain].append(f"-A {chain} {head} -d {ip}/32 --dport {port.port} {target}")
        if port.node_port:
            destinations = [""] if node_ips is None else [f" -d {ip}/32" for ip in node_ips]
            for chain in (NODEPORT_CONTAINER, NODEPORT_HOST):
                rules[chain] += [
                    f"-A {chain} {head}{dest} --dport {port.node_port} {target}"
                    for dest in destinations
                ]
    for chain in CHAINS:
        lines += rules[chain]
    return lines


def _has_jump(saved_lines: Sequence[str], jump: UserspaceJump) -> bool:
    return any(
        line.startswith(f"-A {jump.parent} ") and line.endswith(f"-j {jump.chain}")
        for line in saved_lines
    )


def missing_jumps(saved: str) -> list[str]:
    """The jumps ``saved`` (``iptables-save -t nat``) lacks: portals inserted first in their
    built-in chain, node ports appended last."""
    present = saved.splitlines()
    missing = [jump for jump in JUMPS if not _has_jump(present, jump)]
    inserted = [f"-I {j.parent} {j.spec()}" for j in reversed(missing) if j.first]
    appended = [f"-A {j.parent} {j.spec()}" for j in missing if not j.first]
    return inserted + appended


def cleanup_lines(saved: str) -> list[str]:
    """Restore lines that delete every jump and chain of userspace mode found in ``saved``."""
    present = saved.splitlines()
    declared = {line[1:].split(" ", 1)[0] for line in present if line.startswith(":")}
    ours = [chain for chain in CHAINS if chain in declared]
    lines = [f":{chain} - [0:0]" for chain in ours]
    lines += [f"-D {j.parent} {j.spec()}" for j in JUMPS if _has_jump(present, j)]
    return lines + [f"-X {chain}" for chain in ours]


# Choosing endpoints.


@dataclass
class _Affinity:
    address: str
    last_used: float


class RoundRobin:
    """Upstream's round-robin load balancer of one service port, with ClientIP affinity."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.endpoints: tuple[EndpointInfo, ...] = ()
        self.affinity_seconds = 0
        self._index = 0
        self._affinity: dict[str, _Affinity] = {}

    def update(self, endpoints: Iterable[EndpointInfo], affinity_seconds: int) -> None:
        """Use the usable ones of ``endpoints``; affinities to removed endpoints are dropped."""
        self.endpoints = tuple(usable(endpoints))
        self.affinity_seconds = affinity_seconds
        addresses = {e.address for e in self.endpoints}
        if not affinity_seconds:
            self._affinity.clear()
        for client in [c for c, a in self._affinity.items() if a.address not in addresses]:
            del self._affinity[client]

    def next(
        self, client_ip: str, *, reset_affinity: bool = False, exclude: Iterable[str] = ()
    ) -> EndpointInfo | None:
        """The endpoint for a new connection from ``client_ip``; None when there is none.

        ``reset_affinity`` ignores (and replaces) the client's affinity, as after a failed
        connection; endpoints whose address is in ``exclude`` are skipped.
        """
        skipped = set(exclude)
        candidates = [e for e in self.endpoints if e.address not in skipped]
        if not candidates:
            return None
        now = self.clock.monotonic()
        if self.affinity_seconds and not reset_affinity:
            known = self._affinity.get(client_ip)
            if known is not None and now - known.last_used < self.affinity_seconds:
                for endpoint in candidates:
                    if endpoint.address == known.address:
                        known.last_used = now
                        return endpoint
        chosen = None
        for _ in range(len(self.endpoints)):
            endpoint = self.endpoints[self._index % len(self.endpoints)]
            self._index = (self._index + 1) % len(self.endpoints)
            if endpoint.address not in skipped:
                chosen = endpoint
                break
        if chosen is None:  # pragma: no cover (candidates is not empty)
            return None
        if self.affinity_seconds:
            self._affinity[client_ip] = _Affinity(chosen.address, now)
        return chosen

    def forget(self, client_ip: str) -> None:
        self._affinity.pop(client_ip, None)


# Relays.


def _reset(transport: asyncio.Transport) -> None:
    """Close with an RST (SO_LINGER 0), so the client learns at once."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _Side(asyncio.Protocol):
    """One socket of a relayed connection: what it receives is written to the other side.

    Flow control is the transports': when the other side's write buffer fills, this side stops
    reading.  EOF is passed on as a half-close; the connection ends when both sides sent EOF,
    or at once (aborting the other side) when one is lost first.
    """

    def __init__(self, connection: _Connection) -> None:
        self.connection = connection
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self.eof = False
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.write(data)

    def eof_received(self) -> bool:
        self.eof = True
        peer = self.peer.transport if self.peer is not None else None
        if peer is not None and not peer.is_closing() and peer.can_write_eof():
            peer.write_eof()
        self.connection.check()
        return True  # keep the transport open: the other direction may still be running

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.connection.check()


class _ClientSide(_Side):
    """The accepted socket: reads nothing until an endpoint accepted the connection."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        assert self.transport is not None
        self.transport.pause_reading()
        self.connection.start()


class _Connection:
    """A client connection and, once an endpoint accepted it, the connection to that endpoint."""

    def __init__(self, proxy: TcpProxy) -> None:
        self.proxy = proxy
        self.client: _Side = _ClientSide(self)
        self.upstream: _Side | None = None
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.proxy.connections.add(self)
        self.task = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        client = self.client.transport
        assert client is not None
        peer = client.get_extra_info("peername")
        upstream = await self.proxy.connect(str(peer[0]) if peer else "", lambda: _Side(self))
        if upstream is None:
            _reset(client)
        elif self.client.lost:
            if upstream.transport is not None:
                upstream.transport.abort()
        else:
            self.upstream = upstream
            self.client.peer, upstream.peer = upstream, self.client
            client.resume_reading()

    def check(self) -> None:
        """End the relay when both directions finished, or abort it when a side was lost."""
        sides = [side for side in (self.client, self.upstream) if side is not None]
        if any(side.lost for side in sides):
            self.abort()
            if all(side.lost for side in sides):
                self.proxy.connections.discard(self)
        elif self.upstream is not None and all(side.eof for side in sides):
            for side in sides:
                if side.transport is not None:
                    side.transport.close()

    def abort(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
        for side in (self.client, self.upstream):
            if side is not None and side.transport is not None and not side.lost:
                side.transport.abort()


class TcpProxy:
    """The listener of one TCP service port."""

    def __init__(self, name: ServicePortName, balancer: RoundRobin, listen_ip: str) -> None:
        self.name = name
        self.balancer = balancer
        self.listen_ip = listen_ip
        self.port = 0
        self.connections: set[_Connection] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self).client, self.listen_ip, 0, reuse_address=True, backlog=1024
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def connect(self, client_ip: str, factory: Callable[[], _Side]) -> _Side | None:
        """A connection to an endpoint for ``client_ip``, trying the next one on failure."""
        loop = asyncio.get_running_loop()
        tried: list[str] = []
        reset = False
        while True:
            endpoint = self.balancer.next(client_ip, reset_affinity=reset, exclude=tried)
            if endpoint is None:
                if tried:
                    log.warning("%s: no endpoint accepted a connection (%s)", self.name, tried)
                return None
            timeout = DIAL_TIMEOUTS[min(len(tried), len(DIAL_TIMEOUTS) - 1)]
            tried.append(endpoint.address)
            try:
                async with asyncio.timeout(timeout):
                    _, side = await loop.create_connection(factory, endpoint.ip, endpoint.port)
                    return side
            except (OSError, TimeoutError) as e:
                log.info("%s: endpoint %s failed (%s), trying the next", self.name, endpoint, e)
                self.balancer.forget(client_ip)
                reset = True

    @property
    def busy(self) -> bool:
        """Whether connections are still being relayed."""
        return bool(self.connections)

    async def close(self, *, connections: bool = True) -> None:
        """Stop listening; with ``connections``, also abort the relayed connections."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if connections:
            aborted = list(self.connections)
            for connection in aborted:
                connection.abort()
            await asyncio.gather(
                *(c.task for c in aborted if c.task is not None), return_exceptions=True
            )
            await asyncio.sleep(0)  # the aborted transports call connection_lost soon
            self.connections.clear()


@dataclass
class _Association:
    """One UDP client's flow: a connected socket to its endpoint."""

    client: tuple[str, int]
    local_ip: str
    endpoint: EndpointInfo
    transport: asyncio.DatagramTransport | None = None
    last_active: float = 0.0
    pending: list[bytes] = field(default_factory=list)
    """Datagrams received while the socket to the endpoint was being opened."""
    unanswered: list[bytes] = field(default_factory=list)
    """Datagrams sent before the endpoint's first reply: resent to the next endpoint when
    this one refuses (ICMP port unreachable)."""
    answered: bool = False
    tried: list[str] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class _Backend(asyncio.DatagramProtocol):
    def __init__(self, proxy: UdpProxy, association: _Association) -> None:
        self.proxy, self.association = proxy, association

    def datagram_received(self, data: bytes, addr: tuple[str | object, int]) -> None:
        self.proxy.reply(self.association, data)

    def error_received(self, exc: Exception) -> None:
        self.proxy.endpoint_failed(self.association, exc)


class UdpProxy:
    """The relay of one UDP service port: one association per client address, closed after
    ``idle_timeout`` seconds without traffic either way."""

    def __init__(
        self, name: ServicePortName, balancer: RoundRobin, listen_ip: str, idle_timeout: float
    ) -> None:
        self.name = name
        self.balancer = balancer
        self.listen_ip = listen_ip
        self.idle_timeout = idle_timeout
        self.port = 0
        self.associations: dict[tuple[str, int], _Association] = {}
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opening: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
            sock.bind((self.listen_ip, 0))
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.port = int(sock.getsockname()[1])
        self._loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        for _ in range(64):
            try:
                data, ancillary, _flags, client = sock.recvmsg(BUFFER, socket.CMSG_SPACE(12))
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log.debug("%s: recvmsg: %s", self.name, e)
                return
            local_ip = self.listen_ip
            for level, kind, value in ancillary:
                if level == socket.IPPROTO_IP and kind == IP_PKTINFO:
                    local_ip = socket.inet_ntoa(_PKTINFO.unpack(value[: _PKTINFO.size])[2])
            self._received(data, (str(client[0]), int(client[1])), local_ip)

    def _received(self, data: bytes, client: tuple[str, int], local_ip: str) -> None:
        association = self.associations.get(client)
        if association is None:
            endpoint = self.balancer.next(client[0])
            if endpoint is None:
                return  # no endpoints: dropped
            association = _Association(client, local_ip, endpoint)
            self.associations[client] = association
            self._start_open(association)
        association.local_ip = local_ip
        self._touch(association)
        if not association.answered and len(association.unanswered) < UNANSWERED_KEPT:
            association.unanswered.append(data)
        if association.transport is None:
            association.pending.append(data)
        else:
            association.transport.sendto(data)

    def _start_open(self, association: _Association) -> None:
        assert self._loop is not None
        task = self._loop.create_task(self._open(association))
        self._opening.add(task)
        task.add_done_callback(self._opening.discard)

    def endpoint_failed(self, association: _Association, error: Exception) -> None:
        """The endpoint refused (ICMP): before any reply, resend to the next endpoint, as a
        TCP connection would be retried; after one, drop the association (the client's next
        datagram starts a new one)."""
        if self.associations.get(association.client) is not association:
            return
        log.info("%s: endpoint %s: %s", self.name, association.endpoint, error)
        self.balancer.forget(association.client[0])
        if association.answered:
            self.drop(association)
            return
        association.tried.append(association.endpoint.address)
        endpoint = self.balancer.next(
            association.client[0], reset_affinity=True, exclude=association.tried
        )
        if endpoint is None:
            self.drop(association)
            return
        if association.transport is not None:
            association.transport.close()
            association.transport = None
        association.endpoint = endpoint
        association.pending = list(association.unanswered)
        self._start_open(association)

    async def _open(self, association: _Association) -> None:
        assert self._loop is not None
        try:
            transport, _ = await self._loop.create_datagram_endpoint(
                lambda: _Backend(self, association),
                remote_addr=(association.endpoint.ip, association.endpoint.port),
            )
        except OSError as e:
            log.info("%s: endpoint %s: %s", self.name, association.endpoint, e)
            self.drop(association)
            return
        if self.associations.get(association.client) is not association:
            transport.close()
            return
        association.transport = transport
        for data in association.pending:
            transport.sendto(data)
        association.pending = []
        self._touch(association)

    def _touch(self, association: _Association) -> None:
        assert self._loop is not None
        association.last_active = self._loop.time()
        if association.timer is None:
            association.timer = self._loop.call_later(
                self.idle_timeout, self._maybe_expire, association
            )

    def _maybe_expire(self, association: _Association) -> None:
        assert self._loop is not None
        association.timer = None
        idle = self._loop.time() - association.last_active
        if idle >= self.idle_timeout:
            self.drop(association)
        else:
            association.timer = self._loop.call_later(
                self.idle_timeout - idle, self._maybe_expire, association
            )

    def reply(self, association: _Association, data: bytes) -> None:
        """Send an endpoint's datagram to the client, from the address the client used."""
        if self._sock is None or self.associations.get(association.client) is not association:
            return
        association.answered = True
        association.unanswered.clear()
        self._touch(association)
        info = _PKTINFO.pack(0, socket.inet_aton(association.local_ip), bytes(4))
        try:
            self._sock.sendmsg(
                [data], [(socket.IPPROTO_IP, IP_PKTINFO, info)], 0, association.client
            )
        except OSError as e:  # a full buffer drops the datagram, as the network would
            log.debug("%s: reply to %s: %s", self.name, association.client, e)

    def drop(self, association: _Association) -> None:
        if self.associations.get(association.client) is association:
            del self.associations[association.client]
        if association.timer is not None:
            association.timer.cancel()
            association.timer = None
        if association.transport is not None:
            association.transport.close()
            association.transport = None

    busy = False
    """UDP associations end with the relay."""

    async def close(self, *, connections: bool = True) -> None:
        """Stop listening and drop every association (UDP flows do not outlive the relay)."""
        del connections
        for task in list(self._opening):
            task.cancel()
        await asyncio.gather(*self._opening, return_exceptions=True)
        for association in list(self.associations.values()):
            self.drop(association)
        if self._sock is not None:
            if self._loop is not None:
                self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        await asyncio.sleep(0)


Proxy = TcpProxy | UdpProxy


# The proxier.


class UserspaceProxier(Proxier):
    """Programs Services as listeners of this process and REDIRECT rules; see the module
    docstring."""

    def __init__(
        self,
        iptables: Iptables,
        node_name: str,
        clock: Clock,
        *,
        listen_ip: str = "0.0.0.0",
        nodeport_cidrs: Sequence[str] | None = None,
        sync_period: float = 30.0,
        min_sync_period: float = 1.0,
        udp_idle_timeout: float = DEFAULT_UDP_IDLE_TIMEOUT,
        addresses: Callable[[], list[str]] = local_addresses,
        metrics: ProxyMetrics | None = None,
    ) -> None:
        super().__init__(
            node_name,
            clock,
            nodeport_cidrs=nodeport_cidrs,
            sync_period=sync_period,
            min_sync_period=min_sync_period,
            addresses=addresses,
            metrics=metrics,
        )
        self.iptables = iptables
        self.listen_ip = str(ipaddress.IPv4Address(listen_ip))
        self.udp_idle_timeout = udp_idle_timeout
        self.proxies: dict[ServicePortName, Proxy] = {}
        self.balancers: dict[ServicePortName, RoundRobin] = {}
        self._node_ip_list: tuple[str, ...] | None = None
        self._written: list[str] | None = None
        """The chains' lines of the last successful restore (a partial sync that would write
        the same lines, e.g. after an endpoint change, skips the restore)."""
        self._retired: list[Proxy] = []
        """Listeners of removed service ports whose relayed connections may still run."""

    def ensure_sysctls(self) -> None:
        """Nothing to set: REDIRECT to a local listener needs neither route_localnet nor
        conntrack tuning."""

    async def apply(self, changes: Changes, full: bool) -> Applied | None:
        """Open and close listeners for what changed, then rewrite the four chains (a full
        sync also re-reads node addresses and ensures the jumps).  Not complete when a
        listener could not be opened: the next (full) sync retries it."""
        wanted = set(changes.changed)
        if full:  # also retry listeners that could not be opened before
            wanted |= set(self.tracker.ports) - set(self.proxies)
        opened_all = True
        for name in sorted(wanted):
            opened_all &= await self._update(name)
        if not full and not changes.changed:
            return None
        node_ips = await self.node_ips() if full else self._node_ip_list
        lines = render_rules(self.portals(), listen_ip=self.listen_ip, node_ips=node_ips)
        chains = list(lines)
        try:
            if full:
                saved = await asyncio.to_thread(self.iptables.save, "nat")
                lines += missing_jumps(saved)
            if full or lines != self._written:
                await asyncio.to_thread(self.iptables.restore, "nat", lines)
        except IptablesError:
            self._written = None
            raise
        self._written = chains
        self._node_ip_list = node_ips
        return Applied(
            rules={"nat": sum(line.startswith("-A ") for line in lines)},
            chains={"nat": len(CHAINS)},
            complete=opened_all,
        )

    def portals(self) -> list[Portal]:
        """The service ports that have a listener, with its port."""
        return [
            Portal(self.tracker.ports[name], proxy.port)
            for name, proxy in self.proxies.items()
            if name in self.tracker.ports
        ]

    async def _update(self, name: ServicePortName) -> bool:
        """Bring the listener of ``name`` in line with the tracker; False if it could not be
        opened (retried at the next full sync)."""
        port = self.tracker.ports.get(name)
        if port is None:
            old = self.proxies.pop(name, None)
            self.balancers.pop(name, None)
            if old is not None:
                await old.close(connections=False)
                self._retired = [p for p in self._retired if p.busy]
                self._retired.append(old)
            return True
        balancer = self.balancers.setdefault(name, RoundRobin(self.clock))
        balancer.update(self.tracker.endpoints.get(name, ()), port.affinity_seconds)
        if name in self.proxies:
            return True
        if port.protocol not in SUPPORTED_PROTOCOLS:
            log.warning("%s: protocol %s is not proxied in userspace mode", name, port.protocol)
            return True
        proxy: Proxy
        if port.protocol == "tcp":
            proxy = TcpProxy(name, balancer, self.listen_ip)
        else:
            proxy = UdpProxy(name, balancer, self.listen_ip, self.udp_idle_timeout)
        try:
            await proxy.start()
        except OSError as e:
            log.error("%s: cannot open a listener: %s", name, e)
            return False
        self.proxies[name] = proxy
        log.info("%s: %s proxy on %s:%d", name, port.protocol, self.listen_ip, proxy.port)
        return True

    async def close(self) -> None:
        """Close every listener and abort the connections they relay (rules stay, as
        upstream leaves them: a restarted proxier rewrites them at its first sync)."""
        proxies, self.proxies = self.proxies, {}
        retired, self._retired = self._retired, []
        for proxy in [*proxies.values(), *retired]:
            await proxy.close(connections=True)

    async def remove_rules(self) -> None:
        """Delete the jumps and chains of userspace mode from nat (``--cleanup``)."""
        saved = await asyncio.to_thread(self.iptables.save, "nat")
        lines = cleanup_lines(saved)
        if lines:
            await asyncio.to_thread(self.iptables.restore, "nat", lines)
