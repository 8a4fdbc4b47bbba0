"""Field selectors parse, print and match exactly as Kubernetes' ``fields`` package does.

Cases come from upstream's pkg/fields/selector_test.go.
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube.api.fieldselector import (
    FieldRequirement,
    FieldSelector,
    FieldSelectorError,
    escape_value,
    parse_field_selector,
)
from kube.api.labels import Operator

EQ, NE = Operator.EQUALS, Operator.NOT_EQUALS


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(t, id=repr(t))
        for t in ["x=a,y=b,z=c", "", "x!=a,y=b", "x=a||y\\=b", "x=a\\=\\=b", "=a", "a="]
    ],
)
def test_selectors_print_back_as_written(text: str) -> None:
    assert str(parse_field_selector(text)) == text


PARSED = [
    ("a=avalue", [("a", EQ, "avalue")]),
    ("a=avalue,b=bvalue", [("a", EQ, "avalue"), ("b", EQ, "bvalue")]),
    (
        "c!=cvalue,a=avalue,b==bvalue",
        [("a", EQ, "avalue"), ("b", EQ, "bvalue"), ("c", NE, "cvalue")],
    ),
    ("", []),
    ("a=a,", [("a", EQ, "a")]),
    (",a=a", [("a", EQ, "a")]),
    (",,", []),
    ("k=\\,,k2=v2", [("k2", EQ, "v2"), ("k", EQ, ",")]),  # terms sort by their text
    ("k=\\\\,k2=v2", [("k2", EQ, "v2"), ("k", EQ, "\\")]),
    ("k=\\\\\\,,k2=v2", [("k2", EQ, "v2"), ("k", EQ, "\\,")]),
    ("k=\\=", [("k", EQ, "=")]),
    ("함=수,목=록", [("목", EQ, "록"), ("함", EQ, "수")]),
    ("spec.nodeName=", [("spec.nodeName", EQ, "")]),
    ("=", []),  # a term with neither field nor value selects everything
    ("==", []),
    ("=a", [("", EQ, "a")]),
    ("a!==b", None),
    ("a\\,b=c", [("a\\,b", EQ, "c")]),  # the field part is verbatim
    ("a\\=b", [("a\\", EQ, "b")]),
    ("a!b=c", [("a!b", EQ, "c")]),
    ("a!=", [("a", NE, "")]),
    ("x = y", [("x ", EQ, " y")]),  # spaces are data
    (
        "metadata.name=a,metadata.name!=b",
        [("metadata.name", NE, "b"), ("metadata.name", EQ, "a")],
    ),
]


@pytest.mark.parametrize(("text", "expected"), [pytest.param(*p, id=repr(p[0])) for p in PARSED])
def test_parse_gives_upstreams_requirements(
    text: str, expected: list[tuple[str, Operator, str]] | None
) -> None:
    if expected is None:
        with pytest.raises(FieldSelectorError):
            parse_field_selector(text)
        return
    requirements = parse_field_selector(text).requirements
    assert requirements == tuple(FieldRequirement(*r) for r in expected)


ERRORS = [
    ("x=a||y=b", "invalid field selector: unescaped character in value: 61"),
    ("x==a==b", "invalid field selector: unescaped character in value: 61"),
    ("x=a,b", "invalid selector: 'x=a,b'; can't understand 'b'"),
    ("x in (a)", "invalid selector: 'x in (a)'; can't understand 'x in (a)'"),
    ("x in (a,b,c)", "invalid selector: 'x in (a,b,c)'; can't understand 'b'"),
    ("x", "invalid selector: 'x'; can't understand 'x'"),
    ("k=\\a\\b\\", "invalid field selector: invalid escape sequence: \\a"),
    ("k=\\", "invalid field selector: invalid escape sequence: \\"),
    ("k=\\\\\\", "invalid field selector: invalid escape sequence: \\"),
    ("a!==b", "invalid field selector: unescaped character in value: 61"),
    ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
]


@pytest.mark.parametrize(("text", "message"), [pytest.param(*e, id=repr(e[0])) for e in ERRORS])
def test_parse_errors_are_upstreams(text: str, message: str) -> None:
    with pytest.raises(FieldSelectorError) as caught:
        parse_field_selector(text)
    assert str(caught.value) == message


FIELDS = {"foo": "bar", "baz": "blah", "complex": "=value\\,\\"}

MATCHES = [
    ("", {"x": "y"}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("foo=bar", FIELDS, True),
    ("baz=blah", FIELDS, True),
    ("foo=bar,baz=blah", FIELDS, True),
    ("foo=bar,baz=blah,complex=\\=value\\\\\\,\\\\", FIELDS, True),
    ("foo=blah", FIELDS, False),
    ("baz=bar", FIELDS, False),
    ("foo=bar,foobar=bar,baz=blah", FIELDS, False),
    # a field the object does not have counts as the empty string
    ("missing=", {}, True),
    ("missing!=", {}, False),
    ("missing!=x", {}, True),
    ("x==y", {"x": "y"}, True),
]


@pytest.mark.parametrize(
    ("text", "fields", "matches"),
    [pytest.param(*m, id=f"{m[0]!r}-{sorted(m[1].items())}") for m in MATCHES],
)
def test_matching_is_upstreams(text: str, fields: dict[str, str], matches: bool) -> None:
    assert parse_field_selector(text).matches(fields) is matches


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        pytest.param("", "test", None, id="empty"),
        pytest.param("a=b", "test", None, id="other-field"),
        pytest.param("test=b", "test", "b", id="exact"),
        pytest.param("test=", "test", "", id="exact-empty"),
        pytest.param("test!=b", "test", None, id="not-equal"),
        pytest.param("test!=a,test=b", "test", "b", id="after-not-equal"),
        pytest.param("a=c,test==b", "test", "b", id="double-equals"),
        pytest.param(
            "spec.nodeName=node-1,metadata.name=x", "spec.nodeName", "node-1", id="kubelet"
        ),
    ],
)
def test_value_for_is_upstreams_requires_exact_match(
    text: str, field: str, value: str | None
) -> None:
    assert parse_field_selector(text).value_for(field) == value


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        pytest.param("", "", id="empty"),
        pytest.param("a", "a", id="plain"),
        pytest.param("=", "\\=", id="equals"),
        pytest.param(",", "\\,", id="comma"),
        pytest.param("\\", "\\\\", id="backslash"),
        pytest.param("\\=\\,\\", "\\\\\\=\\\\\\,\\\\", id="all"),
    ],
)
def test_escaping_is_upstreams(raw: str, escaped: str) -> None:
    assert escape_value(raw) == escaped
    assert parse_field_selector("f=" + escaped).value_for("f") == raw


def test_empty_and_deterministic() -> None:
    assert parse_field_selector("").empty
    assert FieldSelector().empty and FieldSelector().matches({"a": "b"})
    assert not parse_field_selector("a=b").empty
    assert str(parse_field_selector("x=a,a=x")) == str(parse_field_selector("a=x,x=a")) == "a=x,x=a"


# Property tests.

field_names = st.sampled_from(["a", "b", "spec.nodeName", "metadata.name", "status.phase", ""])
field_values = st.text(alphabet=st.sampled_from(list("ab=,\\ !é")), max_size=6)
requirements = st.builds(
    FieldRequirement, field_names, st.sampled_from([EQ, NE]), field_values
).filter(lambda r: r.field or r.value)


@given(st.lists(requirements, max_size=5), st.dictionaries(field_names, field_values))
def test_printed_selectors_round_trip(
    written: list[FieldRequirement], fields: dict[str, str]
) -> None:
    selector = FieldSelector(tuple(written))
    parsed = parse_field_selector(str(selector))
    assert sorted(parsed.requirements, key=str) == sorted(written, key=str)
    assert parsed.matches(fields) is selector.matches(fields)
    assert str(parse_field_selector(str(parsed))) == str(parsed)


@given(st.text())
def test_arbitrary_text_raises_only_field_selector_error(text: str) -> None:
    with contextlib.suppress(FieldSelectorError):
        parse_field_selector(text)


@given(field_values)
def test_escaped_values_unescape_to_themselves(value: str) -> None:
    assert parse_field_selector("f=" + escape_value(value)).value_for("f") == value
