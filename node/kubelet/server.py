"""The kubelet's HTTPS server (port 10250): pods, logs, exec, attach and port-forward.

The API server reaches it with its kubelet-client certificate to serve ``pods/log``,
``pods/exec``, ``pods/attach`` and ``pods/portforward`` (see
controlplane/apiserver/registry/proxy.py):

- ``GET /healthz`` → ``ok``, without a client certificate (like upstream's healthz port);
- ``GET /pods`` → a v1 PodList of the pods the kubelet runs;
- ``GET /logs/<path>`` → the node's own log files (``system_log_dir``, upstream's /var/log),
  a directory as a listing, as upstream's system log handler (``nodes/log``);
- ``GET /containerLogs/{ns}/{pod}/{container}`` → the container's log as text, chunked, with
  the PodLogOptions query (``logs.LogOptions``), following if asked; the instance is the one
  the pod's status names (``logs.log_container_id``: ``previous`` is ``lastState``);
- ``/exec/{ns}/{pod}/{container}?command=..&stdin=&stdout=&stderr=&tty=`` and
  ``/attach/...`` → WebSocket (``streams.CHANNEL_PROTOCOLS``) relayed to the runtime's
  streaming server over SPDY (``streams.RemoteCommand``); with a tty there is no stderr
  (upstream drops it too: the terminal merges it into stdout).  Only a running instance can
  be attached to or exec'd in: otherwise the answer is upstream's 500, before any upgrade,
  whatever the protocol asked for (kubectl's ``run -i`` then falls back to the logs);
- ``/portForward/{ns}/{pod}`` → WebSocket ``v4.channel.k8s.io`` with ``?ports=`` (or
  ``?port=``), or ``SPDY/3.1+portforward.k8s.io`` carrying kubectl's SPDY session;
- ``GET /stats/summary`` and ``GET /metrics/resource`` → the resource usage the
  ``stats.StatsProvider`` measures, in upstream's JSON and Prometheus text (``stats``); a
  measurement that fails is upstream's 500 for the summary and ``resource_scrape_error 1``
  for the metrics;
- ``GET /debug/sandboxes`` → the sandboxes this kubelet created lately, with their CNI
  result, as JSON (``runtime.network``; kubelab's, for ``kubelab story``).

Every path but ``/healthz`` goes through ``auth.KubeletAuth``: a client certificate verified
against ``client_ca`` (the TLS layer rejects one that does not verify), a bearer token
reviewed by the API server, or anonymous, then a SubjectAccessReview on ``nodes/<subresource>``;
401 and 403 are plain text, as upstream's.  Without ``auth`` every request is served (a lab
without a PKI).  Errors are plain text with upstream's wording where there is one.

The serving certificate is given at construction or later (``use_certificate``, as the
serving certificate manager obtains and renews it): the context is updated in place, so new
connections present the new certificate and open ones go on; until there is one, handshakes
fail, as upstream's with a rotating certificate not yet issued.

The kubelet provides what the server needs to know through ``PodLookup``; the runtime is
reached through the few ``RuntimeClient`` calls in ``StreamRuntime``.
"""

from __future__ import annotations

import functools
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Protocol

import aiohttp
import grpc
from aiohttp import web

from kube.api.codec import to_builtins
from kube.api.kinds.core_v1.pod import Pod, PodStatus
from kube.client.errors import ApiError, ClientError
from kube.clock import Clock, RealClock
from kube.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from kube.pki import KeyPair, load_certificate
from node.cri.client import CRIError
from node.cri.pb import api_pb2 as pb
from node.kubelet import logs, stats, streams
from node.kubelet.auth import Forbidden, KubeletAuth, Unauthorized
from node.kubelet.runtime.network import SandboxLog
from node.kubelet.spdy import SpdyError, SpdySession

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class PodLookup(Protocol):
    """What the server asks the kubelet (implemented by the Kubelet)."""

    def pods(self) -> list[Pod]: ...

    def find_pod(self, namespace: str, name: str) -> Pod | None: ...

    def pod_status(self, pod: Pod) -> PodStatus:
        """The status the kubelet last computed for the pod, else the pod's own."""
        ...

    async def running_container_id(self, pod_uid: str, container: str) -> str | None:
        """The runtime id of the container's running instance, asked of the runtime now (as
        upstream's ``findContainer``); None when none runs."""
        ...

    def sandbox_id(self, pod_uid: str) -> str | None: ...


