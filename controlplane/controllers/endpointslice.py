"""The endpointslice controller: the EndpointSlices of every Service that selects pods
(upstream ``pkg/controller/endpointslice`` and its reconciler in ``k8s.io/endpointslice``).

Keys are Services.  Which Services are managed is the endpoints controller's rule (see
``endpointutil.managed``); a deleted Service's slices go with it through their owner
reference.  The Service's IP families give the address types (a headless Service without
families gets both); for each type, every selected pod with an IP of that type that has not
finished is one endpoint: ``serving`` is its readiness, ``terminating`` whether it is being
deleted, and ``ready`` is serving and not terminating, or always true when the Service
publishes not-ready addresses.  It carries the pod's node, the node's
``topology.kubernetes.io/zone`` (from the Node cache; a pod on an unknown node is skipped and
the Service retried, unless not-ready addresses are published), a reference to the pod, and a
hostname when the pod's subdomain names the Service.  Endpoints are grouped by their ports
(named target ports are resolved per pod), and each group is spread over slices of at most
100 endpoints.

Slices are named ``<service>-<random>``, labelled ``kubernetes.io/service-name`` and
``endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`` (plus the
Service's labels) and owned by the Service.  The reconciler changes as little as it can, as
upstream's does: it keeps every endpoint in the slice that has it, drops the ones no longer
wanted, fills the slices it is updating anyway (fullest first) before touching an unchanged
one, then the unchanged slice that the remaining endpoints fill best, and only then creates;
a slice left empty is deleted, or reused for a slice that would be created.  A Service with
no endpoints keeps one empty placeholder slice per address type.

The cache may lag the controller's own writes; acting on it then would create duplicate
slices.  So the controller remembers, per Service, the slices it created, updated and deleted
until the cache shows them (upstream's ``EndpointSliceTracker``), and retries the Service
while it does not.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterable
from typing import Any

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import key_of, unwrap
from controlplane.controllers.endpointutil import (
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
from kube.api.kinds.core_v1.node import LABEL_TOPOLOGY_ZONE, Node
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import (
    SERVICE_NAME_LABEL,
    Endpoint,
    EndpointConditions,
    EndpointPort,
    EndpointSlice,
)
from kube.api.meta_v1 import ObjectMeta, OwnerReference
from kube.client.errors import ApiError

NAME = "endpointslice"
CONTROLLER_NAME = "endpointslice-controller.k8s.io"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MAX_ENDPOINTS_PER_SLICE = 100

PortKey = tuple[tuple[str, str, int, str], ...]
EndpointKey = tuple[tuple[str, ...], str, str, str]


class StaleInformerCache(Exception):
    """The EndpointSlice cache does not show this controller's own writes yet."""


class ReconcileError(Exception):
    """Some of a Service's slices could not be brought up to date."""


def aggregate(errors: list[str]) -> str:
    """Upstream's aggregate error text: one message as is, several in brackets."""
    return errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"


# Desired state.


def address_types(service: Service) -> list[str]:
    """The slice address types a Service gets: its IP families, else its cluster IP's family,
    else (headless without families) both."""
    spec = service.spec
    families = (spec.ip_families if spec else None) or []
    found: list[str] = [family for family in ("IPv4", "IPv6") if family in families]
    if found:
        return found
    if spec is not None and is_service_ip_set(service):
        return ["IPv6" if is_ipv6(spec.cluster_ip or "") else "IPv4"]
    return ["IPv4", "IPv6"]


def endpoint_ports(service: Service, pod: Pod) -> list[EndpointPort]:
    """The Service's ports as this pod serves them; ports it has no match for are left out."""
    if is_headless_without_ports(service):
        return []
    ports = []
    for service_port in (service.spec.ports if service.spec else None) or ():
        number = find_port(pod, service_port)
        if number is not None:
            ports.append(
                EndpointPort(
                    name=service_port.name or "",
                    protocol=service_port.protocol,
                    port=number,
                    app_protocol=service_port.app_protocol,
                )
            )
    return ports


