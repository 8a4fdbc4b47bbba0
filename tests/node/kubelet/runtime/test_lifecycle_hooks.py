"""Lifecycle handlers: exec through a FakeRuntime, httpGet against a loopback server, sleep
on a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from kube.api.kinds.core_v1.pod import (
    Container,
    ContainerPort,
    ExecAction,
    HTTPGetAction,
    HTTPHeader,
    LifecycleHandler,
    Pod,
    SleepAction,
    TCPSocketAction,
)
from kube.api.meta_v1 import ObjectMeta
from kube.clock import FakeClock
from node.cri.client import RuntimeClient
from node.cri.fake import FakeRuntime
from node.cri.pb import api_pb2 as pb
from node.kubelet.runtime.hooks import HookRunner, pod_ref

POD = Pod(metadata=ObjectMeta(name="web", namespace="default", uid="uid-1"))
APP = Container(name="app", image="busybox:1.35")


class Harness:
    def __init__(self, runtime: FakeRuntime, cri: RuntimeClient, clock: FakeClock) -> None:
        self.runtime = runtime
        self.cri = cri
        self.clock = clock
        self.runner = HookRunner(cri, clock)

    async def running_container(self) -> str:
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name="web", namespace="default", uid="uid-1")
        )
        sandbox = await self.cri.run_pod_sandbox(config)
        container = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name="app"), image=pb.ImageSpec(image="busybox:1.35")
        )
        container_id = await self.cri.create_container(sandbox, container, config)
        await self.cri.start_container(container_id)
        return container_id


async def until_sleeping(clock: FakeClock) -> None:
    """Wait (in real time: gRPC calls are under way) until something sleeps on ``clock``."""
    for _ in range(500):
        if clock.sleepers:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("nothing slept on the clock")


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    clock = FakeClock()
    runtime = FakeRuntime(images=["busybox:1.35"], clock=clock)
    await runtime.start(tmp_path / "cri.sock")
    try:
        async with RuntimeClient(runtime.endpoint) as cri:
            yield Harness(runtime, cri, clock)
    finally:
        await runtime.stop()


@pytest.fixture
async def server() -> AsyncIterator[tuple[int, list[web.Request]]]:
    seen: list[web.Request] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request)
        return web.Response(status=500, text="hooked")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield port, seen
    finally:
        await runner.cleanup()


def test_pod_ref() -> None:
    assert pod_ref(POD) == "web_default(uid-1)"


async def test_exec_succeeds_on_exit_zero(harness: Harness) -> None:
    container_id = await harness.running_container()
    handler = LifecycleHandler(exec=ExecAction(command=["true"]))
    assert await harness.runner.run(POD, APP, container_id, handler, ()) is None


async def test_exec_fails_on_non_zero_exit(harness: Harness) -> None:
    container_id = await harness.running_container()
    handler = LifecycleHandler(exec=ExecAction(command=["false"]))
    problem = await harness.runner.run(POD, APP, container_id, handler, ())
    assert problem is not None
    assert problem.startswith(
        'Exec lifecycle hook ([\'false\']) for Container "app" in Pod "web_default(uid-1)" '
        "failed - error: command 'false' exited with 1"
    )


async def test_exec_in_a_stopped_container_fails(harness: Harness) -> None:
    container_id = await harness.running_container()
    harness.runtime.exit_container(container_id, 0)
    handler = LifecycleHandler(exec=ExecAction(command=["true"]))
    problem = await harness.runner.run(POD, APP, container_id, handler, ())
    assert problem is not None and "FAILED_PRECONDITION" in problem


async def test_http_get_goes_to_the_pod_ip_and_ignores_the_status(
    harness: Harness, server: tuple[int, list[web.Request]]
) -> None:
    port, seen = server
    handler = LifecycleHandler(
        http_get=HTTPGetAction(
            path="/drain?now=1", port=port, http_headers=[HTTPHeader(name="X-Hook", value="yes")]
        )
    )
    assert await harness.runner.run(POD, APP, "c1", handler, ("127.0.0.1",)) is None
    (request,) = seen
    assert request.path_qs == "/drain?now=1"
    assert request.headers["X-Hook"] == "yes"


async def test_http_get_resolves_named_ports(
    harness: Harness, server: tuple[int, list[web.Request]]
) -> None:
    port, seen = server
    app = Container(name="app", ports=[ContainerPort(name="http", container_port=port)])
    handler = LifecycleHandler(http_get=HTTPGetAction(path="/", port="http", host="127.0.0.1"))
    assert await harness.runner.run(POD, app, "c1", handler, ()) is None
    assert len(seen) == 1


async def test_http_get_without_an_answer_fails(harness: Harness) -> None:
    handler = LifecycleHandler(http_get=HTTPGetAction(path="/x", port=1, host="127.0.0.1"))
    problem = await harness.runner.run(POD, APP, "c1", handler, ())
    assert problem is not None
    assert problem.startswith('HTTP lifecycle hook (/x) for Container "app"')


async def test_http_get_with_an_unknown_port_name_fails(harness: Harness) -> None:
    handler = LifecycleHandler(http_get=HTTPGetAction(path="/", port="metrics"))
    problem = await harness.runner.run(POD, APP, "c1", handler, ("127.0.0.1",))
    assert problem is not None and "metrics" in problem


async def test_sleep_waits_on_the_clock(harness: Harness) -> None:
    handler = LifecycleHandler(sleep=SleepAction(seconds=5))
    task = asyncio.create_task(harness.runner.run(POD, APP, "c1", handler, ()))
    await until_sleeping(harness.clock)
    assert not task.done()
    await harness.clock.advance(5)
    assert await task is None


async def test_tcp_socket_cannot_run(harness: Harness) -> None:
    handler = LifecycleHandler(tcp_socket=TCPSocketAction(port=80))
    problem = await harness.runner.run(POD, APP, "c1", handler, ())
    assert problem is not None and problem.startswith("Cannot run handler")
