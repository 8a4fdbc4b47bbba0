"""Converting custom resources between the versions of their CRD (``spec.conversion``).

Every version of a custom resource is stored under the same keys at the CRD's storage version;
an object read at another version, or written at one, is converted.  A ``Converter`` per CRD
does it the way the CRD says:

- strategy ``None`` (``NoneConverter``): only ``apiVersion`` changes.  The API server never
  calls out for it; ``crd.CustomResourceStore`` even skips the JSON round trip and rewrites the
  decoded struct.
- strategy ``Webhook`` (``WebhookConverter``): the objects go, as a ``ConversionReview``
  (``apiextensions.k8s.io/v1``: uid, desiredAPIVersion, objects), in one POST to
  ``spec.conversion.webhook.clientConfig``: an https ``url``, or a ``service`` (namespace,
  name, path, port 443) resolved through the API server's own stores (the Service, then an
  EndpointSlice or the Endpoints of it: the first ready address serving that port) and reached
  with TLS server name ``<name>.<namespace>.svc``.  The server is verified with ``caBundle``
  (PEM) when given, the system trust otherwise; the call gives up after ``TIMEOUT`` seconds.
  Only ConversionReview v1 is spoken: a CRD whose ``conversionReviewVersions`` lacks ``v1``
  fails every conversion with a message saying so.

The webhook's answer is checked as upstream checks it (``converted_objects``): a v1
ConversionReview with a response for the same uid, ``result.status`` Success, as many converted
objects as were sent, each at the desired apiVersion, of the same kind, name, namespace and
uid.  Of the metadata only labels and annotations may change (checked like any labels and
annotations); everything else is put back from the original.  Objects already at the desired
version are not sent; nothing at all is sent when none needs converting.

A broken webhook is a failed dependency of the server, not bad input: the request fails with
upstream's 500 ``InternalError`` "conversion webhook for <group/version, Kind=kind> failed:
<why>".

``ConvertingStore`` puts a converter between ``ResourceStore`` and the storage backend: values
read come back at the served version (a list page in one review, a watch event, with its
previous value, in one review), values written go down at the storage version.
"""

from __future__ import annotations

import json
import ssl
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import ResourceStore, Selection
from controlplane.storage.interface import Event, KeyValue, ListResult, Progress, Store
from kube import pki
from kube.api import names
from kube.api.errors import ROOT, ErrorList
from kube.api.kinds.apiextensions_v1 import CustomResourceDefinition, WebhookConversion
from kube.api.kinds.core_v1.service import Endpoints, Service
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, EndpointSlice

REVIEW_API_VERSION = "apiextensions.k8s.io/v1"
REVIEW_KIND = "ConversionReview"
TIMEOUT = 10.0
"""Seconds a conversion webhook has to answer."""
SERVICES = ("", "v1", "services")
ENDPOINTS = ("", "v1", "endpoints")
ENDPOINT_SLICES = ("discovery.k8s.io", "v1", "endpointslices")

JSONObject = dict[str, Any]


class ConversionError(Exception):
    """Why a conversion failed, worded to follow "conversion webhook for <gvk> "."""


def gvk_text(api_version: str, kind: str) -> str:
    """A GroupVersionKind as Go prints it: ``stable.example.com/v1, Kind=CronTab``."""
    return f"{api_version}, Kind={kind}"


# The review and its answer.


def build_review(uid: str, desired_api_version: str, objects: Sequence[JSONObject]) -> JSONObject:
    """The ConversionReview v1 request a webhook is sent."""
    return {
        "apiVersion": REVIEW_API_VERSION,
        "kind": REVIEW_KIND,
        "request": {
            "uid": uid,
            "desiredAPIVersion": desired_api_version,
            "objects": list(objects),
        },
    }


