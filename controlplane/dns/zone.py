"""The cluster zone: DNS answers computed from Services and EndpointSlices, per the Kubernetes
DNS specification (kubernetes/dns, docs/specification.md, schema 1.1.0).

For ``<zone>`` (``cluster.local``):

- ``<svc>.<ns>.svc.<zone>``: A/AAAA of a ClusterIP Service's cluster IPs; for a headless one
  (clusterIP ``None``), the addresses of its ready endpoints; for an ExternalName one, a CNAME
  to the external name.
- ``<host>.<svc>.<ns>.svc.<zone>``: A/AAAA of each ready endpoint of a headless Service, where
  ``<host>`` is the endpoint's hostname or, without one, its address with dashes (as CoreDNS
  names them, so that every SRV target resolves).
- ``_<port>._<proto>.<svc>.<ns>.svc.<zone>``: SRV for each named port; a ClusterIP Service has
  one pointing at the Service's name with the Service port, a headless one has one per ready
  endpoint pointing at ``<host>.<svc>...`` with the endpoint's port, and the targets' addresses
  go in the additional section.
- ``<a-b-c-d>.<ns>.pod.<zone>``: A (or AAAA, colons as dashes) of the address in the name, not
  checked against pods (CoreDNS's ``pods insecure``, what kubeadm configures).
- PTR for cluster IPs (to the Service's name) and for headless endpoints' addresses (to the
  endpoint's name); reverse names the cluster does not own are not answered here.
- ``dns-version.<zone>`` TXT ``1.1.0``; the apex has SOA and NS ``ns.dns.<zone>``, whose
  address is the ``kube-system/kube-dns`` Service's cluster IP.

A name in the zone that does not exist gets NXDOMAIN, a name that exists but has no record
of the asked type gets NOERROR with no answer (NODATA); both carry the zone's SOA in the
authority section, whose minimum (the negative-caching TTL) is the TTL.  Empty non-terminals
(``svc.<zone>``, ``<ns>.svc.<zone>`` for an existing namespace, ``_tcp.<svc>...``) exist.

Names are built per query from the state's caches (see :mod:`controlplane.dns.source`):
the records of one Service form a small tree of nodes, the query's node is looked up in it.
:meth:`ClusterZone.answer` returns None for a question the zone does not own, which the server
forwards upstream.
"""

from __future__ import annotations

import ipaddress
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import dns.exception
import dns.name
import dns.rcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.reversename
import dns.rrset
from dns.rdatatype import AAAA, ANY, CNAME, NS, PTR, SOA, SRV, TXT, A, RdataType

from controlplane.dns.source import ClusterState, canonical_ips, cluster_ips
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, Endpoint, EndpointSlice

SCHEMA_VERSION = "1.1.0"
DNS_SERVICE = ("kube-system", "kube-dns")
MAX_CNAME_CHAIN = 8
REVERSE_ZONES = (dns.reversename.ipv4_reverse_domain, dns.reversename.ipv6_reverse_domain)
IN = dns.rdataclass.IN

Node = dict[RdataType, dns.rrset.RRset]
"""The records at one name, by type; an empty node is a name that exists without records."""


@dataclass
class Answer:
    """What the zone says to one question: the rcode and the sections of the response."""

    rcode: dns.rcode.Rcode = dns.rcode.NOERROR
    answer: list[dns.rrset.RRset] = field(default_factory=list)
    authority: list[dns.rrset.RRset] = field(default_factory=list)
    additional: list[dns.rrset.RRset] = field(default_factory=list)


class _Tree:
    """Nodes by name, for the records of one Service (or the zone's fixed names)."""

    def __init__(self, ttl: int) -> None:
        self.ttl = ttl
        self.nodes: dict[dns.name.Name, Node] = {}

    def node(self, name: dns.name.Name) -> Node:
        return self.nodes.setdefault(name, {})

    def add(self, name: dns.name.Name, rdata: dns.rdata.Rdata) -> None:
        node = self.node(name)
        rrset = node.get(rdata.rdtype)
        if rrset is None:
            rrset = node[rdata.rdtype] = dns.rrset.RRset(name, IN, rdata.rdtype)
            rrset.update_ttl(self.ttl)
        rrset.add(rdata)

    def add_addresses(self, name: dns.name.Name, addresses: Iterable[str]) -> None:
        self.node(name)
        for address in canonical_ips(addresses):
            self.add(name, _address_rdata(address))


def _rdata(rdtype: RdataType, *fields: object) -> dns.rdata.Rdata:
    """A record from its presentation fields (names rendered absolute)."""
    text = " ".join(f.to_text() if isinstance(f, dns.name.Name) else str(f) for f in fields)
    return dns.rdata.from_text(IN, rdtype, text)


