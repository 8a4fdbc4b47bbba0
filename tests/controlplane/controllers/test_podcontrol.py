"""The pod helpers owning controllers share: expectations, slow start, ranking, claiming."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import podcontrol
from kube.api import codec
from kube.api.kinds.apps_v1 import ReplicaSet, ReplicaSetSpec
from kube.api.kinds.core_v1.pod import (
    Container,
    ContainerStatus,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
    PodTemplateSpec,
)
from kube.api.labels import Selector
from kube.api.meta_v1 import LabelSelector, ObjectMeta, Status
from kube.api.owners import controller_of, controller_ref
from kube.client.errors import ApiError
from kube.clock import FakeClock
from tests.controlplane.controllers.fakes import harness, stamp

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def owner(name: str = "web") -> ReplicaSet:
    return stamp(
        ReplicaSet(
            metadata=ObjectMeta(name=name, namespace="ns"),
            spec=ReplicaSetSpec(replicas=1, selector=LabelSelector(match_labels={"app": "web"})),
        )
    )


def pod(
    name: str,
    *,
    node: str = "n1",
    phase: str = "Running",
    ready_since: datetime.datetime | None = None,
    restarts: int = 0,
    created: datetime.datetime = T0,
    labels: dict[str, str] | None = None,
) -> Pod:
    conditions = (
        [PodCondition(type="Ready", status="True", last_transition_time=ready_since)]
        if ready_since
        else None
    )
    return stamp(
        Pod(
            metadata=ObjectMeta(
                name=name, namespace="ns", labels=labels if labels is not None else {"app": "web"}
            ),
            spec=PodSpec(node_name=node or None, containers=[Container(name="c", image="i")]),
            status=PodStatus(
                phase=phase,
                conditions=conditions,
                container_statuses=[ContainerStatus(name="c", restart_count=restarts)],
            ),
        ),
        created=created,
    )


# Expectations.


async def test_expectations_wait_for_every_observation() -> None:
    e = podcontrol.ControllerExpectations(FakeClock())
    assert e.satisfied("ns/web")
    e.expect_creations("ns/web", 2)
    e.creation_observed("ns/web")
    assert not e.satisfied("ns/web")
    e.creation_observed("ns/web")
    assert e.satisfied("ns/web")


async def test_expectations_expire_after_five_minutes() -> None:
    clock = FakeClock()
    e = podcontrol.ControllerExpectations(clock)
    e.expect_deletions("ns/web", 1)
    await clock.advance(300)
    assert not e.satisfied("ns/web")
    await clock.advance(1)
    assert e.satisfied("ns/web")


async def test_uid_tracking_counts_each_deletion_once() -> None:
    e = podcontrol.UIDTrackingExpectations(FakeClock())
    e.expect_deletions_of("ns/web", ["ns/a", "ns/b"])
    e.deletion_observed_of("ns/web", "ns/a")
    e.deletion_observed_of("ns/web", "ns/a")
    assert not e.satisfied("ns/web")
    e.deletion_observed_of("ns/web", "ns/b")
    assert e.satisfied("ns/web")
    e.delete_expectations("ns/web")
    assert e.satisfied("ns/web")


# Slow start.


@pytest.mark.parametrize(
    ("count", "fail_at", "calls", "successes"),
    [
        pytest.param(10, None, 10, 10, id="all-succeed"),
        pytest.param(10, 1, 1, 0, id="first-fails-stops"),
        pytest.param(10, 3, 3, 2, id="second-batch-fails-stops-before-third"),
        pytest.param(10, 5, 7, 6, id="third-batch-runs-whole"),
    ],
)
async def test_slow_start_batch(
    count: int, fail_at: int | None, calls: int, successes: int
) -> None:
    made = 0

    async def attempt() -> None:
        nonlocal made
        made += 1
        if made == fail_at:
            raise RuntimeError("quota")

    done, error = await podcontrol.slow_start_batch(count, 1, attempt)
    assert (made, done, error is None) == (calls, successes, fail_at is None)


async def test_create_pods_records_events_and_stops_on_error() -> None:
    h = harness()
    template = PodTemplateSpec(
        metadata=ObjectMeta(labels={"app": "web"}),
        spec=PodSpec(containers=[Container(name="c", image="i")]),
    )
    rs = owner()
    assert await podcontrol.create_pods(h.ctx, "ns", template, rs, 3) == 3
    created = h.client.writes("create", "Pod")
    assert [a.obj.metadata.generate_name for a in created] == ["web-"] * 3
    assert all(controller_of(a.obj) == controller_ref(rs) for a in created)
    h.client.fail_next(
        "create", ApiError(Status(code=403, reason="Forbidden", message="exceeded quota"))
    )
    with pytest.raises(podcontrol.CreatePodsError) as raised:
        await podcontrol.create_pods(h.ctx, "ns", template, rs, 5)
    assert raised.value.created == 0
    assert h.recorder.reasons() == ["SuccessfulCreate"] * 3 + ["FailedCreate"]


# Ranking.


NOW = T0 + datetime.timedelta(days=1)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(pod("a", node=""), pod("b"), id="unscheduled-first"),
        pytest.param(pod("a", phase="Pending"), pod("b", phase="Unknown"), id="pending-first"),
        pytest.param(pod("a", phase="Unknown"), pod("b"), id="unknown-before-running"),
        pytest.param(pod("a"), pod("b", ready_since=T0), id="not-ready-first"),
        pytest.param(
            pod("a", ready_since=NOW - datetime.timedelta(seconds=10)),
            pod("b", ready_since=T0),
            id="ready-shorter-first",
        ),
        pytest.param(pod("a", restarts=3), pod("b", restarts=1), id="more-restarts-first"),
        pytest.param(
            pod("a", created=NOW - datetime.timedelta(seconds=5)), pod("b"), id="newer-first"
        ),
    ],
)
def test_rank_pods_for_deletion(first: Pod, second: Pod) -> None:
    assert podcontrol.rank_pods_for_deletion([second, first], now=NOW) == [first, second]
    assert podcontrol.rank_pods_for_deletion([first, second], now=NOW) == [first, second]


def test_deletion_cost_and_doubled_up_nodes_rank_first() -> None:
    cheap, crowded, alone = (
        pod("cheap", node="n3"),
        pod("crowded", node="n1"),
        pod("alone", node="n2"),
    )
    cheap.metadata.annotations = {podcontrol.POD_DELETION_COST: "-10"}
    related = [crowded, pod("other", node="n1"), alone]
    ranked = podcontrol.rank_pods_for_deletion([alone, crowded, cheap], related, NOW)
    assert [p.metadata.name for p in ranked] == ["cheap", "crowded", "alone"]


@pytest.mark.parametrize(
    ("since", "min_ready", "available"),
    [
        pytest.param(None, 0, False, id="not-ready"),
        pytest.param(NOW, 0, True, id="ready-no-min"),
        pytest.param(NOW - datetime.timedelta(seconds=10), 10, False, id="exactly-min-not-yet"),
        pytest.param(NOW - datetime.timedelta(seconds=11), 10, True, id="past-min"),
    ],
)
def test_is_pod_available(since: datetime.datetime | None, min_ready: int, available: bool) -> None:
    assert podcontrol.is_pod_available(pod("a", ready_since=since), min_ready, NOW) is available


# Claiming.


async def test_claim_adopts_orphans_and_releases_mismatches() -> None:
    h = harness()
    rs = owner()
    other = owner("other")
    orphan, stranger, mine_kept, mine_gone = (
        pod("orphan"),
        pod("stranger", labels={"app": "db"}),
        pod("kept"),
        pod("released", labels={"app": "db"}),
    )
    mine_kept.metadata.owner_references = [controller_ref(rs)]
    mine_gone.metadata.owner_references = [controller_ref(rs)]
    theirs = pod("theirs")
    theirs.metadata.owner_references = [controller_ref(other)]
    h.store(rs, orphan, stranger, mine_kept, mine_gone, theirs)
    selector = Selector.from_label_selector({"app": "web"}, None)
    pods = [orphan, stranger, mine_kept, mine_gone, theirs]
    claimed = await podcontrol.claim_pods(h.ctx, rs, selector, pods)
    assert [p.metadata.name for p in claimed] == ["orphan", "kept"]
    patches = h.client.writes("patch")
    assert {a.patch_type for a in patches} == {"strategic"}
    sent = {a.name: a.obj for a in patches}
    assert not h.client.stored(Pod, "released", "ns").metadata.owner_references
    assert sent == {
        "orphan": {
            "metadata": {
                "ownerReferences": [codec.to_builtins(controller_ref(rs))],
                "uid": orphan.metadata.uid,
            }
        },
        "released": {
            "metadata": {
                "ownerReferences": [{"$patch": "delete", "uid": rs.metadata.uid}],
                "uid": mine_gone.metadata.uid,
            }
        },
    }


async def test_no_adoption_when_the_owner_is_being_deleted_in_the_api() -> None:
    h = harness()
    rs = owner()
    fresh = owner()
    fresh.metadata.uid = rs.metadata.uid
    fresh.metadata.deletion_timestamp = T0
    h.client.seed(fresh)
    with pytest.raises(podcontrol.AdoptionRefused):
        await podcontrol.claim_pods(
            h.ctx, rs, Selector.from_label_selector({"app": "web"}, None), [pod("orphan")]
        )
    assert h.client.writes("patch") == []
