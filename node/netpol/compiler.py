"""NetworkPolicies, Pods and Namespaces in; one node's nftables table out (pure, no I/O).

:func:`compile_ruleset` turns what the informers hold into the whole table
``inet kubelab-network-policy`` for one node, and :meth:`Ruleset.commands` renders it as one
``nft -f`` transaction that replaces the table atomically (``add table``, ``delete table``,
the new definition).  Rebuilding it whole at every change keeps the agent level-triggered:
the table is a function of the cluster's state, never a history of edits.

Upstream's semantics (``networking.k8s.io/v1``), as this table implements them:

- A pod is *isolated* for ingress (egress) when some policy of its namespace selects it
  (``spec.podSelector``) and lists ``Ingress`` (``Egress``) in ``policyTypes``, which defaults
  to ``Ingress``, plus ``Egress`` when the policy has egress rules.  Traffic of a direction
  in which the pod is not isolated is allowed; in which it is, allowed only when some rule of
  some policy selecting it allows it (the union of all of them, in any order).
- A rule allows traffic from (to) any of its peers on any of its ports; no peers: every peer;
  no ports: every port and protocol.  A peer is pods of the policy's namespace
  (``podSelector``), every pod of the namespaces selected (``namespaceSelector``), the pods
  selected in the namespaces selected (both), or addresses (``ipBlock``: ``cidr`` less each of
  ``except``).
- A port is a protocol (TCP by default, UDP, SCTP), optionally a number (with ``endPort``: a
  range) or a container port's name, resolved on the destination pod: on the selected pod for
  ingress, on the peer pod for egress (addresses that are no pod never match a named port).
- Replies and related traffic of allowed connections pass (conntrack); the node's own traffic
  to its pods (kubelet probes) is never filtered, since it leaves through the output hook,
  which this table does not hook.

Only this node's pods are enforced: ingress for local destination pods, egress for local
source pods.  Peers are any pod of the cluster with an IPv4 address (not host-network, not
finished); IPv6 traffic is not filtered (the lab is IPv4 only).

The table hooks ``forward`` (routed and, with ``bridge-nf-call-iptables``, bridged pod
traffic; after kube-proxy's DNAT in prerouting, so policies see the endpoint pod's address as
upstream requires) and, for egress, ``input`` (a pod talking to its node):

    set ingress-isolated, egress-isolated          local pods isolated per direction
    set pods/NS/NAME                               local pods policy NS/NAME selects
    set ingress/NS/NAME/I, egress/NS/NAME/I        the peers of rule I (pods and blocks)
    chain egress-forward, egress-input (hooks)     jump egress
    chain egress, ingress (hook forward)           established → accept; not isolated →
                                                   accept; jump to each policy selecting the
                                                   pod; drop
    chain ingress/NS/NAME, egress/NS/NAME          a rule allowing the traffic → accept

An ``accept`` ends only the base chain that jumped, so a packet must pass both ``egress`` (at
a lower priority, first) and ``ingress``.  A policy this compiler cannot read (a selector the
API would refuse) is skipped and reported in ``Ruleset.problems``, never raised.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.networking_v1 import (
    NetworkPolicy,
    NetworkPolicyPeer,
    NetworkPolicyPort,
    NetworkPolicySpec,
)
from kube.api.labels import Selector, SelectorError, selector_of

FAMILY: Final = "inet"
TABLE: Final = "kubelab-network-policy"
INGRESS: Final = "ingress"
EGRESS: Final = "egress"
INGRESS_PRIORITY: Final = "filter"
EGRESS_PRIORITY: Final = "filter - 1"
MAX_NAME: Final = 255
"""nftables' longest set or chain name (NFT_NAME_MAXLEN less the NUL)."""
_FINISHED = ("Succeeded", "Failed")
_PROTOCOLS = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}
Network = ipaddress.IPv4Network


