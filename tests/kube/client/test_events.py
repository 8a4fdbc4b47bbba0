"""The event recorder: building Events, correlating repeats, the spam filter, retries.

Unit tests record into ``FakeEvents`` (an in-memory Event store that creates, merge-patches
``count``/``lastTimestamp`` and fails as scripted); time is a ``FakeClock``.  The integration
test at the end records against a real API server.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pytest

from kube.api.kinds.core_v1.cluster import ConfigMap, Event
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Container, Pod
from kube.api.meta_v1 import ObjectMeta, Resource, Status
from kube.client.errors import ApiError, ClientError
from kube.client.events import (
    MAX_QUEUED_EVENTS,
    SPAM_BURST,
    EventRecorder,
    event_for,
)
from kube.client.rest import Client
from kube.clock import FakeClock
from tests import builders

R = TypeVar("R", bound=Resource)

START = datetime.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=datetime.UTC)


def api_error(code: int, reason: str) -> ApiError:
    return ApiError(Status(code=code, reason=reason, message=reason))


class FakeEvents:
    """The API server's Event store, as far as the recorder sees it."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], Event] = {}
        self.revision = 0
        self.failures: deque[Exception] = deque()  # raised by the next requests, in order
        self.calls: list[str] = []

    def stored(self) -> list[Event]:
        return list(self.events.values())

    async def create(self, obj: R, *, field_manager: str | None = None) -> R:
        self.calls.append("create")
        await asyncio.sleep(0)
        if self.failures:
            raise self.failures.popleft()
        assert isinstance(obj, Event)
        key = (obj.metadata.namespace or "", obj.metadata.name or "")
        if key in self.events:
            raise api_error(409, "AlreadyExists")
        stored = copy.deepcopy(obj)
        self.revision += 1
        stored.metadata.resource_version = str(self.revision)
        stored.metadata.uid = str(uuid.uuid4())
        self.events[key] = stored
        result = copy.deepcopy(stored)
        assert isinstance(result, type(obj))
        return result

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
    ) -> R:
        self.calls.append("patch")
        await asyncio.sleep(0)
        if self.failures:
            raise self.failures.popleft()
        assert cls is Event
        assert patch_type == "merge"
        assert set(patch) == {"count", "lastTimestamp"}
        try:
            event = self.events[(namespace or "", name)]
        except KeyError:
            raise api_error(404, "NotFound") from None
        event.count = patch["count"]
        event.last_timestamp = patch["lastTimestamp"]
        self.revision += 1
        event.metadata.resource_version = str(self.revision)
        result = copy.deepcopy(event)
        assert isinstance(result, cls)
        return result


def pod(name: str = "web-0", namespace: str = "shop") -> Pod:
    built = builders.pod(
        name, namespace, uid=f"uid-{name}", containers=[Container(name="c", image="busybox")]
    )
    built.metadata.resource_version = "7"
    return built


def node(name: str = "node-1") -> Node:
    return Node(metadata=ObjectMeta(name=name, uid=f"uid-{name}", resource_version="3"))


async def settle() -> None:
    for _ in range(30):
        await asyncio.sleep(0)


async def advance_until(
    clock: FakeClock, condition: Callable[[], bool], *, limit: float = 300.0, step: float = 1.0
) -> None:
    start = clock.monotonic()
    await settle()
    while not condition():
        if clock.monotonic() - start > limit:
            raise AssertionError(f"condition not met within {limit} fake seconds")
        await clock.advance(step)
        await settle()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def sink() -> FakeEvents:
    return FakeEvents()


@pytest.fixture
async def recorder(sink: FakeEvents, clock: FakeClock) -> AsyncIterator[EventRecorder]:
    async with EventRecorder(sink, "default-scheduler", clock=clock) as r:
        yield r


# Building an Event.


