"""The statefulset controller and the revision history, with fake informers and a fake API."""

from __future__ import annotations

import pytest

from controlplane.controllers import history, statefulset
from kube.api.kinds.apps_v1 import (
    ControllerRevision,
    RollingUpdateStatefulSetStrategy,
    StatefulSet,
    StatefulSetSpec,
    StatefulSetStatus,
    StatefulSetUpdateStrategy,
)
from kube.api.kinds.core_v1.pod import (
    Container,
    Pod,
    PodCondition,
    PodSpec,
    PodStatus,
    PodTemplateSpec,
)
from kube.api.kinds.core_v1.volume import PersistentVolumeClaim, PersistentVolumeClaimSpec
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from tests.controlplane.controllers.fakes import Harness, harness, stamp

LABELS = {"app": "db"}
KEY = "prod/db"


def stateful_set(
    replicas: int,
    *,
    image: str = "db:1",
    policy: str = "OrderedReady",
    partition: int = 0,
    max_unavailable: int | str = 1,
    claims: bool = False,
) -> StatefulSet:
    templates = [
        PersistentVolumeClaim(
            metadata=ObjectMeta(name="data", labels={"tier": "storage"}),
            spec=PersistentVolumeClaimSpec(access_modes=["ReadWriteOnce"]),
        )
    ]
    return stamp(
        StatefulSet(
            metadata=ObjectMeta(name="db", namespace="prod", generation=3, uid="sts-uid"),
            spec=StatefulSetSpec(
                replicas=replicas,
                selector=LabelSelector(match_labels=LABELS),
                service_name="db-headless",
                pod_management_policy=policy,
                template=PodTemplateSpec(
                    metadata=ObjectMeta(labels=LABELS),
                    spec=PodSpec(containers=[Container(name="db", image=image)]),
                ),
                volume_claim_templates=templates if claims else None,
                update_strategy=StatefulSetUpdateStrategy(
                    type="RollingUpdate",
                    rolling_update=RollingUpdateStatefulSetStrategy(
                        partition=partition, max_unavailable=max_unavailable
                    ),
                ),
                revision_history_limit=10,
            ),
        )
    )


def revision(sts: StatefulSet, number: int = 1) -> ControllerRevision:
    assert sts.spec is not None
    return stamp(history.new_revision(sts, sts.spec.template, number, 0))


def replica(
    sts: StatefulSet,
    ordinal: int,
    rev: ControllerRevision,
    *,
    phase: str = "Running",
    ready: bool = True,
) -> Pod:
    """Replica ``ordinal`` as the API would hold it after creation."""
    assert sts.spec is not None and sts.spec.template is not None
    pod = statefulset.new_pod(sts, sts.spec.template, rev.metadata.name or "", ordinal)
    pod.status = PodStatus(
        phase=phase, conditions=[PodCondition(type="Ready", status="True" if ready else "False")]
    )
    return stamp(pod)


def seeded(sts: StatefulSet, *objs: object) -> Harness:
    h = harness()
    h.store(sts)
    for obj in objs:
        h.store(obj)  # type: ignore[arg-type]
    return h


async def test_first_replica_gets_identity_and_its_claim_first() -> None:
    h = seeded(stateful_set(3, claims=True))
    await statefulset.new(h.ctx).sync(KEY)

    order = [(a.verb, a.kind, a.name) for a in h.client.actions if a.kind != "StatefulSet"]
    assert order[1:] == [
        ("create", "PersistentVolumeClaim", "data-db-0"),
        ("create", "Pod", "db-0"),
    ]
    pod = h.client.writes("create", "Pod")[0].obj
    labels = pod.metadata.labels
    assert labels[statefulset.POD_NAME_LABEL] == "db-0"
    assert labels[statefulset.POD_INDEX_LABEL] == "0"
    assert labels[history.CONTROLLER_REVISION_HASH_LABEL] == (
        h.client.writes("create", "ControllerRevision")[0].name
    )
    assert (pod.spec.hostname, pod.spec.subdomain) == ("db-0", "db-headless")
    assert pod.spec.volumes[0].persistent_volume_claim.claim_name == "data-db-0"
    claim = h.client.writes("create", "PersistentVolumeClaim")[0].obj
    assert claim.metadata.labels == {"tier": "storage", "app": "db"}
    assert h.recorder.events[-1][1:] == (
        "SuccessfulCreate",
        "create Pod db-0 in StatefulSet db successful",
        "db",
    )


