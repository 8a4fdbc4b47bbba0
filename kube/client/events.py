"""Recording Events, as client-go's ``tools/record`` (broadcaster, correlator, sink) and, for
new-style events, ``tools/events``.

A component reports what it did (``Scheduled``, ``FailedScheduling``, ``Killing``) through
``recorder.event(obj, type, reason, message)``.  Recording must never get in the way of the
work being reported, so ``event`` only builds the Event and queues it: it never blocks, never
raises, and drops the event (with a warning) when the queue holds ``MAX_QUEUED_EVENTS``
already.  One background task (``start``) takes events off the queue in order and:

1. **Correlates** them, as client-go's ``EventCorrelator``/``eventLogger``: an event equal to
   one sent within ``aggregation_window`` (same source, involved object, type, reason and
   message) is not created again; the existing Event is PATCHed with ``count`` + 1 and a new
   ``lastTimestamp``.  The cache is an LRU of ``CACHE_SIZE`` keys, updated only from what the
   server accepted.  If the Event to patch is gone (expired by the server's TTL), it is
   created again under its name.
2. **Filters spam**, as ``EventSourceObjectSpamFilter``: a token bucket per source and
   involved object, ``SPAM_BURST`` events, refilled by one every ``1 / SPAM_QPS`` seconds
   (5 minutes); events beyond it are dropped.  Repeats count as well.
3. **Sends** with retries, as ``recordToSink``: a failure to reach the server (or a 429/5xx
   that the client's own retries did not get past) is retried up to ``max_tries`` times,
   ``retry_interval`` apart (the first pause jittered); any other refusal is final.  Failures
   are logged at warning level and never raised.

``for_component(name)`` gives another component a recorder of its own over the same queue,
correlator, spam filter and sending task, as upstream's controllers each name their own
``EventSource`` (``deployment-controller``, ``horizontal-pod-autoscaler``...) while the
kube-controller-manager runs them in one process: one sender, many sources.

``flush()`` waits until the queue is empty.  ``close()`` stops accepting events and flushes;
once closing, a retry pause is cut short for one last attempt and an event that fails then is
not retried again, so shutdown never waits long on an unreachable server.

``event_for`` builds the Event alone (a pure function): named ``<object>.<unix nanoseconds in
hex>`` as upstream, in the object's namespace (``default`` for cluster-scoped objects), with
``source``, ``reportingComponent`` and ``reportingInstance`` from the recorder.

``EventRecorder`` is the recorder upstream's kubelet and kube-controller-manager still use in
1.36.  Upstream's kube-scheduler records through events.k8s.io/v1 instead (client-go's
``tools/events``), and so does kubelab's, through ``SeriesEventRecorder``: new-style events
(``new_event_for``: an ``eventTime``, an ``action``, the reporting controller and instance)
whose repeats are kept as a ``series`` (see the class).  The API server serves the same
objects in both groups, so either kind of event reads through either.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import logging
import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol, Self, TypeVar

import msgspec

from kube.api.kinds import events_v1
from kube.api.kinds.core_v1.cluster import Event, EventSeries, EventSource
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.meta_v1 import ObjectMeta, Resource
from kube.api.struct import micro_time, parse_micro_time
from kube.client.errors import ApiError, ClientError
from kube.clock import Clock, RealClock

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Resource)

NORMAL = "Normal"
WARNING = "Warning"
EVENT_TYPES = (NORMAL, WARNING)

MAX_QUEUED_EVENTS = 1000
"""Events waiting to be sent before new ones are dropped (client-go's ``maxQueuedEvents``)."""
CACHE_SIZE = 4096
"""Keys remembered by the correlator and the spam filter (client-go's ``maxLruCacheEntries``)."""
AGGREGATION_WINDOW = 600.0
"""Seconds after which a repeat starts a new Event instead of counting (client-go's 10 min)."""
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
MAX_TRIES = 12
RETRY_INTERVAL = 10.0
FINISH_TIME = 6 * 60.0
"""Seconds after its last occurrence that a series ends (client-go ``tools/events``)."""
REFRESH_TIME = 30 * 60.0
"""Seconds between writes of a running series' count (client-go ``tools/events``)."""

_DEFAULT_NAMESPACE = "default"


class EventClient(Protocol):
    """What the recorder needs of ``kube.client.rest.Client``."""

    async def create(self, obj: R, *, field_manager: str | None = None) -> R: ...

    async def patch(
        self,
        cls: type[R],
        name: str,
        namespace: str | None,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str = "",
        field_manager: str | None = None,
        force: bool = False,
    ) -> R: ...


def involved_object(obj: Resource) -> ObjectReference:
    """The reference an Event makes to ``obj``: kind, apiVersion, namespace, name, uid, rv."""
    return ObjectReference(
        kind=obj.kind or getattr(obj, "KIND", None),
        api_version=obj.api_version or getattr(obj, "API_VERSION", None),
        namespace=obj.metadata.namespace,
        name=obj.metadata.name,
        uid=obj.metadata.uid,
        resource_version=obj.metadata.resource_version,
    )


def event_for(
    obj: Resource,
    type: str,
    reason: str,
    message: str,
    *,
    component: str,
    host: str | None = None,
    now: datetime.datetime,
    name: str | None = None,
    action: str | None = None,
    related: Resource | None = None,
) -> Event:
    """A new Event (count 1) about ``obj``, happening ``now``; named from ``now`` if not given.

    Read-only and deterministic: nothing is sent, nothing is remembered.
    """
    ref = involved_object(obj)
    moment = now.astimezone(datetime.UTC)
    seconds = moment.replace(microsecond=0)
    return Event(
        metadata=_event_meta(ref, moment, name),
        involved_object=ref,
        reason=reason,
        message=message,
        source=EventSource(component=component, host=host or None),
        first_timestamp=seconds,
        last_timestamp=seconds,
        count=1,
        type=type,
        action=action,
        related=involved_object(related) if related is not None else None,
        reporting_component=component,
        reporting_instance=host or None,
    )


def new_event_for(
    obj: Resource,
    type: str,
    reason: str,
    note: str,
    *,
    action: str,
    controller: str,
    instance: str,
    now: datetime.datetime,
    name: str | None = None,
    related: Resource | None = None,
) -> Event:
    """A new-style Event about ``obj``, as client-go's ``tools/events`` recorder makes it
    (stored as core/v1, sent through events.k8s.io/v1): an eventTime and an action, the
    reporting controller and instance, and none of the deprecated fields.  Pure, as
    ``event_for``."""
    ref = involved_object(obj)
    moment = now.astimezone(datetime.UTC)
    return Event(
        metadata=_event_meta(ref, moment, name),
        involved_object=ref,
        reason=reason,
        message=note,
        type=type,
        event_time=micro_time(moment),
        action=action,
        related=involved_object(related) if related is not None else None,
        reporting_component=controller,
        reporting_instance=instance,
    )


def _event_meta(ref: ObjectReference, moment: datetime.datetime, name: str | None) -> ObjectMeta:
    """Named ``<object>.<unix nanoseconds in hex>`` in the object's namespace, as upstream."""
    return ObjectMeta(
        name=name or f"{ref.name}.{_unix_nanos(moment):x}",
        namespace=ref.namespace or _DEFAULT_NAMESPACE,
    )


def _unix_nanos(moment: datetime.datetime) -> int:
    delta = moment - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _source_object(event: Event) -> tuple[str, ...]:
    source = event.source or EventSource()
    ref = event.involved_object or ObjectReference()
    return (
        source.component or "",
        source.host or "",
        ref.kind or "",
        ref.namespace or "",
        ref.name or "",
        ref.uid or "",
        ref.api_version or "",
    )


def _correlation_key(event: Event) -> tuple[str, ...]:
    """client-go's ``getEventKey``: what makes two events the same event."""
    ref = event.involved_object or ObjectReference()
    return (
        *_source_object(event),
        ref.field_path or "",
        event.type or "",
        event.reason or "",
        event.message or "",
    )


@dataclass(frozen=True)
class _Occurrence:
    """What a caller of ``event`` reported, before it becomes an Event."""

    obj: Resource
    type: str
    reason: str
    message: str
    action: str | None
    related: Resource | None


@dataclass
class _Seen:
    """An Event the server holds, as the correlator remembers it."""

    name: str
    namespace: str
    count: int
    first_timestamp: datetime.datetime | None
    last_seen: float  # monotonic


@dataclass
class _Sending:
    """What every recorder made by ``for_component`` from one recorder shares besides its
    queue and caches: the sending task and the last name's nanoseconds."""

    task: asyncio.Task[None] | None = None
    last_nanos: int = 0


@dataclass
class _Bucket:
    tokens: float
    updated: float  # monotonic


class _SpamFilter:
    """A token bucket per source and involved object; an LRU of ``CACHE_SIZE`` of them."""

    def __init__(self, burst: int, qps: float, clock: Clock) -> None:
        self.burst = burst
        self.qps = qps
        self.clock = clock
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()

    def allow(self, event: Event) -> bool:
        key = _source_object(event)
        now = self.clock.monotonic()
        bucket = self._buckets.pop(key, None) or _Bucket(float(self.burst), now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.qps)
        bucket.updated = now
        self._buckets[key] = bucket
        if len(self._buckets) > CACHE_SIZE:
            self._buckets.popitem(last=False)
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True


class EventRecorder:
    """Records Events for one component; see the module docstring.

    ``start()`` (inside the running loop) begins sending; ``close()`` flushes and stops.  Use
    ``async with`` for both.  ``event`` may be called before ``start``: events wait queued.
    """

    def __init__(
        self,
        client: EventClient,
        component: str,
        host: str | None = None,
        clock: Clock | None = None,
        *,
        max_tries: int = MAX_TRIES,
        retry_interval: float = RETRY_INTERVAL,
        aggregation_window: float = AGGREGATION_WINDOW,
        spam_burst: int = SPAM_BURST,
        spam_qps: float = SPAM_QPS,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host
        self.clock = clock or RealClock()
        self.max_tries = max(1, max_tries)
        self.retry_interval = retry_interval
        self.aggregation_window = aggregation_window
        self._spam = _SpamFilter(spam_burst, spam_qps, self.clock)
        self._seen: OrderedDict[tuple[str, ...], _Seen] = OrderedDict()
        self._queue: asyncio.Queue[Event] = asyncio.Queue(MAX_QUEUED_EVENTS)
        self._sending = _Sending()
        self._closing = asyncio.Event()

    def for_component(self, component: str) -> Self:
        """A recorder whose events name ``component`` and that shares everything else with
        this one (queue, correlator, spam filter, sending task): starting, flushing or
        closing either acts on both."""
        other = copy.copy(self)
        other.component = component
        return other

    async def __aenter__(self) -> EventRecorder:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    def event(
        self,
        obj: Resource,
        type: str,
        reason: str,
        message: str,
        *,
        action: str | None = None,
        related: Resource | None = None,
    ) -> None:
        """Queue an Event about ``obj`` (what was done to it, ``action``, and with what other
        object, ``related``, where the caller says): never blocks, never raises (drops, with
        a log)."""
        if type not in EVENT_TYPES:
            log.error("unsupported event type %r (reason %s): dropped", type, reason)
            return
        if self._closing.is_set():
            log.warning("event recorder closed: dropping %s event about %s", reason, _what(obj))
            return
        now = self.clock.now()
        # Names come from the time in nanoseconds; two events in one nanosecond (or on a
        # clock that stands still) must still get different names.
        sending = self._sending
        sending.last_nanos = max(_unix_nanos(now), sending.last_nanos + 1)
        name = f"{obj.metadata.name}.{sending.last_nanos:x}"
        try:
            self._queue.put_nowait(
                self._build(_Occurrence(obj, type, reason, message, action, related), now, name)
            )
        except asyncio.QueueFull:
            log.warning("event queue full: dropping %s event about %s", reason, _what(obj))

    def _build(self, what: _Occurrence, now: datetime.datetime, name: str) -> Event:
        return event_for(
            what.obj,
            what.type,
            what.reason,
            what.message,
            component=self.component,
            host=self.host,
            now=now,
            name=name,
            action=what.action,
            related=what.related,
        )

    async def start(self) -> None:
        """Begin sending queued events (idempotent)."""
        if self._sending.task is None:
            self._sending.task = asyncio.create_task(self._run(), name=f"events:{self.component}")

    async def flush(self) -> None:
        """Wait until every event queued so far has been sent (or given up on)."""
        if self._sending.task is None:
            raise RuntimeError("flush() needs a started recorder")
        await self._queue.join()

    async def close(self) -> None:
        """Stop accepting events, send those queued (no more retries), stop the sender."""
        self._closing.set()
        task = self._sending.task
        if task is None:
            while not self._queue.empty():
                await self._record(self._queue.get_nowait())
                self._queue.task_done()
            return
        await self._queue.join()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._record(event)
            except Exception:  # the sender outlives any one event's bug; nobody to raise to
                log.exception("recording event %s failed", event.metadata.name)
            finally:
                self._queue.task_done()

    async def _record(self, event: Event) -> None:
        """Correlate, filter, send with retries; remember what the server accepted."""
        key = _correlation_key(event)
        seen = self._seen.get(key)
        if seen is not None and self.clock.monotonic() - seen.last_seen > self.aggregation_window:
            seen = None
        if seen is not None:
            event.metadata.name = seen.name
            event.count = seen.count + 1
            event.first_timestamp = seen.first_timestamp
        if not self._spam.allow(event):
            log.debug("event %s (%s) dropped by the spam filter", event.metadata.name, event.reason)
            return
        sent = await self._deliver(event, update=seen is not None)
        if sent is not None:
            self._remember(key, sent, event)

    async def _deliver(self, event: Event, *, update: bool) -> Event | None:
        """Send with retries (see the module docstring); what the server holds, or None."""
        for attempt in range(1, self.max_tries + 1):
            try:
                return await self._send(event, update=update)
            except (ApiError, ClientError) as error:
                if isinstance(error, ApiError) and error.already_exists:
                    log.debug("event %s exists already: %s", event.metadata.name, error)
                    return None
                final = (
                    isinstance(error, ApiError) and not error.retryable
                ) or self._closing.is_set()
                log.warning(
                    "sending event %s/%s (%s) failed (attempt %d of %d%s): %s",
                    event.metadata.namespace,
                    event.metadata.name,
                    event.reason,
                    attempt,
                    self.max_tries,
                    ", giving up" if final or attempt == self.max_tries else "",
                    error,
                )
                if final or attempt == self.max_tries:
                    return None
                pause = self.retry_interval * (random.random() if attempt == 1 else 1.0)
                await self._pause(pause)
        return None

    async def _send(self, event: Event, *, update: bool) -> Event:
        namespace = event.metadata.namespace or _DEFAULT_NAMESPACE
        name = event.metadata.name or ""
        if update:
            patch = {"count": event.count, "lastTimestamp": event.last_timestamp}
            try:
                return await self.client.patch(Event, name, namespace, patch, patch_type="merge")
            except ApiError as error:
                if not error.not_found:
                    raise
                # Gone (the server's event TTL): create it again, as client-go does.
        event.metadata.resource_version = None
        return await self.client.create(event)

    def _remember(self, key: tuple[str, ...], sent: Event, event: Event) -> None:
        self._seen.pop(key, None)
        self._seen[key] = _Seen(
            name=sent.metadata.name or event.metadata.name or "",
            namespace=sent.metadata.namespace or event.metadata.namespace or "",
            count=sent.count or event.count or 1,
            first_timestamp=sent.first_timestamp or event.first_timestamp,
            last_seen=self.clock.monotonic(),
        )
        if len(self._seen) > CACHE_SIZE:
            self._seen.popitem(last=False)

    async def _pause(self, seconds: float) -> None:
        """Sleep on the clock, cut short by ``close()``."""
        sleep = asyncio.ensure_future(self.clock.sleep(seconds))
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait({sleep, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleep.cancel()
            closing.cancel()
            await asyncio.gather(sleep, closing, return_exceptions=True)


class SeriesEventRecorder(EventRecorder):
    """Records new-style Events through events.k8s.io/v1, as client-go's ``tools/events``.

    What differs from ``EventRecorder`` (queueing, retries and closing are the same):

    - the Event has an ``eventTime``, the caller's ``action`` and ``related`` object, the
      reporting controller and ``<controller>-<hostname>`` as reporting instance;
    - repeats are kept as a ``series``: an event isomorphic to a remembered one (same action,
      reason, reporting controller, object and related object; the note may differ) is not
      created again.  The second occurrence PATCHes ``series`` {count 2, lastObservedTime};
      later ones only count, and every ``REFRESH_TIME`` the counts of running series are
      written.  A series is written a last time and forgotten ``FINISH_TIME`` after its last
      occurrence; an event without a series is forgotten ``FINISH_TIME`` after it happened;
    - there is no spam filter (``tools/events`` has none).
    """

    def __init__(
        self,
        client: EventClient,
        controller: str,
        instance: str,
        clock: Clock | None = None,
        *,
        max_tries: int = MAX_TRIES,
        retry_interval: float = RETRY_INTERVAL,
    ) -> None:
        super().__init__(
            client,
            controller,
            host=instance,
            clock=clock,
            max_tries=max_tries,
            retry_interval=retry_interval,
        )
        self._isomorphic: dict[tuple[tuple[str, ...], ...], Event] = {}

    def _build(self, what: _Occurrence, now: datetime.datetime, name: str) -> Event:
        return new_event_for(
            what.obj,
            what.type,
            what.reason,
            what.message,
            action=what.action or "",
            controller=self.component,
            instance=self.host or "",
            now=now,
            name=name,
            related=what.related,
        )

    async def _run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(super()._run())
            tasks.create_task(self._maintain())

    async def _record(self, event: Event) -> None:
        key = _isomorphic_key(event)
        known = self._isomorphic.get(key)
        if known is None:
            self._isomorphic[key] = event
            await self._write(key, event)
            return
        now = micro_time(self.clock.now())
        if known.series is not None:
            known.series.count = (known.series.count or 0) + 1
            known.series.last_observed_time = now
            return
        known.series = EventSeries(count=2, last_observed_time=now)
        await self._write(key, known)

    async def _write(self, key: tuple[tuple[str, ...], ...], event: Event) -> None:
        sent = await self._deliver(event, update=event.series is not None)
        if sent is not None and self._isomorphic.get(key) is event:
            # Keep counting from what the server holds (its name, should it have been
            # created again) and what was counted meanwhile.
            sent.series = event.series
            self._isomorphic[key] = sent

    async def _send(self, event: Event, *, update: bool) -> Event:
        namespace = event.metadata.namespace or _DEFAULT_NAMESPACE
        name = event.metadata.name or ""
        if update and event.series is not None:
            series = {
                "count": event.series.count,
                "lastObservedTime": event.series.last_observed_time,
            }
            try:
                patched = await self.client.patch(
                    events_v1.Event, name, namespace, {"series": series}, patch_type="merge"
                )
                return events_v1.to_core(patched)
            except ApiError as error:
                if not error.not_found:
                    raise
        fresh = msgspec.structs.replace(
            event, metadata=msgspec.structs.replace(event.metadata, resource_version=None)
        )
        return events_v1.to_core(await self.client.create(events_v1.from_core(fresh)))

    async def _maintain(self) -> None:
        """End old series and forget old events every FINISH_TIME; write the running series'
        counts every REFRESH_TIME."""
        since_refresh = 0.0
        while True:
            await self.clock.sleep(FINISH_TIME)
            since_refresh += FINISH_TIME
            refresh = since_refresh >= REFRESH_TIME
            if refresh:
                since_refresh = 0.0
            horizon = self.clock.now() - datetime.timedelta(seconds=FINISH_TIME)
            for key, event in list(self._isomorphic.items()):
                if event.series is None:
                    if _moment(event.event_time) < horizon:
                        del self._isomorphic[key]
                elif _moment(event.series.last_observed_time) < horizon:
                    await self._deliver(event, update=True)
                    self._isomorphic.pop(key, None)
                elif refresh:
                    await self._write(key, event)


def _moment(value: str | None) -> datetime.datetime:
    return parse_micro_time(value) if value else datetime.datetime.min.replace(tzinfo=datetime.UTC)


def _reference_key(ref: ObjectReference | None) -> tuple[str, ...]:
    ref = ref or ObjectReference()
    return (
        ref.kind or "",
        ref.namespace or "",
        ref.name or "",
        ref.uid or "",
        ref.api_version or "",
        ref.resource_version or "",
        ref.field_path or "",
    )


def _isomorphic_key(event: Event) -> tuple[tuple[str, ...], ...]:
    """client-go ``tools/events``' ``getKey``: what makes two events one series."""
    return (
        (event.action or "", event.reason or "", event.reporting_component or ""),
        _reference_key(event.involved_object),
        _reference_key(event.related),
    )


def _what(obj: Resource) -> str:
    kind = obj.kind or getattr(obj, "KIND", "object")
    namespace = obj.metadata.namespace
    return f"{kind} {namespace}/{obj.metadata.name}" if namespace else f"{kind} {obj.metadata.name}"


__all__ = [
    "AGGREGATION_WINDOW",
    "CACHE_SIZE",
    "EVENT_TYPES",
    "MAX_QUEUED_EVENTS",
    "NORMAL",
    "SPAM_BURST",
    "SPAM_QPS",
    "WARNING",
    "EventClient",
    "EventRecorder",
    "SeriesEventRecorder",
    "event_for",
    "involved_object",
    "new_event_for",
]
