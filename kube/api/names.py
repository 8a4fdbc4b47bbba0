"""The name and value formats every kind's validation uses, with Kubernetes' exact rules and words.

Each ``is_*`` validator returns the list of problems with a value (empty when it is valid), in
the wording of ``k8s.io/apimachinery`` (``pkg/util/validation`` and ``pkg/api/validate/content``),
because the API server reports these messages verbatim and users search for them.  Upstream has
two generations of these helpers that differ in small ways (a too-long label key is "no more than
63 bytes", a too-long DNS label "no more than 63 characters"); each function here follows the one
Kubernetes 1.36 calls.  Lengths are counted in UTF-8 bytes, as Go's ``len`` does.  IP addresses
and CIDRs are read as every existing IP field reads them with default feature gates (Go's
pre-1.17 parser), and a MicroTime as Go's ``time.Parse`` reads it; both are hand-written parsers
rather than Python's, whose notion of a valid address or time differs.

``validate_labels`` and ``validate_annotations`` are the ObjectMeta rules built on them, and
``check_format`` maps the formats a field can declare (``kube.api.struct``) to their check.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping

from kube.api import struct
from kube.api.errors import ErrorList, Path
from kube.api.quantity import Quantity, QuantityError

__all__ = [
    "TOTAL_ANNOTATION_SIZE_LIMIT",
    "check_format",
    "is_c_identifier",
    "is_canonical_cidr",
    "is_canonical_ip",
    "is_config_map_key",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_env_var_name",
    "is_http_header_name",
    "is_iana_svc_name",
    "is_micro_time",
    "is_path_segment_name",
    "is_percent",
    "is_qualified_name",
    "is_relaxed_env_var_name",
    "is_valid_cidr",
    "is_valid_ip",
    "is_valid_label_value",
    "is_valid_port_num",
    "is_wildcard_dns1123_subdomain",
    "validate_annotations",
    "validate_labels",
]

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
"""The most bytes all annotation keys and values of an object may take together."""

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character"
)
_WILDCARD_DNS1123_SUBDOMAIN_FMT = "\\*\\." + _DNS1123_SUBDOMAIN_FMT
_WILDCARD_DNS1123_SUBDOMAIN_MSG = (
    "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, "
    "which must consist of lower case alphanumeric characters, '-' or '.' and end with an "
    "alphanumeric character"
)
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character"
)
_C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"
_C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_'"
)
_ENV_VAR_NAME_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"
_ENV_VAR_NAME_MSG = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', "
    "or '.', and must not start with a digit"
)
_RELAXED_ENV_VAR_NAME_MSG = (
    "a valid environment variable name must consist only of printable ASCII characters other "
    "than '='"
)
_CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_MAP_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
_HTTP_HEADER_NAME_FMT = "[-A-Za-z0-9]+"
_HTTP_HEADER_NAME_MSG = "a valid HTTP header must consist of alphanumeric characters or '-'"
_PERCENT_FMT = "[0-9]+%"
_PERCENT_MSG = "a valid percent string must be a numeric string followed by an ending '%'"

_DNS1123_LABEL = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
_WILDCARD_DNS1123_SUBDOMAIN = re.compile(_WILDCARD_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL = re.compile(_DNS1035_LABEL_FMT)
_LABEL_KEY = re.compile(_LABEL_KEY_FMT)
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)
_C_IDENTIFIER = re.compile(_C_IDENTIFIER_FMT)
_ENV_VAR_NAME = re.compile(_ENV_VAR_NAME_FMT)
_CONFIG_MAP_KEY = re.compile(_CONFIG_MAP_KEY_FMT)
_HTTP_HEADER_NAME = re.compile(_HTTP_HEADER_NAME_FMT)
_PERCENT = re.compile(_PERCENT_FMT)
_PORT_NAME_CHARSET = re.compile("[-a-z0-9]+")

_DNS1123_LABEL_MAX = 63
_DNS1123_SUBDOMAIN_MAX = 253
_LABEL_VALUE_MAX = 63
_PORT_NAME_MAX = 15


def _byte_len(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def _max_len_chars(limit: int) -> str:
    """``validation.MaxLenError`` (the older helpers say "characters")."""
    return f"must be no more than {limit} characters"


def _max_len_bytes(limit: int) -> str:
    """``content.MaxLenError`` (the newer helpers say "bytes")."""
    return f"must be no more than {limit} bytes"


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    """Upstream ``RegexError``: the message, examples and the regex itself."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _chdir_prefix(value: str) -> list[str]:
    if value == ".":
        return ["must not be '.'"]
    if value == "..":
        return ["must not be '..'"]
    if value.startswith(".."):
        return ["must not start with '..'"]
    return []


