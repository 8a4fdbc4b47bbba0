"""``kubelab server`` runs the control plane under one command, each component a child process
it supervises, and ``kubelab scheduler`` runs as its own, with leader election between
several."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from kube.api.kinds import events_v1
from kube.api.kinds.core_v1.cluster import Namespace, ServiceAccount
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Container, Pod
from kube.api.meta_v1 import ObjectMeta
from kube.client.rest import Client
from kube.clock import RealClock
from node.hollow.nodes import FleetSpec, NodeFleet
from tests import builders
from tests.servers import (
    BARE_APISERVER,
    REPO,
    Kubectl,
    ServerProcess,
    serve_all_in_one,
    start_server,
    stop_server,
)

KUBELAB = [sys.executable, "-m", "kubelab"]


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


async def bound_pods(client: Client, namespace: str, names: list[str]) -> dict[str, str]:
    placed: dict[str, str] = {}

    async def all_bound() -> bool:
        for pod in (await client.list(Pod, namespace)).items:
            if pod.spec and pod.spec.node_name and pod.metadata.name in names:
                placed[pod.metadata.name or ""] = pod.spec.node_name
        return len(placed) == len(names)

    await eventually(all_bound)
    return placed


def pod(name: str, namespace: str) -> Pod:
    return builders.pod(name, namespace, containers=[Container(name="c", image="app")])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from serve_all_in_one(tmp_path_factory)


def scheduler_port(server: ServerProcess) -> int:
    """The scheduler's port, from the lines the components print once they serve."""
    assert server.process.stdout is not None
    for _ in range(2):
        line = server.process.stdout.readline()
        match = re.search(r"kubelab scheduler: serving health on http://[^:]+:(\d+)", line)
        if match:
            return int(match.group(1))
    raise AssertionError("the scheduler never said where it serves")


async def place_one_pod(server: ServerProcess) -> dict[str, str]:
    async with Client.from_kubeconfig(server.kubeconfig) as client:
        await client.create(Namespace(metadata=ObjectMeta(name="work")))
        fleet = NodeFleet(client, FleetSpec(count=3, name_prefix="srv-"), RealClock())
        await fleet.register()

        async def default_account() -> bool:
            accounts = await client.list(ServiceAccount, "work")
            return [a.metadata.name for a in accounts.items] == ["default"]

        async def nodes_untainted() -> bool:
            nodes = (await client.list(Node)).items
            return len(nodes) == 3 and not any(n.spec and n.spec.taints for n in nodes)

        # The controller-manager runs too; ServiceAccount admission needs its default account,
        # and the node lifecycle controller lifts the not-ready taints once the nodes report.
        await eventually(default_account)
        await eventually(nodes_untainted, within=60.0)
        await client.create(pod("web", "work"))
        return await bound_pods(client, "work", ["web"])


async def scheduled_event(server: ServerProcess) -> events_v1.Event:
    """The Scheduled event of pod work/web, as events.k8s.io/v1 serves it."""
    found: list[events_v1.Event] = []
    async with Client.from_kubeconfig(server.kubeconfig) as client:

        async def recorded() -> bool:
            found[:] = [
                e
                for e in (await client.list(events_v1.Event, "work")).items
                if e.reason == "Scheduled" and e.regarding and e.regarding.name == "web"
            ]
            return bool(found)

        await eventually(recorded)
    return found[0]


