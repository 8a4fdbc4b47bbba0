"""The kubelet server end to end over TLS: client-certificate checks, /pods, container logs,
exec/attach relayed to a fake runtime streaming server over SPDY, and port-forward both as a
v4 WebSocket and as kubectl's SPDY session tunnelled in a WebSocket.

Exec and attach go to ``FakeStreamingServer`` (test_streams.py), which behaves like
containerd's for what the kubelet relies on: SPDY/3.1 with v4.channel.k8s.io, echo stdin to
stdout until a FIN on stdin or ``exit N``, then a v4 Status on the error stream.  The
WebSocket ``StreamingServer`` here serves port-forward: each channel's port prefix, then
``?port=`` on 127.0.0.1 (an echo server here)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import struct
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import grpc
import pytest
from aiohttp import web

from kube.api.kinds.core_v1.pod import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
    PodSpec,
    PodStatus,
)
from kube.api.meta_v1 import ObjectMeta
from kube.client.kubeconfig import ClientConfig
from kube.client.rest import Client
from kube.clock import RealClock
from kube.pki import CertificateAuthority, KeyPair, client_ssl_context
from node.cri.client import CRIError, RuntimeClient
from node.cri.fake import FakeRuntime
from node.cri.pb import api_pb2 as pb
from node.kubelet.auth import AuthOptions, KubeletAuth
from node.kubelet.server import KubeletServer, PodLookup, StreamRuntime
from node.kubelet.spdy import (
    FLAG_FIN,
    Frame,
    FrameReader,
    FrameType,
    HeaderCompressor,
    RstStatus,
    encode_control,
    encode_data,
)
from node.kubelet.stats import StatsProvider, Summary, resource_metrics, summary_json
from node.kubelet.streams import Options
from tests.node.kubelet.test_stats import SUMMARY
from tests.node.kubelet.test_streams import FakeStreamingServer

V4 = "v4.channel.k8s.io"
V5 = "v5.channel.k8s.io"
SPDY = "SPDY/3.1+portforward.k8s.io"


class StreamingServer:
    """containerd's streaming server for port-forward, as far as the kubelet can tell."""

    def __init__(self) -> None:
        self.queries: list[dict[str, list[str]]] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/portforward/{token}", self._port_forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _accept(self, request: web.Request) -> web.WebSocketResponse:
        self.queries.append({k: request.query.getall(k) for k in request.query})
        ws = web.WebSocketResponse(protocols=(V4, "channel.k8s.io"))
        await ws.prepare(request)
        assert ws.ws_protocol == V4
        return ws

    async def _port_forward(self, request: web.Request) -> web.WebSocketResponse:
        ports = [int(p) for p in request.query.getall("port")]
        ws = await self._accept(request)
        writers: dict[int, asyncio.StreamWriter] = {}
        pumps: list[asyncio.Task[None]] = []
        for index, port in enumerate(ports):
            prefix = struct.pack("<H", port)
            await ws.send_bytes(bytes([2 * index]) + prefix)
            await ws.send_bytes(bytes([2 * index + 1]) + prefix)
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError as error:
                await ws.send_bytes(bytes([2 * index + 1]) + str(error).encode())
                await ws.close()
                return ws
            writers[2 * index] = writer
            pumps.append(asyncio.create_task(self._from_port(reader, ws, 2 * index)))
        async for message in ws:
            data = message.data
            writers[data[0]].write(data[1:])
        for task in pumps:
            task.cancel()
        for writer in writers.values():
            writer.close()
        return ws

    @staticmethod
    async def _from_port(reader: asyncio.StreamReader, ws: web.WebSocketResponse, ch: int) -> None:
        while data := await reader.read(65536):
            await ws.send_bytes(bytes([ch]) + data)
        await ws.close()


