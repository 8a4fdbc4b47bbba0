"""Leader election over a Lease.

Unit tests run electors against ``FakeLeases``: an in-memory Lease store with resourceVersions
(stale updates conflict, creates of existing names fail), scripted failures and hangs.  Time is
a ``FakeClock`` that the tests advance in small steps.  The integration tests at the end run
two electors against a real API server on the real clock, with second-scale timings.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pytest

from kube.api.kinds.coordination_v1 import Lease, LeaseSpec
from kube.api.meta_v1 import ObjectMeta, Resource, Status
from kube.api.struct import micro_time, parse_micro_time
from kube.client.errors import ApiError, ClientError
from kube.client.leaderelection import (
    LeaderElectionConfig,
    LeaderElector,
    LeadershipLost,
    leader_identity,
)
from kube.client.rest import Client
from kube.clock import FakeClock

R = TypeVar("R", bound=Resource)

NS = "kube-system"
NAME = "kube-scheduler"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def api_error(code: int, reason: str) -> ApiError:
    return ApiError(Status(code=code, reason=reason, message=reason))


class FakeLeases:
    """The API server's Lease store, as far as leader election sees it."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], Lease] = {}
        self.revision = 0
        self.failing: Exception | None = None  # raised by every request while set
        self.hanging = False  # every request waits forever while set
        self.requests: list[str] = []

    def put(self, lease: Lease) -> Lease:
        self.revision += 1
        lease.metadata.resource_version = str(self.revision)
        self.leases[(lease.metadata.namespace or "", lease.metadata.name or "")] = lease
        return copy.deepcopy(lease)

    def spec(self, namespace: str = NS, name: str = NAME) -> LeaseSpec:
        spec = self.leases[(namespace, name)].spec
        assert spec is not None
        return spec

    async def _request(self, verb: str) -> None:
        self.requests.append(verb)
        await asyncio.sleep(0)
        if self.hanging:
            await asyncio.get_running_loop().create_future()
        if self.failing is not None:
            raise self.failing

    async def get(self, cls: type[R], name: str, namespace: str | None = None) -> R:
        await self._request("get")
        try:
            lease = self.leases[(namespace or "", name)]
        except KeyError:
            raise api_error(404, "NotFound") from None
        assert isinstance(lease, cls)
        return copy.deepcopy(lease)

    async def create(self, obj: R, *, field_manager: str | None = None) -> R:
        await self._request("create")
        assert isinstance(obj, Lease)
        key = (obj.metadata.namespace or "", obj.metadata.name or "")
        if key in self.leases:
            raise api_error(409, "AlreadyExists")
        stored = self.put(copy.deepcopy(obj))
        assert isinstance(stored, type(obj))
        return stored

    async def update(self, obj: R, *, subresource: str = "") -> R:
        await self._request("update")
        assert isinstance(obj, Lease)
        key = (obj.metadata.namespace or "", obj.metadata.name or "")
        current = self.leases.get(key)
        if current is None:
            raise api_error(404, "NotFound")
        if obj.metadata.resource_version != current.metadata.resource_version:
            raise api_error(409, "Conflict")
        stored = self.put(copy.deepcopy(obj))
        assert isinstance(stored, type(obj))
        return stored


def config(identity: str = "a", **overrides: Any) -> LeaderElectionConfig:
    return LeaderElectionConfig(lock_namespace=NS, lock_name=NAME, identity=identity, **overrides)


async def settle() -> None:
    for _ in range(30):
        await asyncio.sleep(0)


async def advance_until(
    clock: FakeClock, condition: Callable[[], bool], *, limit: float = 60.0, step: float = 0.1
) -> float:
    """Advance the clock in steps until ``condition`` holds; the fake seconds it took."""
    start = clock.monotonic()
    await settle()
    while not condition():
        if clock.monotonic() - start > limit:
            raise AssertionError(f"condition not met within {limit} fake seconds")
        await clock.advance(step)
        await settle()
    return clock.monotonic() - start


