"""Server-side apply and ``metadata.managedFields``: who owns which field of an object.

Upstream keeps this in sigs.k8s.io/structured-merge-diff (field sets, merge, compare) and
k8s.io/apiserver's fieldmanager (the bookkeeping around it); this module follows their rules,
reading list and map semantics from the kinds' declarations (``FieldMeta``) instead of OpenAPI.

Field sets
    A set of paths into an object, stored as ``fieldsV1`` tries: ``f:<field>`` steps into a
    field or map key, ``k:{"name":"nginx"}`` into the item of a ``map`` list (``list_type="map"``
    or a merge key) by its ``list_map_keys``, ``v:<json>`` into the value of a ``set`` list, and
    ``"."`` marks an item that is itself a member.  Scalars, ``atomic`` lists and maps, and
    untyped JSON are leaves owned as a whole; lists default to atomic, as upstream.

Apply (``apply``)
    The configuration is merged into the live object: its fields are set, maps and structs
    merge key by key, ``map`` lists merge by key (upstream's ordering), ``set`` lists are
    unioned, leaves are replaced.  Fields the same manager applied last time but no longer lists
    are removed unless some manager still owns them.  A changed field another manager owns is a
    409 listing every conflict unless ``force`` takes it over; an unchanged one becomes shared.
    ``kubectl`` may take over fields its client-side apply recorded in the last-applied
    annotation, and keeps that annotation in step (upstream's lastAppliedManager and Updater).

Updates (``record_update``, the registry's field tracker)
    Every other write records an ``Update`` entry for its manager (``?fieldManager=``, else the
    User-Agent up to its first ``/``) with the fields it added or changed; those leave the other
    managers' sets, and removed fields leave every set.  Entries are kept per manager, operation,
    apiVersion (Updates only) and subresource; a write that changes nothing changes no entry.

Not modelled: version conversion of field sets, unions, and the cap of ten Update entries.
"""

from __future__ import annotations

import datetime
import json
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

import msgspec
from msgspec import inspect as mi

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import RequestContext
from kube.api import codec, walk
from kube.api.meta_v1 import ManagedFieldsEntry, Resource, StatusCause, StatusDetails
from kube.api.scheme import KindInfo
from kube.api.struct import NO_META, FieldMeta, Struct, field_meta
from kube.api.typeinfo import fields_by_name, type_tree

Path: TypeAlias = tuple[str, ...]
"""A path into an object: ``("f:spec", "f:containers", 'k:{"name":"nginx"}', "f:image")``."""

FieldSet: TypeAlias = frozenset[Path]
"""The member paths of a field set."""

APPLY, UPDATE = "Apply", "Update"
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
BEFORE_FIRST_APPLY: Final = "before-first-apply"
MAX_MANAGER_LENGTH: Final = 128

# Paths nobody owns (upstream's stripMetaManager).
_STRIPPED: Final = frozenset(
    {
        ("f:apiVersion",),
        ("f:kind",),
        ("f:metadata",),
        *(
            ("f:metadata", f"f:{name}")
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        ),
    }
)


class SchemaError(ValueError):
    """A value the declaration cannot place (a map-list item without its keys, duplicates)."""


# Field sets in their fieldsV1 form.

_RANK: Final = {"f": 0, "k": 1, "v": 2, "i": 3}


