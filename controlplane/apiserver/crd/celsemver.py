"""Kubernetes' semver library for CEL (k8s.io/apiserver's ``kubernetes.Semver``, in every CEL
environment since Kubernetes 1.33, at its version 1).

``semver("1.2.3")`` parses a version as semver.org 2.0.0 and the library upstream uses
(blang/semver) do, with their error texts (``No Major.Minor.Patch elements found``);
``semver(text, true)`` first normalizes what people write: a leading ``v`` dropped, leading
zeros of the numbers dropped, missing minor and patch numbers as ``0`` (``v01.1`` is
``1.1.0``).  ``isSemver`` takes the same arguments and says whether that parses.  A version has
``major()``, ``minor()``, ``patch()``, and compares with another by precedence
(``isGreaterThan``, ``isLessThan``, ``compareTo``, ``==``): numbers, then the pre-release
(a version without one is greater; identifiers compare numerically if both are numbers, a
number is less than a name, names compare as text, fewer identifiers are less); build metadata
never counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

_DIGITS = frozenset("0123456789")
_IDENTIFIER = _DIGITS | frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
UINT64 = range(2**64)


class SemverError(ValueError):
    """Text that is not a version; ``str()`` is blang/semver's message."""


@dataclass(frozen=True, eq=False)
class Semver:
    """A parsed version.  Equal to another of the same precedence (build metadata aside)."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: tuple[str, ...] = ()

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 as this version's precedence is below, equal to or above ``other``'s."""
        mine, theirs = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if mine != theirs:
            return 1 if mine > theirs else -1
        if not self.pre or not other.pre:
            return (not self.pre) - (not other.pre)
        mine_pre, their_pre = _precedence(self.pre), _precedence(other.pre)
        return (mine_pre > their_pre) - (mine_pre < their_pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))


def _precedence(pre: tuple[int | str, ...]) -> list[tuple[bool, int, str]]:
    """Pre-release identifiers as keys that compare as semver.org says (numbers below names,
    a list that is a prefix of another below it)."""
    return [(False, p, "") if isinstance(p, int) else (True, 0, p) for p in pre]


def _number(text: str, what: str) -> int:
    if not set(text) <= _DIGITS:
        raise SemverError(f"Invalid character(s) found in {what} number {_quoted(text)}")
    if len(text) > 1 and text[0] == "0":
        raise SemverError(
            f"{what.capitalize()} number must not contain leading zeroes {_quoted(text)}"
        )
    if not text or int(text) not in UINT64:
        reason = "invalid syntax" if not text else "value out of range"
        raise SemverError(f"strconv.ParseUint: parsing {_quoted(text)}: {reason}")
    return int(text)


def _quoted(text: str) -> str:
    """Go's ``%q`` of plain text."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _pre_release(text: str) -> int | str:
    if not text:
        raise SemverError("Prerelease is empty")
    if set(text) <= _DIGITS:
        if len(text) > 1 and text[0] == "0":
            raise SemverError(
                f"Numeric PreRelease version must not contain leading zeroes {_quoted(text)}"
            )
        return int(text)
    if not set(text) <= _IDENTIFIER:
        raise SemverError(f"Invalid character(s) found in prerelease {_quoted(text)}")
    return text


def parse(text: str) -> Semver:
    """The version ``text`` is, strictly; ``SemverError`` otherwise."""
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    rest, plus, build_text = parts[2].partition("+")
    patch_text, minus, pre_text = rest.partition("-")
    patch = _number(patch_text, "patch")
    pre = tuple(_pre_release(p) for p in pre_text.split(".")) if minus else ()
    build = tuple(build_text.split(".")) if plus else ()
    for item in build:
        if not item:
            raise SemverError("Build meta data is empty")
        if not set(item) <= _IDENTIFIER:
            raise SemverError(f"Invalid character(s) found in build meta data {_quoted(item)}")
    return Semver(major, minor, patch, pre, build)


def parse_normalized(text: str) -> Semver:
    """The version ``text`` is once normalized (see the module docstring)."""
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            parts[i] = part if part and part[0] in _DIGITS else "0" + part
    if len(parts) < 3:
        if set(parts[-1]) & {"+", "-"}:
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))


_STRICT = celtypes.BoolType(False)
"""The one-argument forms: no normalizing."""


def _arguments(text: Any, normalize: Any) -> Callable[[str], Semver]:
    if not isinstance(text, str) or not isinstance(normalize, celtypes.BoolType):
        raise TypeError("no such overload")
    return parse_normalized if normalize else parse


def _semver(text: Any, normalize: Any = _STRICT) -> Semver | CELEvalError:
    try:
        return _arguments(text, normalize)(text)
    except SemverError as error:
        return CELEvalError(str(error))


def _is_semver(text: Any, normalize: Any = _STRICT) -> celtypes.BoolType:
    try:
        _arguments(text, normalize)(text)
    except SemverError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _version(value: Any) -> Semver:
    if not isinstance(value, Semver):
        raise TypeError("no such overload")
    return value


def compare(a: Any, b: Any) -> int:
    """The comparison of two versions (``TypeError`` if either is not one)."""
    return _version(a).compare(_version(b))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "semver": _semver,
    "isSemver": _is_semver,
    "major": lambda v: celtypes.IntType(_version(v).major),
    "minor": lambda v: celtypes.IntType(_version(v).minor),
    "patch": lambda v: celtypes.IntType(_version(v).patch),
}
"""``semver`` and ``isSemver`` (a string, and whether to normalize it), a version's
``major``, ``minor`` and ``patch``.  The comparisons share their names with the quantity
library's, so ``controlplane.apiserver.crd.cel`` registers them by target (with ``compare``)."""
