"""What the kind tests share: a fixed clock, JSON merge, decoding with defaults, problem lists
and printer cells."""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterable
from typing import Any

from controlplane.apiserver.endpoints.patch import apply_merge_patch
from kube.api import walk
from kube.api.codec import from_builtins
from kube.api.errors import ErrorType
from kube.api.meta_v1 import Resource

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
CREATED = "2026-01-01T11:55:00Z"

REQUIRED = ErrorType.REQUIRED
INVALID = ErrorType.INVALID
NOT_SUPPORTED = ErrorType.NOT_SUPPORTED
DUPLICATE = ErrorType.DUPLICATE
FORBIDDEN = ErrorType.FORBIDDEN
TOO_LONG = ErrorType.TOO_LONG
TOO_MANY = ErrorType.TOO_MANY
NOT_FOUND = ErrorType.NOT_FOUND

Problem = tuple[str, ErrorType]


def merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``patch`` merged in (JSON merge patch: dicts merge, None
    deletes), as the API server merges it."""
    merged: dict[str, Any] = apply_merge_patch(base, patch)
    return merged


def decode(raw: dict[str, Any], cls: type[Resource], *, defaults: bool = True) -> Any:
    """``raw`` (left untouched) decoded as ``cls``, defaulted unless ``defaults`` is false."""
    obj = from_builtins(copy.deepcopy(raw), cls).obj
    if defaults:
        walk.set_defaults(obj)
    return obj


def ordered(pairs: Iterable[Problem]) -> list[Problem]:
    return sorted(pairs, key=lambda pair: (pair[0], pair[1].value))


def problems(obj: Resource) -> list[Problem]:
    """The (field, error type) pairs ``walk.validate`` reports for ``obj``, sorted."""
    return ordered((e.field, e.type) for e in walk.validate(obj))


def update_problems(old: dict[str, Any], new: dict[str, Any], cls: type[Resource]) -> list[Problem]:
    """The (field, error type) pairs of updating ``old`` to ``new``, both decoded as ``cls``."""
    return ordered(
        (e.field, e.type) for e in walk.validate_update(decode(new, cls), decode(old, cls))
    )


def cells(obj: Resource, wide: bool = True) -> list[Any]:
    """The printer cells of ``obj`` (only the priority-0 columns unless ``wide``)."""
    return [c.cell(obj, NOW) for c in obj.kind_info.columns if wide or c.priority == 0]


def named_cells(obj: Resource) -> dict[str, Any]:
    """Every printer cell of ``obj``, keyed by column name."""
    return {c.name: c.cell(obj, NOW) for c in obj.kind_info.columns}
