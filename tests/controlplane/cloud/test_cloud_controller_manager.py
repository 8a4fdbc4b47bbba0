"""``kubelab cloud-controller-manager`` end to end: a real API server, a fake cloud, and the
component run twice in a row (a restart, or a new leader taking over the released Lease)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import IO

import pytest

from controlplane.cloud import command, registry
from controlplane.cloud.context import TAINT_UNINITIALIZED
from controlplane.cloud.fake import FakeCloud
from controlplane.cloud.provider import CloudProvider
from controlplane.cloud.service import FINALIZER
from controlplane.controllers.nodeutil import node_condition
from kube.api.kinds.core_v1.node import Node, NodeCondition, NodeSpec, NodeStatus, Taint
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests.servers import ServerProcess


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


@pytest.fixture
def cloud() -> Iterator[tuple[str, FakeCloud]]:
    name = f"fake-{uuid.uuid4().hex[:6]}"
    shared = FakeCloud(clusters_list=["e2e"])

    def factory(_: IO[str] | None) -> CloudProvider:
        return shared

    registry.register_cloud_provider(name, factory)
    yield name, shared
    registry.unregister_cloud_provider(name)


class Manager:
    """One run of the component as a task, stopped through its stop event."""

    def __init__(self, options: command.CloudControllerManagerOptions) -> None:
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(command.run_cloud_controller_manager(options, self.stop))

    async def close(self) -> int:
        self.stop.set()
        return await self.task


@pytest.fixture
async def start(
    apiserver: ServerProcess, cloud: tuple[str, FakeCloud]
) -> AsyncIterator[Callable[[], Manager]]:
    options = command.CloudControllerManagerOptions(
        kubeconfig=apiserver.kubeconfig,
        cloud_provider=cloud[0],
        cluster_name="e2e",
        route_reconciliation_period=0.5,
        node_monitor_period=0.5,
        port=0,
    )
    running: list[Manager] = []

    def new() -> Manager:
        running.append(Manager(options))
        return running[-1]

    yield new
    for manager in running:
        if not manager.task.done():
            await manager.close()


async def test_nodes_routes_and_load_balancers_across_a_restart(
    client: Client, namespace: str, cloud: tuple[str, FakeCloud], start: Callable[[], Manager]
) -> None:
    _, fake = cloud
    name = f"ccm-{uuid.uuid4().hex[:6]}"
    fake.add_instance(name, "10.0.0.11", zone="zone-a")
    created = await client.create(
        Node(
            metadata=ObjectMeta(name=name),
            spec=NodeSpec(
                pod_cidr="10.244.7.0/24",
                pod_cidrs=["10.244.7.0/24"],
                taints=[Taint(key=TAINT_UNINITIALIZED, value="true", effect="NoSchedule")],
            ),
        )
    )
    created.status = NodeStatus(conditions=[NodeCondition(type="Ready", status="True")])
    await client.update_status(created)
    first = start()

    async def initialized() -> bool:
        current = await client.get(Node, name)
        condition = node_condition(current, "NetworkUnavailable")
        return (
            current.spec is not None
            and current.spec.provider_id == f"fake://{name}"
            and not current.spec.taints
            and (current.metadata.labels or {}).get("topology.kubernetes.io/zone") == "zone-a"
            and condition is not None
            and condition.status == "False"
        )

    await eventually(initialized)
    assert [(r.target_node, r.destination_cidr) for r in fake.route_table["e2e"]] == [
        (name, "10.244.7.0/24")
    ]

    await client.create(
        Service(
            metadata=ObjectMeta(name="web", namespace=namespace),
            spec=ServiceSpec(type="LoadBalancer", ports=[ServicePort(protocol="TCP", port=80)]),
        )
    )

    async def ingress() -> str | None:
        svc = await client.get(Service, "web", namespace)
        lb = svc.status.load_balancer if svc.status else None
        return lb.ingress[0].ip if lb and lb.ingress else None

    await eventually(lambda: _truthy(ingress()))
    ip = await ingress()
    assert FINALIZER in ((await client.get(Service, "web", namespace)).metadata.finalizers or [])
    assert await first.close() == 0

    calls = len(fake.calls)
    second = start()
    await eventually(lambda: _true(len(fake.called("ensure_load_balancer")) >= 2))
    await eventually(lambda: _true("list_routes" in [c for c, _ in fake.calls[calls:]]))
    assert len(fake.balancers) == 1
    assert await ingress() == ip
    assert len(fake.called("create_route")) == 1
    assert len(fake.route_table["e2e"]) == 1

    await client.delete(Service, "web", namespace)

    async def service_gone() -> bool:
        try:
            await client.get(Service, "web", namespace)
        except ApiError as error:
            return error.not_found
        return False

    await eventually(service_gone)
    assert fake.balancers == {}

    fake.instances_map[name].exists = False
    current = await client.get(Node, name)
    current.status = NodeStatus(conditions=[NodeCondition(type="Ready", status="False")])
    await client.update_status(current)

    async def node_gone() -> bool:
        try:
            await client.get(Node, name)
        except ApiError as error:
            return error.not_found
        return False

    await eventually(node_gone)
    await eventually(lambda: _true(fake.route_table["e2e"] == []))
    assert await second.close() == 0


async def _truthy(value: Awaitable[object]) -> bool:
    return bool(await value)


async def _true(value: bool) -> bool:
    return value
