"""The job controller: runs a Job's pods until enough succeed, or the Job fails.

Keys are Jobs.  A sync claims the Job's pods (adopting matching orphans), counts them, decides
whether the Job has finished, and otherwise creates or deletes pods towards
``min(parallelism, completions - succeeded)`` (``parallelism`` until the first success when
``completions`` is unset).  It follows upstream's ``pkg/controller/job/job_controller.go``:

* **Tracking with finalizers.**  Every pod is created with the ``batch.kubernetes.io/job-tracking``
  finalizer, so it cannot vanish before it is counted.  A finished pod is counted in three
  steps, each surviving a crash between them: its uid is written to
  ``status.uncountedTerminatedPods``; its finalizer is removed; uids whose pods no longer carry
  the finalizer move from the uncounted lists into ``status.succeeded``/``failed``.  A pod
  deleted before it finished counts as failed (unless ``podReplacementPolicy: Failed``).
  Finalizer removals this controller asked for are remembered until the cache shows them, so a
  stale cache does not count a pod twice.
* **Finishing in two steps.**  A Job that met its completions gets ``SuccessCriteriaMet``
  (reason ``CompletionsReached``); one past ``backoffLimit`` or ``activeDeadlineSeconds`` gets
  ``FailureTarget`` (``BackoffLimitExceeded``/``DeadlineExceeded``) and its active pods are
  deleted.  ``Complete``/``Failed`` (same reason, with an event) follow once no pod is uncounted
  or terminating; ``completionTime`` is set with ``Complete``.
* **Pod failure backoff.**  New pods wait 10 s after a failure, doubling per failure since the
  last success, capped at 6 minutes; the key comes back with ``enqueue_after`` when it is over.
  The failure record lives in memory, as upstream.
* **Indexed Jobs** give each pod a completion index (annotation and label
  ``batch.kubernetes.io/job-completion-index``, hostname ``<job>-<index>``), create pods for the
  lowest pending indexes, delete pods with duplicate or invalid indexes, and keep the succeeded
  ones in ``status.completedIndexes``.
* **Suspend** deletes the active pods and sets the ``Suspended`` condition; resuming resets
  ``startTime`` so the deadline counts active time only.
* **Expectations** (``podcontrol.ControllerExpectations``) keep a sync from acting on a cache
  that does not yet show the pods it created or deleted.

Not implemented: ``podFailurePolicy``, ``successPolicy``, ``backoffLimitPerIndex`` /
``maxFailedIndexes``; Jobs with ``managedBy`` set to another controller are left alone.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from controlplane.controllers import podcontrol
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from controlplane.controllers.jobutil import (
    COMPLETE,
    FAILED,
    FAILURE_TARGET,
    SUCCESS_CRITERIA_MET,
    SUSPENDED,
    find_condition,
    is_finished,
)
from kube.api.keys import object_key, split_key
from kube.api.kinds.batch_v1 import (
    INDEXED,
    Job,
    JobCondition,
    JobStatus,
    UncountedTerminatedPods,
)
from kube.api.kinds.core_v1.pod import Pod, PodTemplateSpec
from kube.api.labels import Selector, selector_of
from kube.api.meta_v1 import ObjectMeta
from kube.api.owners import controller_of
from kube.client.errors import ApiError

NAME = "job"
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
"""Annotation and label carrying an Indexed Job pod's completion index."""
JOB_CONTROLLER_NAME = "kubernetes.io/job-controller"

DEFAULT_POD_FAILURE_BACKOFF = 10.0
MAX_POD_FAILURE_BACKOFF = 360.0
MAX_UNCOUNTED_PODS = 500
MAX_POD_CREATE_DELETE_PER_SYNC = 500

_NORMAL, _WARNING = "Normal", "Warning"


# Reading Jobs and pods.


def _spec_int(value: int | None, default: int) -> int:
    return default if value is None else value


def is_indexed(job: Job) -> bool:
    return job.spec is not None and job.spec.completion_mode == INDEXED


def is_suspended(job: Job) -> bool:
    return bool(job.spec and job.spec.suspend)


def only_replace_failed_pods(job: Job) -> bool:
    spec = job.spec
    return spec is not None and (
        spec.pod_replacement_policy == "Failed" or spec.pod_failure_policy is not None
    )


