"""Resource quantities (``100m``, ``1.5Gi``, ``2e3``), exactly as Kubernetes' ``resource.Quantity``.

A quantity is an exact decimal number plus the notation it is printed in.  Requests, limits,
capacity and quotas are summed and compared by the scheduler, the kubelet and the quota
controller, so the arithmetic here is exact (integers only, never floats) and the printed form is
byte for byte what the API server stores, because clients diff what they sent against it.

The model mirrors upstream rather than an idealised decimal type, because the rules users meet
are upstream's quirks:

- parsing keeps the suffix family (binary ``Ki``, decimal ``k``, exponent ``e3``) and rounds any
  precision below a nano up, away from zero; binary quantities are capped at 2^63-1;
- the canonical form moves the value to the largest suffix that loses nothing, and a string that
  upstream considers canonical on input is kept verbatim (so ``+1`` and ``1.`` print as written);
- a value too large for the decimal suffix table (``1000E``) prints without a suffix, which is the
  number upstream stores for it.

A value is kept as ``mantissa * 10**exponent`` with the mantissa free of trailing zeros, which
makes equality and hashing structural and keeps exponents such as ``1e2000000000`` cheap.
"""

from __future__ import annotations

import enum
import functools
from decimal import Decimal
from fractions import Fraction
from typing import NamedTuple, NoReturn

__all__ = ["Format", "Quantity", "QuantityError", "canonicalize"]


class QuantityError(ValueError):
    """A value that is not a quantity; the message is upstream's."""


class Format(enum.StrEnum):
    """The notation a quantity is printed in (upstream ``resource.Format``)."""

    DECIMAL_EXPONENT = "DecimalExponent"
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"


_FORMAT_WRONG = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_NUMERIC_WRONG = "unable to parse numeric part of quantity"
_SUFFIX_WRONG = "unable to parse quantity's suffix"

