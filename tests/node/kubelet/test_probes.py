"""Probe workers on a fake clock with a scripted prober; the real prober on loopback."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from kube.api.kinds.core_v1.pod import (
    Container,
    ContainerPort,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStatus,
    ExecAction,
    HTTPGetAction,
    Pod,
    PodIP,
    PodStatus,
    Probe,
    TCPSocketAction,
)
from kube.clock import FakeClock
from node.kubelet.probes import (
    NetworkProber,
    Outcome,
    ProbeManager,
    ProbeTarget,
    ProbeType,
    ProbeUpdate,
    Result,
    resolve_port,
)
from tests import builders

UID = "uid-1"
HANG = "hang"
S, F = Result.SUCCESS, Result.FAILURE


class FakeProber:
    """Answers from a script (then ``default``); records when it was asked."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.script: dict[ProbeType, list[Result | str | Exception]] = {}
        self.default = Result.SUCCESS
        self.calls: list[tuple[ProbeType, float]] = []

    async def probe(self, probe: Probe, target: ProbeTarget) -> Outcome:
        kind = next(k for k in ProbeType if getattr(target.container, f"{k}_probe") is probe)
        self.calls.append((kind, self.clock.monotonic()))
        script = self.script.get(kind, [])
        answer = script.pop(0) if script else self.default
        if answer == HANG:
            await asyncio.Event().wait()
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, Result)
        return Outcome(answer)

    def times(self, kind: ProbeType) -> list[float]:
        return [t for k, t in self.calls if k == kind]


def probe(**settings: Any) -> Probe:
    made = Probe(exec=ExecAction(command=["check"]), **settings)
    made.set_defaults()
    return made


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.prober = FakeProber(self.clock)
        self.statuses: dict[str, PodStatus] = {}
        self.restarts: list[ProbeUpdate] = []
        self.changes: list[ProbeUpdate] = []
        self.manager = ProbeManager(
            self.prober,
            self.clock,
            self.statuses.get,
            on_restart=self.restarts.append,
            on_status=self.changes.append,
        )

    def container_running(
        self, container_id: str = "c1", *, started: bool = True, phase: str = "Running"
    ) -> None:
        self.statuses[UID] = PodStatus(
            phase=phase,
            pod_ips=[PodIP(ip="10.244.0.5")],
            container_statuses=[
                ContainerStatus(
                    name="app",
                    container_id=f"containerd://{container_id}",
                    started=started,
                    state=ContainerState(
                        running=ContainerStateRunning(started_at=self.clock.now())
                    ),
                )
            ],
        )

    async def advance(self, seconds: float) -> None:
        """Let the workers run, then move time a second at a time."""
        await settle()
        for _ in range(int(seconds)):
            await self.clock.advance(1)
            await settle()

    def results(self, kind: ProbeType) -> Result | None:
        return self.manager.results[kind].get("c1")


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def app_pod(*, restart_policy: str = "Always", deleting: bool = False, **probes: Any) -> Pod:
    built = builders.pod(
        uid=UID, containers=[Container(name="app", **probes)], restart_policy=restart_policy
    )
    if deleting:
        built.metadata.deletion_timestamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    return built


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    made = Harness()
    try:
        yield made
    finally:
        await made.manager.close()
    assert made.manager.workers == 0


async def test_liveness_failure_threshold_then_hold(harness: Harness) -> None:
    harness.container_running()
    harness.prober.default = F
    harness.manager.add_pod(app_pod(liveness_probe=probe(period_seconds=10)))
    await harness.advance(25)
    assert harness.prober.times(ProbeType.LIVENESS) == [0, 10, 20]
    assert [(u.kind, u.result, u.container_id) for u in harness.restarts] == [
        (ProbeType.LIVENESS, F, "c1")
    ]
    await harness.advance(30)
    assert len(harness.prober.times(ProbeType.LIVENESS)) == 3, "on hold until a new container"
    harness.container_running("c2")
    harness.prober.default = S
    await harness.advance(10)
    assert harness.manager.results[ProbeType.LIVENESS].get("c2") is S
    assert harness.manager.results[ProbeType.LIVENESS].get("c1") is None


