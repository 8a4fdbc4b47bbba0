"""ResourceQuota admission through the API: usage checked and charged atomically with each
create, so concurrent creates never take a namespace over its quota."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from kube.api.kinds.core_v1.cluster import (
    ConfigMap,
    ResourceQuota,
    ResourceQuotaSpec,
    ResourceQuotaStatus,
)
from kube.api.kinds.core_v1.pod import Container, Pod, ResourceRequirements
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests import builders
from tests.controlplane.apiserver.admission_servers import BACKENDS, serve
from tests.servers import ServerProcess

CONCURRENT = 12


@pytest.fixture(scope="module", params=BACKENDS)
def apiserver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    yield from serve(
        request.param, tmp_path_factory, "--disable-admission-plugins", "ServiceAccount"
    )


SENTINEL = "count/secrets"
"""A resource each test's quota limits to zero: a dry-run Secret refused shows that admission
sees the quota (it reads quotas from a watch cache, a moment behind the store)."""


async def quota(
    client: Client, namespace: str, hard: dict[str, str], used: dict[str, str] | None
) -> None:
    """A quota, with the status the resourcequota controller (not running here) would give."""
    hard = {**hard, SENTINEL: "0"}
    created = await client.create(
        ResourceQuota(
            metadata=ObjectMeta(name="q", namespace=namespace),
            spec=ResourceQuotaSpec(hard=hard),  # type: ignore[arg-type]
        )
    )
    used = {**used, SENTINEL: "0"} if used is not None else None
    created.status = ResourceQuotaStatus(hard=hard, used=used)  # type: ignore[arg-type]
    await client.update_status(created)
    probe = json.dumps({"metadata": {"name": "probe"}}).encode()
    for _ in range(200):
        try:
            await client.request(
                "POST",
                f"/api/v1/namespaces/{namespace}/secrets",
                params={"dryRun": "All"},
                body=probe,
            )
        except ApiError as error:
            if error.code == 403:
                return
            raise
        await asyncio.sleep(0.02)
    raise AssertionError("admission never saw the quota")


def pod(namespace: str, name: str, cpu: str | None = None) -> Pod:
    resources = ResourceRequirements(requests={"cpu": cpu}) if cpu else None
    app = Container(name="app", image="app", resources=resources)
    return builders.pod(name, namespace, containers=[app])


async def used(client: Client, namespace: str) -> dict[str, str]:
    current = await client.get(ResourceQuota, "q", namespace)
    assert current.status is not None
    return {k: str(v) for k, v in (current.status.used or {}).items() if k != SENTINEL}


async def test_concurrent_creates_never_exceed_the_quota(client: Client, namespace: str) -> None:
    await quota(
        client, namespace, {"pods": "3", "requests.cpu": "1"}, {"pods": "0", "requests.cpu": "0"}
    )

    results = await asyncio.gather(
        *(client.create(pod(namespace, f"p{i}", cpu="300m")) for i in range(CONCURRENT)),
        return_exceptions=True,
    )

    created = [r for r in results if isinstance(r, Pod)]
    refusals = [r for r in results if not isinstance(r, Pod)]
    assert len(created) == 3
    assert all(isinstance(r, ApiError) and r.code == 403 for r in refusals), refusals
    assert all("exceeded quota: q" in r.message for r in refusals if isinstance(r, ApiError))
    assert len((await client.list(Pod, namespace)).items) == 3
    assert await used(client, namespace) == {"pods": "3", "requests.cpu": "900m"}


async def test_exceeded_quota_message(client: Client, namespace: str) -> None:
    await quota(client, namespace, {"pods": "1"}, {"pods": "0"})
    await client.create(pod(namespace, "first"))
    with pytest.raises(ApiError) as refused:
        await client.create(pod(namespace, "second"))
    assert refused.value.code == 403
    assert refused.value.message == (
        'pods "second" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, '
        "limited: pods=1"
    )


async def test_counts_and_other_kinds(client: Client, namespace: str) -> None:
    await quota(
        client,
        namespace,
        {"configmaps": "1", "count/pods": "5"},
        {"configmaps": "0", "count/pods": "0"},
    )
    await client.create(ConfigMap(metadata=ObjectMeta(name="one", namespace=namespace)))
    with pytest.raises(ApiError) as refused:
        await client.create(ConfigMap(metadata=ObjectMeta(name="two", namespace=namespace)))
    assert "exceeded quota: q, requested: configmaps=1, used: configmaps=1" in refused.value.message
    await client.create(pod(namespace, "p"))
    assert await used(client, namespace) == {"configmaps": "1", "count/pods": "1"}


async def test_unknown_usage_and_unstated_requests_are_refused(
    client: Client, namespace: str
) -> None:
    await quota(client, namespace, {"pods": "2", "requests.cpu": "1"}, {"pods": "0"})
    with pytest.raises(ApiError) as refused:
        await client.create(pod(namespace, "p", cpu="100m"))
    assert refused.value.message == (
        'pods "p" is forbidden: status unknown for quota: q, resources: requests.cpu'
    )
    with pytest.raises(ApiError) as refused:
        await client.create(pod(namespace, "p"))
    assert refused.value.message == (
        'pods "p" is forbidden: failed quota: q: must specify requests.cpu'
    )


async def test_dry_run_is_not_charged(client: Client, namespace: str) -> None:
    await quota(client, namespace, {"pods": "1"}, {"pods": "0"})
    await client.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods",
        params={"dryRun": "All"},
        body=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "dry"},
                "spec": {"containers": [{"name": "app", "image": "app"}]},
            }
        ).encode(),
    )
    assert await used(client, namespace) == {"pods": "0"}