class Leading:
    """A ``lead()`` that records when it started and when (and whether) it was cancelled."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock
        self.started = asyncio.Event()
        self.cancelled_at: float | None = None
        self.cancelled = False

    async def __call__(self) -> None:
        self.started.set()
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            self.cancelled = True
            self.cancelled_at = self.clock.monotonic() if self.clock else time.monotonic()
            raise


@contextlib.asynccontextmanager
async def running(
    elector: LeaderElector, lead: Callable[[], Any]
) -> AsyncIterator[asyncio.Task[Any]]:
    task = asyncio.create_task(elector.run(lead))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
            await task


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def leases() -> FakeLeases:
    return FakeLeases()


# Configuration.


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param({"lease_duration": 10.0}, "lease_duration", id="lease-not-above-renew"),
        pytest.param({"lease_duration": 5.0}, "lease_duration", id="lease-below-renew"),
        pytest.param({"retry_period": 9.0}, "retry_period\\*1.2", id="renew-below-jittered-retry"),
        pytest.param({"retry_period": 0.0}, "retry_period", id="retry-zero"),
        pytest.param({"identity": ""}, "identity", id="no-identity"),
        pytest.param({"lock_name": ""}, "lock_name", id="no-lock-name"),
    ],
)
def test_config_rejects_bad_timing(overrides: dict[str, Any], message: str) -> None:
    values: dict[str, Any] = {"lock_name": NAME, "identity": "a", **overrides}
    with pytest.raises(ValueError, match=message):
        LeaderElectionConfig(**values)


@pytest.mark.parametrize(
    ("duration", "seconds"),
    [
        pytest.param(15.0, 15, id="whole"),
        pytest.param(2.5, 3, id="rounded-up"),
    ],
)
def test_config_lease_duration_seconds(duration: float, seconds: int) -> None:
    cfg = config(lease_duration=duration, renew_deadline=2.0, retry_period=0.5)
    assert cfg.lease_duration_seconds == seconds


def test_leader_identity_is_host_and_uuid() -> None:
    first, second = leader_identity(), leader_identity()
    assert first != second
    host, _, unique = first.rpartition("_")
    assert host
    uuid.UUID(unique)


# Acquiring.


async def test_acquires_a_free_lease_and_renews_it(clock: FakeClock, leases: FakeLeases) -> None:
    seen: list[str] = []
    elector = LeaderElector(leases, config(), clock, on_new_leader=seen.append)
    lead = Leading(clock)
    async with running(elector, lead):
        await advance_until(clock, lambda: lead.started.is_set())
        assert elector.is_leader
        assert seen == ["a"]
        spec = leases.spec()
        assert spec.holder_identity == "a"
        assert spec.lease_duration_seconds == 15
        assert spec.lease_transitions == 0
        assert spec.acquire_time == spec.renew_time
        assert MICRO_TIME.match(spec.renew_time or "")
        acquired = spec.acquire_time

        await clock.advance(2.0)
        await settle()
        renewed = leases.spec()
        assert renewed.acquire_time == acquired
        assert renewed.renew_time is not None
        assert parse_micro_time(renewed.renew_time) > parse_micro_time(acquired or "")
        assert leases.requests[-1] == "update"  # the fast path: no get before renewing
        assert leases.requests.count("get") == 1


def held_by(leases: FakeLeases, clock: FakeClock, holder: str, transitions: int = 3) -> None:
    now = micro_time(clock.now())
    leases.put(
        Lease(
            metadata=ObjectMeta(name=NAME, namespace=NS),
            spec=LeaseSpec(
                holder_identity=holder,
                lease_duration_seconds=15,
                acquire_time=now,
                renew_time=now,
                lease_transitions=transitions,
            ),
        )
    )


def renew_as(leases: FakeLeases, clock: FakeClock, holder: str) -> None:
    lease = copy.deepcopy(leases.leases[(NS, NAME)])
    assert lease.spec is not None and lease.spec.holder_identity == holder
    lease.spec.renew_time = micro_time(clock.now())
    leases.put(lease)


async def test_waits_while_another_holds_then_takes_over_after_expiry(
    clock: FakeClock, leases: FakeLeases
) -> None:
    held_by(leases, clock, "other")
    seen: list[str] = []
    elector = LeaderElector(leases, config(), clock, on_new_leader=seen.append)
    lead = Leading(clock)
    async with running(elector, lead):
        await advance_until(clock, lambda: seen == ["other"])
        await clock.advance(14.0)  # the holder stopped renewing, but 15 s have not passed
        await settle()
        assert not lead.started.is_set()
        assert not elector.is_leader
        assert leases.spec().holder_identity == "other"

        waited = await advance_until(clock, lambda: lead.started.is_set())
        assert waited <= 1.0 + 2.0 * 2.2 + 0.2  # expiry, then at most one jittered retry
        spec = leases.spec()
        assert spec.holder_identity == "a"
        assert spec.lease_transitions == 4
        assert spec.acquire_time == spec.renew_time
        assert seen == ["other", "a"]


async def test_a_holder_that_keeps_renewing_keeps_the_lease(
    clock: FakeClock, leases: FakeLeases
) -> None:
    """Expiry counts from the last change observed, not from the holder's renewTime."""
    held_by(leases, clock, "other")
    elector = LeaderElector(leases, config(), clock)
    lead = Leading(clock)
    async with running(elector, lead):
        for _ in range(20):  # 40 fake seconds, far beyond the lease duration
            await clock.advance(2.0)
            renew_as(leases, clock, "other")
            await settle()
        assert not lead.started.is_set()
        assert leases.spec().holder_identity == "other"


