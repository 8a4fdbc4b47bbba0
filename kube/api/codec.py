"""Bytes to typed objects and back: JSON on the wire, YAML in files.

Decoding is two-speed.  The fast path hands the bytes to msgspec, which builds the typed tree
in C and rejects any field the declaration does not know.  Only when that happens does the slow
path run: parse to plain JSON values, walk them beside the declaration to collect *every*
unknown field by its path (``spec.containers[0].imagee``), drop those and convert what is left.
The API server turns the collected paths into a 400 (fieldValidation=Strict), ``Warning``
headers (Warn) or nothing (Ignore); the object is the same in all three cases.

Every failure surfaces as ``DecodeError`` with a message a user can act on; nothing else
escapes, whatever the input.

YAML is read with timestamps left as strings (as Kubernetes' YAML-to-JSON conversion does), so
``value: 2024-01-01`` in a ConfigMap stays the string it looks like.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec
import yaml
from msgspec import inspect as mi

from kube.api.errors import ROOT, Path
from kube.api.meta_v1 import Resource
from kube.api.scheme import SCHEME
from kube.api.struct import field_meta
from kube.api.typeinfo import type_tree

T = TypeVar("T")


class DecodeError(ValueError):
    """Input that cannot become an object of the expected type."""


@dataclass
class Decoded(Generic[T]):
    """A decoded object and the paths of the unknown fields that were dropped from it."""

    obj: T
    unknown_fields: list[str] = field(default_factory=list)


_MSGSPEC_PATH = re.compile(r" - at `\$\.?(.*)`$")


def _explain(error: msgspec.ValidationError) -> str:
    """msgspec's message reworded with a Kubernetes-style field path first."""
    text = str(error)
    match = _MSGSPEC_PATH.search(text)
    where = (match.group(1) if match else "") or "<root>"
    what = text[: match.start()] if match else text
    what = what.replace("`", "").replace(" | null", "")
    return f"{where}: {what[0].lower()}{what[1:]}"


def decode_json(data: bytes | str, cls: type[T]) -> Decoded[T]:
    """Decode one JSON document into ``cls``, collecting unknown fields."""
    try:
        return Decoded(msgspec.json.decode(data, type=cls))
    except msgspec.ValidationError as error:
        if "unknown field" not in str(error):
            raise DecodeError(_explain(error)) from None
    except msgspec.DecodeError as error:
        raise DecodeError(f"malformed JSON: {error}") from None
    except RecursionError:
        raise DecodeError("object nested too deeply") from None
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise DecodeError(f"malformed JSON: {error}") from None
    except RecursionError:
        raise DecodeError("object nested too deeply") from None
    return from_builtins(raw, cls)


def from_builtins(raw: Any, cls: type[T]) -> Decoded[T]:
    """Convert plain JSON values (from YAML, a patch, ...) into ``cls``, collecting unknowns."""
    unknown: list[str] = []
    try:
        cleaned = _strip_unknown(raw, type_tree(cls), ROOT, unknown)
        return Decoded(msgspec.convert(cleaned, cls), unknown)
    except msgspec.ValidationError as error:
        raise DecodeError(_explain(error)) from None
    except RecursionError:
        raise DecodeError("object nested too deeply") from None


def _strip_unknown(raw: Any, t: mi.Type, path: Path, unknown: list[str]) -> Any:
    """``raw`` without the fields ``t`` does not declare; their paths go to ``unknown``."""
    if isinstance(t, mi.Metadata):
        if field_meta(t.extra).preserve_unknown:
            return raw
        t = t.type
    if isinstance(t, mi.UnionType):
        for member in t.types:
            inner = member.type if isinstance(member, mi.Metadata) else member
            if (isinstance(raw, dict) and isinstance(inner, mi.StructType | mi.DictType)) or (
                isinstance(raw, list) and isinstance(inner, mi.ListType)
            ):
                return _strip_unknown(raw, member, path, unknown)
        return raw
    if isinstance(t, mi.StructType) and isinstance(raw, dict):
        fields = {f.encode_name: f for f in t.fields}
        kept: dict[str, Any] = {}
        for key, value in raw.items():
            f = fields.get(key)
            if f is None:
                unknown.append(str(path.child(str(key))))
            else:
                kept[key] = _strip_unknown(value, f.type, path.child(key), unknown)
        return kept
    if isinstance(t, mi.ListType) and isinstance(raw, list):
        return [_strip_unknown(v, t.item_type, path.index(i), unknown) for i, v in enumerate(raw)]
    if isinstance(t, mi.DictType) and isinstance(raw, dict):
        return {
            k: _strip_unknown(v, t.value_type, path.key(str(k)), unknown) for k, v in raw.items()
        }
    return raw


def encode_json(obj: Any) -> bytes:
    """The JSON of an object, fields in declaration order, unset fields left out."""
    return msgspec.json.encode(obj)


def to_builtins(obj: Any) -> Any:
    """An object as plain JSON values (dicts, lists, strings, numbers)."""
    return msgspec.to_builtins(obj)


# YAML.


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """Safe YAML without the timestamp resolver."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml_documents(text: str | bytes) -> list[Any]:
    """Every non-empty document of a YAML stream as plain values."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.YAMLError as error:
        raise DecodeError(f"malformed YAML: {error}") from None
    except RecursionError:
        raise DecodeError("YAML nested too deeply") from None


def dump_yaml(obj: Any) -> str:
    """YAML for an object or plain values, keys sorted at every level, as upstream's server
    writes YAML (its JSON turned into plain maps, then YAML)."""
    return yaml.safe_dump(to_builtins(obj), sort_keys=True, allow_unicode=True)


# Typed objects by apiVersion and kind.


def decode_object(raw: Any) -> Decoded[Resource]:
    """A plain-valued object decoded into the class its apiVersion and kind name."""
    if not isinstance(raw, dict):
        raise DecodeError("an object must be a mapping")
    api_version, kind = raw.get("apiVersion"), raw.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise DecodeError("apiVersion: Required value")
    if not isinstance(kind, str) or not kind:
        raise DecodeError("kind: Required value")
    info = SCHEME.by_kind(api_version, kind)
    if info is None:
        raise DecodeError(f'no kind "{kind}" is registered for version "{api_version}"')
    return from_builtins(raw, info.cls)


def iter_objects(raw: Any) -> Iterator[Any]:
    """Objects of a document, unfolding ``kind: List`` (and ``*List``) into its items."""
    if isinstance(raw, dict) and str(raw.get("kind", "")).endswith("List") and "items" in raw:
        items = raw.get("items") or []
        if not isinstance(items, list):
            raise DecodeError("items: must be a list")
        yield from items
    else:
        yield raw


def load_manifests(text: str | bytes) -> list[Decoded[Resource]]:
    """Typed objects from a YAML or JSON manifest stream, Lists unfolded."""
    return [
        decode_object(item)
        for document in load_yaml_documents(text)
        for item in iter_objects(document)
    ]
