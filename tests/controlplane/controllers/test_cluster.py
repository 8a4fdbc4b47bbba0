"""The controllers end to end: a real API server, the scheduler and every controller in this
process, and hollow nodes with their kubelets, driven with the real kubectl."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from controlplane.controllers.context import ControllerContext, ControllerOptions
from controlplane.controllers.manager import run_controllers
from controlplane.controllers.registry import CONTROLLERS
from controlplane.scheduler.config import KubeSchedulerConfiguration
from controlplane.scheduler.scheduler import Scheduler
from kube.api.kinds.apps_v1 import ReplicaSet
from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Endpoints
from kube.api.kinds.core_v1.volume import PersistentVolumeClaim
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.events import EventRecorder
from kube.client.informers import SharedInformerFactory
from kube.client.rest import Client
from kube.clock import RealClock
from node.hollow.nodes import FleetSpec, NodeFleet
from node.hollow.pods import HollowKubelet
from tests.servers import Kubectl, ServerProcess

GRACE = 3.0
"""The node-monitor grace period here: seconds of silence before a node is NotReady."""


@dataclass
class Cluster:
    client: Client
    kubectl: Kubectl
    namespace: str
    prefix: str
    kubelet_informers: SharedInformerFactory
    fleets: list[NodeFleet] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    """The scheduler, the controller-manager and each fleet's kubelet and lease renewal."""
    controllers: asyncio.Task[None] | None = None
    """The controller-manager's task (also in ``tasks``), for a test that restarts it."""

    async def add_nodes(self, count: int, suffix: str = "") -> NodeFleet:
        clock = RealClock()
        spec = FleetSpec(count=count, name_prefix=f"{self.prefix}{suffix}")
        fleet = NodeFleet(
            self.client,
            spec,
            clock,
            renew_interval=0.5,
            lease_duration=2,
            nodes=self.kubelet_informers.informer_for(Node).lister,
        )
        await fleet.register()
        self.fleets.append(fleet)
        kubelet = HollowKubelet(self.client, self.kubelet_informers, spec, clock)
        self.kubelet_informers.start()
        await self.kubelet_informers.wait_for_cache_sync()
        self.tasks += [
            asyncio.create_task(kubelet.run()),
            asyncio.create_task(fleet.renew_forever()),
        ]
        return fleet

    async def pods(self, label_selector: str | None = None) -> list[Pod]:
        return (await self.client.list(Pod, self.namespace, label_selector=label_selector)).items

    async def kube(self, *args: str, input: str | None = None) -> str:
        """kubectl in this namespace, off the event loop (it blocks)."""
        result = await asyncio.to_thread(self.kubectl.run, *args, input=input)
        return result.stdout


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


@pytest.fixture
async def cluster(
    apiserver: ServerProcess, client: Client, namespace: str, tmp_path: Path
) -> AsyncIterator[Cluster]:
    clock = RealClock()
    informers = SharedInformerFactory(client, clock=clock)
    recorder = EventRecorder(client, component="kube-controller-manager", clock=clock)
    scheduler_informers = SharedInformerFactory(client, clock=clock)
    scheduler = Scheduler(
        client, scheduler_informers, KubeSchedulerConfiguration(), recorder, clock
    )
    ctx = ControllerContext(
        client, informers, recorder, clock, ControllerOptions(node_monitor_grace_period=GRACE)
    )
    cluster = Cluster(
        client,
        Kubectl(apiserver.kubeconfig, tmp_path / "kube-cache", namespace),
        namespace,
        f"c{uuid.uuid4().hex[:5]}-",
        SharedInformerFactory(client, clock=clock),
    )
    await recorder.start()
    cluster.controllers = asyncio.create_task(run_controllers(ctx, CONTROLLERS, list(CONTROLLERS)))
    cluster.tasks += [asyncio.create_task(scheduler.run()), cluster.controllers]
    try:
        yield cluster
    finally:
        for task in cluster.tasks:
            task.cancel()
        for task in cluster.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for factory in (informers, scheduler_informers, cluster.kubelet_informers):
            await factory.shutdown()
        await recorder.close()
        for fleet in cluster.fleets:
            await fleet.deregister()


