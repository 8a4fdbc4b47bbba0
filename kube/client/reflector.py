"""The reflector: keeps a store in step with the API server by list + watch.

This is client-go's ``tools/cache/reflector.go`` in asyncio.  A reflector owns one
``ListerWatcher`` (one kind, one namespace or all, one pair of selectors) and one ``Store``
it writes into; it never reads the store back.  Its loop:

1. **List** every object and hand the whole result to ``store.replace`` together with the
   list's resourceVersion.  Replacing, not merging, is what lets the store notice objects
   deleted while nobody was watching.  As client-go's, the first list asks for
   ``resourceVersion=0``, which the API server answers from its watch cache (whole, whatever
   the page size: no load on the store, and an answer even when the store has lost its
   quorum); later lists ask for the last version seen, unpaged unless the server paged
   before, so the cache answers them too and the store never goes back in time.  A version
   the server no longer has (410) or cannot reach (504 "Too large resource version") makes
   the reflector list again at once with no version, a consistent read from the store.
   Pages come ``page_size`` at a time (continue tokens keep them one consistent snapshot; an
   expired token falls back to one unpaged list).
2. **Watch** from that resourceVersion with bookmarks allowed.  ADDED / MODIFIED / DELETED go
   to the store; every event, bookmarks included, advances the remembered resourceVersion, so
   a re-watch resumes exactly where the last one stopped.  A bookmark changes nothing else:
   it only tells us that the server has moved past versions that did not concern our
   selection, which keeps the remembered version recent enough not to expire.
3. When a watch **ends normally** (the server's ``timeoutSeconds``, drawn between 5 and 10
   minutes, like client-go, so that a fleet of clients does not reconnect in lockstep), watch
   again from the remembered version at once.
4. When a watch **fails** (a ``ClientError``, a broken stream, any error other than 410),
   wait for the backoff and watch again from the remembered version.  Nothing is lost: the
   server replays everything after it.
5. When the server answers **410 Gone** (the remembered version is older than it keeps),
   wait for the backoff and start again at 1: only a re-list can tell what happened in between.

Backoff is exponential, 0.8 s doubling to 30 s, with up to 100 % jitter on top, taken from
the injected ``Clock``; it falls back to 0.8 s once ``reset_after`` (2 minutes) has passed
without a failure.  A watch that ends within a second without delivering anything counts as a
failure, so a server that keeps closing watches at once is not hammered.

The reflector runs until cancelled; cancelling ``run`` closes the open watch.  Errors other
than cancellation never escape the loop: they are logged and retried, as the reflector has no
one to hand them to and a cache that stops updating is worse than one that keeps trying.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Generic, Protocol, TypeVar

from kube.api.meta_v1 import Resource
from kube.client.errors import ApiError
from kube.client.interface import ApiClient
from kube.client.rest import ListResult, WatchEvent
from kube.clock import Clock, RealClock

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Resource)
R_contra = TypeVar("R_contra", bound=Resource, contravariant=True)

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"

PAGE_SIZE = 500
"""Objects per page of a list, as client-go's pager."""
MIN_WATCH_TIMEOUT = 300.0
"""Seconds; each watch asks the server to end it after between this and twice this."""
SHORT_WATCH = 1.0
"""Seconds; a watch that ends sooner without one event counts as a failure."""


