"""What the kernel says about one traced packet, read back into names a person knows.

``kubelab lab trace`` (``kubelab.lab.trace``) marks one probe with nftables' ``nftrace`` in
every namespace it may cross and reads three things the kernel keeps about it; this module
holds the node-side half of that, pure text in and records out, so it is tested on recorded
output without root:

- ``nft monitor trace`` lines (:func:`parse_trace`): every base chain, rule and policy the
  marked packet meets in a namespace, each with the verdict and the packet as that hook saw
  it (``packet:`` lines: interfaces, addresses, ports, TTL).  The kernel prints a packet line
  when a hook first sees the packet and tags every line with a trace id, which may change
  between hooks, so an event is joined to the last packet line of its own id.  Rules written
  with iptables-nft appear here as ``ip nat``/``ip filter`` chains; rules in the legacy
  tables do not (lab notes), hence
- ``iptables-legacy-save -c`` counters (:func:`grown_counters`): the rules whose packet
  counters grew between a save before the probe and one after;
- ``conntrack -L`` lines (:func:`parse_conntrack`): the NAT the probe's connection got.

:class:`Origins` maps a chain (and, for the rules kube-proxy writes without a per-Service
chain, a rule's address and port) back to what made it: a Service, an endpoint, a
NetworkPolicy, the CNI's masquerade or hostPort chains.  It asks the components' own naming
(``node.proxy.names``, ``node.netpol.compiler``, ``node.cni.network``) instead of spelling
names again, so a renamed chain is renamed here too.

The marking table (:func:`marking_table`) is ``inet kubelab-trace``: a chain on prerouting
and one on output at priority -350 (before conntrack and every NAT chain) setting ``meta
nftrace`` on the probe: going out, packets with the probe's DSCP (the probe's socket sets
it; a masquerade may change the source port, but not the DSCP); coming back, packets to the
probe's source port (replies carry no DSCP).  TCP: SYN segments only, so the handshake is
traced and the rest of the connection is not.  Nothing else in the namespace is traced, and
deleting the table leaves no rule or mark.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import EndpointSlice
from node.cni.network import HOSTPORT_CHAIN_PREFIX, MASQ_CHAIN
from node.netpol import compiler as netpol
from node.proxy import model, nftrules
from node.proxy import names as proxy

TABLE: Final = "kubelab-trace"
FAMILY: Final = "inet"
PRIORITY: Final = -350
"""Before conntrack (-200) and every NAT chain, as the lab notes' recipe has it."""
DSCP: Final = 45
"""The probe's DSCP (an unassigned code point): unlike its ports it survives NAT, and unlike
an skb mark it survives the crossing into another namespace."""

_LINE = re.compile(r"^trace id (\S+) (\S+) (\S+) (\S+) (packet|rule|policy|verdict):?\s?(.*)$")
_VERDICT = re.compile(r"\s*\(verdict ([^)]*)\)\s*$")
_COUNTER = re.compile(r"\s*counter packets \d+ bytes \d+")
_FIELDS = {
    "iif": re.compile(r'\biif "([^"]+)"'),
    "oif": re.compile(r'\boif "([^"]+)"'),
    "saddr": re.compile(r"\bip saddr (\S+)"),
    "daddr": re.compile(r"\bip daddr (\S+)"),
    "sport": re.compile(r"\b(?:tcp|udp) sport (\d+)"),
    "dport": re.compile(r"\b(?:tcp|udp) dport (\d+)"),
    "ttl": re.compile(r"\bip ttl (\d+)"),
}
_DNAT = re.compile(r"\bdnat (?:ip )?to (\S+)")
_REDIRECT = re.compile(r"\bredirect to :(\d+)")
_NFT_PROXY_CHAIN = re.compile(
    r"^(service|local|external|firewall|endpoint)-[A-Z2-7]{8}-([^/]+)/([^/]+)/([a-z]+)/([^_/]*)"
    r"(?:__(\S+)/(\d+))?$"
)
_CONNTRACK = re.compile(
    r"src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+) .*?src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+)"
)
_SAVED_RULE = re.compile(r"^\[(\d+):(\d+)\] (-A (\S+) .*)$")


def marking_table(port: int, dscp: int = DSCP) -> list[str]:
    """The ``nft -f`` script that adds the marking table for a probe sent with ``dscp`` from
    source port ``port``."""
    match = (
        f"ip dscp {dscp} tcp flags syn",
        f"ip dscp {dscp} meta l4proto udp",
        f"tcp dport {port} tcp flags syn",
        f"udp dport {port}",
    )
    lines = [f"add table {FAMILY} {TABLE}"]
    for chain in ("prerouting", "output"):
        lines.append(
            f"add chain {FAMILY} {TABLE} {chain} "
            f"{{ type filter hook {chain} priority {PRIORITY}; policy accept; }}"
        )
        lines += [f"add rule {FAMILY} {TABLE} {chain} {m} meta nftrace set 1" for m in match]
    return lines


