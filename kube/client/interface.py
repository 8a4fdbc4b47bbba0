"""What the components need of an API client, as a Protocol (client-go's ``Interface``).

The controllers, the scheduler, the kubelet and the informers are typed against
:class:`ApiClient`, not against :class:`kube.client.rest.Client`, so that a test can hand
them an in-memory API (``tests/fakeapi.py``) that mypy checks method for method, instead of a
look-alike cast to ``Client``.  ``Client`` implements it; nothing here does I/O.

The Protocol holds only what a component calls: typed reads and writes of one kind, the raw
``request`` for paths no kind names (discovery, collections of custom resources), the
configuration it was made from (the cluster's CA, the server) and its clock.  Dynamic access
to custom resources by name and the connection's lifetime (``close``) stay with ``Client``,
which only the code that creates a client uses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol, TypeVar

from kube.api.meta_v1 import Preconditions, Resource
from kube.client.kubeconfig import ClientConfig
from kube.client.rest import ListResult, WatchEvent
from kube.clock import Clock

R = TypeVar("R", bound=Resource)


class ApiClient(Protocol):
    """The API server as a component sees it; failures raise ``ApiError`` (the server's
    Status) or ``ClientError`` (no answer)."""

    @property
    def clock(self) -> Clock:
        """The clock retries wait on, and informers default to."""
        ...

    @property
    def config(self) -> ClientConfig:
        """Where the server is and how it is trusted (read-only)."""
        ...

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> bytes:
        """The body of the 2xx answer to ``method path``."""
        ...

    async def get(self, cls: type[R], name: str, namespace: str | None = None) -> R: ...

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
        ...

    def watch(
        self,
        cls: type[R],
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent[R]]:
        """Events from ``resource_version`` on; an ERROR event raises its ApiError."""
        ...

    async def create(self, obj: R, *, field_manager: str | None = None) -> R: ...

    async def update(self, obj: R, *, subresource: str = "") -> R:
        """Replace the object (its resourceVersion must still be current)."""
        ...

    async def update_status(self, obj: R) -> R: ...

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
        ...

    async def delete(
        self,
        cls: type[Resource],
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        preconditions: Preconditions | None = None,
    ) -> None: ...

    async def create_subresource(
        self, cls: type[Resource], name: str, namespace: str | None, subresource: str, body: Any
    ) -> dict[str, Any]:
        """POST ``body`` to a subresource (binding, eviction, token); the answer's JSON."""
        ...

    def reload_client_certificate(self, cert_pem: bytes, key_pem: bytes) -> None:
        """Present this client certificate from the next connection on (a rotated one)."""
        ...


__all__ = ["ApiClient"]