@dataclass(frozen=True)
class PodAddress:
    """What the rules need of a pod: where it is, what selects it, its ports."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    ip: str
    node: str
    ports: tuple[tuple[str, str, int], ...]
    """``(name, protocol, number)`` of every named container port."""

    @classmethod
    def of(cls, pod: Pod) -> PodAddress | None:
        """None for a pod without an IPv4 address, on the host's network, or finished."""
        spec, status = pod.spec, pod.status
        if spec is None or status is None or spec.host_network or status.phase in _FINISHED:
            return None
        ip = next((a for a in _pod_ips(pod) if _is_ipv4(a)), None)
        if ip is None:
            return None
        ports = tuple(
            (port.name, port.protocol or "TCP", port.container_port)
            for container in spec.containers or ()
            for port in container.ports or ()
            if port.name and port.container_port
        )
        return cls(
            pod.metadata.namespace or "",
            pod.metadata.name or "",
            dict(pod.metadata.labels or {}),
            ip,
            spec.node_name or "",
            ports,
        )

    def named_port(self, name: str, protocol: str) -> int | None:
        return next((n for p, proto, n in self.ports if p == name and proto == protocol), None)


def _pod_ips(pod: Pod) -> list[str]:
    status = pod.status
    assert status is not None
    found = [entry.ip for entry in status.pod_ips or () if entry.ip]
    return found or ([status.pod_ip] if status.pod_ip else [])


def _is_ipv4(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).version == 4
    except ValueError:
        return False


_OBJECT = f"{FAMILY} {TABLE}"


@dataclass(frozen=True)
class NftSet:
    """A named set: ``ipv4_addr`` elements, with ``flags interval`` when it holds blocks."""

    name: str
    elements: tuple[str, ...]
    interval: bool = False

    def commands(self) -> list[str]:
        flags = " flags interval;" if self.interval else ""
        made = [f"add set {_OBJECT} {self.name} {{ type ipv4_addr;{flags} }}"]
        if self.elements:
            made.append(f"add element {_OBJECT} {self.name} {{ {', '.join(self.elements)} }}")
        return made


@dataclass(frozen=True)
class Chain:
    """A chain: regular, or a base chain when ``hook`` is set."""

    name: str
    rules: tuple[str, ...]
    hook: str = ""
    priority: str = ""

    def command(self) -> str:
        if not self.hook:
            return f"add chain {_OBJECT} {self.name}"
        base = f"type filter hook {self.hook} priority {self.priority}; policy accept;"
        return f"add chain {_OBJECT} {self.name} {{ {base} }}"


@dataclass(frozen=True)
class Ruleset:
    """The node's table, and what could not be compiled into it (``NS/NAME: why``)."""

    sets: tuple[NftSet, ...]
    chains: tuple[Chain, ...]
    problems: tuple[str, ...] = ()

    def commands(self) -> list[str]:
        """The ``nft`` commands that replace the table in one transaction: the table made
        (if absent) and deleted, then made again with its sets, its chains, then the rules."""
        return [
            f"add table {_OBJECT}",
            f"delete table {_OBJECT}",
            f"add table {_OBJECT}",
            *(line for s in self.sets for line in s.commands()),
            *(c.command() for c in self.chains),
            *(f"add rule {_OBJECT} {c.name} {rule}" for c in self.chains for rule in c.rules),
        ]

    def chain(self, name: str) -> Chain:
        """The chain ``name`` (KeyError if absent)."""
        for chain in self.chains:
            if chain.name == name:
                return chain
        raise KeyError(name)

    def set(self, name: str) -> NftSet:
        """The set ``name`` (KeyError if absent)."""
        for found in self.sets:
            if found.name == name:
                return found
        raise KeyError(name)


def object_name(*parts: str) -> str:
    """A set or chain name from ``parts`` joined by ``/`` (no part of a namespace or policy
    name holds one, so names never collide), hashed where nftables' limit needs it."""
    name = "/".join(parts)
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{parts[0]}/{parts[1]}/{digest}"


@dataclass(frozen=True)
class _Direction:
    """Where a direction reads the local pod (``pod``) and the peer (``peer``) in a packet."""

    name: str
    pod: str
    peer: str


