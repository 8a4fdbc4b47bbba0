"""ValidatingAdmissionPolicy status.typeChecking on ``kubelab server`` (the controller-manager's
validatingadmissionpolicy-status-controller reading the API server's discovery and OpenAPI),
through the pinned kubectl: the kubernetes.io VAP docs' "Type checking" example, a fixed
policy, and a custom resource as paramKind with typos in several kinds of expression."""

from __future__ import annotations

import time
from typing import Any

import yaml

from tests.servers import Kubectl

DOCS_POLICY = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: "deploy-replica-policy.example.com"
spec:
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE", "UPDATE"]
      resources:   ["deployments"]
  validations:
  - expression: "object.replicas > 1" # should be "object.spec.replicas > 1"
    message: "must be replicated"
    reason: Invalid
"""

DOCS_WARNING = """\
apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'
 | object.replicas > 1
 | ......^"""


def _checked(kubectl: Kubectl, name: str, generation: int) -> dict[str, Any]:
    """The policy as ``kubectl get -o yaml`` shows it once its generation is type-checked."""
    deadline = time.monotonic() + 30
    while True:
        shown = kubectl.run("get", "validatingadmissionpolicy", name, "-o", "yaml").stdout
        policy: dict[str, Any] = yaml.safe_load(shown)
        if policy.get("status", {}).get("observedGeneration") == generation:
            return policy
        assert time.monotonic() < deadline, f"{name} never type-checked: {shown}"
        time.sleep(0.3)


def test_the_docs_typo_is_reported_and_its_fix_clears_it(kubectl: Kubectl) -> None:
    name = "deploy-replica-policy.example.com"
    kubectl.run("apply", "-f", "-", input=DOCS_POLICY)
    status = _checked(kubectl, name, 1)["status"]
    assert status["typeChecking"] == {
        "expressionWarnings": [
            {"fieldRef": "spec.validations[0].expression", "warning": DOCS_WARNING}
        ]
    }
    fixed = DOCS_POLICY.replace('"object.replicas > 1"', '"object.spec.replicas > 1"')
    kubectl.run("apply", "-f", "-", input=fixed)
    assert _checked(kubectl, name, 2)["status"]["typeChecking"] == {}
    kubectl.run("delete", "validatingadmissionpolicy", name)


def test_an_operator_on_the_wrong_types_is_reported(kubectl: Kubectl) -> None:
    """The docs' policy comparing replicas with a string: cel-go's overload error."""
    name = "deploy-replica-policy.example.com"
    typed = DOCS_POLICY.replace('"object.replicas > 1"', "\"object.spec.replicas > '1'\"")
    kubectl.run("apply", "-f", "-", input=typed)
    status = _checked(kubectl, name, 1)["status"]
    assert status["typeChecking"]["expressionWarnings"] == [
        {
            "fieldRef": "spec.validations[0].expression",
            "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload"
            " for '_>_' applied to '(int, string)'\n | object.spec.replicas > '1'\n"
            " | .....................^",
        }
    ]
    kubectl.run("delete", "validatingadmissionpolicy", name)


PARAMS_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: replicalimits.rules.example.com
spec:
  group: rules.example.com
  scope: Namespaced
  names: {plural: replicalimits, singular: replicalimit, kind: ReplicaLimit}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          maxReplicas: {type: integer}
"""

PARAMS_POLICY = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replica-limit
spec:
  paramKind: {apiVersion: rules.example.com/v1, kind: ReplicaLimit}
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments", "replicasets"]
  variables:
  - name: wanted
    expression: "object.spec.replicas"
  validations:
  - expression: "object.spec.replicas <= params.maxReplica"
    messageExpression: "'max ' + string(params.maxReplicas) + ' not ' + string(object.spec.replcas)"
  auditAnnotations:
  - key: replicas
    valueExpression: "string(object.metadata.labelz)"
  matchConditions:
  - name: labelled
    expression: "'limited' in object.metadata.labels"
"""


def _issue(kinds: list[str], line: str, field: str) -> str:
    """cel-go's issue for the undefined ``field`` of ``line``, once per kind (the column is
    the selecting dot's)."""
    column = line.index(f".{field}") + 1
    caret = "." * (column - 1) + "^"
    return "\n".join(
        f"apps/v1, Kind={kind}: ERROR: <input>:1:{column}: undefined field '{field}'\n"
        f" | {line}\n | {caret}"
        for kind in kinds
    )


def test_validations_are_checked_with_params_from_a_custom_resource(
    kubectl: Kubectl,
) -> None:
    kubectl.run("apply", "-f", "-", input=PARAMS_CRD)
    kubectl.run(
        "wait", "--for=condition=Established", "crd/replicalimits.rules.example.com",
        "--timeout=30s", namespaced=False,
    )  # fmt: skip
    kubectl.run("apply", "-f", "-", input=PARAMS_POLICY)
    warnings = _checked(kubectl, "replica-limit", 1)["status"]["typeChecking"]["expressionWarnings"]
    kinds = ["Deployment", "ReplicaSet"]
    validation = "object.spec.replicas <= params.maxReplica"
    message = "'max ' + string(params.maxReplicas) + ' not ' + string(object.spec.replcas)"
    # As upstream, the auditAnnotation's typo (labelz) is not reported.
    assert warnings == [
        {
            "fieldRef": "spec.validations[0].expression",
            "warning": _issue(kinds, validation, "maxReplica"),
        },
        {
            "fieldRef": "spec.validations[0].messageExpression",
            "warning": _issue(kinds, message, "replcas"),
        },
    ]
    kubectl.run("delete", "validatingadmissionpolicy", "replica-limit")
