"""``services/proxy``: requests relayed to one ready endpoint of a Service, as upstream's
service storage finds it (``ResourceLocation``) and its upgrade-aware proxy relays it.

The name part of ``/api/v1/namespaces/NS/services/NAME/proxy/PATH`` is ``name``,
``name:port`` or ``scheme:name:port``.  The port is a service port's name, or its number,
which stands for that port's name (503 ``no service port N found for service "NAME"`` when the
Service has none); none at all means the unnamed port, and the Service is not read.  The
endpoints are those of the Service's EndpointSlices (label ``kubernetes.io/service-name``;
none at all answers as upstream's missing Endpoints object, 404 ``endpoints "NAME" not
found``): ready (or not saying), with
the port of that name, and whose ``targetRef`` is a Pod of the namespace that has the address
among its IPs (upstream's check, so a hand-made slice cannot turn the API server into a proxy
to any address).  One is picked at random; its address is dialled at the slice's port number
(the Service's targetPort).  When the slices hold no endpoints the answer is 503 ``no
endpoints available for service "NAME"``, and when none fits, the same naming the whole name
part, as upstream words both.
"""

from __future__ import annotations

import random
from typing import NamedTuple

from controlplane.apiserver import errors
from controlplane.apiserver.registry import proxy
from controlplane.apiserver.registry.rest import Backends
from controlplane.apiserver.registry.store import ResourceStore, Selection
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Endpoints, Service
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, EndpointSlice


class ProxyLocator:
    """Where ``services/proxy`` sends a request: an endpoint of the Service."""

    def __init__(self, store: ResourceStore, backends: Backends) -> None:
        self.store = store
        self.slices = backends.store("discovery.k8s.io", "v1", "endpointslices")
        self.pods = backends.store("", "v1", "pods")

    async def location(self, namespace: str, id_: str) -> proxy.Location:
        """Where a request for ``id_`` (the name part of the URL) goes."""
        scheme, name, port_name = proxy.split_scheme_name_port(id_, "service")
        if port_name.isdigit():
            service = await self.store.get(namespace, name)
            assert isinstance(service, Service)
            number = int(port_name)
            ports = service.spec.ports if service.spec is not None else None
            found = next((p for p in ports or () if p.port == number), None)
            if found is None:
                raise proxy.unreachable(f'no service port {number} found for service "{name}"')
            port_name = found.name or ""
        selection = Selection.parse(self.slices.info, f"{SERVICE_NAME_LABEL}={name}", None)
        listed = await self.slices.list(namespace, selection)
        slices = [s for s in listed.items if isinstance(s, EndpointSlice)]
        if not slices:
            raise errors.not_found(Endpoints.kind_info, name)
        if not any(s.endpoints for s in slices):
            raise proxy.unreachable(f'no endpoints available for service "{name}"')
        candidates = [candidate for s in slices for candidate in _ready(s, port_name)]
        # in a random order, each checked only until one passes (a read of its Pod each)
        for candidate in random.sample(candidates, len(candidates)):
            if await self._backed_by_pod(namespace, candidate.ref, candidate.address):
                return proxy.Location(scheme, candidate.address, str(candidate.port))
        raise proxy.unreachable(f'no endpoints available for service "{id_}"')

    async def _backed_by_pod(
        self, namespace: str, ref: ObjectReference | None, address: str
    ) -> bool:
        """Whether an endpoint's ``targetRef`` is a Pod of ``namespace`` having ``address``."""
        if ref is None or ref.kind != "Pod" or ref.namespace != namespace or not ref.name:
            return False
        try:
            pod = await self.pods.get(namespace, ref.name)
        except errors.ApiError:
            return False
        assert isinstance(pod, Pod)
        status = pod.status
        return status is not None and any(i.ip == address for i in status.pod_ips or ())


class _Candidate(NamedTuple):
    address: str
    port: int
    ref: ObjectReference | None


def _ready(endpoint_slice: EndpointSlice, port_name: str) -> list[_Candidate]:
    """The ready endpoints of a slice that serve the port named ``port_name``."""
    port = next(
        (p.port for p in endpoint_slice.ports or () if (p.name or "") == port_name and p.port),
        None,
    )
    if port is None:
        return []
    return [
        _Candidate(endpoint.addresses[0], port, endpoint.target_ref)
        for endpoint in endpoint_slice.endpoints or ()
        if endpoint.addresses
        and not (endpoint.conditions is not None and endpoint.conditions.ready is False)
    ]
