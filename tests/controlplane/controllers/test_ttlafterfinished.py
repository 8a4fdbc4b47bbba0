"""The ttl-after-finished controller, with fake informers, a fake API and a FakeClock."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import ttlafterfinished
from controlplane.controllers.controller import key_of
from kube.api.kinds.batch_v1 import Job, JobCondition, JobSpec, JobStatus
from kube.api.meta_v1 import ObjectMeta
from tests.controlplane.controllers.fakes import harness, stamp

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def job(
    *, ttl: int | None = 60, finished: str | None = "Complete", ago: float = 0.0, rv: str = "1"
) -> Job:
    conditions = None
    if finished is not None:
        at = NOW - datetime.timedelta(seconds=ago)
        conditions = [JobCondition(type=finished, status="True", last_transition_time=at)]
    return stamp(
        Job(
            metadata=ObjectMeta(name="pi", namespace="team"),
            spec=JobSpec(ttl_seconds_after_finished=ttl),
            status=JobStatus(conditions=conditions),
        ),
        rv=rv,
    )


def delays(
    controller: ttlafterfinished.TTLAfterFinishedController, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, float]]:
    seen: list[tuple[str, float]] = []
    monkeypatch.setattr(controller, "enqueue_after", lambda obj, s: seen.append((key_of(obj), s)))
    return seen


@pytest.mark.parametrize(
    ("obj", "deleted", "requeued"),
    [
        pytest.param(job(ago=60), True, [], id="expired-complete"),
        pytest.param(job(finished="Failed", ago=90), True, [], id="expired-failed"),
        pytest.param(job(ago=20), False, [("team/pi", 40.0)], id="requeued-until-expiry"),
        pytest.param(job(ttl=None, ago=600), False, [], id="no-ttl"),
        pytest.param(job(finished=None), False, [], id="not-finished"),
        pytest.param(job(ttl=0), True, [], id="zero-ttl"),
    ],
)
async def test_ttl(
    obj: Job, deleted: bool, requeued: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness()
    h.store(obj)
    controller = ttlafterfinished.new(h.ctx)
    seen = delays(controller, monkeypatch)
    await controller.sync("team/pi")
    deletes = h.client.writes("delete", "Job")
    assert bool(deletes) == deleted
    if deleted:
        assert deletes[0].obj["propagationPolicy"] == "Foreground"
    assert seen == requeued


async def test_the_fresh_copy_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache says expired, but the API's copy has a longer TTL: requeue, do not delete."""
    h = harness()
    h.cache(job(ago=60))
    h.client.seed(job(ttl=600, ago=60, rv="2"))
    controller = ttlafterfinished.new(h.ctx)
    seen = delays(controller, monkeypatch)
    await controller.sync("team/pi")
    assert h.client.writes("delete") == []
    assert seen == [("team/pi", 540.0)]


async def test_delete_carries_a_resource_version_precondition() -> None:
    h = harness()
    h.store(job(ago=60, rv="7"))
    await ttlafterfinished.new(h.ctx).sync("team/pi")
    deleted = [a.obj["preconditions"] for a in h.client.writes("delete")]
    assert [p.resource_version for p in deleted] == ["7"]


async def test_gone_from_the_api_is_nothing_to_do() -> None:
    h = harness()
    h.cache(job(ago=60))
    await ttlafterfinished.new(h.ctx).sync("team/pi")
    assert h.client.actions == []


async def test_only_finished_jobs_with_a_ttl_are_enqueued() -> None:
    h = harness()
    controller = ttlafterfinished.new(h.ctx)
    controller._job_seen(job(finished=None))
    controller._job_seen(job(ttl=None))
    controller._job_seen(job())
    assert len(controller.queue) == 1
