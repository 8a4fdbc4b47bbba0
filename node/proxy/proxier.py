"""The iptables-mode kube-proxy: informers in, one iptables-restore per table per sync out.

Shape of upstream's pkg/proxy/iptables/proxier.go:

* The informers, the change tracking and the sync loop's timing are
  :class:`~node.proxy.base.Proxier`'s; this class implements what one sync writes.
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
  (:class:`~node.proxy.health.ServiceHealthServer`, updated by the base after each sync).
* Sysctls the rules need (``route_localnet`` for NodePorts on 127.0.0.1) are set at start;
  sysctls that are read-only in a non-initial network namespace are logged and skipped.

iptables is reached only through :class:`node.iptables.Iptables`, from a worker thread
(``asyncio.to_thread``) so the event loop keeps serving informers and health checks.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Generic, Protocol, TypeVar

from kube.clock import Clock
from node.iptables import Iptables, Runner, may_change_current_netns, run_command
from node.proxy.base import Applied, Proxier, local_addresses
from node.proxy.health import ProxyMetrics, ServiceHealthServer
from node.proxy.model import Changes, EndpointInfo, ServicePortInfo, ServicePortName
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

ROUTE_LOCALNET = "net/ipv4/conf/all/route_localnet"
CONNTRACK_SYSCTLS = {
    "net/netfilter/nf_conntrack_tcp_timeout_established": "86400",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait": "3600",
}
"""Upstream's conntrack defaults; some are read-only outside the initial netns."""
LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")
W = TypeVar("W")
R = TypeVar("R")


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
        if not may_change_current_netns():
            log.error("refusing to run conntrack outside a named netns: %s", argv)
            return
        done = self._run(argv, "")
        # conntrack exits 1 when no flow matched: nothing to delete is not an error.
        if done.returncode not in (0, 1):
            log.warning("%s exited %d: %s", " ".join(argv), done.returncode, done.stderr.strip())


Sysctl = Callable[[str, str], None]
"""Write a value under /proc/sys (``net/ipv4/...``); raises OSError when it cannot."""


def set_sysctls(sysctl: Sysctl, wanted: Mapping[str, str]) -> None:
    """Set each of ``wanted``; one that cannot be set (read-only in a non-initial network
    namespace) is logged, never fatal."""
    for name, value in wanted.items():
        try:
            sysctl(name, value)
        except OSError as e:
            log.warning("cannot set sysctl %s=%s: %s", name.replace("/", "."), value, e)


def write_sysctl(name: str, value: str) -> None:
    path = os.path.join("/proc/sys", name)
    with open(path) as current:
        if current.read().strip() == value:
            return
    with open(path, "w") as setting:
        setting.write(value)


