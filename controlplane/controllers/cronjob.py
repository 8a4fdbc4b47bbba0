"""The cronjob controller: creates a Job from a CronJob's template each time its schedule fires.

Keys are CronJobs.  A sync reconciles the CronJob with the Jobs it controls (found through the
owner-uid index), then decides whether a start is due, and finally asks to be woken just after
the next scheduled time (``enqueue_after``): nothing polls, and all time is ``ctx.clock``.
The steps follow upstream's ``cronjob_controllerv2.go``:

1. Finished Jobs beyond ``successfulJobsHistoryLimit`` / ``failedJobsHistoryLimit`` are deleted,
   oldest start first.
2. ``status.active`` is brought up to date: finished Jobs leave it (``SawCompletedJob``), Jobs
   gone from the API leave it (``MissingJob``), unfinished Jobs the CronJob never recorded are
   reported (``UnexpectedJob``); ``lastSuccessfulTime`` follows the latest completion.
3. Unless the CronJob is being deleted, is suspended, or has an unusable time zone or
   schedule, the most recent missed start time is found (the rough count of missed starts is
   upstream's arithmetic, which is why more than 100 only warns, ``TooManyMissedTimes``),
   skipped if later than ``startingDeadlineSeconds`` (``MissSchedule``) or already handled,
   held back by ``concurrencyPolicy: Forbid`` while a Job is active, or preceded by deleting the
   active Jobs under ``Replace``.
4. The Job is named ``<cronjob>-<scheduled time in minutes since the epoch>``: the name is the
   lock that stops a start from running twice when a status update was lost.

Status is written once per sync, even when a later step failed, so progress is not lost.
"""

from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from controlplane.controllers.jobutil import finished_condition, is_finished, is_succeeded
from kube.api.cron import CronError, CronSchedule, parse_cron
from kube.api.kinds.batch_v1 import CronJob, CronJobStatus, Job
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.meta_v1 import ObjectMeta, OwnerReference
from kube.api.owners import controller_of, controller_ref, is_controlled_by
from kube.client.errors import ApiError
from kube.client.informers import OWNER_UID_INDEX

NAME = "cronjob"
SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"

_UTC = datetime.UTC
_NEXT_SCHEDULE_DELTA = 0.1
"""Seconds past a scheduled time at which the key comes back, so the time has surely passed."""
_MANY_MISSED = 100
_NORMAL, _WARNING = "Normal", "Warning"


class InvalidSchedule(Exception):
    """A schedule that parses but never fires twice (``59 23 31 2 *``)."""


class ReplaceFailed(Exception):
    """An active Job could not be deleted to make way under ``concurrencyPolicy: Replace``."""


def job_name(cronjob: CronJob, scheduled: datetime.datetime) -> str:
    """``<cronjob>-<minutes since the epoch>`` of the scheduled time."""
    return f"{cronjob.metadata.name}-{int(scheduled.timestamp()) // 60}"


def _rfc3339(when: datetime.datetime) -> str:
    text = when.strftime("%Y-%m-%dT%H:%M:%S%z")
    if text.endswith("+0000"):
        return text[:-5] + "Z"
    return f"{text[:-2]}:{text[-2:]}"


def _rfc1123z(when: datetime.datetime) -> str:
    return when.astimezone(_UTC).strftime("%a, %d %b %Y %H:%M:%S %z")


def most_recent_schedule_time(
    cronjob: CronJob, now: datetime.datetime, schedule: CronSchedule, *, with_deadline: bool
) -> tuple[datetime.datetime, datetime.datetime | None, int]:
    """(earliest time considered, latest scheduled time not after ``now`` or None, how many
    starts were missed, roughly).

    The earliest time is the last schedule time, else the creation time, moved up to
    ``now - startingDeadlineSeconds`` when ``with_deadline``.  As upstream, the number of
    missed starts is estimated from the interval between the first two, and the estimate is
    then walked forward to an actual time no later than ``now``.
    """
    assert cronjob.spec is not None
    status = cronjob.status or CronJobStatus()
    earliest = status.last_schedule_time or cronjob.metadata.creation_timestamp or now
    deadline = cronjob.spec.starting_deadline_seconds
    if with_deadline and deadline is not None:
        earliest = max(earliest, now - datetime.timedelta(seconds=deadline))
    first = _next_utc(schedule, earliest)
    if now < first:
        return earliest, None, 0
    second = _next_utc(schedule, first)
    if now < second:
        return earliest, first, 1
    interval = round((second - first).total_seconds())
    missed = int((now - first).total_seconds()) // interval + 1
    recent = first + datetime.timedelta(seconds=(missed - 1) * interval)
    following = schedule.next_after(recent)
    while following is not None and following <= now:
        recent = following.astimezone(_UTC)
        following = schedule.next_after(following)
    return earliest, recent, missed


