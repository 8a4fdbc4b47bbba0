"""The whole object read and written under a subresource's name: ``/status`` of any kind,
``pods/ephemeralcontainers``, ``certificatesigningrequests/approval``, and (with no name) the
object itself, which patches of a resource write through.

What a write through a subresource may change is the kind's strategy's business
(``strategy``): a status write keeps the spec, an ephemeral-containers write keeps all but
``spec.ephemeralContainers``.
"""

from __future__ import annotations

from controlplane.apiserver.registry.rest import Change
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api.meta_v1 import Resource


class ObjectREST:
    """Getter, Updater and Patcher of a kind's whole object under ``subresource``."""

    applies = True

    def __init__(self, store: ResourceStore, subresource: str) -> None:
        self.store = store
        self.body = store.info
        self.subresource = subresource

    async def get(self, namespace: str, name: str) -> Resource:
        return await self.store.get(namespace, name)

    async def update(
        self, namespace: str, name: str, obj: Resource, ctx: RequestContext
    ) -> Resource:
        updated, _ = await self.store.update(namespace, name, obj, ctx, self.subresource)
        return updated

    async def patch(
        self, namespace: str, name: str, change: Change, ctx: RequestContext
    ) -> Resource:
        return await self.store.mutate(namespace, name, change, ctx, self.subresource)