async def test_only_one_of_two_electors_leads(clock: FakeClock, leases: FakeLeases) -> None:
    a, b = LeaderElector(leases, config("a"), clock), LeaderElector(leases, config("b"), clock)
    lead_a, lead_b = Leading(clock), Leading(clock)
    async with running(a, lead_a), running(b, lead_b):
        await advance_until(clock, lambda: a.is_leader or b.is_leader)
        await clock.advance(30.0)
        await settle()
        assert a.is_leader != b.is_leader
        assert lead_a.started.is_set() != lead_b.started.is_set()
        assert leases.spec().holder_identity == ("a" if a.is_leader else "b")
        assert leases.spec().lease_transitions == 0


# Losing and releasing.


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param("errors", id="requests-fail"),
        pytest.param("hangs", id="requests-hang"),
        pytest.param("server-errors", id="server-errors"),
    ],
)
async def test_lead_is_cancelled_when_renewal_fails_past_the_deadline(
    clock: FakeClock, leases: FakeLeases, failure: str
) -> None:
    elector = LeaderElector(leases, config(), clock)
    lead = Leading(clock)
    task = asyncio.create_task(elector.run(lead))
    await advance_until(clock, lambda: lead.started.is_set())
    await clock.advance(2.0)  # one successful renewal
    await settle()
    last_renewal = parse_micro_time(leases.spec().renew_time or "")
    renewed_at = (last_renewal - clock.now()).total_seconds() + clock.monotonic()
    if failure == "errors":
        leases.failing = ClientError("connection refused")
    elif failure == "hangs":
        leases.hanging = True
    else:
        leases.failing = api_error(500, "InternalError")

    await advance_until(clock, lambda: task.done(), step=0.05)
    with pytest.raises(LeadershipLost):
        await task
    assert lead.cancelled
    assert lead.cancelled_at is not None
    assert renewed_at + 10.0 <= lead.cancelled_at <= renewed_at + 10.0 + 0.1
    assert not elector.is_leader
    assert leases.spec().holder_identity == "a"  # a lost lease is not released


async def test_leadership_is_lost_at_once_when_another_holder_appears(
    clock: FakeClock, leases: FakeLeases
) -> None:
    elector = LeaderElector(leases, config(), clock)
    lead = Leading(clock)
    task = asyncio.create_task(elector.run(lead))
    await advance_until(clock, lambda: lead.started.is_set())
    lease = copy.deepcopy(leases.leases[(NS, NAME)])
    assert lease.spec is not None
    lease.spec.holder_identity = "usurper"
    leases.put(lease)
    took = await advance_until(clock, lambda: task.done())
    with pytest.raises(LeadershipLost):
        await task
    assert took <= 2.0 + 0.1  # the next renewal notices, long before the deadline
    assert lead.cancelled


@pytest.mark.parametrize(
    ("release", "holder"),
    [
        pytest.param(True, "", id="released"),
        pytest.param(False, "a", id="kept-until-expiry"),
    ],
)
async def test_cancelling_run_cancels_lead_and_releases(
    clock: FakeClock, leases: FakeLeases, release: bool, holder: str
) -> None:
    elector = LeaderElector(leases, config(release_on_cancel=release), clock)
    lead = Leading(clock)
    task = asyncio.create_task(elector.run(lead))
    await advance_until(clock, lambda: lead.started.is_set())
    transitions = leases.spec().lease_transitions
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert lead.cancelled
    assert not elector.is_leader
    spec = leases.spec()
    assert spec.holder_identity == holder
    assert spec.lease_transitions == transitions
    if release:
        assert spec.lease_duration_seconds == 1


