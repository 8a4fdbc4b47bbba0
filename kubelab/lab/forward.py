"""Reaching into network namespaces from the host without putting an address on the host.

The lab's processes (API server, kubelets, containerd, pods) live in network namespaces the
lab creates, and the machine's rule is that lab addresses never appear on the host's own
interfaces.  Yet kubectl, tests and benchmarks run on the host, so they talk through
sockets made inside the namespaces (``node.netns.socket_in_netns``):

- ``NetnsForwarder`` listens on the host's loopback and relays each connection to an address
  inside a namespace (kubectl → the lab's API server), or the other way round with
  ``listen_netns`` (a node's loopback → the host's API server).

The same forwarder is the HA lab's load balancer (one piece of code relays bytes): given
``Backends`` (several targets and a ``HealthCheck``) it sends each new connection to the next
healthy target in turn (round robin; with none healthy, to the others in turn), asks every
target's health URL each ``interval`` (HTTPS verified with the lab CA; ``fall`` failures in
a row take a target out, one success brings it back), takes a target out at once when
connecting to it fails, and closes the connections relayed to a target that was taken out,
so their clients reconnect and land on a healthy one.  ``Backends`` holds that state and
decides; probing and time stay outside it, so tests drive it with a fake probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from node.netns import socket_in_netns

_RELAY_CHUNK = 65536
CHECK_INTERVAL: Final = 1.0
CHECK_TIMEOUT: Final = 2.0
FALL: Final = 2
"""Failed health checks in a row that take a target out (one slow answer does not)."""

Address = tuple[str, int]
Probe = Callable[[Address], Awaitable[bool]]


@dataclass(frozen=True)
class HealthCheck:
    """``GET path`` over HTTPS on each target, its certificate verified with ``ca`` (the
    target's address must be among its SANs); 200 is healthy."""

    path: str
    ca: Path
    interval: float = CHECK_INTERVAL
    timeout: float = CHECK_TIMEOUT
    fall: int = FALL


class Backends:
    """The targets a forwarder chooses from and which are healthy (see the module
    docstring).  Without a ``HealthCheck`` every target counts as healthy; with one, a target
    is out until its first successful check."""

    def __init__(self, targets: Sequence[Address], check: HealthCheck | None = None) -> None:
        if not targets:
            raise ValueError("a forwarder needs at least one target")
        self.targets = tuple(targets)
        self.check = check
        self._healthy = dict.fromkeys(self.targets, check is None)
        self._failures = dict.fromkeys(self.targets, 0)
        self._next = 0

    def healthy(self) -> tuple[Address, ...]:
        return tuple(t for t in self.targets if self._healthy[t])

    def pick(self, excluding: Sequence[Address] = ()) -> Address | None:
        """The next healthy target in turn; when no healthy one is left, the next of the
        others (Envoy's "panic" routing: an API server that answers 503 with Retry-After
        tells a client more than a closed connection does); None once all were tried."""
        for wanted in (True, False):
            for _ in self.targets:
                target = self.targets[self._next % len(self.targets)]
                self._next += 1
                if self._healthy[target] is wanted and target not in excluding:
                    return target
        return None

    def observe(self, target: Address, ok: bool) -> bool:
        """Record one health check's answer; True if the target went in or out."""
        if ok:
            self._failures[target] = 0
            changed = not self._healthy[target]
            self._healthy[target] = True
            return changed
        self._failures[target] += 1
        fall = self.check.fall if self.check is not None else 1
        if self._healthy[target] and self._failures[target] >= fall and self.check is not None:
            self._healthy[target] = False
            return True
        return False

    def refused(self, target: Address) -> bool:
        """Connecting to ``target`` failed: out at once (until a check brings it back);
        True if it was in.  Without health checks nothing could bring it back: kept."""
        if self.check is None or not self._healthy[target]:
            return False
        self._failures[target] = self.check.fall
        self._healthy[target] = False
        return True

    async def check_all(self, probe: Probe) -> list[Address]:
        """Probe every target at once; the targets that went in or out."""
        answers = await asyncio.gather(*(probe(t) for t in self.targets))
        return [t for t, ok in zip(self.targets, answers, strict=True) if self.observe(t, ok)]

    def describe(self) -> list[dict[str, object]]:
        """Each target and whether it is in, for a state file."""
        return [{"address": f"{h}:{p}", "healthy": self._healthy[(h, p)]} for h, p in self.targets]


def https_probe(check: HealthCheck, netns: Path | None = None) -> Probe:
    """A probe asking ``check.path`` of a target over HTTPS (from inside ``netns``)."""
    context = ssl.create_default_context(cafile=str(check.ca))

    async def probe(target: Address) -> bool:
        try:
            async with asyncio.timeout(check.timeout):
                reader, writer = await _open(target, netns, context)
                try:
                    host = target[0]
                    writer.write(
                        f"GET {check.path} HTTP/1.1\r\nHost: {host}\r\n"
                        "Connection: close\r\n\r\n".encode()
                    )
                    status = await reader.readline()
                finally:
                    await _close(writer)
        except (OSError, ssl.SSLError, TimeoutError):
            return False
        return status.split()[1:2] == [b"200"]

    return probe


async def _open(
    target: Address, netns: Path | None, context: ssl.SSLContext | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to ``target`` from inside ``netns`` (None: here), TLS with ``context``."""
    hostname = target[0] if context is not None else None
    if netns is None:
        return await asyncio.open_connection(*target, ssl=context, server_hostname=hostname)
    sock = await asyncio.to_thread(socket_in_netns, netns, connect=target)
    return await asyncio.open_connection(sock=sock, ssl=context, server_hostname=hostname)


class NetnsForwarder:
    """Relays TCP connections between two network namespaces; see the module docstring.

    ``target`` is one address, or ``Backends`` to balance over.  ``connect_netns`` /
    ``listen_netns`` name the namespace of each side (``None``: the process's own).
    ``start()`` returns the port listened on (``listen_port`` 0 picks one); with a
    ``HealthCheck`` it also starts checking (with ``probe``, by default ``https_probe``), and
    ``on_change`` hears each change of the healthy set and, at most once per check, that
    relays opened or closed (``describe`` says which clients each target serves).
    """

    def __init__(
        self,
        target: Address | Backends,
        *,
        connect_netns: Path | None = None,
        listen: Address = ("127.0.0.1", 0),
        listen_netns: Path | None = None,
        on_change: Callable[[NetnsForwarder], None] = lambda forwarder: None,
        probe: Probe | None = None,
    ) -> None:
        self.backends = target if isinstance(target, Backends) else Backends([target])
        self.connect_netns = connect_netns
        self.listen = listen
        self.listen_netns = listen_netns
        self.on_change = on_change
        self.probe = probe
        self._server: asyncio.Server | None = None
        self._checker: asyncio.Task[None] | None = None
        self._relays: set[asyncio.Task[None]] = set()
        self._open: dict[asyncio.StreamWriter, tuple[Address, asyncio.StreamWriter]] = {}
        """Each relayed client's writer: its target and the writer towards it."""
        self._relays_moved = False
        """Relays opened or closed since ``on_change`` last heard of them."""

    async def start(self) -> int:
        if self.listen_netns is not None:
            sock = await asyncio.to_thread(socket_in_netns, self.listen_netns, bind=self.listen)
            self._server = await asyncio.start_server(self._accepted, sock=sock)
        else:
            self._server = await asyncio.start_server(self._accepted, *self.listen)
        check = self.backends.check
        if check is not None:
            probe = self.probe or https_probe(check, self.connect_netns)
            self._checker = asyncio.create_task(self._check_forever(check, probe))
        self.on_change(self)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._checker is not None:
            self._checker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._checker
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._relays):
            task.cancel()
        await asyncio.gather(*self._relays, return_exceptions=True)

    async def _check_forever(self, check: HealthCheck, probe: Probe) -> None:
        while True:
            changed = await self.backends.check_all(probe)
            moved, self._relays_moved = self._relays_moved, False
            if changed:
                self._went(changed)
            elif moved:
                self.on_change(self)
            await asyncio.sleep(check.interval)

    def _went(self, changed: Sequence[Address]) -> None:
        """Some targets went in or out: cut (abort) the connections relayed to those now out;
        their relays then end as if the peers had closed."""
        out = set(changed) - set(self.backends.healthy())
        for client, (target, upstream) in list(self._open.items()):
            if target in out:
                client.transport.abort()
                upstream.transport.abort()
        self.on_change(self)

    def describe(self) -> list[dict[str, object]]:
        """Each target, whether it is in, and the clients (``ip:port``) relayed to it now."""
        clients: dict[str, list[str]] = {}
        for client, ((host, port), _) in self._open.items():
            peer = client.get_extra_info("peername")
            if peer is not None:
                clients.setdefault(f"{host}:{port}", []).append(f"{peer[0]}:{peer[1]}")
        return [
            {**target, "clients": sorted(clients.get(str(target["address"]), []))}
            for target in self.backends.describe()
        ]

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            connected = await self._connect()
            if connected is None:
                return
            target, (up_reader, up_writer) = connected
            self._open[writer] = (target, up_writer)
            self._relays_moved = True
            try:
                await asyncio.gather(
                    _pump(reader, up_writer), _pump(up_reader, writer), return_exceptions=True
                )
            finally:
                self._open.pop(writer, None)
                self._relays_moved = True
                await _close(up_writer)
        finally:
            await _close(writer)
            self._relays.discard(task)

    async def _connect(
        self,
    ) -> tuple[Address, tuple[asyncio.StreamReader, asyncio.StreamWriter]] | None:
        """A connection to a healthy target (the next in turn, then the others if it refuses);
        None when none answers."""
        tried: list[Address] = []
        while (target := self.backends.pick(excluding=tried)) is not None:
            tried.append(target)
            try:
                upstream = await _open(target, self.connect_netns)
            except OSError:
                if self.backends.refused(target):
                    self._went([target])
                continue
            return target, upstream
        return None


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
        await writer.wait_closed()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_RELAY_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()
