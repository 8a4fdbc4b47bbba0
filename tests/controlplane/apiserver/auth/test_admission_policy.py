"""ValidatingAdmissionPolicy evaluated, through real kubectl against a real API server: the
kubernetes.io example policy denies, warns and audits as its binding says; parameters by name
and by selector, and a missing one; messageExpression, variables and matchConditions;
failurePolicy; the policy kinds themselves exempt; and expressions compiled when a policy is
written.  Each test confines its policies to its own namespace with a namespaceSelector on
``kubernetes.io/metadata.name``."""

from __future__ import annotations

import json
import uuid
from typing import Any

import yaml

from controlplane.apiserver.auth.admission.policy import (
    VALIDATION_FAILURE,
    Evaluation,
    Failure,
    record,
)
from controlplane.apiserver.registry.store import RequestContext
from kube.api import codec
from kube.api.kinds.admissionregistration_v1 import (
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
)
from tests.servers import Kubectl


def deployment(name: str, replicas: int) -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        }
    )


def policy(name: str, **spec: Any) -> dict[str, Any]:
    """The kubernetes.io example's shape: Deployments, create and update."""
    spec.setdefault(
        "matchConstraints",
        {
            "resourceRules": [
                {
                    "apiGroups": ["apps"],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["deployments"],
                }
            ]
        },
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def binding(name: str, policy_name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("validationActions", ["Deny"])
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": policy_name,
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
            **spec,
        },
    }


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    kubectl.run("apply", "-f", "-", input=yaml.safe_dump_all(objects), namespaced=False)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}.example.com"


def test_the_documented_policy_denies_more_than_five_replicas(kubectl: Kubectl) -> None:
    name, bound = unique("demo-policy"), unique("demo-binding")
    apply(
        kubectl,
        policy(name, validations=[{"expression": "object.spec.replicas <= 5"}]),
        binding(bound, name, kubectl.namespace),
    )
    refused = kubectl.run("create", "-f", "-", input=deployment("big", 6), check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"The deployments \"big\" is invalid: : ValidatingAdmissionPolicy '{name}' with "
        f"binding '{bound}' denied request: failed expression: object.spec.replicas <= 5"
    )
    kubectl.run("create", "-f", "-", input=deployment("small", 3))
    # An update of the deployment itself (``kubectl scale`` writes deployments/scale, which
    # rules naming "deployments" do not match, as upstream).
    refused = kubectl.run("patch", "deployment/small", "-p", '{"spec":{"replicas":7}}', check=False)
    assert refused.returncode == 1 and "denied request" in refused.stderr
    assert kubectl.json("get", "deployment/small")["spec"]["replicas"] == 3


