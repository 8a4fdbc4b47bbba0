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
  ``JSONPatch`` answer is applied to the object and decoded again as its kind.  They are not
  reinvoked (``reinvocationPolicy: IfNeeded`` is treated as ``Never``).
- Validating webhooks run concurrently, after every mutation; any denial refuses the write.
- A denial is upstream's ``admission webhook "name" denied the request: <message>`` with the
  answer's code (400 at least); answer ``warnings`` become ``Warning`` headers.
- A webhook that cannot be called, times out or answers nonsense: ``failurePolicy: Fail`` (the
  default) refuses the write with a 500 ``failed calling webhook``; ``Ignore`` skips it.
- A dry run reaches every matching webhook, with ``dryRun: true`` in the review: v1 webhooks
  must declare ``sideEffects`` None or NoneOnDryRun (validation refuses the v1beta1 values).
- ``matchConditions`` (CEL) are not evaluated: a webhook that has them is called as if they
  held.  The webhook configurations themselves are never sent to webhooks, so that a broken
  webhook cannot lock its own repair out, as upstream.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import ssl
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from controlplane.apiserver import conversion, errors, patch
from controlplane.apiserver.registry import Admission, RequestContext, ResourceStore
from controlplane.apiserver.watchcache import WatchCache
from kubelab import pki
from kubelab.api import codec
from kubelab.api.kinds.admissionregistration_v1 import (
    MutatingWebhook,
    MutatingWebhookConfiguration,
    RuleWithOperations,
    ValidatingWebhookConfiguration,
    WebhookBase,
)
from kubelab.api.labels import Selector
from kubelab.api.meta_v1 import LabelSelector, Resource
from kubelab.api.scheme import KindInfo

REVIEW_API_VERSION = "admission.k8s.io/v1"
DEFAULT_TIMEOUT = 10
NEVER_SENT = {"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}

Stores = Mapping[tuple[str, str, str], ResourceStore]


class CallError(Exception):
    """Why a webhook could not be used, worded to follow "failed calling webhook "x": "."""


@dataclass(frozen=True)
class Call:
    """One review to send: the webhook, and how to reach and trust it."""

    webhook: WebhookBase
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


def mutating(configs: WatchCache, namespaces: WatchCache, stores: Stores) -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        for webhook in await _matching(configs, namespaces, operation, info, obj, old, ctx):
            assert isinstance(webhook, MutatingWebhook)
            response = await _review(webhook, stores, operation, info, obj, old, ctx)
            if response is None:
                continue
            patched = _patch(webhook.name or "", info, obj, response)
            if patched is not None:
                for field in obj.__struct_fields__:
                    setattr(obj, field, getattr(patched, field))

    return admit


def validating(configs: WatchCache, namespaces: WatchCache, stores: Stores) -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        webhooks = await _matching(configs, namespaces, operation, info, obj, old, ctx)
        if not webhooks:
            return
        results = await asyncio.gather(
            *(_review(w, stores, operation, info, obj, old, ctx) for w in webhooks),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    return admit


async def _matching(
    configs: WatchCache,
    namespaces: WatchCache,
    operation: str,
    info: KindInfo,
    obj: Resource,
    old: Resource | None,
    ctx: RequestContext,
) -> list[WebhookBase]:
    if info.plural in NEVER_SENT and info.group == "admissionregistration.k8s.io":
        return []
    found: list[WebhookBase] = []
    configurations = sorted(configs.objects(), key=lambda c: c.metadata.name or "")
    for configuration in configurations:
        assert isinstance(
            configuration, MutatingWebhookConfiguration | ValidatingWebhookConfiguration
        )
        for webhook in configuration.webhooks or ():
            if not any(
                _rule_matches(r, operation, info, ctx.subresource) for r in webhook.rules or ()
            ):
                continue
            if not _selected(webhook.object_selector, obj, old):
                continue
            if not await _namespace_selected(webhook.namespace_selector, namespaces, info, obj):
                continue
            found.append(webhook)
    return found


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


def _selected(selector: LabelSelector | None, obj: Resource, old: Resource | None) -> bool:
    if selector is None:
        return True
    parsed = Selector.from_label_selector(selector.match_labels, selector.match_expressions)
    return any(parsed.matches(o.metadata.labels or {}) for o in (obj, old) if o is not None)


async def _namespace_selected(
    selector: LabelSelector | None, namespaces: WatchCache, info: KindInfo, obj: Resource
) -> bool:
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


async def _review(
    webhook: WebhookBase,
    stores: Stores,
    operation: str,
    info: KindInfo,
    obj: Resource,
    old: Resource | None,
    ctx: RequestContext,
) -> dict[str, Any] | None:
    """Call one webhook; its response if it allowed the request (None if it was skipped by
    ``failurePolicy: Ignore``).  A denial or a failure under ``Fail`` raises ``ApiError``."""
    name = webhook.name or ""
    review = _request(operation, info, obj, old, ctx)
    try:
        response = await Call(webhook, stores).send(review)
    except CallError as error:
        if webhook.failure_policy == "Ignore":
            return None
        raise errors.internal(f'failed calling webhook "{name}": {error}') from None
    ctx.warnings.extend(str(w) for w in response.get("warnings") or ())
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


def _request(
    operation: str,
    info: KindInfo,
    obj: Resource,
    old: Resource | None,
    ctx: RequestContext,
) -> dict[str, Any]:
    kind = {"group": info.group, "version": info.version, "kind": info.kind}
    resource = {"group": info.group, "version": info.version, "resource": info.plural}
    body: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": obj.metadata.name or "",
        "namespace": obj.metadata.namespace or "",
        "operation": operation,
        "userInfo": {"username": ctx.user, "groups": list(ctx.groups)},
        "object": None if operation == "DELETE" else codec.to_builtins(obj),
        "oldObject": codec.to_builtins(old) if old is not None and operation != "CREATE" else None,
        "dryRun": ctx.dry_run,
    }
    if ctx.subresource:
        body["subResource"] = ctx.subresource
    return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "request": body}


def _patch(name: str, info: KindInfo, obj: Resource, response: dict[str, Any]) -> Resource | None:
    """The object with the response's JSONPatch applied, or None when it has none."""
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
        document = patch.apply_json_patch(codec.to_builtins(copy.deepcopy(obj)), operations)
        decoded = codec.from_builtins(document, info.cls).obj
    except (errors.ApiError, codec.DecodeError) as error:
        message = error.message if isinstance(error, errors.ApiError) else str(error)
        raise errors.internal(
            f'failed calling webhook "{name}": the patch does not apply: {message}'
        ) from None
    if (decoded.api_version, decoded.kind) != (obj.api_version, obj.kind):
        raise errors.internal(f'failed calling webhook "{name}": the patch changed the kind')
    return decoded