class RulesProxier(Proxier, Generic[W, R]):
    """What the modes that program the kernel's rules share (iptables here, nftables in
    :mod:`node.proxy.nftproxier`): the writer (``W``), the node-wide config, each service
    port's rendered rules (``R``) cached between syncs and what the last successful sync
    programmed, and the conntrack cleanup of UDP endpoints gone since then."""

    def __init__(
        self,
        writer: W,
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
        super().__init__(
            node_name,
            clock,
            nodeport_cidrs=nodeport_cidrs,
            sync_period=sync_period,
            min_sync_period=min_sync_period,
            addresses=addresses,
            metrics=metrics,
            service_health=service_health,
        )
        self.writer = writer
        self.config = ProxyConfig(cluster_cidr=cluster_cidr, masquerade_all=masquerade_all)
        self.applied_config = self.config
        """The config of the last full sync (with the node IPs it found)."""
        self.conntrack = conntrack or SubprocessConntrack()
        self.sysctl = sysctl
        self.rules: dict[ServicePortName, R] = {}
        self.programmed: dict[ServicePortName, R] = {}
        """Each service port's rules after the last successful sync."""
        self._stale_udp: list[tuple[ServicePortInfo, EndpointInfo]] = []

    @abstractmethod
    def render(self, port: ServicePortInfo, endpoints: Sequence[EndpointInfo]) -> R:
        """One service port's rules under :attr:`config`."""

    async def close(self) -> None:
        """Nothing to release: the rules are the whole data path."""

    def take(self, changes: Changes) -> None:
        """Render the changed service ports (dropping removed ones); note stale UDP flows."""
        self._stale_udp += changes.stale_udp
        for name in changes.changed:
            port = self.tracker.ports.get(name)
            if port is None:
                self.rules.pop(name, None)
            else:
                self.rules[name] = self.render(port, self.tracker.endpoints[name])

    def before(self, changes: Changes) -> list[R]:
        """The changed service ports' rules as the last successful sync left them."""
        return [self.programmed[n] for n in changes.changed if n in self.programmed]

    def after(self, changes: Changes) -> list[R]:
        """The changed service ports' rules this sync writes (none for removed ports)."""
        return [self.rules[n] for n in changes.changed if n in self.rules]

    async def applied(self, changes: Changes, full: bool, config: ProxyConfig) -> None:
        """After a successful sync: remember what is programmed, delete stale UDP flows."""
        self.applied_config = config
        if full:
            self.programmed = dict(self.rules)
        for name in changes.changed:
            if name in self.rules:
                self.programmed[name] = self.rules[name]
            else:
                self.programmed.pop(name, None)
        stale, self._stale_udp = self._stale_udp, []
        for port, endpoint in stale:
            targets = [(port.cluster_ip, port.port)]
            targets += [(ip, port.port) for ip in (*port.external_ips, *port.load_balancer_ips)]
            if port.node_port:
                targets.append(("", port.node_port))
            for destination, number in targets:
                await asyncio.to_thread(self.conntrack.delete_udp, destination, number, endpoint.ip)


class IptablesProxier(RulesProxier[Iptables, ServiceRules]):
    """Programs Services into iptables; see the module docstring."""

    @property
    def iptables(self) -> Iptables:
        return self.writer

    def render(self, port: ServicePortInfo, endpoints: Sequence[EndpointInfo]) -> ServiceRules:
        return render_service(port, endpoints, self.config)

    def ensure_sysctls(self) -> None:
        """Set what the rules need; a read-only sysctl is logged, never fatal."""
        wanted = dict(CONNTRACK_SYSCTLS)
        networks = self.nodeport_networks
        if networks is None or any(n.overlaps(LOOPBACK) for n in networks):
            wanted[ROUTE_LOCALNET] = "1"
        set_sysctls(self.sysctl, wanted)

    async def apply(self, changes: Changes, full: bool) -> Applied | None:
        """Render the changed service ports, then restore ``filter`` and ``nat``: every owned
        chain (full) or the top-level chains and the changed ports' chains (partial)."""
        self.take(changes)
        if not full and not changes.changed:
            return None
        config = (
            replace(self.config, node_ips=await self.node_ips()) if full else self.applied_config
        )
        filter_extra: list[str] = []
        nat_extra: list[str] = []
        if full:
            saved_nat = await asyncio.to_thread(self.iptables.save, "nat")
            saved_filter = await asyncio.to_thread(self.iptables.save, "filter")
            active = {c for r in self.rules.values() for c in r.chains}
            stale = owned_chains(saved_nat) - active
            nat_extra = missing_jumps("nat", saved_nat)
            filter_extra = missing_jumps("filter", saved_filter)
        else:
            kept = {c for r in self.after(changes) for c in r.chains}
            stale = {c for r in self.before(changes) for c in r.chains} - kept
        ruleset = assemble(
            self.rules, config, changed=None if full else changes.changed, stale_chains=stale
        )
        await asyncio.to_thread(self.iptables.restore, "filter", ruleset.filter + filter_extra)
        await asyncio.to_thread(self.iptables.restore, "nat", ruleset.nat + nat_extra)
        await self.applied(changes, full, config)
        return Applied(
            rules=self._rule_counts(),
            chains={
                "nat": len(NAT_TOP_CHAINS) + sum(len(r.chains) for r in self.rules.values()),
                "filter": len(FILTER_TOP_CHAINS),
            },
        )

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
