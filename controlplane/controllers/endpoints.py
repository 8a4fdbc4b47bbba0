"""The endpoints controller: an Endpoints object, named like its Service, listing the pods the
Service selects (upstream ``pkg/controller/endpoint``).

Keys are Services.  A Service without a selector is left to its users, an ExternalName Service
has no endpoints, and ``default/kubernetes`` is published by the API servers; a deleted
Service's Endpoints are deleted.  For every other Service each selected pod with an IP becomes
one address per Service port (named target ports resolved against that pod's containers):
ready pods under ``addresses``, the others under ``notReadyAddresses``, unless the Service
publishes not-ready addresses, in which case every pod, terminating ones included, is ready.
The per-port entries are then repacked into subsets of addresses sharing the same ports, in a
canonical order, so that comparing with what is stored tells whether anything changed.

At most 1000 addresses are kept; beyond that each subset is truncated in proportion (not-ready
addresses first) and ``endpoints.kubernetes.io/over-capacity: truncated`` says so.  Writes
carry ``endpoints.kubernetes.io/last-change-trigger-time`` and the Service's labels (plus
``service.kubernetes.io/headless`` for a Service without a cluster IP).  At start, every
Endpoints object is queued once so those whose Service vanished meanwhile are deleted.
"""

from __future__ import annotations

import copy
import logging
import math

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import key_of
from controlplane.controllers.endpointutil import (
    HEADLESS_LABEL,
    ServicePodController,
    find_port,
    is_headless_without_ports,
    is_ipv6,
    is_pod_ready,
    is_service_ip_set,
    managed,
    namespace_terminating,
    pod_ips,
    pod_reference,
    service_labels,
    set_trigger_time,
    should_pod_be_in_endpoints,
    should_set_hostname,
)
from kube.api.keys import split_key
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import (
    EndpointAddress,
    EndpointPort,
    Endpoints,
    EndpointSubset,
    Service,
)
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError

NAME = "endpoints"
MAX_CAPACITY = 1000
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
"""Endpoints used as leader-election locks; not the controller's to clean up."""

log = logging.getLogger("kubelab.controllers.endpoints")

Entry = tuple[EndpointAddress, EndpointPort | None, bool]
"""One address serving one port (None: a headless Service without ports), and readiness."""


def endpoint_address(service: Service, pod: Pod) -> EndpointAddress | None:
    """The pod's address of the Service's (primary) IP family, or None if it has none."""
    spec = service.spec
    ips = pod_ips(pod)
    if spec is not None and spec.ip_families:
        want_v6 = spec.ip_families[0] == "IPv6"
    elif spec is not None and is_service_ip_set(service):
        want_v6 = is_ipv6(spec.cluster_ip or "")
    else:
        want_v6 = is_ipv6(ips[0])
    ip = next((ip for ip in ips if is_ipv6(ip) == want_v6), None)
    if ip is None:
        return None
    return EndpointAddress(
        ip=ip,
        hostname=pod.spec.hostname if pod.spec and should_set_hostname(pod, service) else None,
        node_name=(pod.spec.node_name if pod.spec else None) or None,
        target_ref=pod_reference(pod),
    )


def _address_key(address: EndpointAddress) -> tuple[str, str]:
    uid = address.target_ref.uid if address.target_ref else None
    return address.ip or "", uid or ""


def _port_key(port: EndpointPort) -> tuple[str, int, str]:
    return port.name or "", port.port or 0, port.protocol or ""


def repack(entries: list[Entry]) -> list[EndpointSubset]:
    """Group addresses that serve the same ports into subsets, in a canonical order; an
    address that is ready for a port is never also not ready for it."""
    by_port: dict[tuple[str, int, str] | None, dict[tuple[str, str], tuple[EndpointAddress, bool]]]
    by_port = {}
    ports: dict[tuple[str, int, str], EndpointPort] = {}
    for address, port, ready in entries:
        port_key = None if port is None else _port_key(port)
        if port is not None:
            ports[_port_key(port)] = port
        addresses = by_port.setdefault(port_key, {})
        key = _address_key(address)
        if key not in addresses or (ready and not addresses[key][1]):
            addresses[key] = (address, ready)
    groups: dict[frozenset[tuple[tuple[str, str], bool]], list[tuple[str, int, str]]] = {}
    members: dict[frozenset[tuple[tuple[str, str], bool]], list[tuple[EndpointAddress, bool]]] = {}
    for port_key, addresses in by_port.items():
        signature = frozenset((key, ready) for key, (_, ready) in addresses.items())
        members[signature] = list(addresses.values())
        port_keys = groups.setdefault(signature, [])
        if port_key is not None:
            port_keys.append(port_key)
    subsets = []
    for signature, port_keys in groups.items():
        chosen = sorted(members[signature], key=lambda member: _address_key(member[0]))
        subsets.append(
            EndpointSubset(
                addresses=[a for a, ready in chosen if ready] or None,
                not_ready_addresses=[a for a, ready in chosen if not ready] or None,
                ports=[ports[k] for k in sorted(port_keys)] or None,
            )
        )
    return sorted(subsets, key=_subset_order)


def _subset_order(subset: EndpointSubset) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    return (
        [_address_key(a) for a in subset.addresses or ()],
        [_address_key(a) for a in subset.not_ready_addresses or ()],
    )


def entries_of(subsets: list[EndpointSubset]) -> list[Entry]:
    """The per-port entries stored subsets stand for (to repack them for comparison)."""
    entries: list[Entry] = []
    for subset in subsets:
        ports: list[EndpointPort | None] = list(subset.ports or ()) or [None]
        for port in ports:
            entries += [(a, port, True) for a in subset.addresses or ()]
            entries += [(a, port, False) for a in subset.not_ready_addresses or ()]
    return entries


