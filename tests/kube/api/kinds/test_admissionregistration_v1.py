"""admissionregistration.k8s.io/v1: webhook configurations and validating admission policies."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.codec import to_builtins
from kube.api.errors import ErrorType
from kube.api.kinds.admissionregistration_v1 import (
    MutatingAdmissionPolicy,
    MutatingAdmissionPolicyBinding,
    MutatingWebhookConfiguration,
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
)
from kube.api.meta_v1 import Resource
from tests.kube.api.kinds.helpers import (
    CREATED,
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_MANY,
    cells,
    decode,
    merge,
    problems,
)

API_VERSION = "admissionregistration.k8s.io/v1"


RULE = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
HOOK = {
    "name": "check.example.com",
    "clientConfig": {"service": {"namespace": "webhooks", "name": "checker"}},
    "rules": [RULE],
    "sideEffects": "None",
    "admissionReviewVersions": ["v1"],
}
VWC = {
    "apiVersion": API_VERSION,
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "checks", "creationTimestamp": CREATED},
    "webhooks": [HOOK],
}
MWC = merge(VWC, {"kind": "MutatingWebhookConfiguration"})


def hook(**patch: Any) -> dict[str, Any]:
    """The webhook configuration whose one webhook is HOOK with ``patch`` merged in."""
    return merge(VWC, {"webhooks": [merge(HOOK, patch)]})


def rule(**patch: Any) -> dict[str, Any]:
    return hook(rules=[merge(RULE, patch)])


def test_webhook_defaults() -> None:
    config = decode(MWC, MutatingWebhookConfiguration)
    [webhook] = to_builtins(config)["webhooks"]
    assert webhook == {
        "name": "check.example.com",
        "clientConfig": {"service": {"namespace": "webhooks", "name": "checker", "port": 443}},
        "rules": [dict(RULE, scope="*")],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "namespaceSelector": {},
        "objectSelector": {},
        "sideEffects": "None",
        "timeoutSeconds": 10,
        "admissionReviewVersions": ["v1"],
        "reinvocationPolicy": "Never",
    }


def test_webhook_fields_come_in_upstreams_order() -> None:
    """As upstream's Go structs declare them, which is how `kubectl get -o json` shows them:
    the mutating webhook's reinvocationPolicy before matchConditions, which is last in both."""
    conditions = {"matchConditions": [{"name": "all", "expression": "true"}]}
    order = [
        "name",
        "clientConfig",
        "rules",
        "failurePolicy",
        "matchPolicy",
        "namespaceSelector",
        "objectSelector",
        "sideEffects",
        "timeoutSeconds",
        "admissionReviewVersions",
    ]
    [mutating] = to_builtins(
        decode(merge(MWC, {"webhooks": [merge(HOOK, conditions)]}), MutatingWebhookConfiguration)
    )["webhooks"]
    [validating] = to_builtins(decode(hook(**conditions), ValidatingWebhookConfiguration))[
        "webhooks"
    ]
    assert list(mutating) == [*order, "reinvocationPolicy", "matchConditions"]
    assert list(validating) == [*order, "matchConditions"]


def test_defaults_never_override_what_is_set() -> None:
    raw = hook(
        failurePolicy="Ignore", timeoutSeconds=3, namespaceSelector={"matchLabels": {"a": "b"}}
    )
    config = decode(raw, ValidatingWebhookConfiguration)
    [webhook] = to_builtins(config)["webhooks"]
    assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == ("Ignore", 3)
    assert webhook["namespaceSelector"] == {"matchLabels": {"a": "b"}}
    assert "reinvocationPolicy" not in webhook


