"""The cronjob controller, with fake informers, a fake API and a FakeClock at 2026-01-01."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import cronjob
from controlplane.controllers.controller import key_of
from kube.api.kinds.batch_v1 import (
    CronJob,
    CronJobSpec,
    CronJobStatus,
    Job,
    JobCondition,
    JobSpec,
    JobStatus,
    JobTemplateSpec,
)
from kube.api.meta_v1 import ObjectMeta
from kube.api.owners import controller_ref
from tests.controlplane.controllers.fakes import Harness, harness, stamp

UTC = datetime.UTC
MIDNIGHT = datetime.datetime(2026, 1, 1, tzinfo=UTC)
MIDNIGHT_JOB = f"cron-{int(MIDNIGHT.timestamp()) // 60}"
CREATED = MIDNIGHT - datetime.timedelta(minutes=7)


def at(minutes: float) -> datetime.datetime:
    return MIDNIGHT + datetime.timedelta(minutes=minutes)


def cron(
    schedule: str = "*/5 * * * *",
    *,
    created: datetime.datetime = CREATED,
    policy: str = "Allow",
    suspend: bool = False,
    deadline: int | None = None,
    time_zone: str | None = None,
    active: list[Job] | None = None,
    last_schedule: datetime.datetime | None = None,
) -> CronJob:
    template = JobTemplateSpec(metadata=ObjectMeta(labels={"app": "report"}), spec=JobSpec())
    obj = CronJob(
        metadata=ObjectMeta(name="cron", namespace="team"),
        spec=CronJobSpec(
            schedule=schedule,
            time_zone=time_zone,
            starting_deadline_seconds=deadline,
            concurrency_policy=policy,
            suspend=suspend,
            job_template=template,
            successful_jobs_history_limit=3,
            failed_jobs_history_limit=1,
        ),
        status=CronJobStatus(
            active=[cronjob._job_ref(j) for j in active or ()] or None,
            last_schedule_time=last_schedule,
        ),
    )
    return stamp(obj, created=created)


def child(owner: CronJob, name: str, *, finished: str | None = None, started: float = 0.0) -> Job:
    conditions = None
    completed = None
    if finished is not None:
        conditions = [JobCondition(type=finished, status="True", last_transition_time=at(started))]
        completed = at(started + 1) if finished == "Complete" else None
    job = Job(
        metadata=ObjectMeta(name=name, namespace="team", owner_references=[controller_ref(owner)]),
        spec=JobSpec(),
        status=JobStatus(conditions=conditions, start_time=at(started), completion_time=completed),
    )
    return stamp(job)


def setup(
    cj: CronJob, *jobs: Job, monkeypatch: pytest.MonkeyPatch, now: float = 0.5
) -> tuple[Harness, cronjob.CronJobController, list[float]]:
    h = harness()
    h.clock._elapsed = now * 60  # the FakeClock starts at MIDNIGHT
    h.store(cj, *jobs)
    controller = cronjob.new(h.ctx)
    requeues: list[float] = []
    monkeypatch.setattr(controller, "enqueue_after", lambda obj, s: requeues.append(round(s, 1)))
    return h, controller, requeues


def status_of(h: Harness) -> CronJobStatus:
    updates = h.client.writes("update", "CronJob")
    assert updates and updates[-1].subresource == "status"
    status = updates[-1].obj.status
    assert isinstance(status, CronJobStatus)
    return status


@pytest.mark.parametrize(
    ("cj", "now", "created", "reasons", "requeue"),
    [
        pytest.param(cron(), 0.5, [MIDNIGHT_JOB], ["SuccessfulCreate"], [270.1], id="due"),
        pytest.param(cron(created=at(0.1)), 0.5, [], [], [270.1], id="not-due-yet"),
        pytest.param(cron(last_schedule=MIDNIGHT), 0.5, [], [], [270.1], id="already-scheduled"),
        pytest.param(cron(suspend=True), 0.5, [], [], [], id="suspended"),
        pytest.param(cron(deadline=60), 3.0, [], [], [120.1], id="past-starting-deadline-skipped"),
        pytest.param(
            cron(deadline=300),
            3.0,
            [MIDNIGHT_JOB],
            ["SuccessfulCreate"],
            [120.1],
            id="within-starting-deadline",
        ),
        pytest.param(
            cron("* * * * *", created=at(-24 * 60)),
            0.5,
            [MIDNIGHT_JOB],
            ["TooManyMissedTimes", "SuccessfulCreate"],
            [30.1],
            id="too-many-missed",
        ),
        pytest.param(
            cron("0 1 * * *", created=at(-12 * 60), time_zone="Europe/Paris"),
            0.5,
            [MIDNIGHT_JOB],
            ["SuccessfulCreate"],
            [24 * 3600 - 30 + 0.1],
            id="time-zone",
        ),
        pytest.param(
            cron(time_zone="Mars/Olympus"), 0.5, [], ["UnknownTimeZone"], [], id="bad-zone"
        ),
        pytest.param(cron("61 * * * *"), 0.5, [], ["UnparseableSchedule"], [], id="bad-schedule"),
    ],
)
async def test_schedule(
    cj: CronJob,
    now: float,
    created: list[str],
    reasons: list[str],
    requeue: list[float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h, controller, requeues = setup(cj, monkeypatch=monkeypatch, now=now)
    await controller.sync("team/cron")
    assert [a.name for a in h.client.writes("create", "Job")] == created
    assert h.recorder.reasons() == reasons
    assert requeues == requeue
    if created:
        status = status_of(h)
        assert status.last_schedule_time == MIDNIGHT
        assert [ref.name for ref in status.active or ()] == created


async def test_created_job(monkeypatch: pytest.MonkeyPatch) -> None:
    cj = cron("0 1 * * *", created=at(-12 * 60), time_zone="Europe/Paris")
    h, controller, _ = setup(cj, monkeypatch=monkeypatch)
    await controller.sync("team/cron")
    (job,) = [a.obj for a in h.client.writes("create", "Job")]
    assert job.metadata.labels == {"app": "report"}
    assert job.metadata.annotations == {
        cronjob.SCHEDULED_TIMESTAMP_ANNOTATION: "2026-01-01T01:00:00+01:00"
    }
    assert [r.uid for r in job.metadata.owner_references] == [cj.metadata.uid]
    assert h.recorder.events[0][2] == f"Created job {MIDNIGHT_JOB}"


@pytest.mark.parametrize(
    ("policy", "created", "deleted", "reasons"),
    [
        pytest.param("Allow", [MIDNIGHT_JOB], [], ["SuccessfulCreate"], id="allow"),
        pytest.param("Forbid", [], [], ["JobAlreadyActive"], id="forbid"),
        pytest.param(
            "Replace",
            [MIDNIGHT_JOB],
            ["old"],
            ["SuccessfulDelete", "SuccessfulCreate"],
            id="replace",
        ),
    ],
)
async def test_concurrency_policy(
    policy: str,
    created: list[str],
    deleted: list[str],
    reasons: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = cron(policy=policy)
    old = child(owner, "old", started=-5)
    owner.status = CronJobStatus(active=[cronjob._job_ref(old)], last_schedule_time=at(-5))
    h, controller, _ = setup(owner, old, monkeypatch=monkeypatch)
    await controller.sync("team/cron")
    assert [a.name for a in h.client.writes("create", "Job")] == created
    assert [a.name for a in h.client.writes("delete", "Job")] == deleted
    assert h.recorder.reasons() == reasons
    if deleted:
        assert h.client.writes("delete")[0].obj["propagationPolicy"] == "Background"
        assert [ref.name for ref in status_of(h).active or ()] == [MIDNIGHT_JOB]


async def test_finished_job_leaves_active_then_sets_last_successful_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = cron(last_schedule=MIDNIGHT)
    done = child(owner, "done", finished="Complete")
    owner.status = CronJobStatus(active=[cronjob._job_ref(done)], last_schedule_time=MIDNIGHT)
    h, controller, _ = setup(owner, done, monkeypatch=monkeypatch)
    await controller.sync("team/cron")
    assert h.recorder.reasons() == ["SawCompletedJob"]
    assert h.recorder.events[0][2] == "Saw completed job: done, status: Complete"
    status = status_of(h)
    assert status.active is None
    # The next sync (the status update's watch event) records the completion.
    updated = h.client.objects[(CronJob, "team", "cron")]
    h.cache(updated)
    await controller.sync("team/cron")
    assert status_of(h).last_successful_time == at(1)


@pytest.mark.parametrize(
    ("in_api", "reasons", "active"),
    [
        pytest.param(False, ["MissingJob"], []),
        pytest.param(True, [], ["ghost"], id="only-the-cache-lags"),
    ],
    ids=["missing", "only-the-cache-lags"],
)
async def test_active_job_missing_from_cache(
    in_api: bool, reasons: list[str], active: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = cron(last_schedule=MIDNIGHT)
    ghost = child(owner, "ghost")
    owner.status = CronJobStatus(active=[cronjob._job_ref(ghost)], last_schedule_time=MIDNIGHT)
    h, controller, _ = setup(owner, monkeypatch=monkeypatch)
    if in_api:
        h.client.seed(ghost)
    await controller.sync("team/cron")
    assert h.recorder.reasons() == reasons
    if reasons:
        assert [ref.name for ref in status_of(h).active or ()] == active
    else:
        assert h.client.writes("update") == []


async def test_unexpected_job_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = cron(last_schedule=MIDNIGHT)
    stray = child(owner, "stray")
    h, controller, _ = setup(owner, stray, monkeypatch=monkeypatch)
    await controller.sync("team/cron")
    assert h.recorder.events == [
        (
            "Warning",
            "UnexpectedJob",
            "Saw a job that the controller did not create or forgot: stray",
            "cron",
        )
    ]


async def test_history_limits_delete_the_oldest_finished_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = cron(last_schedule=MIDNIGHT)
    succeeded = [child(owner, f"ok-{i}", finished="Complete", started=-i) for i in range(5)]
    failed = [child(owner, f"bad-{i}", finished="Failed", started=-i) for i in range(3)]
    h, controller, _ = setup(owner, *succeeded, *failed, monkeypatch=monkeypatch)
    await controller.sync("team/cron")
    assert sorted(a.name for a in h.client.writes("delete", "Job")) == [
        "bad-1",
        "bad-2",
        "ok-3",
        "ok-4",
    ]


async def test_a_job_created_before_a_lost_status_update_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = cron()
    h, controller, _ = setup(owner, monkeypatch=monkeypatch)
    h.client.seed(child(owner, MIDNIGHT_JOB))  # in the API, not yet in the cache
    await controller.sync("team/cron")
    assert h.recorder.reasons() == []
    assert [ref.name for ref in status_of(h).active or ()] == [MIDNIGHT_JOB]


async def test_schedule_change_requeues_for_the_new_next_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = cron(last_schedule=MIDNIGHT)
    new = cron("*/2 * * * *", last_schedule=MIDNIGHT)
    new.metadata.resource_version = "2"
    _, controller, requeues = setup(old, monkeypatch=monkeypatch)
    controller._cronjob_updated(old, new)
    assert requeues == [90.1]


async def test_job_events_enqueue_their_cronjob(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = cron()
    _, controller, _ = setup(owner, monkeypatch=monkeypatch)
    controller._job_changed(child(owner, "x"))
    controller._job_changed(child(cron(), "not-ours"))  # another uid
    assert await controller.queue.get() == key_of(owner)
    assert len(controller.queue) == 0
