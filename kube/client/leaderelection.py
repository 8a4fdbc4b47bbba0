"""Leader election over a coordination.k8s.io/v1 Lease, as client-go's ``leaderelection``.

Several replicas of a component (scheduler, controller manager) run at once; one leads, the
others wait to take over.  They agree through one Lease object, ``lock_namespace/lock_name``,
with ``resourceVersion`` as the only arbiter: every write is an optimistic update, and the
replica whose write lands first wins; the others get a conflict and try again later.

**The record.**  ``spec.holderIdentity`` names the leader, ``renewTime`` is when it last said
so, ``leaseDurationSeconds`` how long the others must wait after that before taking over,
``acquireTime`` when the current holder took the lease and ``leaseTransitions`` how many times
it changed hands.  Times are MicroTime strings.

**Expiry is judged locally.**  Replicas do not compare ``renewTime`` with their own wall clock
(clocks skew).  Like client-go's ``observedTime``, an elector remembers the monotonic moment
at which it last saw the record *change*; the lease is valid until that moment plus the
record's ``leaseDurationSeconds``.  A holder that keeps renewing keeps changing the record, so
it stays valid in everyone's eyes; a holder that stops is expired ``leaseDuration`` after the
last change anyone saw.

**One attempt** (``tryAcquireOrRenew``): a leader first updates optimistically from the Lease
it last wrote (one request).  Otherwise: get the Lease (create it if absent, which wins at
once); note whether it changed; give up if someone else holds a valid lease; otherwise write
ourselves in, keeping ``acquireTime`` and ``leaseTransitions`` when renewing, counting a
transition when taking over.  A conflict means someone else wrote first: the attempt fails.

**The loops.**  ``run(lead)`` tries every ``retry_period`` (plus up to 120 % jitter, as
client-go's ``JitterFactor``) until it holds the lease, then starts ``lead()`` as a task and
renews every ``retry_period``.  When ``renew_deadline`` has passed since the last successful
renewal (a stricter reading of client-go's per-round deadline: the leader never acts longer
than ``renew_deadline`` on an unrenewed lease, which is less than the ``lease_duration`` the
others wait), or an attempt shows another holder, leadership is lost: ``lead()`` is
cancelled at once, without waiting for any request in flight, and ``run`` raises
``LeadershipLost`` so that the process can exit, as upstream components do.  A request that
hangs is abandoned at the deadline; the clock, not the network, decides.

**Stepping down.**  When ``run`` is cancelled, or ``lead()`` ends on its own (``run`` then
returns its result or raises its exception), ``lead()`` is cancelled and awaited and, with
``release_on_cancel``, the lease is released as client-go does it: ``holderIdentity`` ""
and ``leaseDurationSeconds`` 1, so a waiting replica takes over at its next attempt instead
of waiting out the lease.  A lost lease is not released: its state is unknown.

Time comes from the injected ``Clock``; the fake clock drives the unit tests.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import msgspec

from kube.api.kinds.coordination_v1 import Lease, LeaseSpec
from kube.api.meta_v1 import ObjectMeta, Resource
from kube.api.struct import micro_time
from kube.client.errors import ApiError, ClientError
from kube.clock import Clock, RealClock

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Resource)
T = TypeVar("T")

JITTER_FACTOR = 1.2
"""Acquire attempts are ``retry_period`` apart plus up to this fraction of it (client-go's)."""


class LeaseClient(Protocol):
    """What leader election needs of ``kube.client.rest.Client``."""

    async def get(self, cls: type[R], name: str, namespace: str | None = None) -> R: ...

    async def create(self, obj: R, *, field_manager: str | None = None) -> R: ...

    async def update(self, obj: R, *, subresource: str = "") -> R: ...


class LeadershipLost(Exception):
    """The lease could not be renewed in time (or another holder was seen): stop acting."""


@dataclass(frozen=True, kw_only=True)
class LeaderElectionConfig:
    """Which Lease to hold, as whom, and the timing (seconds), checked as client-go does.

    ``lease_duration``: how long others wait after the last change they saw before taking
    over (written as whole seconds, rounded up).  ``renew_deadline``: how long the leader
    keeps acting without a successful renewal.  ``retry_period``: the pause between attempts.
    """

    lock_name: str
    identity: str
    lock_namespace: str = "kube-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if not self.lock_name:
            raise ValueError("lock_name must not be empty")
        if not self.identity:
            raise ValueError("identity must not be empty")
        if self.retry_period <= 0:
            raise ValueError(f"retry_period must be greater than zero (got {self.retry_period})")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(
                f"lease_duration ({self.lease_duration}) must be greater than "
                f"renew_deadline ({self.renew_deadline})"
            )
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(
                f"renew_deadline ({self.renew_deadline}) must be greater than "
                f"retry_period*{JITTER_FACTOR} ({JITTER_FACTOR * self.retry_period:g})"
            )

    @property
    def lease_duration_seconds(self) -> int:
        """The duration as the Lease carries it: whole seconds, never shorter than configured."""
        return max(1, math.ceil(self.lease_duration))


def leader_identity() -> str:
    """A unique identity for this process: ``<hostname>_<uuid>``, as upstream components."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElector:
    """Runs ``lead()`` while this process holds the Lease; see the module docstring.

    One elector runs once: call ``run`` a single time.  ``on_new_leader`` is called with the
    identity of every leader this elector observes ("" once the lease is released).
    """

    def __init__(
        self,
        client: LeaseClient,
        config: LeaderElectionConfig,
        clock: Clock | None = None,
        *,
        on_new_leader: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.clock = clock or RealClock()
        self.on_new_leader = on_new_leader
        self._lease: Lease | None = None  # the Lease as last read or written (resourceVersion)
        self._observed = LeaseSpec()  # the record as last observed
        self._observed_at = self.clock.monotonic()  # when it last changed, monotonic
        self._reported_leader: str | None = None
        self._last_renew = 0.0  # monotonic start of the last successful attempt
        self._leading = False
        self._started = False

    @property
    def is_leader(self) -> bool:
        """True from acquiring the lease until losing or releasing it (``lead()`` runs)."""
        return self._leading

    @property
    def leader(self) -> str:
        """The holder as last observed ("" when none)."""
        return self._observed.holder_identity or ""

    async def run(self, lead: Callable[[], Awaitable[T]]) -> T:
        """Wait for the lease, then run ``lead()`` while holding it.

        Returns ``lead()``'s result (or raises its exception) when it ends on its own; raises
        ``LeadershipLost`` when the lease slips away (``lead()`` has been cancelled then).
        Cancelling ``run`` cancels ``lead()`` and releases the lease.
        """
        if self._started:
            raise RuntimeError("a LeaderElector runs once")
        self._started = True
        try:
            await self._acquire()
        except asyncio.CancelledError:
            await self._release()  # in case the attempt just cancelled had won
            raise
        self._leading = True
        log.info("%s: acquired lease %s", self.config.identity, self._lock_key)
        lead_task = asyncio.ensure_future(lead())
        renew_task = asyncio.ensure_future(self._keep_renewing())
        try:
            await asyncio.wait({lead_task, renew_task}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            await self._stop(lead_task, renew_task)
            _log_failure(lead_task, "lead() failed while stepping down")
            await self._release()
            raise
        if renew_task.done():  # lost: renew_task ends only then (or on a bug)
            await self._stop(lead_task, renew_task)
            _log_failure(lead_task, "lead() failed while being cancelled")
            cause = renew_task.exception() if not renew_task.cancelled() else None
            log.error("%s: lost lease %s", self.config.identity, self._lock_key)
            raise LeadershipLost(f"{self.config.identity} lost lease {self._lock_key}") from cause
        await self._stop(lead_task, renew_task)
        await self._release()
        return lead_task.result()

    @property
    def _lock_key(self) -> str:
        return f"{self.config.lock_namespace}/{self.config.lock_name}"

    async def _stop(self, lead_task: asyncio.Future[Any], renew_task: asyncio.Future[None]) -> None:
        """Stop acting at once: cancel both tasks (a no-op for one that ended), await them."""
        self._leading = False
        lead_task.cancel()
        renew_task.cancel()
        await asyncio.wait({lead_task, renew_task})

    # The loops.

    async def _acquire(self) -> None:
        """Try every retry_period (jittered) until this elector holds the lease."""
        period = self.config.retry_period
        while True:
            started = self.clock.monotonic()
            if await self._bounded(
                self._try_acquire_or_renew, started + self.config.renew_deadline
            ):
                self._last_renew = started
                return
            await self.clock.sleep(period + random.random() * JITTER_FACTOR * period)

    async def _keep_renewing(self) -> None:
        """Renew every retry_period; return (only) once leadership is lost."""
        period = self.config.retry_period
        while True:
            deadline = self._last_renew + self.config.renew_deadline
            await self.clock.sleep(min(period, max(0.0, deadline - self.clock.monotonic())))
            while True:
                started = self.clock.monotonic()
                if started >= deadline:
                    log.warning(
                        "%s: no renewal of %s within %gs",
                        self.config.identity,
                        self._lock_key,
                        self.config.renew_deadline,
                    )
                    return
                if await self._bounded(self._try_acquire_or_renew, deadline):
                    self._last_renew = started
                    break
                if self._observed.holder_identity != self.config.identity:
                    log.warning(
                        "%s: lease %s is held by %r now",
                        self.config.identity,
                        self._lock_key,
                        self._observed.holder_identity,
                    )
                    return
                await self.clock.sleep(min(period, max(0.0, deadline - self.clock.monotonic())))

    async def _bounded(
        self, attempt: Callable[[], Coroutine[Any, Any, bool]], deadline: float
    ) -> bool:
        """Run one attempt, abandoned (False) if it has not succeeded by ``deadline``."""
        remaining = deadline - self.clock.monotonic()
        if remaining <= 0:
            return False
        work = asyncio.ensure_future(attempt())
        timer = asyncio.ensure_future(self.clock.sleep(remaining))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
            return work.done() and not work.cancelled() and work.result()
        finally:
            work.cancel()
            timer.cancel()
            await asyncio.gather(work, timer, return_exceptions=True)

    # One attempt.

    async def _try_acquire_or_renew(self) -> bool:
        """client-go's ``tryAcquireOrRenew``: True if this elector holds the lease now."""
        config = self.config
        now = micro_time(self.clock.now())
        desired = LeaseSpec(
            holder_identity=config.identity,
            lease_duration_seconds=config.lease_duration_seconds,
            acquire_time=now,
            renew_time=now,
            lease_transitions=self._observed.lease_transitions or 0,
        )
        try:
            return await self._try_write(desired)
        finally:
            self._report_transition()

    async def _try_write(self, desired: LeaseSpec) -> bool:
        config = self.config
        # 1. The fast path: a leader updates from the Lease it last wrote.
        if self._holds() and self._lease_valid() and self._lease is not None:
            desired.acquire_time = self._observed.acquire_time
            if await self._write(desired, "renew"):
                return True
        # 2. Read the record, or create it.
        try:
            lease = await self.client.get(Lease, config.lock_name, config.lock_namespace)
        except ApiError as error:
            if not error.not_found:
                log.warning("%s: reading lease %s: %s", config.identity, self._lock_key, error)
                return False
            return await self._create(desired)
        except ClientError as error:
            log.warning("%s: reading lease %s: %s", config.identity, self._lock_key, error)
            return False
        self._lease = lease
        spec = lease.spec or LeaseSpec()
        if spec != self._observed:
            self._observe(spec)
        # 3. Someone else holds a valid lease: wait.
        if spec.holder_identity and self._lease_valid() and not self._holds():
            return False
        # 4. Renew what we hold, or take over what expired or was released.
        if self._holds():
            desired.acquire_time = spec.acquire_time
            desired.lease_transitions = spec.lease_transitions or 0
            return await self._write(desired, "renew")
        desired.lease_transitions = (spec.lease_transitions or 0) + 1
        return await self._write(desired, "take over")

    async def _create(self, desired: LeaseSpec) -> bool:
        config = self.config
        desired.lease_transitions = 0
        lease = Lease(
            metadata=ObjectMeta(name=config.lock_name, namespace=config.lock_namespace),
            spec=desired,
        )
        try:
            self._lease = await self.client.create(lease)
        except (ApiError, ClientError) as error:
            log.info("%s: creating lease %s: %s", config.identity, self._lock_key, error)
            return False
        self._observe(desired)
        return True

    async def _write(self, spec: LeaseSpec, what: str) -> bool:
        """Update the Lease last seen to ``spec``; False on a conflict or any failure."""
        assert self._lease is not None
        updated = msgspec.structs.replace(self._lease, spec=spec)
        try:
            self._lease = await self.client.update(updated)
        except (ApiError, ClientError) as error:
            level = (
                logging.INFO if isinstance(error, ApiError) and error.conflict else logging.WARNING
            )
            log.log(level, "%s: %s lease %s: %s", self.config.identity, what, self._lock_key, error)
            return False
        self._observe(spec)
        return True

    async def _release(self) -> None:
        """Hand the lease back (holder "", duration 1 s), best effort, within renew_deadline."""
        if not self.config.release_on_cancel or not self._holds() or self._lease is None:
            return
        now = micro_time(self.clock.now())
        released = LeaseSpec(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=now,
            renew_time=now,
            lease_transitions=self._observed.lease_transitions,
        )

        async def release() -> bool:
            return await self._write(released, "release")

        deadline = self.clock.monotonic() + self.config.renew_deadline
        if await self._bounded(release, deadline):
            log.info("%s: released lease %s", self.config.identity, self._lock_key)
        self._report_transition()

    # The observed record.

    def _observe(self, spec: LeaseSpec) -> None:
        self._observed = msgspec.structs.replace(spec)
        self._observed_at = self.clock.monotonic()

    def _holds(self) -> bool:
        return self._observed.holder_identity == self.config.identity

    def _lease_valid(self) -> bool:
        duration = self._observed.lease_duration_seconds or self.config.lease_duration_seconds
        return self._observed_at + duration > self.clock.monotonic()

    def _report_transition(self) -> None:
        holder = self._observed.holder_identity or ""
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if holder:
            log.info("%s: the leader of %s is %s", self.config.identity, self._lock_key, holder)
        if self.on_new_leader is not None:
            try:
                self.on_new_leader(holder)
            except Exception:  # a callback's bug must not stop the election
                log.exception("on_new_leader(%r) failed", holder)


def _log_failure(task: asyncio.Future[Any], what: str) -> None:
    """Retrieve (and log) the exception of a finished task other than its cancellation."""
    if not task.cancelled() and task.exception() is not None:
        log.error(what, exc_info=task.exception())


__all__ = [
    "JITTER_FACTOR",
    "LeaderElectionConfig",
    "LeaderElector",
    "LeadershipLost",
    "LeaseClient",
    "leader_identity",
]
