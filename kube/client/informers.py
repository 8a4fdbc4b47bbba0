"""Shared informers: an indexed cache of one kind, kept current by a reflector, with handlers.

client-go's ``tools/cache`` (shared_informer.go, store.go, thread_safe_store.go, index.go) in
asyncio, without the DeltaFIFO: everything runs on one event loop, so the reflector's writes
go straight into the informer, which updates its ``Indexer`` and then calls the handlers, in
that order, so a handler that reads the cache always sees the event it is told about.

The pieces:

* ``Indexer``: objects keyed by ``namespace/name`` (``name`` for cluster-scoped kinds) with
  named secondary indexes.  Every indexer has ``NAMESPACE_INDEX``, ``NODE_NAME_INDEX`` (a
  pod's ``spec.nodeName``; objects without one are not in it) and ``OWNER_UID_INDEX`` (each
  ownerReference's uid); more are added by name with an ``IndexFunc``.  Its read side,
  ``get(key)`` and ``list(namespace)``, is the shape of the scheduler framework's ``Lister``;
  ``select(namespace, selector)`` is a lister's ``List(selector)``, which an indexer given
  ``LABELS_INDEX`` answers without trying every object of the namespace.
  Objects in it are shared with every reader: **never mutate one**, copy it first.
* ``SharedInformer``: one reflector, one indexer, any number of handlers.  ``on_add(obj)``,
  ``on_update(old, new)`` and ``on_delete(obj)`` are plain callables that must not block (a
  controller's handlers compute a key and enqueue it).  ``on_delete`` receives either the last
  state of the object or, when the object vanished while the watch was down and only a re-list
  noticed, a ``DeletedFinalStateUnknown(key, obj)`` holding the last state the cache knew.
  As in client-go, a re-list reports every object still present as an update (often with an
  unchanged resourceVersion), and a periodic resync reports every cached object as
  ``on_update(obj, obj)``; handlers that only care about changes compare resourceVersions.
  A handler added to a running informer first gets an ``on_add`` for every cached object.
  A handler that raises is logged; the others still run and the informer carries on.
* ``SharedInformerFactory``: hands out one informer per (kind, selectors) so that every part
  of a component shares one watch per resource, starts them, waits for their caches and shuts
  them down.

An informer's ``run`` lives until cancelled; ``start``/``stop`` wrap it in a task.  Nothing
here is thread-safe and nothing needs a lock: writes happen between awaits.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from kube.api.keys import object_key
from kube.api.labels import Selector
from kube.api.meta_v1 import Resource
from kube.client.interface import ApiClient
from kube.client.reflector import (
    Backoff,
    ListerWatcher,
    Reflector,
    Store,
    client_lister_watcher,
)
from kube.clock import Clock, RealClock

log = logging.getLogger(__name__)

__all__ = [
    "LABELS_INDEX",
    "NAMESPACE_INDEX",
    "NODE_NAME_INDEX",
    "OWNER_UID_INDEX",
    "Backoff",
    "DeletedFinalStateUnknown",
    "EventHandlerRegistration",
    "IndexFunc",
    "Indexer",
    "ListerWatcher",
    "Reflector",
    "SharedInformer",
    "SharedInformerFactory",
    "Store",
    "client_lister_watcher",
    "index_by_labels",
    "index_by_namespace",
    "index_by_node_name",
    "index_by_owner_uid",
    "wait_for_cache_sync",
]

R = TypeVar("R", bound=Resource)

NAMESPACE_INDEX = "namespace"
NODE_NAME_INDEX = "spec.nodeName"
OWNER_UID_INDEX = "ownerUID"
LABELS_INDEX = "labels"

IndexFunc = Callable[[R], list[str]]
"""The values an object is indexed under (none, one or several)."""


def index_by_namespace(obj: Resource) -> list[str]:
    namespace = obj.metadata.namespace
    return [namespace] if namespace else []


def index_by_labels(obj: Resource) -> list[str]:
    """Each label as ``namespace/key=value`` (a namespace has no ``/``, a key no ``=``)."""
    namespace = obj.metadata.namespace or ""
    return [f"{namespace}/{key}={value}" for key, value in (obj.metadata.labels or {}).items()]


def index_by_node_name(obj: Resource) -> list[str]:
    """A pod's ``spec.nodeName``, for any kind with ``spec.node_name``; nothing if unset."""
    spec = getattr(obj, "spec", None)
    node_name = getattr(spec, "node_name", None)
    return [node_name] if isinstance(node_name, str) and node_name else []


