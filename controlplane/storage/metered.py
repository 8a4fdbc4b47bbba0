"""A ``Store`` that reports how long each operation took, for the API server's /metrics.

It wraps any backend and passes every call through unchanged; watches are streams and are
passed through untimed.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

from controlplane.storage.interface import Event, KeyValue, ListResult, Progress, Store

Observe = Callable[[str, float], None]
"""Receives (operation, seconds) after every timed call, failed ones included."""


class MeteredStore:
    """``Store`` with every request timed (see the module docstring)."""

    def __init__(self, store: Store, observe: Observe) -> None:
        self.inner = store
        self.observe = observe

    async def _timed(self, operation: str, call: Any) -> Any:
        started = time.perf_counter()
        try:
            return await call
        finally:
            self.observe(operation, time.perf_counter() - started)

    async def create(self, key: str, value: bytes) -> KeyValue:
        result: KeyValue = await self._timed("create", self.inner.create(key, value))
        return result

    async def get(self, key: str) -> KeyValue:
        result: KeyValue = await self._timed("get", self.inner.get(key))
        return result

    async def list(
        self, prefix: str, *, limit: int = 0, start_after: str | None = None, revision: int = 0
    ) -> ListResult:
        call = self.inner.list(prefix, limit=limit, start_after=start_after, revision=revision)
        result: ListResult = await self._timed("list", call)
        return result

    async def count(self, prefix: str) -> int:
        result: int = await self._timed("count", self.inner.count(prefix))
        return result

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        call = self.inner.update(key, value, expected_revision)
        result: KeyValue = await self._timed("update", call)
        return result

    async def delete(self, key: str, expected_revision: int = 0) -> KeyValue:
        result: KeyValue = await self._timed("delete", self.inner.delete(key, expected_revision))
        return result

    def watch(
        self, prefix: str, from_revision: int, *, progress_after: float | None = None
    ) -> AsyncGenerator[Event | Progress, None]:
        return self.inner.watch(prefix, from_revision, progress_after=progress_after)

    async def current_revision(self) -> int:
        return await self.inner.current_revision()

    async def compact(self, revision: int) -> None:
        await self._timed("compact", self.inner.compact(revision))

    async def close(self) -> None:
        await self.inner.close()
