"""``kubelab lab trace`` wall time across nodes, beside the probe alone.

On a lab (``--name`` of a running one, or else one brought up for the run and taken down
after it), two busybox web servers are pinned to node1 and node2 in a namespace of the
benchmark's own, and ``ClusterIP`` Service ``web`` selects the one on node2.  Each round
traces, from the pod on node1, the pod on node2 directly and through ``web`` (both cross the
router), as ``kubelab lab trace`` does: reading the cluster, the marking tables in every
namespace, the monitors, the probe, the routes, conntrack, the tables removed.  The floor is
the probe alone, a TCP connection from the same pod to the same address (what a trace cannot
avoid).  Reported: median and worst over ``--rounds``.  Target (issue 25): under 2 s.

``python -m bench.trace [--name LAB] [--rounds 5]`` needs root.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Sequence

from kubelab.lab import cluster, trace
from kubelab.lab.network import existing_namespaces
from kubelab.lab.topology import Lab, LabSpec, running_spec
from tests.node.nodelabs import web_server_pod
from tests.servers import Kubectl

TARGET = 2.0
NAMESPACE = "bench-trace"
OWN_LAB = LabSpec(name="benchtrace", host_api_port=16499)


def workload() -> str:
    web = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "there"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    pods = (web_server_pod("here", "node1", 8080), web_server_pod("there", "node2", 8080))
    return "\n---\n".join(json.dumps(m) for m in (*pods, web))


def measure(lab: Lab, kubectl: Kubectl, rounds: int) -> None:
    kubectl.run("create", "namespace", NAMESPACE, namespaced=False)
    ours = Kubectl(kubectl.kubeconfig, kubectl.cache_dir, NAMESPACE)
    try:
        ours.run("apply", "-f", "-", input=workload())
        ours.run("wait", "--for=condition=Ready", "pod", "here", "there", "--timeout=90s")
        source = f"pod/{NAMESPACE}/here"
        for destination in (f"pod/{NAMESPACE}/there:8080", f"svc/{NAMESPACE}/web:80"):
            traced, floor = [], []
            for _ in range(rounds):
                started = time.monotonic()
                found = asyncio.run(trace.run_trace(lab, source, destination))
                traced.append(time.monotonic() - started)
                assert found.verdict == "answered", trace.render_table(found)
                floor.append(asyncio.run(_probe_alone(lab, source, destination)))
            median = statistics.median(traced)
            verdict = "meets" if median < TARGET else "MISSES"
            print(
                f"trace {source} → {destination}: median {median:.2f} s, worst "
                f"{max(traced):.2f} s ({verdict} the {TARGET:.0f} s target); the probe alone "
                f"{statistics.median(floor) * 1000:.1f} ms"
            )
    finally:
        kubectl.run("delete", "namespace", NAMESPACE, "--wait=false", namespaced=False)


async def _probe_alone(lab: Lab, source_text: str, destination_text: str) -> float:
    snapshot = await trace.read_cluster(lab)
    source = trace.resolve(lab, snapshot, source_text, source=True)
    destination = trace.resolve(lab, snapshot, destination_text, source=False)
    started = time.monotonic()
    outcome = await asyncio.to_thread(trace.probe, source, destination, 20000)
    assert outcome == "answered", outcome
    return time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.trace", description=__doc__)
    parser.add_argument("--name", help="a running lab (default: bring one up for the run)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    own = args.name is None
    lab = Lab(OWN_LAB if own else running_spec(args.name, existing_namespaces()))
    kubectl = Kubectl(lab.host_kubeconfig, lab.state_dir / "bench-kubectl", "default")
    try:
        if own:
            asyncio.run(cluster.up(lab, report=lambda line: None))
        measure(lab, kubectl, args.rounds)
    finally:
        if own:
            asyncio.run(cluster.down(lab, report=lambda line: None))


if __name__ == "__main__":
    main()