def _address_rdata(address: str) -> dns.rdata.Rdata:
    return _rdata(A if ipaddress.ip_address(address).version == 4 else AAAA, address)


def _labels(name: dns.name.Name, origin: dns.name.Name) -> list[str] | None:
    """The labels of ``name`` below ``origin``, outermost first, lower case; None if a label is
    not ASCII (no Kubernetes name has one)."""
    try:
        return [label.decode("ascii").lower() for label in reversed(name.relativize(origin))]
    except UnicodeDecodeError:
        return None


def ready_endpoints(endpoint_slice: EndpointSlice) -> list[Endpoint]:
    """The endpoints DNS publishes: ready ones (an unset ``ready`` means ready, per the API;
    the endpointslice controller sets it for every pod of a Service that publishes not-ready
    addresses)."""
    return [
        endpoint
        for endpoint in endpoint_slice.endpoints or ()
        if endpoint.conditions is None or endpoint.conditions.ready is not False
    ]


def endpoint_hostname(endpoint: Endpoint, address: str) -> str:
    """The endpoint's hostname, or its address with dashes when it has none."""
    return endpoint.hostname or address.replace(".", "-").replace(":", "-")


def is_headless(service: Service) -> bool:
    return service.spec is not None and service.spec.cluster_ip == "None"


def is_external_name(service: Service) -> bool:
    return service.spec is not None and service.spec.type == "ExternalName"