def unmarking_table() -> list[str]:
    """The ``nft -f`` script that removes the marking table, present or not."""
    return [f"add table {FAMILY} {TABLE}", f"delete table {FAMILY} {TABLE}"]


@dataclass(frozen=True)
class Packet:
    """A packet as one hook saw it (a ``packet:`` line); absent fields are empty or 0."""

    iif: str = ""
    oif: str = ""
    saddr: str = ""
    daddr: str = ""
    sport: int = 0
    dport: int = 0
    ttl: int = 0

    @classmethod
    def parse(cls, text: str) -> Packet:
        found = {k: m.group(1) for k, p in _FIELDS.items() if (m := p.search(text))}
        return cls(
            iif=found.get("iif", ""),
            oif=found.get("oif", ""),
            saddr=found.get("saddr", ""),
            daddr=found.get("daddr", ""),
            sport=int(found.get("sport", 0)),
            dport=int(found.get("dport", 0)),
            ttl=int(found.get("ttl", 0)),
        )


@dataclass(frozen=True)
class TraceEvent:
    """One rule or policy a traced packet met: ``family table chain``, the rule's text (no
    counters; empty for a policy), its verdict (``accept``, ``drop``, ``jump X``,
    ``continue``, ``return``...) and the packet as its hook saw it."""

    family: str
    table: str
    chain: str
    rule: str
    verdict: str
    packet: Packet

    @property
    def is_policy(self) -> bool:
        return not self.rule

    @property
    def ours(self) -> bool:
        """The marking table's own event, which says nothing about the path."""
        return self.family == FAMILY and self.table == TABLE

    @property
    def dnat(self) -> str:
        """``IP:PORT`` a DNAT rule sent the packet to ("" if the rule is none)."""
        found = _DNAT.search(self.rule)
        return found.group(1) if found else ""

    @property
    def redirect(self) -> int:
        """The local port a REDIRECT rule sent the packet to (0 if the rule is none)."""
        found = _REDIRECT.search(self.rule)
        return int(found.group(1)) if found else 0


def parse_trace(text: str) -> list[TraceEvent]:
    """The rule and policy events of ``nft monitor trace`` output, in order; lines that are
    no trace line (the monitor's own messages) are skipped."""
    packets: dict[str, Packet] = {}
    events: list[TraceEvent] = []
    for line in text.splitlines():
        found = _LINE.match(line.rstrip())
        if found is None:
            continue
        trace, family, table, chain, kind, rest = found.groups()
        if kind == "packet":
            packets[trace] = Packet.parse(rest)
            continue
        verdict = _VERDICT.search(rest)
        if kind == "rule":
            text_ = _COUNTER.sub("", rest[: verdict.start()] if verdict else rest)
            rule, outcome = " ".join(text_.split()), verdict.group(1) if verdict else ""
        else:
            rule, outcome = "", rest.strip()
        events.append(TraceEvent(family, table, chain, rule, outcome, packets.get(trace, Packet())))
    return events


@dataclass(frozen=True)
class Conntrack:
    """A conntrack entry: the original direction and the reply the kernel expects (a NAT
    shows as a reply that is not the original turned around)."""

    protocol: str
    original: tuple[str, str, int, int]
    reply: tuple[str, str, int, int]

    @property
    def destination(self) -> str:
        """Where the connection really goes: the reply's source, ``IP:PORT``."""
        return f"{self.reply[0]}:{self.reply[2]}"

    def text(self) -> str:
        o, r = self.original, self.reply
        return f"{self.protocol} {o[0]}:{o[2]} → {o[1]}:{o[3]}, reply {r[0]}:{r[2]} → {r[1]}:{r[3]}"


def parse_conntrack(text: str) -> list[Conntrack]:
    """The entries of ``conntrack -L`` output (its summary line left out)."""
    entries = []
    for line in text.splitlines():
        found = _CONNTRACK.search(line)
        if found is None:
            continue
        g = found.groups()
        entries.append(
            Conntrack(
                line.split()[0],
                (g[0], g[1], int(g[2]), int(g[3])),
                (g[4], g[5], int(g[6]), int(g[7])),
            )
        )
    return entries


@dataclass(frozen=True)
class Counted:
    """A legacy-table rule whose counters grew while the probe ran."""

    table: str
    chain: str
    rule: str
    packets: int


def grown_counters(before: str, after: str) -> list[Counted]:
    """The rules of ``iptables-save -c`` output ``after`` whose packet counter is above the
    same rule's in ``before`` (a rule new since then counts from 0), in ``after``'s order."""
    return [
        Counted(table, chain, rule, packets - _counted(before).get((table, rule), 0))
        for (table, rule), (chain, packets) in _counted_chains(after).items()
        if packets > _counted(before).get((table, rule), 0)
    ]


