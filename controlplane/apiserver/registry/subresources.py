"""Which REST object serves each subresource of each kind, as upstream's storage maps register
``pods/status``, ``pods/binding``, ``pods/log``... each with its own storage.

A subresource a kind declares (``KindInfo.subresources``) is served by the object registered
for the kind here, else by the generic one of its name (``status`` and ``scale`` of any kind,
custom resources included).  A declared subresource with no REST object is not served yet.
Registered under the empty name, a REST object serves a kind's own verbs in place of its store:
``bindings`` binds the pod its Binding names, as upstream's legacy binding storage;
``componentstatuses`` are probed, not stored.
"""

from __future__ import annotations

from collections.abc import Callable

from controlplane.apiserver.registry import (
    namespace,
    node,
    pod,
    proxy,
    service,
    serviceaccount,
)
from controlplane.apiserver.registry.componentstatus import ComponentStatusREST
from controlplane.apiserver.registry.object import ObjectREST
from controlplane.apiserver.registry.rest import Backends
from controlplane.apiserver.registry.scale import ScaleREST
from controlplane.apiserver.registry.store import ResourceStore
from kube.api.kinds.certificates_v1 import CertificateSigningRequest
from kube.api.kinds.core_v1.cluster import ComponentStatus, Namespace, ServiceAccount
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Binding, Pod
from kube.api.kinds.core_v1.service import Service
from kube.api.meta_v1 import Resource

Factory = Callable[[ResourceStore, Backends], object]


def _stream(subresource: str) -> Factory:
    return lambda store, backends: pod.StreamREST(store, backends, subresource)


GENERIC: dict[str, Factory] = {
    "status": lambda store, _: ObjectREST(store, "status"),
    "scale": lambda store, _: ScaleREST(store),
}
BY_KIND: dict[tuple[type[Resource], str], Factory] = {
    (Binding, ""): lambda _, backends: pod.BindingREST(backends.store("", "v1", "pods")),
    (ComponentStatus, ""): lambda _, backends: ComponentStatusREST(backends.components),
    (Pod, "binding"): lambda store, _: pod.BindingREST(store),
    (Pod, "eviction"): pod.EvictionREST,
    (Pod, "ephemeralcontainers"): lambda store, _: ObjectREST(store, "ephemeralcontainers"),
    **{(Pod, sub): _stream(sub) for sub in ("log", "exec", "attach", "portforward")},
    (Pod, "proxy"): lambda store, _: proxy.ProxyREST(pod.ProxyLocator(store)),
    (Node, "proxy"): node.ProxyREST,
    (Service, "proxy"): lambda store, backends: proxy.ProxyREST(
        service.ProxyLocator(store, backends)
    ),
    (Namespace, "finalize"): lambda store, _: namespace.FinalizeREST(store),
    (ServiceAccount, "token"): serviceaccount.TokenREST,
    # An approval writes the status's conditions; the strategy keeps the rest.
    (CertificateSigningRequest, "approval"): lambda store, _: ObjectREST(store, "status"),
}


def rest(store: ResourceStore, subresource: str, backends: Backends) -> object | None:
    """The REST object serving ``subresource`` of the store's kind (None: not served), or
    the kind's own verbs (``""``; None: its store serves them)."""
    if subresource and subresource not in store.info.subresources:
        return None
    factory = BY_KIND.get((store.info.cls, subresource)) or GENERIC.get(subresource)
    return factory(store, backends) if factory is not None else None
