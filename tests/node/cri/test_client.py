"""RuntimeClient against FakeRuntime over a real unix socket: every wrapper, its return type,
the mapping of gRPC failures to CRIError, deadlines and reconnection after a runtime restart."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest

from node.cri.client import CRIError, RuntimeClient, grpc_target
from node.cri.fake import ExecResult, FakeContainer, FakeRuntime
from node.cri.pb import api_pb2 as pb

SandboxConfigFactory = Callable[..., pb.PodSandboxConfig]
ContainerConfigFactory = Callable[..., pb.ContainerConfig]


async def _run(
    cri: RuntimeClient,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
    pod: str,
    container: str = "app",
    *,
    start: bool = True,
) -> tuple[str, str]:
    config = sandbox_config(pod)
    sandbox_id = await cri.run_pod_sandbox(config)
    container_id = await cri.create_container(sandbox_id, container_config(container), config)
    if start:
        await cri.start_container(container_id)
    return sandbox_id, container_id


@pytest.mark.parametrize(
    ("endpoint", "target"),
    [
        pytest.param("unix:///run/containerd/containerd.sock", None, id="unix-url"),
        pytest.param("/run/c.sock", "unix:///run/c.sock", id="bare-path"),
        pytest.param("tcp://127.0.0.1:1", ValueError, id="tcp-refused"),
        pytest.param("relative.sock", ValueError, id="relative-refused"),
    ],
)
def test_grpc_target(endpoint: str, target: str | type[Exception] | None) -> None:
    if target is ValueError:
        with pytest.raises(ValueError, match="unix:///path"):
            grpc_target(endpoint)
    else:
        assert grpc_target(endpoint) == (target or endpoint)


async def test_version_and_status(cri: RuntimeClient) -> None:
    version = await cri.version()
    assert (version.runtime_name, version.runtime_api_version) == ("fake", "v1")
    status = await cri.status()
    assert {c.type: c.status for c in status.conditions} == {
        "RuntimeReady": True,
        "NetworkReady": True,
    }


async def test_sandbox_lifecycle(cri: RuntimeClient, sandbox_config: SandboxConfigFactory) -> None:
    config = sandbox_config("web", labels={"app": "web"})
    sandbox_id = await cri.run_pod_sandbox(config)

    status = await cri.pod_sandbox_status(sandbox_id)
    assert status.state == pb.SANDBOX_READY
    assert status.network.ip == "10.88.0.2"
    assert status.metadata == config.metadata
    assert dict(status.labels) == {"app": "web"}

    await cri.stop_pod_sandbox(sandbox_id)
    await cri.stop_pod_sandbox(sandbox_id)  # idempotent while the sandbox exists
    assert (await cri.pod_sandbox_status(sandbox_id)).state == pb.SANDBOX_NOTREADY

    await cri.remove_pod_sandbox(sandbox_id)
    await cri.remove_pod_sandbox(sandbox_id)  # idempotent
    assert await cri.list_pod_sandbox() == []
    with pytest.raises(CRIError) as caught:
        await cri.pod_sandbox_status(sandbox_id)
    assert caught.value.code == grpc.StatusCode.NOT_FOUND
    assert caught.value.method == "PodSandboxStatus"


async def test_container_lifecycle(
    cri: RuntimeClient,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
) -> None:
    sandbox_id, container_id = await _run(cri, sandbox_config, container_config, "web", start=False)
    assert (await cri.container_status(container_id)).state == pb.CONTAINER_CREATED

    await cri.start_container(container_id)
    status = await cri.container_status(container_id)
    assert status.state == pb.CONTAINER_RUNNING
    assert status.started_at >= status.created_at > 0
    assert status.image.image == "busybox:1.35"
    assert status.image_ref.startswith("docker.io/library/busybox@sha256:")

    await cri.stop_container(container_id, grace_seconds=30)
    status = await cri.container_status(container_id)
    assert (status.state, status.exit_code, status.reason) == (pb.CONTAINER_EXITED, 143, "Error")

    await cri.remove_container(container_id)
    await cri.remove_container(container_id)  # idempotent
    assert await cri.list_containers(sandbox_id=sandbox_id) == []


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        pytest.param({}, {"a", "b", "c"}, id="all"),
        pytest.param({"state": pb.SANDBOX_READY}, {"a", "b"}, id="ready"),
        pytest.param({"state": pb.SANDBOX_NOTREADY}, {"c"}, id="notready"),
        pytest.param({"labels": {"tier": "web"}}, {"a", "c"}, id="label"),
        pytest.param({"labels": {"tier": "web", "zone": "x"}}, {"a"}, id="labels-and"),
        pytest.param({"labels": {"tier": "db"}}, set(), id="label-none"),
    ],
)
async def test_list_pod_sandbox_filters(
    cri: RuntimeClient,
    sandbox_config: SandboxConfigFactory,
    filters: dict[str, object],
    expected: set[str],
) -> None:
    labels = {"a": {"tier": "web", "zone": "x"}, "b": {"tier": "api"}, "c": {"tier": "web"}}
    ids = {
        name: await cri.run_pod_sandbox(sandbox_config(name, labels=labels[name]))
        for name in labels
    }
    await cri.stop_pod_sandbox(ids["c"])

    found = await cri.list_pod_sandbox(**filters)  # type: ignore[arg-type]
    assert {item.metadata.name for item in found} == expected
    (only,) = await cri.list_pod_sandbox(sandbox_id=ids["b"])
    assert only.metadata.name == "b"


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        pytest.param({}, {"one", "two", "three"}, id="all"),
        pytest.param({"sandbox": "p"}, {"one", "two"}, id="sandbox"),
        pytest.param({"state": pb.CONTAINER_RUNNING}, {"one", "three"}, id="running"),
        pytest.param({"state": pb.CONTAINER_CREATED}, {"two"}, id="created"),
        pytest.param({"labels": {"role": "main"}}, {"one", "three"}, id="label"),
        pytest.param(
            {"sandbox": "q", "labels": {"role": "main"}}, {"three"}, id="sandbox-and-label"
        ),
    ],
)
async def test_list_containers_filters(
    cri: RuntimeClient,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
    filters: dict[str, object],
    expected: set[str],
) -> None:
    sandboxes = {name: sandbox_config(name) for name in ("p", "q")}
    sandbox_ids = {name: await cri.run_pod_sandbox(c) for name, c in sandboxes.items()}
    ids = {}
    for pod, name, role, start in [
        ("p", "one", "main", True),
        ("p", "two", "side", False),
        ("q", "three", "main", True),
    ]:
        config = container_config(name, labels={"role": role})
        ids[name] = await cri.create_container(sandbox_ids[pod], config, sandboxes[pod])
        if start:
            await cri.start_container(ids[name])

    sandbox = filters.pop("sandbox", None)
    found = await cri.list_containers(
        sandbox_id=sandbox_ids[sandbox] if isinstance(sandbox, str) else "",
        **filters,  # type: ignore[arg-type]
    )
    assert {c.metadata.name for c in found} == expected
    assert all(c.image_ref.startswith("sha256:") for c in found)
    (only,) = await cri.list_containers(container_id=ids["two"])
    assert (only.metadata.name, only.pod_sandbox_id) == ("two", sandbox_ids["p"])


Scenario = Callable[
    [RuntimeClient, SandboxConfigFactory, ContainerConfigFactory], Awaitable[object]
]


async def _start_twice(
    cri: RuntimeClient, sandbox_config: SandboxConfigFactory, cc: ContainerConfigFactory
) -> None:
    _, container_id = await _run(cri, sandbox_config, cc, "twice")
    await cri.start_container(container_id)


async def _duplicate_sandbox(
    cri: RuntimeClient, sandbox_config: SandboxConfigFactory, cc: ContainerConfigFactory
) -> None:
    await cri.run_pod_sandbox(sandbox_config("dup"))
    await cri.run_pod_sandbox(sandbox_config("dup"))


async def _missing_image(
    cri: RuntimeClient, sandbox_config: SandboxConfigFactory, cc: ContainerConfigFactory
) -> None:
    config = sandbox_config("img")
    sandbox_id = await cri.run_pod_sandbox(config)
    await cri.create_container(sandbox_id, cc("app", image="nginx:1.27"), config)


async def _remove_running(
    cri: RuntimeClient, sandbox_config: SandboxConfigFactory, cc: ContainerConfigFactory
) -> None:
    _, container_id = await _run(cri, sandbox_config, cc, "busy")
    await cri.remove_container(container_id)


async def _exec_in_created(
    cri: RuntimeClient, sandbox_config: SandboxConfigFactory, cc: ContainerConfigFactory
) -> None:
    _, container_id = await _run(cri, sandbox_config, cc, "idle", start=False)
    await cri.exec_sync(container_id, ["true"])


@pytest.mark.parametrize(
    ("scenario", "method", "code"),
    [
        pytest.param(
            lambda cri, s, c: cri.stop_pod_sandbox("nope"),
            "StopPodSandbox",
            grpc.StatusCode.NOT_FOUND,
            id="stop-unknown-sandbox",
        ),
        pytest.param(
            lambda cri, s, c: cri.stop_container("nope", 0),
            "StopContainer",
            grpc.StatusCode.NOT_FOUND,
            id="stop-unknown-container",
        ),
        pytest.param(
            lambda cri, s, c: cri.create_container("nope", c("app"), s("x")),
            "CreateContainer",
            grpc.StatusCode.NOT_FOUND,
            id="create-in-unknown-sandbox",
        ),
        pytest.param(
            _start_twice, "StartContainer", grpc.StatusCode.FAILED_PRECONDITION, id="start-twice"
        ),
        pytest.param(
            _duplicate_sandbox,
            "RunPodSandbox",
            grpc.StatusCode.ALREADY_EXISTS,
            id="duplicate-sandbox",
        ),
        pytest.param(
            _missing_image, "CreateContainer", grpc.StatusCode.NOT_FOUND, id="missing-image"
        ),
        pytest.param(
            _remove_running,
            "RemoveContainer",
            grpc.StatusCode.FAILED_PRECONDITION,
            id="remove-running",
        ),
        pytest.param(
            _exec_in_created, "ExecSync", grpc.StatusCode.FAILED_PRECONDITION, id="exec-created"
        ),
        pytest.param(
            lambda cri, s, c: cri.pull_image("nginx:1.27"),
            "PullImage",
            grpc.StatusCode.NOT_FOUND,
            id="pull-unknown",
        ),
    ],
)
async def test_errors_carry_code_and_method(
    cri: RuntimeClient,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
    scenario: Scenario,
    method: str,
    code: grpc.StatusCode,
) -> None:
    with pytest.raises(CRIError) as caught:
        await scenario(cri, sandbox_config, container_config)
    assert (caught.value.method, caught.value.code) == (method, code)
    assert caught.value.details
    assert str(caught.value).startswith(f"CRI {method}: {code.name}: ")


async def test_images(cri: RuntimeClient) -> None:
    images = await cri.list_images()
    tags = sorted(tag for image in images for tag in image.repo_tags)
    assert tags == ["docker.io/library/busybox:1.35", "registry.k8s.io/pause:3.9"]

    busybox = await cri.image_status("busybox:1.35")
    assert busybox is not None
    for reference in ("docker.io/library/busybox:1.35", busybox.id, busybox.repo_digests[0]):
        assert await cri.image_status(reference) == busybox
    assert await cri.image_status("busybox") is None  # busybox:latest is not there
    assert await cri.list_images("busybox:1.35") == [busybox]

    assert await cri.pull_image("busybox:1.35") == busybox.id
    await cri.remove_image("busybox:1.35")
    await cri.remove_image("busybox:1.35")  # idempotent
    assert await cri.image_status("busybox:1.35") is None


@pytest.mark.parametrize(
    ("cmd", "stdout", "stderr", "exit_code"),
    [
        pytest.param(["echo", "hello", "world"], b"hello world\n", b"", 0, id="echo"),
        pytest.param(["true"], b"", b"", 0, id="true"),
        pytest.param(["false"], b"", b"", 1, id="false"),
        pytest.param(["cat", "/tmp/x"], b"", b"cat: not found\n", 127, id="unknown"),
    ],
)
async def test_exec_sync_output(
    cri: RuntimeClient,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
    cmd: list[str],
    stdout: bytes,
    stderr: bytes,
    exit_code: int,
) -> None:
    _, container_id = await _run(cri, sandbox_config, container_config, "probe")
    result = await cri.exec_sync(container_id, cmd, timeout_seconds=1)
    assert (result.stdout, result.stderr, result.exit_code) == (stdout, stderr, exit_code)


async def test_exec_sync_timeout_is_deadline_exceeded(
    cri: RuntimeClient,
    runtime: FakeRuntime,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
) -> None:
    async def hang(container: FakeContainer, cmd: list[str]) -> ExecResult:
        await asyncio.sleep(30)
        return ExecResult()

    runtime.exec_handler = hang
    _, container_id = await _run(cri, sandbox_config, container_config, "slow")
    with pytest.raises(CRIError) as caught:
        await cri.exec_sync(container_id, ["sleep", "30"], timeout_seconds=1)
    assert caught.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_streaming_urls(
    cri: RuntimeClient,
    sandbox_config: SandboxConfigFactory,
    container_config: ContainerConfigFactory,
) -> None:
    sandbox_id, container_id = await _run(cri, sandbox_config, container_config, "stream")
    urls = [
        await cri.exec(container_id, ["sh"], tty=True, stdin=True),
        await cri.attach(container_id),
        await cri.port_forward(sandbox_id, [8080]),
    ]
    prefixes = [f"http://127.0.0.1:10010/{kind}/" for kind in ("exec", "attach", "portforward")]
    assert all(url.startswith(prefix) for url, prefix in zip(urls, prefixes, strict=True))


async def test_update_runtime_config_sets_the_pod_cidr(
    cri: RuntimeClient, sandbox_config: SandboxConfigFactory
) -> None:
    await cri.update_runtime_config("10.244.3.0/24")
    sandbox_id = await cri.run_pod_sandbox(sandbox_config("cidr"))
    assert (await cri.pod_sandbox_status(sandbox_id)).network.ip == "10.244.3.2"


async def test_unavailable_while_runtime_is_down_then_reconnects(
    cri: RuntimeClient, runtime: FakeRuntime, sandbox_config: SandboxConfigFactory, tmp_path: Path
) -> None:
    sandbox_id = await cri.run_pod_sandbox(sandbox_config("survivor"))
    await runtime.stop()
    with pytest.raises(CRIError) as caught:
        await cri.version()
    assert (caught.value.code, caught.value.method) == (grpc.StatusCode.UNAVAILABLE, "Version")

    await runtime.start(tmp_path / "cri.sock")
    for _ in range(50):  # the channel reconnects with backoff
        try:
            (sandbox,) = await cri.list_pod_sandbox()
            break
        except CRIError:
            await asyncio.sleep(0.1)
    assert sandbox.id == sandbox_id
