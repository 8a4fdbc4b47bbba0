"""Static type checking of CEL (``controlplane.apiserver.crd.celcheck``): cel-go's errors, in
its words and at its positions, against a Deployment's schema (the scheme's own OpenAPI) and
against the schemas of upstream's typechecking_test.go; and admission expressions compiled
when a policy or webhook configuration is written, as upstream's validation_test.go."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from controlplane.apiserver.crd import cel, celcheck
from kube.api import openapi, walk
from kube.api.codec import from_builtins
from kube.api.errors import ErrorList
from kube.api.kinds.admissionregistration_v1 import (
    MutatingAdmissionPolicy,
    ValidatingAdmissionPolicy,
    ValidatingWebhookConfiguration,
)

_APPS = openapi.document("apps", "v1")["components"]["schemas"]
_DEPLOYMENT = {"$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment"}
_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max-replicas": {"type": "integer"},
        "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}
_TYPED = celcheck.TypedRoots(
    {"object": _DEPLOYMENT, "oldObject": _DEPLOYMENT, "params": _PARAMS},
    _APPS,
    variables=[("replicas", "object.spec.replicas"), ("broken", "object.spec.replicas == 'x'")],
)


def _one(text: str, column: int, problem: str) -> str:
    return f"ERROR: <input>:1:{column}: {problem}\n | {text}\n | {'.' * (column - 1)}^"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("object.spec.replicas > 1", id="declared-fields"),
        pytest.param("oldObject.metadata.labels['app'] == 'x'", id="map-values"),
        pytest.param("object.spec.template.spec.containers[0].image != ''", id="list-items"),
        pytest.param("params.max__dash__replicas > params.limits.anything", id="escaped-and-map"),
        pytest.param("params.free.whatever.below == 1", id="preserved-unknown"),
        pytest.param("request.userInfo.username == namespaceObject.x.y", id="untyped-roots"),
        pytest.param("object.", id="syntax-error-left-to-validation"),
        pytest.param("object.spec.replicas < 2.5", id="numbers-compare-across-types"),
        pytest.param(
            "object.spec.replicas + 1 > 2 && object.metadata.name + 'x' != ''", id="arithmetic"
        ),
        pytest.param("(object.spec.replicas > 1 ? 'a' : 'b') == 'a'", id="conditional"),
        pytest.param("object.spec.strategy.rollingUpdate.maxSurge == 1", id="int-or-string"),
        pytest.param("params.free.anything == 1 && request.userInfo.username == 2", id="dyn"),
        pytest.param(
            "object.spec.template.spec.containers.all(c, c.image.startsWith('registry/'))",
            id="macro-variable-typed",
        ),
        pytest.param(
            "object.spec.template.spec.containers.map(c, c.name).exists(n, n == 'x')",
            id="map-result-typed",
        ),
        pytest.param("object.metadata.labels.all(k, k.startsWith('app'))", id="map-keys"),
        pytest.param(
            "object.metadata.creationTimestamp < timestamp('2030-01-01T00:00:00Z')",
            id="timestamps",
        ),
        pytest.param("object.spec.template != null && has(object.spec.paused)", id="null-object"),
        pytest.param(
            "authorizer.group('apps').resource('deployments').check('create').allowed()",
            id="authorizer",
        ),
        pytest.param("authorizer.requestResource.check('get').reason() == ''", id="request-check"),
        pytest.param("variables.replicas > 1", id="variable-typed-by-its-expression"),
        pytest.param("variables.broken == 1", id="variable-with-an-error-is-dyn"),
        pytest.param("size(object.metadata.name.split('-')) == 2", id="string-library"),
    ],
)
def test_well_typed_and_dynamic_expressions_pass(text: str) -> None:
    assert celcheck.type_issues(text, _TYPED) is None


def test_each_undefined_field_is_reported_at_its_dot() -> None:
    text = "has(object.spec.replicaz) || params.max_replicas == object.status.x.y"
    assert celcheck.type_issues(text, _TYPED) == "\n".join(
        [
            _one(text, 16, "undefined field 'replicaz'"),
            _one(text, 36, "undefined field 'max_replicas'"),
            _one(text, 66, "undefined field 'x'"),
        ]
    )


@pytest.mark.parametrize(
    ("text", "column", "problem"),
    [
        ("object.spec.replicas > 'one'", 22, "'_>_' applied to '(int, string)'"),
        ("object.spec.replicas == 1.5", 22, "'_==_' applied to '(int, double)'"),
        ("object.metadata.name + 1 == 'x'", 22, "'_+_' applied to '(string, int)'"),
        ("object.spec.replicas % 2.0 == 0.0", 22, "'_%_' applied to '(int, double)'"),
        ("!object.spec.replicas", 1, "'!_' applied to '(int)'"),
        ("-object.metadata.name == 'x'", 1, "'-_' applied to '(string)'"),
        ("object.spec.replicas in 'abc'", 22, "'@in' applied to '(int, string)'"),
        ("size(object.metadata.name) ? 1 : 2", 28, "'_?_:_' applied to '(int, int, int)'"),
        ("object.metadata.labels['app'] == 1", 31, "'_==_' applied to '(string, int)'"),
        ("params.max__dash__replicas - 1u > 0", 28, "'_-_' applied to '(int, uint)'"),
        ("object.spec.replicas == null", 22, "'_==_' applied to '(int, null_type)'"),
        (
            "object.metadata.creationTimestamp == 'x'",
            35,
            "'_==_' applied to '(google.protobuf.Timestamp, string)'",
        ),
    ],
)
def test_operators_applied_to_the_wrong_types(text: str, column: int, problem: str) -> None:
    """No overload of the operator for its operands' types, at the operator (one error: what
    an error makes is dyn, so nothing above it is reported again)."""
    assert celcheck.type_issues(text, _TYPED) == _one(
        text, column, f"found no matching overload for {problem}"
    )


@pytest.mark.parametrize(
    ("text", "column", "problem"),
    [
        pytest.param(
            "object.spec.template.spec.containers.all(c, c.imagez != '')",
            46,
            "undefined field 'imagez'",
            id="field-of-a-macro-variable",
        ),
        pytest.param(
            "object.spec.template.spec.containers.all(c, c.name == 1)",
            52,
            "found no matching overload for '_==_' applied to '(string, int)'",
            id="operator-on-a-macro-variable",
        ),
        pytest.param(
            "object.spec.template.spec.containers.map(c, c.name).all(n, n > 1)",
            62,
            "found no matching overload for '_>_' applied to '(string, int)'",
            id="variable-over-a-map-result",
        ),
        pytest.param(
            "object.metadata.labels.exists(k, k == 1)",
            36,
            "found no matching overload for '_==_' applied to '(string, int)'",
            id="variable-over-map-keys",
        ),
        pytest.param(
            "object.spec.template.spec.containers.exists(c, c.name)",
            49,
            "expected type 'bool' but found 'string'",
            id="exists-predicate-not-bool",
        ),
        pytest.param(
            "[1, 2].exists_one(x, x)",
            18,
            "found no matching overload for '_?_:_' applied to '(int, int, int)'",
            id="exists-one-predicate-not-bool",
        ),
        pytest.param(
            "object.spec.template.spec.containers.map(c, c.name).filter(n, n.size()) == []",
            59,
            "found no matching overload for '_?_:_' applied to '(int, list(string), list(string))'",
            id="filter-predicate-not-bool",
        ),
        pytest.param(
            "object.spec.replicas.all(x, true)",
            12,
            "expression of type 'int' cannot be range of a comprehension "
            "(must be list, map, or dynamic)",
            id="range-not-a-list",
        ),
        pytest.param(
            "object.spec.paused && 1 == 1 && object.spec.replicas",
            44,
            "expected type 'bool' but found 'int'",
            id="logical-operand-not-bool",
        ),
    ],
)
def test_macros_and_logical_operators(text: str, column: int, problem: str) -> None:
    """Macros expand to comprehensions whose variable has the range's element type; ``all``
    and ``exists`` join their predicate with ``&&`` and ``||``, whose operands must be bools."""
    assert celcheck.type_issues(text, _TYPED) == _one(text, column, problem)


@pytest.mark.parametrize(
    ("text", "column", "problem"),
    [
        ("object.metadata.name.startsWith(1)", 32, "'startsWith' applied to 'string.(int)'"),
        ("size(object.spec.replicas) > 0", 5, "'size' applied to '(int)'"),
        (
            "object.spec.template.spec.containers.map(c, c.name).join(1)",
            57,
            "'join' applied to 'list(string).(int)'",
        ),
        (
            "object.spec.template.spec.containers.map(c, c.name)['a'] == ''",
            52,
            "'_[_]' applied to '(list(string), string)'",
        ),
        (
            "1 in object.spec.template.spec.containers.map(c, c.name)",
            3,
            "'@in' applied to '(int, list(string))'",
        ),
        (
            "authorizer.allowed()",
            19,
            "'allowed' applied to 'kubernetes.authorization.Authorizer.()'",
        ),
    ],
)
def test_functions_and_methods_given_the_wrong_arguments(
    text: str, column: int, problem: str
) -> None:
    """At the call's ``(`` (an index's ``[``); a method's target before a dot."""
    assert celcheck.type_issues(text, _TYPED) == _one(
        text, column, f"found no matching overload for {problem}"
    )