def _next_utc(schedule: CronSchedule, after: datetime.datetime) -> datetime.datetime:
    """The next firing time in UTC (so that arithmetic on it is absolute, not wall-clock)."""
    following = schedule.next_after(after)
    if following is None:
        # robfig/cron answers the zero time, and upstream's interval check rejects it.
        raise InvalidSchedule("time difference between two schedules is less than 1 second")
    return following.astimezone(_UTC)


def next_schedule_delay(
    cronjob: CronJob, now: datetime.datetime, schedule: CronSchedule
) -> float | None:
    """Seconds until just after the next scheduled time, or None if it never fires again."""
    try:
        earliest, recent, _ = most_recent_schedule_time(cronjob, now, schedule, with_deadline=False)
    except InvalidSchedule:
        recent = now
    else:
        recent = recent or earliest
    following = schedule.next_after(recent)
    if following is None:
        return None
    return (following - now).total_seconds() + _NEXT_SCHEDULE_DELTA


def schedule_text(cronjob: CronJob) -> str:
    """The schedule as parsed: prefixed with ``TZ=<timeZone>`` unless it names a zone itself."""
    assert cronjob.spec is not None
    schedule = cronjob.spec.schedule or ""
    if "TZ" not in schedule and cronjob.spec.time_zone:
        return f"TZ={cronjob.spec.time_zone} {schedule}"
    return schedule


def _in_active(cronjob: CronJob, uid: str | None) -> bool:
    return any(ref.uid == uid for ref in (cronjob.status.active if cronjob.status else None) or ())


def _remove_active(cronjob: CronJob, uid: str | None) -> None:
    status = cronjob.status
    if status is not None:
        status.active = [ref for ref in status.active or () if ref.uid != uid] or None


def _job_ref(job: Job) -> ObjectReference:
    return ObjectReference(
        kind=job.kind_info.kind,
        namespace=job.metadata.namespace,
        name=job.metadata.name,
        uid=job.metadata.uid,
        api_version=job.kind_info.api_version,
        resource_version=job.metadata.resource_version,
    )


def _start_time_order(job: Job) -> tuple[bool, datetime.datetime, str]:
    """Oldest start first; Jobs that never started last; names break ties."""
    start = job.status.start_time if job.status else None
    never = datetime.datetime.max.replace(tzinfo=_UTC)
    return start is None, start or never, job.metadata.name or ""


def job_from_template(cronjob: CronJob, scheduled: datetime.datetime) -> Job:
    """The Job a CronJob runs at ``scheduled``: its template, named and annotated for the time."""
    assert cronjob.spec is not None
    template = cronjob.spec.job_template
    template_meta = (template.metadata if template else None) or ObjectMeta()
    zone = ZoneInfo(cronjob.spec.time_zone) if cronjob.spec.time_zone else _UTC
    annotations = dict(template_meta.annotations or {})
    annotations[SCHEDULED_TIMESTAMP_ANNOTATION] = _rfc3339(scheduled.astimezone(zone))
    return Job(
        metadata=ObjectMeta(
            name=job_name(cronjob, scheduled),
            namespace=cronjob.metadata.namespace,
            labels=dict(template_meta.labels or {}) or None,
            annotations=annotations,
            owner_references=[controller_ref(cronjob)],
        ),
        spec=copy.deepcopy(template.spec) if template else None,
    )


@dataclass
class _Sync:
    """One sync's copy of the CronJob, whether its status must be written, and when to return."""

    cronjob: CronJob
    status_changed: bool = False
    requeue_after: float | None = None

    @property
    def status(self) -> CronJobStatus:
        if self.cronjob.status is None:
            self.cronjob.status = CronJobStatus()
        return self.cronjob.status


