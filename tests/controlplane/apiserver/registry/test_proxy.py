"""Relaying pod streams to a kubelet, against a fake kubelet that checks who connects; and
``pods/proxy`` and ``services/proxy``, against a backend on this machine's own address, as
kubectl users reach them (``kubectl get --raw``, ``kubectl proxy``)."""

from __future__ import annotations

import asyncio
import functools
import json
import re
import ssl
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import kubernetes
import pytest
from aiohttp import web
from cryptography import x509
from yarl import URL

from controlplane.apiserver import errors
from controlplane.apiserver.registry.proxy import (
    KubeletConnector,
    backend_path,
    global_unicast,
    kubelet_address,
    pod_stream_path,
    rewrite_url,
    split_scheme_name_port,
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
from tests.controlplane.apiserver.proxy_backends import Backend, raw, serve_web
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


async def _serve(app: web.Application, context: ssl.SSLContext | None) -> tuple[web.AppRunner, int]:
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

    async def echo(request: web.Request) -> web.Response:
        return web.Response(text=f"{request.method} {await request.text()}")

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
    app.router.add_route("*", "/echo", echo)
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


async def _kubectl(kubectl: Kubectl, *args: str, check: bool = True) -> str:
    """What a cluster-scoped kubectl command prints: its output, or its error when refused."""
    done = await asyncio.to_thread(kubectl.run, *args, namespaced=False, check=check)
    return done.stdout if done.returncode == 0 else done.stderr.strip()


async def test_kubectl_logs_exec_and_node_proxy_reach_the_kubelet(
    cluster_kubelet: int, kubectl: Kubectl
) -> None:
    node_name = await _node_running_web(kubectl, cluster_kubelet)
    logs = await asyncio.to_thread(kubectl.run, "logs", "web")
    assert logs.stdout == "hello from app\n"
    out = await asyncio.to_thread(kubectl.run, "exec", "web", "--", "echo", "hi")
    assert out.stdout == "echo hi\n"
    metrics = f"/api/v1/nodes/{node_name}/proxy/metrics"
    assert await _kubectl(kubectl, "get", "--raw", metrics) == "kubelet_up 1\n"


async def test_node_proxy_relays_any_method_and_other_ports_of_the_node(
    cluster_kubelet: int, kubectl: Kubectl, tmp_path: Path
) -> None:
    """Any verb reaches the kubelet (``kubectl create --raw`` POSTs); ``NAME:PORT`` is another
    port of the node's address, over plain HTTP (kube-proxy's health port, for one)."""
    node_name = await _node_running_web(kubectl, cluster_kubelet)
    body = tmp_path / "body.json"
    body.write_text('{"hello": "kubelet"}')
    echo = f"/api/v1/nodes/{node_name}/proxy/echo"
    posted = await _kubectl(kubectl, "create", "--raw", echo, "-f", str(body))
    assert posted == 'POST {"hello": "kubelet"}'

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text=f"healthy at {request.path}")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner, port = await _serve(app, None)
    other_port = f"/api/v1/nodes/{node_name}:{port}/proxy/healthz"
    try:
        assert await _kubectl(kubectl, "get", "--raw", other_port) == "healthy at /healthz"
    finally:
        await runner.cleanup()
    assert await _kubectl(kubectl, "get", "--raw", other_port, check=False) == (
        "Error from server (ServiceUnavailable): error trying to reach service: "
        f"dial tcp 127.0.0.1:{port}: connect: connection refused"
    )


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


# pods/proxy and services/proxy: the pieces.


@pytest.mark.parametrize(
    ("id_", "split"),
    [
        ("web", ("", "web", "")),
        ("web:8080", ("", "web", "8080")),
        ("web:http", ("", "web", "http")),
        ("https:web:443", ("https", "web", "443")),
        ("http:web:", ("http", "web", "")),
        ("ftp:web:21", None),
        (":80", None),
        ("a:b:c:d", None),
    ],
    ids=["name", "port", "port-name", "scheme", "scheme-no-port", "bad-scheme", "no-name", "four"],
)
def test_split_scheme_name_port(id_: str, split: tuple[str, str, str] | None) -> None:
    if split is not None:
        assert split_scheme_name_port(id_, "pod") == split
        return
    with pytest.raises(errors.ApiError) as raised:
        split_scheme_name_port(id_, "pod")
    assert (raised.value.code, raised.value.message) == (400, f'invalid pod request "{id_}"')


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("10.244.1.5", True),
        ("192.0.2.2", True),
        ("fd00::2", True),
        ("127.0.0.1", False),
        ("::1", False),
        ("169.254.169.254", False),
        ("fe80::1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("255.255.255.255", False),
        ("not-an-ip", False),
    ],
    ids=lambda v: str(v),
)
def test_only_global_unicast_addresses_are_dialled(address: str, allowed: bool) -> None:
    assert global_unicast(address) is allowed


def test_backend_paths_are_cleaned_keeping_the_trailing_slash() -> None:
    assert backend_path("/") == "/"
    assert backend_path("/a/b/") == "/a/b/"
    assert backend_path("/a/../../etc/passwd") == "/etc/passwd"
    assert backend_path("/a/./b") == "/a/b"


