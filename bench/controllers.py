"""The controller-manager at work and at rest.

1. **Rollout**: ``kubelab server`` (API server, scheduler, controller-manager; client rate
   limits raised) runs as a subprocess; this process runs 100 hollow nodes with their
   kubelets.  A Deployment of 1,000 replicas is created, and the time until every pod is
   Running and the Deployment reports Available is measured.  The floor, measured in the
   same run: creating the same 1,000 pods directly through the API (32 at a time), bound
   and left for the hollow kubelets to start, which is the API work any controller must
   cause (created with ``nodeName`` set: the scheduler runs too).  Target: under 20 s.
2. **Idle CPU**: the controller-manager alone (``kubelab controller-manager``, a subprocess
   against a separate API server) watching 10,000 pods that nothing changes; its CPU time
   over ``IDLE_SECONDS`` is measured with psutil.  Target: under 5% of a core.

``python -m bench.controllers``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from bench.scheduler import basic_pod, register_nodes, time_to_bind
from kube.api.kinds.apps_v1 import Deployment
from kube.api.kinds.core_v1.cluster import Namespace, ServiceAccount
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import ObjectMeta
from kube.client.informers import SharedInformerFactory
from kube.client.rest import Client
from kube.clock import RealClock
from node.hollow.nodes import FleetSpec, NodeFleet
from node.hollow.pods import HollowKubelet
from tests.servers import (
    BARE_APISERVER,
    REPO,
    ServerProcess,
    start_all_in_one,
    start_server,
    stop_server,
)

NODES = 100
REPLICAS = 1_000
ROLLOUT_TARGET = 20.0
IDLE_PODS = 10_000
IDLE_SECONDS = 30.0
IDLE_TARGET = 0.05
TIMEOUT = 300.0


def deployment(replicas: int) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "big", "namespace": "bench"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "big"}},
            "template": {
                "metadata": {"labels": {"app": "big"}},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "registry.local/app:1",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }
                    ]
                },
            },
        },
    }


async def settle(kubeconfig: Path, namespaces: list[str], nodes: int) -> None:
    """Until every node is untainted and every namespace has its default ServiceAccount
    (the controller-manager's work after nodes and namespaces appear)."""
    async with Client.from_kubeconfig(kubeconfig, qps=0) as client:
        deadline = time.monotonic() + TIMEOUT
        while True:
            listed = (await client.list(Node)).items
            untainted = sum(1 for n in listed if not (n.spec and n.spec.taints))
            accounts = [
                ns
                for ns in namespaces
                if any(
                    a.metadata.name == "default"
                    for a in (await client.list(ServiceAccount, ns)).items
                )
            ]
            if untainted == nodes and len(accounts) == len(namespaces):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{untainted}/{nodes} nodes untainted, accounts in {accounts}")
            await asyncio.sleep(1.0)


async def until_running(client: Client, namespace: str, count: int) -> None:
    while True:
        pods = (await client.list(Pod, namespace, label_selector=None)).items
        running = [p for p in pods if p.status and p.status.phase == "Running"]
        if len(running) >= count:
            return
        await asyncio.sleep(0.2)


async def rollout(server: ServerProcess) -> tuple[float, float]:
    """(seconds for the Deployment, seconds for the direct floor)."""
    clock = RealClock()
    spec = FleetSpec(count=NODES, name_prefix="bench-node-", cpu="32", memory="256Gi", pods=250)
    async with Client.from_kubeconfig(server.kubeconfig, qps=0) as client:
        fleet = NodeFleet(client, spec, clock, renew_interval=30.0, concurrency=64)
        await fleet.register()
        informers = SharedInformerFactory(client, clock=clock)
        kubelet = HollowKubelet(client, informers, spec, clock, workers=32)
        informers.start()
        await informers.wait_for_cache_sync()
        tasks = [asyncio.create_task(kubelet.run()), asyncio.create_task(fleet.renew_forever())]
        try:
            for name in ("floor", "bench"):
                await client.create(Namespace(metadata=ObjectMeta(name=name)))
            await settle(server.kubeconfig, ["floor", "bench"], NODES)
            # Created already bound: with the scheduler running, a pod created unbound may be
            # scheduled before a binding of our own lands.
            pods = [basic_pod(f"p{i}") for i in range(REPLICAS)]
            for i, pod in enumerate(pods):
                assert pod.spec is not None
                pod.spec.node_name = fleet.names[i % NODES]
            begin = time.perf_counter()
            await time_to_bind(client, "floor", pods)
            await until_running(client, "floor", REPLICAS)
            floor = time.perf_counter() - begin
            begin = time.perf_counter()
            deployments = await client.resource("deployments.apps")
            await deployments.create(deployment(REPLICAS))
            async with asyncio.timeout(TIMEOUT):
                await until_running(client, "bench", REPLICAS)
                while True:
                    got = await client.get(Deployment, "big", "bench")
                    conditions = (got.status.conditions if got.status else None) or ()
                    if any(c.type == "Available" and c.status == "True" for c in conditions) and (
                        got.status and got.status.available_replicas == REPLICAS
                    ):
                        break
                    await asyncio.sleep(0.2)
            took = time.perf_counter() - begin
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await informers.shutdown()
    return took, floor


def start_command(command: list[str], log: Path) -> subprocess.Popen[str]:
    with log.open("w") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=REPO
        )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "serving" not in line:
        process.kill()
        raise RuntimeError(f"{command[3]} did not start: {line!r}\n{log.read_text()}")
    return process


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


