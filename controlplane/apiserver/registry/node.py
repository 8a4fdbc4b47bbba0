"""``nodes/proxy``: requests relayed to a node's kubelet (``kubectl get --raw
/api/v1/nodes/NAME/proxy/metrics``, ``.../proxy/stats/summary``)."""

from __future__ import annotations

from aiohttp import web

from controlplane.apiserver.registry.rest import Backends
from controlplane.apiserver.registry.store import ResourceStore
from kube.api.kinds.core_v1.node import Node


class ProxyREST:
    """A Connecter: ``<path>`` after ``proxy`` is fetched from the node's kubelet."""

    def __init__(self, store: ResourceStore, backends: Backends) -> None:
        self.store = store
        self.backends = backends

    async def connect(
        self, request: web.Request, namespace: str, name: str, path: str
    ) -> web.StreamResponse:
        node = await self.store.get(namespace, name)
        assert isinstance(node, Node)
        return await self.backends.kubelet_client().relay_get(request, node, path, request.query)