def test_a_backend_location_is_rewritten_through_the_proxy() -> None:
    backend = URL("http://10.0.0.5:8080/x")
    prefix = "/api/v1/namespaces/ns/pods/web/proxy"
    assert rewrite_url("http://10.0.0.5:8080/login?next=/", backend, "a:6443", prefix) == (
        f"{prefix}/login?next=/"
    )
    assert rewrite_url("/docs/", backend, "a:6443", prefix) == f"{prefix}/docs/"
    assert rewrite_url(f"{prefix}/done", backend, "a:6443", prefix) == f"{prefix}/done"
    assert rewrite_url("https://a:6443/x", backend, "a:6443", prefix) == f"{prefix}/x"
    assert rewrite_url("https://example.com/", backend, "a:6443", prefix) == (
        "https://example.com/"
    )
    assert rewrite_url("relative/page", backend, "a:6443", prefix) == "relative/page"


# pods/proxy and services/proxy, outside in (tests.controlplane.apiserver.proxy_backends).


async def test_kubectl_get_raw_reaches_a_pod_and_a_service(
    backend: Backend, kubectl: Kubectl
) -> None:
    """As kubernetes.io's "Access Services Running on Clusters" has users type it."""
    await asyncio.to_thread(serve_web, kubectl, backend)
    ns = kubectl.namespace
    for path, upstream_path in [
        ("pods/web/proxy/hello?x=1&y=a%20b", "/hello"),
        (f"pods/web:{backend.port}/proxy/a/b/", "/a/b/"),
        (f"pods/http:web:{backend.port}/proxy/", "/"),
        ("services/web/proxy/hello?x=1&y=a%20b", "/hello"),
        ("services/web:80/proxy/", "/"),
        ("services/named:http/proxy/n", "/n"),
        ("services/named:8080/proxy/n", "/n"),
        ("services/http:named:http/proxy/n", "/n"),
    ]:
        seen = json.loads((await asyncio.to_thread(raw, kubectl, path)).stdout)
        assert (seen["method"], seen["path"]) == ("GET", upstream_path), path
        assert "authorization" not in seen["headers"]
        request_path = f"/api/v1/namespaces/{ns}/{path.partition('?')[0]}"
        assert seen["headers"]["x-forwarded-uri"] == request_path.rstrip("/")
    assert seen["query"] == ""
    first = json.loads((await asyncio.to_thread(raw, kubectl, "pods/web/proxy/q?x=1")).stdout)
    assert first["query"] == "x=1"


async def test_the_python_client_reaches_a_service_and_a_pod(
    backend: Backend, kubectl: Kubectl, api_client: kubernetes.client.ApiClient
) -> None:
    """The official client's ``connect_*_proxy_with_path`` calls (its path parameter quoted,
    ``/`` as ``%2F``), read raw: the client turns a JSON answer typed ``str`` into a Python
    repr."""
    await asyncio.to_thread(serve_web, kubectl, backend)
    core = kubernetes.client.CoreV1Api(api_client)
    ns = kubectl.namespace
    got = await asyncio.to_thread(
        functools.partial(
            core.connect_get_namespaced_service_proxy_with_path,
            "named:http",
            ns,
            "a/b",
            _preload_content=False,
        )
    )
    assert json.loads(got.data)["path"] == "/a/b"
    posted = await asyncio.to_thread(
        functools.partial(
            core.connect_post_namespaced_pod_proxy_with_path, "web", ns, "c", _preload_content=False
        )
    )
    assert json.loads(posted.data)["method"] == "POST"


REFUSALS = [
    ("pods/nope/proxy/", 'Error from server (NotFound): pods "nope" not found'),
    ("pods/pending/proxy/", "Error from server (BadRequest): address not allowed"),
    (
        "pods/ftp:web:21/proxy/",
        'Error from server (BadRequest): invalid pod request "ftp:web:21"',
    ),
    ("services/nope/proxy/", 'Error from server (NotFound): endpoints "nope" not found'),
    ("services/nope:80/proxy/", 'Error from server (NotFound): services "nope" not found'),
    (
        "services/empty/proxy/",
        'Error from server (ServiceUnavailable): no endpoints available for service "empty"',
    ),
    (
        "services/web:81/proxy/",
        'Error from server (ServiceUnavailable): no service port 81 found for service "web"',
    ),
    (
        "services/web:other/proxy/",
        'Error from server (ServiceUnavailable): no endpoints available for service "web:other"',
    ),
    (
        "services/unready/proxy/",
        'Error from server (ServiceUnavailable): no endpoints available for service "unready"',
    ),
    (
        "services/stray:80/proxy/",
        'Error from server (ServiceUnavailable): no endpoints available for service "stray:80"',
    ),
    (
        "services/a:b:c:d/proxy/",
        'Error from server (BadRequest): invalid service request "a:b:c:d"',
    ),
]
"""What kubectl prints for each refused proxy path: missing pod, pod without an IP, bad
scheme, missing service (without a port number its endpoints are looked up, not the Service),
no endpoints, no such port number, no endpoint with that port name, an endpoint not ready, an
endpoint whose Pod does not have its address, a bad name part."""


