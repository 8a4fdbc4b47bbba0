"""Streams the API server passes through to a node's kubelet.

``kubectl logs``, ``exec``, ``attach`` and ``port-forward`` talk to the API server, which
finds the pod's node, connects to that node's kubelet over HTTPS (presenting its own client
certificate) and relays the stream.  With ``--kubelet-certificate-authority`` the kubelet's
serving certificate must chain to that CA and name the address dialled, else the request
fails with a 503 Status saying so (as upstream's "error trying to reach service"); without it
the certificate is not checked, as upstream's default (kubelets' self-signed certificates).

- ``pods/log`` → ``GET /containerLogs/<ns>/<pod>/<container>`` with the same query, the body
  relayed chunk by chunk so ``-f`` follows;
- ``pods/exec``, ``pods/attach``, ``pods/portforward`` → the kubelet's ``/exec``, ``/attach``
  and ``/portForward`` endpoints as WebSockets, offering the client's subprotocols
  (``v5.channel.k8s.io``, ``v4.channel.k8s.io``, ``portforward.k8s.io``) and relaying frames
  both ways until either side closes.  Another upgrade (kubectl's SPDY/3.1 fallback) is
  offered to the kubelet as it came.  When the kubelet does not switch protocols, its answer
  (status and body) is the client's, as upstream's upgrade-aware proxy passes it through:
  kubectl shows it (``unable to upgrade connection: container c not found in pod p_ns``),
  and ``kubectl run -i`` falls back to the logs on it;
- ``nodes/proxy/<path>`` → ``<path>`` on the kubelet.

The kubelet's address is the Node's InternalIP (else ExternalIP, else Hostname) and the port
its ``status.daemonEndpoints.kubeletEndpoint.port`` (10250 when unset).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp import web

from controlplane.apiserver import errors
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Pod
from kube.pki import KeyPair, client_ssl_context

DEFAULT_KUBELET_PORT = 10250
ADDRESS_PREFERENCE = ("InternalIP", "ExternalIP", "Hostname")
STREAM_PROTOCOLS = (
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
    "portforward.k8s.io",
    "SPDY/3.1+portforward.k8s.io",
)
_KUBELET_PATHS = {"exec": "exec", "attach": "attach", "portforward": "portForward"}
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
"""Upstream's reason for a kubelet's failure code (``NewGenericServerResponse``)."""


def kubelet_address(node: Node) -> tuple[str, int]:
    """Host and port of a node's kubelet; 503 when the Node does not say."""
    status = node.status
    addresses = (
        {a.type: a.address for a in (status.addresses or []) if a.type and a.address}
        if status is not None
        else {}
    )
    host = next((addresses[t] for t in ADDRESS_PREFERENCE if t in addresses), None)
    if host is None:
        raise errors.unavailable(f'node "{node.metadata.name}" reports no address')
    endpoint = (
        status.daemon_endpoints.kubelet_endpoint
        if status is not None and status.daemon_endpoints is not None
        else None
    )
    port = endpoint.port if endpoint is not None and endpoint.port else DEFAULT_KUBELET_PORT
    return host, port


def pod_stream_path(pod: Pod, subresource: str, query: Mapping[str, str]) -> str:
    """The kubelet path serving a pod's ``log``, ``exec``, ``attach`` or ``portforward``."""
    namespace, name = pod.metadata.namespace, pod.metadata.name
    if subresource == "portforward":
        return f"/portForward/{namespace}/{name}"
    container = query.get("container") or _only_container(pod)
    if subresource == "log":
        return f"/containerLogs/{namespace}/{name}/{container}"
    return f"/{_KUBELET_PATHS[subresource]}/{namespace}/{name}/{container}"


def _only_container(pod: Pod) -> str:
    containers = pod.spec.containers if pod.spec is not None else None
    names = [c.name or "" for c in containers or ()]
    if len(names) == 1:
        return names[0]
    raise errors.bad_request(
        f"a container name must be specified for pod {pod.metadata.name}, choose one of: "
        f"[{' '.join(names)}]"
    )