class ListerWatcher(Protocol[R]):
    """List and watch one kind, bound to a namespace (or all) and label/field selectors.

    ``list`` returns one page when ``limit`` is given, otherwise everything; ``watch`` yields
    events after ``resource_version`` and raises ``ApiError`` for an ERROR event (``gone``
    for 410) and ``ClientError`` when the connection fails.
    """

    async def list(
        self,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListResult[R]: ...

    def watch(
        self,
        *,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent[R]]: ...


class _ClientListerWatcher(Generic[R]):
    def __init__(
        self,
        client: ApiClient,
        cls: type[R],
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
    ) -> None:
        self.client = client
        self.cls = cls
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector

    async def list(
        self,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListResult[R]:
        return await self.client.list(
            self.cls,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=limit,
            continue_token=continue_token,
            resource_version=resource_version,
        )

    def watch(
        self,
        *,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent[R]]:
        return self.client.watch(
            self.cls,
            self.namespace,
            resource_version=resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=allow_bookmarks,
        )

    def __repr__(self) -> str:
        selectors = ",".join(filter(None, [self.label_selector, self.field_selector]))
        where = f"/{self.namespace}" if self.namespace else ""
        return f"{self.cls.__name__}{where}" + (f"?{selectors}" if selectors else "")


def client_lister_watcher(
    client: ApiClient,
    cls: type[R],
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> ListerWatcher[R]:
    """A ``ListerWatcher`` of ``cls`` through ``client``, in every namespace if None."""
    return _ClientListerWatcher(client, cls, namespace, label_selector, field_selector)


class Store(Protocol[R_contra]):
    """What a reflector writes into; called only from the reflector's task."""

    def replace(self, items: Sequence[R_contra], resource_version: str) -> None:
        """Make ``items`` the whole content, as of ``resource_version``."""
        ...

    def add(self, obj: R_contra) -> None: ...

    def update(self, obj: R_contra) -> None: ...

    def delete(self, obj: R_contra) -> None: ...


class Backoff:
    """Exponential backoff with jitter on an injected clock, forgetting failures after a while.

    ``next_delay`` is ``initial * factor**n`` capped at ``cap``, then stretched by up to
    ``jitter`` times itself; ``n`` counts failures and drops back to 0 when more than
    ``reset_after`` seconds have passed since the previous one.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._clock = clock
        self._initial = initial
        self._cap = cap
        self._factor = factor
        self._jitter = jitter
        self._reset_after = reset_after
        self._rng = rng
        self._current = initial
        self._last: float | None = None

    def next_delay(self) -> float:
        """The next delay to wait; records one more failure."""
        now = self._clock.monotonic()
        if self._last is not None and now - self._last > self._reset_after:
            self._current = self._initial
        self._last = now
        delay = self._current
        self._current = min(self._current * self._factor, self._cap)
        return delay * (1.0 + self._jitter * self._rng())

    async def wait(self) -> None:
        await self._clock.sleep(self.next_delay())


class _ShortWatch(Exception):
    """The watch ended at once without an event: treated as a failure, with backoff."""


class _UnexpectedEvent(Exception):
    """The watch sent an event type a reflector does not understand."""


class Reflector(Generic[R]):
    """Mirrors what ``lister_watcher`` sees into ``store``; see the module docstring.

    ``run`` is the whole life of the reflector and may be run by one task at a time.
    ``last_sync_resource_version`` is the version the store is known to be current at.
    """

    def __init__(
        self,
        lister_watcher: ListerWatcher[R],
        store: Store[R],
        *,
        clock: Clock | None = None,
        name: str = "",
        page_size: int = PAGE_SIZE,
        min_watch_timeout: float = MIN_WATCH_TIMEOUT,
        backoff: Backoff | None = None,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._lw = lister_watcher
        self._store = store
        self._clock: Clock = clock or RealClock()
        self.name = name or repr(lister_watcher)
        self._page_size = page_size
        self._min_watch_timeout = min_watch_timeout
        self._backoff = backoff or Backoff(self._clock, rng=rng)
        self._rng = rng
        self._running = False
        self.last_sync_resource_version = ""
        self._version_unavailable = False
        self._paged = False

    async def run(self) -> None:
        """List and watch until cancelled."""
        if self._running:
            raise RuntimeError(f"reflector {self.name} is already running")
        self._running = True
        try:
            while True:
                try:
                    await self._list()
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    log.warning("%s: list failed: %s", self.name, error)
                    await self._backoff.wait()
                    continue
                await self._watch_until_gone()
                await self._backoff.wait()
        finally:
            self._running = False

    def _relist_version(self) -> str:
        """client-go's ``relistResourceVersion``: "0" first, then the last version seen,
        and none (a consistent read) once the server could not serve that one."""
        if self._version_unavailable:
            return ""
        return self.last_sync_resource_version or "0"

    async def _list(self) -> None:
        try:
            items, version = await self._list_at(self._relist_version())
        except ApiError as error:
            if not (error.gone or _too_large_resource_version(error)):
                raise
            log.info("%s: listing at the last version failed (%s)", self.name, error)
            self._version_unavailable = True
            items, version = await self._list_at("")
        self._version_unavailable = False
        self._store.replace(items, version)
        self.last_sync_resource_version = version

    async def _list_at(self, version: str) -> tuple[list[R], str]:
        # Paging a list at a version other than "0" would send it to the store: leave it
        # unpaged unless the server has shown it pages (no watch cache behind it).
        paged = version in ("", "0") or self._paged
        limit = (self._page_size or None) if paged else None
        first = await self._lw.list(limit=limit, resource_version=version or None)
        items, token = list(first.items), first.continue_token
        self._paged = self._paged or bool(token)
        while token:
            try:
                page = await self._lw.list(limit=self._page_size, continue_token=token)
            except ApiError as error:
                if not error.gone:
                    raise
                # The continue token expired: fall back to one unpaged list.
                log.info("%s: continue token expired, listing without pages", self.name)
                first = await self._lw.list(resource_version=version or None)
                items, token = list(first.items), None
                break
            items.extend(page.items)
            token = page.continue_token
        return items, first.resource_version

    async def _watch_until_gone(self) -> None:
        """Watch, again and again, until the server says the version is gone."""
        while True:
            try:
                await self._watch()
            except asyncio.CancelledError:
                raise
            except ApiError as error:
                if error.gone:
                    log.info("%s: watch expired (%s), re-listing", self.name, error)
                    return
                log.warning("%s: watch failed: %s", self.name, error)
                await self._backoff.wait()
            except Exception as error:
                log.warning("%s: watch failed: %s", self.name, error)
                await self._backoff.wait()

    async def _watch(self) -> None:
        """One watch from the remembered version, until the server ends it."""
        timeout = int(self._min_watch_timeout * (1.0 + self._rng()))
        stream = self._lw.watch(
            resource_version=self.last_sync_resource_version,
            timeout_seconds=timeout,
            allow_bookmarks=True,
        )
        started = self._clock.monotonic()
        events = 0
        try:
            async for event in stream:
                events += 1
                self._handle(event)
        finally:
            if isinstance(stream, AsyncGenerator):
                await stream.aclose()
        if not events and self._clock.monotonic() - started < SHORT_WATCH:
            raise _ShortWatch("watch ended at once without an event")

    def _handle(self, event: WatchEvent[R]) -> None:
        obj = event.object
        if event.type == ADDED:
            self._store.add(obj)
        elif event.type == MODIFIED:
            self._store.update(obj)
        elif event.type == DELETED:
            self._store.delete(obj)
        elif event.type != BOOKMARK:
            raise _UnexpectedEvent(f"unexpected watch event type {event.type!r}")
        version = obj.metadata.resource_version
        if version:
            self.last_sync_resource_version = version


def _too_large_resource_version(error: ApiError) -> bool:
    """The server's cache could not reach the version in time (client-go's
    ``isTooLargeResourceVersionError``)."""
    details = error.status.details
    causes = (details.causes or []) if details is not None else []
    return error.code == 504 and any(c.reason == "ResourceVersionTooLarge" for c in causes)
