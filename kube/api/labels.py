"""Label selectors with upstream's syntax, semantics and messages (k8s.io/apimachinery/pkg/labels).

A ``Selector`` is a conjunction of requirements on label keys.  It comes either from the string
syntax of ``?labelSelector=`` and ``kubectl -l`` (``app=web,tier!=db,env in (a,b),!legacy,rel``,
plus ``x>1``/``x<1``) or from a ``LabelSelector`` object's ``matchLabels`` and
``matchExpressions``.  ``NotIn`` and ``!=`` match objects without the key; the empty selector
matches everything; ``Selector.nothing()`` (a missing selector) matches nothing.

The string parser follows upstream's lexer and recursive-descent parser token by token rather
than using a regular expression, because its corner cases are part of the API: ``x in ()``
selects the empty value, ``x in (a,,b)`` adds it, a NUL character ends the input, and the error
messages (which the API server returns verbatim) name the token found and the tokens expected.
``str()`` is upstream's ``String()``: requirements sorted by key, values sorted, which parses back
to the same selector.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kube.api import names

__all__ = [
    "LabelSelectorLike",
    "LabelSelectorRequirementLike",
    "Operator",
    "Requirement",
    "Selector",
    "SelectorError",
    "parse_selector",
    "selector_of",
]


class SelectorError(ValueError):
    """A selector that does not parse or names an invalid key, value or operator; the message
    is upstream's."""


class Operator(enum.StrEnum):
    """Requirement operators, with upstream's ``selection.Operator`` values."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_SYMBOL = {
    Operator.EQUALS: "=",
    Operator.DOUBLE_EQUALS: "==",
    Operator.NOT_EQUALS: "!=",
    Operator.IN: " in ",
    Operator.NOT_IN: " notin ",
    Operator.GREATER_THAN: ">",
    Operator.LESS_THAN: "<",
}

_RESTRICTING = frozenset({Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS})

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: optional sign, ASCII digits, int64 range."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit() or len(body.lstrip("0")) > 19:
        return None
    value = -int(body) if text[:1] == "-" else int(body)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One condition on one key.  Built unchecked; the parsers validate what they build."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement (upstream ``Requirement.Matches``)."""
        present = self.key in labels
        match self.operator:
            case Operator.IN | Operator.EQUALS | Operator.DOUBLE_EQUALS:
                return present and labels[self.key] in self.values
            case Operator.NOT_IN | Operator.NOT_EQUALS:
                return not present or labels[self.key] not in self.values
            case Operator.EXISTS:
                return present
            case Operator.DOES_NOT_EXIST:
                return not present
        return present and self._compares(labels[self.key])

    def _compares(self, label: str) -> bool:
        """``Gt``/``Lt``: both sides must be int64s and there must be exactly one value."""
        have = _parse_int64(label)
        bound = _parse_int64(self.values[0]) if len(self.values) == 1 else None
        if have is None or bound is None:
            return False
        return have > bound if self.operator is Operator.GREATER_THAN else have < bound

    def __str__(self) -> str:
        if self.operator is Operator.EXISTS:
            return self.key
        if self.operator is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        values = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if self.operator in (Operator.IN, Operator.NOT_IN):
            values = f"({values})"
        return self.key + _SYMBOL[self.operator] + values


