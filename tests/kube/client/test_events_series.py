"""The events.k8s.io recorder (``SeriesEventRecorder``): new-style events, repeats kept as a
series, the series written on its schedule and ended, against the in-memory API with a fake
clock, and against a real API server."""

from __future__ import annotations

import asyncio
import datetime

from kube.api.kinds import events_v1
from kube.api.kinds.core_v1.cluster import ConfigMap, Event
from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import ObjectMeta
from kube.client.events import FINISH_TIME, REFRESH_TIME, SeriesEventRecorder
from kube.client.rest import Client
from tests import builders
from tests.fakeapi import FakeApi

START = datetime.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=datetime.UTC)


def pod(name: str = "web") -> Pod:
    return builders.pod(name, "default", uid=f"uid-{name}")


def series_patches(api: FakeApi) -> list[object]:
    return [a.obj for a in api.writes("patch", "Event")]


async def settle(api: FakeApi) -> None:
    for _ in range(50):
        await asyncio.sleep(0)


async def test_a_new_style_event_through_events_k8s_io() -> None:
    api = FakeApi()
    await api.clock.advance((START - api.clock.now()).total_seconds())
    recorder = SeriesEventRecorder(api, "default-scheduler", "default-scheduler-cp", api.clock)
    async with recorder:
        preemptor = pod("important")
        recorder.event(
            pod(), "Normal", "Preempted", "by important", action="Preempting", related=preemptor
        )
        await recorder.flush()
    (created,) = [a for a in api.writes("create")]
    assert created.kind == "Event"
    sent = created.obj
    assert isinstance(sent, events_v1.Event)
    assert sent.event_time == "2026-01-01T12:00:00.123456Z"
    assert (sent.action, sent.reason, sent.note, sent.type) == (
        "Preempting",
        "Preempted",
        "by important",
        "Normal",
    )
    assert (sent.reporting_controller, sent.reporting_instance) == (
        "default-scheduler",
        "default-scheduler-cp",
    )
    assert sent.regarding is not None and sent.regarding.uid == "uid-web"
    assert sent.related is not None and sent.related.name == "important"
    assert sent.deprecated_source is None and sent.deprecated_count is None
    assert sent.metadata.name == f"web.{int(START.timestamp() * 1e6) * 1000:x}"


async def test_repeats_become_a_series_written_on_its_schedule() -> None:
    api = FakeApi()
    recorder = SeriesEventRecorder(api, "default-scheduler", "default-scheduler-cp", api.clock)
    async with recorder:
        for note in ("0/3 nodes are available", "0/4 nodes are available", "again"):
            recorder.event(pod(), "Warning", "FailedScheduling", note, action="Scheduling")
            await recorder.flush()
        # Isomorphic: one Event; the second made it a series, the third only counted.
        assert len(api.writes("create")) == 1
        assert series_patches(api) == [
            {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:00.000000Z"}}
        ]
        # A different action is another event.
        recorder.event(pod(), "Warning", "FailedScheduling", "x", action="Binding")
        await recorder.flush()
        assert len(api.writes("create")) == 2

        # Every REFRESH_TIME the running series' count is written...
        await api.clock.advance(60)
        recorder.event(pod(), "Warning", "FailedScheduling", "again", action="Scheduling")
        await recorder.flush()
        for _ in range(int(REFRESH_TIME // FINISH_TIME) - 1):
            await api.clock.advance(FINISH_TIME - 61)
            await settle(api)
            await api.clock.advance(61)
            await settle(api)
            recorder.event(pod(), "Warning", "FailedScheduling", "again", action="Scheduling")
            await recorder.flush()
        await api.clock.advance(FINISH_TIME)
        await settle(api)
        counts = [p["series"]["count"] for p in series_patches(api)]  # type: ignore[index]
        assert counts[0] == 2 and counts[-1] == 3 + int(REFRESH_TIME // FINISH_TIME)
        stored = api.stored(events_v1.Event, api.writes("create")[0].name, "default")
        assert stored.series is not None and stored.series.count == counts[-1]

        # ...and FINISH_TIME after its last occurrence it is written once more and ended.
        writes = len(series_patches(api))
        await api.clock.advance(FINISH_TIME)
        await settle(api)
        assert len(series_patches(api)) == writes + 1
        recorder.event(pod(), "Warning", "FailedScheduling", "later", action="Scheduling")
        await recorder.flush()
        assert len(api.writes("create")) == 3  # a new event, not the old series


async def test_a_series_whose_event_is_gone_is_created_again() -> None:
    api = FakeApi()
    async with SeriesEventRecorder(api, "c", "c-1", api.clock) as recorder:
        recorder.event(pod(), "Normal", "Pulled", "m", action="Pulling")
        await recorder.flush()
        name = api.writes("create")[0].name
        await api.delete(events_v1.Event, name, "default")
        recorder.event(pod(), "Normal", "Pulled", "m", action="Pulling")
        await recorder.flush()
    recreated = api.stored(events_v1.Event, name, "default")
    assert recreated.series is not None and recreated.series.count == 2


# Against a real API server.


async def test_a_series_against_a_real_server(client: Client, namespace: str) -> None:
    config_map = await client.create(
        ConfigMap(metadata=ObjectMeta(name="settings", namespace=namespace), data={"a": "1"})
    )
    async with SeriesEventRecorder(client, "example.com/configurer", "configurer-1") as recorder:
        recorder.event(config_map, "Normal", "Configured", "applied", action="Applying")
        await recorder.flush()
        (event,) = (await client.list(Event, namespace)).items
        assert event.event_time is not None and event.count is None
        assert event.reporting_component == "example.com/configurer"
        recorder.event(config_map, "Normal", "Configured", "applied", action="Applying")
        await recorder.flush()
    (read,) = (await client.list(events_v1.Event, namespace)).items
    assert read.metadata.name == event.metadata.name
    assert read.series is not None and read.series.count == 2
    assert read.note == "applied" and read.action == "Applying"
