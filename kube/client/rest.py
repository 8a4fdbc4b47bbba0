"""The async REST client every component talks to the API server with.

Typed access takes the kind's class (``await client.get(Pod, "web-0", "default")``) and
returns decoded structs; dynamic access (``client.resource("widgets.example.com")``) works on
plain dicts for kinds the scheme does not know, such as custom resources, found through
discovery.  Both go through one request path that owns the policy:

- client-side flow control: a token bucket of ``qps`` with ``burst`` (per component, as
  client-go's ``--kube-api-qps``), waited on before each request (watches excepted, as
  client-go does);
- retries: a 429 or 5xx answer is retried after its ``Retry-After`` (or an exponential
  backoff), a connection that was refused is retried for every verb, any other connection
  failure only for reads, since a write may have landed;
- a ``User-Agent`` per component, so the API server's logs and metrics say who asked;
- a bearer token from a file (in-cluster, :mod:`kube.client.incluster`) is asked for on
  every request, so a token the kubelet rotated is used from the next request on;
- at most ``connections`` connections (each open watch holds one); requests beyond that wait
  for a free one rather than open another, since every new connection costs the server a
  TLS handshake, which is dearer than the request it carries.

Failures surface as ``ApiError`` (the server's Status) or ``ClientError`` (no answer).  A watch
is an async iterator of ``(type, object)`` pairs; an ERROR event raises ``ApiError`` so that
410 Expired reaches the informer as an exception it can act on.
"""

from __future__ import annotations

import datetime
import email.utils
import random
import ssl
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import quote

import aiohttp
import msgspec
from aiohttp.connector import NEEDS_CLEANUP_CLOSED

from kube import __version__
from kube.api import codec
from kube.api.meta_v1 import (
    DeleteOptions,
    Preconditions,
    Resource,
    ResourceList,
    Status,
)
from kube.api.scheme import SCHEME, KindInfo
from kube.client import incluster, kubeconfig
from kube.client.errors import ApiError, ClientError
from kube.client.flowcontrol import TokenBucket
from kube.clock import Clock, RealClock
from kube.pki import client_ssl_context, load_certificate

R = TypeVar("R", bound=Resource)
T = TypeVar("T")

