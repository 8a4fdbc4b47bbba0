"""resource.k8s.io/v1 DeviceClass: defaults, validation with upstream's paths and messages, the
list limits, printer cells and registration."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.codec import to_builtins
from kube.api.errors import ErrorType
from kube.api.kinds.resource_v1 import DeviceClass
from tests.kube.api.kinds.helpers import (
    CREATED,
    INVALID,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    cells,
    decode,
    merge,
    ordered,
    problems,
)

SELECTOR = {"cel": {"expression": 'device.driver == "gpu.example.com"'}}
OPAQUE = {"opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "TimeSlicing"}}}
CLASS: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com", "creationTimestamp": CREATED},
    "spec": {"selectors": [SELECTOR], "config": [OPAQUE]},
}


def device_class(**spec: Any) -> dict[str, Any]:
    return merge(CLASS, {"spec": spec})


def opaque(**fields: Any) -> dict[str, Any]:
    return {"opaque": {"driver": "gpu.example.com", "parameters": {}, **fields}}


def test_a_class_without_spec_gets_an_empty_one() -> None:
    bare = merge(CLASS, {"spec": None})
    assert to_builtins(decode(bare, DeviceClass))["spec"] == {}


CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", CLASS, []),
    ("selector-without-cel", device_class(selectors=[{}]), [("spec.selectors[0].cel", REQUIRED)]),
    (
        "empty-expression",
        device_class(selectors=[{"cel": {"expression": ""}}]),
        [("spec.selectors[0].cel.expression", REQUIRED)],
    ),
    (
        "long-expression",
        device_class(selectors=[{"cel": {"expression": "x" * (10 * 1024 + 1)}}]),
        [("spec.selectors[0].cel.expression", TOO_LONG)],
    ),
    ("too-many-selectors", device_class(selectors=[SELECTOR] * 33), [("spec.selectors", TOO_MANY)]),
    ("too-many-configs", device_class(config=[OPAQUE] * 33), [("spec.config", TOO_MANY)]),
    ("config-without-opaque", device_class(config=[{}]), [("spec.config[0].opaque", REQUIRED)]),
    (
        "driver-name",
        device_class(config=[opaque(driver="Not_A_Driver")]),
        [("spec.config[0].opaque.driver", INVALID)],
    ),
    (
        "driver-too-long",
        device_class(config=[opaque(driver="d" * 64)]),
        [("spec.config[0].opaque.driver", TOO_LONG)],
    ),
    (
        "no-parameters",
        device_class(config=[opaque(parameters=None)]),
        [("spec.config[0].opaque.parameters", REQUIRED)],
    ),
    (
        "parameters-not-an-object",
        device_class(config=[opaque(parameters=[1, 2])]),
        [("spec.config[0].opaque.parameters", INVALID)],
    ),
    (
        "parameters-too-long",
        device_class(config=[opaque(parameters={"blob": "x" * (10 * 1024)})]),
        [("spec.config[0].opaque.parameters", TOO_LONG)],
    ),
    ("extended-resource", device_class(extendedResourceName="example.com/gpu"), []),
    (
        "native-resource",
        device_class(extendedResourceName="cpu"),
        [("spec.extendedResourceName", INVALID)],
    ),
]


@pytest.mark.parametrize(("raw", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, DeviceClass)) == ordered(expected)


def test_messages() -> None:
    raw = device_class(
        config=[opaque(parameters="text")], extendedResourceName="requests.example.com/gpu"
    )
    assert sorted(str(e) for e in walk.validate(decode(raw, DeviceClass))) == [
        'spec.config[0].opaque.parameters: Invalid value: "<value omitted>": parameters must '
        "be a valid JSON object",
        'spec.extendedResourceName: Invalid value: "requests.example.com/gpu": must be a valid '
        "extended resource name",
    ]


def test_cells_and_registration() -> None:
    assert cells(decode(CLASS, DeviceClass)) == ["gpu.example.com", "5m"]
    info = DeviceClass.kind_info
    assert (info.plural, info.namespaced, info.short_names, info.subresources) == (
        "deviceclasses",
        False,
        (),
        (),
    )
    assert [c.name for c in info.columns] == ["Name", "Age"]
    assert info.returns_deleted
