"""Checks of the node's network: reverse-path filtering, iptables backends, conntrack, routes
to other nodes' pods, MTUs, and kube-proxy rules left for Services that no longer exist.

- ``rp-filter``: strict reverse-path filtering (1) on ``all``, ``default`` (what new pod veths
  get) or an interface drops packets whose reply would leave by another interface, as pod
  and NodePort traffic may; repaired by loose mode (2), which keeps the spoofing protection.
- ``iptables-backends``: rules in both iptables-legacy and iptables-nft in one namespace are
  all active, but each tool shows only its own (lab notes), so half the node's rules are
  invisible to whoever debugs it (k3s' check-config warns of the same mix).
- ``conntrack``: the table must exist, and fill below its size (a full table drops new
  connections); kube-proxy wants at least 131072 entries (its ``--conntrack-min``).
- ``pod-cidr-routes``: the route the kernel picks for every other Node's podCIDR must lead
  somewhere (a gateway or a link), not nowhere.
- ``mtu``: the pod network's MTU (the CNI configuration's, the bridge's, the pods' host
  veths') must be one value, no larger than the uplink's.
- ``leftover-service-rules``: kube-proxy's per-Service chains (iptables mode: ``KUBE-SVC-``
  and the others of :mod:`node.proxy.names`; nftables mode: the ``/``-named chains of ``ip
  kube-proxy``) for Services the API no longer has.  Repaired, in iptables mode, by deleting
  them (with the jumps to them) in one restore, which is what kube-proxy's next full sync
  does; nftables chains are left to kube-proxy (they hang off its verdict maps).
"""

from __future__ import annotations

import ipaddress

from kube.client.errors import ApiError
from node.doctor.access import HostError, Link, sysctl_path
from node.doctor.check import Check, Context, Finding, Status, passed
from node.doctor.system import cni_conf, cni_plugins
from node.iptables import BACKENDS, delete_chains, rule_target
from node.proxy import names
from node.proxy.model import service_ports
from node.proxy.ruleset import owned_chains

CONNTRACK_MIN = 131072
CONNTRACK_WARN = 0.8
IPTABLES_TABLES = ("nat", "filter")
SERVICE_CHAIN_PREFIXES = (
    names.SERVICE_PREFIX,
    names.LOCAL_PREFIX,
    names.EXTERNAL_PREFIX,
    names.FIREWALL_PREFIX,
)
"""The per-service-port chains, named from the port alone (``KUBE-SEP-`` chains are named
from an endpoint too, so they are stale when nothing live jumps to them)."""
NFT_FAMILY, NFT_TABLE = "ip", "kube-proxy"


async def _rp_filter(context: Context) -> Finding:
    root = "/proc/sys/net/ipv4/conf"
    values = {
        name: (context.host.read(f"{root}/{name}/rp_filter") or "").strip()
        for name in context.host.listdir(root) or []
    }
    strict_all = values.get("all") == "1"
    strict = sorted(n for n, v in values.items() if n != "all" and (v == "1" or strict_all))
    if strict_all:
        strict.insert(0, "all")
    if not strict:
        modes = ", ".join(f"{n}={v}" for n, v in sorted(values.items()))
        return passed(f"no strict reverse-path filtering ({modes})")

    def loosen() -> None:
        for name, value in values.items():
            if value == "1":
                context.host.write(f"{root}/{name}/rp_filter", "2")

    return Finding(
        Status.WARN,
        f"strict rp_filter on {', '.join(strict)}: packets whose reply would leave by another "
        "interface (pod and NodePort traffic on asymmetric routes) are dropped",
        "sysctl -w net.ipv4.conf.all.rp_filter=2 (and 2 for each interface set to 1)",
        loosen,
    )


