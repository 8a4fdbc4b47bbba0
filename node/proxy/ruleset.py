"""The kube-proxy's iptables rules, rendered from the model: pure functions, no I/O.

The layout is upstream's (pkg/proxy/iptables/proxier.go), so the chains users and tools know
are where they expect them:

``nat``
    ``KUBE-SERVICES`` (jumped to from PREROUTING and OUTPUT) matches each cluster IP, external
    IP and load-balancer IP with its port and jumps to the service port's chain; its last rule
    hands local destinations to ``KUBE-NODEPORTS``.  ``KUBE-SVC-*`` spreads new connections
    over every usable endpoint with ``statistic`` probabilities 1/n, 1/(n-1), ..., 1 (after
    ``recent`` checks under ClientIP affinity); ``KUBE-SVL-*`` does the same over the node's
    own endpoints (the Local traffic policies).  ``KUBE-EXT-*`` receives NodePort, external-IP
    and load-balancer traffic: under externalTrafficPolicy Cluster it masquerades and goes to
    ``KUBE-SVC-*``; under Local it keeps the source IP and goes to ``KUBE-SVL-*``, except that
    traffic from pods and from the node itself is short-circuited to ``KUBE-SVC-*``.
    ``KUBE-FW-*`` admits load-balancer traffic from ``loadBalancerSourceRanges`` only.
    ``KUBE-SEP-*`` DNATs to one endpoint, and marks for masquerade the packets an endpoint
    sends to itself through its Service (hairpin).  ``KUBE-MARK-MASQ`` sets the mark that
    ``KUBE-POSTROUTING`` (from POSTROUTING) turns into MASQUERADE.
``filter``
    ``KUBE-SERVICES`` and ``KUBE-EXTERNAL-SERVICES`` REJECT (icmp port-unreachable) traffic to
    services without endpoints, and DROP external traffic a Local policy cannot serve;
    ``KUBE-NODEPORTS`` accepts health-check node ports; ``KUBE-PROXY-FIREWALL`` drops
    load-balancer traffic ``KUBE-FW-*`` did not admit; ``KUBE-FORWARD`` accepts marked and
    established forwarded traffic.

Rendering is split in two so a sync costs what changed: :func:`render_service` turns one
service port and its endpoints into a :class:`ServiceRules` (its lines in the top-level chains,
and its own chains), which the proxier caches; :func:`assemble` joins cached pieces into the
restore input of a table.  A full sync declares (and so flushes) every chain and writes all
rules; a partial sync declares and writes only the top-level chains and the changed service
ports' chains, leaving the others as they are in the kernel.  Stale chains are flushed and
deleted (``-X``) in the same transaction, after everything referencing them is rewritten.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from node.proxy import names
from node.proxy.model import EndpointInfo, ServicePortInfo, ServicePortName, reach

MASQ_MARK = "0x4000"

NAT_TOP_CHAINS = (names.SERVICES, names.NODEPORTS, names.POSTROUTING, names.MARK_MASQ)
FILTER_TOP_CHAINS = (
    names.SERVICES,
    names.EXTERNAL_SERVICES,
    names.FORWARD,
    names.NODEPORTS,
    names.PROXY_FIREWALL,
)
NEW = "-m conntrack --ctstate NEW"
EXTERNALLY_VISIBLE = "kubernetes externally-visible service portals"


@dataclass(frozen=True)
class Jump:
    """A rule in a built-in chain that the proxier ensures separately (never flushes)."""

    table: str
    parent: str
    chain: str
    comment: str
    match: str = ""

    def spec(self) -> str:
        match = f" {self.match}" if self.match else ""
        return f'-m comment --comment "{self.comment}"{match} -j {self.chain}'


JUMPS = (
    Jump("filter", "INPUT", names.EXTERNAL_SERVICES, EXTERNALLY_VISIBLE, NEW),
    Jump("filter", "FORWARD", names.EXTERNAL_SERVICES, EXTERNALLY_VISIBLE, NEW),
    Jump("filter", "INPUT", names.NODEPORTS, "kubernetes health check service ports"),
    Jump("filter", "FORWARD", names.SERVICES, "kubernetes service portals", NEW),
    Jump("filter", "OUTPUT", names.SERVICES, "kubernetes service portals", NEW),
    Jump("filter", "FORWARD", names.FORWARD, "kubernetes forwarding rules"),
    Jump("filter", "INPUT", names.PROXY_FIREWALL, "kubernetes load balancer firewall", NEW),
    Jump("filter", "OUTPUT", names.PROXY_FIREWALL, "kubernetes load balancer firewall", NEW),
    Jump("filter", "FORWARD", names.PROXY_FIREWALL, "kubernetes load balancer firewall", NEW),
    Jump("nat", "OUTPUT", names.SERVICES, "kubernetes service portals"),
    Jump("nat", "PREROUTING", names.SERVICES, "kubernetes service portals"),
    Jump("nat", "POSTROUTING", names.POSTROUTING, "kubernetes postrouting rules"),
)


@dataclass(frozen=True)
class ProxyConfig:
    """Node-wide settings the rules depend on."""

    cluster_cidr: str | None = None
    """Traffic to a cluster IP from outside it is masqueraded; None: no such rule."""
    masquerade_all: bool = False
    node_ips: tuple[str, ...] | None = None
    """Addresses NodePorts answer on; None: every local address (``--dst-type LOCAL``)."""


@dataclass(frozen=True)
class ServiceRules:
    """One service port's rules: its lines in the top-level chains and its own chains."""

    nat_services: tuple[str, ...] = ()
    nat_nodeports: tuple[str, ...] = ()
    filter_services: tuple[str, ...] = ()
    filter_external: tuple[str, ...] = ()
    filter_nodeports: tuple[str, ...] = ()
    filter_firewall: tuple[str, ...] = ()
    chains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """nat chains owned by this service port (KUBE-SVC/SVL/EXT/FW/SEP), name → rules."""