@pytest.mark.parametrize(
    ("obj", "namespace", "kind", "api_version"),
    [
        pytest.param(pod(), "shop", "Pod", "v1", id="namespaced"),
        pytest.param(node(), "default", "Node", "v1", id="cluster-scoped"),
    ],
)
def test_event_for(obj: Resource, namespace: str, kind: str, api_version: str) -> None:
    event = event_for(
        obj,
        "Warning",
        "FailedScheduling",
        "0/3 nodes are available",
        component="default-scheduler",
        host="cp-1",
        now=START,
    )
    name = obj.metadata.name
    assert event.metadata.namespace == namespace
    assert event.metadata.name == f"{name}.{int(START.timestamp()) * 10**9 + 123_456_000:x}"
    ref = event.involved_object
    assert ref is not None
    assert (ref.kind, ref.api_version, ref.name) == (kind, api_version, name)
    assert ref.namespace == obj.metadata.namespace
    assert ref.uid == f"uid-{name}"
    assert ref.resource_version == obj.metadata.resource_version
    assert (event.type, event.reason, event.message) == (
        "Warning",
        "FailedScheduling",
        "0/3 nodes are available",
    )
    assert event.source is not None
    assert (event.source.component, event.source.host) == ("default-scheduler", "cp-1")
    assert (event.reporting_component, event.reporting_instance) == ("default-scheduler", "cp-1")
    assert event.count == 1
    assert event.first_timestamp == event.last_timestamp == START.replace(microsecond=0)
    assert event.event_time is None


def test_event_for_keeps_a_given_name_and_omits_an_absent_host() -> None:
    event = event_for(pod(), "Normal", "Scheduled", "m", component="c", now=START, name="x.1")
    assert event.metadata.name == "x.1"
    assert event.source is not None and event.source.host is None
    assert event.reporting_instance is None


# Recording.


async def test_records_an_event(recorder: EventRecorder, sink: FakeEvents) -> None:
    recorder.event(pod(), "Normal", "Scheduled", "assigned shop/web-0 to node-1")
    await recorder.flush()
    (event,) = sink.stored()
    assert event.metadata.namespace == "shop"
    assert (event.metadata.name or "").startswith("web-0.")
    assert event.reason == "Scheduled"
    assert event.count == 1
    assert event.source is not None and event.source.component == "default-scheduler"
    assert sink.calls == ["create"]


async def test_repeats_are_counted_on_one_event(
    recorder: EventRecorder, sink: FakeEvents, clock: FakeClock
) -> None:
    recorder.event(pod(), "Warning", "FailedScheduling", "no nodes")
    await recorder.flush()
    await clock.advance(30.0)
    recorder.event(pod(), "Warning", "FailedScheduling", "no nodes")
    await recorder.flush()
    await clock.advance(30.0)
    recorder.event(pod(), "Warning", "FailedScheduling", "no nodes")
    await recorder.flush()
    (event,) = sink.stored()
    assert event.count == 3
    assert event.first_timestamp == START.replace(microsecond=0)
    assert event.last_timestamp == (START + datetime.timedelta(seconds=60)).replace(microsecond=0)
    assert sink.calls == ["create", "patch", "patch"]


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(("Warning", "FailedScheduling", "other message", "web-0"), id="message"),
        pytest.param(("Warning", "Preempted", "no nodes", "web-0"), id="reason"),
        pytest.param(("Normal", "FailedScheduling", "no nodes", "web-0"), id="type"),
        pytest.param(("Warning", "FailedScheduling", "no nodes", "web-1"), id="object"),
    ],
)
async def test_different_events_are_not_aggregated(
    recorder: EventRecorder, sink: FakeEvents, second: tuple[str, str, str, str]
) -> None:
    recorder.event(pod(), "Warning", "FailedScheduling", "no nodes")
    type_, reason, message, name = second
    recorder.event(pod(name), type_, reason, message)
    await recorder.flush()
    assert len(sink.stored()) == 2
    assert sink.calls == ["create", "create"]
    assert {e.count for e in sink.stored()} == {1}


async def test_a_repeat_after_the_window_is_a_new_event(
    recorder: EventRecorder, sink: FakeEvents, clock: FakeClock
) -> None:
    recorder.event(pod(), "Normal", "Pulled", "image present")
    await recorder.flush()
    await clock.advance(601.0)
    recorder.event(pod(), "Normal", "Pulled", "image present")
    await recorder.flush()
    assert len(sink.stored()) == 2
    assert sink.calls == ["create", "create"]


