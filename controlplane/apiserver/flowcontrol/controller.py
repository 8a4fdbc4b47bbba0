"""API Priority and Fairness in the request path: classify, wait for a seat, or refuse.

``FlowControl`` reads the FlowSchemas and PriorityLevelConfigurations from watch caches (so a
change takes effect on the next request, with no restart) and keeps one ``QueueSet`` per
limited level.  The server's concurrency limit (``--max-requests-inflight`` plus
``--max-mutating-requests-inflight``) is divided among levels by their nominal shares, as
upstream's nominal limits: ``ceil(limit * shares / sum of every level's shares)``; every 10
seconds the limited levels then lend and borrow seats by their recent demand, within
``lendablePercent`` and ``borrowingLimitPercent`` (``borrowing``).

A list takes seats by upstream's width estimate (``list_seats``: one per 100 objects it will go
through, 1 to 10); a mutating request by the watches its change will notify (``WatchTracker``,
``mutating_width``: one seat per 10 of them, 1 to 10, held after it answered for 5 ms of each
seat's share of the events, as upstream's mutating work estimator); every other request takes
one. A watch holds its seat only until its response starts, that is while it is set up, as
upstream's watches hold theirs during initialization; other long-running requests
(``long_running``: exec, attach, logs, port-forward, proxy) take none, as upstream. The exempt
level never waits. A request that cannot be queued, or waits longer than ``wait_limit``
(upstream: a quarter of the request timeout), is refused with upstream's 429, its Retry-After
growing while the level keeps refusing (``DroppedRequests``).

Beside the request path: the ``Dangling`` condition of every FlowSchema (whether its level
exists) and the bootstrap configuration (``bootstrap.ensure``), kept by ``run``; the
``/debug/api_priority_and_fairness/dump_*`` tables; and the ``apiserver_flowcontrol_*``
metrics.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import dataclasses
import datetime
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import NoReturn

from controlplane.apiserver import errors
from controlplane.apiserver.auth import User
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from controlplane.apiserver.flowcontrol import bootstrap, borrowing, classify
from controlplane.apiserver.flowcontrol.fairqueuing import EXECUTE, QUEUED, QueueSet, Request
from controlplane.apiserver.registry.store import ResourceStore
from controlplane.apiserver.storage.watchcache import WatchCache, serves_list
from kube.api.fieldselector import FieldSelectorError, parse_field_selector
from kube.api.kinds.flowcontrol_v1 import (
    CATCH_ALL,
    DANGLING,
    FlowSchema,
    FlowSchemaCondition,
    FlowSchemaStatus,
    PriorityLevelConfiguration,
)
from kube.clock import Clock
from kube.metrics import Registry

log = logging.getLogger(__name__)

FLOW_SCHEMA_HEADER = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_HEADER = "X-Kubernetes-PF-PriorityLevel-UID"
WAIT_LIMIT = 15.0
"""Upstream's longest wait in a queue: a quarter of the 60 s request timeout."""
ENSURE_EVERY = 60.0
OBJECTS_PER_SEAT = 100
MAX_SEATS = 10
WATCHES_PER_SEAT = 10
EVENT_SECONDS = 0.005
"""Upstream's estimate of one watch event's cost, in seconds of a seat."""
READ_ONLY_VERBS = frozenset({"get", "list", "watch", "proxy"})


@dataclasses.dataclass(eq=False)
class Level:
    config: PriorityLevelConfiguration
    nominal: int
    queues: QueueSet | None
    """None for the exempt level."""
    demand: borrowing.SeatDemand
    lower: int = 0
    upper: int = 0
    """The bounds of the current limit (``queues.limit``): what lending and borrowing allow."""
    smoothed: float = 0.0


@dataclasses.dataclass(frozen=True)
class Classification:
    schema: FlowSchema
    level: Level
    distinguisher: str

    def headers(self) -> dict[str, str]:
        """The response headers that tell clients where their request went."""
        found = {
            FLOW_SCHEMA_HEADER: self.schema.metadata.uid,
            PRIORITY_LEVEL_HEADER: self.level.config.metadata.uid,
        }
        return {k: v for k, v in found.items() if v}


class Seat:
    """A request's seat at its level, given back once (``release``)."""

    def __init__(self, give_back: Callable[[], None]) -> None:
        self._give_back: Callable[[], None] | None = give_back

    def release(self) -> None:
        give_back, self._give_back = self._give_back, None
        if give_back is not None:
            give_back()


