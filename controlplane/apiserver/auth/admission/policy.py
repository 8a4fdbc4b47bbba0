"""ValidatingAdmissionPolicy: CEL validations the API server runs itself, on the requests a
binding applies a policy to (upstream's ``admission/plugin/policy/validating``).

For every write (the admission configuration kinds themselves excepted, so that a broken
policy cannot lock out its own repair), each ``ValidatingAdmissionPolicy`` (in name order)
whose ``matchConstraints`` match the request is evaluated once per binding of it (in name
order) whose ``matchResources`` also match, and once per parameter object the binding selects:

- **matching**: ``resourceRules`` (with ``resourceNames``) minus ``excludeResourceRules``,
  ``namespaceSelector`` and ``objectSelector``, ``matchPolicy: Equivalent`` as webhooks have
  them (``webhook.matched_version``: a custom resource's other served version);
- **parameters**: with ``paramKind``, the binding's ``paramRef`` names one object or selects
  any number, in ``paramRef.namespace`` or, for a namespaced kind, the request's namespace;
  none found: ``parameterNotFoundAction: Deny`` refuses, ``Allow`` skips the binding; a
  binding without ``paramRef`` is evaluated with null ``params``;
- **expressions** (``cel.POLICY``): ``object``, ``oldObject``, ``request``, ``params``,
  ``namespaceObject``, ``authorizer`` and ``variables.<name>`` (each variable evaluated when
  first read); ``matchConditions`` first (one false: skipped), then each validation: false is
  a failure with its ``messageExpression`` (a one-line string of at most 5 KiB), else its
  ``message``, else ``failed expression: <expression>``, and its ``reason`` (default
  ``Invalid``: 422);
- **actions**: each failure goes where the binding's ``validationActions`` say: ``Deny``
  refuses the request (the first denial, as upstream words it), ``Warn`` adds a warning,
  ``Audit`` adds ``validation.policy.admission.k8s.io/validation_failure`` to the request's
  audit event;
- **errors** (an expression that cannot be evaluated, a binding that cannot be configured):
  ``failurePolicy: Fail`` (the default) makes them failures like the others, ``Ignore``
  passes over them;
- ``auditAnnotations``: each ``valueExpression`` (a string, or null for none) becomes
  ``<policy>/<key>`` in the audit event.

Policies and bindings are read from watch caches; parameters from their kind's store, so a
parameter object created a moment ago is seen.  What is not done: ``status.typeChecking``
(upstream checks expressions against the matched kinds' schemas and reports warnings).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from celpy import celtypes

from controlplane.apiserver import errors
from controlplane.apiserver.auth import Authorizer
from controlplane.apiserver.auth.admission import webhook
from controlplane.apiserver.crd import cel
from controlplane.apiserver.registry.store import Admission, RequestContext, ResourceStore
from controlplane.apiserver.storage.watchcache import WatchCache
from kube.api import codec
from kube.api.kinds.admissionregistration_v1 import (
    MatchResources,
    MutatingAdmissionPolicy,
    MutatingAdmissionPolicyBinding,
    NamedRuleWithOperations,
    ParamKind,
    ParamRef,
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    Variable,
)
from kube.api.labels import Selector
from kube.api.meta_v1 import Resource, StatusCause, StatusDetails
from kube.api.scheme import KindInfo

VALIDATION_FAILURE = "validation.policy.admission.k8s.io/validation_failure"
MAX_MESSAGE_BYTES = 5 * 1024
EXEMPT = {
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
}
"""The admission configuration kinds no policy applies to (upstream's exemption)."""
REASON_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}


class ConfigurationError(Exception):
    """A binding that cannot be applied (its parameters missing or unreadable)."""


@dataclass(frozen=True)
class Request:
    """The write being admitted."""

    operation: str
    info: KindInfo
    obj: Resource
    old: Resource | None
    ctx: RequestContext


@dataclass(frozen=True)
class Failure:
    """A validation that did not hold (or could not be evaluated) for one evaluation."""

    message: str
    reason: str
    index: int
    """The validation's place in the policy (-1: not a validation's)."""


@dataclass(frozen=True)
class Evaluation:
    """What a policy, through one binding, found: failures and audit annotations."""

    policy: ValidatingAdmissionPolicy
    binding: ValidatingAdmissionPolicyBinding
    failures: list[Failure]
    annotations: dict[str, str]


