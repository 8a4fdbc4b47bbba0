"""The scheduler end to end: a real API server, hollow nodes, and pods that must land where
taints, affinity, spread, resources, ports and priorities say."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from controlplane.scheduler.config import KubeSchedulerConfiguration, load
from controlplane.scheduler.explain import render, to_json
from controlplane.scheduler.scheduler import Scheduler
from kube.api.kinds.core_v1.cluster import Event
from kube.api.kinds.core_v1.pod import (
    Affinity,
    Container,
    ContainerPort,
    Pod,
    PodAffinityTerm,
    PodAntiAffinity,
    ResourceRequirements,
    Toleration,
    TopologySpreadConstraint,
)
from kube.api.kinds.scheduling_v1 import PriorityClass
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from kube.client.errors import ApiError
from kube.client.events import EventRecorder
from kube.client.informers import SharedInformerFactory
from kube.client.rest import Client
from kube.clock import RealClock
from node.hollow.nodes import FleetSpec, NodeFleet, TaintRule
from node.hollow.pods import HollowKubelet
from tests import builders


@dataclass
class Cluster:
    """The scheduler under test, and hollow nodes (with their kubelets) added by each test."""

    client: Client
    namespace: str
    scheduler: Scheduler
    prefix: str
    kubelet_informers: SharedInformerFactory
    fleets: list[NodeFleet] = field(default_factory=list)
    kubelets: list[asyncio.Task[None]] = field(default_factory=list)

    async def add_nodes(self, spec: FleetSpec) -> NodeFleet:
        clock = RealClock()
        fleet = NodeFleet(self.client, spec, clock, renew_interval=3600)
        await fleet.register()
        self.fleets.append(fleet)
        kubelet = HollowKubelet(self.client, self.kubelet_informers, spec, clock)
        self.kubelet_informers.start()
        await self.kubelet_informers.wait_for_cache_sync()
        self.kubelets.append(asyncio.create_task(kubelet.run()))
        return fleet

    async def create(self, *pods: Pod) -> None:
        for pod in pods:
            pod.metadata.namespace = self.namespace
            await self.client.create(pod)

    async def placement(self, names: Sequence[str], within: float = 15.0) -> dict[str, str]:
        """Node of each named pod, once all are bound."""
        placed: dict[str, str] = {}

        async def bound() -> bool:
            for name in names:
                pod = await self.client.get(Pod, name, self.namespace)
                if pod.spec and pod.spec.node_name:
                    placed[name] = pod.spec.node_name
            return len(placed) == len(names)

        await eventually(bound, within)
        return placed

    async def events(self, pod: str, reason: str) -> list[str]:
        """The messages of the pod's events with ``reason``, once there is one."""
        messages: list[str] = []

        async def recorded() -> bool:
            listed = await self.client.list(Event, self.namespace)
            messages[:] = [
                e.message or ""
                for e in listed.items
                if e.involved_object and e.involved_object.name == pod and e.reason == reason
            ]
            return bool(messages)

        await eventually(recorded)
        return messages


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


@pytest.fixture
async def cluster(
    client: Client, namespace: str, request: pytest.FixtureRequest
) -> AsyncIterator[Cluster]:
    """A scheduler with the default configuration, or the YAML a test gives as its param."""
    config = load(request.param) if hasattr(request, "param") else KubeSchedulerConfiguration()
    clock = RealClock()
    informers = SharedInformerFactory(client, clock=clock)
    recorder = EventRecorder(client, component="default-scheduler", clock=clock)
    scheduler = Scheduler(client, informers, config, recorder, clock)
    prefix = f"n{uuid.uuid4().hex[:5]}-"
    kubelet_informers = SharedInformerFactory(client, clock=clock)
    cluster = Cluster(client, namespace, scheduler, prefix, kubelet_informers)
    await recorder.start()
    task = asyncio.create_task(scheduler.run())
    try:
        yield cluster
    finally:
        for running in [task, *cluster.kubelets]:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
        await informers.shutdown()
        await kubelet_informers.shutdown()
        await recorder.close()
        for fleet in cluster.fleets:
            await fleet.deregister()


def pod(
    name: str,
    *,
    cpu: str | None = None,
    labels: dict[str, str] | None = None,
    ports: list[ContainerPort] | None = None,
    **spec: Any,
) -> Pod:
    resources = ResourceRequirements(requests={"cpu": cpu}) if cpu else None
    container = Container(name="c", image="app", resources=resources, ports=ports)
    return builders.pod(name, labels=labels, containers=[container], **spec)


def nodes(cluster: Cluster, count: int, suffix: str = "", **options: object) -> FleetSpec:
    return FleetSpec(count=count, name_prefix=f"{cluster.prefix}{suffix}", **options)  # type: ignore[arg-type]