MAX_RETRY_AFTER = 32


class DroppedRequests:
    """One level's refusals by the second, and the Retry-After they call for (upstream's
    dropped-requests tracker, which mimics TCP): it doubles, at most every Retry-After seconds
    and up to 32, while at least three times as many requests were refused in the last
    Retry-After seconds, and falls by one when fewer than Retry-After were."""

    def __init__(self) -> None:
        self.retry_after = 1
        self._history: list[tuple[int, int]] = []
        """(second, refusals) of the seconds before the current one."""
        self._second = 0
        self._count = 0
        self._raised_at = 0

    def record(self, second: int) -> None:
        """A request refused at ``second`` (Unix time)."""
        if second == self._second:
            self._count += 1
            return
        self._history.append((self._second, self._count))
        horizon = min(2 * self.retry_after, MAX_RETRY_AFTER)
        self._history = [(t, n) for t, n in self._history if second - t <= horizon]
        self._second, self._count = second, 1
        recent = sum(n for t, n in self._history if 0 < second - t <= self.retry_after)
        if second - self._raised_at >= self.retry_after and recent >= 3 * self.retry_after:
            self.retry_after = min(2 * self.retry_after, MAX_RETRY_AFTER)
            self._raised_at = second
        elif recent < self.retry_after and self.retry_after > 1:
            self.retry_after -= 1