def port_key(ports: Iterable[EndpointPort] | None) -> PortKey:
    return tuple(
        sorted(
            (p.name or "", p.protocol or "", p.port or 0, p.app_protocol or "") for p in ports or ()
        )
    )


def endpoint_key(endpoint: Endpoint) -> EndpointKey:
    """What identifies an endpoint across syncs (upstream's endpoint hash)."""
    ref = endpoint.target_ref
    return (
        tuple(sorted(endpoint.addresses or ())),
        endpoint.hostname or "",
        (ref.namespace or "") if ref else "",
        (ref.name or "") if ref else "",
    )


def pod_to_endpoint(pod: Pod, node: Node | None, service: Service, address_type: str) -> Endpoint:
    serving = is_pod_ready(pod)
    terminating = pod.metadata.deletion_timestamp is not None
    publish = bool(service.spec and service.spec.publish_not_ready_addresses)
    zone = (node.metadata.labels or {}).get(LABEL_TOPOLOGY_ZONE) if node else None
    return Endpoint(
        addresses=[ip for ip in pod_ips(pod) if is_ipv6(ip) == (address_type == "IPv6")],
        conditions=EndpointConditions(
            ready=publish or (serving and not terminating),
            serving=serving,
            terminating=terminating,
        ),
        hostname=pod.spec.hostname if pod.spec and should_set_hostname(pod, service) else None,
        target_ref=pod_reference(pod),
        node_name=(pod.spec.node_name if pod.spec else None) or None,
        zone=zone or None,
    )


def slice_labels(service: Service) -> dict[str, str]:
    """The Service's labels (without the reserved ones) plus the slice's own."""
    labels = {
        key: value
        for key, value in service_labels(service).items()
        if key not in (SERVICE_NAME_LABEL, MANAGED_BY_LABEL)
    }
    labels[SERVICE_NAME_LABEL] = service.metadata.name or ""
    labels[MANAGED_BY_LABEL] = CONTROLLER_NAME
    return labels


def owned_by(endpoint_slice: EndpointSlice, service: Service) -> bool:
    return any(
        ref.kind == "Service" and ref.api_version == "v1" and ref.uid == service.metadata.uid
        for ref in endpoint_slice.metadata.owner_references or ()
    )


def new_slice(service: Service, address_type: str, ports: list[EndpointPort]) -> EndpointSlice:
    owner = OwnerReference(
        api_version="v1",
        kind="Service",
        name=service.metadata.name,
        uid=service.metadata.uid,
        controller=True,
        block_owner_deletion=True,
    )
    return EndpointSlice(
        metadata=ObjectMeta(
            generate_name=f"{service.metadata.name}-",
            namespace=service.metadata.namespace,
            labels=slice_labels(service),
            owner_references=[owner],
        ),
        address_type=address_type,
        endpoints=[],
        ports=ports or None,
    )


def is_placeholder(endpoint_slice: EndpointSlice, placeholder: EndpointSlice) -> bool:
    """Whether a slice is already the placeholder that would replace it."""
    return (
        endpoint_slice.metadata.namespace == placeholder.metadata.namespace
        and (endpoint_slice.metadata.labels or {}) == (placeholder.metadata.labels or {})
        and endpoint_slice.address_type == placeholder.address_type
        and not endpoint_slice.ports
        and not endpoint_slice.endpoints
    )


def slice_to_fill(slices: list[EndpointSlice], count: int) -> EndpointSlice | None:
    """The slice that ``count`` more endpoints fill most closely without overflowing it."""
    best, best_gap = None, MAX_ENDPOINTS_PER_SLICE
    for candidate in slices:
        gap = MAX_ENDPOINTS_PER_SLICE - (count + len(candidate.endpoints or ()))
        if 0 <= gap < best_gap:
            best, best_gap = candidate, gap
            if gap == 0:
                break
    return best


