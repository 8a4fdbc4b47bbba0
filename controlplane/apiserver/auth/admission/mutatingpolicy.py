"""MutatingAdmissionPolicy: CEL mutations the API server applies itself, to the requests a
binding applies a policy to (upstream's ``admission/plugin/policy/mutating``).

Matching is the ValidatingAdmissionPolicy plugin's (``policy``): every policy (in name order)
whose ``matchConstraints`` match a create or update, once per binding of it (in name order)
whose ``matchResources`` also match, once per parameter object the binding selects, when its
``matchConditions`` hold; the admission configuration kinds are exempt, so that a broken policy
cannot lock out its own repair.  Then each of the policy's ``mutations``, in order, sees the
object as the previous ones left it (``object``, and the policy's ``variables`` evaluated
afresh) and changes it:

- ``ApplyConfiguration``: the expression builds ``Object{spec: Object.spec{...}}`` (``cel``'s
  ``TypeName``; nested type names must follow the field names, as upstream checks them),
  merged into the object as server-side apply merges a configuration (``apply.merge``:
  structs and maps key by key, map lists by their keys, sets unioned).  Setting an atomic
  list or map is refused, as upstream refuses it (``may not mutate atomic arrays, maps or
  structs: .spec.initContainers[0].args``): what the configuration leaves out would be lost;
- ``JSONPatch``: the expression returns a list of ``JSONPatch{op, path, value, from}``, applied
  as RFC 6902 (``patch.apply_json_patch``), ``jsonpatch.escapeKey`` escaping map keys; a
  ``test`` operation that fails leaves the object as it is (upstream's conditional patches).

The result must decode as the object's kind and is defaulted as a request's body is (an added
container gets its pull and termination-message policies); what it sets is validated with
everything else, after admission's mutating steps.  Errors (an expression that fails or returns
the wrong shape, a patch that does not apply, a binding whose parameters are missing): a
failing mutation skips only itself and the other policies still run; then, under
``failurePolicy: Fail`` (the default), the request is refused as upstream refuses it: a 403
whose message is the first error's (``policy 'p' with binding 'b' denied request: ...``),
reason ``Invalid`` (``Forbidden`` for a binding that cannot be configured), every error a
cause; ``Ignore`` passes over them.  Reinvocation as upstream: a policy's change asks for the
mutating steps to run again (``webhook.Reinvocation``, shared with the webhooks), and the
second run applies again only the ``reinvocationPolicy: IfNeeded`` policies that ran before a
later change.

Not done: type-checking mutations against the matched kinds' schemas (they are checked when
the result is decoded), atomic structs (the declarations mark atomic lists and maps only, so a
Deployment's ``spec.selector`` is merged), and mutating a custom resource at a version other
than the request's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.auth import Authorizer
from controlplane.apiserver.auth.admission import policy, webhook
from controlplane.apiserver.crd import cel
from controlplane.apiserver.endpoints import apply, patch
from controlplane.apiserver.registry.store import RequestContext
from controlplane.apiserver.storage.watchcache import WatchCache
from kube.api import codec, walk
from kube.api.kinds.admissionregistration_v1 import (
    GROUP,
    MutatingAdmissionPolicy,
    MutatingAdmissionPolicyBinding,
    Mutation,
)
from kube.api.meta_v1 import Resource, StatusCause, StatusDetails
from kube.api.scheme import KindInfo

MUTATED = ("CREATE", "UPDATE")
"""The operations whose object a policy can change (a DELETE's is null)."""


class MutationError(Exception):
    """Why a policy could not be applied through a binding, and the reason it refuses with."""

    def __init__(self, message: str, reason: str = "Invalid") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Failure:
    """An error of one policy through one binding, worded as upstream's policy errors."""

    message: str
    reason: str


def mutating_policies(
    policies: WatchCache,
    bindings: WatchCache,
    namespaces: WatchCache,
    stores: webhook.Stores,
    authorizer: Authorizer,
) -> webhook.Mutation:
    async def admit(
        operation: str,
        info: KindInfo,
        obj: Resource,
        old: Resource | None,
        ctx: RequestContext,
        rounds: webhook.Reinvocation,
    ) -> None:
        if operation not in MUTATED or (info.group == GROUP and info.plural in policy.EXEMPT):
            return
        request = policy.Request(operation, info, obj, old, ctx)
        failures: list[Failure] = []
        kinds = (MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding)
        async for mutating, binding, target in policy.applicable(
            policies, bindings, kinds, namespaces, stores, request
        ):
            key = f"MutatingAdmissionPolicy/{mutating.metadata.name}/{binding.metadata.name}"
            if rounds.again and key not in rounds.reinvoke:
                continue
            spec = mutating.spec
            assert spec is not None
            problems: list[MutationError] = []
            changed = await _apply(
                mutating, binding, target, namespaces, stores, authorizer, request, problems
            )
            if spec.failure_policy != "Ignore":
                failures.extend(
                    Failure(
                        f"policy '{mutating.metadata.name}' with binding "
                        f"'{binding.metadata.name}' denied request: {problem}",
                        problem.reason,
                    )
                    for problem in problems
                )
            if changed:
                rounds.changed()
                rounds.wanted = True
            if spec.reinvocation_policy == "IfNeeded":
                rounds.invoked.add(key)
        if failures:
            raise _refusal(failures, info, obj)

    return admit


async def _apply(
    mutating: MutatingAdmissionPolicy,
    binding: MutatingAdmissionPolicyBinding,
    target: KindInfo,
    namespaces: WatchCache,
    stores: webhook.Stores,
    authorizer: Authorizer,
    request: policy.Request,
    problems: list[MutationError],
) -> bool:
    """The policy's mutations through this binding, once per parameter object; whether the
    object changed.  What goes wrong is added to ``problems``: a binding that cannot be
    configured or a match condition that cannot be evaluated skips the evaluation, a mutation
    that fails skips only itself (as upstream)."""
    spec, bound = mutating.spec, binding.spec
    assert spec is not None and bound is not None
    try:
        params = await policy.params_of(spec.param_kind, bound.param_ref, request.obj, stores)
    except policy.ConfigurationError as error:
        problems.append(MutationError(f"failed to configure binding: {error}", "Forbidden"))
        return False
    namespace = await policy.namespace_object(namespaces, request.info, request.obj)
    declared = spec.variables or ()
    changed = False
    for param in params:
        # The expressions see the object as it is now: their variables are made afresh.
        scope = await policy.scope(target, stores, authorizer, request, param, namespace, declared)
        held, failed = webhook.conditions_hold(spec.match_conditions or (), cel.POLICY, scope)
        if not held:
            continue
        if failed:
            problems.append(MutationError(failed[0]))
            continue
        for mutation in spec.mutations or ():
            scope = await policy.scope(
                target, stores, authorizer, request, param, namespace, declared
            )
            try:
                changed = _mutate(mutation, {**scope, **cel.mutation_variables()}, request) or (
                    changed
                )
            except MutationError as error:
                problems.append(error)
    return changed


def _mutate(mutation: Mutation, variables: dict[str, Any], request: policy.Request) -> bool:
    """Apply one mutation to the request's object (in place); whether it changed."""
    info, obj = request.info, request.obj
    mutated = _mutated(mutation, codec.to_builtins(obj), variables, info)
    try:
        decoded = codec.from_builtins(mutated, info.cls).obj
    except codec.DecodeError as error:
        raise MutationError(f"the mutated object is not valid: {error}") from None
    walk.set_defaults(decoded)
    if (decoded.api_version, decoded.kind) != (obj.api_version, obj.kind):
        raise MutationError("a mutation may not change the object's apiVersion or kind")
    return webhook.adopt(obj, decoded)


def _mutated(
    mutation: Mutation, document: dict[str, Any], variables: dict[str, Any], info: KindInfo
) -> dict[str, Any]:
    """The document with one mutation applied (a new document)."""
    chosen = mutation.apply_configuration or mutation.json_patch
    expression = (chosen.expression if chosen is not None else None) or ""
    try:
        result = cel.compile_expression(expression, cel.MUTATION).evaluate(variables)
        if mutation.patch_type == "ApplyConfiguration":
            return _applied(cel.apply_configuration(result), document, info)
        operations = cel.json_patch(result)
    except (cel.CompileError, cel.EvaluationError) as error:
        raise MutationError(f"expression '{expression}' resulted in error: {error}") from None
    try:
        patched = patch.apply_json_patch(document, operations)
    except patch.TestFailed:
        return document  # a failed test leaves the object as it is (as upstream)
    except patch.PatchError as error:
        raise MutationError(f"JSON Patch: {error}") from None
    if not isinstance(patched, dict):
        raise MutationError("the JSON patch does not leave an object")
    return patched


def _applied(config: dict[str, Any], document: dict[str, Any], info: KindInfo) -> dict[str, Any]:
    """An apply configuration merged into the document, unless it sets a list or map that the
    merge would replace whole (upstream refuses those: what they leave out would be lost)."""
    atomics = apply.atomic_paths(config, info.cls)
    if atomics:
        raise MutationError(
            "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, "
            f"maps or structs: {', '.join(atomics)}"
        )
    try:
        return apply.merge(document, config, info.cls)
    except apply.SchemaError as error:
        raise MutationError(f"error applying patch: failed to merge patch: {error}") from None


def _refusal(failures: list[Failure], info: KindInfo, obj: Resource) -> errors.ApiError:
    """Upstream's refusal by policies: a 403 whose message and reason are the first failure's,
    every failure a cause."""
    name = obj.metadata.name or ""
    return errors.ApiError(
        403,
        failures[0].reason,
        failures[0].message,
        StatusDetails(
            name=name or None,
            group=info.group or None,
            kind=info.plural,
            causes=[StatusCause(message=f.message) for f in failures],
        ),
    )
