"""An in-memory copy of one resource, kept current by a watch on the store.

Two kinds of reader use it.  Admission, authentication and authorization read namespaces,
roles, service accounts and the like on every request; reading the store each time costs a
storage round trip per request.  And lists and gets that carry a ``resourceVersion`` are
answered from it, as upstream's watch cache answers them: informers list with
``resourceVersion=0`` when they start, and such a list must neither load the store nor fail
when the store cannot answer (an etcd cluster without quorum).  A cache lists once, then
follows the store's watch (re-listing if the watch breaks or its revision expires), so lookups
are dictionary reads.

Which requests the cache answers is upstream's rule (``serves_list``, ``serves_get``): a
``resourceVersion`` of "0" means any freshness; "N" (with ``resourceVersionMatch`` unset or
``NotOlderThan``) means at least as fresh as N, so the reader waits until the cache has caught
up (``fresh``); an unset ``resourceVersion`` (a consistent read), ``Exact``, a ``continue``
token and a paged list other than at "0" go to the store.  A cache that has not finished its
first list sends everything to the store too.

The store's watch carries only the events of this resource, so writes to other resources move
the store's revision without the cache hearing of it.  Two things bring the cache forward
anyway.  Its watch asks for the store's progress every ``PROGRESS_INTERVAL`` seconds of quiet
(the bookmarks upstream's watch cache gets from etcd's progress notifications), so the revision
a ``resourceVersion=0`` list answers with is recent even for a resource nobody writes: an
informer that watches from it is not sent back with 410 Gone by a compaction of revisions it
never needed.  And when a reader waits for a revision the cache has not reached, the cache
reads the store once (a consistent list) and takes that snapshot if it is newer.  A reader that
is still not served after ``wait`` seconds gets upstream's 504 "Too large resource version".

A cache lags the store by the time a watch event takes to arrive.  Admission callers that
must see an object created a moment ago (a pod created right after its namespace) fall back to
reading the store on a miss (``lookup``), as upstream's admission plugins do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.errors import ApiError
from controlplane.apiserver.registry.store import ResourceStore, Selection, parse_resource_version
from controlplane.storage.interface import DELETED
from kube.api.meta_v1 import ListMeta, Resource, ResourceList, StatusCause, StatusDetails

log = logging.getLogger(__name__)

FRESH_WAIT = 3.0
"""Seconds a reader waits for the cache to reach its resourceVersion (upstream's
``blockTimeout``)."""
CATCH_UP_AFTER = 0.1
"""Seconds of waiting on the watch before the cache reads the store to catch up."""
PROGRESS_INTERVAL = 5.0
"""Seconds of quiet after which the cache's watch brings the store's progress (the interval
the lab's etcd sends its progress notifications at)."""
NOT_OLDER_THAN = "NotOlderThan"


def serves_list(
    resource_version: str | None, match: str | None, limit: int, cont: str | None
) -> bool:
    """Whether a list with these options is answered from the cache (else from the store)."""
    if not resource_version or cont or match not in (None, "", NOT_OLDER_THAN):
        return False
    # Upstream ignores ``limit`` at "0" (the cache cannot page); other paged lists need the
    # store's snapshots for their continue tokens.
    return resource_version == "0" or limit == 0


def serves_get(resource_version: str | None) -> bool:
    """Whether a get with this resourceVersion is answered from the cache."""
    return bool(resource_version)


class WatchCache:
    def __init__(self, store: ResourceStore, wait: float = FRESH_WAIT) -> None:
        self.store = store
        self.wait = wait
        self.revision: int | None = None
        """The store revision the cache is current at; None until the first list."""
        self._objects: dict[tuple[str, str], Resource] = {}
        self._moved = asyncio.Event()
        self._catching_up: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def ready(self) -> bool:
        return self.revision is not None

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

    # Serving reads.

    async def list(
        self, namespace: str, selection: Selection, resource_version: str
    ) -> ResourceList[Any]:
        """The objects of a namespace (or all) the selection matches, in key order, at least
        as fresh as ``resource_version``."""
        revision = await self.fresh(resource_version)
        info, store = self.store.info, self.store
        items = [
            obj
            for (ns, _), obj in self._objects.items()
            if (not namespace or not info.namespaced or ns == namespace)
            and (selection.everything or selection.matches(info, obj))
        ]
        items.sort(key=lambda obj: store.key(obj.metadata.namespace or "", obj.metadata.name or ""))
        return ResourceList(
            api_version=info.api_version,
            kind=info.list_kind,
            metadata=ListMeta(resource_version=str(revision)),
            items=items,
        )

    async def read(self, namespace: str, name: str, resource_version: str) -> Resource:
        """One object, at least as fresh as ``resource_version`` (404 if absent)."""
        await self.fresh(resource_version)
        found = self.get(namespace if self.store.info.namespaced else "", name)
        if found is None:
            raise errors.not_found(self.store.info, name)
        return found

    async def fresh(self, resource_version: str) -> int:
        """Wait until the cache is at ``resource_version`` or later ("0": as it is) and
        return its revision; 504 after ``wait`` seconds, as upstream."""
        wanted = parse_resource_version(resource_version)
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadline, pause = now + self.wait, CATCH_UP_AFTER
        catch_up_at = now + pause
        while self.revision is None or self.revision < wanted:
            if now >= deadline:
                raise too_large_resource_version(wanted, self.revision or 0)
            if now >= catch_up_at:
                if self._catching_up is None:
                    self._catching_up = asyncio.create_task(self._catch_up())
                pause *= 2
                catch_up_at = now + pause
            moved = self._moved
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(deadline, catch_up_at) - now):
                    await moved.wait()
            now = loop.time()
        return self.revision

    async def _catch_up(self) -> None:
        """Take a consistent snapshot from the store if it is newer than the cache."""
        try:
            async with asyncio.timeout(self.wait):
                await self._relist()
        except Exception as error:  # the store is down, say: the readers time out
            log.info("catching up %s failed: %s", self.store.info.plural, error)
        finally:
            self._catching_up = None
            self._wake()

    # Following the store.

    async def start(self) -> None:
        """Fill the cache, then follow changes in the background (a list that fails, say
        over a value no configured key decrypts, is retried there, not fatal)."""
        if self._task is not None:
            return
        revision: str | None = None
        try:
            revision = await self._relist()
        except ApiError as error:
            log.error("listing %s failed: %s", self.store.info.plural, error)
        self._task = asyncio.create_task(
            self._follow(revision), name=f"cache {self.store.info.plural}"
        )

    def launch(self) -> None:
        """Start filling and following in the background, if not started yet."""
        if self._task is None:
            self._task = asyncio.create_task(
                self._follow(None), name=f"cache {self.store.info.plural}"
            )

    def stop(self) -> None:
        for task in (self._task, self._catching_up):
            if task is not None:
                task.cancel()

    async def _relist(self) -> str:
        listed = await self.store.list()
        revision = int(listed.metadata.resource_version or 0)
        if self.revision is None or revision > self.revision:
            self._objects = {_key(obj): obj for obj in listed.items}
            self._advance(revision)
        return str(revision)

    def _advance(self, revision: int) -> None:
        self.revision = revision
        self._wake()

    def _wake(self) -> None:
        """Let every reader waiting in ``fresh`` look at the revision again."""
        self._moved.set()
        self._moved = asyncio.Event()

    async def _follow(self, revision: str | None) -> None:
        while True:
            try:
                if revision is None:
                    revision = await self._relist()
                events = self.store.watch(
                    resource_version=revision,
                    send_initial=False,
                    bookmark_interval=PROGRESS_INTERVAL,
                )
                async for event in events:
                    revision = str(event.revision)
                    if event.revision <= (self.revision or 0):
                        continue  # a change a snapshot has already brought
                    if event.obj is None:
                        pass  # the store's progress: nothing changed up to here
                    elif event.type == DELETED:
                        self._objects.pop(_key(event.obj), None)
                    else:
                        self._objects[_key(event.obj)] = event.obj
                    self._advance(event.revision)
                revision = None
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("watching %s failed; listing again", self.store.info.plural)
                revision = None
                await asyncio.sleep(1)


def too_large_resource_version(wanted: int, current: int) -> ApiError:
    """Upstream's answer to a read newer than the cache could reach in time."""
    message = "Too large resource version"
    return ApiError(
        504,
        "Timeout",
        f"Timeout: {message}: {wanted}, current: {current}",
        StatusDetails(
            causes=[StatusCause(reason="ResourceVersionTooLarge", message=message)],
            retry_after_seconds=1,
        ),
        retry_after=1,
    )


def _key(obj: Resource) -> tuple[str, str]:
    return (obj.metadata.namespace or "", obj.metadata.name or "")
