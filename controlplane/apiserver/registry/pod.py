"""The subresources of a Pod that are not the object itself: ``pods/binding`` (the scheduler
assigns a node, once; the spec is otherwise immutable), ``pods/eviction`` (a delete only while
no PodDisruptionBudget forbids it), the streams a node's kubelet serves (``pods/log``,
``exec``, ``attach``, ``portforward``, relayed by ``proxy``) and ``pods/proxy``, requests
relayed to the pod itself."""

from __future__ import annotations

from aiohttp import web

from controlplane.apiserver import errors
from controlplane.apiserver.registry import proxy
from controlplane.apiserver.registry.rest import Backends
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Binding, Pod, PodCondition
from kube.api.kinds.policy_v1 import Eviction, PodDisruptionBudget
from kube.api.labels import Selector
from kube.api.meta_v1 import DeleteOptions, Resource, Status

CREATED = Status(status="Success", code=201)
"""What a binding or an eviction answers."""


class BindingREST:
    """``pods/binding`` (and ``bindings``, the pod named by the Binding): a Creater taking a
    Binding that names the pod's node."""

    body = Binding.kind_info

    def __init__(self, store: ResourceStore) -> None:
        self.store = store

    async def create(self, namespace: str, name: str, obj: Resource, ctx: RequestContext) -> Status:
        assert isinstance(obj, Binding)
        name = name or obj.metadata.name or ""
        if obj.metadata.name and obj.metadata.name != name:
            raise errors.bad_request("the binding's name does not match the pod's")
        target = obj.target
        if target is None or not target.name:
            raise errors.bad_request("binding target: a node name is required")
        node_name, info, clock = target.name, self.store.info, self.store.clock

        def assign(pod: Resource) -> Resource:
            assert isinstance(pod, Pod)
            if pod.metadata.deletion_timestamp is not None:
                raise errors.conflict(
                    info, name, "pod is being deleted, cannot be assigned to a host"
                )
            if pod.spec is None:
                raise errors.bad_request("pod has no spec")
            if pod.spec.node_name:
                raise errors.conflict(
                    info, name, f'pod {name} is already assigned to node "{pod.spec.node_name}"'
                )
            pod.spec.node_name = node_name
            status = pod.status
            if status is not None:
                conditions = [c for c in status.conditions or () if c.type != "PodScheduled"]
                conditions.append(
                    PodCondition(
                        type="PodScheduled",
                        status="True",
                        last_transition_time=clock.now().replace(microsecond=0),
                    )
                )
                status.conditions = conditions
            return pod

        await self.store.mutate(namespace, name, assign, ctx, "binding")
        return CREATED


class EvictionREST:
    """``pods/eviction``: a Creater taking an Eviction; 429 while a budget forbids it."""

    body = Eviction.kind_info

    def __init__(self, store: ResourceStore, backends: Backends) -> None:
        self.store = store
        self.backends = backends

    async def create(self, namespace: str, name: str, obj: Resource, ctx: RequestContext) -> Status:
        assert isinstance(obj, Eviction)
        pod = await self.store.get(namespace, name)
        assert isinstance(pod, Pod)
        budgets = self.backends.registry.lookup("policy", "v1", "poddisruptionbudgets")
        if (
            budgets is not None
            and pod.status is not None
            and pod.status.phase not in ("Succeeded", "Failed")
        ):
            listed = await budgets.list(namespace)
            for pdb in listed.items:
                assert isinstance(pdb, PodDisruptionBudget)
                if _blocks(pdb, pod):
                    raise errors.ApiError(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                    )
        await self.store.delete(namespace, name, obj.delete_options or DeleteOptions(), ctx)
        return CREATED


def _blocks(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    spec, status = pdb.spec, pdb.status
    if spec is None or spec.selector is None:
        return False
    selector = Selector.from_label_selector(
        spec.selector.match_labels, spec.selector.match_expressions
    )
    if selector.empty or not selector.matches(pod.metadata.labels or {}):
        return False
    return status is None or (status.disruptions_allowed or 0) < 1


class StreamREST:
    """``pods/log``, ``exec``, ``attach``, ``portforward``: a Connecter relaying the stream
    to the kubelet of the pod's node (log over HTTP, the others over a WebSocket)."""

    def __init__(self, store: ResourceStore, backends: Backends, subresource: str) -> None:
        self.store = store
        self.backends = backends
        self.subresource = subresource

    async def connect(
        self, request: web.Request, namespace: str, name: str, path: str
    ) -> web.StreamResponse:
        kubelets = self.backends.kubelet_client()
        pod = await self.store.get(namespace, name)
        assert isinstance(pod, Pod)
        node_name = pod.spec.node_name if pod.spec is not None else None
        if not node_name:
            raise errors.bad_request(f"pod {name} does not have a host assigned")
        node = await self.backends.store("", "v1", "nodes").get("", node_name)
        assert isinstance(node, Node)
        stream = proxy.pod_stream_path(pod, self.subresource, request.query)
        if self.subresource == "log":
            return await kubelets.relay_get(
                request, node, stream, request.query, status_errors=True
            )
        upgrade = request.headers.get("Upgrade", "").lower()
        if not upgrade:
            raise errors.bad_request("Upgrade request required")
        if upgrade != "websocket":  # SPDY, kubectl's fallback: the kubelet answers it
            return await kubelets.relay_upgrade(request, node, stream)
        return await kubelets.relay_websocket(request, node, stream)


class ProxyLocator:
    """Where ``pods/proxy`` sends a request: the pod, as upstream's pod ``ResourceLocation``
    finds it.  The name part of the URL is ``name``, ``name:port`` or
    ``scheme:name:port``; without a port, the first port of the first container declaring
    one (else the scheme's own).  The pod's first IP is dialled, and only a global unicast one
    (400 ``address not allowed`` for none, loopback, link-local, multicast...), so a pod's
    status cannot point the API server at its own host or a metadata service."""

    def __init__(self, store: ResourceStore) -> None:
        self.store = store

    async def location(self, namespace: str, id_: str) -> proxy.Location:
        scheme, name, port = proxy.split_scheme_name_port(id_, "pod")
        pod = await self.store.get(namespace, name)
        assert isinstance(pod, Pod)
        if not port:
            containers = pod.spec.containers if pod.spec is not None else None
            declared = [c.ports[0].container_port for c in containers or () if c.ports]
            port = str(declared[0]) if declared else ""
        ips = pod.status.pod_ips if pod.status is not None else None
        address = ips[0].ip if ips else None
        if not address or not proxy.global_unicast(address):
            raise errors.bad_request("address not allowed")
        return proxy.Location(scheme, address, port)
