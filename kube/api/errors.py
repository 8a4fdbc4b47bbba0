"""Field errors: what validation returns, shaped like Kubernetes' ``field.ErrorList``.

Validation never stops at the first problem: every check appends to an ``ErrorList`` and the
caller gets all of them at once, each with the field path it concerns.  The messages follow the
wording kubectl users know (``spec.containers[0].name: Required value``), because the API server
puts them verbatim into the causes of a 422 Status and kubectl prints them.

A ``Path`` is a tiny linked list so that building the path of a child costs one small object;
the string form is rendered only when an error is reported.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple


class Path:
    """A field path such as ``spec.containers[0].image``; cheap to extend, rendered lazily."""

    __slots__ = ("_key", "_parent")

    def __init__(self, key: str | int | None = None, parent: Path | None = None) -> None:
        self._key = key
        self._parent = parent

    def child(self, name: str) -> Path:
        """The path of the field ``name`` below this one."""
        return Path(name, self)

    def index(self, i: int) -> Path:
        """The path of the list element ``i`` of this one."""
        return Path(i, self)

    def key(self, k: str) -> Path:
        """The path of the map entry ``k`` of this one (rendered ``labels[app]``)."""
        return Path(f"[{k}]", self)

    def __str__(self) -> str:
        parts: list[str] = []
        node: Path | None = self
        while node is not None and node._key is not None:
            key = node._key
            if isinstance(key, int):
                parts.append(f"[{key}]")
            elif key.startswith("["):
                parts.append(key)
            else:
                parts.append("." + key if parts or node._parent is not None else key)
            node = node._parent
        return "".join(reversed(parts)).lstrip(".")

    def __repr__(self) -> str:
        return f"Path({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Path) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


ROOT = Path()


class ErrorType(enum.Enum):
    """The kinds of field error, with the cause ``reason`` the API reports for each."""

    REQUIRED = "FieldValueRequired"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    DUPLICATE = "FieldValueDuplicate"
    FORBIDDEN = "FieldValueForbidden"
    TOO_LONG = "FieldValueTooLong"
    TOO_MANY = "FieldValueTooMany"
    NOT_FOUND = "FieldValueNotFound"
    TYPE_INVALID = "FieldValueTypeInvalid"
    INTERNAL = "InternalError"


_PREFIX = {
    ErrorType.REQUIRED: "Required value",
    ErrorType.INVALID: "Invalid value",
    ErrorType.NOT_SUPPORTED: "Unsupported value",
    ErrorType.DUPLICATE: "Duplicate value",
    ErrorType.FORBIDDEN: "Forbidden",
    ErrorType.TOO_LONG: "Too long",
    ErrorType.TOO_MANY: "Too many",
    ErrorType.NOT_FOUND: "Not found",
    ErrorType.TYPE_INVALID: "Invalid value",
    ErrorType.INTERNAL: "Internal error",
}

_OMIT = object()


def _render_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, default=str, sort_keys=True)


class FieldError(NamedTuple):
    """One problem with one field."""

    type: ErrorType
    field: str
    value: Any
    detail: str

    @property
    def message(self) -> str:
        """The message without the field, as in a Status cause."""
        text = _PREFIX[self.type]
        if self.value is not _OMIT and self.type not in (ErrorType.REQUIRED, ErrorType.FORBIDDEN):
            text += f": {_render_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class ErrorList(list[FieldError]):
    """An ordered collection of field errors with one constructor per error type."""

    def required(self, path: Path, detail: str = "") -> None:
        self.append(FieldError(ErrorType.REQUIRED, str(path), _OMIT, detail))

    def invalid(self, path: Path, value: Any, detail: str) -> None:
        self.append(FieldError(ErrorType.INVALID, str(path), value, detail))

    def not_supported(self, path: Path, value: Any, supported: Iterable[str]) -> None:
        choices = ", ".join(json.dumps(s) for s in sorted(supported))
        self.append(
            FieldError(ErrorType.NOT_SUPPORTED, str(path), value, f"supported values: {choices}")
        )

    def duplicate(self, path: Path, value: Any) -> None:
        self.append(FieldError(ErrorType.DUPLICATE, str(path), value, ""))

    def forbidden(self, path: Path, detail: str) -> None:
        self.append(FieldError(ErrorType.FORBIDDEN, str(path), _OMIT, detail))

    def too_long(self, path: Path, limit: int) -> None:
        detail = f"may not be more than {limit} bytes"
        self.append(FieldError(ErrorType.TOO_LONG, str(path), _OMIT, detail))

    def too_many(self, path: Path, actual: int, limit: int) -> None:
        detail = f"must have at most {limit} items"
        self.append(FieldError(ErrorType.TOO_MANY, str(path), actual, detail))

    def not_found(self, path: Path, value: Any) -> None:
        self.append(FieldError(ErrorType.NOT_FOUND, str(path), value, ""))

    def immutable(self, path: Path, value: Any) -> None:
        self.append(FieldError(ErrorType.INVALID, str(path), value, "field is immutable"))

    def extend_checked(self, path: Path, value: Any, problems: Sequence[str]) -> None:
        """Record the messages of a primitive check (``names.*``) as one Invalid error."""
        if problems:
            self.invalid(path, value, "; ".join(problems))

    def __str__(self) -> str:
        return "[" + ", ".join(str(e) for e in self) + "]"

    def for_field(self, prefix: str) -> Iterator[FieldError]:
        """The errors about ``prefix`` or anything below it."""
        for error in self:
            if error.field == prefix or error.field.startswith((prefix + ".", prefix + "[")):
                yield error


class InvalidError(Exception):
    """Raised when an object fails validation; carries every field error."""

    def __init__(self, kind: str, name: str, errors: ErrorList) -> None:
        self.kind = kind
        self.name = name
        self.errors = errors
        super().__init__(f'{kind} "{name}" is invalid: {errors}')