def test_the_documented_audit_annotation_policy_is_accepted_and_applies(kubectl: Kubectl) -> None:
    """kubernetes.io's audit-annotations example as written: its messageExpression and
    valueExpression compile when the policy is written, and the message is what a denial says."""
    name, bound = unique("demo-policy"), unique("demo-binding")
    annotation = "'Deployment spec.replicas set to ' + string(object.spec.replicas)"
    apply(
        kubectl,
        policy(
            name,
            failurePolicy="Fail",
            validations=[
                {"expression": "object.spec.replicas > 50", "messageExpression": annotation}
            ],
            auditAnnotations=[{"key": "high-replica-count", "valueExpression": annotation}],
        ),
        binding(bound, name, kubectl.namespace),
    )
    refused = kubectl.run("create", "-f", "-", input=deployment("few", 3), check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith(
        f"ValidatingAdmissionPolicy '{name}' with binding '{bound}' denied request: "
        "Deployment spec.replicas set to 3"
    )


def test_warn_and_audit_let_the_request_through_with_a_warning(kubectl: Kubectl) -> None:
    name, bound = unique("warn-policy"), unique("warn-binding")
    apply(
        kubectl,
        policy(
            name,
            validations=[
                {
                    "expression": "object.spec.replicas <= 5",
                    "message": "at most five replicas, please",
                }
            ],
        ),
        binding(bound, name, kubectl.namespace, validationActions=["Warn", "Audit"]),
    )
    created = kubectl.run("create", "-f", "-", input=deployment("big", 6))
    assert (
        f"Warning: Validation failed for ValidatingAdmissionPolicy '{name}' with binding "
        f"'{bound}': at most five replicas, please"
    ) in created.stderr
    assert kubectl.json("get", "deployment/big")["spec"]["replicas"] == 6


def test_parameters_by_name_and_by_selector_and_a_missing_one(kubectl: Kubectl) -> None:
    name = unique("param-policy")
    limits = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "limits", "namespace": kubectl.namespace, "labels": {"k": "v"}},
        "data": {"maxReplicas": "2"},
    }
    apply(
        kubectl,
        limits,
        policy(
            name,
            paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
            validations=[
                {
                    "expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                    "messageExpression": "'replicas must be at most ' + params.data.maxReplicas",
                    "reason": "Forbidden",
                }
            ],
        ),
        binding(
            by_name := unique("by-name"),
            name,
            kubectl.namespace,
            paramRef={"name": "limits", "parameterNotFoundAction": "Deny"},
        ),
    )
    refused = kubectl.run("create", "-f", "-", input=deployment("three", 3), check=False)
    assert refused.stderr.strip() == (
        f'Error from server (Forbidden): error when creating "STDIN": deployments.apps "three" '
        f"is forbidden: ValidatingAdmissionPolicy '{name}' with binding '{by_name}' denied "
        "request: replicas must be at most 2"
    )
    kubectl.run("create", "-f", "-", input=deployment("two", 2))
    kubectl.run("delete", "configmap", "limits")
    refused = kubectl.run("create", "-f", "-", input=deployment("one", 1), check=False)
    assert (
        "failed to configure binding: no params found for policy binding with `Deny` "
        "parameterNotFoundAction"
    ) in refused.stderr
    kubectl.run("delete", "validatingadmissionpolicybinding", by_name, namespaced=False)
    apply(
        kubectl,
        binding(
            unique("by-selector"),
            name,
            kubectl.namespace,
            paramRef={"selector": {"matchLabels": {"k": "v"}}, "parameterNotFoundAction": "Allow"},
        ),
    )
    kubectl.run("create", "-f", "-", input=deployment("nine", 9))  # no params: allowed
    apply(kubectl, limits)
    refused = kubectl.run("create", "-f", "-", input=deployment("four", 4), check=False)
    assert "replicas must be at most 2" in refused.stderr


def test_variables_and_match_conditions(kubectl: Kubectl) -> None:
    name = unique("vars-policy")
    apply(
        kubectl,
        policy(
            name,
            matchConditions=[
                {"name": "not-exempt", "expression": "!('exempt' in object.metadata.labels)"}
            ],
            variables=[
                {"name": "images", "expression": "object.spec.template.spec.containers"},
                {"name": "broken", "expression": "object.spec.nothing.here"},
            ],
            validations=[
                {
                    "expression": "variables.images.all(c, c.image.contains(':'))",
                    "messageExpression": "'untagged image in ' + object.metadata.name",
                }
            ],
        ),
        binding(unique("vars-binding"), name, kubectl.namespace),
    )
    refused = kubectl.run("create", "-f", "-", input=deployment("untagged", 1), check=False)
    assert "denied request: untagged image in untagged" in refused.stderr
    exempt = json.loads(deployment("exempt", 1))
    exempt["metadata"]["labels"]["exempt"] = "yes"
    kubectl.run("create", "-f", "-", input=json.dumps(exempt))


def test_failure_policy_decides_what_an_error_does(kubectl: Kubectl) -> None:
    failing, ignoring = unique("fail-policy"), unique("ignore-policy")
    broken = [{"expression": "object.spec.nothing.here == 1"}]
    apply(
        kubectl,
        policy(failing, validations=broken),
        binding(unique("fail-binding"), failing, kubectl.namespace),
    )
    refused = kubectl.run("create", "-f", "-", input=deployment("x", 1), check=False)
    assert "denied request: expression 'object.spec.nothing.here == 1' resulted in error" in (
        refused.stderr
    )
    kubectl.run("delete", "validatingadmissionpolicy", failing, namespaced=False)
    apply(
        kubectl,
        policy(ignoring, validations=broken, failurePolicy="Ignore"),
        binding(unique("ignore-binding"), ignoring, kubectl.namespace),
    )
    kubectl.run("create", "-f", "-", input=deployment("x", 1))


