"""The job controller, with fake informers, a fake API and a FakeClock at 2026-01-01."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import job as jobctl
from controlplane.controllers.job import (
    COMPLETION_INDEX,
    CONTROLLER_UID_LABEL,
    JOB_TRACKING_FINALIZER,
    BackoffRecord,
)
from kube.api.kinds.batch_v1 import Job, JobCondition, JobSpec, JobStatus
from kube.api.kinds.core_v1.pod import (
    Container,
    ContainerState,
    ContainerStateTerminated,
    ContainerStatus,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
    PodTemplateSpec,
)
from kube.api.meta_v1 import ObjectMeta
from kube.api.owners import controller_ref
from tests.controlplane.controllers.fakes import Harness, harness, stamp

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
KEY = "team/pi"
DELETE_FINALIZERS = "$deleteFromPrimitiveList/finalizers"


def ago(seconds: float) -> datetime.datetime:
    return NOW - datetime.timedelta(seconds=seconds)


def job(
    *,
    completions: int | None = 1,
    parallelism: int = 1,
    backoff_limit: int = 6,
    indexed: bool = False,
    suspend: bool = False,
    deadline: int | None = None,
    status: JobStatus | None = None,
) -> Job:
    template = PodTemplateSpec(
        metadata=ObjectMeta(labels={"app": "pi"}),
        spec=PodSpec(containers=[Container(name="pi", image="perl")], restart_policy="Never"),
    )
    obj = Job(
        metadata=ObjectMeta(name="pi", namespace="team", uid="job-uid"),
        spec=JobSpec(
            completions=completions,
            parallelism=parallelism,
            backoff_limit=backoff_limit,
            completion_mode="Indexed" if indexed else "NonIndexed",
            suspend=suspend,
            active_deadline_seconds=deadline,
            template=template,
        ),
        status=status,
    )
    return stamp(obj)


def pod(
    owner: Job,
    name: str,
    phase: str = "Running",
    *,
    index: int | None = None,
    ready: bool = False,
    finished: float | None = None,
    finalizer: bool = True,
) -> Pod:
    statuses = None
    if finished is not None:
        terminated = ContainerStateTerminated(exit_code=1, finished_at=ago(finished))
        statuses = [ContainerStatus(name="pi", state=ContainerState(terminated=terminated))]
    annotations = {COMPLETION_INDEX: str(index)} if index is not None else None
    obj = Pod(
        metadata=ObjectMeta(
            name=name,
            namespace="team",
            uid=f"uid-{name}",
            labels={CONTROLLER_UID_LABEL: "job-uid"},
            annotations=annotations,
            finalizers=[JOB_TRACKING_FINALIZER] if finalizer else None,
            owner_references=[controller_ref(owner)],
        ),
        spec=PodSpec(containers=[Container(name="pi")]),
        status=PodStatus(
            phase=phase,
            conditions=[PodCondition(type="Ready", status="True")] if ready else None,
            container_statuses=statuses,
        ),
    )
    return stamp(obj)


def run(
    obj: Job, *pods: Pod, monkeypatch: pytest.MonkeyPatch
) -> tuple[Harness, jobctl.JobController, list[float]]:
    h = harness()
    h.store(obj, *pods)
    controller = jobctl.new(h.ctx)
    requeues: list[float] = []
    monkeypatch.setattr(controller, "enqueue_after", lambda o, s: requeues.append(round(s, 1)))
    return h, controller, requeues


def statuses(h: Harness) -> list[JobStatus]:
    return [a.obj.status for a in h.client.writes("update", "Job")]


def conditions(status: JobStatus) -> list[tuple[str | None, str | None, str | None]]:
    return [(c.type, c.status, c.reason) for c in status.conditions or ()]


def verbs(h: Harness) -> list[tuple[str, str]]:
    return [(a.verb, a.kind) for a in h.client.actions]


# Creating pods.


@pytest.mark.parametrize(
    ("completions", "parallelism", "existing", "created"),
    [
        pytest.param(1, 1, 0, 1, id="one"),
        pytest.param(3, 2, 0, 2, id="parallelism-bounds"),
        pytest.param(2, 5, 0, 2, id="completions-bound"),
        pytest.param(None, 3, 0, 3, id="work-queue"),
        pytest.param(4, 3, 1, 2, id="tops-up"),
    ],
)
async def test_creates_pods_up_to_the_wanted_number(
    completions: int | None,
    parallelism: int,
    existing: int,
    created: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = job(completions=completions, parallelism=parallelism)
    running = [pod(owner, f"p{i}") for i in range(existing)]
    h, controller, _ = run(owner, *running, monkeypatch=monkeypatch)
    await controller.sync(KEY)
    pods = [a.obj for a in h.client.writes("create", "Pod")]
    assert len(pods) == created
    assert h.recorder.reasons() == ["SuccessfulCreate"] * created
    first = pods[0]
    assert first.metadata.generate_name == "pi-"
    assert first.metadata.finalizers == [JOB_TRACKING_FINALIZER]
    assert first.metadata.labels == {
        "batch.kubernetes.io/controller-uid": "job-uid",
        "batch.kubernetes.io/job-name": "pi",
        "controller-uid": "job-uid",
        "job-name": "pi",
        "app": "pi",
    }
    assert [r.uid for r in first.metadata.owner_references] == ["job-uid"]
    (status,) = statuses(h)
    assert status.active == existing + created
    assert status.start_time == NOW


async def test_indexed_pods_get_the_lowest_pending_indexes(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = job(completions=4, parallelism=2, indexed=True)
    owner.status = JobStatus(completed_indexes="0", succeeded=1)
    h, controller, _ = run(owner, pod(owner, "one", index=1), monkeypatch=monkeypatch)
    await controller.sync(KEY)
    (created,) = [a.obj for a in h.client.writes("create", "Pod")]
    assert created.metadata.annotations == {COMPLETION_INDEX: "2"}
    assert (created.metadata.labels or {})[COMPLETION_INDEX] == "2"
    assert created.spec.hostname == "pi-2"
    assert created.metadata.generate_name == "pi-2-"


async def test_indexed_duplicates_are_deleted(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = job(completions=2, parallelism=2, indexed=True)
    pods = [pod(owner, "a", index=0), pod(owner, "b", index=0), pod(owner, "c", index=1)]
    h, controller, _ = run(owner, *pods, monkeypatch=monkeypatch)
    await controller.sync(KEY)
    assert len(h.client.writes("delete", "Pod")) == 1
    assert h.client.writes("create", "Pod") == []


async def test_expectations_hold_back_a_second_round(monkeypatch: pytest.MonkeyPatch) -> None:
    h, controller, _ = run(job(completions=2, parallelism=2), monkeypatch=monkeypatch)
    await controller.sync(KEY)
    h.cache(h.client.objects[(Job, "team", "pi")])  # the status, not yet the new pods
    await controller.sync(KEY)
    assert len(h.client.writes("create", "Pod")) == 2


async def test_excess_pods_are_released_and_deleted(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = job(completions=5, parallelism=1)
    pods = [pod(owner, "a", ready=True), pod(owner, "b"), pod(owner, "c", "Pending")]
    h, controller, _ = run(owner, *pods, monkeypatch=monkeypatch)
    await controller.sync(KEY)
    assert sorted(a.name for a in h.client.writes("delete", "Pod")) == ["b", "c"]
    assert [a.obj for a in h.client.writes("patch", "Pod")] == [
        {"metadata": {DELETE_FINALIZERS: [JOB_TRACKING_FINALIZER]}}
    ] * 2
    (status,) = statuses(h)
    assert (status.active, status.terminating, status.ready) == (1, 2, 1)


# Counting finished pods.


async def test_finished_pods_are_counted_through_uncounted_uids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = job(completions=3, parallelism=1)
    pods = [pod(owner, "ok", "Succeeded"), pod(owner, "bad", "Failed", finished=60)]
    h, controller, _ = run(owner, *pods, monkeypatch=monkeypatch)
    await controller.sync(KEY)
    assert verbs(h) == [
        ("create", "Pod"),  # the replacement: the failure's backoff is over
        ("update", "Job"),
        ("patch", "Pod"),
        ("patch", "Pod"),
        ("update", "Job"),
    ]
    first, second = statuses(h)
    assert first.uncounted_terminated_pods is not None
    assert first.uncounted_terminated_pods.succeeded == ["uid-ok"]
    assert first.uncounted_terminated_pods.failed == ["uid-bad"]
    assert (second.succeeded, second.failed) == (1, 1)
    assert second.uncounted_terminated_pods is not None
    assert second.uncounted_terminated_pods.succeeded is None


async def test_pods_already_counted_are_not_counted_again(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = job(completions=3, parallelism=1)
    owner.status = JobStatus(succeeded=1, active=1, ready=0, terminating=0, start_time=NOW)
    done = pod(owner, "ok", "Succeeded", finalizer=False)
    h, controller, _ = run(owner, done, pod(owner, "run"), monkeypatch=monkeypatch)
    await controller.sync(KEY)
    assert h.client.actions == []


async def test_a_removal_in_flight_is_not_counted_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = job(completions=3, parallelism=1)
    owner.status = JobStatus(succeeded=1, active=1, ready=0, terminating=0, start_time=NOW)
    stale = pod(owner, "ok", "Succeeded")  # the cache still shows the finalizer
    h, controller, _ = run(owner, stale, pod(owner, "run"), monkeypatch=monkeypatch)
    controller.removing_finalizers[KEY] = {"uid-ok"}
    await controller.sync(KEY)
    assert h.client.actions == []


async def test_completion(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = job(completions=1)
    h, controller, _ = run(owner, pod(owner, "ok", "Succeeded"), monkeypatch=monkeypatch)
    await controller.sync(KEY)
    interim, final = statuses(h)
    assert conditions(interim) == [("SuccessCriteriaMet", "True", "CompletionsReached")]
    assert conditions(final) == [
        ("SuccessCriteriaMet", "True", "CompletionsReached"),
        ("Complete", "True", "CompletionsReached"),
    ]
    assert final.completion_time == NOW
    assert final.succeeded == 1
    assert h.recorder.events == [("Normal", "Completed", "Job completed", "pi")]


async def test_indexed_completion_records_completed_indexes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = job(completions=2, parallelism=2, indexed=True)
    pods = [pod(owner, "a", "Succeeded", index=0), pod(owner, "b", "Succeeded", index=1)]
    h, controller, _ = run(owner, *pods, monkeypatch=monkeypatch)
    await controller.sync(KEY)
    final = statuses(h)[-1]
    assert (final.completed_indexes, final.succeeded) == ("0-1", 2)
    assert ("Complete", "True", "CompletionsReached") in conditions(final)


# Failing.


@pytest.mark.parametrize(
    ("owner", "pods", "reason", "message"),
    [
        pytest.param(
            job(backoff_limit=0),
            ["Failed"],
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
            id="backoff-limit",
        ),
        pytest.param(
            job(deadline=10, status=JobStatus(start_time=ago(30))),
            [],
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
            id="deadline",
        ),
    ],
)
async def test_failure(
    owner: Job, pods: list[str], reason: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = [pod(owner, f"p{i}", phase, finished=5) for i, phase in enumerate(pods)]
    h, controller, _ = run(owner, *failed, monkeypatch=monkeypatch)
    await controller.sync(KEY)
    final = statuses(h)[-1]
    assert conditions(final) == [("FailureTarget", "True", reason), ("Failed", "True", reason)]
    assert final.completion_time is None
    assert h.recorder.events == [("Warning", reason, message, "pi")]
    assert h.client.writes("create", "Pod") == []


async def test_failed_job_waits_for_its_pods_to_terminate(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = job(deadline=10, status=JobStatus(start_time=ago(30)))
    h, controller, _ = run(owner, pod(owner, "run", ready=True), monkeypatch=monkeypatch)
    await controller.sync(KEY)
    assert [a.name for a in h.client.writes("delete", "Pod")] == ["run"]
    final = statuses(h)[-1]
    assert conditions(final) == [("FailureTarget", "True", "DeadlineExceeded")]
    assert (final.active, final.terminating) == (0, 1)


async def test_deadline_not_reached_requeues(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = job(deadline=100, status=JobStatus(start_time=ago(30)))
    _, controller, requeues = run(owner, pod(owner, "run"), monkeypatch=monkeypatch)
    await controller.sync(KEY)
    assert requeues == [70.0]


@pytest.mark.parametrize(
    ("record", "new_failure", "created", "requeue"),
    [
        pytest.param(None, 2.0, 0, [8.0], id="first-failure-waits-10s"),
        pytest.param(BackoffRecord(2, ago(5)), None, 0, [15.0], id="doubles"),
        pytest.param(BackoffRecord(12, NOW), None, 0, [360.0], id="capped-at-6-minutes"),
        pytest.param(None, 30.0, 1, [], id="backoff-over"),
    ],
)
async def test_pod_failure_backoff(
    record: BackoffRecord | None,
    new_failure: float | None,
    created: int,
    requeue: list[float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = job(completions=1)
    failed = [pod(owner, "bad", "Failed", finished=new_failure)] if new_failure else []
    h, controller, requeues = run(owner, *failed, monkeypatch=monkeypatch)
    if record is not None:
        controller.backoff[KEY] = record
    await controller.sync(KEY)
    assert len(h.client.writes("create", "Pod")) == created
    assert requeues == requeue


# Suspending.


async def test_suspend_deletes_active_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = job(completions=2, parallelism=2, suspend=True)
    h, controller, _ = run(owner, pod(owner, "a"), pod(owner, "b"), monkeypatch=monkeypatch)
    await controller.sync(KEY)
    assert sorted(a.name for a in h.client.writes("delete", "Pod")) == ["a", "b"]
    (status,) = statuses(h)
    assert conditions(status) == [("Suspended", "True", "JobSuspended")]
    assert status.start_time is None
    assert h.recorder.reasons().count("Suspended") == 1


async def test_resume_resets_start_time(monkeypatch: pytest.MonkeyPatch) -> None:
    suspended = JobCondition(type="Suspended", status="True", reason="JobSuspended")
    owner = job(status=JobStatus(conditions=[suspended], start_time=ago(600)))
    h, controller, _ = run(owner, monkeypatch=monkeypatch)
    await controller.sync(KEY)
    (status,) = statuses(h)
    assert conditions(status) == [("Suspended", "False", "JobResumed")]
    assert status.start_time == NOW
    assert h.recorder.reasons() == ["SuccessfulCreate", "Resumed"]


# Finalizers of pods the controller no longer tracks.


async def test_deleted_job_releases_its_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = job()
    h, controller, _ = run(owner, pod(owner, "left"), monkeypatch=monkeypatch)
    h.uncache(owner)
    await controller.sync(KEY)
    assert [(a.verb, a.name) for a in h.client.actions] == [("patch", "left")]


async def test_finished_job_releases_leftover_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    done = JobCondition(type="Complete", status="True", last_transition_time=NOW)
    owner = job(status=JobStatus(conditions=[done]))
    h, controller, _ = run(owner, pod(owner, "left", "Succeeded"), monkeypatch=monkeypatch)
    await controller.sync(KEY)
    assert [(a.verb, a.name) for a in h.client.actions] == [("patch", "left")]


async def test_orphans_matching_the_selector_are_adopted(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = job(completions=1)
    orphan = pod(owner, "orphan", finalizer=False)
    orphan.metadata.owner_references = None
    h, controller, _ = run(owner, orphan, monkeypatch=monkeypatch)
    await controller.sync(KEY)
    patches = [a.obj for a in h.client.writes("patch", "Pod")]
    assert patches[0]["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    assert patches[1] == {"metadata": {"finalizers": [JOB_TRACKING_FINALIZER]}}
    assert h.client.writes("create", "Pod") == []


def test_index_ranges_round_trip() -> None:
    assert jobctl.format_indexes({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert jobctl.parse_indexes("0-2,5,7-8", 8) == {0, 1, 2, 5, 7}
