"""Whether tolerations tolerate taints, as upstream's ``Toleration.ToleratesTaint``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kube.api.kinds.core_v1.node import Taint
from kube.api.kinds.core_v1.pod import Toleration
from kube.api.taints import find_untolerated_taint, merge_tolerations, tolerates

TAINT = Taint(key="k", value="v", effect="NoSchedule")


def blocking(taint: Taint) -> bool:
    return taint.effect in ("NoSchedule", "NoExecute")


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        pytest.param(
            Toleration(key="k", operator="Equal", value="v", effect="NoSchedule"), True, id="exact"
        ),
        pytest.param(Toleration(key="k", value="v"), True, id="defaults"),
        pytest.param(Toleration(key="k", operator="Equal", value="w"), False, id="other-value"),
        pytest.param(Toleration(key="k", operator="Exists"), True, id="exists"),
        pytest.param(Toleration(operator="Exists"), True, id="exists-any-key"),
        pytest.param(Toleration(key="j", operator="Exists"), False, id="other-key"),
        pytest.param(
            Toleration(key="k", operator="Exists", effect="NoExecute"), False, id="other-effect"
        ),
        pytest.param(Toleration(key="k", operator="Gt", value="v"), False, id="unknown-operator"),
    ],
)
def test_tolerates(toleration: Toleration, expected: bool) -> None:
    assert tolerates(toleration, TAINT) is expected


@pytest.mark.parametrize(
    ("taints", "tolerations", "include", "expected"),
    [
        pytest.param([], [], None, None, id="no-taints"),
        pytest.param([TAINT], [], None, TAINT, id="untolerated"),
        pytest.param([TAINT], [Toleration(key="k", operator="Exists")], None, None, id="tolerated"),
        pytest.param(
            [Taint(key="p", effect="PreferNoSchedule")],
            [],
            blocking,
            None,
            id="filtered-out",
        ),
        pytest.param(
            [Taint(key="p", effect="PreferNoSchedule"), TAINT],
            [],
            blocking,
            TAINT,
            id="first-included",
        ),
    ],
)
def test_find_untolerated_taint(
    taints: list[Taint],
    tolerations: list[Toleration],
    include: Callable[[Taint], bool] | None,
    expected: Taint | None,
) -> None:
    assert find_untolerated_taint(taints, tolerations, include) == expected


NO_EXECUTE_60 = Toleration(key="k", operator="Exists", effect="NoExecute", toleration_seconds=60)


@pytest.mark.parametrize(
    ("first", "second", "merged"),
    [
        pytest.param([], [Toleration(key="k", operator="Exists")], [0], id="added"),
        pytest.param(
            [Toleration(key="k", operator="Exists")],
            [Toleration(key="k", operator="Exists")],
            [0],
            id="equal-kept-once",
        ),
        pytest.param(
            [Toleration(key="k", operator="Equal", value="v")],
            [Toleration(key="k", operator="Exists")],
            [1],
            id="narrower-dropped",
        ),
        pytest.param(
            [Toleration(operator="Exists")],
            [Toleration(key="k", operator="Equal", value="v", effect="NoSchedule")],
            [0],
            id="match-all-covers",
        ),
        pytest.param(
            [Toleration(key="k", operator="Exists", effect="NoSchedule")],
            [Toleration(key="k", operator="Exists", effect="NoExecute")],
            [0, 1],
            id="other-effect-kept",
        ),
        pytest.param(
            [NO_EXECUTE_60],
            [Toleration(key="k", operator="Exists", effect="NoExecute", toleration_seconds=0)],
            [0],
            id="shorter-seconds-dropped",
        ),
        pytest.param(
            [NO_EXECUTE_60],
            [Toleration(key="k", operator="Exists", effect="NoExecute")],
            [1],
            id="unbounded-covers-bounded",
        ),
    ],
)
def test_merge_tolerations(
    first: list[Toleration], second: list[Toleration], merged: list[int]
) -> None:
    """As upstream's MergeTolerations: one of equal tolerations, none another covers; the
    indexes are into ``first + second``."""
    every = [*first, *second]
    assert merge_tolerations(first, second) == [every[i] for i in merged]