def test_server_schedules_pods_and_explains_them(server: ServerProcess) -> None:
    port = scheduler_port(server)
    placed = asyncio.run(place_one_pod(server))
    # The scheduler records as upstream's: through events.k8s.io, new-style.
    event = asyncio.run(scheduled_event(server))
    assert (event.action, event.type, event.reporting_controller) == (
        "Binding",
        "Normal",
        "default-scheduler",
    )
    assert event.note == f"Successfully assigned work/web to {placed['web']}"
    assert event.event_time is not None and event.deprecated_count is None
    explain = subprocess.run(
        [*KUBELAB, "scheduler", "explain", "work/web", "--address", f"http://127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
    )
    assert explain.returncode == 0, explain.stderr
    assert f"Result:   Scheduled on {placed['web']}" in explain.stdout
    assert "Nodes:    3 in the cluster, 3 examined, 3 feasible" in explain.stdout
    missing = subprocess.run(
        [*KUBELAB, "scheduler", "explain", "work/nope", "--address", f"http://127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
    )
    assert missing.returncode == 1
    assert "no recent scheduling decision for pod work/nope" in missing.stderr
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert 'scheduler_schedule_attempts_total{result="scheduled",profile="default-scheduler"}' in (
        metrics
    )
    assert 'leader_election_master_status{name="kube-scheduler"} 1' in metrics


def children(server: ServerProcess) -> dict[str, psutil.Process]:
    """The server's children by the component each runs."""
    found = {}
    for child in psutil.Process(server.process.pid).children():
        command = child.cmdline()
        found[command[command.index("--run-component") + 1]] = child
    return found


@pytest.fixture
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server of the test's own, which it may stop."""
    yield from serve_all_in_one(tmp_path_factory)


def test_server_restarts_a_killed_component_and_stops_all_in_order(
    own_server: ServerProcess, tmp_path: Path
) -> None:
    server = own_server
    log = server.data_dir.parent / f"{server.data_dir.name}.log"
    assert server.process.stdout is not None
    started = sorted(server.process.stdout.readline().split(":")[0] for _ in range(2))
    assert started == ["kubelab controller-manager", "kubelab scheduler"]
    running = children(server)
    assert sorted(running) == ["apiserver", "controller-manager", "scheduler"]
    for name in ("scheduler", "apiserver"):
        killed = running[name].pid
        os.kill(killed, signal.SIGKILL)
        # The new child's serving line is relayed, as the first one's was.
        assert f"kubelab {name}: serving" in server.process.stdout.readline()
        text = log.read_text()
        assert f"{name} (pid {killed}) exited with code -9; restarting in 1s (restart 1)" in text
        assert f"{name} restarted as pid {children(server)[name].pid}" in text
    restarted = children(server)
    assert restarted["controller-manager"].pid == running["controller-manager"].pid
    with urllib.request.urlopen(
        f"http://127.0.0.1:{scheduler_port_of(restarted['scheduler'])}/healthz", timeout=10
    ) as response:
        assert response.status == 200
    # The API server came back on the port the admin kubeconfig names.
    kubectl = Kubectl(server.kubeconfig, tmp_path / "cache", "default")
    assert kubectl.run("get", "--raw", "/readyz", namespaced=False).stdout == "ok"
    os.kill(server.process.pid, signal.SIGTERM)
    assert server.process.wait(timeout=30) == 0
    stopped = [
        line.split()[-4]
        for line in log.read_text().splitlines()
        if line.startswith("20") and line.endswith(" stopped")
    ]
    assert stopped == ["controller-manager", "scheduler", "apiserver"]
    assert not any(p.is_running() and p.status() != "zombie" for p in restarted.values())


def scheduler_port_of(scheduler: psutil.Process) -> int:
    """The port a scheduler process listens on for /healthz (it binds one, --scheduler-port 0)."""
    ports = [c.laddr.port for c in scheduler.net_connections("tcp") if c.status == "LISTEN"]
    assert len(ports) == 1, ports
    return int(ports[0])


@dataclass
class SchedulerProcess:
    process: subprocess.Popen[str]
    port: int

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            body: bytes = r.read()
            return body.decode()

    @property
    def leading(self) -> bool:
        try:
            return 'leader_election_master_status{name="kube-scheduler"} 1' in self.metrics()
        except OSError:
            return False

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_scheduler(kubeconfig: Path, config: Path, log: Path) -> SchedulerProcess:
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [
                *KUBELAB,
                "scheduler",
                "--kubeconfig",
                str(kubeconfig),
                "--config",
                str(config),
                "--port",
                "0",
            ],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=REPO,
        )
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"serving health on http://[^:]+:(\d+)", line)
    if not match:
        process.kill()
        process.wait()
        raise AssertionError(f"the scheduler did not start: {line!r}\n{log.read_text()}")
    return SchedulerProcess(process, int(match.group(1)))


LEASE_DURATION = 3.0

ELECTION_CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: {LEASE_DURATION:g}s
  renewDeadline: 2s
  retryPeriod: 500ms
