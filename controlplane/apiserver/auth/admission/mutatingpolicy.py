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
  ``TypeName``), merged into the object as server-side apply merges a configuration
  (``apply.merge``: structs and maps key by key, map lists by their keys, sets unioned,
  atomic lists replaced);
- ``JSONPatch``: the expression returns a list of ``JSONPatch{op, path, value, from}``, applied
  as RFC 6902 (``patch.apply_json_patch``), ``jsonpatch.escapeKey`` escaping map keys.

The result must decode as the object's kind and is defaulted as a request's body is (an added
container gets its pull and termination-message policies); what it sets is validated with
everything else, after admission's mutating steps. An error (an expression that fails or
returns the wrong shape, a patch that does not apply, missing parameters): ``failurePolicy:
Fail`` (the default) refuses the request, ``Ignore`` skips that binding. Reinvocation as
upstream: a policy's change asks for the mutating steps to run again (``webhook.Reinvocation``,
shared with the webhooks), and the second run applies again only the ``reinvocationPolicy:
IfNeeded`` policies that ran before a later change.

Not done: type-checking mutations against the matched kinds' schemas (they are checked when
the result is decoded), and mutating a custom resource at a version other than the request's.
"""

from __future__ import annotations

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
from kube.api.meta_v1 import Resource
from kube.api.scheme import KindInfo

MUTATED = ("CREATE", "UPDATE")
"""The operations whose object a policy can change (a DELETE's is null)."""


class MutationError(Exception):
    """Why a policy could not be applied through a binding."""


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
        kinds = (MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding)
        async for mutating, binding, target in policy.applicable(
            policies, bindings, kinds, namespaces, stores, request
        ):
            key = f"MutatingAdmissionPolicy/{mutating.metadata.name}/{binding.metadata.name}"
            if rounds.again and key not in rounds.reinvoke:
                continue
            spec = mutating.spec
            assert spec is not None
            try:
                changed = await _apply(
                    mutating, binding, target, namespaces, stores, authorizer, request
                )
            except MutationError as error:
                if spec.failure_policy == "Ignore":
                    continue
                raise _refusal(mutating, binding, str(error), info, obj) from None
            if changed:
                rounds.changed()
                rounds.wanted = True
            if spec.reinvocation_policy == "IfNeeded":
                rounds.invoked.add(key)

    return admit


async def _apply(
    mutating: MutatingAdmissionPolicy,
    binding: MutatingAdmissionPolicyBinding,
    target: KindInfo,
    namespaces: WatchCache,
    stores: webhook.Stores,
    authorizer: Authorizer,
    request: policy.Request,
) -> bool:
    """The policy's mutations through this binding, once per parameter object; whether the
    object changed."""
    spec, bound = mutating.spec, binding.spec
    assert spec is not None and bound is not None
    try:
        params = await policy.params_of(spec.param_kind, bound.param_ref, request.obj, stores)
    except policy.ConfigurationError as error:
        raise MutationError(f"failed to configure binding: {error}") from None
    namespace = await policy.namespace_object(namespaces, request.info, request.obj)
    changed = False
    declared = spec.variables or ()
    for param in params:
        # The expressions see the object as it is now: their variables are made afresh.
        scope = await policy.scope(target, stores, authorizer, request, param, namespace, declared)
        held, problems = webhook.conditions_hold(spec.match_conditions or (), cel.POLICY, scope)
        if not held:
            continue
        if problems:
            raise MutationError(problems[0])
        for mutation in spec.mutations or ():
            scope = await policy.scope(
                target, stores, authorizer, request, param, namespace, declared
            )
            document = codec.to_builtins(request.obj)
            variables = {**scope, **cel.mutation_variables()}
            mutated = _mutated(mutation, document, variables, request.info)
            try:
                decoded = codec.from_builtins(mutated, request.info.cls).obj
            except codec.DecodeError as error:
                raise MutationError(f"the mutated object is not valid: {error}") from None
            walk.set_defaults(decoded)
            if (decoded.api_version, decoded.kind) != (request.obj.api_version, request.obj.kind):
                raise MutationError("a mutation may not change the object's apiVersion or kind")
            changed = webhook.adopt(request.obj, decoded) or changed
    return changed


def _mutated(
    mutation: Mutation, document: dict[str, Any], variables: dict[str, Any], info: KindInfo
) -> dict[str, Any]:
    """The document with one mutation applied (a new document)."""
    chosen = mutation.apply_configuration or mutation.json_patch
    expression = (chosen.expression if chosen is not None else None) or ""
    try:
        result = cel.to_json(cel.compile_expression(expression, cel.MUTATION).evaluate(variables))
    except (cel.CompileError, cel.EvaluationError) as error:
        raise MutationError(f"expression '{expression}' resulted in error: {error}") from None
    if mutation.patch_type == "ApplyConfiguration":
        if not isinstance(result, dict):
            raise MutationError(
                f"expression '{expression}' must return an Object (an apply configuration)"
            )
        try:
            return apply.merge(document, result, info.cls)
        except apply.SchemaError as error:
            raise MutationError(f"the apply configuration does not apply: {error}") from None
    if not isinstance(result, list) or not all(isinstance(op, dict) for op in result):
        raise MutationError(f"expression '{expression}' must return a list of JSONPatch")
    try:
        patched = patch.apply_json_patch(document, result)
    except patch.PatchError as error:
        raise MutationError(f"the JSON patch does not apply: {error}") from None
    if not isinstance(patched, dict):
        raise MutationError("the JSON patch does not leave an object")
    return patched


def _refusal(
    mutating: MutatingAdmissionPolicy,
    binding: MutatingAdmissionPolicyBinding,
    message: str,
    info: KindInfo,
    obj: Resource,
) -> errors.ApiError:
    name = obj.metadata.name or ""
    return errors.forbidden(
        info,
        name,
        f'{info.group_resource} "{name}" is forbidden: MutatingAdmissionPolicy '
        f"'{mutating.metadata.name}' with binding '{binding.metadata.name}' denied request: "
        f"{message}",
    )