async def test_taints_keep_pods_away_unless_tolerated(cluster: Cluster) -> None:
    rule = TaintRule.parse("dedicated=infra:NoSchedule@0.67")
    spec = nodes(cluster, 3, taints=(rule,))
    await cluster.add_nodes(spec)
    untainted = {spec.name(i) for i in range(3) if not rule.applies_to(i)}
    assert len(untainted) == 1
    await cluster.create(*(pod(f"plain-{i}") for i in range(4)))
    toleration = Toleration(key="dedicated", operator="Equal", value="infra", effect="NoSchedule")
    await cluster.create(pod("tolerant", tolerations=[toleration]))
    placed = await cluster.placement([*(f"plain-{i}" for i in range(4)), "tolerant"])
    assert {placed[f"plain-{i}"] for i in range(4)} == untainted


async def test_node_selector_and_zone_spread(cluster: Cluster) -> None:
    await cluster.add_nodes(nodes(cluster, 6, zones=("z1", "z2", "z3")))
    spread = TopologySpreadConstraint(
        max_skew=1,
        topology_key="topology.kubernetes.io/zone",
        when_unsatisfiable="DoNotSchedule",
        label_selector=LabelSelector(match_labels={"app": "web"}),
    )
    names = [f"web-{i}" for i in range(6)]
    await cluster.create(
        *(pod(n, labels={"app": "web"}, topology_spread_constraints=[spread]) for n in names)
    )
    placed = await cluster.placement(names)
    zones = Counter(int(node.rsplit("-", 1)[-1]) % 3 for node in placed.values())
    assert sorted(zones.values()) == [2, 2, 2]
    await cluster.create(pod("picky", node_selector={"topology.kubernetes.io/zone": "z2"}))
    picky = await cluster.placement(["picky"])
    assert int(picky["picky"].rsplit("-", 1)[-1]) % 3 == 1


async def test_required_anti_affinity_puts_replicas_on_different_nodes(cluster: Cluster) -> None:
    await cluster.add_nodes(nodes(cluster, 3))
    anti = Affinity(
        pod_anti_affinity=PodAntiAffinity(
            required_during_scheduling_ignored_during_execution=[
                PodAffinityTerm(
                    label_selector=LabelSelector(match_labels={"app": "db"}),
                    topology_key="kubernetes.io/hostname",
                )
            ]
        )
    )
    names = [f"db-{i}" for i in range(4)]
    for name in names:
        await cluster.create(pod(name, labels={"app": "db"}, affinity=anti))
    placed = await cluster.placement(names[:3])
    assert len(set(placed.values())) == 3

    message = (await cluster.events("db-3", "FailedScheduling"))[0]
    assert "3 node(s) didn't match pod anti-affinity rules" in message


async def test_a_cluster_without_nodes_says_so(cluster: Cluster) -> None:
    """Upstream's words when there is no node at all, not a histogram of zero nodes."""
    await cluster.create(pod("early"))
    message = (await cluster.events("early", "FailedScheduling"))[0]
    assert message == "no nodes available to schedule pods"
    got = await cluster.client.get(Pod, "early", cluster.namespace)
    conditions = {c.type: c for c in (got.status.conditions or [])} if got.status else {}
    assert conditions["PodScheduled"].reason == "Unschedulable"
    assert conditions["PodScheduled"].message == message
    await cluster.add_nodes(nodes(cluster, 1))
    assert (await cluster.placement(["early"]))["early"] == f"{cluster.prefix}0"


async def test_unschedulable_pod_waits_for_a_fitting_node(cluster: Cluster) -> None:
    await cluster.add_nodes(nodes(cluster, 3, cpu="2"))
    await cluster.create(pod("big", cpu="3"))

    message = (await cluster.events("big", "FailedScheduling"))[0]
    assert message.startswith("0/3 nodes are available: 3 Insufficient cpu.")
    assert "preemption: 0/3 nodes are available" in message
    got = await cluster.client.get(Pod, "big", cluster.namespace)
    conditions = {c.type: c for c in (got.status.conditions or [])} if got.status else {}
    assert conditions["PodScheduled"].status == "False"
    assert conditions["PodScheduled"].reason == "Unschedulable"
    await cluster.add_nodes(nodes(cluster, 1, suffix="big-", cpu="8"))
    placed = await cluster.placement(["big"])
    assert placed["big"] == f"{cluster.prefix}big-0"
    scheduled = await cluster.events("big", "Scheduled")
    assert scheduled == [f"Successfully assigned {cluster.namespace}/big to {placed['big']}"]


async def test_host_ports_conflict(cluster: Cluster) -> None:
    await cluster.add_nodes(nodes(cluster, 2))
    ports = [ContainerPort(container_port=80, host_port=8080, protocol="TCP")]
    names = [f"proxy-{i}" for i in range(3)]
    for name in names:
        await cluster.create(pod(name, ports=ports))
    placed = await cluster.placement(names[:2])
    assert len(set(placed.values())) == 2

    message = (await cluster.events("proxy-2", "FailedScheduling"))[0]
    assert "2 node(s) didn't have free ports for the requested pod ports" in message


