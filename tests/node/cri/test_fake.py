"""FakeRuntime's own contract, driven over gRPC: the hooks tests use (exit, OOM, on_start,
injected failures, conditions, logs), name reservation, cascading removal, pulls, restarts,
and the pure helpers (image normalization, the default exec)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from kube.clock import FakeClock
from node.cri.client import CRIError, RuntimeClient
from node.cri.fake import (
    NETWORK_READY,
    ExecResult,
    FakeContainer,
    FakeRuntime,
    default_exec,
    normalize_image,
)
from node.cri.pb import api_pb2 as pb

SandboxConfigFactory = Callable[..., pb.PodSandboxConfig]
ContainerConfigFactory = Callable[..., pb.ContainerConfig]

DIGEST = "sha256:" + "ab" * 32


async def _running_container(
    cri: RuntimeClient,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
    **sandbox_options: object,
) -> tuple[str, str]:
    config = sandbox_config("pod", **sandbox_options)
    sandbox_id = await cri.run_pod_sandbox(config)
    container_id = await cri.create_container(sandbox_id, container_config("app"), config)
    await cri.start_container(container_id)
    return sandbox_id, container_id


def _lines(path: str) -> list[str]:
    return Path(path).read_text().splitlines()


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        pytest.param("busybox", "docker.io/library/busybox:latest", id="short"),
        pytest.param("busybox:1.35", "docker.io/library/busybox:1.35", id="tag"),
        pytest.param("library/busybox", "docker.io/library/busybox:latest", id="library"),
        pytest.param("docker.io/busybox", "docker.io/library/busybox:latest", id="docker-io"),
        pytest.param("bitnami/redis:7", "docker.io/bitnami/redis:7", id="user-repo"),
        pytest.param("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9", id="registry"),
        pytest.param("localhost/app", "localhost/app:latest", id="localhost"),
        pytest.param("reg:5000/app", "reg:5000/app:latest", id="registry-port"),
        pytest.param(f"busybox@{DIGEST}", f"docker.io/library/busybox@{DIGEST}", id="digest"),
    ],
)
def test_normalize_image(reference: str, expected: str) -> None:
    assert normalize_image(reference) == expected


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        pytest.param(["echo"], ExecResult(stdout=b"\n"), id="echo-empty"),
        pytest.param(["echo", "a", "b"], ExecResult(stdout=b"a b\n"), id="echo"),
        pytest.param(["false"], ExecResult(exit_code=1), id="false"),
        pytest.param([], ExecResult(stderr=b": not found\n", exit_code=127), id="empty"),
    ],
)
def test_default_exec(cmd: list[str], expected: ExecResult) -> None:
    container = FakeContainer("c", "s", pb.ContainerConfig(), pb.Image(), "", 0)
    assert default_exec(container, cmd) == expected


@pytest.mark.parametrize(
    ("end", "exit_code", "reason"),
    [
        pytest.param(lambda rt, cid: rt.exit_container(cid, 0), 0, "Completed", id="completed"),
        pytest.param(lambda rt, cid: rt.exit_container(cid, 2), 2, "Error", id="error"),
        pytest.param(lambda rt, cid: rt.oom_kill(cid), 137, "OOMKilled", id="oom"),
    ],
)
async def test_exit_hooks(
    cri: RuntimeClient,
    runtime: FakeRuntime,
    clock: FakeClock,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
    end: Callable[[FakeRuntime, str], None],
    exit_code: int,
    reason: str,
) -> None:
    _, container_id = await _running_container(cri, sandbox_config, container_config)
    await clock.advance(90)
    end(runtime, container_id)

    status = await cri.container_status(container_id)
    assert (status.state, status.exit_code, status.reason) == (
        pb.CONTAINER_EXITED,
        exit_code,
        reason,
    )
    assert status.finished_at - status.started_at == 90 * 10**9
    with pytest.raises(ValueError, match="not running"):
        runtime.exit_container(container_id, 0)


async def test_on_start_hook_completes_containers(
    cri: RuntimeClient,
    runtime: FakeRuntime,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
) -> None:
    runtime.on_start = lambda container: 0 if container.config.metadata.name == "app" else None
    _, container_id = await _running_container(cri, sandbox_config, container_config)
    status = await cri.container_status(container_id)
    assert (status.state, status.reason) == (pb.CONTAINER_EXITED, "Completed")


async def test_injected_failures_then_recovery(cri: RuntimeClient, runtime: FakeRuntime) -> None:
    runtime.fail("Version", grpc.StatusCode.UNAVAILABLE, "runtime restarting", times=2)
    for _ in range(2):
        with pytest.raises(CRIError) as caught:
            await cri.version()
        assert (caught.value.code, caught.value.details) == (
            grpc.StatusCode.UNAVAILABLE,
            "runtime restarting",
        )
    await cri.version()
    await cri.status()
    assert (runtime.calls["Version"], runtime.calls["Status"]) == (3, 1)


async def test_names_are_reserved_until_removal(
    cri: RuntimeClient,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
) -> None:
    config = sandbox_config("pod")
    sandbox_id = await cri.run_pod_sandbox(config)
    container_id = await cri.create_container(sandbox_id, container_config("app"), config)
    with pytest.raises(CRIError, match="reserved"):
        await cri.create_container(sandbox_id, container_config("app"), config)
    await cri.create_container(sandbox_id, container_config("app", attempt=1), config)
    await cri.remove_container(container_id)
    await cri.create_container(sandbox_id, container_config("app"), config)

    await cri.run_pod_sandbox(sandbox_config("pod", attempt=1))
    await cri.remove_pod_sandbox(sandbox_id)
    await cri.run_pod_sandbox(config)


async def test_sandbox_stop_and_remove_cascade(
    cri: RuntimeClient,
    runtime: FakeRuntime,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
) -> None:
    sandbox_id, container_id = await _running_container(cri, sandbox_config, container_config)
    await cri.stop_pod_sandbox(sandbox_id)
    status = await cri.container_status(container_id)
    assert (status.state, status.exit_code) == (pb.CONTAINER_EXITED, 137)

    config = runtime.sandboxes[sandbox_id].config
    with pytest.raises(CRIError) as caught:
        await cri.create_container(sandbox_id, container_config("late"), config)
    assert caught.value.code == grpc.StatusCode.FAILED_PRECONDITION

    await cri.remove_pod_sandbox(sandbox_id)
    assert runtime.sandboxes == {}
    assert runtime.containers == {}


async def test_stop_container_without_grace_is_sigkill(
    cri: RuntimeClient,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
) -> None:
    _, container_id = await _running_container(cri, sandbox_config, container_config)
    await cri.stop_container(container_id, grace_seconds=0)
    await cri.stop_container(container_id, grace_seconds=0)  # idempotent once exited
    assert (await cri.container_status(container_id)).exit_code == 137


async def test_container_keeps_its_config(
    cri: RuntimeClient,
    runtime: FakeRuntime,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
) -> None:
    _, container_id = await _running_container(cri, sandbox_config, container_config)
    config = runtime.containers[container_id].config
    assert list(config.command) == ["sleep", "3600"]
    assert {kv.key: kv.value for kv in config.envs} == {"GREETING": "hello"}


async def test_network_not_ready_refuses_pod_network_sandboxes(
    cri: RuntimeClient, runtime: FakeRuntime, sandbox_config: SandboxConfigFactory
) -> None:
    runtime.set_condition(NETWORK_READY, False, "NetworkPluginNotReady", "no CNI config")
    conditions = {c.type: c for c in (await cri.status()).conditions}
    assert (conditions[NETWORK_READY].status, conditions[NETWORK_READY].reason) == (
        False,
        "NetworkPluginNotReady",
    )
    with pytest.raises(CRIError, match="cni config uninitialized"):
        await cri.run_pod_sandbox(sandbox_config("pod"))

    sandbox_id = await cri.run_pod_sandbox(sandbox_config("host", host_network=True))
    status = await cri.pod_sandbox_status(sandbox_id)
    assert status.network.ip == ""
    assert status.linux.namespaces.options.network == pb.NODE


async def test_allow_pull_adds_the_image(cri: RuntimeClient, runtime: FakeRuntime) -> None:
    runtime.allow_pull = True
    image_ref = await cri.pull_image("nginx:1.27", auth=pb.AuthConfig(username="u"))
    image = await cri.image_status("docker.io/library/nginx:1.27")
    assert image is not None
    assert image.id == image_ref


async def test_logs_and_reopen(
    cri: RuntimeClient,
    runtime: FakeRuntime,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
    tmp_path: Path,
) -> None:
    log_directory = tmp_path / "pods" / "default_pod_uid"
    _, container_id = await _running_container(
        cri, sandbox_config, container_config, log_directory=str(log_directory)
    )
    runtime.write_log(container_id, "hello\nworld")
    runtime.write_log(container_id, "oops", stream="stderr")

    status = await cri.container_status(container_id)
    assert status.log_path == str(log_directory / "app" / "0.log")
    assert _lines(status.log_path) == [
        "2026-01-01T00:00:00.000000000Z stdout F hello",
        "2026-01-01T00:00:00.000000000Z stdout F world",
        "2026-01-01T00:00:00.000000000Z stderr F oops",
    ]
    await cri.reopen_container_log(container_id)
    runtime.exit_container(container_id, 0)
    with pytest.raises(CRIError) as caught:
        await cri.reopen_container_log(container_id)
    assert caught.value.code == grpc.StatusCode.FAILED_PRECONDITION


async def test_socket_path_too_long(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="longer than 107 bytes"):
        await FakeRuntime().start(tmp_path / ("x" * 120))
