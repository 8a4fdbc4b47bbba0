"""MutatingAdmissionPolicy as users reach it: the pinned kubectl and the official Python client
against a real ``kubelab apiserver``.  The kubernetes.io docs' sidecar policy (the corpus in
tests/kube/api/manifests) injects its init container into a Pod in its JSONPatch form, and in
its ApplyConfiguration form once the atomic ``args`` it sets are left out (with them, the pod is
refused as upstream refuses it); a parameterized policy sets a Deployment's replicas and a
label; the policies' tables, ``explain``, 422s naming the field, and AdmissionregistrationV1Api.

Policies and bindings are cluster-scoped and the module's server is shared: each test binds
its policies to its own namespace (a namespaceSelector on ``kubernetes.io/metadata.name``) and
deletes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.controlplane.apiserver.corpus import CORPUS, columns, refusal, refused_document
from tests.servers import Kubectl

GROUP_VERSION = "admissionregistration.k8s.io/v1"
SIDECAR = "sidecar-policy.example.com"


def documented(kubectl: Kubectl, manifest: str) -> list[dict[str, Any]]:
    """A corpus manifest's documents, with the docs' binding confined to the test's namespace
    (the JSONPatch form's binding is the ApplyConfiguration form's)."""
    policy = yaml.safe_load_all((CORPUS / "manifests" / manifest).read_text())
    binding = list(
        yaml.safe_load_all(
            (
                CORPUS / "manifests" / "admissionregistration-mutatingadmissionpolicy-sidecar.yaml"
            ).read_text()
        )
    )[1]
    binding["spec"]["matchResources"]["namespaceSelector"] = own(kubectl)
    return [next(policy), binding]


def own(kubectl: Kubectl) -> dict[str, Any]:
    return {"matchLabels": {"kubernetes.io/metadata.name": kubectl.namespace}}


@pytest.fixture
def applied(kubectl: Kubectl) -> Iterator[list[dict[str, Any]]]:
    """Documents a test applies (append, then apply), deleted after it."""
    documents: list[dict[str, Any]] = []
    yield documents
    for document in reversed(documents):
        kind = document["kind"].lower()
        kubectl.run(
            "delete", kind, document["metadata"]["name"], "--ignore-not-found", namespaced=False
        )


def apply(kubectl: Kubectl, applied: list[dict[str, Any]], *documents: dict[str, Any]) -> None:
    applied.extend(documents)
    kubectl.run("apply", "-f", "-", input=yaml.safe_dump_all(documents), namespaced=False)


def pod(name: str) -> str:
    """A Pod with an init container of its own, which the sidecar policies add to."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "initContainers": [{"name": "setup", "image": "busybox"}],
                "containers": [{"name": "app", "image": "nginx"}],
            },
        }
    )


