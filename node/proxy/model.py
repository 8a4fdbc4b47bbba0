"""What the proxier programs: service ports and their endpoints, and which changed since a sync.

Upstream's ServiceChangeTracker and EndpointsChangeTracker in one level-triggered piece.  The
informer handlers only mark a Service (``namespace/name``) dirty, whether the event was about
the Service or one of its EndpointSlices.  At a sync, :meth:`ChangeTracker.apply` re-reads
each dirty Service and its slices from the caches, turns them into immutable
:class:`ServicePortInfo` and :class:`EndpointInfo` records, and compares them with what the
last sync programmed: the service ports whose records differ are the ones a partial sync
rewrites, and the UDP endpoints that vanished are the conntrack entries to delete.

Only what the iptables rules depend on is kept, so an update that changes nothing in the rules
(a label, a resourceVersion bump) does not make a service port dirty.  IPv4 only: services
without an IPv4 cluster IP (headless, ExternalName, IPv6) have no ports here.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from kube.api.kinds.core_v1.service import DEFAULT_CLIENT_IP_TIMEOUT, Service
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, EndpointSlice


class ServicePortName(NamedTuple):
    """One port of one Service; ``str()`` is upstream's ``namespace/name[:port]``."""

    namespace: str
    name: str
    port: str
    protocol: str

    def __str__(self) -> str:
        suffix = f":{self.port}" if self.port else ""
        return f"{self.namespace}/{self.name}{suffix}"

    @property
    def service_key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ServicePortInfo:
    """Everything about one service port that the rules depend on."""

    name: ServicePortName
    cluster_ip: str
    port: int
    node_port: int = 0
    external_ips: tuple[str, ...] = ()
    load_balancer_ips: tuple[str, ...] = ()
    source_ranges: tuple[str, ...] = ()
    external_policy_local: bool = False
    internal_policy_local: bool = False
    affinity_seconds: int = 0
    """ClientIP session affinity timeout; 0 without affinity."""
    health_check_node_port: int = 0

    @property
    def protocol(self) -> str:
        return self.name.protocol.lower()

    @property
    def externally_accessible(self) -> bool:
        return bool(self.node_port or self.external_ips or self.load_balancer_ips)

    @property
    def uses_cluster_endpoints(self) -> bool:
        """Cluster endpoints are needed for internal traffic under the Cluster policy, and for
        external traffic at all (short-circuiting pod and node traffic under Local)."""
        return not self.internal_policy_local or self.externally_accessible

    @property
    def uses_local_endpoints(self) -> bool:
        return self.internal_policy_local or (
            self.external_policy_local and self.externally_accessible
        )


@dataclass(frozen=True)
class EndpointInfo:
    """One endpoint address of a service port, with its conditions."""

    ip: str
    port: int
    ready: bool = True
    serving: bool = True
    terminating: bool = False
    local: bool = False

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    def sort_key(self) -> tuple[bytes, int]:
        return socket.inet_pton(socket.AF_INET, self.ip), self.port


def usable(endpoints: Iterable[EndpointInfo]) -> list[EndpointInfo]:
    """The endpoints traffic goes to: the ready ones, or, only when none is ready, the
    serving ones that are terminating (so connections drain instead of failing)."""
    candidates = list(endpoints)
    ready = [e for e in candidates if e.ready]
    return ready or [e for e in candidates if e.serving and e.terminating]


@dataclass(frozen=True)
class Reach:
    """Where a service port's traffic may go (upstream's CategorizeEndpoints)."""

    cluster: list[EndpointInfo]
    """The usable endpoints, when the Cluster policy is in use for some traffic."""
    local: list[EndpointInfo]
    """The usable endpoints on this node, when a Local policy is in use."""
    has_endpoints: bool
    """Some endpoint is usable, on any node."""
    has_internal: bool
    """Cluster-IP traffic has endpoints under its policy."""
    has_external: bool
    """NodePort, external-IP and load-balancer traffic has endpoints under its policy."""


