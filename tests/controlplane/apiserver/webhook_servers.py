"""An HTTPS admission webhook server for the tests of dynamic admission: real TLS on loopback
(a certificate of a CA of the test's own, given as caBundle), answering AdmissionReviews as
each test tells it to, recording what it was asked."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import web

from kube.api.kinds.admissionregistration_v1 import (
    MutatingWebhook,
    MutatingWebhookConfiguration,
    RuleWithOperations,
    ValidatingWebhook,
    ValidatingWebhookConfiguration,
    WebhookClientConfig,
)
from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.meta_v1 import LabelSelector
from kube.client.errors import ApiError
from kube.client.rest import Client
from kube.pki import CertificateAuthority

Answer = Callable[[dict[str, Any]], dict[str, Any]]
"""From the AdmissionRequest, the response's fields (``allowed`` defaults to true; ``uid`` is
always the request's)."""


class Webhooks:
    """The server: ``answers`` maps a URL path to how it answers (a path without one allows);
    ``/slow`` answers after three seconds."""

    def __init__(self, ca: CertificateAuthority) -> None:
        self.ca = ca
        self.answers: dict[str, Answer] = {}
        self.reviews: list[dict[str, Any]] = []
        self.paths: list[str] = []
        """The path of each review, in the order they came."""
        self.port = 0

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def client_config(self, path: str) -> WebhookClientConfig:
        return WebhookClientConfig(url=self.url(path), ca_bundle=self.ca.cert_pem)

    def called(self, path: str) -> int:
        return self.paths.count(path)

    def clear(self) -> None:
        self.reviews.clear()
        self.paths.clear()

    async def _answer(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        self.paths.append(request.path)
        asked = review["request"]
        if request.path == "/slow":
            await asyncio.sleep(3)
        answer = self.answers.get(request.path)
        response = {"allowed": True, **(answer(asked) if answer else {}), "uid": asked["uid"]}
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )


def patched(operations: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """An allowing answer carrying a JSONPatch."""
    encoded = base64.b64encode(json.dumps(operations).encode()).decode()
    return {"patchType": "JSONPatch", "patch": encoded, **fields}


def denied(message: str, code: int = 403) -> dict[str, Any]:
    return {"allowed": False, "status": {"code": code, "reason": "Forbidden", "message": message}}


@pytest.fixture(name="webhooks")
async def webhooks_fixture(tmp_path: Path) -> AsyncIterator[Webhooks]:
    ca = CertificateAuthority.create()
    ca.issue("webhook", server=True, ip_addresses=["127.0.0.1"]).write(tmp_path, "webhook")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "webhook.crt", tmp_path / "webhook.key")
    hooks = Webhooks(ca)
    app = web.Application()
    app.router.add_post("/{path:.*}", hooks._answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    hooks.port = int(runner.addresses[0][1])
    try:
        yield hooks
    finally:
        await runner.cleanup()


def rules(*resources: str, operations: tuple[str, ...] = ("CREATE",)) -> list[RuleWithOperations]:
    """Rules for core v1 resources (default: configmaps, which ``until_called`` probes)."""
    return [
        RuleWithOperations(
            operations=list(operations),
            api_groups=[""],
            api_versions=["v1"],
            resources=list(resources or ("configmaps",)),
        )
    ]


Hook = TypeVar("Hook", MutatingWebhook, ValidatingWebhook)


def webhook(
    kind: type[Hook],
    name: str,
    hooks: Webhooks,
    path: str,
    selector: LabelSelector | None = None,
    **fields: Any,
) -> Hook:
    """A webhook calling ``path`` of ``hooks``, without side effects, for configmaps unless
    ``fields`` give other ``rules``."""
    fields.setdefault("rules", rules())
    return kind(
        name=name,
        client_config=hooks.client_config(path),
        namespace_selector=selector,
        side_effects="None",
        admission_review_versions=["v1"],
        **fields,
    )


async def selected(client: Client, namespace: str) -> LabelSelector:
    """Label the namespace so that only its objects reach this test's webhooks."""
    current = await client.get(Namespace, namespace)
    current.metadata.labels = {**(current.metadata.labels or {}), "webhooks": namespace}
    await client.update(current)
    return LabelSelector(match_labels={"webhooks": namespace})


async def until_called(
    client: Client,
    namespace: str,
    hooks: Webhooks,
    plural: str = "configmaps",
    body: dict[str, Any] | None = None,
) -> None:
    """Configurations reach admission through a watch cache: dry runs until a webhook is
    called (then its record is cleared)."""
    for _ in range(100):
        with contextlib.suppress(ApiError):  # what the webhooks answer is the test's business
            await client.request(
                "POST",
                f"/api/v1/namespaces/{namespace}/{plural}",
                params={"dryRun": "All"},
                body=json.dumps(body or {"metadata": {"name": "probe"}}).encode(),
            )
        if hooks.reviews:
            hooks.clear()
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the webhook was never called")


Configure = Callable[
    [MutatingWebhookConfiguration | ValidatingWebhookConfiguration], Awaitable[None]
]
"""Creates a webhook configuration (deleted when the test ends) and waits until admission
calls one of its webhooks (``until_called``)."""


@pytest.fixture(name="configure")
async def configure_fixture(
    client: Client, namespace: str, webhooks: Webhooks
) -> AsyncIterator[Configure]:
    made: list[MutatingWebhookConfiguration | ValidatingWebhookConfiguration] = []

    async def configure(
        configuration: MutatingWebhookConfiguration | ValidatingWebhookConfiguration,
    ) -> None:
        made.append(await client.create(configuration))
        await until_called(client, namespace, webhooks)

    try:
        yield configure
    finally:
        for configuration in made:
            await client.delete(type(configuration), configuration.metadata.name or "")