def init_containers(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = kubectl.json("get", f"pod/{name}")["spec"]["initContainers"]
    return found


APPLY_CONFIGURATION = "admissionregistration-mutatingadmissionpolicy-sidecar.yaml"
JSON_PATCH = "admissionregistration-mutatingadmissionpolicy-jsonpatch.yaml"
ARGS = 'args: ["proxy", "sidecar"],'


def test_the_documented_json_patch_policy_injects_its_sidecar(
    kubectl: Kubectl, applied: list[dict[str, Any]]
) -> None:
    apply(kubectl, applied, *documented(kubectl, JSON_PATCH))
    kubectl.run("create", "-f", "-", input=pod("meshed"))
    assert_meshed(kubectl, "mesh-proxy/v1.0.0")


def test_the_documented_apply_configuration_policy_and_its_atomic_args(
    kubectl: Kubectl, applied: list[dict[str, Any]]
) -> None:
    """The docs' ApplyConfiguration form sets the sidecar's ``args``, an atomic list, which an
    apply configuration may not set (upstream's check: what it leaves out would be lost), so
    the pod is refused; without ``args`` the same policy injects the sidecar."""
    policy, binding = documented(kubectl, APPLY_CONFIGURATION)
    apply(kubectl, applied, policy, binding)
    refused = kubectl.run("create", "-f", "-", input=pod("meshed"), check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip().endswith(
        f"policy '{SIDECAR}' with binding '{SIDECAR}' denied request: error applying patch: "
        "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: "
        ".spec.initContainers[0].args"
    )
    expression = policy["spec"]["mutations"][0]["applyConfiguration"]["expression"]
    assert ARGS in expression
    without = expression.replace(ARGS, "")
    policy["spec"]["mutations"][0]["applyConfiguration"]["expression"] = without
    apply(kubectl, applied, policy)
    kubectl.run("create", "-f", "-", input=pod("meshed"))
    assert_meshed(kubectl, "mesh/proxy:v1.0.0")


def assert_meshed(kubectl: Kubectl, image: str) -> None:
    """The pod ``meshed`` got the sidecar after its own init container, and a pod that has
    the sidecar already does not get a second one; the policy's and binding's tables."""
    containers = init_containers(kubectl, "meshed")
    assert [(c["name"], c["image"], c.get("restartPolicy")) for c in containers] == [
        ("setup", "busybox", None),
        ("mesh-proxy", image, "Always"),
    ]
    # The policy's match condition keeps it from adding a second sidecar to a pod that has one.
    again = json.loads(pod("already"))
    again["spec"]["initContainers"] = containers[1:]
    kubectl.run("create", "-f", "-", input=json.dumps(again))
    assert [c["name"] for c in init_containers(kubectl, "already")] == ["mesh-proxy"]
    table = columns(kubectl.run("get", "mutatingadmissionpolicy", SIDECAR, namespaced=False).stdout)
    assert [row[:3] for row in table] == [
        ["NAME", "MUTATIONS", "PARAMKIND"],
        [SIDECAR, "1", "mutations.example.com/v1/Sidecar"],
    ]
    table = columns(
        kubectl.run("get", "mutatingadmissionpolicybinding", SIDECAR, namespaced=False).stdout
    )
    assert [row[:4] for row in table] == [
        ["NAME", "POLICYNAME", "PARAMREF", "AGE"],
        [SIDECAR, SIDECAR, "<unset>", table[1][3]],
    ]


def test_a_parameterized_policy_mutates_deployments(
    kubectl: Kubectl, applied: list[dict[str, Any]]
) -> None:
    name = f"{kubectl.namespace}-replicas.example.com"
    kubectl.run(
        "create", "configmap", "defaults", "--from-literal=replicas=3", "--from-literal=team=web"
    )
    apply(
        kubectl,
        applied,
        {
            "apiVersion": GROUP_VERSION,
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["apps"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["deployments"],
                        }
                    ]
                },
                "reinvocationPolicy": "Never",
                "variables": [{"name": "team", "expression": "params.data.team"}],
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {
                            "expression": "Object{spec: Object.spec{replicas: "
                            "int(params.data.replicas)}}"
                        },
                    },
                    {
                        "patchType": "JSONPatch",
                        "jsonPatch": {
                            "expression": "[JSONPatch{op: 'add', path: '/metadata/labels/' + "
                            "jsonpatch.escapeKey('example.com/team'), value: variables.team}]"
                        },
                    },
                ],
            },
        },
        {
            "apiVersion": GROUP_VERSION,
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "paramRef": {"name": "defaults", "parameterNotFoundAction": "Deny"},
                "matchResources": {"namespaceSelector": own(kubectl)},
            },
        },
    )
    kubectl.run("create", "deployment", "web", "--image=nginx")
    created = kubectl.json("get", "deployment/web")
    assert created["spec"]["replicas"] == 3
    assert created["metadata"]["labels"] == {"app": "web", "example.com/team": "web"}
    table = columns(kubectl.run("get", "mutatingadmissionpolicy", name, namespaced=False).stdout)
    assert [row[:3] for row in table] == [
        ["NAME", "MUTATIONS", "PARAMKIND"],
        [name, "2", "v1/ConfigMap"],
    ]
    kubectl.run("delete", "configmap", "defaults")
    refused = kubectl.run("create", "deployment", "late", "--image=nginx", check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"error: failed to create deployment: policy '{name}' with binding '{name}' denied "
        "request: failed to configure binding: no params found for policy binding with `Deny` "
        "parameterNotFoundAction"
    )


