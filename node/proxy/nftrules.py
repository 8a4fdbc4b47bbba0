"""The kube-proxy's nftables rules, rendered from the model: pure functions, no I/O.

The layout is upstream's (pkg/proxy/nftables/proxier.go), in one table, ``ip kube-proxy``
(IPv4 only, as the model is), so nothing of iptables-nft's tables or other agents' tables is
touched:

base chains
    ``nat-prerouting`` and ``nat-output`` (priority dstnat) jump to ``services``;
    ``nat-postrouting`` (srcnat) to ``masquerading``; the filter chains run before DNAT
    (dstnat - 10, and ``filter-output-post-dnat`` at dstnat + 10) and jump, for new
    connections, to ``firewall-check``, ``service-endpoints-check``,
    ``nodeport-endpoints-check`` and ``cluster-ips-check``.
dispatch
    ``services`` looks the destination up in two verdict maps: ``service-ips`` (address .
    protocol . port of cluster IPs, external IPs and load-balancer IPs) and
    ``service-nodeports`` (protocol . port, for local destinations: every local address but
    127.0.0.0/8, or the ``nodeport-ips`` set when ``--nodeport-addresses`` is given).
no endpoints
    ``no-endpoint-services`` and ``no-endpoint-nodeports`` map a destination to ``goto
    reject-chain`` (no endpoints at all: refused at once) or ``drop`` (a Local traffic
    policy without local endpoints); ``cluster-ips-check`` rejects other ports of the
    ``cluster-ips`` set.
per service port
    ``service-HASH-ns/name/proto/port`` spreads new connections (after ``affinity-*`` set
    lookups under ClientIP affinity: sets with a timeout that each endpoint chain updates)
    with ``numgen random`` over ``endpoint-HASH-...__ip/port`` chains, one rule per endpoint
    where upstream has one anonymous verdict map (:func:`_spread` says why);
    ``local-*`` does the same over the node's own endpoints; ``external-*`` receives
    NodePort, external-IP and load-balancer traffic (masquerades under the Cluster policy;
    under Local keeps the source and short-circuits pod and node traffic to ``service-*``);
    ``firewall-*`` (through the ``firewall-ips`` map) drops load-balancer traffic from
    outside ``loadBalancerSourceRanges``.  Endpoint chains mark hairpin traffic, and
    ``mark-for-masquerade`` sets the mark ``masquerading`` turns into masquerade.

Rendering is split so a sync costs what changed: :func:`render_service` turns one service
port into :class:`NftServiceRules` (its chains, affinity sets, and map and set elements),
which the proxier caches; :func:`setup` is the top of the table a full sync rewrites; and
:func:`transaction` joins them into one ``nft -f`` script, every chain (full) or only the
changed service ports' chains and the element differences (partial).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from node.proxy import names
from node.proxy.model import EndpointInfo, ServicePortInfo, ServicePortName, reach
from node.proxy.ruleset import MASQ_MARK, ProxyConfig

FAMILY = "ip"
TABLE = "kube-proxy"
PREFIX = f"{FAMILY} {TABLE}"

SERVICES = "services"
SERVICE_IPS = "service-ips"
SERVICE_NODEPORTS = "service-nodeports"
NODEPORT_IPS = "nodeport-ips"
CLUSTER_IPS = "cluster-ips"
SERVICE_ENDPOINTS_CHECK = "service-endpoints-check"
NODEPORT_ENDPOINTS_CHECK = "nodeport-endpoints-check"
NO_ENDPOINT_SERVICES = "no-endpoint-services"
NO_ENDPOINT_NODEPORTS = "no-endpoint-nodeports"
REJECT_CHAIN = "reject-chain"
CLUSTER_IPS_CHECK = "cluster-ips-check"
FIREWALL_IPS = "firewall-ips"
FIREWALL_CHECK = "firewall-check"
MARK_MASQ = "mark-for-masquerade"
MASQUERADING = "masquerading"

BASE_CHAINS = (
    # name, type, hook, priority (dstnat is -100, srcnat 100): filters see pre-DNAT addresses.
    ("filter-prerouting", "filter", "prerouting", -110),
    ("filter-input", "filter", "input", -110),
    ("filter-forward", "filter", "forward", -110),
    ("filter-output", "filter", "output", -110),
    ("filter-output-post-dnat", "filter", "output", -90),
    ("nat-prerouting", "nat", "prerouting", -100),
    ("nat-output", "nat", "output", -100),
    ("nat-postrouting", "nat", "postrouting", 100),
)
NEW = "ct state new "
JUMPS = (
    # target, from, condition
    (NODEPORT_ENDPOINTS_CHECK, "filter-input", NEW),
    (SERVICE_ENDPOINTS_CHECK, "filter-input", NEW),
    (SERVICE_ENDPOINTS_CHECK, "filter-forward", NEW),
    (SERVICE_ENDPOINTS_CHECK, "filter-output", NEW),
    (FIREWALL_CHECK, "filter-prerouting", NEW),
    (FIREWALL_CHECK, "filter-output", NEW),
    (SERVICES, "nat-output", ""),
    (SERVICES, "nat-prerouting", ""),
    (MASQUERADING, "nat-postrouting", ""),
    (CLUSTER_IPS_CHECK, "filter-forward", NEW),
    (CLUSTER_IPS_CHECK, "filter-output-post-dnat", NEW),
)
TOP_CHAINS = tuple(
    dict.fromkeys(
        [
            *(name for name, *_ in BASE_CHAINS),
            *(target for target, *_ in JUMPS),
            MARK_MASQ,
            REJECT_CHAIN,
        ]
    )
)
ADDRESS_PORT = "ipv4_addr . inet_proto . inet_service : verdict"
PORT = "inet_proto . inet_service : verdict"
ELEMENT_CONTAINERS = {
    # name: (kind, type, comment); their elements come from the service ports.
    CLUSTER_IPS: ("set", "ipv4_addr", "Active ClusterIPs"),
    NO_ENDPOINT_SERVICES: (
        "map",
        ADDRESS_PORT,
        "vmap to drop or reject packets to services with no endpoints",
    ),
    NO_ENDPOINT_NODEPORTS: (
        "map",
        PORT,
        "vmap to drop or reject packets to service nodeports with no endpoints",
    ),
    FIREWALL_IPS: (
        "map",
        ADDRESS_PORT,
        "destinations that are subject to LoadBalancerSourceRanges",
    ),
    SERVICE_IPS: ("map", ADDRESS_PORT, "ClusterIP, ExternalIP and LoadBalancer IP traffic"),
    SERVICE_NODEPORTS: ("map", PORT, "NodePort traffic"),
}
LOOPBACK = "127.0.0.0/8"


@dataclass(frozen=True)
class NftServiceRules:
    """One service port's share of the table."""

    chains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Its chains (service, local, external, firewall, endpoint): name → ``add rule`` lines."""
    affinity_sets: Mapping[str, int] = field(default_factory=dict)
    """ClientIP affinity sets: name → timeout in seconds."""
    elements: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Its elements of :data:`ELEMENT_CONTAINERS`: container → key → verdict ("" in a set)."""


