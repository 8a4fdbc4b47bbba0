"""The cost of recording the story: pod startup p50 with the kubelet's sandbox log and
without it, side by side in one run.

Of what ``kubelab story`` reads, only the kubelet's sandbox record is made on a pod's way to
Running (its time and sandbox id; the CNI result, from a verbose PodSandboxStatus, is read
once the pod's status is sent: ``RuntimeManager.record_sandbox``); kube-proxy's and the DNS's
Events are told after the fact.  So: ``kubelab server``, and in this process two real
kubelets, each with its own client and fake CRI runtime (no root, no containers: what is
measured is the kubelet and the API, not the runtime; the server is thrown away after,
namespace and all), ``recording`` (``NodeRuntimeOptions.sandbox_log``) and ``quiet``.

On a shared 2-core machine the load moves from one second to the next by more than the 5%
asked, so one long run per side measures mostly who else was running, as ``bench.datapath``
found.  The two sides therefore alternate: ``ROUNDS`` rounds, each a slice of ``PODS`` pods
on one node and a slice on the other (which goes first alternates), created already bound
at ``RATE`` per second, one slice at a time (the next starts once every pod of this one is
Running), and the round's pods deleted and gone (and ``SETTLE`` waited) before the next
round, so every slice starts from empty, idle nodes.  A watch started before the first
create records when each pod is first reported Running; latency = that moment - the moment
its create was sent.

Printed: p50 and p99 of each side over all its pods, and the recording/quiet ratio of the
slices' p50s as the median of the per-round ratios with its quartiles (drifting load hits
both sides of a round alike).  Target (issue 25): the median ratio within 5% of 1.

``python -m bench.story [--rounds N] [--pods N] [--rate R]``; temporary directories are
removed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

from bench.kubelet import create_at_rate, namespace_ready, percentile
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

ROUNDS = 60
PODS = 10
RATE = 5.0
"""Pods created per second, all on the slice's node: a pod costs its kubelet about five API
requests (status, token, Events), and at 10/s one node's client hits its 50/s limit."""
SETTLE = 1.0
"""After a round's pods are gone: time for the kubelets' last writes (Events) and the
clients' token buckets to refill, so the next slice does not pay for this round."""
TARGET = 0.05
TIMEOUT = 120.0
POLL = 0.02
BUSYBOX = "docker.io/library/busybox:1.35"
PAUSE = "registry.k8s.io/pause:3.9"
NODES = {"recording": True, "quiet": False}


@dataclasses.dataclass
class Results:
    latencies: dict[str, list[float]] = dataclasses.field(
        default_factory=lambda: {node: [] for node in NODES}
    )
    """Each side's create → Running of every pod, in seconds."""
    ratios: list[float] = dataclasses.field(default_factory=list)
    """Per round: the recording slice's p50 / the quiet slice's."""


@contextlib.asynccontextmanager
async def kubelet(
    kubeconfig: Path, name: str, root: Path, recording: bool
) -> AsyncIterator[Kubelet]:
    """A kubelet on a fake runtime of its own, with a client of its own (its own rate limits,
    as a kubelet process has: one node's events do not slow the other's writes), running
    until the block ends."""
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
            sandbox_log=recording,
        ),
        runtime_endpoint=runtime.endpoint,
    )
    client = Client.from_kubeconfig(kubeconfig, user_agent=f"kubelet/{name}")
    running = Kubelet(client, config, mounter=FakeMounter(), cgroups=FakeCgroups())
    task = asyncio.create_task(running.run())
    try:
        yield running
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.close()
        await runtime.stop()


async def root_ca_published(client: Client, namespace: str) -> None:
    async def published() -> bool:
        try:
            await client.get(ConfigMap, "kube-root-ca.crt", namespace)
        except ApiError:
            return False
        return True

    await until(published, f"namespace {namespace} to get kube-root-ca.crt")


async def running_times(client: Client, namespace: str, running: dict[str, float]) -> None:
    """Note in ``running`` when each pod of ``namespace`` is first reported Running, until
    cancelled (a watch the server ends is started again where it stopped)."""
    version = "0"
    while True:
        async for event in client.watch(Pod, namespace, resource_version=version):
            pod = event.object
            version = pod.metadata.resource_version or version
            name = pod.metadata.name or ""
            if pod.status is not None and pod.status.phase == "Running":
                running.setdefault(name, time.perf_counter())


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(POLL)


def pod(namespace: str, name: str, node: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=PodSpec(
            node_name=node,
            containers=[Container(name="app", image=BUSYBOX)],
            termination_grace_period_seconds=0,
        ),
    )


async def slice_latencies(
    client: Client,
    namespace: str,
    running: dict[str, float],
    names: list[str],
    node: str,
    rate: float,
) -> list[float]:
    """Create ``names`` on ``node`` at ``rate``; each one's create → Running, once all run."""
    sent = await create_at_rate(client, (pod(namespace, name, node) for name in names), rate)

    async def all_running() -> bool:
        return all(name in running for name in names)

    await until(all_running, f"{len(names)} pods on {node} to run")
    return [running[name] - sent[name] for name in names]


