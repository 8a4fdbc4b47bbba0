"""The cloud-provider interface: what a cloud must offer the cloud-controller-manager.

Upstream's ``k8s.io/cloud-provider`` ``cloud.go``, in Python.  A provider is one object
(:class:`CloudProvider`) whose optional capabilities are returned as ``(implementation,
supported)`` pairs, so the controllers ask "does this cloud do routes?" instead of catching
errors: a cloud without routes answers ``(None, False)`` and the route controller does not
start.  Each capability is its own Protocol (:class:`LoadBalancer`, :class:`Instances`,
:class:`InstancesV2`, :class:`Zones`, :class:`Clusters`, :class:`Routes`), so a provider
implements only the ones it supports, and mypy checks it structurally.

Methods that talk to the cloud are coroutines.  Every method states what it must treat as
read-only (the Service and Node objects it is handed belong to the controller's cache) and
what must be idempotent (the controllers call again after a restart, a leader change or a
failed status write, and must never get a second load balancer or route for it).

Two sentinel errors keep upstream's meaning: :class:`InstanceNotFound` ("this instance does not
exist in the cloud", which the lifecycle controller turns into deleting the Node) and
:class:`NotImplementedByProvider` (upstream ``cloudprovider.NotImplemented``: a method of a
supported capability that this cloud cannot answer).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kube.api.kinds.core_v1.node import Node, NodeAddress
from kube.api.kinds.core_v1.service import LoadBalancerStatus, Service
from kube.client.rest import Client


class InstanceNotFound(Exception):
    """The instance does not exist in the cloud (upstream ``cloudprovider.InstanceNotFound``)."""


class NotImplementedByProvider(Exception):
    """The cloud does not implement this method (upstream ``cloudprovider.NotImplemented``)."""


class ClientBuilder(Protocol):
    """Gives a provider API clients (upstream ``ControllerClientBuilder``)."""

    def client(self, name: str) -> Client:
        """A client for the provider's own use, identified by ``name`` (its user agent)."""
        ...


@dataclass(frozen=True)
class Zone:
    """Where an instance runs: its failure domain and region."""

    failure_domain: str
    region: str


@dataclass(frozen=True)
class InstanceMetadata:
    """What the cloud knows of one instance (upstream ``cloudprovider.InstanceMetadata``)."""

    provider_id: str
    instance_type: str = ""
    node_addresses: tuple[NodeAddress, ...] = ()
    zone: str = ""
    region: str = ""


@dataclass(frozen=True)
class Route:
    """A route of the pod network: traffic for ``destination_cidr`` goes to ``target_node``.

    ``name`` is the cloud's name for it (ignored when creating; the cloud may use the name
    hint).  ``target_node_addresses`` are the target Node's addresses as its status lists them.
    ``blackhole`` marks a route whose target is gone; the route controller deletes those.
    """

    target_node: str
    destination_cidr: str
    name: str = ""
    target_node_addresses: tuple[NodeAddress, ...] = field(default=(), compare=False)
    blackhole: bool = False


class LoadBalancer(Protocol):
    """Load balancers for Services of type LoadBalancer.

    Every method must treat the Service and Node objects as read-only.  ``cluster_name`` is the
    cluster as ``--cluster-name`` names it; a cloud may serve several clusters.
    """

    async def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        """Whether the Service's load balancer exists and, if so, its status; read-only."""
        ...

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        """The cloud's name for the Service's load balancer; stable for the Service's life."""
        ...

    async def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        """Create the load balancer, or update the existing one, to send the Service's ports
        to ``nodes``; its status.  Idempotent: a second call never makes a second one."""
        ...

    async def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        """Change the hosts behind the existing load balancer to ``nodes``; idempotent."""
        ...

    async def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        """Delete the load balancer if it exists; success if it did not.

        Idempotent and thorough: a load balancer made of several parts may look absent to
        ``get_load_balancer`` while parts of it remain, and this removes them too.
        """
        ...