def reach(port: ServicePortInfo, endpoints: Sequence[EndpointInfo]) -> Reach:
    """Which of ``endpoints`` each kind of traffic to ``port`` may go to."""
    cluster = usable(endpoints) if port.uses_cluster_endpoints else []
    local = usable(e for e in endpoints if e.local) if port.uses_local_endpoints else []
    return Reach(
        cluster=cluster,
        local=local,
        has_endpoints=bool(cluster or local or usable(endpoints)),
        has_internal=bool(local if port.internal_policy_local else cluster),
        has_external=bool(local if port.external_policy_local else cluster),
    )


def service_ports(service: Service) -> list[ServicePortInfo]:
    """The IPv4 service ports of ``service``; none for headless or ExternalName services."""
    spec = service.spec
    namespace, name = service.metadata.namespace or "", service.metadata.name or ""
    if spec is None or spec.type == "ExternalName" or not _is_ipv4(spec.cluster_ip):
        return []
    lb_ips = _load_balancer_ips(service) if spec.type == "LoadBalancer" else ()
    affinity = 0
    if spec.session_affinity == "ClientIP":
        config = spec.session_affinity_config
        affinity = (
            config.client_ip.timeout_seconds
            if config and config.client_ip and config.client_ip.timeout_seconds
            else DEFAULT_CLIENT_IP_TIMEOUT
        )
    external_ips = tuple(sorted(ip for ip in spec.external_ips or () if _is_ipv4(ip)))
    node_ports = spec.type in ("NodePort", "LoadBalancer")
    accessible = node_ports or bool(external_ips) or bool(lb_ips)
    return [
        ServicePortInfo(
            name=ServicePortName(namespace, name, port.name or "", port.protocol or "TCP"),
            cluster_ip=str(spec.cluster_ip),
            port=port.port or 0,
            node_port=(port.node_port or 0) if node_ports else 0,
            external_ips=external_ips,
            load_balancer_ips=lb_ips,
            source_ranges=tuple(spec.load_balancer_source_ranges or ()) if lb_ips else (),
            external_policy_local=accessible and spec.external_traffic_policy == "Local",
            internal_policy_local=spec.internal_traffic_policy == "Local",
            affinity_seconds=affinity,
            health_check_node_port=(
                (spec.health_check_node_port or 0) if spec.needs_health_check else 0
            ),
        )
        for port in spec.ports or ()
        if port.port
    ]


def _load_balancer_ips(service: Service) -> tuple[str, ...]:
    """Ingress IPs in VIP mode (``Proxy`` mode ones are reached through the load balancer)."""
    status = service.status.load_balancer if service.status else None
    ingress = status.ingress if status else None
    return tuple(
        sorted({i.ip for i in ingress or () if i.ip and _is_ipv4(i.ip) and i.ip_mode != "Proxy"})
    )


def endpoints_for(
    port: ServicePortInfo, slices: Iterable[EndpointSlice], node_name: str
) -> tuple[EndpointInfo, ...]:
    """The endpoints of ``port`` in ``slices``, deduplicated by address and sorted by IP."""
    found: dict[str, EndpointInfo] = {}
    for slice_ in slices:
        if slice_.address_type != "IPv4":
            continue
        number = _slice_port(slice_, port.name)
        if number is None:
            continue
        for endpoint in slice_.endpoints or ():
            conditions = endpoint.conditions
            ready = conditions is None or conditions.ready is not False
            serving = conditions.serving if conditions and conditions.serving is not None else ready
            terminating = bool(conditions and conditions.terminating)
            for ip in (endpoint.addresses or [])[:1]:
                if not _is_ipv4(ip):
                    continue
                info = EndpointInfo(
                    ip=ip,
                    port=number,
                    ready=ready,
                    serving=serving,
                    terminating=terminating,
                    local=endpoint.node_name == node_name,
                )
                found.setdefault(info.address, info)
    return tuple(sorted(found.values(), key=EndpointInfo.sort_key))


