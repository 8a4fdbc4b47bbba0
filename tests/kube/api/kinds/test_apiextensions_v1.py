"""apiextensions.k8s.io/v1: CustomResourceDefinition defaults, validation and its schema type."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kube.api import walk
from kube.api.codec import decode_json, to_builtins
from kube.api.errors import ErrorType
from kube.api.kinds.apiextensions_v1 import CustomResourceDefinition, JSONSchemaProps
from tests.kube.api.kinds.helpers import (
    CREATED,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    NOW,
    REQUIRED,
    decode,
    merge,
    problems,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "cronSpec": {"type": "string"},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}
VERSION = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA}}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "crontabs.stable.example.com", "creationTimestamp": CREATED},
    "spec": {
        "group": "stable.example.com",
        "names": {"plural": "crontabs", "kind": "CronTab", "shortNames": ["ct"]},
        "scope": "Namespaced",
        "versions": [VERSION],
    },
}
ROOT = "spec.versions[0].schema.openAPIV3Schema"
SPEC_PROPS = f"{ROOT}.properties[spec]"


def version(**patch: Any) -> dict[str, Any]:
    """The CRD with its one version patched."""
    return merge(CRD, {"spec": {"versions": [merge(VERSION, patch)]}})


def schema(patch: dict[str, Any], **version_patch: Any) -> dict[str, Any]:
    """The CRD with its schema patched (and its version, if asked)."""
    crd = version(**version_patch)
    crd["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": merge(SCHEMA, patch)}
    return crd


def spec_field(**props: Any) -> dict[str, Any]:
    """The CRD with one more property under ``spec``."""
    return schema({"properties": {"spec": {"properties": props}}})


def test_defaults() -> None:
    crd = to_builtins(decode(CRD, CustomResourceDefinition))
    assert crd["spec"]["names"] == {
        "plural": "crontabs",
        "singular": "crontab",
        "shortNames": ["ct"],
        "kind": "CronTab",
        "listKind": "CronTabList",
    }
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert crd["status"] == {"storedVersions": ["v1"]}


def test_defaults_keep_what_is_set() -> None:
    raw = merge(
        CRD,
        {
            "spec": {"names": {"singular": "ct", "listKind": "CronTabs"}},
            "status": {"storedVersions": ["v1", "v1beta1"]},
        },
    )
    crd = to_builtins(decode(raw, CustomResourceDefinition))
    assert (crd["spec"]["names"]["singular"], crd["spec"]["names"]["listKind"]) == (
        "ct",
        "CronTabs",
    )
    assert crd["status"]["storedVersions"] == ["v1", "v1beta1"]


NAME_MISMATCH = ("metadata.name", INVALID)
VALIDATION = [
    ("valid", CRD, []),
    ("name-not-plural-dot-group", merge(CRD, {"metadata": {"name": "crontabs.example.com"}}),
     [NAME_MISMATCH]),
    ("group-missing", merge(CRD, {"spec": {"group": None}}),
     [NAME_MISMATCH, ("spec.group", REQUIRED)]),
    ("group-without-dot", merge(CRD, {"metadata": {"name": "crontabs.example"},
                                      "spec": {"group": "example"}}),
     [("spec.group", INVALID)]),
    ("scope-missing", merge(CRD, {"spec": {"scope": None}}), [("spec.scope", REQUIRED)]),
    ("scope-unknown", merge(CRD, {"spec": {"scope": "Global"}}), [("spec.scope", NOT_SUPPORTED)]),
    ("kind-missing", merge(CRD, {"spec": {"names": {"kind": None}}}),
     [("spec.names.kind", REQUIRED), ("spec.names.listKind", REQUIRED),
      ("spec.names.singular", REQUIRED)]),
    ("kind-with-space", merge(CRD, {"spec": {"names": {"kind": "Cron Tab"}}}),
     [("spec.names.kind", INVALID), ("spec.names.listKind", INVALID),
      ("spec.names.singular", INVALID)]),
    ("singular-underscore", merge(CRD, {"spec": {"names": {"singular": "cron_tab"}}}),
     [("spec.names.singular", INVALID)]),
    ("list-kind-is-kind", merge(CRD, {"spec": {"names": {"listKind": "CronTab"}}}),
     [("spec.names.listKind", INVALID)]),
    ("short-name-upper", merge(CRD, {"spec": {"names": {"shortNames": ["CT"]}}}),
     [("spec.names.shortNames[0]", INVALID)]),
    ("categories", merge(CRD, {"spec": {"names": {"categories": ["all"]}}}), []),
    ("two-storage-versions",
     merge(CRD, {"spec": {"versions": [VERSION, dict(VERSION, name="v2")]}}),
     [("spec.versions", INVALID), ("status.storedVersions", INVALID)]),
    ("no-storage-version", version(storage=False),
     [("spec.versions", INVALID), ("status.storedVersions", INVALID)]),
    ("duplicate-version-names", merge(CRD, {"spec": {"versions": [
        VERSION, dict(VERSION, storage=False)]}}), [("spec.versions", INVALID)]),
    ("version-name", version(name="V1"), [("spec.versions[0].name", INVALID)]),
    ("version-without-schema", version(schema=None), [(ROOT, REQUIRED)]),
    ("deprecation-warning-not-deprecated", version(deprecationWarning="old"),
     [("spec.versions[0].deprecationWarning", INVALID)]),
    ("deprecation-warning", version(deprecated=True, deprecationWarning="use v2"), []),
    ("stored-version-gone", merge(CRD, {"status": {"storedVersions": ["v0"]}}),
     [("status.storedVersions", INVALID), ("status.storedVersions[0]", INVALID)]),
    ("preserve-unknown-fields", merge(CRD, {"spec": {"preserveUnknownFields": True}}),
     [("spec.preserveUnknownFields", INVALID)]),
    ("conversion-webhook", merge(CRD, {"spec": {"conversion": {"strategy": "Webhook", "webhook": {
        "clientConfig": {"service": {"namespace": "ns", "name": "conv"}},
        "conversionReviewVersions": ["v1"]}}}}), []),
    ("conversion-webhook-missing", merge(CRD, {"spec": {"conversion": {"strategy": "Webhook"}}}),
     [("spec.conversion.conversionReviewVersions", REQUIRED),
      ("spec.conversion.webhookClientConfig", REQUIRED)]),
    ("conversion-webhook-http", merge(CRD, {"spec": {"conversion": {"strategy": "Webhook",
        "webhook": {"clientConfig": {"url": "http://conv.example.com"},
                    "conversionReviewVersions": ["v1"]}}}}),
     [("spec.conversion.webhookClientConfig.url", INVALID)]),
    ("conversion-none-with-webhook", merge(CRD, {"spec": {"conversion": {"strategy": "None",
        "webhook": {"clientConfig": {"url": "https://conv.example.com"},
                    "conversionReviewVersions": ["v1"]}}}}),
     [("spec.conversion.conversionReviewVersions", FORBIDDEN),
      ("spec.conversion.webhookClientConfig", FORBIDDEN)]),
    ("conversion-strategy", merge(CRD, {"spec": {"conversion": {"strategy": "Magic"}}}),
     [("spec.conversion.strategy", NOT_SUPPORTED)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in VALIDATION], ids=[c[0] for c in VALIDATION]
)
def test_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, CustomResourceDefinition)) == sorted(expected)


def test_name_message() -> None:
    [error] = walk.validate(
        decode(merge(CRD, {"metadata": {"name": "crontabs.example.com"}}), CustomResourceDefinition)
    )
    assert error.detail == 'must be spec.names.plural+"."+spec.group'


COLUMN = {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}
SCALE = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
V = "spec.versions[0]"
SCHEMA_VALIDATION = [
    ("root-not-object", schema({"type": "string", "properties": None}),
     [(f"{ROOT}.type", INVALID)]),
    ("root-without-type", schema({"type": None}), [(f"{ROOT}.type", REQUIRED)]),
    ("root-nullable", schema({"nullable": True}), [(f"{ROOT}.nullable", FORBIDDEN)]),
    ("root-additional-properties", schema({"properties": None,
                                           "additionalProperties": {"type": "string"}}),
     [(f"{ROOT}.additionalProperties", FORBIDDEN)]),
    ("field-without-type", spec_field(schedule={"description": "when"}),
     [(f"{SPEC_PROPS}.properties[schedule].type", REQUIRED)]),
    ("int-or-string-without-type", spec_field(port={"x-kubernetes-int-or-string": True}), []),
    ("array-without-items", spec_field(tags={"type": "array"}),
     [(f"{SPEC_PROPS}.properties[tags].items", REQUIRED)]),
    ("item-without-type", spec_field(tags={"type": "array", "items": {"description": "t"}}),
     [(f"{SPEC_PROPS}.properties[tags].items.type", REQUIRED)]),
    ("unknown-type", spec_field(at={"type": "date"}),
     [(f"{SPEC_PROPS}.properties[at].type", NOT_SUPPORTED)]),
    ("ref", spec_field(other={"type": "object", "$ref": "#/definitions/x"}),
     [(f"{SPEC_PROPS}.properties[other].$ref", FORBIDDEN)]),
    ("ref-inside-any-of", spec_field(port={"x-kubernetes-int-or-string": True, "anyOf": [
        {"type": "integer"}, {"type": "string", "$ref": "#/x"}]}),
     [(f"{SPEC_PROPS}.properties[port].anyOf[1].$ref", FORBIDDEN)]),
    ("unique-items", spec_field(tags={"type": "array", "items": {"type": "string"},
                                      "uniqueItems": True}),
     [(f"{SPEC_PROPS}.properties[tags].uniqueItems", FORBIDDEN)]),
    ("items-array", spec_field(pair={"type": "array", "items": [{"type": "string"}]}),
     [(f"{SPEC_PROPS}.properties[pair].items", FORBIDDEN)]),
    ("properties-and-additional-properties", schema({"properties": {"spec": {
        "additionalProperties": {"type": "string"}}}}),
     [(f"{SPEC_PROPS}.additionalProperties", FORBIDDEN)]),
    ("map-of-strings", spec_field(labels={"type": "object",
                                          "additionalProperties": {"type": "string"}}), []),
    ("preserve-unknown-false", spec_field(raw={"type": "object",
                                               "x-kubernetes-preserve-unknown-fields": False}),
     [(f"{SPEC_PROPS}.properties[raw].x-kubernetes-preserve-unknown-fields", INVALID)]),
    ("list-map-without-keys", spec_field(ports={"type": "array", "x-kubernetes-list-type": "map",
                                                "items": {"type": "object"}}),
     [(f"{SPEC_PROPS}.properties[ports].x-kubernetes-list-map-keys", REQUIRED)]),
    ("list-map-key-not-a-property", spec_field(ports={
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"port": {"type": "integer"}}}}),
     [(f"{SPEC_PROPS}.properties[ports].x-kubernetes-list-map-keys", INVALID)]),
    ("list-map", spec_field(ports={
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "required": ["name"],
                  "properties": {"name": {"type": "string"}}}}), []),
    ("list-type-on-object", spec_field(o={"type": "object", "x-kubernetes-list-type": "set"}),
     [(f"{SPEC_PROPS}.properties[o].type", INVALID)]),
    ("map-type-unknown", spec_field(o={"type": "object", "x-kubernetes-map-type": "weird"}),
     [(f"{SPEC_PROPS}.properties[o].x-kubernetes-map-type", NOT_SUPPORTED)]),
    ("cel-rule", schema({"properties": {"spec": {"x-kubernetes-validations": [
        {"rule": "self.replicas <= 5", "message": "at most 5"}]}}}), []),
    ("cel-rule-empty", schema({"properties": {"spec": {"x-kubernetes-validations": [
        {"rule": " "}]}}}),
     [(f"{SPEC_PROPS}.x-kubernetes-validations[0].rule", REQUIRED)]),
    ("cel-reason", schema({"properties": {"spec": {"x-kubernetes-validations": [
        {"rule": "true", "reason": "Oops"}]}}}),
     [(f"{SPEC_PROPS}.x-kubernetes-validations[0].reason", NOT_SUPPORTED)]),
    ("printer-column", version(additionalPrinterColumns=[COLUMN]), []),
    ("printer-column-type", version(additionalPrinterColumns=[dict(COLUMN, type="text")]),
     [(f"{V}.additionalPrinterColumns[0].type", INVALID)]),
    ("printer-column-format", version(additionalPrinterColumns=[dict(COLUMN, format="hex")]),
     [(f"{V}.additionalPrinterColumns[0].format", INVALID)]),
    ("printer-column-without-path", version(additionalPrinterColumns=[{"name": "X",
                                                                       "type": "string"}]),
     [(f"{V}.additionalPrinterColumns[0].JSONPath", REQUIRED)]),
    ("printer-column-path-without-dot", version(additionalPrinterColumns=[
        dict(COLUMN, jsonPath="spec.cronSpec")]),
     [(f"{V}.additionalPrinterColumns[0].JSONPath", INVALID)]),
    ("scale", version(subresources={"status": {}, "scale": SCALE}), []),
    ("scale-spec-path-under-status", version(subresources={"scale": dict(
        SCALE, specReplicasPath=".status.replicas")}),
     [(f"{V}.subresources.scale.specReplicasPath", INVALID)]),
    ("scale-without-status-path", version(subresources={"scale": {
        "specReplicasPath": ".spec.replicas"}}),
     [(f"{V}.subresources.scale.statusReplicasPath", REQUIRED)]),
    ("scale-selector-path", version(subresources={"scale": dict(
        SCALE, labelSelectorPath="metadata.labels")}),
     [(f"{V}.subresources.scale.labelSelectorPath", INVALID)]),
    ("status-with-root-any-of",
     schema({"anyOf": [{"required": ["spec"]}]}, subresources={"status": {}}),
     [(ROOT, INVALID)]),
    ("status-with-root-description", schema({"description": "d"}, subresources={"status": {}}),
     []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[1:] for c in SCHEMA_VALIDATION],
    ids=[c[0] for c in SCHEMA_VALIDATION],
)
def test_schema_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, CustomResourceDefinition)) == sorted(expected)


def test_status_subresource_root_must_be_object() -> None:
    raw = version(subresources={"status": {}})
    raw["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {"type": "array", "items": {}}
    errors = [
        e for e in walk.validate(decode(raw, CustomResourceDefinition)) if e.field == f"{ROOT}.type"
    ]
    assert [e.detail for e in errors] == [
        'only "object" is allowed as the type at the root of the schema if the status '
        "subresource is enabled",
        "must be object at the root",
    ]


UPDATES = [
    ("versions-may-change", {"spec": {"versions": [dict(VERSION, served=False)]}}, False, []),
    ("group-may-not", {"metadata": {"name": "crontabs.other.example.com"},
                       "spec": {"group": "other.example.com"}}, False,
     [("metadata.name", INVALID), ("spec.group", INVALID)]),
    ("plural-may-not", {"metadata": {"name": "crons.stable.example.com"},
                        "spec": {"names": {"plural": "crons"}}}, False,
     [("metadata.name", INVALID), ("spec.names.plural", INVALID)]),
    ("scope-before-established", {"spec": {"scope": "Cluster"}}, False, []),
    ("scope-once-established", {"spec": {"scope": "Cluster"}}, True, [("spec.scope", INVALID)]),
    ("kind-once-established", {"spec": {"names": {"kind": "Cron"}}}, True,
     [("spec.names.kind", INVALID)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("patch", "established", "expected"), [c[1:] for c in UPDATES], ids=[c[0] for c in UPDATES]
)
def test_updates(
    patch: dict[str, Any], established: bool, expected: list[tuple[str, ErrorType]]
) -> None:
    old_raw = CRD
    if established:
        old_raw = merge(
            CRD, {"status": {"conditions": [{"type": "Established", "status": "True"}]}}
        )
    errors = walk.validate_update(
        decode(merge(CRD, patch), CustomResourceDefinition),
        decode(old_raw, CustomResourceDefinition),
    )
    assert sorted((e.field, e.type) for e in errors) == expected


def test_registration_and_columns() -> None:
    info = CustomResourceDefinition.kind_info
    assert (info.short_names, info.categories, info.subresources) == (
        ("crd", "crds"),
        ("api-extensions",),
        ("status",),
    )
    crd = decode(CRD, CustomResourceDefinition)
    assert [(c.name, c.cell(crd, NOW)) for c in info.columns] == [
        ("Name", "crontabs.stable.example.com"),
        ("Created At", CREATED),
    ]


RICH_SCHEMA = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "type": "object",
    "description": "every keyword",
    "required": ["spec"],
    "properties": {
        "spec": {
            "type": "object",
            "default": {"replicas": 1, "labels": {"a": None}},
            "example": [1, "two", None],
            "x-kubernetes-validations": [
                {
                    "rule": "self.replicas >= 0",
                    "fieldPath": ".replicas",
                    "reason": "FieldValueInvalid",
                }
            ],
            "properties": {
                "replicas": {"type": "integer", "maximum": 5, "minimum": 0.5, "multipleOf": 1},
                "mode": {"type": "string", "enum": ["a", "b", None], "nullable": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "open": {"type": "object", "additionalProperties": True},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                },
                "either": {"not": {"type": "string"}, "oneOf": [{"required": ["x"]}]},
                "embedded": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "x-kubernetes-preserve-unknown-fields": True,
                    "x-kubernetes-map-type": "atomic",
                },
                "tuple": {"items": [{"type": "string"}], "additionalItems": False},
            },
            "externalDocs": {"url": "https://example.com"},
            "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
            "definitions": {"x": {"$ref": "#/y", "id": "x"}},
            "patternProperties": {"^x-": {"type": "string"}},
        }
    },
}


def test_schema_round_trips_every_keyword() -> None:
    props = decode_json(msgspec.json.encode(RICH_SCHEMA), JSONSchemaProps)
    assert props.unknown_fields == []
    assert to_builtins(props.obj) == RICH_SCHEMA
    spec = (props.obj.properties or {})["spec"]
    assert isinstance((spec.properties or {})["labels"].additional_properties, JSONSchemaProps)
    assert (spec.properties or {})["open"].additional_properties is True
    assert isinstance((spec.properties or {})["tuple"].items, list)


def test_schema_typos_are_unknown_fields() -> None:
    raw = {"type": "object", "properties": {"a": {"type": "string", "maxlength": 3}}}
    decoded = decode_json(msgspec.json.encode(raw), JSONSchemaProps)
    assert decoded.unknown_fields == ["properties[a].maxlength"]
