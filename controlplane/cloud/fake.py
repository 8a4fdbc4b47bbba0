"""A cloud in memory, for tests of the cloud controllers and of code built on them.

Public on purpose (upstream ships ``cloud-provider/fake`` for the same reason): whoever writes
a provider or a controller of their own can run it against :class:`FakeCloud` and assert on
what it did.  It keeps instances, routes and load balancers in dictionaries, records every
call in ``calls`` as ``(method, argument)``, and raises an error queued in ``failures`` (method
name → exception, raised once) so tests can show that a controller retries.  Capabilities
can be switched off to test "not supported".

It keeps the interface's contracts itself: creating a route or ensuring a load balancer twice
changes nothing the second time, deleting what is gone is success, an unknown instance is
:class:`InstanceNotFound`.  Two controllers handed the same ``FakeCloud`` share one cloud, as
two cloud-controller-manager replicas share the real one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from controlplane.cloud.provider import (
    ClientBuilder,
    Clusters,
    InstanceMetadata,
    InstanceNotFound,
    Instances,
    InstancesV2,
    LoadBalancer,
    NotImplementedByProvider,
    Route,
    Routes,
    Zone,
    Zones,
)
from kube.api.kinds.core_v1.node import Node, NodeAddress
from kube.api.kinds.core_v1.service import LoadBalancerIngress, LoadBalancerStatus, Service

PROVIDER_NAME = "fake"


@dataclass
class FakeInstance:
    """One instance: ``exists`` False means the cloud deleted it."""

    name: str
    instance_type: str = "fake.small"
    addresses: tuple[NodeAddress, ...] = ()
    zone: str = "zone-a"
    region: str = "region-1"
    exists: bool = True
    shutdown: bool = False

    @property
    def provider_id(self) -> str:
        return f"{PROVIDER_NAME}://{self.name}"


@dataclass
class FakeBalancer:
    """One load balancer: the Service it serves, its address and the nodes behind it."""

    service: str
    ip: str
    hosts: list[str]
    ports: list[int]


@dataclass
class FakeCloud:
    """Every capability of :class:`~controlplane.cloud.provider.CloudProvider`, in memory."""

    instances_map: dict[str, FakeInstance] = field(default_factory=dict)
    route_table: dict[str, list[Route]] = field(default_factory=dict)
    """Cluster name → its routes."""
    balancers: dict[str, FakeBalancer] = field(default_factory=dict)
    """Load balancer name → the balancer."""
    clusters_list: list[str] = field(default_factory=lambda: ["kubernetes"])
    calls: list[tuple[str, Any]] = field(default_factory=list)
    failures: dict[str, Exception] = field(default_factory=dict)
    supported: set[str] = field(
        default_factory=lambda: {
            "load_balancer",
            "instances",
            "instances_v2",
            "zones",
            "clusters",
            "routes",
        }
    )
    cluster_id: bool = True
    initialized: bool = False
    _next_ip: int = 10

    def add_instance(self, name: str, internal_ip: str, **fields: Any) -> FakeInstance:
        """An instance ``name`` with that InternalIP (and a Hostname address)."""
        addresses = (
            NodeAddress(type="InternalIP", address=internal_ip),
            NodeAddress(type="Hostname", address=name),
        )
        instance = FakeInstance(name=name, addresses=addresses, **fields)
        self.instances_map[name] = instance
        return instance

    def _call(self, method: str, argument: Any = None) -> None:
        self.calls.append((method, argument))
        error = self.failures.pop(method, None)
        if error is not None:
            raise error

    def called(self, method: str) -> list[Any]:
        """The arguments of every call of ``method``, in order."""
        return [argument for name, argument in self.calls if name == method]

    # CloudProvider

    def initialize(self, client_builder: ClientBuilder, stop: asyncio.Event) -> None:
        self.initialized = True

    def _capability(self, name: str) -> tuple[Any, bool]:
        return (self, True) if name in self.supported else (None, False)

    def load_balancer(self) -> tuple[LoadBalancer | None, bool]:
        return self._capability("load_balancer")

    def instances(self) -> tuple[Instances | None, bool]:
        return self._capability("instances")

    def instances_v2(self) -> tuple[InstancesV2 | None, bool]:
        return self._capability("instances_v2")

    def zones(self) -> tuple[Zones | None, bool]:
        return self._capability("zones")

    def clusters(self) -> tuple[Clusters | None, bool]:
        return self._capability("clusters")

    def routes(self) -> tuple[Routes | None, bool]:
        return self._capability("routes")

    def provider_name(self) -> str:
        return PROVIDER_NAME

    def has_cluster_id(self) -> bool:
        return self.cluster_id

    # Instances and InstancesV2

    def _by_name(self, name: str) -> FakeInstance:
        instance = self.instances_map.get(name)
        if instance is None or not instance.exists:
            raise InstanceNotFound(name)
        return instance

    def _by_provider_id(self, provider_id: str) -> FakeInstance:
        return self._by_name(provider_id.removeprefix(f"{PROVIDER_NAME}://"))

    def _for_node(self, node: Node) -> FakeInstance:
        provider_id = node.spec.provider_id if node.spec else None
        if provider_id:
            return self._by_provider_id(provider_id)
        return self._by_name(node.metadata.name or "")

    async def node_addresses(self, name: str) -> list[NodeAddress]:
        self._call("node_addresses", name)
        return list(self._by_name(name).addresses)

    async def node_addresses_by_provider_id(self, provider_id: str) -> list[NodeAddress]:
        self._call("node_addresses_by_provider_id", provider_id)
        return list(self._by_provider_id(provider_id).addresses)

    async def instance_id(self, name: str) -> str:
        self._call("instance_id", name)
        return self._by_name(name).name

    async def instance_type(self, name: str) -> str:
        self._call("instance_type", name)
        return self._by_name(name).instance_type

    async def instance_type_by_provider_id(self, provider_id: str) -> str:
        self._call("instance_type_by_provider_id", provider_id)
        return self._by_provider_id(provider_id).instance_type

    async def instance_exists_by_provider_id(self, provider_id: str) -> bool:
        self._call("instance_exists_by_provider_id", provider_id)
        try:
            self._by_provider_id(provider_id)
        except InstanceNotFound:
            return False
        return True

    async def instance_shutdown_by_provider_id(self, provider_id: str) -> bool:
        self._call("instance_shutdown_by_provider_id", provider_id)
        return self._by_provider_id(provider_id).shutdown

    async def instance_exists(self, node: Node) -> bool:
        self._call("instance_exists", node.metadata.name)
        try:
            self._for_node(node)
        except InstanceNotFound:
            return False
        return True

    async def instance_shutdown(self, node: Node) -> bool:
        self._call("instance_shutdown", node.metadata.name)
        return self._for_node(node).shutdown

    async def instance_metadata(self, node: Node) -> InstanceMetadata:
        self._call("instance_metadata", node.metadata.name)
        instance = self._for_node(node)
        return InstanceMetadata(
            provider_id=instance.provider_id,
            instance_type=instance.instance_type,
            node_addresses=instance.addresses,
            zone=instance.zone,
            region=instance.region,
        )

    # Zones

    async def get_zone(self) -> Zone:
        self._call("get_zone")
        raise NotImplementedByProvider("the fake cloud runs outside any instance")

    async def get_zone_by_provider_id(self, provider_id: str) -> Zone:
        self._call("get_zone_by_provider_id", provider_id)
        instance = self._by_provider_id(provider_id)
        return Zone(failure_domain=instance.zone, region=instance.region)

    async def get_zone_by_node_name(self, name: str) -> Zone:
        self._call("get_zone_by_node_name", name)
        instance = self._by_name(name)
        return Zone(failure_domain=instance.zone, region=instance.region)

    # Clusters

    async def list_clusters(self) -> list[str]:
        self._call("list_clusters")
        return list(self.clusters_list)

    async def master(self, cluster_name: str) -> str:
        self._call("master", cluster_name)
        return "127.0.0.1"

    # Routes

    async def list_routes(self, cluster_name: str) -> list[Route]:
        self._call("list_routes", cluster_name)
        return list(self.route_table.get(cluster_name, ()))

    async def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        self._call("create_route", route)
        routes = self.route_table.setdefault(cluster_name, [])
        if any(
            (r.target_node, r.destination_cidr) == (route.target_node, route.destination_cidr)
            for r in routes
        ):
            return
        routes.append(
            Route(
                name=f"{cluster_name}-{name_hint}",
                target_node=route.target_node,
                destination_cidr=route.destination_cidr,
                target_node_addresses=route.target_node_addresses,
            )
        )

    async def delete_route(self, cluster_name: str, route: Route) -> None:
        self._call("delete_route", route)
        routes = self.route_table.get(cluster_name, [])
        self.route_table[cluster_name] = [r for r in routes if r != route]

    # LoadBalancer

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return "a" + (service.metadata.uid or "").replace("-", "")[:31]

    async def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        self._call("get_load_balancer", service.metadata.name)
        balancer = self.balancers.get(self.get_load_balancer_name(cluster_name, service))
        if balancer is None:
            return None, False
        return _status(balancer), True

    async def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        hosts = sorted(n.metadata.name or "" for n in nodes)
        self._call("ensure_load_balancer", (service.metadata.name, hosts))
        name = self.get_load_balancer_name(cluster_name, service)
        balancer = self.balancers.get(name)
        ports = [p.port or 0 for p in (service.spec.ports if service.spec else None) or ()]
        if balancer is None:
            balancer = FakeBalancer(
                service=f"{service.metadata.namespace}/{service.metadata.name}",
                ip=f"203.0.113.{self._next_ip}",
                hosts=hosts,
                ports=ports,
            )
            self._next_ip += 1
            self.balancers[name] = balancer
        balancer.hosts = hosts
        balancer.ports = ports
        return _status(balancer)

    async def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        hosts = sorted(n.metadata.name or "" for n in nodes)
        self._call("update_load_balancer", (service.metadata.name, hosts))
        balancer = self.balancers.get(self.get_load_balancer_name(cluster_name, service))
        if balancer is None:
            raise LookupError(f"no load balancer for service {service.metadata.name}")
        balancer.hosts = hosts

    async def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        self._call("ensure_load_balancer_deleted", service.metadata.name)
        self.balancers.pop(self.get_load_balancer_name(cluster_name, service), None)


def _status(balancer: FakeBalancer) -> LoadBalancerStatus:
    return LoadBalancerStatus(ingress=[LoadBalancerIngress(ip=balancer.ip, ip_mode="VIP")])
