"""An in-memory copy of one resource, kept current by a watch on the store.

Admission reads namespaces and PriorityClasses on every create; reading the store each time
costs a storage round trip per request.  A cache lists once, then follows the store's watch
(re-listing if the watch breaks or its revision expires), so lookups are dictionary reads.

A cache lags the store by the time a watch event takes to arrive.  Callers that must see an
object created a moment ago (a pod created right after its namespace) fall back to reading
the store on a miss, as upstream's admission plugins do.
"""

from __future__ import annotations

import asyncio
import logging

from controlplane.apiserver.errors import ApiError
from controlplane.apiserver.registry import ResourceStore
from controlplane.storage.interface import DELETED
from kubelab.api.meta_v1 import Resource

log = logging.getLogger(__name__)


class WatchCache:
    def __init__(self, store: ResourceStore) -> None:
        self.store = store
        self._objects: dict[tuple[str, str], Resource] = {}
        self._task: asyncio.Task[None] | None = None

    def get(self, namespace: str, name: str) -> Resource | None:
        return self._objects.get((namespace, name))

    def objects(self) -> list[Resource]:
        return list(self._objects.values())

    async def lookup(self, namespace: str, name: str) -> Resource | None:
        """The object from the cache, else from the store (``None`` if it does not exist):
        for callers that must see an object created a moment ago."""
        found = self.get(namespace, name)
        if found is not None:
            return found
        try:
            return await self.store.get(namespace, name)
        except ApiError as error:
            if error.code == 404:
                return None
            raise

    async def start(self) -> None:
        """Fill the cache, then follow changes in the background (a list that fails, say
        over a value no configured key decrypts, is retried there, not fatal)."""
        revision: str | None = None
        try:
            revision = await self._relist()
        except ApiError as error:
            log.error("listing %s failed: %s", self.store.info.plural, error)
        self._task = asyncio.create_task(
            self._follow(revision), name=f"cache {self.store.info.plural}"
        )

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _relist(self) -> str:
        listed = await self.store.list()
        self._objects = {_key(obj): obj for obj in listed.items}
        return listed.metadata.resource_version or "0"

    async def _follow(self, revision: str | None) -> None:
        while True:
            try:
                if revision is None:
                    revision = await self._relist()
                async for event in self.store.watch(resource_version=revision, send_initial=False):
                    revision = str(event.revision)
                    if event.obj is None:
                        continue
                    if event.type == DELETED:
                        self._objects.pop(_key(event.obj), None)
                    else:
                        self._objects[_key(event.obj)] = event.obj
                revision = None
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("watching %s failed; listing again", self.store.info.plural)
                revision = None
                await asyncio.sleep(1)


def _key(obj: Resource) -> tuple[str, str]:
    return (obj.metadata.namespace or "", obj.metadata.name or "")
