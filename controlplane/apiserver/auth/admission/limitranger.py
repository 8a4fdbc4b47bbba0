"""LimitRanger: the LimitRange objects of a namespace default and bound what pods and claims ask.

As upstream's plugin, for each LimitRange in the pod's namespace:

- **defaults** (pod creation only): a container without a request or limit for a resource
  gets the range's ``defaultRequest`` / ``default`` for it (type ``Container``), and the pod
  is annotated ``kubernetes.io/limit-ranger`` with what was set.  This is the plugin's
  mutating half, run again when a mutating webhook's change reinvokes the in-tree plugins;
- **bounds** (the validating half, run after every mutation; type ``Container`` per
  container, type ``Pod`` for the pod as a whole): requests and limits at least ``min`` and
  at most ``max``, and limit/request at most
  ``maxLimitRequestRatio``; type ``PersistentVolumeClaim``: the claim's storage request
  within ``min`` / ``max`` (on creation and on resize).

Every violation is reported, in upstream's words (``maximum cpu usage per Container is 1, but
limit is 2``), in one 403.  Pod updates are not checked: containers cannot be added and their
resources are fixed.  The ranges come from a watch cache; when it holds none for the namespace
the store is asked (upstream's live lookup, its answer kept for ``LIVE_LOOKUP_TTL`` seconds as
upstream keeps it), so a range created a moment before the namespace's first pod is not
missed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import Admission, RequestContext
from controlplane.apiserver.storage.watchcache import WatchCache
from controlplane.controllers.resourcequota import pod_resources
from kube.api.kinds.core_v1.cluster import LimitRange, LimitRangeItem
from kube.api.kinds.core_v1.pod import Container, Pod, ResourceList, ResourceRequirements
from kube.api.kinds.core_v1.volume import PersistentVolumeClaim
from kube.api.meta_v1 import Resource
from kube.api.quantity import Quantity
from kube.api.scheme import KindInfo

ANNOTATION = "kubernetes.io/limit-ranger"

Amounts = Mapping[str, Quantity]


LIVE_LOOKUP_TTL = 30.0


def limit_ranger(ranges: WatchCache) -> tuple[Admission, Admission]:
    """Its ``Admit`` (the defaults) and its ``Validate`` (the bounds)."""
    live: dict[str, tuple[float, list[LimitRange]]] = {}

    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if ctx.subresource or operation != "CREATE" or not isinstance(obj, Pod) or not obj.spec:
            return
        _default(obj, await _items(ranges, live, obj.metadata.namespace))

    async def validate(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if ctx.subresource or operation not in ("CREATE", "UPDATE"):
            return
        if isinstance(obj, Pod) and operation == "CREATE" and obj.spec is not None:
            problems = _pod_problems(obj, await _items(ranges, live, obj.metadata.namespace))
        elif isinstance(obj, PersistentVolumeClaim):
            problems = _claim_problems(obj, await _items(ranges, live, obj.metadata.namespace))
        else:
            return
        if problems:
            name = obj.metadata.name or ""
            text = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
            raise errors.forbidden(info, name, f'{info.plural} "{name}" is forbidden: {text}')

    return admit, validate


async def _items(
    ranges: WatchCache, live: dict[str, tuple[float, list[LimitRange]]], namespace: str | None
) -> list[LimitRangeItem]:
    found = [
        r
        for r in ranges.objects()
        if isinstance(r, LimitRange) and r.metadata.namespace == namespace and r.spec is not None
    ]
    if not found:
        now = time.monotonic()
        expires, found = live.get(namespace or "", (0.0, []))
        if expires <= now:
            listed = await ranges.store.list(namespace or "")
            found = [r for r in listed.items if isinstance(r, LimitRange) and r.spec is not None]
            live[namespace or ""] = (now + LIVE_LOOKUP_TTL, found)
    found.sort(key=lambda r: r.metadata.name or "")
    return [item for r in found for item in (r.spec.limits if r.spec else None) or ()]


def _parsed(values: Mapping[str, object] | None) -> dict[str, Quantity]:
    return {k: Quantity.parse(str(v)) for k, v in (values or {}).items()}


def _default(pod: Pod, items: list[LimitRangeItem]) -> None:
    requests: ResourceList = {}
    limits: ResourceList = {}
    for item in items:
        if item.type == "Container":
            requests.update(item.default_request or {})
            limits.update(item.default or {})
    if not requests and not limits:
        return
    assert pod.spec is not None
    notes: list[str] = []
    for kind, containers in (
        ("init container", pod.spec.init_containers),
        ("container", pod.spec.containers),
    ):
        for container in containers or ():
            notes += _default_container(container, kind, requests, limits)
    if notes:
        annotations = dict(pod.metadata.annotations or {})
        annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)
        pod.metadata.annotations = annotations


def _default_container(
    container: Container, kind: str, requests: ResourceList, limits: ResourceList
) -> list[str]:
    resources = container.resources or ResourceRequirements()
    own_limits = dict(resources.limits or {})
    own_requests = dict(resources.requests or {})
    set_limits = sorted(k for k in limits if k not in own_limits)
    set_requests = sorted(k for k in requests if k not in own_requests)
    own_limits.update({k: limits[k] for k in set_limits})
    own_requests.update({k: requests[k] for k in set_requests})
    resources.limits = own_limits or None
    resources.requests = own_requests or None
    container.resources = resources
    notes = []
    if set_requests:
        notes.append(f"{', '.join(set_requests)} request for {kind} {container.name}")
    if set_limits:
        notes.append(f"{', '.join(set_limits)} limit for {kind} {container.name}")
    return notes


def _pod_problems(pod: Pod, items: list[LimitRangeItem]) -> list[str]:
    assert pod.spec is not None
    problems: list[str] = []
    containers = [*(pod.spec.init_containers or ()), *(pod.spec.containers or ())]
    for item in items:
        if item.type == "Container":
            for container in containers:
                resources = container.resources
                problems += _bounds(
                    "Container",
                    item,
                    _parsed(resources.requests if resources else None),
                    _parsed(resources.limits if resources else None),
                )
        elif item.type == "Pod":
            problems += _bounds(
                "Pod", item, pod_resources(pod, "requests"), pod_resources(pod, "limits")
            )
    return problems


def _bounds(kind: str, item: LimitRangeItem, requests: Amounts, limits: Amounts) -> list[str]:
    problems: list[str] = []
    for resource, enforced in _parsed(item.min).items():
        request, limit = requests.get(resource), limits.get(resource)
        if request is None:
            problems.append(
                f"minimum {resource} usage per {kind} is {enforced}.  No request is specified"
            )
        elif request < enforced:
            problems.append(
                f"minimum {resource} usage per {kind} is {enforced}, but request is {request}"
            )
        elif limit is not None and limit < enforced:
            problems.append(
                f"minimum {resource} usage per {kind} is {enforced}, but limit is {limit}"
            )
    for resource, enforced in _parsed(item.max).items():
        request, limit = requests.get(resource), limits.get(resource)
        if limit is None:
            problems.append(
                f"maximum {resource} usage per {kind} is {enforced}.  No limit is specified"
            )
        elif limit > enforced:
            problems.append(
                f"maximum {resource} usage per {kind} is {enforced}, but limit is {limit}"
            )
        elif request is not None and request > enforced:
            problems.append(
                f"maximum {resource} usage per {kind} is {enforced}, but request is {request}"
            )
    for resource, enforced in _parsed(item.max_limit_request_ratio).items():
        request, limit = requests.get(resource), limits.get(resource)
        prefix = f"{resource} max limit to request ratio per {kind} is {enforced}"
        if request is None or request.as_fraction() == 0:
            problems.append(f"{prefix}, but no request is specified or request is 0")
        elif limit is None or limit.as_fraction() == 0:
            problems.append(f"{prefix}, but no limit is specified or limit is 0")
        else:
            ratio = limit.as_fraction() / request.as_fraction()
            if ratio > enforced.as_fraction():
                problems.append(f"{prefix}, but provided ratio is {float(ratio):f}")
    return problems


def _claim_problems(claim: PersistentVolumeClaim, items: list[LimitRangeItem]) -> list[str]:
    resources = claim.spec.resources if claim.spec else None
    requests = _parsed(resources.requests if resources else None)
    problems: list[str] = []
    kind = "PersistentVolumeClaim"
    for item in items:
        if item.type != kind:
            continue
        problems += _bounds(kind, LimitRangeItem(min=item.min), requests, {})
        for resource, enforced in _parsed(item.max).items():
            request = requests.get(resource)
            if request is None:
                problems.append(
                    f"maximum {resource} usage per {kind} is {enforced}.  No request is specified"
                )
            elif request > enforced:
                problems.append(
                    f"maximum {resource} usage per {kind} is {enforced}, but request is {request}"
                )
    return problems