@dataclass
class _Builder:
    nat_services: list[str] = field(default_factory=list)
    nat_nodeports: list[str] = field(default_factory=list)
    filter_services: list[str] = field(default_factory=list)
    filter_external: list[str] = field(default_factory=list)
    filter_nodeports: list[str] = field(default_factory=list)
    filter_firewall: list[str] = field(default_factory=list)
    chains: dict[str, list[str]] = field(default_factory=dict)

    def chain(self, name: str) -> list[str]:
        return self.chains.setdefault(name, [])

    def freeze(self) -> ServiceRules:
        return ServiceRules(
            tuple(self.nat_services),
            tuple(self.nat_nodeports),
            tuple(self.filter_services),
            tuple(self.filter_external),
            tuple(self.filter_nodeports),
            tuple(self.filter_firewall),
            {name: tuple(rules) for name, rules in self.chains.items()},
        )


def probability(n: int) -> str:
    """The statistic probability that picks one of ``n`` remaining endpoints, as upstream
    prints it."""
    return f"{1.0 / n:0.10f}"


def render_service(
    port: ServicePortInfo, endpoints: Sequence[EndpointInfo], config: ProxyConfig
) -> ServiceRules:
    """The rules of one service port (see the module docstring for the layout)."""
    name, protocol = str(port.name), port.protocol
    digest = names.port_proto_hash(name, protocol)
    svc, svl = names.SERVICE_PREFIX + digest, names.LOCAL_PREFIX + digest
    ext, fw = names.EXTERNAL_PREFIX + digest, names.FIREWALL_PREFIX + digest
    found = reach(port, endpoints)
    cluster_eps, local_eps, has_endpoints = found.cluster, found.local, found.has_endpoints
    has_internal, has_external = found.has_internal, found.has_external
    internal_chain = svl if port.internal_policy_local else svc
    external_policy_chain = svl if port.external_policy_local else svc
    uses_ext = has_endpoints and port.externally_accessible
    uses_fw = has_endpoints and bool(port.source_ranges)
    lb_chain = fw if uses_fw else ext
    out = _Builder()

    def reject_target(local_policy: bool) -> tuple[str, str]:
        if not has_endpoints or not local_policy:
            return "REJECT", f'"{name} has no endpoints"'
        return "DROP", f'"{name} has no local endpoints"'

    match = f"-m {protocol} -p {protocol}"
    vip = f"{match} -d {port.cluster_ip} --dport {port.port}"
    # Cluster IP.
    if has_internal:
        out.nat_services.append(
            f'-A {names.SERVICES} -m comment --comment "{name} cluster IP" {vip} '
            f"-j {internal_chain}"
        )
    else:
        target, comment = reject_target(port.internal_policy_local)
        out.filter_services.append(
            f"-A {names.SERVICES} -m comment --comment {comment} {vip} -j {target}"
        )
    # External IPs, load-balancer IPs, node port.
    ext_target, ext_comment = reject_target(port.external_policy_local)
    for ip, kind, chain in [
        *((ip, "external IP", ext) for ip in port.external_ips),
        *((ip, "loadbalancer IP", lb_chain) for ip in port.load_balancer_ips),
    ]:
        dest = f"{match} -d {ip} --dport {port.port}"
        if has_endpoints:
            out.nat_services.append(
                f'-A {names.SERVICES} -m comment --comment "{name} {kind}" {dest} -j {chain}'
            )
        if not has_external:
            out.filter_external.append(
                f"-A {names.EXTERNAL_SERVICES} -m comment --comment {ext_comment} {dest} "
                f"-j {ext_target}"
            )
    if uses_fw:
        out.filter_firewall += [
            f'-A {names.PROXY_FIREWALL} -m comment --comment "{name} traffic not accepted by '
            f'{fw}" {match} -d {ip} --dport {port.port} -j DROP'
            for ip in port.load_balancer_ips
        ]
    if port.node_port:
        if has_endpoints:
            out.nat_nodeports.append(
                f"-A {names.NODEPORTS} -m comment --comment {name} {match} "
                f"--dport {port.node_port} -j {ext}"
            )
        if not has_external:
            out.filter_external.append(
                f"-A {names.EXTERNAL_SERVICES} -m comment --comment {ext_comment} "
                f"-m addrtype --dst-type LOCAL {match} --dport {port.node_port} -j {ext_target}"
            )
    if port.health_check_node_port:
        out.filter_nodeports.append(
            f'-A {names.NODEPORTS} -m comment --comment "{name} health check node port" '
            f"-m tcp -p tcp --dport {port.health_check_node_port} -j ACCEPT"
        )
    # Masquerade of cluster-IP traffic that does not come from a pod.
    if has_internal:
        masq = out.chain(internal_chain)
        if config.masquerade_all:
            masq.append(
                f'-A {internal_chain} -m comment --comment "{name} cluster IP" {vip} '
                f"-j {names.MARK_MASQ}"
            )
        elif config.cluster_cidr:
            masq.append(
                f'-A {internal_chain} -m comment --comment "{name} cluster IP" {vip} '
                f"! -s {config.cluster_cidr} -j {names.MARK_MASQ}"
            )
    if uses_ext:
        _external_chain(out, port, ext, svc, external_policy_chain, has_external, config)
    if uses_fw:
        _firewall_chain(out, port, fw, ext)
    if cluster_eps and port.uses_cluster_endpoints:
        _spread(out, port, svc, cluster_eps)
    if local_eps and port.uses_local_endpoints:
        _spread(out, port, svl, local_eps)
    return out.freeze()