@dataclass(frozen=True, slots=True)
class Selector:
    """A conjunction of requirements; ``matches_nothing`` marks ``Selector.nothing()``.

    The parsers sort requirements by key (stably: requirements on one key keep their order), which
    makes ``str()`` canonical; a selector built directly keeps the order it is given.
    """

    requirements: tuple[Requirement, ...] = ()
    matches_nothing: bool = False

    @classmethod
    def everything(cls) -> Selector:
        """The selector that matches every label set."""
        return cls()

    @classmethod
    def nothing(cls) -> Selector:
        """The selector that matches no label set (what a missing selector means)."""
        return cls(matches_nothing=True)

    @classmethod
    def from_label_selector(
        cls,
        match_labels: Mapping[str, str] | None,
        match_expressions: Sequence[LabelSelectorRequirementLike] | None,
    ) -> Selector:
        """The selector of a ``LabelSelector`` (upstream ``LabelSelectorAsSelector``).

        Both parts empty selects everything; a ``None`` selector is the caller's to handle (see
        ``selector_of``).  Raises ``SelectorError`` for an invalid key, value or operator.
        """
        found = [
            _requirement(key, Operator.EQUALS, (value,))
            for key, value in sorted((match_labels or {}).items())
        ]
        for expression in match_expressions or ():
            operator = _EXPRESSION_OPERATORS.get(expression.operator or "")
            if operator is None:
                raise SelectorError(
                    f"{_go_quote(expression.operator or '')} is not a valid label selector operator"
                )
            found.append(_requirement(expression.key or "", operator, expression.values or ()))
        return cls._sorted(found)

    @classmethod
    def _sorted(cls, requirements: Iterable[Requirement]) -> Selector:
        return cls(tuple(sorted(requirements, key=lambda requirement: requirement.key)))

    @property
    def empty(self) -> bool:
        """Whether the selector restricts nothing (``nothing()`` is not empty)."""
        return not self.requirements and not self.matches_nothing

    def restricting(self) -> Requirement | None:
        """A requirement only labels giving its key one of its values satisfy (``=``, ``==``,
        ``in``), so that the label sets this selector matches can be looked up by one of those
        pairs instead of all being tried; None if it has none."""
        return next((r for r in self.requirements if r.operator in _RESTRICTING), None)

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether every requirement holds for ``labels`` (``None``: no labels)."""
        if self.matches_nothing:
            return False
        present = labels or {}
        return all(requirement.matches(present) for requirement in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


class LabelSelectorRequirementLike(Protocol):
    """What ``from_label_selector`` reads of a ``matchExpressions`` item."""

    @property
    def key(self) -> str | None: ...

    @property
    def operator(self) -> str | None: ...

    @property
    def values(self) -> Sequence[str] | None: ...


class LabelSelectorLike(Protocol):
    """What ``selector_of`` reads of a ``LabelSelector``."""

    @property
    def match_labels(self) -> Mapping[str, str] | None: ...

    @property
    def match_expressions(self) -> Sequence[LabelSelectorRequirementLike] | None: ...


def selector_of(label_selector: LabelSelectorLike | None) -> Selector:
    """The selector of an optional ``LabelSelector`` field: missing selects nothing, as for a
    controller whose selector is unset."""
    if label_selector is None:
        return Selector.nothing()
    return Selector.from_label_selector(
        label_selector.match_labels, label_selector.match_expressions
    )


_EXPRESSION_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


# Error messages as upstream's field errors render them.

_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def _go_quote(text: str) -> str:
    """Go's ``%q`` of a string (``strconv.Quote``)."""
    out = []
    for char in text:
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif char < " " or char == "\x7f":
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