def has_tracking_finalizer(pod: Pod) -> bool:
    return JOB_TRACKING_FINALIZER in (pod.metadata.finalizers or ())


def completion_index(pod: Pod) -> int | None:
    """The pod's completion index, None when absent or malformed."""
    value = (pod.metadata.annotations or {}).get(COMPLETION_INDEX)
    if value is None or not value.isdigit():
        return None
    return int(value)


def _valid_index(job: Job, pod: Pod) -> int | None:
    index = completion_index(pod)
    completions = job.spec.completions if job.spec else None
    return index if index is not None and completions is not None and index < completions else None


def is_pod_failed(pod: Pod, job: Job) -> bool:
    """Failed, or deleted before it could finish (an orphan that will never reach Failed)."""
    phase = pod.status.phase if pod.status else None
    if phase == "Failed":
        return True
    if only_replace_failed_pods(job):
        return False
    return pod.metadata.deletion_timestamp is not None and phase != "Succeeded"


def _is_succeeded(pod: Pod) -> bool:
    return pod.status is not None and pod.status.phase == "Succeeded"


def finish_time(pod: Pod, now: datetime.datetime) -> datetime.datetime:
    """When a finished pod finished: its last container's end, else its deletion, else now."""
    statuses = (pod.status.container_statuses if pod.status else None) or ()
    ends = [
        s.state.terminated.finished_at
        for s in statuses
        if s.state and s.state.terminated and s.state.terminated.finished_at
    ]
    return max(ends, default=None) or pod.metadata.deletion_timestamp or now


def job_selector(job: Job) -> Selector:
    """The Job's selector; the one the API server would generate if it has none."""
    if job.spec is not None and job.spec.selector is not None:
        return selector_of(job.spec.selector)
    return Selector.from_label_selector({CONTROLLER_UID_LABEL: job.metadata.uid or ""}, None)


def parse_indexes(text: str | None, completions: int) -> set[int]:
    """The indexes of ``"1,3-5"`` below ``completions``; malformed pieces are skipped."""
    found: set[int] = set()
    for piece in (text or "").split(","):
        first, _, last = piece.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            continue
        found.update(range(int(first), min(int(last or first), completions - 1) + 1))
    return found


def format_indexes(indexes: Iterable[int]) -> str:
    """``{1, 3, 4, 5}`` as ``"1,3-5"``."""
    ranges: list[list[int]] = []
    for index in sorted(indexes):
        if ranges and ranges[-1][1] == index - 1:
            ranges[-1][1] = index
        else:
            ranges.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def _new_condition(
    condition_type: str, status: str, reason: str, message: str, now: datetime.datetime
) -> JobCondition:
    return JobCondition(
        type=condition_type,
        status=status,
        reason=reason,
        message=message,
        last_probe_time=now,
        last_transition_time=now,
    )


def ensure_condition(
    status: JobStatus,
    condition_type: str,
    value: str,
    reason: str,
    message: str,
    now: datetime.datetime,
) -> bool:
    """Set a condition (not adding one that is False); whether anything changed."""
    conditions = status.conditions or []
    for i, condition in enumerate(conditions):
        if condition.type == condition_type:
            if (condition.status, condition.reason, condition.message) == (value, reason, message):
                return False
            conditions[i] = _new_condition(condition_type, value, reason, message, now)
            return True
    if value == "False":
        return False
    status.conditions = [*conditions, _new_condition(condition_type, value, reason, message, now)]
    return True


# Backoff after pod failures.


@dataclass
class BackoffRecord:
    """Failures since the last success and when the latest one happened."""

    failures: int = 0
    last_failure: datetime.datetime | None = None

    def updated(
        self, succeeded: Sequence[Pod], failed: Sequence[Pod], now: datetime.datetime
    ) -> BackoffRecord:
        """The record after newly finished pods: a success resets it, later failures count."""
        failed_at = sorted(finish_time(p, now) for p in failed)
        if not succeeded:
            if not failed_at:
                return self
            return BackoffRecord(self.failures + len(failed_at), failed_at[-1])
        last_success = max(finish_time(p, now) for p in succeeded)
        after = [t for t in failed_at if t > last_success]
        return BackoffRecord(len(after), after[-1] if after else None)

    def remaining(self, now: datetime.datetime) -> float:
        """Seconds before a new pod may be created."""
        if self.failures == 0 or self.last_failure is None:
            return 0.0
        delay = min(
            DEFAULT_POD_FAILURE_BACKOFF * 2.0 ** min(self.failures - 1, 16), MAX_POD_FAILURE_BACKOFF
        )
        elapsed = (now - self.last_failure).total_seconds()
        return max(delay - elapsed, 0.0)