class _Builder:
    def __init__(self) -> None:
        self.chains: dict[str, list[str]] = {}
        self.sets: dict[str, int] = {}
        self.elements: dict[str, dict[str, str]] = {}

    def rule(self, chain: str, body: str) -> None:
        self.chains.setdefault(chain, []).append(f"add rule {PREFIX} {chain} {body}")

    def element(self, container: str, key: str, value: str = "") -> None:
        self.elements.setdefault(container, {})[key] = value

    def freeze(self) -> NftServiceRules:
        return NftServiceRules(
            {name: tuple(rules) for name, rules in self.chains.items()},
            dict(self.sets),
            {name: dict(elements) for name, elements in self.elements.items()},
        )


def render_service(
    port: ServicePortInfo, endpoints: Sequence[EndpointInfo], config: ProxyConfig
) -> NftServiceRules:
    """The chains, sets and elements of one service port (see the module docstring)."""
    protocol = port.protocol
    base = names.nft_service_base(port.name)
    svc, svl = names.NFT_SERVICE_PREFIX + base, names.NFT_LOCAL_PREFIX + base
    ext, fw = names.NFT_EXTERNAL_PREFIX + base, names.NFT_FIREWALL_PREFIX + base
    found = reach(port, endpoints)
    cluster_eps, local_eps, has_endpoints = found.cluster, found.local, found.has_endpoints
    has_internal, has_external = found.has_internal, found.has_external
    internal_chain = svl if port.internal_policy_local else svc
    external_policy_chain = svl if port.external_policy_local else svc
    # Refused at once when there is no endpoint at all; dropped when only a Local policy
    # leaves this node without one.
    no_endpoints = "drop" if has_endpoints else f"goto {REJECT_CHAIN}"
    out = _Builder()

    def key(ip: str) -> str:
        return f"{ip} . {protocol} . {port.port}"

    out.element(CLUSTER_IPS, port.cluster_ip)
    if has_internal:
        out.element(SERVICE_IPS, key(port.cluster_ip), f"goto {internal_chain}")
    else:
        out.element(NO_ENDPOINT_SERVICES, key(port.cluster_ip), no_endpoints)
    uses_fw = bool(port.load_balancer_ips and port.source_ranges)
    for ip in (*port.external_ips, *port.load_balancer_ips):
        if has_endpoints:
            out.element(SERVICE_IPS, key(ip), f"goto {ext}")
        if not has_external:
            out.element(NO_ENDPOINT_SERVICES, key(ip), no_endpoints)
    if uses_fw:
        for ip in port.load_balancer_ips:
            out.element(FIREWALL_IPS, key(ip), f"goto {fw}")
        ranges = ", ".join(port.source_ranges)
        out.rule(fw, f"ip saddr != {{ {ranges} }} drop")
    if port.node_port:
        node_port = f"{protocol} . {port.node_port}"
        if has_endpoints:
            out.element(SERVICE_NODEPORTS, node_port, f"goto {ext}")
        if not has_external:
            out.element(NO_ENDPOINT_NODEPORTS, node_port, no_endpoints)
    if has_internal:
        vip = f"ip daddr {port.cluster_ip} {protocol} dport {port.port}"
        if config.masquerade_all:
            out.rule(internal_chain, f"{vip} jump {MARK_MASQ}")
        elif config.cluster_cidr:
            out.rule(internal_chain, f"{vip} ip saddr != {config.cluster_cidr} jump {MARK_MASQ}")
    if has_endpoints and port.externally_accessible:
        if not port.external_policy_local:
            out.rule(ext, f"jump {MARK_MASQ}")
        else:
            if config.cluster_cidr:
                pods = f"ip saddr {config.cluster_cidr}"
                out.rule(ext, f'{pods} goto {svc} comment "short-circuit pod traffic"')
            out.rule(
                ext, f'fib saddr type local jump {MARK_MASQ} comment "masquerade local traffic"'
            )
            out.rule(ext, f'fib saddr type local goto {svc} comment "short-circuit local traffic"')
        if has_external:
            out.rule(ext, f"goto {external_policy_chain}")
    reachable = {e.address: e for e in (*cluster_eps, *local_eps)}
    bases = {a: names.nft_endpoint_base(port.name, e.ip, e.port) for a, e in reachable.items()}
    for endpoint in reachable.values():
        epbase = bases[endpoint.address]
        chain = names.NFT_ENDPOINT_PREFIX + epbase
        out.rule(chain, f"ip saddr {endpoint.ip} jump {MARK_MASQ}")
        if port.affinity_seconds:
            affinity = names.NFT_AFFINITY_PREFIX + epbase
            out.sets[affinity] = port.affinity_seconds
            out.rule(chain, f"update @{affinity} {{ ip saddr }}")
        out.rule(chain, f"meta l4proto {protocol} dnat to {endpoint.address}")
    if cluster_eps:
        _spread(out, port, svc, [bases[e.address] for e in cluster_eps])
    if local_eps:
        _spread(out, port, svl, [bases[e.address] for e in local_eps])
    return out.freeze()


