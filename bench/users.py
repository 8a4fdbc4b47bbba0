"""Scheduling as users run it: ``kubelab server`` driven by the official Python client.

The other scheduler benchmark (``bench.scheduler``) runs the API server and the scheduler as
separate commands and drives them with the project's own async client.  People run
``kubelab server`` (one command, like ``k3s server``) and talk to it with kubectl or the
official ``kubernetes`` client, so this one does that:

- **client**: the official Python client, ``THREADS`` threads creating pods (each thread its
  own ``ApiClient``, as a threaded program would), and a watch of the namespace on another
  thread (events left as JSON: decoding them into models would cost the client, not the
  server) that records when each pod has a node;
- **control plane**: ``kubelab server`` with its defaults (Node,RBAC, each component its own
  identity and process), or the same components as separate commands (``kubelab apiserver
  --authorization-mode Node,RBAC``, ``kubelab scheduler`` and ``kubelab controller-manager``
  with the kubeconfigs the API server wrote for them), with the same client rate limits;
- **nodes**: hollow Nodes registered by this process (no kubelets), then left alone until the
  controller-manager has lifted their ``not-ready`` taints and made the namespaces'
  ``default`` ServiceAccounts; ``--node-monitor-grace-period 10m`` keeps them Ready without
  heartbeats for the length of a run;
- **floors**, measured in the same run with the same client and server: the same pods
  created with ``spec.nodeName`` already set, so nothing is scheduled (the API server's and
  the client's own work), and the same pods created and then bound by the client
  (``pods/binding``, the "direct bind" the targets name: the fastest any scheduler could
  place them through this server), for a scheduler no one runs so that only the client's
  binding places them;
- **measured**: time from the first create to the last pod seen bound, for ``PODS`` pods;
  throughput is pods over that time.  Beside it, the CPU each process used over the measured
  run (psutil), in cores, to show which one limits;
- **rounds**: after the nodeName-set floor, ``ROUNDS`` rounds of the direct-bind floor and
  then the scheduler, each in namespaces of its own; the control planes of a case run at the
  same time and take turns round by round, so each ratio is between numbers measured a few
  seconds apart, and the medians are reported.

Cases: ``schedule`` (1,000 ``basic`` pods on 1,000 nodes, through ``kubelab server`` and
through separate commands: targets ``kubelab server`` at least 0.9x the separate commands and
at least 0.8x the direct-bind floor) and ``spread`` (1,000 ``spread`` pods, a zone
DoNotSchedule spread constraint and a preferred hostname anti-affinity, on 5,000 nodes
through ``kubelab server``: target at least 0.8x the direct-bind floor).

``python -m bench.users [--case schedule|spread] [--nodes N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import psutil

from bench.controllers import settle, start_command, stop
from bench.scheduler import register_nodes
from tests.servers import ServerProcess, start_all_in_one, start_server, stop_server

PODS = 1_000
THREADS = 8
TIMEOUT = 600.0
QPS = ("--kube-api-qps", "200", "--kube-api-burst", "400")
"""What ``kubelab server`` gives its scheduler and controller-manager by default."""
GRACE = ("--node-monitor-grace-period", "10m")
CREDENTIALS = "--use-service-account-credentials"
"""As kubeadm runs the controller-manager, and ``kubelab server`` by default."""
KUBELAB = [sys.executable, "-m", "kubelab"]
ROUNDS = 3
"""Each case is measured this many times, the cases taking turns, and the medians reported:
a single pass of a few seconds moves with whatever else the machine runs that moment."""
FLOOR_TARGET = 0.8
"""Scheduled pods per second against the direct-bind floor (basic and spread)."""
SEPARATE_TARGET = 0.9
"""``kubelab server`` against the same components as separate commands."""
NO_SCHEDULER = "no-such-scheduler"


def pod_body(
    name: str, workload: str, node: str | None, scheduler: str | None = None
) -> dict[str, Any]:
    """A pod as a user writes it: ``basic`` (requests) or ``spread`` (also a zone spread
    constraint and a preferred hostname anti-affinity), bound in advance to ``node``, for
    ``scheduler`` (default: the default scheduler)."""
    selector = {"matchLabels": {"app": "bench"}}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "image": "registry.local/app:1",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
            }
        ]
    }
    if workload == "spread":
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            }
        ]
        spec["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": selector,
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        }
    if node is not None:
        spec["nodeName"] = node
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": spec,
    }


@dataclass
class ControlPlane:
    """A running control plane and its processes by component."""

    name: str
    server: ServerProcess
    extra: list[subprocess.Popen[str]]

    def processes(self) -> dict[str, psutil.Process]:
        if not self.extra:  # kubelab server: its children, by the component each runs
            found = {}
            for child in psutil.Process(self.server.process.pid).children():
                command = child.cmdline()
                found[command[command.index("--run-component") + 1]] = child
            return found
        return {
            "apiserver": psutil.Process(self.server.process.pid),
            "scheduler": psutil.Process(self.extra[0].pid),
            "controller-manager": psutil.Process(self.extra[1].pid),
        }

    def stop(self) -> None:
        for process in reversed(self.extra):
            stop(process)
        stop_server(self.server)


def all_in_one(data: Path) -> ControlPlane:
    server = start_all_in_one(data, "--max-requests-inflight", "2000", *QPS, *GRACE)
    return ControlPlane("kubelab server", server, [])


def separate(data: Path) -> ControlPlane:
    server = start_server(
        data, "--authorization-mode", "Node,RBAC", "--max-requests-inflight", "2000"
    )
    extra: list[subprocess.Popen[str]] = []
    try:
        for command, kubeconfig, flags in (
            ("scheduler", "scheduler", ()),
            ("controller-manager", "controller-manager", (*GRACE, CREDENTIALS)),
        ):
            extra.append(
                start_command(
                    [
                        *KUBELAB,
                        command,
                        "--kubeconfig",
                        str(data / f"{kubeconfig}.kubeconfig"),
                        "--port",
                        "0",
                        *QPS,
                        *flags,
                    ],
                    data.parent / f"{data.name}-{command}.log",
                )
            )
    except BaseException:
        ControlPlane("separate commands", server, extra).stop()
        raise
    return ControlPlane("separate commands", server, extra)


class OfficialClient:
    """The official Python client: one ``ApiClient`` per thread."""

    def __init__(self, kubeconfig: Path) -> None:
        self.configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=str(kubeconfig), client_configuration=self.configuration
        )
        self._local = threading.local()

    def core(self) -> kubernetes.client.CoreV1Api:
        api: kubernetes.client.CoreV1Api | None = getattr(self._local, "core", None)
        if api is None:
            api = self._local.core = kubernetes.client.CoreV1Api(
                kubernetes.client.ApiClient(self.configuration)
            )
        return api

    def create_namespace(self, name: str) -> None:
        self.core().create_namespace(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )

    def time_to_bind(
        self, namespace: str, bodies: list[dict[str, Any]], bind_to: list[str] | None = None
    ) -> float:
        """Seconds from the first create (``THREADS`` threads) until a watch has seen every
        pod with a node; given ``bind_to``, each thread binds each pod it created right away,
        round-robin over those nodes."""
        core = self.core()
        start_rv = core.list_namespaced_pod(namespace, limit=1).metadata.resource_version
        wanted = {body["metadata"]["name"] for body in bodies}
        done: queue.Queue[BaseException | None] = queue.Queue()

        def watch() -> None:
            bound: set[str] = set()
            try:
                watcher = kubernetes.watch.Watch()
                for event in watcher.stream(
                    self.core().list_namespaced_pod,
                    namespace,
                    resource_version=start_rv,
                    timeout_seconds=int(TIMEOUT),
                    deserialize=False,
                ):
                    pod = event["object"]
                    name = pod["metadata"]["name"]
                    if name in wanted and pod.get("spec", {}).get("nodeName"):
                        bound.add(name)
                        if len(bound) == len(wanted):
                            watcher.stop()
                            break
                done.put(None if len(bound) == len(wanted) else TimeoutError("not all bound"))
            except BaseException as error:
                done.put(error)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        time.sleep(0.5)  # the watch is open before the first create
        started = time.perf_counter()

        def create(index: int) -> None:
            body = bodies[index]
            self.core().create_namespaced_pod(namespace, body)
            if bind_to:
                name = body["metadata"]["name"]
                binding = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name},
                    "target": {"kind": "Node", "name": bind_to[index % len(bind_to)]},
                }
                # The client's Binding model cannot read the Status the server answers, so
                # the response is read raw, and released, or its connection is not reused.
                response = self.core().create_namespaced_pod_binding(
                    name, namespace, binding, _preload_content=False
                )
                response.read()
                response.release_conn()

        with ThreadPoolExecutor(THREADS) as pool:
            for _ in pool.map(create, range(len(bodies))):
                pass
        error = done.get(timeout=TIMEOUT)
        took = time.perf_counter() - started
        if error is not None:
            raise error
        return took


@dataclass
class Round:
    """One round on one control plane: the direct-bind floor, then the scheduler, each over
    ``pods`` pods of their own, back to back."""

    scheduled: float
    bind_floor: float
    """Created, then bound by the client (``pods/binding``)."""
    cores: dict[str, float]
    """Cores each process used while the scheduler's pods were measured."""


