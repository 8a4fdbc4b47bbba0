"""What controllers that own pods share (upstream ``pkg/controller/controller_utils.go`` and
``controller_ref_manager.go``).

* ``ControllerExpectations`` remembers, per controller key, how many creations and deletions
  the controller has asked for and not yet seen in its informer.  Until they are seen (or five
  minutes pass, in case a watch event was lost) the controller must not act on the cache again,
  because the cache does not show its own writes yet: that is what keeps a slow watch from
  making it create the same pods twice.  ``UIDTrackingExpectations`` also remembers *which*
  pods it deletes, so a pod seen first with a deletionTimestamp and later deleted counts once.
* ``create_pods`` makes pods from a template in slow-start batches (1, 2, 4, ...) and stops at
  the first batch with an error, so a quota or admission failure costs one call, not hundreds.
  ``delete_pod`` deletes one.  Both record upstream's events on the owner.
* ``claim_pods`` is the ControllerRefManager: it adopts orphans the selector matches (patching
  ownerReferences, after re-reading the owner from the API to be sure it is not being deleted),
  and releases owned pods the selector no longer matches.
* ``rank_pods_for_deletion`` is upstream's ``ActivePodsWithRanks`` order: the first pods of
  the result are the cheapest to lose.

Pod informers of owning controllers add ``ORPHAN_INDEX`` (``orphan_index``) so a controller
finds its pods with ``OWNER_UID_INDEX`` and candidate orphans without scanning the namespace;
``pods_to_claim`` does both.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import functools
import math
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from controlplane.controllers.context import ControllerContext
from kube.api import codec
from kube.api.keys import object_key
from kube.api.kinds.core_v1.pod import Pod, PodTemplateSpec
from kube.api.labels import Selector
from kube.api.meta_v1 import ObjectMeta, Resource
from kube.api.names import is_dns1123_subdomain
from kube.api.owners import controller_of, controller_ref
from kube.client.errors import ApiError
from kube.client.informers import OWNER_UID_INDEX, Indexer
from kube.clock import Clock

EXPECTATIONS_TIMEOUT = 5 * 60.0
"""Seconds after which unmet expectations are ignored (a watch event was probably lost)."""
SLOW_START_INITIAL_BATCH_SIZE = 1
ORPHAN_INDEX = "orphanPods"
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"

# Event reasons (upstream's FailedCreatePodReason and friends).
SUCCESSFUL_CREATE = "SuccessfulCreate"
FAILED_CREATE = "FailedCreate"
SUCCESSFUL_DELETE = "SuccessfulDelete"
FAILED_DELETE = "FailedDelete"


# Expectations.


@dataclass
class _Expected:
    add: int
    delete: int
    since: float

    @property
    def fulfilled(self) -> bool:
        return self.add <= 0 and self.delete <= 0


class ControllerExpectations:
    """Creations and deletions a controller waits to observe, per controller key.

    Not locked: everything runs on one event loop and no method awaits.
    """

    def __init__(self, clock: Clock, ttl: float = EXPECTATIONS_TIMEOUT) -> None:
        self._clock = clock
        self._ttl = ttl
        self._expected: dict[str, _Expected] = {}

    def satisfied(self, key: str) -> bool:
        """Whether the controller may act on ``key``: nothing is pending, the expectations
        expired, or there never were any (a new controller)."""
        expected = self._expected.get(key)
        if expected is None or expected.fulfilled:
            return True
        return self._clock.monotonic() - expected.since > self._ttl

    def expect_creations(self, key: str, count: int) -> None:
        """Replace the expectations of ``key`` by ``count`` creations."""
        self._expected[key] = _Expected(count, 0, self._clock.monotonic())

    def expect_deletions(self, key: str, count: int) -> None:
        """Replace the expectations of ``key`` by ``count`` deletions."""
        self._expected[key] = _Expected(0, count, self._clock.monotonic())

    def raise_expectations(self, key: str, add: int, delete: int) -> None:
        """Expect more (creating the record if there is none)."""
        expected = self._expected.get(key)
        if expected is None:
            self._expected[key] = _Expected(add, delete, self._clock.monotonic())
        else:
            expected.add += add
            expected.delete += delete

    def lower_expectations(self, key: str, add: int, delete: int) -> None:
        """Expect less; nothing happens for a key without expectations."""
        expected = self._expected.get(key)
        if expected is not None:
            expected.add -= add
            expected.delete -= delete

    def creation_observed(self, key: str) -> None:
        self.lower_expectations(key, 1, 0)

    def deletion_observed(self, key: str) -> None:
        self.lower_expectations(key, 0, 1)

    def delete_expectations(self, key: str) -> None:
        """Forget ``key`` (its controller was deleted)."""
        self._expected.pop(key, None)


class UIDTrackingExpectations(ControllerExpectations):
    """Expectations that also remember which pods (by ``namespace/name``) are being deleted,
    so each deletion is observed once however many events report it."""

    def __init__(self, clock: Clock, ttl: float = EXPECTATIONS_TIMEOUT) -> None:
        super().__init__(clock, ttl)
        self._deleting: dict[str, set[str]] = {}

    def expect_deletions_of(self, key: str, pod_keys: Iterable[str]) -> None:
        pods = set(pod_keys)
        self._deleting[key] = pods
        self.expect_deletions(key, len(pods))

    def deletion_observed_of(self, key: str, pod_key: str) -> None:
        pods = self._deleting.get(key)
        if pods is not None and pod_key in pods:
            pods.discard(pod_key)
            self.deletion_observed(key)

    def delete_expectations(self, key: str) -> None:
        super().delete_expectations(key)
        self._deleting.pop(key, None)


# Pod state.


def is_pod_terminal(pod: Pod) -> bool:
    phase = pod.status.phase if pod.status is not None else None
    return phase in ("Succeeded", "Failed")


def is_pod_active(pod: Pod) -> bool:
    """Neither finished nor being deleted: a pod that counts towards replicas."""
    return not is_pod_terminal(pod) and pod.metadata.deletion_timestamp is None


def is_pod_terminating(pod: Pod) -> bool:
    """Being deleted but still running."""
    return not is_pod_terminal(pod) and pod.metadata.deletion_timestamp is not None


def _ready_since(pod: Pod) -> datetime.datetime | None:
    """When the Ready condition became True (None: not ready, or no time recorded)."""
    for condition in (pod.status.conditions if pod.status is not None else None) or ():
        if condition.type == "Ready" and condition.status == "True":
            return condition.last_transition_time
    return None


def is_pod_ready(pod: Pod) -> bool:
    return pod.status is not None and pod.status.condition_true("Ready")


def is_pod_available(pod: Pod, min_ready_seconds: int, now: datetime.datetime) -> bool:
    """Ready for more than ``min_ready_seconds`` (ready is enough when that is 0)."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds == 0:
        return True
    since = _ready_since(pod)
    return since is not None and since + datetime.timedelta(seconds=min_ready_seconds) < now