def _external_chain(
    out: _Builder,
    port: ServicePortInfo,
    ext: str,
    svc: str,
    policy_chain: str,
    has_external: bool,
    config: ProxyConfig,
) -> None:
    name = str(port.name)
    rules = out.chain(ext)
    if not port.external_policy_local:
        rules.append(
            f'-A {ext} -m comment --comment "masquerade traffic for {name} external destinations"'
            f" -j {names.MARK_MASQ}"
        )
    else:
        if config.cluster_cidr:
            rules.append(
                f'-A {ext} -m comment --comment "pod traffic for {name} external destinations" '
                f"-s {config.cluster_cidr} -j {svc}"
            )
        rules.append(
            f'-A {ext} -m comment --comment "masquerade LOCAL traffic for {name} external '
            f'destinations" -m addrtype --src-type LOCAL -j {names.MARK_MASQ}'
        )
        rules.append(
            f'-A {ext} -m comment --comment "route LOCAL traffic for {name} external '
            f'destinations" -m addrtype --src-type LOCAL -j {svc}'
        )
    if has_external:
        rules.append(f"-A {ext} -j {policy_chain}")


def _firewall_chain(out: _Builder, port: ServicePortInfo, fw: str, ext: str) -> None:
    name = str(port.name)
    out.chain(fw).extend(
        f'-A {fw} -m comment --comment "{name} loadbalancer IP" -s {source} -j {ext}'
        for source in port.source_ranges
    )


def _spread(
    out: _Builder, port: ServicePortInfo, chain: str, endpoints: Sequence[EndpointInfo]
) -> None:
    """The service chain's jumps to its endpoints, and the endpoint chains."""
    name, protocol = str(port.name), port.protocol
    rules = out.chain(chain)
    seps = [names.endpoint_chain(name, port.name.protocol, e.address) for e in endpoints]
    if port.affinity_seconds:
        rules += [
            f'-A {chain} -m comment --comment "{name} -> {e.address}" -m recent --name {sep} '
            f"--rcheck --seconds {port.affinity_seconds} --reap -j {sep}"
            for e, sep in zip(endpoints, seps, strict=True)
        ]
    count = len(endpoints)
    for i, (e, sep) in enumerate(zip(endpoints, seps, strict=True)):
        statistic = (
            f" -m statistic --mode random --probability {probability(count - i)}"
            if i < count - 1
            else ""
        )
        rules.append(f'-A {chain} -m comment --comment "{name} -> {e.address}"{statistic} -j {sep}')
    for e, sep in zip(endpoints, seps, strict=True):
        if sep in out.chains:
            continue
        recent = f" -m recent --name {sep} --set" if port.affinity_seconds else ""
        out.chain(sep).extend(
            (
                f"-A {sep} -m comment --comment {name} -s {e.ip} -j {names.MARK_MASQ}",
                f"-A {sep} -m comment --comment {name}{recent} -m {protocol} -p {protocol} "
                f"-j DNAT --to-destination {e.address}",
            )
        )


