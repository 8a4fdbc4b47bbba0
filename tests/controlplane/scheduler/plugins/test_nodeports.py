from __future__ import annotations

import pytest

from controlplane.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    Code,
    CycleState,
    EventResource,
    QueueingHint,
    Status,
)
from controlplane.scheduler.framework.types import HostPort, NodeInfo, PodInfo
from controlplane.scheduler.plugins import nodeports
from kube.api.kinds.core_v1.pod import ContainerPort, Pod, PodStatus
from tests.controlplane.scheduler.builders import FakeHandle, make_node, make_node_info, make_pod

CONFLICT = Status.unschedulable("node(s) didn't have free ports for the requested pod ports")


def port(ip: str, protocol: str, number: int) -> HostPort:
    return HostPort(ip, protocol, number)


@pytest.mark.parametrize(
    ("wanted", "used", "expected"),
    [
        pytest.param([8080], [8081], SUCCESS, id="different-port"),
        pytest.param([8080], [8080], CONFLICT, id="same-port"),
        pytest.param(
            [port("127.0.0.1", "UDP", 8080)],
            [port("127.0.0.1", "TCP", 8080)],
            SUCCESS,
            id="different-protocol",
        ),
        pytest.param(
            [port("127.0.0.1", "TCP", 8080)],
            [port("127.0.0.2", "TCP", 8080)],
            SUCCESS,
            id="different-ip",
        ),
        pytest.param(
            [port("127.0.0.1", "TCP", 8080)],
            [port("127.0.0.1", "TCP", 8080)],
            CONFLICT,
            id="same-ip",
        ),
        pytest.param(
            [port("", "TCP", 8001)],
            [port("127.0.0.1", "TCP", 8001)],
            CONFLICT,
            id="wanted-wildcard-vs-ip",
        ),
        pytest.param(
            [port("10.0.10.10", "TCP", 8001)],
            [port("0.0.0.0", "TCP", 8001)],
            CONFLICT,
            id="ip-vs-used-wildcard",
        ),
        pytest.param(
            [port("0.0.0.0", "UDP", 8001)],
            [port("10.0.10.10", "TCP", 8001)],
            SUCCESS,
            id="wildcard-other-protocol",
        ),
        pytest.param(
            [port("", "TCP", 8001), port("127.0.0.1", "UDP", 9000)],
            [port("127.0.0.1", "UDP", 9000)],
            CONFLICT,
            id="second-port-conflicts",
        ),
    ],
)
def test_filter(wanted: list[int | HostPort], used: list[int | HostPort], expected: Status) -> None:
    plugin = nodeports.new(None, FakeHandle())
    node = make_node_info(make_node(), make_pod("existing", host_ports=used))
    pod = PodInfo.of(make_pod(host_ports=wanted))
    state = CycleState()
    assert plugin.pre_filter(state, pod, [node]) == (None, SUCCESS)
    assert plugin.filter(state, pod, node) == expected


def container_port_only(pod: Pod) -> Pod:
    """``pod`` with a container port that claims no host port."""
    assert pod.spec is not None and pod.spec.containers
    pod.spec.containers[0].ports = [ContainerPort(container_port=80, protocol="TCP")]
    return pod


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(make_pod(), SKIP, id="no-ports"),
        pytest.param(container_port_only(make_pod()), SKIP, id="container-port-only"),
        pytest.param(make_pod(host_ports=[80]), SUCCESS, id="host-port"),
    ],
)
def test_pre_filter_skip(pod: Pod, expected: Status) -> None:
    plugin = nodeports.new(None, FakeHandle())
    assert plugin.pre_filter(CycleState(), PodInfo.of(pod), []) == (None, expected)


def batch_nodes() -> list[NodeInfo]:
    """Nodes without pods, with pods but no ports, and with ports taken on some addresses."""
    return [
        make_node_info(make_node("n0")),
        make_node_info(make_node("n1"), make_pod("e1", host_ports=[80])),
        make_node_info(make_node("n2"), make_pod("e2")),
        make_node_info(make_node("n3"), make_pod("e3", host_ports=[port("10.0.0.1", "TCP", 80)])),
        make_node_info(make_node("n4"), make_pod("e4", host_ports=[port("", "UDP", 80), 443])),
        NodeInfo(),
    ]


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        pytest.param(
            [80], [SUCCESS, CONFLICT, SUCCESS, CONFLICT, SUCCESS, SUCCESS], id="wildcard-tcp-80"
        ),
        pytest.param(
            [port("10.0.0.2", "TCP", 80)],
            [SUCCESS, CONFLICT, SUCCESS, SUCCESS, SUCCESS, SUCCESS],
            id="specific-ip",
        ),
        pytest.param(
            [8080, port("", "UDP", 80)],
            [SUCCESS, SUCCESS, SUCCESS, SUCCESS, CONFLICT, SUCCESS],
            id="second-port-conflicts",
        ),
    ],
)
def test_filter_nodes_matches_filter(wanted: list[int | HostPort], expected: list[Status]) -> None:
    plugin = nodeports.new(None, FakeHandle())
    nodes = batch_nodes()
    pod = PodInfo.of(make_pod(host_ports=wanted))
    state = CycleState()
    assert plugin.pre_filter(state, pod, nodes) == (None, SUCCESS)
    statuses = plugin.filter_nodes(state, pod, nodes)
    assert statuses == expected
    assert [plugin.filter(state, pod, node) for node in nodes] == statuses
    assert all(status is SUCCESS for status in statuses if status.is_success)


def test_filter_without_pre_filter_fails() -> None:
    plugin = nodeports.new(None, FakeHandle())
    pod = PodInfo.of(make_pod(host_ports=[80]))
    statuses = plugin.filter_nodes(CycleState(), pod, batch_nodes())
    assert [status.code for status in statuses] == [Code.ERROR] * len(batch_nodes())
    assert plugin.filter(CycleState(), pod, make_node_info(make_node())).code is Code.ERROR


def assigned(pod: Pod) -> Pod:
    assert pod.spec is not None
    pod.spec.node_name = "n"
    return pod


def nominated(pod: Pod) -> Pod:
    pod.status = PodStatus(nominated_node_name="n")
    return pod


@pytest.mark.parametrize(
    ("deleted", "expected"),
    [
        pytest.param(assigned(make_pod("d", host_ports=[80])), QueueingHint.QUEUE, id="frees-port"),
        pytest.param(nominated(make_pod("d", host_ports=[80])), QueueingHint.QUEUE, id="nominated"),
        pytest.param(make_pod("d", host_ports=[80]), QueueingHint.SKIP, id="unscheduled"),
        pytest.param(assigned(make_pod("d")), QueueingHint.SKIP, id="no-host-ports"),
        pytest.param(
            assigned(make_pod("d", host_ports=[81])), QueueingHint.SKIP, id="unrelated-port"
        ),
    ],
)
def test_events_to_register(deleted: Pod, expected: QueueingHint) -> None:
    events = nodeports.new(None, FakeHandle()).events_to_register()
    [registered] = [e for e in events if e.event.resource is EventResource.POD]
    assert registered.hint is not None
    assert registered.hint(make_pod(host_ports=[80]), deleted, None) is expected
    assert any(e.event.resource is EventResource.NODE for e in events)
