"""``kubelab lab ui``'s server without a lab or a browser: the token check, the live document
over Server-Sent Events (a pod created in the API is pushed, one deleted goes), the API's
reachability in the document, and the chains, story and trace endpoints with their errors,
over an in-memory API (``tests.fakeapi``) and fake namespace facts."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient, TestServer

from kube.api.kinds.core_v1.pod import Pod
from kube.client.errors import ClientError
from kubelab.lab.processes import CommandError
from kubelab.lab.topology import Lab, LabSpec, Node
from kubelab.lab.trace import TraceError
from kubelab.lab.ui import server
from kubelab.lab.ui.model import NodeNetwork
from kubelab.story.gather import StoryError
from tests.builders import pod
from tests.fakeapi import FakeApi

TOKEN = "secret-token"
HERE = Path(__file__).parent
LAB = Lab(LabSpec(name="demo", workers=2))


@dataclass
class FakeFacts:
    """Every namespace has a bridge; node2's proxy rules cannot be read."""

    rules: str = field(default_factory=lambda: (HERE / "proxy-iptables.txt").read_text())

    async def network(self, node: Node) -> NodeNetwork:
        return NodeNetwork(bridges={"cni0": "10.244.1.1/24"})

    async def pod_veth(self, pod: Pod) -> str:
        return f"veth-{pod.metadata.name}"

    async def proxy_rules(self, node: Node) -> str:
        if node.name == "node2":
            raise CommandError(["iptables-save", "-t", "nat"], 1, "no such table")
        return self.rules


@dataclass
class Probe:
    """The API's answer to the reachability probe, switchable by the test."""

    error: Exception | None = None

    async def __call__(self) -> None:
        if self.error is not None:
            raise self.error


async def fake_story(namespace: str, name: str) -> list[dict[str, Any]]:
    if name == "nope":
        raise StoryError(f'pods "{name}" not found')
    return [{"time": "2026-11-29T12:00:00Z", "actor": "kubelet", "step": "Started"}]


async def fake_trace(source: str, destination: str) -> dict[str, Any]:
    if source == "pod/x/missing":
        raise TraceError("pod/x/missing: no such pod")
    return {"source": source, "destination": destination, "hops": [], "verdict": "answered"}


@contextlib.asynccontextmanager
async def serving(
    api: FakeApi, probe: Probe | None = None, *, allow_trace: bool = False
) -> AsyncIterator[tuple[TestClient[Any, Any], server.Ui]]:
    ui = server.Ui(
        LAB,
        api,
        FakeFacts(),
        probe or Probe(),
        story=fake_story,
        trace=fake_trace if allow_trace else None,
    )
    running = asyncio.create_task(ui.run())
    try:
        async with TestClient(TestServer(server.app(ui, TOKEN))) as client:
            yield client, ui
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def next_document(stream: ClientResponse) -> dict[str, Any]:
    while True:
        line = await asyncio.wait_for(stream.content.readline(), 5)
        if line.startswith(b"data: "):
            document: dict[str, Any] = json.loads(line[6:])
            return document


