"""FirstAnswers over a plain-dict cluster: which answers are told, and how much is remembered."""

from __future__ import annotations

import dns.name
import dns.rrset

from controlplane.dns.firstanswers import FirstAnswers
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import EndpointSlice
from kube.api.meta_v1 import ObjectMeta

ORIGIN = dns.name.from_text("cluster.local")


class State:
    def __init__(self, *names: str) -> None:
        self.services = {
            ("ns", n): Service(metadata=ObjectMeta(namespace="ns", name=n, uid=f"uid-{n}"))
            for n in names
        }

    def service(self, namespace: str, name: str) -> Service | None:
        return self.services.get((namespace, name))

    def endpoint_slices(self, namespace: str, service: str) -> list[EndpointSlice]:
        return []

    def namespace_exists(self, name: str) -> bool:
        return name == "ns"

    def services_with_ip(self, ip: str) -> list[Service]:
        return []

    def slices_with_address(self, ip: str) -> list[EndpointSlice]:
        return []


class Told:
    def __init__(self) -> None:
        self.names: list[str] = []

    def event(self, obj: Service, type: str, reason: str, message: str) -> None:
        self.names.append(obj.metadata.name or "")


def ask(first: FirstAnswers, name: str) -> None:
    qname = dns.name.from_text(name)
    first.answered(qname, [dns.rrset.from_text(qname, 30, "IN", "A", "10.96.0.7")])


def test_only_services_own_names_are_told_once_while_remembered() -> None:
    told = Told()
    first = FirstAnswers(State("a", "b"), ORIGIN, told, capacity=1)
    for name in (
        "a.ns.svc.cluster.local.",
        "a.ns.svc.cluster.local.",
        "_http._tcp.a.ns.svc.cluster.local.",
        "pod-1.a.ns.svc.cluster.local.",
        "gone.ns.svc.cluster.local.",
        "a.ns.svc.example.org.",
    ):
        ask(first, name)
    assert told.names == ["a"]
    first.answered(dns.name.from_text("b.ns.svc.cluster.local."), [])  # NODATA: nothing told
    ask(first, "b.ns.svc.cluster.local.")
    ask(first, "a.ns.svc.cluster.local.")  # forgotten when b was remembered
    assert told.names == ["a", "b", "a"]