class FlowControl:
    """The request path's view of the configuration, the levels' queues, and what keeps
    them (see the module docstring).  One per API server; used from its event loop only."""

    def __init__(
        self,
        schemas: WatchCache,
        levels: WatchCache,
        server_limit: int,
        clock: Clock,
        metrics: Registry,
        wait_limit: float = WAIT_LIMIT,
    ) -> None:
        self.schemas = schemas
        self.levels = levels
        self.server_limit = server_limit
        self.clock = clock
        self.wait_limit = wait_limit
        self._seen: tuple[int | None, int | None] = (-1, -1)
        self._ordered: list[FlowSchema] = []
        self._levels: dict[str, Level] = {}
        self._waiters: dict[Request, asyncio.Future[None]] = {}
        self._task: asyncio.Task[None] | None = None
        labels = ["priority_level", "flow_schema"]
        self._executing = metrics.gauge(
            "apiserver_flowcontrol_current_executing_requests",
            "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution "
            "stage in the API Priority and Fairness subsystem",
            labels,
        )
        self._inqueue = metrics.gauge(
            "apiserver_flowcontrol_current_inqueue_requests",
            "Number of requests currently pending in queues of the API Priority and Fairness "
            "subsystem",
            labels,
        )
        self._dispatched = metrics.counter(
            "apiserver_flowcontrol_dispatched_requests_total",
            "Number of requests executed by API Priority and Fairness subsystem",
            labels,
        )
        self._rejected = metrics.counter(
            "apiserver_flowcontrol_rejected_requests_total",
            "Number of requests rejected by API Priority and Fairness subsystem",
            [*labels, "reason"],
        )
        self._estimated_seats = metrics.histogram(
            "apiserver_flowcontrol_work_estimated_seats",
            "Number of estimated seats (maximum of initial and final seats) associated with "
            "requests in API Priority and Fairness",
            labels,
            buckets=(1, 2, 4, 10),
        )
        self._dropped: dict[str, DroppedRequests] = {}
        """Each limited level's recent refusals, for its Retry-After."""
        self._nominal = metrics.gauge(
            "apiserver_flowcontrol_nominal_limit_seats",
            "Nominal number of execution seats configured for each priority level",
            ["priority_level"],
        )
        self._current = metrics.gauge(
            "apiserver_flowcontrol_current_limit_seats",
            "current derived number of execution seats available to each priority level",
            ["priority_level"],
        )

    # The configuration.

    def _refresh(self) -> None:
        """Digest the cached objects again if either cache moved since the last digest."""
        seen = (self.schemas.revision, self.levels.revision)
        if seen == self._seen:
            return
        self._seen = seen
        configs = {
            obj.metadata.name or "": obj
            for obj in self.levels.objects()
            if isinstance(obj, PriorityLevelConfiguration)
        }
        for mandatory in bootstrap.MANDATORY_LEVELS:  # never without exempt and catch-all
            configs.setdefault(mandatory.metadata.name or "", mandatory)
        shares = {name: _shares(config) for name, config in configs.items()}
        total = sum(shares.values()) or 1
        now = self.clock.monotonic()
        levels: dict[str, Level] = {}
        for name, config in configs.items():
            nominal = math.ceil(self.server_limit * shares[name] / total)
            self._nominal.set(name, value=nominal)
            level = self._levels.get(name)
            queuing = _queuing(config)
            exempt = config.spec is None or config.spec.type == "Exempt"
            if level is None or (level.queues is None) != exempt:
                queues = None if exempt else QueueSet(nominal, *queuing)
                level = Level(config, nominal, queues, borrowing.SeatDemand(now))
            level.config, level.nominal = config, nominal
            level.lower, level.upper = _bounds(config, nominal, self.server_limit)
            if level.queues is not None:
                limit = max(level.lower, min(level.upper, level.queues.limit))
                self._current.set(name, value=limit)
                self._wake(level.queues.configure(limit, *queuing, now))
            levels[name] = level
        self._levels = levels
        schemas = {
            obj.metadata.name or "": obj
            for obj in self.schemas.objects()
            if isinstance(obj, FlowSchema)
        }
        for mandatory_schema in bootstrap.MANDATORY_SCHEMAS:
            schemas.setdefault(mandatory_schema.metadata.name or "", mandatory_schema)
        self._ordered = classify.ordered(fs for fs in schemas.values() if _level_name(fs) in levels)

    def classify(self, user: User, info: RequestInfo) -> Classification:
        """The schema, level and flow of a request (catch-all when nothing else matches)."""
        self._refresh()
        schema = classify.match(self._ordered, user, info)
        if schema is None:  # only if the catch-all schema was changed to match less
            schema = next(fs for fs in self._ordered if fs.metadata.name == CATCH_ALL)
        return Classification(
            schema, self._levels[_level_name(schema)], classify.distinguisher(schema, user, info)
        )

    # The request path.

    @contextlib.asynccontextmanager
    async def seat(
        self, c: Classification, width: Width, details: dict[str, str]
    ) -> AsyncIterator[Seat]:
        """Hold the request's seats at its level while the body runs and ``width.linger``
        seconds longer (the body may give them back earlier: a watch, once it is set up);
        no seats: the level is not asked.  429 if the level cannot take the request in time."""
        seats = width.seats
        labels = (c.level.config.metadata.name or "", c.schema.metadata.name or "")
        queues = c.level.queues if seats else None
        request = Request(labels[1], c.distinguisher, seats, self.clock.monotonic(), details)
        if queues is not None:
            self._estimated_seats.observe(seats, *labels)
            outcome = queues.offer(request, request.arrived)
            self._note_demand(c.level)
            if outcome not in (EXECUTE, QUEUED):
                self._reject(labels, outcome)
            if outcome == QUEUED:
                await self._wait(c.level, request, labels)
        self._executing.inc(*labels)
        self._dispatched.inc(*labels)

        def give_back() -> None:
            self._executing.inc(*labels, amount=-1)
            if queues is not None:
                self._wake(queues.finish(request, self.clock.monotonic()))
                self._note_demand(c.level)

        seat = Seat(give_back)
        try:
            yield seat
        finally:
            if width.linger:
                asyncio.get_running_loop().call_later(width.linger, seat.release)
            else:
                seat.release()

    async def _wait(self, level: Level, request: Request, labels: tuple[str, str]) -> None:
        queues = level.queues
        assert queues is not None
        future = asyncio.get_running_loop().create_future()
        self._waiters[request] = future
        self._inqueue.inc(*labels)
        try:
            async with asyncio.timeout(self.wait_limit):
                await future
        except TimeoutError:
            if queues.withdraw(request, timed_out=True):
                self._reject(labels, "time-out")
        except asyncio.CancelledError:
            if not queues.withdraw(request, timed_out=False):  # started meanwhile: give back
                self._wake(queues.finish(request, self.clock.monotonic()))
            else:
                self._rejected.inc(*labels, "cancelled")
            raise
        finally:
            self._waiters.pop(request, None)
            self._inqueue.inc(*labels, amount=-1)
            self._note_demand(level)

    def _reject(self, labels: tuple[str, str], reason: str) -> NoReturn:
        """Refuse with 429 and a Retry-After that grows while the level keeps refusing."""
        self._rejected.inc(*labels, reason)
        dropped = self._dropped.setdefault(labels[0], DroppedRequests())
        dropped.record(int(self.clock.now().timestamp()))
        raise errors.too_many_requests(dropped.retry_after)

    def _note_demand(self, level: Level) -> None:
        if level.queues is not None:
            level.demand.set(level.queues.demand, self.clock.monotonic())

    def adjust(self) -> None:
        """Lend and borrow seats between the limited levels by their recent demand (see
        ``borrowing``); the controller calls it every ``borrowing.PERIOD`` seconds."""
        self._refresh()
        now = self.clock.monotonic()
        limited = [(n, lv) for n, lv in sorted(self._levels.items()) if lv.queues is not None]
        items = []
        for _, level in limited:
            level.smoothed = borrowing.smooth(level.smoothed, level.demand.reset(now))
            items.append(borrowing.Bounds(level.lower, level.upper, level.smoothed))
        limits = borrowing.allocate(sum(level.nominal for _, level in limited), items)
        for (name, level), limit in zip(limited, limits, strict=True):
            assert level.queues is not None
            self._current.set(name, value=limit)
            self._wake(level.queues.configure(limit, *_queuing(level.config), now))

    def _wake(self, started: Sequence[Request]) -> None:
        for request in started:
            future = self._waiters.get(request)
            if future is not None and not future.done():
                future.set_result(None)

    # Beside the request path.

    async def start(self) -> None:
        """Store the bootstrap configuration, then, in the background: keep it current (every
        ``ENSURE_EVERY`` seconds, and within a second of a mandatory object being deleted or
        changed), the FlowSchemas' Dangling condition (every second) and the levels' current
        limits (``adjust``, every ``borrowing.PERIOD`` seconds)."""
        await bootstrap.ensure(self.schemas.store, self.levels.store)
        self._task = asyncio.create_task(self._run(self.clock.monotonic()), name="flowcontrol")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self, last_ensure: float) -> None:
        schemas_store, levels_store = self.schemas.store, self.levels.store
        last_adjust = last_ensure
        while True:
            try:
                if self.clock.monotonic() - last_adjust >= borrowing.PERIOD:
                    self.adjust()
                    last_adjust = self.clock.monotonic()
                due = self.clock.monotonic() - last_ensure >= ENSURE_EVERY
                if due or bootstrap.mandatory_changed(
                    self.levels.objects(), self.schemas.objects()
                ):
                    await bootstrap.ensure(schemas_store, levels_store)
                    last_ensure = self.clock.monotonic()
                await self._mark_dangling(schemas_store)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("keeping the flow-control configuration failed; retrying")
            await self.clock.sleep(1.0)

    async def _mark_dangling(self, store: ResourceStore) -> None:
        present = {obj.metadata.name for obj in self.levels.objects()}
        for schema in self.schemas.objects():
            if not isinstance(schema, FlowSchema):
                continue
            wanted = dangling_condition(_level_name(schema), _level_name(schema) in present)
            conditions = (schema.status.conditions if schema.status else None) or []
            current = next((c for c in conditions if c.type == DANGLING), None)
            if current is not None and (current.status, current.reason, current.message) == (
                wanted.status,
                wanted.reason,
                wanted.message,
            ):
                continue
            wanted.last_transition_time = self.clock.now().replace(microsecond=0)
            others = [c for c in conditions if c.type != DANGLING]
            updated = _with_conditions(schema, [*others, wanted])
            try:
                await store.update(
                    "", schema.metadata.name or "", updated, bootstrap.SYSTEM, "status"
                )
            except errors.ApiError as error:
                if error.code not in (404, 409):
                    raise

    # The debug endpoints.

    def dump(self, what: str, include_details: bool = False) -> str:
        """``dump_priority_levels``, ``dump_queues`` or ``dump_requests`` as upstream writes
        them (comma-and-tab separated columns, aligned); KeyError for another name."""
        self._refresh()
        if what == "dump_priority_levels":
            return tabwrite(self._priority_level_rows())
        if what == "dump_queues":
            return tabwrite(self._queue_rows())
        if what == "dump_requests":
            return tabwrite(self._request_rows(include_details))
        raise KeyError(what)

    def _sorted_levels(self) -> list[tuple[str, Level]]:
        return sorted(self._levels.items())

    def _priority_level_rows(self) -> list[list[str]]:
        rows = [
            [
                "PriorityLevelName",
                "ActiveQueues",
                "IsIdle",
                "IsQuiescing",
                "WaitingRequests",
                "ExecutingRequests",
                "DispatchedRequests",
                "RejectedRequests",
                "TimedoutRequests",
                "CancelledRequests",
            ]
        ]
        for name, level in self._sorted_levels():
            q = level.queues
            if q is None:
                rows.append([name, *["<none>"] * 9])
                continue
            active = sum(1 for queue in q.queues if queue.waiting)
            idle = q.waiting == 0 and q.executing == 0
            rows.append(
                [
                    name,
                    str(active),
                    _bool(idle),
                    "false",
                    str(q.waiting),
                    str(q.executing),
                    str(q.dispatched),
                    str(q.rejected),
                    str(q.timed_out),
                    str(q.cancelled),
                ]
            )
        return rows

    def _queue_rows(self) -> list[list[str]]:
        rows = [
            [
                "PriorityLevelName",
                "Index",
                "PendingRequests",
                "ExecutingRequests",
                "SeatsInUse",
                "NextDispatchR",
                "InitialSeatsSum",
                "MaxSeatsSum",
                "TotalWorkSum",
            ]
        ]
        for name, level in self._sorted_levels():
            if level.queues is None:
                rows.append([name, *["<none>"] * 8])
                continue
            for index, queue in enumerate(level.queues.queues):
                seats = str(queue.waiting_seats)
                rows.append(
                    [
                        name,
                        str(index),
                        str(len(queue.waiting)),
                        str(queue.executing),
                        str(queue.seats_in_use),
                        f"{queue.virtual_start:.8f}ss",
                        seats,
                        seats,
                        f"{queue.waiting_seats:.8f}ss",
                    ]
                )
        return rows

    def _request_rows(self, include_details: bool) -> list[list[str]]:
        header = [
            "PriorityLevelName",
            "FlowSchemaName",
            "QueueIndex",
            "RequestIndexInQueue",
            "FlowDistingsher",
            "ArriveTime",
            "InitialSeats",
            "FinalSeats",
            "AdditionalLatency",
            "StartTime",
        ]
        detail_columns = [
            "UserName",
            "Verb",
            "APIPath",
            "Namespace",
            "Name",
            "APIVersion",
            "Resource",
            "SubResource",
        ]
        rows = [header + (detail_columns if include_details else [])]
        wall = self.clock.now()
        mono = self.clock.monotonic()
        for name, level in self._sorted_levels():
            if level.queues is None:
                continue
            for index, queue in enumerate(level.queues.queues):
                for position, request in enumerate(queue.waiting):
                    arrived = wall - datetime.timedelta(seconds=mono - request.arrived)
                    row = [
                        name,
                        request.flow_schema,
                        str(index),
                        str(position),
                        request.distinguisher,
                        arrived.isoformat(),
                        str(request.seats),
                        "0",
                        "0s",
                        "0001-01-01T00:00:00Z",
                    ]
                    if include_details:
                        row += [request.details.get(c, "") for c in detail_columns]
                    rows.append(row)
        return rows