async def seed_pods(server: ServerProcess) -> None:
    names = await register_nodes(server, NODES)
    async with Client.from_kubeconfig(server.kubeconfig, qps=0) as client:
        await client.create(Namespace(metadata=ObjectMeta(name="idle")))
        pods = [basic_pod(f"p{i}") for i in range(IDLE_PODS)]
        await time_to_bind(client, "idle", pods, bind_to=names)


def cpu_share(process: psutil.Process, seconds: float) -> float:
    """The process's CPU time over the next ``seconds``, as a fraction of one core."""
    before = process.cpu_times()
    begin = time.perf_counter()
    time.sleep(seconds)
    after = process.cpu_times()
    used = (after.user - before.user) + (after.system - before.system)
    return used / (time.perf_counter() - begin)


def idle_cpu(tmp: Path) -> float:
    """The controller-manager's CPU use (fraction of one core) while nothing changes."""
    data = tmp / "idle"
    data.mkdir()
    server = start_server(data, *BARE_APISERVER, "--max-requests-inflight", "2000")
    try:
        asyncio.run(seed_pods(server))
        manager = start_command(
            [
                sys.executable,
                "-m",
                "kubelab",
                "controller-manager",
                "--kubeconfig",
                str(server.kubeconfig),
                "--port",
                "0",
                "--no-leader-elect",
            ],
            tmp / "controller-manager.log",
        )
        try:
            process = psutil.Process(manager.pid)
            time.sleep(10.0)  # start, list and sync every cache, settle
            return cpu_share(process, IDLE_SECONDS)
        finally:
            stop(manager)
    finally:
        stop_server(server)


def main() -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory(prefix="kubelab-bench-controllers-") as name:
        tmp = Path(name)
        data = tmp / "server"
        data.mkdir()
        server = start_all_in_one(data, "--kube-api-qps", "5000", "--kube-api-burst", "5000")
        try:
            took, floor = asyncio.run(rollout(server))
        finally:
            stop_server(server)
        cpu = idle_cpu(tmp)
    print(f"\ncontrollers: a Deployment of {REPLICAS} replicas on {NODES} hollow nodes")
    verdict = "meets" if took < ROLLOUT_TARGET else "MISSES"
    print(f"  rollout to Available      {took:6.1f} s   (target < {ROLLOUT_TARGET:g} s: {verdict})")
    print(f"  direct create+bind+run    {floor:6.1f} s   ratio {took / floor:.2f}x")
    verdict = "meets" if cpu < IDLE_TARGET else "MISSES"
    print(
        f"  idle controller-manager, {IDLE_PODS} pods: {cpu * 100:.1f}% of a core "
        f"(target < {IDLE_TARGET * 100:g}%: {verdict})"
    )
    return took, floor, cpu


if __name__ == "__main__":
    main()
