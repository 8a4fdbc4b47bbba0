"""The three patch types: RFC 6902 and RFC 7386 examples, upstream's strategic merge cases."""

from __future__ import annotations

import copy
from typing import Annotated, Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kube.api.kinds  # noqa: F401  (registers every kind)
from controlplane.apiserver.endpoints.patch import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from kube.api.kinds.apps_v1 import Deployment
from kube.api.kinds.core_v1.pod import Pod
from kube.api.struct import RawJSON, Struct, merge_set, meta


def y(text: str) -> Any:
    return yaml.safe_load(text)


# JSON patch: RFC 6902 appendix A.

RFC6902_EXAMPLES = [
    pytest.param(
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux"}],
        {"baz": "qux", "foo": "bar"},
        id="A.1-add-object-member",
    ),
    pytest.param(
        {"foo": ["bar", "baz"]},
        [{"op": "add", "path": "/foo/1", "value": "qux"}],
        {"foo": ["bar", "qux", "baz"]},
        id="A.2-add-array-element",
    ),
    pytest.param(
        {"baz": "qux", "foo": "bar"},
        [{"op": "remove", "path": "/baz"}],
        {"foo": "bar"},
        id="A.3-remove-object-member",
    ),
    pytest.param(
        {"foo": ["bar", "qux", "baz"]},
        [{"op": "remove", "path": "/foo/1"}],
        {"foo": ["bar", "baz"]},
        id="A.4-remove-array-element",
    ),
    pytest.param(
        {"baz": "qux", "foo": "bar"},
        [{"op": "replace", "path": "/baz", "value": "boo"}],
        {"baz": "boo", "foo": "bar"},
        id="A.5-replace-value",
    ),
    pytest.param(
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
        {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
        id="A.6-move-value",
    ),
    pytest.param(
        {"foo": ["all", "grass", "cows", "eat"]},
        [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
        {"foo": ["all", "cows", "eat", "grass"]},
        id="A.7-move-array-element",
    ),
    pytest.param(
        {"baz": "qux", "foo": ["a", 2, "c"]},
        [
            {"op": "test", "path": "/baz", "value": "qux"},
            {"op": "test", "path": "/foo/1", "value": 2},
        ],
        {"baz": "qux", "foo": ["a", 2, "c"]},
        id="A.8-test-success",
    ),
    pytest.param(
        {"foo": "bar"},
        [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
        {"foo": "bar", "child": {"grandchild": {}}},
        id="A.10-add-nested-member-object",
    ),
    pytest.param(
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
        {"foo": "bar", "baz": "qux"},
        id="A.11-ignore-unrecognized-elements",
    ),
    pytest.param(
        {"/": 9, "~1": 10},
        [{"op": "test", "path": "/~01", "value": 10}],
        {"/": 9, "~1": 10},
        id="A.14-escape-ordering",
    ),
    pytest.param(
        {"foo": ["bar"]},
        [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
        {"foo": ["bar", ["abc", "def"]]},
        id="A.16-add-array-value",
    ),
    # Beyond the appendix.
    pytest.param(
        {"a/b": 1, "m~n": 2},
        [
            {"op": "replace", "path": "/a~1b", "value": 3},
            {"op": "remove", "path": "/m~0n"},
        ],
        {"a/b": 3},
        id="escapes-in-member-names",
    ),
    pytest.param(
        {"a": [1, 2]},
        [{"op": "add", "path": "/a/2", "value": 3}],
        {"a": [1, 2, 3]},
        id="add-at-array-length-appends",
    ),
    pytest.param(
        {"a": 1},
        [{"op": "add", "path": "/a", "value": 2}],
        {"a": 2},
        id="add-existing-member-replaces",
    ),
    pytest.param(
        {"a": 1},
        [{"op": "replace", "path": "", "value": [1]}],
        [1],
        id="replace-whole-document",
    ),
    pytest.param(
        {"a": {"b": [1]}},
        [{"op": "copy", "from": "/a", "path": "/c"}, {"op": "add", "path": "/c/b/-", "value": 2}],
        {"a": {"b": [1]}, "c": {"b": [1, 2]}},
        id="copy-is-deep",
    ),
    pytest.param(
        {"a": {"b": 1}},
        [{"op": "move", "from": "/a", "path": "/a"}],
        {"a": {"b": 1}},
        id="move-onto-itself",
    ),
    pytest.param(
        {"a": 1.0, "b": [True]},
        [{"op": "test", "path": "/a", "value": 1}, {"op": "test", "path": "/b", "value": [True]}],
        {"a": 1.0, "b": [True]},
        id="test-numbers-by-value",
    ),
    pytest.param(
        {"": {"": 1}},
        [{"op": "test", "path": "//", "value": 1}],
        {"": {"": 1}},
        id="empty-member-names",
    ),
]


@pytest.mark.parametrize(("doc", "patch", "expected"), RFC6902_EXAMPLES)
def test_json_patch(doc: Any, patch: Any, expected: Any) -> None:
    before = copy.deepcopy((doc, patch))
    assert apply_json_patch(doc, patch) == expected
    assert (doc, patch) == before


JSON_PATCH_FAILURES = [
    pytest.param({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}], id="A.9-test"),
    pytest.param(
        {"foo": "bar"},
        [{"op": "add", "path": "/baz/bat", "value": "qux"}],
        id="A.12-add-to-nonexistent-target",
    ),
    pytest.param(
        {"/": 9, "~1": 10},
        [{"op": "test", "path": "/~01", "value": "10"}],
        id="A.15-string-is-not-number",
    ),
    pytest.param({"a": 1}, [{"op": "test", "path": "/a", "value": True}], id="bool-is-not-1"),
    pytest.param({"a": 1}, [{"op": "remove", "path": "/b"}], id="remove-missing"),
    pytest.param({"a": 1}, [{"op": "replace", "path": "/b", "value": 1}], id="replace-missing"),
    pytest.param({"a": 1}, [{"op": "test", "path": "/b", "value": None}], id="test-missing"),
    pytest.param({"a": [1]}, [{"op": "add", "path": "/a/2", "value": 1}], id="add-past-end"),
    pytest.param({"a": [1]}, [{"op": "replace", "path": "/a/1", "value": 1}], id="index-oob"),
    pytest.param({"a": [1, 2]}, [{"op": "remove", "path": "/a/01"}], id="leading-zero"),
    pytest.param({"a": [1]}, [{"op": "remove", "path": "/a/-"}], id="dash-not-for-remove"),
    pytest.param({"a": [1]}, [{"op": "remove", "path": "/a/-1"}], id="negative-index"),
    pytest.param({"a": 1}, [{"op": "add", "path": "/a/b", "value": 1}], id="add-into-scalar"),
    pytest.param({"a": 1}, [{"op": "remove", "path": ""}], id="remove-root"),
    pytest.param(
        {"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/c"}], id="move-into-child"
    ),
    pytest.param({"a": 1}, [{"op": "copy", "from": "/b", "path": "/c"}], id="copy-missing"),
]


@pytest.mark.parametrize(("doc", "patch"), JSON_PATCH_FAILURES)
def test_json_patch_failures_are_422(doc: Any, patch: Any) -> None:
    with pytest.raises(PatchError) as caught:
        apply_json_patch(doc, patch)
    assert caught.value.code == 422


MALFORMED_JSON_PATCHES = [
    pytest.param({"op": "add", "path": "/a", "value": 1}, id="not-a-list"),
    pytest.param(["add"], id="operation-not-an-object"),
    pytest.param([{"op": "frobnicate", "path": "/a"}], id="unknown-op"),
    pytest.param([{"path": "/a", "value": 1}], id="missing-op"),
    pytest.param([{"op": "add", "value": 1}], id="missing-path"),
    pytest.param([{"op": "add", "path": "/a"}], id="missing-value"),
    pytest.param([{"op": "move", "path": "/a"}], id="missing-from"),
    pytest.param([{"op": "remove", "path": "a"}], id="pointer-without-slash"),
    pytest.param([{"op": "remove", "path": "/a~2"}], id="bad-escape"),
    pytest.param([{"op": "remove", "path": 3}], id="path-not-a-string"),
]


@pytest.mark.parametrize("patch", MALFORMED_JSON_PATCHES)
def test_malformed_json_patches_are_400(patch: Any) -> None:
    with pytest.raises(PatchError) as caught:
        apply_json_patch({"a": 1}, patch)
    assert caught.value.code == 400


def test_json_patch_applies_all_or_nothing() -> None:
    doc = {"a": [1], "b": {"c": 1}}
    patch = [
        {"op": "add", "path": "/a/-", "value": 2},
        {"op": "remove", "path": "/b/c"},
        {"op": "test", "path": "/a/0", "value": 9},
    ]
    with pytest.raises(PatchError, match=r"operation 2 \(test '/a/0'\)"):
        apply_json_patch(doc, patch)
    assert doc == {"a": [1], "b": {"c": 1}}


def test_json_patch_values_are_copied() -> None:
    value: dict[str, Any] = {"x": []}
    result = apply_json_patch({}, [{"op": "add", "path": "/v", "value": value}])
    result["v"]["x"].append(1)
    assert value == {"x": []}


# JSON merge patch: RFC 7386 appendix A.

RFC7386_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(
    ("doc", "patch", "expected"),
    [pytest.param(*case, id=f"A-{n + 1}") for n, case in enumerate(RFC7386_EXAMPLES)],
)
def test_merge_patch(doc: Any, patch: Any, expected: Any) -> None:
    before = copy.deepcopy((doc, patch))
    assert apply_merge_patch(doc, patch) == expected
    assert (doc, patch) == before


def test_merge_patch_shares_nothing_with_its_inputs() -> None:
    doc: dict[str, Any] = {"keep": {"x": [1]}, "change": {}}
    patch: dict[str, Any] = {"change": {"y": [2]}}
    result = apply_merge_patch(doc, patch)
    result["keep"]["x"].append(9)
    result["change"]["y"].append(9)
    assert doc == {"keep": {"x": [1]}, "change": {}}
    assert patch == {"change": {"y": [2]}}


# Strategic merge patch, on upstream's test type (k8s.io/apimachinery strategicpatch MergeItem).


class RetainKeysMergeItem(Struct):
    name: Any = None
    value: Any = None
    other: Any = None
    simple_map: dict[str, str] | None = None
    merging_int_list: Annotated[list[int] | None, merge_set()] = None
    merging_list: Annotated[list[MergeItem] | None, meta(merge_key="name")] = None
    non_merging_list: list[MergeItem] | None = None


class MergeItem(Struct):
    name: Any = None
    value: Any = None
    other: Any = None
    merging_list: Annotated[list[MergeItem] | None, meta(merge_key="name")] = None
    non_merging_list: list[MergeItem] | None = None
    merging_int_list: Annotated[list[int] | None, merge_set()] = None
    non_merging_int_list: list[int] | None = None
    simple_map: dict[str, str] | None = None
    replacing_item: Annotated[RawJSON, meta(patch_strategy="replace")] = None
    retain_keys_map: Annotated[RetainKeysMergeItem | None, meta(patch_strategy="retainKeys")] = None
    retain_keys_merging_list: Annotated[
        list[MergeItem] | None, meta(merge_key="name", patch_strategy="merge,retainKeys")
    ] = None


# (id, original, patch, result), in upstream's YAML.
UPSTREAM_CASES = [
    (
        "unique scalars when merging lists",
        "mergingIntList: [1, 2]",
        "mergingIntList: [2, 3]",
        "mergingIntList: [1, 2, 3]",
    ),
    (
        "delete map from nested map",
        "simpleMap: {key1: 1, key2: 1}",
        "simpleMap: {$patch: delete}",
        "simpleMap: {}",
    ),
    (
        "delete all items from merging list",
        "mergingList: [{name: 1}, {name: 2}]",
        "mergingList: [{$patch: replace}]",
        "mergingList: []",
    ),
    ("delete all keys from map", "{name: 1, value: 1}", "{$patch: replace}", "{}"),
    (
        "add key and delete all keys from map",
        "{name: 1, value: 1}",
        "{other: a, $patch: replace}",
        "{other: a}",
    ),
    (
        "delete all duplicate entries in a merging list",
        "mergingList: [{name: 1}, {name: 1}, {name: 2, value: a}, {name: 3}, {name: 3}]",
        "mergingList: [{name: 1, $patch: delete}, {name: 3, $patch: delete}]",
        "mergingList: [{name: 2, value: a}]",
    ),
    (
        "null deletes fields, other nulls are dropped",
        "{name: 1, value: 1}",
        "{name: null, other: null, simpleMap: {a: b, c: null}}",
        "{value: 1, simpleMap: {a: b}}",
    ),
    (
        "replace list of scalars",
        "nonMergingIntList: [1, 2]",
        "nonMergingIntList: [2, 3]",
        "nonMergingIntList: [2, 3]",
    ),
    (
        "replace non merging list nested in merging list",
        "mergingList: [{name: 1, nonMergingList: [{name: 1}, {name: 2, value: 2}]}, {name: 2}]",
        "mergingList: [{name: 1, nonMergingList: [{name: 1, value: 1}]}]",
        "mergingList: [{name: 1, nonMergingList: [{name: 1, value: 1}]}, {name: 2}]",
    ),
    (
        "add field to map in merging list nested in merging list",
        "mergingList: [{name: 1, mergingList: [{name: 1}, {name: 2, value: 2}]}, {name: 2}]",
        "mergingList: [{name: 1, mergingList: [{name: 1, value: 1}]}]",
        "mergingList: [{name: 1, mergingList: [{name: 1, value: 1}, {name: 2, value: 2}]},"
        " {name: 2}]",
    ),
    (
        "preserve the order from the patch in a merging list",
        "mergingList: [{name: 1}, {name: 2, value: b}, {name: 3}]",
        "mergingList: [{name: 3, value: c}, {name: 1, value: a}]",
        "mergingList: [{name: 2, value: b}, {name: 3, value: c}, {name: 1, value: a}]",
    ),
    (
        "preserve the order from the patch in a merging int list",
        "mergingIntList: [1, 2, 3]",
        "mergingIntList: [3, 1]",
        "mergingIntList: [2, 3, 1]",
    ),
    (
        "add an item in a list of primitives and preserve order",
        "mergingIntList: [1, 4, 2]",
        "{$setElementOrder/mergingIntList: [3, 1, 2], mergingIntList: [3]}",
        "mergingIntList: [3, 1, 4, 2]",
    ),
    (
        "set elements order in a list",
        "mergingList: [{name: 1, other: a}, {name: 3, value: 3}, {name: 4, value: 4},"
        " {name: 2, value: 2}]",
        "$setElementOrder/mergingList: [{name: 4}, {name: 2}, {name: 3}, {name: 1}]",
        "mergingList: [{name: 4, value: 4}, {name: 2, value: 2}, {name: 3, value: 3},"
        " {name: 1, other: a}]",
    ),
    (
        "set elements order in a list with server-only items 3",
        "mergingList: [{name: 1, other: a}, {name: 2, value: 2}, {name: 7}, {name: 9},"
        " {name: 8}, {name: 3, value: 3}, {name: 4, value: 4}]",
        "$setElementOrder/mergingList: [{name: 2}, {name: 1}, {name: 4}, {name: 3}]",
        "mergingList: [{name: 2, value: 2}, {name: 1, other: a}, {name: 7}, {name: 9},"
        " {name: 8}, {name: 4, value: 4}, {name: 3, value: 3}]",
    ),
    (
        "add map and delete map from merging list",
        "mergingList: [{name: 1}, {name: 2, other: b}, {name: 4, other: c}]",
        "{$setElementOrder/mergingList: [{name: 2}, {name: 3}],"
        " mergingList: [{name: 3}, {name: 1, $patch: delete}]}",
        "mergingList: [{name: 2, other: b}, {name: 4, other: c}, {name: 3}]",
    ),
    (
        "add map and delete map from merging list with conflict",
        "mergingList: [{name: 1, other: a}, {name: 4, other: c}]",
        "{$setElementOrder/mergingList: [{name: 2}, {name: 3}],"
        " mergingList: [{name: 2}, {name: 3}, {name: 1, $patch: delete}]}",
        "mergingList: [{name: 4, other: c}, {name: 2}, {name: 3}]",
    ),
    (
        "behavior of set element order for a merging list with duplicate",
        "mergingList: [{name: 1}, {name: 2, value: dup1}, {name: 3}, {name: 2, value: dup2},"
        " {name: 4}]",
        "$setElementOrder/mergingList: [{name: 2}, {name: 1}, {name: 4}, {name: 3}, {name: 2}]",
        "mergingList: [{name: 2, value: dup1}, {name: 2, value: dup2}, {name: 1}, {name: 4},"
        " {name: 3}]",
    ),
    (
        "nested patch merge with empty list",
        "{name: hi, mergingList: [{name: hello2}]}",
        "{$setElementOrder/mergingList: [{name: hello}, {name: doesntexist}],"
        " mergingList: [{name: hello}]}",
        "{name: hi, mergingList: [{name: hello}, {name: hello2}]}",
    ),
    (
        "delete items in lists of scalars",
        "mergingIntList: [1, 2, 3, 3, 4]",
        "{$setElementOrder/mergingIntList: [1, 2], $deleteFromPrimitiveList/mergingIntList: [3]}",
        "mergingIntList: [1, 2, 4]",
    ),
    (
        "$deleteFromPrimitiveList of nonexistent item",
        "mergingIntList: [1, 2]",
        "$deleteFromPrimitiveList/mergingIntList: [3]",
        "mergingIntList: [1, 2]",
    ),
    (
        "$deleteFromPrimitiveList on nonexistent list",
        "foo: [bar]",
        "$deleteFromPrimitiveList/mergingIntList: [3]",
        "foo: [bar]",
    ),
    (
        "$deleteFromPrimitiveList without merge patch strategy",
        "nonMergingIntList: [1, 2, 3]",
        "$deleteFromPrimitiveList/nonMergingIntList: [2]",
        "nonMergingIntList: [1, 3]",
    ),
    (
        "retainKeys map should clear defaulted field",
        "retainKeysMap: {value: foo}",
        "retainKeysMap: {$retainKeys: [other], other: bar}",
        "retainKeysMap: {other: bar}",
    ),
    (
        "retainKeys map can change a field when no retainKeys directive present",
        "retainKeysMap: {name: foo, value: a}",
        "retainKeysMap: {value: b}",
        "retainKeysMap: {name: foo, value: b}",
    ),
    (
        "retainKeys list of maps clears a field",
        "retainKeysMergingList: [{name: bar}, {name: foo, value: a, other: x}]",
        "{$setElementOrder/retainKeysMergingList: [{name: bar}, {name: foo}],"
        " retainKeysMergingList: [{$retainKeys: [name, value], name: foo}]}",
        "retainKeysMergingList: [{name: bar}, {name: foo, value: a}]",
    ),
    (
        "replace RawExtension field and merge list",
        "{name: o, mergingList: [{name: 1}, {name: 3}], replacingItem: {Some: Generic, Yaml: x}}",
        "{$setElementOrder/mergingList: [{name: 1}, {name: 2}], mergingList: [{name: 2}],"
        " replacingItem: {Newly: Modified, Yaml: x}}",
        "{name: o, mergingList: [{name: 1}, {name: 2}, {name: 3}],"
        " replacingItem: {Newly: Modified, Yaml: x}}",
    ),
]


@pytest.mark.parametrize(
    ("original", "patch", "expected"),
    [pytest.param(o, p, r, id=name) for name, o, p, r in UPSTREAM_CASES],
)
def test_strategic_merge_patch_upstream_cases(original: str, patch: str, expected: str) -> None:
    doc, body = y(original), y(patch)
    before = copy.deepcopy((doc, body))
    assert apply_strategic_merge_patch(doc, body, MergeItem) == y(expected)
    assert (doc, body) == before


UPSTREAM_ERRORS = [
    (
        "order in $setElementOrder and patch list must match",
        "mergingList: [{name: 1}, {name: 3}, {name: 2}]",
        "{$setElementOrder/mergingList: [{name: 1}, {name: 2}, {name: 3}],"
        " mergingList: [{name: 3, value: 3}, {name: 1, value: 1}]}",
        "doesn't match",
    ),
    (
        "missing merge key",
        "mergingList: [{name: 1, value: a}]",
        "mergingList: [{value: b}]",
        "does not contain declared merge key: name",
    ),
    (
        "field outside $retainKeys",
        "retainKeysMap: {name: foo}",
        "retainKeysMap: {$retainKeys: [name], value: bar}",
        "retainKeys",
    ),
    (
        "$retainKeys not a list",
        "retainKeysMap: {name: foo}",
        "retainKeysMap: {$retainKeys: name}",
        "retainKeys",
    ),
    ("unknown $patch", "{name: 1}", "{$patch: frobnicate}", "unknown patch type"),
    (
        "unknown $patch in a list",
        "mergingList: [{name: 1}]",
        "mergingList: [{name: 2, $patch: frobnicate}]",
        "unknown patch type",
    ),
    (
        "$patch: merge in a list",
        "mergingList: [{name: 1}]",
        "mergingList: [{$patch: merge}]",
        "merging lists cannot yet be specified",
    ),
    ("unknown directive", "{name: 1}", "{$frobnicate: 1}", "unknown directive '\\$frobnicate'"),
    (
        "unknown directive below",
        "mergingList: [{name: 1}]",
        "mergingList: [{name: 1, $setOrder: []}]",
        "mergingList\\[name=1\\]: unknown directive",
    ),
    (
        "malformed $setElementOrder",
        "mergingList: [{name: 1}]",
        "$setElementOrder: [{name: 1}]",
        "setElementOrder",
    ),
    (
        "malformed $deleteFromPrimitiveList",
        "mergingIntList: [1]",
        "$deleteFromPrimitiveList/mergingIntList: 1",
        "primitive list",
    ),
    (
        "objects in a merging list of scalars",
        "mergingIntList: [1]",
        "mergingIntList: [{a: 1}]",
        "not all of one type",
    ),
    (
        "merging a list of objects without a merge key",
        "{}",
        "{$setElementOrder/nonMergingList: [{name: 1}], nonMergingList: [{name: 1}]}",
        "merged by key",
    ),
]


@pytest.mark.parametrize(
    ("original", "patch", "message"),
    [pytest.param(o, p, m, id=name) for name, o, p, m in UPSTREAM_ERRORS],
)
def test_strategic_merge_patch_errors_are_400(original: str, patch: str, message: str) -> None:
    with pytest.raises(PatchError, match=message) as caught:
        apply_strategic_merge_patch(y(original), y(patch), MergeItem)
    assert caught.value.code == 400


def test_strategic_merge_patch_lists_of_lists_are_422() -> None:
    with pytest.raises(PatchError, match="lists of lists") as caught:
        apply_strategic_merge_patch({"mergingIntList": [1]}, {"mergingIntList": [[2]]}, MergeItem)
    assert caught.value.code == 422


@pytest.mark.parametrize("patch", [None, [], "x", 1], ids=["null", "list", "string", "number"])
def test_strategic_merge_patch_must_be_an_object(patch: Any) -> None:
    with pytest.raises(PatchError, match="must be a JSON object") as caught:
        apply_strategic_merge_patch({}, patch, MergeItem)
    assert caught.value.code == 400


# Strategic merge patch on real kinds.

POD = y(
    """
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
  labels: {app: web, tier: front}
  finalizers: [example.com/a, example.com/b]
spec:
  containers:
  - name: app
    image: nginx:1.25
    ports:
    - {containerPort: 80, protocol: TCP}
    - {containerPort: 443, protocol: TCP}
    env:
    - {name: MODE, value: prod}
    - {name: LEVEL, value: info}
    volumeMounts:
    - {name: data, mountPath: /data}
  - name: sidecar
    image: busybox
  volumes:
  - name: data
    emptyDir: {}
  - name: config
    configMap: {name: web-config}
  tolerations:
  - {key: a, operator: Exists}
  nodeSelector: {disk: ssd}
status:
  phase: Running
  conditions:
  - {type: Ready, status: "False"}
  - {type: PodScheduled, status: "True"}
"""
)


def patched_pod(patch: str) -> Any:
    doc, body = copy.deepcopy(POD), y(patch)
    result = apply_strategic_merge_patch(doc, body, Pod)
    assert doc == POD
    return result


def test_containers_merge_by_name() -> None:
    result = patched_pod("spec: {containers: [{name: sidecar, image: busybox:1.36}]}")
    app, sidecar = result["spec"]["containers"]
    assert app == POD["spec"]["containers"][0]
    assert sidecar == {"name": "sidecar", "image": "busybox:1.36"}


def test_new_container_is_added() -> None:
    result = patched_pod("spec: {containers: [{name: extra, image: redis, args: null}]}")
    # As upstream: without $setElementOrder a new item comes before the items the patch does
    # not name (which keep their order).
    assert [c["name"] for c in result["spec"]["containers"]] == ["extra", "app", "sidecar"]
    assert result["spec"]["containers"][0] == {"name": "extra", "image": "redis"}


def test_ports_merge_by_container_port_and_env_by_name() -> None:
    result = patched_pod(
        """
spec:
  containers:
  - name: app
    ports: [{containerPort: 443, name: https}, {containerPort: 8080}]
    env: [{name: LEVEL, value: debug}, {name: NEW, value: "1"}]
"""
    )
    app = result["spec"]["containers"][0]
    assert app["ports"] == [
        {"containerPort": 80, "protocol": "TCP"},
        {"containerPort": 443, "protocol": "TCP", "name": "https"},
        {"containerPort": 8080},
    ]
    assert app["env"] == [
        {"name": "MODE", "value": "prod"},
        {"name": "LEVEL", "value": "debug"},
        {"name": "NEW", "value": "1"},
    ]


def test_finalizers_are_a_set() -> None:
    result = patched_pod("metadata: {finalizers: [example.com/b, example.com/c]}")
    assert result["metadata"]["finalizers"] == ["example.com/a", "example.com/b", "example.com/c"]


def test_delete_from_primitive_list() -> None:
    result = patched_pod("metadata: {$deleteFromPrimitiveList/finalizers: [example.com/a]}")
    assert result["metadata"]["finalizers"] == ["example.com/b"]


def test_patch_delete_removes_a_list_item() -> None:
    result = patched_pod("spec: {containers: [{name: sidecar, $patch: delete}]}")
    assert [c["name"] for c in result["spec"]["containers"]] == ["app"]
    result = patched_pod("spec: {containers: [{name: app, env: [{name: MODE, $patch: delete}]}]}")
    assert result["spec"]["containers"][0]["env"] == [{"name": "LEVEL", "value": "info"}]


def test_patch_replace_replaces_a_list() -> None:
    result = patched_pod(
        "spec: {containers: [{$patch: replace}, {name: only, image: alpine, env: null}]}"
    )
    assert result["spec"]["containers"] == [{"name": "only", "image": "alpine"}]


def test_patch_replace_and_delete_on_maps() -> None:
    result = patched_pod("metadata: {labels: {$patch: replace, app: api}}")
    assert result["metadata"]["labels"] == {"app": "api"}
    result = patched_pod("metadata: {labels: {$patch: delete}}")
    assert result["metadata"]["labels"] == {}


def test_patch_merge_on_a_map_is_the_default() -> None:
    result = patched_pod("metadata: {labels: {$patch: merge, tier: back}}")
    assert result["metadata"]["labels"] == {"app": "web", "tier": "back"}


def test_null_deletes_fields_and_labels() -> None:
    result = patched_pod("metadata: {labels: {tier: null, new: x}}\nspec: {nodeSelector: null}")
    assert result["metadata"]["labels"] == {"app": "web", "new": "x"}
    assert "nodeSelector" not in result["spec"]


def test_lists_without_strategy_are_replaced() -> None:
    result = patched_pod("spec: {tolerations: [{key: b, operator: Exists}]}")
    assert result["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]


def test_status_conditions_merge_by_type() -> None:
    result = patched_pod('status: {conditions: [{type: Ready, status: "True"}]}')
    assert result["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]


def test_set_element_order_as_kubectl_apply_sends_it() -> None:
    # kubectl apply after inserting "init" between the two containers and changing an image.
    result = patched_pod(
        """
spec:
  $setElementOrder/containers: [{name: app}, {name: init}, {name: sidecar}]
  containers:
  - {name: init, image: alpine}
  - {name: sidecar, image: busybox:1.36}
"""
    )
    containers = result["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app", "init", "sidecar"]
    assert containers[0] == POD["spec"]["containers"][0]
    assert containers[2]["image"] == "busybox:1.36"


def test_kubectl_apply_removing_a_container() -> None:
    result = patched_pod(
        """
spec:
  $setElementOrder/containers: [{name: app}]
  containers: [{name: sidecar, $patch: delete}]
"""
    )
    assert result["spec"]["containers"] == [POD["spec"]["containers"][0]]


def test_set_element_order_keeps_server_only_items() -> None:
    # Items the patch does not name (added by someone else) stay, interleaved where they were.
    result = patched_pod("spec: {$setElementOrder/volumes: [{name: config}]}")
    assert [v["name"] for v in result["spec"]["volumes"]] == ["data", "config"]
    result = patched_pod(
        "spec: {$setElementOrder/volumes: [{name: config}, {name: data}],"
        " volumes: [{name: config, configMap: {name: other}}]}"
    )
    assert result["spec"]["volumes"] == [
        {"name": "config", "configMap": {"name": "other"}},
        {"name": "data", "emptyDir": {}},
    ]


def test_retain_keys_on_volumes() -> None:
    # kubectl apply switching the "data" volume from emptyDir to a configMap.
    result = patched_pod(
        """
spec:
  $setElementOrder/volumes: [{name: data}, {name: config}]
  volumes:
  - name: data
    $retainKeys: [configMap, name]
    configMap: {name: data-config}
"""
    )
    assert result["spec"]["volumes"] == [
        {"name": "data", "configMap": {"name": "data-config"}},
        {"name": "config", "configMap": {"name": "web-config"}},
    ]


def test_unknown_fields_merge_like_a_merge_patch() -> None:
    result = patched_pod("spec: {futureField: {a: {b: 1}, l: [1]}}")
    result = apply_strategic_merge_patch(result, y("spec: {futureField: {a: {c: 2}, l: [2]}}"), Pod)
    assert result["spec"]["futureField"] == {"a": {"b": 1, "c": 2}, "l": [2]}


def test_unknown_directive_in_a_struct_is_400() -> None:
    with pytest.raises(PatchError, match=r"spec\.containers\[name=\"app\"\]") as caught:
        patched_pod("spec: {containers: [{name: app, $retain: [name]}]}")
    assert caught.value.code == 400


DEPLOYMENT = y(
    """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: app, image: "nginx:1.25"}
      - {name: log, image: fluentbit}
"""
)


def test_deployment_strategy_retain_keys() -> None:
    # What kubectl apply sends when the manifest changes the strategy to Recreate.
    patch = y("spec: {strategy: {$retainKeys: [type], type: Recreate}}")
    result = apply_strategic_merge_patch(DEPLOYMENT, patch, Deployment)
    assert result["spec"]["strategy"] == {"type": "Recreate"}
    # Without the directive the stale rollingUpdate would stay.
    patch = y("spec: {strategy: {type: Recreate}}")
    result = apply_strategic_merge_patch(DEPLOYMENT, patch, Deployment)
    assert result["spec"]["strategy"]["rollingUpdate"] == {
        "maxSurge": "25%",
        "maxUnavailable": "25%",
    }


def test_deployment_set_image_and_restart() -> None:
    # kubectl set image, then kubectl rollout restart.
    patch = y("spec: {template: {spec: {containers: [{name: app, image: 'nginx:1.27'}]}}}")
    result = apply_strategic_merge_patch(DEPLOYMENT, patch, Deployment)
    restart = y(
        "spec: {template: {metadata: {annotations:"
        " {kubectl.kubernetes.io/restartedAt: '2024-01-01T00:00:00Z'}}}}"
    )
    result = apply_strategic_merge_patch(result, restart, Deployment)
    template = result["spec"]["template"]
    assert template["spec"]["containers"] == [
        {"name": "app", "image": "nginx:1.27"},
        {"name": "log", "image": "fluentbit"},
    ]
    assert template["metadata"] == {
        "labels": {"app": "web"},
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z"},
    }


def test_empty_patch_is_identity() -> None:
    assert apply_strategic_merge_patch(POD, {}, Pod) == POD
    assert apply_strategic_merge_patch(DEPLOYMENT, {}, Deployment) == DEPLOYMENT


# Properties.

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["a", "b", "", "~", "/"])
)
member_names = st.sampled_from(["a", "b", "0", "1", "-", "", "~", "/", "$patch"])
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(member_names, inner, max_size=3),
    max_leaves=12,
)
json_objects = st.dictionaries(member_names, json_values, max_size=4)


@given(json_objects)
def test_empty_merge_patch_is_identity(doc: dict[str, Any]) -> None:
    assert apply_merge_patch(doc, {}) == doc


@given(json_values, json_values.filter(lambda v: not isinstance(v, dict)))
def test_merge_patch_that_is_not_an_object_replaces(doc: Any, patch: Any) -> None:
    assert apply_merge_patch(doc, patch) == patch


@given(json_objects, json_objects)
def test_merge_patch_twice_is_once(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    once = apply_merge_patch(doc, patch)
    assert apply_merge_patch(once, patch) == once


tokens = st.sampled_from(["a", "b", "0", "1", "2", "-", "01", "~0", "~1", "~2", "", "x~"])
pointers = st.lists(tokens, max_size=3).map(lambda ts: "".join("/" + t for t in ts))
operations = st.fixed_dictionaries(
    {
        "op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "nope"])
        | st.sampled_from([None, 1, ["add"], {"op": "add"}]),
        "path": pointers | st.sampled_from(["a", 1, None]),
    },
    optional={"from": pointers | st.just(0), "value": json_values},
)
json_patches = st.lists(operations, max_size=5) | json_values


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(json_values, json_patches)
def test_json_patch_raises_only_patch_errors(doc: Any, patch: Any) -> None:
    before = copy.deepcopy((doc, patch))
    code = None
    try:
        apply_json_patch(doc, patch)
    except PatchError as error:
        code = error.code
    assert code in (None, 400, 422)
    assert (doc, patch) == before


@given(json_objects, st.sampled_from(["a", "b", "~", "/"]), json_values)
def test_json_patch_add_then_remove_is_identity(doc: dict[str, Any], name: str, value: Any) -> None:
    path = "/" + name.replace("~", "~0").replace("/", "~1")
    doc.pop(name, None)
    patch = [{"op": "add", "path": path, "value": value}, {"op": "remove", "path": path}]
    assert apply_json_patch(doc, patch) == doc


smp_keys = st.sampled_from(
    [
        "metadata",
        "spec",
        "status",
        "containers",
        "name",
        "image",
        "finalizers",
        "labels",
        "$patch",
        "$retainKeys",
        "$setElementOrder/containers",
        "$deleteFromPrimitiveList/finalizers",
        "delete",
        "replace",
        "a",
    ]
)
smp_values = st.recursive(
    json_scalars | smp_keys,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(smp_keys, inner, max_size=3),
    max_leaves=15,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(smp_keys, smp_values, max_size=4), st.dictionaries(smp_keys, smp_values))
def test_strategic_merge_patch_raises_only_patch_errors(doc: Any, patch: Any) -> None:
    before = copy.deepcopy((doc, patch))
    code = None
    try:
        apply_strategic_merge_patch(doc, patch, Pod)
    except PatchError as error:
        code = error.code
    assert code in (None, 400, 422)
    assert (doc, patch) == before