class CronJobController(Controller):
    NAME = NAME
    EVENT_SOURCE = "cronjob-controller"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.cronjobs = ctx.informers.informer_for(CronJob)
        self.jobs = ctx.informers.informer_for(Job)
        self.cronjobs.add_event_handler(self.enqueue, self._cronjob_updated)
        self.jobs.add_event_handler(self._job_changed, self._job_updated, self._job_changed)

    # Handlers.

    def _cronjob_updated(self, old: CronJob, new: CronJob) -> None:
        """A new schedule or zone wakes the CronJob at its next time; other changes now."""
        if old.metadata.resource_version == new.metadata.resource_version:
            return
        old_spec, new_spec = old.spec, new.spec
        if (
            old_spec
            and new_spec
            and (old_spec.schedule, old_spec.time_zone)
            != (
                new_spec.schedule,
                new_spec.time_zone,
            )
        ):
            try:
                schedule = parse_cron(schedule_text(new))
            except CronError:
                self.enqueue(new)  # the sync reports it
                return
            delay = next_schedule_delay(new, self.ctx.clock.now(), schedule)
            if delay is not None:
                self.enqueue_after(new, delay)
            return
        self.enqueue(new)

    def _owner_key(self, job: Job, ref: OwnerReference | None) -> str | None:
        """The key of the CronJob ``ref`` points at, if it is in the cache with that uid."""
        if ref is None or ref.kind != "CronJob":
            return None
        key = f"{job.metadata.namespace}/{ref.name}"
        cronjob = self.cronjobs.lister.get(key)
        return key if cronjob is not None and cronjob.metadata.uid == ref.uid else None

    def _job_changed(self, obj: Any) -> None:
        job = unwrap(obj)
        if (key := self._owner_key(job, controller_of(job))) is not None:
            self.queue.add(key)

    def _job_updated(self, old: Job, new: Job) -> None:
        if old.metadata.resource_version == new.metadata.resource_version:
            return
        old_ref, new_ref = controller_of(old), controller_of(new)
        if old_ref != new_ref and (key := self._owner_key(old, old_ref)) is not None:
            self.queue.add(key)
        self._job_changed(new)

    # Syncing.

    async def sync_key(self, key: str) -> None:
        cronjob = self.cronjobs.lister.get(key)
        if cronjob is None or cronjob.spec is None:
            return
        jobs = [
            job
            for job in self.jobs.lister.by_index(OWNER_UID_INDEX, cronjob.metadata.uid or "")
            if is_controlled_by(job, cronjob)
        ]
        state = _Sync(copy.deepcopy(cronjob))
        await self._cleanup_finished_jobs(state, jobs)
        try:
            await self._sync(state, jobs)
        finally:
            if state.status_changed:
                await self.ctx.client.update_status(state.cronjob)
        if state.requeue_after is not None:
            self.enqueue_after(cronjob, state.requeue_after)

    async def _cleanup_finished_jobs(self, state: _Sync, jobs: list[Job]) -> None:
        spec = state.cronjob.spec
        assert spec is not None
        finished = [(job, finished_condition(job)) for job in jobs]
        for condition_type, limit in (
            ("Complete", spec.successful_jobs_history_limit),
            ("Failed", spec.failed_jobs_history_limit),
        ):
            if limit is None:
                continue
            kept = [job for job, c in finished if c is not None and c.type == condition_type]
            kept.sort(key=_start_time_order)
            for job in kept[: max(len(kept) - limit, 0)]:
                await self._delete_job(state, job)

    async def _delete_job(self, state: _Sync, job: Job) -> bool:
        """Delete a Job (its pods in the background) and forget it as active."""
        cronjob, name = state.cronjob, job.metadata.name or ""
        try:
            await self.ctx.client.delete(
                Job, name, job.metadata.namespace, propagation_policy="Background"
            )
        except ApiError as error:
            self.ctx.recorder.event(
                cronjob, _WARNING, "FailedDelete", f"Deleted job: {error.message}"
            )
            return False
        _remove_active(cronjob, job.metadata.uid)
        state.status_changed = True
        self.ctx.recorder.event(cronjob, _NORMAL, "SuccessfulDelete", f"Deleted job {name}")
        return True

    async def _track_jobs(self, state: _Sync, jobs: list[Job]) -> None:
        """Bring ``status.active`` and ``lastSuccessfulTime`` up to date with the Jobs."""
        recorder = self.ctx.recorder
        for job in jobs:
            uid, name = job.metadata.uid, job.metadata.name
            found = _in_active(state.cronjob, uid)
            if not found and not is_finished(job):
                fresh = await self.ctx.client.get(
                    CronJob, state.cronjob.metadata.name or "", state.cronjob.metadata.namespace
                )
                if _in_active(fresh, uid):
                    state.cronjob = fresh
                    continue
                recorder.event(
                    state.cronjob,
                    _WARNING,
                    "UnexpectedJob",
                    f"Saw a job that the controller did not create or forgot: {name}",
                )
            elif found and (condition := finished_condition(job)) is not None:
                _remove_active(state.cronjob, uid)
                state.status_changed = True
                recorder.event(
                    state.cronjob,
                    _NORMAL,
                    "SawCompletedJob",
                    f"Saw completed job: {name}, status: {condition.type}",
                )
            elif is_succeeded(job):
                completed = job.status.completion_time if job.status else None
                last = state.status.last_successful_time
                if last is None or (completed is not None and completed > last):
                    state.status.last_successful_time = completed
                    state.status_changed = True
        children = {job.metadata.uid for job in jobs}
        for ref in list(state.status.active or ()):
            if ref.uid in children:
                continue
            try:
                await self.ctx.client.get(Job, ref.name or "", ref.namespace)
            except ApiError as error:
                if not error.not_found:
                    raise
                recorder.event(
                    state.cronjob, _NORMAL, "MissingJob", f"Active job went missing: {ref.name}"
                )
                _remove_active(state.cronjob, ref.uid)
                state.status_changed = True

    async def _sync(self, state: _Sync, jobs: list[Job]) -> None:
        await self._track_jobs(state, jobs)
        cronjob = state.cronjob
        spec = cronjob.spec
        assert spec is not None
        if cronjob.metadata.deletion_timestamp is not None:
            return
        recorder = self.ctx.recorder
        if spec.time_zone is not None:
            try:
                ZoneInfo(spec.time_zone)
            except (KeyError, ValueError, OSError):
                recorder.event(
                    cronjob,
                    _WARNING,
                    "UnknownTimeZone",
                    f'invalid timeZone: "{spec.time_zone}": unknown time zone {spec.time_zone}',
                )
                return
        if spec.suspend:
            return
        written = spec.schedule or ""
        if "TZ" in written:
            recorder.event(
                cronjob,
                _WARNING,
                "UnsupportedSchedule",
                f'CRON_TZ or TZ used in schedule "{written}" is not officially supported, '
                "see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ "
                "for more details",
            )
        try:
            schedule = parse_cron(schedule_text(cronjob))
        except CronError as error:
            recorder.event(
                cronjob,
                _WARNING,
                "UnparseableSchedule",
                f'unparseable schedule: "{written}" : {error}',
            )
            return
        now = self.ctx.clock.now()
        try:
            _, scheduled, missed = most_recent_schedule_time(
                cronjob, now, schedule, with_deadline=True
            )
        except InvalidSchedule as error:
            recorder.event(
                cronjob, _WARNING, "InvalidSchedule", f"invalid schedule: {written} : {error}"
            )
            return
        state.requeue_after = next_schedule_delay(cronjob, now, schedule)
        if scheduled is None:
            return
        if missed > _MANY_MISSED:
            recorder.event(
                cronjob,
                _WARNING,
                "TooManyMissedTimes",
                "too many missed start times. "
                "Set or decrease .spec.startingDeadlineSeconds or check clock skew",
            )
        deadline = spec.starting_deadline_seconds
        if deadline is not None and scheduled + datetime.timedelta(seconds=deadline) < now:
            recorder.event(
                cronjob,
                _WARNING,
                "MissSchedule",
                f"Missed scheduled time to start a job: {_rfc1123z(scheduled)}",
            )
            return
        name = job_name(cronjob, scheduled)
        active = state.status.active or []
        if any(ref.name == name for ref in active) or state.status.last_schedule_time == scheduled:
            return
        if spec.concurrency_policy == "Forbid" and active:
            recorder.event(
                cronjob,
                _NORMAL,
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is "
                "Forbid",
            )
            return
        if spec.concurrency_policy == "Replace":
            for ref in list(active):
                try:
                    job = await self.ctx.client.get(Job, ref.name or "", ref.namespace)
                except ApiError as error:
                    recorder.event(cronjob, _WARNING, "FailedGet", f"Get job: {error.message}")
                    raise
                if not await self._delete_job(state, job):
                    raise ReplaceFailed(f"could not replace job {ref.namespace}/{ref.name}")
        if not await self._create_job(state, scheduled):
            state.requeue_after = None

    async def _create_job(self, state: _Sync, scheduled: datetime.datetime) -> bool:
        """Create the Job for ``scheduled`` and record it as active; False if another
        controller's Job of that name exists or the Job is already recorded."""
        cronjob = state.cronjob
        wanted = job_from_template(cronjob, scheduled)
        try:
            job = await self.ctx.client.create(wanted)
        except ApiError as error:
            if not error.already_exists:
                self.ctx.recorder.event(
                    cronjob, _WARNING, "FailedCreate", f"Error creating job: {error.message}"
                )
                raise
            job = await self.ctx.client.get(
                Job, wanted.metadata.name or "", cronjob.metadata.namespace
            )
            if not is_controlled_by(job, cronjob) or _in_active(cronjob, job.metadata.uid):
                return False
        else:
            self.ctx.recorder.event(
                cronjob, _NORMAL, "SuccessfulCreate", f"Created job {job.metadata.name}"
            )
        state.status.active = [*(state.status.active or ()), _job_ref(job)]
        state.status.last_schedule_time = scheduled
        state.status_changed = True
        return True


def new(ctx: ControllerContext) -> CronJobController:
    return CronJobController(ctx)