_DIRECTIONS = (
    _Direction(EGRESS, "ip saddr", "ip daddr"),
    _Direction(INGRESS, "ip daddr", "ip saddr"),
)


@dataclass
class _Cluster:
    """The pods and namespace labels every policy is compiled against."""

    node: str
    pods: list[PodAddress]
    namespaces: Mapping[str, Mapping[str, str]]
    local: list[PodAddress] = field(init=False)

    def __post_init__(self) -> None:
        self.local = [p for p in self.pods if p.node == self.node]

    def peers(self, namespace: str, peer: NetworkPolicyPeer) -> list[Network]:
        """The addresses one peer of a rule of a policy in ``namespace`` stands for."""
        if peer.ip_block is not None:
            return _block(peer.ip_block.cidr or "", peer.ip_block.except_ or ())
        pods = selector_of(peer.pod_selector) if peer.pod_selector is not None else Selector()
        if peer.namespace_selector is None:
            in_namespace: Iterable[PodAddress] = (p for p in self.pods if p.namespace == namespace)
        else:
            namespaces = selector_of(peer.namespace_selector)
            in_namespace = (
                p for p in self.pods if namespaces.matches(self.namespaces.get(p.namespace))
            )
        return [Network(p.ip) for p in in_namespace if pods.matches(p.labels)]


def _block(cidr: str, excepts: Sequence[str]) -> list[Network]:
    """``cidr`` less ``excepts`` as disjoint networks (an IPv6 block: none)."""
    try:
        block = ipaddress.ip_network(cidr, strict=False)
    except ValueError as error:
        raise ValueError(f"ipBlock.cidr: {error}") from None
    if not isinstance(block, Network):
        return []
    left = [block]
    for text in excepts:
        try:
            cut = ipaddress.ip_network(text, strict=False)
        except ValueError as error:
            raise ValueError(f"ipBlock.except: {error}") from None
        if not isinstance(cut, Network):
            continue
        left = [
            piece
            for net in left
            for piece in ((net,) if not cut.overlaps(net) else _without(net, cut))
        ]
    return left


def _without(net: Network, cut: Network) -> Iterable[Network]:
    return net.address_exclude(cut) if cut.subnet_of(net) else ()


@dataclass
class _Policy:
    """One policy compiled: its sets, its chains per direction, the local pods it selects."""

    pods_set: str
    selected: list[PodAddress]
    sets: list[NftSet] = field(default_factory=list)
    chains: dict[str, Chain] = field(default_factory=dict)


def compile_ruleset(
    node: str,
    pods: Iterable[Pod],
    namespaces: Iterable[Namespace],
    policies: Iterable[NetworkPolicy],
) -> Ruleset:
    """The table enforcing ``policies`` on ``node``'s pods (see the module docstring)."""
    cluster = _Cluster(
        node,
        sorted(
            (a for a in map(PodAddress.of, pods) if a is not None),
            key=lambda a: (a.namespace, a.name),
        ),
        {ns.metadata.name or "": dict(ns.metadata.labels or {}) for ns in namespaces},
    )
    compiled: list[_Policy] = []
    problems: list[str] = []
    for policy in sorted(policies, key=lambda p: (p.metadata.namespace, p.metadata.name)):
        key = f"{policy.metadata.namespace}/{policy.metadata.name}"
        try:
            found = _compile_policy(cluster, policy)
        except (SelectorError, ValueError) as error:
            problems.append(f"{key}: {error}")
            continue
        if found is not None:
            compiled.append(found)
    sets = [s for p in compiled for s in p.sets]
    chains = [c for p in compiled for c in p.chains.values()]
    for direction in _DIRECTIONS:
        applying = [p for p in compiled if direction.name in p.chains]
        isolated = NftSet(
            f"{direction.name}-isolated", _ips(a for p in applying for a in p.selected)
        )
        jumps = (
            f"{direction.pod} @{p.pods_set} jump {p.chains[direction.name].name}" for p in applying
        )
        rules = (
            "ct state established,related accept",
            f"{direction.pod} != @{isolated.name} accept",
            *jumps,
            "counter drop",
        )
        sets.insert(0, isolated)
        if direction.name == INGRESS:
            chains.append(Chain(INGRESS, rules, "forward", INGRESS_PRIORITY))
        else:
            chains.append(Chain(EGRESS, rules))
    chains += [
        Chain("egress-forward", (f"jump {EGRESS}",), "forward", EGRESS_PRIORITY),
        Chain("egress-input", (f"jump {EGRESS}",), "input", EGRESS_PRIORITY),
    ]
    return Ruleset(tuple(sets), tuple(chains), tuple(problems))


