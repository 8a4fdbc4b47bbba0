"""The horizontal pod autoscaler: how soon it answers a load step, and what 1,000 HPAs cost at
rest.

The cluster is made of real processes, as a user would run them: ``kubelab server`` (API
server with aggregator routing, scheduler, controller-manager with upstream's autoscaler
defaults: a sync every 15 s), ``kubelab hollow-nodes`` serving every node's kubelet API over
synthetic usage (``--kubelet-address``), and ``kubelab metrics-server`` scraping those kubelets
every 15 s (upstream's ``--metric-resolution``) behind the APIService
``v1beta1.metrics.k8s.io``.  ``DEPLOYMENTS`` Deployments of one replica, each with its HPA
(CPU 50% of a 200m request, 1 to 10 replicas), run pods whose annotation
``kubelab.io/hollow-usage`` says they use 100m: exactly at the target, so nothing scales.

1. **At rest**: once every HPA reports its utilization and a sync period later, the
   controller-manager's CPU time (the
   child of ``kubelab server`` that runs it) is read with psutil over ``REST_SECONDS``.
   Target: under 5% of a core.
2. **Load step**: the pods of ``STEPS`` Deployments are annotated to use 400m (200%), each at
   a moment of its own within one period; measured is, for each, the time until its
   Deployment's replicas rise.  The floor is
   upstream's: the next scrape that sees the load (up to 15 s) plus the next sync of the HPA
   (up to 15 s), 30 s at worst.

``python -m bench.autoscaling``.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.controllers import cpu_share, settle
from kube.api.kinds.apps_v1 import Deployment
from kube.api.kinds.autoscaling_v2 import HorizontalPodAutoscaler
from kube.api.kinds.core_v1.cluster import Namespace
from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import ObjectMeta
from kube.client.rest import Client
from tests.controlplane.metricsserver.processes import (
    hollow_kubelets,
    metrics_server,
    registration,
)
from tests.servers import ServerProcess, start_all_in_one, stop_server

NODES = 20
DEPLOYMENTS = 1_000
STEPS = 5
REST_SECONDS = 60.0
REST_TARGET = 0.05
SYNC_PERIOD = 15.0
RESOLUTION = 15.0
FLOOR = SYNC_PERIOD + RESOLUTION
NAMESPACE = "bench"
USAGE = "kubelab.io/hollow-usage"
TIMEOUT = 600.0
IN_FLIGHT = 32


def deployment(name: str) -> dict[str, Any]:
    """One replica whose pod requests 200m and, by its annotation, uses 100m (50%)."""
    container = {
        "name": "app",
        "image": "registry.local/app:1",
        "resources": {"requests": {"cpu": "200m", "memory": "16Mi"}},
    }
    usage = {USAGE: json.dumps({"app": {"cpu": "100m", "memory": "16Mi"}})}
    template = {
        "metadata": {"labels": {"app": name}, "annotations": usage},
        "spec": {"containers": [container]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": template},
    }


def autoscaler(name: str) -> dict[str, Any]:
    """What ``kubectl autoscale deployment NAME --cpu-percent=50 --min=1 --max=10`` makes."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 1,
            "maxReplicas": 10,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 50},
                    },
                }
            ],
        },
    }


async def create_all(client: Client, resource: str, documents: list[dict[str, Any]]) -> None:
    api = await client.resource(resource)
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(document: dict[str, Any]) -> None:
        async with gate:
            await api.create(document)

    await asyncio.gather(*(one(d) for d in documents))


async def until(what: str, done: Any) -> None:
    """Poll the coroutine function ``done`` every second until it returns true."""
    deadline = time.monotonic() + TIMEOUT
    while not await done():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(1.0)


async def populate(client: Client, names: list[str]) -> float:
    """Every Deployment running, then every HPA reading its utilization: the seconds from the
    HPAs' creation to the last one's first status (every HPA synced once)."""
    await create_all(client, "deployments.apps", [deployment(n) for n in names])

    async def running() -> bool:
        pods = (await client.list(Pod, NAMESPACE)).items
        return sum(1 for p in pods if p.status and p.status.phase == "Running") >= len(names)

    await until("every pod running", running)
    begin = time.perf_counter()
    await create_all(client, "horizontalpodautoscalers.autoscaling", [autoscaler(n) for n in names])

    async def measured() -> bool:
        hpas = (await client.list(HorizontalPodAutoscaler, NAMESPACE)).items
        read = [h for h in hpas if h.status and h.status.current_metrics]
        return len(read) == len(names)

    await until("every HPA reading its metric", measured)
    return time.perf_counter() - begin