def _order(key: str) -> tuple[int, str]:
    return _RANK.get(key[:1], 4), key


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """The fieldsV1 trie of a set of paths."""
    root: dict[str, Any] = {}
    members: set[Path] = set()
    for path in paths:
        node = root
        for element in path:
            node = node.setdefault(element, {})
        members.add(path)

    def render(node: dict[str, Any], prefix: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if prefix in members and node:
            out["."] = {}
        for key in sorted(node, key=_order):
            out[key] = render(node[key], (*prefix, key))
        return out

    return render(root, ())


def from_fields_v1(trie: Any) -> FieldSet:
    """The paths of a fieldsV1 trie; ``ValueError`` if it is not one."""
    out: set[Path] = set()

    def walk(node: Any, prefix: Path) -> None:
        if not isinstance(node, dict):
            raise ValueError(f"fieldsV1 at {prefix}: expected an object")
        for key, child in node.items():
            if key == ".":
                out.add(prefix)
                continue
            if key[:2] not in ("f:", "k:", "v:", "i:"):
                raise ValueError(f"fieldsV1: unknown path element {key!r}")
            path = (*prefix, key)
            if isinstance(child, dict) and not child:
                out.add(path)
            else:
                walk(child, path)

    walk(trie, ())
    return frozenset(out)


def _show_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def path_string(path: Path) -> str:
    """A path as upstream prints it: ``.spec.containers[name="nginx"].image``."""
    parts = []
    for element in path:
        kind, text = element[:1], element[2:]
        if kind == "f":
            parts.append("." + text)
        elif kind == "k":
            key = json.loads(text)
            parts.append("[" + ",".join(f"{k}={_show_value(v)}" for k, v in key.items()) + "]")
        elif kind == "v":
            parts.append(f"[={_show_value(json.loads(text))}]")
        else:
            parts.append(f"[{text}]")
    return "".join(parts)


# The declarations, as shapes of values.

_Node: TypeAlias = "mi.Type | None"

LEAF, STRUCT, MAP, MAP_LIST, SET_LIST = "leaf", "struct", "map", "map-list", "set-list"


@dataclass(frozen=True)
class _Shape:
    kind: str
    t: _Node = None
    meta: FieldMeta = NO_META


_LEAF: Final = _Shape(LEAF)


def _shape(node: _Node) -> _Shape:
    """What a declared type makes of a value: a struct, a map, a keyed or set list, a leaf."""
    info = NO_META
    t = node
    while True:
        if isinstance(t, mi.Metadata):
            if info is NO_META:
                info = field_meta(t.extra)
            t = t.type
        elif isinstance(t, mi.UnionType):
            rest = [u for u in t.types if not isinstance(u, mi.NoneType)]
            if len(rest) != 1:
                return _LEAF
            t = rest[0]
        else:
            break
    if info.preserve_unknown:
        return _LEAF
    if isinstance(t, mi.StructType):
        return _Shape(STRUCT, t, info)
    if isinstance(t, mi.DictType):
        return _Shape(LEAF, t, info) if info.map_type == "atomic" else _Shape(MAP, t, info)
    if isinstance(t, mi.ListType):
        if info.list_type == "map" and info.list_map_keys:
            return _Shape(MAP_LIST, t, info)
        if info.list_type == "set":
            return _Shape(SET_LIST, t, info)
        return _Shape(LEAF, t, info)
    return _LEAF


def _fits(shape: _Shape, value: Any) -> bool:
    if shape.kind in (STRUCT, MAP):
        return isinstance(value, dict)
    if shape.kind in (MAP_LIST, SET_LIST):
        return isinstance(value, list)
    return True


def _child(shape: _Shape, key: str) -> tuple[_Node, bool]:
    """The declared type of member ``key`` and whether it is a named (struct) field."""
    if shape.kind == STRUCT:
        assert isinstance(shape.t, mi.StructType)
        f = fields_by_name(shape.t).get(key)
        return (f.type, True) if f is not None else (None, False)
    if shape.kind == MAP:
        assert isinstance(shape.t, mi.DictType)
        return shape.t.value_type, False
    return None, False


def _item(shape: _Shape) -> _Node:
    assert isinstance(shape.t, mi.ListType)
    return shape.t.item_type


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _element(shape: _Shape, item: Any, index: int) -> str:
    """The path element of a list item: ``k:{...}`` by its keys or ``v:<json>``."""
    if shape.kind == SET_LIST:
        if isinstance(item, dict | list):
            raise SchemaError(f"element {index}: a set may hold only scalars")
        return "v:" + _compact(item)
    if not isinstance(item, dict):
        raise SchemaError(f"element {index}: expected an object in an associative list")
    keys = shape.meta.list_map_keys or ()
    present = {k: item[k] for k in keys if item.get(k) is not None}
    if len(present) < len(keys):
        present = {k: v for k, v in _defaulted(_item(shape), item).items() if k in keys}
    if not present:
        missing = next(iter(keys), "")
        raise SchemaError(
            f'element {index}: associative list with keys has an element that omits key field "'
            f'{missing}"'
        )
    return "k:" + _compact(present)


def _defaulted(node: _Node, item: dict[str, Any]) -> dict[str, Any]:
    """A list item with its declared defaults (key fields such as a port's protocol default,
    as upstream's schemas give them)."""
    target = _shape(node)
    if target.kind != STRUCT:
        return item
    assert isinstance(target.t, mi.StructType)
    try:
        typed = msgspec.convert(item, target.t.cls)
    except msgspec.ValidationError:
        return item
    if not isinstance(typed, Struct):
        return item
    walk.set_defaults(typed)
    defaulted: dict[str, Any] = codec.to_builtins(typed)
    return {k: v for k, v in defaulted.items() if v is not None}


def _index(shape: _Shape, items: list[Any], *, unique: bool) -> list[tuple[str, Any]]:
    """The items of a list by path element; duplicates are an error when ``unique``."""
    out = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        element = _element(shape, item, index)
        if element in seen and unique:
            raise SchemaError(f"duplicate entries for key {path_string((element,))}")
        seen.add(element)
        out.append((element, item))
    return out


def _same(a: Any, b: Any) -> bool:
    return bool(msgspec.json.encode(a, order="sorted") == msgspec.json.encode(b, order="sorted"))


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# Field sets of values.


def field_set(value: dict[str, Any], cls: type[Struct]) -> FieldSet:
    """The fields an applied configuration (plain values of kind ``cls``) sets."""
    out: set[Path] = set()
    _to_set(value, type_tree(cls), (), out)
    return frozenset(out)


def _to_set(value: Any, node: _Node, path: Path, out: set[Path]) -> None:
    shape = _shape(node)
    if shape.kind == LEAF or not _fits(shape, value):
        out.add(path)
        return
    if shape.kind in (STRUCT, MAP):
        for key, child in value.items():
            child_node, named = _child(shape, key)
            child_path = (*path, f"f:{key}")
            _to_set(child, child_node, child_path, out)
            if child is None or child == {} or not named:
                out.add(child_path)
        return
    for element, item in _index(shape, value, unique=True):
        item_path = (*path, element)
        _to_set(item, _item(shape), item_path, out)
        out.add(item_path)


@dataclass
class Comparison:
    """What changed between two values: paths added, modified and removed."""

    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)

    @property
    def changed(self) -> set[Path]:
        return self.added | self.modified


