"""Dynamic admission: MutatingAdmissionWebhook and ValidatingAdmissionWebhook.

Every write is offered to the webhooks of the cluster's ``MutatingWebhookConfiguration`` and
``ValidatingWebhookConfiguration`` objects (read from watch caches, configurations in name
order) whose ``rules`` (operations, apiGroups, apiVersions, resources with ``/subresource``
and ``*`` forms, scope), ``namespaceSelector`` (the labels of the object's namespace, or of a
Namespace itself) and ``objectSelector`` (the object's labels, or the old object's) match it.
A matching webhook is sent an ``admission.k8s.io/v1`` ``AdmissionReview`` (uid, kind,
resource, subResource, name, namespace, operation, userInfo, object, oldObject, dryRun) with
an HTTPS POST to its ``clientConfig``: an ``url``, or a ``service`` reached as the conversion
webhooks reach theirs (``conversion.resolve_service``, TLS name ``<name>.<namespace>.svc``),
verified with ``caBundle`` (else the system trust), given ``timeoutSeconds`` (default 10).

- Mutating webhooks run one after another, each seeing the previous one's changes; a
  ``JSONPatch`` answer is applied to the object and decoded again as its kind.  A webhook's
  change makes admission run every mutating step once more (``Reinvocation``, upstream's
  reinvocation context): the in-tree plugins all again, and of the webhooks only those with
  ``reinvocationPolicy: IfNeeded`` that ran before a later change (by a webhook, or by the
  in-tree plugins' second run) — never one that did not run the first time.  A DELETE's
  object is null: a patch to it is ignored.
- Validating webhooks run concurrently, after every mutation; any denial refuses the write.
- ``matchPolicy: Equivalent`` (the default): a webhook whose rules name another version of
  the request's resource that this server serves (a CRD's other versions) is sent the request
  at that version: ``kind`` and ``resource`` name it, ``requestKind`` and ``requestResource``
  the one asked for, the objects converted by the CRD's converter (and a patch converted back).
  ``Exact`` webhooks see only the version they name.
- ``matchConditions``: CEL expressions (``cel.ADMISSION``: ``object``, ``oldObject``,
  ``request``, ``authorizer``) over the request at the webhook's version.  One false: the
  webhook is skipped; all true: it is called; an error and none false: ``failurePolicy: Fail``
  refuses the write (403 ``expression '...' resulted in error: ...``), ``Ignore`` skips it.
- An answer's ``auditAnnotations`` go to the request's audit event, each key prefixed with the
  webhook's name (``<webhook>/<key>``), the first value for a key kept; so does, for each
  mutating webhook called, upstream's ``mutation.webhook.admission.k8s.io/round_R_index_I``
  (``{"configuration":...,"webhook":...,"mutated":...}``).
- A denial is upstream's ``admission webhook "name" denied the request: <message>`` with the
  answer's code (400 at least); answer ``warnings`` become ``Warning`` headers.
- A webhook that cannot be called, times out or answers nonsense: ``failurePolicy: Fail`` (the
  default) refuses the write with a 500 ``failed calling webhook``; ``Ignore`` skips it.
- A dry run reaches every matching webhook, with ``dryRun: true`` in the review: v1 webhooks
  must declare ``sideEffects`` None or NoneOnDryRun (validation refuses the v1beta1 values).
- The webhook configurations themselves are never sent to webhooks, so that a broken webhook
  cannot lock its own repair out, as upstream.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import ssl
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import msgspec
from celpy import celtypes

from controlplane.apiserver import errors
from controlplane.apiserver.auth import Authorizer, User
from controlplane.apiserver.crd import cel, conversion
from controlplane.apiserver.crd.customresources import CustomResourceStore
from controlplane.apiserver.endpoints import patch
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from controlplane.apiserver.registry.store import Admission, RequestContext, ResourceStore
from controlplane.apiserver.storage.watchcache import WatchCache
from kube import pki
from kube.api import codec, names, walk
from kube.api.kinds.admissionregistration_v1 import (
    MatchCondition,
    MutatingWebhook,
    MutatingWebhookConfiguration,
    RuleWithOperations,
    ValidatingWebhookConfiguration,
    Webhook,
)
from kube.api.labels import Selector
from kube.api.meta_v1 import LabelSelector, Resource
from kube.api.scheme import KindInfo

log = logging.getLogger(__name__)

REVIEW_API_VERSION = "admission.k8s.io/v1"
DEFAULT_TIMEOUT = 10
NEVER_SENT = {"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}

Stores = Mapping[tuple[str, str, str], ResourceStore]
Document = dict[str, Any]


@dataclass
class Reinvocation:
    """What one request's mutating steps share across their (at most two) runs."""

    again: bool = False
    """This is the second run."""
    wanted: bool = False
    """A webhook changed the object: the mutating steps are to run again."""
    invoked: set[str] = field(default_factory=set)
    """``IfNeeded`` webhooks called since the object last changed."""
    reinvoke: set[str] = field(default_factory=set)
    """``IfNeeded`` webhooks the object changed after: the ones the second run calls."""
    output: bytes | None = None
    """The object as the webhooks left it, to see whether the in-tree plugins' second run
    changed it."""

    def changed(self) -> None:
        self.reinvoke |= self.invoked
        self.invoked = set()