# Making and deleting pods.


def pods_prefix(owner_name: str) -> str:
    """The generateName of an owner's pods: ``<name>-``, or the bare name if that is invalid
    (checked as a prefix: the trailing dash stands for the random suffix)."""
    prefix = owner_name + "-"
    return owner_name if is_dns1123_subdomain(owner_name + "a") else prefix


def pod_from_template(
    template: PodTemplateSpec, owner: Resource, generate_name: str | None = None
) -> Pod:
    """A new pod from ``template`` in the owner's namespace, controlled by ``owner``.

    Labels, annotations and finalizers come from the template; the name is generated from
    ``generate_name`` (default: the owner's name and a dash).
    """
    meta = template.metadata or ObjectMeta()
    return Pod(
        metadata=ObjectMeta(
            generate_name=generate_name or pods_prefix(owner.metadata.name or ""),
            namespace=owner.metadata.namespace,
            labels=dict(meta.labels) if meta.labels else None,
            annotations=dict(meta.annotations) if meta.annotations else None,
            finalizers=list(meta.finalizers) if meta.finalizers else None,
            owner_references=[controller_ref(owner)],
        ),
        spec=copy.deepcopy(template.spec),
    )


def _namespace_terminating(error: BaseException) -> bool:
    if not isinstance(error, ApiError) or error.status.details is None:
        return False
    causes = error.status.details.causes or ()
    return any(cause.reason == NAMESPACE_TERMINATING_CAUSE for cause in causes)


