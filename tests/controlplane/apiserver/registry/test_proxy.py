"""Relaying pod streams to a kubelet, against a fake kubelet that checks who connects."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509

from controlplane.apiserver import errors
from controlplane.apiserver.registry.proxy import (
    KubeletConnector,
    kubelet_address,
    pod_stream_path,
)
from kube.api.kinds.core_v1.node import (
    DaemonEndpoint,
    Node,
    NodeAddress,
    NodeDaemonEndpoints,
    NodeStatus,
)
from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec
from kube.api.meta_v1 import ObjectMeta
from kube.pki import CertificateAuthority, KeyPair, identity
from tests.servers import Kubectl, ServerProcess


def _node(port: int, addresses: list[tuple[str, str]] | None = None) -> Node:
    return Node(
        metadata=ObjectMeta(name="node1"),
        status=NodeStatus(
            addresses=[
                NodeAddress(type=t, address=a)
                for t, a in (addresses if addresses is not None else [("InternalIP", "127.0.0.1")])
            ],
            daemon_endpoints=NodeDaemonEndpoints(kubelet_endpoint=DaemonEndpoint(port=port)),
        ),
    )


def _pod(*containers: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="ns"),
        spec=PodSpec(containers=[Container(name=c, image="x") for c in containers]),
    )


def test_kubelet_address_prefers_internal_ip() -> None:
    node = _node(10250, [("Hostname", "n1"), ("ExternalIP", "1.2.3.4"), ("InternalIP", "10.0.0.5")])
    assert kubelet_address(node) == ("10.0.0.5", 10250)
    assert kubelet_address(_node(0, [("Hostname", "n1")])) == ("n1", 10250)
    with pytest.raises(errors.ApiError):
        kubelet_address(_node(10250, []))


def test_stream_paths() -> None:
    assert pod_stream_path(_pod("app"), "log", {}) == "/containerLogs/ns/web/app"
    assert pod_stream_path(_pod("a", "b"), "exec", {"container": "b"}) == "/exec/ns/web/b"
    assert pod_stream_path(_pod("a", "b"), "portforward", {}) == "/portForward/ns/web"
    with pytest.raises(errors.ApiError) as raised:
        pod_stream_path(_pod("a", "b"), "attach", {})
    assert "choose one of: [a b]" in raised.value.message


@dataclass
class Kubelet:
    port: int
    callers: list[str]


@dataclass
class Identities:
    ca: CertificateAuthority
    connector: KubeletConnector


@pytest.fixture
def identities() -> Identities:
    ca = CertificateAuthority.create()
    client = ca.issue(
        "kube-apiserver-kubelet-client", organizations=["system:masters"], client=True
    )
    return Identities(ca, KubeletConnector(ca.cert_pem, client))


async def _serve(app: web.Application, context: ssl.SSLContext) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    return runner, int(runner.addresses[0][1])


@pytest.fixture
async def kubelet(identities: Identities, tmp_path: Path) -> AsyncIterator[Kubelet]:
    serving = identities.ca.issue("node1", server=True, ip_addresses=["127.0.0.1"])
    cert, key = serving.write(tmp_path, "kubelet")
    (tmp_path / "ca.crt").write_bytes(identities.ca.cert_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tmp_path / "ca.crt"))
    context.load_cert_chain(cert, key)
    context.verify_mode = ssl.CERT_REQUIRED
    callers: list[str] = []

    def who(request: web.Request) -> None:
        assert request.transport is not None
        peer = request.transport.get_extra_info("ssl_object").getpeercert(binary_form=True)
        callers.append(identity(x509.load_der_x509_certificate(peer))[0])

    async def logs(request: web.Request) -> web.StreamResponse:
        who(request)
        response = web.StreamResponse()
        response.content_type = "text/plain"
        await response.prepare(request)
        await response.write(f"tail={request.query.get('tailLines')}\n".encode())
        if request.query.get("follow") == "true":
            for i in range(3):
                await asyncio.sleep(0.05)
                await response.write(f"line {i}\n".encode())
        await response.write_eof()
        return response

    async def exec_(request: web.Request) -> web.StreamResponse:
        who(request)
        ws = web.WebSocketResponse(protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"))
        await ws.prepare(request)
        commands = request.query.getall("command")
        await ws.send_bytes(b"\x01" + " ".join(commands).encode() + b"\n")
        message = await ws.receive()
        await ws.send_bytes(b"\x01" + message.data[1:].upper())
        await ws.send_bytes(b'\x03{"metadata":{},"status":"Success"}')
        await ws.close()
        return ws

    async def attach(request: web.Request) -> web.Response:
        who(request)
        return web.Response(status=500, text="container app not found in pod web_ns")

    app = web.Application()
    app.router.add_get("/containerLogs/{ns}/{pod}/{container}", logs)
    app.router.add_get("/exec/{ns}/{pod}/{container}", exec_)
    app.router.add_get("/attach/{ns}/{pod}/{container}", attach)
    runner, port = await _serve(app, context)
    try:
        yield Kubelet(port, callers)
    finally:
        await runner.cleanup()


@pytest.fixture
async def relay(identities: Identities, kubelet: Kubelet) -> AsyncIterator[str]:
    """An API-server-like front that relays to the fake kubelet (plain HTTP, for the test)."""
    node = _node(kubelet.port)

    async def logs(request: web.Request) -> web.StreamResponse:
        path = pod_stream_path(_pod("app"), "log", request.query)
        return await identities.connector.relay_get(request, node, path, request.query)

    async def exec_(request: web.Request) -> web.StreamResponse:
        path = pod_stream_path(_pod("app"), "exec", request.query)
        return await identities.connector.relay_websocket(request, node, path)

    async def attach(request: web.Request) -> web.StreamResponse:
        path = pod_stream_path(_pod("app"), "attach", request.query)
        return await identities.connector.relay_websocket(request, node, path)

    app = web.Application()
    app.router.add_get("/log", logs)
    app.router.add_get("/exec", exec_)
    app.router.add_get("/attach", attach)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_logs_follow_through_the_relay(relay: str, kubelet: Kubelet) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{relay}/log", params={"follow": "true", "tailLines": "5"}) as response,
    ):
        assert response.status == 200
        lines = [line async for line in response.content]
    assert lines == [b"tail=5\n", b"line 0\n", b"line 1\n", b"line 2\n"]
    assert kubelet.callers == ["kube-apiserver-kubelet-client"]


async def test_exec_frames_are_relayed_both_ways(relay: str) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            f"{relay}/exec?command=echo&command=hi&stdin=true&stdout=true",
            protocols=("v5.channel.k8s.io",),
        ) as ws,
    ):
        assert ws.protocol == "v5.channel.k8s.io"
        first = await ws.receive_bytes()
        await ws.send_bytes(b"\x00hello")
        second = await ws.receive_bytes()
        status = await ws.receive_bytes()
    assert first == b"\x01echo hi\n"
    assert second == b"\x01HELLO"
    assert status.startswith(b'\x03{"metadata"')


async def test_a_refused_websocket_is_relayed_as_the_kubelet_answered(relay: str) -> None:
    headers = {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Protocol": "v5.channel.k8s.io",
    }
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{relay}/attach?stdout=true", headers=headers) as response,
    ):
        assert response.status == 500
        assert await response.text() == "container app not found in pod web_ns"


async def test_a_wrong_subprotocol_is_refused(identities: Identities) -> None:
    request = _FakeRequest({"Sec-WebSocket-Protocol": "chat"})
    with pytest.raises(errors.ApiError) as raised:
        await identities.connector.relay_websocket(
            request,  # type: ignore[arg-type]
            _node(10250),
            "/exec/ns/web/app",
        )
    assert raised.value.code == 400


async def test_an_unreachable_kubelet_is_503(identities: Identities) -> None:
    node = _node(1)
    request = _FakeRequest({})
    with pytest.raises(errors.ApiError) as raised:
        await identities.connector.relay_get(request, node, "/healthz", {})  # type: ignore[arg-type]
    assert raised.value.code == 503


@dataclass
class _FakeRequest:
    """Only headers: both refusals happen before anything is sent back."""

    headers: dict[str, str]


@pytest.fixture
async def cluster_kubelet(apiserver: ServerProcess, tmp_path: Path) -> AsyncIterator[int]:
    """A fake kubelet whose serving certificate the API server's own CA signed."""
    pki = apiserver.data_dir / "pki"
    ca = CertificateAuthority(KeyPair.read(pki, "ca"))
    cert, key = ca.issue("node1", server=True, ip_addresses=["127.0.0.1"]).write(tmp_path, "k")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.crt"))
    context.load_cert_chain(cert, key)
    context.verify_mode = ssl.CERT_REQUIRED

    async def logs(request: web.Request) -> web.Response:
        return web.Response(text=f"hello from {request.match_info['container']}\n")

    async def exec_(request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"))
        await ws.prepare(request)
        await ws.send_bytes(b"\x01" + " ".join(request.query.getall("command")).encode() + b"\n")
        await ws.send_bytes(b'\x03{"metadata":{},"status":"Success"}')
        await ws.close()
        return ws

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text="kubelet_up 1\n")

    async def attach(request: web.Request) -> web.Response:
        """As a kubelet whose container already exited answers, whatever the upgrade."""
        info = request.match_info
        return web.Response(
            status=500,
            text=f"container {info['container']} not found in pod {info['pod']}_{info['ns']}",
        )

    app = web.Application()
    app.router.add_get("/containerLogs/{ns}/{pod}/{container}", logs)
    app.router.add_get("/exec/{ns}/{pod}/{container}", exec_)
    app.router.add_route("*", "/attach/{ns}/{pod}/{container}", attach)
    app.router.add_get("/metrics", metrics)
    runner, port = await _serve(app, context)
    try:
        yield port
    finally:
        await runner.cleanup()


