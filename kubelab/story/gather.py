"""What a story is told from, read (never written) through the API and the components' own
endpoints.

The chain is followed the way the controllers follow it: owner references down from a
Deployment to its ReplicaSets and their Pods; Services whose selector picks those Pods; the
EndpointSlices labelled with those Services; from a Service, the Pods its slices point at
(targetRef).  The Events are those whose involvedObject is one of these objects (by UID, so a
namesake that was deleted and created again does not mix in).

The kubelets' sandbox records (which sandbox each pod got, when, its CNI result) are read from
each pod's node through the API server's node proxy (``/debug/sandboxes``, see
:mod:`node.kubelet.runtime.network` for why not Events); a node that does not serve them adds
nothing.  Two sources are optional because they are not the API's:

- the audit log (``--audit-log``): the file the API server writes with ``--audit-log-path``,
  JSON lines of ``audit.k8s.io/v1`` Events.  It is read as a file rather than through an
  endpoint because that is what upstream offers (the log backend; webhooks aside) and a
  story is told where the log is, on the control plane; without it the create step names
  the object's first field manager instead of the user;
- the scheduler's explain records (``--scheduler``): ``/debug/explain/NAMESPACE/NAME`` on
  its own port, the one ``kubelab scheduler explain`` reads; a pod without a record (the
  scheduler keeps the latest 1000) is told from its Events alone.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kube.api.kinds.apps_v1 import Deployment, ReplicaSet
from kube.api.kinds.core_v1.cluster import Event
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, EndpointSlice
from kube.api.meta_v1 import Resource
from kube.client.errors import ApiError, ClientError
from kube.client.rest import Client
from kubelab.story.chain import Evidence

KINDS: dict[str, type[Resource]] = {
    **dict.fromkeys(("deployment", "deployments", "deploy"), Deployment),
    **dict.fromkeys(("replicaset", "replicasets", "rs"), ReplicaSet),
    **dict.fromkeys(("pod", "pods", "po"), Pod),
    **dict.fromkeys(("service", "services", "svc"), Service),
}


class StoryError(Exception):
    """What the user asked cannot be told: said plainly, no traceback."""


def parse_target(text: str) -> tuple[type[Resource], str]:
    kind, sep, name = text.partition("/")
    cls = KINDS.get(kind.lower())
    if not sep or not name or cls is None:
        raise StoryError(
            f"expected KIND/NAME with KIND one of deployment, replicaset, pod, service: {text!r}"
        )
    return cls, name


async def gather(
    client: Client,
    cls: type[Resource],
    name: str,
    namespace: str,
    *,
    audit_log: Path | None = None,
    scheduler: str | None = None,
) -> Evidence:
    audit = read_audit_log(audit_log) if audit_log is not None else []
    target = await client.get(cls, name, namespace)
    replicasets, pods, services, slices = await asyncio.gather(
        client.list(ReplicaSet, namespace),
        client.list(Pod, namespace),
        client.list(Service, namespace),
        client.list(EndpointSlice, namespace),
    )
    chain = _chain(target, replicasets.items, pods.items, services.items, slices.items)
    uids = {o.metadata.uid for o in chain}
    events = (await client.list(Event, namespace)).items
    nodes = sorted(
        {p.spec.node_name for p in chain if isinstance(p, Pod) and p.spec and p.spec.node_name}
    )
    sandboxes = [
        record
        for records in await asyncio.gather(*(_sandboxes(client, node) for node in nodes))
        for record in records
        if record.get("pod", {}).get("uid") in uids
    ]
    evidence = Evidence(
        objects=chain,
        events=[e for e in events if e.involved_object and e.involved_object.uid in uids],
        audit=audit,
        sandboxes=sandboxes,
    )
    if scheduler is not None:
        keys = [f"{namespace}/{p.metadata.name}" for p in chain if isinstance(p, Pod)]
        found = await asyncio.gather(*(asyncio.to_thread(_explain, scheduler, k) for k in keys))
        evidence.explains = {k: doc for k, doc in zip(keys, found, strict=True) if doc}
    return evidence


def _owned_by(objects: Iterable[Resource], owners: Sequence[Resource]) -> list[Resource]:
    uids = {o.metadata.uid for o in owners}
    return [o for o in objects if any(r.uid in uids for r in o.metadata.owner_references or ())]


def _selects(service: Service, pod: Pod) -> bool:
    selector = service.spec.selector if service.spec is not None else None
    labels = pod.metadata.labels or {}
    return bool(selector) and all(labels.get(k) == v for k, v in (selector or {}).items())


def _chain(
    target: Resource,
    replicasets: Sequence[ReplicaSet],
    pods: Sequence[Pod],
    services: Sequence[Service],
    slices: Sequence[EndpointSlice],
) -> list[Resource]:
    """The target and every object downstream of it (see the module docstring)."""
    if isinstance(target, Service):
        chosen_services: list[Service] = [target]
        of_target = [s for s in slices if _slice_service(s) == target.metadata.name]
        targets = {e.target_ref.uid for s in of_target for e in s.endpoints or () if e.target_ref}
        chosen_pods = [p for p in pods if p.metadata.uid in targets]
        owners: list[Resource] = []
    else:
        owners = list(_owned_by(replicasets, [target])) if isinstance(target, Deployment) else []
        if isinstance(target, Pod):
            chosen_pods = [target]
        else:
            chosen_pods = [p for p in _owned_by(pods, [target, *owners]) if isinstance(p, Pod)]
        chosen_services = [s for s in services if any(_selects(s, p) for p in chosen_pods)]
    names = {s.metadata.name for s in chosen_services}
    chosen_slices = [s for s in slices if _slice_service(s) in names]
    others = (*owners, *chosen_pods, *chosen_services, *chosen_slices)
    return [target, *(o for o in others if o.metadata.uid != target.metadata.uid)]


def _slice_service(slice_: EndpointSlice) -> str | None:
    return (slice_.metadata.labels or {}).get(SERVICE_NAME_LABEL)


async def _sandboxes(client: Client, node: str) -> list[dict[str, Any]]:
    """The kubelet's sandbox records, through the API server's node proxy; none from a node
    whose kubelet does not serve them (a hollow node, a kubelet without its server)."""
    try:
        answer = await client.request("GET", f"/api/v1/nodes/{node}/proxy/debug/sandboxes")
        records = json.loads(answer)
    except (ApiError, ClientError, ValueError):
        return []
    return [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []


def read_audit_log(path: Path) -> list[dict[str, Any]]:
    """The entries of an audit log file (JSON lines); a line that is not JSON is an error."""
    try:
        lines = path.read_text().splitlines()
    except OSError as error:
        raise StoryError(f"cannot read the audit log {path}: {error.strerror}") from error
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as error:
            raise StoryError(f"{path}:{number}: not an audit event (JSON): {error}") from error
        if isinstance(entry, dict) and entry.get("kind") == "Event":
            entries.append(entry)
    return entries


def _explain(address: str, key: str) -> dict[str, Any] | None:
    """The scheduler's record for pod ``key``, None if it keeps none."""
    url = f"{address.rstrip('/')}/debug/explain/{key}"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            doc: dict[str, Any] = json.load(response)
            return doc
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise StoryError(f"the scheduler at {address} answered {error.code} for {key}") from error
    except (OSError, ValueError) as error:
        raise StoryError(f"cannot read the scheduler's explain record at {url}: {error}") from error