async def test_a_vanished_event_is_created_again(recorder: EventRecorder, sink: FakeEvents) -> None:
    recorder.event(pod(), "Normal", "Pulled", "image present")
    await recorder.flush()
    (first,) = sink.stored()
    sink.events.clear()  # the server's TTL
    recorder.event(pod(), "Normal", "Pulled", "image present")
    await recorder.flush()
    (again,) = sink.stored()
    assert again.metadata.name == first.metadata.name
    assert again.count == 2
    assert sink.calls == ["create", "patch", "create"]


async def test_names_are_unique_when_the_clock_stands_still(
    recorder: EventRecorder, sink: FakeEvents
) -> None:
    for i in range(5):
        recorder.event(pod(), "Normal", f"Reason{i}", "m")
    await recorder.flush()
    assert len({e.metadata.name for e in sink.stored()}) == 5


async def test_recorders_for_components_share_one_sender(
    recorder: EventRecorder, sink: FakeEvents
) -> None:
    """As the controller-manager's controllers: each names its own source, one task sends,
    names stay unique across them, and closing the first closes them all."""
    deployments = recorder.for_component("deployment-controller")
    autoscaler = recorder.for_component("horizontal-pod-autoscaler")
    for which in (recorder, deployments, autoscaler, deployments):
        which.event(pod(), "Normal", "ScalingReplicaSet", "Scaled up")
    await autoscaler.flush()
    sources = [e.source.component or "" for e in sink.stored() if e.source]
    assert sorted(sources) == [
        "default-scheduler",
        "deployment-controller",
        "horizontal-pod-autoscaler",
    ]
    counts = {e.source.component: e.count for e in sink.stored() if e.source}
    assert counts["deployment-controller"] == 2
    await recorder.close()
    autoscaler.event(pod(), "Normal", "Late", "after close")
    assert sink.calls == ["create", "create", "create", "patch"]


# The spam filter.


async def test_spam_filter_drops_beyond_the_burst_and_refills(
    recorder: EventRecorder, sink: FakeEvents, clock: FakeClock
) -> None:
    for i in range(SPAM_BURST + 5):
        recorder.event(pod(), "Normal", f"Reason{i}", "m")
    recorder.event(pod("web-1"), "Normal", "Reason0", "m")  # another object, its own bucket
    await recorder.flush()
    about = [e.involved_object.name for e in sink.stored() if e.involved_object]
    assert about.count("web-0") == SPAM_BURST
    assert about.count("web-1") == 1

    await clock.advance(299.0)
    recorder.event(pod(), "Normal", "Late", "m")
    await recorder.flush()
    assert len(sink.stored()) == SPAM_BURST + 1
    await clock.advance(1.0)  # one token per 5 minutes
    recorder.event(pod(), "Normal", "Later", "m")
    recorder.event(pod(), "Normal", "EvenLater", "m")
    await recorder.flush()
    assert len(sink.stored()) == SPAM_BURST + 2
    assert sink.stored()[-1].reason == "Later"


# Failures.


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(ClientError("connection refused"), id="unreachable"),
        pytest.param(api_error(503, "ServiceUnavailable"), id="unavailable"),
        pytest.param(api_error(429, "TooManyRequests"), id="throttled"),
    ],
)
async def test_transient_failures_are_retried(
    recorder: EventRecorder, sink: FakeEvents, clock: FakeClock, failure: Exception
) -> None:
    sink.failures.extend([failure, failure])
    recorder.event(pod(), "Normal", "Scheduled", "m")
    await advance_until(clock, lambda: bool(sink.stored()))
    assert sink.calls == ["create"] * 3
    assert clock.monotonic() <= 10.0 + 10.0 + 1.0  # a jittered pause, then retry_interval


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(api_error(422, "Invalid"), id="invalid"),
        pytest.param(api_error(403, "Forbidden"), id="forbidden"),
        pytest.param(api_error(409, "AlreadyExists"), id="already-exists"),
    ],
)
async def test_refusals_are_final_and_never_raised(
    recorder: EventRecorder, sink: FakeEvents, failure: Exception
) -> None:
    sink.failures.append(failure)
    recorder.event(pod(), "Normal", "Scheduled", "m")
    await recorder.flush()
    assert sink.calls == ["create"]
    assert not sink.stored()
    recorder.event(pod(), "Normal", "Scheduled", "m")  # not remembered: created anew
    await recorder.flush()
    assert sink.calls == ["create", "create"]
    assert len(sink.stored()) == 1