@dataclass
class Measured:
    """One case on one control plane: the nodeName-set floor, then ``ROUNDS`` rounds."""

    plane: str
    workload: str
    nodes: int
    pods: int
    floor: float
    """Created with ``nodeName`` set: nothing is scheduled."""
    rounds: list[Round]

    @property
    def scheduled(self) -> float:
        return statistics.median(r.scheduled for r in self.rounds)

    @property
    def to_bind_floor(self) -> float:
        """The median of the rounds' ratios, each against the floor measured beside it."""
        return statistics.median(r.scheduled / r.bind_floor for r in self.rounds)


@contextlib.contextmanager
def cpu_of(processes: dict[str, psutil.Process]) -> Iterator[dict[str, float]]:
    """Cores each process (and this benchmark, ``client``) used while the block ran."""
    watched = {**processes, "client": psutil.Process()}
    before = {name: p.cpu_times() for name, p in watched.items()}
    started = time.perf_counter()
    used: dict[str, float] = {}
    yield used
    wall = time.perf_counter() - started
    for name, process in watched.items():
        after, earlier = process.cpu_times(), before[name]
        used[name] = (after.user - earlier.user + after.system - earlier.system) / wall


class Case:
    """A control plane with its hollow nodes and namespaces ready, measured round by round."""

    def __init__(
        self, start: Callable[[Path], ControlPlane], tmp: Path, workload: str, nodes: int, pods: int
    ) -> None:
        data = tmp / f"{start.__name__}-{workload}-{nodes}"
        data.mkdir()
        self.workload, self.pods = workload, pods
        self.plane = start(data)
        try:
            self.nodes = asyncio.run(register_nodes(self.plane.server, nodes))
            self.official = OfficialClient(self.plane.server.kubeconfig)
            namespaces = ["floor", "warm-up"]
            namespaces += [f"{kind}-{r}" for r in range(ROUNDS) for kind in ("bound", "bench")]
            for namespace in namespaces:
                self.official.create_namespace(namespace)
            asyncio.run(settle(self.plane.server.kubeconfig, namespaces, nodes))
            bodies = [pod_body(f"p{i}", workload, self.nodes[i % nodes]) for i in range(pods)]
            self.result = Measured(
                self.plane.name,
                workload,
                nodes,
                pods,
                pods / self.official.time_to_bind("floor", bodies),
                [],
            )
            self.official.time_to_bind("warm-up", [pod_body("warm-up", workload, None)])
        except BaseException:
            self.plane.stop()
            raise

    def round(self) -> None:
        """The direct-bind floor, then the scheduler, in this round's namespaces."""
        r = len(self.result.rounds)
        # For a scheduler no one runs, so that only the client's binding places them.
        unscheduled = [
            pod_body(f"p{i}", self.workload, None, NO_SCHEDULER) for i in range(self.pods)
        ]
        bind_floor = self.official.time_to_bind(f"bound-{r}", unscheduled, bind_to=self.nodes)
        bodies = [pod_body(f"p{i}", self.workload, None) for i in range(self.pods)]
        with cpu_of(self.plane.processes()) as cores:
            took = self.official.time_to_bind(f"bench-{r}", bodies)
        self.result.rounds.append(Round(self.pods / took, self.pods / bind_floor, cores))
        print(self.result.plane, self.workload, self.result.rounds[-1], flush=True)


