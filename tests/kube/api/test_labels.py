"""Label selectors parse, print and match exactly as Kubernetes' ``labels`` package does.

Cases come from upstream's pkg/labels/selector_test.go; error messages are the ones kubectl 1.36
prints for the same selectors (``kubectl create pdb --selector=...``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube.api.labels import (
    Operator,
    Requirement,
    Selector,
    SelectorError,
    parse_selector,
    selector_of,
)

VALUE_REGEX = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
KEY_SLASHES = (
    "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
    "subdomain prefix and '/' (e.g. 'example.com/MyName')"
)
KEY_NAME_REGEX = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
GT_LT = "for 'Gt', 'Lt' operators, the value must be an integer"

IN, NOT_IN, EQ, EQ2, NE = (
    Operator.IN,
    Operator.NOT_IN,
    Operator.EQUALS,
    Operator.DOUBLE_EQUALS,
    Operator.NOT_EQUALS,
)
EXISTS, MISSING, GT, LT = (
    Operator.EXISTS,
    Operator.DOES_NOT_EXIST,
    Operator.GREATER_THAN,
    Operator.LESS_THAN,
)


def req(key: str, operator: Operator, *values: str) -> Requirement:
    return Requirement(key, operator, values)


# Upstream TestSelectorParse (which prints back without spaces), and set-based forms.
ROUND_TRIPS = [
    ("x=a,y=b,z=c", "x=a,y=b,z=c"),
    ("", ""),
    ("x!=a,y=b", "x!=a,y=b"),
    ("x=", "x="),
    ("x= ", "x="),
    ("x=,z= ", "x=,z="),
    ("x= ,z= ", "x=,z="),
    ("!x", "!x"),
    ("x>1", "x>1"),
    ("x>1,z<5", "x>1,z<5"),
    ("x==a", "x==a"),
    ("y notin (c), x in (b,a)", "x in (a,b),y notin (c)"),
    ("x notin ( )", "x notin ()"),
    ("x in (,a)", "x in (,a)"),
]


@pytest.mark.parametrize(
    ("text", "printed"), [pytest.param(*t, id=repr(t[0])) for t in ROUND_TRIPS]
)
def test_selectors_print_like_upstream(text: str, printed: str) -> None:
    assert str(parse_selector(text)) == printed
    assert str(parse_selector(printed)) == printed


# Upstream TestSetSelectorParser (and a few more): the requirements a string parses to.
PARSED = [
    ("", ()),
    ("\rx", (req("x", EXISTS),)),
    (
        "this-is-a-dns.domain.com/key-with-dash",
        (req("this-is-a-dns.domain.com/key-with-dash", EXISTS),),
    ),
    (
        "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        (req("this-is-another-dns.domain.com/key-with-dash", IN, "so", "what"),),
    ),
    (
        "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
        (req("0.1.2.domain/99", NOT_IN, "10.10.100.1", "tick.tack.clock"),),
    ),
    ("foo  in\t (abc)", (req("foo", IN, "abc"),)),
    ("x notin\n (abc)", (req("x", NOT_IN, "abc"),)),
    ("x  notin\t\t\t(abc,def)", (req("x", NOT_IN, "abc", "def"),)),
    ("x in (abc,def)", (req("x", IN, "abc", "def"),)),
    ("x in (abc,)", (req("x", IN, "", "abc"),)),
    ("x in (abc,abc)", (req("x", IN, "abc"),)),
    ("x in ()", (req("x", IN, ""),)),
    ("x in (a,,)", (req("x", IN, "", "a"),)),
    ("x in (a,,,)", (req("x", IN, "", "a"),)),
    ("x in (a,,,,,,)", (req("x", IN, "", "a"),)),
    ("x in (a,,a,,a,,a,,)", (req("x", IN, "", "a"),)),
    (
        "x notin (abc,,def),bar,z in (),w",
        (
            req("bar", EXISTS),
            req("w", EXISTS),
            req("x", NOT_IN, "", "abc", "def"),
            req("z", IN, ""),
        ),
    ),
    ("x,y in (a)", (req("x", EXISTS), req("y", IN, "a"))),
    ("x=a", (req("x", EQ, "a"),)),
    ("x>1", (req("x", GT, "1"),)),
    ("x<7", (req("x", LT, "7"),)),
    ("x=a,y!=b", (req("x", EQ, "a"), req("y", NE, "b"))),
    (
        "x=a,y!=b,z in (h,i,j)",
        (req("x", EQ, "a"), req("y", NE, "b"), req("z", IN, "h", "i", "j")),
    ),
    ("x notin ( )", (req("x", NOT_IN, ""),)),
    ("x notin (, a)", (req("x", NOT_IN, "", "a"),)),
    ("a ", (req("a", EXISTS),)),
    ("a in (x,y,notin, z,in)", (req("a", IN, "in", "notin", "x", "y", "z"),)),
    ("notin=in", (req("notin", EQ, "in"),)),
    ("in in (in)", (req("in", IN, "in"),)),
    ("x==", (req("x", EQ2, ""),)),
    ("x!=,y", (req("x", NE, ""), req("y", EXISTS))),
    ("b=c,a=d,b in (x)", (req("a", EQ, "d"), req("b", EQ, "c"), req("b", IN, "x"))),
    ("x=1,x=2", (req("x", EQ, "1"), req("x", EQ, "2"))),
    ("x in (b,a,b)", (req("x", IN, "a", "b"),)),
    ("   \t\n", ()),
    ("x,\t!y", (req("x", EXISTS), req("y", MISSING))),
    ("x = a", (req("x", EQ, "a"),)),
    # a NUL ends the input where a token may start, and ends a token that it follows
    ("x=a \0garbage!", (req("x", EQ, "a"),)),
    ("x \0, y", (req("x", EXISTS),)),
    ("x=a\0,y", (req("x", EQ, "a"), req("y", EXISTS))),
]


@pytest.mark.parametrize(
    ("text", "requirements"), [pytest.param(*p, id=repr(p[0])) for p in PARSED]
)
def test_parse_gives_upstreams_requirements(
    text: str, requirements: tuple[Requirement, ...]
) -> None:
    assert parse_selector(text).requirements == requirements


ERRORS = [
    (
        "x=a||y=b",
        f'unable to parse requirement: values[0][x]: Invalid value: "a||y": {VALUE_REGEX}',
    ),
    ("x==a==b", "found '==', expected: ',' or 'end of string'"),
    ("!x=a", "found '=', expected: ',' or 'end of string'"),
    ("x<a", f'unable to parse requirement: values[0]: Invalid value: "a": {GT_LT}'),
    ("x,,y", "found ',', expected: identifier after ','"),
    (",x,y", "found ',', expected: !, identifier, or 'end of string'"),
    (
        "x nott in (y)",
        "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt",
    ),
    ("a in (xyz),", "found '', expected: identifier after ','"),
    ("a in (xyz)b notin ()", "found 'b', expected: ',' or 'end of string'"),
    ("a in (xyz abc)", "unable to parse requirement: found 'abc', expected: ',' or ')'"),
    ("a notin(", "unable to parse requirement: found '', expected: ',', ')' or identifier"),
    ("a (", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"),
    ("(", "found '(', expected: !, identifier, or 'end of string'"),
    ("x in (a", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("x in", "unable to parse requirement: found '' expected: '('"),
    ("x in )", "unable to parse requirement: found ')' expected: '('"),
    ("x =!", "unable to parse requirement: found '!', expected: identifier"),
    ("a/b/c", f'unable to parse requirement: <nil>: Invalid value: "a/b/c": {KEY_SLASHES}'),
    ("é=1", f'unable to parse requirement: <nil>: Invalid value: "é": {KEY_NAME_REGEX}'),
    ("x=a b", "found 'b', expected: ',' or 'end of string'"),
    (
        "x=" + "v" * 64,
        'unable to parse requirement: values[0][x]: Invalid value: "'
        + "v" * 64
        + '": must be no more than 63 bytes',
    ),
    ("x>-1", f'unable to parse requirement: values[0][x]: Invalid value: "-1": {VALUE_REGEX}'),
    (
        "x>99999999999999999999",
        f'unable to parse requirement: values[0]: Invalid value: "99999999999999999999": {GT_LT}',
    ),
    ("x>", f'unable to parse requirement: values[0]: Invalid value: "": {GT_LT}'),
    (
        "x>-a",
        f'unable to parse requirement: [values[0]: Invalid value: "-a": {GT_LT}, '
        f'values[0][x]: Invalid value: "-a": {VALUE_REGEX}]',
    ),
    (
        "x in (a-,-b)",
        f'unable to parse requirement: [values[0][x]: Invalid value: "-b": {VALUE_REGEX}, '
        f'values[1][x]: Invalid value: "a-": {VALUE_REGEX}]',
    ),
    (
        'x="q"',
        f'unable to parse requirement: values[0][x]: Invalid value: "\\"q\\"": {VALUE_REGEX}',
    ),
    ("!", "unable to parse requirement: found '', expected: identifier"),
    ("!!x", "unable to parse requirement: found '!', expected: identifier"),
    ("x in ((a)", "unable to parse requirement: found '(', expected: ',', ')' or identifier"),
    ("x in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
    ("x in (a=)", "unable to parse requirement: found '=', expected: ',' or ')'"),
    ("x in (,=)", "unable to parse requirement: found '=', expected: ',', or identifier"),
    ("x=(", "unable to parse requirement: found '(', expected: identifier"),
    ("x===a", "unable to parse requirement: found '=', expected: identifier"),
    ("x!==a", "unable to parse requirement: found '=', expected: identifier"),
    ("x<=1", "unable to parse requirement: found '=', expected: identifier"),
    ("x=a, \0garbage", "found '', expected: identifier after ','"),
]


@pytest.mark.parametrize(("text", "message"), [pytest.param(*e, id=repr(e[0])) for e in ERRORS])
def test_parse_errors_are_upstreams(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_selector(text)
    assert str(caught.value) == message


MATCHES = [
    # upstream TestSelectorMatches
    ("", {"x": "y"}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),
    ("x", {"x": "z"}, True),
    ("!x", {"y": "z"}, True),
    ("x>1", {"x": "2"}, True),
    ("x<1", {"x": "0"}, True),
    ("x=z", {}, False),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x", {"y": "z"}, False),
    ("!x", {"x": "z"}, False),
    ("x>1", {"x": "0"}, False),
    ("x<1", {"x": "2"}, False),
    ("foo=bar", {"foo": "bar", "baz": "blah"}, True),
    ("baz=blah", {"foo": "bar", "baz": "blah"}, True),
    ("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True),
    ("foo=blah", {"foo": "bar", "baz": "blah"}, False),
    ("baz=bar", {"foo": "bar", "baz": "blah"}, False),
    ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
    # upstream TestRequirementSelectorMatching
    ("x in (foo),y notin (alpha)", {"x": "foo", "y": "baz"}, True),
    ("x in (foo),y in (alpha)", {"x": "foo", "y": "baz"}, False),
    ("x notin (),y", {"y": ""}, True),
    ("!x,y", {"y": ""}, True),
    ("x notin (),!y", {"y": ""}, False),
    ("x in ()", {"y": "baz"}, False),
    ("x in ()", {"x": ""}, True),
    ("z>1", {"z": "2"}, True),
    ("z>1", {"z": "v2"}, False),
    # NotIn and != match objects without the key; Gt/Lt need an int64 label
    ("x notin (a)", {}, True),
    ("x!=a", {}, True),
    ("x>1", {}, False),
    ("x>1", {"x": "+2"}, True),
    ("x<1", {"x": "-2"}, True),
    ("x>1", {"x": "9223372036854775808"}, False),
    ("x<10", {"x": "\uff10"}, False),
    ("x in (a,b)", {"x": "b"}, True),
    ("x==a", {"x": "a"}, True),
]


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [pytest.param(*m, id=f"{m[0]!r}-{sorted(m[1].items())}") for m in MATCHES],
)
def test_matching_is_upstreams(text: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_selector(text).matches(labels) is matches


def test_everything_nothing_and_empty() -> None:
    everything, nothing = Selector.everything(), Selector.nothing()
    assert everything.empty and everything.matches({"x": "y"}) and everything.matches(None)
    assert not nothing.empty and not nothing.matches({}) and not nothing.matches({"x": "y"})
    assert str(everything) == str(nothing) == ""
    assert nothing.requirements == ()
    assert parse_selector("").empty and not parse_selector("x").empty
    assert parse_selector("!x").matches(None)


def test_parsing_is_deterministic() -> None:
    assert str(parse_selector("x=a,a=x")) == str(parse_selector("a=x,x=a")) == "a=x,x=a"


@pytest.mark.parametrize(
    ("requirement", "text"),
    [
        # upstream TestToString
        pytest.param(req("x", IN, "def", "abc"), "x in (abc,def)", id="in-sorted"),
        pytest.param(req("y", NOT_IN, "jkl"), "y notin (jkl)", id="notin"),
        pytest.param(req("z", EXISTS), "z", id="exists"),
        pytest.param(req("z", MISSING), "!z", id="does-not-exist"),
        pytest.param(req("z", NOT_IN, ""), "z notin ()", id="notin-empty"),
        pytest.param(req("x", EQ, "abc"), "x=abc", id="equals"),
        pytest.param(req("y", EQ2, "jkl"), "y==jkl", id="double-equals"),
        pytest.param(req("z", NE, "a"), "z!=a", id="not-equals"),
        pytest.param(req("x", GT, "2"), "x>2", id="gt"),
        pytest.param(req("y", LT, "8"), "y<8", id="lt"),
        pytest.param(req("x", IN, "b", "a", "b"), "x in (a,b,b)", id="duplicates-kept"),
    ],
)
def test_requirements_print_like_upstream(requirement: Requirement, text: str) -> None:
    assert str(requirement) == text


@dataclass
class Expression:
    key: str | None
    operator: str | None
    values: list[str] | None = None


@dataclass
class LabelSelector:
    match_labels: dict[str, str] | None = None
    match_expressions: list[Expression] | None = None


@pytest.mark.parametrize(
    ("labels", "expressions", "text"),
    [
        pytest.param(None, None, "", id="empty"),
        pytest.param({}, [], "", id="empty-collections"),
        pytest.param({"b": "2", "a": "1"}, None, "a=1,b=2", id="match-labels-sorted"),
        pytest.param(
            {"app": "web"},
            [
                Expression("tier", "In", ["front", "back"]),
                Expression("env", "NotIn", ["dev"]),
                Expression("canary", "DoesNotExist"),
                Expression("app", "Exists", []),
            ],
            "app=web,app,!canary,env notin (dev),tier in (back,front)",
            id="all-operators",
        ),
    ],
)
def test_label_selector_objects_convert_like_upstream(
    labels: dict[str, str] | None, expressions: list[Expression] | None, text: str
) -> None:
    selector = Selector.from_label_selector(labels, expressions)
    assert str(selector) == text
    assert selector.empty is (text == "")


def test_label_selector_keeps_expression_values_as_given() -> None:
    selector = Selector.from_label_selector(None, [Expression("x", "In", ["b", "a", "b"])])
    assert selector.requirements == (req("x", IN, "b", "a", "b"),)
    assert selector.matches({"x": "a"})


@pytest.mark.parametrize(
    ("labels", "expressions", "message"),
    [
        pytest.param(
            None,
            [Expression("x", "Gt", ["1"])],
            '"Gt" is not a valid label selector operator',
            id="gt-not-allowed",
        ),
        pytest.param(
            None, [Expression("x", None)], '"" is not a valid label selector operator', id="none"
        ),
        pytest.param(
            None,
            [Expression("x", "In", [])],
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
            id="in-without-values",
        ),
        pytest.param(
            None,
            [Expression("x", "Exists", ["a", "<b>"])],
            '[values: Invalid value: ["a","\\u003cb\\u003e"]: values set must be empty for exists '
            f'and does not exist, values[1][x]: Invalid value: "<b>": {VALUE_REGEX}]',
            id="exists-with-values",
        ),
        pytest.param(
            {"a/b/c": "x"},
            None,
            f'key: Invalid value: "a/b/c": {KEY_SLASHES}',
            id="bad-key",
        ),
        pytest.param(
            {"x": "-a"},
            None,
            f'values[0][x]: Invalid value: "-a": {VALUE_REGEX}',
            id="bad-value",
        ),
        pytest.param(
            None,
            [Expression(None, "NotIn", ["-a", "b-"])],
            '[key: Invalid value: "": name part must be non-empty; '
            + KEY_NAME_REGEX
            + f', values[0][]: Invalid value: "-a": {VALUE_REGEX}, '
            f'values[1][]: Invalid value: "b-": {VALUE_REGEX}]',
            id="several",
        ),
    ],
)
def test_invalid_label_selector_objects_fail_like_upstream(
    labels: dict[str, str] | None, expressions: list[Expression] | None, message: str
) -> None:
    with pytest.raises(SelectorError) as caught:
        Selector.from_label_selector(labels, expressions)
    assert str(caught.value) == message


def test_selector_of_a_missing_selector_selects_nothing() -> None:
    assert selector_of(None) == Selector.nothing()
    assert selector_of(LabelSelector()) == Selector.everything()
    assert str(selector_of(LabelSelector({"app": "web"}))) == "app=web"


# Property tests.

KEYS = ["a", "b", "app", "in", "notin", "example.com/x", "k8s.io/name", "A_1"]
VALUES = ["", "a", "b", "in", "notin", "x.y", "1", "20", "007"]


@st.composite
def selector_texts(draw: st.DrawFn) -> str:
    """Valid selectors of every shape, with random spacing."""
    space = st.sampled_from(["", " ", "  ", "\t", "\n"])
    parts = []
    for _ in range(draw(st.integers(0, 5))):
        key = draw(st.sampled_from(KEYS))
        shape = draw(st.integers(0, 5))
        if shape == 0:
            part = key
        elif shape == 1:
            part = "!" + draw(space) + key
        elif shape == 2:
            op = draw(st.sampled_from(["=", "==", "!="]))
            part = key + draw(space) + op + draw(space) + draw(st.sampled_from(VALUES))
        elif shape == 3:
            op = draw(st.sampled_from([">", "<"]))
            part = key + op + draw(st.sampled_from(["0", "1", "20", "007"]))
        else:
            op = draw(st.sampled_from([" in ", " notin ", "\tin\t"]))
            values = draw(st.lists(st.sampled_from(VALUES), max_size=4))
            part = key + op + draw(space) + "(" + ",".join(values) + ")"
        parts.append(draw(space) + part + draw(space))
    return ",".join(parts)


label_sets = st.dictionaries(st.sampled_from(KEYS), st.sampled_from([*VALUES, "-1", "x"]))


@given(selector_texts(), st.lists(label_sets, max_size=8))
def test_printed_selectors_parse_to_the_same_selection(
    text: str, candidates: Sequence[dict[str, str]]
) -> None:
    selector = parse_selector(text)
    again = parse_selector(str(selector))
    assert str(again) == str(selector)
    for labels in candidates:
        assert again.matches(labels) is selector.matches(labels)


@given(selector_texts(), label_sets)
def test_a_selector_is_the_conjunction_of_its_requirements(
    text: str, labels: dict[str, str]
) -> None:
    selector = parse_selector(text)
    singles = [parse_selector(str(r)) for r in selector.requirements]
    assert selector.matches(labels) is all(single.matches(labels) for single in singles)


@given(st.text())
def test_arbitrary_text_raises_only_selector_error(text: str) -> None:
    with contextlib.suppress(SelectorError):
        parse_selector(text)


@given(st.lists(st.sampled_from([*"ab=!(),<> \t\n\r\0-1é", "in", "notin"])).map("".join))
def test_token_soup_raises_only_selector_error(text: str) -> None:
    with contextlib.suppress(SelectorError):
        str(parse_selector(text))


@given(
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
    st.lists(
        st.builds(
            Expression,
            st.one_of(st.none(), st.text(max_size=5)),
            st.one_of(st.none(), st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "x"])),
            st.one_of(st.none(), st.lists(st.text(max_size=5), max_size=3)),
        ),
        max_size=3,
    ),
)
def test_arbitrary_label_selectors_raise_only_selector_error(
    labels: dict[str, str], expressions: list[Expression]
) -> None:
    with contextlib.suppress(SelectorError):
        Selector.from_label_selector(labels, expressions)


@given(selector_texts(), label_sets)
def test_a_restricting_requirement_holds_wherever_the_selector_matches(
    text: str, labels: dict[str, str]
) -> None:
    selector = parse_selector(text)
    requirement = selector.restricting()
    if requirement is None:
        assert all(
            r.operator not in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)
            for r in selector.requirements
        )
    elif selector.matches(labels):
        assert labels.get(requirement.key) in requirement.values
