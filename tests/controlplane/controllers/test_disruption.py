"""The disruption controller, with fake informers, a fake API and a fake clock."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import disruption
from kube.api.kinds.apps_v1 import Deployment, DeploymentSpec, ReplicaSet, ReplicaSetSpec
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.policy_v1 import (
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
    PodDisruptionBudgetStatus,
)
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from kube.api.owners import controller_ref
from kube.api.struct import IntOrString
from tests import builders
from tests.controlplane.controllers.fakes import Harness, harness, stamp

LABELS = {"app": "web"}


def budget(
    *,
    min_available: IntOrString | None = None,
    max_unavailable: IntOrString | None = None,
    status: PodDisruptionBudgetStatus | None = None,
) -> PodDisruptionBudget:
    pdb = PodDisruptionBudget(
        metadata=ObjectMeta(name="web", namespace="team", generation=3),
        spec=PodDisruptionBudgetSpec(
            min_available=min_available,
            max_unavailable=max_unavailable,
            selector=LabelSelector(match_labels=LABELS),
        ),
        status=status,
    )
    return stamp(pdb)


def pod(name: str, *, ready: bool = True, owner: ReplicaSet | None = None) -> Pod:
    return stamp(
        builders.pod(name, "team", labels=LABELS, owner=owner, phase="Running", ready=ready)
    )


def workloads(h: Harness, replicas: int) -> ReplicaSet:
    """A Deployment of ``replicas`` and the ReplicaSet it controls (with a stale scale)."""
    deployment = stamp(
        Deployment(
            metadata=ObjectMeta(name="web", namespace="team"),
            spec=DeploymentSpec(replicas=replicas),
        )
    )
    rs = stamp(
        ReplicaSet(
            metadata=ObjectMeta(
                name="web-1", namespace="team", owner_references=[controller_ref(deployment)]
            ),
            spec=ReplicaSetSpec(replicas=1),
        )
    )
    h.cache(deployment, rs)
    return rs


async def run(h: Harness, pdb: PodDisruptionBudget) -> PodDisruptionBudgetStatus:
    h.store(pdb)
    await disruption.new(h.ctx).sync("team/web")
    [write] = h.client.writes("update", "PodDisruptionBudget")
    assert write.subresource == "status"
    status: PodDisruptionBudgetStatus = write.obj.status
    return status


@pytest.mark.parametrize(
    ("spec", "ready", "replicas", "expected"),
    [
        # expected pods, desired healthy, current healthy, disruptions allowed
        pytest.param({"min_available": 2}, [True, True, True], 5, (3, 2, 3, 1), id="min-int"),
        pytest.param({"min_available": 3}, [True, True, False], 5, (3, 3, 2, 0), id="min-short"),
        pytest.param({"min_available": "50%"}, [True] * 3, 5, (5, 3, 3, 0), id="min-pct-ceil"),
        pytest.param({"max_unavailable": 1}, [True] * 3, 3, (3, 2, 3, 1), id="max-int"),
        pytest.param({"max_unavailable": "30%"}, [True] * 4, 4, (4, 2, 4, 2), id="max-pct"),
        pytest.param({"max_unavailable": 9}, [True], 3, (3, 0, 1, 1), id="desired-floor-0"),
    ],
)
async def test_status(
    spec: dict[str, IntOrString], ready: list[bool], replicas: int, expected: tuple[int, ...]
) -> None:
    h = harness()
    rs = workloads(h, replicas)
    h.cache(*(pod(f"p{i}", ready=r, owner=rs) for i, r in enumerate(ready)))
    status = await run(h, budget(**spec))  # type: ignore[arg-type]
    got = (
        status.expected_pods,
        status.desired_healthy,
        status.current_healthy,
        status.disruptions_allowed,
    )
    assert got == expected
    assert status.observed_generation == 3
    [condition] = status.conditions or []
    allowed = expected[3] > 0
    assert (condition.type, condition.status, condition.reason) == (
        "DisruptionAllowed",
        "True" if allowed else "False",
        "SufficientPods" if allowed else "InsufficientPods",
    )
    assert condition.last_transition_time == h.clock.now()


async def test_no_pods_allows_nothing_and_says_so() -> None:
    h = harness()
    status = await run(h, budget(min_available=0))
    assert (status.expected_pods, status.disruptions_allowed) == (0, 0)
    assert h.recorder.reasons() == ["NoPods"]


async def test_unchanged_status_is_not_written() -> None:
    h = harness()
    h.cache(pod("p0"), pod("p1"))
    first = await run(h, budget(min_available=1))
    h2 = harness()
    h2.cache(pod("p0"), pod("p1"))
    h2.store(budget(min_available=1, status=first))
    await disruption.new(h2.ctx).sync("team/web")
    assert h2.client.actions == []


async def test_recent_disruptions_are_not_healthy_and_are_rechecked() -> None:
    h = harness()
    now = h.clock.now()
    recent = now - datetime.timedelta(seconds=30)
    expired = now - datetime.timedelta(minutes=5)
    status = PodDisruptionBudgetStatus(disrupted_pods={"p0": recent, "p1": expired, "gone": recent})
    h.cache(pod("p0"), pod("p1"), pod("p2"))
    controller = disruption.new(h.ctx)
    rechecks: list[float] = []
    controller.enqueue_after = lambda obj, seconds: rechecks.append(seconds)  # type: ignore[method-assign]
    h.store(budget(min_available=1, status=status))
    await controller.sync("team/web")
    [write] = h.client.writes("update")
    assert write.obj.status.disrupted_pods == {"p0": recent}
    assert write.obj.status.current_healthy == 2
    assert rechecks == [90.0]


async def test_unmanaged_pods_are_reported() -> None:
    h = harness()
    h.cache(pod("p0"))
    await run(h, budget(max_unavailable=1))
    assert h.recorder.reasons() == ["UnmanagedPods"]


async def test_unknown_controller_fails_safe() -> None:
    h = harness()
    rs = stamp(ReplicaSet(metadata=ObjectMeta(name="ghost", namespace="team")))
    h.cache(pod("p0", owner=rs))
    status = PodDisruptionBudgetStatus(disruptions_allowed=4, observed_generation=3)
    h.store(budget(max_unavailable=1, status=status))
    with pytest.raises(disruption.ExpectedPodsError):
        await disruption.new(h.ctx).sync("team/web")
    [write] = h.client.writes("update")
    assert write.obj.status.disruptions_allowed == 0
    [condition] = write.obj.status.conditions
    assert (condition.status, condition.reason) == ("False", "SyncFailed")
    assert condition.message == 'found no controllers for pod "p0"'
    assert h.recorder.reasons() == ["CalculateExpectedPodCountFailed"]


async def test_pod_events_enqueue_matching_budgets() -> None:
    h = harness()
    h.cache(budget(min_available=1))
    controller = disruption.new(h.ctx)
    controller._pod_changed(pod("p0"))
    assert await controller.queue.get() == "team/web"