W = "webhooks[0]"
WEBHOOK_VALIDATION = [
    ("valid", VWC, []),
    ("url", hook(clientConfig={"url": "https://checker.example.com:8443/check", "service": None}),
     []),
    ("name-not-qualified", hook(name="check"), [(f"{W}.name", INVALID)]),
    ("name-two-segments", hook(name="check.example"), [(f"{W}.name", INVALID)]),
    ("name-missing", hook(name=None), [(f"{W}.name", REQUIRED)]),
    ("names-unique", merge(VWC, {"webhooks": [HOOK, HOOK]}), [("webhooks[1].name", DUPLICATE)]),
    ("url-and-service", hook(clientConfig={"url": "https://x.example.com"}),
     [(f"{W}.clientConfig", REQUIRED)]),
    ("neither-url-nor-service", hook(clientConfig=None), [(f"{W}.clientConfig", REQUIRED)]),
    ("url-http", hook(clientConfig={"url": "http://x.example.com", "service": None}),
     [(f"{W}.clientConfig.url", INVALID)]),
    ("url-query-fragment-user", hook(clientConfig={
        "url": "https://u:p@x.example.com/a?b=c#d", "service": None}),
     [(f"{W}.clientConfig.url", INVALID)] * 3),
    ("url-without-host", hook(clientConfig={"url": "https:///path", "service": None}),
     [(f"{W}.clientConfig.url", INVALID)]),
    ("service-without-name", hook(clientConfig={"service": {"name": None}}),
     [(f"{W}.clientConfig.service.name", REQUIRED)]),
    ("service-port", hook(clientConfig={"service": {"port": 70000}}),
     [(f"{W}.clientConfig.service.port", INVALID)]),
    ("service-path-relative", hook(clientConfig={"service": {"path": "check"}}),
     [(f"{W}.clientConfig.service.path", INVALID)]),
    ("service-path-empty-segment", hook(clientConfig={"service": {"path": "/a//b"}}),
     [(f"{W}.clientConfig.service.path", INVALID)]),
    ("service-path-ok", hook(clientConfig={"service": {"path": "/validate/pods/"}}), []),
    ("operations-missing", rule(operations=None), [(f"{W}.rules[0].operations", REQUIRED)]),
    ("operation-unknown", rule(operations=["PATCH"]),
     [(f"{W}.rules[0].operations[0]", NOT_SUPPORTED)]),
    ("operation-wildcard-and-more", rule(operations=["*", "CREATE"]),
     [(f"{W}.rules[0].operations", INVALID)]),
    ("groups-missing", rule(apiGroups=None), [(f"{W}.rules[0].apiGroups", REQUIRED)]),
    ("groups-wildcard-and-more", rule(apiGroups=["*", "apps"]),
     [(f"{W}.rules[0].apiGroups", INVALID)]),
    ("version-empty", rule(apiVersions=["v1", ""]), [(f"{W}.rules[0].apiVersions[1]", REQUIRED)]),
    ("resources-missing", rule(resources=None), [(f"{W}.rules[0].resources", REQUIRED)]),
    ("resources-wildcard-and-plain", rule(resources=["*", "pods"]),
     [(f"{W}.rules[0].resources", INVALID)]),
    ("resources-wildcard-subresources", rule(resources=["*", "pods/status"]), []),
    ("resources-double-wildcard-and-more", rule(resources=["*/*", "pods/status"]),
     [(f"{W}.rules[0].resources", INVALID)]),
    ("subresource-under-wildcard", rule(resources=["pods/*", "pods/status"]),
     [(f"{W}.rules[0].resources[1]", INVALID)]),
    ("scope-unknown", rule(scope="Global"), [(f"{W}.rules[0].scope", NOT_SUPPORTED)]),
    ("failure-policy", hook(failurePolicy="Maybe"), [(f"{W}.failurePolicy", NOT_SUPPORTED)]),
    ("match-policy", hook(matchPolicy="Loose"), [(f"{W}.matchPolicy", NOT_SUPPORTED)]),
    ("side-effects-missing", hook(sideEffects=None), [(f"{W}.sideEffects", REQUIRED)]),
    ("side-effects-some", hook(sideEffects="Some"), [(f"{W}.sideEffects", NOT_SUPPORTED)]),
    ("timeout-too-long", hook(timeoutSeconds=31), [(f"{W}.timeoutSeconds", INVALID)]),
    ("timeout-zero", hook(timeoutSeconds=0), [(f"{W}.timeoutSeconds", INVALID)]),
    ("review-versions-missing", hook(admissionReviewVersions=None),
     [(f"{W}.admissionReviewVersions", REQUIRED)]),
    ("review-versions-unknown", hook(admissionReviewVersions=["v2"]),
     [(f"{W}.admissionReviewVersions", INVALID)]),
    ("review-versions-duplicate", hook(admissionReviewVersions=["v1", "v1"]),
     [(f"{W}.admissionReviewVersions[1]", INVALID)]),
    ("review-version-not-dns-1035", hook(admissionReviewVersions=["V1", "v1beta1"]),
     [(f"{W}.admissionReviewVersions[0]", INVALID)]),
    ("match-conditions", hook(matchConditions=[
        {"name": "not-system", "expression": "!request.userInfo.username.startsWith('system:')"}]),
     []),
    ("match-condition-duplicate", hook(matchConditions=[
        {"name": "a", "expression": "true"}, {"name": "a", "expression": "true"}]),
     [(f"{W}.matchConditions[1].name", DUPLICATE)]),
    ("match-condition-blank-expression", hook(matchConditions=[{"name": "a", "expression": " "}]),
     [(f"{W}.matchConditions[0].expression", REQUIRED)]),
    ("match-condition-without-name", hook(matchConditions=[{"expression": "true"}]),
     [(f"{W}.matchConditions[0].name", REQUIRED)]),
    ("match-conditions-too-many", hook(matchConditions=[
        {"name": f"c{i}", "expression": "true"} for i in range(65)]),
     [(f"{W}.matchConditions", TOO_MANY)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[1:] for c in WEBHOOK_VALIDATION],
    ids=[c[0] for c in WEBHOOK_VALIDATION],
)
@pytest.mark.parametrize(
    "cls", [ValidatingWebhookConfiguration, MutatingWebhookConfiguration], ids=["vwc", "mwc"]
)
def test_webhook_validation(
    cls: type[Resource], raw: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    raw = merge(raw, {"kind": cls.__name__})
    assert problems(decode(raw, cls)) == sorted(expected)


def test_reinvocation_policy_is_checked() -> None:
    raw = merge(hook(reinvocationPolicy="Always"), {"kind": "MutatingWebhookConfiguration"})
    config = decode(raw, MutatingWebhookConfiguration)
    assert problems(config) == [(f"{W}.reinvocationPolicy", NOT_SUPPORTED)]


WEBHOOK_MESSAGES = [
    ("side-effects", {"sideEffects": None}, "must specify one of None, NoneOnDryRun"),
    ("timeout", {"timeoutSeconds": 60}, "the timeout value must be between 1 and 30 seconds"),
    ("client-config", {"clientConfig": None}, "exactly one of url or service is required"),
    ("url-scheme", {"clientConfig": {"url": "http://x.example.com", "service": None}},
     "'https' is the only allowed URL scheme; desired format: https://host[/path]"),
    ("three-segments", {"name": "a.b"},
     "should be a domain with at least three segments separated by dots"),
    ("review-versions", {"admissionReviewVersions": ["v9"]},
     "must include at least one of v1, v1beta1"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("patch", "detail"), [c[1:] for c in WEBHOOK_MESSAGES], ids=[c[0] for c in WEBHOOK_MESSAGES]
)
def test_webhook_messages(patch: dict[str, Any], detail: str) -> None:
    errors = walk.validate(decode(hook(**patch), ValidatingWebhookConfiguration))
    assert [e.detail for e in errors] == [detail]


VAP: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "max-replicas", "creationTimestamp": CREATED},
    "spec": {
        "matchConstraints": {
            "resourceRules": [
                {
                    "operations": ["CREATE", "UPDATE"],
                    "apiGroups": ["apps"],
                    "apiVersions": ["v1"],
                    "resources": ["deployments"],
                }
            ]
        },
        "validations": [{"expression": "object.spec.replicas <= 5"}],
    },
}
VAPB = {
    "apiVersion": API_VERSION,
    "kind": "ValidatingAdmissionPolicyBinding",
    "metadata": {"name": "max-replicas-everywhere", "creationTimestamp": CREATED},
    "spec": {"policyName": "max-replicas", "validationActions": ["Deny"]},
}


def test_policy_defaults() -> None:
    spec = to_builtins(decode(VAP, ValidatingAdmissionPolicy))["spec"]
    assert spec["failurePolicy"] == "Fail"
    constraints = spec["matchConstraints"]
    assert (constraints["matchPolicy"], constraints["namespaceSelector"]) == ("Equivalent", {})
    assert constraints["objectSelector"] == {}
    assert constraints["resourceRules"][0]["scope"] == "*"
    binding = to_builtins(
        decode(merge(VAPB, {"spec": {"matchResources": {}}}), ValidatingAdmissionPolicyBinding)
    )
    assert binding["spec"]["matchResources"]["matchPolicy"] == "Equivalent"


def rules(**patch: Any) -> dict[str, Any]:
    rule = merge(VAP["spec"]["matchConstraints"]["resourceRules"][0], patch)
    return merge(VAP, {"spec": {"matchConstraints": {"resourceRules": [rule]}}})


POLICY_VALIDATION = [
    ("valid", VAP, []),
    ("audit-annotations-only", merge(VAP, {"spec": {"validations": None, "auditAnnotations": [
        {"key": "replicas", "valueExpression": "string(object.spec.replicas)"}]}}), []),
    ("no-constraints", merge(VAP, {"spec": {"matchConstraints": None}}),
     [("spec.matchConstraints", REQUIRED)]),
    ("no-resource-rules", merge(VAP, {"spec": {"matchConstraints": {"resourceRules": None}}}),
     [("spec.matchConstraints.resourceRules", REQUIRED)]),
    ("nothing-to-check", merge(VAP, {"spec": {"validations": None}}),
     [("spec.auditAnnotations", REQUIRED), ("spec.validations", REQUIRED)]),
    ("validation-without-expression", merge(VAP, {"spec": {"validations": [{"message": "x"}]}}),
     [("spec.validations[0].expression", REQUIRED)]),
    ("validation-reason", merge(VAP, {"spec": {"validations": [
        {"expression": "true", "reason": "Teapot"}]}}),
     [("spec.validations[0].reason", NOT_SUPPORTED)]),
    ("param-kind-empty", merge(VAP, {"spec": {"paramKind": {}}}),
     [("spec.paramKind.apiVersion", REQUIRED), ("spec.paramKind.kind", REQUIRED)]),
    ("failure-policy", merge(VAP, {"spec": {"failurePolicy": "Maybe"}}),
     [("spec.failurePolicy", NOT_SUPPORTED)]),
    ("variable-without-expression", merge(VAP, {"spec": {"variables": [{"name": "r"}]}}),
     [("spec.variables[0].expression", REQUIRED)]),
    ("resource-names-duplicate", rules(resourceNames=["a", "a"]),
     [("spec.matchConstraints.resourceRules[0].resourceNames[1]", DUPLICATE)]),
    ("resource-names-path-segment", rules(resourceNames=["a/b"]),
     [("spec.matchConstraints.resourceRules[0].resourceNames[0]", INVALID)]),
    ("rule-operation", rules(operations=["PATCH"]),
     [("spec.matchConstraints.resourceRules[0].operations[0]", NOT_SUPPORTED)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[1:] for c in POLICY_VALIDATION],
    ids=[c[0] for c in POLICY_VALIDATION],
)
def test_policy_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, ValidatingAdmissionPolicy)) == sorted(expected)