def validating_policies(
    policies: WatchCache,
    bindings: WatchCache,
    namespaces: WatchCache,
    stores: webhook.Stores,
    authorizer: Authorizer,
) -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if info.group == "admissionregistration.k8s.io" and info.plural in EXEMPT:
            return
        request = Request(operation, info, obj, old, ctx)
        evaluations: list[Evaluation] = []
        kinds = (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding)
        async for policy, binding, target in applicable(
            policies, bindings, kinds, namespaces, stores, request
        ):
            evaluations.append(
                await _evaluate(policy, binding, target, namespaces, stores, authorizer, request)
            )
        denial: tuple[Evaluation, Failure] | None = None
        for evaluation in evaluations:
            record(evaluation, ctx)
            actions = (evaluation.binding.spec and evaluation.binding.spec.validation_actions) or ()
            if denial is None and "Deny" in actions and evaluation.failures:
                denial = (evaluation, evaluation.failures[0])
        if denial is not None:
            raise _refusal(*denial, info, obj)

    return admit


def _by_name(objects: list[Resource], cls: type[Any]) -> list[Any]:
    return sorted((o for o in objects if isinstance(o, cls)), key=lambda o: o.metadata.name or "")


Policy = TypeVar("Policy", ValidatingAdmissionPolicy, MutatingAdmissionPolicy)
Binding = TypeVar("Binding", ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicyBinding)


async def applicable(
    policies: WatchCache,
    bindings: WatchCache,
    kinds: tuple[type[Policy], type[Binding]],
    namespaces: WatchCache,
    stores: webhook.Stores,
    request: Request,
) -> AsyncIterator[tuple[Policy, Binding, KindInfo]]:
    """Each policy (in name order) whose ``matchConstraints`` match the request, with each of
    its bindings (in name order) whose ``matchResources`` match it too, and the version of the
    resource matched; for either policy kind.  A policy without bindings is not matched.  Each
    match is made when it is reached, so a mutating policy sees what those before it did."""
    policy_kind, binding_kind = kinds
    bound_to: dict[str, list[Binding]] = {}
    for binding in _by_name(bindings.objects(), binding_kind):
        if binding.spec is not None:
            bound_to.setdefault(binding.spec.policy_name or "", []).append(binding)
    for policy in _by_name(policies.objects(), policy_kind):
        spec = policy.spec
        applied = bound_to.get(policy.metadata.name or "", [])
        if spec is None or spec.match_constraints is None or not applied:
            continue
        target = await _matched(spec.match_constraints, namespaces, stores, request)
        if target is None:
            continue
        for binding in applied:
            assert binding.spec is not None
            constraint = binding.spec.match_resources
            if constraint is None or await _matched(
                constraint, namespaces, stores, request, rules_required=False
            ):
                yield policy, binding, target


async def _matched(
    match: MatchResources,
    namespaces: WatchCache,
    stores: webhook.Stores,
    request: Request,
    *,
    rules_required: bool = True,
) -> KindInfo | None:
    """The version of the resource ``match`` matches the request at, or None.  A binding's
    ``matchResources`` without ``resourceRules`` constrains only by its selectors."""
    operation, info, obj, old = request.operation, request.info, request.obj, request.old
    name = obj.metadata.name or (old.metadata.name if old is not None else "") or ""

    def named(rules: Sequence[NamedRuleWithOperations] | None) -> list[NamedRuleWithOperations]:
        return [r for r in rules or () if not r.resource_names or name in r.resource_names]

    sub = request.ctx.subresource
    if match.resource_rules or rules_required:
        target = webhook.matched_version(
            named(match.resource_rules), match.match_policy, operation, info, sub, stores
        )
        if target is None:
            return None
    else:
        target = info
    excluded = named(match.exclude_resource_rules)
    if webhook.matched_version(excluded, match.match_policy, operation, info, sub, stores):
        return None
    if not webhook.selected(match.object_selector, obj, old):
        return None
    if not await webhook.namespace_selected(match.namespace_selector, namespaces, info, obj):
        return None
    return target