def _counted(saved: str) -> dict[tuple[str, str], int]:
    return {key: packets for key, (_, packets) in _counted_chains(saved).items()}


def _counted_chains(saved: str) -> dict[tuple[str, str], tuple[str, int]]:
    table = ""
    found: dict[tuple[str, str], tuple[str, int]] = {}
    for line in saved.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif rule := _SAVED_RULE.match(line):
            found[(table, rule.group(3))] = (rule.group(4), int(rule.group(1)))
    return found


@dataclass
class Origins:
    """What made a chain or rule, from the Services the cluster has (see module docstring)."""

    services: Iterable[Service] = ()
    slices: Iterable[EndpointSlice] = ()
    _chains: dict[str, str] = field(init=False, default_factory=dict)
    _addresses: dict[tuple[str, int], str] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        by_service: dict[str, list[EndpointSlice]] = {}
        for slice_ in self.slices:
            if (key := model.service_key_of_slice(slice_)) is not None:
                by_service.setdefault(key, []).append(slice_)
        for service in self.services:
            for port in model.service_ports(service):
                self._add(port, by_service.get(port.name.service_key, []))

    def _add(self, port: model.ServicePortInfo, slices: list[EndpointSlice]) -> None:
        key, protocol = str(port.name), port.name.protocol
        owner = f"Service {port.name}"
        for make in (
            proxy.service_chain,
            proxy.local_chain,
            proxy.external_chain,
            proxy.firewall_chain,
        ):
            self._chains[make(key, protocol)] = owner
        for endpoint in model.endpoints_for(port, slices, ""):
            chain = proxy.endpoint_chain(key, protocol, endpoint.address)
            self._chains[chain] = f"endpoint {endpoint.address} of {owner}"
        for ip in (port.cluster_ip, *port.external_ips, *port.load_balancer_ips):
            self._addresses[(ip, port.port)] = owner
        if port.node_port:
            self._addresses[("", port.node_port)] = f"NodePort of {owner}"

    def of_chain(self, chain: str) -> str:
        """What made ``chain`` ("" when nothing the lab runs did)."""
        if chain in self._chains:
            return self._chains[chain]
        if nft := _NFT_PROXY_CHAIN.match(chain):
            kind, namespace, name, _, port, ip, target = nft.groups()
            owner = f"Service {namespace}/{name}:{port}" if port else f"Service {namespace}/{name}"
            return f"endpoint {ip}:{target} of {owner}" if kind == "endpoint" else owner
        if chain.startswith(proxy.PER_SERVICE_PREFIXES):
            return "kube-proxy: a Service the cluster no longer has"
        if chain.startswith(HOSTPORT_CHAIN_PREFIX):
            return "hostPort (CNI)"
        policy = chain.split("/")
        if policy[0] in (netpol.INGRESS, netpol.EGRESS) and len(policy) == 3:
            return f"NetworkPolicy {policy[1]}/{policy[2]} ({policy[0]})"
        return _FIXED.get(chain, "")

    def of(self, event: TraceEvent) -> str:
        """What made the rule of ``event``: a NetworkPolicy verdict, the maker of the chain
        it jumps to, the Service a refusal is for, or else its own chain's maker."""
        if event.table == netpol.TABLE and event.verdict == "drop":
            return f"NetworkPolicy: no policy selecting the pod allows it ({event.chain})"
        target = event.verdict.split()
        jumps = len(target) == 2 and target[0] in ("jump", "goto")
        if jumps and (origin := self.of_chain(target[1])):
            return origin
        if event.table == netpol.TABLE and not self.of_chain(event.chain):
            return f"NetworkPolicy ({event.chain})"
        if "reject" in event.rule or event.chain == nftrules.REJECT_CHAIN:
            packet = event.packet
            if service := self.of_address(packet.daddr, packet.dport):
                return f"{service}: no endpoints"
        origin = self.of_chain(event.chain)
        if not origin and event.table == nftrules.TABLE:
            return f"kube-proxy (nftables): {event.chain}"
        return origin

    def of_address(self, ip: str, port: int) -> str:
        """The Service whose ClusterIP and port (or NodePort, on any address) these are."""
        return self._addresses.get((ip, port)) or self._addresses.get(("", port), "")


_FIXED: Final = {
    proxy.SERVICES: "kube-proxy: Service addresses",
    proxy.EXTERNAL_SERVICES: "kube-proxy: external addresses",
    proxy.NODEPORTS: "kube-proxy: NodePorts",
    proxy.POSTROUTING: "kube-proxy: masquerade what it marked",
    proxy.MARK_MASQ: "kube-proxy: mark for masquerade",
    proxy.FORWARD: "kube-proxy: forwarding of Service traffic",
    proxy.PROXY_FIREWALL: "kube-proxy: loadBalancerSourceRanges",
    MASQ_CHAIN: "CNI masquerade",
}