def test_a_primitive_has_no_fields() -> None:
    text = "object.metadata.name.foo == 'x'"
    assert celcheck.type_issues(text, _TYPED) == _one(
        text, 21, "type 'string' does not support field selection"
    )


# Upstream's TestTypeCheck (k8s.io/apiserver .../policy/validating/typechecking_test.go): the
# schemas it resolves every kind to, and what each expression gets.
_FOO_STRING = {"type": "object", "properties": {"foo": {"type": "string"}}}
_FOO_INT = {"type": "object", "properties": {"foo": {"type": "integer", "format": "int64"}}}
_BAR_STRING = {"type": "object", "properties": {"bar": {"type": "string"}}}
_REPRODUCER = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {"text": {"type": "string"}}},
        "status": {
            "type": "object",
            "properties": {"problematicProperty": {"type": "object", "additionalProperties": True}},
        },
    },
}


@pytest.mark.parametrize(
    ("schema", "params", "variables", "text", "found"),
    [
        pytest.param(_FOO_STRING, None, [], "object.foo == 'bar'", None, id="passed-check"),
        pytest.param(
            _BAR_STRING, None, [], "object.foo == 'bar'", "undefined field 'foo'", id="undefined"
        ),
        pytest.param(
            _FOO_INT,
            None,
            [],
            "object.foo == 'bar'",
            "found no matching overload",
            id="field-type-mismatch",
        ),
        pytest.param(
            _FOO_STRING,
            _FOO_STRING,
            [],
            "object.foo == params.bar",
            "undefined field 'bar'",
            id="params",
        ),
        pytest.param(_FOO_STRING, {}, [], "params != null", None, id="params-untyped"),
        pytest.param(
            _FOO_STRING, None, [], "object.foo + 114514", "found no matching overload", id="msg"
        ),
        pytest.param(
            _FOO_STRING,
            None,
            [],
            "authorizer.group('').resource('endpoints').check('create').allowed()",
            None,
            id="authorizer",
        ),
        pytest.param(
            _FOO_STRING,
            None,
            [],
            "authorizer.allowed()",
            "found no matching overload for 'allowed' applied to "
            "'kubernetes.authorization.Authorizer",
            id="authorizer-invalid",
        ),
        pytest.param(
            _REPRODUCER, None, [], "has(object.spec.text)", None, id="additional-properties-true"
        ),
        pytest.param({}, None, [], "true", None, id="schema-without-type"),
        pytest.param(
            _FOO_INT, None, [("works", "true")], "variables.works", None, id="variables-valid"
        ),
        pytest.param(
            _FOO_INT,
            None,
            [("works", "true")],
            "variables.nonExisting",
            "undefined field 'nonExisting'",
            id="variables-missing-field",
        ),
        pytest.param(
            _FOO_INT,
            None,
            [("name", "'something'")],
            "variables.name == object.foo",
            "found no matching overload for '_==_' applied to '(string, int)",
            id="variables-field-wrong-type",
        ),
        pytest.param(
            _FOO_INT,
            None,
            [("name", "object.foo == 'str'")],
            "variables.name == object.foo",
            None,
            id="error-in-variables-not-reported",
        ),
    ],
)
def test_upstream_type_check_cases(
    schema: dict[str, Any],
    params: dict[str, Any] | None,
    variables: list[tuple[str, str]],
    text: str,
    found: str | None,
) -> None:
    typed = celcheck.TypedRoots(
        {"object": schema, "oldObject": schema, "params": params}, {}, variables=variables
    )
    issues = celcheck.type_issues(text, typed)
    if found is None:
        assert issues is None
    else:
        assert issues is not None and found in issues


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "(int, uint) -> bool",
            celcheck.Signature(False, (celcheck.INT, celcheck.UINT), celcheck.BOOL),
        ),
        (
            "list(A).(A) -> int",
            celcheck.Signature(
                True, (celcheck.list_of(celcheck.Type("A")), celcheck.Type("A")), celcheck.INT
            ),
        ),
        (
            "kubernetes.Quantity.() -> dyn",
            celcheck.Signature(True, (celcheck.Type("kubernetes.Quantity"),), None),
        ),
        (
            "(map(A, B), A) -> B",
            celcheck.Signature(
                False,
                (
                    celcheck.Type("map", (celcheck.Type("A"), celcheck.Type("B"))),
                    celcheck.Type("A"),
                ),
                celcheck.Type("B"),
            ),
        ),
    ],
)
def test_signatures_read_as_cel_go_prints_them(text: str, expected: celcheck.Signature) -> None:
    assert celcheck.signature(text) == expected


