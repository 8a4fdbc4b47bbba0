"""Requests for an extension API server's group/version, sent on to it.

As upstream's proxy handler: a request under ``/apis/GROUP/VERSION`` whose APIService names a
Service goes, once the API server has authenticated the caller, to that Service's endpoint:
one ready address behind the service port from its EndpointSlices (``--enable-aggregator-
routing``, upstream's endpoint resolver), else the Service's cluster IP.  The connection is
TLS, the server's certificate checked against the APIService's ``caBundle`` (or not at all
with ``insecureSkipTLSVerify``) for the name ``SERVICE.NAMESPACE.svc``, and the API server
presents the front-proxy client certificate.  The caller's credentials are not passed on; its
identity is, in ``X-Remote-User``, ``X-Remote-Group`` and ``X-Remote-Extra-*``
(``kube.client.delegation``).  Bodies stream both ways, so watches stay open through the
proxy, and a websocket upgrade (``exec``-like streams) is relayed message by message.  An
APIService not ``Available`` answers 503, as upstream.

``discover`` reads an extension server's ``/apis/GROUP/VERSION`` over the same connection; the
available-condition controller calls it and keeps the answers for merged discovery.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from controlplane.apiserver import auth, errors
from controlplane.apiserver.crd import conversion
from controlplane.apiserver.registry.proxy import (
    CREDENTIAL_HEADERS,
    CREDENTIAL_PREFIXES,
    HOP_BY_HOP,
    dial_reason,
    unreachable,
)
from controlplane.apiserver.registry.store import ResourceStore
from controlplane.apiserver.storage.watchcache import WatchCache
from kube import pki
from kube.api.kinds.apiregistration_v1 import APIService, ServiceReference, available_condition
from kube.api.kinds.core_v1.service import Service
from kube.client.delegation import identity_headers

DISCOVERY_TIMEOUT = 5.0
"""Seconds a discovery check may take (upstream gives up after 6)."""
_DROPPED = HOP_BY_HOP | CREDENTIAL_HEADERS | {"content-length", "host"}
_DROPPED_PREFIXES = (*CREDENTIAL_PREFIXES, "x-remote-")
_WEBSOCKET_HEADERS = frozenset(
    {"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions"}
)

_AGGREGATOR = identity_headers("system:kube-aggregator", ("system:masters",), "", {})
"""Who discovery checks are made as (upstream's aggregator identity)."""


class Unreachable(Exception):
    """The extension server cannot be reached; the message says why."""


@dataclass(frozen=True)
class FrontProxyIdentity:
    """The client certificate the API server presents to extension servers."""

    cert_pem: bytes
    key_pem: bytes


class Aggregator:
    """Finds the APIService of a group/version and proxies requests to its server."""

    def __init__(
        self,
        stores: Mapping[tuple[str, str, str], ResourceStore],
        apiservices: WatchCache,
        identity: FrontProxyIdentity | None,
        endpoint_routing: bool,
    ) -> None:
        self.stores = stores
        self.apiservices = apiservices
        self.identity = identity
        self.endpoint_routing = endpoint_routing
        self.discovered: dict[tuple[str, str], dict[str, Any]] = {}
        """The last APIResourceList each available extension group/version answered."""
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[tuple[bytes | None, bool], ssl.SSLContext] = {}
        """TLS contexts by (caBundle, verify): made once, since making one reads the system
        CAs and writes the key to a file, and aiohttp pools connections by context."""

    def remote(self, group: str, version: str) -> APIService | None:
        """The APIService of ``group/version`` if an extension server answers it."""
        if not group or not version:
            return None
        found = self.apiservices.get("", f"{version}.{group}")
        if not isinstance(found, APIService) or found.spec is None or found.spec.service is None:
            return None
        return found

    def remote_services(self) -> list[APIService]:
        """Every APIService an extension server answers."""
        return [
            o
            for o in self.apiservices.objects()
            if isinstance(o, APIService) and o.spec is not None and o.spec.service is not None
        ]

    def priorities(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(group, version) → (groupPriorityMinimum, versionPriority) of every APIService."""
        found = {}
        for o in self.apiservices.objects():
            if isinstance(o, APIService) and o.spec is not None:
                found[(o.spec.group or "", o.spec.version or "")] = (
                    o.spec.group_priority_minimum or 0,
                    o.spec.version_priority or 0,
                )
        return found

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(auto_decompress=False)
        return self._session

    # Where and how to connect.

    async def resolve(self, ref: ServiceReference) -> tuple[str, int]:
        """The (address, port) to connect to for a Service reference; ``Unreachable`` if
        there is none."""
        namespace, name, port = ref.namespace or "", ref.name or "", ref.port or 443
        if self.endpoint_routing:
            try:
                return await conversion.resolve_service(self.stores, namespace, name, port)
            except conversion.ConversionError as error:
                raise Unreachable(str(error)) from None
        try:
            service = await self.stores[("", "v1", "services")].get(namespace, name)
        except errors.ApiError:
            raise Unreachable(f'service "{name}" not found') from None
        assert isinstance(service, Service)
        spec = service.spec
        if spec is not None and spec.type == "ExternalName" and spec.external_name:
            return spec.external_name, port
        if spec is None or not spec.cluster_ip or spec.cluster_ip == "None":
            raise Unreachable(f'service "{name}" has no cluster IP')
        if not any(p.port == port for p in spec.ports or ()):
            raise Unreachable(f'no service port {port} found for service "{name}"')
        return spec.cluster_ip, port

    def _context(self, service: APIService) -> ssl.SSLContext:
        spec = service.spec
        assert spec is not None
        key = (spec.ca_bundle or None, not spec.insecure_skip_tls_verify)
        context = self._contexts.get(key)
        if context is None:
            try:
                context = pki.client_ssl_context(
                    key[0],
                    self.identity.cert_pem if self.identity else None,
                    self.identity.key_pem if self.identity else None,
                    verify=key[1],
                )
            except (ssl.SSLError, ValueError) as error:
                raise Unreachable(f"invalid caBundle: {error}") from None
            self._contexts[key] = context
        return context

    async def _target(self, service: APIService, path_qs: str) -> tuple[str, str, ssl.SSLContext]:
        """The URL to ask, the TLS server name, and the TLS context."""
        spec = service.spec
        assert spec is not None and spec.service is not None
        ref = spec.service
        address, port = await self.resolve(ref)
        host = f"[{address}]" if ":" in address else address
        server_name = f"{ref.name}.{ref.namespace}.svc"
        return f"https://{host}:{port}{path_qs}", server_name, self._context(service)

    # Serving.

    async def proxy(
        self, request: web.Request, service: APIService, user: auth.User
    ) -> web.StreamResponse:
        """Answer ``request`` with the extension server's answer (503 if it is not
        available or cannot be reached)."""
        condition = available_condition(service)
        if condition is None or condition.status != "True":
            raise unreachable("service unavailable")
        try:
            url, server_name, context = await self._target(service, request.path_qs)
        except Unreachable as error:
            raise unreachable(f"error trying to reach service: {error}") from None
        headers = [
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in _DROPPED and not k.lower().startswith(_DROPPED_PREFIXES)
        ]
        headers += identity_headers(user.name, user.groups, user.uid, user.extra)
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._websocket(request, url, server_name, context, headers)
        try:
            upstream = await self._client().request(
                request.method,
                url,
                headers=_multi(headers),
                data=request.content if request.can_read_body else None,
                ssl=context,
                server_hostname=server_name,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, OSError) as error:
            raise unreachable(f"error trying to reach service: {dial_reason(error)}") from None
        async with upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in _DROPPED:
                    response.headers.add(key, value)
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except (aiohttp.ClientError, ConnectionResetError):
                pass  # either side ended the stream (a watch ended): nothing more to send
            return response

    async def _websocket(
        self,
        request: web.Request,
        url: str,
        server_name: str,
        context: ssl.SSLContext,
        headers: list[tuple[str, str]],
    ) -> web.StreamResponse:
        offered = [
            p.strip()
            for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")
            if p.strip()
        ]
        sent = [
            (k, v)
            for k, v in headers
            if k.lower() not in _WEBSOCKET_HEADERS and k.lower() != "sec-websocket-protocol"
        ]
        try:
            backend = await self._client().ws_connect(
                url,
                protocols=offered,
                headers=_multi(sent),
                ssl=context,
                server_hostname=server_name,
            )
        except aiohttp.WSServerHandshakeError as error:
            raise errors.ApiError(error.status, "", error.message) from None
        except (aiohttp.ClientError, OSError) as error:
            raise unreachable(f"error trying to reach service: {dial_reason(error)}") from None
        front = web.WebSocketResponse(protocols=[backend.protocol] if backend.protocol else ())
        await front.prepare(request)

        async def relay(
            source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
            sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
        ) -> None:
            async for message in source:
                if message.type == aiohttp.WSMsgType.BINARY:
                    await sink.send_bytes(message.data)
                elif message.type == aiohttp.WSMsgType.TEXT:
                    await sink.send_str(message.data)
            await sink.close()

        try:
            await asyncio.gather(relay(front, backend), relay(backend, front))
        finally:
            await backend.close()
            await front.close()
        return front

    async def discover(self, service: APIService) -> dict[str, Any]:
        """The extension server's ``/apis/GROUP/VERSION``; ``Unreachable`` (its message starting
        with the URL asked) if it does not answer with one within ``DISCOVERY_TIMEOUT``."""
        spec = service.spec
        assert spec is not None
        path = f"/apis/{spec.group}/{spec.version}"
        url, server_name, context = await self._target(service, path)
        try:
            async with (
                asyncio.timeout(DISCOVERY_TIMEOUT),
                self._client().get(
                    url,
                    headers=_multi([("Accept", "application/json"), *_AGGREGATOR]),
                    ssl=context,
                    server_hostname=server_name,
                ) as answer,
            ):
                body = await answer.read()
                status = answer.status
        except TimeoutError:
            raise Unreachable(f'{url}: Get "{url}": timed out waiting for {url}') from None
        except (aiohttp.ClientError, OSError) as error:
            raise Unreachable(f'{url}: Get "{url}": {dial_reason(error)}') from None
        if not 200 <= status < 300:
            raise Unreachable(f"{url}: bad status from {url}: {status}")
        try:
            document = json.loads(body)
        except ValueError:
            raise Unreachable(f"{url}: the answer is not JSON") from None
        if not isinstance(document, dict):
            raise Unreachable(f"{url}: the answer is not an APIResourceList")
        return document


def _multi(pairs: list[tuple[str, str]]) -> CIMultiDict[str]:
    return CIMultiDict(pairs)