def index_by_owner_uid(obj: Resource) -> list[str]:
    return [ref.uid for ref in obj.metadata.owner_references or () if ref.uid]


@dataclass(frozen=True)
class DeletedFinalStateUnknown(Generic[R]):
    """A deletion the watch missed: ``obj`` is the last state the cache knew, maybe stale."""

    key: str
    obj: R


class Indexer(Generic[R]):
    """Objects by key, with named indexes; see the module docstring.

    The write side (``add``/``update``/``delete``/``replace``) is a reflector ``Store``, so a
    bare ``Reflector(lister_watcher, Indexer())`` is a cache without handlers.
    Reads return the cached objects themselves, which callers must not mutate.
    """

    def __init__(self, indexers: Mapping[str, IndexFunc[R]] | None = None) -> None:
        self._items: dict[str, R] = {}
        self._index_funcs: dict[str, IndexFunc[R]] = {
            NAMESPACE_INDEX: index_by_namespace,
            NODE_NAME_INDEX: index_by_node_name,
            OWNER_UID_INDEX: index_by_owner_uid,
        }
        # index name → indexed value → keys
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._index_funcs}
        if indexers:
            self.add_indexers(indexers)

    # Reads.

    def get(self, key: str) -> R | None:
        """The object under ``namespace/name`` (or ``name``), or None."""
        return self._items.get(key)

    def list(self, namespace: str | None = None) -> builtins.list[R]:
        """Every object, or those in ``namespace``."""
        if namespace is None:
            return builtins.list(self._items.values())
        return self.by_index(NAMESPACE_INDEX, namespace)

    def keys(self) -> builtins.list[str]:
        return builtins.list(self._items)

    def select(self, namespace: str | None, selector: Selector) -> builtins.list[R]:
        """The objects of ``namespace`` (None: of all) whose labels ``selector`` matches: in a
        namespace, only those ``LABELS_INDEX`` files under a pair the selector requires, when
        the indexer has that index and the selector such a requirement."""
        requirement = selector.restricting()
        index = self._indices.get(LABELS_INDEX)
        if namespace is None or requirement is None or index is None:
            candidates = self.list(namespace)
        else:
            keys: set[str] = set()
            for value in requirement.values:
                keys.update(index.get(f"{namespace}/{requirement.key}={value}", ()))
            candidates = [self._items[key] for key in sorted(keys)]
        return [obj for obj in candidates if selector.matches(obj.metadata.labels)]

    def by_index(self, index_name: str, value: str) -> builtins.list[R]:
        """The objects ``index_name`` files under ``value``; KeyError for an unknown index."""
        return [self._items[key] for key in sorted(self.index_keys(index_name, value))]

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        """The keys ``index_name`` files under ``value``."""
        try:
            index = self._indices[index_name]
        except KeyError:
            raise KeyError(f"no index named {index_name!r}") from None
        return sorted(index.get(value, ()))

    def index_values(self, index_name: str) -> builtins.list[str]:
        """Every value ``index_name`` currently has objects under."""
        return sorted(self._indices[index_name])

    @property
    def indexers(self) -> builtins.list[str]:
        return builtins.list(self._index_funcs)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    # Writes.

    def add_indexers(self, indexers: Mapping[str, IndexFunc[R]]) -> None:
        """Add named indexes (built over the current content); re-adding the same one is a no-op.

        ValueError if a name is taken by a different function.
        """
        for name, func in indexers.items():
            existing = self._index_funcs.get(name)
            if existing is func:
                continue
            if existing is not None:
                raise ValueError(f"index {name!r} already exists with a different function")
            self._index_funcs[name] = func
            index: dict[str, set[str]] = {}
            self._indices[name] = index
            for key, obj in self._items.items():
                for value in func(obj):
                    index.setdefault(value, set()).add(key)

    def add(self, obj: R) -> None:
        """Insert or replace ``obj`` under its key."""
        key = object_key(obj)
        old = self._items.get(key)
        self._items[key] = obj
        self._reindex(key, old, obj)

    def update(self, obj: R) -> None:
        self.add(obj)

    def delete(self, obj: R) -> None:
        self.delete_key(object_key(obj))

    def delete_key(self, key: str) -> R | None:
        """Remove and return the object under ``key`` (None if there was none)."""
        old = self._items.pop(key, None)
        if old is not None:
            self._reindex(key, old, None)
        return old

    def replace(self, items: Iterable[R], resource_version: str = "") -> None:
        """Make ``items`` the whole content."""
        self._items = {object_key(obj): obj for obj in items}
        self._indices = {name: {} for name in self._index_funcs}
        for key, obj in self._items.items():
            self._reindex(key, None, obj)

    def _reindex(self, key: str, old: R | None, new: R | None) -> None:
        for name, func in self._index_funcs.items():
            before = set(func(old)) if old is not None else set()
            after = set(func(new)) if new is not None else set()
            if before == after:
                continue
            index = self._indices[name]
            for value in before - after:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in after - before:
                index.setdefault(value, set()).add(key)