# Admission expressions compiled when their object is written (kube.api's validation of
# admissionregistration.k8s.io, through the compilers cel and celcheck install): upstream's
# validation_test.go cases.

_POLICY: dict[str, Any] = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "config"},
    "spec": {
        "matchConstraints": {
            "resourceRules": [
                {
                    "operations": ["CREATE"],
                    "apiGroups": ["apps"],
                    "apiVersions": ["v1"],
                    "resources": ["deployments"],
                }
            ]
        },
        "validations": [{"expression": "object.spec.replicas <= 5"}],
    },
}


def _policy(**spec: Any) -> ValidatingAdmissionPolicy:
    raw = copy.deepcopy(_POLICY)
    raw["spec"].update(spec)
    policy: ValidatingAdmissionPolicy = from_builtins(raw, ValidatingAdmissionPolicy).obj
    walk.set_defaults(policy)
    return policy


def _refused(errors: ErrorList) -> list[str]:
    """Each error as upstream's field.Error prints it (the value JSON-quoted)."""
    return [f"{e.field}: Invalid value: {json.dumps(e.value)}: {e.detail}" for e in errors]


_REASON = "authorizer.path('/x').check('get').reason()"
_NO_OVERLOAD = "found no matching overload for '_<_' applied to '(int, string)'"