def controller_manager(server: ServerProcess) -> psutil.Process:
    for child in psutil.Process(server.process.pid).children():
        command = child.cmdline()
        if command[command.index("--run-component") + 1] == "controller-manager":
            return child
    raise LookupError("kubelab server runs no controller-manager")


def rest_cpu(process: psutil.Process) -> float:
    """The process's CPU use over ``REST_SECONDS`` after a sync period (the first statuses
    written)."""
    time.sleep(SYNC_PERIOD)
    return cpu_share(process, REST_SECONDS)


async def load_step(client: Client, names: list[str]) -> list[float]:
    """Seconds from each Deployment's pod using 400m until its Deployment scales up.  Each is
    stepped at its own moment, drawn over one period, so that the steps land at different
    phases of the scrapes and the syncs (both every 15 s) and the median is over phases."""
    pods = {
        (pod.metadata.labels or {}).get("app"): pod.metadata.name or ""
        for pod in (await client.list(Pod, NAMESPACE)).items
    }
    loaded = json.dumps({"app": {"cpu": "400m", "memory": "16Mi"}})
    patch = {"metadata": {"annotations": {USAGE: loaded}}}

    async def step(name: str, after: float) -> float:
        await asyncio.sleep(after)
        begin = time.perf_counter()
        await client.patch(Pod, pods[name], NAMESPACE, patch)

        async def scaled() -> bool:
            got = await client.get(Deployment, name, NAMESPACE)
            return bool(got.spec and (got.spec.replicas or 0) > 1)

        await until(f"{name} to scale up", scaled)
        return time.perf_counter() - begin

    moments = [random.uniform(0, SYNC_PERIOD) for _ in names]
    return sorted(await asyncio.gather(*(step(n, m) for n, m in zip(names, moments, strict=True))))


async def run(server: ServerProcess, work: Path) -> tuple[float, float, list[float]]:
    hollow = hollow_kubelets(
        server, work, NODES, "--cpu", "64", "--memory", "256Gi", "--workers", "32"
    )
    metrics = None
    try:
        metrics, address, port = metrics_server(server, work, f"{RESOLUTION:g}s")
        async with Client.from_kubeconfig(server.kubeconfig, qps=0) as client:
            for document in registration(address, port):
                resource = await client.resource(document["kind"].lower())
                await resource.create(document)
            await client.create(Namespace(metadata=ObjectMeta(name=NAMESPACE)))
            await settle(server.kubeconfig, [NAMESPACE], NODES)
            names = [f"app-{i}" for i in range(DEPLOYMENTS)]
            first_round = await populate(client, names)
            cpu = await asyncio.to_thread(rest_cpu, controller_manager(server))
            steps = await load_step(client, names[:STEPS])
        return first_round, cpu, steps
    finally:
        if metrics is not None:
            metrics.stop()
        hollow.stop()


def main() -> tuple[float, float, list[float]]:
    with tempfile.TemporaryDirectory(prefix="kubelab-bench-autoscaling-") as name:
        tmp = Path(name)
        data = tmp / "server"
        data.mkdir()
        server = start_all_in_one(
            data,
            "--enable-aggregator-routing=true",
            "--max-requests-inflight",
            "2000",
            "--kube-api-qps",
            "5000",
            "--kube-api-burst",
            "5000",
        )
        try:
            first_round, cpu, steps = asyncio.run(run(server, tmp))
        finally:
            stop_server(server)
    print(f"\nautoscaling: {DEPLOYMENTS} HPAs on {NODES} hollow nodes, metrics-server every 15 s")
    print(
        f"  every HPA synced once        {first_round:5.1f} s after their creation "
        f"({DEPLOYMENTS / first_round:.1f} syncs/s; a round every {SYNC_PERIOD:g} s needs "
        f"{DEPLOYMENTS / SYNC_PERIOD:.0f})"
    )
    verdict = "meets" if cpu < REST_TARGET else "MISSES"
    print(
        f"  controller-manager at rest   {cpu * 100:5.1f}% of a core "
        f"(target < {REST_TARGET * 100:g}%: {verdict})"
    )
    median = statistics.median(steps)
    print(
        f"  load step to first scale-up  median {median:5.1f} s, max {max(steps):5.1f} s "
        f"of {len(steps)}; floor {FLOOR:g} s (15 s sync + 15 s resolution), "
        f"ratio {median / FLOOR:.2f}x"
    )
    return first_round, cpu, steps


if __name__ == "__main__":
    main()
