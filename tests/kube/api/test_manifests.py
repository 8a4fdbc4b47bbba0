"""The manifest corpus: real-world manifests round-trip through the object model unchanged in
meaning, and invalid ones are rejected with the errors Kubernetes reports."""

from __future__ import annotations

import copy
import pathlib
import re
from typing import Any

import pytest

import kube.api.kinds  # noqa: F401  (registers every kind)
from kube.api import codec, walk
from kube.api.quantity import Quantity, QuantityError
from kube.api.scheme import SCHEME

HERE = pathlib.Path(__file__).parent
INVALID = sorted((HERE / "invalid").glob("*.yaml"))


def _objects(path: pathlib.Path) -> list[dict[str, Any]]:
    return [
        item
        for document in codec.load_yaml_documents(path.read_text())
        for item in codec.iter_objects(document)
    ]


def _registered(item: dict[str, Any]) -> bool:
    return SCHEME.by_kind(item["apiVersion"], item["kind"]) is not None


def _documents(path: pathlib.Path) -> list[dict[str, Any]]:
    """Objects of a manifest file whose kinds are built in (custom resources are not)."""
    return [item for item in _objects(path) if _registered(item)]


ALL = sorted((HERE / "manifests").glob("*.yaml"))
VALID = [p for p in ALL if _documents(p)]
CUSTOM = [p for p in ALL if not _documents(p)]


def _same_quantity(a: Any, b: Any) -> bool:
    try:
        return Quantity.parse(a) == Quantity.parse(b)
    except (QuantityError, TypeError):
        return False


def _kept(original: Any, result: Any, path: str = "") -> list[str]:
    """Where ``result`` lost or changed something ``original`` said (defaults may add)."""
    if isinstance(original, dict) and isinstance(result, dict):
        return [
            problem
            for key, value in original.items()
            for problem in (
                [f"{path}.{key}: dropped"]
                if key not in result and value is not None
                else _kept(value, result.get(key), f"{path}.{key}")
            )
        ]
    if isinstance(original, list) and isinstance(result, list):
        if len(original) != len(result):
            return [f"{path}: {len(original)} items became {len(result)}"]
        return [
            p
            for i, (o, r) in enumerate(zip(original, result, strict=True))
            for p in _kept(o, r, f"{path}[{i}]")
        ]
    if original == result or _same_quantity(original, result):
        return []
    return [f"{path}: {original!r} became {result!r}"]


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_manifest_round_trips_unchanged_in_meaning(path: pathlib.Path) -> None:
    for raw in _documents(path):
        decoded = codec.decode_object(copy.deepcopy(raw))
        assert decoded.unknown_fields == []
        obj = decoded.obj
        assert codec.to_builtins(obj) == raw, "decode then encode is the identity"
        if obj.kind_info.namespaced and not obj.metadata.namespace:
            obj.metadata.namespace = "default"  # as kubectl does from its context

        walk.set_defaults(obj)
        assert [str(e) for e in walk.validate_create(obj)] == []
        defaulted = codec.to_builtins(obj)
        assert _kept(raw, defaulted) == []

        again = codec.decode_json(codec.encode_json(obj), type(obj)).obj
        walk.set_defaults(again)
        assert codec.to_builtins(again) == defaulted, "defaulting is idempotent"


def test_custom_resources_in_the_corpus_have_their_definitions() -> None:
    """Custom resources are served from CRDs (the API server's tests create them); here each
    must belong to a served version of a CRD in the corpus."""
    served = {
        (f"{crd['spec']['group']}/{v['name']}", crd["spec"]["names"]["kind"])
        for p in ALL
        for crd in _objects(p)
        if crd["kind"] == "CustomResourceDefinition"
        for v in crd["spec"]["versions"]
        if v.get("served")
    }
    resources = [(o["apiVersion"], o["kind"]) for p in CUSTOM for o in _objects(p)]
    assert resources
    assert set(resources) <= served


def test_corpus_is_large_enough() -> None:
    kinds = {(d["apiVersion"], d["kind"]) for p in VALID for d in _documents(p)}
    assert len(ALL) >= 30
    assert len(kinds) >= 25


_EXPECT = re.compile(r"^#\s*expect:\s*(?P<field>\S+):\s*(?P<type>.+?)\s*$")


def _expectations(path: pathlib.Path) -> list[tuple[str, str]]:
    found = [_EXPECT.match(line) for line in path.read_text().splitlines()]
    return [(m["field"], m["type"]) for m in found if m]


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_manifest_reports_expected_errors(path: pathlib.Path) -> None:
    expected = _expectations(path)
    assert expected, "every invalid manifest says what it expects"
    reported: list[str] = []
    for raw in _documents(path):
        try:
            decoded = codec.decode_object(raw)
        except codec.DecodeError as error:
            reported.append(str(error))
            continue
        obj = decoded.obj
        if obj.kind_info.namespaced and not obj.metadata.namespace:
            obj.metadata.namespace = "default"
        walk.set_defaults(obj)
        reported += [str(e) for e in walk.validate_create(obj)]
    for field, error_type in expected:
        assert any(r.startswith(f"{field}: {error_type}") for r in reported), (
            f"expected '{field}: {error_type}', got {reported}"
        )
