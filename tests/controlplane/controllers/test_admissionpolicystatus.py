"""The validatingadmissionpolicy-status-controller, with fake informers and a fake API whose
discovery and ``/openapi/v3`` answers are the scheme's own documents."""

from __future__ import annotations

from typing import Any

import msgspec

from controlplane.controllers import admissionpolicystatus
from kube.api import openapi
from kube.api.kinds.admissionregistration_v1 import (
    MatchResources,
    NamedRuleWithOperations,
    TypeChecking,
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicySpec,
    ValidatingAdmissionPolicyStatus,
    Validation,
    Variable,
)
from kube.api.meta_v1 import ObjectMeta
from tests.controlplane.controllers.fakes import harness, stamp
from tests.fakeapi import Action, RawRequest

DEPLOYMENTS = {
    "kind": "APIResourceList",
    "groupVersion": "apps/v1",
    "resources": [{"name": "deployments", "namespaced": True, "kind": "Deployment"}],
}


def _serve_discovery_and_openapi(action: Action) -> Any:
    raw = action.obj
    assert isinstance(raw, RawRequest)
    if raw.path == "/apis/apps/v1":
        return msgspec.json.encode(DEPLOYMENTS)
    if raw.path == "/openapi/v3/apis/apps/v1":
        return msgspec.json.encode(openapi.document("apps", "v1"))
    return None


def policy(
    expression: str, resources: list[str], observed: int | None = None
) -> ValidatingAdmissionPolicy:
    rule = NamedRuleWithOperations(
        operations=["CREATE"], api_groups=["apps"], api_versions=["v1"], resources=resources
    )
    return stamp(
        ValidatingAdmissionPolicy(
            metadata=ObjectMeta(name="p", generation=3),
            spec=ValidatingAdmissionPolicySpec(
                match_constraints=MatchResources(resource_rules=[rule]),
                validations=[Validation(expression=expression)],
            ),
            status=ValidatingAdmissionPolicyStatus(observed_generation=observed),
        )
    )


async def type_checking(
    resources: list[str], written: ValidatingAdmissionPolicy | None = None
) -> TypeChecking:
    """The typeChecking written for a policy (by default, one with a typo) matching
    ``resources``, once its generation is observed."""
    h = harness()
    h.client.react("request", "GET", _serve_discovery_and_openapi)
    h.store(written or policy("object.spec.replicaz > 1", resources))
    await admissionpolicystatus.new(h.ctx).sync("p")
    stored = h.client.objects[(ValidatingAdmissionPolicy, None, "p")]
    assert isinstance(stored, ValidatingAdmissionPolicy) and stored.status is not None
    assert stored.status.observed_generation == 3
    assert stored.status.type_checking is not None
    return stored.status.type_checking


async def test_a_typo_is_a_warning_with_the_generation_observed() -> None:
    (warning,) = (await type_checking(["deployments"])).expression_warnings or []
    assert warning.field_ref == "spec.validations[0].expression"
    assert warning.warning == (
        "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'\n"
        " | object.spec.replicaz > 1\n"
        " | ...........^"
    )


async def test_wildcards_are_not_type_checked() -> None:
    assert (await type_checking(["*"])).expression_warnings is None


async def test_an_observed_generation_is_not_checked_again() -> None:
    h = harness()
    h.store(policy("object.spec.replicaz > 1", ["deployments"], observed=3))
    await admissionpolicystatus.new(h.ctx).sync("p")
    assert h.client.actions == []
    assert h.client.reads == []


async def test_validations_see_the_policy_variables_typed() -> None:
    written = policy("variables.image.startsWith(1) || variables.imagez == ''", ["deployments"])
    assert written.spec is not None
    written.spec.variables = [
        Variable(name="image", expression="object.spec.template.spec.containers[0].image")
    ]
    (warning,) = (await type_checking(["deployments"], written)).expression_warnings or []
    assert warning.warning == (
        "apps/v1, Kind=Deployment: ERROR: <input>:1:27: found no matching overload for "
        "'startsWith' applied to 'string.(int)'\n"
        " | variables.image.startsWith(1) || variables.imagez == ''\n"
        " | ..........................^\n"
        "ERROR: <input>:1:43: undefined field 'imagez'\n"
        " | variables.image.startsWith(1) || variables.imagez == ''\n"
        " | ..........................................^"
    )
