"""The iptables-mode kube-proxy: informers in, one iptables-restore per table per sync out.

Shape of upstream's pkg/proxy/iptables/proxier.go:

* Informer handlers for Services and EndpointSlices only mark the Service dirty in the
  :class:`~node.proxy.model.ChangeTracker` and wake the sync loop; they never block.  A change
  to the proxier's own Node makes the next sync full.
* The sync loop runs a **full** sync at start, after a failure, and every ``sync_period``: it
  saves ``nat`` and ``filter`` (to find its own stale chains and the jumps from built-in chains
  that are missing), then restores every chain it owns.  In between it runs **partial** syncs
  that rewrite the top-level chains and only the changed service ports' chains.  Syncs are at
  least ``min_sync_period`` apart, so a burst of changes is coalesced into one sync.
* The rules of each service port are rendered once per change and cached
  (:class:`~node.proxy.ruleset.ServiceRules`); a sync only joins the cached lines.
* Jumps from built-in chains are the only rules in chains the proxier does not own; they are
  inserted (``-I``) only when the saved table lacks them, in the same transaction as the
  chains they jump to, after those are declared.
* A failed restore logs the input lines around the failing one, and the next sync is full.
* UDP flows to endpoints that went away are deleted from conntrack, since UDP "connections"
  would otherwise keep going to the dead endpoint.
* The health check node ports of Services with externalTrafficPolicy Local are served
  (:class:`~node.proxy.health.ServiceHealthServer`) with the node's local endpoint counts.
* Sysctls the rules need (``route_localnet`` for NodePorts on 127.0.0.1) are set at start;
  sysctls that are read-only in a non-initial network namespace are logged and skipped.

iptables is reached only through :class:`kubelab.iptables.Iptables`, from a worker thread
(``asyncio.to_thread``) so the event loop keeps serving informers and health checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from kubelab.api.keys import object_key
from kubelab.api.kinds.core_v1.node import Node
from kubelab.api.kinds.core_v1.service import Service
from kubelab.api.kinds.discovery_v1 import EndpointSlice
from kubelab.client.informers import DeletedFinalStateUnknown, SharedInformerFactory
from kubelab.clock import Clock
from kubelab.iptables import Iptables, IptablesError, Runner, in_named_netns, run_command
from node.proxy.health import ProxyMetrics, ServiceHealth, ServiceHealthServer
from node.proxy.model import (
    ChangeTracker,
    EndpointInfo,
    ServicePortInfo,
    ServicePortName,
    service_key_of_slice,
    slices_by_service,
    usable,
)
from node.proxy.ruleset import (
    FILTER_TOP_CHAINS,
    NAT_TOP_CHAINS,
    ProxyConfig,
    ServiceRules,
    assemble,
    missing_jumps,
    owned_chains,
    render_service,
)

log = logging.getLogger(__name__)

SLICE_SERVICE_INDEX = "kubernetes.io/service-name"
ROUTE_LOCALNET = "net/ipv4/conf/all/route_localnet"
CONNTRACK_SYSCTLS = {
    "net/netfilter/nf_conntrack_tcp_timeout_established": "86400",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait": "3600",
}
"""Upstream's conntrack defaults; some are read-only outside the initial netns."""
LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")


class Conntrack(Protocol):
    """Deletes conntrack flows: the one conntrack operation the proxier needs."""

    def delete_udp(self, original_dst: str, port: int, endpoint_ip: str) -> None:
        """Delete UDP flows sent to ``original_dst`` (and ``port``, when not 0) that were
        DNATed to ``endpoint_ip``; no flows is success."""
        ...


class SubprocessConntrack:
    """:class:`Conntrack` through the ``conntrack`` command, only inside a named netns."""

    def __init__(self, runner: Runner = run_command) -> None:
        self._run = runner

    def delete_udp(self, original_dst: str, port: int, endpoint_ip: str) -> None:
        argv = ["conntrack", "-D", "-p", "udp", "--dst-nat", endpoint_ip]
        argv += ["--orig-port-dst", str(port)] if port else []
        argv += ["--orig-dst", original_dst] if original_dst else []
        if not in_named_netns():
            log.error("refusing to run conntrack outside a named netns: %s", argv)
            return
        done = self._run(argv, "")
        # conntrack exits 1 when no flow matched: nothing to delete is not an error.
        if done.returncode not in (0, 1):
            log.warning("%s exited %d: %s", " ".join(argv), done.returncode, done.stderr.strip())