_DECIMAL_SUFFIXES = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SUFFIX_OF = {exponent: suffix for suffix, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SUFFIX_OF = {power // 10: suffix for suffix, power in _BINARY_SUFFIXES.items()}

_DIGITS = frozenset("0123456789")
_SUFFIX_LETTERS = frozenset("eEinumkKMGTP")
# The API server trims a JSON quantity with Go's strings.TrimSpace, but on the raw JSON text: the
# ASCII control whitespace (tab, newline, ...) is escaped there and so never trimmed.  What is
# left is the space and the Unicode spaces a client sends unescaped.
_JSON_TRIMMED_SPACE = (
    " \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

_INT64_MAX = 2**63 - 1
_NANO = -9
_MAX_INT64_DIGITS = 18  # decimal digits that always fit an int64 (upstream maxInt64Factors)
_BINARY_DIGITS = 15  # the digit budget upstream's fast path allows a binary mantissa


def _fail(message: str) -> NoReturn:
    raise QuantityError(message)


# Exact decimal helpers: a value is a pair (mantissa, exponent) meaning mantissa * 10**exponent.
# Conversions between ints and digit strings go through Decimal, which has no length limit
# (Python's int/str conversion refuses more than 4300 digits).


def _digits_of(n: int) -> str:
    """The decimal digits of a non-negative integer."""
    return str(Decimal(n))


def _int_of(digits: str) -> int:
    """The integer written by a string of decimal digits."""
    return int(Decimal(digits))


def _normalized(mantissa: int, exponent: int) -> tuple[int, int]:
    """The same value with the mantissa free of trailing zeros (zero is ``(0, 0)``)."""
    if mantissa == 0:
        return 0, 0
    if mantissa % 10:
        return mantissa, exponent
    digits = _digits_of(abs(mantissa))
    kept = digits.rstrip("0")
    magnitude = _int_of(kept)
    return (magnitude if mantissa > 0 else -magnitude), exponent + len(digits) - len(kept)


def _sign(n: int) -> int:
    return (n > 0) - (n < 0)


def _compare(a: tuple[int, int], b: tuple[int, int]) -> int:
    """-1, 0 or 1 as the value ``a`` is below, equal to or above ``b``; exponents may differ
    by billions without building the aligned integers."""
    sign_a, sign_b = _sign(a[0]), _sign(b[0])
    if sign_a != sign_b or sign_a == 0:
        return _sign(sign_a - sign_b)
    if a[1] == b[1]:
        return _sign(a[0] - b[0])
    order_a = len(_digits_of(abs(a[0]))) + a[1]
    order_b = len(_digits_of(abs(b[0]))) + b[1]
    if order_a != order_b:
        return sign_a if order_a > order_b else -sign_a
    low = min(a[1], b[1])
    return _sign(a[0] * 10 ** (a[1] - low) - b[0] * 10 ** (b[1] - low))


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    low = min(a[1], b[1])
    return _normalized(a[0] * 10 ** (a[1] - low) + b[0] * 10 ** (b[1] - low), low)


def _round_up(mantissa: int, exponent: int, target: int) -> tuple[int, int, bool]:
    """Round away from zero to a multiple of ``10**target``: (mantissa, exponent, exact)."""
    if exponent >= target or mantissa == 0:
        return mantissa, exponent, True
    shift = target - exponent
    magnitude = abs(mantissa)
    if shift > len(_digits_of(magnitude)):
        whole, rest = 0, magnitude
    else:
        whole, rest = divmod(magnitude, 10**shift)
    rounded = whole + (1 if rest else 0)
    return (rounded if mantissa > 0 else -rounded), target, rest == 0


def _value_at(mantissa: int, exponent: int, scale: int) -> int:
    """ceil(value / 10**scale) away from zero, as an integer."""
    rounded, at, _ = _round_up(mantissa, exponent, scale)
    power: int = 10 ** (at - scale)  # at >= scale
    return rounded * power


# Parsing, following upstream's ParseQuantity step by step.


class _Parts(NamedTuple):
    negative: bool
    num: str  # integer digits without leading zeros ("0" when there are none)
    denom: str  # fraction digits as written
    suffix: str
    has_digits: bool  # whether the numeric part had any digit at all


def _split(text: str) -> _Parts:
    """Cut ``text`` into sign, integer digits, fraction digits and suffix (upstream's scanner)."""
    end = len(text)
    negative = text[0] == "-"
    sign_end = pos = 1 if text[0] in "+-" else 0
    while pos < end and text[pos] == "0":
        pos += 1
    if pos == end:
        return _Parts(negative, "0", "", "", True)
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    has_digits = pos > sign_end
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        _fail(_FORMAT_WRONG)
    return _Parts(negative, num, denom, text[suffix_start:], has_digits or bool(denom))


def _parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: optional sign, ASCII digits, int64 range."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or any(c not in _DIGITS for c in body) or len(body.lstrip("0")) > 19:
        return None
    value = int(body) if text[:1] != "-" else -int(body)
    return value if -_INT64_MAX - 1 <= value <= _INT64_MAX else None


def _wrap_int32(n: int) -> int:
    """Go's ``int32(n)`` conversion: upstream keeps decimal exponents in an int32."""
    return (n + 2**31) % 2**32 - 2**31


def _interpret_suffix(suffix: str) -> tuple[int, int, Format]:
    """(base, exponent, format) of a suffix: ``Mi`` is (2, 20), ``k`` is (10, 3), ``e-3``
    is (10, -3)."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = _parse_int64(suffix[1:])
        if exponent is not None:
            return 10, _wrap_int32(exponent), Format.DECIMAL_EXPONENT
    _fail(_SUFFIX_WRONG)


def _keeps_text(fmt: Format, shifted: str, digits: int, scale: int) -> bool:
    """Whether upstream reuses the input as the printed form (its "already canonical" test)."""
    if fmt is Format.BINARY_SI:
        return digits & 0x07 != 0
    return scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


def _parse_small(text: str, parts: _Parts, exponent: int, fmt: Format) -> Quantity | None:
    """Upstream's int64 fast path; None when the value needs the exact path."""
    if fmt is Format.BINARY_SI:
        if parts.denom:
            return None
        precision = _BINARY_DIGITS - len(parts.num) - exponent * 3 // 10 - 1
        multiplier, scale = 1 << exponent, 0
    else:
        precision = _MAX_INT64_DIGITS - len(parts.num) - len(parts.denom)
        multiplier, scale = 1, exponent - len(parts.denom)
    if precision < 0 or scale < _NANO:
        return None
    shifted = parts.num + parts.denom
    digits = int(shifted)
    result = digits * multiplier
    if result > _INT64_MAX:
        return None
    kept = text if _keeps_text(fmt, shifted, digits, scale) else None
    return Quantity._make(-result if parts.negative else result, scale, fmt, kept)


def _parse_exact(parts: _Parts, base: int, exponent: int, fmt: Format) -> Quantity:
    """Upstream's arbitrary-precision path: round up to nano, cap binary values."""
    if not parts.has_digits:
        _fail(_NUMERIC_WRONG)
    magnitude, scale = _int_of(parts.num + parts.denom), -len(parts.denom)
    if base == 10:
        scale += exponent
    else:
        magnitude <<= exponent
    magnitude, scale, _ = _round_up(*_normalized(magnitude, scale), _NANO)
    if fmt is Format.BINARY_SI:
        if _compare((magnitude, scale), (_INT64_MAX, 0)) > 0:
            magnitude, scale = _INT64_MAX, 0
        elif magnitude and _compare((magnitude, scale), (1, 0)) < 0:
            fmt = Format.DECIMAL_SI
    return Quantity(-magnitude if parts.negative else magnitude, scale, fmt)


def _text_of(value: str | int | float) -> str:
    """The text upstream parses: a JSON string trimmed of surrounding spaces, or a JSON number."""
    if isinstance(value, str):
        return value.strip(_JSON_TRIMMED_SPACE)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(Decimal(value))
    return repr(value)


class Quantity:
    """An exact quantity and the notation it prints in; immutable and hashable.

    ``Quantity(mantissa, exponent, format)`` is ``mantissa * 10**exponent``; ``Quantity.parse``
    reads the API's notation.  Equality, ordering and hashing are by value: ``1Ki == 1024``.
    """

    __slots__ = ("_exponent", "_format", "_mantissa", "_text")

    _mantissa: int
    _exponent: int
    _format: Format
    _text: str | None

    def __init__(
        self, mantissa: int, exponent: int = 0, format: Format = Format.DECIMAL_SI
    ) -> None:
        mantissa, exponent = _normalized(mantissa, exponent)
        object.__setattr__(self, "_mantissa", mantissa)
        object.__setattr__(self, "_exponent", exponent)
        object.__setattr__(self, "_format", format)
        object.__setattr__(self, "_text", None)

    @classmethod
    def _make(cls, mantissa: int, exponent: int, fmt: Format, text: str | None) -> Quantity:
        quantity = cls(mantissa, exponent, fmt)
        object.__setattr__(quantity, "_text", text)
        return quantity

    @classmethod
    def parse(cls, value: str | int | float) -> Quantity:
        """Read a quantity as the API server decodes one from JSON.

        Strings follow upstream ``ParseQuantity`` after the trimming of surrounding spaces the
        API server's JSON decoding does; numbers are read from their decimal text (a float's
        ``repr``).  Raises ``QuantityError``.
        """
        return _parse_cached(value)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Quantity is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Quantity is immutable (cannot delete {name!r})")

    @property
    def format(self) -> Format:
        """The notation the quantity prints in."""
        return self._format

    def as_fraction(self) -> Fraction:
        """The exact value."""
        if self._exponent >= 0:
            return Fraction(self._mantissa * 10**self._exponent)
        return Fraction(self._mantissa, 10**-self._exponent)

    def value(self) -> int:
        """The value rounded up, away from zero, to an integer (upstream ``Value()``)."""
        return _value_at(self._mantissa, self._exponent, 0)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up away from zero (upstream ``MilliValue()``)."""
        return _value_at(self._mantissa, self._exponent, -3)

    def _pair(self) -> tuple[int, int]:
        return self._mantissa, self._exponent

    def __add__(self, other: Quantity) -> Quantity:
        fmt = other._format if self._mantissa == 0 else self._format
        return Quantity(*_add(self._pair(), other._pair()), fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        fmt = other._format if self._mantissa == 0 else self._format
        return Quantity(*_add(self._pair(), (-other._mantissa, other._exponent)), fmt)

    def __neg__(self) -> Quantity:
        return Quantity(-self._mantissa, self._exponent, self._format)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._pair() == other._pair()

    def __hash__(self) -> int:
        return hash(self._pair())

    def __lt__(self, other: Quantity) -> bool:
        return _compare(self._pair(), other._pair()) < 0

    def __le__(self, other: Quantity) -> bool:
        return _compare(self._pair(), other._pair()) <= 0

    def __gt__(self, other: Quantity) -> bool:
        return _compare(self._pair(), other._pair()) > 0

    def __ge__(self, other: Quantity) -> bool:
        return _compare(self._pair(), other._pair()) >= 0

    def __str__(self) -> str:
        if self._text is not None:
            return self._text
        return _canonical(self._mantissa, self._exponent, self._format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def _canonical(mantissa: int, exponent: int, fmt: Format) -> str:
    """Upstream ``String()`` of a value that has no kept input text."""
    if mantissa == 0:
        return "0"
    if fmt is Format.BINARY_SI:
        if _compare((abs(mantissa), exponent), (1024, 0)) < 0:
            fmt = Format.DECIMAL_SI
        else:
            whole, at, exact = _round_up(mantissa, exponent, 0)
            if exact:
                return _binary_text(whole * 10**at)
            fmt = Format.DECIMAL_SI
    sign = "-" if mantissa < 0 else ""
    shift = exponent % 3
    number = _digits_of(abs(mantissa) * 10**shift)
    exponent -= shift
    if fmt is Format.DECIMAL_SI:
        # Upstream ignores a missing suffix (beyond E) and prints the bare number.
        return sign + number + _DECIMAL_SUFFIX_OF.get(exponent, "")
    return sign + number + (f"e{exponent}" if exponent else "")


def _binary_text(value: int) -> str:
    """An integer in the largest binary suffix that divides it (beyond Ei: no suffix)."""
    magnitude, times = abs(value), 0
    while magnitude % 1024 == 0:
        magnitude //= 1024
        times += 1
    sign = "-" if value < 0 else ""
    return sign + _digits_of(magnitude) + _BINARY_SUFFIX_OF.get(times, "")


def canonicalize(value: str | int | float) -> str:
    """The form the API server stores for a quantity as written; raises ``QuantityError``."""
    return str(Quantity.parse(value))


@functools.lru_cache(maxsize=4096, typed=True)
def _parse_cached(value: str | int | float) -> Quantity:
    """``Quantity.parse`` behind a cache: quantities are immutable, and the same few values
    (``100m``, ``128Mi``) recur in every pod of a list.  ``typed`` keeps ``1``, ``1.0`` and
    ``True`` apart."""
    text = _text_of(value)
    if not text:
        _fail(_FORMAT_WRONG)
    parts = _split(text)
    base, exponent, fmt = _interpret_suffix(parts.suffix)
    small = _parse_small(text, parts, exponent, fmt)
    return small if small is not None else _parse_exact(parts, base, exponent, fmt)