def _ip_order(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip))


def policy_types(spec: NetworkPolicySpec) -> list[str]:
    """``policyTypes``, or upstream's default: Ingress, and Egress when there are egress rules."""
    if spec.policy_types:
        return list(spec.policy_types)
    return ["Ingress", "Egress"] if spec.egress else ["Ingress"]


def _compile_policy(cluster: _Cluster, policy: NetworkPolicy) -> _Policy | None:
    """The policy's sets and chains, or None when it selects no pod of this node."""
    spec = policy.spec or NetworkPolicySpec()
    namespace = policy.metadata.namespace or ""
    selector = selector_of(spec.pod_selector) if spec.pod_selector is not None else Selector()
    selected = [p for p in cluster.local if p.namespace == namespace and selector.matches(p.labels)]
    if not selected:
        return None
    name = policy.metadata.name or ""
    pods = NftSet(object_name("pods", namespace, name), _ips(selected))
    compiled = _Policy(pods.name, selected, [pods])
    rules_of = {
        INGRESS: [(r.ports, r.from_) for r in spec.ingress or ()],
        EGRESS: [(r.ports, r.to) for r in spec.egress or ()],
    }
    for direction in _DIRECTIONS:
        if direction.name.capitalize() not in policy_types(spec):
            continue
        chain_name = object_name(direction.name, namespace, name)
        rules: list[str] = []
        for index, (ports, peers) in enumerate(rules_of[direction.name]):
            peer_match = ""
            if peers:
                networks = [n for peer in peers for n in cluster.peers(namespace, peer)]
                peer_set = NftSet(
                    object_name(chain_name, str(index)),
                    tuple(
                        str(n) if n.prefixlen < 32 else str(n.network_address)
                        for n in ipaddress.collapse_addresses(networks)
                    ),
                    interval=True,
                )
                compiled.sets.append(peer_set)
                peer_match = f"{direction.peer} @{peer_set.name} "
            destinations = selected if direction.name == INGRESS else cluster.pods
            rules += [
                f"{peer_match}{port}accept" for port in _port_matches(ports or (), destinations)
            ]
        compiled.chains[direction.name] = Chain(chain_name, tuple(rules))
    return compiled


def _ips(pods: Iterable[PodAddress]) -> tuple[str, ...]:
    return tuple(sorted({p.ip for p in pods}, key=_ip_order))


def _port_matches(
    ports: Sequence[NetworkPolicyPort], destinations: Sequence[PodAddress]
) -> list[str]:
    """One match per port ("" and a trailing space: every port); a named port resolved on
    ``destinations`` (none of them has it: no match at all)."""
    if not ports:
        return [""]
    matches = []
    for port in ports:
        protocol = port.protocol or "TCP"
        nft = _PROTOCOLS.get(protocol)
        if nft is None:
            raise ValueError(f"protocol {protocol!r} is not TCP, UDP or SCTP")
        if port.port is None:
            matches.append(f"meta l4proto {nft} ")
        elif isinstance(port.port, int):
            end = f"-{port.end_port}" if port.end_port and port.end_port > port.port else ""
            matches.append(f"{nft} dport {port.port}{end} ")
        else:
            resolved = sorted(
                {(d.ip, n) for d in destinations if (n := d.named_port(port.port, protocol))},
                key=lambda pair: (_ip_order(pair[0]), pair[1]),
            )
            if resolved:
                pairs = ", ".join(f"{ip} . {number}" for ip, number in resolved)
                matches.append(f"ip daddr . {nft} dport {{ {pairs} }} ")
    return matches
