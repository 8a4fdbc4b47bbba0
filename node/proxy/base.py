"""What every kube-proxy mode shares: its inputs, its sync loop, its health and metrics.

Upstream's proxiers (iptables, ipvs, and the old userspace one) each implement the same
``Provider`` contract over the same machinery: informer handlers that only record which
Service changed, a change tracker that turns the informers' Services and EndpointSlices into
service ports and endpoints, and a bounded-frequency runner that syncs at start, on changes (at
most once per ``min_sync_period``) and every ``sync_period``.  :class:`Proxier` is that
machinery; a mode subclasses it and implements only :meth:`Proxier.apply`, which programs one
sync's changes into the data path and says what it wrote.  The base decides whether a sync is
full, keeps the rate limits, marks the next sync full after a failure, and reports every sync
to :class:`~node.proxy.health.ProxyMetrics` (``/healthz`` goes stale when syncs stop) and,
when given one, the health check node ports of externalTrafficPolicy Local Services to
:class:`~node.proxy.health.ServiceHealthServer`.

Given an event sink (``bind``), a sync that changed a Service's rules is told as an
``EndpointsSynced`` Event on the Service (this node as its source, the endpoints each of its
ports now sends to in the note): the step of ``kubelab story`` where a node's data path caught
up with an EndpointSlice.  Upstream's kube-proxy records no such event; this one is bounded:
only on a change (never for the first sync, which programs everything there is), at most
``MAX_TOLD_ENDPOINTS`` addresses per port, and the recorder's spam filter limits each node to
a burst per Service, then one every five minutes.

Subclasses read the tracker's state (``tracker.ports``, ``tracker.endpoints``) and the node's
addresses (:meth:`Proxier.node_ips`) through this class's public members only.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kube.api.keys import object_key
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import EndpointSlice
from kube.client.events import NORMAL
from kube.client.informers import DeletedFinalStateUnknown, SharedInformerFactory
from kube.clock import Clock
from node.iptables import RulesError
from node.proxy.health import ProxyMetrics, ServiceHealth, ServiceHealthServer
from node.proxy.model import (
    Changes,
    ChangeTracker,
    ServicePortName,
    service_key_of_slice,
    slices_by_service,
    usable,
)

log = logging.getLogger(__name__)

SLICE_SERVICE_INDEX = "kubernetes.io/service-name"
SYNCED_REASON = "EndpointsSynced"
MAX_TOLD_ENDPOINTS = 10


class EventSink(Protocol):
    """Where syncs are told (``kube.client.events.EventRecorder``); never blocks."""

    def event(self, obj: Service, type: str, reason: str, message: str) -> None: ...


def local_addresses() -> list[str]:
    """The IPv4 addresses of the current netns's interfaces."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return sorted({str(a.get("IFA_ADDRESS")) for a in ipr.get_addr(family=2)})


@dataclass(frozen=True)
class Applied:
    """What one sync wrote: rule and chain counts per table, for the metrics.

    ``complete`` False: something could not be programmed yet (a listener that did not
    open), so the next sync is full and retries it.
    """

    rules: Mapping[str, int]
    chains: Mapping[str, int]
    complete: bool = True