# One sync's working state.


@dataclass
class _SyncState:
    job: Job
    pods: list[Pod]
    active_pods: list[Pod]
    uncounted: UncountedTerminatedPods
    expected_removals: set[str]
    backoff: BackoffRecord
    succeeded: int
    failed: int
    ready: int
    terminating: int
    finished: JobCondition | None = None
    succeeded_indexes: set[int] = field(default_factory=set)
    previous_indexes: set[int] = field(default_factory=set)

    @property
    def status(self) -> JobStatus:
        assert self.job.status is not None
        return self.job.status


class JobController(Controller):
    NAME = NAME
    EVENT_SOURCE = "job-controller"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.jobs = ctx.informers.informer_for(Job)
        self.pods = ctx.informers.informer_for(
            Pod, indexers={podcontrol.ORPHAN_INDEX: podcontrol.orphan_index}
        )
        self.expectations = podcontrol.ControllerExpectations(ctx.clock)
        self.removing_finalizers: dict[str, set[str]] = {}
        """Job key → uids of pods whose finalizer removal is not in the cache yet."""
        self.backoff: dict[str, BackoffRecord] = {}
        self.jobs.add_event_handler(self.enqueue, self.enqueue_update, self._job_deleted)
        self.pods.add_event_handler(self._pod_added, self._pod_updated, self._pod_deleted)

    # Handlers.

    def _job_deleted(self, obj: Any) -> None:
        key = object_key(unwrap(obj))
        self.expectations.delete_expectations(key)
        self.backoff.pop(key, None)
        self.queue.add(key)

    def _owner_key(self, pod: Pod) -> str | None:
        """The key of the Job controlling the pod: cached with that uid, or gone (then the key
        still comes back so the pod's finalizer is released)."""
        ref = controller_of(pod)
        if ref is None or ref.kind != "Job":
            return None
        key = f"{pod.metadata.namespace}/{ref.name}"
        job = self.jobs.lister.get(key)
        if job is not None and job.metadata.uid != ref.uid:
            return None
        return key

    def _enqueue_orphan_owners(self, pod: Pod) -> None:
        for job in self.jobs.lister.list(pod.metadata.namespace or ""):
            if job_selector(job).matches(pod.metadata.labels):
                self.enqueue(job)

    def _pod_added(self, pod: Pod) -> None:
        if pod.metadata.deletion_timestamp is not None:
            self._pod_deleted(pod)
            return
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.queue.add(key)
        elif controller_of(pod) is None:
            self._enqueue_orphan_owners(pod)

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        if old.metadata.resource_version == new.metadata.resource_version:
            return
        key = self._owner_key(new)
        if key is not None:
            if not has_tracking_finalizer(new):
                self._finalizer_removal_observed(key, new)
            if old.metadata.deletion_timestamp is None and new.metadata.deletion_timestamp:
                self.expectations.deletion_observed(key)
            self.queue.add(key)
        elif controller_of(new) is None:
            self._enqueue_orphan_owners(new)
        old_key = self._owner_key(old)
        if old_key is not None and old_key != key:
            self.queue.add(old_key)

    def _pod_deleted(self, obj: Any) -> None:
        pod: Pod = unwrap(obj)
        key = self._owner_key(pod)
        if key is None:
            return
        self._finalizer_removal_observed(key, pod)
        self.expectations.deletion_observed(key)
        self.queue.add(key)

    def _finalizer_removal_observed(self, key: str, pod: Pod) -> None:
        removing = self.removing_finalizers.get(key)
        if removing is not None:
            removing.discard(pod.metadata.uid or "")

    # Syncing.

    async def sync_key(self, key: str) -> None:
        cached = self.jobs.lister.get(key)
        if cached is None:
            await self._release_orphans(key)
            return
        spec = cached.spec
        if spec is None or (spec.managed_by or JOB_CONTROLLER_NAME) != JOB_CONTROLLER_NAME:
            return
        pods = await self._claim_pods(cached)
        if is_finished(cached):
            # The Job should not have finished with pods still tracked; this is a backstop.
            await self._remove_finalizers(key, [p for p in pods if has_tracking_finalizer(p)])
            return
        satisfied = self.expectations.satisfied(key)
        job = copy.deepcopy(cached)
        state = self._count(key, job, pods)
        now = self.ctx.clock.now()
        status = state.status
        if status.start_time is None and not is_suspended(job):
            status.start_time = now
        new_succeeded, new_failed = self._new_finished_pods(state)
        state.backoff = self.backoff.get(key, BackoffRecord()).updated(
            new_succeeded, new_failed, now
        )
        self._check_failure(state, now)
        if is_indexed(job):
            completions = _spec_int(spec.completions, 0)
            state.previous_indexes = parse_indexes(status.completed_indexes, completions)
            state.succeeded_indexes = state.previous_indexes | {
                index for pod in new_succeeded if (index := _valid_index(job, pod)) is not None
            }
            state.succeeded = len(state.succeeded_indexes)
        active = len(state.active_pods)
        suspend_changed = False
        error: Exception | None = None
        if state.finished is not None:
            deleted, deleted_ready, error = await self._delete_pods(job, state.active_pods)
            if deleted != active or not satisfied:
                state.finished = None  # pods may still be uncounted: finish on a later sync
            active -= deleted
            state.terminating += deleted
            state.ready -= deleted_ready
        else:
            managed = satisfied and job.metadata.deletion_timestamp is None
            if managed:
                active, error = await self._manage(key, state)
            if spec.completions is None:
                complete = state.succeeded > 0 and active == 0
            else:
                complete = state.succeeded >= spec.completions and active == 0
            if complete:
                state.finished = _new_condition(
                    SUCCESS_CRITERIA_MET,
                    "True",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                    now,
                )
            elif managed:
                suspend_changed = self._set_suspended(job, now)
        needs_flush = (
            suspend_changed
            or active != (status.active or 0)
            or state.ready != status.ready
            or state.terminating != status.terminating
        )
        status.active, status.ready, status.terminating = active, state.ready, state.terminating
        await self._track_status(key, state, needs_flush)
        if error is not None:
            raise error

    def _count(self, key: str, job: Job, pods: list[Pod]) -> _SyncState:
        if job.status is None:
            job.status = JobStatus()
        status = job.status
        uncounted = status.uncounted_terminated_pods or UncountedTerminatedPods()
        status.uncounted_terminated_pods = uncounted
        active_pods = [p for p in pods if podcontrol.is_pod_active(p)]
        return _SyncState(
            job=job,
            pods=pods,
            active_pods=active_pods,
            uncounted=uncounted,
            expected_removals=set(self.removing_finalizers.get(key, ())),
            backoff=BackoffRecord(),
            succeeded=(status.succeeded or 0) + len(uncounted.succeeded or ()),
            failed=(status.failed or 0) + len(uncounted.failed or ()),
            ready=sum(1 for p in active_pods if podcontrol.is_pod_ready(p)),
            terminating=sum(1 for p in pods if podcontrol.is_pod_terminating(p)),
        )

    def _new_finished_pods(self, state: _SyncState) -> tuple[list[Pod], list[Pod]]:
        """Finished pods not yet counted in any way; adds them to the running totals."""
        job, uncounted = state.job, state.uncounted
        succeeded: list[Pod] = []
        failed: list[Pod] = []
        for pod in state.pods:
            uid = pod.metadata.uid or ""
            if not has_tracking_finalizer(pod) or uid in state.expected_removals:
                continue
            if is_indexed(job) and _valid_index(job, pod) is None:
                continue
            if _is_succeeded(pod) and uid not in (uncounted.succeeded or ()):
                succeeded.append(pod)
            elif is_pod_failed(pod, job) and uid not in (uncounted.failed or ()):
                failed.append(pod)
        state.succeeded += len(succeeded)
        state.failed += len(failed)
        return succeeded, failed

    def _check_failure(self, state: _SyncState, now: datetime.datetime) -> None:
        """Carry an earlier decision forward, or decide whether the Job failed."""
        job = state.job
        assert job.spec is not None
        criteria = find_condition(job, SUCCESS_CRITERIA_MET)
        target = find_condition(job, FAILURE_TARGET)
        if criteria is not None and criteria.status == "True":
            state.finished = criteria
        elif target is not None and target.status == "True":
            state.finished = _new_condition(
                FAILED, "True", target.reason or "", target.message or "", now
            )
        elif state.failed > _spec_int(job.spec.backoff_limit, 6) or self._past_restart_limit(state):
            state.finished = _new_condition(
                FAILURE_TARGET,
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
                now,
            )
        elif (left := self._deadline_left(job, now)) is not None:
            if left <= 0:
                state.finished = _new_condition(
                    FAILURE_TARGET,
                    "True",
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                    now,
                )
            else:
                self.enqueue_after(job, left)

    @staticmethod
    def _past_restart_limit(state: _SyncState) -> bool:
        """With restartPolicy OnFailure, whether container restarts reached backoffLimit."""
        spec = state.job.spec
        assert spec is not None
        pod_spec = spec.template.spec if spec.template else None
        if pod_spec is None or pod_spec.restart_policy != "OnFailure":
            return False
        restarts = 0
        for pod in state.pods:
            if pod.status is None or pod.status.phase not in ("Running", "Pending"):
                continue
            for s in (
                *(pod.status.init_container_statuses or ()),
                *(pod.status.container_statuses or ()),
            ):
                restarts += s.restart_count or 0
        limit = _spec_int(spec.backoff_limit, 6)
        return restarts > 0 if limit == 0 else restarts >= limit

    @staticmethod
    def _deadline_left(job: Job, now: datetime.datetime) -> float | None:
        """Seconds left before activeDeadlineSeconds; None without a running deadline."""
        deadline = job.spec.active_deadline_seconds if job.spec else None
        start = job.status.start_time if job.status else None
        if deadline is None or start is None or is_suspended(job):
            return None
        return deadline - (now - start).total_seconds()

    def _set_suspended(self, job: Job, now: datetime.datetime) -> bool:
        status = job.status
        assert status is not None
        recorder = self.ctx.recorder
        if is_suspended(job):
            if ensure_condition(status, SUSPENDED, "True", "JobSuspended", "Job suspended", now):
                recorder.event(job, _NORMAL, "Suspended", "Job suspended")
                return True
            return False
        if ensure_condition(status, SUSPENDED, "False", "JobResumed", "Job resumed", now):
            recorder.event(job, _NORMAL, "Resumed", "Job resumed")
            status.start_time = now  # the deadline counts continuous activity
            return True
        return False

    # Pods.

    async def _claim_pods(self, job: Job) -> list[Pod]:
        """The Job's pods, adopting matching orphans (which get the tracking finalizer)."""
        candidates = podcontrol.pods_to_claim(self.pods.lister, job)
        claimed = await podcontrol.claim_pods(self.ctx, job, job_selector(job), candidates)
        pods: list[Pod] = []
        for pod in claimed:
            if controller_of(pod) is None and not has_tracking_finalizer(pod):
                await self.ctx.client.patch(
                    Pod,
                    pod.metadata.name or "",
                    pod.metadata.namespace,
                    {"metadata": {"finalizers": [JOB_TRACKING_FINALIZER]}},
                    patch_type="strategic",
                )
                pod = copy.deepcopy(pod)
                pod.metadata.finalizers = [*(pod.metadata.finalizers or ()), JOB_TRACKING_FINALIZER]
            pods.append(pod)
        return pods

    def _pod_template(self, job: Job) -> PodTemplateSpec:
        """The Job's template with the Job's labels and the tracking finalizer."""
        assert job.spec is not None and job.spec.template is not None
        template = copy.deepcopy(job.spec.template)
        meta = template.metadata or ObjectMeta()
        template.metadata = meta
        uid, name = job.metadata.uid or "", job.metadata.name or ""
        meta.labels = {
            CONTROLLER_UID_LABEL: uid,
            JOB_NAME_LABEL: name,
            LEGACY_CONTROLLER_UID_LABEL: uid,
            LEGACY_JOB_NAME_LABEL: name,
            **(meta.labels or {}),
        }
        if JOB_TRACKING_FINALIZER not in (meta.finalizers or ()):
            meta.finalizers = [*(meta.finalizers or ()), JOB_TRACKING_FINALIZER]
        return template

    async def _create_pod(self, job: Job, template: PodTemplateSpec, index: int | None) -> None:
        generate_name = None
        if index is not None:
            template = copy.deepcopy(template)
            meta = template.metadata
            assert meta is not None and template.spec is not None
            meta.annotations = {**(meta.annotations or {}), COMPLETION_INDEX: str(index)}
            meta.labels = {**(meta.labels or {}), COMPLETION_INDEX: str(index)}
            template.spec.hostname = f"{job.metadata.name}-{index}"
            generate_name = indexed_pods_prefix(job.metadata.name or "", index)
        pod = podcontrol.pod_from_template(template, job, generate_name)
        try:
            created = await self.ctx.client.create(pod)
        except ApiError as error:
            self.ctx.recorder.event(
                job, _WARNING, podcontrol.FAILED_CREATE, f"Error creating: {error}"
            )
            raise
        self.ctx.recorder.event(
            job, _NORMAL, podcontrol.SUCCESSFUL_CREATE, f"Created pod: {created.metadata.name}"
        )

    async def _manage(self, key: str, state: _SyncState) -> tuple[int, Exception | None]:
        """Create or delete pods towards the wanted number active; (active, error)."""
        job = state.job
        spec = job.spec
        assert spec is not None
        active = len(state.active_pods)
        parallelism = _spec_int(spec.parallelism, 1)
        if is_suspended(job):
            want = 0
        elif spec.completions is None:
            want = active if state.succeeded > 0 else parallelism
        else:
            want = max(min(spec.completions - state.succeeded, parallelism), 0)
        doomed = pods_for_removal(job, state.active_pods, max(active - want, 0))
        if not is_suspended(job):
            doomed = doomed[:MAX_POD_CREATE_DELETE_PER_SYNC]
        if doomed:
            self.expectations.expect_deletions(key, len(doomed))
            removed, removed_ready, error = await self._delete_pods(
                job, doomed, release=True, key=key
            )
            state.terminating += removed
            state.ready -= removed_ready
            return active - removed, error
        terminating = state.terminating if only_replace_failed_pods(job) else 0
        diff = want - terminating - active
        if diff <= 0:
            return active, None
        if (wait := state.backoff.remaining(self.ctx.clock.now())) > 0:
            self.enqueue_after(job, wait)
            return active, None
        diff = min(diff, MAX_POD_CREATE_DELETE_PER_SYNC)
        indexes: list[int | None] = [None] * diff
        if is_indexed(job):
            indexes = list(first_pending_indexes(state, diff))
            diff = len(indexes)
        self.expectations.expect_creations(key, diff)
        template = self._pod_template(job)
        pending = iter(indexes)

        async def attempt() -> None:
            await self._create_pod(job, template, next(pending))

        created, failure = await podcontrol.slow_start_batch(
            diff, podcontrol.SLOW_START_INITIAL_BATCH_SIZE, attempt
        )
        self.expectations.lower_expectations(key, diff - created, 0)
        return active + created, failure if isinstance(failure, Exception) else None

    async def _delete_pods(
        self, job: Job, pods: Sequence[Pod], *, release: bool = False, key: str = ""
    ) -> tuple[int, int, Exception | None]:
        """Delete pods; with ``release`` (pods not to be counted) their finalizer goes first.
        (deleted, of which ready, first error)."""
        deleted = ready = 0
        first: Exception | None = None
        for pod in pods:
            name, namespace = pod.metadata.name or "", pod.metadata.namespace or ""
            try:
                if release and has_tracking_finalizer(pod):
                    await self._patch_out_finalizer(pod)
                await podcontrol.delete_pod(self.ctx, namespace, name, job)
            except ApiError as error:
                if release:
                    self.expectations.deletion_observed(key)
                if not error.not_found:
                    first = first or error
                    continue
            deleted += 1
            ready += podcontrol.is_pod_ready(pod)
        return deleted, ready, first

    async def _patch_out_finalizer(self, pod: Pod) -> None:
        await self.ctx.client.patch(
            Pod,
            pod.metadata.name or "",
            pod.metadata.namespace,
            {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}},
            patch_type="strategic",
        )

    async def _remove_finalizers(
        self, key: str, pods: Sequence[Pod]
    ) -> tuple[set[str], Exception | None]:
        """Remove the tracking finalizer; (uids now without it, first error)."""
        removing = self.removing_finalizers.setdefault(key, set())
        done: set[str] = set()
        first: Exception | None = None
        for pod in pods:
            uid = pod.metadata.uid or ""
            removing.add(uid)
            try:
                await self._patch_out_finalizer(pod)
            except ApiError as error:
                removing.discard(uid)
                if not error.not_found:
                    first = first or error
                    continue
            done.add(uid)
        return done, first

    async def _release_orphans(self, key: str) -> None:
        """The Job is gone: its pods' finalizers must not keep them forever."""
        self.removing_finalizers.pop(key, None)
        namespace, name = split_key(key)
        pods = [
            pod
            for pod in self.pods.lister.list(namespace)
            if has_tracking_finalizer(pod)
            and (ref := controller_of(pod)) is not None
            and ref.kind == "Job"
            and ref.name == name
        ]
        for pod in pods:
            try:
                await self._patch_out_finalizer(pod)
            except ApiError as error:
                if not error.not_found:
                    raise

    # Status.

    async def _track_status(self, key: str, state: _SyncState, needs_flush: bool) -> None:
        """Count finished pods through ``uncountedTerminatedPods``, remove their finalizers,
        move them to the counters, and finish the Job when nothing is left uncounted."""
        job, uncounted = state.job, state.uncounted
        indexed = is_indexed(job)
        pods = sorted(state.pods, key=lambda p: completion_index(p) or 0) if indexed else state.pods
        with_finalizer = {
            p.metadata.uid or ""
            for p in pods
            if has_tracking_finalizer(p) and p.metadata.uid not in state.expected_removals
        }
        needs_flush |= _count_uncounted(state.status, uncounted, with_finalizer)
        to_release: list[Pod] = []
        new_indexes: list[int] = []
        reached_max = False
        failing = state.finished is not None and state.finished.type != SUCCESS_CRITERIA_MET
        for pod in pods:
            uid = pod.metadata.uid or ""
            if uid not in with_finalizer:
                continue
            failed = is_pod_failed(pod, job)
            releasable = (
                job.metadata.deletion_timestamp is not None
                or state.finished is not None
                or _is_succeeded(pod)
                or failed
            )
            if not releasable:
                continue
            to_release.append(pod)
            if _is_succeeded(pod) and uid not in (uncounted.failed or ()):
                if indexed:
                    index = _valid_index(job, pod)
                    if index is not None and index not in state.previous_indexes:
                        new_indexes.append(index)
                        needs_flush = True
                elif uid not in (uncounted.succeeded or ()):
                    uncounted.succeeded = [*(uncounted.succeeded or ()), uid]
                    needs_flush = True
            elif (
                (failed or failing)
                and uid not in (uncounted.failed or ())
                and (not indexed or _valid_index(job, pod) is not None)
            ):
                uncounted.failed = [*(uncounted.failed or ()), uid]
                needs_flush = True
            pending = (
                len(new_indexes) + len(uncounted.succeeded or ()) + len(uncounted.failed or ())
            )
            if pending >= MAX_UNCOUNTED_PODS:
                reached_max = True
                break
        status = state.status
        if indexed:
            indexes = format_indexes(state.succeeded_indexes | set(new_indexes))
            needs_flush |= indexes != (status.completed_indexes or "")
            status.completed_indexes = indexes
            status.succeeded = len(state.succeeded_indexes | set(new_indexes))
        finished = state.finished
        now = self.ctx.clock.now()
        if finished is not None and finished.type == FAILURE_TARGET:
            status.conditions = [*(status.conditions or ()), finished]
            needs_flush = True
            finished = _new_condition(
                FAILED, "True", finished.reason or "", finished.message or "", now
            )
        elif finished is not None and finished.type == SUCCESS_CRITERIA_MET:
            if find_condition(job, SUCCESS_CRITERIA_MET) is None:
                status.conditions = [*(status.conditions or ()), finished]
                needs_flush = True
            finished = _new_condition(
                COMPLETE, "True", finished.reason or "", finished.message or "", now
            )
        # 1. Record the uncounted pods (and interim conditions) before touching finalizers.
        if needs_flush:
            state.job = job = await self.ctx.client.update_status(job)
            self.backoff[key] = state.backoff
            needs_flush = False
        status = state.status
        # 2. Release the pods, 3. count those released.
        released, error = await self._remove_finalizers(key, to_release)
        uncounted = status.uncounted_terminated_pods or UncountedTerminatedPods()
        status.uncounted_terminated_pods = uncounted
        needs_flush |= _count_uncounted(status, uncounted, with_finalizer - released)
        if error is not None:
            if needs_flush:
                await self.ctx.client.update_status(job)
            raise error
        done = not reached_max and finished is not None and self._finish(state, finished)
        if needs_flush or done:
            await self.ctx.client.update_status(job)
            if done and finished is not None:
                self._record_finished(job, finished)

    def _finish(self, state: _SyncState, finished: JobCondition) -> bool:
        """Set the terminal condition once no pod is uncounted or terminating."""
        status = state.status
        uncounted = status.uncounted_terminated_pods
        if uncounted is not None and (uncounted.succeeded or uncounted.failed):
            return False
        if state.terminating > 0:
            return False
        now = self.ctx.clock.now()
        ensure_condition(
            status, finished.type or "", "True", finished.reason or "", finished.message or "", now
        )
        if finished.type == COMPLETE:
            status.completion_time = now
        return True

    def _record_finished(self, job: Job, finished: JobCondition) -> None:
        recorder, spec, status = self.ctx.recorder, job.spec, job.status
        if finished.type == COMPLETE:
            completions = spec.completions if spec else None
            if completions is not None and status and (status.succeeded or 0) > completions:
                recorder.event(
                    job,
                    _WARNING,
                    "TooManySucceededPods",
                    "Too many succeeded pods running after completion count reached",
                )
            recorder.event(job, _NORMAL, "Completed", "Job completed")
        else:
            recorder.event(job, _WARNING, finished.reason or "", finished.message or "")