def _go_json(values: Sequence[str]) -> str:
    """Go's ``json.Marshal`` of a string slice (``null`` when empty, as upstream passes nil)."""
    if not values:
        return "null"
    text = json.dumps(list(values), ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _invalid(field: str, rendered_value: str, detail: str) -> str:
    """A ``field.Invalid`` error as text: ``values[0]: Invalid value: "x": detail``."""
    return f"{field}: Invalid value: {rendered_value}: {detail}"


def _aggregate(messages: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message bare, several deduplicated in
    brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(messages) == 1 or len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _key_problem(key: str, field: str) -> str | None:
    problems = names.is_qualified_name(key)
    return _invalid(field, _go_quote(key), "; ".join(problems)) if problems else None


def _requirement(key: str, operator: Operator, values: Sequence[str]) -> Requirement:
    """Upstream ``NewRequirement`` for the operators the two parsers produce."""
    problems = []
    key_problem = _key_problem(key, "key")
    if key_problem is not None:
        problems.append(key_problem)
    if operator in (Operator.IN, Operator.NOT_IN) and not values:
        detail = "for 'in', 'notin' operators, values set can't be empty"
        problems.append(_invalid("values", _go_json(values), detail))
    if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        detail = "values set must be empty for exists and does not exist"
        problems.append(_invalid("values", _go_json(values), detail))
    if operator in (Operator.GREATER_THAN, Operator.LESS_THAN):
        for i, value in enumerate(values):
            if _parse_int64(value) is None:
                detail = "for 'Gt', 'Lt' operators, the value must be an integer"
                problems.append(_invalid(f"values[{i}]", _go_quote(value), detail))
    for i, value in enumerate(values):
        value_problems = names.is_valid_label_value(value)
        if value_problems:
            detail = "; ".join(value_problems)
            problems.append(_invalid(f"values[{i}][{key}]", _go_quote(value), detail))
    if problems:
        raise SelectorError(_aggregate(problems))
    return Requirement(key, operator, tuple(values))


# The string syntax: upstream's lexer and parser.


class _Token(enum.Enum):
    END = enum.auto()
    CLOSED_PAR = enum.auto()
    COMMA = enum.auto()
    DOES_NOT_EXIST = enum.auto()
    DOUBLE_EQUALS = enum.auto()
    EQUALS = enum.auto()
    GREATER_THAN = enum.auto()
    IDENTIFIER = enum.auto()
    IN = enum.auto()
    LESS_THAN = enum.auto()
    NOT_EQUALS = enum.auto()
    NOT_IN = enum.auto()
    OPEN_PAR = enum.auto()


_LITERALS = {
    ")": _Token.CLOSED_PAR,
    ",": _Token.COMMA,
    "!": _Token.DOES_NOT_EXIST,
    "==": _Token.DOUBLE_EQUALS,
    "=": _Token.EQUALS,
    ">": _Token.GREATER_THAN,
    "in": _Token.IN,
    "<": _Token.LESS_THAN,
    "!=": _Token.NOT_EQUALS,
    "notin": _Token.NOT_IN,
    "(": _Token.OPEN_PAR,
}
_BINARY_OPERATORS = {
    _Token.IN: Operator.IN,
    _Token.EQUALS: Operator.EQUALS,
    _Token.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
    _Token.GREATER_THAN: Operator.GREATER_THAN,
    _Token.LESS_THAN: Operator.LESS_THAN,
    _Token.NOT_IN: Operator.NOT_IN,
    _Token.NOT_EQUALS: Operator.NOT_EQUALS,
}
_EXPECTED_OPERATORS = "in, notin, =, ==, !=, gt, lt"
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_END = "\0"  # upstream's lexer reads a NUL byte, and the end of input, as 0

_Item = tuple[_Token, str]


class _Lexer:
    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0

    def _read(self) -> str:
        if self._pos < len(self._text):
            self._pos += 1
            return self._text[self._pos - 1]
        return _END

    def _unread(self) -> None:
        self._pos -= 1

    def lex(self) -> _Item:
        char = self._read()
        while char in _WHITESPACE:
            char = self._read()
        if char == _END:
            return _Token.END, ""
        self._unread()
        return self._special() if char in _SPECIAL else self._word()

    def _word(self) -> _Item:
        chars = []
        while (char := self._read()) != _END:
            if char in _SPECIAL or char in _WHITESPACE:
                self._unread()
                break
            chars.append(char)
        word = "".join(chars)
        return _LITERALS.get(word, _Token.IDENTIFIER), word

    def _special(self) -> _Item:
        """The longest operator here: a special character, or two forming ``==`` or ``!=``."""
        symbol = self._read()
        while (char := self._read()) != _END:
            if symbol + char not in _LITERALS:
                self._unread()
                break
            symbol += char
        return _LITERALS[symbol], symbol


class _Parser:
    """The tokens of a selector and a cursor; in value position ``in``/``notin`` are words."""

    def __init__(self, text: str) -> None:
        lexer = _Lexer(text)
        self._items = [lexer.lex()]
        while self._items[-1][0] is not _Token.END:
            self._items.append(lexer.lex())
        self._position = 0

    def lookahead(self, values: bool = True) -> _Item:
        token, literal = self._items[self._position]
        if values and token in (_Token.IN, _Token.NOT_IN):
            return _Token.IDENTIFIER, literal
        return token, literal

    def consume(self, values: bool = True) -> _Item:
        item = self.lookahead(values)
        self._position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self.lookahead()
            if token is _Token.END:
                return requirements
            if token not in (_Token.IDENTIFIER, _Token.DOES_NOT_EXIST):
                raise SelectorError(
                    f"found '{literal}', expected: !, identifier, or 'end of string'"
                )
            try:
                requirements.append(self._requirement())
            except SelectorError as error:
                raise SelectorError(f"unable to parse requirement: {error}") from None
            token, literal = self.consume()
            if token is _Token.END:
                return requirements
            if token is not _Token.COMMA:
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            token, literal = self.lookahead()
            if token not in (_Token.IDENTIFIER, _Token.DOES_NOT_EXIST):
                raise SelectorError(f"found '{literal}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        token, key = self.consume()
        negated = token is _Token.DOES_NOT_EXIST
        if negated:
            token, key = self.consume()
        if token is not _Token.IDENTIFIER:
            raise SelectorError(f"found '{key}', expected: identifier")
        key_problem = _key_problem(key, "<nil>")  # upstream renders its absent path so
        if key_problem is not None:
            raise SelectorError(key_problem)
        if negated or self.lookahead()[0] in (_Token.END, _Token.COMMA):
            return _requirement(key, Operator.DOES_NOT_EXIST if negated else Operator.EXISTS, ())
        token, literal = self.consume(values=False)
        operator = _BINARY_OPERATORS.get(token)
        if operator is None:
            raise SelectorError(f"found '{literal}', expected: {_EXPECTED_OPERATORS}")
        if operator in (Operator.IN, Operator.NOT_IN):
            values = self._value_set()
        else:
            values = self._exact_value()
        return _requirement(key, operator, sorted(values))

    def _value_set(self) -> set[str]:
        """``(a,b)``; ``()`` and empty places between commas are the empty value."""
        token, literal = self.consume()
        if token is not _Token.OPEN_PAR:
            raise SelectorError(f"found '{literal}' expected: '('")
        token, literal = self.lookahead()
        if token is _Token.CLOSED_PAR:
            self.consume()
            return {""}
        if token not in (_Token.IDENTIFIER, _Token.COMMA):
            raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")
        values = self._identifiers()
        self.consume()  # the ")" that ended the list
        return values

    def _identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            token, literal = self.consume()
            if token is _Token.IDENTIFIER:
                values.add(literal)
                following, found = self.lookahead()
                if following is _Token.CLOSED_PAR:
                    return values
                if following is not _Token.COMMA:
                    raise SelectorError(f"found '{found}', expected: ',' or ')'")
            elif token is _Token.COMMA:
                following = self.lookahead()[0]
                if not values or following in (_Token.CLOSED_PAR, _Token.COMMA):
                    values.add("")
                if following is _Token.CLOSED_PAR:
                    return values
            else:
                raise SelectorError(f"found '{literal}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        token, literal = self.lookahead()
        if token in (_Token.END, _Token.COMMA):
            return {""}
        self.consume()
        if token is not _Token.IDENTIFIER:
            raise SelectorError(f"found '{literal}', expected: identifier")
        return {literal}


def parse_selector(text: str) -> Selector:
    """A selector in the string syntax (upstream ``labels.Parse``); the empty string, or only
    whitespace, selects everything.  Raises ``SelectorError``."""
    return Selector._sorted(_Parser(text).parse())
