"""The route controller: the cloud routes each Node's pod CIDR to that Node.

Upstream's ``cloud-provider/controllers/route``.  The whole route table of the cluster is one
piece of state, so it is reconciled as one: a single queue key stands for "the routes", every
Node change that matters (pod CIDRs, addresses, NetworkUnavailable) enqueues it, and so does
every ``route_reconciliation_period`` (a route deleted in the cloud by hand comes back).  One
sync:

1. lists the cloud's routes for ``--cluster-name``;
2. creates, for every Node and each of its pod CIDRs, the route the cloud lacks (name hint:
   the Node's uid), recording ``FailedToCreateRoute`` on the Node when the cloud refuses;
3. deletes routes that are blackholes, or that lie in ``--cluster-cidr`` but no longer match a
   Node's pod CIDR (their Node is gone or has another CIDR); routes outside the cluster CIDR
   are not this controller's;
4. sets each Node's ``NetworkUnavailable`` condition: False (``RouteCreated``) once all its
   routes exist, True (``NoRouteCreated``) otherwise, written only when it changes.

Creating is idempotent in the cloud and the table is read fresh each time, so a restarted or
newly elected controller finds the routes its predecessor made and adds none twice.  Errors
are collected and raised at the end, so one failing route does not hold up the others.
"""

from __future__ import annotations

import ipaddress
import logging

from controlplane.cloud.context import (
    CapabilityUnsupported,
    CloudContext,
    CloudController,
    node_addresses,
)
from controlplane.cloud.provider import Route, Routes
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.nodeutil import node_condition
from kube.api import codec
from kube.api.kinds.core_v1.node import Node, NodeCondition

NAME = "route"
ROUTES_KEY = "routes"
CONDITION = "NetworkUnavailable"
EVENT_FAILED = "FailedToCreateRoute"

log = logging.getLogger("kubelab.cloud")


class RouteSyncError(Exception):
    """Some routes could not be created or deleted; the sync is retried."""


def pod_cidrs(node: Node) -> list[str]:
    spec = node.spec
    if spec is None:
        return []
    if spec.pod_cidrs:
        return list(spec.pod_cidrs)
    return [spec.pod_cidr] if spec.pod_cidr else []


def _network_unavailable(node: Node) -> tuple[str | None, str | None]:
    condition = node_condition(node, CONDITION)
    return (condition.status, condition.reason) if condition else (None, None)


class RouteController(CloudController):
    NAME = NAME
    EVENT_SOURCE = "route_controller"

    def __init__(self, ctx: ControllerContext, cloud: CloudContext) -> None:
        super().__init__(ctx, cloud)
        if not self.options.configure_cloud_routes:
            raise CapabilityUnsupported("--configure-cloud-routes is false")
        routes, supported = self.cloud.routes()
        if not supported or routes is None:
            raise CapabilityUnsupported(
                "--configure-cloud-routes is set, but the cloud provider does not support routes"
            )
        self.routes: Routes = routes
        self.cluster_cidrs = [
            ipaddress.ip_network(part.strip())
            for part in ctx.options.cluster_cidr.split(",")
            if part.strip()
        ]
        self.period = self.options.route_reconciliation_period
        self.nodes = ctx.informers.informer_for(Node)
        self.nodes.add_event_handler(self._changed, self._updated, self._changed)

    def _changed(self, _: object) -> None:
        self.queue.add(ROUTES_KEY)

    def _updated(self, old: Node, new: Node) -> None:
        if (pod_cidrs(old), node_addresses(old), _network_unavailable(old)) != (
            pod_cidrs(new),
            node_addresses(new),
            _network_unavailable(new),
        ):
            self.queue.add(ROUTES_KEY)

    def resync(self) -> None:
        self.queue.add(ROUTES_KEY)

    def _in_cluster_cidr(self, cidr: str) -> bool:
        network = ipaddress.ip_network(cidr, strict=False)
        return any(
            network.version == c.version and network.subnet_of(c)  # type: ignore[arg-type]
            for c in self.cluster_cidrs
        )

    async def sync_key(self, key: str) -> None:
        cluster = self.options.cluster_name
        existing = await self.routes.list_routes(cluster)
        routed = {(r.target_node, r.destination_cidr) for r in existing if not r.blackhole}
        nodes = self.nodes.lister.list()
        failures: list[str] = []
        for node in nodes:
            name = node.metadata.name or ""
            cidrs = pod_cidrs(node)
            for cidr in cidrs:
                if (name, cidr) in routed:
                    continue
                route = Route(
                    target_node=name,
                    destination_cidr=cidr,
                    target_node_addresses=tuple(node_addresses(node)),
                )
                try:
                    await self.routes.create_route(cluster, node.metadata.uid or name, route)
                except Exception as error:
                    message = f"Could not create route {cidr} for node {name}: {error}"
                    self.ctx.recorder.event(node, "Warning", EVENT_FAILED, message)
                    failures.append(message)
                    continue
                log.info("route: created route for node %s: %s", name, cidr)
                routed.add((name, cidr))
            if cidrs:
                await self._set_condition(node, all((name, c) in routed for c in cidrs))
        wanted = {(n.metadata.name or "", c) for n in nodes for c in pod_cidrs(n)}
        for route in existing:
            stale = (route.target_node, route.destination_cidr) not in wanted
            if route.blackhole or (stale and self._in_cluster_cidr(route.destination_cidr)):
                try:
                    await self.routes.delete_route(cluster, route)
                except Exception as error:
                    failures.append(f"Could not delete route {route.destination_cidr}: {error}")
                    continue
                log.info(
                    "route: deleted route %s via %s", route.destination_cidr, route.target_node
                )
        if failures:
            raise RouteSyncError("; ".join(failures))

    async def _set_condition(self, node: Node, created: bool) -> None:
        status, reason, message = (
            ("False", "RouteCreated", "RouteController created a route")
            if created
            else ("True", "NoRouteCreated", "RouteController failed to create a route")
        )
        current = node_condition(node, CONDITION)
        if current is not None and (current.status, current.reason) == (status, reason):
            return
        now = self.ctx.clock.now().replace(microsecond=0)
        condition = NodeCondition(
            type=CONDITION,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=now,
            last_heartbeat_time=now,
        )
        await self.ctx.client.patch(
            Node,
            node.metadata.name or "",
            None,
            {"status": {"conditions": [codec.to_builtins(condition)]}},
            patch_type="strategic",
            subresource="status",
        )


def new(ctx: ControllerContext, cloud: CloudContext) -> RouteController:
    return RouteController(ctx, cloud)
