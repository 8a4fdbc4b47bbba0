from __future__ import annotations

import pytest

from controlplane.scheduler.framework.interface import (
    SUCCESS,
    ActionType,
    ClusterEvent,
    EventResource,
    QueueingHint,
    Status,
)
from controlplane.scheduler.plugins import schedulinggates
from kube.api.kinds.core_v1.pod import Pod
from tests.controlplane.scheduler.builders import FakeHandle, make_pod


@pytest.mark.parametrize(
    ("gates", "expected"),
    [
        pytest.param((), SUCCESS, id="no-gates"),
        pytest.param(("a",), Status.unresolvable("waiting for scheduling gates: [a]"), id="one"),
        pytest.param(
            ("a", "b"), Status.unresolvable("waiting for scheduling gates: [a b]"), id="two"
        ),
    ],
)
def test_pre_enqueue(gates: tuple[str, ...], expected: Status) -> None:
    plugin = schedulinggates.new(None, FakeHandle())
    assert plugin.pre_enqueue(make_pod(scheduling_gates=gates)) == expected


@pytest.mark.parametrize(
    ("updated", "expected"),
    [
        pytest.param(make_pod(), QueueingHint.QUEUE, id="gates-removed"),
        pytest.param(make_pod(scheduling_gates=("b",)), QueueingHint.SKIP, id="gates-remain"),
        pytest.param(make_pod("other"), QueueingHint.SKIP, id="another-pod"),
    ],
)
def test_events_to_register(updated: Pod, expected: QueueingHint) -> None:
    plugin = schedulinggates.new(None, FakeHandle())
    [registered] = plugin.events_to_register()
    assert registered.event.matches(
        ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES)
    )
    assert registered.hint is not None
    gated = make_pod(scheduling_gates=("a", "b"))
    assert registered.hint(gated, make_pod(scheduling_gates=("a", "b")), updated) is expected
