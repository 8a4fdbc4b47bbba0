"""The interfaces of REST storage, as upstream's ``k8s.io/apiserver/pkg/registry/rest``.

A kind's own verbs are served by its ``store.ResourceStore``; each subresource is a small REST
object that implements only the interfaces of the verbs it serves, and the endpoints dispatch
on those interfaces, never on a subresource's name:

- ``Getter``: get;
- ``Lister``: list, for a kind whose objects are made when read (ComponentStatus);
- ``Creater``: create, the body decoded as the object's ``body`` kind (``pods/binding`` takes
  a Binding, ``serviceaccounts/token`` a TokenRequest);
- ``Updater``: update, the body decoded the same way;
- ``Patcher``: patch; the endpoints turn the patch (JSON, merge, strategic, and server-side
  apply where ``applies``) into a change of the ``body`` representation, which the object
  writes under its ``subresource`` name (what managedFields record);
- ``Connecter``: any verb, answered with a stream of the object's own (the kubelet streams and
  ``nodes/proxy``).

An answer of the resource's own kind is rendered as the client negotiated (a Table, metadata
only...); any other (a Scale, a Status, a TokenRequest) as JSON.  ``Backends`` is what
subresources reach beyond their own kind's store; ``Lookup`` is the narrow view of the server
that code needing other kinds' stores takes instead of the whole server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from aiohttp import web

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import RequestContext, ResourceStore, Selection
from kube.api.meta_v1 import Resource, ResourceList, TypeMeta
from kube.api.scheme import KindInfo

if TYPE_CHECKING:
    from controlplane.apiserver.auth.tokens import TokenIssuer
    from controlplane.apiserver.registry.componentstatus import ComponentProbe
    from controlplane.apiserver.registry.proxy import KubeletConnector

Change = Callable[[Resource], Resource]
"""What a write does to the object it read (a patch applied, replicas set...)."""


class Lookup(Protocol):
    """The stores a server serves, by group, version and plural."""

    def lookup(self, group: str, version: str, plural: str) -> ResourceStore | None: ...


@runtime_checkable
class Getter(Protocol):
    async def get(self, namespace: str, name: str) -> TypeMeta: ...


@runtime_checkable
class Lister(Protocol):
    async def list(self, namespace: str, selection: Selection) -> ResourceList[Any]: ...


@runtime_checkable
class Creater(Protocol):
    body: KindInfo

    async def create(
        self, namespace: str, name: str, obj: Resource, ctx: RequestContext
    ) -> TypeMeta: ...


@runtime_checkable
class Updater(Protocol):
    body: KindInfo

    async def update(
        self, namespace: str, name: str, obj: Resource, ctx: RequestContext
    ) -> TypeMeta: ...


@runtime_checkable
class Patcher(Protocol):
    body: KindInfo
    subresource: str
    applies: bool
    """Whether server-side apply is served (else an apply patch is a 415)."""

    async def patch(
        self, namespace: str, name: str, change: Change, ctx: RequestContext
    ) -> TypeMeta: ...


@runtime_checkable
class Connecter(Protocol):
    async def connect(
        self, request: web.Request, namespace: str, name: str, path: str
    ) -> web.StreamResponse:
        """Answer ``request`` with a stream; ``path`` is what follows the subresource in the
        URL (``nodes/NAME/proxy/<path>``)."""
        ...


@dataclass
class Backends:
    """What subresources reach beyond their own kind's store.  The server fills in the
    kubelet client and the token issuer once it has its PKI; until then the subresources that
    need them answer 503."""

    registry: Lookup
    kubelets: KubeletConnector | None = None
    tokens: TokenIssuer | None = None
    components: Mapping[str, ComponentProbe] = field(default_factory=dict)
    """What ComponentStatus probes, by component name."""

    def kubelet_client(self) -> KubeletConnector:
        if self.kubelets is None:
            raise errors.unavailable("this server has no kubelet client identity")
        return self.kubelets

    def token_issuer(self) -> TokenIssuer:
        if self.tokens is None:
            raise errors.unavailable("this server has no service-account signing key")
        return self.tokens

    def store(self, group: str, version: str, plural: str) -> ResourceStore:
        """A built-in kind's store (always served)."""
        store = self.registry.lookup(group, version, plural)
        assert store is not None, f"{plural}.{group} is always served"
        return store