def _undeclared(text: str, name: str) -> str:
    problem = f"undeclared reference to '{name}' (in container '')"
    return f"compilation failed: {_one(text, 1, problem)}"


@pytest.mark.parametrize(
    ("spec", "refused"),
    [
        pytest.param({}, [], id="valid"),
        pytest.param(
            {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "variables": [{"name": "limit", "expression": "int(params.data.limit)"}],
                "validations": [
                    {
                        "expression": "object.spec.replicas <= variables.limit",
                        "messageExpression": "'at most ' + string(variables.limit)",
                    }
                ],
                "matchConditions": [{"name": "p", "expression": "params != null"}],
                "auditAnnotations": [{"key": "a", "valueExpression": "null"}],
            },
            [],
            id="every-field-valid",
        ),
        pytest.param(
            {"validations": None, "auditAnnotations": [{"key": "x", "valueExpression": "true"}]},
            [
                'spec.auditAnnotations[0].valueExpression: Invalid value: "true": '
                "must evaluate to one of [string null_type] but got bool"
            ],
            id="audit-annotation-not-a-string",
        ),
        pytest.param(
            {"validations": [{"expression": "object.spec.paused"}]},
            [
                'spec.validations[0].expression: Invalid value: "object.spec.paused": '
                "must evaluate to bool but got dyn"
            ],
            id="validation-of-unknown-type",
        ),
        pytest.param(
            {"validations": [{"expression": "1", "messageExpression": "1"}]},
            [
                'spec.validations[0].expression: Invalid value: "1": '
                "must evaluate to bool but got int",
                'spec.validations[0].messageExpression: Invalid value: "1": '
                "must evaluate to string but got int",
            ],
            id="result-types",
        ),
        pytest.param(
            {"validations": [{"expression": "params.x == 1"}]},
            [
                'spec.validations[0].expression: Invalid value: "params.x == 1": '
                + _undeclared("params.x == 1", "params")
            ],
            id="params-without-param-kind",
        ),
        pytest.param(
            {
                "validations": [
                    {"expression": "true", "messageExpression": _REASON}
                ]
            },
            [
                "spec.validations[0].messageExpression: Invalid value: "
                "\"authorizer.path('/x').check('get').reason()\": "
                + _undeclared("authorizer.path('/x').check('get').reason()", "authorizer")
            ],
            id="no-authorizer-in-message-expressions",
        ),
        pytest.param(
            {"matchConditions": [{"name": "m", "expression": "'a'"}]},
            [
                "spec.matchConditions[0].expression: Invalid value: \"'a'\": "
                "must evaluate to bool but got string"
            ],
            id="match-condition-not-a-bool",
        ),
        pytest.param(
            {"validations": [{"expression": "variables.x"}]},
            [
                'spec.validations[0].expression: Invalid value: "variables.x": '
                + _undeclared("variables.x", "variables")
            ],
            id="variables-without-any",
        ),
        pytest.param(
            {
                "variables": [
                    {"name": "a", "expression": "variables.b"},
                    {"name": "b", "expression": "1 < 'asdf'"},
                ],
                "validations": [{"expression": "variables.a == variables.c"}],
            },
            [
                'spec.variables[0].expression: Invalid value: "variables.b": compilation failed: '
                + _one("variables.b", 10, "undefined field 'b'"),
                "spec.variables[1].expression: Invalid value: \"1 < 'asdf'\": compilation failed: "
                + _one("1 < 'asdf'", 3, _NO_OVERLOAD),
                'spec.validations[0].expression: Invalid value: "variables.a == variables.c": '
                "compilation failed: "
                + _one("variables.a == variables.c", 25, "undefined field 'c'"),
            ],
            id="variables-see-those-before-them",
        ),
        pytest.param(
            {"matchConditions": [{"name": "m", "expression": "  object.x in [1, 2, "}]},
            [
                'spec.matchConditions[0].expression: Invalid value: "object.x in [1, 2,": '
                "compilation failed: "
                + _one("object.x in [1, 2,", 18, "Syntax error: unexpected input")
            ],
            id="syntax-error-trimmed",
        ),
    ],
)  # fmt: skip
def test_policy_expressions_are_compiled_when_written(
    spec: dict[str, Any], refused: list[str]
) -> None:
    assert _refused(walk.validate_create(_policy(**spec))) == refused


