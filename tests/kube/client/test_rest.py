"""The REST client against a real API server, and its retry and flow-control policy against
a scripted one."""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from kube.api.kinds.apiextensions_v1 import CustomResourceDefinition
from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.meta_v1 import ObjectMeta, Preconditions
from kube.client.errors import ApiError, ClientError
from kube.client.flowcontrol import TokenBucket
from kube.client.kubeconfig import ClientConfig
from kube.client.rest import Client
from kube.clock import FakeClock


def config_map(namespace: str, name: str = "cm", **labels: str) -> ConfigMap:
    return ConfigMap(
        metadata=ObjectMeta(name=name, namespace=namespace, labels=labels or None),
        data={"k": "v"},
    )


async def test_create_get_update_delete(client: Client, namespace: str) -> None:
    created = await client.create(config_map(namespace))
    assert created.metadata.uid and created.metadata.resource_version
    got = await client.get(ConfigMap, "cm", namespace)
    assert got.data == {"k": "v"} and got.kind == "ConfigMap"
    got.data = {"k": "w"}
    updated = await client.update(got)
    assert updated.data == {"k": "w"}
    await client.delete(ConfigMap, "cm", namespace)
    with pytest.raises(ApiError) as caught:
        await client.get(ConfigMap, "cm", namespace)
    assert caught.value.not_found


async def test_errors_carry_the_reason(client: Client, namespace: str) -> None:
    first = await client.create(config_map(namespace))
    with pytest.raises(ApiError) as exists:
        await client.create(config_map(namespace))
    assert exists.value.already_exists and not exists.value.conflict
    first.data = {"k": "1"}
    await client.update(first)
    first.data = {"k": "2"}
    with pytest.raises(ApiError) as stale:
        await client.update(first)
    assert stale.value.conflict and stale.value.code == 409
    with pytest.raises(ApiError) as wrong_uid:
        await client.delete(ConfigMap, "cm", namespace, preconditions=Preconditions(uid="nope"))
    assert wrong_uid.value.conflict


async def test_list_selects_and_pages(client: Client, namespace: str) -> None:
    for i in range(5):
        await client.create(config_map(namespace, f"cm-{i}", tier="a" if i % 2 else "b"))
    selected = await client.list(ConfigMap, namespace, label_selector="tier=a")
    assert sorted(c.metadata.name or "" for c in selected.items) == ["cm-1", "cm-3"]
    page = await client.list(ConfigMap, namespace, limit=2)
    assert len(page.items) == 2 and page.continue_token
    everything = await client.list_all(ConfigMap, namespace, page_size=2)
    assert len(everything.items) == 5 and everything.resource_version


async def test_watch_streams_events(client: Client, namespace: str) -> None:
    start = await client.list(ConfigMap, namespace)
    events = client.watch(ConfigMap, namespace, resource_version=start.resource_version)
    await client.create(config_map(namespace))
    await client.patch(ConfigMap, "cm", namespace, {"data": {"k": "p"}})
    await client.delete(ConfigMap, "cm", namespace)
    seen = []
    async for event in events:
        if event.type != "BOOKMARK":
            seen.append((event.type, event.object.data))
        if len(seen) == 3:
            break
    await events.aclose()
    assert seen == [("ADDED", {"k": "v"}), ("MODIFIED", {"k": "p"}), ("DELETED", {"k": "p"})]


@pytest.mark.parametrize(
    ("patch_type", "patch"),
    [
        pytest.param("merge", {"data": {"x": "1"}}, id="merge"),
        pytest.param("strategic", {"data": {"x": "1"}}, id="strategic"),
        pytest.param("json", [{"op": "add", "path": "/data/x", "value": "1"}], id="json"),
    ],
)
async def test_patch_types(client: Client, namespace: str, patch_type: str, patch: object) -> None:
    await client.create(config_map(namespace))
    patched = await client.patch(ConfigMap, "cm", namespace, patch, patch_type=patch_type)
    assert patched.data == {"k": "v", "x": "1"}


async def test_server_side_apply_owns_fields(client: Client, namespace: str) -> None:
    applied = await client.apply(config_map(namespace), field_manager="tests")
    assert applied.data == {"k": "v"}
    managers = [entry.manager for entry in applied.metadata.managed_fields or ()]
    assert managers == ["tests"]
    clash = config_map(namespace)
    clash.data = {"k": "other"}
    with pytest.raises(ApiError) as conflict:
        await client.apply(clash, field_manager="someone-else")
    assert conflict.value.code == 409
    forced = await client.apply(clash, field_manager="someone-else", force=True)
    assert forced.data == {"k": "other"}


async def test_dynamic_access_finds_custom_resources(client: Client, namespace: str) -> None:
    group = f"g{uuid.uuid4().hex[:6]}.example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    crds = await client.resource("customresourcedefinitions")
    await crds.create(crd)
    for _ in range(100):
        try:
            gadgets = await client.resource(f"gadgets.{group}")
            break
        except ApiError:
            await asyncio.sleep(0.05)
    else:
        raise AssertionError("the custom resource never appeared in discovery")
    body = {
        "apiVersion": f"{group}/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "namespace": namespace},
        "spec": {"size": 3},
    }
    await gadgets.create(body)
    assert (await gadgets.get("g", namespace))["spec"] == {"size": 3}
    listed = await gadgets.list(namespace)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["g"]
    await client.delete(CustomResourceDefinition, f"gadgets.{group}")


