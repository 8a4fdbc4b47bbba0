"""The zone's answers over a plain in-memory ClusterState: the cases the end-to-end tests do
not reach through the API server (IPv6, ANY, the zone's own names, CNAME chains)."""

from __future__ import annotations

import dns.name
import dns.rcode
import dns.rdatatype
import dns.reversename
import pytest

from controlplane.dns.source import canonical_ips, cluster_ips
from controlplane.dns.zone import Answer, ClusterZone
from kube.api.kinds.core_v1.service import Service, ServiceSpec
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, EndpointSlice
from kube.api.meta_v1 import ObjectMeta
from tests.controlplane.dns.dnsharness import endpoint_slice, service


class DictState:
    """A ClusterState over lists, answering by scanning them."""

    def __init__(
        self, services: list[Service], slices: list[EndpointSlice], namespaces: set[str]
    ) -> None:
        self.services = services
        self.slices = slices
        self.namespaces = namespaces

    def service(self, namespace: str, name: str) -> Service | None:
        return next(
            (
                s
                for s in self.services
                if (s.metadata.namespace, s.metadata.name) == (namespace, name)
            ),
            None,
        )

    def endpoint_slices(self, namespace: str, service: str) -> list[EndpointSlice]:
        return [
            s
            for s in self.slices
            if s.metadata.namespace == namespace
            and (s.metadata.labels or {}).get(SERVICE_NAME_LABEL) == service
        ]

    def namespace_exists(self, name: str) -> bool:
        return name in self.namespaces

    def services_with_ip(self, ip: str) -> list[Service]:
        return [s for s in self.services if ip in canonical_ips(cluster_ips(s))]

    def slices_with_address(self, ip: str) -> list[EndpointSlice]:
        return [
            s
            for s in self.slices
            if ip in canonical_ips(a for e in s.endpoints or () for a in e.addresses or ())
        ]


def _with_ip(svc: Service, *ips: str) -> Service:
    assert svc.spec is not None
    svc.spec.cluster_ip, svc.spec.cluster_ips = ips[0], list(ips)
    return svc


@pytest.fixture
def zone() -> ClusterZone:
    services = [
        _with_ip(service("kube-dns", "kube-system"), "10.96.0.10"),
        _with_ip(service("dual", "apps"), "10.96.0.20", "fd00:96::20"),
        service("v6", "apps", headless=True),
        service("alias", "apps", external_name="dual.apps.svc.cluster.local"),
        service("loop", "apps", external_name="loop.apps.svc.cluster.local"),
        Service(metadata=ObjectMeta(name="blank", namespace="apps"), spec=ServiceSpec()),
    ]
    slices = [
        endpoint_slice("v6-a", "apps", "v6", [("fd00:244::5", "web-0", True)], address_type="IPv6")
    ]
    return ClusterZone(DictState(services, slices, {"apps", "kube-system"}), ttl=5, serial=1)


def ask(zone: ClusterZone, name: str, rdtype: str) -> Answer:
    answer = zone.answer(dns.name.from_text(name), dns.rdatatype.from_text(rdtype))
    assert answer is not None
    return answer


def data(answer: Answer, rdtype: str) -> set[str]:
    kind = dns.rdatatype.from_text(rdtype)
    return {r.to_text() for rrset in answer.answer if rrset.rdtype == kind for r in rrset}


def test_dual_stack_service_has_a_and_aaaa(zone: ClusterZone) -> None:
    assert data(ask(zone, "dual.apps.svc.cluster.local", "A"), "A") == {"10.96.0.20"}
    assert data(ask(zone, "dual.apps.svc.cluster.local", "AAAA"), "AAAA") == {"fd00:96::20"}
    every = ask(zone, "dual.apps.svc.cluster.local", "ANY")
    assert data(every, "A") == {"10.96.0.20"} and data(every, "AAAA") == {"fd00:96::20"}
    reverse = dns.reversename.from_address("fd00:96::20").to_text()
    assert data(ask(zone, reverse, "PTR"), "PTR") == {"dual.apps.svc.cluster.local."}


def test_ipv6_headless_endpoints(zone: ClusterZone) -> None:
    assert data(ask(zone, "web-0.v6.apps.svc.cluster.local", "AAAA"), "AAAA") == {"fd00:244::5"}
    dashed = ask(zone, "fd00-244--5.v6.apps.svc.cluster.local", "AAAA")
    assert dashed.rcode == dns.rcode.NXDOMAIN  # the endpoint has a hostname: that is its name
    reverse = dns.reversename.from_address("fd00:244::5").to_text()
    assert data(ask(zone, reverse, "PTR"), "PTR") == {"web-0.v6.apps.svc.cluster.local."}
    pod = ask(zone, "fd00-244--9.apps.pod.cluster.local", "AAAA")
    assert data(pod, "AAAA") == {"fd00:244::9"}


def test_cname_chains_inside_the_zone_are_followed(zone: ClusterZone) -> None:
    answer = ask(zone, "alias.apps.svc.cluster.local", "A")
    assert data(answer, "CNAME") == {"dual.apps.svc.cluster.local."}
    assert data(answer, "A") == {"10.96.0.20"}
    looping = ask(zone, "loop.apps.svc.cluster.local", "A")  # ends, and says what it found
    assert data(looping, "CNAME") == {"loop.apps.svc.cluster.local."}


def test_zone_names(zone: ClusterZone) -> None:
    assert data(ask(zone, "ns.dns.cluster.local", "A"), "A") == {"10.96.0.10"}
    assert ask(zone, "dns.cluster.local", "A").rcode == dns.rcode.NOERROR
    assert ask(zone, "apps.pod.cluster.local", "A").rcode == dns.rcode.NOERROR
    assert ask(zone, "nowhere.pod.cluster.local", "A").rcode == dns.rcode.NXDOMAIN
    (soa,) = ask(zone, "cluster.local", "SOA").answer
    assert soa[0].serial == 1 and soa.ttl == 5
    blank = ask(zone, "blank.apps.svc.cluster.local", "A")  # no IP yet: exists, no data
    assert (blank.rcode, blank.answer) == (dns.rcode.NOERROR, [])


def test_questions_the_zone_does_not_own(zone: ClusterZone) -> None:
    assert zone.answer(dns.name.from_text("example.org"), dns.rdatatype.A) is None
    unknown = dns.reversename.from_address("192.0.2.1")
    assert zone.answer(unknown, dns.rdatatype.PTR) is None
    partial = dns.name.from_text("10.in-addr.arpa")
    assert zone.answer(partial, dns.rdatatype.PTR) is None
    chaos = dns.name.from_text("version.bind")
    assert zone.answer(chaos, dns.rdatatype.TXT, qclass=3) is None