"""


async def test_killing_the_leader_hands_over_and_binds_nothing_twice(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    api = start_server(data_dir, *BARE_APISERVER)
    config = tmp_path / "scheduler.yaml"
    config.write_text(ELECTION_CONFIG)
    schedulers = [
        start_scheduler(api.kubeconfig, config, tmp_path / f"scheduler-{i}.log") for i in range(2)
    ]
    try:
        async with Client.from_kubeconfig(api.kubeconfig) as client:
            await client.create(Namespace(metadata=ObjectMeta(name="ha")))
            await NodeFleet(client, FleetSpec(count=3, name_prefix="ha-"), RealClock()).register()
            assignments: dict[str, list[str]] = {}
            start = (await client.list(Pod, "ha")).resource_version

            async def record() -> None:
                async for event in client.watch(Pod, "ha", resource_version=start):
                    node = event.object.spec.node_name if event.object.spec else None
                    seen = assignments.setdefault(event.object.metadata.name or "", [])
                    if node and (not seen or seen[-1] != node):
                        seen.append(node)

            recorder = asyncio.create_task(record())

            async def one_leader() -> bool:
                return sum(s.leading for s in schedulers) == 1

            await eventually(one_leader)
            leader = next(s for s in schedulers if s.leading)
            standby = next(s for s in schedulers if s is not leader)
            first = [f"before-{i}" for i in range(5)]
            for name in first:
                await client.create(pod(name, "ha"))
            await bound_pods(client, "ha", first)
            leader.kill()
            killed_at = asyncio.get_running_loop().time()

            async def taken_over() -> bool:
                return standby.leading

            await eventually(taken_over, within=LEASE_DURATION + 5)
            handover = asyncio.get_running_loop().time() - killed_at
            second = [f"after-{i}" for i in range(5)]
            for name in second:
                await client.create(pod(name, "ha"))
            await bound_pods(client, "ha", second)
            await asyncio.sleep(0.5)
            recorder.cancel()
            with_nodes = {name: nodes for name, nodes in assignments.items() if nodes}
            assert set(with_nodes) == set(first + second)
            assert all(len(nodes) == 1 for nodes in with_nodes.values()), with_nodes
            # The standby takes over once the lease it last saw renewed has expired.
            assert handover <= LEASE_DURATION + 2.5
    finally:
        for scheduler in schedulers:
            scheduler.kill()
        stop_server(api)


def test_server_fails_when_a_component_cannot_start(tmp_path: Path) -> None:
    """A bad setup fails the command with the component's error, not a restart loop."""
    result = subprocess.run(
        [
            *KUBELAB,
            "server",
            "--data-dir",
            str(tmp_path / "data"),
            "--secure-port",
            "0",
            "--scheduler-port",
            "0",
            "--controller-manager-port",
            "0",
            "--cloud-controller-manager-port",
            "0",
            "--cloud-provider",
            "no-such-cloud",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("kubelab apiserver: serving on https://")
    assert "unknown cloud provider 'no-such-cloud'" in result.stderr
    assert "cloud-controller-manager exited with code 1 before it was serving" in result.stderr
    assert "restarting" not in result.stderr
    stopped = [line.split()[-4] for line in result.stderr.splitlines() if line.endswith(" stopped")]
    assert stopped == ["controller-manager", "scheduler", "apiserver"]


async def test_failed_scheduling_is_one_event_per_version_of_the_pod(
    server: ServerProcess,
) -> None:
    """What a newcomer sees with `kubectl get events.events.k8s.io` for a pod that cannot be
    placed, as upstream's scheduler makes it: attempts are isomorphic (client-go's key
    includes the regarded object's resourceVersion) while the pod is unchanged, so there is
    one event per version of the pod, and repeats count in its series.  The first attempt's
    event regards the pod as created; the scheduler then writes the PodScheduled condition,
    so any attempt after it regards a newer version.  How many attempts come is up to the
    scheduling queue (retries follow cluster events and backoff), so the series' own
    counting is tested with a fake clock in tests/kube/client/test_events_series.py."""
    async with Client.from_kubeconfig(server.kubeconfig) as client:
        await client.create(Namespace(metadata=ObjectMeta(name="stuck")))

        async def default_account() -> bool:
            return bool((await client.list(ServiceAccount, "stuck")).items)

        await eventually(default_account)
        unplaceable = pod("nowhere", "stuck")
        assert unplaceable.spec is not None
        unplaceable.spec.node_selector = {"no-such-label": "x"}
        created = await client.create(unplaceable)
        failed: list[events_v1.Event] = []

        async def reported() -> bool:
            failed[:] = [
                e
                for e in (await client.list(events_v1.Event, "stuck")).items
                if e.reason == "FailedScheduling"
            ]
            return bool(failed)

        await eventually(reported, within=60.0)
        await asyncio.sleep(3.0)  # time for retries, if the queue makes any
        await reported()
    versions = [e.regarding.resource_version if e.regarding else None for e in failed]
    assert len(set(versions)) == len(versions), versions
    first, *later = sorted(failed, key=lambda e: e.event_time or "")
    assert versions and first.regarding is not None
    assert first.regarding.resource_version == created.metadata.resource_version
    assert all(e.regarding and e.regarding.resource_version != versions[0] for e in later)
