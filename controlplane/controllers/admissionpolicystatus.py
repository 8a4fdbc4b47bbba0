"""The validatingadmissionpolicy-status-controller: each ValidatingAdmissionPolicy's
``status.typeChecking``, as upstream's type-checking controller writes it.

Keys are policy names. A policy whose ``status.observedGeneration`` is behind its generation
is checked: the kinds its ``matchConstraints.resourceRules`` name exactly (no ``*``; at most
``MAX_TYPES``, as upstream) are found through discovery, their schemas in the server's
``/openapi/v3`` documents (so custom resources are checked like built-ins), and ``params`` is
typed by ``paramKind``'s schema. Each validation's ``expression`` and ``messageExpression`` is
checked against each kind; what fails becomes an ``expressionWarning`` whose ``fieldRef`` names
the expression and whose ``warning`` is upstream's text, one ``<group>/<version>, Kind=<kind>:
<cel-go issues>`` line group per kind. As upstream's ``TypeChecker.CheckContext``, only
validations are reported: auditAnnotations, matchConditions and variables get no warnings.

What is checked is what ``celcheck.type_issues`` checks, as cel-go's checker: field selections
down from ``object``, ``oldObject`` and ``params`` against the schemas and from ``variables``
against the policy's variables (``undefined field``), and the types of operators', functions'
and methods' arguments, macros' variables included (``found no matching overload``).  As
upstream's checker (which takes any result type: it is when a policy is written that upstream
requires a validation to be a bool), a validation of another type is no warning.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import msgspec

from controlplane.apiserver.crd import celcheck
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller
from controlplane.controllers.discovery import resource_list
from kube.api.kinds.admissionregistration_v1 import (
    ExpressionWarning,
    TypeChecking,
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicySpec,
    ValidatingAdmissionPolicyStatus,
)
from kube.client.errors import ApiError

NAME = "validatingadmissionpolicy-status-controller"
MAX_TYPES = 10
"""The most kinds one policy is checked against (upstream's maxTypesToCheck)."""

Schema = dict[str, Any]
Kind = tuple[str, str, str]
"""(group, version, kind)."""


def gvk_string(kind: Kind) -> str:
    """Upstream's GroupVersionKind.String(): ``apps/v1, Kind=Deployment``, ``/v1, Kind=Pod``."""
    group, version, name = kind
    return f"{group}/{version}, Kind={name}"


def expressions(spec: ValidatingAdmissionPolicySpec) -> list[tuple[str, str]]:
    """(fieldRef, expression) of the expressions upstream type-checks: each validation's
    expression and messageExpression."""
    found: list[tuple[str, str]] = []
    for i, validation in enumerate(spec.validations or ()):
        found.append((f"spec.validations[{i}].expression", validation.expression or ""))
        if validation.message_expression:
            found.append(
                (f"spec.validations[{i}].messageExpression", validation.message_expression)
            )
    return found


def warnings(
    spec: ValidatingAdmissionPolicySpec,
    kinds: Mapping[Kind, celcheck.TypedRoots],
) -> list[ExpressionWarning]:
    """The expression warnings of ``spec`` against each matched kind's typed roots."""
    variables = [(v.name or "", v.expression or "") for v in spec.variables or ()]
    found: list[ExpressionWarning] = []
    for field_ref, text in expressions(spec):
        per_kind = [
            f"{gvk_string(kind)}: {issues}"
            for kind, typed in kinds.items()
            if (issues := celcheck.type_issues(text, replace(typed, variables=variables)))
            is not None
        ]
        if per_kind:
            found.append(ExpressionWarning(field_ref=field_ref, warning="\n".join(per_kind)))
    return found


class SchemaResolver:
    """Kinds and their OpenAPI schemas, asked of the API server (discovery, /openapi/v3)."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.client = ctx.client

    async def kind_of(self, group: str, version: str, resource: str) -> Kind | None:
        group_version = f"{group}/{version}" if group else version
        try:
            listed = await resource_list(self.client, group_version)
        except ApiError:
            return None
        for entry in listed:
            if entry.path.plural == resource:
                return group, version, entry.kind
        return None

    async def document(self, group: str, version: str) -> Schema | None:
        path = f"/openapi/v3/apis/{group}/{version}" if group else f"/openapi/v3/api/{version}"
        try:
            loaded: Schema = msgspec.json.decode(await self.client.request("GET", path))
        except ApiError:
            return None
        return loaded

    async def typed(self, kind: Kind, params: Kind | None) -> celcheck.TypedRoots | None:
        """``object``/``oldObject`` typed as ``kind`` and ``params`` as ``params``' kind."""
        components: dict[str, Schema] = {}
        roots: dict[str, Schema | None] = {}
        for name, wanted in (("object", kind), ("params", params)):
            if wanted is None:
                continue
            document = await self.document(*wanted[:2])
            if document is None:
                continue
            schemas: dict[str, Schema] = document.get("components", {}).get("schemas", {})
            components.update(schemas)
            roots[name] = _kind_schema(schemas, wanted)
        if roots.get("object") is None:
            return None
        roots["oldObject"] = roots["object"]
        return celcheck.TypedRoots(roots, components)


def _kind_schema(schemas: Mapping[str, Schema], kind: Kind) -> Schema | None:
    """The schema tagged with ``kind``'s x-kubernetes-group-version-kind."""
    for schema in schemas.values():
        for tag in schema.get("x-kubernetes-group-version-kind") or ():
            if (tag.get("group", ""), tag.get("version"), tag.get("kind")) == kind:
                return schema
    return None


class AdmissionPolicyStatusController(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.resolver = SchemaResolver(ctx)
        self.policies = ctx.informers.informer_for(ValidatingAdmissionPolicy)
        self.policies.add_event_handler(self.enqueue, self.enqueue_update)

    async def sync_key(self, key: str) -> None:
        policy = self.policies.lister.get(key)
        if policy is None or policy.spec is None:
            return
        generation = policy.metadata.generation
        status = policy.status or ValidatingAdmissionPolicyStatus()
        if status.observed_generation == generation:
            return
        kinds = await self._kinds(policy.spec)
        found = warnings(policy.spec, kinds)
        updated = copy.deepcopy(policy)
        updated.status = ValidatingAdmissionPolicyStatus(
            observed_generation=generation,
            type_checking=TypeChecking(expression_warnings=found or None),
            conditions=status.conditions,
        )
        await self.ctx.client.update_status(updated)

    async def _kinds(self, spec: ValidatingAdmissionPolicySpec) -> dict[Kind, celcheck.TypedRoots]:
        """The typed roots of each kind the policy's rules name exactly."""
        params: Kind | None = None
        if spec.param_kind is not None and spec.param_kind.api_version and spec.param_kind.kind:
            group, _, version = spec.param_kind.api_version.rpartition("/")
            params = (group, version, spec.param_kind.kind)
        kinds: dict[Kind, celcheck.TypedRoots] = {}
        constraints = spec.match_constraints
        for rule in (constraints.resource_rules if constraints else None) or ():
            for group in rule.api_groups or ():
                for version in rule.api_versions or ():
                    for resource in rule.resources or ():
                        if "*" in (group, version) or "*" in resource or "/" in resource:
                            continue
                        kind = await self.resolver.kind_of(group, version, resource)
                        if kind is None or kind in kinds or len(kinds) >= MAX_TYPES:
                            continue
                        typed = await self.resolver.typed(kind, params)
                        if typed is not None:
                            kinds[kind] = typed
        return kinds


def new(ctx: ControllerContext) -> AdmissionPolicyStatusController:
    return AdmissionPolicyStatusController(ctx)
