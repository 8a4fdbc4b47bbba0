"""Kubernetes' semver library for CEL (``controlplane.apiserver.crd.celsemver``): upstream's
TestSemver cases (k8s.io/apiserver pkg/cel/library/semver_test.go) as facts, semver.org's
precedence example, and the library in every kind of expression, as upstream's base
environment has it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from controlplane.apiserver.crd import cel, celcheck, celsemver
from controlplane.apiserver.crd import schema as crd_schema
from kube.api.errors import ROOT, ErrorList

VALUES: list[tuple[str, str, Any]] = [
    ("parse", 'semver("1.2.3")', celsemver.Semver(1, 2, 3)),
    ("isSemver", 'isSemver("1.2.3-beta.1+build.1")', True),
    ("isSemver_empty_false", 'isSemver("")', False),
    ("isSemver_v_prefix_false", 'isSemver("v1.0.0")', False),
    ("isSemver_v_leading_whitespace_false", 'isSemver(" 1.0.0")', False),
    ("isSemver_v_contains_whitespace_false", 'isSemver("1. 0.0")', False),
    ("isSemver_v_trailing_whitespace_false", 'isSemver("1.0.0 ")', False),
    ("isSemver_leading_zeros_false", 'isSemver("01.01.01")', False),
    ("isSemver_major_only_false", 'isSemver("1")', False),
    ("isSemver_major_minor_only_false", 'isSemver("1.1")', False),
    ("isSemver_empty_normalize_false", 'isSemver("", true)', False),
    ("isSemver_v_leading_whitespace_normalize_false", 'isSemver(" 1.0.0", true)', False),
    ("isSemver_v_contains_whitespace_normalize_false", 'isSemver("1. 0.0", true)', False),
    ("isSemver_v_trailing_whitespace_normalize_false", 'isSemver("1.0.0 ", true)', False),
    ("isSemver_v_prefix_normalize_true", 'isSemver("v1.0.0", true)', True),
    ("isSemver_leading_zeros_normalize_true", 'isSemver("01.01.01", true)', True),
    ("isSemver_major_only_normalize_true", 'isSemver("1", true)', True),
    ("isSemver_major_minor_only_normalize_true", 'isSemver("1.1", true)', True),
    ("equality_normalize", 'semver("v01.01", true) == semver("1.1.0")', True),
    ("equality_reflexivity", 'semver("1.2.3") == semver("1.2.3")', True),
    ("inequality", 'semver("1.2.3") == semver("1.0.0")', False),
    ("semver_less", 'semver("1.0.0").isLessThan(semver("1.2.3"))', True),
    ("semver_less_false", 'semver("1.0.0").isLessThan(semver("1.0.0"))', False),
    ("semver_greater", 'semver("1.2.3").isGreaterThan(semver("1.0.0"))', True),
    ("semver_greater_false", 'semver("1.0.0").isGreaterThan(semver("1.0.0"))', False),
    ("compare_equal", 'semver("1.2.3").compareTo(semver("1.2.3"))', 0),
    ("compare_less", 'semver("1.0.0").compareTo(semver("1.2.3"))', -1),
    ("compare_greater", 'semver("1.2.3").compareTo(semver("1.0.0"))', 1),
    ("major", 'semver("1.2.3").major()', 1),
    ("minor", 'semver("1.2.3").minor()', 2),
    ("patch", 'semver("1.2.3").patch()', 3),
]


@pytest.mark.parametrize(
    ("expression", "value"), [v[1:] for v in VALUES], ids=[v[0] for v in VALUES]
)
def test_upstream_cases(expression: str, value: Any) -> None:
    assert cel.compile_expression(expression, cel.ADMISSION).evaluate({}) == value


def test_a_version_that_does_not_parse_is_upstreams_runtime_error() -> None:
    with pytest.raises(cel.EvaluationError, match=r"^No Major\.Minor\.Patch elements found$"):
        cel.compile_expression('semver("v1.0")', cel.ADMISSION).evaluate({})


def test_an_argument_of_the_wrong_type_is_a_type_error() -> None:
    """Upstream's compile error; here the type checker's (``status.typeChecking``)."""
    issues = celcheck.type_issues("isSemver([1, 2, 3])", celcheck.TypedRoots({}, {}))
    assert issues is not None
    assert "found no matching overload for 'isSemver' applied to '(list(int))'" in issues


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Version string empty"),
        ("1.2", "No Major.Minor.Patch elements found"),
        ("a.2.3", 'Invalid character(s) found in major number "a"'),
        ("01.2.3", 'Major number must not contain leading zeroes "01"'),
        ("1.02.3", 'Minor number must not contain leading zeroes "02"'),
        ("1.2.x", 'Invalid character(s) found in patch number "x"'),
        ("1..3", 'strconv.ParseUint: parsing "": invalid syntax'),
        ("1.2.3-01", 'Numeric PreRelease version must not contain leading zeroes "01"'),
        ("1.2.3-a..b", "Prerelease is empty"),
        ("1.2.3-a_b", 'Invalid character(s) found in prerelease "a_b"'),
        ("1.2.3+", "Build meta data is empty"),
        ("1.2.3+a.b_c", 'Invalid character(s) found in build meta data "b_c"'),
    ],
)
def test_parse_errors_in_blang_semvers_words(text: str, message: str) -> None:
    with pytest.raises(celsemver.SemverError) as raised:
        celsemver.parse(text)
    assert str(raised.value) == message


def test_normalizing_short_versions_with_metadata_is_refused() -> None:
    with pytest.raises(celsemver.SemverError, match="short version cannot contain"):
        celsemver.parse_normalized("v1.2-beta")


def test_precedence_follows_semver_org() -> None:
    """semver.org 2.0.0, item 11's example; build metadata does not count."""
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "2.0.0",
        "2.1.0",
        "2.1.1",
    ]
    versions = [celsemver.parse(v) for v in ordered]
    for lower, higher in itertools.pairwise(versions):
        assert lower.compare(higher) == -1 and higher.compare(lower) == 1
    assert celsemver.parse("1.0.0+build.1") == celsemver.parse("1.0.0+build.2")


@pytest.mark.parametrize(
    "declarations",
    [cel.RULES, cel.ADMISSION, cel.POLICY, cel.DEVICE_SELECTOR],
    ids=["crd-rules", "match-conditions", "policies", "device-selectors"],
)
def test_every_environment_has_the_library(declarations: cel.Declarations) -> None:
    assert (
        cel.compile_problem('semver("1.2.3").isGreaterThan(semver("1.0.0"))', declarations) is None
    )


def test_a_crd_rule_compares_versions() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"version": {"type": "string"}},
        "x-kubernetes-validations": [
            {
                "rule": "isSemver(self.version, true) && "
                "semver(self.version, true).isGreaterThan(semver('1.27.0'))",
                "message": "version must be above 1.27",
            }
        ],
    }
    for version, valid in (("v1.30", True), ("1.26.9", False), ("latest", False)):
        errors = ErrorList()
        crd_schema.validate({"version": version}, schema, ROOT, errors)
        assert [e.detail for e in errors] == ([] if valid else ["version must be above 1.27"])