_MISSING: Final = object()


def compare(old: dict[str, Any], new: dict[str, Any], cls: type[Struct]) -> Comparison:
    """The paths that differ between two objects of kind ``cls`` (plain values)."""
    result = Comparison()
    _compare(old, new, type_tree(cls), (), result)
    return result


def _empty(value: Any) -> bool:
    return value is _MISSING or value is None or value == {} or value == []


def _compare(
    old: Any, new: Any, node: _Node, path: Path, out: Comparison, item: bool = False
) -> None:
    """``item``: the value is a list item or a map entry, not a struct field."""
    if old == new:
        return  # equal subtrees differ nowhere: one C-level comparison prunes most of the walk
    shape = _shape(node)
    if (
        shape.kind == LEAF
        or (old is not _MISSING and not _fits(shape, old))
        or (new is not _MISSING and not _fits(shape, new))
        or (_empty(old) and _empty(new))
    ):
        if old is _MISSING:
            out.added.add(path)
        elif new is _MISSING:
            out.removed.add(path)
        elif not _same(old, new):
            out.modified.add(path)
        return
    if shape.kind in (STRUCT, MAP):
        left = old if isinstance(old, dict) else {}
        right = new if isinstance(new, dict) else {}
        for key in dict.fromkeys([*left, *right]):
            before, after = left.get(key, _MISSING), right.get(key, _MISSING)
            if before == after:
                continue
            child_node, _ = _child(shape, key)
            _compare(
                before,
                after,
                child_node,
                (*path, f"f:{key}"),
                out,
                item=shape.kind == MAP,
            )
    else:
        left_items = dict(
            reversed(_index(shape, old if isinstance(old, list) else [], unique=False))
        )
        right_items = dict(
            reversed(_index(shape, new if isinstance(new, list) else [], unique=False))
        )
        for element in dict.fromkeys([*left_items, *right_items]):
            _compare(
                left_items.get(element, _MISSING),
                right_items.get(element, _MISSING),
                _item(shape),
                (*path, element),
                out,
                item=True,
            )
    # Maps, lists and list items that appear or vanish are members themselves; struct fields
    # are not (Go keeps them as zero values: upstream never sees a non-pointer struct go).
    if path and (item or shape.kind != STRUCT):
        if old is _MISSING:
            out.added.add(path)
        elif new is _MISSING:
            out.removed.add(path)


# Merging a configuration into an object.


