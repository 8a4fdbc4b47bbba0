"""Whether tolerations tolerate taints, as upstream's ``Toleration.ToleratesTaint``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kube.api.kinds.core_v1.node import Taint
from kube.api.kinds.core_v1.pod import Toleration
from kube.api.taints import find_untolerated_taint, tolerates

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