@dataclasses.dataclass(frozen=True)
class Width:
    """What a request takes from its level: ``seats``, for as long as it runs plus
    ``linger`` seconds (the work its watch events make after it answered)."""

    seats: int
    linger: float = 0.0


class WatchTracker:
    """The open watches by what they watch (group, resource, namespace, name), so that a
    change can be charged for the watches it will notify (upstream's watch tracker)."""

    def __init__(self) -> None:
        self._count: collections.Counter[tuple[str, str, str, str]] = collections.Counter()

    def watching(self, info: RequestInfo, delta: int) -> None:
        """A watch described by ``info`` opened (1) or closed (-1)."""
        key = _watch_key(info)
        self._count[key] += delta
        if self._count[key] <= 0:
            del self._count[key]

    def interested(self, info: RequestInfo) -> int:
        """The watches a change by ``info`` notifies: those of the whole resource, of its
        namespace, and of the object itself (none for a read)."""
        if info.verb in READ_ONLY_VERBS:
            return 0
        group, resource = info.group, info.resource
        keys = {(group, resource, "", ""), (group, resource, info.namespace, "")}
        keys.add((group, resource, info.namespace, info.name))
        return sum(self._count[key] for key in keys)


def _watch_key(info: RequestInfo) -> tuple[str, str, str, str]:
    """A watch of one object names it in its path or with ``fieldSelector=metadata.name=``."""
    name = info.name
    if not name and info.field_selector:
        with contextlib.suppress(FieldSelectorError):
            name = parse_field_selector(info.field_selector).value_for("metadata.name") or ""
    return (info.group, info.resource, info.namespace, name)


