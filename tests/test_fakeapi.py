"""The in-memory API behaves as the API server does where components can tell: versions and
conflicts, watches from a resourceVersion, patches, reactors, and raw paths."""

from __future__ import annotations

import asyncio

import pytest

from kube.api import codec
from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.meta_v1 import ObjectMeta, Preconditions
from kube.client.errors import ApiError
from kube.client.informers import SharedInformerFactory
from tests.fakeapi import Action, FakeApi, api_error


def config_map(name: str, **data: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace="ns"), data=data or None)


async def test_writes_stamp_versions_and_stale_updates_conflict() -> None:
    api = FakeApi()
    created = await api.create(config_map("a", k="1"))
    assert created.metadata.uid and created.metadata.resource_version
    created.data = {"k": "2"}
    updated = await api.update(created)
    assert int(updated.metadata.resource_version or 0) > int(created.metadata.resource_version or 0)
    with pytest.raises(ApiError) as conflict:
        await api.update(created)  # still at the old version
    assert conflict.value.status.code == 409
    with pytest.raises(ApiError) as exists:
        await api.create(config_map("a"))
    assert exists.value.status.reason == "AlreadyExists"
    with pytest.raises(ApiError) as precondition:
        await api.delete(ConfigMap, "a", "ns", preconditions=Preconditions(uid="other"))
    assert precondition.value.status.code == 409
    assert [(a.verb, a.name) for a in api.actions] == [("create", "a"), ("update", "a")]


async def test_patches_apply_as_the_server_applies_them() -> None:
    api = FakeApi()
    await api.create(config_map("a", k="1", gone="x"))
    await api.patch(ConfigMap, "a", "ns", {"data": {"gone": None, "new": "2"}})
    json_patched = await api.patch(
        ConfigMap,
        "a",
        "ns",
        [{"op": "replace", "path": "/data/k", "value": "3"}],
        patch_type="json",
    )
    assert json_patched.data == {"k": "3", "new": "2"}
    assert [a.patch_type for a in api.writes("patch")] == ["merge", "json"]


async def test_a_watch_replays_after_its_version_then_follows() -> None:
    api = FakeApi()
    first = await api.create(config_map("a"))
    await api.create(config_map("b"))
    events = api.watch(ConfigMap, "ns", resource_version=first.metadata.resource_version)
    assert (await anext(events)).object.metadata.name == "b"
    await api.delete(ConfigMap, "a", "ns")
    deleted = await anext(events)
    assert (deleted.type, deleted.object.metadata.name) == ("DELETED", "a")
    await events.aclose()


async def test_an_informer_lists_and_watches_through_it() -> None:
    api = FakeApi()
    await api.create(config_map("a"))
    informers = SharedInformerFactory(api, clock=api.clock)
    informer = informers.informer_for(ConfigMap)
    informers.start()
    try:
        await informers.wait_for_cache_sync()
        await api.create(config_map("b"))
        for _ in range(100):
            if len(informer.lister.list()) == 2:
                break
            await asyncio.sleep(0)
        assert sorted(o.metadata.name or "" for o in informer.lister.list()) == ["a", "b"]
    finally:
        await informers.shutdown()


async def test_reactors_answer_fall_through_or_fail_once() -> None:
    api = FakeApi()
    await api.create(config_map("a", k="1"))

    def only_x(action: Action) -> ConfigMap | None:
        return config_map(action.name, k="reacted") if action.name == "x" else None

    api.react("get", "ConfigMap", only_x)
    assert (await api.get(ConfigMap, "x", "ns")).data == {"k": "reacted"}
    assert (await api.get(ConfigMap, "a", "ns")).data == {"k": "1"}
    api.fail_next("get", api_error(500, "InternalError", "down"))
    with pytest.raises(ApiError):
        await api.get(ConfigMap, "a", "ns")
    assert (await api.get(ConfigMap, "a", "ns")).data == {"k": "1"}


async def test_raw_requests_reach_known_kinds_and_reactors() -> None:
    api = FakeApi()
    await api.create(config_map("a"))
    listed = codec.decode_json(
        await api.request("GET", "/api/v1/namespaces/ns/configmaps"), dict
    ).obj
    assert [item["metadata"]["name"] for item in listed["items"]] == ["a"]
    await api.request("DELETE", "/api/v1/namespaces/ns/configmaps")
    assert api.objects == {}
    with pytest.raises(ApiError) as missing:
        await api.request("GET", "/apis/example.com/v1/widgets")
    assert missing.value.status.code == 404

    def widgets(action: Action) -> bytes:
        return b'{"items": []}'

    api.react("request", "GET", widgets)
    assert await api.request("GET", "/apis/example.com/v1/widgets") == b'{"items": []}'