async def _node_running_web(kubectl: Kubectl, kubelet_port: int) -> str:
    """A Node whose kubelet is the fake one and the pod ``web`` (container ``app``) bound to
    it, created with kubectl; returns the Node's name."""
    name = f"{kubectl.namespace}-node"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"nodeName": name, "containers": [{"name": "app", "image": "busybox"}]},
    }
    await asyncio.to_thread(
        kubectl.run, "create", "-f", "-", input=json.dumps(node), namespaced=False
    )
    await asyncio.to_thread(kubectl.run, "create", "-f", "-", input=json.dumps(pod))
    return name


async def test_kubectl_logs_exec_and_node_proxy_reach_the_kubelet(
    cluster_kubelet: int, kubectl: Kubectl
) -> None:
    node_name = await _node_running_web(kubectl, cluster_kubelet)
    logs = await asyncio.to_thread(kubectl.run, "logs", "web")
    assert logs.stdout == "hello from app\n"
    out = await asyncio.to_thread(kubectl.run, "exec", "web", "--", "echo", "hi")
    assert out.stdout == "echo hi\n"
    raw = await asyncio.to_thread(
        kubectl.run,
        "get",
        "--raw",
        f"/api/v1/nodes/{node_name}/proxy/metrics",
        namespaced=False,
    )
    assert raw.stdout == "kubelet_up 1\n"


async def test_a_kubelet_refusing_an_attach_is_what_kubectl_shows(
    cluster_kubelet: int, kubectl: Kubectl
) -> None:
    """kubectl tries a WebSocket, then SPDY/3.1: both reach the kubelet, whose refusal is
    relayed as it is, so kubectl words it as against upstream's API server."""
    await _node_running_web(kubectl, cluster_kubelet)
    out = await asyncio.to_thread(kubectl.run, "attach", "web", check=False)
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == (
        f"error: unable to upgrade connection: container app not found in pod "
        f"web_{kubectl.namespace}"
    )