def _slice_port(slice_: EndpointSlice, name: ServicePortName) -> int | None:
    for port in slice_.ports or ():
        if (port.name or "") == name.port and (port.protocol or "TCP") == name.protocol:
            return port.port
    return None


def _is_ipv4(value: str | None) -> bool:
    """Whether ``value`` is a dotted-quad IPv4 address (inet_pton: strict, and fast)."""
    try:
        socket.inet_pton(socket.AF_INET, value or "")
    except OSError:
        return False
    return True


@dataclass
class Changes:
    """What one :meth:`ChangeTracker.apply` found."""

    changed: set[ServicePortName] = field(default_factory=set)
    """Service ports added, removed or different (their chains must be rewritten)."""
    stale_udp: list[tuple[ServicePortInfo, EndpointInfo]] = field(default_factory=list)
    """UDP endpoints no longer used: their conntrack entries must go."""


ServiceLookup = Callable[[str], Service | None]
SliceLookup = Callable[[str], Sequence[EndpointSlice]]


class ChangeTracker:
    """The programmed state (:attr:`ports`, :attr:`endpoints`) and the dirty Services.

    ``service_changed`` is called by informer handlers and must not block; ``apply`` is
    called by the sync loop.  Nothing here is shared across threads.
    """

    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self.ports: dict[ServicePortName, ServicePortInfo] = {}
        self.endpoints: dict[ServicePortName, tuple[EndpointInfo, ...]] = {}
        self._by_service: dict[str, set[ServicePortName]] = {}
        self._dirty: set[str] = set()

    def service_changed(self, service_key: str) -> None:
        """Mark ``namespace/name`` for re-reading at the next sync."""
        self._dirty.add(service_key)

    @property
    def pending(self) -> bool:
        return bool(self._dirty)

    def apply(self, services: ServiceLookup, slices: SliceLookup) -> Changes:
        """Re-read every dirty Service and its slices; what changed since the last apply."""
        changes = Changes()
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty):
            service = services(key)
            new_ports = {p.name: p for p in service_ports(service)} if service else {}
            service_slices = slices(key) if new_ports else ()
            for name in self._by_service.get(key, set()) - set(new_ports):
                changes.changed.add(name)
                self._drop_endpoints(name, (), changes)
                del self.ports[name]
            for name, port in new_ports.items():
                endpoints = endpoints_for(port, service_slices, self.node_name)
                old_endpoints = self.endpoints.get(name, ())
                if self.ports.get(name) != port or old_endpoints != endpoints:
                    changes.changed.add(name)
                self._drop_endpoints(name, endpoints, changes)
                self.ports[name] = port
                self.endpoints[name] = endpoints
            if new_ports:
                self._by_service[key] = set(new_ports)
            else:
                self._by_service.pop(key, None)
        return changes

    def _drop_endpoints(
        self, name: ServicePortName, kept: Sequence[EndpointInfo], changes: Changes
    ) -> None:
        """Record the UDP endpoints of ``name`` that are not in ``kept`` as stale."""
        old = self.endpoints.pop(name, ())
        port = self.ports.get(name)
        if port is None or port.protocol != "udp":
            return
        remaining = {e.address for e in usable(kept)}
        changes.stale_udp += [(port, e) for e in usable(old) if e.address not in remaining]


def slices_by_service(slice_: EndpointSlice) -> list[str]:
    """Index function: the ``namespace/service`` a slice belongs to."""
    labels = slice_.metadata.labels or {}
    service = labels.get(SERVICE_NAME_LABEL)
    return [f"{slice_.metadata.namespace}/{service}"] if service else []


def service_key_of_slice(slice_: EndpointSlice) -> str | None:
    found = slices_by_service(slice_)
    return found[0] if found else None