async def test_a_deployment_rolls_out_within_its_surge_and_unavailability(
    cluster: Cluster,
) -> None:
    await cluster.add_nodes(3)
    await cluster.kube("create", "deployment", "web", "--image=nginx:1", "--replicas=4")
    await cluster.kube("rollout", "status", "deployment/web", "--timeout=60s")
    peak, low = 0, 4
    watching = True

    async def observe() -> None:
        nonlocal peak, low
        while watching:
            pods = [p for p in await cluster.pods(label_selector="app=web")]
            alive = [p for p in pods if not p.metadata.deletion_timestamp]
            ready = [
                p
                for p in alive
                if p.status
                and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())
            ]
            peak, low = max(peak, len(alive)), min(low, len(ready))
            await asyncio.sleep(0.02)

    observer = asyncio.create_task(observe())
    await cluster.kube("set", "image", "deployment/web", "nginx=nginx:2")
    await cluster.kube("rollout", "status", "deployment/web", "--timeout=60s")
    watching = False
    await observer
    # 25% of 4: maxSurge rounds up to 1, maxUnavailable down to 1.
    assert peak <= 5 and low >= 3
    images = {p.spec.containers[0].image for p in await cluster.pods(label_selector="app=web")}  # type: ignore[index,union-attr]
    assert images == {"nginx:2"}
    await cluster.kube("rollout", "undo", "deployment/web")
    await cluster.kube("rollout", "status", "deployment/web", "--timeout=60s")
    deployment = json.loads(await cluster.kube("get", "deployment", "web", "-o", "json"))
    assert deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"


@pytest.mark.parametrize(
    ("cascade", "replicasets_left"),
    [
        pytest.param("orphan", 1, id="orphan"),
        pytest.param("foreground", 0, id="foreground"),
        pytest.param("background", 0, id="background"),
    ],
)
async def test_deleting_a_deployment_does_what_kubectl_promises(
    cluster: Cluster, cascade: str, replicasets_left: int
) -> None:
    await cluster.add_nodes(2)
    await cluster.kube("create", "deployment", "app", "--image=nginx", "--replicas=2")
    await cluster.kube("rollout", "status", "deployment/app", "--timeout=60s")
    await cluster.kube("delete", "deployment", "app", f"--cascade={cascade}", "--timeout=60s")

    async def settled() -> bool:
        sets = (await cluster.client.list(ReplicaSet, cluster.namespace)).items
        pods = [p for p in await cluster.pods() if not p.metadata.deletion_timestamp]
        return len(sets) == replicasets_left and len(pods) == 2 * replicasets_left

    await eventually(settled)
    if cascade == "orphan":
        (orphan,) = (await cluster.client.list(ReplicaSet, cluster.namespace)).items
        assert not orphan.metadata.owner_references


async def test_a_daemonset_covers_every_node_even_new_ones(cluster: Cluster) -> None:
    first = await cluster.add_nodes(2)
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "a", "image": "agent"}]},
            },
        },
    }
    await cluster.kube("apply", "-f", "-", input=json.dumps(manifest))

    async def on(nodes: set[str]) -> bool:
        running = {
            p.spec.node_name
            for p in await cluster.pods(label_selector="app=agent")
            if p.spec and p.status and p.status.phase == "Running"
        }
        return nodes <= running

    await eventually(lambda: on(set(first.names)))
    later = await cluster.add_nodes(1, suffix="late-")
    await eventually(lambda: on(set(first.names) | set(later.names)))


async def test_a_statefulset_comes_up_in_order_with_its_claims(cluster: Cluster) -> None:
    await cluster.add_nodes(2)
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": f"{cluster.prefix}local"},
        "provisioner": "kubelab.io/hostpath",
        "volumeBindingMode": "Immediate",
    }
    await cluster.kube("apply", "-f", "-", input=json.dumps(storage_class))
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 3,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {
                    "containers": [
                        {
                            "name": "db",
                            "image": "db",
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        }
                    ]
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": f"{cluster.prefix}local",
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
    }
    await cluster.kube("apply", "-f", "-", input=json.dumps(manifest))
    await cluster.kube("rollout", "status", "statefulset/db", "--timeout=90s")
    pods = sorted(await cluster.pods(label_selector="app=db"), key=lambda p: p.metadata.name or "")
    assert [p.metadata.name for p in pods] == ["db-0", "db-1", "db-2"]
    started = [p.status.start_time for p in pods if p.status and p.status.start_time]
    assert started == sorted(started)  # OrderedReady: each after the one before
    claims = (await cluster.client.list(PersistentVolumeClaim, cluster.namespace)).items
    bound = {c.metadata.name: c.status.phase if c.status else None for c in claims}
    assert bound == {f"data-db-{i}": "Bound" for i in range(3)}