Sysctl = Callable[[str, str], None]
"""Write a value under /proc/sys (``net/ipv4/...``); raises OSError when it cannot."""


def write_sysctl(name: str, value: str) -> None:
    path = os.path.join("/proc/sys", name)
    with open(path) as current:
        if current.read().strip() == value:
            return
    with open(path, "w") as setting:
        setting.write(value)


def local_addresses() -> list[str]:
    """The IPv4 addresses of the current netns's interfaces."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return sorted({str(a.get("IFA_ADDRESS")) for a in ipr.get_addr(family=2)})


class IptablesProxier:
    """Programs Services into iptables; see the module docstring.

    ``nodeport_cidrs`` None: NodePorts on every local address (including 127.0.0.1);
    otherwise on the local addresses inside those CIDRs, read at every full sync.
    """

    def __init__(
        self,
        iptables: Iptables,
        node_name: str,
        clock: Clock,
        *,
        cluster_cidr: str | None = None,
        masquerade_all: bool = False,
        nodeport_cidrs: Sequence[str] | None = None,
        sync_period: float = 30.0,
        min_sync_period: float = 1.0,
        conntrack: Conntrack | None = None,
        sysctl: Sysctl = write_sysctl,
        addresses: Callable[[], list[str]] = local_addresses,
        metrics: ProxyMetrics | None = None,
        service_health: ServiceHealthServer | None = None,
    ) -> None:
        self.iptables = iptables
        self.node_name = node_name
        self.clock = clock
        self.config = ProxyConfig(cluster_cidr=cluster_cidr, masquerade_all=masquerade_all)
        self._config = self.config
        """The config of the last full sync (with the node IPs it found)."""
        self._nodeport_networks = (
            None
            if nodeport_cidrs is None
            else [ipaddress.IPv4Network(c, strict=False) for c in nodeport_cidrs]
        )
        self.sync_period = sync_period
        self.min_sync_period = min_sync_period
        self.conntrack = conntrack or SubprocessConntrack()
        self._sysctl = sysctl
        self._addresses = addresses
        self.metrics = metrics or ProxyMetrics(clock)
        self.service_health = service_health
        self.tracker = ChangeTracker(node_name)
        self.rules: dict[ServicePortName, ServiceRules] = {}
        self._programmed: dict[ServicePortName, frozenset[str]] = {}
        """The nat chains each service port had after the last successful sync."""
        self._needs_full = True
        self._last_full = -math.inf
        self._last_sync = -math.inf
        self._wake = asyncio.Event()
        self._stale_udp: list[tuple[ServicePortInfo, EndpointInfo]] = []
        """UDP endpoints gone since the last successful sync: flows to delete after it."""
        self._services: Callable[[str], Service | None] = lambda key: None
        self._slices: Callable[[str], Sequence[EndpointSlice]] = lambda key: ()

    # Wiring.

    def bind(self, informers: SharedInformerFactory) -> None:
        """Watch Services, EndpointSlices and this node through ``informers``."""
        services = informers.informer_for(Service)
        slices = informers.informer_for(EndpointSlice)
        slices.add_indexers({SLICE_SERVICE_INDEX: slices_by_service})
        nodes = informers.informer_for(Node, field_selector=f"metadata.name={self.node_name}")
        self._services = services.lister.get
        self._slices = lambda key: slices.lister.by_index(SLICE_SERVICE_INDEX, key)
        services.add_event_handler(
            on_add=self.on_service,
            on_update=lambda old, new: self.on_service(new),
            on_delete=self.on_service,
        )
        slices.add_event_handler(
            on_add=self.on_slice,
            on_update=lambda old, new: self.on_slice(new),
            on_delete=self.on_slice,
        )
        nodes.add_event_handler(
            on_add=self.on_node,
            on_update=lambda old, new: self.on_node(new),
            on_delete=self.on_node,
        )

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
            self._needs_full = True
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
            if self.tracker.pending or self._needs_full:
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

    def ensure_sysctls(self) -> None:
        """Set what the rules need; a read-only sysctl is logged, never fatal."""
        wanted = dict(CONNTRACK_SYSCTLS)
        if self._nodeport_networks is None or any(
            n.overlaps(LOOPBACK) for n in self._nodeport_networks
        ):
            wanted[ROUTE_LOCALNET] = "1"
        for name, value in wanted.items():
            try:
                self._sysctl(name, value)
            except OSError as e:
                log.warning("cannot set sysctl %s=%s: %s", name.replace("/", "."), value, e)

    async def sync(self) -> bool:
        """One sync (full when due); whether it succeeded.  Never raises for iptables errors."""
        started = self.clock.monotonic()
        full = self._needs_full or started - self._last_full >= self.sync_period
        changes = self.tracker.apply(self._services, self._slices)
        self._stale_udp += changes.stale_udp
        for name in changes.changed:
            port = self.tracker.ports.get(name)
            if port is None:
                self.rules.pop(name, None)
            else:
                self.rules[name] = render_service(port, self.tracker.endpoints[name], self.config)
        if not full and not changes.changed:
            return True
        config = replace(self.config, node_ips=await self._node_ips()) if full else self._config
        filter_extra: list[str] = []
        nat_extra: list[str] = []
        if full:
            try:
                saved_nat = await asyncio.to_thread(self.iptables.save, "nat")
                saved_filter = await asyncio.to_thread(self.iptables.save, "filter")
            except IptablesError as e:
                return self._failed(e)
            active = {c for r in self.rules.values() for c in r.chains}
            stale = owned_chains(saved_nat) - active
            nat_extra = missing_jumps("nat", saved_nat)
            filter_extra = missing_jumps("filter", saved_filter)
        else:
            stale = set()
            for name in changes.changed:
                kept = set(self.rules[name].chains) if name in self.rules else set()
                stale |= self._programmed.get(name, frozenset()) - kept
        ruleset = assemble(
            self.rules, config, changed=None if full else changes.changed, stale_chains=stale
        )
        try:
            await asyncio.to_thread(self.iptables.restore, "filter", ruleset.filter + filter_extra)
            await asyncio.to_thread(self.iptables.restore, "nat", ruleset.nat + nat_extra)
        except IptablesError as e:
            return self._failed(e)
        self._config = config
        if full:
            self._programmed = {name: frozenset(r.chains) for name, r in self.rules.items()}
        for name in changes.changed:
            if name in self.rules:
                self._programmed[name] = frozenset(self.rules[name].chains)
            else:
                self._programmed.pop(name, None)
        self._needs_full = False
        if full:
            self._last_full = started
        self._last_sync = self.clock.monotonic()
        stale_udp, self._stale_udp = self._stale_udp, []
        await self._delete_stale_flows(stale_udp)
        if self.service_health is not None:
            await self.service_health.update(self._health_checks())
        self.metrics.synced(
            "full" if full else "partial",
            self._last_sync - started,
            rules=self._rule_counts(),
            chains={
                "nat": len(NAT_TOP_CHAINS) + sum(len(r.chains) for r in self.rules.values()),
                "filter": len(FILTER_TOP_CHAINS),
            },
        )
        return True

    def _failed(self, error: IptablesError) -> bool:
        context = "\n".join(error.context())
        log.error("iptables sync failed, the next sync is full: %s\n%s", error, context)
        self._needs_full = True
        self._last_sync = self.clock.monotonic()
        self.metrics.failed()
        return False

    async def _node_ips(self) -> tuple[str, ...] | None:
        if self._nodeport_networks is None:
            return None
        found = await asyncio.to_thread(self._addresses)
        return tuple(
            ip
            for ip in found
            if any(ipaddress.IPv4Address(ip) in n for n in self._nodeport_networks)
        )

    def _health_checks(self) -> dict[int, ServiceHealth]:
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

    def _rule_counts(self) -> dict[str, int]:
        nat = sum(
            len(r.nat_services) + len(r.nat_nodeports) + sum(map(len, r.chains.values()))
            for r in self.rules.values()
        )
        filter_ = sum(
            len(r.filter_services)
            + len(r.filter_external)
            + len(r.filter_nodeports)
            + len(r.filter_firewall)
            for r in self.rules.values()
        )
        return {"nat": nat, "filter": filter_}

    async def _delete_stale_flows(
        self, stale: Sequence[tuple[ServicePortInfo, EndpointInfo]]
    ) -> None:
        for port, endpoint in stale:
            targets = [(port.cluster_ip, port.port)]
            targets += [(ip, port.port) for ip in (*port.external_ips, *port.load_balancer_ips)]
            if port.node_port:
                targets.append(("", port.node_port))
            for destination, number in targets:
                await asyncio.to_thread(self.conntrack.delete_udp, destination, number, endpoint.ip)