PATCH_CONTENT_TYPES = {
    "json": "application/json-patch+json",
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class ListResult(Generic[T]):
    """One page of a list: the items and where the list stands."""

    items: list[T]
    resource_version: str
    continue_token: str | None = None


@dataclass(frozen=True)
class WatchEvent(Generic[T]):
    """ADDED, MODIFIED, DELETED or BOOKMARK, and the object (for a bookmark, its metadata)."""

    type: str
    object: T


class _RawEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


@dataclass(frozen=True)
class ResourcePath:
    """Where a resource lives: ``/api/v1`` or ``/apis/G/V``, its plural, and its scope."""

    group: str
    version: str
    plural: str
    namespaced: bool

    @classmethod
    def of(cls, info: KindInfo) -> ResourcePath:
        return cls(info.group, info.version, info.plural, info.namespaced)

    def url(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        if sub:
            base += f"/{sub}"
        return base


def _delete_options(
    grace_period_seconds: int | None,
    propagation_policy: str | None,
    preconditions: Preconditions | None,
) -> bytes | None:
    if grace_period_seconds is None and propagation_policy is None and preconditions is None:
        return None
    options = DeleteOptions(
        grace_period_seconds=grace_period_seconds,
        propagation_policy=propagation_policy,
        preconditions=preconditions,
    )
    return codec.encode_json(options)


def _selectors(
    label_selector: str | None, field_selector: str | None, params: dict[str, str]
) -> dict[str, str]:
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


class TokenSource(Protocol):
    """Where a client's bearer token comes from when it changes over time (a token file, a
    service-account token refreshed before it expires)."""

    def current(self) -> str: ...


class Client:
    """A connection to one API server, shared by everything in a component.

    Create it inside the running event loop and ``close()`` it (or use ``async with``).
    """

    def __init__(
        self,
        config: kubeconfig.ClientConfig,
        *,
        user_agent: str = "kubelab",
        qps: float = 50.0,
        burst: int = 100,
        max_retries: int = 5,
        connections: int = 100,
        clock: Clock | None = None,
        token_source: TokenSource | None = None,
    ) -> None:
        self.config = config
        self.user_agent = f"{user_agent}/{__version__}"
        self.max_retries = max_retries
        self.clock = clock or RealClock()
        self._limiter = TokenBucket(qps, burst, self.clock) if qps > 0 else None
        self._ssl = client_ssl_context(
            config.ca_pem,
            config.cert_pem,
            config.key_pem,
            verify=not config.insecure_skip_tls_verify,
        )
        headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        self._token_source: TokenSource | None = token_source or (
            incluster.TokenFile(config.token_file) if config.token_file else None
        )
        if config.token and self._token_source is None:
            headers["Authorization"] = f"Bearer {config.token}"
        self._session = aiohttp.ClientSession(
            base_url=config.server.rstrip("/"),
            headers=headers,
            # CPython before 3.12.8 leaks a TLS connection closed while its shutdown is still
            # in flight (python/cpython#118960), as a watch's is when it is cancelled; aiohttp
            # aborts those when its connector closes if asked to.
            connector=aiohttp.TCPConnector(
                ssl=self._ssl, limit=connections, enable_cleanup_closed=NEEDS_CLEANUP_CLOSED
            ),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )
        self._resources: dict[str, ResourcePath] = {}

    @classmethod
    def from_kubeconfig(cls, path: Path | str, **options: Any) -> Client:
        return cls(kubeconfig.load(Path(path)), **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> Client:
        """A client for a component running in a pod (see :mod:`kube.client.incluster`)."""
        return cls(incluster.load(), **options)

    def _auth_headers(self) -> dict[str, str]:
        if self._token_source is None:
            return {}
        return {"Authorization": f"Bearer {self._token_source.current()}"}

    def reload_client_certificate(self, cert_pem: bytes, key_pem: bytes) -> None:
        """Present this certificate from now on (a rotated one); open connections keep the
        one they were made with until they close."""
        # A pair that does not load (a key not matching its certificate) must fail here, on a
        # scratch context, not half-replace what the live one presents.
        load_certificate(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), cert_pem, key_pem)
        load_certificate(self._ssl, cert_pem, key_pem)

    async def close(self) -> None:
        await self._session.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # The request path: flow control, retries, errors.

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> bytes:
        """Send a request and return the body of its 2xx answer; raise ApiError/ClientError."""
        attempt = 0
        while True:
            if self._limiter is not None:
                await self._limiter.wait()
            try:
                async with self._session.request(
                    method,
                    path,
                    params=params,
                    data=body,
                    headers=(
                        {**self._auth_headers(), "Content-Type": content_type}
                        if body is not None
                        else self._auth_headers()
                    ),
                ) as response:
                    data = await response.read()
                    if response.status < 400:
                        return data
                    error = ApiError(_status_of(response.status, data))
                    retry_after = response.headers.get("Retry-After")
            except aiohttp.ClientConnectorError as cause:
                if attempt >= self.max_retries:
                    raise ClientError(f"{method} {path}: {cause}") from cause
                error, retry_after = None, None
            except (aiohttp.ClientError, TimeoutError) as cause:
                if method not in SAFE_METHODS or attempt >= self.max_retries:
                    raise ClientError(f"{method} {path}: {cause}") from cause
                error, retry_after = None, None
            if error is not None and (not error.retryable or attempt >= self.max_retries):
                raise error
            await self.clock.sleep(_retry_delay(attempt, retry_after))
            attempt += 1

    async def server_date(self) -> datetime.datetime:
        """The API server's clock, from the ``Date`` header of its answer to ``GET /version``
        (to the second: what a node compares its own clock with)."""
        try:
            async with self._session.get("/version", headers=self._auth_headers()) as response:
                header = response.headers.get("Date")
        except (aiohttp.ClientError, TimeoutError) as cause:
            raise ClientError(f"GET /version: {cause}") from cause
        if header is None:
            raise ClientError("GET /version: the answer has no Date header")
        try:
            return email.utils.parsedate_to_datetime(header)
        except ValueError as cause:
            raise ClientError(f"GET /version: a Date header that is no date: {header!r}") from cause

    async def _stream(self, path: str, params: Mapping[str, str]) -> AsyncGenerator[bytes, None]:
        """The lines of a streamed answer (a watch), as they arrive.

        A stream left before its end (the caller stopped reading, or was cancelled) cannot
        go back to the connection pool, and closing TLS politely takes more turns of the
        event loop than a caller that is shutting down may give; its connection is aborted
        on the spot instead.
        """
        try:
            async with self._session.get(
                path, params=params, headers=self._auth_headers()
            ) as response:
                if response.status >= 400:
                    raise ApiError(_status_of(response.status, await response.read()))
                finished = False
                try:
                    pending = b""
                    async for chunk in response.content.iter_any():
                        pending += chunk
                        *lines, pending = pending.split(b"\n")
                        for line in lines:
                            if line.strip():
                                yield line
                    finished = True
                finally:
                    connection = response.connection
                    if not finished and connection is not None and connection.transport:
                        connection.transport.abort()
        except (aiohttp.ClientError, TimeoutError) as cause:
            raise ClientError(f"watch {path}: {cause}") from cause

    # Typed access.

    async def get(self, cls: type[R], name: str, namespace: str | None = None) -> R:
        data = await self.request("GET", _path(cls).url(namespace, name))
        return _decode(data, cls)

    async def list(
        self,
        cls: type[R],
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListResult[R]:
        """One page (``limit``) or the whole list, across namespaces when ``namespace`` is None."""
        params = _selectors(label_selector, field_selector, {})
        if limit:
            params["limit"] = str(limit)
        if continue_token:
            params["continue"] = continue_token
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        data = await self.request("GET", _path(cls).url(namespace), params=params)
        listed: ResourceList[R] = _decode(data, ResourceList[cls])  # type: ignore[valid-type]
        for item in listed.items:
            item.typed()
        return ListResult(
            listed.items, listed.metadata.resource_version or "", listed.metadata.continue_ or None
        )

    async def list_all(
        self, cls: type[R], namespace: str | None = None, *, page_size: int = 500, **selectors: str
    ) -> ListResult[R]:
        """Every item, fetched in pages of ``page_size``; the resourceVersion of the first page."""
        first = await self.list(cls, namespace, limit=page_size, **selectors)
        items, token = list(first.items), first.continue_token
        while token:
            page = await self.list(
                cls, namespace, limit=page_size, continue_token=token, **selectors
            )
            items.extend(page.items)
            token = page.continue_token
        return ListResult(items, first.resource_version)

    async def watch(
        self,
        cls: type[R],
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncGenerator[WatchEvent[R], None]:
        """Events from ``resource_version`` on; an ERROR event raises its ApiError."""
        params = _selectors(label_selector, field_selector, {"watch": "true"})
        if resource_version is not None:
            params["resourceVersion"] = resource_version
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(timeout_seconds)
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        async for line in self._stream(_path(cls).url(namespace), params):
            raw = msgspec.json.decode(line, type=_RawEvent)
            if raw.type == "ERROR":
                raise ApiError(_decode(raw.object, Status))
            yield WatchEvent(raw.type, _decode(raw.object, cls))

    async def create(self, obj: R, *, field_manager: str | None = None) -> R:
        cls = type(obj)
        params = {"fieldManager": field_manager} if field_manager else None
        data = await self.request(
            "POST",
            _path(cls).url(obj.metadata.namespace),
            params=params,
            body=codec.encode_json(obj.typed()),
        )
        return _decode(data, cls)

    async def update(self, obj: R, *, subresource: str = "") -> R:
        """Replace the object (optimistically: its resourceVersion must still be current)."""
        cls = type(obj)
        data = await self.request(
            "PUT",
            _path(cls).url(obj.metadata.namespace, obj.metadata.name, subresource),
            body=codec.encode_json(obj.typed()),
        )
        return _decode(data, cls)

    async def update_status(self, obj: R) -> R:
        return await self.update(obj, subresource="status")

    async def patch(
        self,
        cls: type[R],
        name: str,
        namespace: str | None,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str = "",
        field_manager: str | None = None,
        force: bool = False,
    ) -> R:
        """Patch with ``json``, ``merge``, ``strategic`` or ``apply`` semantics."""
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if force:
            params["force"] = "true"
        body = patch if isinstance(patch, bytes) else codec.encode_json(patch)
        data = await self.request(
            "PATCH",
            _path(cls).url(namespace, name, subresource),
            params=params,
            body=body,
            content_type=PATCH_CONTENT_TYPES[patch_type],
        )
        return _decode(data, cls)

    async def apply(
        self, obj: R, *, field_manager: str, force: bool = False, subresource: str = ""
    ) -> R:
        """Server-side apply of ``obj`` (the fields it sets are the ones this manager owns)."""
        return await self.patch(
            type(obj),
            obj.metadata.name or "",
            obj.metadata.namespace,
            obj.typed(),
            patch_type="apply",
            subresource=subresource,
            field_manager=field_manager,
            force=force,
        )

    async def delete(
        self,
        cls: type[Resource],
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        preconditions: Preconditions | None = None,
    ) -> None:
        await self.request(
            "DELETE",
            _path(cls).url(namespace, name),
            body=_delete_options(grace_period_seconds, propagation_policy, preconditions),
        )

    async def create_subresource(
        self, cls: type[Resource], name: str, namespace: str | None, subresource: str, body: Any
    ) -> dict[str, Any]:
        """POST ``body`` to a subresource such as ``pods/binding``, ``pods/eviction`` or
        ``serviceaccounts/token``; the answer's JSON."""
        payload = body.typed() if isinstance(body, Resource) else body
        return _json(
            await self.request(
                "POST",
                _path(cls).url(namespace, name, subresource),
                body=codec.encode_json(payload),
            )
        )

    # Dynamic access.

    async def resource(self, name: str) -> DynamicResource:
        """The resource called ``name`` (``pods``, ``deploy``, ``widgets.example.com``)."""
        for info in SCHEME.served():
            names = {info.plural, info.singular, info.kind.lower(), *info.short_names}
            group_names = {f"{n}.{info.group}" for n in names} if info.group else set()
            if name in names or name in group_names:
                return DynamicResource(self, ResourcePath.of(info))
        if name not in self._resources:
            await self._discover()
        try:
            return DynamicResource(self, self._resources[name])
        except KeyError:
            raise ApiError(
                Status(
                    code=404,
                    reason="NotFound",
                    message=f'the server doesn\'t have a resource type "{name}"',
                )
            ) from None

    async def _discover(self) -> None:
        groups = msgspec.json.decode(await self.request("GET", "/apis"))
        for group in groups.get("groups", ()):
            version = group["preferredVersion"]["version"]
            listing = msgspec.json.decode(
                await self.request("GET", f"/apis/{group['name']}/{version}")
            )
            for entry in listing.get("resources", ()):
                if "/" in entry["name"]:
                    continue
                path = ResourcePath(group["name"], version, entry["name"], entry["namespaced"])
                for alias in (
                    entry["name"],
                    entry.get("singularName"),
                    *entry.get("shortNames", ()),
                ):
                    if alias:
                        self._resources.setdefault(alias, path)
                        self._resources.setdefault(f"{alias}.{group['name']}", path)


class DynamicResource:
    """A resource handled as plain JSON objects (dicts)."""

    def __init__(self, client: Client, path: ResourcePath) -> None:
        self.client = client
        self.path = path

    async def get(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        return _json(await self.client.request("GET", self.path.url(namespace, name)))

    async def list(self, namespace: str | None = None, **selectors: str) -> dict[str, Any]:
        params = _selectors(selectors.get("label_selector"), selectors.get("field_selector"), {})
        return _json(await self.client.request("GET", self.path.url(namespace), params=params))

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        namespace = obj.get("metadata", {}).get("namespace")
        data = await self.client.request(
            "POST", self.path.url(namespace), body=codec.encode_json(obj)
        )
        return _json(data)

    async def update(self, obj: Mapping[str, Any], subresource: str = "") -> dict[str, Any]:
        metadata = obj.get("metadata", {})
        url = self.path.url(metadata.get("namespace"), metadata.get("name"), subresource)
        return _json(await self.client.request("PUT", url, body=codec.encode_json(obj)))

    async def patch(
        self, name: str, namespace: str | None, patch: Any, patch_type: str = "merge"
    ) -> dict[str, Any]:
        data = await self.client.request(
            "PATCH",
            self.path.url(namespace, name),
            body=codec.encode_json(patch),
            content_type=PATCH_CONTENT_TYPES[patch_type],
        )
        return _json(data)

    async def delete(self, name: str, namespace: str | None = None) -> None:
        await self.client.request("DELETE", self.path.url(namespace, name))


def _path(cls: type[Resource]) -> ResourcePath:
    return ResourcePath.of(cls.kind_info)


def _decode(data: bytes, cls: type[T]) -> T:
    try:
        decoded: T = codec.decode_json(data, cls).obj
    except codec.DecodeError as error:
        raise ClientError(f"undecodable answer for {cls.__name__}: {error}") from None
    return decoded


def _json(data: bytes) -> dict[str, Any]:
    decoded: dict[str, Any] = msgspec.json.decode(data)
    return decoded


def _status_of(code: int, data: bytes) -> Status:
    try:
        status = msgspec.json.decode(data, type=Status)
    except (msgspec.ValidationError, msgspec.DecodeError):
        status = Status(message=data.decode(errors="replace")[:200])
    if status.code is None:
        status.code = code
    return status


def _retry_delay(attempt: int, retry_after: str | None) -> float:
    """Seconds before the next attempt: the server's Retry-After, else jittered backoff."""
    if retry_after is not None and retry_after.isdigit():
        return float(retry_after)
    return min(0.1 * 2.0**attempt, 5.0) * (1 + random.random() / 2)


__all__ = [
    "Client",
    "DynamicResource",
    "ListResult",
    "ResourcePath",
    "WatchEvent",
]
