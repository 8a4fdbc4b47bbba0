"""Helpers the endpoints and endpointslice controllers share."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers.endpointutil import (
    TriggerTimeTracker,
    find_port,
    rfc3339_nano,
    should_set_hostname,
)
from kube.api.kinds.core_v1.pod import Container, ContainerPort, Pod
from kube.api.kinds.core_v1.service import ServicePort
from tests.controlplane.controllers.endpointfixtures import CREATED, READY_AT, pod, service

UTC = datetime.UTC


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        pytest.param(datetime.datetime(2026, 1, 1, tzinfo=UTC), "2026-01-01T00:00:00Z", id="whole"),
        pytest.param(
            datetime.datetime(2026, 1, 1, 0, 0, 1, 500000, tzinfo=UTC),
            "2026-01-01T00:00:01.5Z",
            id="trailing-zeros-trimmed",
        ),
        pytest.param(
            datetime.datetime(2026, 1, 1, 2, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
            "2026-01-01T00:00:00Z",
            id="converted-to-utc",
        ),
    ],
)
def test_rfc3339_nano(moment: datetime.datetime, text: str) -> None:
    assert rfc3339_nano(moment) == text


def sidecar_pod() -> Pod:
    obj = pod("a", ports=[ContainerPort(name="web", container_port=8080, protocol="TCP")])
    assert obj.spec is not None
    obj.spec.init_containers = [
        Container(
            name="proxy",
            restart_policy="Always",
            ports=[ContainerPort(name="proxy", container_port=15001, protocol="TCP")],
        ),
        Container(name="setup", ports=[ContainerPort(name="setup", container_port=1)]),
    ]
    return obj


@pytest.mark.parametrize(
    ("target", "protocol", "number"),
    [
        pytest.param(9000, "TCP", 9000, id="number-as-is"),
        pytest.param("web", "TCP", 8080, id="named-container-port"),
        pytest.param("web", "UDP", None, id="protocol-must-match"),
        pytest.param("proxy", "TCP", 15001, id="sidecar-port"),
        pytest.param("setup", "TCP", None, id="plain-init-container-ignored"),
        pytest.param("missing", "TCP", None, id="no-such-name"),
    ],
)
def test_find_port(target: int | str, protocol: str, number: int | None) -> None:
    port = ServicePort(name="p", protocol=protocol, port=80, target_port=target)
    assert find_port(sidecar_pod(), port) == number


@pytest.mark.parametrize(
    ("hostname", "subdomain", "expected"),
    [
        pytest.param("a", "web", True, id="subdomain-names-service"),
        pytest.param("a", "other", False, id="other-subdomain"),
        pytest.param(None, "web", False, id="no-hostname"),
    ],
)
def test_should_set_hostname(hostname: str | None, subdomain: str, expected: bool) -> None:
    assert should_set_hostname(pod("a", hostname=hostname, subdomain=subdomain), service()) is (
        expected
    )


def test_trigger_time_tracker() -> None:
    tracker = TriggerTimeTracker()
    svc = service()
    a = pod("a")
    # A Service seen for the first time: its creation.
    assert tracker.compute("shop/web", svc, [a]) == CREATED
    # Nothing changed since: no trigger time.
    assert tracker.compute("shop/web", svc, [a]) is None
    # A pod became ready later: its transition.
    later = READY_AT + datetime.timedelta(minutes=1)
    b = pod("b")
    assert b.status is not None and b.status.conditions is not None
    b.status.conditions[0].last_transition_time = later
    assert tracker.compute("shop/web", svc, [a, b]) == later
    tracker.forget("shop/web")
    assert tracker.compute("shop/web", svc, [a, b]) == CREATED