@pytest.mark.parametrize(
    ("policy", "existing", "created"),
    [
        pytest.param("OrderedReady", [], ["db-0"], id="ordered-creates-one"),
        pytest.param("OrderedReady", [(0, "Pending", False)], [], id="ordered-waits-for-ready"),
        pytest.param(
            "OrderedReady", [(0, "Running", True)], ["db-1"], id="ordered-next-after-ready"
        ),
        pytest.param("Parallel", [], ["db-0", "db-1", "db-2"], id="parallel-creates-all"),
        pytest.param("Parallel", [(0, "Pending", False)], ["db-1", "db-2"], id="parallel-no-wait"),
    ],
)
async def test_scale_up(
    policy: str, existing: list[tuple[int, str, bool]], created: list[str]
) -> None:
    sts = stateful_set(3, policy=policy)
    rev = revision(sts)
    h = seeded(sts, rev, *(replica(sts, o, rev, phase=p, ready=r) for o, p, r in existing))
    await statefulset.new(h.ctx).sync(KEY)
    assert [a.name for a in h.client.writes("create", "Pod")] == created


@pytest.mark.parametrize(
    ("policy", "ready", "deleted"),
    [
        pytest.param("OrderedReady", (True, True, True), ["db-2"], id="ordered-highest-first"),
        pytest.param("OrderedReady", (False, True, True), [], id="ordered-waits-for-unhealthy"),
        pytest.param(
            "OrderedReady", (True, True, False), ["db-2"], id="ordered-unhealthy-first-goes"
        ),
        pytest.param("Parallel", (True, True, True), ["db-2", "db-1"], id="parallel-all-at-once"),
    ],
)
async def test_scale_down(policy: str, ready: tuple[bool, ...], deleted: list[str]) -> None:
    sts = stateful_set(1, policy=policy)
    rev = revision(sts)
    h = seeded(sts, rev, *(replica(sts, o, rev, ready=r) for o, r in enumerate(ready)))
    await statefulset.new(h.ctx).sync(KEY)
    assert [a.name for a in h.client.writes("delete", "Pod")] == deleted
    assert h.client.writes("create", "Pod") == []


@pytest.mark.parametrize(
    ("partition", "max_unavailable", "updated", "deleted"),
    [
        pytest.param(0, 1, (), ["db-2"], id="highest-ordinal-first"),
        pytest.param(0, 1, (2,), ["db-1"], id="then-the-next"),
        pytest.param(2, 1, (2,), [], id="stops-at-partition"),
        pytest.param(0, 2, (), ["db-2", "db-1"], id="max-unavailable-two"),
    ],
)
async def test_rolling_update(
    partition: int, max_unavailable: int, updated: tuple[int, ...], deleted: list[str]
) -> None:
    old_sts = stateful_set(3)
    old = revision(old_sts, 1)
    sts = stateful_set(3, image="db:2", partition=partition, max_unavailable=max_unavailable)
    new = revision(sts, 2)
    sts.status = StatefulSetStatus(current_revision=old.metadata.name, current_replicas=3)
    pods = [
        replica(sts if o in updated else old_sts, o, new if o in updated else old) for o in range(3)
    ]
    h = seeded(sts, old, new, *pods)
    await statefulset.new(h.ctx).sync(KEY)
    assert [a.name for a in h.client.writes("delete", "Pod")] == deleted
    status = h.client.writes("update", "StatefulSet")[0].obj.status
    assert status.update_revision == new.metadata.name
    assert status.current_revision == old.metadata.name
    assert status.updated_replicas == len(updated)