async def document_where(
    stream: ClientResponse, wanted: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    while not wanted(document := await next_document(stream)):
        pass
    return document


@pytest.mark.parametrize(
    "path", ["/", "/api/state", "/api/events", "/static/ui.js", "/api/story?pod=a/b"]
)
async def test_nothing_is_served_without_the_token(path: str) -> None:
    async with serving(FakeApi()) as (client, _):
        for query in ("", "?token=wrong" if "?" not in path else "&token=wrong"):
            response = await client.get(path + query)
            assert response.status == 401, path + query
            assert "token" in await response.text()


async def test_the_token_in_the_url_opens_the_page_and_leaves_a_cookie_for_the_rest() -> None:
    async with serving(FakeApi()) as (client, _):
        page = await client.get(f"/?token={TOKEN}")
        assert page.status == 200
        assert "static/vendor/cytoscape.min.js" in await page.text()
        cookie = page.cookies[server.cookie_name(TOKEN)]
        assert cookie.value == TOKEN
        assert cookie["httponly"] and cookie["samesite"] == "Strict"
        script = await client.get("/static/ui.js")  # the cookie jar sends it
        assert script.status == 200


async def test_pods_are_pushed_as_they_come_and_go() -> None:
    api = FakeApi()
    await api.create(pod("web-a", node_name="node1", phase="Running"))
    async with serving(api) as (client, _):
        stream = await client.get(f"/api/events?token={TOKEN}")
        assert stream.headers["Content-Type"] == "text/event-stream"
        first = await document_where(stream, lambda d: bool(d.get("pods")))
        assert [p["id"] for p in first["pods"]] == ["pod/default/web-a"]
        assert [n["name"] for n in first["nodes"]] == [
            "router",
            "controlplane",
            "node1",
            "node2",
            "client",
        ]
        await api.create(pod("web-b", node_name="node2"))
        added = await document_where(stream, lambda d: len(d["pods"]) == 2)
        assert {p["id"]: p["node"] for p in added["pods"]} == {
            "pod/default/web-a": "node1",
            "pod/default/web-b": "node2",
        }
        await api.delete(Pod, "web-a", "default")
        gone = await document_where(stream, lambda d: len(d["pods"]) == 1)
        assert gone["pods"][0]["id"] == "pod/default/web-b"
        veths = await document_where(stream, lambda d: d["pods"][0]["veth"] != "")
        assert veths["pods"][0]["veth"] == "veth-web-b"
        stream.close()


async def test_an_unreachable_api_is_said_and_its_return_too() -> None:
    probe = Probe(ClientError("GET /readyz: Cannot connect to host 127.0.0.1:6443"))
    async with serving(FakeApi(), probe) as (client, _):
        stream = await client.get(f"/api/events?token={TOKEN}")
        down = await document_where(stream, lambda d: d["api"]["message"] != "not probed yet")
        assert down["api"]["reachable"] is False
        assert "Cannot connect to host 127.0.0.1:6443" in down["api"]["message"]
        probe.error = None
        back = await document_where(stream, lambda d: d["api"]["reachable"])
        assert back["api"]["message"] == "answering"
        stream.close()


async def test_a_services_chains_per_node() -> None:
    async with serving(FakeApi()) as (client, _):
        base = f"/api/chains?token={TOKEN}"
        graph = await (await client.get(f"{base}&service=default/web&node=node1")).json()
        assert "KUBE-SVC-CDGGSHYLG3RE2FKL" in {c["name"] for c in graph["chains"]}
        unreadable = await client.get(f"{base}&service=default/web&node=node2")
        assert unreadable.status == 502
        assert (await unreadable.json())["error"] == (
            "iptables-save -t nat: exit status 1\nno such table"
        )
        missing = await client.get(f"{base}&service=default/web&node=node9")
        assert (missing.status, await missing.json()) == (
            404,
            {"error": "no node node9 in lab demo"},
        )
        bad = await client.get(f"{base}&service=web")
        assert bad.status == 400


async def test_a_pods_story_or_why_there_is_none() -> None:
    async with serving(FakeApi()) as (client, _):
        told = await client.get(f"/api/story?token={TOKEN}&pod=default/web")
        assert (await told.json())[0]["step"] == "Started"
        none = await client.get(f"/api/story?token={TOKEN}&pod=default/nope")
        assert none.status == 502
        told_not = (await none.json())["error"]
        assert told_not == 'no story for pod default/nope: pods "nope" not found'
        bad = await client.get(f"/api/story?token={TOKEN}&pod=web")
        assert bad.status == 400


async def test_traces_are_off_unless_allowed() -> None:
    body = {"source": "pod/default/a", "destination": "svc/default/web:80"}
    async with serving(FakeApi()) as (client, ui):
        refused = await client.post(f"/api/trace?token={TOKEN}", json=body)
        assert refused.status == 403
        assert "--allow-trace" in (await refused.json())["error"]
        assert ui.build()["traceAllowed"] is False
    async with serving(FakeApi(), allow_trace=True) as (client, ui):
        traced = await client.post(f"/api/trace?token={TOKEN}", json=body)
        assert (await traced.json())["verdict"] == "answered"
        missing = await client.post(
            f"/api/trace?token={TOKEN}", json=body | {"source": "pod/x/missing"}
        )
        assert missing.status == 400
        assert "no such pod" in (await missing.json())["error"]
        garbage = await client.post(f"/api/trace?token={TOKEN}", data=b"not json")
        assert garbage.status == 400


def test_the_vendored_drawing_libraries_are_checked_for(tmp_path: Path) -> None:
    assert server.missing_vendored() == []  # make setup put them in the package
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "cytoscape.min.js").write_text("")
    assert server.missing_vendored(tmp_path) == ["cytoscape-dagre.min.js"]