def test_invalid_policies_are_refused_naming_the_field(kubectl: Kubectl) -> None:
    refused = refusal(kubectl, "admissionregistration-mutatingadmissionpolicy-no-expression.yaml")
    assert refused.strip() == (
        'The MutatingAdmissionPolicy "add-label.example.com" is invalid: '
        "spec.mutations[0].jsonPatch: Required value: must be specified when patchType is "
        "JSONPatch"
    )
    policy = yaml.safe_load(
        (CORPUS / "manifests" / "admissionregistration-mutatingadmissionpolicy-sidecar.yaml")
        .read_text()
        .split("---")[0]
    )
    policy["spec"]["mutations"] = []
    policy["spec"]["reinvocationPolicy"] = "Always"
    assert refused_document(kubectl, policy).strip() == (
        f'The MutatingAdmissionPolicy "{SIDECAR}" is invalid: \n'
        '* spec.reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", '
        '"Never"\n'
        "* spec.mutations: Required value: mutations must contain at least one item"
    )
    binding = {
        "apiVersion": GROUP_VERSION,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": "b"},
        "spec": {"policyName": "Not_A_Name"},
    }
    assert 'spec.policyName: Invalid value: "Not_A_Name"' in refused_document(kubectl, binding)


def test_explain(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "mutatingadmissionpolicy.spec", namespaced=False).stdout
    for field in (
        "paramKind\t<ParamKind>",
        "matchConstraints\t<MatchResources>",
        "mutations\t<[]Mutation>",
        "reinvocationPolicy\t<string>",
    ):
        assert field in out
    mutations = kubectl.run(
        "explain", "mutatingadmissionpolicy.spec.mutations", namespaced=False
    ).stdout
    assert "applyConfiguration\t<ApplyConfiguration>" in mutations
    assert "jsonPatch\t<JSONPatch>" in mutations


def test_python_client(api_client: k8s.ApiClient, namespace: str) -> None:
    api = k8s.AdmissionregistrationV1Api(api_client)
    name = f"{namespace}-labels.example.com"
    rules = k8s.V1MatchResources(
        resource_rules=[
            k8s.V1NamedRuleWithOperations(
                api_groups=[""], api_versions=["v1"], operations=["CREATE"], resources=["pods"]
            )
        ]
    )
    api.create_mutating_admission_policy(
        k8s.V1MutatingAdmissionPolicy(
            metadata=k8s.V1ObjectMeta(name=name),
            spec=k8s.V1MutatingAdmissionPolicySpec(
                match_constraints=rules,
                mutations=[
                    k8s.V1Mutation(
                        patch_type="JSONPatch",
                        json_patch=k8s.V1JSONPatch(expression="[]"),
                    )
                ],
                reinvocation_policy="Never",
            ),
        )
    )
    api.create_mutating_admission_policy_binding(
        k8s.V1MutatingAdmissionPolicyBinding(
            metadata=k8s.V1ObjectMeta(name=name),
            spec=k8s.V1MutatingAdmissionPolicyBindingSpec(policy_name=name),
        )
    )
    try:
        policies = [
            p for p in api.list_mutating_admission_policy().items if p.metadata.name == name
        ]
        assert [(p.spec.failure_policy, p.spec.reinvocation_policy) for p in policies] == [
            ("Fail", "Never")
        ]
        assert policies[0].spec.mutations[0].json_patch.expression == "[]"
        bindings = api.list_mutating_admission_policy_binding().items
        assert [b.spec.policy_name for b in bindings if b.metadata.name == name] == [name]
    finally:
        api.delete_mutating_admission_policy_binding(name)
        api.delete_mutating_admission_policy(name)
    assert name not in [p.metadata.name for p in api.list_mutating_admission_policy().items]
    assert name not in [b.metadata.name for b in api.list_mutating_admission_policy_binding().items]
