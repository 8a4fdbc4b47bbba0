"""The metrics API: ``metrics.k8s.io/v1beta1`` nodes and pods, served behind the aggregator.

Every request comes through the API server's front proxy: it is believed only with a client
certificate of the requestheader CA (``kube.client.delegation``), the user it names is then
authorized by a SubjectAccessReview to the API server, and a denial is upstream's 403 Status.
``/healthz``, ``/livez`` and ``/readyz`` answer anyone, as upstream's always-allowed paths;
``/readyz`` fails until the storage can tell some usage (two scrapes), as upstream's.

Objects are made when read, as upstream's: the nodes and pods the informers know, filtered by
the request's label and field selectors, each with the usage the storage has for it (one
without usage is left out of a list, and is a 404 to a get).  Answers use the API server's own
pieces: content negotiation (JSON, YAML, or a Table from the kinds' printer columns, which is
what ``kubectl get nodes.metrics.k8s.io`` asks for), discovery's APIResourceList and
Status errors.  Metrics objects have no protobuf message here: a client that accepts only
protobuf gets a 406, one that prefers it gets JSON.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping

from aiohttp import web

from controlplane.apiserver import auth, errors
from controlplane.apiserver.endpoints import discovery, negotiation, requestinfo, tables
from controlplane.apiserver.endpoints.handlers import json_response, respond, status_response
from controlplane.apiserver.registry.store import Selection
from controlplane.metricsserver.storage import Storage, Usage
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.pod import ResourceList as ResourceQuantities
from kube.api.kinds.metrics_v1beta1 import (
    GROUP,
    VERSION,
    ContainerMetrics,
    NodeMetrics,
    PodMetrics,
)
from kube.api.labels import Selector
from kube.api.meta_v1 import ListMeta, ObjectMeta, Resource, ResourceList
from kube.api.quantity import Format, Quantity
from kube.api.scheme import KindInfo
from kube.client import delegation
from kube.client.informers import Indexer
from kube.client.rest import Client
from kube.clock import Clock
from kube.component import go_duration

PREFIX = f"/apis/{GROUP}/{VERSION}"
READY_PATH = "/readyz"
HEALTH_PATHS = ("/healthz", "/livez", READY_PATH)
KINDS = {"nodes": NodeMetrics.kind_info, "pods": PodMetrics.kind_info}


def usage_list(usage: Usage) -> ResourceQuantities:
    """``usage`` as the API writes it: CPU in nanocores, memory in bytes (binary notation)."""
    return {
        "cpu": str(Quantity(usage.cpu_nanocores, -9, Format.DECIMAL_SI)),
        "memory": str(Quantity(usage.memory, 0, Format.BINARY_SI)),
    }


def _meta(obj: Resource, now: datetime.datetime) -> ObjectMeta:
    return ObjectMeta(
        name=obj.metadata.name,
        namespace=obj.metadata.namespace,
        labels=obj.metadata.labels,
        creation_timestamp=now,
    )


def node_metrics(node: Node, usage: Usage, now: datetime.datetime) -> NodeMetrics:
    return NodeMetrics(
        metadata=_meta(node, now),
        timestamp=usage.timestamp,
        window=go_duration(usage.window.total_seconds()),
        usage=usage_list(usage),
    )


def pod_metrics(pod: Pod, usages: Mapping[str, Usage], now: datetime.datetime) -> PodMetrics:
    first = next(iter(usages.values()))
    return PodMetrics(
        metadata=_meta(pod, now),
        timestamp=first.timestamp,
        window=go_duration(first.window.total_seconds()),
        containers=[
            ContainerMetrics(name=name, usage=usage_list(usage)) for name, usage in usages.items()
        ],
    )


def _name(obj: Resource) -> tuple[str, str]:
    return obj.metadata.namespace or "", obj.metadata.name or ""


class MetricsAPI:
    """The extension server's handler; ``app()`` is its aiohttp application."""

    def __init__(
        self,
        storage: Storage,
        nodes: Indexer[Node],
        pods: Indexer[Pod],
        client: Client,
        requestheader: delegation.RequestHeaderAuthenticator,
        clock: Clock,
    ) -> None:
        self.storage = storage
        self.nodes = nodes
        self.pods = pods
        self.authorizer = delegation.Authorizer(client, clock)
        self.requestheader = requestheader
        self.clock = clock

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == READY_PATH and not self.storage.ready():
            return web.Response(status=500, text="[-]metric-storage-ready failed\n")
        if request.path in HEALTH_PATHS:
            return web.Response(text="ok")
        try:
            user = self._authenticate(request)
            return await self._serve(request, user)
        except errors.ApiError as error:
            return status_response(request, error)

    def _authenticate(self, request: web.Request) -> auth.User:
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
        cert = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        remote = self.requestheader.authenticate(cert, list(request.headers.items()))
        if remote is None:
            raise errors.ApiError(401, "Unauthorized", "Unauthorized")
        return auth.User(remote.name, remote.groups, remote.uid, remote.extra)

    async def _serve(self, request: web.Request, user: auth.User) -> web.Response:
        path = request.path.rstrip("/")
        if path == PREFIX:
            return json_response(discovery.api_resource_list(KINDS.values(), GROUP, VERSION))
        info = requestinfo.parse(request.method, request.path, request.query)
        kind = KINDS.get(info.resource) if info.group_version == f"{GROUP}/{VERSION}" else None
        if kind is None or info.subresource:
            raise errors.not_routed()
        if info.verb not in kind.verbs:
            raise errors.verb_not_served(bool(info.name), kind.verbs)
        allowed, reason = await self.authorizer.authorize(
            delegation.RemoteUser(user.name, user.groups, user.uid, user.extra),
            verb=info.verb,
            group=GROUP,
            version=VERSION,
            resource=info.resource,
            namespace=info.namespace,
            name=info.name,
        )
        if not allowed:
            denied = auth.forbidden(user, info)
            if reason:
                denied.message += f": {reason}"
            raise denied
        selection = Selection.parse(
            kind, request.query.get("labelSelector"), request.query.get("fieldSelector")
        )
        found = self._metrics(kind, info.namespace, info.name, selection)
        now = self.clock.now()
        output = negotiation.choose(request.headers.get("Accept"))
        if info.name:
            if not found:
                raise errors.not_found(kind, info.name)
            return self._render(kind, found, now, output, request, single=True)
        return self._render(kind, found, now, output, request, single=False)

    def _metrics(
        self, kind: KindInfo, namespace: str, name: str, selection: Selection
    ) -> list[Resource]:
        now = self.clock.now()
        found: list[Resource] = []
        if kind is NodeMetrics.kind_info:
            for node in sorted(self.nodes.list(), key=_name):
                usage = self.storage.node(node.metadata.name or "")
                if usage is not None and (not name or node.metadata.name == name):
                    found.append(node_metrics(node, usage, now))
        else:
            # A pod's metrics carry its labels: the pods they do not select are left out
            # before any metrics are made.
            labels = selection.labels or Selector.everything()
            for pod in sorted(self.pods.select(namespace or None, labels), key=_name):
                meta = pod.metadata
                if name and meta.name != name:
                    continue
                usages = self.storage.pod(meta.namespace or "", meta.name or "")
                if usages is not None:
                    found.append(pod_metrics(pod, usages, now))
        return [metrics for metrics in found if selection.matches(kind, metrics)]

    def _render(
        self,
        kind: KindInfo,
        found: list[Resource],
        now: datetime.datetime,
        output: negotiation.Output,
        request: web.Request,
        *,
        single: bool,
    ) -> web.Response:
        if output.as_ == negotiation.TABLE:
            include = request.query.get("includeObject") or "Metadata"
            return respond(tables.table(kind, found, now, include=include), 200, output)
        if output.as_:
            raise errors.not_acceptable(f"{kind.group_resource} are served as objects or tables")
        if single:
            return respond(found[0].typed(), 200, output)
        listed = ResourceList(
            kind=kind.list_kind, api_version=kind.api_version, metadata=ListMeta(), items=found
        )
        return respond(listed, 200, output)
