"""CRD conversion webhooks: the review and its checks, the transport, and a real API server
converting through a real HTTPS webhook.

The webhook (``WidgetWebhook``) runs in this process on 127.0.0.1, in a thread of its own so
blocking clients (kubectl, the Python client) can use the API server meanwhile; its
certificate comes from a CA made for the test, whose PEM is the CRD's caBundle.  Widget v1 has
``spec.size``, v2 ``spec.replicas``; v1 is stored.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import ssl
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from aiohttp import web
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ApiException

from controlplane.apiserver import errors
from controlplane.apiserver.crd import conversion
from controlplane.apiserver.crd.conversion import ConversionError, Target
from kube.api.kinds.apiextensions_v1 import (
    ServiceReference,
    WebhookClientConfig,
    WebhookConversion,
)
from kube.pki import CertificateAuthority, KeyPair
from tests.servers import Kubectl, ServerProcess

GROUP = "conv.example.com"
V1, V2 = f"{GROUP}/v1", f"{GROUP}/v2"


def _widget(api_version: str = V1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "Widget",
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "uid": "u-1",
            "labels": {"a": "1"},
            "generation": 1,
        },
        "spec": spec,
    }


def _convert(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    """What the test webhook does: v1 spec.size <-> v2 spec.replicas."""
    out = copy.deepcopy(obj)
    spec = out.setdefault("spec", {})
    if desired == V2 and "size" in spec:
        spec["replicas"] = spec.pop("size")
    if desired == V1 and "replicas" in spec:
        spec["size"] = spec.pop("replicas")
    out["apiVersion"] = desired
    return out


def _answer(uid: str, objects: list[Any], status: str = "Success", message: str = "") -> Any:
    result: dict[str, Any] = {"status": status}
    if message:
        result["message"] = message
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {"uid": uid, "result": result, "convertedObjects": objects},
    }


# The review and the checks of its answer.


def test_build_review() -> None:
    review = conversion.build_review("id-1", V2, [_widget(size=1)])
    assert review == {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "id-1", "desiredAPIVersion": V2, "objects": [_widget(size=1)]},
    }


def test_converted_objects_accepts_a_good_answer() -> None:
    original = _widget(size=3)
    converted = _convert(original, V2)
    converted["metadata"]["labels"] = {"a": "2", "b": "x"}
    converted["metadata"]["annotations"] = {"note": "converted"}
    converted["metadata"]["generation"] = 7  # not the webhook's to change: put back
    (out,) = conversion.converted_objects(_answer("id", [converted]), "id", V2, [original])
    assert out["spec"] == {"replicas": 3}
    assert out["apiVersion"] == V2
    assert out["metadata"]["labels"] == {"a": "2", "b": "x"}
    assert out["metadata"]["annotations"] == {"note": "converted"}
    assert out["metadata"]["generation"] == 1


def test_converted_objects_drops_labels_the_webhook_removed() -> None:
    original = _widget(size=3)
    converted = _convert(original, V2)
    del converted["metadata"]["labels"]
    (out,) = conversion.converted_objects(_answer("id", [converted]), "id", V2, [original])
    assert "labels" not in out["metadata"]


def _mutated(path: str, value: Any) -> dict[str, Any]:
    obj = _convert(_widget(size=3), V2)
    node = obj
    *parents, last = path.split(".")
    for name in parents:
        node = node[name]
    node[last] = value
    return obj


BAD_ANSWERS = [
    pytest.param(["not", "a", "review"], "failed: unrecognized response type: list", id="list"),
    pytest.param(
        {**_answer("id", []), "apiVersion": "apiextensions.k8s.io/v1beta1"},
        "failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, "
        "got apiextensions.k8s.io/v1beta1, Kind=ConversionReview",
        id="v1beta1-answer",
    ),
    pytest.param(
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"},
        "failed: no response provided",
        id="no-response",
    ),
    pytest.param(
        _answer("other", [_convert(_widget(size=3), V2)]),
        'failed: expected response.uid="id", got "other"',
        id="uid",
    ),
    pytest.param(
        _answer("id", [], status="Failure", message="cannot convert widgets today"),
        "failed: cannot convert widgets today",
        id="failure-message",
    ),
    pytest.param(
        _answer("id", [], status="Failure"),
        "failed: response.result.status was 'Failure', not 'Success'",
        id="failure-no-message",
    ),
    pytest.param(_answer("id", []), "returned 0 objects, expected 1", id="count"),
    pytest.param(
        _answer("id", [_widget(V1, size=3)]),
        "returned invalid converted object at index 0: invalid groupVersion "
        f"(expected {V2}, received {V1})",
        id="api-version",
    ),
    pytest.param(
        _answer("id", [_mutated("kind", "Gadget")]),
        "returned invalid converted object at index 0: invalid kind (expected Widget, "
        "received Gadget)",
        id="kind",
    ),
    pytest.param(
        _answer("id", [_mutated("metadata.name", "other")]),
        "returned invalid converted object at index 0: must have the same name: w != other",
        id="name",
    ),
    pytest.param(
        _answer("id", [_mutated("metadata.namespace", "elsewhere")]),
        "returned invalid converted object at index 0: must have the same namespace: "
        "ns != elsewhere",
        id="namespace",
    ),
    pytest.param(
        _answer("id", [_mutated("metadata.uid", "u-2")]),
        "returned invalid converted object at index 0: must have the same UID: u-1 != u-2",
        id="uid-changed",
    ),
    pytest.param(
        _answer("id", [_mutated("metadata.labels", {"a": 1})]),
        "returned invalid converted object at index 0: metadata.labels[a] must be a string, "
        "but is int in converted object",
        id="label-not-string",
    ),
    pytest.param(
        _answer("id", [_mutated("metadata.labels", {"a": "not valid!"})]),
        "returned invalid converted object at index 0: [metadata.labels: Invalid value:",
        id="label-invalid",
    ),
    pytest.param(
        _answer("id", [_mutated("metadata", None)]),
        "returned invalid converted object at index 0: must have the same name: w != ",
        id="no-metadata",
    ),
]


@pytest.mark.parametrize(("answer", "expected"), BAD_ANSWERS)
def test_converted_objects_refuses(answer: Any, expected: str) -> None:
    with pytest.raises(ConversionError) as raised:
        conversion.converted_objects(answer, "id", V2, [_widget(size=3)])
    assert str(raised.value).startswith(expected)


# Converters, with a fake transport.


class FakeTransport:
    """Answers reviews as the test webhook does; records what it was sent."""

    def __init__(self, mangle: bool = False) -> None:
        self.calls: list[tuple[Target, dict[str, Any]]] = []
        self.mangle = mangle

    async def __call__(self, target: Target, body: bytes, context: ssl.SSLContext) -> bytes:
        review = json.loads(body)
        self.calls.append((target, review))
        request = review["request"]
        objects = [_convert(o, request["desiredAPIVersion"]) for o in request["objects"]]
        if self.mangle:
            objects = objects[:-1]
        return json.dumps(_answer(request["uid"], objects)).encode()


def _webhook(
    url: str | None = "https://convert.example.com/widgets",
    service: ServiceReference | None = None,
    versions: list[str] | None = None,
) -> WebhookConversion:
    return WebhookConversion(
        client_config=WebhookClientConfig(url=url, service=service),
        conversion_review_versions=versions or ["v1"],
    )


async def test_none_converter_rewrites_api_version() -> None:
    out = await conversion.NoneConverter().convert([_widget(size=1)], V2)
    assert out == [{**_widget(size=1), "apiVersion": V2}]


async def test_webhook_converter_batches_and_skips_converted_objects() -> None:
    transport = FakeTransport()
    converter = conversion.WebhookConverter(_webhook(), transport=transport)
    objects = [_widget(size=1), _widget(V2, replicas=2), _widget(size=3)]
    out = await converter.convert(objects, V2)
    assert [o["spec"] for o in out] == [{"replicas": 1}, {"replicas": 2}, {"replicas": 3}]
    ((target, review),) = transport.calls
    assert target == Target("https://convert.example.com/widgets?timeout=10s")
    assert [o["spec"] for o in review["request"]["objects"]] == [{"size": 1}, {"size": 3}]
    assert await converter.convert([_widget(V2)], V2) == [_widget(V2)]
    assert len(transport.calls) == 1  # nothing to convert: no call


async def test_webhook_converter_failure_is_upstreams_500() -> None:
    converter = conversion.WebhookConverter(_webhook(), transport=FakeTransport(mangle=True))
    with pytest.raises(errors.ApiError) as raised:
        await converter.convert([_widget(size=1)], V2)
    assert raised.value.code == 500
    assert raised.value.reason == "InternalError"
    assert raised.value.message == (
        f"Internal error occurred: conversion webhook for {V1}, Kind=Widget returned 0 "
        "objects, expected 1"
    )


async def test_webhook_converter_needs_review_v1() -> None:
    transport = FakeTransport()
    converter = conversion.WebhookConverter(_webhook(versions=["v1beta1"]), transport=transport)
    with pytest.raises(errors.ApiError) as raised:
        await converter.convert([_widget(size=1)], V2)
    assert "does not include v1" in raised.value.message
    assert "v1beta1 is not supported" in raised.value.message
    assert not transport.calls


async def test_webhook_converter_resolves_services() -> None:
    transport = FakeTransport()
    resolved: list[tuple[str, str, int]] = []

    async def resolve(namespace: str, name: str, port: int) -> tuple[str, int]:
        resolved.append((namespace, name, port))
        return "10.0.0.7", 8443

    service = ServiceReference(namespace="hooks", name="widgets", path="/convert")
    converter = conversion.WebhookConverter(
        _webhook(url=None, service=service), resolve, transport=transport
    )
    await converter.convert([_widget(size=1)], V2)
    assert resolved == [("hooks", "widgets", 443)]
    assert transport.calls[0][0] == Target(
        "https://10.0.0.7:8443/convert?timeout=10s",
        server_hostname="widgets.hooks.svc",
        host_header="widgets.hooks.svc",
    )


# The real transport: TLS verified against the caBundle, by the service's name.


def _issue(ca: CertificateAuthority, directory: Path, **names: Any) -> ssl.SSLContext:
    pair: KeyPair = ca.issue("webhook", server=True, **names)
    cert, key = pair.write(directory, "webhook")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


async def _convert_handler(request: web.Request) -> web.Response:
    review = await request.json()
    body = review["request"]
    objects = [_convert(o, body["desiredAPIVersion"]) for o in body["objects"]]
    return web.json_response(_answer(body["uid"], objects))


@pytest.fixture
async def service_webhook(tmp_path: Path) -> AsyncIterator[tuple[CertificateAuthority, int]]:
    """An HTTPS webhook on 127.0.0.1 whose certificate names only widgets.hooks.svc."""
    ca = CertificateAuthority.create("webhook-test-ca")
    app = web.Application()
    app.router.add_post("/convert", _convert_handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(
        runner, "127.0.0.1", 0, ssl_context=_issue(ca, tmp_path, dns_names=["widgets.hooks.svc"])
    )
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield ca, port
    finally:
        await runner.cleanup()


async def test_service_reference_over_tls(
    service_webhook: tuple[CertificateAuthority, int],
) -> None:
    ca, port = service_webhook

    async def resolve(namespace: str, name: str, service_port: int) -> tuple[str, int]:
        return "127.0.0.1", port

    def converter(name: str, bundle: bytes | None) -> conversion.WebhookConverter:
        service = ServiceReference(namespace="hooks", name=name, path="/convert", port=443)
        webhook = _webhook(url=None, service=service)
        assert webhook.client_config is not None
        webhook.client_config.ca_bundle = bundle
        return conversion.WebhookConverter(webhook, resolve)

    (out,) = await converter("widgets", ca.cert_pem).convert([_widget(size=4)], V2)
    assert out["spec"] == {"replicas": 4}
    # Another service name: the certificate does not match it.
    with pytest.raises(errors.ApiError) as raised:
        await converter("gadgets", ca.cert_pem).convert([_widget(size=4)], V2)
    assert "certificate" in raised.value.message.lower()
    # No caBundle: the system trust does not know the test CA.
    with pytest.raises(errors.ApiError) as raised:
        await converter("widgets", None).convert([_widget(size=4)], V2)
    assert "certificate" in raised.value.message.lower()


async def test_unreachable_webhook() -> None:
    webhook = _webhook(url="https://127.0.0.1:1/convert")
    with pytest.raises(errors.ApiError) as raised:
        await conversion.WebhookConverter(webhook).convert([_widget(size=4)], V2)
    assert raised.value.code == 500
    assert raised.value.message.startswith(
        f"Internal error occurred: conversion webhook for {V1}, Kind=Widget failed: "
        'Post "https://127.0.0.1:1/convert?timeout=10s": '
    )


# End to end.


class WidgetWebhook:
    """The conversion webhook, served over HTTPS from a thread with its own event loop."""

    def __init__(self, directory: Path) -> None:
        self.ca = CertificateAuthority.create("webhook-test-ca")
        self.context = _issue(self.ca, directory, ip_addresses=["127.0.0.1"])
        self.reviews: list[dict[str, Any]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="widget-webhook", daemon=True)

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(10), "the webhook did not start"

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/convert"

    async def _handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        body = review["request"]
        objects = [_convert(o, body["desiredAPIVersion"]) for o in body["objects"]]
        for obj in objects:
            if (obj["metadata"].get("labels") or {}).get("mangle") == "name":
                obj["metadata"]["name"] = "renamed"
        return web.json_response(_answer(body["uid"], objects))

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_post("/convert", self._handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.context)
        await site.start()
        self.port = runner.addresses[0][1]
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()


def _schema(field: str) -> dict[str, Any]:
    return {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {field: {"type": "integer"}}},
            },
        }
    }


def _crd(plural: str, conversion_spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural[:-1], "kind": plural[:-1].title()},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": _schema("size")},
                {"name": "v2", "served": True, "storage": False, "schema": _schema("replicas")},
            ],
            "conversion": conversion_spec,
        },
    }


def _webhook_conversion(url: str, ca_pem: bytes) -> dict[str, Any]:
    return {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode()},
            "conversionReviewVersions": ["v1", "v1beta1"],
        },
    }


def _create_crd(apiserver: ServerProcess, tmp_path: Path, crd: dict[str, Any]) -> None:
    kubectl = Kubectl(apiserver.kubeconfig, tmp_path / "crd-cache", "default")
    kubectl.run("apply", "-f", "-", input=json.dumps(crd), namespaced=False)
    kubectl.run(
        "wait",
        "--for",
        "condition=established",
        "--timeout=20s",
        f"crd/{crd['metadata']['name']}",
        namespaced=False,
    )


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WidgetWebhook]:
    server = WidgetWebhook(tmp_path_factory.mktemp("webhook"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def widgets(
    apiserver: ServerProcess, webhook: WidgetWebhook, tmp_path_factory: pytest.TempPathFactory
) -> None:
    crd = _crd("widgets", _webhook_conversion(webhook.url, webhook.ca.cert_pem))
    _create_crd(apiserver, tmp_path_factory.mktemp("widgets"), crd)


def _custom(api_client: kubernetes.client.ApiClient) -> Any:
    return kubernetes.client.CustomObjectsApi(api_client)


def _body(api_version: str, name: str, kind: str = "Widget", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "labels": {"app": "w"}},
        "spec": spec,
    }


def test_read_list_and_write_through_the_webhook(
    widgets: None, webhook: WidgetWebhook, kubectl: Kubectl, api_client: Any
) -> None:
    custom, ns = _custom(api_client), kubectl.namespace
    custom.create_namespaced_custom_object(GROUP, "v1", ns, "widgets", _body(V1, "one", size=3))
    custom.create_namespaced_custom_object(GROUP, "v1", ns, "widgets", _body(V1, "two", size=4))
    one = custom.get_namespaced_custom_object(GROUP, "v2", ns, "widgets", "one")
    assert one["apiVersion"] == V2
    assert one["spec"] == {"replicas": 3}
    assert one["metadata"]["labels"] == {"app": "w"}
    assert one["metadata"]["resourceVersion"]
    # A list is converted in one review.
    before = len(webhook.reviews)
    listed = custom.list_namespaced_custom_object(GROUP, "v2", ns, "widgets")
    assert [i["spec"] for i in listed["items"]] == [{"replicas": 3}, {"replicas": 4}]
    assert all(i["apiVersion"] == V2 for i in listed["items"])
    assert len(webhook.reviews) == before + 1
    assert len(webhook.reviews[-1]["request"]["objects"]) == 2
    # Written at v2, stored at v1.
    custom.create_namespaced_custom_object(
        GROUP, "v2", ns, "widgets", _body(V2, "three", replicas=5)
    )
    three = custom.get_namespaced_custom_object(GROUP, "v1", ns, "widgets", "three")
    assert three["spec"] == {"size": 5}
    custom.patch_namespaced_custom_object(
        GROUP, "v2", ns, "widgets", "one", {"spec": {"replicas": 9}}
    )
    assert custom.get_namespaced_custom_object(GROUP, "v1", ns, "widgets", "one")["spec"] == {
        "size": 9
    }
    # kubectl too.
    got: Any = kubectl.json("get", f"widgets.v2.{GROUP}", "two")
    assert got["spec"] == {"replicas": 4}


def test_watch_through_the_webhook(widgets: None, kubectl: Kubectl, api_client: Any) -> None:
    custom, ns = _custom(api_client), kubectl.namespace
    listed = custom.list_namespaced_custom_object(GROUP, "v2", ns, "widgets")
    revision = listed["metadata"]["resourceVersion"]
    custom.create_namespaced_custom_object(GROUP, "v1", ns, "widgets", _body(V1, "w", size=1))
    custom.patch_namespaced_custom_object(GROUP, "v1", ns, "widgets", "w", {"spec": {"size": 2}})
    custom.delete_namespaced_custom_object(GROUP, "v1", ns, "widgets", "w")
    events = list(
        kubernetes.watch.Watch().stream(
            custom.list_namespaced_custom_object,
            GROUP,
            "v2",
            ns,
            "widgets",
            resource_version=revision,
            timeout_seconds=1,
        )
    )
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert [e["object"]["spec"] for e in events] == [
        {"replicas": 1},
        {"replicas": 2},
        {"replicas": 2},
    ]
    assert all(e["object"]["apiVersion"] == V2 for e in events)


def test_invalid_answer_is_a_clear_error(widgets: None, kubectl: Kubectl, api_client: Any) -> None:
    custom, ns = _custom(api_client), kubectl.namespace
    body = _body(V1, "mangled", size=1)
    body["metadata"]["labels"]["mangle"] = "name"
    custom.create_namespaced_custom_object(GROUP, "v1", ns, "widgets", body)
    with pytest.raises(kubernetes.client.ApiException) as raised:
        custom.get_namespaced_custom_object(GROUP, "v2", ns, "widgets", "mangled")
    assert raised.value.status == 500
    status = json.loads(raised.value.body)
    assert status["reason"] == "InternalError"
    assert status["message"] == (
        f"Internal error occurred: conversion webhook for {V1}, Kind=Widget returned invalid "
        "converted object at index 0: must have the same name: mangled != renamed"
    )


def test_webhook_down(
    apiserver: ServerProcess, kubectl: Kubectl, api_client: Any, tmp_path: Path
) -> None:
    ca = CertificateAuthority.create("unused")
    crd = _crd("sprockets", _webhook_conversion("https://127.0.0.1:1/convert", ca.cert_pem))
    _create_crd(apiserver, tmp_path, crd)
    custom, ns = _custom(api_client), kubectl.namespace
    # At the storage version nothing needs converting.
    custom.create_namespaced_custom_object(
        GROUP, "v1", ns, "sprockets", _body(V1, "s", "Sprocket", size=1)
    )
    assert custom.get_namespaced_custom_object(GROUP, "v1", ns, "sprockets", "s")["spec"] == {
        "size": 1
    }
    with pytest.raises(kubernetes.client.ApiException) as raised:
        custom.get_namespaced_custom_object(GROUP, "v2", ns, "sprockets", "s")
    assert raised.value.status == 500
    status = json.loads(raised.value.body)
    assert status["kind"] == "Status" and status["reason"] == "InternalError"
    assert status["message"].startswith(
        f"Internal error occurred: conversion webhook for {V1}, Kind=Sprocket failed: "
        'Post "https://127.0.0.1:1/convert?timeout=10s": '
    )
    assert "Traceback" not in raised.value.body
    failed = kubectl.run("get", f"sprockets.v2.{GROUP}", "s", check=False)
    assert failed.returncode != 0
    assert "Error from server (InternalError)" in failed.stderr
    assert "conversion webhook for" in failed.stderr


def _invalid(conversion_spec: dict[str, Any]) -> dict[str, Any]:
    crd = _crd("gizmos", conversion_spec)
    crd["metadata"]["name"] = f"gizmos-{uuid.uuid4().hex[:6]}.{GROUP}"
    return crd


HOOK = {"url": "https://127.0.0.1:9443/convert"}
INVALID_CONVERSIONS = [
    pytest.param(
        {"strategy": "Webhook"},
        "spec.conversion.webhookClientConfig",
        "FieldValueRequired",
        id="webhook-without-config",
    ),
    pytest.param(
        {"strategy": "Webhook", "webhook": {"clientConfig": HOOK}},
        "spec.conversion.conversionReviewVersions",
        "FieldValueRequired",
        id="no-review-versions",
    ),
    pytest.param(
        {
            "strategy": "Webhook",
            "webhook": {"clientConfig": HOOK, "conversionReviewVersions": ["v2"]},
        },
        "spec.conversion.conversionReviewVersions",
        "FieldValueInvalid",
        id="unknown-review-version",
    ),
    pytest.param(
        {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"url": "http://127.0.0.1/convert"},
                "conversionReviewVersions": ["v1"],
            },
        },
        "spec.conversion.webhookClientConfig.url",
        "FieldValueInvalid",
        id="http-url",
    ),
    pytest.param(
        {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"url": "https://me@127.0.0.1/convert?x=1#y"},
                "conversionReviewVersions": ["v1"],
            },
        },
        "spec.conversion.webhookClientConfig.url",
        "FieldValueInvalid",
        id="user-query-fragment",
    ),
    pytest.param(
        {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {**HOOK, "service": {"namespace": "hooks", "name": "widgets"}},
                "conversionReviewVersions": ["v1"],
            },
        },
        "spec.conversion.webhookClientConfig",
        "FieldValueRequired",
        id="url-and-service",
    ),
    pytest.param(
        {"strategy": "None", "webhook": {"clientConfig": HOOK}},
        "spec.conversion.webhookClientConfig",
        "FieldValueForbidden",
        id="none-with-webhook",
    ),
]


@pytest.mark.parametrize(("conversion_spec", "field", "reason"), INVALID_CONVERSIONS)
def test_invalid_conversion_is_422(
    apiserver: ServerProcess,
    api_client: kubernetes.client.ApiClient,
    conversion_spec: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    crds = DynamicClient(api_client).resources.get(
        api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition"
    )
    with pytest.raises(ApiException) as raised:
        crds.create(body=_invalid(conversion_spec))
    assert raised.value.status == 422
    status = json.loads(raised.value.body)
    assert status["reason"] == "Invalid"
    causes = {(c["field"], c["reason"]) for c in status["details"]["causes"]}
    assert (field, reason) in causes, causes