@dataclass(frozen=True)
class Invocation:
    """A webhook a request matched, and the version of the resource it is to be sent."""

    configuration: str
    webhook: Webhook
    info: KindInfo
    index: int
    """The webhook's place among all of the configurations' webhooks (upstream's numbering
    in audit annotations)."""

    @property
    def key(self) -> str:
        return f"{self.configuration}/{self.webhook.name}"


class CallError(Exception):
    """Why a webhook could not be used, worded to follow "failed calling webhook "x": "."""


@dataclass(frozen=True)
class Call:
    """One review to send: the webhook, and how to reach and trust it."""

    webhook: Webhook
    stores: Stores

    @property
    def name(self) -> str:
        return self.webhook.name or ""

    async def send(self, review: dict[str, Any]) -> dict[str, Any]:
        """The ``response`` of the webhook's AdmissionReview answer; ``CallError`` if none."""
        config = self.webhook.client_config
        if config is None:
            raise CallError("no clientConfig")
        try:
            context = pki.client_ssl_context(config.ca_bundle or None)
        except (ssl.SSLError, ValueError) as error:
            raise CallError(f"invalid caBundle: {error}") from None
        timeout = self.webhook.timeout_seconds or DEFAULT_TIMEOUT
        target = await self._target(timeout)
        try:
            answer = await conversion.post(target, json.dumps(review).encode(), context, timeout)
        except conversion.ConversionError as error:
            raise CallError(f"failed to call webhook: {error}") from None
        try:
            decoded = json.loads(answer)
        except ValueError:
            raise CallError("received invalid webhook response: not JSON") from None
        response = decoded.get("response") if isinstance(decoded, dict) else None
        if (
            not isinstance(response, dict)
            or decoded.get("apiVersion") != REVIEW_API_VERSION
            or decoded.get("kind") != "AdmissionReview"
        ):
            raise CallError(
                "received invalid webhook response: expected an admission.k8s.io/v1 "
                "AdmissionReview with a response"
            )
        if response.get("uid") != review["request"]["uid"]:
            raise CallError(
                f"expected response.uid={review['request']['uid']!r}, got {response.get('uid')!r}"
            )
        return response

    async def _target(self, seconds: int) -> conversion.Target:
        config = self.webhook.client_config
        assert config is not None
        query = f"?timeout={seconds}s"
        if config.url:
            return conversion.Target(config.url + query)
        service = config.service
        if service is None or not service.name or not service.namespace:
            raise CallError("no webhook clientConfig url or service")
        port = service.port or 443
        try:
            address, number = await conversion.resolve_service(
                self.stores, service.namespace, service.name, port
            )
        except conversion.ConversionError as error:
            raise CallError(str(error)) from None
        host = f"[{address}]" if ":" in address else address
        name = f"{service.name}.{service.namespace}.svc"
        return conversion.Target(
            f"https://{host}:{number}{quote(service.path or '/')}{query}",
            server_hostname=name,
            host_header=name if port == 443 else f"{name}:{port}",
        )