async def _evaluate(
    policy: ValidatingAdmissionPolicy,
    binding: ValidatingAdmissionPolicyBinding,
    target: KindInfo,
    namespaces: WatchCache,
    stores: webhook.Stores,
    authorizer: Authorizer,
    request: Request,
) -> Evaluation:
    """The policy through this binding, once per parameter object; errors as the policy's
    ``failurePolicy`` says."""
    spec = policy.spec
    assert spec is not None
    evaluation = Evaluation(policy, binding, [], {})
    fail = spec.failure_policy != "Ignore"
    try:
        assert binding.spec is not None
        params = await params_of(spec.param_kind, binding.spec.param_ref, request.obj, stores)
    except ConfigurationError as error:
        if fail:
            evaluation.failures.append(
                Failure(f"failed to configure binding: {error}", "Invalid", -1)
            )
        return evaluation
    namespace = await namespace_object(namespaces, request.info, request.obj)
    for param in params:
        variables = await scope(
            target, stores, authorizer, request, param, namespace, spec.variables or ()
        )
        held, problems = webhook.conditions_hold(spec.match_conditions or (), cel.POLICY, variables)
        if not held:
            continue
        if problems:
            if fail:
                evaluation.failures.append(Failure(problems[0], "Invalid", -1))
            continue
        evaluation.failures.extend(_validate(spec.validations or (), variables, fail))
        evaluation.annotations.update(
            _annotations(policy.metadata.name or "", spec.audit_annotations or (), variables)
        )
    return evaluation


