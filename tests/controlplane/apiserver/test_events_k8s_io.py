"""Events through the pinned kubectl and the official Python client against a real ``kubelab
apiserver``: core/v1 and events.k8s.io/v1 serve the same objects, each with its own rules."""

from __future__ import annotations

import datetime
import json
import re
import threading
from typing import Any

import kubernetes
import pytest
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException

from tests.servers import Kubectl

EVENTS_V1 = "events.v1.events.k8s.io"
NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=datetime.UTC)


def _core_event(name: str, namespace: str) -> dict[str, Any]:
    """An old-style event, as client-go's legacy recorder writes it."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name},
        "involvedObject": {
            "kind": "Pod",
            "namespace": namespace,
            "name": "web",
            "uid": "u-1",
            "apiVersion": "v1",
        },
        "reason": "Pulled",
        "message": "Successfully pulled image",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-01-02T03:04:05Z",
        "lastTimestamp": "2026-01-02T03:04:09Z",
        "count": 3,
        "type": "Normal",
    }


def _v1_event(name: str, namespace: str, **changes: Any) -> k8s.EventsV1Event:
    """A new-style event, as client-go's events.k8s.io recorder writes it."""
    fields: dict[str, Any] = {
        "metadata": k8s.V1ObjectMeta(name=name),
        "event_time": NOW,
        "reporting_controller": "example.com/controller",
        "reporting_instance": "controller-1",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": k8s.V1ObjectReference(kind="Pod", namespace=namespace, name="web"),
        "note": "Successfully assigned web to node-1",
        "type": "Normal",
    }
    fields.update(changes)
    return k8s.EventsV1Event(**fields)


def _causes(error: ApiException) -> list[tuple[str, str]]:
    body = json.loads(error.body)
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


def test_core_event_read_as_events_v1_and_back(kubectl: Kubectl, namespace: str) -> None:
    kubectl.run("create", "-f", "-", input=json.dumps(_core_event("pulled", namespace)))
    read = kubectl.json("get", EVENTS_V1, "pulled")
    assert read["apiVersion"] == "events.k8s.io/v1"
    assert {k: v for k, v in read.items() if k != "metadata"} == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "reason": "Pulled",
        "regarding": {
            "kind": "Pod",
            "namespace": namespace,
            "name": "web",
            "uid": "u-1",
            "apiVersion": "v1",
        },
        "note": "Successfully pulled image",
        "type": "Normal",
        "deprecatedSource": {"component": "kubelet", "host": "node-1"},
        "deprecatedFirstTimestamp": "2026-01-02T03:04:05Z",
        "deprecatedLastTimestamp": "2026-01-02T03:04:09Z",
        "deprecatedCount": 3,
    }
    # A label written through events.k8s.io is on the core object (one object, one version).
    kubectl.run("label", EVENTS_V1, "pulled", "seen=yes")
    core = kubectl.json("get", "events", "pulled")
    assert core["metadata"]["labels"] == {"seen": "yes"}
    assert core["metadata"]["resourceVersion"] != read["metadata"]["resourceVersion"]
    assert core["count"] == 3 and core["source"] == {"component": "kubelet", "host": "node-1"}


def test_get_events_as_kubectl_prints_them(kubectl: Kubectl, namespace: str) -> None:
    kubectl.run("create", "-f", "-", input=json.dumps(_core_event("pulled", namespace)))
    table = kubectl.run("get", "events.events.k8s.io").stdout
    rows = [re.split(r"\s{2,}", line.strip()) for line in table.strip().splitlines()]
    assert rows[0] == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert rows[1][1:] == ["Normal", "Pulled", "pod/web", "Successfully pulled image"]
    assert kubectl.run("get", "events").stdout.splitlines()[0] == table.splitlines()[0]
    # The short name is core's, as upstream (core is the preferred group for `ev`).
    assert kubectl.json("get", "ev", "pulled")["apiVersion"] == "v1"
    # kubectl events reads core/v1 (kubectl 1.36 lists through CoreV1), so it sees both groups.
    events = kubectl.run("events", "--for", "pod/web").stdout
    assert "Pulled" in events and "Successfully pulled image" in events