@dataclass(frozen=True)
class Ruleset:
    """The restore lines of both tables for one sync, and the chains it leaves active."""

    filter: list[str]
    nat: list[str]
    rule_count: int
    """Rules written (both tables)."""


def assemble(
    rules: Mapping[ServicePortName, ServiceRules],
    config: ProxyConfig,
    *,
    changed: Collection[ServicePortName] | None = None,
    stale_chains: Iterable[str] = (),
) -> Ruleset:
    """The restore input of both tables: every chain when ``changed`` is None (a full sync),
    else only the top-level chains and those of the ``changed`` service ports.  The chains in
    ``stale_chains`` are flushed and deleted at the end of the nat transaction."""
    ordered = sorted(rules.items())
    written = ordered if changed is None else [(k, r) for k, r in ordered if k in changed]
    stale = sorted(set(stale_chains))
    nat_chains = [c for _, r in written for c in r.chains]
    nat = [f":{c} - [0:0]" for c in (*NAT_TOP_CHAINS, *nat_chains, *stale)]
    nat += [
        f"-A {names.POSTROUTING} -m mark ! --mark {MASQ_MARK}/{MASQ_MARK} -j RETURN",
        f"-A {names.POSTROUTING} -j MARK --xor-mark {MASQ_MARK}",
        f'-A {names.POSTROUTING} -m comment --comment "kubernetes service traffic requiring SNAT"'
        " -j MASQUERADE --random-fully",
        f"-A {names.MARK_MASQ} -j MARK --or-mark {MASQ_MARK}",
    ]
    for _, r in ordered:
        nat += r.nat_services
    nat += _nodeports_jumps(config)
    for _, r in ordered:
        nat += r.nat_nodeports
    for _, r in written:
        for chain_rules in r.chains.values():
            nat += chain_rules
    nat += [f"-X {c}" for c in stale]
    filter_ = [f":{c} - [0:0]" for c in FILTER_TOP_CHAINS]
    filter_ += [
        f"-A {names.FORWARD} -m conntrack --ctstate INVALID -j DROP",
        f'-A {names.FORWARD} -m comment --comment "kubernetes forwarding rules" '
        f"-m mark --mark {MASQ_MARK}/{MASQ_MARK} -j ACCEPT",
        f'-A {names.FORWARD} -m comment --comment "kubernetes forwarding conntrack rule" '
        "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
    ]
    for _, r in ordered:
        filter_ += r.filter_services
        filter_ += r.filter_external
        filter_ += r.filter_nodeports
        filter_ += r.filter_firewall
    count = sum(1 for line in (*nat, *filter_) if line.startswith("-A "))
    return Ruleset(filter=filter_, nat=nat, rule_count=count)


def _nodeports_jumps(config: ProxyConfig) -> list[str]:
    comment = (
        '-m comment --comment "kubernetes service nodeports; '
        'NOTE: this must be the last rule in this chain"'
    )
    if config.node_ips is None:
        return [f"-A {names.SERVICES} {comment} -m addrtype --dst-type LOCAL -j {names.NODEPORTS}"]
    return [f"-A {names.SERVICES} {comment} -d {ip} -j {names.NODEPORTS}" for ip in config.node_ips]


def missing_jumps(table: str, saved: str) -> list[str]:
    """``-I`` lines for the jumps of :data:`JUMPS` into ``table`` that ``saved`` (its
    ``iptables-save``) lacks; inserting them puts them first, ahead of other tools' rules."""
    present = saved.splitlines()
    return [
        f"-I {jump.parent} {jump.spec()}"
        for jump in reversed(JUMPS)
        if jump.table == table
        and not any(
            line.startswith(f"-A {jump.parent} ") and line.endswith(f"-j {jump.chain}")
            for line in present
        )
    ]


def owned_chains(saved: str) -> set[str]:
    """The per-service chains that ``saved`` (an ``iptables-save`` of nat) declares."""
    return {
        line[1:].split(" ", 1)[0]
        for line in saved.splitlines()
        if line.startswith(":") and names.is_per_service(line[1:])
    }