# Policy, against a scripted server.

Serve = Callable[[list[web.Response]], Awaitable[tuple[ClientConfig, list[web.Request]]]]


@pytest.fixture
async def scripted() -> AsyncIterator[Serve]:
    """A plain-HTTP server answering each request with the next scripted response."""
    runners: list[web.AppRunner] = []

    async def serve(answers: list[web.Response]) -> tuple[ClientConfig, list[web.Request]]:
        seen: list[web.Request] = []

        async def handler(request: web.Request) -> web.Response:
            seen.append(request)
            return answers.pop(0)

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        return ClientConfig(server=f"http://127.0.0.1:{port}"), seen

    yield serve
    for runner in runners:
        await runner.cleanup()


async def until_sleeping(clock: FakeClock) -> None:
    """Let the client run until it waits on the clock (a retry's backoff)."""
    for _ in range(500):
        if clock.sleepers:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the client never slept")


def _status(code: int, reason: str) -> web.Response:
    return web.json_response(
        {"kind": "Status", "apiVersion": "v1", "code": code, "reason": reason, "message": reason},
        status=code,
        headers={"Retry-After": "3"} if code == 429 else None,
    )


OK = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "d"}}


async def test_throttled_and_failing_requests_are_retried(scripted: Serve) -> None:
    config, seen = await scripted(
        [_status(429, "TooManyRequests"), _status(503, "ServiceUnavailable"), web.json_response(OK)]
    )
    clock = FakeClock()
    async with Client(config, clock=clock, user_agent="probe") as client:
        task = asyncio.create_task(client.get(ConfigMap, "cm", "d"))
        await until_sleeping(clock)
        start = clock.monotonic()
        await clock.advance(3)  # the 429's Retry-After
        await until_sleeping(clock)
        await clock.advance(1)  # backoff after the 503
        got = await task
    assert got.metadata.name == "cm" and clock.monotonic() - start == 4
    assert len(seen) == 3


async def test_watch_error_event_raises_its_status(scripted: Serve) -> None:
    lines = [
        {"type": "ADDED", "object": OK},
        {
            "type": "ERROR",
            "object": {"kind": "Status", "apiVersion": "v1", "code": 410, "reason": "Expired"},
        },
    ]
    body = "".join(json.dumps(line) + "\n" for line in lines)
    config, _ = await scripted([web.Response(text=body, content_type="application/json")])
    async with Client(config) as client:
        events = client.watch(ConfigMap, "d", resource_version="1")
        assert (await anext(events)).type == "ADDED"
        with pytest.raises(ApiError) as expired:
            await anext(events)
    assert expired.value.gone


async def test_client_errors_are_not_retried(scripted: Serve) -> None:
    config, seen = await scripted([_status(422, "Invalid")])
    async with Client(config, max_retries=3) as client:
        with pytest.raises(ApiError) as caught:
            await client.get(ConfigMap, "cm", "d")
    assert caught.value.code == 422 and len(seen) == 1


async def test_user_agent_names_the_component(scripted: Serve) -> None:
    config, seen = await scripted([web.json_response(OK)])
    async with Client(config, user_agent="kubelab-scheduler") as client:
        await client.get(ConfigMap, "cm", "d")
    assert seen[0].headers["User-Agent"].startswith("kubelab-scheduler/")
    assert seen[0].path == "/api/v1/namespaces/d/configmaps/cm"


async def test_server_date_is_the_servers_clock(scripted: Serve) -> None:
    date = "Sun, 29 Nov 2026 12:00:05 GMT"
    config, seen = await scripted(
        [
            web.json_response({}, headers={"Date": date}),
            web.Response(text="x", headers={"Date": "soon"}),
        ]
    )
    async with Client(config) as client:
        assert await client.server_date() == datetime.datetime(
            2026, 11, 29, 12, 0, 5, tzinfo=datetime.UTC
        )
        with pytest.raises(ClientError, match="a Date header that is no date: 'soon'"):
            await client.server_date()
    assert [r.path for r in seen] == ["/version", "/version"]


async def test_refused_connection_gives_up_after_retries() -> None:
    clock = FakeClock()
    config = ClientConfig(server="http://127.0.0.1:9")
    async with Client(config, clock=clock, max_retries=2) as client:
        task = asyncio.create_task(client.get(ConfigMap, "cm", "d"))
        for _ in range(100):
            if task.done():
                break
            await asyncio.sleep(0.01)
            await clock.advance(10)
        with pytest.raises(ClientError):
            await task


@pytest.mark.parametrize(
    ("qps", "burst", "requests", "delays"),
    [
        pytest.param(10, 2, 4, [0, 0, 0.1, 0.2], id="burst-then-qps"),
        pytest.param(1, 1, 3, [0, 1, 2], id="one-per-second"),
    ],
)
def test_token_bucket(qps: float, burst: int, requests: int, delays: list[float]) -> None:
    bucket = TokenBucket(qps, burst, FakeClock())
    assert [pytest.approx(bucket.reserve()) for _ in range(requests)] == delays