class StreamRuntime(Protocol):
    """The CRI calls the server makes (``RuntimeClient`` has them)."""

    async def container_status(self, container_id: str) -> pb.ContainerStatus: ...

    async def exec(
        self,
        container_id: str,
        cmd: Iterable[str],
        *,
        tty: bool = False,
        stdin: bool = False,
        stdout: bool = True,
        stderr: bool = True,
    ) -> str: ...

    async def attach(
        self,
        container_id: str,
        *,
        tty: bool = False,
        stdin: bool = False,
        stdout: bool = True,
        stderr: bool = True,
    ) -> str: ...

    async def port_forward(self, sandbox_id: str, ports: Iterable[int]) -> str: ...


class _HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("1", "true")


def _container_names(pod: Pod) -> Iterator[str]:
    spec = pod.spec
    if spec is None:
        return
    for group in (spec.containers, spec.init_containers, spec.ephemeral_containers):
        for container in group or ():
            if container.name:
                yield container.name


def _cri_error(error: CRIError) -> _HTTPError:
    if error.code == grpc.StatusCode.NOT_FOUND:
        return _HTTPError(404, str(error))
    if error.code == grpc.StatusCode.FAILED_PRECONDITION:
        return _HTTPError(400, str(error))
    return _HTTPError(500, str(error))