async def test_deleting_a_namespace_empties_and_removes_it(cluster: Cluster) -> None:
    await cluster.add_nodes(1)
    name = f"{cluster.prefix}gone"
    await cluster.client.create(Namespace(metadata=ObjectMeta(name=name)))
    await asyncio.to_thread(
        cluster.kubectl.run,
        "-n",
        name,
        "create",
        "deployment",
        "x",
        "--image=nginx",
        namespaced=False,
    )
    await asyncio.to_thread(
        cluster.kubectl.run,
        "-n",
        name,
        "create",
        "configmap",
        "c",
        "--from-literal=a=b",
        namespaced=False,
    )
    await asyncio.to_thread(
        cluster.kubectl.run, "delete", "namespace", name, "--timeout=60s", namespaced=False
    )

    async def gone() -> bool:
        try:
            await cluster.client.get(Namespace, name)
        except ApiError as error:
            return error.not_found
        return False

    await eventually(gone)


async def test_a_silent_node_is_tainted_and_its_pods_move(cluster: Cluster) -> None:
    fleet = await cluster.add_nodes(2)
    toleration = {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 1,
    }
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "mover"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "mover"}},
            "template": {
                "metadata": {"labels": {"app": "mover"}},
                "spec": {
                    "containers": [{"name": "m", "image": "m"}],
                    "tolerations": [toleration],
                },
            },
        },
    }
    await cluster.kube("apply", "-f", "-", input=json.dumps(manifest))
    await cluster.kube("rollout", "status", "deployment/mover", "--timeout=60s")
    silent = fleet.names[0]
    fleet.silent.add(silent)

    async def tainted() -> bool:
        node = await cluster.client.get(Node, silent)
        taints = {t.key for t in (node.spec.taints if node.spec else None) or ()}
        ready = [
            c for c in (node.status.conditions if node.status else None) or () if c.type == "Ready"
        ]
        return "node.kubernetes.io/unreachable" in taints and ready[0].status == "Unknown"

    await eventually(tainted)

    async def moved() -> bool:
        pods = [p for p in await cluster.pods(label_selector="app=mover")]
        running = [
            p
            for p in pods
            if not p.metadata.deletion_timestamp and p.status and p.status.phase == "Running"
        ]
        return len(running) == 2 and all(p.spec and p.spec.node_name != silent for p in running)

    await eventually(moved, within=60)
    fleet.silent.discard(silent)  # the kubelet is back: it reports Ready, the taints go

    async def back() -> bool:
        node = await cluster.client.get(Node, silent)
        taints = (node.spec.taints if node.spec else None) or ()
        return not any(t.key == "node.kubernetes.io/unreachable" for t in taints)

    await eventually(back)


GATED_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 2
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      readinessGates:
      - conditionType: example.com/in-rotation
      containers:
      - name: api
        image: nginx
