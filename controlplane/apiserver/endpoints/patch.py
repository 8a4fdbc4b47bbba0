"""The three patch types of ``PATCH``, applied to objects as plain JSON values.

Every function takes the stored object as plain values (``kube.api.codec.to_builtins``) and
the decoded patch body, and returns new plain values: the inputs are never changed, and the
result shares nothing mutable with them.  A malformed patch, or one that cannot be applied,
raises ``PatchError`` whose ``code`` is the HTTP status the API server answers with.

``application/json-patch+json`` -- ``apply_json_patch`` (RFC 6902)
    A list of operations (add, remove, replace, move, copy, test) addressed by JSON pointers
    (RFC 6901: ``~1`` is ``/``, ``~0`` is ``~``, ``-`` is the end of an array).  Operations apply
    in order to a copy, so the patch applies entirely or not at all.  A patch that is not a list
    of well-formed operations is a 400; a path that does not resolve, or a failed ``test``, is a
    422 (upstream's answer for any failure while applying).

``application/merge-patch+json`` -- ``apply_merge_patch`` (RFC 7386)
    An object merged member by member into the target: ``null`` deletes a member, objects merge
    recursively, anything else (lists included) replaces.  A patch that is not an object replaces
    the whole target.

``application/strategic-merge-patch+json`` -- ``apply_strategic_merge_patch``
    Kubernetes' merge patch that knows the schema (k8s.io/apimachinery/pkg/util/strategicpatch,
    as the API server applies it).  Where upstream reads Go struct tags, this reads the kind's
    declarations: for each field of a ``Struct`` it follows ``msgspec.inspect`` type information
    and takes ``patch_strategy`` and ``patch_merge_key`` from the field's ``meta(...)``:

    - a list declared ``merge`` with a merge key (``meta(merge_key="name")``: containers, env,
      volumes, ports by ``containerPort``, ...) is merged item by item, items matched by the
      key; a list declared ``merge`` without one (``merge_set()``: finalizers) is a set union.
      Items the patch names come in the patch's order, interleaved with the others by their
      old positions; a new item goes before the unnamed items after it (as upstream, a lone
      new item comes first);
    - any other list (no strategy, ``replace``, ``atomic()``) is replaced by the patch's list;
    - objects (structs and maps such as labels) merge recursively, unless declared ``replace``;
      ``retainKeys`` only tells clients to send ``$retainKeys`` (it changes nothing here);
    - fields the declaration does not know, ``RawJSON``/``Any`` fields and map values without a
      struct type merge like a merge patch: objects recursively, lists replaced.

    ``null`` deletes a field.  Directives: ``$patch: replace`` (the object or list is replaced,
    not merged), ``$patch: delete`` (in a list item: remove the items with that merge key; in an
    object: empty it), ``$patch: merge`` (in an object: the default, merge), ``$retainKeys``
    (clear every field of the object not listed), ``$setElementOrder/<list>`` (the order of the
    merged list: the items it names in its order, the others interleaved where they were) and
    ``$deleteFromPrimitiveList/<list>`` (remove values from a list of scalars).  An unknown
    ``$patch`` value, an unknown ``$`` key where a struct does not declare it, and malformed
    directives are 400s; so is a list of objects to merge whose items lack the merge key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from msgspec import inspect as mi

from kube.api.struct import NO_META, FieldMeta, Struct, field_meta
from kube.api.typeinfo import fields_by_name, type_tree

_BAD_REQUEST: Final = 400
_UNPROCESSABLE: Final = 422


class PatchError(ValueError):
    """A patch that is malformed (``code`` 400) or cannot be applied (``code`` 422)."""

    def __init__(self, message: str, code: int = _BAD_REQUEST) -> None:
        super().__init__(message)
        self.code = code


class TestFailed(PatchError):
    """A JSON patch whose ``test`` operation found another value (which some callers, as
    mutating admission policies, take as "leave the document as it is")."""


# Plain JSON values.


def _copy(value: Any) -> Any:
    """A deep copy of plain JSON values."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value, but booleans are not numbers."""
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_json_equal(v, b[k]) for k, v in a.items())
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_json_equal, a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _key(value: Any) -> Hashable:
    """A hashable stand-in for a JSON value, equal exactly when the values are JSON-equal."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("z", None)
    return ("j", json.dumps(value, sort_keys=True, default=repr))


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _guard(apply: Callable[[], Any]) -> Any:
    try:
        return apply()
    except RecursionError:
        raise PatchError("the object or the patch is nested too deeply") from None


# JSON patch (RFC 6902).

_OPERATIONS: Final = frozenset({"add", "remove", "replace", "move", "copy", "test"})
_INDEX = re.compile(r"0|[1-9][0-9]{0,17}")


@dataclass(frozen=True)
class _Operation:
    number: int
    op: str
    path: str
    tokens: list[str]
    source: list[str] | None  # "from" of move and copy
    value: Any

    def fail(self, why: str) -> PatchError:
        return PatchError(
            f"json patch operation {self.number} ({self.op} {self.path!r}): {why}", _UNPROCESSABLE
        )


def _pointer(text: Any, number: int, member: str) -> list[str]:
    """The reference tokens of a JSON pointer (RFC 6901)."""
    where = f"json patch operation {number}"
    if not isinstance(text, str):
        raise PatchError(f"{where}: {member!r} must be a string, not {_describe(text)}")
    if text == "":
        return []
    if not text.startswith("/"):
        raise PatchError(f"{where}: {member} {text!r} is not a JSON pointer (must start with /)")
    tokens = text[1:].split("/")
    for token in tokens:
        if re.search(r"~(?![01])", token):
            raise PatchError(f"{where}: {member} {text!r} has an invalid ~ escape")
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def _parse_json_patch(patch: Any) -> list[_Operation]:
    if not isinstance(patch, list):
        raise PatchError(f"a json patch must be a list of operations, not {_describe(patch)}")
    operations = []
    for number, raw in enumerate(patch):
        if not isinstance(raw, dict):
            raise PatchError(
                f"json patch operation {number} must be an object, not {_describe(raw)}"
            )
        op = raw.get("op")
        if not isinstance(op, str) or op not in _OPERATIONS:
            known = ", ".join(sorted(_OPERATIONS))
            raise PatchError(
                f"json patch operation {number}: unknown op {_short(op)} (expected one of {known})"
            )
        if "path" not in raw:
            raise PatchError(f"json patch operation {number} ({op}): missing 'path'")
        tokens = _pointer(raw["path"], number, "path")
        source = None
        if op in ("move", "copy"):
            if "from" not in raw:
                raise PatchError(f"json patch operation {number} ({op}): missing 'from'")
            source = _pointer(raw["from"], number, "from")
        if op in ("add", "replace", "test") and "value" not in raw:
            raise PatchError(f"json patch operation {number} ({op}): missing 'value'")
        operations.append(_Operation(number, op, raw["path"], tokens, source, raw.get("value")))
    return operations


def _index(operation: _Operation, token: str, length: int, *, insert: bool) -> int:
    if token == "-" and insert:
        return length
    if not _INDEX.fullmatch(token):
        raise operation.fail(f"{token!r} is not an array index")
    index = int(token)
    if index > length or (index == length and not insert):
        raise operation.fail(f"index {index} is out of bounds (the array has {length} items)")
    return index


def _resolve(operation: _Operation, doc: Any, tokens: list[str]) -> Any:
    current = doc
    for depth, token in enumerate(tokens):
        if isinstance(current, dict):
            if token not in current:
                missing = "/" + "/".join(tokens[: depth + 1])
                raise operation.fail(f"{missing!r} does not exist")
            current = current[token]
        elif isinstance(current, list):
            current = current[_index(operation, token, len(current), insert=False)]
        else:
            raise operation.fail(f"cannot look up {token!r} in a {_describe(current)}")
    return current


def _add(operation: _Operation, doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _resolve(operation, doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(operation, last, len(parent), insert=True), value)
    else:
        raise operation.fail(f"cannot add {last!r} to a {_describe(parent)}")
    return doc


def _remove(operation: _Operation, doc: Any, tokens: list[str]) -> Any:
    """Remove the value at ``tokens`` and return it."""
    if not tokens:
        raise operation.fail("cannot remove the whole document")
    parent = _resolve(operation, doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise operation.fail(f"{last!r} does not exist")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(operation, last, len(parent), insert=False))
    raise operation.fail(f"cannot remove {last!r} from a {_describe(parent)}")


def _replace(operation: _Operation, doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _resolve(operation, doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise operation.fail(f"{last!r} does not exist")
        parent[last] = value
    elif isinstance(parent, list):
        parent[_index(operation, last, len(parent), insert=False)] = value
    else:
        raise operation.fail(f"cannot replace {last!r} in a {_describe(parent)}")
    return doc


def _apply_operation(doc: Any, operation: _Operation) -> Any:
    op, tokens = operation.op, operation.tokens
    if op == "add":
        return _add(operation, doc, tokens, _copy(operation.value))
    if op == "remove":
        _remove(operation, doc, tokens)
        return doc
    if op == "replace":
        return _replace(operation, doc, tokens, _copy(operation.value))
    if op == "test":
        actual = _resolve(operation, doc, tokens)
        if not _json_equal(actual, operation.value):
            failed = operation.fail(f"test failed: the value is {_short(actual)}")
            raise TestFailed(str(failed), failed.code)
        return doc
    assert operation.source is not None
    source = operation.source
    if op == "copy":
        return _add(operation, doc, tokens, _copy(_resolve(operation, doc, source)))
    # move
    if tokens[: len(source)] == source and len(tokens) > len(source):
        raise operation.fail("cannot move a value into one of its own children")
    if tokens == source:
        _resolve(operation, doc, source)
        return doc
    return _add(operation, doc, tokens, _remove(operation, doc, source))


def apply_json_patch(doc: Any, patch: Any) -> Any:
    """``doc`` with a JSON patch (RFC 6902) applied: all operations, or none."""

    def apply() -> Any:
        operations = _parse_json_patch(patch)
        result = _copy(doc)
        for operation in operations:
            result = _apply_operation(result, operation)
        return result

    return _guard(apply)


# JSON merge patch (RFC 7386).


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return _copy(patch)
    if not isinstance(target, dict):
        target = {}
    result = {}
    for key, value in target.items():
        if key not in patch:
            result[key] = _copy(value)
        elif patch[key] is not None:
            result[key] = _merge(value, patch[key])
    for key, value in patch.items():
        if key not in target and value is not None:
            result[key] = _merge(None, value)
    return result


def apply_merge_patch(doc: Any, patch: Any) -> Any:
    """``doc`` with a JSON merge patch (RFC 7386) applied."""
    return _guard(lambda: _merge(doc, patch))


# Strategic merge patch.

_PATCH: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ORDER: Final = "$setElementOrder"
_DELETE_FROM: Final = "$deleteFromPrimitiveList"
_REPLACE, _DELETE, _MERGE = "replace", "delete", "merge"

_Node: TypeAlias = "mi.Type | None"
"""The declared type of a value in the object, or None where the schema says nothing."""


class _Drop:
    """What a ``$patch: delete`` object leaves where it stood: nothing."""


_DROPPED: Final = _Drop()


def _unwrap(t: _Node) -> tuple[_Node, FieldMeta]:
    """Strip Metadata and Optional from a type, keeping the outermost kubelab meta."""
    info = NO_META
    while True:
        if isinstance(t, mi.Metadata):
            if info is NO_META:
                info = field_meta(t.extra)
            t = t.type
        elif isinstance(t, mi.UnionType):
            rest = [u for u in t.types if not isinstance(u, mi.NoneType)]
            if len(rest) != 1:
                return t, info
            t = rest[0]
        else:
            return t, info


def _pick(t: _Node, kinds: tuple[type[mi.Type], ...]) -> _Node:
    """The member of a (possibly union) type that is one of ``kinds``, if any."""
    t, _ = _unwrap(t)
    members = t.types if isinstance(t, mi.UnionType) else (t,)
    for member in members:
        member, _ = _unwrap(member)
        if isinstance(member, kinds):
            return member
    return None


def _lookup(node: _Node, key: str) -> tuple[_Node, FieldMeta]:
    """The type and declared patch metadata of member ``key`` of an object of type ``node``."""
    t = _pick(node, (mi.StructType, mi.DictType))
    if isinstance(t, mi.StructType):
        f = fields_by_name(t).get(key)
        return (f.type, _unwrap(f.type)[1]) if f is not None else (None, NO_META)
    if isinstance(t, mi.DictType):
        return t.value_type, NO_META
    return None, NO_META


def _items(node: _Node) -> _Node:
    """The item type of a list of type ``node``."""
    t = _pick(node, (mi.ListType,))
    return t.item_type if isinstance(t, mi.ListType) else None


def _strategy(info: FieldMeta) -> str:
    """The declared strategy apart from ``retainKeys``: "merge", "replace" or ""."""
    parts = [p.strip() for p in (info.patch_strategy or "").split(",")]
    rest = [p for p in parts if p and p != "retainKeys"]
    return rest[0] if rest else ""


def _target(key: str, prefix: str, path: str) -> str:
    """The list a ``$setElementOrder/<list>`` or ``$deleteFromPrimitiveList/<list>`` names."""
    head, slash, name = key.partition("/")
    if head != prefix or not slash or not name:
        what = "primitive list" if prefix == _DELETE_FROM else "setElementOrder list"
        raise PatchError(f"{_at(path)}: invalid patch format of {what}: {key!r}")
    return name


def _check_directive(value: Any, path: str) -> Any:
    if value not in (_REPLACE, _DELETE, _MERGE):
        raise PatchError(f"{_at(path)}: unknown patch type {_short(value)} in $patch")
    return value


def _check_keys(patch: dict[str, Any], node: _Node, path: str) -> None:
    """Refuse ``$`` keys that are neither directives nor fields the struct declares."""
    struct = _pick(node, (mi.StructType,))
    if not isinstance(struct, mi.StructType):
        return
    for key in patch:
        if (
            key.startswith("$")
            and key not in (_PATCH, _RETAIN_KEYS)
            and not key.startswith((_SET_ORDER, _DELETE_FROM))
            and key not in fields_by_name(struct)
        ):
            raise PatchError(f"{_at(path)}: unknown directive {key!r}")


def _at(path: str) -> str:
    return path or "the object"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _new_value(value: Any, node: _Node, path: str) -> Any:
    """A patch value that merges with nothing: without its nulls and directives.

    Returns ``_DROPPED`` for an object marked ``$patch: delete``.
    """
    if isinstance(value, dict):
        if _PATCH in value and _check_directive(value[_PATCH], path) == _DELETE:
            return _DROPPED
        _check_keys(value, node, path)
        out = {}
        for key, item in value.items():
            if key == _PATCH or item is None:
                continue
            if key == _RETAIN_KEYS:
                continue
            if key.startswith(_SET_ORDER):
                _target(key, _SET_ORDER, path)
                continue
            if key.startswith(_DELETE_FROM):
                _target(key, _DELETE_FROM, path)
                continue
            new = _new_value(item, _lookup(node, key)[0], _join(path, key))
            if new is not _DROPPED:
                out[key] = new
        return out
    if isinstance(value, list):
        items = _items(node)
        out_list = []
        for item in value:
            if isinstance(item, dict) and _PATCH in item:
                _check_directive(item[_PATCH], path)
                continue
            out_list.append(_new_value(item, items, path))
        return out_list
    return value


def _set(original: dict[str, Any], key: str, value: Any) -> None:
    if value is _DROPPED:
        original.pop(key, None)
    else:
        original[key] = value


def _merge_map(original: dict[str, Any], patch: dict[str, Any], node: _Node, path: str) -> Any:
    """Merge ``patch`` into ``original`` (which is changed and returned, or replaced)."""
    patch = dict(patch)
    if _PATCH in patch:
        directive = _check_directive(patch.pop(_PATCH), path)
        if directive == _REPLACE:
            return _new_value(patch, node, path)
        if directive == _DELETE:
            return {}
    _check_keys(patch, node, path)
    _retain_keys(original, patch, path)
    _order_lists(original, patch, node, path)
    for key, value in patch.items():
        if key.startswith(_DELETE_FROM):
            name = _target(key, _DELETE_FROM, path)
            _delete_from_list(original, name, value, _join(path, name))
            continue
        if value is None:
            original.pop(key, None)
            continue
        sub, info = _lookup(node, key)
        where = _join(path, key)
        current = original.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            if _strategy(info) == _REPLACE:
                _set(original, key, _new_value(value, sub, where))
            else:
                original[key] = _merge_map(current, value, sub, where)
        elif isinstance(current, list) and isinstance(value, list):
            original[key] = _merge_list_field(current, value, sub, info, where)[0]
        else:
            _set(original, key, _new_value(value, sub, where))
    return original


def _retain_keys(original: dict[str, Any], patch: dict[str, Any], path: str) -> None:
    """Apply ``$retainKeys``: clear the fields of ``original`` it does not list."""
    if _RETAIN_KEYS not in patch:
        return
    listed = patch.pop(_RETAIN_KEYS)
    if not isinstance(listed, list):
        raise PatchError(
            f"{_at(path)}: invalid patch format of retainKeys: $retainKeys must be a list"
        )
    keep = {_key(k) for k in listed}
    for key, value in patch.items():
        if value is None or key.startswith((_SET_ORDER, _DELETE_FROM)):
            continue
        if _key(key) not in keep:
            raise PatchError(
                f"{_at(path)}: invalid patch format of retainKeys: the patch sets {key!r}, "
                "which $retainKeys does not list"
            )
    for key in list(original):
        if _key(key) not in keep:
            del original[key]


def _delete_from_list(original: dict[str, Any], name: str, values: Any, path: str) -> None:
    """Apply ``$deleteFromPrimitiveList/<name>``: remove ``values`` from a list of scalars."""
    if not isinstance(values, list) or any(isinstance(v, dict | list) for v in values):
        raise PatchError(
            f"{_at(path)}: invalid patch format of primitive list: "
            "$deleteFromPrimitiveList needs a list of scalars"
        )
    current = original.get(name)
    if not isinstance(current, list):
        return
    if any(isinstance(v, dict | list) for v in current):
        raise PatchError(f"{_at(path)}: $deleteFromPrimitiveList applies only to lists of scalars")
    doomed = {_key(v) for v in values}
    original[name] = [v for v in current if _key(v) not in doomed]


def _merge_list_field(
    original: list[Any], patch: list[Any], node: _Node, info: FieldMeta, path: str
) -> tuple[list[Any], list[Any]]:
    """The list field merged or replaced, as declared, and the positions of the original items
    that ``$setElementOrder`` orders by (see ``_merge_list``)."""
    if _strategy(info) != _MERGE:
        replaced: list[Any] = _new_value(patch, node, path)
        return replaced, original
    return _merge_list(original, patch, _items(node), info.patch_merge_key or "", path)


def _element_kind(path: str, *lists: list[Any]) -> str | None:
    """``"object"`` or ``"scalar"``: what the items of the lists are (None when there are none)."""
    kinds = set()
    for items in lists:
        for item in items:
            if isinstance(item, list):
                raise PatchError(f"{_at(path)}: lists of lists are not supported", _UNPROCESSABLE)
            kinds.add("object" if isinstance(item, dict) else _describe(item))
    if len(kinds) > 1:
        raise PatchError(
            f"{_at(path)}: list items are not all of one type ({', '.join(sorted(kinds))})"
        )
    if not kinds:
        return None
    return "object" if kinds == {"object"} else "scalar"


def _merge_key_value(item: Any, merge_key: str, path: str) -> Any:
    if not isinstance(item, dict):
        raise PatchError(f"{_at(path)}: expected an object, got a {_describe(item)}")
    if merge_key not in item:
        raise PatchError(
            f"{_at(path)}: {_short(item)} does not contain declared merge key: {merge_key}"
        )
    return item[merge_key]


def _merge_list(
    original: list[Any], patch: list[Any], items: _Node, merge_key: str, path: str
) -> tuple[list[Any], list[Any]]:
    """Merge a list declared ``merge``: by merge key for objects, as a set for scalars.

    Also returns where the original items stand for a ``$setElementOrder`` of the same list.
    Upstream edits the original list in place (deleted items close up, new items fill the
    freed slots) and its expected results depend on that, so the second list replays it.
    """
    if not original and not patch:
        return original, original
    if _element_kind(path, original, patch) != "object":
        seen: set[Hashable] = set()
        merged = []
        for value in original + patch:
            if _key(value) not in seen:
                seen.add(_key(value))
                merged.append(value)
        in_patch = {_key(v) for v in patch}
        ours = [v for v in merged if _key(v) in in_patch]
        theirs = [v for v in merged if _key(v) not in in_patch]
        return _normalize_order(ours, theirs, patch, original, "", path), original
    if not merge_key:
        raise PatchError(f"{_at(path)}: cannot merge a list of objects without a merge key")

    # Items with $patch: delete remove their matches; $patch: replace drops the original.
    slots, used = list(original), len(original)
    plain = []
    replace = False
    for item in patch:
        if _PATCH not in item:
            plain.append(item)
            continue
        directive = _check_directive(item[_PATCH], path)
        if directive == _DELETE:
            doomed = _key(_merge_key_value(item, merge_key, path))
            index = 0
            while index < used:
                entry = slots[index]
                if merge_key in entry and _key(entry[merge_key]) == doomed:
                    slots[index : used - 1] = slots[index + 1 : used]
                    used -= 1
                else:
                    index += 1
        elif directive == _REPLACE:
            replace = True
        else:
            raise PatchError(f"{_at(path)}: merging lists cannot yet be specified in the patch")
    kept = slots[:used]
    if replace:
        kept, plain = [_new_value(item, items, path) for item in plain], []

    merged = list(kept)
    for item in plain:
        value = _key(_merge_key_value(item, merge_key, path))
        where = f"{path}[{merge_key}={_short(item[merge_key], 40)}]"
        for index, entry in enumerate(merged):
            if merge_key in entry and _key(entry[merge_key]) == value:
                merged[index] = _merge_map(entry, item, items, where)
                break
        else:
            merged.append(_new_value(item, items, where))
            if not replace and used < len(slots):
                slots[used] = merged[-1]
            used += 1

    in_patch = {_key(item[merge_key]) for item in plain}
    ours, theirs = [], []
    for entry in merged:
        (ours if _key(_merge_key_value(entry, merge_key, path)) in in_patch else theirs).append(
            entry
        )
    return _normalize_order(ours, theirs, plain, kept, merge_key, path), slots


def _normalize_order(
    ours: list[Any],
    theirs: list[Any],
    our_order: list[Any],
    their_order: list[Any],
    merge_key: str,
    path: str,
) -> list[Any]:
    """Patch items (``ours``) in ``our_order``, server-only items (``theirs``) in the order they
    had, then both interleaved: a server-only item goes before the next patch item when it came
    before that item in ``their_order`` (upstream's normalizeElementOrder and mergeSortedSlice)."""

    def identity(item: Any) -> Hashable:
        if merge_key:
            return _key(_merge_key_value(item, merge_key, path))
        return _key(item)

    def positions(order: list[Any]) -> dict[Hashable, int]:
        found: dict[Hashable, int] = {}
        for index, item in enumerate(order):
            found.setdefault(identity(item), index)
        return found

    our_positions, their_positions = positions(our_order), positions(their_order)
    ours = sorted(ours, key=lambda item: our_positions.get(identity(item), len(our_order)))
    theirs = sorted(theirs, key=lambda item: their_positions.get(identity(item), len(their_order)))
    merged = []
    i = j = 0
    while i < len(theirs) or j < len(ours):
        if j >= len(ours):
            merged.append(theirs[i])
            i += 1
        elif i >= len(theirs):
            merged.append(ours[j])
            j += 1
        else:
            left = their_positions.get(identity(theirs[i]))
            right = their_positions.get(identity(ours[j]))
            if left is not None and right is not None and left < right:
                merged.append(theirs[i])
                i += 1
            else:
                merged.append(ours[j])
                j += 1
    return merged


def _order_lists(original: dict[str, Any], patch: dict[str, Any], node: _Node, path: str) -> None:
    """Apply each ``$setElementOrder/<list>``: merge ``<list>`` and put it in that order.

    The merged list leaves ``patch`` so that the main merge does not see it again.
    """
    for key in [k for k in patch if k.startswith(_SET_ORDER)]:
        order = patch.pop(key)
        name = _target(key, _SET_ORDER, path)
        where = _join(path, name)
        if not isinstance(order, list):
            raise PatchError(f"{where}: invalid patch format of setElementOrder list: not a list")
        sub, info = _lookup(node, name)
        merge_key = info.patch_merge_key or ""
        in_original, in_patch = name in original, name in patch
        current, wanted = original.get(name), patch.get(name)
        if in_original and not isinstance(current, list):
            raise PatchError(f"{where}: expected a list, got a {_describe(current)}")
        if in_patch and not isinstance(wanted, list):
            raise PatchError(f"{where}: expected a list in the patch, got a {_describe(wanted)}")
        current = current if isinstance(current, list) else []
        wanted = wanted if isinstance(wanted, list) else []
        _check_order(wanted, order, merge_key, where)
        positions = current
        if in_original and in_patch:
            merged, positions = _merge_list_field(current, wanted, sub, info, where)
        elif in_patch:
            merged = _new_value(wanted, sub, where)
        elif in_original:
            merged = current
        else:
            continue
        patch.pop(name, None)
        kind = _element_kind(where, current, wanted)
        if kind == "object" and not merge_key:
            raise PatchError(f"{where}: $setElementOrder needs a list merged by key")
        if kind == "object":
            named = {_key(_merge_key_value(item, merge_key, where)) for item in order}
            ours: list[Any] = []
            theirs: list[Any] = []
            for item in merged:
                value = _key(_merge_key_value(item, merge_key, where))
                (ours if value in named else theirs).append(item)
        else:
            named = {_key(item) for item in order}
            ours = [item for item in merged if _key(item) in named]
            theirs = [item for item in merged if _key(item) not in named]
        key_of_items = merge_key if kind == "object" else ""
        original[name] = _normalize_order(ours, theirs, order, positions, key_of_items, where)


def _check_order(wanted: list[Any], order: list[Any], merge_key: str, path: str) -> None:
    """The patch's items must appear in ``$setElementOrder`` in the same relative order."""
    if not order or not wanted:
        return
    items = [item for item in wanted if not (merge_key and _directive_of(item, path) == _DELETE)]
    i = j = 0
    while i < len(items) and j < len(order):
        if isinstance(items[i], dict) and _PATCH in items[i]:
            i += 1
            continue
        if merge_key:
            same = _key(_merge_key_value(items[i], merge_key, path)) == _key(
                _merge_key_value(order[j], merge_key, path)
            )
        else:
            same = _json_equal(items[i], order[j])
        if same:
            i += 1
        j += 1
    if any(not (isinstance(item, dict) and _PATCH in item) for item in items[i:]):
        raise PatchError(
            f"{_at(path)}: the order in the patch list {_short(wanted)} doesn't match the "
            f"$setElementOrder list {_short(order)}"
        )


def _directive_of(item: Any, path: str) -> Any:
    if not isinstance(item, dict):
        raise PatchError(f"{_at(path)}: expected an object, got a {_describe(item)}")
    return item.get(_PATCH)


def apply_strategic_merge_patch(doc: Any, patch: Any, schema: type[Struct]) -> Any:
    """``doc``, an object of kind ``schema`` as plain values, with a strategic merge patch."""
    if not isinstance(patch, dict):
        raise PatchError(f"a strategic merge patch must be a JSON object, not {_describe(patch)}")
    if not isinstance(doc, dict):
        raise PatchError(f"cannot apply a strategic merge patch to a {_describe(doc)}")
    root = type_tree(schema)
    return _guard(lambda: _merge_map(_copy(doc), patch, root, ""))