async def test_rolling_update_waits_for_the_updated_pod() -> None:
    old_sts = stateful_set(3)
    old = revision(old_sts, 1)
    sts = stateful_set(3, image="db:2")
    new = revision(sts, 2)
    sts.status = StatefulSetStatus(current_revision=old.metadata.name)
    pods = [replica(old_sts, 0, old), replica(old_sts, 1, old), replica(sts, 2, new, ready=False)]
    h = seeded(sts, old, new, *pods)
    await statefulset.new(h.ctx).sync(KEY)
    assert h.client.writes("delete", "Pod") == []


async def test_status_and_completed_rollout() -> None:
    sts = stateful_set(2)
    rev = revision(sts)
    h = seeded(sts, rev, replica(sts, 0, rev), replica(sts, 1, rev))
    await statefulset.new(h.ctx).sync(KEY)
    status = h.client.writes("update", "StatefulSet")[0].obj.status
    assert status.observed_generation == 3
    assert (status.replicas, status.ready_replicas, status.available_replicas) == (2, 2, 2)
    assert (status.current_replicas, status.updated_replicas) == (2, 2)
    assert status.current_revision == status.update_revision == rev.metadata.name


async def test_failed_replica_is_deleted_to_be_recreated() -> None:
    sts = stateful_set(2)
    rev = revision(sts)
    h = seeded(sts, rev, replica(sts, 0, rev, phase="Failed"), replica(sts, 1, rev))
    await statefulset.new(h.ctx).sync(KEY)
    assert [a.name for a in h.client.writes("delete", "Pod")] == ["db-0"]
    assert h.client.writes("create", "Pod") == []


async def test_rollback_renumbers_the_equal_revision() -> None:
    sts = stateful_set(1)
    first = revision(sts, 1)
    other = revision(stateful_set(1, image="db:2"), 2)
    h = seeded(sts, first, other)
    await statefulset.new(h.ctx).sync(KEY)
    assert h.client.writes("create", "ControllerRevision") == []
    renumbered = h.client.writes("update", "ControllerRevision")[0]
    assert (renumbered.name, renumbered.obj.revision) == (first.metadata.name, 3)


async def test_history_is_truncated_to_the_limit() -> None:
    sts = stateful_set(0)
    assert sts.spec is not None
    sts.spec.revision_history_limit = 1
    old = [revision(stateful_set(0, image=f"old:{i}"), i + 1) for i in range(3)]
    h = seeded(sts, *old)
    await statefulset.new(h.ctx).sync(KEY)
    deleted = [a.name for a in h.client.writes("delete", "ControllerRevision")]
    assert deleted == [old[0].metadata.name, old[1].metadata.name]


def test_revision_names_hash_the_template_and_collision_count() -> None:
    sts = stateful_set(1)
    assert sts.spec is not None
    a = history.new_revision(sts, sts.spec.template, 1, 0)
    b = history.new_revision(sts, sts.spec.template, 5, 0)
    c = history.new_revision(sts, sts.spec.template, 1, 1)
    assert a.metadata.name == b.metadata.name != c.metadata.name
    assert (a.metadata.name or "").startswith("db-")
    assert history.template_of(a) == sts.spec.template


async def test_a_taken_revision_name_bumps_the_collision_count() -> None:
    sts = stateful_set(1)
    assert sts.spec is not None
    wanted = history.new_revision(sts, sts.spec.template, 1, 0)
    squatter = history.new_revision(stateful_set(1, image="x"), None, 1, 0)
    squatter.metadata.name = wanted.metadata.name
    h = harness()
    h.client.seed(stamp(squatter))
    box = [0]
    made = await history.History(h.ctx.client).create(sts, wanted, box)
    assert box == [1]
    assert made.metadata.name != wanted.metadata.name


@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [
        pytest.param(None, 10, 1, id="default"),
        pytest.param(3, 10, 3, id="int"),
        pytest.param("25%", 10, 3, id="percent-rounds-up"),
    ],
)
def test_scaled_count(value: int | str | None, total: int, expected: int) -> None:
    assert history.scaled_count(value, total, 1) == expected