"""


async def test_endpoints_follow_pod_readiness(cluster: Cluster) -> None:
    # Readiness another component decides (a readiness gate's condition, as a load balancer
    # controller sets it), which the kubelet folds into Ready: it would set Ready itself back.
    await cluster.add_nodes(1)
    await cluster.kube("apply", "-f", "-", input=GATED_DEPLOYMENT)
    await cluster.kube("expose", "deployment", "api", "--port=80")

    async def addresses() -> int:
        try:
            endpoints = await cluster.client.get(Endpoints, "api", cluster.namespace)
        except ApiError:
            return 0
        return sum(len(subset.addresses or ()) for subset in endpoints.subsets or ())

    async def gate(pod: Pod, status: str) -> None:
        condition = {"type": "example.com/in-rotation", "status": status}
        await cluster.client.patch(
            Pod,
            pod.metadata.name or "",
            cluster.namespace,
            {"status": {"conditions": [condition]}},
            patch_type="strategic",
            subresource="status",
        )

    async def two_pods() -> bool:
        return len(await cluster.pods(label_selector="app=api")) == 2

    await eventually(two_pods, within=10)
    pods = await cluster.pods(label_selector="app=api")
    for pod in pods:
        await gate(pod, "True")
    await cluster.kube("rollout", "status", "deployment/api", "--timeout=60s")

    def having(n: int) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return await addresses() == n

        return check

    await eventually(having(2), within=5)
    await gate(pods[0], "False")
    # The kubelet turns Ready off, then the endpoints controller drops the address.
    await eventually(having(1), within=2)
    await gate(pods[0], "True")
    await eventually(having(2), within=2)


async def test_scale_pause_and_resume(cluster: Cluster) -> None:
    await cluster.add_nodes(2)
    await cluster.kube("create", "deployment", "web", "--image=nginx:1", "--replicas=2")
    await cluster.kube("rollout", "status", "deployment/web", "--timeout=60s")
    await cluster.kube("scale", "deployment/web", "--replicas=4")
    await cluster.kube("rollout", "status", "deployment/web", "--timeout=60s")
    assert len(await cluster.pods(label_selector="app=web")) == 4
    await cluster.kube("rollout", "pause", "deployment/web")
    await cluster.kube("set", "image", "deployment/web", "nginx=nginx:2")
    await asyncio.sleep(1)
    images = {p.spec.containers[0].image for p in await cluster.pods(label_selector="app=web")}  # type: ignore[index,union-attr]
    assert images == {"nginx:1"}  # paused: the template change waits
    await cluster.kube("rollout", "resume", "deployment/web")
    await cluster.kube("rollout", "status", "deployment/web", "--timeout=60s")
    images = {p.spec.containers[0].image for p in await cluster.pods(label_selector="app=web")}  # type: ignore[index,union-attr]
    assert images == {"nginx:2"}


async def test_restarting_the_controllers_mid_rollout_adds_no_pods(
    cluster: Cluster, client: Client
) -> None:
    """Stop every controller while a Deployment is being created and start fresh ones (new
    caches, no memory of what was in flight): the rollout finishes with exactly its pods."""
    await cluster.add_nodes(3)
    await cluster.kube("create", "deployment", "big", "--image=nginx", "--replicas=30")

    async def some() -> bool:
        return len(await cluster.pods(label_selector="app=big")) >= 5

    await eventually(some)
    controllers = cluster.controllers
    assert controllers is not None
    controllers.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await controllers
    cluster.tasks.remove(controllers)
    clock = RealClock()
    informers = SharedInformerFactory(client, clock=clock)
    recorder = EventRecorder(client, component="kube-controller-manager", clock=clock)
    options = ControllerOptions(node_monitor_grace_period=GRACE)
    ctx = ControllerContext(client, informers, recorder, clock, options)
    cluster.controllers = asyncio.create_task(run_controllers(ctx, CONTROLLERS, list(CONTROLLERS)))
    cluster.tasks.append(cluster.controllers)
    try:
        await cluster.kube("rollout", "status", "deployment/big", "--timeout=90s")
        await asyncio.sleep(1)
        pods = await cluster.pods(label_selector="app=big")
        assert len([p for p in pods if not p.metadata.deletion_timestamp]) == 30
    finally:
        cluster.controllers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await cluster.controllers
        cluster.tasks.remove(cluster.controllers)
        await informers.shutdown()


async def finish_pods(cluster: Cluster, selector: str, phase: str) -> list[str]:
    """Act as the kubelet for a Job's running pods: end them in ``phase``."""
    finished = []
    for pod in await cluster.pods(label_selector=selector):
        if pod.status and pod.status.phase == "Running" and not pod.metadata.deletion_timestamp:
            await cluster.client.patch(
                Pod,
                pod.metadata.name or "",
                cluster.namespace,
                {"status": {"phase": phase}},
                subresource="status",
            )
            finished.append(pod.metadata.name or "")
    return finished


async def test_a_job_retries_then_completes(cluster: Cluster) -> None:
    await cluster.add_nodes(1)
    await cluster.kube("create", "job", "once", "--image=busybox")

    async def running() -> bool:
        pods = await cluster.pods(label_selector="job-name=once")
        return any(p.status and p.status.phase == "Running" for p in pods)

    await eventually(running)
    assert await finish_pods(cluster, "job-name=once", "Failed")

    async def retried() -> bool:
        pods = await cluster.pods(label_selector="job-name=once")
        return len(pods) == 2 and await running()

    await eventually(retried, within=40)  # the first retry waits out a 10 s backoff
    assert await finish_pods(cluster, "job-name=once", "Succeeded")

    async def complete() -> bool:
        job = json.loads(await cluster.kube("get", "job", "once", "-o", "json"))
        conditions = {c["type"]: c["status"] for c in job["status"].get("conditions", [])}
        return conditions.get("Complete") == "True"

    await eventually(complete)
    job = json.loads(await cluster.kube("get", "job", "once", "-o", "json"))
    assert (job["status"]["succeeded"], job["status"]["failed"]) == (1, 1)


@pytest.mark.slow
async def test_a_cronjob_fires_every_minute(cluster: Cluster) -> None:
    await cluster.add_nodes(1)
    await cluster.kube("create", "cronjob", "tick", "--image=busybox", "--schedule=*/1 * * * *")

    async def fired() -> bool:
        # The controller creates the Job, then records the time in the CronJob's status.
        jobs = json.loads(await cluster.kube("get", "jobs", "-o", "json"))["items"]
        cronjob = json.loads(await cluster.kube("get", "cronjob", "tick", "-o", "json"))
        return any(j["metadata"]["name"].startswith("tick-") for j in jobs) and bool(
            cronjob.get("status", {}).get("lastScheduleTime")
        )

    await eventually(fired, within=75)
