"""Which Ingresses are ours, the routing table rebuilt from the caches, and their status.

:class:`IngressController` runs informers on IngressClasses, Ingresses, Services,
EndpointSlices and Secrets.  Every event only marks the state dirty; one loop then, level-
triggered, rebuilds the whole routing table from the caches (``routing.build``: a pure function
of what the caches hold, cheap at a lab's size) and hands it to ``on_table`` (the proxy's
``swap``), and brings every served Ingress's ``status.loadBalancer`` to what the controller's own
LoadBalancer Service reports (``--publish-service``, as ingress-nginx's flag; the lab's cloud
gives that Service its address).  A failed status write is retried after ``RETRY`` seconds; a
bad Ingress, Service or Secret only leaves a problem in the log, never stops the loop.

An Ingress is ours when its ``spec.ingressClassName`` (or, without one, the deprecated
``kubernetes.io/ingress.class`` annotation) names an IngressClass whose ``spec.controller`` is
ours (``kubelab.io/ingress`` by default, in the manner of k3s's ``traefik.io/ingress-controller``),
or when it names no class and one of our classes carries
``ingressclass.kubernetes.io/is-default-class: "true"`` (the DefaultIngressClass admission
plugin gives new Ingresses that class anyway; this covers those made before it existed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from controlplane.ingress import routing
from kube.api.kinds.core_v1.cluster import Secret
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, EndpointSlice
from kube.api.kinds.networking_v1 import (
    INGRESS_CLASS_ANNOTATION,
    Ingress,
    IngressClass,
    is_default_class,
)
from kube.client.errors import ApiError
from kube.client.informers import SharedInformer, SharedInformerFactory, wait_for_cache_sync
from kube.client.interface import ApiClient

log = logging.getLogger("kubelab.ingress")

CONTROLLER = "kubelab.io/ingress"
SERVICE_INDEX = "service"
RETRY = 5.0
"""Seconds before a failed status write is tried again."""
SETTLE = 0.05
"""Seconds a rebuild waits after the first event, so a burst of events makes one table."""


def _service_of_slice(endpoint_slice: EndpointSlice) -> list[str]:
    service = (endpoint_slice.metadata.labels or {}).get(SERVICE_NAME_LABEL)
    return [f"{endpoint_slice.metadata.namespace}/{service}"] if service else []


class IngressController:
    """See the module docstring.  Creating it asks ``factory`` for its informers; the caller
    starts the factory, then runs :meth:`run`."""

    def __init__(
        self,
        client: ApiClient,
        factory: SharedInformerFactory,
        on_table: Callable[[routing.RoutingTable], None],
        *,
        controller: str = CONTROLLER,
        publish_service: str | None = None,
    ) -> None:
        self.client = client
        self.on_table = on_table
        self.controller = controller
        self.publish_service = publish_service
        self.classes: SharedInformer[IngressClass] = factory.informer_for(IngressClass)
        self.ingresses: SharedInformer[Ingress] = factory.informer_for(Ingress)
        self.services: SharedInformer[Service] = factory.informer_for(Service)
        self.slices: SharedInformer[EndpointSlice] = factory.informer_for(
            EndpointSlice, indexers={SERVICE_INDEX: _service_of_slice}
        )
        self.secrets: SharedInformer[Secret] = factory.informer_for(Secret)
        self._dirty = asyncio.Event()
        for informer in self._informers:
            informer.add_change_handler(lambda _: self._dirty.set())
        self._problems: tuple[str, ...] = ()

    @property
    def _informers(self) -> list[SharedInformer[Any]]:
        return [self.classes, self.ingresses, self.services, self.slices, self.secrets]

    @property
    def synced(self) -> bool:
        return all(informer.has_synced for informer in self._informers)

    # routing.ClusterView over the caches.

    def service(self, namespace: str, name: str) -> Service | None:
        return self.services.lister.get(f"{namespace}/{name}")

    def endpoint_slices(self, namespace: str, service: str) -> list[EndpointSlice]:
        return self.slices.lister.by_index(SERVICE_INDEX, f"{namespace}/{service}")

    def secret(self, namespace: str, name: str) -> Secret | None:
        return self.secrets.lister.get(f"{namespace}/{name}")

    # Which Ingresses.

    def ours(self) -> list[Ingress]:
        """The Ingresses this controller serves, as cached."""
        mine = [
            c for c in self.classes.lister.list() if c.spec and c.spec.controller == self.controller
        ]
        names = {c.metadata.name for c in mine}
        default = any(is_default_class(c) for c in mine)
        served = []
        for ingress in self.ingresses.lister.list():
            spec = ingress.spec
            annotation = (ingress.metadata.annotations or {}).get(INGRESS_CLASS_ANNOTATION)
            named = (spec.ingress_class_name if spec else None) or annotation
            if named in names or (named is None and default):
                served.append(ingress)
        return served

    # The loop.

    async def run(self) -> None:
        """Rebuild and report on every change, until cancelled."""
        loop = asyncio.get_running_loop()
        if not await wait_for_cache_sync(*self._informers):
            return
        self._dirty.set()
        while True:
            await self._dirty.wait()
            await asyncio.sleep(SETTLE)
            self._dirty.clear()
            served = self.ours()
            table = routing.build(served, self)
            self.on_table(table)
            if table.problems != self._problems:
                for problem in table.problems:
                    log.warning("%s", problem)
                self._problems = table.problems
            try:
                await self.sync_status(served)
            except (ApiError, OSError) as error:
                log.warning("writing Ingress status: %s; again in %.0f s", error, RETRY)
                loop.call_later(RETRY, self._dirty.set)

    def load_balancer(self) -> list[dict[str, str]]:
        """The addresses of the published Service's load balancer, as Ingress status has them."""
        if self.publish_service is None:
            return []
        service = self.services.lister.get(self.publish_service)
        status = service.status if service is not None else None
        balancer = status.load_balancer if status is not None else None
        found = []
        for point in (balancer.ingress if balancer else None) or ():
            if point.ip:
                found.append({"ip": point.ip})
            elif point.hostname:
                found.append({"hostname": point.hostname})
        return found

    async def sync_status(self, served: list[Ingress]) -> None:
        """Every served Ingress's status.loadBalancer as :meth:`load_balancer` says."""
        wanted = self.load_balancer()
        for ingress in served:
            status = ingress.status
            balancer = status.load_balancer if status is not None else None
            have = [
                {"ip": p.ip} if p.ip else {"hostname": p.hostname or ""}
                for p in (balancer.ingress if balancer else None) or ()
            ]
            if have == wanted:
                continue
            patch = {"status": {"loadBalancer": {"ingress": wanted or None}}}
            try:
                await self.client.patch(
                    Ingress,
                    ingress.metadata.name or "",
                    ingress.metadata.namespace,
                    patch,
                    subresource="status",
                )
            except ApiError as error:
                if not error.not_found:
                    raise
