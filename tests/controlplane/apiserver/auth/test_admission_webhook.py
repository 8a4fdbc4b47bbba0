"""Dynamic admission through the API: real HTTPS webhooks on loopback (``webhook_servers``),
one mutating with a JSONPatch, one refusing, one too slow, matched by rules and a namespace
selector."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kube.api.kinds.admissionregistration_v1 import (
    MutatingWebhook,
    MutatingWebhookConfiguration,
    ValidatingWebhook,
    ValidatingWebhookConfiguration,
)
from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests.controlplane.apiserver.admission_servers import BACKENDS, serve
from tests.controlplane.apiserver.webhook_servers import (
    Configure,
    Webhooks,
    configure_fixture,  # noqa: F401 (fixture)
    denied,
    patched,
    selected,
    webhook,
    webhooks_fixture,  # noqa: F401 (fixture)
)
from tests.servers import ServerProcess


@pytest.fixture(scope="module", params=BACKENDS)
def apiserver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    yield from serve(
        request.param, tmp_path_factory, "--disable-admission-plugins", "ServiceAccount"
    )


async def test_a_webhook_mutates(
    client: Client, namespace: str, webhooks: Webhooks, configure: Configure
) -> None:
    webhooks.answers["/mutate"] = lambda asked: patched(
        [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}],
        warnings=["labelled by the test webhook"],
    )
    selector = await selected(client, namespace)
    await configure(
        MutatingWebhookConfiguration(
            metadata=ObjectMeta(name=f"{namespace}-mutate"),
            webhooks=[webhook(MutatingWebhook, "label.example.com", webhooks, "/mutate", selector)],
        )
    )
    created = await client.create(ConfigMap(metadata=ObjectMeta(name="c", namespace=namespace)))
    assert created.metadata.labels == {"mutated": "yes"}
    (review,) = webhooks.reviews
    asked = review["request"]
    assert (review["apiVersion"], review["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    assert asked["operation"] == "CREATE" and asked["namespace"] == namespace
    assert asked["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert asked["userInfo"]["username"] == "kubernetes-admin"
    assert asked["object"]["metadata"]["name"] == "c" and asked["oldObject"] is None


async def test_a_webhook_rejects(
    client: Client, namespace: str, webhooks: Webhooks, configure: Configure
) -> None:
    webhooks.answers["/validate"] = lambda asked: (
        denied("bad names are not allowed") if asked["name"].startswith("bad") else {}
    )
    selector = await selected(client, namespace)
    await configure(
        ValidatingWebhookConfiguration(
            metadata=ObjectMeta(name=f"{namespace}-validate"),
            webhooks=[
                webhook(ValidatingWebhook, "names.example.com", webhooks, "/validate", selector)
            ],
        )
    )
    with pytest.raises(ApiError) as refused:
        await client.create(ConfigMap(metadata=ObjectMeta(name="bad-one", namespace=namespace)))
    assert refused.value.code == 403
    assert refused.value.message == (
        'admission webhook "names.example.com" denied the request: bad names are not allowed'
    )
    await client.create(ConfigMap(metadata=ObjectMeta(name="good-one", namespace=namespace)))


async def test_a_webhooks_patch_that_does_not_apply_fails_the_request_and_writes_nothing(
    client: Client, namespace: str, webhooks: Webhooks, configure: Configure
) -> None:
    """As upstream's mutating dispatcher: an internal error (a proper Status), whatever the
    failurePolicy, since the webhook answered."""
    webhooks.answers["/mutate"] = lambda asked: patched([{"op": "remove", "path": "/nothing"}])
    selector = await selected(client, namespace)
    await configure(
        MutatingWebhookConfiguration(
            metadata=ObjectMeta(name=f"{namespace}-bad-patch"),
            webhooks=[webhook(MutatingWebhook, "bad.example.com", webhooks, "/mutate", selector)],
        )
    )
    with pytest.raises(ApiError) as refused:
        await client.create(ConfigMap(metadata=ObjectMeta(name="c", namespace=namespace)))
    assert (refused.value.code, refused.value.reason) == (500, "InternalError")
    assert 'failed calling webhook "bad.example.com": the patch does not apply' in (
        refused.value.message
    )
    assert not (await client.list(ConfigMap, namespace=namespace)).items


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_a_slow_webhook_times_out(
    client: Client, namespace: str, webhooks: Webhooks, configure: Configure, policy: str
) -> None:
    client.max_retries = 0  # a failed webhook is a 500, which clients would try again
    selector = await selected(client, namespace)
    await configure(
        ValidatingWebhookConfiguration(
            metadata=ObjectMeta(name=f"{namespace}-slow"),
            webhooks=[
                webhook(
                    ValidatingWebhook,
                    "slow.example.com",
                    webhooks,
                    "/slow",
                    selector,
                    failure_policy=policy,
                    timeout_seconds=1,
                )
            ],
        )
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
