"""Pod startup latency on one node, beside the raw CRI floor, in one run.

A one-node cluster (``tests.node.kubelet_node.KubeletCluster``: containerd, ``kubelab server``
and ``kubelab kubelet`` in a network namespace, our CNI plugin through its agent), then:

- the floor: what the runtime alone needs for a running pod, measured directly over CRI from
  this process against the same containerd: RunPodSandbox (with its CNI ADD) +
  CreateContainer + StartContainer of busybox, ``FLOOR_RUNS`` times, each pod removed after;
- the kubelet: ``PODS`` pods (busybox ``sleep``, image present, the default service account
  token mounted as every pod has it) created through the API at ``RATE`` per second and
  scheduled by the scheduler; a watch started before the first create records when each pod
  is first reported Running.  Latency = that moment - the moment its create was sent.

Printed: floor p50/p99, startup p50/p99 and the p50 ratio.  Targets (issue 6): p99 < 1.5 s
(the Kubernetes SLO is 5 s) and p50 within 2.5x the floor.

``python -m bench.kubelet [--pods N] [--rate R]`` needs root; everything lives in a network
namespace and temporary directories that are removed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from kube.api.kinds.core_v1.cluster import Namespace, ServiceAccount
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from kubelab.lab.images import BASIC_IMAGES, BUSYBOX_IMAGE, build_images
from node.cri.client import RuntimeClient
from node.cri.pb import api_pb2 as pb
from tests.node.containerd_node import IMAGE_CACHE
from tests.node.kubelet_node import KubeletCluster

PODS = 100
RATE = 5.0
FLOOR_RUNS = 20
P99_TARGET = 1.5
RATIO_TARGET = 2.5
READY_TIMEOUT = 120.0


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def cri_floor(endpoint: str, cgroup_parent: str, runs: int) -> list[float]:
    """Seconds from RunPodSandbox to StartContainer's return, per run, pod removed after."""
    timings = []
    async with RuntimeClient(endpoint) as cri:
        for index in range(runs):
            name = f"floor-{index}-{uuid.uuid4().hex[:6]}"
            sandbox = pb.PodSandboxConfig(
                metadata=pb.PodSandboxMetadata(name=name, namespace="bench", uid=name),
                hostname=name,
                linux=pb.LinuxPodSandboxConfig(cgroup_parent=f"{cgroup_parent}/floor{index}"),
            )
            container = pb.ContainerConfig(
                metadata=pb.ContainerMetadata(name="app"),
                image=pb.ImageSpec(image=BUSYBOX_IMAGE),
                command=["sleep", "3600"],
            )
            started = time.perf_counter()
            sandbox_id = await cri.run_pod_sandbox(sandbox)
            container_id = await cri.create_container(sandbox_id, container, sandbox)
            await cri.start_container(container_id)
            timings.append(time.perf_counter() - started)
            await cri.stop_pod_sandbox(sandbox_id)
            await cri.remove_pod_sandbox(sandbox_id)
    return timings


async def node_ready(client: Client, name: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        try:
            node = await client.get(Node, name)
        except ApiError:
            node = None
        conditions = {
            c.type: c.status
            for c in (node.status.conditions if node and node.status else None) or []
        }
        if conditions.get("Ready") == "True" and node and node.spec and node.spec.pod_cidr:
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"node {name} not Ready in {READY_TIMEOUT:.0f}s")


async def namespace_ready(client: Client, namespace: str) -> None:
    await client.create(Namespace(metadata=ObjectMeta(name=namespace)))
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        try:
            await client.get(ServiceAccount, "default", namespace)
            return
        except ApiError:
            await asyncio.sleep(0.2)
    raise RuntimeError(f"namespace {namespace} got no default service account")


async def record_running(
    client: Client, namespace: str, pods: int, running: dict[str, float]
) -> None:
    """Note in ``running`` when each pod of ``namespace`` is first reported Running, until
    ``pods`` are; run it as a task started before the first create."""
    async for event in client.watch(Pod, namespace, resource_version="0"):
        pod = event.object
        name = pod.metadata.name or ""
        if pod.status is not None and pod.status.phase == "Running" and name not in running:
            running[name] = time.perf_counter()
            if len(running) == pods:
                return


async def startup_latencies(client: Client, pods: int, rate: float) -> list[float]:
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    await namespace_ready(client, namespace)
    sent: dict[str, float] = {}
    running: dict[str, float] = {}
    watcher = asyncio.create_task(record_running(client, namespace, pods, running))
    await asyncio.sleep(0.5)
    try:
        for index in range(pods):
            name = f"pod-{index}"
            pod = Pod(
                metadata=ObjectMeta(name=name, namespace=namespace),
                spec=PodSpec(
                    containers=[
                        Container(name="app", image=BUSYBOX_IMAGE, command=["sleep", "3600"])
                    ],
                    termination_grace_period_seconds=0,
                ),
            )
            sent[name] = time.perf_counter()
            await client.create(pod)
            await asyncio.sleep(max(0.0, sent[name] + 1 / rate - time.perf_counter()))
        await asyncio.wait_for(watcher, READY_TIMEOUT)
    finally:
        watcher.cancel()
        await client.delete(Namespace, namespace)
    return [running[name] - sent[name] for name in sent]


def report(floor: list[float], startup: list[float], pods: int, rate: float) -> None:
    floor_p50, floor_p99 = statistics.median(floor), percentile(floor, 0.99)
    p50, p99 = statistics.median(startup), percentile(startup, 0.99)
    ratio = p50 / floor_p50
    print(f"pod startup on one node: {pods} pods at {rate:g}/s, image present")
    print(
        f"  raw CRI floor (sandbox+create+start, {len(floor)} runs): "
        f"p50 {floor_p50 * 1000:.0f} ms  p99 {floor_p99 * 1000:.0f} ms"
    )
    print(f"  create -> Running (watch):  p50 {p50 * 1000:.0f} ms  p99 {p99 * 1000:.0f} ms")
    print(
        f"  p99 {p99:.2f} s vs target {P99_TARGET} s: {'meets' if p99 < P99_TARGET else 'MISSES'}"
    )
    print(
        f"  p50 {ratio:.2f}x the floor vs target {RATIO_TARGET}x: "
        f"{'meets' if ratio <= RATIO_TARGET else 'MISSES'}"
    )


async def run(pods: int, rate: float) -> tuple[list[float], list[float]]:
    archives = build_images(IMAGE_CACHE, BASIC_IMAGES)
    with (
        tempfile.TemporaryDirectory(prefix="kubelab-bench-kubelet-") as work,
        KubeletCluster(archives, Path(work)) as cluster,
    ):
        async with Client.from_kubeconfig(cluster.host_kubeconfig, user_agent="bench") as client:
            await node_ready(client, cluster.node_name)
            floor = await cri_floor(
                cluster.containerd.endpoint, cluster.containerd.cgroup_parent, FLOOR_RUNS
            )
            startup = await startup_latencies(client, pods, rate)
    return floor, startup


def main(argv: Sequence[str] | None = None) -> tuple[list[float], list[float]] | None:
    parser = argparse.ArgumentParser(prog="python -m bench.kubelet", description=__doc__)
    parser.add_argument("--pods", type=int, default=PODS)
    parser.add_argument("--rate", type=float, default=RATE, help="pods created per second")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("kubelet: needs root (network namespaces, containerd); skipped")
        return None
    floor, startup = asyncio.run(run(args.pods, args.rate))
    report(floor, startup, args.pods, args.rate)
    return floor, startup


if __name__ == "__main__":
    main()