@dataclass
class Runtime:
    """The RuntimeClient calls the server makes, answered from dicts."""

    streaming: StreamingServer
    spdy: FakeStreamingServer
    statuses: dict[str, pb.ContainerStatus] = field(default_factory=dict)
    calls: list[tuple[str, object]] = field(default_factory=list)

    async def container_status(self, container_id: str) -> pb.ContainerStatus:
        if container_id not in self.statuses:
            raise CRIError("ContainerStatus", grpc.StatusCode.NOT_FOUND, "no such container")
        return self.statuses[container_id]

    async def exec(
        self,
        container_id: str,
        cmd: Iterable[str],
        *,
        tty: bool = False,
        stdin: bool = False,
        stdout: bool = True,
        stderr: bool = True,
    ) -> str:
        self.calls.append(("exec", (container_id, list(cmd), tty, stdin, stdout, stderr)))
        return self.spdy.register(Options(stdin, stdout, stderr, tty))

    async def attach(
        self,
        container_id: str,
        *,
        tty: bool = False,
        stdin: bool = False,
        stdout: bool = True,
        stderr: bool = True,
    ) -> str:
        self.calls.append(("attach", (container_id, tty, stdin, stdout, stderr)))
        return self.spdy.register(Options(stdin, stdout, stderr, tty), "attach")

    async def port_forward(self, sandbox_id: str, ports: Iterable[int]) -> str:
        self.calls.append(("port_forward", (sandbox_id, list(ports))))
        return f"{self.streaming.url}/portforward/token"


POD = Pod(
    metadata=ObjectMeta(name="web", namespace="default", uid="uid-web"),
    spec=PodSpec(containers=[Container(name="app", image="busybox")]),
)


def running(container_id: str) -> ContainerStatus:
    return ContainerStatus(
        name="app",
        container_id=f"containerd://{container_id}",
        state=ContainerState(running=ContainerStateRunning()),
    )


class Lookup:
    """The pod ``web`` whose container ``app`` runs as ``container_id`` until a test says
    otherwise (``status`` is what the kubelet reported, ``running`` what the runtime runs)."""

    def __init__(self, container_id: str = "cid-app", sandbox_id: str = "sandbox-web") -> None:
        self.running = {("uid-web", "app"): container_id}
        self.status = PodStatus(container_statuses=[running(container_id)])
        self.sandbox = sandbox_id

    def pods(self) -> list[Pod]:
        return [POD]

    def find_pod(self, namespace: str, name: str) -> Pod | None:
        return POD if (namespace, name) == ("default", "web") else None

    def pod_status(self, pod: Pod) -> PodStatus:
        return self.status

    async def running_container_id(self, pod_uid: str, container: str) -> str | None:
        return self.running.get((pod_uid, container))

    def sandbox_id(self, pod_uid: str) -> str | None:
        return self.sandbox if pod_uid == "uid-web" else None


@dataclass
class Pki:
    cert: Path
    key: Path
    ca_file: Path
    client_tls: ssl.SSLContext
    anonymous_tls: ssl.SSLContext
    stranger_tls: ssl.SSLContext


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca, stranger_ca = CertificateAuthority.create(), CertificateAuthority.create("other")
    cert, key = ca.issue("kubelet", server=True, ip_addresses=["127.0.0.1"]).write(tmp_path, "kl")
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(ca.cert_pem)
    apiserver = ca.issue("kube-apiserver-kubelet-client", client=True)
    stranger = stranger_ca.issue("intruder", client=True)
    return Pki(
        cert=cert,
        key=key,
        ca_file=ca_file,
        client_tls=client_ssl_context(
            ca.cert_pem, apiserver.cert_pem, apiserver.key_pem, check_hostname=False
        ),
        anonymous_tls=client_ssl_context(ca.cert_pem, check_hostname=False),
        stranger_tls=client_ssl_context(
            ca.cert_pem, stranger.cert_pem, stranger.key_pem, check_hostname=False
        ),
    )