def _spread(out: _Builder, port: ServicePortInfo, chain: str, bases: Sequence[str]) -> None:
    """The service chain's affinity lookups and its random choice of an endpoint chain.

    Upstream writes the choice as one ``numgen random mod N vmap { 0 : goto ..., ... }``
    rule, an anonymous verdict map per chain; the kernel's cost of adding a set grows with
    the sets already in the table and the transaction (bench/README.md, nftproxy), which
    upstream met too (kubernetes#139513) and answered for one endpoint with a plain
    ``goto`` (kubernetes#140723).  Here every count is written without a set, as the
    iptables mode's probabilities: the rule for the i-th of N endpoints matches with
    probability 1/(N-i) (``numgen random`` draws anew in each rule), so each endpoint is
    chosen with probability 1/N, and the last one is a plain ``goto``.  ``bases``: the
    endpoints' name bases."""
    if port.affinity_seconds:
        for base in bases:
            affinity, target = names.NFT_AFFINITY_PREFIX + base, names.NFT_ENDPOINT_PREFIX + base
            out.rule(chain, f"ip saddr @{affinity} goto {target}")
    for i, base in enumerate(bases):
        left = len(bases) - i
        choice = f"numgen random mod {left} 0 " if left > 1 else ""
        out.rule(chain, f"{choice}goto {names.NFT_ENDPOINT_PREFIX}{base}")