async def _iptables_backends(context: Context) -> Finding:
    counts = {
        backend: sum(
            line.startswith("-A ")
            for table in IPTABLES_TABLES
            for line in context.host.iptables(backend).save(table).splitlines()
        )
        for backend in BACKENDS
    }
    evidence = ", ".join(f"{b}: {n} rules" for b, n in counts.items())
    if all(counts.values()):
        return Finding(
            Status.FAIL,
            f"rules in both iptables backends ({evidence}): both apply, each tool lists only "
            "its own",
            "make every rule writer on the node (kube-proxy, the CNI plugin, the NetworkPolicy "
            "agent) use one backend, then delete the other backend's rules (its -save shows "
            "them; --fix deletes kube-proxy's leftover chains there)",
        )
    return passed(f"one backend in use ({evidence})")


async def _conntrack(context: Context) -> Finding:
    count_text = context.host.read(sysctl_path("net.netfilter.nf_conntrack_count"))
    max_text = context.host.read(sysctl_path("net.netfilter.nf_conntrack_max"))
    if count_text is None or max_text is None:
        return Finding(
            Status.FAIL,
            "no conntrack table (net.netfilter.nf_conntrack_* missing)",
            "modprobe nf_conntrack",
        )
    count, size = int(count_text), int(max_text)
    evidence = f"{count} of {size} entries in use"
    raise_it = (
        "raise net.netfilter.nf_conntrack_max (in the host's namespace: it is read-only in "
        f"a node's), at least {CONNTRACK_MIN}"
    )
    if count >= size * CONNTRACK_WARN:
        status = Status.FAIL if count >= size else Status.WARN
        return Finding(status, f"{evidence}: a full table drops new connections", raise_it)
    if size < CONNTRACK_MIN:
        return Finding(
            Status.WARN, f"{evidence}: less than kube-proxy's minimum {CONNTRACK_MIN}", raise_it
        )
    return passed(evidence)


async def _pod_cidr_routes(context: Context) -> Finding:
    try:
        nodes = await context.cluster.nodes()
    except ApiError as error:
        if error.code != 403:
            raise
        return Finding(
            Status.WARN,
            f"cannot list the Nodes: {error}",
            "pass --proxy-kubeconfig (kube-proxy's: a kubelet may read only its own Node)",
        )
    lines: list[str] = []
    broken: list[str] = []
    for node in sorted(nodes, key=lambda n: n.metadata.name or ""):
        name = node.metadata.name or ""
        if name == context.config.node_name or node.spec is None:
            continue
        for cidr in node.spec.pod_cidrs or [c for c in [node.spec.pod_cidr] if c]:
            network = ipaddress.ip_network(cidr, strict=False)
            if network.version != 4:
                continue
            address = str(network.network_address + 1)
            try:
                route = context.host.route(address)
            except HostError as error:
                broken.append(f"{cidr} ({name}): {error}")
                continue
            hop = f"via {route.gateway} dev {route.dev}" if route.gateway else f"dev {route.dev}"
            if route.kind != "unicast":
                broken.append(f"{cidr} ({name}): {route.kind} route")
            else:
                lines.append(f"{cidr} ({name}) {hop}")
    if broken:
        return Finding(
            Status.FAIL,
            "no route to other nodes' pods: " + "; ".join(broken),
            "restore the route: a route per node's podCIDR via that node's IP, or a default "
            "route to the router that holds them (the route controller writes those)",
        )
    return passed("; ".join(lines) or "no other node has a podCIDR")


async def _mtu(context: Context) -> Finding:
    found = cni_conf(context)
    links = {link.name: link for link in context.host.links()}
    uplink = _uplink(context, links)
    if isinstance(found, Finding) or uplink is None:
        return passed("no pod network or no uplink to compare")
    path, conf = found
    plugin = next((p for p in cni_plugins(conf) if "mtu" in p or "bridge" in p), {})
    bridge = str(plugin.get("bridge", "cni0"))
    conf_mtu = int(plugin.get("mtu", 1500))
    pod_links = [link for link in links.values() if link.name == bridge or link.master == bridge]
    evidence = (
        f"uplink {uplink.name} {uplink.mtu}, {path} mtu {conf_mtu}, "
        + (f"{bridge} and {len(pod_links) - 1} pod veths: " if pod_links else "no pod links yet")
        + ", ".join(sorted({str(link.mtu) for link in pod_links}))
    )
    if conf_mtu > uplink.mtu:
        return Finding(
            Status.FAIL,
            f"{evidence}: pods send packets larger than the uplink carries",
            f"set the CNI configuration's mtu to at most {uplink.mtu}",
        )
    if any(link.mtu != conf_mtu for link in pod_links):
        return Finding(
            Status.WARN,
            f"{evidence}: the pod network's links disagree with its configuration",
            f"ip link set DEV mtu {conf_mtu} for the others (new pods get {conf_mtu})",
        )
    return passed(evidence)