@pytest.fixture
async def streaming() -> AsyncIterator[StreamingServer]:
    server = StreamingServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def spdy() -> AsyncIterator[FakeStreamingServer]:
    server = FakeStreamingServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def serve(
    lookup: PodLookup, cri: StreamRuntime, pki: Pki, stats: StatsProvider | None = None
) -> AsyncIterator[str]:
    """A KubeletServer on a free port; yields its URL."""
    unused = Client(ClientConfig(server="https://127.0.0.1:1"))  # x509 only: never asked
    server = KubeletServer(
        lookup,
        cri,
        address="127.0.0.1",
        port=0,
        certificate=KeyPair(pki.cert.read_bytes(), pki.key.read_bytes()),
        client_ca=pki.ca_file,
        auth=KubeletAuth(AuthOptions(anonymous=False), unused, "node-a", RealClock()),
        log_poll_interval=0.01,
        stats_provider=stats,
    )
    port = await server.start()
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        await server.stop()
        await unused.close()


@dataclass
class Node:
    url: str
    runtime: Runtime
    streaming: StreamingServer
    spdy: FakeStreamingServer
    pki: Pki
    log_path: Path
    lookup: Lookup

    def session(self, tls: ssl.SSLContext | None = None) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(ssl=tls or self.pki.client_tls)
        return aiohttp.ClientSession(connector=connector)


@pytest.fixture
async def node(
    tmp_path: Path, pki: Pki, streaming: StreamingServer, spdy: FakeStreamingServer
) -> AsyncIterator[Node]:
    log_path = tmp_path / "logs" / "app" / "0.log"
    log_path.parent.mkdir(parents=True)
    runtime = Runtime(streaming, spdy)
    runtime.statuses["cid-app"] = pb.ContainerStatus(
        id="cid-app", state=pb.CONTAINER_RUNNING, log_path=str(log_path)
    )
    lookup = Lookup()
    async with serve(lookup, runtime, pki) as url:
        yield Node(url, runtime, streaming, spdy, pki, log_path, lookup)


async def get(node: Node, path: str, tls: ssl.SSLContext | None = None) -> tuple[int, str]:
    async with node.session(tls) as session, session.get(node.url + path) as response:
        return response.status, await response.text()


async def test_authentication(node: Node) -> None:
    assert await get(node, "/healthz", node.pki.anonymous_tls) == (200, "ok")
    assert await get(node, "/pods", node.pki.anonymous_tls) == (401, "Unauthorized\n")
    with pytest.raises(aiohttp.ClientError):
        await get(node, "/pods", node.pki.stranger_tls)
    status, body = await get(node, "/pods")
    assert status == 200
    pods = json.loads(body)
    assert pods["kind"] == "PodList"
    assert [p["metadata"]["name"] for p in pods["items"]] == ["web"]


class Stats:
    """Measures ``SUMMARY``, or fails as a vanished cgroup hierarchy would."""

    def __init__(self) -> None:
        self.fail = False

    async def summary(self) -> Summary:
        if self.fail:
            raise FileNotFoundError("/sys/fs/cgroup/memory is gone")
        return SUMMARY


async def test_resource_usage_endpoints(node: Node, pki: Pki) -> None:
    stats = Stats()
    async with serve(node.lookup, node.runtime, pki, stats) as url:
        served = Node(url, node.runtime, node.streaming, node.spdy, pki, node.log_path, node.lookup)
        for path in ("/stats/summary", "/metrics/resource"):
            assert await get(served, path, pki.anonymous_tls) == (401, "Unauthorized\n")
        status, body = await get(served, "/stats/summary")
        assert (status, json.loads(body)) == (200, summary_json(SUMMARY))
        assert await get(served, "/metrics/resource") == (200, resource_metrics(SUMMARY))
        stats.fail = True
        status, body = await get(served, "/stats/summary")
        assert (status, body) == (
            500,
            "failed to get node info: /sys/fs/cgroup/memory is gone\n",
        )
        assert await get(served, "/metrics/resource") == (200, resource_metrics(None))
    assert (await get(node, "/stats/summary"))[0] == 404, "a server without a provider"


def write_log(path: Path, *lines: str) -> None:
    with path.open("a") as handle:
        handle.writelines(
            f"2026-01-01T00:00:0{i}.000000000Z stdout F {line}\n" for i, line in enumerate(lines)
        )