Mutation = Callable[
    [str, KindInfo, Resource, Resource | None, RequestContext, Reinvocation], Awaitable[None]
]
"""A mutating admission step: an ``Admission`` that also sees the request's reinvocation
state."""


def mutating(
    configs: WatchCache, namespaces: WatchCache, stores: Stores, authorizer: Authorizer
) -> Mutation:
    async def admit(
        operation: str,
        info: KindInfo,
        obj: Resource,
        old: Resource | None,
        ctx: RequestContext,
        rounds: Reinvocation,
    ) -> None:
        if rounds.again and rounds.output != msgspec.json.encode(obj):
            rounds.changed()  # the in-tree plugins' second run changed the object
        invocations = await _matching(configs, namespaces, stores, operation, info, obj, old, ctx)
        try:
            for invocation in invocations:
                if rounds.again and invocation.key not in rounds.reinvoke:
                    continue
                changed = await _mutate(
                    invocation, stores, authorizer, operation, info, obj, old, ctx
                )
                if changed is not None:
                    _record_mutation(invocation, rounds, changed, ctx)
                if changed:
                    rounds.changed()
                    rounds.wanted = True
                webhook = invocation.webhook
                assert isinstance(webhook, MutatingWebhook)
                if webhook.reinvocation_policy == "IfNeeded":
                    rounds.invoked.add(invocation.key)
        finally:
            rounds.output = msgspec.json.encode(obj)

    return admit


async def _mutate(
    invocation: Invocation,
    stores: Stores,
    authorizer: Authorizer,
    operation: str,
    info: KindInfo,
    obj: Resource,
    old: Resource | None,
    ctx: RequestContext,
) -> bool | None:
    """Call one mutating webhook and apply its patch; whether the object changed (None: the
    webhook was not called, or failed and was ignored)."""
    review = _admission_review(
        await admission_request(invocation.info, stores, operation, info, obj, old, ctx)
    )
    if not _conditions_hold(invocation, review, authorizer, info, obj, ctx):
        return None
    response = await _review(invocation.webhook, stores, review, ctx)
    if response is None:
        return None
    name = invocation.webhook.name or ""
    document = review["request"]["object"]
    patched = _patch(name, document, response) if document is not None else None
    if patched is None:
        return False
    if invocation.info is not info:
        patched = await _at_version(patched, info, stores)
    try:
        decoded = codec.from_builtins(patched, info.cls).obj
    except codec.DecodeError as error:
        raise errors.internal(
            f'failed calling webhook "{name}": the patch does not apply: {error}'
        ) from None
    if (decoded.api_version, decoded.kind) != (obj.api_version, obj.kind):
        raise errors.internal(f'failed calling webhook "{name}": the patch changed the kind')
    return adopt(obj, decoded)


def adopt(obj: Resource, decoded: Resource) -> bool:
    """Make ``obj`` what a mutation ``decoded``, defaulted as upstream defaults a mutated
    object (in place: admission hands the same object on); whether it changed."""
    walk.set_defaults(decoded)
    if msgspec.json.encode(decoded) == msgspec.json.encode(obj):
        return False
    for attribute in obj.__struct_fields__:
        setattr(obj, attribute, getattr(decoded, attribute))
    return True