SELECTOR = {"matchLabels": {"b": "2", "a": "1"}}
BINDING_VALIDATION = [
    ("valid", VAPB, []),
    ("with-param-and-resources", merge(VAPB, {"spec": {
        "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"},
        "matchResources": {"namespaceSelector": SELECTOR}}}), []),
    ("no-policy", merge(VAPB, {"spec": {"policyName": None}}), [("spec.policyName", REQUIRED)]),
    ("policy-name", merge(VAPB, {"spec": {"policyName": "Max_Replicas"}}),
     [("spec.policyName", INVALID)]),
    ("no-actions", merge(VAPB, {"spec": {"validationActions": None}}),
     [("spec.validationActions", REQUIRED)]),
    ("deny-and-warn", merge(VAPB, {"spec": {"validationActions": ["Deny", "Warn"]}}),
     [("spec.validationActions", INVALID)]),
    ("duplicate-action", merge(VAPB, {"spec": {"validationActions": ["Audit", "Audit"]}}),
     [("spec.validationActions[1]", DUPLICATE)]),
    ("unknown-action", merge(VAPB, {"spec": {"validationActions": ["Block"]}}),
     [("spec.validationActions[0]", NOT_SUPPORTED)]),
    ("param-ref-empty", merge(VAPB, {"spec": {"paramRef": {}}}),
     [("spec.paramRef", REQUIRED), ("spec.paramRef.parameterNotFoundAction", REQUIRED)]),
    ("param-ref-name-and-selector", merge(VAPB, {"spec": {"paramRef": {
        "name": "p", "selector": SELECTOR, "parameterNotFoundAction": "Allow"}}}),
     [("spec.paramRef.name", FORBIDDEN), ("spec.paramRef.selector", FORBIDDEN)]),
    ("param-ref-action", merge(VAPB, {"spec": {"paramRef": {
        "name": "p", "parameterNotFoundAction": "Ignore"}}}),
     [("spec.paramRef.parameterNotFoundAction", NOT_SUPPORTED)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[1:] for c in BINDING_VALIDATION],
    ids=[c[0] for c in BINDING_VALIDATION],
)
def test_binding_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, ValidatingAdmissionPolicyBinding)) == sorted(expected)


