"""Field selectors with upstream's syntax, semantics and messages (k8s.io/apimachinery/pkg/fields).

``spec.nodeName=node1,status.phase!=Succeeded``: terms separated by commas, each a field, an
operator (``=``, ``==`` or ``!=``) and a value in which ``\\,``, ``\\=`` and ``\\\\`` stand for the
literal characters.  Which fields a kind can be selected by is the kind's business (the API server
checks requirements against its registration); this module only parses and matches.

The rules are upstream's, quirks included, because clients depend on them: terms are sorted by
their text before use, the field part is taken verbatim up to the first operator (no escapes),
a term that is only ``=`` is dropped, and a field an object does not have counts as the empty
string, so ``a=`` matches objects without ``a``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kube.api.labels import Operator

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "FieldSelectorError",
    "escape_value",
    "parse_field_selector",
]


class FieldSelectorError(ValueError):
    """A field selector that does not parse; the message is upstream's."""


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """``field`` must (``Operator.EQUALS``) or must not (``Operator.NOT_EQUALS``) be ``value``."""

    field: str
    operator: Operator
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        equal = fields.get(self.field, "") == self.value
        return equal if self.operator is Operator.EQUALS else not equal

    def __str__(self) -> str:
        symbol = "=" if self.operator is Operator.EQUALS else "!="
        return self.field + symbol + escape_value(self.value)


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A conjunction of field requirements; the empty selector matches everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether the selector restricts nothing."""
        return not self.requirements

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether every requirement holds for an object's selectable ``fields``."""
        return all(requirement.matches(fields) for requirement in self.requirements)

    def value_for(self, field: str) -> str | None:
        """The value the first exact-match requirement on ``field`` asks for, if any
        (upstream ``RequiresExactMatch``: the kubelet's ``spec.nodeName=<node>``)."""
        for requirement in self.requirements:
            if requirement.field == field and requirement.operator is Operator.EQUALS:
                return requirement.value
        return None

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


def escape_value(value: str) -> str:
    """A literal value written for a field selector: ``\\``, ``,`` and ``=`` backslashed."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_value(value: str) -> str:
    """The literal a selector's value stands for; a lone ``,``/``=`` or unknown escape fails."""
    out: list[str] = []
    escaping = False
    for char in value:
        if escaping:
            if char not in "\\,=":
                raise FieldSelectorError(
                    f"invalid field selector: invalid escape sequence: \\{char}"
                )
            out.append(char)
            escaping = False
        elif char == "\\":
            escaping = True
        elif char in ",=":
            raise FieldSelectorError(
                f"invalid field selector: unescaped character in value: {ord(char)}"
            )
        else:
            out.append(char)
    if escaping:
        raise FieldSelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """The comma-separated terms; an escaped comma stays in its term, backslash included."""
    terms: list[str] = []
    start = 0
    escaped = False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


_TERM_OPERATORS = (("!=", Operator.NOT_EQUALS), ("==", Operator.EQUALS), ("=", Operator.EQUALS))


def _split_term(term: str) -> tuple[str, Operator, str] | None:
    """Field, operator and raw value, split at the first operator (``!=`` before ``==``
    before ``=`` at the same place)."""
    for i in range(len(term)):
        for symbol, operator in _TERM_OPERATORS:
            if term.startswith(symbol, i):
                return term[:i], operator, term[i + len(symbol) :]
    return None


def parse_field_selector(text: str) -> FieldSelector:
    """A field selector (upstream ``fields.ParseSelector``); the empty string selects
    everything.  Raises ``FieldSelectorError``."""
    requirements = []
    for term in sorted(_split_terms(text)):
        if not term:
            continue
        parts = _split_term(term)
        if parts is None:
            raise FieldSelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        field, operator, raw = parts
        value = _unescape_value(raw)
        if field or value:
            requirements.append(FieldRequirement(field, operator, value))
    return FieldSelector(tuple(requirements))