def test_python_client_writes_in_one_group_reads_in_the_other(
    api_client: kubernetes.client.ApiClient, namespace: str
) -> None:
    events = k8s.EventsV1Api(api_client)
    core = k8s.CoreV1Api(api_client)
    created = events.create_namespaced_event(namespace, _v1_event("scheduled", namespace))
    assert created.event_time == NOW
    read = core.read_namespaced_event("scheduled", namespace)
    assert read.involved_object.name == "web"
    assert read.message == "Successfully assigned web to node-1"
    assert read.reporting_component == "example.com/controller"
    assert read.reporting_instance == "controller-1"
    assert read.metadata.resource_version == created.metadata.resource_version

    # A series, as the new recorder keeps one: written here, seen by core clients.
    created.series = k8s.EventsV1EventSeries(count=2, last_observed_time=NOW)
    events.replace_namespaced_event("scheduled", namespace, created)
    assert core.read_namespaced_event("scheduled", namespace).series.count == 2

    # Field selectors in this group's names, mapped onto core's.
    for selector in (
        "regarding.name=web",
        "reportingController=example.com/controller",
        "source=example.com/controller",
        "reason=Scheduled,type=Normal",
    ):
        listed = events.list_namespaced_event(namespace, field_selector=selector).items
        assert [e.metadata.name for e in listed] == ["scheduled"], selector
    assert events.list_namespaced_event(namespace, field_selector="regarding.name=x").items == []
    with pytest.raises(ApiException) as unknown:
        events.list_namespaced_event(namespace, field_selector="note=x")
    assert unknown.value.status == 400

    events.delete_namespaced_event("scheduled", namespace)
    assert core.list_namespaced_event(namespace).items == []