def _string_map(value: Any, field: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConversionError(f"invalid metadata.{field} of type {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(item, str):
            raise ConversionError(
                f"metadata.{field}[{key}] must be a string, but is {type(item).__name__} "
                "in converted object"
            )
    return value


def restore_metadata(original: JSONObject, converted: JSONObject) -> JSONObject:
    """``converted`` with the original's metadata, except its own labels and annotations."""
    answered = converted.get("metadata")
    if answered is None:
        raise ConversionError("missing metadata in converted object")
    if not isinstance(answered, dict):
        raise ConversionError(
            f"invalid metadata of type {type(answered).__name__} in converted object"
        )
    metadata = json.loads(json.dumps(original.get("metadata") or {}))
    for field, check in (("labels", names.validate_labels), ("annotations", None)):
        values = _string_map(answered.get(field), field)
        if not values:
            metadata.pop(field, None)
            continue
        if values != metadata.get(field):
            problems = ErrorList()
            if check is not None:
                check(values, ROOT.child("metadata").child(field), problems)
            else:
                names.validate_annotations(
                    values, ROOT.child("metadata").child("annotation"), problems
                )
            if problems:
                raise ConversionError(str(problems))
        metadata[field] = values
    return {**converted, "metadata": metadata}


def _meta(obj: JSONObject, field: str) -> Any:
    metadata = obj.get("metadata")
    return metadata.get(field) if isinstance(metadata, dict) else None


def _check_identity(original: JSONObject, converted: JSONObject) -> None:
    """Upstream's validateConvertedObject: the same kind, name, namespace and uid."""
    if original.get("kind") != converted.get("kind"):
        raise ConversionError(
            f"must have the same kind: {original.get('kind')} != {converted.get('kind')}"
        )
    for field in ("name", "namespace", "uid"):
        before, after = _meta(original, field) or "", _meta(converted, field) or ""
        if before != after:
            label = "UID" if field == "uid" else field
            raise ConversionError(f"must have the same {label}: {before} != {after}")


def converted_objects(
    review: Any, uid: str, desired_api_version: str, originals: Sequence[JSONObject]
) -> list[JSONObject]:
    """The objects a webhook's ConversionReview answer carries, checked against what was sent
    (see the module docstring); ``ConversionError`` says what is wrong."""
    if not isinstance(review, dict):
        raise ConversionError(f"failed: unrecognized response type: {type(review).__name__}")
    got = gvk_text(str(review.get("apiVersion", "")), str(review.get("kind", "")))
    if got != gvk_text(REVIEW_API_VERSION, REVIEW_KIND):
        raise ConversionError(
            f"failed: expected webhook response of {gvk_text(REVIEW_API_VERSION, REVIEW_KIND)}, "
            f"got {got}"
        )
    response = review.get("response")
    if not isinstance(response, dict):
        raise ConversionError("failed: no response provided")
    if response.get("uid") != uid:
        raise ConversionError(
            f'failed: expected response.uid="{uid}", got "{response.get("uid") or ""}"'
        )
    result = response.get("result")
    result = result if isinstance(result, dict) else {}
    if result.get("status") != "Success":
        message = result.get("message")
        if isinstance(message, str) and message:
            raise ConversionError(f"failed: {message}")
        raise ConversionError(
            f"failed: response.result.status was '{result.get('status') or ''}', not 'Success'"
        )
    objects = response.get("convertedObjects") or []
    if not isinstance(objects, list) or len(objects) != len(originals):
        count = len(objects) if isinstance(objects, list) else 0
        raise ConversionError(f"returned {count} objects, expected {len(originals)}")
    converted = []
    for index, (original, obj) in enumerate(zip(originals, objects, strict=True)):
        prefix = f"returned invalid converted object at index {index}"
        if not isinstance(obj, dict):
            raise ConversionError(f"{prefix}: not an object")
        if obj.get("apiVersion") != desired_api_version:
            raise ConversionError(
                f"{prefix}: invalid groupVersion (expected {desired_api_version}, "
                f"received {obj.get('apiVersion') or ''})"
            )
        if obj.get("kind") != original.get("kind"):
            raise ConversionError(
                f"{prefix}: invalid kind (expected {original.get('kind')}, "
                f"received {obj.get('kind') or ''})"
            )
        try:
            _check_identity(original, obj)
            converted.append(restore_metadata(original, obj))
        except ConversionError as error:
            raise ConversionError(f"{prefix}: {error}") from None
    return converted


# Converters.


class Converter(ABC):
    """Converts a CRD's objects (JSON objects) to one of its versions."""

    strategy: str

    @abstractmethod
    async def convert(
        self, objects: Sequence[JSONObject], desired_api_version: str
    ) -> list[JSONObject]:
        """The objects at ``desired_api_version``, in order; ``ApiError`` (500) if that fails.
        The given objects are not changed."""


class NoneConverter(Converter):
    """Strategy None: only apiVersion changes."""

    strategy = "None"

    async def convert(
        self, objects: Sequence[JSONObject], desired_api_version: str
    ) -> list[JSONObject]:
        return [{**obj, "apiVersion": desired_api_version} for obj in objects]


@dataclass(frozen=True)
class Target:
    """Where one review goes: the URL to POST to, and the TLS server name and Host header
    when the URL's host is a resolved address rather than the name the certificate has."""

    url: str
    server_hostname: str | None = None
    host_header: str | None = None


ServiceResolver = Callable[[str, str, int], Awaitable[tuple[str, int]]]
"""(namespace, name, port) of a Service → (address, port) to connect to."""
Transport = Callable[[Target, bytes, ssl.SSLContext], Awaitable[bytes]]
"""POSTs a review; returns the answer's body or raises ``ConversionError``."""


async def post(
    target: Target, body: bytes, context: ssl.SSLContext, limit: float = TIMEOUT
) -> bytes:
    """The real transport: an aiohttp POST giving up after ``limit`` seconds (admission
    webhooks say how long they may take)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if target.host_header:
        headers["Host"] = target.host_header
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=limit)) as session,
            session.post(
                target.url,
                data=body,
                headers=headers,
                ssl=context,
                server_hostname=target.server_hostname,
                allow_redirects=False,
            ) as response,
        ):
            answer = await response.read()
            if not 200 <= response.status < 300:
                detail = answer[:256].decode(errors="replace").strip()
                raise ConversionError(
                    f"the server responded with the status code {response.status}"
                    + (f": {detail}" if detail else " but did not return more information")
                )
            return answer
    except TimeoutError:
        raise ConversionError(
            f'Post "{target.url}": no answer within {limit:g}s (timeout)'
        ) from None
    except aiohttp.ClientError as error:
        raise ConversionError(f'Post "{target.url}": {error}') from None


class WebhookConverter(Converter):
    """Strategy Webhook: one ConversionReview per call (see the module docstring)."""

    strategy = "Webhook"

    def __init__(
        self,
        webhook: WebhookConversion | None,
        resolve: ServiceResolver | None = None,
        transport: Transport = post,
    ) -> None:
        self.webhook = webhook
        self.resolve = resolve
        self.transport = transport
        self._context: ssl.SSLContext | None = None

    def _ssl_context(self) -> ssl.SSLContext:
        if self._context is None:
            config = self.webhook.client_config if self.webhook else None
            bundle = config.ca_bundle if config is not None else None
            try:
                self._context = pki.client_ssl_context(bundle or None)
            except (ssl.SSLError, ValueError) as error:
                raise ConversionError(f"invalid caBundle: {error}") from None
        return self._context

    async def _target(self) -> Target:
        config = self.webhook.client_config if self.webhook else None
        if config is not None and config.url:
            return Target(_with_timeout(config.url))
        service = config.service if config is not None else None
        if service is None or not service.name or not service.namespace:
            raise ConversionError("no webhook clientConfig url or service")
        if self.resolve is None:
            raise ConversionError("no resolver for service references")
        port = service.port or 443
        address, target_port = await self.resolve(service.namespace, service.name, port)
        host = f"[{address}]" if ":" in address else address
        path = service.path or "/"
        server_name = f"{service.name}.{service.namespace}.svc"
        return Target(
            _with_timeout(f"https://{host}:{target_port}{path}"),
            server_hostname=server_name,
            host_header=server_name if port == 443 else f"{server_name}:{port}",
        )

    async def convert(
        self, objects: Sequence[JSONObject], desired_api_version: str
    ) -> list[JSONObject]:
        pending = [
            i for i, obj in enumerate(objects) if obj.get("apiVersion") != desired_api_version
        ]
        result = list(objects)
        if not pending:
            return result
        sent = [objects[i] for i in pending]
        first = sent[0]
        gvk = gvk_text(str(first.get("apiVersion", "")), str(first.get("kind", "")))
        try:
            converted = await self._review(sent, desired_api_version)
        except ConversionError as error:
            raise errors.internal(f"conversion webhook for {gvk} {error}") from None
        for i, obj in zip(pending, converted, strict=True):
            result[i] = obj
        return result

    async def _review(
        self, objects: Sequence[JSONObject], desired_api_version: str
    ) -> list[JSONObject]:
        versions = (self.webhook.conversion_review_versions if self.webhook else None) or []
        if "v1" not in versions:
            raise ConversionError(
                "failed: conversionReviewVersions "
                f"{json.dumps(versions)} does not include v1, the only ConversionReview "
                "version this server speaks (v1beta1 is not supported)"
            )
        uid = str(uuid.uuid4())
        body = json.dumps(build_review(uid, desired_api_version, objects)).encode()
        try:
            answer = await self.transport(await self._target(), body, self._ssl_context())
            try:
                review = json.loads(answer)
            except ValueError as error:
                raise ConversionError(f"the answer is not JSON: {error}") from None
        except ConversionError as error:
            raise ConversionError(f"failed: {error}") from None
        return converted_objects(review, uid, desired_api_version, objects)


def _with_timeout(url: str) -> str:
    """Upstream's REST client tells the webhook how long it will wait."""
    return f"{url}?timeout={TIMEOUT:g}s"


def new_converter(
    crd: CustomResourceDefinition, resolve: ServiceResolver | None = None
) -> Converter:
    """The converter a CRD's ``spec.conversion`` asks for."""
    conversion = crd.spec.conversion if crd.spec is not None else None
    if conversion is None or conversion.strategy != "Webhook":
        return NoneConverter()
    return WebhookConverter(conversion.webhook, resolve)


# Services.


async def resolve_service(
    stores: Mapping[tuple[str, str, str], ResourceStore], namespace: str, name: str, port: int
) -> tuple[str, int]:
    """The first ready (address, port) behind port ``port`` of a Service, read from the API
    server's stores: its EndpointSlices, else its Endpoints.  ``ConversionError`` if none."""
    try:
        service = await stores[SERVICES].get(namespace, name)
    except errors.ApiError as error:
        raise ConversionError(error.message) from None
    assert isinstance(service, Service)
    spec = service.spec
    if spec is not None and spec.type == "ExternalName" and spec.external_name:
        return spec.external_name, port
    service_port = next((p for p in (spec.ports if spec else None) or () if p.port == port), None)
    if service_port is None:
        raise ConversionError(f'no service port {port} found for service "{name}"')
    port_name = service_port.name or ""
    slices = stores.get(ENDPOINT_SLICES)
    if slices is not None:
        selection = Selection.parse(slices.info, f"{SERVICE_NAME_LABEL}={name}", None)
        listed = await slices.list(namespace, selection)
        for item in listed.items:
            assert isinstance(item, EndpointSlice)
            number = next((p.port for p in item.ports or () if (p.name or "") == port_name), None)
            for endpoint in item.endpoints or () if number is not None else ():
                ready = endpoint.conditions.ready if endpoint.conditions else None
                if ready is not False and endpoint.addresses:
                    assert number is not None
                    return endpoint.addresses[0], number
    endpoints_store = stores.get(ENDPOINTS)
    if endpoints_store is not None:
        try:
            endpoints = await endpoints_store.get(namespace, name)
        except errors.ApiError:
            endpoints = None
        assert endpoints is None or isinstance(endpoints, Endpoints)
        for subset in (endpoints.subsets if endpoints else None) or ():
            number = next((p.port for p in subset.ports or () if (p.name or "") == port_name), None)
            address = next((a.ip for a in subset.addresses or () if a.ip), None)
            if number is not None and address is not None:
                return address, number
    raise ConversionError(f'no endpoints available for service "{name}"')


# Between a ResourceStore and the backend.


def _decoded(kv: KeyValue) -> JSONObject | None:
    try:
        value = json.loads(kv.value)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class ConvertingStore:
    """A ``Store`` whose values are at ``served_api_version`` above and at
    ``storage_api_version`` below (module docstring).  Keys, revisions and errors pass
    through unchanged; values written come back as given, the value ``delete`` returns as
    it was stored."""

    def __init__(
        self, inner: Store, converter: Converter, served_api_version: str, storage_api_version: str
    ) -> None:
        self.inner = inner
        self.converter = converter
        self.served_api_version = served_api_version
        self.storage_api_version = storage_api_version

    async def _up(self, kvs: Sequence[KeyValue]) -> list[KeyValue]:
        """Values read, at the served version (one review for all that need it)."""
        decoded = [_decoded(kv) for kv in kvs]
        indexes = [
            i
            for i, obj in enumerate(decoded)
            if obj is not None and obj.get("apiVersion") != self.served_api_version
        ]
        if not indexes:
            return list(kvs)
        sent = []
        for i in indexes:
            obj = decoded[i]
            assert obj is not None
            metadata = obj.get("metadata")
            if isinstance(metadata, dict):
                # The webhook sees what a client would: the resourceVersion too.
                obj = {**obj, "metadata": {**metadata, "resourceVersion": str(kvs[i].mod_revision)}}
            sent.append(obj)
        converted = await self.converter.convert(sent, self.served_api_version)
        result = list(kvs)
        for i, obj in zip(indexes, converted, strict=True):
            metadata = obj.get("metadata")
            if isinstance(metadata, dict):
                metadata.pop("resourceVersion", None)
            kv = kvs[i]
            result[i] = KeyValue(
                kv.key, json.dumps(obj).encode(), kv.mod_revision, kv.create_revision
            )
        return result

    async def _down(self, value: bytes) -> bytes:
        """A value to write, at the storage version."""
        obj = json.loads(value)
        if not isinstance(obj, dict) or obj.get("apiVersion") == self.storage_api_version:
            return value
        (converted,) = await self.converter.convert([obj], self.storage_api_version)
        return json.dumps(converted).encode()

    async def create(self, key: str, value: bytes) -> KeyValue:
        kv = await self.inner.create(key, await self._down(value))
        return KeyValue(kv.key, value, kv.mod_revision, kv.create_revision)

    async def get(self, key: str) -> KeyValue:
        (kv,) = await self._up([await self.inner.get(key)])
        return kv

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        start_after: str | None = None,
        revision: int = 0,
    ) -> ListResult:
        page = await self.inner.list(
            prefix, limit=limit, start_after=start_after, revision=revision
        )
        items = await self._up(page.items)
        return ListResult(items, page.revision, page.more, page.remaining)

    async def count(self, prefix: str) -> int:
        return await self.inner.count(prefix)

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        kv = await self.inner.update(key, await self._down(value), expected_revision)
        return KeyValue(kv.key, value, kv.mod_revision, kv.create_revision)

    async def delete(self, key: str, expected_revision: int = 0) -> KeyValue:
        # The value deleted comes back as stored: converting it could fail after the delete
        # happened, and callers want only its revision.
        return await self.inner.delete(key, expected_revision)

    async def watch(
        self, prefix: str, from_revision: int, *, progress_after: float | None = None
    ) -> AsyncGenerator[Event | Progress, None]:
        events = self.inner.watch(prefix, from_revision, progress_after=progress_after)
        try:
            async for event in events:
                if isinstance(event, Progress):
                    yield event
                    continue
                pair = [event.kv] if event.prev is None else [event.kv, event.prev]
                converted = await self._up(pair)
                prev = converted[1] if event.prev is not None else None
                yield Event(event.type, converted[0], prev)
        finally:
            await events.aclose()

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def close(self) -> None:
        await self.inner.close()


__all__ = [
    "ConversionError",
    "Converter",
    "ConvertingStore",
    "NoneConverter",
    "Target",
    "WebhookConverter",
    "build_review",
    "converted_objects",
    "new_converter",
    "resolve_service",
    "restore_metadata",
]