async def test_lead_returning_ends_run_and_releases(clock: FakeClock, leases: FakeLeases) -> None:
    async def lead() -> str:
        await clock.sleep(3.0)
        return "done"

    elector = LeaderElector(leases, config(), clock)
    task = asyncio.create_task(elector.run(lead))
    await advance_until(clock, lambda: task.done())
    assert await task == "done"
    assert leases.spec().holder_identity == ""


async def test_released_lease_is_taken_over_at_the_next_attempt(
    clock: FakeClock, leases: FakeLeases
) -> None:
    seen: list[str] = []
    a = LeaderElector(leases, config("a"), clock)
    b = LeaderElector(leases, config("b"), clock, on_new_leader=seen.append)
    lead_a, lead_b = Leading(clock), Leading(clock)
    task_a = asyncio.create_task(a.run(lead_a))
    await advance_until(clock, lambda: lead_a.started.is_set())
    async with running(b, lead_b):
        await advance_until(clock, lambda: seen == ["a"])
        task_a.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task_a
        took = await advance_until(clock, lambda: lead_b.started.is_set())
        assert took <= 2.0 * 2.2 + 0.1  # one jittered retry, not a lease duration
        spec = leases.spec()
        assert spec.holder_identity == "b"
        assert spec.lease_transitions == 1
        assert spec.lease_duration_seconds == 15
        assert seen[-1] == "b"


async def test_run_twice_is_refused(clock: FakeClock, leases: FakeLeases) -> None:
    async def lead() -> None:
        return None

    elector = LeaderElector(leases, config(), clock)
    task = asyncio.create_task(elector.run(lead))
    await advance_until(clock, lambda: task.done())
    await task
    with pytest.raises(RuntimeError, match="once"):
        await elector.run(lead)


# Against a real API server.


async def test_two_electors_one_leads_and_hands_over(client: Client, namespace: str) -> None:
    lock = f"lock-{uuid.uuid4().hex[:6]}"

    def cfg(identity: str) -> LeaderElectionConfig:
        return LeaderElectionConfig(
            lock_namespace=namespace,
            lock_name=lock,
            identity=identity,
            lease_duration=10.0,
            renew_deadline=8.0,
            retry_period=0.4,
        )

    electors = {name: LeaderElector(client, cfg(name)) for name in ("a", "b")}
    leads = {name: Leading() for name in electors}
    tasks = {name: asyncio.create_task(e.run(leads[name])) for name, e in electors.items()}
    try:
        started = [asyncio.create_task(lead.started.wait()) for lead in leads.values()]
        try:
            async with asyncio.timeout(5.0):
                await asyncio.wait(started, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in started:
                waiter.cancel()
            await asyncio.gather(*started, return_exceptions=True)
        await asyncio.sleep(1.0)  # a few renewals: still exactly one
        leaders = [name for name, e in electors.items() if e.is_leader]
        assert len(leaders) == 1
        (leader,) = leaders
        (follower,) = set(electors) - {leader}
        assert not leads[follower].started.is_set()
        lease = await client.get(Lease, lock, namespace)
        assert lease.spec is not None and lease.spec.holder_identity == leader

        tasks[leader].cancel()
        with pytest.raises(asyncio.CancelledError):
            await tasks[leader]
        assert leads[leader].cancelled
        handed_over = time.monotonic()
        # Released, not waited out: well within the 10 s lease duration, even on a busy machine.
        async with asyncio.timeout(5.0):
            await leads[follower].started.wait()
        assert time.monotonic() - handed_over < 5.0
        lease = await client.get(Lease, lock, namespace)
        assert lease.spec is not None
        assert lease.spec.holder_identity == follower
        assert lease.spec.lease_transitions == 1
        assert lease.spec.renew_time is not None
        renewed = parse_micro_time(lease.spec.renew_time)
        assert abs(renewed - datetime.datetime.now(datetime.UTC)) < datetime.timedelta(seconds=5)
    finally:
        for task in tasks.values():
            task.cancel()
        for task in tasks.values():
            with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
                await task
