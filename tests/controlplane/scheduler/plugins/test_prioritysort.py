from __future__ import annotations

import pytest

from controlplane.scheduler.framework.types import PodInfo, QueuedPodInfo
from controlplane.scheduler.plugins import prioritysort
from tests.controlplane.scheduler.builders import FakeHandle, make_pod


def queued(priority: int | None, timestamp: float) -> QueuedPodInfo:
    return QueuedPodInfo(PodInfo.of(make_pod(priority=priority)), timestamp)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param(queued(10, 2), queued(5, 1), True, id="higher-priority-first"),
        pytest.param(queued(5, 1), queued(10, 2), False, id="lower-priority-later"),
        pytest.param(queued(5, 1), queued(5, 2), True, id="equal-priority-earlier-first"),
        pytest.param(queued(5, 2), queued(5, 1), False, id="equal-priority-later-second"),
        pytest.param(queued(5, 1), queued(5, 1), False, id="identical-not-less"),
        pytest.param(queued(None, 1), queued(0, 2), True, id="no-priority-is-zero"),
        pytest.param(queued(-1, 1), queued(None, 2), False, id="negative-below-unset"),
    ],
)
def test_less(a: QueuedPodInfo, b: QueuedPodInfo, expected: bool) -> None:
    assert prioritysort.new(None, FakeHandle()).less(a, b) is expected
