"""What the job, cronjob and ttl-after-finished controllers share about a Job's state.

A Job is finished when its ``Complete`` or ``Failed`` condition is True (upstream
``pkg/controller/job/util``); the condition's transition time is when it finished, which is
what a CronJob reads as its last successful time and what a Job's TTL counts from.
"""

from __future__ import annotations

from kube.api.kinds.batch_v1 import Job, JobCondition

COMPLETE, FAILED = "Complete", "Failed"
FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED = "FailureTarget", "SuccessCriteriaMet", "Suspended"


def find_condition(job: Job, condition_type: str) -> JobCondition | None:
    """The Job's condition of that type, whatever its status."""
    for condition in (job.status.conditions if job.status else None) or ():
        if condition.type == condition_type:
            return condition
    return None


def finished_condition(job: Job) -> JobCondition | None:
    """The True ``Complete`` or ``Failed`` condition of a finished Job."""
    for condition in (job.status.conditions if job.status else None) or ():
        if condition.type in (COMPLETE, FAILED) and condition.status == "True":
            return condition
    return None


def is_finished(job: Job) -> bool:
    return finished_condition(job) is not None


def is_succeeded(job: Job) -> bool:
    condition = finished_condition(job)
    return condition is not None and condition.type == COMPLETE