def validating(
    configs: WatchCache, namespaces: WatchCache, stores: Stores, authorizer: Authorizer
) -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        invocations = await _matching(configs, namespaces, stores, operation, info, obj, old, ctx)
        if not invocations:
            return
        results = await asyncio.gather(
            *(
                _validate(invocation, stores, authorizer, operation, info, obj, old, ctx)
                for invocation in invocations
            ),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    return admit


async def _validate(
    invocation: Invocation,
    stores: Stores,
    authorizer: Authorizer,
    operation: str,
    info: KindInfo,
    obj: Resource,
    old: Resource | None,
    ctx: RequestContext,
) -> None:
    review = _admission_review(
        await admission_request(invocation.info, stores, operation, info, obj, old, ctx)
    )
    if _conditions_hold(invocation, review, authorizer, info, obj, ctx):
        await _review(invocation.webhook, stores, review, ctx)


async def _matching(
    configs: WatchCache,
    namespaces: WatchCache,
    stores: Stores,
    operation: str,
    info: KindInfo,
    obj: Resource,
    old: Resource | None,
    ctx: RequestContext,
) -> list[Invocation]:
    if info.plural in NEVER_SENT and info.group == "admissionregistration.k8s.io":
        return []
    found: list[Invocation] = []
    configurations = sorted(configs.objects(), key=lambda c: c.metadata.name or "")
    webhooks = [
        (configuration.metadata.name or "", webhook)
        for configuration in configurations
        if isinstance(configuration, MutatingWebhookConfiguration | ValidatingWebhookConfiguration)
        for webhook in configuration.webhooks or ()
    ]
    for index, (configuration_name, webhook) in enumerate(webhooks):
        version = _matched_version(webhook, operation, info, ctx.subresource, stores)
        if version is None:
            continue
        if not selected(webhook.object_selector, obj, old):
            continue
        if not await namespace_selected(webhook.namespace_selector, namespaces, info, obj):
            continue
        found.append(Invocation(configuration_name, webhook, version, index))
    return found


def _matched_version(
    webhook: Webhook, operation: str, info: KindInfo, sub: str, stores: Stores
) -> KindInfo | None:
    return matched_version(webhook.rules or (), webhook.match_policy, operation, info, sub, stores)


def matched_version(
    rules: Sequence[RuleWithOperations],
    match_policy: str | None,
    operation: str,
    info: KindInfo,
    sub: str,
    stores: Stores,
) -> KindInfo | None:
    """The version of the resource a webhook or policy is to see: the request's if ``rules``
    name it, else (``matchPolicy: Equivalent``) another served version of the resource they
    name; None if they match neither."""
    if any(_rule_matches(r, operation, info, sub) for r in rules):
        return info
    if match_policy != "Equivalent":
        return None
    for key in sorted(stores):
        other = stores[key].info
        if (other.group, other.plural) != (info.group, info.plural) or other is info:
            continue
        if any(_rule_matches(r, operation, other, sub) for r in rules):
            return other
    return None


def _rule_matches(rule: RuleWithOperations, operation: str, info: KindInfo, sub: str) -> bool:
    def has(values: Sequence[str] | None, value: str) -> bool:
        return bool(values) and ("*" in (values or ()) or value in (values or ()))

    if not has(rule.operations, operation):
        return False
    if not has(rule.api_groups, info.group) or not has(rule.api_versions, info.version):
        return False
    scope = rule.scope or "*"
    if scope != "*" and scope != ("Namespaced" if info.namespaced else "Cluster"):
        return False
    for resource in rule.resources or ():
        plural, _, subresource = resource.partition("/")
        if plural not in ("*", info.plural):
            continue
        if subresource == "*" or subresource == sub:
            return True
    return False


def selected(selector: LabelSelector | None, obj: Resource, old: Resource | None) -> bool:
    """Whether the object (or, for a DELETE, the old one) has the labels ``selector`` asks."""
    if selector is None:
        return True
    parsed = Selector.from_label_selector(selector.match_labels, selector.match_expressions)
    return any(parsed.matches(o.metadata.labels or {}) for o in (obj, old) if o is not None)


async def namespace_selected(
    selector: LabelSelector | None, namespaces: WatchCache, info: KindInfo, obj: Resource
) -> bool:
    """Whether the object's namespace (a Namespace itself; any cluster-scoped object) has
    the labels ``selector`` asks."""
    if selector is None:
        return True
    if info.group == "" and info.plural == "namespaces":
        labels = obj.metadata.labels or {}
    elif not info.namespaced:
        return True
    else:
        namespace = await namespaces.lookup("", obj.metadata.namespace or "")
        labels = (namespace.metadata.labels if namespace is not None else None) or {}
    parsed = Selector.from_label_selector(selector.match_labels, selector.match_expressions)
    return parsed.matches(labels)


async def _at_version(document: Document, info: KindInfo, stores: Stores) -> Document:
    """A custom resource's JSON at another of its versions, by its CRD's converter."""
    store = stores.get((info.group, info.version, info.plural))
    converter = (
        store.converter if isinstance(store, CustomResourceStore) else conversion.NoneConverter()
    )
    (converted,) = await converter.convert([document], info.api_version)
    return converted


def _admission_review(request: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionReview a webhook is sent, of an ``admission_request``."""
    body = {"uid": str(uuid.uuid4()), **request}
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "request": body}


async def admission_request(
    target: KindInfo,
    stores: Stores,
    operation: str,
    info: KindInfo,
    obj: Resource,
    old: Resource | None,
    ctx: RequestContext,
) -> dict[str, Any]:
    """The AdmissionRequest as JSON, its objects at ``target``'s version (which a webhook or
    policy matched; ``requestKind`` and ``requestResource`` name the one asked for)."""
    objects: list[Document | None] = [
        None if operation == "DELETE" else codec.to_builtins(obj),
        codec.to_builtins(old) if old is not None and operation != "CREATE" else None,
    ]
    if target is not info:
        objects = [None if o is None else await _at_version(o, target, stores) for o in objects]
    kind = {"group": target.group, "version": target.version, "kind": target.kind}
    resource = {"group": target.group, "version": target.version, "resource": target.plural}
    body: dict[str, Any] = {
        "kind": kind,
        "resource": resource,
        "requestKind": {"group": info.group, "version": info.version, "kind": info.kind},
        "requestResource": {"group": info.group, "version": info.version, "resource": info.plural},
        "name": obj.metadata.name or "",
        "namespace": obj.metadata.namespace or "",
        "operation": operation,
        "userInfo": {"username": ctx.user, "groups": list(ctx.groups)},
        "object": objects[0],
        "oldObject": objects[1],
        "dryRun": ctx.dry_run,
    }
    if ctx.subresource:
        body["subResource"] = ctx.subresource
    return body


def _conditions_hold(
    invocation: Invocation,
    review: dict[str, Any],
    authorizer: Authorizer,
    info: KindInfo,
    obj: Resource,
    ctx: RequestContext,
) -> bool:
    """Whether the webhook's ``matchConditions`` all hold for the review's request (see the
    module docstring for errors)."""
    webhook = invocation.webhook
    if not webhook.match_conditions:
        return True
    variables = expression_variables(review["request"], authorizer, info, obj, ctx)
    name = obj.metadata.name or ""
    held, problems = conditions_hold(webhook.match_conditions, cel.ADMISSION, variables)
    if not held or not problems:
        return held
    if webhook.failure_policy == "Ignore":
        return False
    text = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    raise errors.forbidden(info, name, f'{info.plural} "{name}" is forbidden: {text}')


def conditions_hold(
    conditions: Sequence[MatchCondition],
    declarations: cel.Declarations,
    variables: Mapping[str, celtypes.Value],
) -> tuple[bool, list[str]]:
    """Whether no condition is false, and the errors of those that could not be evaluated
    (upstream's matchConditions: one false decides, whatever the others' errors)."""
    problems = []
    for condition in conditions:
        expression = condition.expression or ""
        try:
            result = cel.compile_expression(expression, declarations).evaluate(variables)
        except (cel.CompileError, cel.EvaluationError) as error:
            problems.append(f"expression '{expression}' resulted in error: {error}")
            continue
        if not isinstance(result, celtypes.BoolType):
            problems.append(f"expression '{expression}' resulted in error: must evaluate to bool")
        elif not result:
            return False, []
    return True, problems


def expression_variables(
    request: dict[str, Any],
    authorizer: Authorizer,
    info: KindInfo,
    obj: Resource,
    ctx: RequestContext,
) -> dict[str, celtypes.Value]:
    """What admission expressions see: ``object``, ``oldObject``, ``request`` (an
    ``admission_request``) and ``authorizer`` (the requester's, about the request's
    resource)."""
    asked = RequestInfo(
        path="",
        verb="",
        is_resource_request=True,
        group=info.group,
        resource=info.plural,
        subresource=ctx.subresource,
        namespace=obj.metadata.namespace or "",
        name=obj.metadata.name or "",
    )
    return {
        "object": cel.to_cel_json(request["object"]),
        "oldObject": cel.to_cel_json(request["oldObject"]),
        "request": cel.to_cel_json(
            {k: v for k, v in request.items() if k not in ("object", "oldObject")}
        ),
        "authorizer": cel.AuthorizerValue(authorizer, User(ctx.user, ctx.groups), asked),
    }


async def _review(
    webhook: Webhook, stores: Stores, review: dict[str, Any], ctx: RequestContext
) -> dict[str, Any] | None:
    """Call one webhook; its response if it allowed the request (None if it was skipped by
    ``failurePolicy: Ignore``).  A denial or a failure under ``Fail`` raises ``ApiError``."""
    name = webhook.name or ""
    try:
        response = await Call(webhook, stores).send(review)
    except CallError as error:
        if webhook.failure_policy == "Ignore":
            return None
        raise errors.internal(f'failed calling webhook "{name}": {error}') from None
    ctx.warnings.extend(str(w) for w in response.get("warnings") or ())
    _record_annotations(name, response.get("auditAnnotations"), ctx)
    if response.get("allowed") is True:
        return response
    status = response.get("status") if isinstance(response.get("status"), dict) else {}
    assert isinstance(status, dict)
    code = status.get("code") if isinstance(status.get("code"), int) else 0
    denied = f'admission webhook "{name}" denied the request'
    message = status.get("message") or status.get("reason")
    raise errors.ApiError(
        max(int(code or 0), 400),
        str(status.get("reason") or "BadRequest"),
        f"{denied}: {message}" if message else f"{denied} without explanation",
    )


def _record_mutation(
    invocation: Invocation, rounds: Reinvocation, mutated: bool, ctx: RequestContext
) -> None:
    """Upstream's audit annotation of each mutating webhook called: which, in which round,
    and whether it changed the object."""
    key = f"mutation.webhook.admission.k8s.io/round_{int(rounds.again)}_index_{invocation.index}"
    value = {
        "configuration": invocation.configuration,
        "webhook": invocation.webhook.name or "",
        "mutated": mutated,
    }
    ctx.audit_annotations[key] = json.dumps(value, separators=(",", ":"))


def _record_annotations(name: str, annotations: Any, ctx: RequestContext) -> None:
    """A webhook's ``auditAnnotations``, as ``<webhook>/<key>``; keys that do not make an
    annotation key, or that are set already, are left out (as upstream, with a log line)."""
    if not isinstance(annotations, dict):
        return
    for key, value in annotations.items():
        full = f"{name}/{key}"
        if names.is_qualified_name(full) or not isinstance(value, str):
            log.warning(
                "webhook %s: audit annotation %r left out: not a valid key/value", name, key
            )
            continue
        if ctx.audit_annotations.setdefault(full, value) != value:
            log.warning("webhook %s: audit annotation %r left out: already set", name, key)


def _patch(name: str, document: Document, response: dict[str, Any]) -> Document | None:
    """The document with the response's JSONPatch applied, or None when it has none."""
    encoded = response.get("patch")
    if not encoded:
        return None
    if response.get("patchType") != "JSONPatch":
        raise errors.internal(
            f'failed calling webhook "{name}": unsupported patchType {response.get("patchType")!r}'
        )
    try:
        operations = json.loads(base64.b64decode(encoded))
    except ValueError as error:
        raise errors.internal(f'failed calling webhook "{name}": invalid patch: {error}') from None
    try:
        patched = patch.apply_json_patch(document, operations)
    except patch.PatchError as error:
        raise errors.internal(
            f'failed calling webhook "{name}": the patch does not apply: {error}'
        ) from None
    if not isinstance(patched, dict):
        raise errors.internal(f'failed calling webhook "{name}": the patch does not apply')
    return patched
