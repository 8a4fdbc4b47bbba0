"""node.k8s.io/v1 RuntimeClass: validation with upstream's paths and messages, the immutable
handler, printer cells and registration."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.errors import ErrorType
from kube.api.kinds.node_v1 import RuntimeClass
from tests.kube.api.kinds.helpers import (
    CREATED,
    DUPLICATE,
    INVALID,
    REQUIRED,
    cells,
    decode,
    merge,
    ordered,
    problems,
    update_problems,
)

CLASS: dict[str, Any] = {
    "apiVersion": "node.k8s.io/v1",
    "kind": "RuntimeClass",
    "metadata": {"name": "gvisor", "creationTimestamp": CREATED},
    "handler": "runsc",
    "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
    "scheduling": {
        "nodeSelector": {"sandbox": "gvisor"},
        "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}],
    },
}
TOLERATION = {"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        pytest.param({}, [], id="valid"),
        pytest.param({"overhead": None, "scheduling": None}, [], id="handler-only"),
        pytest.param({"handler": None}, [("handler", REQUIRED)], id="no-handler"),
        pytest.param({"handler": "run.sc"}, [("handler", INVALID)], id="handler-not-a-label"),
        pytest.param({"handler": "x" * 64}, [("handler", INVALID)], id="handler-too-long"),
        pytest.param(
            {"overhead": {"podFixed": {"cpu": "-1"}}},
            [("overhead.limits[cpu]", INVALID)],
            id="negative-overhead",
        ),
        pytest.param(
            {"overhead": {"podFixed": {"bad name!": "1"}}},
            [("overhead.limits[bad name!]", INVALID)],
            id="bad-resource-name",
        ),
        pytest.param(
            {"scheduling": {"nodeSelector": {"bad key!": "x"}}},
            [("scheduling.nodeSelector", INVALID)],
            id="bad-selector-key",
        ),
        pytest.param(
            {"scheduling": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}},
            [("scheduling.tolerations[0].operator", INVALID)],
            id="bad-toleration",
        ),
        pytest.param(
            {"scheduling": {"tolerations": [TOLERATION, TOLERATION]}},
            [("scheduling.tolerations[1]", DUPLICATE)],
            id="duplicate-toleration",
        ),
    ],
)
def test_validation(patch: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(merge(CLASS, patch), RuntimeClass)) == ordered(expected)


def test_messages() -> None:
    bad = walk.validate(decode(merge(CLASS, {"handler": "Run_SC"}), RuntimeClass))
    assert [str(e) for e in bad] == [
        'handler: Invalid value: "Run_SC": a lowercase RFC 1123 label must consist of lower '
        "case alphanumeric characters or '-', and must start and end with an alphanumeric "
        "character (e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    ]
    negative = walk.validate(
        decode(merge(CLASS, {"overhead": {"podFixed": {"cpu": "-1"}}}), RuntimeClass)
    )
    assert [str(e) for e in negative] == [
        'overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0'
    ]
    twice = {"scheduling": {"tolerations": [TOLERATION, TOLERATION]}}
    duplicate = walk.validate(decode(merge(CLASS, twice), RuntimeClass))
    assert [str(e) for e in duplicate] == [
        'scheduling.tolerations[1]: Duplicate value: {"effect": "NoSchedule", "key": "sandbox", '
        '"operator": "Exists"}'
    ]


def test_handler_is_immutable_the_rest_is_not() -> None:
    assert update_problems(CLASS, merge(CLASS, {"handler": "kata"}), RuntimeClass) == [
        ("handler", INVALID)
    ]
    changed = merge(CLASS, {"overhead": {"podFixed": {"cpu": "1"}}, "scheduling": None})
    assert update_problems(CLASS, changed, RuntimeClass) == []


def test_cells_and_registration() -> None:
    assert cells(decode(CLASS, RuntimeClass)) == ["gvisor", "runsc", "5m"]
    info = RuntimeClass.kind_info
    assert (info.group, info.version, info.plural, info.namespaced, info.short_names) == (
        "node.k8s.io",
        "v1",
        "runtimeclasses",
        False,
        (),
    )
    assert [c.name for c in info.columns] == ["Name", "Handler", "Age"]
    assert not info.returns_deleted