class KubeletConnector:
    """Connects to kubelets as the API server's kubelet client identity."""

    def __init__(self, ca_pem: bytes | None, identity: KeyPair) -> None:
        self.context = client_ssl_context(
            ca_pem, identity.cert_pem, identity.key_pem, verify=ca_pem is not None
        )

    def _url(self, node: Node, path: str) -> str:
        host, port = kubelet_address(node)
        host = f"[{host}]" if ":" in host else host
        return f"https://{host}:{port}{path}"

    async def relay_get(
        self,
        request: web.Request,
        node: Node,
        path: str,
        query: Mapping[str, str],
        *,
        status_errors: bool = False,
    ) -> web.StreamResponse:
        """GET ``path`` on the kubelet and stream its answer back as it comes; with
        ``status_errors`` (``pods/log``) a failure becomes a Status whose message is the
        kubelet's text, as upstream's log streamer does, so kubectl prints it."""
        url = self._url(node, path)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url, params=dict(query), ssl=self.context) as upstream,
            ):
                if status_errors and not 200 <= upstream.status < 300:
                    text = (await upstream.text(errors="replace")).strip()
                    reason = _REASONS.get(upstream.status, "Unknown")
                    raise errors.ApiError(upstream.status, reason, text or reason)
                response = web.StreamResponse(status=upstream.status)
                for header in ("Content-Type",):
                    if header in upstream.headers:
                        response.headers[header] = upstream.headers[header]
                response.enable_chunked_encoding()
                await response.prepare(request)
                with contextlib.suppress(ConnectionError):
                    async for chunk in upstream.content.iter_any():
                        await response.write(chunk)
                    await response.write_eof()
                return response
        except (aiohttp.ClientConnectionError, TimeoutError) as error:
            raise _dial_error(node, error) from None

    async def relay_websocket(
        self, request: web.Request, node: Node, path: str
    ) -> web.StreamResponse:
        """Open a WebSocket to the kubelet and relay frames both ways (or its refusal)."""
        offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        protocols = [p for p in offered if p in STREAM_PROTOCOLS]
        if not protocols:
            raise errors.bad_request(
                "upgrade to a WebSocket with one of the subprotocols " + ", ".join(STREAM_PROTOCOLS)
            )
        url = self._url(node, path)
        refusal = _Refusal()
        session = aiohttp.ClientSession(trace_configs=[refusal.trace()])
        try:
            try:
                upstream = await session.ws_connect(
                    url,
                    params=_multi(request),
                    protocols=protocols,
                    ssl=self.context,
                    max_msg_size=0,
                )
            except (aiohttp.ClientError, TimeoutError) as error:
                if refusal.answer is not None:
                    return refusal.answer
                raise _dial_error(node, error) from None
            client = web.WebSocketResponse(
                protocols=[upstream.protocol] if upstream.protocol else (), max_msg_size=0
            )
            await client.prepare(request)
            await _pump_both(client, upstream)
            return client
        finally:
            await session.close()

    async def relay_upgrade(
        self, request: web.Request, node: Node, path: str
    ) -> web.StreamResponse:
        """Offer an upgrade other than a WebSocket to the kubelet and relay its refusal.  The
        kubelet serves these streams over WebSockets only, so one that switches protocols
        is not relayed (503)."""
        url = self._url(node, path)
        headers = {h: request.headers[h] for h in ("Connection", "Upgrade") if h in request.headers}
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.request(
                    request.method, url, params=_multi(request), headers=headers, ssl=self.context
                ) as upstream,
            ):
                if upstream.status == 101:
                    raise errors.unavailable(
                        f'the kubelet of node "{node.metadata.name}" switched to '
                        f"{upstream.headers.get('Upgrade')}, which is not relayed"
                    )
                return await _refused(upstream)
        except (aiohttp.ClientConnectionError, TimeoutError) as error:
            raise _dial_error(node, error) from None


async def _refused(upstream: aiohttp.ClientResponse) -> web.Response:
    """The kubelet's answer to an upgrade it refused, for the client as it is."""
    body = await upstream.read()
    content_type = upstream.headers.get("Content-Type")
    headers = {"Content-Type": content_type} if content_type else None
    return web.Response(status=upstream.status, body=body, headers=headers)


class _Refusal:
    """Keeps the kubelet's answer to a WebSocket handshake it refused: aiohttp raises on it
    and drops the body, which is the message the client should see."""

    def __init__(self) -> None:
        self.answer: web.Response | None = None

    def trace(self) -> aiohttp.TraceConfig:
        config = aiohttp.TraceConfig()
        config.on_request_end.append(self._keep)
        return config

    async def _keep(
        self,
        session: aiohttp.ClientSession,
        context: SimpleNamespace,
        params: aiohttp.TraceRequestEndParams,
    ) -> None:
        if params.response.status != 101:
            self.answer = await _refused(params.response)


def _dial_error(node: Node, error: Exception) -> errors.ApiError:
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        return errors.unavailable(
            f'the kubelet of node "{node.metadata.name}" is not trusted: its serving '
            f"certificate does not verify against --kubelet-certificate-authority "
            f"({error.certificate_error})"
        )
    return errors.unavailable(f'error dialing the kubelet of node "{node.metadata.name}": {error}')


def _multi(request: web.Request) -> list[tuple[str, str]]:
    """The query with repeated keys kept (``command=sh&command=-c&...``)."""
    return [(k, v) for k, v in request.query.items()]


async def _pump(source: Any, sink: Any) -> None:
    async for message in source:
        if message.type == aiohttp.WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        elif message.type == aiohttp.WSMsgType.TEXT:
            await sink.send_str(message.data)
        else:
            break
    await sink.close()


async def _pump_both(
    client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse
) -> None:
    tasks = [
        asyncio.ensure_future(_pump(client, upstream)),
        asyncio.ensure_future(_pump(upstream, client)),
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await upstream.close()
        await client.close()