def mutating_width(watches: int) -> Width:
    """Upstream's mutating work estimate: one seat, or, from 10 interested watches on, one
    seat per 10 of them (at most 10), held for the events' cost spread over those seats."""
    if watches < WATCHES_PER_SEAT:
        return Width(1)
    seats = math.ceil(watches / WATCHES_PER_SEAT)
    narrowed = min(MAX_SEATS, seats)
    return Width(narrowed, seats * EVENT_SECONDS / narrowed)


def list_seats(stored: int, query: Mapping[str, str]) -> int:
    """The seats a list of a resource holding ``stored`` objects takes, as upstream's list
    work estimator: a list from the watch cache goes through every object; one from the
    store reads ``limit`` of them (all of them too if a selector filters them) and encodes
    them."""
    asked = _count(query.get("limit"))  # a bad limit is the list handler's to refuse
    limit = asked if 0 < asked < stored else stored
    if serves_list(
        query.get("resourceVersion"),
        query.get("resourceVersionMatch"),
        asked,
        query.get("continue"),
    ):
        objects = stored
    elif query.get("labelSelector") or query.get("fieldSelector"):
        objects = stored + limit
    else:
        objects = 2 * limit
    return min(MAX_SEATS, max(1, math.ceil(objects / OBJECTS_PER_SEAT)))


