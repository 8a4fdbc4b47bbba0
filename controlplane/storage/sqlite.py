"""The embedded store: a revision log in SQLite, like k3s's kine.

Every write appends one row to ``log`` carrying the next global revision: the key, its value,
the revision it was created at and the one it replaces; a delete appends a tombstone holding the
last value.  ``live`` mirrors the newest non-deleted row of each key, so reads at the current
revision are one indexed range scan, while reads at an older revision and watch catch-up come
from ``log``.  Both tables change in the same transaction, so they never disagree.

One thread owns the writing connection (SQLite has one writer anyway) and a second serves
reads, so a long list does not hold up writes; WAL mode lets them run at once.  With
``synchronous=FULL`` a revision acknowledged to a caller is on disk before the caller hears of
it, so a kill -9 at any moment loses nothing acknowledged and revisions never go backwards
(the compacted revision is kept in ``meta`` for the case where compaction removed the newest
row).

Watches are served in-process: a watcher registers for live events first, then replays the log
after its start revision, then continues with live events it has not yet seen.  Compaction keeps
a window (``compaction_window``) and leaves the newest row of every key, so a historical list at
any retained revision stays exact; a watch from before the window gets ``Expired``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import sqlite3
import threading
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from controlplane.storage.interface import (
    ADDED,
    DELETED,
    MODIFIED,
    Conflict,
    Event,
    Expired,
    KeyExists,
    KeyNotFound,
    KeyValue,
    ListResult,
    Progress,
    prefix_end,
)

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS log (
    revision INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    create_revision INTEGER NOT NULL,
    prev_revision INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    value BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS log_key_revision ON log (key, revision);
CREATE TABLE IF NOT EXISTS live (
    key TEXT PRIMARY KEY,
    revision INTEGER NOT NULL,
    create_revision INTEGER NOT NULL,
    value BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""

WATCH_QUEUE_LIMIT = 100_000
"""Events a watcher may fall behind by before it is ended (its client then re-lists)."""


def _range_end(prefix: str) -> str:
    """The end of the key range of ``prefix``; the empty prefix covers every key."""
    return prefix_end(prefix) if prefix else "\U0010ffff"


def _connect(path: str, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA busy_timeout=10000")
    return conn


@dataclass(eq=False)
class _Watcher:
    prefix: str
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)


class SQLiteStore:
    """``Store`` over one SQLite file (see the module docstring)."""

    def __init__(self, path: str | Path, *, synchronous: str = "FULL") -> None:
        self._path = str(path)
        self._synchronous = synchronous
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer")
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="sqlite-reader")
        self._local = threading.local()
        self._watchers: set[_Watcher] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._revision = 0  # the writer thread's counter, ahead of commits inside a write
        self._committed = 0
        self._published = 0  # the newest revision handed to the watchers, on the loop's thread
        self._compacted = 0
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path, *, synchronous: str = "FULL") -> SQLiteStore:
        store = cls(path, synchronous=synchronous)
        store._loop = asyncio.get_running_loop()
        await store._write(store._init_locked)
        store._published = store._committed
        return store

    # Threads.  Methods ending in _locked run on the writer thread, _read_ on the reader.

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self._path, self._synchronous)
            self._local.conn = conn
        return conn

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, lambda: fn(self._conn()))

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._reader, lambda: fn(self._conn()))

    def _init_locked(self, conn: sqlite3.Connection) -> None:
        conn.executescript(_SCHEMA)
        top = conn.execute("SELECT COALESCE(MAX(revision), 0) FROM log").fetchone()[0]
        row = conn.execute("SELECT value FROM meta WHERE name = 'compacted'").fetchone()
        self._compacted = row[0] if row else 0
        self._revision = self._committed = max(top, self._compacted)

    # Writes.

    def _append_locked(
        self,
        conn: sqlite3.Connection,
        key: str,
        value: bytes,
        deleted: bool,
        current: tuple[int, int, bytes] | None,
    ) -> Event:
        revision = self._revision + 1
        create_revision = current[1] if current else revision
        prev = KeyValue(key, current[2], current[0], current[1]) if current is not None else None
        conn.execute(
            "INSERT INTO log (revision, key, create_revision, prev_revision, deleted, value) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (revision, key, create_revision, current[0] if current else 0, int(deleted), value),
        )
        if deleted:
            conn.execute("DELETE FROM live WHERE key = ?", (key,))
        else:
            conn.execute(
                "INSERT OR REPLACE INTO live (key, revision, create_revision, value) "
                "VALUES (?, ?, ?, ?)",
                (key, revision, create_revision, value),
            )
        self._revision = revision
        kind = DELETED if deleted else (MODIFIED if current else ADDED)
        return Event(kind, KeyValue(key, value, revision, create_revision), prev)

    def _transaction(
        self, body: Callable[[sqlite3.Connection], Event]
    ) -> Callable[[sqlite3.Connection], Event]:
        def run(conn: sqlite3.Connection) -> Event:
            conn.execute("BEGIN IMMEDIATE")
            saved = self._revision
            try:
                event = body(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                self._revision = saved
                raise
            self._committed = self._revision
            self._publish_threadsafe(event)
            return event

        return run

    @staticmethod
    def _current_locked(conn: sqlite3.Connection, key: str) -> tuple[int, int, bytes] | None:
        row = conn.execute(
            "SELECT revision, create_revision, value FROM live WHERE key = ?", (key,)
        ).fetchone()
        return (row[0], row[1], row[2]) if row else None

    async def create(self, key: str, value: bytes) -> KeyValue:
        def body(conn: sqlite3.Connection) -> Event:
            if self._current_locked(conn, key) is not None:
                raise KeyExists(key)
            return self._append_locked(conn, key, value, False, None)

        return (await self._write(self._transaction(body))).kv

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        def body(conn: sqlite3.Connection) -> Event:
            current = self._current_locked(conn, key)
            if current is None:
                raise KeyNotFound(key)
            if current[0] != expected_revision:
                raise Conflict(key)
            return self._append_locked(conn, key, value, False, current)

        return (await self._write(self._transaction(body))).kv

    async def delete(self, key: str, expected_revision: int = 0) -> KeyValue:
        def body(conn: sqlite3.Connection) -> Event:
            current = self._current_locked(conn, key)
            if current is None:
                raise KeyNotFound(key)
            if expected_revision and current[0] != expected_revision:
                raise Conflict(key)
            return self._append_locked(conn, key, current[2], True, current)

        return (await self._write(self._transaction(body))).kv

    # Reads.

    async def get(self, key: str) -> KeyValue:
        def read(conn: sqlite3.Connection) -> KeyValue:
            row = conn.execute(
                "SELECT revision, create_revision, value FROM live WHERE key = ?", (key,)
            ).fetchone()
            if row is None:
                raise KeyNotFound(key)
            return KeyValue(key, row[2], row[0], row[1])

        return await self._read(read)

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        start_after: str | None = None,
        revision: int = 0,
    ) -> ListResult:
        def read(conn: sqlite3.Connection) -> ListResult:
            conn.execute("BEGIN")
            try:
                return self._list_locked(conn, prefix, limit, start_after, revision)
            finally:
                conn.execute("COMMIT")

        return await self._read(read)

    def _list_locked(
        self,
        conn: sqlite3.Connection,
        prefix: str,
        limit: int,
        start_after: str | None,
        revision: int,
    ) -> ListResult:
        top = conn.execute("SELECT COALESCE(MAX(revision), 0) FROM log").fetchone()[0]
        current = max(top, self._compacted)
        if revision and revision < self._compacted:
            raise Expired(revision, self._compacted)
        low = prefix if start_after is None else max(prefix, start_after + "\x00")
        high = _range_end(prefix)
        fetch = limit + 1 if limit else -1
        if not revision or revision >= current:
            at = current
            rows = conn.execute(
                "SELECT key, value, revision, create_revision FROM live "
                "WHERE key >= ? AND key < ? ORDER BY key LIMIT ?",
                (low, high, fetch),
            ).fetchall()
        else:
            at = revision
            rows = conn.execute(
                "SELECT l.key, l.value, l.revision, l.create_revision FROM log l JOIN "
                "(SELECT key, MAX(revision) AS r FROM log WHERE key >= ? AND key < ? "
                " AND revision <= ? GROUP BY key) m ON l.revision = m.r "
                "WHERE l.deleted = 0 ORDER BY l.key LIMIT ?",
                (low, high, revision, fetch),
            ).fetchall()
        more = bool(limit) and len(rows) > limit
        items = [KeyValue(r[0], r[1], r[2], r[3]) for r in rows[: limit or None]]
        remaining = 0
        if more:
            after = items[-1].key + "\x00"
            if at == current:
                remaining = conn.execute(
                    "SELECT COUNT(*) FROM live WHERE key >= ? AND key < ?", (after, high)
                ).fetchone()[0]
            else:
                remaining = conn.execute(
                    "SELECT COUNT(*) FROM (SELECT key, MAX(revision) AS r FROM log "
                    "WHERE key >= ? AND key < ? AND revision <= ? GROUP BY key) m "
                    "JOIN log l ON l.revision = m.r WHERE l.deleted = 0",
                    (after, high, at),
                ).fetchone()[0]
        return ListResult(items, at, more, remaining)

    async def count(self, prefix: str) -> int:
        def read(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT COUNT(*) FROM live WHERE key >= ? AND key < ?",
                (prefix, _range_end(prefix)),
            ).fetchone()
            return int(row[0])

        return await self._read(read)

    async def current_revision(self) -> int:
        return self._committed

    # Compaction.

    async def compact(self, revision: int) -> None:
        """Forget history before ``revision``, keeping the newest row of every key."""

        def run(conn: sqlite3.Connection) -> None:
            target = min(revision, self._revision)
            if target <= self._compacted:
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "DELETE FROM log WHERE revision < ? AND EXISTS (SELECT 1 FROM log newer "
                    "WHERE newer.key = log.key AND newer.revision > log.revision "
                    "AND newer.revision <= ?)",
                    (target, target),
                )
                conn.execute("DELETE FROM log WHERE deleted = 1 AND revision <= ?", (target,))
                conn.execute(
                    "INSERT OR REPLACE INTO meta (name, value) VALUES ('compacted', ?)", (target,)
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self._compacted = target

        await self._write(run)

    @property
    def compacted_revision(self) -> int:
        return self._compacted

    # Watch.

    def _publish_threadsafe(self, event: Event) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._publish, event)

    def _publish(self, event: Event) -> None:
        self._published = event.revision
        for watcher in tuple(self._watchers):
            if not event.kv.key.startswith(watcher.prefix):
                continue
            if watcher.queue.qsize() >= WATCH_QUEUE_LIMIT:
                self._watchers.discard(watcher)
                watcher.queue.put_nowait(None)
            else:
                watcher.queue.put_nowait(event)

    async def watch(
        self, prefix: str, from_revision: int, *, progress_after: float | None = None
    ) -> AsyncGenerator[Event | Progress, None]:
        """Every change under ``prefix`` after ``from_revision`` (see the module docstring).

        Its ``Progress`` is the newest revision published to the watchers: once this watch's
        queue is empty it has yielded every change under its prefix up to there.
        """
        watcher = _Watcher(prefix)
        self._watchers.add(watcher)
        try:
            if from_revision < self._compacted:
                raise Expired(from_revision, self._compacted)
            last = from_revision
            for event in await self._read(lambda c: self._history(c, prefix, from_revision)):
                last = event.revision
                yield event
            while True:
                try:
                    async with asyncio.timeout(progress_after):
                        live = await watcher.queue.get()
                except TimeoutError:
                    # An event published as the wait ended is still queued: it comes first.
                    if watcher.queue.empty():
                        last = max(last, self._published)
                        yield Progress(last)
                    continue
                if live is None:
                    return  # closed, or fell too far behind: the client watches again
                if live.revision > last:
                    last = live.revision
                    yield live
        finally:
            self._watchers.discard(watcher)

    def _history(self, conn: sqlite3.Connection, prefix: str, after: int) -> builtins.list[Event]:
        rows = conn.execute(
            "SELECT l.revision, l.key, l.create_revision, l.deleted, l.value, p.revision, "
            "p.create_revision, p.value FROM log l LEFT JOIN log p ON p.revision = "
            "l.prev_revision WHERE l.revision > ? AND l.key >= ? AND l.key < ? "
            "ORDER BY l.revision",
            (after, prefix, _range_end(prefix)),
        ).fetchall()
        events = []
        for rev, key, created, deleted, value, p_rev, p_created, p_value in rows:
            prev = KeyValue(key, p_value, p_rev, p_created) if p_rev is not None else None
            kind = DELETED if deleted else (ADDED if created == rev else MODIFIED)
            events.append(Event(kind, KeyValue(key, value, rev, created), prev))
        return events

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for watcher in tuple(self._watchers):
            watcher.queue.put_nowait(None)
        self._watchers.clear()

        def close_conn(_: Any) -> None:
            conn = getattr(self._local, "conn", None)
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
                self._local.conn = None

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._writer, close_conn, None)
        await loop.run_in_executor(self._reader, close_conn, None)
        self._writer.shutdown(wait=True)
        self._reader.shutdown(wait=True)