def setup(config: ProxyConfig, *, recreate_base_chains: bool) -> list[str]:
    """The top of the table, rewritten by every full sync: the table, its base and top-level
    chains and their rules, the sets and maps (elements flushed: the sync adds them all).

    ``recreate_base_chains``: delete the base chains first (once per process, as upstream
    does), so a table written by another version with other priorities is replaced."""
    lines = [f'add table {PREFIX} {{ comment "rules for kube-proxy" ; }}']
    if recreate_base_chains:
        for name, *_ in BASE_CHAINS:
            lines += [f"add chain {PREFIX} {name}", f"delete chain {PREFIX} {name}"]
    for name, kind, hook, priority in BASE_CHAINS:
        lines.append(
            f"add chain {PREFIX} {name} {{ type {kind} hook {hook} priority {priority} ; }}"
        )
    lines += _ensure(TOP_CHAINS)
    for kind_name, (kind, type_, comment) in ELEMENT_CONTAINERS.items():
        lines.append(f'add {kind} {PREFIX} {kind_name} {{ type {type_} ; comment "{comment}" ; }}')
        lines.append(f"flush {kind} {PREFIX} {kind_name}")
    lines.append(
        f'add set {PREFIX} {NODEPORT_IPS} {{ type ipv4_addr ; comment "IPs that accept NodePort '
        'traffic" ; }'
    )
    if config.node_ips is None:
        lines.append(f"delete set {PREFIX} {NODEPORT_IPS}")
        local = f"ip daddr != {LOOPBACK}"
        nodeport_check = f"fib daddr type local {local}"
    else:
        lines.append(f"flush set {PREFIX} {NODEPORT_IPS}")
        ips = [ip for ip in config.node_ips if not ip.startswith("127.")]
        if ips:
            lines.append(f"add element {PREFIX} {NODEPORT_IPS} {{ {', '.join(ips)} }}")
        nodeport_check = f"ip daddr @{NODEPORT_IPS}"
    for target, source, condition in JUMPS:
        lines.append(f"add rule {PREFIX} {source} {condition}jump {target}")
    rules = {
        MARK_MASQ: [f"meta mark set meta mark | {MASQ_MARK}"],
        MASQUERADING: [
            f"meta mark & {MASQ_MARK} == 0 return",
            f"meta mark set meta mark ^ {MASQ_MARK}",
            "masquerade fully-random",
        ],
        CLUSTER_IPS_CHECK: [
            f"ip daddr @{CLUSTER_IPS} reject "
            'comment "Reject traffic to invalid ports of ClusterIPs"'
        ],
        REJECT_CHAIN: ["reject"],
        SERVICE_ENDPOINTS_CHECK: [
            f"ip daddr . meta l4proto . th dport vmap @{NO_ENDPOINT_SERVICES}"
        ],
        NODEPORT_ENDPOINTS_CHECK: [
            f"{nodeport_check} meta l4proto . th dport vmap @{NO_ENDPOINT_NODEPORTS}"
        ],
        FIREWALL_CHECK: [f"ip daddr . meta l4proto . th dport vmap @{FIREWALL_IPS}"],
        SERVICES: [
            f"ip daddr . meta l4proto . th dport vmap @{SERVICE_IPS}",
            f"{nodeport_check} meta l4proto . th dport vmap @{SERVICE_NODEPORTS}",
        ],
    }
    lines += [
        f"add rule {PREFIX} {chain} {body}" for chain, bodies in rules.items() for body in bodies
    ]
    return lines