def _count(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def long_running(info: RequestInfo) -> bool:
    """Whether a request is long-running as upstream's apiserver counts them (watch and proxy
    verbs; attach, exec, log, portforward and proxy subresources): those other than watches
    take no seat at all."""
    return info.verb in ("watch", "proxy") or info.subresource in (
        "attach",
        "exec",
        "log",
        "portforward",
        "proxy",
    )


def tabwrite(rows: Sequence[Sequence[str]]) -> str:
    """Rows as upstream's debug dumps print them: cells joined by ",\\t" through Go's
    tabwriter (minimum width 8, padding 1, spaces), the last cell of a line not padded."""
    widths = [max(8, max(len(row[i]) + 1 for row in rows) + 1) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [(cell + ",").ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("".join(cells) + row[-1] + "\n")
    return "".join(lines)


def dangling_condition(level: str, present: bool) -> FlowSchemaCondition:
    """Upstream's Dangling condition for a FlowSchema whose level is (or is not) there."""
    if present:
        return FlowSchemaCondition(
            type=DANGLING,
            status="False",
            reason="Found",
            message=f"This FlowSchema references the PriorityLevelConfiguration object named "
            f'"{level}" and it exists',
        )
    return FlowSchemaCondition(
        type=DANGLING,
        status="True",
        reason="NotFound",
        message=f"This FlowSchema references the PriorityLevelConfiguration object named "
        f'"{level}" but there is no such object',
    )


def _with_conditions(schema: FlowSchema, conditions: list[FlowSchemaCondition]) -> FlowSchema:
    updated = copy.deepcopy(schema)
    updated.status = FlowSchemaStatus(conditions=conditions)
    return updated


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _level_name(schema: FlowSchema) -> str:
    ref = schema.spec.priority_level_configuration if schema.spec else None
    return (ref.name if ref else None) or ""


def _shares(config: PriorityLevelConfiguration) -> int:
    spec = config.spec
    if spec is None:
        return 0
    if spec.limited is not None:
        return spec.limited.nominal_concurrency_shares or 0
    if spec.exempt is not None:
        return spec.exempt.nominal_concurrency_shares or 0
    return 0


def _bounds(config: PriorityLevelConfiguration, nominal: int, total: int) -> tuple[int, int]:
    limited = config.spec.limited if config.spec else None
    if limited is None:
        return nominal, nominal
    return borrowing.bounds(
        nominal, limited.lendable_percent or 0, limited.borrowing_limit_percent, total
    )


def _queuing(config: PriorityLevelConfiguration) -> tuple[int, int, int]:
    """(queues, hand size, queue length limit); no queues for a level that rejects."""
    limited = config.spec.limited if config.spec else None
    queuing = limited.limit_response.queuing if limited and limited.limit_response else None
    if queuing is None:
        return 0, 0, 0
    return queuing.queues or 0, queuing.hand_size or 0, queuing.queue_length_limit or 0
