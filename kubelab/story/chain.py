"""The causal chain of an object, in time order, from what the components recorded.

:func:`tell` is pure: it turns :class:`Evidence` (objects read from the API, their Events, the
audit log's entries and the scheduler's explain records) into :class:`Step` rows, each with
its time, its actor, what happened, to which object, the detail, and the link to its cause
(an owner reference, a binding, a slice's service label or target references).  Nothing is
read from a log of free text: every step is an Event (the components' own reasons, upstream's
where upstream records one: ``ScalingReplicaSet``, ``SuccessfulCreate``, ``Scheduled``,
``Pulling``...; kubelab's where it does not: kube-proxy's ``EndpointsSynced``, the DNS's
``Answered``), a kubelet's sandbox record (``SandboxCreated`` and ``AddedInterface`` steps:
the sandbox and its CNI ADD), an audit entry, or an object's own timestamps (creation, a
condition's lastTransitionTime, the last write of an EndpointSlice in its managedFields).

Times come at two precisions: Events from the events.k8s.io recorder (the scheduler's) and
audit entries carry microseconds, the rest whole seconds.  So steps are ordered by the second
they happened in, then by their place in the chain (:data:`CHAIN`: a Pod is created before it
is scheduled before its sandbox...), then by the exact time; this is the chapter's order
wherever the clock cannot tell two steps apart.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube.api.kinds.apps_v1 import Deployment, ReplicaSet
from kube.api.kinds.core_v1.cluster import Event
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, EndpointSlice
from kube.api.meta_v1 import ObjectMeta, Resource

CHAIN: Mapping[str, int] = {
    step: rank
    for rank, steps in enumerate(
        (
            ("Created Deployment", "Created Service"),
            ("ScalingReplicaSet", "Created ReplicaSet"),
            ("SuccessfulCreate", "Created Pod"),
            ("Scheduled", "FailedScheduling"),
            ("SandboxCreated", "FailedCreatePodSandBox"),
            ("AddedInterface",),
            ("Pulling",),
            ("Pulled", "Failed", "ErrImageNeverPull"),
            ("BackOff", "Created"),
            ("Started",),
            ("Ready",),
            ("Created EndpointSlice", "Updated EndpointSlice"),
            ("EndpointsSynced",),
            ("Answered",),
        )
    )
    for step in steps
}
"""The place of each step in the chain, for steps within the same second."""


@dataclass(frozen=True)
class Step:
    time: datetime.datetime
    actor: str
    step: str
    object: str
    detail: str
    cause: str

    def sort_key(self) -> tuple[datetime.datetime, int, datetime.datetime]:
        second = self.time.replace(microsecond=0)
        return second, CHAIN.get(self.step, len(CHAIN)), self.time

    def to_json(self) -> dict[str, str]:
        return {
            "time": self.time.isoformat().replace("+00:00", "Z"),
            "actor": self.actor,
            "step": self.step,
            "object": self.object,
            "detail": self.detail,
            "cause": self.cause,
        }


@dataclass
class Evidence:
    """What the story is told from: the objects in the chain, the Events about them, the
    audit log's entries (``audit.k8s.io/v1`` Events as dicts), explain records by pod key
    (the scheduler's ``/debug/explain`` documents) and the kubelets' sandbox records (their
    ``/debug/sandboxes``)."""

    objects: list[Resource] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    audit: list[dict[str, Any]] = field(default_factory=list)
    explains: dict[str, dict[str, Any]] = field(default_factory=dict)
    sandboxes: list[dict[str, Any]] = field(default_factory=list)


def tell(evidence: Evidence) -> list[Step]:
    """Every step the evidence shows, in the chain's time order (see the module docstring)."""
    by_uid = {o.metadata.uid: o for o in evidence.objects if o.metadata.uid}
    steps: list[Step] = []
    for obj in evidence.objects:
        steps.append(_created(obj, evidence.audit))
        if isinstance(obj, Pod):
            steps.extend(_ready(obj))
        if isinstance(obj, EndpointSlice):
            steps.extend(_slice_written(obj))
    for record in evidence.sandboxes:
        pod = by_uid.get(record.get("pod", {}).get("uid"))
        if isinstance(pod, Pod):
            steps.extend(_sandbox_steps(record, pod))
    for event in evidence.events:
        ref = event.involved_object
        subject = by_uid.get(ref.uid) if ref is not None and ref.uid else None
        if subject is not None:
            steps.append(_from_event(event, subject, evidence))
    return sorted(steps, key=Step.sort_key)


def kind_of(obj: Resource) -> str:
    return type(obj).kind_info.kind


def name_of(obj: Resource) -> str:
    return f"{kind_of(obj)}/{obj.metadata.name}"


def _meta_time(meta: ObjectMeta) -> datetime.datetime:
    return meta.creation_timestamp or datetime.datetime.min.replace(tzinfo=datetime.UTC)


def _parse_time(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None


def _owner_cause(obj: Resource) -> str:
    owners = [o for o in obj.metadata.owner_references or () if o.controller]
    return ", ".join(f"{o.kind}/{o.name} (ownerReference)" for o in owners)


def _created(obj: Resource, audit: list[dict[str, Any]]) -> Step:
    entry = _audit_create(obj, audit)
    if isinstance(obj, EndpointSlice):
        cause = _slice_cause(obj)
    else:
        cause = _owner_cause(obj) or ("the request" if entry else "")
    if entry is not None:
        user = entry.get("user", {}).get("username", "?")
        agent = entry.get("userAgent", "")
        sources = ", ".join(entry.get("sourceIPs", ()))
        detail = f"{entry.get('verb', 'create')} {entry.get('requestURI', '')}".strip()
        detail += f" ({agent}" + (f" from {sources}" if sources else "") + ")"
        time = _parse_time(entry.get("requestReceivedTimestamp")) or _meta_time(obj.metadata)
        return Step(time, user, f"Created {kind_of(obj)}", name_of(obj), detail, cause)
    manager = _first_manager(obj.metadata)
    detail = f"field manager {manager}" if manager else ""
    if isinstance(obj, EndpointSlice) and not _slice_written(obj):
        detail = _endpoints(obj)  # never written since: it holds what it was made with
    return Step(
        _meta_time(obj.metadata),
        manager or "?",
        f"Created {kind_of(obj)}",
        name_of(obj),
        detail,
        cause,
    )


def _first_manager(meta: ObjectMeta) -> str:
    entries = [e for e in meta.managed_fields or () if e.manager and not e.subresource]
    return min(entries, key=lambda e: e.time or _meta_time(meta)).manager or "" if entries else ""


def _audit_create(obj: Resource, audit: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The audit entry of ``obj``'s successful create, if the log has it."""
    for entry in audit:
        ref = entry.get("objectRef") or {}
        status = entry.get("responseStatus") or {}
        if (
            entry.get("verb") == "create"
            and entry.get("stage") == "ResponseComplete"
            and not ref.get("subresource")
            and ref.get("name") == obj.metadata.name
            and (ref.get("namespace") or None) == obj.metadata.namespace
            and ref.get("resource") == type(obj).kind_info.plural
            and 200 <= int(status.get("code", 0)) < 300
        ):
            return entry
    return None


def _ready(pod: Pod) -> list[Step]:
    status = pod.status
    if status is None:
        return []
    node = pod.spec.node_name if pod.spec is not None else None
    return [
        Step(
            c.last_transition_time,
            f"kubelet {node}",
            "Ready",
            name_of(pod),
            f"IP {status.pod_ip}" if status.pod_ip else "",
            "containers started and ready (ContainersReady)",
        )
        for c in status.conditions or ()
        if c.type == "Ready" and c.status == "True" and c.last_transition_time is not None
    ]


def _slice_cause(slice_: EndpointSlice) -> str:
    service = (slice_.metadata.labels or {}).get(SERVICE_NAME_LABEL)
    pods = sorted(
        e.target_ref.name
        for e in slice_.endpoints or ()
        if e.target_ref is not None and e.target_ref.kind == "Pod" and e.target_ref.name
    )
    parts = [f"Service/{service} ({SERVICE_NAME_LABEL})"] if service else []
    if pods:
        parts.append(f"Pod/{', '.join(pods)} (targetRef)")
    return "; ".join(parts)


def _slice_written(slice_: EndpointSlice) -> list[Step]:
    """The slice's last write (the newest managedFields entry), if after its creation."""
    entries = [e for e in slice_.metadata.managed_fields or () if e.time is not None]
    latest = max(entries, key=lambda e: e.time or _meta_time(slice_.metadata), default=None)
    if latest is None or latest.time is None or latest.time <= _meta_time(slice_.metadata):
        return []
    return [
        Step(
            latest.time,
            latest.manager or "?",
            "Updated EndpointSlice",
            name_of(slice_),
            _endpoints(slice_),
            _slice_cause(slice_),
        )
    ]


def _endpoints(slice_: EndpointSlice) -> str:
    told = []
    for endpoint in slice_.endpoints or ():
        ready = endpoint.conditions.ready if endpoint.conditions is not None else None
        where = f" on {endpoint.node_name}" if endpoint.node_name else ""
        state = "ready" if ready in (True, None) else "not ready"
        told.append(f"{', '.join(endpoint.addresses or ())}{where} ({state})")
    return "; ".join(told) or "no endpoints"


def _sandbox_steps(record: Mapping[str, Any], pod: Pod) -> list[Step]:
    """A kubelet's sandbox record: the sandbox, and what its CNI ADD wired."""
    time = _parse_time(record.get("created"))
    if time is None:
        return []
    node = pod.spec.node_name if pod.spec is not None else None
    actor = f"kubelet {node}"
    sandbox = f"Created pod sandbox {str(record.get('sandboxID', ''))[:12]}"
    steps = [Step(time, actor, "SandboxCreated", name_of(pod), sandbox, f"binding to node {node}")]
    interfaces = [i for i in record.get("interfaces") or () if isinstance(i, dict)]
    pod_ends = [i for i in interfaces if i.get("inPod")]
    if pod_ends:
        added = ", ".join(f"{i.get('name')} [{', '.join(i.get('ips') or ())}]" for i in pod_ends)
        on_host = ", ".join(str(i.get("name")) for i in interfaces if not i.get("inPod"))
        detail = f"Add {added} from CNI" + (f"; on the host {on_host}" if on_host else "")
        cause = "sandbox (CNI ADD from RunPodSandbox)"
        steps.append(Step(time, actor, "AddedInterface", name_of(pod), detail, cause))
    return steps


def _event_time(event: Event) -> datetime.datetime:
    return (
        _parse_time(event.event_time)
        or event.first_timestamp
        or event.last_timestamp
        or _meta_time(event.metadata)
    )


def _actor(event: Event) -> str:
    source = event.source
    component = event.reporting_component or (source.component if source else None) or "?"
    instance = (source.host if source else None) or event.reporting_instance or ""
    # New-style reporters name their instance after themselves (default-scheduler-HOST).
    return instance if instance.startswith(component) else f"{component} {instance}".strip()


def _from_event(event: Event, subject: Resource, evidence: Evidence) -> Step:
    reason = event.reason or "?"
    detail = event.message or ""
    repeats = (event.series.count if event.series else None) or event.count or 1
    if repeats > 1:
        detail += f" (x{repeats})"
    if isinstance(subject, Pod) and reason in ("Scheduled", "FailedScheduling"):
        key = f"{subject.metadata.namespace}/{subject.metadata.name}"
        summary = explain_summary(evidence.explains.get(key))
        if summary:
            detail += f"; explain: {summary}"
    return Step(
        _event_time(event),
        _actor(event),
        reason,
        name_of(subject),
        detail,
        _event_cause(reason, subject, evidence.objects),
    )


def _event_cause(reason: str, subject: Resource, objects: Sequence[Resource]) -> str:
    if isinstance(subject, Pod):
        node = subject.spec.node_name if subject.spec is not None else None
        if reason in ("Scheduled", "FailedScheduling"):
            return f"{name_of(subject)} unbound (spec.nodeName empty)"
        if reason == "FailedCreatePodSandBox":
            return f"binding to node {node}" if node else "binding"
        return f"sandbox on node {node}" if node else ""
    if isinstance(subject, Service):
        slices = sorted(
            name_of(o)
            for o in objects
            if isinstance(o, EndpointSlice)
            and (o.metadata.labels or {}).get(SERVICE_NAME_LABEL) == subject.metadata.name
        )
        if reason == "EndpointsSynced":
            return ", ".join(slices) + f" ({SERVICE_NAME_LABEL})" if slices else ""
        if reason == "Answered":
            return f"a DNS query for {name_of(subject)}"
        return ""
    if isinstance(subject, Deployment):
        generation = subject.metadata.generation
        return f"{name_of(subject)} spec (generation {generation})"
    if isinstance(subject, ReplicaSet):
        replicas = subject.spec.replicas if subject.spec is not None else None
        return f"{name_of(subject)} spec.replicas={replicas}"
    return _owner_cause(subject)


def explain_summary(doc: Mapping[str, Any] | None) -> str:
    """One line of a scheduler explain record: nodes examined and feasible, the winner."""
    if not doc:
        return ""
    verdicts: Mapping[str, Any] = doc.get("filter") or {}
    feasible = [node for node, verdict in verdicts.items() if verdict is None]
    line = (
        f"{len(verdicts)} of {doc.get('nodesTotal', '?')} nodes examined, {len(feasible)} feasible"
    )
    totals: Mapping[str, int] = doc.get("total") or {}
    node = doc.get("node")
    if node and node in totals:
        line += f", {node} scored {totals[node]}"
    elif node:
        line += f", {node} the only one (not scored)"
    pre = doc.get("preFilter")
    if pre:
        line += f", PreFilter {pre.get('plugin')}: {pre.get('reason')}"
    return line
