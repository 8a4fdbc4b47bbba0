"""What the endpoints and endpointslice controllers share: which Services they manage, which
pods back a Service and how a pod becomes an endpoint (upstream
``staging/src/k8s.io/endpointslice/util`` and ``pkg/api/v1/pod``).

Both controllers are keyed by Service and read everything from caches, so the shared base
``ServicePodController`` wires the Service and Pod informers once: a Service event enqueues
that Service, a pod event enqueues every Service in the pod's namespace whose selector picked
the pod before or after the change (a scan of the namespace's Services, as upstream's
``GetPodServiceMemberships`` does).

A pod is an endpoint when it has an IP and has not finished; whether a terminating pod is
included is the caller's choice (Endpoints only publish one when ``publishNotReadyAddresses``
is set, slices always do and mark it terminating).  Named target ports are resolved per pod,
so pods of one Service may serve a port on different numbers.

``TriggerTimeTracker`` computes ``endpoints.kubernetes.io/last-change-trigger-time``: the
earliest change (a pod's Ready transition or the Service's creation) not yet reflected in the
controller's output.  It is per-controller state, as upstream's is.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, key_of, unwrap
from kube.api.kinds.core_v1.pod import Container, Pod
from kube.api.kinds.core_v1.service import CLUSTER_IP_NONE, Service, ServicePort
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.client.errors import ApiError

LAST_CHANGE_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
HEADLESS_LABEL = "service.kubernetes.io/headless"
API_SERVICE = "default/kubernetes"
"""The Service whose endpoints the API servers publish themselves."""


def pod_ips(pod: Pod) -> list[str]:
    """The pod's IPs, primary first; empty until the kubelet reports one."""
    status = pod.status
    if status is None:
        return []
    ips = [entry.ip for entry in status.pod_ips or () if entry.ip]
    return ips or ([status.pod_ip] if status.pod_ip else [])


def is_ipv6(ip: str) -> bool:
    return ":" in ip


def is_pod_ready(pod: Pod) -> bool:
    return pod.status is not None and pod.status.condition_true("Ready")


def ready_transition(pod: Pod) -> datetime.datetime | None:
    """When the pod's Ready condition last changed (upstream's pod trigger time)."""
    for condition in (pod.status.conditions if pod.status else None) or ():
        if condition.type == "Ready":
            return condition.last_transition_time
    return None


def should_pod_be_in_endpoints(pod: Pod, include_terminating: bool) -> bool:
    """Whether the pod is an endpoint at all: not finished, has an IP, and is not terminating
    unless the caller includes terminating pods."""
    if pod.status is not None and pod.status.phase in ("Succeeded", "Failed"):
        return False
    if not pod_ips(pod):
        return False
    return include_terminating or pod.metadata.deletion_timestamp is None


def is_service_ip_set(service: Service) -> bool:
    cluster_ip = service.spec.cluster_ip if service.spec else None
    return bool(cluster_ip) and cluster_ip != CLUSTER_IP_NONE


def is_headless_without_ports(service: Service) -> bool:
    """A headless Service may have no ports; its endpoints then carry none."""
    spec = service.spec
    return spec is not None and not spec.ports and spec.cluster_ip == CLUSTER_IP_NONE


def service_labels(service: Service) -> dict[str, str]:
    """The Service's labels plus the headless marker when it has no cluster IP."""
    labels = dict(service.metadata.labels or {})
    labels.pop(HEADLESS_LABEL, None)
    if not is_service_ip_set(service):
        labels[HEADLESS_LABEL] = ""
    return labels


def managed(service: Service) -> bool:
    """Whether the controllers compute this Service's endpoints: it selects pods, is not an
    ExternalName alias, and is not the API server's own Service."""
    spec = service.spec
    if spec is None or spec.selector is None or spec.type == "ExternalName":
        return False
    return key_of(service) != API_SERVICE


def selects(service: Service, pod: Pod) -> bool:
    """Whether the Service's selector (a plain label set) matches the pod."""
    selector = service.spec.selector if service.spec else None
    if selector is None or pod.metadata.namespace != service.metadata.namespace:
        return False
    labels = pod.metadata.labels or {}
    return all(labels.get(key) == value for key, value in selector.items())


def should_set_hostname(pod: Pod, service: Service) -> bool:
    """A pod whose subdomain names the Service gets a DNS record under its hostname."""
    spec = pod.spec
    return (
        spec is not None
        and bool(spec.hostname)
        and spec.subdomain == service.metadata.name
        and pod.metadata.namespace == service.metadata.namespace
    )


