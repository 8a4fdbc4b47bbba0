"""Hollow nodes against a real API server: registration, leases, and the pod lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from kube.api.kinds.coordination_v1 import Lease
from kube.api.kinds.core_v1.node import Node, Taint
from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.informers import SharedInformerFactory
from kube.client.rest import Client
from kube.clock import RealClock
from node.hollow.nodes import NODE_LEASE_NAMESPACE, FleetSpec, NodeFleet, TaintRule
from node.hollow.pods import HollowKubelet

SPEC = FleetSpec(
    count=3,
    name_prefix="hollow-test-",
    zones=("z1", "z2"),
    taints=(TaintRule.parse("dedicated=infra:NoSchedule@0.34"),),
    images={"registry.local/app:1": 100_000_000},
)


@pytest.fixture
async def fleet(client: Client) -> AsyncIterator[NodeFleet]:
    clock = RealClock()
    fleet = NodeFleet(client, SPEC, clock, renew_interval=0.3)
    informers = SharedInformerFactory(client, clock=clock)
    kubelet = HollowKubelet(client, informers, SPEC, clock)
    await fleet.register()
    informers.start()
    assert await informers.wait_for_cache_sync(timeout=10)
    tasks = [asyncio.create_task(fleet.renew_forever()), asyncio.create_task(kubelet.run())]
    try:
        yield fleet
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await informers.shutdown()
        await fleet.deregister()


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Wait up to ten seconds for ``check`` to hold."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        try:
            if await check():
                return
        except ApiError:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_nodes_register_with_labels_taints_and_capacity(
    client: Client, fleet: NodeFleet
) -> None:
    nodes = {n.metadata.name: n for n in (await client.list(Node)).items}
    assert set(fleet.names) <= set(nodes)
    first = nodes["hollow-test-0"]
    assert first.metadata.labels is not None
    assert first.metadata.labels["topology.kubernetes.io/zone"] == "z1"
    assert nodes["hollow-test-1"].metadata.labels["topology.kubernetes.io/zone"] == "z2"  # type: ignore[index]
    assert first.status is not None and first.status.allocatable == {
        "cpu": "4",
        "memory": "16Gi",
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }
    ready = [c for c in first.status.conditions or () if c.type == "Ready"]
    assert ready and ready[0].status == "True"
    tainted = [name for name in fleet.names if (nodes[name].spec and nodes[name].spec.taints)]  # type: ignore[union-attr]
    assert len(tainted) == 1


async def test_registering_again_changes_nothing_but_succeeds(fleet: NodeFleet) -> None:
    await fleet.register()


async def test_leases_are_renewed(client: Client, fleet: NodeFleet) -> None:
    first = await client.get(Lease, "hollow-test-2", NODE_LEASE_NAMESPACE)
    assert first.spec is not None and first.spec.holder_identity == "hollow-test-2"

    async def renewed() -> bool:
        lease = await client.get(Lease, "hollow-test-2", NODE_LEASE_NAMESPACE)
        return bool(lease.spec and first.spec and lease.spec.renew_time != first.spec.renew_time)

    await eventually(renewed)


async def test_bound_pods_run_and_deleted_pods_go(
    client: Client, fleet: NodeFleet, namespace: str
) -> None:
    pod = Pod(
        metadata=ObjectMeta(name="web", namespace=namespace),
        spec=PodSpec(node_name="hollow-test-1", containers=[Container(name="c", image="nginx")]),
    )
    await client.create(pod)

    async def running() -> bool:
        got = await client.get(Pod, "web", namespace)
        return bool(got.status and got.status.phase == "Running")

    await eventually(running)
    got = await client.get(Pod, "web", namespace)
    assert got.status is not None and got.status.pod_ip and got.status.pod_ip.startswith("10.")
    assert got.status.host_ip == SPEC.address(1)
    statuses = got.status.container_statuses or []
    assert [(s.name, s.ready) for s in statuses] == [("c", True)]
    await client.delete(Pod, "web", namespace)

    async def gone() -> bool:
        try:
            await client.get(Pod, "web", namespace)
        except ApiError as error:
            return error.not_found
        return False

    await eventually(gone)


async def test_a_running_pod_marked_not_ready_is_reported_ready_again(
    client: Client, fleet: NodeFleet, namespace: str
) -> None:
    """As the node lifecycle controller does to the pods of a node that went silent; the
    kubelet reports its own view again (before, such pods stayed not Ready for good)."""
    pod = Pod(
        metadata=ObjectMeta(name="web", namespace=namespace),
        spec=PodSpec(node_name="hollow-test-1", containers=[Container(name="c", image="nginx")]),
    )
    await client.create(pod)

    async def ready() -> bool:
        got = await client.get(Pod, "web", namespace)
        conditions = (got.status.conditions if got.status else None) or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    await eventually(ready)
    got = await client.get(Pod, "web", namespace)
    assert got.status is not None
    marked = [
        {"type": c.type, "status": "False" if c.type == "Ready" else c.status}
        for c in got.status.conditions or []
    ]
    await client.patch(
        Pod, "web", namespace, {"status": {"conditions": marked}}, subresource="status"
    )
    await eventually(ready)


async def test_pods_on_other_nodes_are_left_alone(
    client: Client, fleet: NodeFleet, namespace: str
) -> None:
    pod = Pod(
        metadata=ObjectMeta(name="elsewhere", namespace=namespace),
        spec=PodSpec(node_name="real-node", containers=[Container(name="c", image="nginx")]),
    )
    await client.create(pod)
    await asyncio.sleep(0.5)
    got = await client.get(Pod, "elsewhere", namespace)
    assert not (got.status and got.status.phase == "Running")


@pytest.mark.parametrize(
    ("text", "taint", "fraction"),
    [
        pytest.param(
            "a=b:NoSchedule", Taint(key="a", value="b", effect="NoSchedule"), 1.0, id="kv"
        ),
        pytest.param("gpu:NoExecute@0.25", Taint(key="gpu", effect="NoExecute"), 0.25, id="key"),
    ],
)
def test_taint_rules_parse(text: str, taint: Taint, fraction: float) -> None:
    rule = TaintRule.parse(text)
    assert (rule.taint, rule.fraction) == (taint, fraction)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("a=b", "expected key", id="no-effect"),
        pytest.param("a:Sometimes", "expected key", id="bad-effect"),
        pytest.param("a:NoSchedule@2", "must be in", id="fraction-too-big"),
        pytest.param("a:NoSchedule@x", "not a number", id="fraction-not-number"),
    ],
)
def test_bad_taint_rules_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        TaintRule.parse(text)


@pytest.mark.parametrize(
    ("fraction", "count", "expected"),
    [
        pytest.param(0.1, 100, 10, id="tenth"),
        pytest.param(0.5, 7, 3, id="half-of-odd"),
        pytest.param(1.0, 5, 5, id="all"),
    ],
)
def test_taints_spread_over_the_fraction(fraction: float, count: int, expected: int) -> None:
    rule = TaintRule(Taint(key="k", effect="NoSchedule"), fraction)
    assert sum(rule.applies_to(i) for i in range(count)) == expected
