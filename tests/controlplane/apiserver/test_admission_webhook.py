"""Dynamic admission through the API: real HTTPS webhooks on loopback (a certificate of a CA
of the test's own, given as caBundle), one mutating with a JSONPatch, one refusing, one too
slow, matched by rules and a namespace selector."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubelab.api.kinds.admissionregistration_v1 import (
    MutatingWebhook,
    MutatingWebhookConfiguration,
    RuleWithOperations,
    ValidatingWebhook,
    ValidatingWebhookConfiguration,
    WebhookClientConfig,
)
from kubelab.api.kinds.core_v1.cluster import ConfigMap, Namespace
from kubelab.api.meta_v1 import LabelSelector, ObjectMeta
from kubelab.client.errors import ApiError
from kubelab.client.rest import Client
from kubelab.pki import CertificateAuthority
from tests.controlplane.apiserver.admission_servers import BACKENDS, serve
from tests.servers import ServerProcess


@pytest.fixture(scope="module", params=BACKENDS)
def apiserver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    yield from serve(
        request.param, tmp_path_factory, "--disable-admission-plugins", "ServiceAccount"
    )


class Webhooks:
    """An HTTPS server answering AdmissionReviews, recording what it was asked."""

    def __init__(self, ca: CertificateAuthority) -> None:
        self.ca = ca
        self.reviews: list[dict[str, Any]] = []
        self.port = 0

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    async def _answer(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        asked = review["request"]
        response: dict[str, Any] = {"uid": asked["uid"], "allowed": True}
        if request.path == "/mutate":
            patch = [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
            response["warnings"] = ["labelled by the test webhook"]
        elif request.path == "/validate" and asked["name"].startswith("bad"):
            response = {
                "uid": asked["uid"],
                "allowed": False,
                "status": {
                    "code": 403,
                    "reason": "Forbidden",
                    "message": "bad names are not allowed",
                },
            }
        elif request.path == "/slow":
            await asyncio.sleep(3)
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )


@pytest.fixture
async def webhooks(tmp_path: Path) -> AsyncIterator[Webhooks]:
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


def rules() -> list[RuleWithOperations]:
    return [
        RuleWithOperations(
            operations=["CREATE"], api_groups=[""], api_versions=["v1"], resources=["configmaps"]
        )
    ]


def client_config(hooks: Webhooks, path: str) -> WebhookClientConfig:
    return WebhookClientConfig(url=hooks.url(path), ca_bundle=hooks.ca.cert_pem)


async def selected(client: Client, namespace: str) -> LabelSelector:
    """Label the namespace so that only its objects reach this test's webhooks."""
    current = await client.get(Namespace, namespace)
    current.metadata.labels = {**(current.metadata.labels or {}), "webhooks": namespace}
    await client.update(current)
    return LabelSelector(match_labels={"webhooks": namespace})


async def until_called(client: Client, namespace: str, hooks: Webhooks) -> None:
    """Configurations reach admission through a watch cache: dry runs until one is seen."""
    for _ in range(100):
        await client.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/configmaps",
            params={"dryRun": "All"},
            body=json.dumps({"metadata": {"name": "probe"}}).encode(),
        )
        if hooks.reviews:
            hooks.reviews.clear()
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the webhook was never called")


async def test_a_webhook_mutates(client: Client, namespace: str, webhooks: Webhooks) -> None:
    name = f"{namespace}-mutate"
    await client.create(
        MutatingWebhookConfiguration(
            metadata=ObjectMeta(name=name),
            webhooks=[
                MutatingWebhook(
                    name="label.example.com",
                    client_config=client_config(webhooks, "/mutate"),
                    rules=rules(),
                    namespace_selector=await selected(client, namespace),
                    side_effects="None",
                    admission_review_versions=["v1"],
                )
            ],
        )
    )
    try:
        await until_called(client, namespace, webhooks)
        created = await client.create(ConfigMap(metadata=ObjectMeta(name="c", namespace=namespace)))
        assert created.metadata.labels == {"mutated": "yes"}
        (review,) = webhooks.reviews
        asked = review["request"]
        assert (review["apiVersion"], review["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
        assert asked["operation"] == "CREATE" and asked["namespace"] == namespace
        assert asked["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
        assert asked["userInfo"]["username"] == "kubernetes-admin"
        assert asked["object"]["metadata"]["name"] == "c" and asked["oldObject"] is None
    finally:
        await client.delete(MutatingWebhookConfiguration, name)


async def test_a_webhook_rejects(client: Client, namespace: str, webhooks: Webhooks) -> None:
    name = f"{namespace}-validate"
    await client.create(
        ValidatingWebhookConfiguration(
            metadata=ObjectMeta(name=name),
            webhooks=[
                ValidatingWebhook(
                    name="names.example.com",
                    client_config=client_config(webhooks, "/validate"),
                    rules=rules(),
                    namespace_selector=await selected(client, namespace),
                    side_effects="None",
                    admission_review_versions=["v1"],
                )
            ],
        )
    )
    try:
        await until_called(client, namespace, webhooks)
        with pytest.raises(ApiError) as refused:
            await client.create(ConfigMap(metadata=ObjectMeta(name="bad-one", namespace=namespace)))
        assert refused.value.code == 403
        assert refused.value.message == (
            'admission webhook "names.example.com" denied the request: bad names are not allowed'
        )
        await client.create(ConfigMap(metadata=ObjectMeta(name="good-one", namespace=namespace)))
    finally:
        await client.delete(ValidatingWebhookConfiguration, name)


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_a_slow_webhook_times_out(
    client: Client, namespace: str, webhooks: Webhooks, policy: str
) -> None:
    name = f"{namespace}-slow"
    client.max_retries = 0  # a failed webhook is a 500, which clients would try again
    await client.create(
        ValidatingWebhookConfiguration(
            metadata=ObjectMeta(name=name),
            webhooks=[
                ValidatingWebhook(
                    name="slow.example.com",
                    client_config=client_config(webhooks, "/slow"),
                    rules=rules(),
                    namespace_selector=await selected(client, namespace),
                    side_effects="None",
                    failure_policy=policy,
                    timeout_seconds=1,
                    admission_review_versions=["v1"],
                )
            ],
        )
    )
    try:
        while not webhooks.reviews:  # the configuration has reached admission
            with contextlib.suppress(ApiError):
                await client.create(
                    ConfigMap(metadata=ObjectMeta(generate_name="probe-", namespace=namespace))
                )
        made = ConfigMap(metadata=ObjectMeta(name="c", namespace=namespace))
        if policy == "Ignore":
            await client.create(made)
            return
        with pytest.raises(ApiError) as failed:
            await client.create(made)
        assert failed.value.code == 500
        assert 'failed calling webhook "slow.example.com": failed to call webhook: Post "' in (
            failed.value.message
        )
        assert "no answer within 1s (timeout)" in failed.value.message
    finally:
        await client.delete(ValidatingWebhookConfiguration, name)
