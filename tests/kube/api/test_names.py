"""Name and value validators accept and reject what Kubernetes does, in Kubernetes' words.

Good and bad values come from upstream's tests (pkg/util/validation/validation_test.go,
ip_test.go, pkg/api/validate/content/*_test.go); messages are upstream's, character for character.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest
from _pytest.mark import ParameterSet
from hypothesis import given
from hypothesis import strategies as st

from kube.api import names, struct
from kube.api.errors import ROOT, ErrorList, ErrorType

Validator = Callable[[str], list[str]]

DNS1123_LABEL_REGEX = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_SUBDOMAIN_REGEX = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1035_LABEL_REGEX = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_KEY_NAME_REGEX = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_KEY_SLASHES = (
    "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
    "subdomain prefix and '/' (e.g. 'example.com/MyName')"
)
LABEL_VALUE_REGEX = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
C_IDENTIFIER_REGEX = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
    "validation is '[A-Za-z_][A-Za-z0-9_]*')"
)
ENV_VAR_REGEX = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', "
    "or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or "
    "'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
)
CONFIG_KEY_REGEX = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)
HEADER_REGEX = (
    "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', "
    "regex used for validation is '[-A-Za-z0-9]+')"
)
PERCENT_REGEX = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or "
    "'93%', regex used for validation is '[0-9]+%')"
)
NOT_AN_IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
NOT_A_CIDR = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
MICRO_LAYOUT = '"2006-01-02T15:04:05.000000Z07:00"'


def cases(validator: Validator, good: list[str], bad: list[str]) -> list[ParameterSet]:
    return [
        pytest.param(validator, value, True, id=f"{validator.__name__}-ok-{value[:20]!r}")
        for value in good
    ] + [
        pytest.param(validator, value, False, id=f"{validator.__name__}-bad-{value[:20]!r}")
        for value in bad
    ]


LABEL_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a"]
LABEL_GOOD += ["1--a--b--2", "a" * 63]
LABEL_BAD = ["", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_"]
LABEL_BAD += ["_a", "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2", " "]
LABEL_BAD += ["a ", " a", "a b", "1 ", " 1", "1 2", "a" * 64, "a\n", "é"]

SUBDOMAIN_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a"]
SUBDOMAIN_GOOD += ["1--a--b--2", "a.a", "ab.a", "abc.a", "a1.a", "a-1.a", "a--1--2--b.a", "a.1"]
SUBDOMAIN_GOOD += ["ab.1", "abc.1", "a1.1", "a-1.1", "a--1--2--b.1", "0.a", "01.a", "012.a"]
SUBDOMAIN_GOOD += ["1a.a", "1-a.a", "0.1", "01.1", "012.1", "1a.1", "1-a.1", "1--a--b--2.1"]
SUBDOMAIN_GOOD += ["a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5", "11.22.33.44.55", "a" * 253]
SUBDOMAIN_BAD = ["", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_"]
SUBDOMAIN_BAD += ["a_", "_a", "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "a..b", "1.", ".1"]
SUBDOMAIN_BAD += ["1..2", " ", "a ", " a", "a b", "1 ", " 1", "1 2", "A.a", "aB.a", "ab.A"]
SUBDOMAIN_BAD += ["A1.a", "a1.A", "A.1", "aB.1", "A1.1", "1A.1", "0.A", "01.A", "012.A"]
SUBDOMAIN_BAD += ["1A.a", "1a.A", "A.B.C.D.E", "AA.BB.CC.DD.EE", "a.B.c.d.e", "aa.bB.cc.dd.ee"]
SUBDOMAIN_BAD += ["a@b", "a,b", "a;b", "a:b", "a%b", "a?b", "a$b", "a" * 254, "a\n"]

DNS1035_GOOD = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "a" * 63]
DNS1035_BAD = ["0", "01", "012", "1a", "1-a", "1--a--b--2", "", "A", "ABC", "aBc", "A1", "A-1"]
DNS1035_BAD += ["1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b", "1_", "_1", "1_2"]
DNS1035_BAD += [".", "a.", ".a", "a.b", "1.", ".1", "1.2", " ", "a ", " a", "a b", "a" * 64]

QUALIFIED_GOOD = ["simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple"]
QUALIFIED_GOOD += ["now-with-dashes/simple", "now-with-dashes/now-with-dashes"]
QUALIFIED_GOOD += ["now.with.dots/simple", "now-with.dashes-and.dots/simple", "1-num.2-num/3-num"]
QUALIFIED_GOOD += ["1234/5678", "1.2.3.4/5678", "Uppercase_Is_OK_123"]
QUALIFIED_GOOD += ["example.com/Uppercase_Is_OK_123", "requests.storage-foo", "a" * 63]
QUALIFIED_GOOD += ["a" * 253 + "/" + "b" * 63]
QUALIFIED_BAD = ["nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-"]
QUALIFIED_BAD += ["only/one/slash", "Example.com/abc", "example_com/abc", "example.com/"]
QUALIFIED_BAD += ["/simple", "a" * 64, "a" * 254 + "/abc", "", "a\n"]

LABEL_VALUE_GOOD = ["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234"]
LABEL_VALUE_GOOD += ["a" * 63, ""]
LABEL_VALUE_BAD = ["nospecialchars%^=@", "Tama-nui-te-rā.is.Māori.sun", "\\backslashes\\are\\bad"]
LABEL_VALUE_BAD += ["-starts-with-dash", "ends-with-dash-", ".starts.with.dot", "ends.with.dot."]
LABEL_VALUE_BAD += ["a" * 64]

C_IDENTIFIER_GOOD = ["a", "ab", "abc", "a1", "_a", "a_", "a_b", "a_1", "_", "__", "A", "AB_c1"]
C_IDENTIFIER_BAD = ["", "1", "123", "1a", "-", "a-", "-a", "a-b", "a b", "1-1", "a.b", "é"]

ENV_GOOD = ["a", "abc", "A", "ABC", "aBc", "A1", "a_", "_a", "a_b", "my.env-name", "MY_ENV.NAME"]
ENV_GOOD += ["MyEnvName1", "-", "a.", "a-b", ".a", "._a"]
ENV_BAD = ["", "1", "123", "1a", "a b", "a=b", "a@", ".", "..", "..a", "é"]

RELAXED_ENV_GOOD = ["-", ":", "_", "+a", ">a", "<a", "a.", "a..", "*a", "%a", "?a", "a:a"]
RELAXED_ENV_GOOD += ["a_a", "aAz", "~a", "|a", "a0a", "a9", "/a", "a ", "#a", "0a", "0 a", "'a"]
RELAXED_ENV_GOOD += ["(a", "@a"]
RELAXED_ENV_BAD = ["", "=", "a=", "1=a", "a=b", "#%=&&", "\x01abc", "\x82abc", "Ç ç", "Ä ä"]
RELAXED_ENV_BAD += ["Ñ ñ", "Ø ø"]

PORT_NAME_GOOD = ["telnet", "re-mail-ck", "pop3", "a", "a-1", "1-a", "a-1-b-2-c", "1-a-2-b-3"]
PORT_NAME_BAD = ["longerthan15characters", "", "a" * 16, "12345", "1-2-3-4", "-begin", "end-"]
PORT_NAME_BAD += ["two--hyphens", "whois++", "Http"]

CONFIG_KEY_GOOD = ["a", "good", "good-good", "still.good", "this.is.also.good", ".so.is.this"]
CONFIG_KEY_GOOD += ["THIS_IS_GOOD", "so_is_this_17"]
CONFIG_KEY_BAD = [".", "..", "..bad", "b*d", "bad!&bad", "", "a" * 254]

HEADER_GOOD = ["Accept-Encoding", "Host", "If-Modified-Since", "X-Forwarded-For", "a", "ab"]
HEADER_GOOD += ["abc", "a1", "-a", "a-", "a-b", "a-1", "a--1--2--b", "--abc-123", "A", "AB"]
HEADER_GOOD += ["AbC", "A1", "-A", "A-", "A-B", "A-1", "A--1--2--B", "--123-ABC"]
HEADER_BAD = ["Host:", "X-Forwarded-For:", "X-@Home", "", "_", "a_", "_a", "1_", "1_2", "."]
HEADER_BAD += ["a.", ".a", "a.b", "1.", ".1", "1.2", " ", "a ", " a", "a b", "1 ", " 1", "1 2"]
HEADER_BAD += ["#a#", "^", ",", ";", "=", "<", "?", "@", "{"]

PATH_SEGMENT_GOOD = ["a", "...", "a.b", "", "Cluster Admin", "system:controller"]
PATH_SEGMENT_BAD = [".", "..", "a/b", "a%b", "/", "%"]

PERCENT_GOOD = ["0%", "00000%", "1%", "01%", "99%", "100%", "101%"]
PERCENT_BAD = ["", "0", "100", "0.0%", "99.9%", "hundred", " 1%", "1% ", "-0%", "-1%", "+1%"]

# Upstream ip_test.go, with the verdicts of the legacy (non-strict) validation that every existing
# IP field uses with Kubernetes 1.36's default feature gates.
IP_GOOD = ["1.2.3.4", "0.0.0.0", "255.255.255.255", "1234::abcd", "::", "::1"]
IP_GOOD += ["ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "0:0:0:0:0:0:0:0", "0001:002:03:4::"]
IP_GOOD += ["1234::ABCD", "1.1.1.01", "::ffff:1.1.1.1", "010.002.003.004", "1::2:3:4:5:6:7"]
IP_GOOD += ["1:2:3:4:5:6:1.2.3.4", "::1.2.3.4", "1::1.2.3.4", "1:2:3:4:5:6:7::", "::0:1"]
IP_GOOD += ["00000000000000000001.2.3.4", "000000000000000000000001::"]
IP_BAD = ["", "aaaaaaa", "myhost.mydomain", "1.2.3.0/24", "1.2.3.400", "-1.0.0.0"]
IP_BAD += ["2001:db8::10005", "1.2.3.4:80", "[2001:db8::1]", "[2001:db8::1]:80"]
IP_BAD += ["example.com:80", "1234::abcd%eth0", "169.254.0.0%eth0", "1.2.3", "1.2.3.4.5"]
IP_BAD += ["1:2:3:4:5:6:7:8:9", "1::2::3", ":1::", "1:2:3:4:5:6:7:8::", "::1.2.3.4.5"]
IP_BAD += ["1:2:3:4:5:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "1.2.3.4 ", " 1.2.3.4", "1:", ":"]
IP_BAD += ["99999999.1.1.1", "1.2.3.\u0664", "12345::"]

CIDR_GOOD = ["1.0.0.0/8", "0.0.0.0/0", "1.1.1.1/32", "2001:4860:4860::/48", "::/0", "::1/128"]
CIDR_GOOD += ["2a00:79e0:2:0::/64", "2001:DB8::/64", "1.1.01.0/24", "::ffff:1.1.1.0/24"]
CIDR_GOOD += ["::ffff:1.1.1.0/120", "1.2.3.4/24", "2001:db8::1/64", "192.168.0.0/016"]
CIDR_BAD = ["", "aaaaaaa", "1.2.3.4", "192.168.0.1/healthz", "192.168.0.1/0/99"]
CIDR_BAD += ["192.168.0.0/-16", "192.168.0.0/+16", "1.2.3.4/33", "::/129", "1.2.3.4/", "/8"]
CIDR_BAD += ["1.2.3.4/ 8", "1.2.3.400/8"]

VERDICTS = [
    *cases(names.is_dns1123_label, LABEL_GOOD, LABEL_BAD),
    *cases(names.is_dns1123_subdomain, SUBDOMAIN_GOOD, SUBDOMAIN_BAD),
    *cases(names.is_dns1035_label, DNS1035_GOOD, DNS1035_BAD),
    *cases(names.is_qualified_name, QUALIFIED_GOOD, QUALIFIED_BAD),
    *cases(names.is_valid_label_value, LABEL_VALUE_GOOD, LABEL_VALUE_BAD),
    *cases(names.is_c_identifier, C_IDENTIFIER_GOOD, C_IDENTIFIER_BAD),
    *cases(names.is_env_var_name, ENV_GOOD, ENV_BAD),
    *cases(names.is_relaxed_env_var_name, RELAXED_ENV_GOOD, RELAXED_ENV_BAD),
    *cases(names.is_iana_svc_name, PORT_NAME_GOOD, PORT_NAME_BAD),
    *cases(names.is_config_map_key, CONFIG_KEY_GOOD, CONFIG_KEY_BAD),
    *cases(names.is_http_header_name, HEADER_GOOD, HEADER_BAD),
    *cases(names.is_path_segment_name, PATH_SEGMENT_GOOD, PATH_SEGMENT_BAD),
    *cases(names.is_percent, PERCENT_GOOD, PERCENT_BAD),
    *cases(names.is_valid_ip, IP_GOOD, IP_BAD),
    *cases(names.is_valid_cidr, CIDR_GOOD, CIDR_BAD),
]


@pytest.mark.parametrize(("validator", "value", "valid"), VERDICTS)
def test_validators_accept_and_reject_like_upstream(
    validator: Validator, value: str, valid: bool
) -> None:
    problems = validator(value)
    assert (problems == []) is valid, problems
    assert all(isinstance(problem, str) and problem for problem in problems)


MESSAGES = [
    (names.is_dns1123_label, "a.b", ["must not contain dots"]),
    (names.is_dns1123_label, "A", [DNS1123_LABEL_REGEX]),
    (
        names.is_dns1123_label,
        "a" * 64,
        ["must be no more than 63 characters"],
    ),
    (
        names.is_dns1123_label,
        "a." * 32 + "a",
        ["must be no more than 63 characters", "must not contain dots"],
    ),
    (names.is_dns1123_label, "é" * 32, ["must be no more than 63 characters", DNS1123_LABEL_REGEX]),
    (names.is_dns1123_subdomain, "Bad_Name", [DNS1123_SUBDOMAIN_REGEX]),
    (names.is_dns1123_subdomain, "a" * 254, ["must be no more than 253 characters"]),
    (names.is_dns1035_label, "1abc", [DNS1035_LABEL_REGEX]),
    (names.is_dns1035_label, "a" * 64, ["must be no more than 63 characters"]),
    (names.is_qualified_name, "a/b/c", [LABEL_KEY_SLASHES]),
    (names.is_qualified_name, "/simple", ["prefix part must be non-empty"]),
    (
        names.is_qualified_name,
        "example.com/",
        ["name part must be non-empty", LABEL_KEY_NAME_REGEX],
    ),
    (names.is_qualified_name, "a" * 64, ["name part must be no more than 63 bytes"]),
    (
        names.is_qualified_name,
        "Example.com/abc",
        ["prefix part " + DNS1123_SUBDOMAIN_REGEX],
    ),
    (
        names.is_qualified_name,
        "a" * 254 + "/abc",
        ["prefix part must be no more than 253 bytes"],
    ),
    (names.is_qualified_name, "-x", [LABEL_KEY_NAME_REGEX]),
    (names.is_valid_label_value, "a" * 64, ["must be no more than 63 bytes"]),
    (names.is_valid_label_value, "-a", [LABEL_VALUE_REGEX]),
    (names.is_c_identifier, "1a", [C_IDENTIFIER_REGEX]),
    (names.is_env_var_name, "1a", [ENV_VAR_REGEX]),
    (names.is_env_var_name, "..a", ["must not start with '..'"]),
    (names.is_env_var_name, ".", ["must not be '.'"]),
    (names.is_env_var_name, "..", ["must not be '..'"]),
    (
        names.is_relaxed_env_var_name,
        "",
        ["environment variable name must be non-empty"],
    ),
    (
        names.is_relaxed_env_var_name,
        "a=b",
        [
            "a valid environment variable name must consist only of printable ASCII characters"
            " other than '='"
        ],
    ),
    (
        names.is_iana_svc_name,
        "",
        [
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            "must contain at least one letter (a-z)",
        ],
    ),
    (
        names.is_iana_svc_name,
        "-a--b-" + "c" * 10,
        [
            "must be no more than 15 characters",
            "must not contain consecutive hyphens",
            "must not begin or end with a hyphen",
        ],
    ),
    (names.is_iana_svc_name, "12345", ["must contain at least one letter (a-z)"]),
    (names.is_config_map_key, "bad key", [CONFIG_KEY_REGEX]),
    (names.is_config_map_key, "..x", ["must not start with '..'"]),
    (names.is_config_map_key, "a" * 254, ["must be no more than 253 characters"]),
    (names.is_http_header_name, "X-@Home", [HEADER_REGEX]),
    (names.is_path_segment_name, ".", ["may not be '.'"]),
    (names.is_path_segment_name, "..", ["may not be '..'"]),
    (names.is_path_segment_name, "a/%b", ["may not contain '/'", "may not contain '%'"]),
    (names.is_percent, "1.5%", [PERCENT_REGEX]),
    (names.is_valid_ip, "1.2.3.400", [NOT_AN_IP]),
    (names.is_valid_cidr, "1.2.3.4", [NOT_A_CIDR]),
    (
        names.is_wildcard_dns1123_subdomain,
        "a*.example.com",
        [
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS "
            "subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and "
            "end with an alphanumeric character (e.g. '*.example.com', regex used for validation "
            "is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ],
    ),
    (names.is_wildcard_dns1123_subdomain, "*.example.com", []),
    (names.is_canonical_ip, "10.96.0.10", []),
    (names.is_canonical_ip, "1.2.3.400", [NOT_AN_IP]),
    (names.is_canonical_ip, "010.96.0.10", ["must not have leading 0s"]),
    (names.is_canonical_ip, "::ffff:1.2.3.4", ["must not be an IPv4-mapped IPv6 address"]),
    (names.is_canonical_ip, "2001:DB8:0::1", ['must be in canonical form ("2001:db8::1")']),
    (names.is_canonical_cidr, "10.96.0.0/12", []),
    (names.is_canonical_cidr, "10.96.0.0", [NOT_A_CIDR]),
    (names.is_canonical_cidr, "10.96.0.0/012", ["must not have leading 0s in IP or prefix length"]),
    (names.is_canonical_cidr, "10.96.0.1/12", ["must not have bits set beyond the prefix length"]),
    (names.is_canonical_cidr, "::ffff:0.0.0.0/96", ["must not have an IPv4-mapped IPv6 address"]),
    (names.is_canonical_cidr, "fd00:0::/64", ['must be in canonical form ("fd00::/64")']),
]


@pytest.mark.parametrize(
    ("validator", "value", "expected"),
    [pytest.param(*m, id=f"{m[0].__name__}-{m[1][:20]!r}") for m in MESSAGES],
)
def test_messages_are_upstreams(validator: Validator, value: str, expected: list[str]) -> None:
    assert validator(value) == expected


PORTS = [(1, True), (2, True), (1000, True), (16384, True), (32768, True), (65535, True)]
PORTS += [(0, False), (-1, False), (65536, False), (100000, False)]


@pytest.mark.parametrize(
    ("port", "valid"), [pytest.param(port, valid, id=str(port)) for port, valid in PORTS]
)
def test_port_numbers(port: int, valid: bool) -> None:
    expected = [] if valid else ["must be between 1 and 65535, inclusive"]
    assert names.is_valid_port_num(port) == expected


# MicroTime values as Go's time.Parse reads them with upstream's RFC3339Micro layout; the
# messages are the ones kubectl 1.36 prints when it decodes a Lease with these acquireTimes.
MICRO_TIMES = [
    ("2026-01-01T10:00:00.000000Z", None),
    ("2024-02-29T23:59:59.999999+05:30", None),
    ("0000-01-01T00:00:00.000000-24:00", None),
    ("2026-01-01T10:00:00,123456Z", None),
    ("2026-01-01T10:00:00.+12345Z", None),
    ("2026-01-01T10:00:00.-00000Z", None),
    ("2026-01-01T9:00:00.000000Z", None),
    ("2026-01-01T10:00:00.000000+24:60", None),
    ("2026-01-01T10:00:00.123Z", 'cannot parse ".123Z" as ".000000"'),
    ("2026-01-01T10:00:00Z", 'cannot parse "Z" as ".000000"'),
    ("2026-01-01T10:00:00.1234567Z", 'cannot parse "7Z" as "Z07:00"'),
    ("2026-01-01T10:00:00.000000z", 'cannot parse "z" as "Z07:00"'),
    ("2026-01-01 10:00:00.000000Z", 'cannot parse " 10:00:00.000000Z" as "T"'),
    ("", 'cannot parse "" as "2006"'),
    ("\u00e9026-01-01T10:00:00Z", 'cannot parse "\\xc3\\xa9026-01-01T10:00:00Z" as "2006"'),
    ("2023-02-29T00:00:00.000000Z", "day out of range"),
    ("2026-04-31T00:00:00.000000Z", "day out of range"),
    ("2026-13-01T10:00:00.000000Z", "month out of range"),
    ("2026-01-01T24:00:00.000000Z", "hour out of range"),
    ("2026-01-01T10:60:00.000000Z", "minute out of range"),
    ("2026-01-01T10:00:60.000000Z", "second out of range"),
    ("2026-01-01T10:00:00.-12345Z", "fractional second out of range"),
    ("2026-01-01T10:00:00.000000+25:00", "time zone offset hour out of range"),
    ("2026-01-01T10:00:00.000000+25:61", "time zone offset minute out of range"),
    ("2026-01-01T10:00:00.000000Zjunk", 'extra text: "junk"'),
]


@pytest.mark.parametrize(
    ("value", "problem"), [pytest.param(*m, id=repr(m[0])) for m in MICRO_TIMES]
)
def test_micro_times_are_read_as_go_reads_them(value: str, problem: str | None) -> None:
    quoted = '"' + value.replace("\u00e9", "\\xc3\\xa9") + '"'
    if problem is None:
        expected = []
    elif problem.startswith("cannot parse"):
        expected = [f"parsing time {quoted} as {MICRO_LAYOUT}: {problem}"]
    else:
        expected = [f"parsing time {quoted}: {problem}"]
    assert names.is_micro_time(value) == expected


def rendered(errors: ErrorList) -> list[str]:
    return [str(error) for error in errors]


def test_labels_report_every_problem_at_the_map_path() -> None:
    errors = ErrorList()
    path = ROOT.child("metadata").child("labels")
    names.validate_labels({"ok": "fine", "a/b/c": "x", "k": "-bad-"}, path, errors)
    assert rendered(errors) == [
        f'metadata.labels: Invalid value: "a/b/c": {LABEL_KEY_SLASHES}',
        f'metadata.labels: Invalid value: "-bad-": {LABEL_VALUE_REGEX}',
    ]
    assert all(error.type is ErrorType.INVALID for error in errors)


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param(None, id="none"),
        pytest.param({}, id="empty"),
        pytest.param({"app": "web", "example.com/tier": "", "Version_1": "v1.2"}, id="valid"),
    ],
)
def test_valid_labels_add_nothing(labels: dict[str, str] | None) -> None:
    errors = ErrorList()
    names.validate_labels(labels, ROOT.child("labels"), errors)
    assert errors == []


def test_annotation_keys_are_checked_lower_cased() -> None:
    errors = ErrorList()
    path = ROOT.child("metadata").child("annotations")
    annotations = {"Example.COM/Key": "any value at all: {json} \n ok", "bad key": ""}
    names.validate_annotations(annotations, path, errors)
    assert rendered(errors) == [
        f'metadata.annotations: Invalid value: "bad key": {LABEL_KEY_NAME_REGEX}'
    ]


@pytest.mark.parametrize(
    ("size", "too_long"),
    [
        pytest.param(names.TOTAL_ANNOTATION_SIZE_LIMIT, False, id="at-limit"),
        pytest.param(names.TOTAL_ANNOTATION_SIZE_LIMIT + 1, True, id="over-limit"),
    ],
)
def test_annotations_together_fit_in_256_kib(size: int, too_long: bool) -> None:
    errors = ErrorList()
    names.validate_annotations({"a": "x" * (size - 2), "b": ""}, ROOT.child("annotations"), errors)
    expected = ["annotations: Too long: may not be more than 262144 bytes"] if too_long else []
    assert rendered(errors) == expected


def test_annotation_size_counts_utf8_bytes() -> None:
    errors = ErrorList()
    value = "é" * (names.TOTAL_ANNOTATION_SIZE_LIMIT // 2)  # two bytes each
    names.validate_annotations({"a": value}, ROOT.child("annotations"), errors)
    assert [error.type for error in errors] == [ErrorType.TOO_LONG]


FORMATS = [
    (struct.DNS1123_LABEL, "my-name", []),
    (struct.DNS1123_LABEL, "my.name", ["must not contain dots"]),
    (struct.DNS1123_SUBDOMAIN, "my.name", []),
    (struct.DNS1123_SUBDOMAIN, "Bad_Name", [DNS1123_SUBDOMAIN_REGEX]),
    (struct.DNS1035_LABEL, "1abc", [DNS1035_LABEL_REGEX]),
    (struct.C_IDENTIFIER, "MY_VAR", []),
    (struct.C_IDENTIFIER, "1a", [C_IDENTIFIER_REGEX]),
    (struct.IANA_SVC_NAME, "http", []),
    (struct.IANA_SVC_NAME, "12345", ["must contain at least one letter (a-z)"]),
    (struct.QUALIFIED_NAME, "example.com/x", []),
    (struct.QUALIFIED_NAME, "a/b/c", [LABEL_KEY_SLASHES]),
    (struct.IP_ADDRESS, "10.0.0.1", []),
    (struct.IP_ADDRESS, "10.0.0.256", [NOT_AN_IP]),
    (struct.CIDR, "10.0.0.0/8", []),
    (struct.CIDR, "10.0.0.0", [NOT_A_CIDR]),
    (struct.PORT, 8080, []),
    (struct.PORT, 0, ["must be between 1 and 65535, inclusive"]),
    (struct.PORT, "http", []),
    (
        struct.PORT,
        "Http",
        ["must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"],
    ),
    (struct.PORT, 80.0, ["must be a port number or name"]),
    (struct.QUANTITY, "1.5Gi", []),
    (struct.QUANTITY, 2, []),
    (struct.QUANTITY, 0.5, []),
    (struct.QUANTITY, "1i", ["unable to parse quantity's suffix"]),
    (struct.DNS1123_LABEL, 5, ["must be a string"]),
    (struct.MICRO_TIME, "2026-01-01T10:00:00.000000Z", []),
    (struct.MICRO_TIME, 0, ["must be a string"]),
]


@pytest.mark.parametrize(
    ("format_name", "value", "expected"),
    [pytest.param(*f, id=f"{f[0]}-{f[1]!r}") for f in FORMATS],
)
def test_check_format_dispatches_on_declared_formats(
    format_name: str, value: str | int | float, expected: list[str]
) -> None:
    assert names.check_format(format_name, value) == expected


def test_check_format_rejects_unknown_formats() -> None:
    with pytest.raises(KeyError):
        names.check_format("uuid", "x")


ALL_TEXT_VALIDATORS = [
    names.is_dns1123_label,
    names.is_dns1123_subdomain,
    names.is_dns1035_label,
    names.is_qualified_name,
    names.is_valid_label_value,
    names.is_c_identifier,
    names.is_env_var_name,
    names.is_relaxed_env_var_name,
    names.is_iana_svc_name,
    names.is_config_map_key,
    names.is_http_header_name,
    names.is_path_segment_name,
    names.is_percent,
    names.is_valid_ip,
    names.is_valid_cidr,
    names.is_wildcard_dns1123_subdomain,
    names.is_canonical_ip,
    names.is_canonical_cidr,
    names.is_micro_time,
]


@given(st.text(), st.sampled_from(ALL_TEXT_VALIDATORS))
def test_validators_never_raise(value: str, validator: Validator) -> None:
    problems = validator(value)
    assert isinstance(problems, list)
    assert all(isinstance(problem, str) for problem in problems)


@given(st.text(alphabet=st.characters(codec="utf-8")))
def test_validate_helpers_never_raise(value: str) -> None:
    errors = ErrorList()
    names.validate_labels({value: value}, ROOT, errors)
    names.validate_annotations({value: value}, ROOT, errors)
    assert all(error.field == "" for error in errors)


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True))
def test_generated_dns_labels_are_labels_and_subdomains(value: str) -> None:
    assert names.is_dns1123_label(value) == []
    assert names.is_dns1123_subdomain(value) == []
    assert names.is_dns1123_subdomain(value + "." + value) == []
    assert (names.is_dns1035_label(value) == []) is value[0].isalpha()


@given(st.text(st.characters(codec="ascii"), max_size=70))
def test_label_subsets_hold(value: str) -> None:
    if names.is_dns1035_label(value) == []:
        assert names.is_dns1123_label(value) == []
    if names.is_dns1123_label(value) == []:
        assert names.is_dns1123_subdomain(value) == []
        assert names.is_valid_label_value(value) == []
        assert names.is_qualified_name(value) == []
    if names.is_c_identifier(value) == []:
        assert names.is_env_var_name(value) == []
        assert names.is_relaxed_env_var_name(value) == []


@given(st.ip_addresses())
def test_every_ip_address_form_is_valid(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    assert names.is_valid_ip(str(address)) == []
    assert names.is_valid_ip(address.exploded) == []
    assert names.is_valid_ip(str(address).upper()) == []
    assert names.is_valid_cidr(f"{address}/{address.max_prefixlen}") == []
    assert names.is_valid_cidr(f"{address}/{address.max_prefixlen + 1}") == [NOT_A_CIDR]


@given(st.ip_addresses(v=4))
def test_ipv4_is_valid_where_python_agrees(address: ipaddress.IPv4Address) -> None:
    octets = str(address).split(".")
    padded = ".".join(octet.zfill(3) for octet in octets)
    assert names.is_valid_ip(padded) == []  # leading zeros: legacy validation accepts them
    assert names.is_valid_ip(f"::ffff:{address}") == []
    assert names.is_valid_ip(".".join(octets[:3])) == [NOT_AN_IP]