def _count_uncounted(
    status: JobStatus, uncounted: UncountedTerminatedPods, with_finalizer: set[str]
) -> bool:
    """Move uncounted uids whose pods lost the finalizer into the counters; whether any did."""
    changed = False
    for attr in ("succeeded", "failed"):
        uids: list[str] = getattr(uncounted, attr) or []
        kept = [uid for uid in uids if uid in with_finalizer]
        if len(kept) != len(uids):
            changed = True
            setattr(status, attr, (getattr(status, attr) or 0) + len(uids) - len(kept))
            setattr(uncounted, attr, kept or None)
    return changed


def indexed_pods_prefix(job_name: str, index: int) -> str:
    """``<job>-<index>-``, the job name shortened to keep the pod name a valid length."""
    suffix = f"-{index}-"
    return job_name[: 58 - len(suffix)] + suffix


def first_pending_indexes(state: _SyncState, count: int) -> list[int]:
    """The lowest indexes neither succeeded nor held by an active pod."""
    spec = state.job.spec
    assert spec is not None
    taken = state.succeeded_indexes | {
        index for pod in state.active_pods if (index := completion_index(pod)) is not None
    }
    pending: list[int] = []
    for index in range(_spec_int(spec.completions, 0)):
        if len(pending) == count:
            break
        if index not in taken:
            pending.append(index)
    return pending


def pods_for_removal(job: Job, pods: Sequence[Pod], at_least: int) -> list[Pod]:
    """Active pods to delete: for an Indexed Job, those with a missing, out-of-range or
    duplicate index; then the cheapest to lose until ``at_least``."""
    remove: list[Pod] = []
    left = list(pods)
    if is_indexed(job):
        left = []
        by_index: dict[int, list[Pod]] = {}
        for pod in pods:
            index = _valid_index(job, pod)
            if index is None:
                remove.append(pod)
            else:
                by_index.setdefault(index, []).append(pod)
        for group in by_index.values():
            ranked = podcontrol.rank_pods_for_deletion(group)
            remove.extend(ranked[:-1])
            left.append(ranked[-1])
    if len(remove) < at_least:
        remove.extend(podcontrol.rank_pods_for_deletion(left)[: at_least - len(remove)])
    return remove


def new(ctx: ControllerContext) -> JobController:
    return JobController(ctx)