def find_port(pod: Pod, port: ServicePort) -> int | None:
    """The pod's number for the Service port's target: a number as is, a name looked up among
    the ports of the containers and sidecars with the same protocol; None when none matches."""
    target = port.target_port if port.target_port is not None else port.port
    if isinstance(target, int):
        return target
    spec = pod.spec
    if spec is None:
        return None
    protocol = port.protocol or "TCP"
    containers: list[Container] = [
        *(spec.containers or ()),
        *(c for c in spec.init_containers or () if c.is_sidecar()),
    ]
    for container in containers:
        for container_port in container.ports or ():
            if container_port.name == target and (container_port.protocol or "TCP") == protocol:
                return container_port.container_port
    return None


def pod_reference(pod: Pod) -> ObjectReference:
    return ObjectReference(
        kind="Pod",
        namespace=pod.metadata.namespace,
        name=pod.metadata.name,
        uid=pod.metadata.uid,
    )


def rfc3339_nano(moment: datetime.datetime) -> str:
    """Go's ``time.RFC3339Nano`` in UTC: fractional seconds without trailing zeros."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    utc = moment.astimezone(datetime.UTC)
    fraction = f".{utc.microsecond:06d}".rstrip("0") if utc.microsecond else ""
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def set_trigger_time(annotations: dict[str, str], moment: datetime.datetime | None) -> None:
    """Record the last change trigger time, or clear it when nothing new triggered the write."""
    if moment is None:
        annotations.pop(LAST_CHANGE_TRIGGER_TIME, None)
    else:
        annotations[LAST_CHANGE_TRIGGER_TIME] = rfc3339_nano(moment)


def namespace_terminating(error: ApiError) -> bool:
    """A create refused because the namespace is being deleted; retrying cannot help."""
    if error.code != 403:
        return False
    details = error.status.details
    causes = (details.causes if details else None) or ()
    return any(c.reason == "NamespaceTerminating" for c in causes) or (
        "because it is being terminated" in error.message
    )


@dataclass
class _ServiceState:
    pod_times: dict[str, datetime.datetime] = field(default_factory=dict)
    service_time: datetime.datetime | None = None


def _after(moment: datetime.datetime, previous: datetime.datetime | None) -> bool:
    return previous is None or moment > previous


class TriggerTimeTracker:
    """Upstream's ``TriggerTimeTracker``: per Service, the trigger times seen at the last sync."""

    def __init__(self) -> None:
        self._states: dict[str, _ServiceState] = {}

    def compute(self, key: str, service: Service, pods: Iterable[Pod]) -> datetime.datetime | None:
        """The earliest trigger time that changed since the last sync of ``key`` (the Service's
        creation for a Service not seen before), or None when none did."""
        previous = self._states.get(key)
        last = previous or _ServiceState()
        state = _ServiceState(service_time=service.metadata.creation_timestamp)
        changed: list[datetime.datetime] = []
        for pod in pods:
            moment = ready_transition(pod)
            if moment is None:
                continue
            state.pod_times[pod.metadata.name or ""] = moment
            if _after(moment, last.pod_times.get(pod.metadata.name or "")):
                changed.append(moment)
        if state.service_time is not None and _after(state.service_time, last.service_time):
            changed.append(state.service_time)
        self._states[key] = state
        if previous is None:
            return service.metadata.creation_timestamp
        return min(changed, default=None)

    def forget(self, key: str) -> None:
        self._states.pop(key, None)


class ServicePodController(Controller):
    """A controller keyed by Service that is resynced when the pods it selects change."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.services = ctx.informers.informer_for(Service)
        self.pods = ctx.informers.informer_for(Pod)
        self.trigger_times = TriggerTimeTracker()
        self.services.add_event_handler(self.enqueue, self.enqueue_update, self.enqueue)
        self.pods.add_event_handler(self.pod_changed, self.pod_updated, self.pod_changed)

    def pod_changed(self, obj: Any) -> None:
        self._enqueue_services(unwrap(obj))

    def pod_updated(self, old: Pod, new: Pod) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._enqueue_services(old, new)

    def _enqueue_services(self, *pods: Pod) -> None:
        namespace = pods[0].metadata.namespace
        for service in self.services.lister.list(namespace):
            if any(selects(service, pod) for pod in pods):
                self.queue.add(key_of(service))

    def selected_pods(self, service: Service) -> list[Pod]:
        """The pods in the Service's namespace its selector matches."""
        return [
            pod
            for pod in self.pods.lister.list(service.metadata.namespace)
            if selects(service, pod)
        ]
