"""The storage interface the API server stands on, shaped like etcd v3's.

Keys are ``/registry/<group>/<resource>/<namespace>/<name>`` (core resources without the
group); values are an object's JSON.  Every write gets the next revision of the whole store,
and that revision is the object's resourceVersion, so revisions increase strictly across all
keys and a watch can resume from any of them.

Two backends implement ``Store``: SQLite (``sqlite.py``, embedded, the default) and etcd v3
(``etcd.py``).  One conformance suite (tests/controlplane/storage) runs against both.

Contracts every backend keeps:
- ``create`` fails with ``KeyExists`` if the key is live; ``update`` and ``delete`` with an
  ``expected_revision`` fail with ``Conflict`` unless it is the key's current revision, and with
  ``KeyNotFound`` if the key is not live.  Nothing is written when an operation fails.
- ``list`` reads a consistent snapshot: at the current revision, or at ``revision`` if given
  (``Expired`` if compacted away).  Pages continue from the key after the last one returned,
  at the same revision.
- ``watch`` yields every change under a prefix after ``from_revision``, in revision order,
  exactly once; ``Expired`` if ``from_revision`` is older than the compacted revision.  It
  ends quietly when the store is closed and raises ``Unavailable`` if the backend is lost.
  With ``progress_after`` it also yields a ``Progress`` each time that many seconds pass
  without anything to yield: every change under the prefix at or below its revision has been
  yielded, and the revision is as recent as the backend can vouch for (SQLite: the newest
  write; etcd: its newest progress notification).  So a watch on a quiet prefix moves forward
  with the store, and whoever resumes from its revision is not sent back by a compaction
  (upstream's watch cache and bookmarks stand on etcd's progress notifications the same way).
- A revision, once acknowledged, survives a crash of the process (kill -9).  ``Unavailable``
  from a write means the outcome is unknown: it may or may not have been applied.
- The empty prefix covers every key; ``start_after`` never leads a list outside its prefix.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol


class StorageError(Exception):
    """Base of the errors a store reports."""

    def __init__(self, key: str, message: str = "") -> None:
        self.key = key
        super().__init__(message or f"{type(self).__name__}: {key}")


class KeyNotFound(StorageError):
    """The key has no live value."""


class KeyExists(StorageError):
    """``create`` of a key that already has a live value."""


class Conflict(StorageError):
    """The key's revision is not the one the write expected."""


class Expired(StorageError):
    """The requested revision has been compacted away (HTTP 410 Gone)."""

    def __init__(self, requested: int, compacted: int) -> None:
        self.requested = requested
        self.compacted = compacted
        super().__init__(
            "",
            f"too old resource version: {requested} ({compacted})",
        )


class Unavailable(StorageError):
    """The backend cannot be reached or answered with an error."""


@dataclass(frozen=True, slots=True)
class KeyValue:
    """A key's value at a revision: ``mod_revision`` is the object's resourceVersion.

    ``stale`` marks a value read through a transformation (encryption at rest) with other
    than the one writes use now: an update must rewrite it even when the object is unchanged.
    """

    key: str
    value: bytes
    mod_revision: int
    create_revision: int
    stale: bool = False


ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


@dataclass(frozen=True, slots=True)
class Event:
    """One change: ``kv`` is the new value (for DELETED, the last value, at the delete's
    revision), ``prev`` the value before when the backend knows it."""

    type: str
    kv: KeyValue
    prev: KeyValue | None = None

    @property
    def revision(self) -> int:
        return self.kv.mod_revision


@dataclass(frozen=True, slots=True)
class Progress:
    """A watch's word that it has yielded every change under its prefix up to ``revision``."""

    revision: int


@dataclass(frozen=True, slots=True)
class ListResult:
    """A page of a list: the items, the revision they were read at, and what remains."""

    items: list[KeyValue]
    revision: int
    more: bool = False
    remaining: int = 0


class Store(Protocol):
    """A revisioned key-value store (see the module docstring for the contracts)."""

    async def create(self, key: str, value: bytes) -> KeyValue: ...

    async def get(self, key: str) -> KeyValue: ...

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        start_after: str | None = None,
        revision: int = 0,
    ) -> ListResult: ...

    async def count(self, prefix: str) -> int: ...

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue: ...

    async def delete(self, key: str, expected_revision: int = 0) -> KeyValue: ...

    def watch(
        self, prefix: str, from_revision: int, *, progress_after: float | None = None
    ) -> AsyncGenerator[Event | Progress, None]: ...

    async def current_revision(self) -> int: ...

    async def compact(self, revision: int) -> None: ...

    async def close(self) -> None: ...


Mutation = Callable[[KeyValue], Awaitable[bytes | None] | bytes | None]


async def guaranteed_update(
    store: Store, key: str, mutate: Mutation, *, attempts: int = 16
) -> KeyValue:
    """Read, mutate, compare-and-swap; on a conflict read again and retry.

    ``mutate`` gets the current value and returns the new bytes, or None to leave the key as
    it is (the current value is returned).  It may raise to abort; ``KeyNotFound`` propagates.
    """
    for _ in range(attempts):
        current = await store.get(key)
        outcome = mutate(current)
        value = await outcome if isinstance(outcome, Awaitable) else outcome
        if value is None:
            return current
        try:
            return await store.update(key, value, current.mod_revision)
        except Conflict:
            await asyncio.sleep(0)
    raise Conflict(key, f"gave up after {attempts} conflicting attempts on {key}")


def prefix_end(prefix: str) -> str:
    """The first key after every key that starts with ``prefix`` (etcd's range end)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix else "\x00"