class Instances(Protocol):
    """Instances by node name and provider ID (upstream ``Instances``, the older interface)."""

    async def node_addresses(self, name: str) -> list[NodeAddress]:
        """The addresses of the instance named ``name``; read-only."""
        ...

    async def node_addresses_by_provider_id(self, provider_id: str) -> list[NodeAddress]:
        """The addresses of the instance with that provider ID; read-only."""
        ...

    async def instance_id(self, name: str) -> str:
        """The cloud's ID of the instance; InstanceNotFound if it does not exist."""
        ...

    async def instance_type(self, name: str) -> str:
        """The instance's type; read-only."""
        ...

    async def instance_type_by_provider_id(self, provider_id: str) -> str:
        """The type of the instance with that provider ID; read-only."""
        ...

    async def instance_exists_by_provider_id(self, provider_id: str) -> bool:
        """Whether the instance still exists; False only when the cloud says it is gone."""
        ...

    async def instance_shutdown_by_provider_id(self, provider_id: str) -> bool:
        """Whether the instance is shut down (exists, but is not running)."""
        ...


class InstancesV2(Protocol):
    """Instances by Node object (upstream ``InstancesV2``): one call gives all the metadata.

    Every method must treat the Node as read-only; the Node may not carry a providerID yet.
    """

    async def instance_exists(self, node: Node) -> bool:
        """Whether the Node's instance exists; False only when the cloud says it is gone."""
        ...

    async def instance_shutdown(self, node: Node) -> bool:
        """Whether the Node's instance is shut down."""
        ...

    async def instance_metadata(self, node: Node) -> InstanceMetadata:
        """The instance's provider ID, type, addresses, zone and region; InstanceNotFound if
        there is no such instance."""
        ...


class Zones(Protocol):
    """Zones of instances (upstream ``Zones``)."""

    async def get_zone(self) -> Zone:
        """The zone the calling process runs in (NotImplementedByProvider if the cloud cannot
        tell, as outside any instance)."""
        ...

    async def get_zone_by_provider_id(self, provider_id: str) -> Zone:
        """The zone of the instance with that provider ID."""
        ...

    async def get_zone_by_node_name(self, name: str) -> Zone:
        """The zone of the instance named ``name``."""
        ...


class Clusters(Protocol):
    """Clusters the cloud hosts (upstream ``Clusters``)."""

    async def list_clusters(self) -> list[str]:
        """The names of the clusters; read-only."""
        ...

    async def master(self, cluster_name: str) -> str:
        """The address (DNS name or IP) of the cluster's API server."""
        ...


class Routes(Protocol):
    """The pod network's routes, per cluster (upstream ``Routes``)."""

    async def list_routes(self, cluster_name: str) -> list[Route]:
        """Every route this cloud manages for ``cluster_name``; read-only."""
        ...

    async def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        """Create the route (``route.name`` is ignored; ``name_hint`` may name it).
        Idempotent: creating a route that exists is success."""
        ...

    async def delete_route(self, cluster_name: str, route: Route) -> None:
        """Delete a route as ``list_routes`` returned it; a route already gone is success."""
        ...


class CloudProvider(Protocol):
    """A cloud (upstream ``cloudprovider.Interface``)."""

    def initialize(self, client_builder: ClientBuilder, stop: asyncio.Event) -> None:
        """Called once before any controller runs, inside the running event loop.  The
        provider may start its own housekeeping tasks, which must end when ``stop`` is set."""
        ...

    def load_balancer(self) -> tuple[LoadBalancer | None, bool]: ...

    def instances(self) -> tuple[Instances | None, bool]: ...

    def instances_v2(self) -> tuple[InstancesV2 | None, bool]:
        """Preferred over ``instances`` by the node controllers when supported."""
        ...

    def zones(self) -> tuple[Zones | None, bool]: ...

    def clusters(self) -> tuple[Clusters | None, bool]: ...

    def routes(self) -> tuple[Routes | None, bool]: ...

    def provider_name(self) -> str:
        """The provider's registered name; also the scheme of the provider IDs it issues."""
        ...

    def has_cluster_id(self) -> bool:
        """Whether the cloud has a cluster ID to tag its resources with; without one the
        cloud-controller-manager refuses to start unless ``--allow-untagged-cloud``."""
        ...
