"""CEL validation rules (``x-kubernetes-validations``): compiling, binding, evaluating and
reporting (``controlplane.apiserver.crd.cel``), the walk beside the schema
(``controlplane.apiserver.crd.schema``), the CRD's own validation, and a real API server."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml

from controlplane.apiserver.crd import cel, customresources
from controlplane.apiserver.crd import schema as crd_schema
from kube.api import walk
from kube.api.codec import from_builtins
from kube.api.errors import ROOT, ErrorList, ErrorType
from kube.api.kinds.apiextensions_v1 import CustomResourceDefinition
from kube.api.kinds.resource_v1 import DeviceClass
from tests.servers import KUBECTL, Kubectl, ServerProcess

INT = {"type": "integer"}
NUMBER = {"type": "number"}
STRING = {"type": "string"}


def obj(props: dict[str, Any], *rules: Any, **extra: Any) -> dict[str, Any]:
    """An object schema with ``props`` and the given rules (strings or full rule dicts)."""
    schema: dict[str, Any] = {"type": "object", "properties": props, **extra}
    if rules:
        schema["x-kubernetes-validations"] = [
            {"rule": r} if isinstance(r, str) else r for r in rules
        ]
    return schema


def errors_of(value: Any, schema: dict[str, Any], old: Any = None) -> ErrorList:
    errors = ErrorList()
    crd_schema.validate(value, schema, ROOT, errors, old=old)
    return errors


def messages(value: Any, schema: dict[str, Any], old: Any = None) -> list[str]:
    return [str(e) for e in errors_of(value, schema, old)]


SPEC = obj(
    {
        "minReplicas": INT,
        "maxReplicas": INT,
        "name": STRING,
        "ratio": NUMBER,
        "tags": {"type": "array", "items": STRING},
        "labels": {"type": "object", "additionalProperties": STRING},
        "timeout": {"type": "string", "format": "duration"},
        "since": {"type": "string", "format": "date-time"},
        "x-y": INT,
        "namespace": STRING,
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "port": {"x-kubernetes-int-or-string": True},
    }
)
VALUE = {
    "minReplicas": 1,
    "maxReplicas": 3,
    "name": "Web-Front",
    "ratio": 1,
    "tags": ["a", "b", "c"],
    "labels": {"app": "web", "tier": "front"},
    "timeout": "1m30s",
    "since": "2026-01-01T00:00:00Z",
    "x-y": 7,
    "namespace": "prod",
    "free": {"n": 2, "s": "x", "l": [1, 2]},
    "port": "http",
}

# fmt: off
HOLDING = [
    ("field-compare", "self.minReplicas <= self.maxReplicas"),
    ("arithmetic", "self.maxReplicas - self.minReplicas * 2 == 1 && self.maxReplicas % 2 == 1"),
    ("has-present", "has(self.name)"),
    ("has-absent", "!has(self.missing)"),
    ("ternary", "has(self.missing) ? self.missing == 1 : true"),
    ("size", "size(self.tags) == 3 && self.tags.size() == 3 && size(self.name) == 9"),
    ("starts-ends-contains", "self.name.startsWith('Web') && self.name.endsWith('Front') && "
                             "self.name.contains('-')"),
    ("matches", "self.name.matches('^[A-Z][a-z]+-[A-Z]')"),
    ("lower-upper-ascii", "self.name.lowerAscii() == 'web-front' && "
                          "self.name.upperAscii() == 'WEB-FRONT'"),
    ("split-join", "self.name.split('-') == ['Web', 'Front'] && "
                   "self.tags.join(',') == 'a,b,c'"),
    ("substring-index", "self.name.substring(0, 3) == 'Web' && self.name.indexOf('-') == 3 && "
                        "self.name.charAt(4) == 'F' && self.name.replace('-', '') == 'WebFront'"),
    ("trim", "'  x '.trim() == 'x'"),
    ("in-list", "self.name in ['x', 'Web-Front']"),
    ("in-map", "'app' in self.labels && !('x' in self.labels)"),
    ("map-index", "self.labels['tier'] == 'front'"),
    ("all", "self.tags.all(t, size(t) == 1)"),
    ("exists", "self.tags.exists(t, t == 'b')"),
    ("exists-one", "self.tags.exists_one(t, t >= 'c')"),
    ("map-macro", "self.tags.map(t, t + t) == ['aa', 'bb', 'cc']"),
    ("filter", "self.tags.filter(t, t != 'a') == ['b', 'c']"),
    ("map-keys-all", "self.labels.all(k, k.size() > 2)"),
    ("nested-macros", "self.tags.all(x, self.tags.exists_one(y, x == y))"),
    ("number-is-double", "self.ratio > 0.5 && self.ratio == 1.0"),
    ("conversions", "int('2') + 1 == 3 && uint(3) == 3u && double(1) == 1.0 && "
                    "string(5) == '5'"),
    ("duration-format", "self.timeout > duration('1m') && self.timeout < duration('2m')"),
    ("timestamp-format", "self.since > timestamp('2025-12-31T00:00:00Z') && "
                         "self.since.getFullYear() == 2026"),
    ("escaped-dash", "self.x__dash__y == 7"),
    ("escaped-keyword", "self.__namespace__ == 'prod'"),
    ("preserved-unknown", "self.free.n == 2 && self.free.l.size() == 2"),
    ("int-or-string", "type(self.port) == string"),
    ("list-functions", "self.tags.isSorted() && [1, 2, 3].sum() == 6 && "
                       "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3"),
    ("dyn", "dyn(self.minReplicas) == 1"),
    ("quantity-compare", "quantity('64Gi').compareTo(quantity('1Gi')) == 1 && "
                         "quantity('1') == quantity('1000m') && "
                         "quantity('500m').isLessThan(quantity('1'))"),
    ("quantity-arithmetic", "quantity('1Gi').add(quantity('1Gi')) == quantity('2Gi') && "
                            "quantity('1').sub(1).sign() == 0 && quantity('1.5').add(1) == "
                            "quantity('2500m')"),
    ("quantity-conversions", "quantity('2k').isInteger() && quantity('2k').asInteger() == 2000 "
                             "&& !quantity('1m').isInteger() && "
                             "quantity('250m').asApproximateFloat() == 0.25 && "
                             "isQuantity('1Mi') && !isQuantity('1 Mi')"),
    ("error-absorbed-by-or", "self.missing == 1 || true"),
]
FAILING = [
    ("field-compare", "self.minReplicas > self.maxReplicas"),
    ("has", "has(self.missing)"),
    ("matches", "self.name.matches('^[a-z]+$')"),
    ("all", "self.tags.all(t, t == 'a')"),
    ("exists-one", "self.tags.exists_one(t, t != 'a')"),
    ("in-list", "self.name in ['x']"),
    ("is-sorted", "['b', 'a'].isSorted()"),
    ("quantity-greater", "quantity('1k').isGreaterThan(quantity('1Ki'))"),
]
# fmt: on


@pytest.mark.parametrize(("rule"), [r for _, r in HOLDING], ids=[i for i, _ in HOLDING])
def test_rules_that_hold(rule: str) -> None:
    assert messages(VALUE, obj(SPEC["properties"], rule)) == []


@pytest.mark.parametrize(("rule"), [r for _, r in FAILING], ids=[i for i, _ in FAILING])
def test_rules_that_fail_report_upstreams_default_message(rule: str) -> None:
    assert messages(VALUE, obj(SPEC["properties"], rule)) == [
        f'Invalid value: "object": failed rule: {rule}'
    ]


def test_rules_on_every_kind_of_node_with_paths() -> None:
    schema = obj(
        {
            "spec": obj(
                {
                    "replicas": {**INT, "x-kubernetes-validations": [{"rule": "self < 5"}]},
                    "tags": {
                        "type": "array",
                        "items": {**STRING, "x-kubernetes-validations": [{"rule": "self != ''"}]},
                        "x-kubernetes-validations": [{"rule": "size(self) < 3"}],
                    },
                    "labels": {
                        "type": "object",
                        "additionalProperties": {
                            **STRING,
                            "x-kubernetes-validations": [{"rule": "self.size() <= 3"}],
                        },
                    },
                    "both": {
                        **INT,
                        "allOf": [{"x-kubernetes-validations": [{"rule": "self > 0"}]}],
                    },
                },
                "self.replicas != 7",
            )
        }
    )
    labels = {"ok": "abc", "k": "long"}
    value = {"spec": {"replicas": 7, "tags": ["a", "", "c"], "labels": labels, "both": 0}}
    assert messages(value, schema) == [
        'spec: Invalid value: "object": failed rule: self.replicas != 7',
        'spec.replicas: Invalid value: "integer": failed rule: self < 5',
        'spec.tags: Invalid value: "array": failed rule: size(self) < 3',
        "spec.tags[1]: Invalid value: \"string\": failed rule: self != ''",
        'spec.labels[k]: Invalid value: "string": failed rule: self.size() <= 3',
        'spec.both: Invalid value: "": failed rule: self > 0',  # an allOf schema has no type
    ]


def test_null_values_and_absent_fields_are_not_validated() -> None:
    schema = obj(
        {"a": {**STRING, "nullable": True, "x-kubernetes-validations": [{"rule": "false"}]}}
    )
    assert messages({"a": None}, schema) == []
    assert messages({}, schema) == []


def test_message_message_expression_and_field_path() -> None:
    props = {"min": INT, "max": INT, "limits": {"type": "object", "additionalProperties": INT}}
    rules: list[Any] = [
        {"rule": "self.min <= self.max", "message": " min must not exceed max "},
        {
            "rule": "self.max < 10",
            "message": "static",
            "messageExpression": "'max is ' + string(self.max) + ', above 9'",
        },
        {"rule": "self.max < 9", "message": "fallback", "messageExpression": "self.nope"},
        {"rule": "self.max < 8", "messageExpression": "1"},  # not a string: the default
        {"rule": "self.min > 0", "fieldPath": ".min"},
        {"rule": "self.limits['cpu'] < 2", "fieldPath": ".limits['cpu']"},
        {"rule": "self.min > 1", "fieldPath": ".nope"},  # does not resolve: the node
    ]
    value: dict[str, Any] = {"min": 12, "max": 11, "limits": {"cpu": 4}}
    assert messages(value, obj(props, *rules)) == [
        'Invalid value: "object": min must not exceed max',
        'Invalid value: "object": max is 11, above 9',
        'Invalid value: "object": fallback',
        'Invalid value: "object": failed rule: self.max < 8',
        "limits[cpu]: Invalid value: \"object\": failed rule: self.limits['cpu'] < 2",
    ]
    value = {"min": 0, "max": 1, "limits": {}}
    assert messages(value, obj(props, rules[4], rules[6])) == [
        'min: Invalid value: "object": failed rule: self.min > 0',
        'Invalid value: "object": failed rule: self.min > 1',
    ]


@pytest.mark.parametrize(
    ("reason", "expected_type", "text"),
    [
        (None, ErrorType.INVALID, 'spec: Invalid value: "object": nope'),
        ("FieldValueInvalid", ErrorType.INVALID, 'spec: Invalid value: "object": nope'),
        ("FieldValueForbidden", ErrorType.FORBIDDEN, "spec: Forbidden: nope"),
        ("FieldValueRequired", ErrorType.REQUIRED, "spec: Required value: nope"),
        ("FieldValueDuplicate", ErrorType.DUPLICATE, 'spec: Duplicate value: "object"'),
    ],
    ids=["default", "invalid", "forbidden", "required", "duplicate"],
)
def test_reasons(reason: str | None, expected_type: ErrorType, text: str) -> None:
    rule: dict[str, Any] = {"rule": "false", "message": "nope"}
    if reason:
        rule["reason"] = reason
    errors = errors_of({"spec": {}}, obj({"spec": obj({}, rule)}))
    assert [(e.type, e.field, str(e)) for e in errors] == [(expected_type, "spec", text)]


IMMUTABLE = obj(
    {
        "name": {
            **STRING,
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "is immutable"}],
        },
        "replicas": INT,
    },
    {"rule": "self.replicas >= oldSelf.replicas", "message": "may not scale down"},
    "self.replicas < 100",
)


def test_transition_rules_need_an_old_value() -> None:
    assert messages({"name": "a", "replicas": 1}, IMMUTABLE) == []  # create: not evaluated
    assert messages({"name": "b", "replicas": 1}, IMMUTABLE, old={"name": "a", "replicas": 2}) == [
        'Invalid value: "object": may not scale down',
        'name: Invalid value: "string": is immutable',
    ]
    assert messages({"name": "a", "replicas": 2}, IMMUTABLE, old={"name": "a", "replicas": 2}) == []
    # A field the old object did not have: its transition rule is not evaluated.
    assert messages({"name": "b", "replicas": 3}, IMMUTABLE, old={"replicas": 2}) == []


def test_validate_transitions_evaluates_only_transition_rules() -> None:
    new, old = {"name": "b", "replicas": 200}, {"name": "a", "replicas": 300}
    errors = ErrorList()
    crd_schema.validate_transitions(new, old, IMMUTABLE, ROOT, errors)
    assert [str(e) for e in errors] == [
        'Invalid value: "object": may not scale down',
        'name: Invalid value: "string": is immutable',
    ]
    errors = ErrorList()
    crd_schema.validate_transitions(new, None, IMMUTABLE, ROOT, errors)
    assert errors == []


def test_immutable_whole_object_and_lists() -> None:
    schema = obj(
        {
            "spec": obj({"a": INT, "b": {"type": "array", "items": INT}}, "self == oldSelf"),
        }
    )
    old = {"spec": {"a": 1, "b": [1, 2]}}
    assert messages({"spec": {"a": 1, "b": [1, 2]}}, schema, old) == []
    assert messages({"spec": {"a": 1, "b": [2, 1]}}, schema, old) == [
        'spec: Invalid value: "object": failed rule: self == oldSelf'
    ]


def test_old_items_correlate_only_in_map_lists() -> None:
    item = obj({"name": STRING, "port": INT}, "self.port == oldSelf.port")
    as_map = {
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
    }
    atomic = {"type": "array", "items": item}
    old = {"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}
    new = {"ports": [{"name": "b", "port": 3}, {"name": "a", "port": 1}, {"name": "c", "port": 9}]}
    assert messages(new, obj({"ports": as_map}), old) == [
        'ports[0]: Invalid value: "object": failed rule: self.port == oldSelf.port'
    ]
    assert messages(new, obj({"ports": atomic}), old) == []


def test_old_map_values_correlate_by_key() -> None:
    schema = obj(
        {
            "limits": {
                "type": "object",
                "additionalProperties": {
                    **INT,
                    "x-kubernetes-validations": [{"rule": "self >= oldSelf"}],
                },
            }
        }
    )
    old = {"limits": {"cpu": 2, "mem": 4}}
    assert messages({"limits": {"cpu": 1, "mem": 4, "gpu": 0}}, schema, old) == [
        'limits[cpu]: Invalid value: "integer": failed rule: self >= oldSelf'
    ]


@pytest.mark.parametrize(
    ("rule", "detail"),
    [
        ("self.missing == 1", "no such key: missing evaluating rule: self.missing == 1"),
        (
            "self.min / self.zero == 1",
            "division by zero evaluating rule: self.min / self.zero == 1",
        ),
        ("self.tags[5] == 'x'", "index out of bounds evaluating rule: self.tags[5] == 'x'"),
        (
            "self.min == 'one'",
            "'no such overload': call arguments did not match a supported operator, function "
            "or macro signature for rule: self.min == 'one'",
        ),
        ("self.min", "cel expression must evaluate to a bool evaluating rule: self.min"),
        ("[].min() == 1", "min called on empty list evaluating rule: [].min() == 1"),
        (
            "quantity('1 Mi') == quantity('1')",
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?"
            "[0-9]*)$' evaluating rule: quantity('1 Mi') == quantity('1')",
        ),
        (
            "quantity('1m').asInteger() == 0",
            "cannot convert value to integer evaluating rule: quantity('1m').asInteger() == 0",
        ),
    ],
    ids=[
        "no-such-key",
        "division-by-zero",
        "index",
        "overload",
        "not-bool",
        "empty-min",
        "not-a-quantity",
        "not-an-integer",
    ],
)
def test_evaluation_errors(rule: str, detail: str) -> None:
    schema = obj({"min": INT, "zero": INT, "tags": {"type": "array", "items": STRING}}, rule)
    errors = errors_of({"min": 1, "zero": 0, "tags": []}, schema)
    assert [(e.type, e.value, e.detail) for e in errors] == [(ErrorType.INVALID, "object", detail)]


def test_evaluation_error_names_the_message_when_there_is_one() -> None:
    schema = obj({}, {"rule": "self.x == 1", "message": "x must be 1"})
    assert messages({}, schema) == [
        'Invalid value: "object": no such key: x evaluating rule: x must be 1'
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "self.a <=",
            "ERROR: <input>:1:8: Syntax error: unexpected input\n | self.a <=\n | .......^",
        ),
        ("foo(self)", "ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')"),
        ("self.bar()", "ERROR: <input>:1:6: undeclared reference to 'bar' (in container '')"),
        ("self.all(x, x > y)", "ERROR: <input>:1:17: undeclared reference to 'y'"),
        ("other == 1", "ERROR: <input>:1:1: undeclared reference to 'other'"),
    ],
    ids=["syntax", "function", "member-function", "unbound-variable", "variable"],
)
def test_compile_errors(text: str, problem: str) -> None:
    found = cel.compile_problem(text)
    assert found is not None and found.startswith(problem)
    with pytest.raises(cel.CompileError):
        cel.compile_expression(text)


def test_compiling_is_cached_and_notes_old_self() -> None:
    program = cel.compile_expression("self == oldSelf")
    assert program is cel.compile_expression("self == oldSelf")
    assert program.uses_old_self
    assert not cel.compile_expression("self.all(x, x > 0)").uses_old_self
    assert cel.compile_problem("self.all(x, x > 0) && has(self.a) && type(self) == map") is None


def test_a_rule_that_does_not_compile_at_evaluation() -> None:
    # A CRD validated without the compiler installed could store one.
    assert messages({}, obj({}, "self.a <=")) == [
        'Invalid value: "object": rule compile error: compilation failed: '
        "ERROR: <input>:1:8: Syntax error: unexpected input\n | self.a <=\n | .......^"
    ]


def test_blocking_errors_stop_the_rules() -> None:
    schema = obj({"a": INT, "b": STRING}, "self.a > 5", required=["b"])
    assert messages({"a": 1, "b": "x"}, schema) == [
        'Invalid value: "object": failed rule: self.a > 5'
    ]
    assert messages({"a": "one", "b": "x"}, schema) == [
        'a: Invalid value: "string": a in body must be of type integer: "string"',
        'Invalid value: "null": some validation rules were not checked because the object was '
        "invalid; correct the existing errors to complete validation",
    ]
    assert [e.field for e in errors_of({"a": 1}, schema)] == ["b", ""]
    # Without rules, nothing is added to the schema's errors.
    assert messages({"a": "one", "b": "x"}, obj({"a": INT})) == [
        'a: Invalid value: "string": a in body must be of type integer: "string"'
    ]


def test_budget_stops_the_walk() -> None:
    schema = obj({"xs": {"type": "array", "items": {**INT, "x-kubernetes-validations": [
        {"rule": "self < 0"}]}}})  # fmt: skip
    errors = ErrorList()
    crd_schema._validate_rules(
        {"xs": [1, 2, 3, 4]}, None, schema, ROOT, errors, cel.Budget(2), transitions_only=False
    )
    assert [str(e) for e in errors] == [
        'xs[0]: Invalid value: "integer": failed rule: self < 0',
        'xs[1]: Invalid value: "integer": failed rule: self < 0',
        f'xs[2]: Invalid value: "integer": {cel.OUT_OF_BUDGET}',
    ]
    assert cel.MAX_EVALUATIONS == 10_000


def test_escaping() -> None:
    assert cel.escape("x-y") == "x__dash__y"
    assert cel.escape("a.b/c") == "a__dot__b__slash__c"
    assert cel.escape("a__b") == "a__underscores__b"
    assert cel.escape("namespace") == "__namespace__"
    assert cel.escape("1x") is None
    assert cel.escape("a b") is None


# Through the classes customresources.py builds and the CRD's own validation.


def test_custom_resource_class_validates_rules_after_defaulting() -> None:
    schema = obj(
        {
            "apiVersion": STRING,
            "kind": STRING,
            "metadata": {"type": "object"},
            "spec": obj(
                {"min": {**INT, "default": 1}, "max": INT},
                {"rule": "self.min <= self.max", "message": "min must not exceed max"},
            ),
        }
    )
    cls = customresources.make_class("example.com", "v1", "Scaler", schema)

    def problems(spec: dict[str, Any]) -> list[str]:
        found = from_builtins({"metadata": {"name": "a"}, "spec": spec}, cls).obj
        found.set_defaults()
        errors = ErrorList()
        found.validate(ROOT, errors)
        return [str(e) for e in errors]

    assert problems({"max": 2}) == []
    assert problems({"max": 0}) == ['spec: Invalid value: "object": min must not exceed max']


def _crd(rules: list[dict[str, Any]]) -> CustomResourceDefinition:
    raw = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "scalers.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "scalers", "kind": "Scaler"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "x-kubernetes-validations": rules,
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    found: CustomResourceDefinition = from_builtins(raw, CustomResourceDefinition).obj
    walk.set_defaults(found)
    return found


def test_crd_with_rules_that_do_not_compile_is_invalid() -> None:
    prefix = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations"
    assert list(walk.validate(_crd([{"rule": "self.a == 1", "messageExpression": "'x'"}]))) == []
    errors = walk.validate(
        _crd([{"rule": "self.a <="}, {"rule": "ok(self)", "messageExpression": "'a' +"}])
    )
    found = [(e.field, e.type, e.detail.split("\n")[0]) for e in errors]
    assert found == [
        (
            f"{prefix}[0].rule",
            ErrorType.INVALID,
            "compilation failed: ERROR: <input>:1:8: Syntax error: unexpected input",
        ),
        (
            f"{prefix}[1].rule",
            ErrorType.INVALID,
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'ok' "
            "(in container '')",
        ),
        (
            f"{prefix}[1].messageExpression",
            ErrorType.INVALID,
            "messageExpression compilation failed: ERROR: <input>:1:5: Syntax error: "
            "unexpected input",
        ),
    ]
    assert errors[0].value == {"rule": "self.a <="}


# End to end, against a real API server.

GROUP = "cel.example.com"
SCALER_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"scalers.{GROUP}"},
    "spec": {
        "group": GROUP,
        "names": {"plural": "scalers", "singular": "scaler", "kind": "Scaler"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-validations": [
                                    {"rule": "self.minReplicas <= self.maxReplicas"},
                                    {
                                        "rule": "self.maxReplicas <= 10",
                                        "messageExpression": "'maxReplicas ' + "
                                        "string(self.maxReplicas) + ' exceeds 10'",
                                        "fieldPath": ".maxReplicas",
                                    },
                                ],
                                "properties": {
                                    "minReplicas": {"type": "integer", "default": 1},
                                    "maxReplicas": {"type": "integer"},
                                    "storageClass": {
                                        "type": "string",
                                        "x-kubernetes-validations": [
                                            {
                                                "rule": "self == oldSelf",
                                                "message": "storageClass is immutable",
                                            }
                                        ],
                                    },
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


def _scaler(name: str, **spec: Any) -> str:
    return json.dumps(
        {"apiVersion": f"{GROUP}/v1", "kind": "Scaler", "metadata": {"name": name}, "spec": spec}
    )


@pytest.fixture(scope="module")
def scaler_crd(apiserver: ServerProcess) -> None:
    def run(*args: str, input: str | None = None) -> None:
        result = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(apiserver.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr

    run("apply", "-f", "-", input=json.dumps(SCALER_CRD))
    run("wait", "--for", "condition=established", "--timeout=20s", f"crd/scalers.{GROUP}")


def test_rules_end_to_end(scaler_crd: None, kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=_scaler("good", maxReplicas=3, storageClass="fast"))
    created: Any = kubectl.json("get", "scaler", "good")
    assert created["spec"]["minReplicas"] == 1  # defaulted, then validated
    failed = kubectl.run(
        "create", "-f", "-", "-v=6", input=_scaler("bad", minReplicas=5, maxReplicas=3),
        check=False,
    )  # fmt: skip
    assert failed.returncode != 0
    assert "422 Unprocessable Entity" in failed.stderr
    assert 'The Scaler "bad" is invalid' in failed.stderr
    assert (
        'spec: Invalid value: "object": failed rule: self.minReplicas <= self.maxReplicas'
        in failed.stderr
    )
    too_many = kubectl.run("create", "-f", "-", input=_scaler("big", maxReplicas=11), check=False)
    assert 'spec.maxReplicas: Invalid value: "object": maxReplicas 11 exceeds 10' in (
        too_many.stderr
    )
    # Not a transition: the old object's value is only compared on update.
    patched = kubectl.run(
        "patch", "scaler", "good", "--type=merge", "-p", '{"spec": {"minReplicas": 4}}', check=False
    )
    assert "failed rule: self.minReplicas <= self.maxReplicas" in patched.stderr


def test_crd_with_a_rule_that_does_not_compile_is_rejected(
    scaler_crd: None, kubectl: Kubectl
) -> None:
    broken: Any = json.loads(json.dumps(SCALER_CRD))
    broken["metadata"]["name"] = f"brokens.{GROUP}"
    broken["spec"]["names"] = {"plural": "brokens", "kind": "Broken"}
    broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "x-kubernetes-validations"
    ] = [{"rule": "self.minReplicas <="}]
    failed = kubectl.run("create", "-f", "-", input=json.dumps(broken), check=False)
    assert failed.returncode != 0
    assert (
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]"
        ".rule: Invalid value:" in failed.stderr
    )
    assert "compilation failed: ERROR: <input>:1:18: Syntax error" in failed.stderr


def test_transition_rule_end_to_end(scaler_crd: None, kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=_scaler("keep", maxReplicas=3, storageClass="fast"))
    failed = kubectl.run(
        "patch",
        "scaler",
        "keep",
        "--type=merge",
        "-p",
        '{"spec": {"storageClass": "slow"}}',
        check=False,
    )
    assert failed.returncode != 0
    assert 'spec.storageClass: Invalid value: "string": storageClass is immutable' in failed.stderr
    kubectl.run("patch", "scaler", "keep", "--type=merge", "-p", '{"spec": {"maxReplicas": 4}}')
    current: Any = yaml.safe_load(kubectl.run("get", "scaler", "keep", "-o", "yaml").stdout)
    assert current["spec"] == {"minReplicas": 1, "maxReplicas": 4, "storageClass": "fast"}


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        # kubernetes.io's Dynamic Resource Allocation page's DeviceClass selector.
        (
            'device.driver == "driver.example.com" && device.attributes["driver.example.com"]'
            '.type == "gpu" && device.capacity["driver.example.com"].memory.compareTo('
            'quantity("64Gi")) >= 0',
            None,
        ),
        (
            'devices.driver == "driver.example.com"',
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'devices'",
        ),
        ("device.driver ==", "compilation failed: ERROR: <input>:1:"),
    ],
    ids=["docs-example", "undeclared", "syntax"],
)
def test_device_selectors_are_compiled_when_written(expression: str, problem: str | None) -> None:
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }
    found = walk.validate(from_builtins(raw, DeviceClass).obj)
    if problem is None:
        assert not found
    else:
        [error] = found
        assert error.field == "spec.selectors[0].cel.expression"
        assert error.detail.startswith(problem)
