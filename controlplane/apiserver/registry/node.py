"""``nodes/proxy``: requests relayed to a node's kubelet (``kubectl get --raw
/api/v1/nodes/NAME/proxy/metrics``, ``.../proxy/stats/summary``) or, named ``NAME:PORT`` or
``SCHEME:NAME:PORT``, to another port of the node's address (``NAME:10256/proxy/healthz``,
kube-proxy's health), as upstream's node ``ResourceLocation`` finds them."""

from __future__ import annotations

from aiohttp import web

from controlplane.apiserver.registry import proxy
from controlplane.apiserver.registry.rest import Backends
from controlplane.apiserver.registry.store import ResourceStore
from kube.api.kinds.core_v1.node import Node


class ProxyREST:
    """A Connecter: ``<path>`` after ``proxy`` relayed to the node, any method."""

    def __init__(self, store: ResourceStore, backends: Backends) -> None:
        self.store = store
        self.backends = backends

    async def connect(
        self, request: web.Request, namespace: str, name: str, path: str
    ) -> web.StreamResponse:
        scheme, node_name, port = proxy.split_scheme_name_port(name, "node")
        node = await self.store.get(namespace, node_name)
        assert isinstance(node, Node)
        host, kubelet_port = proxy.kubelet_address(node)
        if port in ("", str(kubelet_port)):
            tls = self.backends.kubelet_client().context
            location = proxy.Location("https", host, str(kubelet_port), tls)
        else:
            location = proxy.Location(scheme, host, port)
        return await proxy.relay_http(request, location, path)
