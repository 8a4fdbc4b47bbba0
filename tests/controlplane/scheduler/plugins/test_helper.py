from __future__ import annotations

import pytest

from controlplane.scheduler.framework.interface import SUCCESS
from controlplane.scheduler.plugins import helper


@pytest.mark.parametrize(
    ("reverse", "scores", "expected"),
    [
        pytest.param(False, [1, 2, 4], [25, 50, 100], id="scaled"),
        pytest.param(True, [1, 2, 4], [75, 50, 0], id="reversed"),
        pytest.param(False, [0, 0], [0, 0], id="all-zero"),
        pytest.param(True, [0, 0], [100, 100], id="all-zero-reversed"),
        pytest.param(False, [1, 3], [33, 100], id="truncates"),
        pytest.param(False, [], [], id="empty"),
    ],
)
def test_default_normalize_score(reverse: bool, scores: list[int], expected: list[int]) -> None:
    normalized = list(scores)
    assert helper.default_normalize_score(100, reverse, normalized) == SUCCESS
    assert normalized == expected