def _uplink(context: Context, links: dict[str, Link]) -> Link | None:
    """The link the node reaches the API server by (no packet is sent to ask)."""
    try:
        route = context.host.route(context.api_host)
    except HostError:
        return None
    return links.get(route.dev)


async def _leftover_service_rules(context: Context) -> Finding:
    services = await context.cluster.services()
    ports = [port for service in services for port in service_ports(service)]
    live_keys = {f"{s.metadata.namespace}/{s.metadata.name}" for s in services}
    expected = {
        prefix + names.port_proto_hash(str(port.name), port.name.protocol)
        for port in ports
        for prefix in SERVICE_CHAIN_PREFIXES
    }
    evidence: list[str] = []
    repairs: list[tuple[str, str, list[str]]] = []
    for backend in BACKENDS:
        saved = context.host.iptables(backend).save("nat")
        stale = _stale_iptables_chains(saved, expected)
        if stale:
            evidence.append(f"iptables-{backend} nat: {', '.join(sorted(stale))}")
            repairs.append((backend, "nat", delete_chains(saved, stale)))
    nft = context.host.nftables(NFT_FAMILY, NFT_TABLE)
    stale_nft = [
        chain
        for chain in nft.list_names("chains")
        if names.is_nft_per_service(chain) and _nft_service_key(chain) not in live_keys
    ]
    if stale_nft:
        evidence.append(f"nft {NFT_FAMILY} {NFT_TABLE}: {', '.join(sorted(stale_nft))}")
    if not evidence:
        return passed(f"kube-proxy's chains match the {len(services)} Services")

    def remove() -> None:
        for backend, table, lines in repairs:
            context.host.iptables(backend).restore(table, lines)

    return Finding(
        Status.WARN,
        "chains for Services that no longer exist: " + "; ".join(evidence),
        "kube-proxy's next full sync deletes those in the tables it writes; others are left "
        "from an earlier proxy mode or backend"
        + (" (--fix deletes the iptables ones now)" if repairs else ""),
        remove if repairs else None,
    )


def _stale_iptables_chains(saved: str, expected: set[str]) -> set[str]:
    owned = owned_chains(saved)
    stale = {c for c in owned if c.startswith(SERVICE_CHAIN_PREFIXES) and c not in expected}
    live_targets = {
        rule_target(line)
        for line in saved.splitlines()
        if line.startswith("-A ") and line.split()[1] not in stale
    }
    endpoints = {c for c in owned if c.startswith(names.ENDPOINT_PREFIX)}
    return stale | (endpoints - live_targets)


def _nft_service_key(chain: str) -> str:
    """``namespace/name`` of a per-service nftables chain (``PREFIX-HASH-ns/name/...``)."""
    based = chain.split("-", 2)[-1]
    return "/".join(based.split("/")[:2])


CHECKS = (
    Check("rp-filter", "/proc/sys/net/ipv4/conf/*/rp_filter", _rp_filter),
    Check("iptables-backends", "iptables-nft-save, iptables-legacy-save", _iptables_backends),
    Check("conntrack", "/proc/sys/net/netfilter/nf_conntrack_*", _conntrack),
    Check("pod-cidr-routes", "Nodes' podCIDRs, ip route get", _pod_cidr_routes),
    Check("mtu", "ip link, the CNI configuration", _mtu),
    Check("leftover-service-rules", "Services, iptables-save -t nat, nft", _leftover_service_rules),
)