async def test_logs(node: Node) -> None:
    write_log(node.log_path, "one", "two")
    assert await get(node, "/containerLogs/default/web/app") == (200, "one\ntwo\n")
    assert await get(node, "/containerLogs/default/web/app?tailLines=1&timestamps=true") == (
        200,
        "2026-01-01T00:00:01.000000000Z two\n",
    )


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/containerLogs/default/db/app", 404, 'pod "default/db" not found'),
        ("/containerLogs/default/web/sidecar", 404, 'container "sidecar" in pod "web" not found'),
        (
            "/containerLogs/default/web/app?previous=true",
            400,
            'previous terminated container "app" in pod "web" not found',
        ),
        ("/containerLogs/default/web/app?tailLines=-3", 400, "tailLines: must be greater"),
    ],
    ids=["pod", "container", "previous", "option"],
)
async def test_log_errors(node: Node, path: str, status: int, message: str) -> None:
    got_status, body = await get(node, path)
    assert (got_status, body.startswith(message)) == (status, True), body


def exited(container_id: str) -> ContainerState:
    return ContainerState(
        terminated=ContainerStateTerminated(
            exit_code=1, container_id=f"containerd://{container_id}"
        )
    )


async def test_previous_reads_the_instance_last_state_names(node: Node, tmp_path: Path) -> None:
    """A crash-looping container: waiting in CrashLoopBackOff, its last run in lastState (the
    instance the container GC keeps); plain and ``previous`` logs both read that run."""
    old_log = tmp_path / "logs" / "app" / "1.log"
    write_log(old_log, "crashed")
    node.runtime.statuses["cid-old"] = pb.ContainerStatus(
        id="cid-old", state=pb.CONTAINER_EXITED, log_path=str(old_log)
    )
    del node.lookup.running[("uid-web", "app")]
    node.lookup.status = PodStatus(
        container_statuses=[
            ContainerStatus(
                name="app",
                state=ContainerState(waiting=ContainerStateWaiting(reason="CrashLoopBackOff")),
                last_state=exited("cid-old"),
            )
        ]
    )
    assert await get(node, "/containerLogs/default/web/app?previous=true") == (200, "crashed\n")
    assert await get(node, "/containerLogs/default/web/app") == (200, "crashed\n")
    # Restarted: the running instance is current, the crashed one previous.
    write_log(node.log_path, "again")
    restarted = running("cid-app")
    restarted.last_state = exited("cid-old")
    node.lookup.status = PodStatus(container_statuses=[restarted])
    assert await get(node, "/containerLogs/default/web/app") == (200, "again\n")
    assert await get(node, "/containerLogs/default/web/app?previous=1") == (200, "crashed\n")


async def test_logs_follow_until_the_container_exits(node: Node) -> None:
    write_log(node.log_path, "first")
    async with (
        node.session() as session,
        session.get(node.url + "/containerLogs/default/web/app?follow=true") as response,
    ):
        assert await response.content.readline() == b"first\n"
        write_log(node.log_path, "second")
        assert await response.content.readline() == b"second\n"
        node.runtime.statuses["cid-app"] = pb.ContainerStatus(
            id="cid-app", state=pb.CONTAINER_EXITED, log_path=str(node.log_path)
        )
        assert await asyncio.wait_for(response.content.read(), 5) == b""


async def connect(
    node: Node, path: str, protocols: tuple[str, ...]
) -> tuple[aiohttp.ClientSession, aiohttp.ClientWebSocketResponse]:
    session = node.session()
    try:
        ws = await session.ws_connect(node.url + path, protocols=protocols)
    except BaseException:
        await session.close()
        raise
    return session, ws


async def frames(ws: aiohttp.ClientWebSocketResponse) -> list[bytes]:
    """Every binary frame until the server closes."""
    return [m.data async for m in ws if m.type == aiohttp.WSMsgType.BINARY]