MAP: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": "MutatingAdmissionPolicy",
    "metadata": {"name": "sidecar-policy.example.com", "creationTimestamp": CREATED},
    "spec": {
        "matchConstraints": {
            "resourceRules": [
                {
                    "operations": ["CREATE"],
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["pods"],
                }
            ]
        },
        "mutations": [
            {
                "patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": "Object{spec: Object.spec{}}"},
            }
        ],
        "reinvocationPolicy": "Never",
    },
}
MAPB = {
    "apiVersion": API_VERSION,
    "kind": "MutatingAdmissionPolicyBinding",
    "metadata": {"name": "sidecar-binding", "creationTimestamp": CREATED},
    "spec": {"policyName": "sidecar-policy.example.com"},
}
JSON_PATCH = {"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}


def test_mutating_policy_defaults() -> None:
    """failurePolicy is defaulted; reinvocationPolicy, unlike a webhook's, is required."""
    raw = merge(MAP, {"spec": {"reinvocationPolicy": None}})
    spec = to_builtins(decode(raw, MutatingAdmissionPolicy))["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["matchPolicy"] == "Equivalent"
    assert list(spec) == ["matchConstraints", "mutations", "failurePolicy"]


def mutations(*items: dict[str, Any]) -> dict[str, Any]:
    return merge(MAP, {"spec": {"mutations": list(items)}})


MUTATING_POLICY_VALIDATION = [
    ("valid", MAP, []),
    ("json-patch", mutations(JSON_PATCH), []),
    ("no-mutations", mutations(), [("spec.mutations", REQUIRED)]),
    ("no-resource-rules", merge(MAP, {"spec": {"matchConstraints": {"resourceRules": None}}}),
     [("spec.matchConstraints.resourceRules", REQUIRED)]),
    ("no-patch-type", mutations({"jsonPatch": {"expression": "[]"}}),
     [("spec.mutations[0].patchType", REQUIRED)]),
    ("patch-type", mutations({"patchType": "Merge"}),
     [("spec.mutations[0].patchType", NOT_SUPPORTED)]),
    ("apply-configuration-missing", mutations({"patchType": "ApplyConfiguration"}),
     [("spec.mutations[0].applyConfiguration", REQUIRED)]),
    ("json-patch-missing", mutations({"patchType": "JSONPatch"}),
     [("spec.mutations[0].jsonPatch", REQUIRED)]),
    ("both", mutations(merge(JSON_PATCH, {"applyConfiguration": {"expression": "Object{}"}})),
     [("spec.mutations[0].applyConfiguration", INVALID)]),
    ("no-reinvocation", merge(MAP, {"spec": {"reinvocationPolicy": None}}),
     [("spec.reinvocationPolicy", REQUIRED)]),
    ("delete", merge(MAP, {"spec": {"matchConstraints": {"resourceRules": [
        merge(MAP["spec"]["matchConstraints"]["resourceRules"][0],
              {"operations": ["CREATE", "DELETE"]})]}}}),
     [("spec.matchConstraints.resourceRules.operations", NOT_SUPPORTED)]),
    ("empty-expression", mutations({"patchType": "JSONPatch", "jsonPatch": {"expression": " "}}),
     [("spec.mutations[0].jsonPatch.expression", REQUIRED)]),
    ("reinvocation", merge(MAP, {"spec": {"reinvocationPolicy": "Always"}}),
     [("spec.reinvocationPolicy", NOT_SUPPORTED)]),
    ("failure-policy", merge(MAP, {"spec": {"failurePolicy": "Maybe"}}),
     [("spec.failurePolicy", NOT_SUPPORTED)]),
    ("duplicate-condition", merge(MAP, {"spec": {"matchConditions": [
        {"name": "a", "expression": "true"}, {"name": "a", "expression": "true"}]}}),
     [("spec.matchConditions[1].name", DUPLICATE)]),
    ("param-kind-empty", merge(MAP, {"spec": {"paramKind": {}}}),
     [("spec.paramKind.apiVersion", REQUIRED), ("spec.paramKind.kind", REQUIRED)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[1:] for c in MUTATING_POLICY_VALIDATION],
    ids=[c[0] for c in MUTATING_POLICY_VALIDATION],
)
def test_mutating_policy_validation(
    raw: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(raw, MutatingAdmissionPolicy)) == sorted(expected)


def test_mutating_policy_messages() -> None:
    errors = walk.validate(
        decode(mutations({"patchType": "JSONPatch"}, JSON_PATCH), MutatingAdmissionPolicy)
    )
    assert [(e.field, e.detail) for e in errors] == [
        ("spec.mutations[0].jsonPatch", "must be specified when patchType is JSONPatch")
    ]
    errors = walk.validate(decode(mutations(), MutatingAdmissionPolicy))
    assert [e.detail for e in errors] == ["mutations must contain at least one item"]
    both = mutations(merge(JSON_PATCH, {"applyConfiguration": {"expression": "Object{}"}}))
    errors = walk.validate(decode(both, MutatingAdmissionPolicy))
    assert [(e.value, e.detail) for e in errors] == [
        ("{applyConfiguration}", "must not be specified when patchType is JSONPatch")
    ]


MUTATING_BINDING_VALIDATION = [
    ("valid", MAPB, []),
    ("no-policy", merge(MAPB, {"spec": {"policyName": None}}), [("spec.policyName", REQUIRED)]),
    ("policy-name", merge(MAPB, {"spec": {"policyName": "Sidecar_Policy"}}),
     [("spec.policyName", INVALID)]),
    ("param-ref-empty", merge(MAPB, {"spec": {"paramRef": {}}}),
     [("spec.paramRef", REQUIRED), ("spec.paramRef.parameterNotFoundAction", REQUIRED)]),
    ("delete", merge(MAPB, {"spec": {"matchResources": {"resourceRules": [
        merge(MAP["spec"]["matchConstraints"]["resourceRules"][0], {"operations": ["DELETE"]})
    ]}}}), [("spec.matchResources.resourceRules.operations", NOT_SUPPORTED)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[1:] for c in MUTATING_BINDING_VALIDATION],
    ids=[c[0] for c in MUTATING_BINDING_VALIDATION],
)
def test_mutating_binding_validation(
    raw: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(raw, MutatingAdmissionPolicyBinding)) == sorted(expected)


GO_SELECTOR = (
    "&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:"
    "[]LabelSelectorRequirement{LabelSelectorRequirement{Key:env,Operator:In,Values:[x y],},},}"
)
PRINTING = [
    ("vwc", ValidatingWebhookConfiguration, VWC, ["checks", 1, "5m"]),
    ("mwc-empty", MutatingWebhookConfiguration, merge(MWC, {"webhooks": None}),
     ["checks", 0, "5m"]),
    ("vap", ValidatingAdmissionPolicy, VAP, ["max-replicas", 1, "<unset>", "5m"]),
    ("vap-param-kind", ValidatingAdmissionPolicy,
     merge(VAP, {"spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}}),
     ["max-replicas", 1, "v1/ConfigMap", "5m"]),
    ("binding", ValidatingAdmissionPolicyBinding, VAPB,
     ["max-replicas-everywhere", "max-replicas", "<unset>", "5m"]),
    ("binding-param-in-namespace", ValidatingAdmissionPolicyBinding,
     merge(VAPB, {"spec": {"paramRef": {"name": "p", "namespace": "ns"}}}),
     ["max-replicas-everywhere", "max-replicas", "ns/p", "5m"]),
    ("binding-param-any-namespace", ValidatingAdmissionPolicyBinding,
     merge(VAPB, {"spec": {"paramRef": {"name": "p"}}}),
     ["max-replicas-everywhere", "max-replicas", "*/p", "5m"]),
    ("binding-param-selector", ValidatingAdmissionPolicyBinding,
     merge(VAPB, {"spec": {"paramRef": {"selector": merge(SELECTOR, {"matchExpressions": [
         {"key": "env", "operator": "In", "values": ["x", "y"]}]})}}}),
     ["max-replicas-everywhere", "max-replicas", GO_SELECTOR, "5m"]),
    ("map", MutatingAdmissionPolicy, mutations(JSON_PATCH, JSON_PATCH),
     ["sidecar-policy.example.com", 2, "<unset>", "5m"]),
    ("map-param-kind", MutatingAdmissionPolicy,
     merge(MAP, {"spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}}),
     ["sidecar-policy.example.com", 1, "v1/ConfigMap", "5m"]),
    ("map-binding", MutatingAdmissionPolicyBinding,
     merge(MAPB, {"spec": {"paramRef": {"name": "p", "namespace": "ns"}}}),
     ["sidecar-binding", "sidecar-policy.example.com", "ns/p", "5m"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("cls", "raw", "expected"), [c[1:] for c in PRINTING], ids=[c[0] for c in PRINTING]
)
def test_printer_cells(cls: type[Resource], raw: dict[str, Any], expected: list[Any]) -> None:
    assert cells(decode(raw, cls)) == expected


def test_registration() -> None:
    for cls in (
        ValidatingWebhookConfiguration,
        MutatingWebhookConfiguration,
        ValidatingAdmissionPolicy,
        ValidatingAdmissionPolicyBinding,
        MutatingAdmissionPolicy,
        MutatingAdmissionPolicyBinding,
    ):
        assert cls.kind_info.categories == ("api-extensions",)
        assert not cls.kind_info.namespaced
    assert ValidatingAdmissionPolicy.kind_info.subresources == ("status",)
    assert [c.name for c in ValidatingAdmissionPolicy.kind_info.columns] == [
        "Name",
        "Validations",
        "ParamKind",
        "Age",
    ]
    assert [c.name for c in ValidatingAdmissionPolicyBinding.kind_info.columns] == [
        "Name",
        "PolicyName",
        "ParamRef",
        "Age",
    ]
    assert [c.name for c in MutatingAdmissionPolicy.kind_info.columns] == [
        "Name",
        "Mutations",
        "ParamKind",
        "Age",
    ]
    assert MutatingAdmissionPolicyBinding.kind_info.columns == (
        ValidatingAdmissionPolicyBinding.kind_info.columns
    )