def run_cases(cases: list[Case]) -> list[Measured]:
    """``ROUNDS`` rounds of every case, the cases taking turns within each round, so that
    what they are compared with was measured beside them."""
    try:
        for _ in range(ROUNDS):
            for case in cases:
                case.round()
    finally:
        for case in cases:
            case.plane.stop()
    return [case.result for case in cases]


def verdict(ratio: float, target: float) -> str:
    return f"{ratio:.2f}x ({'meets' if ratio >= target else 'MISSES'} {target:g}x)"


def report(results: list[Measured]) -> None:
    print(
        f"\nusers: pods created by the official Python client ({THREADS} threads), "
        f"medians of {ROUNDS} rounds"
    )
    for m in results:
        print(
            f"  {m.plane:>17} {m.workload:>6} {m.pods} pods, {m.nodes} nodes: "
            f"{m.scheduled:6.1f}/s; nodeName-set floor {m.floor:6.1f}/s "
            f"({m.scheduled / m.floor:.2f}x)"
        )
        for i, r in enumerate(m.rounds, 1):
            cores = ", ".join(f"{name} {used:.2f}" for name, used in r.cores.items())
            print(
                f"    round {i}: {r.scheduled:6.1f}/s, create and bind {r.bind_floor:6.1f}/s "
                f"({r.scheduled / r.bind_floor:.2f}x); cores: {cores}"
            )
    by_plane = {(m.plane, m.workload): m for m in results}
    server = by_plane.get(("kubelab server", "basic"))
    others = by_plane.get(("separate commands", "basic"))
    spread = by_plane.get(("kubelab server", "spread"))
    lines = []
    if server is not None:
        lines.append(("kubelab server / direct bind", server.to_bind_floor, FLOOR_TARGET))
    if server is not None and others is not None:
        ratio = statistics.median(
            a.scheduled / b.scheduled for a, b in zip(server.rounds, others.rounds, strict=True)
        )
        lines.append(("kubelab server / separate commands", ratio, SEPARATE_TARGET))
    if spread is not None:
        lines.append(("spread / direct bind", spread.to_bind_floor, FLOOR_TARGET))
    for label, ratio, target in lines:
        print(f"  {label:<36} {verdict(ratio, target)}")


def main(argv: list[str] | None = None) -> list[Measured]:
    parser = argparse.ArgumentParser(prog="python -m bench.users")
    parser.add_argument("--case", choices=("schedule", "spread"), action="append")
    parser.add_argument("--pods", type=int, default=PODS, help=f"pods per case (default: {PODS})")
    parser.add_argument("--nodes", type=int, help="nodes for every case (default: 1,000 and 5,000)")
    args = parser.parse_args(argv)
    results: list[Measured] = []
    with tempfile.TemporaryDirectory(prefix="kubelab-bench-users-") as name:
        tmp = Path(name)
        for case in args.case or ("schedule", "spread"):
            if case == "schedule":
                cases = []
                try:
                    for start in (all_in_one, separate):
                        cases.append(Case(start, tmp, "basic", args.nodes or 1_000, args.pods))
                except BaseException:
                    for made in cases:
                        made.plane.stop()
                    raise
            else:
                cases = [Case(all_in_one, tmp, "spread", args.nodes or 5_000, args.pods)]
            results += run_cases(cases)
    report(results)
    return results


if __name__ == "__main__":
    main()