@pytest.mark.parametrize(
    ("delay", "expected"),
    [
        pytest.param(0, [0, 10, 20], id="no-delay"),
        pytest.param(15, [20], id="delayed-past-two-ticks"),
        pytest.param(10, [10, 20], id="delay-equal-to-period"),
    ],
)
async def test_initial_delay(harness: Harness, delay: int, expected: list[float]) -> None:
    harness.container_running()
    readiness = probe(period_seconds=10, initial_delay_seconds=delay)
    harness.manager.add_pod(app_pod(readiness_probe=readiness))
    await harness.advance(25)
    assert harness.prober.times(ProbeType.READINESS) == expected


async def test_readiness_thresholds_report_changes(harness: Harness) -> None:
    harness.container_running()
    harness.prober.script[ProbeType.READINESS] = [S, S, F, F, S]
    readiness = probe(period_seconds=5, success_threshold=2, failure_threshold=2)
    harness.manager.add_pod(app_pod(readiness_probe=readiness))
    await settle()
    assert harness.results(ProbeType.READINESS) is F, "a new container starts unready"
    await harness.advance(20)
    assert [(u.kind, u.result) for u in harness.changes] == [
        (ProbeType.READINESS, F),
        (ProbeType.READINESS, S),
        (ProbeType.READINESS, F),
    ]
    assert harness.restarts == []
    assert harness.manager.verdicts(ProbeType.READINESS) == {"c1": False}


async def test_startup_gates_the_other_probes(harness: Harness) -> None:
    harness.container_running(started=False)
    harness.prober.script[ProbeType.STARTUP] = [F, S]
    harness.manager.add_pod(
        app_pod(
            startup_probe=probe(period_seconds=2),
            liveness_probe=probe(period_seconds=2),
            readiness_probe=probe(period_seconds=2),
        )
    )
    await harness.advance(3)
    assert harness.prober.times(ProbeType.STARTUP) == [0, 2]
    assert harness.prober.times(ProbeType.LIVENESS) == []
    assert harness.prober.times(ProbeType.READINESS) == []
    assert harness.results(ProbeType.STARTUP) is S
    assert ProbeUpdate(ProbeType.STARTUP, UID, "app", "c1", S) in harness.changes
    harness.container_running(started=True)
    await harness.advance(4)
    assert harness.prober.times(ProbeType.STARTUP) == [0, 2]
    assert harness.prober.times(ProbeType.LIVENESS) == [4, 6]
    assert harness.prober.times(ProbeType.READINESS) == [4, 6]


async def test_startup_failure_restarts(harness: Harness) -> None:
    harness.container_running(started=False)
    harness.prober.default = F
    startup = probe(period_seconds=1, failure_threshold=2)
    harness.manager.add_pod(app_pod(startup_probe=startup))
    await harness.advance(3)
    assert [(u.kind, u.result) for u in harness.restarts] == [(ProbeType.STARTUP, F)]


async def test_timeout_is_a_failure(harness: Harness) -> None:
    harness.container_running()
    harness.prober.default = HANG  # type: ignore[assignment]
    liveness = probe(period_seconds=10, timeout_seconds=3, failure_threshold=1)
    harness.manager.add_pod(app_pod(liveness_probe=liveness))
    await harness.advance(2)
    assert harness.restarts == []
    await harness.advance(1)
    assert [(u.kind, u.result) for u in harness.restarts] == [(ProbeType.LIVENESS, F)]


async def test_prober_error_is_thrown_away(harness: Harness) -> None:
    harness.container_running()
    harness.prober.script[ProbeType.LIVENESS] = [RuntimeError("exec broke"), F, S]
    liveness = probe(period_seconds=1, failure_threshold=2)
    harness.manager.add_pod(app_pod(liveness_probe=liveness))
    await harness.advance(3)
    assert harness.restarts == []
    assert harness.results(ProbeType.LIVENESS) is S


@pytest.mark.parametrize(
    ("phase", "terminated", "policy", "keeps_going"),
    [
        pytest.param("Succeeded", False, "Always", False, id="terminal-phase"),
        pytest.param("Running", True, "Never", False, id="exited-never-restarted"),
        pytest.param("Running", True, "Always", True, id="exited-will-restart"),
    ],
)
async def test_worker_ends(
    harness: Harness, phase: str, terminated: bool, policy: str, keeps_going: bool
) -> None:
    harness.container_running(phase=phase)
    if terminated:
        [status] = harness.statuses[UID].container_statuses or []
        status.state = ContainerState(terminated=ContainerStateTerminated(exit_code=1))
    readiness = probe(period_seconds=1)
    harness.manager.add_pod(app_pod(restart_policy=policy, readiness_probe=readiness))
    await harness.advance(2)
    assert harness.manager.workers == int(keeps_going)
    assert harness.prober.calls == []