def merge(live: dict[str, Any], config: dict[str, Any], cls: type[Struct]) -> dict[str, Any]:
    """``config`` merged into ``live`` (new plain values; the inputs are not changed)."""
    merged = _merge(live, config, type_tree(cls))
    assert isinstance(merged, dict)
    return _copy(merged)  # type: ignore[no-any-return]


def atomic_paths(config: dict[str, Any], cls: type[Struct]) -> list[str]:
    """Where ``config`` sets a list or map that a merge replaces as a whole, as
    structured-merge-diff prints paths (``.spec.initContainers[0].args``, list items by
    index): what a mutating admission policy's apply configuration may not set, since the
    values it leaves out would be dropped (upstream's ``findAtomics``)."""
    found: list[str] = []
    _atomics(config, type_tree(cls), "", found)
    return found


def _atomics(value: Any, node: _Node, path: str, found: list[str]) -> None:
    shape = _shape(node)
    if shape.kind == LEAF:
        if isinstance(shape.t, mi.ListType | mi.DictType) and isinstance(value, list | dict):
            found.append(path)
    elif shape.kind in (STRUCT, MAP) and isinstance(value, dict):
        for key, member in value.items():
            _atomics(member, _child(shape, key)[0], f"{path}.{key}", found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _atomics(item, _item(shape), f"{path}[{index}]", found)


def _merge(live: Any, config: Any, node: _Node) -> Any:
    if config is _MISSING:
        return live
    if live is _MISSING:
        return config
    shape = _shape(node)
    if (
        shape.kind == LEAF
        or not _fits(shape, live)
        or not _fits(shape, config)
        or (_empty(live) and _empty(config))
    ):
        return config
    if shape.kind in (STRUCT, MAP):
        out = dict(live)
        for key, value in config.items():
            out[key] = _merge(live.get(key, _MISSING), value, _child(shape, key)[0])
        return out
    return _merge_list(live, config, shape)


def _merge_list(live: list[Any], config: list[Any], shape: _Shape) -> list[Any]:
    """Items of both: live items keep their places, configured ones come in the config's order
    (structured-merge-diff's ``visitListItems``)."""
    item_node = _item(shape)
    left = _index(shape, live, unique=False)
    right = _index(shape, config, unique=True)
    left_items: dict[str, Any] = {}
    for element, item in left:
        left_items.setdefault(element, item)
    right_items = dict(right)
    shared = deque(e for e, _ in right if e in left_items)
    upcoming = shared.popleft() if shared else None
    merged_right: set[str] = set()
    out = []
    li = ri = 0
    while li < len(left) or ri < len(right):
        if li < len(left) and ri < len(right):
            element = left[li][0]
            if element == right[ri][0]:
                merged_right.add(element)
                out.append(_merge(left_items[element], right_items[element], item_node))
                li += 1
                ri += 1
                upcoming = shared.popleft() if shared else None
                continue
            if element in right_items and upcoming is not None and upcoming != element:
                li += 1
                continue
        if li < len(left):
            element, item = left[li]
            if element not in right_items:
                out.append(item)
                li += 1
                continue
            if element in merged_right:
                li += 1
                continue
        if ri < len(right):
            element = right[ri][0]
            merged_right.add(element)
            out.append(_merge(left_items.get(element, _MISSING), right_items[element], item_node))
            ri += 1
            if upcoming is not None and upcoming == element:
                upcoming = shared.popleft() if shared else None
    return out


def _named(paths: Iterable[Path], cls: type[Struct]) -> set[Path]:
    """The paths, and every struct field on the way to one (``EnsureNamedFieldsAreMembers``)."""
    out = set(paths)
    root = type_tree(cls)
    for path in list(out):
        node: _Node = root
        for depth, element in enumerate(path[:-1]):
            shape = _shape(node)
            if element.startswith("f:") and shape.kind in (STRUCT, MAP):
                node, named = _child(shape, element[2:])
                if named:
                    out.add(path[: depth + 1])
            elif shape.kind in (MAP_LIST, SET_LIST):
                node = _item(shape)
            else:
                break
    return out


def _matches(item: Any, element: str) -> bool:
    value = json.loads(element[2:])
    if element.startswith("v:"):
        return _same(item, value)
    return isinstance(item, dict) and all(k in item and _same(item[k], v) for k, v in value.items())


def _remove(value: dict[str, Any], path: Path) -> None:
    """Remove what ``path`` names from ``value`` (in place), if it is there."""
    container: Any = value
    for element in path[:-1]:
        if element.startswith("f:") and isinstance(container, dict):
            container = container.get(element[2:])
        elif element[:2] in ("k:", "v:") and isinstance(container, list):
            container = next((i for i in container if _matches(i, element)), None)
        else:
            return
    last = path[-1]
    if last.startswith("f:") and isinstance(container, dict):
        container.pop(last[2:], None)
    elif last[:2] in ("k:", "v:") and isinstance(container, list):
        container[:] = [i for i in container if not _matches(i, last)]


def prune(merged: dict[str, Any], last: FieldSet, keep: Iterable[Path], cls: type[Struct]) -> None:
    """Remove (in place) what the manager applied ``last`` time and nobody owns (``keep``)."""
    if not last:
        return
    kept = _named(keep, cls)
    for path in sorted(_named(last, cls) - kept, key=len):
        if path:
            _remove(merged, path)


# Managers.

Identity: TypeAlias = tuple[str, str, str, str]
"""(manager, operation, apiVersion of an Update, subresource): one managedFields entry."""


@dataclass
class Managed:
    """One managedFields entry, decoded."""

    manager: str
    operation: str
    api_version: str
    subresource: str
    fields: FieldSet
    time: datetime.datetime | None = None

    @property
    def identity(self) -> Identity:
        version = self.api_version if self.operation == UPDATE else ""
        return (self.manager, self.operation, version, self.subresource)

    def describe(self) -> str:
        """As upstream's printManager: ``"kubectl" using apps/v1``."""
        text = json.dumps(self.manager, ensure_ascii=False)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == UPDATE:
            text += f" using {self.api_version}"
        return text


def decode_managed(entries: list[ManagedFieldsEntry] | None) -> dict[Identity, Managed]:
    """Entries by identity; ``ValueError`` for one that is not well formed."""
    out: dict[Identity, Managed] = {}
    for entry in entries or ():
        if entry.operation not in (APPLY, UPDATE):
            raise ValueError(f"invalid operation {entry.operation!r}")
        if entry.fields_type not in (None, "FieldsV1"):
            raise ValueError(f"invalid fieldsType {entry.fields_type!r}")
        fields = from_fields_v1(entry.fields_v1 if entry.fields_v1 is not None else {})
        managed = Managed(
            entry.manager or "",
            entry.operation,
            entry.api_version or "",
            entry.subresource or "",
            fields,
            entry.time,
        )
        previous = out.get(managed.identity)
        if previous is not None:
            managed.fields |= previous.fields
        out[managed.identity] = managed
    return out


def encode_managed(managers: dict[Identity, Managed]) -> list[ManagedFieldsEntry] | None:
    """The entries, without empty ones, in upstream's order."""

    def order(m: Managed) -> tuple[str, float, str, str, str]:
        seconds = m.time.timestamp() if m.time is not None else 0.0
        return (m.operation, seconds, m.manager, m.api_version, m.subresource)

    entries = [
        ManagedFieldsEntry(
            manager=m.manager,
            operation=m.operation,
            api_version=m.api_version or None,
            time=m.time,
            fields_type="FieldsV1",
            fields_v1=to_fields_v1(m.fields),
            subresource=m.subresource or None,
        )
        for m in sorted(managers.values(), key=order)
        if m.fields
    ]
    return entries or None


def manager_from_user_agent(user_agent: str) -> str:
    """Upstream's default manager: the User-Agent up to its first ``/``, printable, capped."""
    out = ""
    for char in user_agent.split("/", 1)[0]:
        if not char.isprintable():
            continue
        if len((out + char).encode()) > MAX_MANAGER_LENGTH:
            break
        out += char
    return out


# What a write may own (upstream's reset fields: status through /status only).


def _has_status(info: KindInfo) -> bool:
    return "status" in info.subresources and "status" in info.cls.__struct_fields__


def _ownable(paths: Iterable[Path], info: KindInfo, subresource: str) -> set[Path]:
    if subresource == "status" and _has_status(info):
        return {p for p in paths if p[:1] == ("f:status",)}
    if _has_status(info):
        return {p for p in paths if p[:1] != ("f:status",)}
    return set(paths)


def _plain(obj: Resource) -> dict[str, Any]:
    """An object as plain values, without its managedFields."""
    value: dict[str, Any] = codec.to_builtins(obj)
    value.get("metadata", {}).pop("managedFields", None)
    return value


def _now(moment: datetime.datetime) -> datetime.datetime:
    return moment.astimezone(datetime.UTC).replace(microsecond=0)


def _take_over(
    managers: dict[Identity, Managed], changes: Comparison, writer: Identity | None
) -> None:
    """Fields the write changed leave the other managers; removed fields leave everyone."""
    changed = frozenset(changes.changed)
    removed = frozenset(changes.removed)
    for identity, managed in list(managers.items()):
        if identity != writer:
            managed.fields = managed.fields - changed - removed
        if not managed.fields:
            del managers[identity]


def _update(
    managers: dict[Identity, Managed],
    old: dict[str, Any],
    new: dict[str, Any],
    info: KindInfo,
    manager: str,
    subresource: str,
    now: datetime.datetime,
) -> None:
    """Record an Update by ``manager`` that turned ``old`` into ``new`` (upstream's Updater)."""
    changes = compare(old, new, info.cls)
    changes.added = _ownable(changes.added, info, subresource) - _STRIPPED
    changes.modified = _ownable(changes.modified, info, subresource) - _STRIPPED
    changes.removed = _ownable(changes.removed, info, subresource)
    _take_over(managers, changes, None)
    if not changes.changed:
        return
    entry = Managed(manager, UPDATE, info.api_version, subresource, frozenset(changes.changed))
    previous = managers.get(entry.identity)
    if previous is not None:
        entry.fields |= previous.fields
    entry.time = _now(now)
    managers[entry.identity] = entry


def record_update(
    info: KindInfo,
    obj: Resource,
    old: Resource | None,
    ctx: RequestContext,
    subresource: str,
    now: datetime.datetime,
) -> None:
    """The registry's field tracker: record a create or update in ``obj``'s managedFields.

    As upstream's ``decodeLiveOrNew``, managedFields sent with the object replace the live ones
    (``[]`` clears them), except through a subresource; absent, the live ones carry on.
    """
    if ctx.server_side_apply:
        return
    live_entries = old.metadata.managed_fields if old is not None else None
    sent = obj.metadata.managed_fields
    base = live_entries
    if not subresource and sent is not None:
        if sent == [] or sent == [ManagedFieldsEntry()]:
            base = []
        elif sent:
            base = sent
    try:
        managers = decode_managed(base)
    except ValueError:
        try:
            managers = decode_managed(live_entries)
        except ValueError:
            managers = {}
    manager = ctx.field_manager or manager_from_user_agent(ctx.user_agent)
    if manager and (managers or old is None):
        old_plain = _plain(old) if old is not None else {}
        try:
            _update(managers, old_plain, _plain(obj), info, manager, subresource, now)
        except SchemaError:
            managers = {}  # as upstream: no garbage in managedFields
    obj.metadata.managed_fields = encode_managed(managers)


# Apply.


def _conflict_error(conflicts: list[tuple[Managed, Path]]) -> errors.ApiError:
    causes = [
        StatusCause(
            reason="FieldManagerConflict",
            message=f"conflict with {managed.describe()}",
            field=path_string(path),
        )
        for managed, path in conflicts
    ]
    if len(conflicts) == 1:
        managed, path = conflicts[0]
        message = (
            f"Apply failed with 1 conflict: conflict with {managed.describe()}: {path_string(path)}"
        )
    else:
        lines = []
        by_manager: dict[str, list[Path]] = {}
        described: dict[str, Managed] = {}
        for managed, path in conflicts:
            by_manager.setdefault(managed.manager + "\0" + repr(managed.identity), []).append(path)
            described[managed.manager + "\0" + repr(managed.identity)] = managed
        for key in sorted(by_manager):
            lines.append(f"conflicts with {described[key].describe()}:")
            lines.extend(f"- {path_string(p)}" for p in by_manager[key])
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.ApiError(409, "Conflict", message, StatusDetails(causes=causes))


def _path_order(path: Path) -> tuple[tuple[int, str], ...]:
    return tuple(_order(element) for element in path)


def _conflicts(
    managers: dict[Identity, Managed], changed: set[Path], applier: Identity
) -> list[tuple[Managed, Path]]:
    found = []
    for identity in sorted(managers):
        if identity == applier:
            continue
        managed = managers[identity]
        for path in sorted(managed.fields & changed, key=_path_order):
            found.append((managed, path))
    return found


def _last_applied_allowance(live: dict[str, Any], info: KindInfo) -> FieldSet:
    """Fields kubectl's client-side apply recorded and that still hold: kubectl may take
    them over from its client-side manager (upstream's lastAppliedManager)."""
    text = (live.get("metadata", {}).get("annotations") or {}).get(LAST_APPLIED)
    if not text:
        return frozenset()
    try:
        recorded = json.loads(text)
        if not isinstance(recorded, dict) or recorded.get("apiVersion") != info.api_version:
            return frozenset()
        last = codec.to_builtins(codec.from_builtins(recorded, info.cls).obj)
        fields = field_set(last, info.cls)
        drift = compare(last, live, info.cls)
    except (ValueError, SchemaError):
        return frozenset()
    return fields - drift.changed - drift.removed


def _last_applied(config: dict[str, Any]) -> str:
    """The configuration as kubectl records it in its annotation (without the annotation)."""
    value = _copy(config)
    annotations = value.get("metadata", {}).get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "\n"


def apply(
    info: KindInfo,
    live: Resource | None,
    config: dict[str, Any],
    manager: str,
    *,
    force: bool,
    subresource: str,
    now: datetime.datetime,
) -> Resource:
    """``config`` applied by ``manager`` to ``live`` (None: the object is new).

    ``config`` is a checked configuration as plain values (no unknown fields, no nulls).
    Raises ``ApiError``: 409 for conflicts (unless ``force``), 422 when the configuration
    cannot be merged (duplicate keys, list items without their keys).
    """
    try:
        return _apply(info, live, config, manager, force, subresource, now)
    except SchemaError as error:
        raise errors.ApiError(
            422,
            "Invalid",
            f"failed to create typed patch object ({info.api_version}, Kind={info.kind}): {error}",
        ) from None


def _apply(
    info: KindInfo,
    live: Resource | None,
    config: dict[str, Any],
    manager: str,
    force: bool,
    subresource: str,
    now: datetime.datetime,
) -> Resource:
    cls = info.cls
    applied = field_set(config, cls)
    if live is None:
        live_plain: dict[str, Any] = {}
        managers: dict[Identity, Managed] = {}
    else:
        live_plain = _plain(live)
        try:
            managers = decode_managed(live.metadata.managed_fields)
        except ValueError:
            managers = {}
        if not managers:
            # Fields set before anyone applied belong to a manager of their own.
            _update(managers, {}, live_plain, info, BEFORE_FIRST_APPLY, "", now)
    entry = Managed(manager, APPLY, info.api_version, subresource, frozenset())
    previous = managers.get(entry.identity)
    entry.time = previous.time if previous is not None else None
    entry.fields = frozenset(_ownable(applied, info, subresource))
    others = [m.fields for i, m in managers.items() if i != entry.identity]
    merged = merge(live_plain, config, cls)
    if previous is not None:
        prune(merged, previous.fields, frozenset().union(entry.fields, *others), cls)

    changes = compare(live_plain, merged, cls)
    changes.added = _ownable(changes.added, info, subresource)
    changes.modified = _ownable(changes.modified, info, subresource)
    changes.removed = _ownable(changes.removed, info, subresource)
    conflicts = _conflicts(managers, changes.changed, entry.identity)
    if conflicts and not force:
        if manager == "kubectl":
            allowed = _last_applied_allowance(live_plain, info)
            conflicts = [(m, p) for m, p in conflicts if p not in allowed]
        if conflicts:
            raise _conflict_error(conflicts)
    _take_over(managers, changes, entry.identity)
    if not _same(live_plain, merged):
        entry.time = _now(now)
    entry.fields = frozenset(entry.fields - _STRIPPED)
    managers[entry.identity] = entry

    if manager == "kubectl" and LAST_APPLIED in (
        merged.get("metadata", {}).get("annotations") or {}
    ):
        merged["metadata"]["annotations"][LAST_APPLIED] = _last_applied(config)
    try:
        obj = codec.from_builtins(merged, cls).obj
    except codec.DecodeError as error:
        raise errors.ApiError(
            422, "Invalid", f"the applied configuration produced an invalid object: {error}"
        ) from None
    obj.metadata.managed_fields = encode_managed(managers)
    return obj


def paths(fields: FieldSet) -> Iterator[str]:
    """The paths of a set as upstream prints them, in order (for messages and tests)."""
    for path in sorted(fields, key=_path_order):
        yield path_string(path)