async def test_higher_priority_preempts_the_lowest(cluster: Cluster) -> None:
    for name, value in (("low", 10), ("high", 1000)):
        with contextlib.suppress(ApiError):
            await cluster.client.create(
                PriorityClass(metadata=ObjectMeta(name=f"{cluster.prefix}{name}"), value=value)
            )
    await cluster.add_nodes(nodes(cluster, 2, cpu="2"))
    victims = [f"low-{i}" for i in range(2)]
    for name in victims:
        await cluster.create(pod(name, cpu="1500m", priority_class_name=f"{cluster.prefix}low"))
    await cluster.placement(victims)
    await cluster.create(pod("vip", cpu="1500m", priority_class_name=f"{cluster.prefix}high"))
    placed = await cluster.placement(["vip"], within=30)
    remaining = {
        p.metadata.name: p
        for p in (await cluster.client.list(Pod, cluster.namespace)).items
        if not p.metadata.deletion_timestamp
    }
    assert "vip" in remaining
    survivors = [name for name in victims if name in remaining]
    assert len(survivors) == 1
    assert remaining[survivors[0]].spec.node_name != placed["vip"]  # type: ignore[union-attr]


async def test_pods_for_other_schedulers_are_left_alone(cluster: Cluster) -> None:
    await cluster.add_nodes(nodes(cluster, 1))
    await cluster.create(pod("theirs", scheduler_name="someone-else"), pod("ours"))
    await cluster.placement(["ours"])
    theirs = await cluster.client.get(Pod, "theirs", cluster.namespace)
    assert theirs.spec is not None and not theirs.spec.node_name


async def test_every_decision_is_explained(cluster: Cluster) -> None:
    await cluster.add_nodes(nodes(cluster, 3, taints=(TaintRule.parse("gpu=yes:NoSchedule@0.34"),)))
    await cluster.create(pod("web"))
    placed = await cluster.placement(["web"])
    decision = cluster.scheduler.decisions.get(f"{cluster.namespace}/web")
    assert decision is not None and decision.result == "Scheduled"
    assert decision.node == placed["web"]
    doc = to_json(decision)
    rejected = [v for v in doc["filter"].values() if v is not None]
    assert rejected == [
        {"plugin": "TaintToleration", "reason": "node(s) had untolerated taint {gpu: yes}"}
    ]
    feasible = [node for node, v in doc["filter"].items() if v is None]
    assert len(feasible) == 2 and set(doc["scores"]) == set(feasible)
    for node in feasible:
        total = sum(b["weighted"] for b in doc["scores"][node].values())
        assert doc["total"][node] == total
        fit = doc["scores"][node]["NodeResourcesFit"]
        assert fit["weighted"] == fit["normalized"] * doc["weights"]["NodeResourcesFit"]
    text = render(doc)
    assert f"Result:   Scheduled on {placed['web']}" in text
    assert "TaintToleration" in text and "node(s) had untolerated taint {gpu: yes}" in text
    assert f"{placed['web']} *" in text


async def test_bound_pods_run_on_their_hollow_kubelet(cluster: Cluster) -> None:
    await cluster.add_nodes(nodes(cluster, 2))
    await cluster.create(pod("app"))
    placed = await cluster.placement(["app"])

    async def running() -> bool:
        got = await cluster.client.get(Pod, "app", cluster.namespace)
        return bool(got.status and got.status.phase == "Running")

    await eventually(running)
    got = await cluster.client.get(Pod, "app", cluster.namespace)
    assert got.status is not None and got.status.host_ip
    assert placed["app"].startswith(cluster.prefix)


TWO_PROFILES = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packer
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
"""


@pytest.mark.parametrize("cluster", [pytest.param(TWO_PROFILES, id="two-profiles")], indirect=True)
async def test_each_profile_schedules_its_own_pods(cluster: Cluster) -> None:
    await cluster.add_nodes(nodes(cluster, 3, cpu="4"))
    packed = [f"packed-{i}" for i in range(3)]
    for name in packed:
        await cluster.create(pod(name, cpu="1", scheduler_name="bin-packer"))
        await cluster.placement([name])
    spread = [f"spread-{i}" for i in range(3)]
    for name in spread:
        await cluster.create(pod(name, cpu="500m"))
        await cluster.placement([name])
    placed = await cluster.placement(packed + spread)
    packed_on = {placed[name] for name in packed}
    assert len(packed_on) == 1  # MostAllocated packs
    assert not packed_on & {placed[name] for name in spread}  # LeastAllocated avoids the full one
    decision = cluster.scheduler.decisions.get(f"{cluster.namespace}/packed-2")
    assert decision is not None and decision.profile == "bin-packer"