class CreatePodsError(Exception):
    """A batch of ``create_pods`` failed: ``created`` pods were made before it stopped and
    ``error`` is the first failure (also the ``__cause__``)."""

    def __init__(self, created: int, error: BaseException) -> None:
        super().__init__(f"created {created} pods, then: {error}")
        self.created = created
        self.error = error


async def slow_start_batch(
    count: int, initial_batch_size: int, attempt: Callable[[], Awaitable[None]]
) -> tuple[int, BaseException | None]:
    """Call ``attempt`` ``count`` times in concurrent batches that double in size, stopping
    after the first batch with a failure; (successes, first error)."""
    remaining, successes = count, 0
    batch = min(remaining, initial_batch_size)
    while batch > 0:
        results = await asyncio.gather(*(attempt() for _ in range(batch)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        successes += batch - len(errors)
        if errors:
            return successes, errors[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


async def create_pod(
    ctx: ControllerContext, namespace: str, template: PodTemplateSpec, owner: Resource
) -> Pod | None:
    """Create one pod for ``owner``, with upstream's events; None if the namespace is being
    terminated (any creation would fail, so it is not an error)."""
    pod = pod_from_template(template, owner)
    pod.metadata.namespace = namespace
    if not pod.metadata.labels:
        raise ValueError("unable to create pods, no labels")
    try:
        created = await ctx.client.create(pod)
    except ApiError as error:
        if _namespace_terminating(error):
            return None
        ctx.recorder.event(owner, "Warning", FAILED_CREATE, f"Error creating: {error}")
        raise
    ctx.recorder.event(owner, "Normal", SUCCESSFUL_CREATE, f"Created pod: {created.metadata.name}")
    return created


async def create_pods(
    ctx: ControllerContext,
    namespace: str,
    template: PodTemplateSpec,
    owner: Resource,
    count: int,
    *,
    slow_start: bool = True,
) -> int:
    """Create ``count`` pods for ``owner``; how many were made.

    With ``slow_start`` they go in batches of 1, 2, 4, ...; otherwise all at once.  Raises
    ``CreatePodsError`` (with the number made) when a batch has a failure; the caller should
    stop expecting the pods that were not made.
    """

    async def attempt() -> None:
        await create_pod(ctx, namespace, template, owner)

    initial = SLOW_START_INITIAL_BATCH_SIZE if slow_start else count
    created, error = await slow_start_batch(count, initial, attempt)
    if error is not None:
        raise CreatePodsError(created, error) from error
    return created


async def delete_pod(ctx: ControllerContext, namespace: str, name: str, owner: Resource) -> None:
    """Delete a pod of ``owner``, with upstream's events (none when it is already gone)."""
    try:
        await ctx.client.delete(Pod, name, namespace)
    except ApiError as error:
        if not error.not_found:
            ctx.recorder.event(owner, "Warning", FAILED_DELETE, f"Error deleting: {error}")
        raise
    ctx.recorder.event(owner, "Normal", SUCCESSFUL_DELETE, f"Deleted pod: {name}")


# Finding and claiming pods.


def orphan_index(pod: Pod) -> list[str]:
    """``ORPHAN_INDEX``: a pod without a controller, under its namespace."""
    if controller_of(pod) is not None:
        return []
    return [pod.metadata.namespace or ""]


def pods_to_claim(pods: Indexer[Pod], owner: Resource) -> list[Pod]:
    """The pods ``owner`` controls and the orphans of its namespace (the informer must have
    ``ORPHAN_INDEX``)."""
    uid = owner.metadata.uid or ""
    owned = [
        pod
        for pod in pods.by_index(OWNER_UID_INDEX, uid)
        if (ref := controller_of(pod)) is not None and ref.uid == uid
    ]
    return owned + pods.by_index(ORPHAN_INDEX, owner.metadata.namespace or "")


class AdoptionRefused(Exception):
    """The owner changed under the controller, so it must not adopt anything now."""


async def _check_can_adopt(ctx: ControllerContext, owner: Resource) -> None:
    """Re-read the owner from the API (not the cache): a controller being deleted, or one
    replaced by a namesake, must not adopt."""
    namespace, name = owner.metadata.namespace, owner.metadata.name or ""
    fresh = await ctx.client.get(type(owner), name, namespace)
    kind = owner.kind_info.kind
    if fresh.metadata.uid != owner.metadata.uid:
        raise AdoptionRefused(
            f"original {kind} {namespace}/{name} is gone: got uid {fresh.metadata.uid}, "
            f"wanted {owner.metadata.uid}"
        )
    if fresh.metadata.deletion_timestamp is not None:
        raise AdoptionRefused(
            f"{kind} {namespace}/{name} has just been deleted at "
            f"{fresh.metadata.deletion_timestamp.isoformat()}"
        )


async def adopt_pod(ctx: ControllerContext, owner: Resource, pod: Pod) -> None:
    """Make ``owner`` the controller of ``pod``; the patch carries the pod's uid so it cannot
    land on a namesake."""
    ref = codec.to_builtins(controller_ref(owner))
    body = {"metadata": {"ownerReferences": [ref], "uid": pod.metadata.uid}}
    await ctx.client.patch(
        Pod, pod.metadata.name or "", pod.metadata.namespace, body, patch_type="strategic"
    )


async def release_pod(ctx: ControllerContext, owner: Resource, pod: Pod) -> None:
    """Remove ``owner``'s reference from ``pod``; a pod already gone is fine."""
    body = {
        "metadata": {
            "ownerReferences": [{"$patch": "delete", "uid": owner.metadata.uid}],
            "uid": pod.metadata.uid,
        }
    }
    try:
        await ctx.client.patch(
            Pod, pod.metadata.name or "", pod.metadata.namespace, body, patch_type="strategic"
        )
    except ApiError as error:
        # Gone, or replaced by a namesake (the uid in the patch no longer matches).
        if not (error.not_found or error.code == 422):
            raise


async def claim_pods(
    ctx: ControllerContext,
    owner: Resource,
    selector: Selector,
    pods: Sequence[Pod],
    *filters: Callable[[Pod], bool],
) -> list[Pod]:
    """The pods ``owner`` controls after adopting and releasing (upstream ``ClaimPods``).

    A pod matches when the selector and every filter accept it.  Owned and matching: kept.
    Owned and not matching: released (unless the owner is being deleted).  Orphaned, matching,
    not being deleted, same namespace, owner not being deleted: adopted, after checking once
    with the API that the owner is still there.  Pods of other controllers are ignored.  Every
    pod is tried; the first error is raised at the end so the key is retried.
    """
    uid = owner.metadata.uid
    owner_deleting = owner.metadata.deletion_timestamp is not None
    checked: asyncio.Future[None] | None = None
    claimed: list[Pod] = []
    errors: list[Exception] = []

    def matches(pod: Pod) -> bool:
        return selector.matches(pod.metadata.labels) and all(f(pod) for f in filters)

    async def can_adopt() -> None:
        nonlocal checked
        if checked is None:
            checked = asyncio.ensure_future(_check_can_adopt(ctx, owner))
        await checked

    for pod in pods:
        ref = controller_of(pod)
        try:
            if ref is not None:
                if ref.uid != uid:
                    continue
                if matches(pod):
                    claimed.append(pod)
                elif not owner_deleting:
                    await release_pod(ctx, owner, pod)
                continue
            if owner_deleting or not matches(pod) or pod.metadata.deletion_timestamp is not None:
                continue
            if owner.metadata.namespace and owner.metadata.namespace != pod.metadata.namespace:
                continue
            await can_adopt()
            await adopt_pod(ctx, owner, pod)
            claimed.append(pod)
        except ApiError as error:
            if not error.not_found:
                errors.append(error)
        except AdoptionRefused as error:
            errors.append(error)
    if errors:
        raise errors[0]
    return claimed


# Choosing pods to delete.

_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}


def _deletion_cost(pod: Pod) -> int:
    value = (pod.metadata.annotations or {}).get(POD_DELETION_COST)
    try:
        cost = int(value) if value is not None else 0
    except ValueError:
        return 0
    return cost if -(2**31) <= cost < 2**31 else 0


def _max_restarts(pod: Pod) -> tuple[int, int]:
    """(most restarts of a regular container, most restarts of a sidecar)."""
    status, spec = pod.status, pod.spec
    if status is None:
        return 0, 0
    regular = max((c.restart_count or 0 for c in status.container_statuses or ()), default=0)
    sidecars = {
        c.name
        for c in (spec.init_containers if spec else None) or ()
        if c.restart_policy == "Always"
    }
    sidecar = max(
        (c.restart_count or 0 for c in status.init_container_statuses or () if c.name in sidecars),
        default=0,
    )
    return regular, sidecar


def _log_rank(t: datetime.datetime, now: datetime.datetime) -> int:
    """log2 of the age in nanoseconds, truncated; -1 for no age (upstream's buckets)."""
    age = (now - t) // datetime.timedelta(microseconds=1) * 1000
    return int(math.log2(age)) if age > 0 else -1


def _newer_first(
    a: datetime.datetime | None,
    b: datetime.datetime | None,
    a_uid: str,
    b_uid: str,
    now: datetime.datetime | None,
) -> int:
    """Order two times with the missing one and the newer one first: exact times without a
    ``now``, logarithmic age buckets (ties by uid) with one (LogarithmicScaleDown)."""
    if a is None or b is None:
        return -1 if a is None else 1
    if now is None:
        return -1 if a > b else 1
    diff = _log_rank(a, now) - _log_rank(b, now)
    if diff == 0:
        return (a_uid > b_uid) - (a_uid < b_uid)
    return -1 if diff < 0 else 1


def _compare(a: tuple[Pod, int], b: tuple[Pod, int], now: datetime.datetime | None) -> int:
    (pa, rank_a), (pb, rank_b) = a, b
    node_a = (pa.spec.node_name if pa.spec else None) or ""
    node_b = (pb.spec.node_name if pb.spec else None) or ""
    if node_a != node_b and (not node_a or not node_b):
        return -1 if not node_a else 1
    phase_a = _PHASE_ORDER.get((pa.status.phase if pa.status else None) or "", 0)
    phase_b = _PHASE_ORDER.get((pb.status.phase if pb.status else None) or "", 0)
    if phase_a != phase_b:
        return phase_a - phase_b
    ready_a, ready_b = is_pod_ready(pa), is_pod_ready(pb)
    if ready_a != ready_b:
        return -1 if not ready_a else 1
    cost_a, cost_b = _deletion_cost(pa), _deletion_cost(pb)
    if cost_a != cost_b:
        return -1 if cost_a < cost_b else 1
    if rank_a != rank_b:
        return -1 if rank_a > rank_b else 1
    uid_a, uid_b = pa.metadata.uid or "", pb.metadata.uid or ""
    if ready_a and ready_b:
        since_a, since_b = _ready_since(pa), _ready_since(pb)
        if since_a != since_b:
            return _newer_first(since_a, since_b, uid_a, uid_b, now)
    restarts_a, restarts_b = _max_restarts(pa), _max_restarts(pb)
    for count_a, count_b in zip(restarts_a, restarts_b, strict=True):
        if count_a != count_b:
            return -1 if count_a > count_b else 1
    created_a, created_b = pa.metadata.creation_timestamp, pb.metadata.creation_timestamp
    if created_a != created_b:
        return _newer_first(created_a, created_b, uid_a, uid_b, now)
    return 0


def rank_pods_for_deletion(
    pods: Sequence[Pod],
    related: Sequence[Pod] | None = None,
    now: datetime.datetime | None = None,
) -> list[Pod]:
    """``pods`` with the ones to delete first at the front (upstream ``ActivePodsWithRanks``).

    Unscheduled before scheduled; Pending before Unknown before Running; not ready before
    ready; lower ``controller.kubernetes.io/pod-deletion-cost`` first; pods sharing a node with
    more active ``related`` pods first; ready for a shorter time first; more container restarts
    first; newer first.  With ``now`` the two times compare by logarithmic age bucket, ties
    broken by uid, as upstream's LogarithmicScaleDown does, so scale-down is not always the
    very newest pods.
    """
    on_node: dict[str, int] = {}
    for pod in related or ():
        if is_pod_active(pod):
            node = (pod.spec.node_name if pod.spec else None) or ""
            on_node[node] = on_node.get(node, 0) + 1
    ranked = [
        (pod, on_node.get((pod.spec.node_name if pod.spec else None) or "", 0)) for pod in pods
    ]
    order: Callable[[tuple[Pod, int], tuple[Pod, int]], int] = functools.partial(_compare, now=now)
    return [pod for pod, _ in sorted(ranked, key=functools.cmp_to_key(order))]


def pod_keys(pods: Iterable[Pod]) -> list[str]:
    return [object_key(pod) for pod in pods]