def _count(subsets: list[EndpointSubset]) -> int:
    return sum(len(s.addresses or ()) + len(s.not_ready_addresses or ()) for s in subsets)


def truncate(subsets: list[EndpointSubset]) -> bool:
    """Keep at most ``MAX_CAPACITY`` addresses, dropping not-ready ones first and cutting each
    subset in proportion to its share; whether anything was dropped."""
    if _count(subsets) <= MAX_CAPACITY:
        return False
    total_ready = sum(len(s.addresses or ()) for s in subsets)
    truncate_ready = total_ready > MAX_CAPACITY
    if truncate_ready:
        allowed, total = MAX_CAPACITY, total_ready
    else:
        allowed, total = MAX_CAPACITY - total_ready, _count(subsets) - total_ready
    remaining = allowed
    for subset in subsets:
        addresses = (subset.addresses if truncate_ready else subset.not_ready_addresses) or []
        kept = addresses[: min(math.ceil(len(addresses) / total * allowed), remaining)]
        remaining -= len(kept)
        if truncate_ready:
            subset.addresses = kept or None
            subset.not_ready_addresses = None
        else:
            subset.not_ready_addresses = kept or None
    return True


class EndpointsController(ServicePodController):
    NAME = NAME
    EVENT_SOURCE = "endpoint-controller"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.endpoints = ctx.informers.informer_for(Endpoints)
        self.endpoints.add_event_handler(on_delete=self.enqueue)

    async def run(self, workers: int) -> None:
        await self.ctx.informers.wait_for_cache_sync()
        self.queue_leftover_endpoints()
        await super().run(workers)

    def queue_leftover_endpoints(self) -> None:
        """Queue every Endpoints object so that those of Services deleted while the controller
        was not running are removed."""
        for endpoints in self.endpoints.lister.list():
            if LEADER_ANNOTATION not in (endpoints.metadata.annotations or {}):
                self.queue.add(key_of(endpoints))

    async def sync_key(self, key: str) -> None:
        namespace, name = split_key(key)
        service = self.services.lister.get(key)
        if service is None:
            try:
                await self.ctx.client.delete(Endpoints, name, namespace)
            except ApiError as error:
                if not error.not_found:
                    raise
            self.trigger_times.forget(key)
            return
        if not managed(service):
            return
        pods = self.selected_pods(service)
        trigger_time = self.trigger_times.compute(key, service, pods)
        subsets = repack(self._entries(service, pods))
        current = self.endpoints.lister.get(key)
        if current is not None and self._up_to_date(current, subsets, service):
            return
        if current is None:
            endpoints = Endpoints(metadata=ObjectMeta(name=name, namespace=namespace))
        else:
            endpoints = copy.deepcopy(current)
        endpoints.subsets = subsets or None
        endpoints.metadata.labels = service_labels(service) or None
        annotations = dict(endpoints.metadata.annotations or {})
        set_trigger_time(annotations, trigger_time)
        if truncate(subsets):
            annotations[OVER_CAPACITY] = "truncated"
        else:
            annotations.pop(OVER_CAPACITY, None)
        endpoints.metadata.annotations = annotations or None
        await self._write(endpoints, service, create=current is None)

    def _entries(self, service: Service, pods: list[Pod]) -> list[Entry]:
        spec = service.spec
        publish = bool(spec and spec.publish_not_ready_addresses)
        entries: list[Entry] = []
        for pod in pods:
            if not should_pod_be_in_endpoints(pod, publish):
                continue
            address = endpoint_address(service, pod)
            if address is None:
                log.info(
                    "failed to find endpoint for service %s on pod %s",
                    key_of(service),
                    pod.metadata.name,
                )
                continue
            ready = publish or is_pod_ready(pod)
            if is_headless_without_ports(service):
                entries.append((address, None, ready))
            for service_port in (spec.ports if spec else None) or ():
                number = find_port(pod, service_port)
                if number is None:
                    continue
                port = EndpointPort(
                    name=service_port.name,
                    port=number,
                    protocol=service_port.protocol,
                    app_protocol=service_port.app_protocol,
                )
                entries.append((address, port, ready))
        return entries

    @staticmethod
    def _up_to_date(current: Endpoints, subsets: list[EndpointSubset], service: Service) -> bool:
        labels = dict(current.metadata.labels or {})
        labels.pop(HEADLESS_LABEL, None)
        stored = current.subsets or []
        capacity_ok = _count(stored) <= MAX_CAPACITY and OVER_CAPACITY not in (
            current.metadata.annotations or {}
        )
        return (
            repack(entries_of(stored)) == subsets
            and labels == (service.metadata.labels or {})
            and capacity_ok
        )

    async def _write(self, endpoints: Endpoints, service: Service, *, create: bool) -> None:
        try:
            if create:
                await self.ctx.client.create(endpoints)
            else:
                await self.ctx.client.update(endpoints)
        except ApiError as error:
            if create and namespace_terminating(error):
                return
            where = f"{service.metadata.namespace}/{service.metadata.name}"
            if create:
                reason, message = "FailedToCreateEndpoint", "Failed to create endpoint for service"
            else:
                reason, message = "FailedToUpdateEndpoint", "Failed to update endpoint"
            self.ctx.recorder.event(endpoints, "Warning", reason, f"{message} {where}: {error}")
            raise


def new(ctx: ControllerContext) -> EndpointsController:
    return EndpointsController(ctx)
