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
- ``nodes/proxy/<path>`` → ``<path>`` on the kubelet, any method, through ``relay_http``
  below with the kubelet client's TLS; ``nodes/NAME:PORT/proxy/<path>`` (or
  ``https:NAME:PORT``) another port of the node's address, as any backend (kube-proxy's
  ``:10256/healthz``), as upstream's node ``ResourceLocation`` does.

The kubelet's address is the Node's InternalIP (else ExternalIP, else Hostname) and the port
its ``status.daemonEndpoints.kubeletEndpoint.port`` (10250 when unset).

``relay_http`` is the other half, upstream's upgrade-aware proxy handler as ``pods/proxy`` and
``services/proxy`` use it: any method goes to a ``Location`` (scheme, address, port) the
subresource found, with the query and the body as they came, the headers minus hop-by-hop
ones and the caller's credentials (the API server authenticated it; the backend must not see
its token), plus ``X-Forwarded-For`` and ``X-Forwarded-Uri``.  The answer comes back as it
comes (status, headers minus hop-by-hop and CORS ones, the body chunk by chunk), a
``Location`` on the backend rewritten to go through the API server again.  A GET or HEAD of
``.../proxy`` with nothing after it is redirected to ``.../proxy/`` first, and a WebSocket
upgrade is relayed frame by frame.  A ``text/html`` page is read whole and its links
rewritten the same way (``htmlrewrite``), as upstream's proxy transport does.  A backend
that cannot be reached is a 503 ``error trying to reach service: dial tcp ...``, as upstream
answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import os
import posixpath
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from controlplane.apiserver import errors
from controlplane.apiserver.registry import htmlrewrite
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
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers that describe one connection, never passed on by a proxy (RFC 9110 7.6.1)."""
CREDENTIAL_HEADERS = frozenset({"authorization"})
CREDENTIAL_PREFIXES = ("impersonate-",)
"""What the API server authenticated the caller with, which a backend must not see."""
_CORS_HEADERS = frozenset(
    {
        "access-control-allow-credentials",
        "access-control-allow-headers",
        "access-control-allow-methods",
        "access-control-allow-origin",
    }
)
"""Dropped from a backend's answer, as upstream's proxy does: the API server's own CORS
policy is the one that applies to its origin."""
_WEBSOCKET_HEADERS = frozenset(
    {
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
    }
)
SCHEMES = ("", "http", "https")
_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=30)
"""A backend has 30 s to accept the connection (upstream's dialer); a stream then lasts as
long as both sides keep it."""


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


def split_scheme_name_port(id_: str, kind: str) -> tuple[str, str, str]:
    """``name``, ``name:port`` or ``scheme:name:port`` (the name part of a ``proxy`` URL of
    a ``kind``) as (scheme, name, port), empty where absent; 400 ``invalid KIND request
    "ID"`` when it is none of those (upstream's ``SplitSchemeNamePort``: the scheme ``http``
    or ``https``, the name never empty)."""
    parts = id_.split(":")
    scheme = parts[0] if len(parts) == 3 else ""
    name = parts[-2] if len(parts) == 3 else parts[0]
    port = parts[-1] if len(parts) > 1 else ""
    if len(parts) > 3 or not name or scheme not in SCHEMES:
        raise errors.bad_request(f'invalid {kind} request "{id_}"')
    return scheme, name, port


def global_unicast(address: str) -> bool:
    """Whether ``address`` is an IP a proxy may dial: not unspecified, loopback, link-local,
    multicast or the IPv4 broadcast address (Go's ``IP.IsGlobalUnicast``, which private
    ranges pass)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return not (
        ip.is_unspecified
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip == ipaddress.IPv4Address("255.255.255.255")
    )


def unreachable(message: str) -> errors.ApiError:
    """A 503 without Retry-After, as upstream's proxies answer (clients would retry a
    backend that is down for seconds)."""
    return errors.ApiError(503, "ServiceUnavailable", message)


def dial_reason(error: Exception) -> str:
    """Why a connection failed, worded as Go's dialer (``dial tcp HOST:PORT: connect:
    connection refused``, ``tls: failed to verify certificate: ...``), without aiohttp's repr
    of the TLS context."""
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        cause = error.certificate_error
        reason = getattr(cause, "verify_message", None) or str(cause)
        return f"tls: failed to verify certificate: {reason}"
    if isinstance(error, aiohttp.ClientConnectorError):
        cause = error.os_error
        reason = os.strerror(cause.errno).lower() if cause.errno else str(cause)
        return f"dial tcp {error.host}:{error.port}: connect: {reason}"
    return str(error) or type(error).__name__


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


@dataclass(frozen=True)
class Location:
    """Where a ``proxy`` subresource sends a request: a pod's, an endpoint's or a node's
    address, the port (empty: the scheme's own) and the scheme (empty: http).  An https
    backend's certificate is not checked, as upstream's proxy transport does not (a pod's
    address is named by no certificate), unless ``tls`` is given: the kubelet client's
    context, for a node's kubelet."""

    scheme: str
    host: str
    port: str
    tls: ssl.SSLContext | None = None

    def url(self, path: str, raw_query: str) -> URL:
        host = f"[{self.host}]" if ":" in self.host else self.host
        netloc = f"{host}:{self.port}" if self.port else host
        quoted = quote(path, safe="/:@!$&'()*+,;=~")
        return URL(urlunsplit((self.scheme or "http", netloc, quoted, raw_query, "")), encoded=True)


class Locator(Protocol):
    """Finds where a ``proxy`` request goes from the name part of its URL."""

    async def location(self, namespace: str, id_: str) -> Location: ...


class ProxyREST:
    """``pods/proxy`` and ``services/proxy``: a Connecter sending ``<path>`` after ``proxy``
    to where its locator says."""

    def __init__(self, locator: Locator) -> None:
        self.locator = locator

    async def connect(
        self, request: web.Request, namespace: str, name: str, path: str
    ) -> web.StreamResponse:
        return await relay_http(request, await self.locator.location(namespace, name), path)


def backend_path(path: str) -> str:
    """``path`` (what follows ``proxy`` in the URL) cleaned as upstream joins it to the
    location: no ``.`` or ``..`` segments, the trailing slash kept."""
    cleaned = posixpath.normpath("/" + path.lstrip("/"))
    cleaned = "/" + cleaned.lstrip("/")
    return cleaned + "/" if path.endswith("/") and cleaned != "/" else cleaned


async def relay_http(request: web.Request, location: Location, path: str) -> web.StreamResponse:
    """Send ``request`` to ``location`` at ``path`` and stream the answer back (see the module
    docstring)."""
    raw_path = request.rel_url.raw_path
    raw_query = request.rel_url.raw_query_string
    if path in ("", "/") and not raw_path.endswith("/") and request.method in ("GET", "HEAD"):
        # upstream's redirect of an empty path (issue 4958): relative links then resolve
        # under .../proxy/, not beside it
        target = raw_path + "/" + (f"?{raw_query}" if raw_query else "")
        return web.Response(status=301, headers={"Location": target})
    path = backend_path(path)
    prefix = request.path[: -len(path)] if request.path.endswith(path) else request.path
    prefix = prefix.rstrip("/")
    url = location.url(path, raw_query)
    headers = _forwarded(request, prefix, path)
    if request.headers.get("Upgrade", "").lower() == "websocket":
        return await _relay_websocket(request, url, headers, location.tls or False)
    async with aiohttp.ClientSession(auto_decompress=False, timeout=_TIMEOUT) as session:
        try:
            upstream = await session.request(
                request.method,
                url,
                headers=headers,
                data=request.content if request.can_read_body else None,
                ssl=location.tls or False,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            raise unreachable(f"error trying to reach service: {dial_reason(error)}") from None
        async with upstream:
            rewrite = functools.partial(
                rewrite_url, backend=url, request_host=request.host, prefix=prefix
            )
            headers = _answer_headers(upstream.headers, rewrite)
            if _is_html(upstream) and request.method != "HEAD":
                # upstream's proxy transport rewrites a page's links: the page is read whole
                body = await upstream.read()
                page = htmlrewrite.rewrite_body(
                    body, upstream.headers.get("Content-Encoding", ""), rewrite
                )
                headers.popall("Content-Length", None)
                return web.Response(
                    status=upstream.status,
                    reason=upstream.reason,
                    headers=headers,
                    body=body if page is None else page,
                )
            response = web.StreamResponse(
                status=upstream.status, reason=upstream.reason, headers=headers
            )
            await response.prepare(request)
            with contextlib.suppress(aiohttp.ClientError, ConnectionError):
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            return response


def _is_html(upstream: aiohttp.ClientResponse) -> bool:
    """Whether an answer is a page whose links are rewritten: ``text/html``, and not a
    redirect (whose ``Location`` is rewritten instead)."""
    media = upstream.headers.get("Content-Type", "").partition(";")[0].strip().lower()
    return media == "text/html" and "Location" not in upstream.headers


def _answer_headers(headers: Mapping[str, str], rewrite: Callable[[str], str]) -> CIMultiDict[str]:
    """A backend's headers for the client: minus hop-by-hop and CORS ones, ``Location``
    rewritten through the proxy."""
    dropped = HOP_BY_HOP | _CORS_HEADERS | _listed(headers)
    return CIMultiDict(
        (k, rewrite(v) if k.lower() == "location" else v)
        for k, v in headers.items()
        if k.lower() not in dropped
    )


def _listed(headers: Mapping[str, str]) -> frozenset[str]:
    """The headers a ``Connection`` header names, hop-by-hop too."""
    named = ",".join(v for k, v in headers.items() if k.lower() == "connection")
    return frozenset(h.strip().lower() for h in named.split(",") if h.strip())


def _forwarded(request: web.Request, prefix: str, path: str) -> CIMultiDict[str]:
    """The caller's headers for the backend (see the module docstring)."""
    dropped = HOP_BY_HOP | CREDENTIAL_HEADERS | _listed(request.headers) | {"content-length"}
    headers: CIMultiDict[str] = CIMultiDict(
        (k, v)
        for k, v in request.headers.items()
        if k.lower() not in dropped and not k.lower().startswith(CREDENTIAL_PREFIXES)
    )
    if request.remote:
        before = headers.popall("X-Forwarded-For", [])
        headers["X-Forwarded-For"] = ", ".join([*before, request.remote])
    headers["X-Forwarded-Uri"] = (prefix + path).rstrip("/") or "/"
    return headers


def rewrite_url(value: str, backend: URL, request_host: str, prefix: str) -> str:
    """A URL a backend gave (its ``Location``, a link in its page) as the client must follow
    it: one on the backend itself (or naming the API server's host) goes through ``prefix``
    (``.../pods/NAME/proxy``), without scheme and host; one elsewhere, or relative, is left as
    it is (upstream's rewriteURL)."""
    parts = urlsplit(value)
    own = (backend.raw_authority, request_host)
    if (parts.netloc and parts.netloc not in own) or not parts.path.startswith("/"):
        return value
    path = parts.path
    if not path.startswith(prefix + "/") and path != prefix:
        joined = posixpath.normpath(prefix + path)
        path = joined + "/" if parts.path.endswith("/") and joined != "/" else joined
    return urlunsplit(("", "", path, parts.query, parts.fragment))


async def _relay_websocket(
    request: web.Request, url: URL, headers: CIMultiDict[str], tls: ssl.SSLContext | bool
) -> web.StreamResponse:
    """A WebSocket to the backend, offering the client's subprotocols, frames relayed both
    ways; a backend that refuses the handshake answers the client as it refused."""
    offered = [
        p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()
    ]
    sent = CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in _WEBSOCKET_HEADERS)
    refusal = _Refusal()
    async with aiohttp.ClientSession(timeout=_TIMEOUT, trace_configs=[refusal.trace()]) as session:
        try:
            upstream = await session.ws_connect(
                url, protocols=offered, headers=sent, ssl=tls, max_msg_size=0
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            if refusal.answer is not None:
                return refusal.answer
            raise unreachable(f"error trying to reach service: {dial_reason(error)}") from None
        client = web.WebSocketResponse(
            protocols=[upstream.protocol] if upstream.protocol else (), max_msg_size=0
        )
        await client.prepare(request)
        await _pump_both(client, upstream)
        return client