OnAdd = Callable[[R], None]
OnUpdate = Callable[[R, R], None]
OnDelete = Callable[[R | DeletedFinalStateUnknown[R]], None]


@dataclass(frozen=True, eq=False)
class EventHandlerRegistration(Generic[R]):
    """What ``add_event_handler`` returns; give it to ``remove_event_handler``."""

    on_add: OnAdd[R] | None
    on_update: OnUpdate[R] | None
    on_delete: OnDelete[R] | None


class SharedInformer(Generic[R]):
    """A cache of one kind shared by many handlers; see the module docstring.

    ``resync_period`` (seconds, 0 for none) re-delivers every cached object as an update.
    ``has_synced`` becomes true once the first list has been stored and delivered.
    """

    def __init__(
        self,
        lister_watcher: ListerWatcher[R],
        *,
        resync_period: float = 0.0,
        indexers: Mapping[str, IndexFunc[R]] | None = None,
        clock: Clock | None = None,
        name: str = "",
        backoff: Backoff | None = None,
    ) -> None:
        self._clock: Clock = clock or RealClock()
        self._indexer = Indexer[R](indexers)
        self._handlers: list[EventHandlerRegistration[R]] = []
        self.resync_period = resync_period
        self.reflector = Reflector(
            lister_watcher, _InformerStore(self), clock=self._clock, name=name, backoff=backoff
        )
        self.name = self.reflector.name
        self._synced = False
        self._sync_waiters: list[asyncio.Future[bool]] = []
        self._running = False
        self._stopped = False
        self._task: asyncio.Task[None] | None = None

    # Reading the cache.

    @property
    def lister(self) -> Indexer[R]:
        """The cache, read-only for callers: ``get(key)``, ``list(namespace)``, ``by_index``."""
        return self._indexer

    @property
    def indexer(self) -> Indexer[R]:
        return self._indexer

    @property
    def has_synced(self) -> bool:
        return self._synced

    @property
    def last_sync_resource_version(self) -> str:
        return self.reflector.last_sync_resource_version

    def add_indexers(self, indexers: Mapping[str, IndexFunc[R]]) -> None:
        self._indexer.add_indexers(indexers)

    # Handlers.

    def add_event_handler(
        self,
        on_add: OnAdd[R] | None = None,
        on_update: OnUpdate[R] | None = None,
        on_delete: OnDelete[R] | None = None,
    ) -> EventHandlerRegistration[R]:
        """Register handlers; if the cache already has objects, ``on_add`` gets each of them now."""
        registration = EventHandlerRegistration(on_add, on_update, on_delete)
        self._handlers.append(registration)
        if on_add is not None:
            for obj in self._indexer.list():
                self._call(on_add, obj)
        return registration

    def add_change_handler(self, handler: OnDelete[R]) -> EventHandlerRegistration[R]:
        """Register ``handler`` for every add, update (with the new object) and delete, for
        callers that only need to know which object changed."""
        return self.add_event_handler(
            on_add=handler, on_update=lambda old, new: handler(new), on_delete=handler
        )

    def remove_event_handler(self, registration: EventHandlerRegistration[R]) -> None:
        with contextlib.suppress(ValueError):
            self._handlers.remove(registration)

    # Running.

    async def run(self) -> None:
        """Keep the cache current until cancelled (then return nothing and leave no task)."""
        if self._running:
            raise RuntimeError(f"informer {self.name} is already running")
        self._running = True
        self._stopped = False
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.reflector.run(), name=f"reflector {self.name}")
                if self.resync_period > 0:
                    group.create_task(self._resync_loop(), name=f"resync {self.name}")
        finally:
            self._running = False
            self._stopped = True
            self._resolve_waiters(self._synced)

    def start(self) -> asyncio.Task[None]:
        """Run in a new task (or return the one already running)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self.run(), name=f"informer {self.name}"
            )
        return self._task

    @property
    def started(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Cancel the task ``start`` made and wait for it to end."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            # Also when the task was cancelled before ``run`` even began.
            self._stopped = True
            self._resolve_waiters(self._synced)

    async def wait_for_sync(self) -> bool:
        """True once synced; False if the informer stops first."""
        if self._synced or self._stopped:
            return self._synced
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._sync_waiters.append(waiter)
        try:
            return await waiter
        finally:
            with contextlib.suppress(ValueError):
                self._sync_waiters.remove(waiter)

    def _resolve_waiters(self, result: bool) -> None:
        for waiter in self._sync_waiters:
            if not waiter.done():
                waiter.set_result(result)

    async def _resync_loop(self) -> None:
        while True:
            await self._clock.sleep(self.resync_period)
            if self._synced:
                for obj in self._indexer.list():
                    self._notify_update(obj, obj)

    # Delivering.

    def _call(self, handler: Callable[..., None], *args: Any) -> None:
        try:
            handler(*args)
        except Exception:
            log.exception("%s: event handler %r failed", self.name, handler)

    def _notify_add(self, obj: R) -> None:
        for registration in builtins.list(self._handlers):
            if registration.on_add is not None:
                self._call(registration.on_add, obj)

    def _notify_update(self, old: R, new: R) -> None:
        for registration in builtins.list(self._handlers):
            if registration.on_update is not None:
                self._call(registration.on_update, old, new)

    def _notify_delete(self, obj: R | DeletedFinalStateUnknown[R]) -> None:
        for registration in builtins.list(self._handlers):
            if registration.on_delete is not None:
                self._call(registration.on_delete, obj)

    def _replace(self, items: Sequence[R]) -> None:
        before = {object_key(obj): obj for obj in self._indexer.list()}
        self._indexer.replace(items)
        for obj in items:
            old = before.pop(object_key(obj), None)
            if old is None:
                self._notify_add(obj)
            else:
                self._notify_update(old, obj)
        for key, gone in before.items():
            self._notify_delete(DeletedFinalStateUnknown(key, gone))
        if not self._synced:
            self._synced = True
            self._resolve_waiters(True)

    def _upsert(self, obj: R) -> None:
        old = self._indexer.get(object_key(obj))
        self._indexer.add(obj)
        if old is None:
            self._notify_add(obj)
        else:
            self._notify_update(old, obj)

    def _delete(self, obj: R) -> None:
        self._indexer.delete(obj)
        self._notify_delete(obj)


class _InformerStore(Generic[R]):
    """The reflector's store for an informer: update the indexer, then tell the handlers."""

    def __init__(self, informer: SharedInformer[R]) -> None:
        self._informer = informer

    def replace(self, items: Sequence[R], resource_version: str) -> None:
        self._informer._replace(items)

    def add(self, obj: R) -> None:
        self._informer._upsert(obj)

    def update(self, obj: R) -> None:
        self._informer._upsert(obj)

    def delete(self, obj: R) -> None:
        self._informer._delete(obj)


