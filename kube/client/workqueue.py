"""Work queues for controllers: client-go's workqueue, in asyncio.

A controller's informer handlers never do work themselves; they turn an event into a key
(usually ``"namespace/name"``) and ``add`` it.  Workers loop ``get`` → sync → ``forget`` on
success or ``add_rate_limited`` on failure → ``done``.  Because the sync re-reads the current
state from the cache, a key stands for "this object may need attention", not for one event:
ten events for an object before a worker gets to it are one sync.  That is why the queue
de-duplicates, and why it may drop nothing but duplicates.

State and who holds it:

* ``queue``: keys waiting for a worker, in the order they first became dirty.
* ``dirty``: keys that need a sync that has not started yet.  Every queued key is dirty.
* ``processing``: keys a worker holds, from ``get`` until that worker calls ``done``.

A key is never handed to two workers at once, so a sync never races another sync of the same
object.  A key added while it is being processed is only marked dirty; ``done`` queues it
again.  The re-add cannot simply be dropped (the event may have arrived after the worker read
the cache, so the running sync may not have seen it) and cannot be queued at once (a second
worker would take it), so it is deferred.

``add_after`` holds keys back until a deadline on the injected ``Clock``; one background task,
started on first use and cancelled at shutdown, sleeps until the earliest deadline.
``RateLimitingQueue`` picks that delay from a ``RateLimiter``: by default, as client-go's
``DefaultControllerRateLimiter``, the larger of a per-key exponential backoff (so one broken
object backs off on its own) and a global token bucket (so many failing objects together
cannot flood the API server).  The limiter remembers failures until the worker calls
``forget``; that is the worker's job on success.

Everything here is meant to be used from one event loop; nothing is thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, Protocol, TypeVar

from kube.client.flowcontrol import TokenBucket
from kube.clock import Clock, RealClock

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)


class ShutDown(Exception):
    """The queue is shut down and has nothing left to hand out: the worker should exit."""


class WorkQueue(Generic[K]):
    """A de-duplicating FIFO of keys, each held by at most one worker at a time.

    ``add`` and ``add_after`` are synchronous and never block, so informer handlers can call
    them directly.  ``get`` waits for work.  After ``shutdown``, adds are ignored, keys
    already queued are still handed out, and ``get`` raises ``ShutDown`` once none are left.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or RealClock()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drainers: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._draining = False
        # Delayed adds: a heap of (deadline, seq, key).  A key waits at most once; moving it
        # earlier pushes a new entry and ``_waiting`` records the live one, so the superseded
        # entry is skipped when it surfaces.
        self._heap: list[tuple[float, int, K]] = []
        self._waiting: dict[K, tuple[float, int, K]] = {}
        self._seq = itertools.count()
        self._waiter: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Future[None] | None = None

    def __len__(self) -> int:
        """How many keys are queued (not counting keys being processed or held back)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def add(self, key: K) -> None:
        """Mark ``key`` as needing a sync; a no-op if it already does or the queue is shut down."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._wake_getter()

    async def get(self) -> K:
        """The next key, which the caller now holds until it calls ``done(key)``.

        Raises ``ShutDown`` once the queue is shut down and empty.
        """
        while not self._queue:
            if self._shutting_down:
                raise ShutDown
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                with contextlib.suppress(ValueError):
                    self._getters.remove(waiter)
                if waiter.done() and not waiter.cancelled():
                    # Woken for a key this worker will not take: hand the wakeup on.
                    self._wake_getter()
                raise
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        """End processing of ``key``; if it was added meanwhile, queue it again."""
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_getter()
        if not self._processing:
            self._wake_drainers()

    def add_after(self, key: K, seconds: float) -> None:
        """Add ``key`` once ``seconds`` have passed on the clock.

        If ``key`` is already held back, the earlier of the two deadlines wins.  Must be called
        from a running event loop when ``seconds`` is positive.
        """
        if self._shutting_down:
            return
        if seconds <= 0:
            self.add(key)
            return
        deadline = self._clock.monotonic() + seconds
        live = self._waiting.get(key)
        if live is not None and live[0] <= deadline:
            return
        entry = (deadline, next(self._seq), key)
        heapq.heappush(self._heap, entry)
        self._waiting[key] = entry
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_task(
                self._wait_loop(), name="workqueue-waiter"
            )
        elif self._heap[0] is entry and self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def shutdown(self) -> None:
        """Stop accepting adds, drop keys held back by ``add_after``, and wake every worker.

        Also ends any ``shutdown_with_drain`` that is still waiting.
        """
        self._draining = False
        self._shut_down()
        self._wake_drainers()

    async def shutdown_with_drain(self) -> None:
        """Shut down, then wait until every key handed out has been marked ``done``.

        Workers keep getting the keys still queued; this returns once none is processing (or
        when ``shutdown`` is called meanwhile).
        """
        self._draining = True
        self._shut_down()
        while self._processing and self._draining:
            drained = asyncio.get_running_loop().create_future()
            self._drainers.append(drained)
            try:
                await drained
            finally:
                with contextlib.suppress(ValueError):
                    self._drainers.remove(drained)
        if self._waiter is not None:
            await asyncio.wait({self._waiter})

    def _shut_down(self) -> None:
        self._shutting_down = True
        self._heap.clear()
        self._waiting.clear()
        if self._waiter is not None:
            self._waiter.cancel()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _wake_getter(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _wake_drainers(self) -> None:
        for drained in self._drainers:
            if not drained.done():
                drained.set_result(None)

    def _pop_stale(self) -> None:
        while self._heap and self._waiting.get(self._heap[0][2]) is not self._heap[0]:
            heapq.heappop(self._heap)

    def _add_ready(self, now: float) -> None:
        self._pop_stale()
        while self._heap and self._heap[0][0] <= now:
            _, _, key = heapq.heappop(self._heap)
            del self._waiting[key]
            self.add(key)
            self._pop_stale()

    async def _wait_loop(self) -> None:
        loop = asyncio.get_running_loop()
        now = self._clock.monotonic()
        while True:
            self._add_ready(now)
            self._wakeup = loop.create_future()
            if not self._heap:
                await self._wakeup
                now = self._clock.monotonic()
                continue
            deadline = self._heap[0][0]
            # Race the clock against an earlier deadline arriving: with a fake clock nothing
            # else would ever interrupt the sleep.
            sleeper = loop.create_task(self._sleep_until(deadline))
            try:
                finished, _ = await asyncio.wait(
                    {sleeper, self._wakeup}, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                sleeper.cancel()
            now = self._clock.monotonic()
            if sleeper in finished:
                # The sleep ended, so the deadline has come even if float rounding in the
                # clock left ``now`` a hair short of it.
                now = max(now, deadline)

    async def _sleep_until(self, deadline: float) -> None:
        # The delay is taken when the sleep starts, not when it was scheduled: a fake clock
        # may have been advanced in between.
        await self._clock.sleep(deadline - self._clock.monotonic())


class RateLimiter(Protocol[K_contra]):
    """Decides how long a key waits before its next retry, and remembers its failures."""

    def when(self, key: K_contra) -> float:
        """Seconds ``key`` should wait now; counts as one more failure (or one token)."""
        ...

    def forget(self, key: K_contra) -> None:
        """Stop tracking ``key``: its next failure is treated as its first."""
        ...

    def retries(self, key: K_contra) -> int:
        """How many failures of ``key`` are remembered."""
        ...


class ItemExponentialFailureRateLimiter(Generic[K]):
    """Per-key backoff: ``base * 2**failures`` seconds, at most ``cap``."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        self._base = base
        self._cap = cap
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        exponent = self._failures.get(key, 0)
        self._failures[key] = exponent + 1
        try:
            backoff = math.ldexp(self._base, exponent)
        except OverflowError:
            return self._cap
        return min(backoff, self._cap)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def retries(self, key: K) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter:
    """A global token bucket: ``burst`` retries at once, then ``qps`` per second overall.

    ``when`` reserves a token and returns how long until it is available, as
    ``rate.Limiter.Reserve().Delay()`` does in Go; it ignores the key and tracks no failures.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        self._bucket = TokenBucket(qps, burst, clock or RealClock())

    def when(self, key: Hashable) -> float:
        return self._bucket.reserve()

    def forget(self, key: Hashable) -> None:
        pass

    def retries(self, key: Hashable) -> int:
        return 0


class MaxOfRateLimiter(Generic[K]):
    """The longest delay any of ``limiters`` asks for; every limiter sees every call."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, key: K) -> float:
        return max([limiter.when(key) for limiter in self._limiters])

    def forget(self, key: K) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def retries(self, key: K) -> int:
        return max(limiter.retries(key) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter[Hashable]:
    """client-go's ``DefaultControllerRateLimiter``: per-key 5 ms → 1000 s, overall 10 qps."""
    return MaxOfRateLimiter[Hashable](
        ItemExponentialFailureRateLimiter[Hashable](0.005, 1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )


class RateLimitingQueue(WorkQueue[K]):
    """A ``WorkQueue`` whose failed keys come back after a delay chosen by a ``RateLimiter``."""

    def __init__(
        self, rate_limiter: RateLimiter[K] | None = None, clock: Clock | None = None
    ) -> None:
        super().__init__(clock)
        if rate_limiter is None:
            rate_limiter = default_controller_rate_limiter(self._clock)
        self._rate_limiter = rate_limiter

    def add_rate_limited(self, key: K) -> None:
        """Add ``key`` after the delay the rate limiter picks, recording one more failure."""
        self.add_after(key, self._rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """Clear ``key``'s failure history; a worker calls this when a sync succeeds."""
        self._rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self._rate_limiter.retries(key)

    async def work(
        self,
        sync: Callable[[K], Awaitable[None]],
        on_error: Callable[[K, Exception], None],
    ) -> None:
        """One worker: take keys until the queue shuts down.  A key whose ``sync`` succeeds
        has its failures forgotten; one whose ``sync`` raises is reported to ``on_error``
        and comes back after its backoff.  Either way it is marked done."""
        while True:
            try:
                key = await self.get()
            except ShutDown:
                return
            try:
                await sync(key)
            except Exception as error:
                on_error(key, error)
                self.add_rate_limited(key)
            else:
                self.forget(key)
            finally:
                self.done(key)