def test_the_policy_kinds_are_exempt_so_a_bad_policy_can_be_repaired(kubectl: Kubectl) -> None:
    """A policy that refuses everything (cluster-scoped objects included, which a namespace
    selector does not confine) still lets itself and its binding be deleted."""
    name, bound = unique("lockout"), unique("lockout-binding")
    everything = {
        "resourceRules": [
            {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}
        ]
    }
    apply(
        kubectl,
        policy(name, matchConstraints=everything, validations=[{"expression": "false"}]),
        binding(bound, name, kubectl.namespace),
    )
    try:
        refused = kubectl.run("create", "configmap", "c", check=False)
        assert "denied request: failed expression: false" in refused.stderr
        apply(kubectl, binding(bound, name, kubectl.namespace, validationActions=["Warn"]))
    finally:
        kubectl.run("delete", "validatingadmissionpolicybinding", bound, namespaced=False)
        kubectl.run("delete", "validatingadmissionpolicy", name, namespaced=False)
    kubectl.run("create", "configmap", "c")


def test_audit_records_each_failure_and_the_policys_annotations() -> None:
    """What the audit event of a request gets (in process: the server's audit log is the
    audit tests' business): upstream's ``validation_failure`` list and ``<policy>/<key>``."""
    audited = codec.from_builtins(
        binding("b", "p", "ns", validationActions=["Audit"]), ValidatingAdmissionPolicyBinding
    ).obj
    evaluation = Evaluation(
        codec.from_builtins(policy("p"), ValidatingAdmissionPolicy).obj,
        audited,
        [Failure("too many", "Invalid", 0), Failure("untagged", "Invalid", 2)],
        {"p/owner": "team-a"},
    )
    ctx = RequestContext()
    record(evaluation, ctx)
    assert ctx.warnings == []
    assert json.loads(ctx.audit_annotations.pop(VALIDATION_FAILURE)) == [
        {
            "message": message,
            "policy": "p",
            "binding": "b",
            "expressionIndex": index,
            "validationActions": ["Audit"],
        }
        for message, index in (("too many", 0), ("untagged", 2))
    ]
    assert ctx.audit_annotations == {"p/owner": "team-a"}


def test_a_policy_whose_expressions_do_not_compile_is_refused(kubectl: Kubectl) -> None:
    """As upstream, every expression is compiled when the policy is written: the 422 names
    each one that does not compile or does not evaluate to its field's type."""
    name = unique("uncompiled")
    validations = [{"expression": "object.spec.replicas"}, {"expression": "params.max >= 1"}]
    written = json.dumps(policy(name, validations=validations))
    refused = kubectl.run("create", "-f", "-", input=written, namespaced=False, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f'The ValidatingAdmissionPolicy "{name}" is invalid: \n'
        '* spec.validations[0].expression: Invalid value: "object.spec.replicas": must '
        "evaluate to bool but got dyn\n"
        '* spec.validations[1].expression: Invalid value: "params.max >= 1": compilation '
        "failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n"
        " | params.max >= 1\n"
        " | ^"
    )
    valid = [{"expression": "object.spec.replicas <= 5"}]
    apply(kubectl, policy(name, validations=valid))
    message = [{**valid[0], "messageExpression": "object.spec.replicas"}]
    changed = json.dumps(policy(name, validations=message))
    refused = kubectl.run("apply", "-f", "-", input=changed, namespaced=False, check=False)
    assert refused.returncode == 1
    assert (
        'spec.validations[0].messageExpression: Invalid value: "object.spec.replicas": must '
        "evaluate to string but got dyn"
    ) in refused.stderr
    stored = kubectl.json("get", "validatingadmissionpolicy", name)
    assert stored["spec"]["validations"] == valid
    kubectl.run("delete", "validatingadmissionpolicy", name, namespaced=False)