async def _within(
    coro: Coroutine[Any, Any, bool],
    timeout: float | None,  # noqa: ASYNC109 - on the injected clock, not asyncio's
    clock: Clock,
) -> bool:
    """The result of ``coro``, or False if ``timeout`` passes on ``clock`` first."""
    if timeout is None:
        return await coro
    loop = asyncio.get_running_loop()
    work = loop.create_task(coro)
    timer = loop.create_task(clock.sleep(timeout))
    try:
        await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        return work.done() and work.result()
    finally:
        for task in (work, timer):
            task.cancel()
        await asyncio.gather(work, timer, return_exceptions=True)


async def wait_for_cache_sync(
    *informers: SharedInformer[Any],
    timeout: float | None = None,  # noqa: ASYNC109 - on the injected clock, not asyncio's
    clock: Clock | None = None,
) -> bool:
    """True once every informer has synced; False if one stops first or ``timeout`` passes."""

    async def all_synced() -> bool:
        for informer in informers:
            if not await informer.wait_for_sync():
                return False
        return True

    return await _within(all_synced(), timeout, clock or RealClock())


def _merge_indexers(informer: SharedInformer[Any], indexers: Mapping[str, Any] | None) -> None:
    if indexers:
        informer.add_indexers(indexers)


class SharedInformerFactory:
    """One informer per (kind, label selector, field selector) for a whole component.

    ``namespace`` (None for all) and ``resync`` (seconds, 0 for none) apply to every informer.
    Informers asked for after ``start`` are started by the next ``start``.
    """

    def __init__(
        self,
        client: ApiClient,
        resync: float = 0.0,
        namespace: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.resync = resync
        self.namespace = namespace
        self.clock: Clock = clock or client.clock
        self._informers: dict[tuple[type[Resource], str | None, str | None], SharedInformer[Any]]
        self._informers = {}
        self._shut_down = False

    def informer_for(
        self,
        cls: type[R],
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
        indexers: Mapping[str, IndexFunc[R]] | None = None,
    ) -> SharedInformer[R]:
        """The informer for ``cls`` with these selectors, made on first request.

        ``indexers`` are added to it (ValueError if a name is taken by another function).
        """
        key = (cls, label_selector or None, field_selector or None)
        informer = self._informers.get(key)
        if informer is None:
            lister_watcher = client_lister_watcher(
                self.client, cls, self.namespace, label_selector, field_selector
            )
            informer = SharedInformer(
                lister_watcher, resync_period=self.resync, indexers=indexers, clock=self.clock
            )
            self._informers[key] = informer
        else:
            _merge_indexers(informer, indexers)
        return cast(SharedInformer[R], informer)

    def lister_for(self, cls: type[R]) -> Indexer[R]:
        """The cache of the selector-less informer for ``cls``."""
        return self.informer_for(cls).lister

    @property
    def informers(self) -> builtins.list[SharedInformer[Any]]:
        return builtins.list(self._informers.values())

    def start(self) -> None:
        """Start every informer not yet running (from inside the event loop)."""
        if self._shut_down:
            raise RuntimeError("the informer factory is shut down")
        for informer in self._informers.values():
            if not informer.started:
                informer.start()

    async def wait_for_cache_sync(
        self,
        timeout: float | None = None,  # noqa: ASYNC109 - on the injected clock, not asyncio's
    ) -> bool:
        """True once every started informer has synced; False on timeout or shutdown."""
        started = [informer for informer in self._informers.values() if informer.started]
        return await wait_for_cache_sync(*started, timeout=timeout, clock=self.clock)

    async def shutdown(self) -> None:
        """Stop every informer and wait for them; the factory cannot be started again."""
        self._shut_down = True
        await asyncio.gather(*(informer.stop() for informer in self._informers.values()))