class KubeletServer:
    """Serves the endpoints above on ``address:port`` (0: any free port) over TLS."""

    def __init__(
        self,
        lookup: PodLookup,
        cri: StreamRuntime,
        *,
        address: str,
        port: int,
        certificate: KeyPair | None,
        client_ca: Path | None,
        auth: KubeletAuth | None,
        system_log_dir: Path | None = None,
        clock: Clock | None = None,
        log_poll_interval: float = 0.2,
        stats_provider: stats.StatsProvider | None = None,
        sandboxes: SandboxLog | None = None,
    ) -> None:
        self._lookup = lookup
        self._sandboxes = sandboxes
        self.stats_provider = stats_provider
        self._cri = cri
        self._address = address
        self._port = port
        self._clock = clock or RealClock()
        self._poll = log_poll_interval
        self._auth = auth
        self._system_log_dir = system_log_dir
        self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        if certificate is not None:
            self.use_certificate(certificate)
        if client_ca is not None:
            self._ssl.load_verify_locations(cafile=client_ca)
            # Optional at the TLS layer so /healthz and tokens work without one.
            self._ssl.verify_mode = ssl.CERT_OPTIONAL
        self._runner: web.AppRunner | None = None

    def use_certificate(self, pair: KeyPair) -> None:
        """Serve new connections with ``pair``."""
        load_certificate(self._ssl, pair.cert_pem, pair.key_pem)

    def _app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors, self._authenticate])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/pods", self._pods)
        app.router.add_get("/pods/", self._pods)
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        app.router.add_route("*", "/exec/{namespace}/{pod}/{container}", self._exec)
        app.router.add_route("*", "/attach/{namespace}/{pod}/{container}", self._attach)
        app.router.add_route("*", "/portForward/{namespace}/{pod}", self._port_forward)
        if self.stats_provider is not None:
            app.router.add_get("/stats/summary", functools.partial(_summary, self.stats_provider))
            app.router.add_get(
                "/metrics/resource", functools.partial(_resource_metrics, self.stats_provider)
            )
        if self._sandboxes is not None:
            app.router.add_get("/debug/sandboxes", self._sandbox_records)
        if self._system_log_dir is not None:
            app.router.add_static("/logs/", self._system_log_dir, show_index=True)
        return app

    async def _sandbox_records(self, _: web.Request) -> web.Response:
        assert self._sandboxes is not None
        return web.json_response([r.to_json() for r in self._sandboxes.records()])

    async def start(self) -> int:
        """Listen; returns the bound port."""
        self._runner = web.AppRunner(self._app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._address, self._port, ssl_context=self._ssl)
        await site.start()
        address = self._runner.addresses[0]
        return int(address[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- middlewares --------------------------------------------------------------------------

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except _HTTPError as error:
            return web.Response(status=error.status, text=error.message + "\n")

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self._auth is not None and request.path != "/healthz":
            ssl_object = (
                request.transport.get_extra_info("ssl_object") if request.transport else None
            )
            certificate = ssl_object.getpeercert(binary_form=True) if ssl_object else None
            try:
                user = await self._auth.authenticate(certificate, request.headers)
                await self._auth.authorize(user, request.method, request.path)
            except Unauthorized as error:
                log.debug("unauthorized %s %s: %s", request.method, request.path, error)
                raise _HTTPError(401, "Unauthorized") from None
            except Forbidden as error:
                raise _HTTPError(403, str(error)) from None
            except (ApiError, ClientError) as error:
                raise _HTTPError(
                    503, f"the API server could not check this request: {error}"
                ) from None
        return await handler(request)

    # -- simple endpoints ---------------------------------------------------------------------

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _pods(self, request: web.Request) -> web.Response:
        items = [to_builtins(pod) for pod in self._lookup.pods()]
        body = {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        return web.Response(text=json.dumps(body), content_type="application/json")

    # -- lookups ------------------------------------------------------------------------------

    def _pod(self, request: web.Request) -> Pod:
        namespace, name = request.match_info["namespace"], request.match_info["pod"]
        pod = self._lookup.find_pod(namespace, name)
        if pod is None:
            raise _HTTPError(404, f'pod "{namespace}/{name}" not found')
        return pod

    def _container(self, request: web.Request) -> tuple[Pod, str]:
        """The pod and the name of one of its containers, from the path."""
        pod = self._pod(request)
        container = request.match_info["container"]
        if container not in _container_names(pod):
            raise _HTTPError(404, f'container "{container}" in pod "{pod.metadata.name}" not found')
        return pod, container

    # -- logs ---------------------------------------------------------------------------------

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        try:
            options = logs.LogOptions.from_query(request.query, self._clock.now())
        except ValueError as error:
            raise _HTTPError(400, str(error)) from None
        pod, container = self._container(request)
        try:
            container_id = logs.log_container_id(
                pod.metadata.name or "", self._lookup.pod_status(pod), container, options.previous
            )
        except logs.NoLogError as error:
            raise _HTTPError(400, str(error)) from None
        status = await self._status(container_id)
        response = web.StreamResponse()
        response.content_type = "text/plain"
        response.enable_chunked_encoding()
        await response.prepare(request)
        if status.log_path:

            async def running() -> bool:
                current = await self._status(container_id)
                return current.state == pb.CONTAINER_RUNNING

            try:
                await logs.stream_logs(
                    Path(status.log_path),
                    options,
                    response.write,
                    running=running,
                    clock=self._clock,
                    poll_interval=self._poll,
                )
            except (ConnectionError, _HTTPError) as error:
                log.debug("log stream of %s ended: %s", container_id, error)
                return response
        await response.write_eof()
        return response

    async def _status(self, container_id: str) -> pb.ContainerStatus:
        try:
            return await self._cri.container_status(container_id)
        except CRIError as error:
            raise _cri_error(error) from None

    # -- exec / attach ------------------------------------------------------------------------

    async def _exec(self, request: web.Request) -> web.StreamResponse:
        command = request.query.getall("command", [])
        if not command:
            raise _HTTPError(400, "you must specify at least one command for the container")
        return await self._remote_command(request, command)

    async def _attach(self, request: web.Request) -> web.StreamResponse:
        return await self._remote_command(request, None)

    async def _remote_command(
        self, request: web.Request, command: list[str] | None
    ) -> web.StreamResponse:
        tty = _flag(request, "tty")
        stdin, stdout, stderr = (_flag(request, n) for n in ("stdin", "stdout", "stderr"))
        stderr = stderr and not tty
        if not (stdin or stdout or stderr):
            raise _HTTPError(400, "you must specify at least 1 of stdin, stdout, stderr")
        pod, container = self._container(request)
        try:
            container_id = await self._lookup.running_container_id(
                pod.metadata.uid or "", container
            )
        except CRIError as error:
            raise _cri_error(error) from None
        if container_id is None:
            # Upstream's words, a 500 as its streaming errors; kubectl run falls back to logs.
            meta = pod.metadata
            if command is None:
                message = f"container {container} not found in pod {meta.name}_{meta.namespace}"
            else:
                message = f'container not found ("{container}")'
            raise _HTTPError(500, message)
        protocol = self._protocol(request, streams.CHANNEL_PROTOCOLS)
        options = {"tty": tty, "stdin": stdin, "stdout": stdout, "stderr": stderr}
        try:
            if command is None:
                url = await self._cri.attach(container_id, **options)
            else:
                url = await self._cri.exec(container_id, command, **options)
        except CRIError as error:
            raise _cri_error(error) from None
        try:
            remote = await streams.RemoteCommand.open(url, streams.Options(**options))
        except streams.RemoteCommandError as error:
            raise _HTTPError(500, f"error connecting to the runtime's stream: {error}") from None
        try:
            client = web.WebSocketResponse(protocols=(protocol,), max_msg_size=0)
            await client.prepare(request)
            await remote.relay(client, protocol)
        finally:
            await remote.close()
        return client

    # -- port-forward -------------------------------------------------------------------------

    async def _port_forward(self, request: web.Request) -> web.StreamResponse:
        offered = request.headers.get("Sec-WebSocket-Protocol", "")
        pod = self._pod(request)
        sandbox_id = self._lookup.sandbox_id(pod.metadata.uid or "")
        if sandbox_id is None:
            raise _HTTPError(400, f'pod "{pod.metadata.name}" has no running sandbox')
        if streams.negotiate(offered, (streams.SPDY_TUNNEL_PROTOCOL,)):
            return await self._spdy_port_forward(request, pod, sandbox_id)
        protocol = self._protocol(request, streams.PORT_FORWARD_PROTOCOLS)
        ports = _ports(request)
        try:
            url = await self._cri.port_forward(sandbox_id, ports)
        except CRIError as error:
            raise _cri_error(error) from None
        params = [("port", str(p)) for p in ports]
        return await self._relay(request, protocol, url, params)

    async def _spdy_port_forward(
        self, request: web.Request, pod: Pod, sandbox_id: str
    ) -> web.StreamResponse:
        async def dial(port: int) -> streams.PortStream:
            try:
                url = await self._cri.port_forward(sandbox_id, [port])
            except CRIError as error:
                raise streams.PortForwardError(str(error)) from None
            return await streams.CriPortStream.open(url, port)

        forward = streams.SpdyPortForward(dial, pod.metadata.name or "", pod.metadata.uid or "")
        client = web.WebSocketResponse(protocols=(streams.SPDY_TUNNEL_PROTOCOL,), max_msg_size=0)
        await client.prepare(request)
        session = SpdySession(client.send_bytes, forward.accept)
        try:
            async for message in client:
                if message.type != aiohttp.WSMsgType.BINARY:
                    break
                await session.feed(message.data)
        except SpdyError as error:
            log.warning("port-forward to %s: %s", pod.metadata.name, error)
        finally:
            session.close()
            await forward.close()
            await client.close()
        return client

    # -- shared -------------------------------------------------------------------------------

    @staticmethod
    def _protocol(request: web.Request, supported: tuple[str, ...]) -> str:
        offered = request.headers.get("Sec-WebSocket-Protocol", "")
        protocol = streams.negotiate(offered, supported)
        if protocol is None or request.headers.get("Upgrade", "").lower() != "websocket":
            raise _HTTPError(
                400, "upgrade to a WebSocket with one of the subprotocols " + ", ".join(supported)
            )
        return protocol

    async def _relay(
        self,
        request: web.Request,
        protocol: str,
        url: str,
        params: list[tuple[str, str]],
    ) -> web.StreamResponse:
        async with aiohttp.ClientSession() as session:
            try:
                upstream = await streams.open_upstream(session, url, params)
            except (aiohttp.ClientError, OSError) as error:
                raise _HTTPError(
                    500, f"error connecting to the runtime's stream: {error}"
                ) from None
            client = web.WebSocketResponse(protocols=(protocol,), max_msg_size=0)
            await client.prepare(request)
            await streams.relay_channels(client, upstream)
            return client


async def _summary(provider: stats.StatsProvider, request: web.Request) -> web.Response:
    try:
        summary = await provider.summary()
    except OSError as error:
        raise _HTTPError(500, f"failed to get node info: {error}") from None
    return web.json_response(stats.summary_json(summary))


async def _resource_metrics(provider: stats.StatsProvider, request: web.Request) -> web.Response:
    summary: stats.Summary | None = None
    try:
        summary = await provider.summary()
    except OSError as error:
        log.warning("measuring resource usage failed: %s", error)
    text = stats.resource_metrics(summary)
    return web.Response(body=text.encode(), headers={"Content-Type": METRICS_CONTENT_TYPE})


def _ports(request: web.Request) -> list[int]:
    texts = request.query.getall("ports", []) + request.query.getall("port", [])
    ports: list[int] = []
    for text in texts:
        for item in text.split(","):
            try:
                port = int(item)
            except ValueError:
                raise _HTTPError(400, f"unable to parse {item!r} as a port") from None
            if not 0 < port < 65536:
                raise _HTTPError(400, f"port {port} must be between 1 and 65535")
            ports.append(port)
    if not ports:
        raise _HTTPError(400, 'query parameter "port" is required')
    return ports
