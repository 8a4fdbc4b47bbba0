"""The service controller: a cloud load balancer for every Service of type LoadBalancer.

Upstream's ``cloud-provider/controllers/service``.  Keys are ``namespace/name``; one more key,
``NODES_KEY`` (which no Service can have), stands for "the set of nodes changed".

Syncing a Service (``syncLoadBalancerIfNeeded``):

- if it wants a load balancer (type LoadBalancer, no ``loadBalancerClass``) and is not being
  deleted: add the ``service.kubernetes.io/load-balancer-cleanup`` finalizer *before* asking
  the cloud (so the Service cannot disappear while a load balancer exists for it), then
  ``ensure_load_balancer`` over the ready nodes (not labelled
  ``node.kubernetes.io/exclude-from-external-load-balancers``) and write the returned status
  to ``status.loadBalancer``;
- otherwise, if it carries the finalizer (deleted, or its type changed): delete the load
  balancer if the cloud has one, clear ``status.loadBalancer``, then remove the finalizer.

Events tell each step: ``EnsuringLoadBalancer``, ``EnsuredLoadBalancer``,
``DeletingLoadBalancer``, ``DeletedLoadBalancer``, ``UnAvailableLoadBalancer`` (no node to send
traffic to), ``SyncLoadBalancerFailed`` (then the key is retried).

The last state of each Service is kept so a Service deleted without the finalizer (or
recreated under its name with a new uid) still has its load balancer removed.  Syncing
``NODES_KEY`` calls ``update_load_balancer`` (event ``UpdatedLoadBalancer`` or
``UpdateLoadBalancerFailed``) for every load balancer whose hosts differ from the current ready
nodes; a Service this instance has not ensured yet (after a restart) is enqueued instead, so
it gets a full ensure.  The cloud's ensure is idempotent, so a new leader re-ensuring every
Service changes nothing and creates nothing twice.  A per-Service lock keeps a node update
and an ensure of the same Service from interleaving.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any

from controlplane.cloud.context import CapabilityUnsupported, CloudContext, CloudController
from controlplane.cloud.provider import LoadBalancer
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.nodeutil import is_ready
from kube.api import codec
from kube.api.kinds.core_v1.node import LABEL_NODE_EXCLUDE_BALANCERS, Node
from kube.api.kinds.core_v1.service import LoadBalancerStatus, Service
from kube.client.errors import ApiError

NAME = "service"
NODES_KEY = ":nodes"
FINALIZER = "service.kubernetes.io/load-balancer-cleanup"

log = logging.getLogger("kubelab.cloud")


def wants_load_balancer(service: Service) -> bool:
    spec = service.spec
    return spec is not None and spec.type == "LoadBalancer" and spec.load_balancer_class is None


def has_finalizer(service: Service) -> bool:
    return FINALIZER in (service.metadata.finalizers or ())


def needs_cleanup(service: Service) -> bool:
    """Whether the Service's load balancer must go: it carries the finalizer and is being
    deleted or no longer wants one."""
    if not has_finalizer(service):
        return False
    return service.metadata.deletion_timestamp is not None or not wants_load_balancer(service)


def _lb_fields(service: Service) -> Any:
    """What of a Service its load balancer depends on."""
    spec = service.spec
    return (
        service.metadata.uid,
        wants_load_balancer(service),
        codec.to_builtins(spec.ports) if spec else None,
        spec.load_balancer_ip if spec else None,
        spec.load_balancer_source_ranges if spec else None,
        spec.external_traffic_policy if spec else None,
        spec.health_check_node_port if spec else None,
        service.metadata.annotations,
    )


def lb_node(node: Node) -> bool:
    """Whether a load balancer should send traffic to the Node."""
    return is_ready(node) and LABEL_NODE_EXCLUDE_BALANCERS not in (node.metadata.labels or {})


def _lb_relevant(node: Node) -> Any:
    return lb_node(node), node.metadata.labels, node.status.addresses if node.status else None


def _ingress_ips(status: LoadBalancerStatus | None) -> str:
    return ", ".join(i.ip or i.hostname or "" for i in (status.ingress if status else None) or ())


class ServiceController(CloudController):
    NAME = NAME
    EVENT_SOURCE = "service-controller"

    def __init__(self, ctx: ControllerContext, cloud: CloudContext) -> None:
        super().__init__(ctx, cloud)
        balancer, supported = self.cloud.load_balancer()
        if not supported or balancer is None:
            raise CapabilityUnsupported("the cloud provider does not support load balancers")
        self.balancer: LoadBalancer = balancer
        self.period = self.options.node_sync_period
        self._cache: dict[str, Service] = {}
        """Key → the last state of the Service seen by a sync (upstream ``serviceCache``)."""
        self._hosts: dict[str, frozenset[str]] = {}
        """Key → the node names its load balancer was last given."""
        self._locks: collections.defaultdict[str, asyncio.Lock] = collections.defaultdict(
            asyncio.Lock
        )
        self.services = ctx.informers.informer_for(Service)
        self.services.add_event_handler(self._added, self._updated, self.enqueue)
        self.nodes = ctx.informers.informer_for(Node)
        self.nodes.add_event_handler(self._node_changed, self._node_updated, self._node_changed)

    # Handlers.

    def _added(self, service: Service) -> None:
        if wants_load_balancer(service) or needs_cleanup(service):
            self.enqueue(service)

    def _updated(self, old: Service, new: Service) -> None:
        if needs_cleanup(new) or (
            (wants_load_balancer(old) or wants_load_balancer(new))
            and _lb_fields(old) != _lb_fields(new)
        ):
            self.enqueue(new)

    def _node_changed(self, _: object) -> None:
        self.queue.add(NODES_KEY)

    def _node_updated(self, old: Node, new: Node) -> None:
        if _lb_relevant(old) != _lb_relevant(new):
            self.queue.add(NODES_KEY)

    def resync(self) -> None:
        self.queue.add(NODES_KEY)

    # Syncing.

    async def sync_key(self, key: str) -> None:
        if key == NODES_KEY:
            await self._sync_nodes()
            return
        async with self._locks[key]:
            service = self.services.lister.get(key)
            if service is None:
                await self._deleted(key)
            else:
                await self._create_or_update(key, service)

    def _lb_nodes(self) -> list[Node]:
        return sorted(
            (n for n in self.nodes.lister.list() if lb_node(n)),
            key=lambda n: n.metadata.name or "",
        )

    async def _deleted(self, key: str) -> None:
        cached = self._cache.get(key)
        if cached is not None:
            await self._delete_load_balancer(cached)
            self._forget(key)

    async def _create_or_update(self, key: str, service: Service) -> None:
        cached = self._cache.get(key)
        if cached is not None and cached.metadata.uid != service.metadata.uid:
            await self._delete_load_balancer(cached)
        self._cache[key] = service
        try:
            if not wants_load_balancer(service) or needs_cleanup(service):
                await self._delete_load_balancer(service)
                await self._write_status(service, LoadBalancerStatus())
                await self._set_finalizer(service, present=False)
                self._forget(key)
            else:
                await self._ensure(key, service)
        except Exception as error:
            self.ctx.recorder.event(
                service,
                "Warning",
                "SyncLoadBalancerFailed",
                f"Error syncing load balancer: {error}",
            )
            raise

    def _forget(self, key: str) -> None:
        self._cache.pop(key, None)
        self._hosts.pop(key, None)

    async def _ensure(self, key: str, service: Service) -> None:
        cluster = self.options.cluster_name
        self.ctx.recorder.event(service, "Normal", "EnsuringLoadBalancer", "Ensuring load balancer")
        service = await self._set_finalizer(service, present=True)
        nodes = self._lb_nodes()
        if not nodes:
            self.ctx.recorder.event(
                service,
                "Warning",
                "UnAvailableLoadBalancer",
                "There are no available nodes for LoadBalancer",
            )
        status = await self.balancer.ensure_load_balancer(cluster, service, nodes)
        self._hosts[key] = frozenset(n.metadata.name or "" for n in nodes)
        self.ctx.recorder.event(service, "Normal", "EnsuredLoadBalancer", "Ensured load balancer")
        await self._write_status(service, status)
        log.info("service: load balancer of %s at %s", key, _ingress_ips(status) or "(none)")

    async def _delete_load_balancer(self, service: Service) -> None:
        cluster = self.options.cluster_name
        _, exists = await self.balancer.get_load_balancer(cluster, service)
        if not exists:
            return
        self.ctx.recorder.event(service, "Normal", "DeletingLoadBalancer", "Deleting load balancer")
        await self.balancer.ensure_load_balancer_deleted(cluster, service)
        self.ctx.recorder.event(service, "Normal", "DeletedLoadBalancer", "Deleted load balancer")

    async def _set_finalizer(self, service: Service, *, present: bool) -> Service:
        """The Service with the finalizer added or removed (written only if that changes it)."""
        finalizers = list(service.metadata.finalizers or ())
        if (FINALIZER in finalizers) == present:
            return service
        finalizers = (
            [*finalizers, FINALIZER] if present else [f for f in finalizers if f != FINALIZER]
        )
        body = {
            "metadata": {
                "finalizers": finalizers or None,
                "resourceVersion": service.metadata.resource_version,
            }
        }
        return await self._patch(service, body, "")

    async def _write_status(self, service: Service, status: LoadBalancerStatus) -> None:
        current = service.status.load_balancer if service.status else None
        if codec.to_builtins(current or LoadBalancerStatus()) == codec.to_builtins(status):
            return
        ingress = codec.to_builtins(status.ingress) if status.ingress else None
        await self._patch(service, {"status": {"loadBalancer": {"ingress": ingress}}}, "status")

    async def _patch(self, service: Service, body: Any, subresource: str) -> Service:
        try:
            return await self.ctx.client.patch(
                Service,
                service.metadata.name or "",
                service.metadata.namespace,
                body,
                patch_type="merge",
                subresource=subresource,
            )
        except ApiError as error:
            # Gone right after its finalizer was removed: nothing left to write.
            if error.not_found:
                return service
            raise

    async def _sync_nodes(self) -> None:
        nodes = self._lb_nodes()
        hosts = frozenset(n.metadata.name or "" for n in nodes)
        failed: list[str] = []
        for service in self.services.lister.list():
            if not wants_load_balancer(service) or needs_cleanup(service):
                continue
            key = f"{service.metadata.namespace}/{service.metadata.name}"
            if key not in self._hosts:
                self.enqueue(service)
                continue
            async with self._locks[key]:
                if self._hosts.get(key) == hosts:
                    continue
                try:
                    await self.balancer.update_load_balancer(
                        self.options.cluster_name, service, nodes
                    )
                except Exception as error:
                    self.ctx.recorder.event(
                        service,
                        "Warning",
                        "UpdateLoadBalancerFailed",
                        f"Error updating load balancer with new hosts {sorted(hosts)}: {error}",
                    )
                    failed.append(key)
                    continue
                self._hosts[key] = hosts
                self.ctx.recorder.event(
                    service, "Normal", "UpdatedLoadBalancer", "Updated load balancer with new hosts"
                )
        if failed:
            raise RuntimeError(f"updating the hosts of load balancers failed: {', '.join(failed)}")


def new(ctx: ControllerContext, cloud: CloudContext) -> ServiceController:
    return ServiceController(ctx, cloud)