class Changes:
    """The slices one reconcile creates, updates and deletes."""

    def __init__(self) -> None:
        self.create: list[EndpointSlice] = []
        self.update: list[EndpointSlice] = []
        self.delete: list[EndpointSlice] = []

    def add(self, other: Changes) -> None:
        self.create += other.create
        self.update += other.update
        self.delete += other.delete


def reconcile_port_group(
    service: Service,
    existing: list[EndpointSlice],
    desired: dict[EndpointKey, Endpoint],
    address_type: str,
    ports: list[EndpointPort],
) -> Changes:
    """Spread the endpoints serving one set of ports over that set's slices, minimally."""
    changes = Changes()
    desired = dict(desired)
    unchanged: list[EndpointSlice] = []
    labels = slice_labels(service)
    # 1. Keep what each slice already holds and is still wanted, in its current form.
    for current in existing:
        kept: list[Endpoint] = []
        endpoint_changed = False
        for endpoint in current.endpoints or ():
            wanted = desired.pop(endpoint_key(endpoint), None)
            if wanted is not None:
                kept.append(wanted)
                endpoint_changed = endpoint_changed or wanted != endpoint
        labels_changed = (current.metadata.labels or {}) != labels
        if not kept and current.endpoints:
            changes.delete.append(current)
        elif endpoint_changed or len(kept) != len(current.endpoints or ()) or labels_changed:
            updated = copy.deepcopy(current)
            updated.endpoints = kept
            updated.metadata.labels = labels
            changes.update.append(updated)
        else:
            unchanged.append(current)
    pending = list(desired.values())
    # 2. Fill the slices being updated anyway, fullest first.
    for updated in sorted(changes.update, key=lambda s: -len(s.endpoints or ())):
        room = MAX_ENDPOINTS_PER_SLICE - len(updated.endpoints or ())
        if room > 0 and pending:
            updated.endpoints = [*(updated.endpoints or ()), *pending[:room]]
            pending = pending[room:]
    # 3. Put what is left into the unchanged slice it fills best, else into new slices.
    while pending:
        target = None
        if len(pending) < MAX_ENDPOINTS_PER_SLICE:
            target = slice_to_fill(unchanged, len(pending))
        if target is None:
            fresh = new_slice(service, address_type, ports)
            changes.create.append(fresh)
        else:
            unchanged.remove(target)
            fresh = copy.deepcopy(target)
            changes.update.append(fresh)
        room = MAX_ENDPOINTS_PER_SLICE - len(fresh.endpoints or ())
        fresh.endpoints = [*(fresh.endpoints or ()), *pending[:room]]
        pending = pending[room:]
    return changes


class SliceTracker:
    """The slices written per Service that the cache has not shown yet."""

    CREATED, UPDATED, DELETED = "created", "updated", "deleted"

    def __init__(self) -> None:
        self._pending: dict[str, dict[str, tuple[str, str]]] = {}

    def expect(self, service_key: str, name: str, what: str, value: str = "") -> None:
        """Remember a write: ``value`` is the replaced resourceVersion of an update and the
        uid of a deleted slice."""
        self._pending.setdefault(service_key, {})[name] = (what, value)

    def stale(self, service_key: str, cached: Iterable[EndpointSlice]) -> bool:
        """Whether some write is still missing from ``cached`` (the Service's slices); the
        writes it shows are forgotten."""
        pending = self._pending.get(service_key)
        if not pending:
            return False
        by_name = {s.metadata.name: s for s in cached}
        for name, (what, value) in list(pending.items()):
            found = by_name.get(name)
            if what == self.CREATED:
                seen = found is not None
            elif what == self.UPDATED:
                seen = found is None or found.metadata.resource_version != value
            else:
                seen = found is None or found.metadata.uid != value
            if seen:
                del pending[name]
        if not pending:
            del self._pending[service_key]
        return bool(pending)

    def deleted(self, service_key: str, name: str) -> None:
        """A slice left the cache: nothing more about it is to be waited for."""
        pending = self._pending.get(service_key, {})
        pending.pop(name, None)

    def forget(self, service_key: str) -> None:
        self._pending.pop(service_key, None)


