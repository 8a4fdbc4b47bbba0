"""The deployment controller and its arithmetic, with fake informers, a fake API and a
FakeClock."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import deployment
from controlplane.controllers import deployment_util as du
from kube.api.kinds.apps_v1 import (
    Deployment,
    DeploymentCondition,
    DeploymentSpec,
    DeploymentStatus,
    DeploymentStrategy,
    ReplicaSet,
    ReplicaSetSpec,
    ReplicaSetStatus,
    RollingUpdateDeployment,
)
from kube.api.kinds.core_v1.pod import (
    Container,
    Pod,
    PodSpec,
    PodStatus,
    PodTemplateSpec,
)
from kube.api.meta_v1 import LabelSelector, ObjectMeta, Status
from kube.api.owners import controller_ref
from kube.api.struct import IntOrString
from kube.client.errors import ApiError
from tests.controlplane.controllers.fakes import Action, Harness, harness, stamp

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def template(image: str = "nginx:1") -> PodTemplateSpec:
    return PodTemplateSpec(
        metadata=ObjectMeta(labels={"app": "web"}),
        spec=PodSpec(containers=[Container(name="web", image=image)]),
    )


def make_deployment(
    replicas: int = 3,
    *,
    image: str = "nginx:1",
    recreate: bool = False,
    surge: IntOrString = "25%",
    unavailable: IntOrString = "25%",
    paused: bool = False,
    history: int = 10,
    generation: int = 1,
    status: DeploymentStatus | None = None,
) -> Deployment:
    strategy = (
        DeploymentStrategy(type="Recreate")
        if recreate
        else DeploymentStrategy(
            type="RollingUpdate",
            rolling_update=RollingUpdateDeployment(max_surge=surge, max_unavailable=unavailable),
        )
    )
    d = Deployment(
        metadata=ObjectMeta(name="web", namespace="default", generation=generation),
        spec=DeploymentSpec(
            replicas=replicas,
            selector=LabelSelector(match_labels={"app": "web"}),
            template=template(image),
            strategy=strategy,
            revision_history_limit=history,
            progress_deadline_seconds=600,
            paused=paused or None,
        ),
        status=status,
    )
    return stamp(d)


def make_rs(
    d: Deployment,
    *,
    image: str = "nginx:1",
    replicas: int = 3,
    available: int | None = None,
    revision: int = 1,
    age: int = 0,
    desired: int | None = None,
    maximum: int | None = None,
) -> ReplicaSet:
    """A ReplicaSet of ``d`` created ``age`` minutes before the others of age 0."""
    h = du.compute_hash(template(image), None)
    annotations = {du.REVISION_ANNOTATION: str(revision)}
    if desired is not None:
        annotations[du.DESIRED_REPLICAS_ANNOTATION] = str(desired)
    if maximum is not None:
        annotations[du.MAX_REPLICAS_ANNOTATION] = str(maximum)
    available = replicas if available is None else available
    rs = ReplicaSet(
        metadata=ObjectMeta(
            name=f"web-{h}",
            namespace="default",
            labels={"app": "web", du.POD_TEMPLATE_HASH_LABEL: h},
            annotations=annotations,
            owner_references=[controller_ref(d)],
            generation=1,
        ),
        spec=ReplicaSetSpec(
            replicas=replicas,
            selector=du.selector_with_hash(d.spec.selector if d.spec else None, h),
            template=du.template_with_hash(template(image), h),
        ),
        status=ReplicaSetStatus(
            replicas=replicas,
            ready_replicas=available,
            available_replicas=available,
            observed_generation=1,
        ),
    )
    return stamp(rs, created=T0 - datetime.timedelta(minutes=age))


def setup(d: Deployment, *rss: ReplicaSet) -> tuple[Harness, deployment.DeploymentController]:
    h = harness()
    h.store(d, *rss)
    return h, deployment.new(h.ctx)


def scaled(h: Harness) -> dict[str, int]:
    """ReplicaSet name → size, for every ReplicaSet created or updated, last write wins."""
    return {
        a.name: a.obj.spec.replicas
        for a in h.client.actions
        if a.kind == "ReplicaSet" and a.verb in ("create", "update")
    }


def status_updates(h: Harness) -> list[Action]:
    """The Deployment status writes (``update`` also writes the revision annotation)."""
    return [w for w in h.client.writes("update", "Deployment") if w.subresource == "status"]


def last_status(h: Harness) -> DeploymentStatus:
    status: DeploymentStatus = status_updates(h)[-1].obj.status
    return status


def condition(status: DeploymentStatus, kind: str) -> DeploymentCondition:
    found = du.get_condition(status, kind)
    assert found is not None
    return found


# The arithmetic.


@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "expected"),
    [
        pytest.param("25%", "25%", 10, (3, 2), id="percent-surge-up-unavailable-down"),
        pytest.param("25%", "25%", 3, (1, 0), id="small-counts"),
        pytest.param("0%", "10%", 5, (0, 1), id="both-zero-allows-one-unavailable"),
        pytest.param(0, 0, 5, (0, 1), id="absolute-zeros"),
        pytest.param(2, "50%", 5, (2, 2), id="absolute-and-percent"),
        pytest.param("100%", 0, 7, (7, 0), id="blue-green"),
    ],
)
def test_resolve_fenceposts(
    surge: IntOrString, unavailable: IntOrString, desired: int, expected: tuple[int, int]
) -> None:
    assert du.resolve_fenceposts(surge, unavailable, desired) == expected


@pytest.mark.parametrize(
    ("replicas", "unavailable", "expected"),
    [
        pytest.param(3, "100%", 3, id="capped-at-replicas"),
        pytest.param(0, "25%", 0, id="zero-replicas"),
        pytest.param(4, 1, 1, id="absolute"),
    ],
)
def test_max_unavailable(replicas: int, unavailable: IntOrString, expected: int) -> None:
    assert du.max_unavailable(make_deployment(replicas, unavailable=unavailable)) == expected


def test_max_unavailable_is_zero_under_recreate() -> None:
    assert du.max_unavailable(make_deployment(5, recreate=True)) == 0
    assert du.max_surge(make_deployment(5, recreate=True)) == 0


@pytest.mark.parametrize(
    ("replicas", "surge", "old", "new", "expected"),
    [
        pytest.param(10, "25%", 10, 0, 3, id="surge-room"),
        pytest.param(10, "25%", 10, 3, 3, id="at-max-total"),
        pytest.param(10, "25%", 5, 3, 8, id="grows-as-old-shrinks"),
        pytest.param(3, 5, 0, 0, 3, id="never-past-replicas"),
        pytest.param(10, "0%", 10, 0, 0, id="no-surge"),
    ],
)
def test_new_rs_new_replicas(replicas: int, surge: str, old: int, new: int, expected: int) -> None:
    d = make_deployment(replicas, surge=surge)
    old_rs = make_rs(d, image="old", replicas=old, age=5)
    new_rs = make_rs(d, replicas=new)
    assert du.new_rs_new_replicas(d, [old_rs, new_rs], new_rs) == expected


def test_new_rs_new_replicas_under_recreate_is_replicas() -> None:
    d = make_deployment(4, recreate=True)
    rs = make_rs(d, replicas=0)
    assert du.new_rs_new_replicas(d, [rs], rs) == 4


def test_hash_is_stable_and_collision_count_changes_it() -> None:
    first = du.compute_hash(template(), None)
    assert first == du.compute_hash(template(), None)
    assert first != du.compute_hash(template(), 1) != du.compute_hash(template(), 2)
    assert first != du.compute_hash(template("nginx:2"), None)
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert du.safe_encode_string("123") == "567"  # bytes 49.. mod 27


def test_equal_ignore_hash() -> None:
    assert du.equal_ignore_hash(du.template_with_hash(template(), "abc"), template())
    assert not du.equal_ignore_hash(template("a"), template("b"))


@pytest.mark.parametrize(
    ("history", "old_text", "expected"),
    [
        pytest.param(None, "1", "1", id="first-rollback"),
        pytest.param("1,3", "5", "1,3,5", id="appended"),
        pytest.param(",".join(["9" * 999, "8" * 999]), "7", "8" * 999 + ",7", id="oldest-dropped"),
    ],
)
def test_revision_history(history: str | None, old_text: str, expected: str) -> None:
    d = make_deployment()
    rs = make_rs(d, revision=int(old_text))
    if history is not None:
        assert rs.metadata.annotations is not None
        rs.metadata.annotations[du.REVISION_HISTORY_ANNOTATION] = history
    assert du.set_new_replica_set_annotations(d, rs, 10, exists=True)
    annotations = rs.metadata.annotations or {}
    assert annotations[du.REVISION_ANNOTATION] == "10"
    assert annotations[du.REVISION_HISTORY_ANNOTATION] == expected


def test_revision_is_never_lowered() -> None:
    d = make_deployment()
    rs = make_rs(d, revision=7)
    assert not du.set_new_replica_set_annotations(d, rs, 3, exists=True)
    assert (rs.metadata.annotations or {})[du.REVISION_ANNOTATION] == "7"


# Rolling updates.


async def test_first_sync_creates_the_replica_set() -> None:
    d = make_deployment(3)
    h, controller = setup(d)
    await controller.sync("default/web")
    [created] = h.client.writes("create", "ReplicaSet")
    rs = created.obj
    hash_value = du.compute_hash(template(), None)
    assert rs.metadata.name == f"web-{hash_value}"
    assert rs.spec.replicas == 3
    assert rs.spec.selector.match_labels == {"app": "web", "pod-template-hash": hash_value}
    assert rs.spec.template.metadata.labels["pod-template-hash"] == hash_value
    assert rs.metadata.annotations == {
        du.REVISION_ANNOTATION: "1",
        du.DESIRED_REPLICAS_ANNOTATION: "3",
        du.MAX_REPLICAS_ANNOTATION: "4",
    }
    assert rs.metadata.owner_references[0].uid == d.metadata.uid
    assert h.recorder.events == [
        (
            "Normal",
            "ScalingReplicaSet",
            f"Scaled up replica set {rs.metadata.name} from 0 to 3",
            "web",
        )
    ]
    [update] = [w for w in h.client.writes("update", "Deployment") if not w.subresource]
    assert update.obj.metadata.annotations[du.REVISION_ANNOTATION] == "1"
    progressing = condition(last_status(h), du.PROGRESSING)
    assert (progressing.status, progressing.reason) == ("True", du.NEW_RS_REASON)
    assert progressing.message == f'Created new replica set "{rs.metadata.name}"'


async def test_a_template_change_starts_a_rolling_update() -> None:
    d = make_deployment(4, image="nginx:2", generation=2)
    old = make_rs(d, replicas=4, desired=4, maximum=5, age=5)
    h, controller = setup(d, old)
    await controller.sync("default/web")
    [created] = h.client.writes("create", "ReplicaSet")
    # 25% of 4: one pod of surge, one unavailable: new gets 1 and old drops to 3.
    assert created.obj.spec.replicas == 1
    assert created.obj.metadata.annotations[du.REVISION_ANNOTATION] == "2"
    assert scaled(h) == {created.name: 1, old.metadata.name: 3}


async def test_scale_down_of_old_when_new_is_full() -> None:
    d = make_deployment(4, image="nginx:2", generation=2)
    old = make_rs(d, replicas=1, desired=4, maximum=5, age=5)
    new = make_rs(d, image="nginx:2", replicas=4, revision=2, desired=4, maximum=5)
    h, controller = setup(d, old, new)
    await controller.sync("default/web")
    assert scaled(h) == {old.metadata.name: 0}
    assert h.recorder.events[-1][2] == f"Scaled down replica set {old.metadata.name} from 1 to 0"


@pytest.mark.parametrize(
    ("old_available", "new_available", "expected_old"),
    [
        pytest.param(4, 1, 2, id="five-available-two-may-go"),
        pytest.param(4, 0, 3, id="surge-pod-pending-one-unavailable-allowed"),
        pytest.param(2, 1, 2, id="unhealthy-old-replicas-removed-first"),
    ],
)
async def test_reconcile_old_replica_sets(
    old_available: int, new_available: int, expected_old: int
) -> None:
    d = make_deployment(4, image="nginx:2", generation=2)
    old = make_rs(d, replicas=4, available=old_available, desired=4, maximum=5, age=5)
    new = make_rs(
        d, image="nginx:2", replicas=1, available=new_available, revision=2, desired=4, maximum=5
    )
    h, controller = setup(d, old, new)
    # 5 pods asked for: the new ReplicaSet cannot grow, so old ones shrink.
    await controller.sync("default/web")
    assert scaled(h) == {old.metadata.name: expected_old}


# Recreate.


async def test_recreate_scales_old_down_first() -> None:
    d = make_deployment(3, image="nginx:2", recreate=True, generation=2)
    old = make_rs(d, replicas=3, desired=3, maximum=3)
    h, controller = setup(d, old)
    await controller.sync("default/web")
    assert scaled(h) == {old.metadata.name: 0}
    assert h.client.writes("create", "ReplicaSet") == []


@pytest.mark.parametrize(
    ("pod_phase", "creates"),
    [
        pytest.param("Running", False, id="waits-for-old-pods"),
        pytest.param("Succeeded", True, id="finished-pods-do-not-count"),
        pytest.param(None, True, id="no-pods"),
    ],
)
async def test_recreate_creates_new_once_old_pods_are_gone(
    pod_phase: str | None, creates: bool
) -> None:
    d = make_deployment(3, image="nginx:2", recreate=True, generation=2)
    old = make_rs(d, replicas=0, available=0, desired=3, maximum=3)
    h, controller = setup(d, old)
    if pod_phase is not None:
        pod = stamp(
            Pod(
                metadata=ObjectMeta(
                    name="web-old-1",
                    namespace="default",
                    labels={"app": "web"},
                    owner_references=[controller_ref(old)],
                ),
                status=PodStatus(phase=pod_phase),
            )
        )
        h.cache(pod)
    await controller.sync("default/web")
    created = h.client.writes("create", "ReplicaSet")
    assert bool(created) == creates
    if creates:
        assert created[0].obj.spec.replicas == 3


# Scaling.


async def test_proportional_scaling_during_a_rollout() -> None:
    # Mid-rollout of 10 (max 13) the Deployment is scaled to 20 (max 25).
    d = make_deployment(20, image="nginx:2", generation=3)
    old = make_rs(d, replicas=8, desired=10, maximum=13, age=5)
    new = make_rs(d, image="nginx:2", replicas=5, revision=2, desired=10, maximum=13)
    h, controller = setup(d, old, new)
    await controller.sync("default/web")
    # 12 to add: old gets round(8*25/13)-8 = 7, new round(5*25/13)-5 = 5.
    assert scaled(h) == {old.metadata.name: 15, new.metadata.name: 10}
    assert all(
        a.obj.metadata.annotations[du.DESIRED_REPLICAS_ANNOTATION] == "20"
        for a in h.client.writes("update", "ReplicaSet")
    )


async def test_proportional_scale_down_takes_leftovers_from_the_largest() -> None:
    d = make_deployment(5, image="nginx:2", generation=3)
    old = make_rs(d, replicas=8, desired=10, maximum=13, age=5)
    new = make_rs(d, image="nginx:2", replicas=5, revision=2, desired=10, maximum=13)
    h, controller = setup(d, old, new)
    await controller.sync("default/web")
    # 7 allowed (5 + a surge of 2), 6 to remove: round(8*7/13)-8 = -4, round(5*7/13)-5 = -2.
    assert scaled(h) == {old.metadata.name: 4, new.metadata.name: 3}


async def test_scaling_a_settled_deployment_scales_its_only_replica_set() -> None:
    d = make_deployment(5)
    rs = make_rs(d, replicas=3, desired=3, maximum=4)
    h, controller = setup(d, rs)
    await controller.sync("default/web")
    assert scaled(h) == {rs.metadata.name: 5}
    assert h.recorder.events[-1][2] == f"Scaled up replica set {rs.metadata.name} from 3 to 5"


# Pausing and rollbacks.


async def test_paused_deployment_only_scales_and_reports_paused() -> None:
    d = make_deployment(3, image="nginx:2", paused=True, generation=2)
    old = make_rs(d, replicas=3, desired=3, maximum=4)
    h, controller = setup(d, old)
    await controller.sync("default/web")
    assert h.client.writes("create", "ReplicaSet") == []
    progressing = condition(status_updates(h)[0].obj.status, du.PROGRESSING)
    assert (progressing.status, progressing.reason, progressing.message) == (
        "Unknown",
        du.PAUSED_REASON,
        "Deployment is paused",
    )


async def test_resuming_reports_resumed() -> None:
    paused = du.new_condition(
        du.PROGRESSING, "Unknown", du.PAUSED_REASON, "Deployment is paused", T0
    )
    d = make_deployment(3, status=DeploymentStatus(conditions=[paused]))
    rs = make_rs(d, replicas=3, desired=3, maximum=4)
    h, controller = setup(d, rs)
    await controller.sync("default/web")
    first = condition(status_updates(h)[0].obj.status, du.PROGRESSING)
    assert first.reason == du.RESUMED_REASON


async def test_rollback_makes_the_old_replica_set_the_newest_revision() -> None:
    # `kubectl rollout undo` put revision 1's template back.
    d = make_deployment(3, image="nginx:1", generation=3)
    back = make_rs(d, replicas=0, revision=1, desired=3, maximum=4, age=10)
    current = make_rs(d, image="nginx:2", replicas=3, revision=2, desired=3, maximum=4)
    h, controller = setup(d, back, current)
    await controller.sync("default/web")
    update = h.client.writes("update", "ReplicaSet")[0]
    assert update.name == back.metadata.name
    annotations = update.obj.metadata.annotations
    assert annotations[du.REVISION_ANNOTATION] == "3"
    assert annotations[du.REVISION_HISTORY_ANNOTATION] == "1"


async def test_restart_annotation_is_a_new_template() -> None:
    d = make_deployment(2)
    assert d.spec is not None and d.spec.template is not None
    assert d.spec.template.metadata is not None
    d.spec.template.metadata.annotations = {"kubectl.kubernetes.io/restartedAt": "2026-01-01"}
    old = make_rs(d, replicas=2, desired=2, maximum=3)
    h, controller = setup(d, old)
    await controller.sync("default/web")
    [created] = h.client.writes("create", "ReplicaSet")
    assert created.name != old.metadata.name


# Cleanup.


async def test_revision_history_limit_deletes_oldest_empty_revisions() -> None:
    d = make_deployment(2, history=1, generation=4)
    olds = [
        make_rs(d, image=f"v{i}", replicas=0, revision=i, desired=2, maximum=3, age=10 - i)
        for i in (1, 2, 3)
    ]
    olds[0].status = ReplicaSetStatus(replicas=1, observed_generation=1)  # a pod still there
    current = make_rs(d, replicas=2, revision=4, desired=2, maximum=3)
    status = DeploymentStatus(
        observed_generation=4, replicas=2, updated_replicas=2, ready_replicas=2,
        available_replicas=2,
    )  # fmt: skip
    d.status = status
    h, controller = setup(d, *olds, current)
    await controller.sync("default/web")
    assert [a.name for a in h.client.writes("delete", "ReplicaSet")] == [olds[1].metadata.name]


# Status and conditions.


async def test_status_counts_come_from_the_replica_sets() -> None:
    d = make_deployment(4, image="nginx:2", generation=2)
    old = make_rs(d, replicas=3, available=3, desired=4, maximum=5, age=5)
    new = make_rs(d, image="nginx:2", replicas=2, available=1, revision=2, desired=4, maximum=5)
    assert new.status is not None
    new.status.ready_replicas = 2
    status = du.calculate_status([old, new], new, d, T0)
    assert (
        status.observed_generation,
        status.replicas,
        status.updated_replicas,
        status.ready_replicas,
        status.available_replicas,
        status.unavailable_replicas,
    ) == (2, 5, 2, 5, 4, 1)
    assert condition(status, du.AVAILABLE).reason == du.MINIMUM_REPLICAS_AVAILABLE


def test_available_false_below_minimum() -> None:
    d = make_deployment(4, unavailable=1)
    rs = make_rs(d, replicas=4, available=2)
    available = condition(du.calculate_status([rs], rs, d, T0), du.AVAILABLE)
    assert (available.status, available.reason) == ("False", du.MINIMUM_REPLICAS_UNAVAILABLE)
    assert available.message == "Deployment does not have minimum availability."


async def test_complete_rollout_reports_new_replica_set_available() -> None:
    d = make_deployment(3)
    rs = make_rs(d, replicas=3, desired=3, maximum=4)
    h, controller = setup(d, rs)
    await controller.sync("default/web")
    status = last_status(h)
    assert (status.replicas, status.updated_replicas, status.available_replicas) == (3, 3, 3)
    assert du.deployment_complete(d, status)
    progressing = condition(status, du.PROGRESSING)
    assert (progressing.reason, progressing.message) == (
        du.NEW_RS_AVAILABLE_REASON,
        f'ReplicaSet "{rs.metadata.name}" has successfully progressed.',
    )


async def test_unchanged_status_is_not_written() -> None:
    d = make_deployment(3)
    rs = make_rs(d, replicas=3, desired=3, maximum=4)
    h, controller = setup(d, rs)
    await controller.sync("default/web")
    d2 = h.client.objects[(Deployment, "default", "web")]
    assert isinstance(d2, Deployment)
    h2, controller2 = setup(d2, rs)
    await controller2.sync("default/web")
    assert status_updates(h2) == []


async def test_progress_deadline_exceeded() -> None:
    started = du.new_condition(du.PROGRESSING, "True", du.RS_UPDATED_REASON, "x", T0)
    d = make_deployment(3, image="nginx:2", generation=2)
    old = make_rs(d, replicas=3, desired=3, maximum=4, age=5)
    new = make_rs(d, image="nginx:2", replicas=1, available=0, revision=2, desired=3, maximum=4)
    d.status = du.calculate_status([old, new], new, d, T0)
    du.set_condition(d.status, started)
    d.metadata.annotations = {du.REVISION_ANNOTATION: "2"}  # settled already
    h, controller = setup(d, old, new)
    controller.queue.done(await controller.queue.get())  # the informer's initial add
    # Nothing moved yet: come back when the deadline passes.
    await controller.sync("default/web")
    assert status_updates(h) == []
    assert len(controller.queue) == 0  # scheduled for later, not now
    await h.clock.advance(601)
    assert await controller.queue.get() == "default/web"
    await controller.sync("default/web")
    progressing = condition(last_status(h), du.PROGRESSING)
    assert (progressing.status, progressing.reason, progressing.message) == (
        "False",
        du.TIMED_OUT_REASON,
        f'ReplicaSet "{new.metadata.name}" has timed out progressing.',
    )


async def test_progress_refreshes_the_update_time() -> None:
    earlier = T0 - datetime.timedelta(minutes=5)
    started = du.new_condition(du.PROGRESSING, "True", du.RS_UPDATED_REASON, "x", earlier)
    d = make_deployment(3, image="nginx:2", generation=2)
    old = make_rs(d, replicas=2, desired=3, maximum=4, age=5)
    new = make_rs(d, image="nginx:2", replicas=2, available=0, revision=2, desired=3, maximum=4)
    d.status = du.calculate_status([old, new], new, d, earlier)
    du.set_condition(d.status, started)
    assert new.status is not None
    new.status.available_replicas = new.status.ready_replicas = 1
    h, controller = setup(d, old, new)
    await controller.sync("default/web")
    progressing = condition(last_status(h), du.PROGRESSING)
    assert progressing.reason == du.RS_UPDATED_REASON
    assert progressing.last_update_time == T0
    assert progressing.last_transition_time == earlier


# Claiming, collisions, odd cases.


async def test_orphan_replica_set_is_adopted() -> None:
    d = make_deployment(3)
    orphan = make_rs(d, replicas=3, desired=3, maximum=4)
    orphan.metadata.owner_references = None
    h, controller = setup(d, orphan)
    await controller.sync("default/web")
    adopt = h.client.writes("patch", "ReplicaSet")[0]
    refs = adopt.obj["metadata"]["ownerReferences"]
    assert refs[0]["uid"] == d.metadata.uid and refs[0]["controller"] is True
    assert adopt.obj["metadata"]["uid"] == orphan.metadata.uid


async def test_owned_replica_set_no_longer_matching_is_released() -> None:
    d = make_deployment(3)
    stray = make_rs(d, replicas=0)
    stray.metadata.labels = {"app": "other"}
    h, controller = setup(d, stray)
    # Recorded, not applied: the sync goes on from its cache, which no watch refreshes here.
    h.client.react("patch", "ReplicaSet", lambda _: stray)
    await controller.sync("default/web")
    sent = [a.obj for a in h.client.writes("patch", "ReplicaSet")]
    assert sent[0]["metadata"] == {
        "ownerReferences": [{"$patch": "delete", "uid": d.metadata.uid}],
        "uid": stray.metadata.uid,
    }


async def test_hash_collision_bumps_collision_count() -> None:
    d = make_deployment(3)
    squatter = make_rs(d, replicas=1)
    squatter.metadata.owner_references = None
    squatter.metadata.labels = {"app": "unrelated"}
    h, controller = setup(d, squatter)
    with pytest.raises(ApiError):
        await controller.sync("default/web")
    assert last_status(h).collision_count == 1


async def test_create_failure_is_reported() -> None:
    d = make_deployment(3)
    h, controller = setup(d)
    h.client.fail_next(
        "create", ApiError(Status(code=403, reason="Forbidden", message="exceeded quota"))
    )
    with pytest.raises(ApiError):
        await controller.sync("default/web")
    name = f"web-{du.compute_hash(template(), None)}"
    message = f'Failed to create new replica set "{name}": exceeded quota'
    assert h.recorder.events == [("Warning", du.FAILED_RS_CREATE_REASON, message, "web")]
    progressing = condition(last_status(h), du.PROGRESSING)
    assert (progressing.status, progressing.reason) == ("False", du.FAILED_RS_CREATE_REASON)


async def test_empty_selector_selects_all_and_is_refused() -> None:
    d = make_deployment(3, generation=2)
    assert d.spec is not None
    d.spec.selector = LabelSelector()
    h, controller = setup(d)
    await controller.sync("default/web")
    assert h.recorder.reasons() == [deployment.SELECTING_ALL]
    assert last_status(h).observed_generation == 2
    assert h.client.writes("create") == []


async def test_deleted_deployment_is_nothing_to_do() -> None:
    h = harness()
    await deployment.new(h.ctx).sync("default/gone")
    assert h.client.actions == []


async def test_replica_set_events_enqueue_the_owner() -> None:
    d = make_deployment(3)
    rs = make_rs(d)
    _, controller = setup(d, rs)
    controller._replica_set_deleted(rs)
    assert await controller.queue.get() == "default/web"
