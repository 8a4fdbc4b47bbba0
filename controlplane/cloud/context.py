"""What the cloud controllers share: the cloud, their options, and a periodic resync.

The cloud controllers have the shape of every other controller
(:class:`controlplane.controllers.controller.Controller`: handlers enqueue keys, workers sync
them level-triggered from the caches) and are run by the same manager.  What they add is the
cloud, handed over in a :class:`CloudContext` next to the usual ``ControllerContext``, and a
period: a cloud changes without the API server hearing of it (an instance is deleted, a route
is removed by hand), so each controller also re-enqueues what it watches every so often, as
upstream's do with their monitor and reconcile loops.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from controlplane.cloud.provider import CloudProvider
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller
from controlplane.controllers.nodeutil import node_taints
from kube.api.kinds.core_v1.node import Node, NodeAddress

TAINT_UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
TAINT_SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"


class CapabilityUnsupported(Exception):
    """The cloud lacks what a controller needs; the controller does not start."""


@dataclass(frozen=True)
class CloudOptions:
    """The cloud-controller-manager's flags that its controllers read."""

    cluster_name: str = "kubernetes"
    configure_cloud_routes: bool = True
    node_status_update_frequency: float = 300.0
    """How often the cloud node controller refreshes initialized Nodes' addresses."""
    node_monitor_period: float = 5.0
    """How often the lifecycle controller asks the cloud about every Node."""
    route_reconciliation_period: float = 10.0
    node_sync_period: float = 100.0
    """How often the service controller re-checks the hosts of every load balancer."""


@dataclass(frozen=True)
class CloudContext:
    cloud: CloudProvider
    options: CloudOptions = CloudOptions()


class CloudController(Controller):
    """A controller of the cloud-controller-manager: ``resync`` runs every ``period``."""

    period: float

    def __init__(self, ctx: ControllerContext, cloud: CloudContext) -> None:
        super().__init__(ctx)
        self.cloud = cloud.cloud
        self.options = cloud.options

    def resync(self) -> None:
        """Enqueue everything this controller reconciles with the cloud."""
        raise NotImplementedError

    async def run(self, workers: int) -> None:
        await self.ctx.informers.wait_for_cache_sync()
        periodic = asyncio.create_task(self._every_period())
        try:
            await super().run(workers)
        finally:
            periodic.cancel()

    async def _every_period(self) -> None:
        while True:
            await self.ctx.clock.sleep(self.period)
            self.resync()


def internal_ip(node: Node) -> str | None:
    """The Node's first InternalIP, as its status lists it."""
    for address in node_addresses(node):
        if address.type == "InternalIP":
            return address.address
    return None


def node_addresses(node: Node) -> list[NodeAddress]:
    return list((node.status.addresses if node.status else None) or ())


def has_taint(node: Node, key: str) -> bool:
    return any(t.key == key for t in node_taints(node))