async def params_of(
    kind: ParamKind | None, ref: ParamRef | None, obj: Resource, stores: webhook.Stores
) -> list[dict[str, Any] | None]:
    """The parameter objects a binding's ``ref`` selects, for either policy kind: ``[None]``
    for a policy without ``paramKind`` or a binding without ``paramRef`` (evaluated with null
    ``params``, as upstream)."""
    if kind is None or ref is None:
        return [None]
    store = _store_of(stores, kind.api_version or "", kind.kind or "")
    if store is None:
        raise ConfigurationError(
            f"failed to find resource referenced by paramKind: '{kind.api_version}, "
            f"Kind={kind.kind}'"
        )
    namespace = ref.namespace or ""
    if namespace and not store.info.namespaced:
        raise ConfigurationError(
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`"
        )
    if store.info.namespaced and not namespace:
        namespace = obj.metadata.namespace or ""
        if not namespace:
            raise ConfigurationError(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped "
                "resources"
            )
    found: list[Resource]
    if ref.name:
        try:
            found = [await store.get(namespace, ref.name)]
        except errors.ApiError as error:
            if error.code != 404:
                raise
            found = []
    else:
        selector = ref.selector
        assert selector is not None
        wanted = Selector.from_label_selector(selector.match_labels, selector.match_expressions)
        listed = await store.list(namespace)
        found = [o for o in listed.items if wanted.matches(o.metadata.labels or {})]
    if not found and ref.parameter_not_found_action != "Allow":
        raise ConfigurationError(
            "no params found for policy binding with `Deny` parameterNotFoundAction"
        )
    return [codec.to_builtins(o) for o in found]


async def scope(
    target: KindInfo,
    stores: webhook.Stores,
    authorizer: Authorizer,
    request: Request,
    param: dict[str, Any] | None,
    namespace: dict[str, Any] | None,
    declared: Sequence[Variable],
) -> dict[str, celtypes.Value]:
    """What a policy's expressions see for one parameter object: the request's admission
    variables (its objects at ``target``'s version), ``params``, ``namespaceObject`` and the
    policy's ``variables``."""
    info, obj, ctx = request.info, request.obj, request.ctx
    body = await webhook.admission_request(
        target, stores, request.operation, info, obj, request.old, ctx
    )
    variables: dict[str, celtypes.Value] = {
        **webhook.expression_variables(body, authorizer, info, obj, ctx),
        "params": cel.to_cel_json(param),
        "namespaceObject": cel.to_cel_json(namespace),
    }
    variables["variables"] = LazyVariables(
        {v.name or "": v.expression or "" for v in declared}, variables
    )
    return variables


def _store_of(stores: webhook.Stores, api_version: str, kind: str) -> ResourceStore | None:
    for store in stores.values():
        if store.info.api_version == api_version and store.info.kind == kind:
            return store
    return None


async def namespace_object(
    namespaces: WatchCache, info: KindInfo, obj: Resource
) -> dict[str, Any] | None:
    if not info.namespaced or not obj.metadata.namespace:
        return None
    found = await namespaces.lookup("", obj.metadata.namespace)
    return None if found is None else codec.to_builtins(found)


class LazyVariables(celtypes.MapType):
    """CEL's ``variables``: each policy variable evaluated when first read, then kept (a
    variable no expression reads never fails the policy)."""

    def __init__(self, expressions: Mapping[str, str], scope: Mapping[str, celtypes.Value]):
        super().__init__({})
        self._expressions = expressions
        self._scope = scope
        self._values: dict[str, celtypes.Value] = {}

    def __contains__(self, key: object) -> bool:
        return str(key) in self._expressions

    def __getitem__(self, key: Any) -> celtypes.Value:
        name = str(key)
        if name not in self._values:
            if name not in self._expressions:
                raise KeyError(name)
            program = cel.compile_expression(self._expressions[name], cel.POLICY)
            self._values[name] = program.evaluate(self._scope)
        return self._values[name]


def _validate(
    validations: Sequence[Any], variables: Mapping[str, celtypes.Value], fail: bool
) -> list[Failure]:
    failures = []
    for index, validation in enumerate(validations):
        expression = validation.expression or ""
        try:
            result = cel.compile_expression(expression, cel.POLICY).evaluate(variables)
            if not isinstance(result, celtypes.BoolType):
                raise cel.EvaluationError("must evaluate to bool")
        except (cel.CompileError, cel.EvaluationError) as error:
            if fail:
                message = f"expression '{expression}' resulted in error: {error}"
                failures.append(Failure(message, "Invalid", index))
            continue
        if not result:
            message = _message(validation, variables)
            failures.append(Failure(message, validation.reason or "Invalid", index))
    return failures


def _message(validation: Any, variables: Mapping[str, celtypes.Value]) -> str:
    """A failed validation's message: its messageExpression's, if that gives one line of at
    most 5 KiB, else its message, else the expression's."""
    if validation.message_expression:
        try:
            value = cel.compile_expression(validation.message_expression, cel.POLICY).evaluate(
                variables
            )
        except (cel.CompileError, cel.EvaluationError):
            value = None
        if isinstance(value, str):  # celpy gives plain str for some string results
            text = value.strip()
            if text and "\n" not in text and len(text.encode()) <= MAX_MESSAGE_BYTES:
                return text
    message = (validation.message or "").strip()
    return message or f"failed expression: {(validation.expression or '').strip()}"


def _annotations(
    policy: str, annotations: Sequence[Any], variables: Mapping[str, celtypes.Value]
) -> dict[str, str]:
    found = {}
    for annotation in annotations:
        try:
            value = cel.compile_expression(annotation.value_expression or "", cel.POLICY).evaluate(
                variables
            )
        except (cel.CompileError, cel.EvaluationError):
            continue
        if isinstance(value, str) and value.strip():
            found[f"{policy}/{annotation.key}"] = value.strip()
    return found


def record(evaluation: Evaluation, ctx: RequestContext) -> None:
    """Warnings and audit annotations, for every binding whatever the others decide."""
    spec = evaluation.binding.spec
    assert spec is not None
    actions = spec.validation_actions or []
    policy, binding = spec.policy_name or "", evaluation.binding.metadata.name or ""
    for failure in evaluation.failures:
        if "Warn" in actions:
            ctx.warnings.append(
                f"Validation failed for ValidatingAdmissionPolicy '{policy}' with binding "
                f"'{binding}': {failure.message}"
            )
        if "Audit" in actions:
            recorded = json.loads(ctx.audit_annotations.get(VALIDATION_FAILURE, "[]"))
            recorded.append(
                {
                    "message": failure.message,
                    "policy": policy,
                    "binding": binding,
                    "expressionIndex": failure.index,
                    "validationActions": actions,
                }
            )
            ctx.audit_annotations[VALIDATION_FAILURE] = json.dumps(recorded, separators=(",", ":"))
    for key, value in evaluation.annotations.items():
        ctx.audit_annotations.setdefault(key, value)


def _refusal(
    evaluation: Evaluation, failure: Failure, info: KindInfo, obj: Resource
) -> errors.ApiError:
    policy = evaluation.policy.metadata.name or ""
    binding = evaluation.binding.metadata.name or ""
    cause = (
        f"ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: "
        f"{failure.message}"
    )
    name = obj.metadata.name or ""
    return errors.ApiError(
        REASON_CODES.get(failure.reason, 400),
        failure.reason,
        f'{info.group_resource} "{name}" is forbidden: {cause}',
        StatusDetails(
            name=name or None,
            group=info.group or None,
            kind=info.plural,
            causes=[StatusCause(message=cause)],
        ),
    )