async def test_proxy_refusals_are_upstreams_statuses(backend: Backend, kubectl: Kubectl) -> None:
    await asyncio.to_thread(serve_web, kubectl, backend)
    for path, stderr in REFUSALS:
        out = await asyncio.to_thread(raw, kubectl, path, check=False)
        assert out.returncode == 1, path
        assert out.stderr.strip().splitlines()[-1] == stderr
    down = await asyncio.to_thread(raw, kubectl, "pods/web:1/proxy/", check=False)
    assert down.stderr.strip().splitlines()[-1] == (
        f"Error from server (ServiceUnavailable): error trying to reach service: "
        f"dial tcp {backend.address}:1: connect: connection refused"
    )


@pytest.fixture
def kubectl_proxy(kubectl: Kubectl) -> Iterator[str]:
    """``kubectl proxy --port=0``, as a user runs it; its URL."""
    process = subprocess.Popen(kubectl.argv("proxy", "--port=0"), stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert match, line
        yield f"http://127.0.0.1:{match.group(1)}"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


async def test_every_method_through_kubectl_proxy(
    backend: Backend, kubectl: Kubectl, kubectl_proxy: str
) -> None:
    """``kubectl proxy``, then plain HTTP, as "Use a Service to access an application"
    shows: bodies, methods, status and headers pass both ways."""
    await asyncio.to_thread(serve_web, kubectl, backend)
    base = f"{kubectl_proxy}/api/v1/namespaces/{kubectl.namespace}"
    async with aiohttp.ClientSession() as session:
        for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
            async with session.request(
                method, f"{base}/services/web/proxy/items?dry=1", data=b'{"a": 1}'
            ) as response:
                assert response.status == 200, await response.text()
                assert response.headers["X-Backend"] == "yes"
                assert "Access-Control-Allow-Origin" not in response.headers
                seen = await response.json()
            assert (seen["method"], seen["path"], seen["query"]) == (method, "/items", "dry=1")
            assert seen["body"] == '{"a": 1}'
        async with session.head(f"{base}/pods/web/proxy/") as response:
            assert response.status == 200
            assert await response.read() == b""


async def test_an_answer_streams_through_as_it_comes(
    backend: Backend, kubectl: Kubectl, kubectl_proxy: str
) -> None:
    """The first line arrives while the backend still holds the rest back."""
    await asyncio.to_thread(serve_web, kubectl, backend)
    url = f"{kubectl_proxy}/api/v1/namespaces/{kubectl.namespace}/services/web/proxy/stream"
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert await asyncio.wait_for(response.content.readline(), 10) == b"first\n"
        backend.release.set()
        assert await response.content.read() == b"last\n"


async def test_redirects_through_the_proxy(
    backend: Backend, kubectl: Kubectl, kubectl_proxy: str
) -> None:
    """``.../proxy`` with nothing after it is sent to ``.../proxy/`` (upstream's redirect),
    and a backend's own redirects come back pointing through the proxy."""
    await asyncio.to_thread(serve_web, kubectl, backend)
    path = f"/api/v1/namespaces/{kubectl.namespace}/pods/web/proxy"
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{kubectl_proxy}{path}?a=b", allow_redirects=False) as response:
            assert response.status == 301
            assert response.headers["Location"] == f"{path}/?a=b"
        async with session.post(f"{kubectl_proxy}{path}", allow_redirects=False) as response:
            assert response.status == 200
            assert (await response.json())["path"] == "/"
        async with session.get(f"{kubectl_proxy}{path}/to-home", allow_redirects=False) as response:
            assert response.status == 302
            assert response.headers["Location"] == f"{path}/home/"
        async with session.get(f"{kubectl_proxy}{path}/moved", allow_redirects=False) as response:
            assert response.headers["Location"] == f"{path}/elsewhere"
        async with session.get(f"{kubectl_proxy}{path}/to-home") as followed:
            assert (await followed.json())["path"] == "/home/"


async def test_what_browsers_do_through_kubectl_proxy(
    backend: Backend, kubectl: Kubectl, kubectl_proxy: str
) -> None:
    """A gzipped page's links to its own server come back through ``services/proxy``, and a
    WebSocket opened through ``pods/proxy`` carries frames both ways."""
    await asyncio.to_thread(serve_web, kubectl, backend)
    base = f"/api/v1/namespaces/{kubectl.namespace}"
    path = f"{base}/services/web/proxy"
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{kubectl_proxy}{path}/page") as got:
            assert got.headers["Content-Encoding"] == "gzip"
            page = await got.text()
        url = f"{kubectl_proxy}{base}/pods/web/proxy/ws"
        async with session.ws_connect(url, protocols=("echo.example",)) as ws:
            assert ws.protocol == "echo.example"
            await ws.send_str("hi")
            assert await ws.receive_str() == "echo hi"
    assert page == f'<html><body><a href="{path}/docs/">d</a><img src="{path}/i.png"></body></html>'
