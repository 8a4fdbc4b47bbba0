"""The shape every controller has, as upstream's (``pkg/controller/replicaset``).

The constructor wires informer handlers that only compute a key and enqueue it, ignoring
resyncs whose resourceVersion did not change and unwrapping tombstones of deletes the watch
missed.  ``run`` waits for the caches, then starts N workers; a worker takes a key, calls
``sync`` (an attribute, so tests can swap it), forgets the key's failures on success and
requeues it with backoff on error, and always marks it done.  A key is never handled by two
workers at once (the workqueue guarantees it), so ``sync`` needs no locking of its own.

``sync`` reads everything from the caches, treats an object missing from them as deleted,
copies before mutating what it writes, recomputes status every time, and raises to be
retried.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from controlplane.controllers.context import ControllerContext
from kube.api.keys import object_key
from kube.api.meta_v1 import Resource
from kube.client.errors import ApiError, ClientError
from kube.client.informers import DeletedFinalStateUnknown
from kube.client.workqueue import RateLimitingQueue

log = logging.getLogger("kubelab.controllers")


def key_of(obj: Resource | DeletedFinalStateUnknown[Any]) -> str:
    """The queue key of an object or of the tombstone of one."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    return object_key(obj)


def unwrap(obj: Any) -> Any:
    """The object, or the last known state inside a tombstone."""
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


class Controller:
    """A named, level-triggered controller: handlers enqueue, workers ``sync`` keys."""

    NAME: ClassVar[str]
    EVENT_SOURCE: ClassVar[str | None] = None
    """The component its events name (``kubectl describe``'s ``From``), upstream's
    ``EventSource`` for this controller; None for one that records none."""

    def __init__(self, ctx: ControllerContext) -> None:
        if self.EVENT_SOURCE is not None:
            ctx = dataclasses.replace(ctx, recorder=ctx.recorder.for_component(self.EVENT_SOURCE))
        self.ctx = ctx
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(clock=ctx.clock)
        self.sync: Callable[[str], Awaitable[None]] = self.sync_key

    async def sync_key(self, key: str) -> None:
        """Make the world match what ``key``'s object declares; raise to be retried."""
        raise NotImplementedError

    # Handlers: compute the key, enqueue it, nothing else.

    def enqueue(self, obj: Any) -> None:
        self.queue.add(key_of(obj))

    def enqueue_update(self, old: Any, new: Any) -> None:
        """Enqueue an update, but not a resync that changed nothing."""
        if old.metadata.resource_version != new.metadata.resource_version:
            self.queue.add(key_of(new))

    def enqueue_after(self, obj: Any, seconds: float) -> None:
        self.queue.add_after(key_of(obj), seconds)

    # Running.

    async def run(self, workers: int) -> None:
        """Wait for the caches, then process keys with ``workers`` workers until cancelled."""
        await self.ctx.informers.wait_for_cache_sync()
        log.info("%s controller: caches synced, %d workers", self.NAME, workers)
        try:
            await asyncio.gather(
                *(self.queue.work(self.sync, self._failed) for _ in range(workers))
            )
        finally:
            self.queue.shutdown()

    def _failed(self, key: str, error: Exception) -> None:
        if isinstance(error, ApiError | ClientError):
            log.info("%s controller: syncing %s: %s; will retry", self.NAME, key, error)
        else:
            log.error(
                "%s controller: syncing %s failed; will retry", self.NAME, key, exc_info=error
            )