def _ensure(chains: Iterable[str]) -> list[str]:
    """Create each chain if missing and empty it: its rules are rewritten next."""
    return [
        line for c in chains for line in (f"add chain {PREFIX} {c}", f"flush chain {PREFIX} {c}")
    ]


def merged_elements(rules: Mapping[ServicePortName, NftServiceRules]) -> dict[str, dict[str, str]]:
    """Every service port's elements, per container (a key two ports claim: the later one's,
    in service port order, as a rewrite would leave it)."""
    merged: dict[str, dict[str, str]] = {name: {} for name in ELEMENT_CONTAINERS}
    for _, r in sorted(rules.items()):
        for container, elements in r.elements.items():
            merged[container].update(elements)
    return merged


def element_changes(
    old: Mapping[str, Mapping[str, str]], new: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """``delete element`` lines for keys gone or whose verdict changed, then ``add element``
    lines for keys new or changed (nft's ``add`` keeps an existing key's old verdict)."""
    deletes: list[str] = []
    adds: list[str] = []
    for container in ELEMENT_CONTAINERS:
        before, after = old.get(container, {}), new.get(container, {})
        gone = [k for k, v in before.items() if after.get(k) != v]
        added = {k: v for k, v in after.items() if before.get(k) != v}
        deletes += _element_lines("delete", container, {k: "" for k in gone})
        adds += _element_lines("add", container, added)
    return deletes + adds


def _element_lines(op: str, container: str, elements: Mapping[str, str]) -> list[str]:
    if not elements:
        return []
    items = ", ".join(f"{k} : {v}" if v else k for k, v in elements.items())
    return [f"{op} element {PREFIX} {container} {{ {items} }}"]


def transaction(
    rules: Mapping[ServicePortName, NftServiceRules],
    *,
    top: Sequence[str],
    programmed: Mapping[str, Mapping[str, str]],
    desired: Mapping[str, Mapping[str, str]],
    changed: Collection[ServicePortName] | None = None,
    stale_chains: Iterable[str] = (),
    stale_sets: Iterable[str] = (),
) -> list[str]:
    """One sync's script.  Full (``changed`` None): ``top`` (:func:`setup`, which flushes the
    sets and maps), then every service port's chains and sets and every element.  Partial:
    only the ``changed`` ports' chains and sets, and the differences between the
    ``programmed`` and ``desired`` elements.  Then the stale chains are flushed (deleted by
    :func:`delete_chains`, once nothing refers to them) and the stale affinity sets deleted."""
    ordered = sorted(rules.items())
    written = [r for k, r in ordered if changed is None or k in changed]
    lines = list(top)
    lines += _ensure(c for r in written for c in r.chains)
    lines += [
        f"add set {PREFIX} {name} "
        f"{{ type ipv4_addr ; flags dynamic,timeout ; timeout {seconds}s ; }}"
        for r in written
        for name, seconds in r.affinity_sets.items()
    ]
    lines += [line for r in written for chain_rules in r.chains.values() for line in chain_rules]
    lines += element_changes({} if changed is None else programmed, desired)
    lines += [f"flush chain {PREFIX} {c}" for c in sorted(set(stale_chains))]
    lines += [f"delete set {PREFIX} {s}" for s in sorted(set(stale_sets))]
    return lines


def delete_chains(chains: Iterable[str]) -> list[str]:
    """Delete emptied chains nothing refers to any more: a transaction of its own, after the
    one that removed the references (kernels before 6.2 release a chain a deleted map
    element pointed to only some time after that transaction, as upstream found)."""
    return [f"delete chain {PREFIX} {c}" for c in sorted(chains)]


def cleanup() -> list[str]:
    """Remove the table whether or not it exists (adding it first keeps ``delete`` from
    failing): what the other proxy modes run at start, as upstream's do."""
    return [f"add table {PREFIX}", f"delete table {PREFIX}"]
