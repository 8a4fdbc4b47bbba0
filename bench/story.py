"""The cost of recording the story: pod startup p50 with the kubelet's sandbox events and
without them, side by side in one run.

Of what ``kubelab story`` reads, only the kubelet's ``SandboxCreated`` and ``AddedInterface``
Events sit on a pod's way to Running (a verbose PodSandboxStatus instead of the plain one, and
two more Events through the recorder); kube-proxy's and the DNS's are told after the fact.
So: ``kubelab server``, and in this process two real kubelets, each over its own fake CRI
runtime (no root, no containers: what is measured is the kubelet and the API, not the
runtime; the server is thrown away after, namespace and all), one recording
(``NodeRuntimeOptions.sandbox_events``) and one not.  ``PODS`` pods per node are created
already bound, alternating between the two nodes at ``RATE`` per second in all; a watch
started before the first create records when each pod is first reported Running.
Latency = that moment - the moment its create was sent.

Printed: p50 and p99 of each, and the p50 difference; the target (issue 25) is at most 5%.

``python -m bench.story [--pods N] [--rate R]``; temporary directories are removed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from bench.kubelet import namespace_ready, percentile, record_running
from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from node.cri.fake import FakeRuntime
from node.kubelet.kubelet import Kubelet, KubeletConfig
from node.kubelet.nodestatus import NodeOptions
from node.kubelet.runtime.cgroups import FakeCgroups
from node.kubelet.runtime.options import NodeRuntimeOptions
from node.kubelet.volumes.manager import FakeMounter
from tests.servers import start_all_in_one, stop_server

PODS = 100
RATE = 10.0
TARGET = 0.05
TIMEOUT = 120.0
BUSYBOX = "docker.io/library/busybox:1.35"
PAUSE = "registry.k8s.io/pause:3.9"
NODES = {"recording": True, "quiet": False}


@contextlib.asynccontextmanager
async def kubelet(client: Client, name: str, root: Path, events: bool) -> AsyncIterator[None]:
    """A kubelet on a fake runtime of its own, running until the block ends."""
    runtime = FakeRuntime(images=[BUSYBOX, PAUSE])
    await runtime.start(root / "cri.sock")
    (root / "resolv.conf").write_text("nameserver 127.0.0.53\n")
    config = KubeletConfig(
        node=NodeOptions(
            node_name=name, node_ips=("127.0.0.1",), hostname=name, root_dir=root / "kubelet"
        ),
        runtime=NodeRuntimeOptions(
            node_name=name,
            node_ips=("127.0.0.1",),
            root_dir=root / "kubelet",
            pod_logs_dir=root / "logs",
            resolv_conf=root / "resolv.conf",
            sandbox_events=events,
        ),
        runtime_endpoint=runtime.endpoint,
    )
    task = asyncio.create_task(
        Kubelet(client, config, mounter=FakeMounter(), cgroups=FakeCgroups()).run()
    )
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await runtime.stop()


async def root_ca_published(client: Client, namespace: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            await client.get(ConfigMap, "kube-root-ca.crt", namespace)
            return
        except ApiError:
            await asyncio.sleep(0.2)
    raise RuntimeError(f"namespace {namespace} got no kube-root-ca.crt")


async def startup_latencies(client: Client, pods: int, rate: float) -> dict[str, list[float]]:
    namespace = f"story-{uuid.uuid4().hex[:6]}"
    await namespace_ready(client, namespace)
    await root_ca_published(client, namespace)
    sent: dict[str, float] = {}
    running: dict[str, float] = {}
    total = pods * len(NODES)
    watcher = asyncio.create_task(record_running(client, namespace, total, running))
    await asyncio.sleep(0.5)
    try:
        for index in range(pods):
            for node in NODES:
                name = f"{node}-{index}"
                pod = Pod(
                    metadata=ObjectMeta(name=name, namespace=namespace),
                    spec=PodSpec(
                        node_name=node,
                        containers=[Container(name="app", image=BUSYBOX)],
                        termination_grace_period_seconds=0,
                    ),
                )
                sent[name] = time.perf_counter()
                await client.create(pod)
                await asyncio.sleep(max(0.0, sent[name] + 1 / rate - time.perf_counter()))
        await asyncio.wait_for(watcher, TIMEOUT)
    finally:
        watcher.cancel()
    return {
        node: [running[name] - start for name, start in sent.items() if name.startswith(node)]
        for node in NODES
    }


async def run(pods: int, rate: float) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="kubelab-bench-story-") as work:
        root = Path(work)
        (root / "data").mkdir()
        server = start_all_in_one(root / "data")
        try:
            async with (
                Client.from_kubeconfig(server.kubeconfig, user_agent="bench") as client,
                contextlib.AsyncExitStack() as stack,
            ):
                for node, events in NODES.items():
                    (root / node).mkdir()
                    await stack.enter_async_context(kubelet(client, node, root / node, events))
                return await startup_latencies(client, pods, rate)
        finally:
            stop_server(server)


def report(latencies: dict[str, list[float]], pods: int, rate: float) -> float:
    print(f"the cost of recording the story: {pods} pods per node at {rate:g}/s in all")
    p50 = {node: statistics.median(values) for node, values in latencies.items()}
    for node, values in latencies.items():
        told = "with sandbox events" if NODES[node] else "without them"
        print(
            f"  {node} ({told}): create -> Running p50 {p50[node] * 1000:.0f} ms  "
            f"p99 {percentile(values, 0.99) * 1000:.0f} ms"
        )
    apart = abs(p50["recording"] - p50["quiet"]) / p50["quiet"]
    verdict = "meets" if apart <= TARGET else "MISSES"
    print(f"  p50s {apart:.1%} apart vs target {TARGET:.0%}: {verdict}")
    return apart


def main(argv: Sequence[str] | None = None) -> float:
    parser = argparse.ArgumentParser(prog="python -m bench.story", description=__doc__)
    parser.add_argument("--pods", type=int, default=PODS, help="pods per node")
    parser.add_argument("--rate", type=float, default=RATE, help="pods created per second")
    args = parser.parse_args(argv)
    latencies = asyncio.run(run(args.pods, args.rate))
    return report(latencies, args.pods, args.rate)


if __name__ == "__main__":
    main()
