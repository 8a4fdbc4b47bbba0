"""The structural-schema walker custom resources are pruned, defaulted and validated with."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.apiserver.crd import customresources
from controlplane.apiserver.crd import schema as crd_schema
from kube.api.errors import ROOT, ErrorList
from kube.api.scheme import version_priority

SPEC: dict[str, Any] = {
    "type": "object",
    "required": ["image"],
    "properties": {
        "image": {"type": "string", "minLength": 1},
        "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
        "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0, "multipleOf": 0.5},
        "policy": {"type": "string", "enum": ["Allow", "Forbid"], "default": "Allow"},
        "host": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
        "when": {"type": "string", "format": "date-time"},
        "port": {"x-kubernetes-int-or-string": True},
        "note": {"type": "string", "nullable": True},
        "tags": {"type": "array", "maxItems": 2, "minItems": 1, "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "env": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
            },
        },
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "nested": {
            "type": "object",
            "default": {},
            "properties": {"level": {"type": "string", "default": "info"}},
        },
    },
}
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"spec": SPEC}}


def errors_of(spec: Any) -> list[str]:
    errors = ErrorList()
    crd_schema.validate({"spec": spec}, SCHEMA, ROOT, errors)
    return [str(e) for e in errors]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"image": "x"}, []),
        ({}, ["spec.image: Required value"]),
        (
            {"image": "x", "replicas": "3"},
            [
                'spec.replicas: Invalid value: "string": spec.replicas in body must be of type '
                'integer: "string"'
            ],
        ),
        (
            {"image": "x", "replicas": 1.5},
            [
                'spec.replicas: Invalid value: "number": spec.replicas in body must be of type '
                'integer: "number"'
            ],
        ),
        ({"image": "x", "replicas": 2.0}, []),
        ({"image": "x", "ratio": 2}, []),
        (
            {"image": "x", "replicas": 11},
            [
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or "
                "equal to 10"
            ],
        ),
        (
            {"image": "x", "replicas": -1},
            [
                "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or "
                "equal to 0"
            ],
        ),
        (
            {"image": "x", "ratio": 0},
            ["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"],
        ),
        (
            {"image": "x", "ratio": 0.7},
            ["spec.ratio: Invalid value: 0.7: spec.ratio in body should be a multiple of 0.5"],
        ),
        (
            {"image": "x", "policy": "Maybe"},
            ['spec.policy: Unsupported value: "Maybe": supported values: "Allow", "Forbid"'],
        ),
        (
            {"image": ""},
            ['spec.image: Invalid value: "": spec.image in body should be at least 1 chars long'],
        ),
        (
            {"image": "x", "host": "ABCDEFG"},
            [
                "spec.host: Too long: may not be more than 5 bytes",
                "spec.host: Invalid value: \"ABCDEFG\": spec.host in body should match '^[a-z]+$'",
            ],
        ),
        (
            {"image": "x", "when": "yesterday"},
            [
                'spec.when: Invalid value: "yesterday": spec.when in body must be of type '
                'date-time: "yesterday"'
            ],
        ),
        ({"image": "x", "when": "2024-01-02T03:04:05Z"}, []),
        ({"image": "x", "port": 80}, []),
        ({"image": "x", "port": "http"}, []),
        (
            {"image": "x", "port": True},
            [
                'spec.port: Invalid value: "boolean": spec.port in body must be of type '
                'integer,string: "boolean"'
            ],
        ),
        ({"image": "x", "note": None}, []),
        (
            {"image": "x", "tags": ["a", "b", "c"]},
            ["spec.tags: Too many: 3: must have at most 2 items"],
        ),
        (
            {"image": "x", "tags": []},
            ["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"],
        ),
        (
            {"image": "x", "tags": ["a", 1]},
            [
                'spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type '
                'string: "integer"'
            ],
        ),
        (
            {"image": "x", "labels": {"a": 1}},
            [
                'spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type '
                'string: "integer"'
            ],
        ),
        (
            {"image": "x", "env": [{"name": "A"}, {"value": "v"}, {"name": "A"}]},
            ["spec.env[1].name: Required value", 'spec.env[2]: Duplicate value: {"name": "A"}'],
        ),
        ({"image": "x", "free": {"anything": [1, {"goes": True}]}}, []),
        (
            "text",
            ['spec: Invalid value: "string": spec in body must be of type object: "string"'],
        ),
    ],
    ids=[
        "valid",
        "required",
        "string-for-integer",
        "fraction-for-integer",
        "whole-float-is-integer",
        "integer-is-number",
        "maximum",
        "minimum",
        "exclusive-minimum",
        "multiple-of",
        "enum",
        "min-length",
        "max-length-and-pattern",
        "date-time-bad",
        "date-time-good",
        "int-or-string-int",
        "int-or-string-string",
        "int-or-string-bool",
        "nullable",
        "max-items",
        "min-items",
        "items",
        "additional-properties",
        "list-map-keys",
        "preserve-unknown",
        "object-type",
    ],
)
def test_validate(spec: Any, expected: list[str]) -> None:
    assert errors_of(spec) == expected


@pytest.mark.parametrize(
    ("value", "kept", "dropped"),
    [
        ({"spec": {"image": "x"}}, {"spec": {"image": "x"}}, []),
        ({"spec": {"image": "x", "imagee": "y"}}, {"spec": {"image": "x"}}, ["spec.imagee"]),
        (
            {"spec": {"env": [{"name": "A", "valu": "b"}]}},
            {"spec": {"env": [{"name": "A"}]}},
            ["spec.env[0].valu"],
        ),
        ({"spec": {"free": {"x": {"y": 1}}}}, {"spec": {"free": {"x": {"y": 1}}}}, []),
        ({"spec": {"labels": {"a": "b"}}}, {"spec": {"labels": {"a": "b"}}}, []),
        ({"spec": {"image": None, "note": None}}, {"spec": {"note": None}}, []),
        ({"other": 1}, {}, ["other"]),
    ],
    ids=["known", "unknown", "in-list", "preserved", "map", "nulls", "top-level"],
)
def test_prune(value: Any, kept: Any, dropped: list[str]) -> None:
    assert crd_schema.prune(value, SCHEMA) == dropped
    assert value == kept


@pytest.mark.parametrize(
    ("value", "defaulted"),
    [
        (
            {"spec": {"image": "x"}},
            {
                "spec": {
                    "image": "x",
                    "replicas": 1,
                    "policy": "Allow",
                    "nested": {"level": "info"},
                }
            },
        ),
        (
            {"spec": {"replicas": 3, "policy": None, "nested": {"level": "debug"}}},
            {"spec": {"replicas": 3, "policy": "Allow", "nested": {"level": "debug"}}},
        ),
        ({}, {}),
    ],
    ids=["absent", "present-and-null", "no-parent"],
)
def test_default(value: Any, defaulted: Any) -> None:
    crd_schema.default(value, SCHEMA)
    assert value == defaulted


@pytest.mark.parametrize(
    ("path", "data", "found"),
    [
        (".spec.replicas", {"spec": {"replicas": 3}}, [3]),
        (".spec.missing", {"spec": {}}, []),
        (
            '.status.conditions[?(@.type=="Ready")].status',
            {
                "status": {
                    "conditions": [
                        {"type": "A", "status": "x"},
                        {"type": "Ready", "status": "True"},
                    ]
                }
            },
            ["True"],
        ),
        (".items[1]", {"items": [1, 2]}, [2]),
        (".items[*].a", {"items": [{"a": 1}, {"a": 2}]}, [1, 2]),
        ("{.metadata['name']}", {"metadata": {"name": "n"}}, ["n"]),
    ],
    ids=["dotted", "missing", "filter", "index", "star", "braces-quoted"],
)
def test_jsonpath(path: str, data: Any, found: list[Any]) -> None:
    assert customresources.find(data, customresources.parse_jsonpath(path)) == found


def test_version_priority() -> None:
    names = ["v1alpha1", "v2beta1", "v1", "v1beta2", "v2", "foo"]
    assert sorted(names, key=version_priority) == [
        "v2",
        "v1",
        "v2beta1",
        "v1beta2",
        "v1alpha1",
        "foo",
    ]
