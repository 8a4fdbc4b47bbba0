"""The ttl-after-finished controller: deletes a finished Job ``ttlSecondsAfterFinished`` after
it finished.

Keys are Jobs; a Job is enqueued whenever it is seen finished with a TTL and not already being
deleted.  A Job whose TTL has not run out is requeued for the moment it does (``enqueue_after``),
so nothing polls.  Before deleting, the Job is read again from the API (the cache may be stale:
the TTL may have been changed or removed) and deleted with a resourceVersion precondition, so a
Job modified since that read is not deleted on stale grounds.  Deletion is Foreground, as
upstream, so the Job disappears only after its pods are gone.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller
from controlplane.controllers.jobutil import finished_condition, is_finished
from kube.api.keys import split_key
from kube.api.kinds.batch_v1 import Job
from kube.api.meta_v1 import Preconditions
from kube.client.errors import ApiError

NAME = "ttl-after-finished"

log = logging.getLogger("kubelab.controllers.ttlafterfinished")


class UnknownFinishTime(Exception):
    """A finished Job whose Complete/Failed condition has no transition time."""


def _ttl(job: Job) -> int | None:
    return job.spec.ttl_seconds_after_finished if job.spec else None


def needs_cleanup(job: Job) -> bool:
    """Whether the Job has a TTL and has finished."""
    return _ttl(job) is not None and is_finished(job)


def expires_at(job: Job) -> datetime.datetime:
    """When the TTL of a Job that ``needs_cleanup`` runs out."""
    condition = finished_condition(job)
    finished = condition.last_transition_time if condition else None
    ttl = _ttl(job)
    if finished is None or ttl is None:
        namespace, name = job.metadata.namespace, job.metadata.name
        raise UnknownFinishTime(f"unable to find the time when the Job {namespace}/{name} finished")
    return finished + datetime.timedelta(seconds=ttl)


class TTLAfterFinishedController(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.jobs = ctx.informers.informer_for(Job)
        self.jobs.add_event_handler(self._job_seen, self._job_updated)

    def _job_seen(self, job: Job) -> None:
        if job.metadata.deletion_timestamp is None and needs_cleanup(job):
            self.enqueue(job)

    def _job_updated(self, old: Any, new: Job) -> None:
        self._job_seen(new)

    def _time_left(self, job: Job) -> float:
        now = self.ctx.clock.now()
        condition = finished_condition(job)
        if condition and condition.last_transition_time and condition.last_transition_time > now:
            log.warning(
                "Job %s finished in the future; likely clock skew, cleanup deferred",
                job.metadata.name,
            )
        return (expires_at(job) - now).total_seconds()

    async def sync_key(self, key: str) -> None:
        job = self.jobs.lister.get(key)
        if job is None or job.metadata.deletion_timestamp is not None or not needs_cleanup(job):
            return
        if (left := self._time_left(job)) > 0:
            self.enqueue_after(job, left)
            return
        namespace, name = split_key(key)
        try:
            fresh = await self.ctx.client.get(Job, name, namespace)
        except ApiError as error:
            if error.not_found:
                return
            raise
        if fresh.metadata.deletion_timestamp is not None or not needs_cleanup(fresh):
            return
        if (left := self._time_left(fresh)) > 0:
            self.enqueue_after(fresh, left)
            return
        try:
            await self.ctx.client.delete(
                Job,
                name,
                namespace,
                propagation_policy="Foreground",
                preconditions=Preconditions(resource_version=fresh.metadata.resource_version),
            )
        except ApiError as error:
            if not error.not_found:
                raise


def new(ctx: ControllerContext) -> TTLAfterFinishedController:
    return TTLAfterFinishedController(ctx)