def test_events_v1_event_needs_an_event_time(kubectl: Kubectl, namespace: str) -> None:
    """The Python client will not send an event without eventTime; kubectl will."""
    manifest = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "timeless"},
        "regarding": {"kind": "Pod", "namespace": namespace, "name": "web"},
        "reportingController": "example.com/controller",
        "reportingInstance": "controller-1",
        "action": "Binding",
        "reason": "Scheduled",
        "type": "Normal",
    }
    refused = kubectl.run("create", "-f", "-", input=json.dumps(manifest), check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == ('The Event "timeless" is invalid: eventTime: Required value')


INVALID = [
    (
        "no-reporter",
        {"reporting_controller": None, "reporting_instance": None, "action": None},
        [
            ("action", "Required value"),
            ("reportingController", "Required value"),
            ("reportingController", 'Invalid value: "": name part must be non-empty'),
            (
                "reportingController",
                "Invalid value: \"\": name part must consist of alphanumeric characters, '-', "
                "'_' or '.', and must start and end with an alphanumeric character (e.g. "
                "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ),
            ("reportingInstance", "Required value"),
        ],
    ),
    (
        "long-note",
        {"note": "n" * 1025},
        [("message", 'Invalid value: "": can have at most 1024 characters')],
    ),
    (
        "deprecated-fields",
        {
            "deprecated_count": 2,
            "deprecated_source": k8s.V1EventSource(component="kubelet"),
            "type": "Info",
        },
        [
            ("count", 'Invalid value: "": needs to be unset'),
            ("source", 'Invalid value: "": needs to be unset'),
            ("type", 'Invalid value: "": has invalid value: Info'),
        ],
    ),
    (
        "short-series",
        {"series": k8s.EventsV1EventSeries(count=1, last_observed_time=NOW)},
        [("series.count", 'Invalid value: "": should be at least 2')],
    ),
]


@pytest.mark.parametrize(
    ("changes", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_events_v1_event_refused(
    api_client: kubernetes.client.ApiClient,
    namespace: str,
    changes: dict[str, Any],
    expected: list[tuple[str, str]],
) -> None:
    events = k8s.EventsV1Api(api_client)
    with pytest.raises(ApiException) as refused:
        events.create_namespaced_event(namespace, _v1_event("bad", namespace, **changes))
    assert refused.value.status == 422
    assert sorted(_causes(refused.value)) == sorted(expected)


def test_events_v1_updates_keep_what_was_reported(
    api_client: kubernetes.client.ApiClient, namespace: str
) -> None:
    events = k8s.EventsV1Api(api_client)
    core = k8s.CoreV1Api(api_client)
    events.create_namespaced_event(namespace, _v1_event("fixed", namespace))
    with pytest.raises(ApiException) as refused:
        events.patch_namespaced_event("fixed", namespace, {"note": "changed", "reason": "Other"})
    assert refused.value.status == 422
    assert sorted(f for f, _ in _causes(refused.value)) == ["message", "reason"]
    # core/v1 has no such rule, as upstream.
    patched = core.patch_namespaced_event("fixed", namespace, {"message": "changed"})
    assert patched.message == "changed"


def test_an_events_v1_watch_sees_core_writes(
    api_client: kubernetes.client.ApiClient, namespace: str
) -> None:
    events = k8s.EventsV1Api(api_client)
    core = k8s.CoreV1Api(api_client)
    start = events.list_namespaced_event(namespace).metadata.resource_version
    seen: list[tuple[str, str, str | None, int | None]] = []
    done = threading.Event()

    def follow() -> None:
        stream = watch.Watch()
        for event in stream.stream(
            events.list_namespaced_event, namespace, resource_version=start, timeout_seconds=20
        ):
            obj = event["object"]
            series = obj.series.count if obj.series else None
            seen.append((event["type"], obj.api_version, obj.note, series))
            if event["type"] == "DELETED":
                stream.stop()
        done.set()

    thread = threading.Thread(target=follow)
    thread.start()
    # A new-style event written as core/v1 (the Python client cannot read an events.k8s.io
    # Event without eventTime: its model requires one).
    core.create_namespaced_event(
        namespace,
        {
            "metadata": {"name": "watched"},
            "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "web"},
            "reason": "Killing",
            "message": "Stopping container web",
            "type": "Normal",
            "eventTime": "2026-01-02T03:04:05.000001Z",
            "action": "Killing",
            "reportingComponent": "kubelet",
            "reportingInstance": "node-1",
        },
    )
    core.patch_namespaced_event(
        "watched",
        namespace,
        {"series": {"count": 2, "lastObservedTime": "2026-01-02T03:05:05.000001Z"}},
    )
    core.delete_namespaced_event("watched", namespace)
    assert done.wait(30)
    thread.join()
    assert seen == [
        ("ADDED", "events.k8s.io/v1", "Stopping container web", None),
        ("MODIFIED", "events.k8s.io/v1", "Stopping container web", 2),
        ("DELETED", "events.k8s.io/v1", "Stopping container web", 2),
    ]


def test_api_resources_lists_both_groups(kubectl: Kubectl) -> None:
    rows = [
        re.split(r"\s+", line.strip())
        for line in kubectl.run("api-resources", "-o", "wide", namespaced=False).stdout.splitlines()
        if line.startswith("events ")
    ]
    verbs = "create,delete,deletecollection,get,list,patch,update,watch"
    assert rows == [
        ["events", "ev", "v1", "true", "Event", verbs],
        ["events", "ev", "events.k8s.io/v1", "true", "Event", verbs],
    ]


def test_kubectl_explain_events_k8s_io(kubectl: Kubectl) -> None:
    explained = kubectl.run("explain", "events", "--api-version=events.k8s.io/v1").stdout
    assert "GROUP:      events.k8s.io" in explained
    for field in ("note\t<string>", "regarding\t<ObjectReference>", "series\t<EventSeries>"):
        assert field in explained, field
