"""Defaulting and validation of any object, driven by its declaration.

For every ``Struct`` class the walker computes once, from msgspec's type information, a plan:
which fields carry ``meta(...)`` checks, which fields may hold structs whose subtree has
something to do, and which fields are immutable.  Walking an object then visits only the parts
where there is work, so a 10,000-pod list is checked at close to the cost of its hooks.

Entry points:
- ``set_defaults(obj)``: apiVersion and kind of every object in the tree, quantities to
  canonical form, then each struct's ``set_defaults`` hook, parents before children (a
  parent's default may create a child that has defaults of its own).
- ``validate(obj)``: metadata against the kind's rules, then every declared field check and every
  ``validate`` hook; returns all errors.
- ``validate_create(obj)``: ``validate(obj)`` plus the kind's own ``validate_create`` hook.
- ``validate_update(new, old)``: ``validate(new)`` plus immutable metadata, fields declared
  ``immutable``, and the kind's own ``validate_update`` hook.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec import inspect as mi

from kube.api import names, quantity
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.meta_v1 import (
    Resource,
    TypeMeta,
    validate_object_meta,
    validate_object_meta_update,
)
from kube.api.struct import NO_META, QUANTITY, FieldMeta, Struct, field_meta

# How a field's value can hold structs: directly, as list items, as map values.
_DIRECT, _ITEMS, _VALUES = 0, 1, 2


@dataclass(frozen=True)
class _Check:
    attr: str
    name: str
    meta: FieldMeta
    shape: int  # where the checked scalars sit: the value itself, its items, its values


@dataclass
class _Plan:
    cls: type[Struct]
    checks: list[_Check] = field(default_factory=list)
    quantities: list[tuple[str, int]] = field(default_factory=list)
    # (attr, json name, shape, struct classes the field can hold)
    children: list[tuple[str, str, int, tuple[type[Struct], ...]]] = field(default_factory=list)
    unvalidated: set[str] = field(default_factory=set)
    immutable: list[tuple[str, str]] = field(default_factory=list)
    has_default_hook: bool = False
    has_validate_hook: bool = False


def _unwrap(t: mi.Type) -> tuple[mi.Type, FieldMeta]:
    """Strip Metadata and Optional from a type, keeping the kubelab meta if any."""
    info = NO_META
    if isinstance(t, mi.Metadata):
        info = field_meta(t.extra)
        t = t.type
    if isinstance(t, mi.UnionType):
        rest = [u for u in t.types if not isinstance(u, mi.NoneType)]
        if len(rest) == 1:
            inner, inner_info = _unwrap(rest[0])
            return inner, info if info is not NO_META else inner_info
    return t, info


def _structs_in(t: mi.Type) -> tuple[type[Struct], ...]:
    """Struct classes a (possibly union) type can hold directly."""
    t, _ = _unwrap(t)
    if isinstance(t, mi.StructType) and issubclass(t.cls, Struct):
        return (t.cls,)
    if isinstance(t, mi.UnionType):
        return tuple(c for u in t.types for c in _structs_in(u))
    return ()


def _container_parts(t: mi.Type) -> list[tuple[int, mi.Type]]:
    """The (shape, element type) pairs a field type offers: itself, list items, map values."""
    t, _ = _unwrap(t)
    members = t.types if isinstance(t, mi.UnionType) else (t,)
    parts: list[tuple[int, mi.Type]] = []
    for member in members:
        member, _ = _unwrap(member)
        if isinstance(member, mi.ListType):
            parts.append((_ITEMS, member.item_type))
        elif isinstance(member, mi.DictType):
            parts.append((_VALUES, member.value_type))
        else:
            parts.append((_DIRECT, member))
    return parts


@functools.cache
def _raw_plan(cls: type[Struct]) -> _Plan:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    plan = _Plan(
        cls,
        has_default_hook=cls.set_defaults is not Struct.set_defaults,
        has_validate_hook=cls.validate is not Struct.validate,
    )
    for f in info.fields:
        _, own = _unwrap(f.type)
        if (
            own.required
            or own.enum
            or own.format
            or own.minimum is not None
            or (own.maximum is not None)
        ):
            plan.checks.append(_Check(f.name, f.encode_name, own, _DIRECT))
        if own.immutable:
            plan.immutable.append((f.name, f.encode_name))
        if not own.validated:
            plan.unvalidated.add(f.name)
        for shape, element in _container_parts(f.type):
            _, element_meta = _unwrap(element) if shape != _DIRECT else (element, NO_META)
            if shape != _DIRECT and (element_meta.format or element_meta.enum):
                plan.checks.append(_Check(f.name, f.encode_name, element_meta, shape))
            fmt = own.format if shape == _DIRECT else element_meta.format
            if fmt == QUANTITY:
                plan.quantities.append((f.name, shape))
            structs = _structs_in(element)
            if structs:
                plan.children.append((f.name, f.encode_name, shape, structs))
    return plan


def _reachable(cls: type[Struct]) -> set[type[Struct]]:
    seen: set[type[Struct]] = set()
    stack = [cls]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        for _, _, _, structs in _raw_plan(current).children:
            stack.extend(structs)
    return seen


@functools.cache
def _busy(cls: type[Struct], what: str) -> bool:
    """Whether anything below ``cls`` (itself included) has ``what`` to do."""
    for c in _reachable(cls):
        plan = _raw_plan(c)
        if what == "default" and (
            plan.has_default_hook or plan.quantities or issubclass(c, TypeMeta)
        ):
            return True
        if what == "validate" and (plan.has_validate_hook or plan.checks):
            return True
        if what == "immutable" and plan.immutable:
            return True
    return False


@functools.cache
def _children(cls: type[Struct], what: str) -> tuple[tuple[str, str, int], ...]:
    """The fields of ``cls`` worth descending into for ``what``."""
    plan = _raw_plan(cls)
    return tuple(
        (attr, name, shape)
        for attr, name, shape, structs in plan.children
        if any(_busy(s, what) for s in structs)
        and not (what == "validate" and attr in plan.unvalidated)
    )


def _each_struct(value: Any, shape: int) -> list[tuple[Any, Struct]]:
    """(key, struct) pairs held by a field value of the given shape."""
    if value is None:
        return []
    if shape == _DIRECT:
        return [(None, value)] if isinstance(value, Struct) else []
    if shape == _ITEMS and isinstance(value, list):
        return [(i, v) for i, v in enumerate(value) if isinstance(v, Struct)]
    if shape == _VALUES and isinstance(value, dict):
        return [(k, v) for k, v in value.items() if isinstance(v, Struct)]
    return []


def _sub(path: Path, name: str, shape: int, key: Any) -> Path:
    child = path.child(name)
    if shape == _ITEMS:
        return child.index(key)
    if shape == _VALUES:
        return child.key(str(key))
    return child


# Defaulting.


def set_defaults(obj: Struct) -> None:
    """Apply every default below ``obj`` in place."""
    plan = _raw_plan(type(obj))
    if isinstance(obj, TypeMeta):
        obj.typed()
    for attr, shape in plan.quantities:
        _canonicalize_quantities(obj, attr, shape)
    if plan.has_default_hook:
        obj.set_defaults()
    for attr, _, shape in _children(type(obj), "default"):
        for _, child in _each_struct(getattr(obj, attr), shape):
            set_defaults(child)


def _canonical(value: Any) -> Any:
    try:
        return quantity.canonicalize(value)
    except quantity.QuantityError:
        return value  # left as written; validation reports it


def _canonicalize_quantities(obj: Struct, attr: str, shape: int) -> None:
    value = getattr(obj, attr)
    if value is None:
        return
    if shape == _DIRECT and not isinstance(value, bool):
        setattr(obj, attr, _canonical(value))
    elif shape == _VALUES and isinstance(value, dict):
        for k, v in value.items():
            value[k] = _canonical(v)
    elif shape == _ITEMS and isinstance(value, list):
        value[:] = [_canonical(v) for v in value]


# Validation.


def validate(obj: Resource) -> ErrorList:
    """Every problem with a top-level object, metadata included."""
    errors = ErrorList()
    validate_object_meta(obj.metadata, obj.kind_info, ROOT.child("metadata"), errors)
    _validate_struct(obj, ROOT, errors)
    return errors


def validate_struct(obj: Struct, path: Path = ROOT) -> ErrorList:
    """Every problem with a struct that is not a top-level object."""
    errors = ErrorList()
    _validate_struct(obj, path, errors)
    return errors


def _validate_struct(obj: Struct, path: Path, errors: ErrorList) -> None:
    plan = _raw_plan(type(obj))
    for check in plan.checks:
        _run_check(check, getattr(obj, check.attr), path, errors)
    if plan.has_validate_hook:
        obj.validate(path, errors)
    for attr, name, shape in _children(type(obj), "validate"):
        for key, child in _each_struct(getattr(obj, attr), shape):
            _validate_struct(child, _sub(path, name, shape, key), errors)


def _missing(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, list | dict) and not value)


def _run_check(check: _Check, value: Any, path: Path, errors: ErrorList) -> None:
    """Run one declared check; paths are built only for the errors actually found."""
    info = check.meta
    if check.shape == _DIRECT:
        if _missing(value):
            if info.required:
                errors.required(path.child(check.name))
            return
        if not isinstance(value, list):
            for problem in _scalar_problems(info, value):
                problem(errors, path.child(check.name))
            return
        items: Any = enumerate(value)
    elif check.shape == _ITEMS and isinstance(value, list):
        items = enumerate(value)
    elif check.shape == _VALUES and isinstance(value, dict):
        items = value.items()
    else:
        return
    for key, item in items:
        for problem in _scalar_problems(info, item):
            field = path.child(check.name)
            problem(errors, field.index(key) if isinstance(key, int) else field.key(str(key)))


Problem = Callable[[ErrorList, Path], None]


def _scalar_problems(info: FieldMeta, value: Any) -> list[Problem]:
    """What is wrong with one value under a field's declared rules (usually nothing)."""
    if isinstance(value, Struct | list | dict):
        return []
    found: list[Problem] = []
    if info.enum is not None and value not in info.enum:
        enum = info.enum
        found.append(lambda errors, path: errors.not_supported(path, value, enum))
    if info.format is not None and not isinstance(value, bool):
        messages = names.check_format(info.format, value)
        if messages:
            found.append(lambda errors, path: errors.extend_checked(path, value, messages))
    if isinstance(value, int) and not isinstance(value, bool):
        low, high = info.minimum, info.maximum
        if low is not None and value < low:
            found.append(
                lambda errors, path: errors.invalid(
                    path, value, f"must be greater than or equal to {low}"
                )
            )
        if high is not None and value > high:
            found.append(
                lambda errors, path: errors.invalid(
                    path, value, f"must be less than or equal to {high}"
                )
            )
    return found


def validate_create(obj: Resource) -> ErrorList:
    """Every problem with creating ``obj``."""
    errors = validate(obj)
    obj.validate_create(errors)
    return errors


def validate_update(new: Resource, old: Resource) -> ErrorList:
    """Every problem with replacing ``old`` by ``new``."""
    errors = validate(new)
    validate_object_meta_update(new.metadata, old.metadata, ROOT.child("metadata"), errors)
    _validate_immutable(new, old, ROOT, errors)
    new.validate_update(old, errors)
    return errors


def _validate_immutable(new: Struct, old: Struct, path: Path, errors: ErrorList) -> None:
    if type(new) is not type(old):
        return
    for attr, name in _raw_plan(type(new)).immutable:
        value = getattr(new, attr)
        if value != getattr(old, attr):
            errors.immutable(path.child(name), msgspec.to_builtins(value))
    for attr, name, shape in _children(type(new), "immutable"):
        if shape == _DIRECT:
            new_child, old_child = getattr(new, attr), getattr(old, attr)
            if isinstance(new_child, Struct) and isinstance(old_child, Struct):
                _validate_immutable(new_child, old_child, path.child(name), errors)