def is_dns1123_label(value: str) -> list[str]:
    """An RFC 1123 label (namespace names, most object names of DNS-label kinds)."""
    errors = []
    if _byte_len(value) > _DNS1123_LABEL_MAX:
        errors.append(_max_len_chars(_DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL.fullmatch(value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            errors.append("must not contain dots")
        else:
            errors.append(
                _regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc")
            )
    return errors


def _dns1123_subdomain(value: str, too_long: str) -> list[str]:
    errors = []
    if _byte_len(value) > _DNS1123_SUBDOMAIN_MAX:
        errors.append(too_long)
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errors.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def is_dns1123_subdomain(value: str) -> list[str]:
    """An RFC 1123 subdomain (the names of most kinds)."""
    return _dns1123_subdomain(value, _max_len_chars(_DNS1123_SUBDOMAIN_MAX))


def is_wildcard_dns1123_subdomain(value: str) -> list[str]:
    """A subdomain whose first label is ``*`` (Ingress hosts and TLS hosts)."""
    errors = []
    if _byte_len(value) > _DNS1123_SUBDOMAIN_MAX:
        errors.append(_max_len_chars(_DNS1123_SUBDOMAIN_MAX))
    if not _WILDCARD_DNS1123_SUBDOMAIN.fullmatch(value):
        errors.append(
            _regex_error(
                _WILDCARD_DNS1123_SUBDOMAIN_MSG, _WILDCARD_DNS1123_SUBDOMAIN_FMT, "*.example.com"
            )
        )
    return errors


def is_dns1035_label(value: str) -> list[str]:
    """An RFC 1035 label: starts with a letter (Service names)."""
    errors = []
    if _byte_len(value) > _DNS1123_LABEL_MAX:
        errors.append(_max_len_chars(_DNS1123_LABEL_MAX))
    if not _DNS1035_LABEL.fullmatch(value):
        errors.append(_regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errors


def is_qualified_name(value: str) -> list[str]:
    """A label key (``[prefix/]name``), also used for annotation keys and finalizers."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            problems = _dns1123_subdomain(prefix, _max_len_bytes(_DNS1123_SUBDOMAIN_MAX))
            errors.extend("prefix part " + problem for problem in problems)
    if not name:
        errors.append("name part must be non-empty")
    elif _byte_len(name) > _LABEL_VALUE_MAX:
        errors.append("name part " + _max_len_bytes(_LABEL_VALUE_MAX))
    if not _LABEL_KEY.fullmatch(name):
        errors.append(
            "name part "
            + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def is_valid_label_value(value: str) -> list[str]:
    """A label value: empty, or a name part of at most 63 bytes."""
    errors = []
    if _byte_len(value) > _LABEL_VALUE_MAX:
        errors.append(_max_len_bytes(_LABEL_VALUE_MAX))
    if not _LABEL_VALUE.fullmatch(value):
        errors.append(
            _regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errors


def is_c_identifier(value: str) -> list[str]:
    """A C identifier; the length is not checked."""
    if _C_IDENTIFIER.fullmatch(value):
        return []
    return [_regex_error(_C_IDENTIFIER_MSG, _C_IDENTIFIER_FMT, "my_name", "MY_NAME", "MyName")]


def is_env_var_name(value: str) -> list[str]:
    """The strict environment variable name (``IsEnvVarName``): letters, digits, ``-._``, not
    starting with a digit, and not ``.``, ``..`` or ``..x``."""
    errors = []
    if not _ENV_VAR_NAME.fullmatch(value):
        examples = ("my.env-name", "MY_ENV.NAME", "MyEnvName1")
        errors.append(_regex_error(_ENV_VAR_NAME_MSG, _ENV_VAR_NAME_FMT, *examples))
    return errors + _chdir_prefix(value)


def is_relaxed_env_var_name(value: str) -> list[str]:
    """The relaxed environment variable name (``IsRelaxedEnvVarName``): any printable ASCII but
    ``=``.  Container ``env`` names use this one since Kubernetes 1.34."""
    errors = []
    if not value:
        errors.append("environment variable name must be non-empty")
    if any(not " " <= c <= "~" or c == "=" for c in value):
        errors.append(_RELAXED_ENV_VAR_NAME_MSG)
    return errors


def is_iana_svc_name(value: str) -> list[str]:
    """A port name (``IsValidPortName``): at most 15 of ``[-a-z0-9]``, with a letter, no
    ``--`` and no hyphen at either end."""
    errors = []
    if _byte_len(value) > _PORT_NAME_MAX:
        errors.append(_max_len_chars(_PORT_NAME_MAX))
    if not _PORT_NAME_CHARSET.fullmatch(value):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", value):
        errors.append("must contain at least one letter (a-z)")
    if "--" in value:
        errors.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def is_valid_port_num(port: int) -> list[str]:
    """A port number, 1 to 65535."""
    if 1 <= port <= 65535:
        return []
    return ["must be between 1 and 65535, inclusive"]


def is_config_map_key(value: str) -> list[str]:
    """A ConfigMap or Secret key: a file name of ``[-._a-zA-Z0-9]``, not ``.``/``..``."""
    errors = []
    if _byte_len(value) > _DNS1123_SUBDOMAIN_MAX:
        errors.append(_max_len_chars(_DNS1123_SUBDOMAIN_MAX))
    if not _CONFIG_MAP_KEY.fullmatch(value):
        examples = ("key.name", "KEY_NAME", "key-name")
        errors.append(_regex_error(_CONFIG_MAP_KEY_MSG, _CONFIG_MAP_KEY_FMT, *examples))
    return errors + _chdir_prefix(value)


def is_http_header_name(value: str) -> list[str]:
    """An HTTP header name as Go's HTTP library accepts it (probes' ``httpHeaders``)."""
    if _HTTP_HEADER_NAME.fullmatch(value):
        return []
    return [_regex_error(_HTTP_HEADER_NAME_MSG, _HTTP_HEADER_NAME_FMT, "X-Header-Name")]


def is_path_segment_name(value: str) -> list[str]:
    """A name that is safe as one URL path segment (RBAC roles): not ``.``/``..``, no ``/`` or
    ``%``.  Empty names and lengths are not checked, as upstream."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in value]


def is_percent(value: str) -> list[str]:
    """A whole percentage such as ``25%``."""
    if _PERCENT.fullmatch(value):
        return []
    return [_regex_error(_PERCENT_MSG, _PERCENT_FMT, "1%", "93%")]


# IP addresses and CIDRs are parsed as Go's net.ParseIP / ParseCIDR did before Go 1.17
# (k8s.io/utils/net ParseIPSloppy), which is what Kubernetes 1.36 accepts in every existing IP
# field with default feature gates: IPv4 octets may have leading zeros, IPv4-mapped IPv6 is
# allowed, and a CIDR may have host bits set.

_IP_BIG = 0xFFFFFF  # Go's parse helpers give up at this many


def _decimal_prefix(text: str) -> tuple[int, int] | None:
    """Go's ``dtoi``: the leading decimal number and how many characters it took."""
    value, taken = 0, 0
    while taken < len(text) and "0" <= text[taken] <= "9":
        value = value * 10 + ord(text[taken]) - ord("0")
        if value >= _IP_BIG:
            return None
        taken += 1
    return (value, taken) if taken else None


def _hex_prefix(text: str) -> tuple[int, int] | None:
    """Go's ``xtoi``: the leading hexadecimal number and how many characters it took."""
    value, taken = 0, 0
    while taken < len(text) and text[taken] in "0123456789abcdefABCDEF":
        value = value * 16 + int(text[taken], 16)
        if value >= _IP_BIG:
            return None
        taken += 1
    return (value, taken) if taken else None


def _is_ipv4(text: str) -> bool:
    for i in range(4):
        if i > 0:
            if not text.startswith("."):
                return False
            text = text[1:]
        number = _decimal_prefix(text)
        if number is None or number[0] > 0xFF:
            return False
        text = text[number[1] :]
    return not text


def _is_ipv6(text: str) -> bool:
    """Go's ``parseIPv6``: groups of hex, one ``::``, an optional trailing IPv4."""
    ellipsis = -1
    if text.startswith("::"):
        ellipsis, text = 0, text[2:]
        if not text:
            return True
    filled = 0
    while filled < 16:
        group = _hex_prefix(text)
        if group is None or group[0] > 0xFFFF:
            return False
        if group[1] < len(text) and text[group[1]] == ".":
            if (ellipsis < 0 and filled != 12) or filled + 4 > 16 or not _is_ipv4(text):
                return False
            text, filled = "", filled + 4
            break
        filled += 2
        text = text[group[1] :]
        if not text:
            break
        if text[0] != ":" or len(text) == 1:
            return False
        text = text[1:]
        if text[0] == ":":
            if ellipsis >= 0:
                return False
            ellipsis, text = filled, text[1:]
            if not text:
                break
    if text:
        return False
    return ellipsis >= 0 if filled < 16 else ellipsis < 0


_NOT_AN_IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


def is_valid_ip(value: str) -> list[str]:
    """An IPv4 or IPv6 address, as existing IP fields accept it (see above)."""
    for c in value:
        if c == ".":
            return [] if _is_ipv4(value) else [_NOT_AN_IP]
        if c == ":":
            return [] if _is_ipv6(value) else [_NOT_AN_IP]
    return [_NOT_AN_IP]


def is_valid_cidr(value: str) -> list[str]:
    """An IPv4 or IPv6 CIDR, as existing CIDR fields accept it (see above)."""
    address, slash, length = value.partition("/")
    if slash:
        bits = 32 if _is_ipv4(address) else 128 if _is_ipv6(address) else 0
        prefix = _decimal_prefix(length)
        if bits and prefix is not None and prefix[1] == len(length) and prefix[0] <= bits:
            return []
    return ["must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"]


# New IP and CIDR fields (ServiceCIDR, IPAddress) are validated strictly: what the legacy parser
# reads must also be what Go's netip reads (no leading zeros, no IPv4-mapped IPv6 address, no
# bits beyond the prefix), and be written in canonical form; Python's ipaddress is as strict
# and writes the same canonical forms (RFC 5952 for IPv6).


def is_canonical_ip(value: str) -> list[str]:
    """An IP address as new fields take it: valid, strict and canonical."""
    if is_valid_ip(value):
        return [_NOT_AN_IP]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return ["must not have leading 0s"]
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return ["must not be an IPv4-mapped IPv6 address"]
    return _canonical(value, str(address))


def is_canonical_cidr(value: str) -> list[str]:
    """A CIDR as new fields take it: valid, strict (no host bits) and canonical."""
    problems = is_valid_cidr(value)
    if problems:
        return problems
    length = value.partition("/")[2]
    try:
        network = ipaddress.ip_network(value, strict=False)
    except ValueError:
        network = None
    if network is None or (len(length) > 1 and length.startswith("0")):
        return ["must not have leading 0s in IP or prefix length"]
    if (
        isinstance(network, ipaddress.IPv6Network)
        and network.network_address.ipv4_mapped is not None
    ):
        return ["must not have an IPv4-mapped IPv6 address"]
    if ipaddress.ip_address(value.partition("/")[0]) != network.network_address:
        return ["must not have bits set beyond the prefix length"]
    return _canonical(value, str(network))


def _canonical(value: str, canonical: str) -> list[str]:
    return [] if value == canonical else [f'must be in canonical form ("{canonical}")']


# MicroTime: upstream decodes it with Go's time.Parse and the RFC3339Micro layout, which wants
# exactly six fractional digits; the messages are that function's.

_MICRO_TIME_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"
_ParsedField = tuple[int, str] | str | None  # (number, rest), an out-of-range field, or unreadable


def _go_time_quote(text: str) -> str:
    """The quoting of Go's time errors: control and non-ASCII characters as ``\\x`` bytes."""
    out: list[str] = []
    for char in text:
        if char < " " or char >= "\x80":
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        else:
            out.append("\\" + char if char in '"\\' else char)
    return '"' + "".join(out) + '"'


def _is_digit(text: str, i: int) -> bool:
    return i < len(text) and "0" <= text[i] <= "9"


def _getnum(text: str, fixed: bool) -> tuple[int, str] | None:
    """Go's ``getnum``: one or two leading digits (exactly two when ``fixed``)."""
    if not _is_digit(text, 0):
        return None
    if not _is_digit(text, 1):
        return None if fixed else (int(text[0]), text[1:])
    return int(text[:2]), text[2:]


def _go_atoi(text: str) -> int | None:
    """Go time's ``atoi``: an optional sign and ASCII digits (none at all reads as 0)."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if any(not "0" <= c <= "9" for c in body):
        return None
    number = int(body) if body else 0
    return -number if text[:1] == "-" else number


def _time_number(name: str, low: int, high: int, fixed: bool) -> Callable[[str], _ParsedField]:
    def parse(text: str) -> _ParsedField:
        parsed = _getnum(text, fixed)
        if parsed is not None and not low <= parsed[0] <= high:
            return name
        return parsed

    return parse


def _time_year(text: str) -> _ParsedField:
    if len(text) < 4 or not _is_digit(text, 0):
        return None
    year = _go_atoi(text[:4])
    return None if year is None else (year, text[4:])


def _time_fraction(text: str) -> _ParsedField:
    if len(text) < 7 or text[0] not in ".,":
        return None
    nanos = _go_atoi(text[1:7])
    if nanos is None:
        return None
    return "fractional second" if nanos < 0 else (nanos, text[7:])


def _time_zone(text: str) -> _ParsedField:
    if text.startswith("Z"):
        return 0, text[1:]
    if len(text) < 6 or text[3] != ":":
        return None
    hours = _getnum(text[1:3], True)
    minutes = _getnum(text[4:6], True) if hours is not None else None
    if minutes is not None and minutes[0] > 60:
        return "time zone offset minute"
    if hours is not None and hours[0] > 24:
        return "time zone offset hour"
    if hours is None or minutes is None or text[0] not in ("+", "-"):
        return None
    return (hours[0] * 60 + minutes[0]) * 60, text[6:]


_MICRO_TIME_STEPS: tuple[tuple[str, str, Callable[[str], _ParsedField]], ...] = (
    ("", "2006", _time_year),
    ("-", "01", _time_number("month", 1, 12, fixed=True)),
    ("-", "02", lambda text: _getnum(text, True)),  # checked against the month at the end
    ("T", "15", _time_number("hour", 0, 23, fixed=False)),
    (":", "04", _time_number("minute", 0, 59, fixed=True)),
    (":", "05", _time_number("second", 0, 59, fixed=True)),
    ("", ".000000", _time_fraction),
    ("", "Z07:00", _time_zone),
)
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _cannot_parse(value: str, rest: str, element: str) -> str:
    layout = _go_time_quote(_MICRO_TIME_LAYOUT)
    what = f"{_go_time_quote(rest)} as {_go_time_quote(element)}"
    return f"parsing time {_go_time_quote(value)} as {layout}: cannot parse {what}"


def _micro_time_problem(value: str) -> str | None:
    found: list[int] = []
    rest = value
    for literal, element, parse in _MICRO_TIME_STEPS:
        if not rest.startswith(literal):
            return _cannot_parse(value, rest, literal)
        rest = rest[len(literal) :]
        parsed = parse(rest)
        if isinstance(parsed, str):
            return f"parsing time {_go_time_quote(value)}: {parsed} out of range"
        if parsed is None:
            return _cannot_parse(value, rest, element)
        number, rest = parsed
        found.append(number)
    if rest:
        return f"parsing time {_go_time_quote(value)}: extra text: {_go_time_quote(rest)}"
    year, month, day = found[:3]
    leap = month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not 1 <= day <= _DAYS_IN_MONTH[month - 1] + leap:
        return f"parsing time {_go_time_quote(value)}: day out of range"
    return None


def is_micro_time(value: str) -> list[str]:
    """A ``MicroTime``: ``2006-01-02T15:04:05.000000Z07:00`` as Go's ``time.Parse`` reads it
    (six fractional digits, ``Z`` or a ``±hh:mm`` offset), with its error messages."""
    problem = _micro_time_problem(value)
    return [] if problem is None else [problem]


# ObjectMeta rules.


def validate_labels(labels: Mapping[str, str] | None, path: Path, errors: ErrorList) -> None:
    """Every label key must be a qualified name and every value a label value; one Invalid error
    at ``path`` per problem, as upstream ``ValidateLabels``."""
    for key, value in sorted((labels or {}).items()):
        for problem in is_qualified_name(key):
            errors.invalid(path, key, problem)
        for problem in is_valid_label_value(value):
            errors.invalid(path, value, problem)


def validate_annotations(
    annotations: Mapping[str, str] | None, path: Path, errors: ErrorList
) -> None:
    """Keys must be qualified names once lower-cased; keys and values together must fit in
    256 KiB (upstream ``ValidateAnnotations``)."""
    total = 0
    for key, value in sorted((annotations or {}).items()):
        for problem in is_qualified_name(key.lower()):
            errors.invalid(path, key, problem)
        total += _byte_len(key) + _byte_len(value)
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errors.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT)


# Declared formats.


def _text_format(check: Callable[[str], list[str]]) -> Callable[[str | int | float], list[str]]:
    def checked(value: str | int | float) -> list[str]:
        return check(value) if isinstance(value, str) else ["must be a string"]

    return checked


def _check_port(value: str | int | float) -> list[str]:
    """A port number, or (for int-or-string ports such as ``targetPort``) a port name."""
    if isinstance(value, str):
        return is_iana_svc_name(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return is_valid_port_num(value)
    return ["must be a port number or name"]


def _check_quantity(value: str | int | float) -> list[str]:
    try:
        Quantity.parse(value)
    except QuantityError as error:
        return [str(error)]
    return []


_FORMATS: dict[str, Callable[[str | int | float], list[str]]] = {
    struct.DNS1123_LABEL: _text_format(is_dns1123_label),
    struct.DNS1123_SUBDOMAIN: _text_format(is_dns1123_subdomain),
    struct.DNS1035_LABEL: _text_format(is_dns1035_label),
    struct.C_IDENTIFIER: _text_format(is_c_identifier),
    struct.IANA_SVC_NAME: _text_format(is_iana_svc_name),
    struct.QUALIFIED_NAME: _text_format(is_qualified_name),
    struct.IP_ADDRESS: _text_format(is_valid_ip),
    struct.CIDR: _text_format(is_valid_cidr),
    struct.CANONICAL_IP: _text_format(is_canonical_ip),
    struct.CANONICAL_CIDR: _text_format(is_canonical_cidr),
    struct.PORT: _check_port,
    struct.QUANTITY: _check_quantity,
    struct.MICRO_TIME: _text_format(is_micro_time),
}


def check_format(format_name: str, value: str | int | float) -> list[str]:
    """The problems with ``value`` under a format declared with ``meta(format=...)``.

    Raises ``KeyError`` for a format that is not one of ``kube.api.struct``'s constants.
    """
    return _FORMATS[format_name](value)