class ClusterZone:
    """Answers for ``domain`` from ``state``; see the module docstring.  Read-only."""

    def __init__(
        self, state: ClusterState, domain: str = "cluster.local", ttl: int = 30, serial: int = 0
    ) -> None:
        self.state = state
        self.origin = dns.name.from_text(domain)
        self.ttl = ttl
        self.soa = dns.rrset.RRset(self.origin, IN, SOA)
        self.soa.update_ttl(ttl)
        self.nameserver = dns.name.from_text("ns.dns", self.origin)
        self.soa.add(
            _rdata(
                SOA,
                self.nameserver,
                dns.name.from_text("hostmaster", self.origin),
                serial or int(time.time()),
                7200,
                1800,
                86400,
                ttl,
            )
        )

    def service_name(self, namespace: str, name: str) -> dns.name.Name:
        return dns.name.from_text(f"{name}.{namespace}.svc", self.origin)

    # Questions.

    def answer(self, qname: dns.name.Name, qtype: RdataType, qclass: int = IN) -> Answer | None:
        """The zone's answer to one question, or None if the question is not the zone's."""
        if qclass != IN:
            return None
        if qname.is_subdomain(self.origin):
            return self._in_zone(qname, qtype, MAX_CNAME_CHAIN)
        if any(qname.is_subdomain(reverse) for reverse in REVERSE_ZONES):
            return self._reverse(qname, qtype)
        return None

    def _in_zone(self, qname: dns.name.Name, qtype: RdataType, chain: int) -> Answer:
        node = self._node(qname)
        if node is None:
            return Answer(dns.rcode.NXDOMAIN, authority=[self.soa])
        if qtype == ANY and node:
            return Answer(answer=list(node.values()))
        if qtype in node:
            return Answer(answer=[node[qtype]], additional=self._additional(node[qtype]))
        cname = node.get(CNAME)
        if cname is not None:
            answer = Answer(answer=[cname])
            target: dns.name.Name = cname[0].target
            if chain > 0 and target.is_subdomain(self.origin):
                rest = self._in_zone(target, qtype, chain - 1)
                answer.rcode = rest.rcode
                answer.answer += rest.answer
                answer.authority = rest.authority
            return answer
        return Answer(authority=[self.soa])

    def _additional(self, rrset: dns.rrset.RRset) -> list[dns.rrset.RRset]:
        """The addresses of SRV targets inside the zone."""
        if rrset.rdtype != SRV:
            return []
        found: list[dns.rrset.RRset] = []
        for target in dict.fromkeys(rdata.target for rdata in rrset):
            node = self._node(target) or {}
            found += [node[t] for t in (A, AAAA) if t in node]
        return found

    def _node(self, name: dns.name.Name) -> Node | None:
        """The records at ``name`` (inside the zone); None if the name does not exist."""
        labels = _labels(name, self.origin)
        match labels:
            case []:
                return {SOA: self.soa, **self._fixed().node(self.origin)}
            case ["dns-version"] | ["dns"] | ["dns", "ns"]:
                return self._fixed().nodes[name]
            case ["svc"] | ["pod"]:
                return {}
            case ["svc", namespace]:
                return {} if self.state.namespace_exists(namespace) else None
            case ["svc", namespace, service, *_]:
                return self._service_tree(namespace, service).nodes.get(name)
            case ["pod", namespace] if self.state.namespace_exists(namespace):
                return {}
            case ["pod", _, address]:
                return self._pod_node(name, address)
        return None

    def _fixed(self) -> _Tree:
        tree = _Tree(self.ttl)
        tree.add(self.origin, _rdata(NS, self.nameserver))
        version = dns.name.from_text("dns-version", self.origin)
        tree.add(version, _rdata(TXT, f'"{SCHEMA_VERSION}"'))
        tree.node(self.nameserver.parent())
        service = self.state.service(*DNS_SERVICE)
        tree.add_addresses(self.nameserver, cluster_ips(service) if service else [])
        return tree

    def _pod_node(self, name: dns.name.Name, label: str) -> Node | None:
        for text in (label.replace("-", "."), label.replace("-", ":")):
            try:
                address = ipaddress.ip_address(text)
            except ValueError:
                continue
            tree = _Tree(self.ttl)
            tree.add_addresses(name, [str(address)])
            return tree.nodes[name]
        return None

    def _service_tree(self, namespace: str, name: str) -> _Tree:
        """Every record under ``<name>.<namespace>.svc.<zone>`` (empty if no such Service)."""
        tree = _Tree(self.ttl)
        service = self.state.service(namespace, name)
        if service is None or service.spec is None:
            return tree
        base = self.service_name(namespace, name)
        if is_external_name(service):
            if service.spec.external_name:
                target = dns.name.from_text(service.spec.external_name)
                tree.add(base, _rdata(CNAME, target))
            return tree
        if not is_headless(service):
            tree.add_addresses(base, cluster_ips(service))
            for port in service.spec.ports or ():
                if port.name and port.port:
                    srv = self._srv_name(tree, base, port.name, port.protocol)
                    tree.add(srv, _rdata(SRV, 0, 100, port.port, base))
            return tree
        tree.node(base)
        targets: dict[tuple[dns.name.Name, int, dns.name.Name], None] = {}
        for endpoint_slice in self.state.endpoint_slices(namespace, name):
            for endpoint in ready_endpoints(endpoint_slice):
                for address in canonical_ips(endpoint.addresses or ()):
                    host = dns.name.from_text(endpoint_hostname(endpoint, address), base)
                    tree.add_addresses(base, [address])
                    tree.add_addresses(host, [address])
                    for slice_port in endpoint_slice.ports or ():
                        if slice_port.name and slice_port.port:
                            srv = self._srv_name(tree, base, slice_port.name, slice_port.protocol)
                            key = (srv, slice_port.port, host)
                            targets[key] = None
        # As CoreDNS does: the records of one SRV name share a weight of 100.
        counts = Counter(srv for srv, _, _ in targets)
        for srv, port_number, host in targets:
            weight = max(1, 100 // counts[srv])
            tree.add(srv, _rdata(SRV, 0, weight, port_number, host))
        return tree

    @staticmethod
    def _srv_name(
        tree: _Tree, base: dns.name.Name, port: str, protocol: str | None
    ) -> dns.name.Name:
        """``_<port>._<proto>.<base>``; its parent, an empty non-terminal, is added to ``tree``."""
        proto = dns.name.from_text(f"_{(protocol or 'TCP').lower()}", base)
        tree.node(proto)
        return dns.name.from_text(f"_{port}", proto)

    def _reverse(self, qname: dns.name.Name, qtype: RdataType) -> Answer | None:
        """PTR for a cluster IP or a headless endpoint; None for an address not the cluster's."""
        try:
            address = str(ipaddress.ip_address(dns.reversename.to_address(qname)))
        except (dns.exception.DNSException, ValueError):
            return None
        ptr = dns.rrset.RRset(qname, IN, PTR)
        ptr.update_ttl(self.ttl)
        for service in self.state.services_with_ip(address):
            namespace, name = service.metadata.namespace or "", service.metadata.name or ""
            ptr.add(_rdata(PTR, self.service_name(namespace, name)))
        for endpoint_slice in self.state.slices_with_address(address):
            namespace = endpoint_slice.metadata.namespace or ""
            name = (endpoint_slice.metadata.labels or {}).get(SERVICE_NAME_LABEL, "")
            owner = self.state.service(namespace, name)
            if owner is None or not is_headless(owner):
                continue
            for endpoint in ready_endpoints(endpoint_slice):
                if address in canonical_ips(endpoint.addresses or ()):
                    host = endpoint_hostname(endpoint, address)
                    target = dns.name.from_text(host, self.service_name(namespace, name))
                    ptr.add(_rdata(PTR, target))
        if not ptr:
            return None
        if qtype in (PTR, ANY):
            return Answer(answer=[ptr])
        return Answer()
