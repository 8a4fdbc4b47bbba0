"""What the cluster DNS answers from: Services, EndpointSlices and Namespaces, as cached.

:class:`ClusterState` is the read-only view the zone needs, one question per method, so the
zone can be tested over plain dicts and served over informers alike.  :class:`InformerState`
answers from three shared informers with the indexes the questions need: Services by cluster
IP and EndpointSlices by their Service (the ``kubernetes.io/service-name`` label) and by
address, so a query costs a dictionary lookup and never a scan of the cluster.

There is no workqueue: the DNS has nothing to reconcile.  Each query reads the caches as they
are at that moment (level-triggered, as CoreDNS's kubernetes plugin reads its informers), so
a change is visible to the first query after the watch event arrived.  The objects returned
are the cache's own and must not be mutated.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Protocol

from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, EndpointSlice
from kube.client.informers import SharedInformer, SharedInformerFactory

CLUSTER_IP_INDEX = "clusterIP"
SERVICE_INDEX = "service"
ADDRESS_INDEX = "address"


class ClusterState(Protocol):
    """The cluster objects the DNS reads; every method is read-only and cheap."""

    def service(self, namespace: str, name: str) -> Service | None: ...

    def endpoint_slices(self, namespace: str, service: str) -> list[EndpointSlice]:
        """The slices labelled with ``service`` in ``namespace``."""
        ...

    def namespace_exists(self, name: str) -> bool: ...

    def services_with_ip(self, ip: str) -> list[Service]:
        """Services whose cluster IPs include ``ip`` (canonical, see ``canonical_ips``)."""
        ...

    def slices_with_address(self, ip: str) -> list[EndpointSlice]:
        """Slices with an endpoint at ``ip`` (canonical)."""
        ...


def cluster_ips(service: Service) -> list[str]:
    """The Service's allocated cluster IPs (none for headless and ExternalName Services)."""
    spec = service.spec
    if spec is None:
        return []
    ips = spec.cluster_ips or ([spec.cluster_ip] if spec.cluster_ip else [])
    return [ip for ip in ips if ip and ip != "None"]


def canonical_ips(addresses: Iterable[str]) -> list[str]:
    """``addresses`` in one spelling (IPv6 compressed, lower case); invalid ones dropped."""
    canonical = []
    for address in addresses:
        try:
            canonical.append(str(ipaddress.ip_address(address)))
        except ValueError:
            continue
    return canonical


def index_cluster_ips(service: Service) -> list[str]:
    return canonical_ips(cluster_ips(service))


def index_service_of_slice(endpoint_slice: EndpointSlice) -> list[str]:
    service = (endpoint_slice.metadata.labels or {}).get(SERVICE_NAME_LABEL)
    return [f"{endpoint_slice.metadata.namespace}/{service}"] if service else []


def index_addresses(endpoint_slice: EndpointSlice) -> list[str]:
    return canonical_ips(a for e in endpoint_slice.endpoints or () for a in e.addresses or ())


class InformerState:
    """:class:`ClusterState` over the informers of ``factory``; see the module docstring.

    Creating it asks the factory for the three informers (with their indexes); the caller
    starts the factory and waits for ``synced``.
    """

    def __init__(self, factory: SharedInformerFactory) -> None:
        self.services: SharedInformer[Service] = factory.informer_for(
            Service, indexers={CLUSTER_IP_INDEX: index_cluster_ips}
        )
        self.slices: SharedInformer[EndpointSlice] = factory.informer_for(
            EndpointSlice,
            indexers={SERVICE_INDEX: index_service_of_slice, ADDRESS_INDEX: index_addresses},
        )
        self.namespaces: SharedInformer[Namespace] = factory.informer_for(Namespace)

    @property
    def synced(self) -> bool:
        return all(
            informer.has_synced for informer in (self.services, self.slices, self.namespaces)
        )

    def service(self, namespace: str, name: str) -> Service | None:
        return self.services.lister.get(f"{namespace}/{name}")

    def endpoint_slices(self, namespace: str, service: str) -> list[EndpointSlice]:
        return self.slices.lister.by_index(SERVICE_INDEX, f"{namespace}/{service}")

    def namespace_exists(self, name: str) -> bool:
        return name in self.namespaces.lister

    def services_with_ip(self, ip: str) -> list[Service]:
        return self.services.lister.by_index(CLUSTER_IP_INDEX, ip)

    def slices_with_address(self, ip: str) -> list[EndpointSlice]:
        return self.slices.lister.by_index(ADDRESS_INDEX, ip)