async def test_exec_v5_relays_stdio_and_exit_status(node: Node) -> None:
    query = "command=sh&command=-c&command=cat&stdin=true&stdout=true&stderr=true"
    session, ws = await connect(node, f"/exec/default/web/app?{query}", (V5, V4))
    async with session:
        assert ws.protocol == V5
        await ws.send_bytes(b"\x00hello")
        assert (await ws.receive_bytes()) == b"\x01hello"
        await ws.send_bytes(b"\x00exit 3")
        received = await asyncio.wait_for(frames(ws), 5)
    assert received[0][0] == 3
    status = json.loads(received[0][1:])
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert node.runtime.calls == [
        ("exec", ("cid-app", ["sh", "-c", "cat"], False, True, True, True))
    ]


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "tty"])
async def test_exec_v5_stdin_close(node: Node, tty: bool) -> None:
    """A FIN on the stdin stream; with a tty a Ctrl-D instead (the terminal's end of file)."""
    query = f"command=cat&stdin=1&stdout=1&stderr=1&tty={int(tty)}"
    session, ws = await connect(node, f"/exec/default/web/app?{query}", (V5,))
    async with session:
        await ws.send_bytes(b"\x00hello")
        await ws.send_bytes(b"\xff\x00")
        received = await asyncio.wait_for(frames(ws), 5)
    assert received[0] == b"\x01hello"
    assert json.loads(received[1][1:])["status"] == "Success"
    assert len(received) == 2
    assert node.spdy.stdin == ([b"hello", b"\x04"] if tty else [b"hello"])
    assert node.spdy.stdin_fin.is_set() != tty
    types = (
        ["error", "stdin", "stdout", "resize"] if tty else ["error", "stdin", "stdout", "stderr"]
    )
    assert node.spdy.stream_types == [types]
    # With a tty there is no stderr stream: the CRI request must not ask for one either.
    assert node.runtime.calls == [("exec", ("cid-app", ["cat"], tty, True, True, not tty))]


async def test_exec_stderr_and_text_frames(node: Node) -> None:
    query = "command=sh&stdin=1&stdout=1&stderr=1"
    session, ws = await connect(node, f"/exec/default/web/app?{query}", (V4,))
    async with session:
        await ws.send_bytes(b"\x00err:oops")
        assert await ws.receive_bytes() == b"\x02err:oops"
        # The Python client sends str data as text frames.
        await ws.send_str("\x00typed")
        assert await ws.receive_bytes() == b"\x01typed"
        await ws.send_str("\x00exit 0")
        received = await asyncio.wait_for(frames(ws), 5)
    assert json.loads(received[0][1:]) == {"metadata": {}, "status": "Success"}


async def test_exec_without_stdin_ends_with_the_process(node: Node) -> None:
    session, ws = await connect(node, "/exec/default/web/app?command=true&stdout=1", (V5,))
    async with session:
        received = await asyncio.wait_for(frames(ws), 5)
    assert [json.loads(f[1:])["status"] for f in received] == ["Success"]
    assert node.spdy.stream_types == [["error", "stdout"]]


async def test_client_leaving_drops_the_runtime_connection(node: Node) -> None:
    session, ws = await connect(node, "/exec/default/web/app?command=cat&stdin=1&stdout=1", (V5,))
    async with session:
        await ws.send_bytes(b"\x00hi")
        assert await ws.receive_bytes() == b"\x01hi"
        await ws.close()
    await asyncio.wait_for(node.spdy.stdin_dropped.wait(), 5)
    assert not node.spdy.stdin_fin.is_set()


async def test_runtime_refusing_the_stream_is_a_500(node: Node) -> None:
    node.runtime.spdy = FakeStreamingServer()  # knows no token: the real one answers 404
    node.runtime.spdy.url = node.spdy.url
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Protocol": V5}
    path = "/exec/default/web/app?command=ls&stdout=1"
    async with node.session() as session, session.get(node.url + path, headers=headers) as response:
        assert response.status == 500
        text = await response.text()
    assert "error connecting to the runtime's stream" in text and "(404): not found" in text


async def test_exec_v1_gets_status_as_text(node: Node) -> None:
    session, ws = await connect(
        node, "/exec/default/web/app?command=false&stdin=1", ("channel.k8s.io",)
    )
    async with session:
        await ws.send_bytes(b"\x00exit 1")
        received = await asyncio.wait_for(frames(ws), 5)
    assert received == [b"\x03command terminated with non-zero exit code: exit status 1"]