async def test_deletion_stops_liveness_with_success(harness: Harness) -> None:
    harness.container_running()
    harness.prober.default = F
    liveness = probe(period_seconds=1)
    harness.manager.add_pod(app_pod(liveness_probe=liveness))
    await harness.advance(1)
    harness.manager.add_pod(app_pod(deleting=True, liveness_probe=liveness))
    await harness.advance(1)
    assert harness.manager.workers == 0
    assert harness.restarts == []


async def test_poke_and_remove(harness: Harness) -> None:
    readiness = probe(period_seconds=30)
    harness.manager.add_pod(app_pod(readiness_probe=readiness))
    harness.manager.add_pod(app_pod(readiness_probe=readiness))
    await settle()
    assert harness.manager.workers == 1
    harness.container_running()
    await harness.advance(2)
    assert harness.prober.calls == []
    harness.manager.poke(UID)
    await settle()
    assert harness.prober.times(ProbeType.READINESS) == [2]
    await harness.manager.remove_pod(UID)
    assert harness.manager.workers == 0
    assert harness.results(ProbeType.READINESS) is None


# The real prober.


def target(container: Container) -> ProbeTarget:
    return ProbeTarget(Pod(), container, "c1", "127.0.0.1")


@pytest.fixture
async def server() -> AsyncIterator[int]:
    async def health(request: web.Request) -> web.Response:
        return web.Response(status=int(request.query.get("status", "200")), text="ok")

    app = web.Application()
    app.router.add_get("/healthz", health)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield port
    finally:
        await runner.cleanup()


async def no_exec(container_id: str, command: list[str], seconds: float) -> int:
    raise AssertionError("not an exec probe")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("/healthz", S, id="ok"),
        pytest.param("/healthz?status=302", S, id="redirect-counts"),
        pytest.param("/healthz?status=500", F, id="server-error"),
        pytest.param("/missing", F, id="not-found"),
    ],
)
async def test_http_get(server: int, path: str, expected: Result) -> None:
    container = Container(name="app", ports=[ContainerPort(name="http", container_port=server)])
    http = Probe(http_get=HTTPGetAction(path=path, port="http"))
    outcome = await NetworkProber(no_exec).probe(http, target(container))
    assert outcome.result is expected


async def test_tcp_socket(server: int) -> None:
    prober = NetworkProber(no_exec)
    container = Container(name="app")
    open_port = Probe(tcp_socket=TCPSocketAction(port=server))
    assert (await prober.probe(open_port, target(container))).result is S
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    closed = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    closed_port = Probe(tcp_socket=TCPSocketAction(port=closed))
    assert (await prober.probe(closed_port, target(container))).result is F


@pytest.mark.parametrize(
    ("code", "expected"), [pytest.param(0, S, id="zero"), pytest.param(1, F, id="non-zero")]
)
async def test_exec(code: int, expected: Result) -> None:
    calls: list[tuple[str, list[str], float]] = []

    async def exec_sync(container_id: str, command: list[str], seconds: float) -> int:
        calls.append((container_id, command, seconds))
        return code

    check = Probe(exec=ExecAction(command=["cat", "/tmp/ready"]), timeout_seconds=4)
    outcome = await NetworkProber(exec_sync).probe(check, target(Container(name="app")))
    assert outcome.result is expected
    assert calls == [("c1", ["cat", "/tmp/ready"], 4.0)]


@pytest.mark.parametrize(
    ("port", "expected"),
    [
        pytest.param(8080, 8080, id="number"),
        pytest.param("http", 80, id="named"),
        pytest.param("9090", 9090, id="digits"),
    ],
)
def test_resolve_port(port: int | str, expected: int) -> None:
    container = Container(name="app", ports=[ContainerPort(name="http", container_port=80)])
    assert resolve_port(port, container) == expected


def test_resolve_unknown_port() -> None:
    with pytest.raises(ValueError, match="metrics"):
        resolve_port("metrics", Container(name="app"))