async def test_gives_up_after_max_tries(sink: FakeEvents, clock: FakeClock) -> None:
    sink.failures.extend(ClientError("down") for _ in range(10))
    async with EventRecorder(sink, "kubelet", clock=clock, max_tries=3) as recorder:
        recorder.event(pod(), "Normal", "Started", "m")
        await advance_until(clock, lambda: len(sink.calls) == 3)
        await clock.advance(60.0)
        await recorder.flush()
    assert sink.calls == ["create"] * 3
    assert not sink.stored()


async def test_unsupported_type_is_dropped(recorder: EventRecorder, sink: FakeEvents) -> None:
    recorder.event(pod(), "Critical", "Scheduled", "m")
    await recorder.flush()
    assert sink.calls == []


# Queue and lifecycle.


async def test_close_flushes_without_retrying(sink: FakeEvents, clock: FakeClock) -> None:
    recorder = EventRecorder(sink, "kubelet", clock=clock)
    sink.failures.append(ClientError("down"))
    recorder.event(pod("a"), "Normal", "Started", "m")
    recorder.event(pod("b"), "Normal", "Started", "m")
    recorder.event(pod("c"), "Normal", "Started", "m")
    await recorder.close()  # never started: sends inline, one attempt each
    assert sink.calls == ["create"] * 3
    assert sorted(e.metadata.name or "" for e in sink.stored())[0].startswith("b.")
    assert len(sink.stored()) == 2
    recorder.event(pod("d"), "Normal", "Started", "m")  # closed: dropped
    assert len(sink.calls) == 3


async def test_close_cuts_a_retry_pause_short(sink: FakeEvents, clock: FakeClock) -> None:
    recorder = EventRecorder(sink, "kubelet", clock=clock)
    await recorder.start()
    sink.failures.extend(ClientError("down") for _ in range(10))
    recorder.event(pod(), "Normal", "Started", "m")
    await settle()
    assert clock.sleepers == 1  # pausing before the retry
    await asyncio.wait_for(recorder.close(), timeout=1.0)  # on the fake clock: no waiting
    assert sink.calls == ["create", "create"]  # one last attempt, then no more retries


async def test_a_full_queue_drops_new_events(sink: FakeEvents, clock: FakeClock) -> None:
    recorder = EventRecorder(sink, "kubelet", clock=clock)
    for i in range(MAX_QUEUED_EVENTS + 10):
        recorder.event(pod(f"p-{i}"), "Normal", "Started", "m")
    async with recorder:
        await recorder.flush()
    assert len(sink.stored()) == MAX_QUEUED_EVENTS


# Against a real API server.


async def test_records_and_aggregates_against_a_real_server(client: Client, namespace: str) -> None:
    config_map = await client.create(
        ConfigMap(metadata=ObjectMeta(name="settings", namespace=namespace), data={"a": "1"})
    )
    async with EventRecorder(client, "kubelab-tests", host="tester") as recorder:
        recorder.event(config_map, "Normal", "Configured", "settings applied")
        await recorder.flush()
        (event,) = (await client.list(Event, namespace)).items
        assert event.count == 1
        assert event.involved_object is not None
        assert event.involved_object.kind == "ConfigMap"
        assert event.involved_object.uid == config_map.metadata.uid
        assert event.source is not None and event.source.host == "tester"

        recorder.event(config_map, "Normal", "Configured", "settings applied")
        await recorder.flush()
        (again,) = (await client.list(Event, namespace)).items
        assert again.metadata.name == event.metadata.name
        assert again.count == 2
        assert again.first_timestamp == event.first_timestamp
        assert again.last_timestamp is not None and event.last_timestamp is not None
        assert again.last_timestamp >= event.last_timestamp
