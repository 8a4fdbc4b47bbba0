"""What the API server itself maintains: bootstrap objects, Service IP and port allocation,
and namespace lifecycle.

- At start: the namespaces ``default``, ``kube-system``, ``kube-public`` and
  ``kube-node-lease``, and the ``kubernetes`` Service (the first address of the service range);
  its Endpoints and EndpointSlice, naming every API server that is up, are kept by
  ``apiserverleases``.
- ClusterIPs and NodePorts are handed out by a write hook of the Service store: allocated just
  before a Service is written (a requested address or port is checked, a missing one chosen),
  given back if the write fails or once the Service is gone. Addresses are IPAddress objects
  (``clusterip``); ports a range in memory rebuilt from the stored Services at start, so none is
  ever handed out twice. Both keep upstream's static band: a value chosen for a Service comes
  from above the lowest few first (``clusterip.banded``), so a Service that asks for one of
  those (a NodePort from 30000 to 30085 by default) finds it free.
- The PriorityClasses ``system-cluster-critical`` and ``system-node-critical``.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controlplane.apiserver import errors
from controlplane.apiserver.auth.admission import SYSTEM_NAMESPACES, SYSTEM_PRIORITY_CLASSES
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from controlplane.apiserver.system import clusterip
from controlplane.apiserver.system.clusterip import AllocationError
from kube.api.errors import ROOT, ErrorList
from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.scheduling_v1 import PriorityClass
from kube.api.meta_v1 import ObjectMeta, Resource

if TYPE_CHECKING:
    from controlplane.apiserver.registry.rest import Lookup

NODE_PORT_TYPES = ("NodePort", "LoadBalancer")


class PortAllocator:
    """Ports of a range, each handed out at most once; a port chosen for a Service comes from
    the upper band first, so the lowest ``offset`` stay free for Services that ask for a
    given one (upstream's NodePort static subrange, KEP-3668)."""

    def __init__(self, low: int, high: int, rand: random.Random | None = None) -> None:
        self.low, self.high = low, high
        self.rand = rand or random.Random()
        self.used: set[int] = set()

    @property
    def offset(self) -> int:
        """upstream's calculateRangeOffset for ports: min(max(16, size/32), 128), none for 16
        ports and fewer (30000-32767: the 86 from 30000 to 30085)."""
        size = self.high - self.low + 1
        return 0 if size <= 16 else min(max(16, size // 32), 128)

    def allocate(self, requested: int | None = None) -> int:
        if requested:
            if not self.low <= requested <= self.high:
                raise AllocationError(
                    f"provided port is not in the valid range. The range of valid ports is "
                    f"{self.low}-{self.high}"
                )
            if requested in self.used:
                raise AllocationError("provided port is already allocated")
            self.used.add(requested)
            return requested
        for candidate in clusterip.banded(self.low, self.high, self.offset, self.rand):
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate
        raise AllocationError("range is full")

    def release(self, port: int | None) -> None:
        if port:
            self.used.discard(port)


def _node_ports(service: Service) -> list[int]:
    spec = service.spec
    ports = [p.node_port for p in (spec.ports or ()) if p.node_port] if spec else []
    if spec is not None and spec.health_check_node_port:
        ports.append(spec.health_check_node_port)
    return ports


@dataclass
class _Prepared:
    """What one Service write holds: committed, the addresses and ports it gave up are
    released; reverted, the ones it was given are."""

    allocation: ServiceAllocation
    dry_run: bool
    ips: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    released_ips: list[str] = field(default_factory=list)
    released_ports: list[int] = field(default_factory=list)

    async def commit(self) -> None:
        await self.allocation.release(self.released_ips, self.released_ports)

    async def revert(self) -> None:
        if not self.dry_run:
            await self.allocation.release(self.ips, [])
        await self.allocation.release([], self.ports)


class ServiceAllocation:
    """The write hook that gives Services their ClusterIP (``clusterip``) and NodePorts (a
    range in memory, rebuilt from the stored Services at start)."""

    def __init__(self, ips: clusterip.ClusterIPAllocator, node_ports: tuple[int, int]) -> None:
        self.ips = ips
        self.ports = PortAllocator(*node_ports)

    def track(self, service: Service) -> None:
        """Mark the NodePorts an existing Service holds as used (repair at start)."""
        self.ports.used.update(_node_ports(service))

    async def prepare(self, obj: Resource, old: Resource | None, dry_run: bool) -> _Prepared:
        assert isinstance(obj, Service)
        assert old is None or isinstance(old, Service)
        prepared = _Prepared(self, dry_run)
        spec = obj.spec
        if spec is None:
            return prepared
        problems = ErrorList()
        try:
            await self._cluster_ip(obj, spec, old, prepared, problems)
            self._node_ports(spec, old, prepared.ports, problems)
        except BaseException:
            await prepared.revert()
            raise
        if problems:
            await prepared.revert()
            raise errors.invalid(obj.kind_info, obj.metadata.name or "", problems)
        if old is not None:
            old_ip, new_ip = _cluster_ip(old), _cluster_ip(obj)
            prepared.released_ips = [old_ip] if old_ip and old_ip != new_ip else []
            prepared.released_ports = sorted(set(_node_ports(old)) - set(_node_ports(obj)))
        return prepared

    async def _cluster_ip(
        self,
        service: Service,
        spec: ServiceSpec,
        old: Service | None,
        prepared: _Prepared,
        problems: ErrorList,
    ) -> None:
        path = ROOT.child("spec").child("clusterIPs").index(0)
        previous = _cluster_ip(old) if old is not None else None
        if spec.type == "ExternalName" or spec.cluster_ip == "None":
            return
        if previous and spec.cluster_ip in (None, "", previous):
            spec.cluster_ip = previous
        elif not previous or spec.cluster_ip != previous:
            configured = await self.ips.families()
            for i, ip_family in enumerate(spec.ip_families or ()):
                if ip_family not in configured:
                    at = ROOT.child("spec").child("ipFamilies").index(i)
                    problems.invalid(
                        at, ip_family, f"ipfamily {ip_family} is not configured on cluster"
                    )
            if problems:
                return
            requested = spec.cluster_ip or None
            try:
                ip = await self.ips.allocate(service, requested, prepared.dry_run)
            except clusterip.AllocationError as error:
                if requested is None:  # upstream answers an InternalError here
                    raise errors.internal(f"failed to allocate a serviceIP: {error}") from None
                problems.invalid(path, requested, f"failed to allocate IP {requested}: {error}")
                return
            except ValueError:
                return  # an unparsable address; validation has already reported it
            prepared.ips.append(ip)
            spec.cluster_ip = ip
        spec.cluster_ips = [spec.cluster_ip]
        spec.ip_families = spec.ip_families or [clusterip.family(spec.cluster_ip)]
        spec.ip_family_policy = spec.ip_family_policy or "SingleStack"

    def _node_ports(
        self, spec: ServiceSpec, old: Service | None, allocated: list[int], problems: ErrorList
    ) -> None:
        held = set(_node_ports(old)) if old is not None else set()
        if spec.type not in NODE_PORT_TYPES:
            for port in spec.ports or ():
                port.node_port = None
            spec.health_check_node_port = None
            return
        for i, port in enumerate(spec.ports or ()):
            if port.node_port and port.node_port in held:
                continue
            try:
                port.node_port = self.ports.allocate(port.node_port)
            except AllocationError as error:
                path = ROOT.child("spec").child("ports").index(i).child("nodePort")
                problems.invalid(path, port.node_port, str(error))
                continue
            allocated.append(port.node_port)
        if spec.type == "LoadBalancer" and spec.external_traffic_policy == "Local":
            if not spec.health_check_node_port or spec.health_check_node_port not in held:
                try:
                    spec.health_check_node_port = self.ports.allocate(spec.health_check_node_port)
                except AllocationError as error:
                    path = ROOT.child("spec").child("healthCheckNodePort")
                    problems.invalid(path, spec.health_check_node_port, str(error))
                    return
                allocated.append(spec.health_check_node_port)
        else:
            spec.health_check_node_port = None

    async def release(self, ips: list[str], ports: list[int]) -> None:
        for ip in ips:
            await self.ips.release(ip)
        for port in ports:
            self.ports.release(port)

    async def deleted(self, obj: Resource) -> None:
        assert isinstance(obj, Service)
        ip = _cluster_ip(obj)
        await self.release([ip] if ip else [], _node_ports(obj))


def _cluster_ip(service: Service) -> str | None:
    spec = service.spec
    if spec is None or spec.type == "ExternalName" or spec.cluster_ip in (None, "", "None"):
        return None
    return spec.cluster_ip


async def repair(registry: Lookup, allocation: ServiceAllocation) -> None:
    """Rebuild the NodePort allocator from the stored Services."""
    services = registry.lookup("", "v1", "services")
    assert services is not None
    for service in (await services.list()).items:
        assert isinstance(service, Service)
        allocation.track(service)


async def ensure_objects(registry: Lookup, service_ip: str, port: int) -> None:
    """Create the bootstrap objects that do not exist yet (idempotent): the system namespaces
    and priority classes, and the ``kubernetes`` Service at ``service_ip`` onto ``port``."""
    system = RequestContext(user="system:apiserver", groups=("system:masters",))
    namespaces = registry.lookup("", "v1", "namespaces")
    assert namespaces is not None
    for name in SYSTEM_NAMESPACES:
        await _create_missing(namespaces, "", Namespace(metadata=ObjectMeta(name=name)), system)
    classes = registry.lookup("scheduling.k8s.io", "v1", "priorityclasses")
    assert classes is not None
    for name, value in SYSTEM_PRIORITY_CLASSES.items():
        critical = PriorityClass(
            metadata=ObjectMeta(name=name),
            value=value,
            description="Used for system critical pods that must not be moved from their "
            "current node.",
        )
        await _create_missing(classes, "", critical, system)
    services = registry.lookup("", "v1", "services")
    assert services is not None
    service = Service(
        metadata=ObjectMeta(
            name="kubernetes",
            namespace="default",
            labels={"component": "apiserver", "provider": "kubernetes"},
        ),
        spec=ServiceSpec(
            type="ClusterIP",
            cluster_ip=service_ip,
            ports=[ServicePort(name="https", port=443, protocol="TCP", target_port=port)],
            session_affinity="None",
        ),
    )
    await _create_missing(services, "default", service, system)


async def _create_missing(
    store: ResourceStore, namespace: str, obj: Resource, ctx: RequestContext
) -> None:
    """Create ``obj`` unless an object of its name exists (whatever its content; another
    API server starting at the same time may create it first, and may hold the ``kubernetes``
    Service's ClusterIP a moment before its Service is written: a refused create waits for
    the other's object)."""
    name = obj.metadata.name or ""
    if await _exists(store, namespace, name):
        return
    try:
        await store.create(namespace, obj, ctx)
    except errors.ApiError as refused:
        if refused.code == 409:
            return
        for _ in range(CREATED_ELSEWHERE_CHECKS):
            await asyncio.sleep(0.1)
            if await _exists(store, namespace, name):
                return
        raise


CREATED_ELSEWHERE_CHECKS = 50
"""How many times, 0.1 s apart, a refused bootstrap object is looked for before the refusal
stands."""


async def _exists(store: ResourceStore, namespace: str, name: str) -> bool:
    try:
        await store.get(namespace, name)
    except errors.ApiError as error:
        if error.code != 404:
            raise
        return False
    return True