class Proxier(ABC):
    """The informers, change tracking and sync loop of a proxy mode; see the module docstring.

    ``nodeport_cidrs`` None: NodePorts on every local address; otherwise on the local
    addresses inside those CIDRs (:meth:`node_ips`, read at every full sync).
    """

    def __init__(
        self,
        node_name: str,
        clock: Clock,
        *,
        nodeport_cidrs: Sequence[str] | None = None,
        sync_period: float = 30.0,
        min_sync_period: float = 1.0,
        addresses: Callable[[], list[str]] = local_addresses,
        metrics: ProxyMetrics | None = None,
        service_health: ServiceHealthServer | None = None,
    ) -> None:
        self.node_name = node_name
        self.clock = clock
        self.nodeport_networks = (
            None
            if nodeport_cidrs is None
            else [ipaddress.IPv4Network(c, strict=False) for c in nodeport_cidrs]
        )
        self.sync_period = sync_period
        self.min_sync_period = min_sync_period
        self.metrics = metrics or ProxyMetrics(clock)
        self.service_health = service_health
        self.tracker = ChangeTracker(node_name)
        self.needs_full = True
        """The next sync is full: at start, after a failure or a change of this Node."""
        self._addresses = addresses
        self._last_full = -math.inf
        self._last_sync = -math.inf
        self._wake = asyncio.Event()
        self._services: Callable[[str], Service | None] = lambda key: None
        self._slices: Callable[[str], Sequence[EndpointSlice]] = lambda key: ()
        self.events: EventSink | None = None
        self._synced_once = False

    # What a mode implements.

    @abstractmethod
    async def apply(self, changes: Changes, full: bool) -> Applied | None:
        """Program ``changes`` (already applied to ``tracker``); a full sync rewrites
        everything.  None: nothing needed writing.  Raises
        :class:`~node.iptables.RulesError` when the rules could not be written (the next sync
        is then full)."""

    @abstractmethod
    def ensure_sysctls(self) -> None:
        """Set the sysctls the mode needs, once before the first sync."""

    @abstractmethod
    async def close(self) -> None:
        """Release what the mode holds besides its rules (which stay, as upstream leaves
        them: a restarted proxy rewrites them at its first sync)."""

    # Wiring.

    def bind(self, informers: SharedInformerFactory, events: EventSink | None = None) -> None:
        """Watch Services, EndpointSlices and this node through ``informers``; tell the syncs
        that changed a Service's rules to ``events``."""
        self.events = events
        services = informers.informer_for(Service)
        slices = informers.informer_for(EndpointSlice)
        slices.add_indexers({SLICE_SERVICE_INDEX: slices_by_service})
        nodes = informers.informer_for(Node, field_selector=f"metadata.name={self.node_name}")
        self._services = services.lister.get
        self._slices = lambda key: slices.lister.by_index(SLICE_SERVICE_INDEX, key)
        services.add_change_handler(self.on_service)
        slices.add_change_handler(self.on_slice)
        nodes.add_change_handler(self.on_node)

    def set_lookups(
        self,
        services: Callable[[str], Service | None],
        slices: Callable[[str], Sequence[EndpointSlice]],
    ) -> None:
        """Read Services and a Service's slices from these (tests; ``bind`` sets them)."""
        self._services, self._slices = services, slices

    def on_service(self, obj: Service | DeletedFinalStateUnknown[Service]) -> None:
        service = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.tracker.service_changed(object_key(service))
        self._wake.set()

    def on_slice(self, obj: EndpointSlice | DeletedFinalStateUnknown[EndpointSlice]) -> None:
        slice_ = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        key = service_key_of_slice(slice_)
        if key is not None:
            self.tracker.service_changed(key)
            self._wake.set()

    def on_node(self, obj: Node | DeletedFinalStateUnknown[Node]) -> None:
        node = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if node.metadata.name == self.node_name:
            self.needs_full = True
            self._wake.set()

    # Sync loop.

    async def run(self) -> None:
        """Sync until cancelled: at once, then on changes (rate-limited) and every period."""
        self.ensure_sysctls()
        while True:
            wait = self._last_sync + self.min_sync_period - self.clock.monotonic()
            if wait > 0:
                await self.clock.sleep(wait)
            self._wake.clear()
            await self.sync()
            if self.tracker.pending or self.needs_full:
                continue
            due = self._last_full + self.sync_period - self.clock.monotonic()
            await self._wait_for_change(due)

    async def _wait_for_change(self, seconds: float) -> None:
        if seconds <= 0:
            return
        changed = asyncio.ensure_future(self._wake.wait())
        elapsed = asyncio.ensure_future(self.clock.sleep(seconds))
        try:
            await asyncio.wait({changed, elapsed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (changed, elapsed):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def sync(self) -> bool:
        """One sync (full when due); whether it succeeded.  Never raises for rule-writing errors."""
        started = self.clock.monotonic()
        full = self.needs_full or started - self._last_full >= self.sync_period
        changes = self.tracker.apply(self._services, self._slices)
        try:
            applied = await self.apply(changes, full)
        except RulesError as e:
            context = "\n".join(e.context())
            log.error("sync failed, the next sync is full: %s\n%s", e, context)
            self.needs_full = True
            self._last_sync = self.clock.monotonic()
            self.metrics.failed()
            return False
        if applied is None:
            return True
        self.needs_full = not applied.complete
        if self._synced_once:
            self._tell_synced(changes.changed)
        self._synced_once = True
        if full:
            self._last_full = started
        if self.service_health is not None:
            await self.service_health.update(self.health_checks())
        self._last_sync = self.clock.monotonic()
        self.metrics.synced(
            "full" if full else "partial",
            self._last_sync - started,
            rules=dict(applied.rules),
            chains=dict(applied.chains),
        )
        return True

    def _tell_synced(self, changed: set[ServicePortName]) -> None:
        if self.events is None:
            return
        by_service: dict[str, list[ServicePortName]] = {}
        for name in changed:
            if name in self.tracker.ports:
                by_service.setdefault(name.service_key, []).append(name)
        for key, names in sorted(by_service.items()):
            service = self._services(key)
            if service is not None:
                told = "; ".join(self._told_port(name) for name in sorted(names))
                self.events.event(service, NORMAL, SYNCED_REASON, told)

    def _told_port(self, name: ServicePortName) -> str:
        addresses = [e.address for e in usable(self.tracker.endpoints.get(name, ()))]
        shown = ", ".join(addresses[:MAX_TOLD_ENDPOINTS]) or "no endpoints"
        more = len(addresses) - MAX_TOLD_ENDPOINTS
        port = f"{self.tracker.ports[name].port}/{name.protocol}"
        named = f" ({name.port})" if name.port else ""
        return f"port {port}{named} → {shown}" + (f" (+{more})" if more > 0 else "")

    # For the modes.

    async def node_ips(self) -> tuple[str, ...] | None:
        """The local addresses NodePorts answer on; None: every local address."""
        if self.nodeport_networks is None:
            return None
        found = await asyncio.to_thread(self._addresses)
        return tuple(
            ip
            for ip in found
            if any(ipaddress.IPv4Address(ip) in n for n in self.nodeport_networks)
        )

    def health_checks(self) -> dict[int, ServiceHealth]:
        """Each health check node port and how many local endpoints its Service has."""
        return {
            port.health_check_node_port: ServiceHealth(
                port.name.namespace,
                port.name.name,
                len(usable(e for e in self.tracker.endpoints[name] if e.local)),
            )
            for name, port in self.tracker.ports.items()
            if port.health_check_node_port
        }