def test_policy_field_checks_of_upstream() -> None:
    found = walk.validate_create(
        _policy(
            variables=[{"name": "foo-bar", "expression": "1"}],
            validations=[{"expression": "true", "message": "a\nb", "messageExpression": " "}],
        )
    )
    assert sorted((e.field, e.detail) for e in found) == [
        ("spec.validations[0].message", "message must not contain line breaks"),
        ("spec.validations[0].messageExpression", "must be non-empty if specified"),
        ("spec.variables[0].name", "name is not a valid CEL identifier"),
    ]


def test_an_update_compiles_kept_expressions_as_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a compatibility version older than the semver library, a new expression may not
    use it, and one an update keeps may; match conditions an update keeps (paramKind too) are
    not compiled again."""
    monkeypatch.setattr(cel, "COMPATIBILITY_VERSION", (1, 32))
    semver = [{"expression": "isSemver('1.2.3')"}]
    assert _refused(walk.validate_create(_policy(validations=semver))) == [
        "spec.validations[0].expression: Invalid value: \"isSemver('1.2.3')\": "
        + _undeclared("isSemver('1.2.3')", "isSemver")
    ]
    old = _policy(validations=semver, matchConditions=[{"name": "m", "expression": "params.x"}])
    kept = _policy(
        validations=[*semver, {"expression": "true"}],
        matchConditions=[{"name": "m", "expression": "params.x"}],
    )
    assert _refused(walk.validate_update(kept, old)) == []
    changed = _policy(
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
        validations=semver,
        matchConditions=[{"name": "m", "expression": "params.x"}],
    )
    assert _refused(walk.validate_update(changed, old)) == [
        'spec.matchConditions[0].expression: Invalid value: "params.x": '
        "must evaluate to bool but got dyn"
    ]


def test_webhook_match_conditions_must_be_bools() -> None:
    hook = {
        "name": "check.example.com",
        "clientConfig": {"url": "https://example.com/check"},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "matchConditions": [{"name": "user", "expression": "request.userInfo.username"}],
    }
    raw = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "checks"},
        "webhooks": [hook],
    }
    config: ValidatingWebhookConfiguration = from_builtins(raw, ValidatingWebhookConfiguration).obj
    refused = [
        'webhooks[0].matchConditions[0].expression: Invalid value: "request.userInfo.username": '
        "must evaluate to bool but got dyn"
    ]
    assert _refused(walk.validate_create(config)) == refused
    # Unchanged on update: not compiled again (it was when written).
    assert _refused(walk.validate_update(config, copy.deepcopy(config))) == []


_APPLY = "Object{metadata: Object.metadata{labels: {'t': variables.t}}}"


def test_mutating_policy_expressions_are_compiled_when_written() -> None:
    raw = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "labels"},
        "spec": {
            "matchConstraints": _POLICY["spec"]["matchConstraints"],
            "reinvocationPolicy": "Never",
            "variables": [{"name": "t", "expression": "object.metadata.labels['team']"}],
            "matchConditions": [{"name": "m", "expression": "variables.t == 'a'"}],
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression": _APPLY},
                },
                {
                    "patchType": "JSONPatch",
                    "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: params.path}]"},
                },
            ],
        },
    }
    policy: MutatingAdmissionPolicy = from_builtins(raw, MutatingAdmissionPolicy).obj
    walk.set_defaults(policy)
    assert [e.field for e in walk.validate_create(policy)] == [
        "spec.matchConditions[0].expression",  # match conditions name no variables
        "spec.mutations[1].jsonPatch.expression",  # params without a paramKind
    ]


def test_nesting_deeper_than_the_checker_follows_is_refused_not_a_crash() -> None:
    deep = "(" * 1000 + "1" + ")" * 1000
    found = walk.validate_create(_policy(validations=[{"expression": f"{deep} == 1"}]))
    assert [e.field for e in found] == ["spec.validations[0].expression"]
    assert "expression recursion limit exceeded" in found[0].detail