async def test_attach_passes_resize_through(node: Node) -> None:
    path = "/attach/default/web/app?stdin=1&stdout=1&stderr=1&tty=1"
    session, ws = await connect(node, path, (V4,))
    async with session:
        await ws.send_bytes(b'\x04{"Width":80,"Height":24}')
        assert (await ws.receive_bytes()) == b'\x01resize:{"Width":80,"Height":24}'
        await ws.close()
    assert node.runtime.calls == [("attach", ("cid-app", True, True, True, False))]
    assert node.spdy.stream_types == [["error", "stdin", "stdout", "resize"]]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/attach/default/web/app?stdin=1&stdout=1", "container app not found in pod web_default"),
        ("/exec/default/web/app?command=ls&stdout=1", 'container not found ("app")'),
    ],
    ids=["attach", "exec"],
)
@pytest.mark.parametrize("upgrade", ["websocket", "SPDY/3.1"])
async def test_a_container_that_is_not_running_is_refused_before_the_upgrade(
    node: Node, path: str, message: str, upgrade: str
) -> None:
    """Upstream's answer, whatever the protocol: kubectl's SPDY fallback shows it, and
    ``kubectl run -i`` then reads the logs."""
    del node.lookup.running[("uid-web", "app")]
    headers = {"Upgrade": upgrade, "Connection": "Upgrade", "Sec-WebSocket-Protocol": V5}
    async with node.session() as session, session.get(node.url + path, headers=headers) as response:
        assert (response.status, await response.text()) == (500, message + "\n")
    assert node.runtime.calls == []


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/exec/default/web/app?stdin=1", 400, "you must specify at least one command"),
        ("/exec/default/web/app?command=ls", 400, "you must specify at least 1 of stdin"),
        ("/exec/default/web/nope?command=ls&stdout=1", 404, 'container "nope" in pod "web"'),
        ("/exec/default/db/app?command=ls&stdout=1", 404, 'pod "default/db" not found'),
        ("/portForward/default/web", 400, 'query parameter "port" is required'),
        ("/portForward/default/web?ports=http", 400, "unable to parse 'http' as a port"),
    ],
    ids=["no-command", "no-stream", "no-container", "no-pod", "no-port", "bad-port"],
)
async def test_stream_request_errors(node: Node, path: str, status: int, message: str) -> None:
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Protocol": V4}
    async with node.session() as session, session.get(node.url + path, headers=headers) as response:
        assert (response.status, message in await response.text()) == (status, True)


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_port_forward_websocket(node: Node, echo_port: int) -> None:
    prefix = struct.pack("<H", echo_port)
    session, ws = await connect(node, f"/portForward/default/web?ports={echo_port}", (V4,))
    async with session:
        assert ws.protocol == V4
        assert [await ws.receive_bytes(), await ws.receive_bytes()] == [
            b"\x00" + prefix,
            b"\x01" + prefix,
        ]
        await ws.send_bytes(b"\x00ping")
        assert (await ws.receive_bytes()) == b"\x00ping"
        await ws.close()
    assert node.runtime.calls == [("port_forward", ("sandbox-web", [echo_port]))]
    assert node.streaming.queries == [{"port": [str(echo_port)]}]