def _service_key(endpoint_slice: EndpointSlice) -> str | None:
    """The key of the Service a slice of this controller belongs to."""
    labels = endpoint_slice.metadata.labels or {}
    service = labels.get(SERVICE_NAME_LABEL)
    if labels.get(MANAGED_BY_LABEL) != CONTROLLER_NAME or not service:
        return None
    return f"{endpoint_slice.metadata.namespace}/{service}"


class EndpointSliceController(ServicePodController):
    NAME = NAME
    EVENT_SOURCE = "endpoint-slice-controller"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.nodes = ctx.informers.informer_for(Node)
        self.slices = ctx.informers.informer_for(EndpointSlice)
        self.tracker = SliceTracker()
        self.slices.add_event_handler(self.slice_changed, self.slice_updated, self.slice_deleted)

    def slice_changed(self, obj: Any) -> None:
        key = _service_key(unwrap(obj))
        if key is not None:
            self.queue.add(key)

    def slice_updated(self, old: EndpointSlice, new: EndpointSlice) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self.slice_changed(old)
            self.slice_changed(new)

    def slice_deleted(self, obj: Any) -> None:
        endpoint_slice = unwrap(obj)
        key = _service_key(endpoint_slice)
        if key is not None:
            self.tracker.deleted(key, endpoint_slice.metadata.name or "")
            self.queue.add(key)

    def service_slices(self, service: Service) -> list[EndpointSlice]:
        """This controller's slices of the Service that are not being deleted."""
        key = key_of(service)
        return [
            s
            for s in self.slices.lister.list(service.metadata.namespace)
            if _service_key(s) == key and s.metadata.deletion_timestamp is None
        ]

    async def sync_key(self, key: str) -> None:
        service = self.services.lister.get(key)
        if service is None:
            self.trigger_times.forget(key)
            self.tracker.forget(key)
            return
        if not managed(service):
            return
        pods = self.selected_pods(service)
        existing = self.service_slices(service)
        if self.tracker.stale(key, existing):
            raise StaleInformerCache("EndpointSlice informer cache is out of date")
        trigger_time = self.trigger_times.compute(key, service, pods)
        errors = await self.reconcile(service, pods, existing, trigger_time)
        if errors:
            message = aggregate(errors)
            self.ctx.recorder.event(
                service,
                "Warning",
                "FailedToUpdateEndpointSlices",
                f"Error updating Endpoint Slices for Service {key}: {message}",
            )
            raise ReconcileError(message)

    async def reconcile(
        self,
        service: Service,
        pods: list[Pod],
        existing: list[EndpointSlice],
        trigger_time: datetime.datetime | None,
    ) -> list[str]:
        """Bring the Service's slices up to date; the errors met on the way."""
        errors: list[str] = []
        types = address_types(service)
        for address_type in types:
            of_type = [s for s in existing if s.address_type == address_type]
            errors += await self._reconcile_type(service, pods, of_type, address_type, trigger_time)
        for obsolete in (s for s in existing if s.address_type not in types):
            error = await self._delete(service, obsolete)
            if error is not None:
                errors.append(
                    f"error deleting {obsolete.metadata.name} EndpointSlice for Service "
                    f"{key_of(service)}: {error}"
                )
        return errors

    async def _reconcile_type(
        self,
        service: Service,
        pods: list[Pod],
        existing: list[EndpointSlice],
        address_type: str,
        trigger_time: datetime.datetime | None,
    ) -> list[str]:
        errors: list[str] = []
        changes = Changes()
        by_ports: dict[PortKey, list[EndpointSlice]] = {}
        for current in existing:
            if owned_by(current, service):
                by_ports.setdefault(port_key(current.ports), []).append(current)
            else:
                changes.delete.append(current)
        desired: dict[PortKey, dict[EndpointKey, Endpoint]] = {}
        desired_ports: dict[PortKey, list[EndpointPort]] = {}
        publish = bool(service.spec and service.spec.publish_not_ready_addresses)
        for pod in pods:
            if not should_pod_be_in_endpoints(pod, True):
                continue
            ports = endpoint_ports(service, pod)
            group = port_key(ports)
            endpoints = desired.setdefault(group, {})
            desired_ports.setdefault(group, ports)
            node_name = (pod.spec.node_name if pod.spec else None) or ""
            node = self.nodes.lister.get(node_name)
            if node is None and not publish:
                errors.append(
                    f"skipping Pod {pod.metadata.name} for Service {key_of(service)}: "
                    f"Node {node_name} Not Found"
                )
                continue
            endpoint = pod_to_endpoint(pod, node, service, address_type)
            if endpoint.addresses:
                endpoints[endpoint_key(endpoint)] = endpoint
        for group, endpoints in desired.items():
            changes.add(
                reconcile_port_group(
                    service, by_ports.get(group, []), endpoints, address_type, desired_ports[group]
                )
            )
        for group, slices in by_ports.items():
            if group not in desired:
                changes.delete += slices
        if len(existing) == len(changes.delete) and not changes.create:
            placeholder = new_slice(service, address_type, [])
            if len(changes.delete) == 1 and is_placeholder(changes.delete[0], placeholder):
                changes.delete = []
            else:
                changes.create.append(placeholder)
        error = await self._finalize(service, changes, trigger_time)
        return [*errors, error] if error else errors

    async def _finalize(
        self, service: Service, changes: Changes, trigger_time: datetime.datetime | None
    ) -> str | None:
        """Write the changes, turning creates into updates of slices that would be deleted;
        the first error stops it."""
        index = 0
        while index < len(changes.delete) and changes.create:
            doomed, fresh = changes.delete[index], changes.create[-1]
            if doomed.address_type == fresh.address_type and owned_by(doomed, service):
                fresh.metadata.name = doomed.metadata.name
                fresh.metadata.resource_version = doomed.metadata.resource_version
                changes.update.append(changes.create.pop())
                changes.delete.pop(index)
            else:
                index += 1
        key = key_of(service)
        client = self.ctx.client
        if service.metadata.deletion_timestamp is None:
            for fresh in changes.create:
                self._annotate(fresh, trigger_time)
                try:
                    created = await client.create(fresh)
                except ApiError as error:
                    if namespace_terminating(error):
                        return None
                    return f"failed to create EndpointSlice for Service {key}: {error}"
                self.tracker.expect(key, created.metadata.name or "", SliceTracker.CREATED)
        for updated in changes.update:
            self._annotate(updated, trigger_time)
            try:
                await client.update(updated)
            except ApiError as error:
                return (
                    f"failed to update {updated.metadata.name} EndpointSlice for Service "
                    f"{key}: {error}"
                )
            self.tracker.expect(
                key,
                updated.metadata.name or "",
                SliceTracker.UPDATED,
                updated.metadata.resource_version or "",
            )
        for doomed in changes.delete:
            failure = await self._delete(service, doomed)
            if failure is not None:
                return (
                    f"failed to delete {doomed.metadata.name} EndpointSlice for Service "
                    f"{key}: {failure}"
                )
        return None

    async def _delete(self, service: Service, doomed: EndpointSlice) -> ApiError | None:
        name = doomed.metadata.name or ""
        try:
            await self.ctx.client.delete(EndpointSlice, name, doomed.metadata.namespace)
        except ApiError as error:
            return error
        self.tracker.expect(key_of(service), name, SliceTracker.DELETED, doomed.metadata.uid or "")
        return None

    @staticmethod
    def _annotate(endpoint_slice: EndpointSlice, trigger_time: datetime.datetime | None) -> None:
        annotations = dict(endpoint_slice.metadata.annotations or {})
        set_trigger_time(annotations, trigger_time)
        endpoint_slice.metadata.annotations = annotations or None


def new(ctx: ControllerContext) -> EndpointSliceController:
    return EndpointSliceController(ctx)