async def alternate(client: Client, rounds: int, pods: int, rate: float) -> Results:
    namespace = f"story-{uuid.uuid4().hex[:6]}"
    await namespace_ready(client, namespace)
    await root_ca_published(client, namespace)
    running: dict[str, float] = {}
    results = Results()
    watcher = asyncio.create_task(running_times(client, namespace, running))
    await asyncio.sleep(0.5)
    try:
        for round_ in range(rounds):
            order = list(NODES) if round_ % 2 else list(NODES)[::-1]
            p50: dict[str, float] = {}
            for node in order:
                names = [f"{node}-{round_}-{index}" for index in range(pods)]
                latencies = await slice_latencies(client, namespace, running, names, node, rate)
                results.latencies[node] += latencies
                p50[node] = statistics.median(latencies)
            results.ratios.append(p50["recording"] / p50["quiet"])
            print(
                f"  round {round_ + 1}: p50 "
                + ", ".join(f"{node} {p50[node] * 1000:.1f} ms" for node in order)
                + f" ({results.ratios[-1]:.3f})",
                flush=True,
            )
            await delete_all(client, namespace)
            await asyncio.sleep(SETTLE)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    return results


async def delete_all(client: Client, namespace: str) -> None:
    """Delete the namespace's pods and wait until the kubelets have confirmed it."""
    for found in (await client.list(Pod, namespace)).items:
        await client.delete(Pod, found.metadata.name or "", namespace)

    async def gone() -> bool:
        return not (await client.list(Pod, namespace)).items

    await until(gone, f"the pods of {namespace} to be deleted")


async def run(rounds: int, pods: int, rate: float) -> Results:
    with tempfile.TemporaryDirectory(prefix="kubelab-bench-story-") as work:
        root = Path(work)
        (root / "data").mkdir()
        server = start_all_in_one(root / "data")
        try:
            async with (
                Client.from_kubeconfig(server.kubeconfig, user_agent="bench") as client,
                contextlib.AsyncExitStack() as stack,
            ):
                kubelets = {}
                for node, recording in NODES.items():
                    (root / node).mkdir()
                    kubelet_of_node = kubelet(server.kubeconfig, node, root / node, recording)
                    kubelets[node] = await stack.enter_async_context(kubelet_of_node)
                results = await alternate(client, rounds, pods, rate)
                for node, running in kubelets.items():
                    recorded = len(running.runtime.sandboxes.records())
                    if recorded != (rounds * pods if NODES[node] else 0):
                        raise RuntimeError(f"{node} recorded {recorded} sandboxes")
                return results
        finally:
            stop_server(server)


def report(results: Results, rounds: int, pods: int, rate: float) -> float:
    """Print the results; the median per-round ratio."""
    print(
        f"the cost of recording the story: {rounds} rounds of {pods} pods per node, "
        f"one node at a time, at {rate:g}/s"
    )
    for node, values in results.latencies.items():
        told = "with the sandbox log" if NODES[node] else "without it"
        print(
            f"  {node} ({told}): create -> Running p50 {statistics.median(values) * 1000:.1f} ms"
            f"  p99 {percentile(values, 0.99) * 1000:.0f} ms  ({len(values)} pods)"
        )
    ratio = statistics.median(results.ratios)
    low, _, high = statistics.quantiles(results.ratios, n=4, method="inclusive")
    lower, upper = median_interval(results.ratios)
    slower = sum(r > 1 for r in results.ratios)
    verdict = "meets" if abs(ratio - 1) <= TARGET else "MISSES"
    print(
        f"  recording/quiet p50, median of {len(results.ratios)} rounds: {ratio:.3f} "
        f"(95% interval of the median {lower:.3f}-{upper:.3f}; rounds' quartiles "
        f"{low:.3f}-{high:.3f}; recording slower in {slower}) vs target 1 ± {TARGET:.0%}: "
        f"{verdict}"
    )
    return ratio


def median_interval(values: Sequence[float]) -> tuple[float, float]:
    """A distribution-free 95% confidence interval of the median: the order statistics
    n/2 ± 1.96·√n/2 (the count below the median is binomial(n, 1/2))."""
    ordered = sorted(values)
    half = 1.96 * math.sqrt(len(ordered)) / 2
    low = max(0, math.floor(len(ordered) / 2 - half))
    high = min(len(ordered) - 1, math.ceil(len(ordered) / 2 + half) - 1)
    return ordered[low], ordered[high]


def main(argv: Sequence[str] | None = None) -> float:
    parser = argparse.ArgumentParser(prog="python -m bench.story", description=__doc__)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds (at least 2)")
    parser.add_argument("--pods", type=int, default=PODS, help="pods per node per round")
    parser.add_argument("--rate", type=float, default=RATE, help="pods created per second")
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.pods < 1 or args.rate <= 0:
        parser.error("--rounds must be at least 2, --pods at least 1, --rate above 0")
    results = asyncio.run(run(args.rounds, args.pods, args.rate))
    return report(results, args.rounds, args.pods, args.rate)


if __name__ == "__main__":
    main()