class Kubectl:
    """kubectl's side of a tunnelled SPDY session: bytes in binary messages, split anywhere."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.deflate = HeaderCompressor()
        self.reader = FrameReader()

    async def send(self, data: bytes) -> None:
        for start in range(0, len(data), 5):
            await self.ws.send_bytes(data[start : start + 5])

    async def open(self, stream_id: int, headers: dict[str, str]) -> None:
        block = self.deflate.compress(headers.items())
        payload = struct.pack(">IIH", stream_id, 0, 0) + block
        await self.send(encode_control(FrameType.SYN_STREAM, payload))

    async def next_frame(self) -> Frame:
        while True:
            message = await asyncio.wait_for(self.ws.receive(), 5)
            assert message.type == aiohttp.WSMsgType.BINARY, message
            frames = self.reader.feed(message.data)
            if frames:
                assert len(frames) == 1
                return frames[0]


async def test_port_forward_spdy(node: Node, echo_port: int) -> None:
    session, ws = await connect(node, "/portForward/default/web", (SPDY,))
    async with session:
        assert ws.protocol == SPDY
        kubectl = Kubectl(ws)
        await kubectl.send(encode_control(FrameType.PING, b"\x00\x00\x00\x01"))
        assert (await kubectl.next_frame()).type == FrameType.PING
        for request, (error_id, data_id) in enumerate([(1, 3), (5, 7)]):
            headers = {"port": str(echo_port), "requestID": str(request)}
            await kubectl.open(error_id, {"streamType": "error", **headers})
            await kubectl.open(data_id, {"streamType": "data", **headers})
            replies = [await kubectl.next_frame(), await kubectl.next_frame()]
            assert [f.type for f in replies] == [FrameType.SYN_REPLY, FrameType.SYN_REPLY]
            await kubectl.send(encode_data(data_id, b"ping %d" % request))
            assert await kubectl.next_frame() == Frame(None, 0, b"ping %d" % request, data_id)
            reset = struct.pack(">II", data_id, RstStatus.CANCEL)
            await kubectl.send(encode_control(FrameType.RST_STREAM, reset))
            assert await kubectl.next_frame() == Frame(None, FLAG_FIN, b"", error_id)
        await ws.close()
    assert [c for c in node.runtime.calls] == [("port_forward", ("sandbox-web", [echo_port]))] * 2


async def test_port_forward_spdy_reports_a_refused_port(node: Node) -> None:
    session, ws = await connect(node, "/portForward/default/web", (SPDY,))
    async with session:
        kubectl = Kubectl(ws)
        # Nothing listens on 127.0.0.1:1.
        await kubectl.open(1, {"streamType": "error", "port": "1", "requestID": "0"})
        await kubectl.open(3, {"streamType": "data", "port": "1", "requestID": "0"})
        seen = [await kubectl.next_frame() for _ in range(3)]
        assert (seen[2].type, seen[2].stream_id) == (None, 1)
        assert seen[2].payload.startswith(b"error forwarding port 1 to pod web, uid uid-web:")
        await ws.close()


async def test_through_the_fake_cri_runtime(
    tmp_path: Path, pki: Pki, streaming: StreamingServer, spdy: FakeStreamingServer
) -> None:
    """The same paths with the real RuntimeClient, over gRPC to a FakeRuntime."""
    spdy.default = Options(stdin=True, stdout=True, stderr=False, tty=False)
    runtime = FakeRuntime(images=["busybox:1.35"], streaming_url=spdy.url)
    await runtime.start(tmp_path / "cri.sock")
    try:
        async with RuntimeClient(runtime.endpoint) as cri:
            sandbox = await cri.run_pod_sandbox(
                pb.PodSandboxConfig(
                    metadata=pb.PodSandboxMetadata(name="web", namespace="default", uid="uid-web"),
                    log_directory=str(tmp_path / "pods" / "uid-web"),
                )
            )
            config = pb.ContainerConfig(
                metadata=pb.ContainerMetadata(name="app"),
                image=pb.ImageSpec(image="busybox:1.35"),
                log_path="app/0.log",
            )
            container = await cri.create_container(sandbox, config, pb.PodSandboxConfig())
            await cri.start_container(container)
            runtime.write_log(container, "from the runtime")
            lookup = Lookup(container, sandbox)
            async with serve(lookup, cri, pki) as url:
                node = Node(url, Runtime(streaming, spdy), streaming, spdy, pki, tmp_path, lookup)
                assert await get(node, "/containerLogs/default/web/app") == (
                    200,
                    "from the runtime\n",
                )
                session, ws = await connect(
                    node, "/exec/default/web/app?command=cat&stdin=1&stdout=1", (V5,)
                )
                async with session:
                    await ws.send_bytes(b"\x00hi")
                    assert await ws.receive_bytes() == b"\x01hi"
                    await ws.close()
    finally:
        await runtime.stop()
