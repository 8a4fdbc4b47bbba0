"""Pod startup with ``imagePullPolicy: Always`` beside ``IfNotPresent``, for the same image, in
one run on a real lab.

A one-worker lab (``kubelab lab up``: the registry in the router, containerd mirroring to it),
then ``ROUNDS`` rounds on ``node1``: each round starts one pod of ``IMAGE`` with
``IfNotPresent`` and one with ``Always`` (which goes first alternates), one at a time, so both
see the same node and load.  Pods name their node (no scheduling, the same for both) and run
``sleep``; a watch started before the first create records when each is first reported
Running, and latency = that moment - the moment its create was sent.  Each pod is deleted
before the next starts.  A first ``Always`` pod warms the node up (its first pull from the
registry fetches the compressed blobs the imported image lacks) and is not counted: afterwards
``Always`` costs a manifest request to the registry and the image's unpacked layers are
already there, as on a node online that pulled the image once.

Printed: p50 and p99 of both, and the p50 difference.  Target (issue 19): ``Always`` adds at
most 100 ms at p50.

``python -m bench.pulls [--rounds N] [--name LAB] [--port PORT]`` needs root; the lab is
brought down at the end whatever happened.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Sequence

from bench.kubelet import namespace_ready, percentile
from kube.api.kinds.core_v1.cluster import Event, Namespace
from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec
from kube.api.meta_v1 import ObjectMeta
from kube.client.rest import Client
from kubelab.lab import cluster
from kubelab.lab.topology import Lab, LabSpec

ROUNDS = 20
IMAGE = "docker.io/library/busybox:1.35"
NODE = "node1"
POLICIES = ("IfNotPresent", "Always")
TARGET_MS = 100.0
RUNNING_TIMEOUT = 60.0


class Startups:
    """Create pods one at a time and time each to Running through one watch."""

    def __init__(self, client: Client, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.running: dict[str, asyncio.Future[float]] = {}

    async def watch(self) -> None:
        async for event in self.client.watch(Pod, self.namespace, resource_version="0"):
            pod = event.object
            waiting = self.running.get(pod.metadata.name or "")
            phase = pod.status.phase if pod.status else None
            if waiting is not None and not waiting.done() and phase == "Running":
                waiting.set_result(time.perf_counter())

    async def start(self, name: str, policy: str) -> float:
        """Seconds from sending the create to the pod's first Running; the pod is deleted."""
        self.running[name] = asyncio.get_running_loop().create_future()
        pod = Pod(
            metadata=ObjectMeta(name=name, namespace=self.namespace),
            spec=PodSpec(
                node_name=NODE,
                containers=[
                    Container(
                        name="app",
                        image=IMAGE,
                        image_pull_policy=policy,
                        command=["sleep", "3600"],
                    )
                ],
                termination_grace_period_seconds=0,
            ),
        )
        sent = time.perf_counter()
        await self.client.create(pod)
        running = await asyncio.wait_for(self.running[name], RUNNING_TIMEOUT)
        await self.client.delete(Pod, name, self.namespace)
        return running - sent


async def measure(lab: Lab, rounds: int) -> dict[str, list[float]]:
    async with Client.from_kubeconfig(lab.host_kubeconfig, user_agent="bench") as client:
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        await namespace_ready(client, namespace)
        startups = Startups(client, namespace)
        watcher = asyncio.create_task(startups.watch())
        await asyncio.sleep(0.5)
        timings: dict[str, list[float]] = {policy: [] for policy in POLICIES}
        try:
            await startups.start("warm-up", "Always")
            for index in range(rounds):
                order = POLICIES if index % 2 == 0 else POLICIES[::-1]
                for policy in order:
                    name = f"{policy.lower()}-{index}"
                    timings[policy].append(await startups.start(name, policy))
            events = await client.list(Event, namespace)
            pulled = {
                e.involved_object.name or ""
                for e in events.items
                if e.reason == "Pulling" and e.involved_object is not None
            }
            if pulled != {"warm-up", *(f"always-{i}" for i in range(rounds))}:
                raise RuntimeError(f"the Always pods, and only they, must pull: {sorted(pulled)}")
        finally:
            watcher.cancel()
            await client.delete(Namespace, namespace)
    return timings


def report(timings: dict[str, list[float]]) -> None:
    rounds = len(timings["Always"])
    print(f"pod startup, {IMAGE} on {NODE} of a lab, {rounds} rounds (create -> Running)")
    for policy in POLICIES:
        values = timings[policy]
        print(
            f"  {policy:<13} p50 {statistics.median(values) * 1000:4.0f} ms  "
            f"p99 {percentile(values, 0.99) * 1000:4.0f} ms"
        )
    added = (
        statistics.median(timings["Always"]) - statistics.median(timings["IfNotPresent"])
    ) * 1000
    verdict = "meets" if added <= TARGET_MS else "MISSES"
    print(f"  Always adds {added:.0f} ms at p50 vs target {TARGET_MS:.0f} ms: {verdict}")


async def run(spec: LabSpec, rounds: int) -> dict[str, list[float]]:
    lab = Lab(spec)
    try:
        await cluster.up(lab, report=lambda line: None)
        return await measure(lab, rounds)
    finally:
        await cluster.down(lab, report=lambda line: None)


def main(argv: Sequence[str] | None = None) -> dict[str, list[float]] | None:
    parser = argparse.ArgumentParser(prog="python -m bench.pulls", description=__doc__)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--name", default="klbench", help="the lab's name (default: klbench)")
    parser.add_argument("--port", type=int, default=16460, help="its host API port")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("pulls: needs root (a lab in network namespaces); skipped")
        return None
    spec = LabSpec(name=args.name, workers=1, host_api_port=args.port)
    timings = asyncio.run(run(spec, args.rounds))
    report(timings)
    return timings


if __name__ == "__main__":
    main()
