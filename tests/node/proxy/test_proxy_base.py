"""The shared proxier base, through a minimal mode that records what it was asked to apply:
which syncs are full, what a failure or an incomplete sync does to the next one, and what
reaches the metrics and the health check server."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, Endpoint, EndpointPort, EndpointSlice
from kube.api.meta_v1 import ObjectMeta
from kube.clock import FakeClock
from node.iptables import IptablesError
from node.proxy.base import Applied, Proxier
from node.proxy.health import ServiceHealth
from node.proxy.model import Changes, ServicePortName

NODE = "node-a"


class RecordingMode(Proxier):
    """Records each apply as (full, changed service ports); fails or stays incomplete when
    told to."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(NODE, clock, sync_period=30.0, min_sync_period=1.0)
        self.applied: list[tuple[bool, set[ServicePortName]]] = []
        self.fail = False
        self.complete = True

    def ensure_sysctls(self) -> None:
        raise AssertionError("not called outside run()")

    async def close(self) -> None:
        raise AssertionError("not called by the base")

    async def apply(self, changes: Changes, full: bool) -> Applied | None:
        if self.fail:
            raise IptablesError(["iptables-restore"], "line 1 failed", ["*nat"], 1)
        if not full and not changes.changed:
            return None
        self.applied.append((full, set(changes.changed)))
        return Applied(rules={"nat": 7}, chains={"nat": 3}, complete=self.complete)


class FakeHealthServer:
    def __init__(self) -> None:
        self.updates: list[dict[int, ServiceHealth]] = []

    async def update(self, services: dict[int, ServiceHealth]) -> None:
        self.updates.append(services)


def service(name: str, *, local_policy: bool = False) -> Service:
    spec = ServiceSpec(
        type="LoadBalancer" if local_policy else "ClusterIP",
        cluster_ip="10.96.0.10",
        ports=[ServicePort(name="p", protocol="TCP", port=80, node_port=30080)],
    )
    if local_policy:
        spec.external_traffic_policy = "Local"
        spec.health_check_node_port = 31000
    return Service(metadata=ObjectMeta(namespace="ns", name=name), spec=spec)


def endpoints(name: str, *nodes: str) -> list[EndpointSlice]:
    return [
        EndpointSlice(
            metadata=ObjectMeta(
                namespace="ns", name=f"{name}-1", labels={SERVICE_NAME_LABEL: name}
            ),
            address_type="IPv4",
            ports=[EndpointPort(name="p", protocol="TCP", port=8080)],
            endpoints=[
                Endpoint(addresses=[f"10.244.0.{i + 2}"], node_name=node)
                for i, node in enumerate(nodes)
            ],
        )
    ]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def mode(clock: FakeClock) -> RecordingMode:
    return RecordingMode(clock)


def lookups(
    mode: RecordingMode, services: dict[str, Service], slices: dict[str, list[EndpointSlice]]
) -> None:
    def slices_of(key: str) -> Sequence[EndpointSlice]:
        return slices.get(key, [])

    mode.set_lookups(services.get, slices_of)


async def test_first_sync_is_full_then_partial_for_changes_only(mode: RecordingMode) -> None:
    services = {"ns/web": service("web")}
    slices = {"ns/web": endpoints("web", NODE)}
    lookups(mode, services, slices)
    mode.on_service(services["ns/web"])
    assert await mode.sync()
    assert await mode.sync()  # nothing changed: nothing applied, nothing recorded
    mode.on_service(services["ns/web"])  # the same Service again: no change either
    assert await mode.sync()
    slices["ns/web"] = endpoints("web", NODE, "node-b")
    mode.on_slice(slices["ns/web"][0])
    assert await mode.sync()
    assert [(full, {str(n) for n in names}) for full, names in mode.applied] == [
        (True, {"ns/web:p"}),
        (False, {"ns/web:p"}),
    ]
    assert mode.metrics.sync_duration.count("full") == 1
    assert mode.metrics.sync_duration.count("partial") == 1
    assert mode.metrics.rules.lines()[-1].endswith(" 7")


async def test_a_failed_sync_is_counted_and_the_next_one_is_full(mode: RecordingMode) -> None:
    lookups(mode, {}, {})
    assert await mode.sync()
    mode.fail = True
    mode.on_node(Node(metadata=ObjectMeta(name=NODE)))
    assert not await mode.sync()
    assert mode.needs_full
    assert mode.metrics.failures.lines()[-1].endswith(" 1")
    mode.fail = False
    assert await mode.sync()
    assert [full for full, _ in mode.applied] == [True, True]


async def test_an_incomplete_sync_makes_the_next_one_full(mode: RecordingMode) -> None:
    lookups(mode, {}, {})
    full_next = []
    for complete in (False, True):
        mode.complete = complete
        assert await mode.sync()
        full_next.append(mode.needs_full)
    assert full_next == [True, False]
    assert [full for full, _ in mode.applied] == [True, True]


async def test_a_full_sync_is_due_every_sync_period(mode: RecordingMode, clock: FakeClock) -> None:
    lookups(mode, {}, {})
    assert await mode.sync()
    await clock.advance(29.0)
    assert await mode.sync()
    await clock.advance(1.0)
    assert await mode.sync()
    assert [full for full, _ in mode.applied] == [True, True]


async def test_health_check_node_ports_count_only_local_endpoints(clock: FakeClock) -> None:
    health = FakeHealthServer()
    mode = RecordingMode(clock)
    mode.service_health = health  # type: ignore[assignment]
    services = {"ns/lb": service("lb", local_policy=True)}
    lookups(mode, services, {"ns/lb": endpoints("lb", NODE, "node-b", NODE)})
    mode.on_service(services["ns/lb"])
    assert await mode.sync()
    assert health.updates == [{31000: ServiceHealth("ns", "lb", 2)}]
