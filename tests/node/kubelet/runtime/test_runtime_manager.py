"""The runtime manager end to end against a FakeRuntime over real gRPC, on a fake clock."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.api.kinds.core_v1.pod import (
    ConfigMapKeySelector,
    Container,
    ContainerStatus,
    EnvVar,
    EnvVarSource,
    EphemeralContainer,
    ExecAction,
    Lifecycle,
    LifecycleHandler,
    Pod,
    PodSpec,
    PodStatus,
)
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.core_v1.volume import ObjectFieldSelector
from kube.api.kinds.node_v1 import RuntimeClass
from kube.api.meta_v1 import ObjectMeta
from kube.client.informers import Indexer
from kube.clock import FakeClock
from node.cri.client import RuntimeClient
from node.cri.fake import ExecResult, FakeContainer, FakeRuntime
from node.cri.pb import api_pb2 as pb
from node.kubelet.logs import log_container_id
from node.kubelet.runtime.cgroups import FakeCgroups
from node.kubelet.runtime.containers import termination_log_path
from node.kubelet.runtime.manager import (
    CGROUP_PARENT_ANNOTATION,
    PodInputs,
    RuntimeManager,
    SyncResult,
)
from node.kubelet.runtime.network import Interface
from node.kubelet.runtime.options import NodeRuntimeOptions
from node.kubelet.runtime.runtimeclass import RuntimeClasses, RuntimeClassNotFound
from node.kubelet.runtime.state import PodRuntimeState
from node.kubelet.status import Observation, StartFailure, generate_pod_status

BUSYBOX = "busybox:1.35"
PAUSE = "registry.k8s.io/pause:3.9"
UID = "uid-web"


class Events:
    """A recording EventSink."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def event(self, obj: Pod, type: str, reason: str, message: str) -> None:
        self.seen.append((type, reason, message))

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.seen]

    def clear(self) -> None:
        self.seen.clear()


class Sources:
    """EnvSources from dicts."""

    def __init__(self, config_maps: dict[str, dict[str, str]] | None = None) -> None:
        self.config_maps = config_maps or {}

    async def config_map(self, namespace: str, name: str) -> ConfigMap | None:
        data = self.config_maps.get(name)
        return None if data is None else ConfigMap(metadata=ObjectMeta(name=name), data=data)

    async def secret(self, namespace: str, name: str) -> Secret | None:
        return None

    def services(self, namespace: str) -> list[Service]:
        return []


class StopRecorder(RuntimeClient):
    """The real client, remembering each StopContainer's grace period."""

    stops: list[tuple[str, int]]

    async def stop_container(self, container_id: str, grace_seconds: int) -> None:
        self.stops.append((container_id, grace_seconds))
        await super().stop_container(container_id, grace_seconds)


class Node:
    def __init__(self, runtime: FakeRuntime, cri: StopRecorder, clock: FakeClock, root: Path):
        resolv = root / "resolv.conf"
        resolv.write_text("nameserver 192.0.2.53\n")
        self.runtime = runtime
        self.cri = cri
        self.clock = clock
        self.events = Events()
        self.cgroups = FakeCgroups()
        self.options = NodeRuntimeOptions(
            node_name="node-1",
            node_ips=("192.168.50.2",),
            root_dir=root / "kubelet",
            pod_logs_dir=root / "logs",
            cluster_dns=("10.96.0.10",),
            resolv_conf=resolv,
        )
        self.runtime_classes = Indexer[RuntimeClass]()
        self.manager = self.new_manager()
        self.sources = Sources()

    def new_manager(self) -> RuntimeManager:
        return RuntimeManager(
            self.cri,
            self.options,
            self.clock,
            self.events,
            self.cgroups,
            runtime_classes=RuntimeClasses(self.runtime_classes),
        )

    async def sync(self, pod: Pod, unhealthy: frozenset[str] = frozenset()) -> SyncResult:
        state = await self.manager.observe(pod.metadata.uid or "")
        inputs = PodInputs(volume_paths={}, env=self.sources, unhealthy=unhealthy)
        return await self.manager.sync_pod(pod, state, inputs)

    async def state(self, uid: str = UID) -> PodRuntimeState:
        return await self.manager.observe(uid)

    def instances(self, name: str) -> list[FakeContainer]:
        found = [c for c in self.runtime.containers.values() if c.config.metadata.name == name]
        return sorted(found, key=lambda c: c.created_at)

    def running(self, name: str) -> FakeContainer:
        (current,) = [c for c in self.instances(name) if c.state == pb.CONTAINER_RUNNING]
        return current


async def until_sleeping(clock: FakeClock) -> None:
    """Wait (in real time: gRPC calls are under way) until something sleeps on ``clock``."""
    for _ in range(500):
        if clock.sleepers:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("nothing slept on the clock")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def node(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Node]:
    runtime = FakeRuntime(images=[BUSYBOX, PAUSE, "busybox:1.36"], clock=clock)
    await runtime.start(tmp_path / "cri.sock")
    cri = StopRecorder(runtime.endpoint)
    cri.stops = []
    try:
        yield Node(runtime, cri, clock, tmp_path)
    finally:
        await cri.close()
        await runtime.stop()


def container(name: str = "app", **settings: Any) -> Container:
    settings.setdefault("image", BUSYBOX)
    settings.setdefault("termination_message_path", "/dev/termination-log")
    return Container(name=name, **settings)


def make_pod(
    *containers: Container,
    init: tuple[Container, ...] = (),
    policy: str = "Always",
    grace: int | None = 30,
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="default", uid=UID),
        spec=PodSpec(
            containers=list(containers or (container(),)),
            init_containers=list(init) or None,
            restart_policy=policy,
            termination_grace_period_seconds=grace,
        ),
    )


pod_ip = EnvVarSource(field_ref=ObjectFieldSelector(field_path="status.podIP"))


def exits(codes: dict[str, int]) -> Callable[[FakeContainer], int | None]:
    """An on_start hook: containers named in ``codes`` exit at once with that code."""
    return lambda c: codes.get(c.config.metadata.name)


async def test_plain_pod_starts_with_sandbox_container_and_events(node: Node) -> None:
    pod = make_pod()
    result = await node.sync(pod)
    assert result == SyncResult({}, None)
    (sandbox,) = node.runtime.sandboxes.values()
    assert sandbox.config.metadata.attempt == 0 and sandbox.runtime_handler == ""
    assert sandbox.config.annotations[CGROUP_PARENT_ANNOTATION] == "/kubepods/besteffort/poduid-web"
    assert node.running("app").sandbox_id == sandbox.id
    assert node.events.reasons() == ["Pulled", "Created", "Started"]
    assert node.events.seen[0][2] == f'Container image "{BUSYBOX}" already present on machine'
    # The sandbox's record waits for the kubelet (once it has sent the pod's status).
    assert node.manager.sandboxes.records() == []
    assert node.runtime.calls["PodSandboxStatus"] == 1
    await node.manager.record_sandbox(UID)
    await node.manager.record_sandbox(UID)
    assert node.runtime.calls["PodSandboxStatus"] == 2, "the verbose status, once"
    (record,) = node.manager.sandboxes.records()
    assert (record.uid, record.sandbox_id, record.created) == (UID, sandbox.id, node.clock.now())
    assert record.interfaces == (
        Interface("eth0", (sandbox.ip,), in_pod=True),
        Interface(f"veth{sandbox.id[:11]}", (), in_pod=False),
    )
    assert (node.options.pod_dir(UID) / "etc-hosts").exists()
    state = await node.state()
    assert state.running() and state.pod_ips == (sandbox.ip,)
    assert [(c.name, c.state, c.restart_count) for c in state.containers] == [("app", "running", 0)]
    node.runtime.calls.clear()
    assert await node.sync(pod) == SyncResult({}, None)
    assert set(node.runtime.calls) <= {"ListPodSandbox", "ListContainers"}


async def test_a_pods_runtime_class_handler_is_handed_to_cri(node: Node) -> None:
    """A pod's class's handler (the default, "", without one: see the plain pod's test); a
    class the cache does not hold fails the sandbox as upstream's kubelet reports it, until it
    exists."""
    pod = make_pod()
    assert pod.spec is not None
    pod.spec.runtime_class_name = "gvisor"
    with pytest.raises(RuntimeClassNotFound):
        await node.sync(pod)
    assert node.events.seen == [
        (
            "Warning",
            "FailedCreatePodSandBox",
            'Failed to create pod sandbox: runtimeclass.node.k8s.io "gvisor" not found',
        )
    ]
    assert node.runtime.sandboxes == {}
    node.runtime_classes.add(RuntimeClass(metadata=ObjectMeta(name="gvisor"), handler="runsc"))
    await node.sync(pod)
    assert [s.runtime_handler for s in node.runtime.sandboxes.values()] == ["runsc"]
    assert node.running("app")


async def test_init_containers_run_one_at_a_time_in_order(node: Node) -> None:
    node.runtime.on_start = exits({"init-1": 0, "init-2": 0})
    pod = make_pod(init=(container("init-1"), container("init-2")))
    for expected in (["init-1"], ["init-1", "init-2"], ["init-1", "init-2", "app"]):
        await node.sync(pod)
        created = sorted(node.runtime.containers.values(), key=lambda c: c.created_at)
        assert [c.config.metadata.name for c in created] == expected
    await node.sync(pod)
    assert len(node.runtime.containers) == 3
    assert node.running("app")


async def test_sidecars_start_in_order_and_restart(node: Node) -> None:
    pod = make_pod(init=(container("side", restart_policy="Always"),))
    await node.sync(pod)
    assert not node.instances("app")
    await node.sync(pod)
    node.running("app")
    node.runtime.exit_container(node.running("side").id, 1)
    await node.sync(pod)
    assert [c.state for c in node.instances("side")] == [pb.CONTAINER_EXITED, pb.CONTAINER_RUNNING]


async def test_host_network_pod_uses_the_node_ips(node: Node) -> None:
    pod = make_pod(container(env=[EnvVar(name="IP", value_from=pod_ip)]))
    assert pod.spec is not None
    pod.spec.host_network = True
    await node.sync(pod)
    (sandbox,) = node.runtime.sandboxes.values()
    assert sandbox.config.linux.security_context.namespace_options.network == pb.NODE
    env = {kv.key: kv.value for kv in node.running("app").config.envs}
    assert env["IP"] == "192.168.50.2"
    await node.manager.record_sandbox(UID)
    (record,) = node.manager.sandboxes.records()
    assert record.interfaces == ()
    node.runtime.calls.clear()
    await node.sync(pod)
    assert "RunPodSandbox" not in node.runtime.calls


async def test_failed_init_container_restarts_under_always(node: Node) -> None:
    node.runtime.on_start = exits({"init-1": 1})
    pod = make_pod(init=(container("init-1"),))
    await node.sync(pod)
    await node.sync(pod)
    assert len(node.instances("init-1")) == 2
    assert not node.instances("app")


async def test_failed_init_container_under_never_ends_the_pod(node: Node) -> None:
    node.runtime.on_start = exits({"init-1": 1})
    pod = make_pod(init=(container("init-1"),), policy="Never")
    await node.sync(pod)
    assert await node.sync(pod) == SyncResult({}, None)
    await node.sync(pod)
    assert node.runtime.calls["RunPodSandbox"] == 1
    (sandbox,) = node.runtime.sandboxes.values()
    assert sandbox.state == pb.SANDBOX_NOTREADY
    assert not node.instances("app")


@pytest.mark.parametrize(
    ("policy", "code", "restarted"),
    [
        ("Always", 0, True),
        ("Always", 1, True),
        ("OnFailure", 0, False),
        ("OnFailure", 1, True),
        ("Never", 0, False),
        ("Never", 1, False),
    ],
    ids=lambda v: str(v),
)
async def test_restart_policy_after_exit(
    node: Node, policy: str, code: int, restarted: bool
) -> None:
    pod = make_pod(policy=policy)
    await node.sync(pod)
    node.runtime.exit_container(node.running("app").id, code)
    await node.sync(pod)
    await node.sync(pod)
    instances = node.instances("app")
    assert len(instances) == (2 if restarted else 1)
    (sandbox,) = node.runtime.sandboxes.values()
    assert (sandbox.state == pb.SANDBOX_READY) == restarted
    if restarted:
        state = await node.state()
        newest = state.newest("app")
        assert newest is not None and newest.restart_count == 1
    assert node.runtime.calls["RunPodSandbox"] == 1


async def test_crash_loop_backoff_doubles_on_the_clock(node: Node) -> None:
    pod = make_pod()
    await node.sync(pod)
    node.runtime.exit_container(node.running("app").id, 1)
    assert await node.sync(pod) == SyncResult({}, None)  # first restart is immediate
    for delay in (10, 20, 40):
        node.runtime.exit_container(node.running("app").id, 1)
        result = await node.sync(pod)
        failure = result.start_failures["app"]
        assert failure.reason == "CrashLoopBackOff"
        assert failure.message.startswith(f"back-off {delay}s restarting failed container=app")
        assert result.retry_after == delay
        assert "BackOff" in node.events.reasons()
        await node.clock.advance(delay - 1)
        assert (await node.sync(pod)).retry_after == 1
        await node.clock.advance(1)
        assert await node.sync(pod) == SyncResult({}, None)
        node.running("app")


async def test_dead_instances_are_pruned_to_the_newest(node: Node) -> None:
    pod = make_pod()
    await node.sync(pod)
    for _ in range(3):
        node.runtime.exit_container(node.running("app").id, 0)
        await node.clock.advance(600)
        await node.sync(pod)
    states = [c.state for c in node.instances("app")]
    assert states == [pb.CONTAINER_EXITED, pb.CONTAINER_RUNNING]
    assert node.instances("app")[1].config.metadata.attempt == 3


def app_status(pod: Pod, state: PodRuntimeState, result: SyncResult) -> ContainerStatus:
    """The container's status as the kubelet reports it after that sync."""
    seen = Observation(
        now=datetime.datetime.now(datetime.UTC),
        containers=state.containers,
        start_failures=result.start_failures,
    )
    (status,) = generate_pod_status(pod, seen).container_statuses or []
    return status


async def test_a_crash_loop_keeps_the_instance_last_state_names(node: Node) -> None:
    """Container GC against what the user sees: through a crash loop the runtime keeps the
    newest dead instance only, lastState names it and ``--previous`` reads it, restartCount
    is its attempt; a restarted kubelet (a new manager) reports the same; the pod's removal
    removes them all."""
    pod = make_pod()
    await node.sync(pod)
    node.runtime.exit_container(node.running("app").id, 1)
    await node.sync(pod)  # the first restart is immediate
    for attempt in (1, 2, 3):
        node.runtime.exit_container(node.running("app").id, 1)
        result = await node.sync(pod)
        assert result.start_failures["app"].reason == "CrashLoopBackOff"
        (dead,) = node.instances("app")
        assert dead.config.metadata.attempt == attempt
        for manager in (node.manager, node.new_manager()):
            status = app_status(pod, await manager.observe(UID), result)
            assert status.state and status.state.waiting
            assert status.restart_count == attempt
            with_status = PodStatus(container_statuses=[status])
            assert log_container_id("web", with_status, "app", True) == dead.id
            assert log_container_id("web", with_status, "app", False) == dead.id
        assert result.retry_after is not None
        await node.clock.advance(result.retry_after)
        result = await node.sync(pod)
        kept, current = node.instances("app")
        assert (kept.id, current.state) == (dead.id, pb.CONTAINER_RUNNING)
        status = app_status(pod, await node.state(), result)
        assert status.state and status.state.running and status.restart_count == attempt + 1
        assert status.last_state and status.last_state.terminated
        assert status.last_state.terminated.container_id == f"containerd://{dead.id}"
    assert len(node.instances("app")) == 2
    await node.manager.kill_pod(pod, await node.state(), 0)
    await node.manager.remove_pod(await node.state())
    assert not node.runtime.containers


async def test_missing_image_is_a_start_failure(node: Node) -> None:
    pod = make_pod(container(image="nginx:1.25"))
    result = await node.sync(pod)
    failure = result.start_failures["app"]
    assert failure.reason == "ErrImagePull"
    assert "not found" in failure.message
    assert result.retry_after == 10
    assert node.events.reasons() == ["Pulling", "Failed", "Failed"]
    assert node.events.seen[-1][2] == "Error: ErrImagePull"
    result = await node.sync(pod)
    assert result.start_failures["app"] == StartFailure(
        "ImagePullBackOff", 'Back-off pulling image "nginx:1.25"'
    )
    node.runtime.allow_pull = True
    await node.clock.advance(10)
    assert await node.sync(pod) == SyncResult({}, None)
    node.running("app")


async def test_changed_spec_hash_restarts_the_container(node: Node) -> None:
    await node.sync(make_pod())
    first = node.running("app").id
    node.events.clear()
    await node.sync(make_pod(container(image="busybox:1.36")))
    assert node.runtime.containers[first].state == pb.CONTAINER_EXITED
    assert node.running("app").config.image.image == "busybox:1.36"
    assert ("Normal", "Killing", "Container app definition changed, will be restarted") in (
        node.events.seen
    )


@pytest.mark.parametrize(("policy", "restarted"), [("Always", True), ("Never", False)])
async def test_unhealthy_container_is_killed_and_restarted(
    node: Node, policy: str, restarted: bool
) -> None:
    pod = make_pod(policy=policy)
    await node.sync(pod)
    sick = node.running("app").id
    await node.sync(pod, unhealthy=frozenset({sick}))
    assert node.runtime.containers[sick].state == pb.CONTAINER_EXITED
    assert len(node.instances("app")) == (2 if restarted else 1)
    # Nothing left to run under Never: the whole pod is killed, as upstream.
    message = (
        "Container app failed liveness probe, will be restarted"
        if restarted
        else "Stopping container app"
    )
    assert ("Normal", "Killing", message) in node.events.seen
    (sandbox,) = node.runtime.sandboxes.values()
    assert (sandbox.state == pb.SANDBOX_READY) == restarted


async def test_dead_sandbox_gets_a_new_attempt(node: Node) -> None:
    pod = make_pod()
    await node.sync(pod)
    await node.manager.record_sandbox(UID)
    (old,) = node.runtime.sandboxes.values()
    await node.cri.stop_pod_sandbox(old.id)
    node.events.clear()
    await node.sync(pod)
    await node.manager.record_sandbox(UID)
    new = next(s for s in node.runtime.sandboxes.values() if s.id != old.id)
    assert new.config.metadata.attempt == 1
    assert node.running("app").sandbox_id == new.id
    assert node.events.reasons()[0] == "SandboxChanged"
    (record,) = node.manager.sandboxes.records()  # the pod's new sandbox replaced the old one
    assert record.sandbox_id == new.id
    state = await node.state()
    assert [s.attempt for s in state.sandboxes] == [1, 0]
    assert state.pod_ips == (new.ip,)


async def test_completed_pod_does_not_get_a_new_sandbox(node: Node) -> None:
    pod = make_pod(policy="OnFailure")
    await node.sync(pod)
    node.runtime.exit_container(node.running("app").id, 0)
    for _ in range(3):
        await node.sync(pod)
    assert node.runtime.calls["RunPodSandbox"] == 1


async def test_kill_pod_runs_pre_stop_within_the_grace_period(node: Node) -> None:
    calls: list[list[str]] = []

    async def slow(target: FakeContainer, cmd: list[str]) -> ExecResult:
        calls.append(cmd)
        await node.clock.sleep(5)
        return ExecResult()

    node.runtime.exec_handler = slow
    hook = Lifecycle(pre_stop=LifecycleHandler(exec=ExecAction(command=["drain"])))
    pod = make_pod(container(lifecycle=hook), container("side"))
    await node.sync(pod)
    state = await node.state()
    app, side = node.running("app").id, node.running("side").id
    kill = asyncio.create_task(node.manager.kill_pod(pod, state, 8))
    await until_sleeping(node.clock)
    await node.clock.advance(5)
    await kill
    assert calls == [["drain"]]
    assert sorted(node.cri.stops) == sorted([(app, 3), (side, 8)])
    assert all(s.state == pb.SANDBOX_NOTREADY for s in node.runtime.sandboxes.values())
    assert not (await node.state()).running()
    await node.manager.kill_pod(pod, await node.state(), 8)  # idempotent


async def test_pre_stop_that_outlives_the_grace_period_is_cut_short(node: Node) -> None:
    async def hang(target: FakeContainer, cmd: list[str]) -> ExecResult:
        await asyncio.Event().wait()
        return ExecResult()

    node.runtime.exec_handler = hang
    hook = Lifecycle(pre_stop=LifecycleHandler(exec=ExecAction(command=["drain"])))
    pod = make_pod(container(lifecycle=hook), grace=4)
    await node.sync(pod)
    kill = asyncio.create_task(node.manager.kill_pod(pod, await node.state(), None))
    await until_sleeping(node.clock)
    await node.clock.advance(4)
    await kill
    assert node.cri.stops == [(node.instances("app")[0].id, 2)]
    assert ("Warning", "FailedPreStopHook", "PreStopHook failed") in node.events.seen


async def test_orphans_are_killed_with_the_grace_period_stored_on_them(node: Node) -> None:
    await node.sync(make_pod(grace=7))
    await node.manager.kill_pod(None, await node.state(), None)
    assert node.cri.stops == [(node.instances("app")[0].id, 7)]


async def test_kill_with_zero_grace_kills_at_once(node: Node) -> None:
    pod = make_pod()
    await node.sync(pod)
    await node.manager.kill_pod(pod, await node.state(), 0)
    assert node.instances("app")[0].exit_code == 137


async def test_remove_pod_leaves_nothing(node: Node) -> None:
    pod = make_pod()
    await node.sync(pod)
    await node.manager.kill_pod(pod, await node.state(), None)
    state = await node.state()
    await node.manager.remove_pod(state)
    assert not node.runtime.sandboxes and not node.runtime.containers
    assert node.cgroups.removed == ["/kubepods/besteffort/poduid-web"]
    await node.manager.remove_pod(state)  # idempotent
    assert await node.manager.snapshot() == {}


async def test_snapshot_caches_statuses_of_what_does_not_change(node: Node) -> None:
    pod = make_pod()
    await node.sync(pod)
    await node.manager.snapshot()
    node.runtime.calls.clear()
    states = await node.manager.snapshot()
    assert set(node.runtime.calls) == {"ListPodSandbox", "ListContainers"}
    assert list(states) == [UID]
    node.runtime.exit_container(node.running("app").id, 3)
    node.runtime.calls.clear()
    states = await node.manager.snapshot()
    assert node.runtime.calls["ContainerStatus"] == 1
    (app,) = states[UID].containers
    assert (app.state, app.exit_code, app.reason) == ("exited", 3, "Error")
    assert app.finished_at == node.clock.now()


async def test_snapshot_ignores_what_is_not_ours(node: Node) -> None:
    await node.cri.run_pod_sandbox(
        pb.PodSandboxConfig(metadata=pb.PodSandboxMetadata(name="x", namespace="y", uid="z"))
    )
    assert await node.manager.snapshot() == {}


async def test_termination_message_from_the_file(node: Node) -> None:
    pod = make_pod()
    await node.sync(pod)
    path = termination_log_path(node.options, UID, "app", 0)
    path.write_text("bye")
    node.runtime.exit_container(node.running("app").id, 0)
    (app,) = (await node.manager.snapshot())[UID].containers
    assert app.message == "bye"


async def test_termination_message_falls_back_to_the_log(node: Node) -> None:
    pod = make_pod(container(termination_message_policy="FallbackToLogsOnError"))
    await node.sync(pod)
    app = node.running("app").id
    node.runtime.write_log(app, "starting\npanic: boom")
    node.runtime.exit_container(app, 2)
    (instance,) = (await node.manager.snapshot())[UID].containers
    assert instance.message == "starting\npanic: boom\n"


async def test_adopted_containers_are_not_started_twice(node: Node) -> None:
    pod = make_pod()
    await node.sync(pod)
    node.runtime.calls.clear()
    other = node.new_manager()
    state = (await other.snapshot())[UID]
    result = await other.sync_pod(pod, state, PodInputs(volume_paths={}, env=node.sources))
    assert result == SyncResult({}, None)
    assert "CreateContainer" not in node.runtime.calls
    assert "RunPodSandbox" not in node.runtime.calls


async def test_config_error_is_a_start_failure(node: Node) -> None:
    ref = EnvVarSource(config_map_key_ref=ConfigMapKeySelector(name="settings", key="mode"))
    pod = make_pod(container(env=[EnvVar(name="MODE", value_from=ref)]))
    result = await node.sync(pod)
    assert result.start_failures["app"].reason == "CreateContainerConfigError"
    assert node.events.seen[-1][:2] == ("Warning", "Failed")
    node.sources.config_maps["settings"] = {"mode": "fast"}
    assert await node.sync(pod) == SyncResult({}, None)


@pytest.mark.parametrize(
    ("method", "reason"),
    [("CreateContainer", "CreateContainerError"), ("StartContainer", "RunContainerError")],
)
async def test_runtime_refusals_are_start_failures(node: Node, method: str, reason: str) -> None:
    node.runtime.fail(method, grpc.StatusCode.UNKNOWN, "no way")
    result = await node.sync(make_pod())
    assert result.start_failures["app"] == StartFailure(reason, "no way")
    assert node.events.seen[-1] == ("Warning", "Failed", "Error: no way")


async def test_failed_post_start_hook_kills_the_container(node: Node) -> None:
    hook = Lifecycle(post_start=LifecycleHandler(exec=ExecAction(command=["false"])))
    result = await node.sync(make_pod(container(lifecycle=hook)))
    assert result.start_failures["app"].reason == "PostStartHookError"
    assert node.instances("app")[0].state == pb.CONTAINER_EXITED
    assert ("Warning", "FailedPostStartHook", "PostStartHook failed") in node.events.seen


def debugger(name: str = "debugger", target: str | None = None) -> EphemeralContainer:
    return EphemeralContainer(
        name=name,
        image=BUSYBOX,
        termination_message_path="/dev/termination-log",
        stdin=True,
        tty=True,
        target_container_name=target,
    )


async def test_ephemeral_container_joins_its_targets_process_namespace(node: Node) -> None:
    pod = make_pod()
    await node.sync(pod)
    assert pod.spec is not None
    pod.spec.ephemeral_containers = [debugger(target="app"), debugger("plain")]
    assert await node.sync(pod) == SyncResult({}, None)
    (sandbox,) = node.runtime.sandboxes.values()
    debug = node.running("debugger")
    assert debug.sandbox_id == sandbox.id
    assert debug.config.stdin and debug.config.tty
    namespaces = debug.config.linux.security_context.namespace_options
    assert (namespaces.pid, namespaces.target_id) == (pb.TARGET, node.running("app").id)
    plain = node.running("plain").config.linux.security_context.namespace_options
    assert (plain.pid, plain.target_id) == (pb.CONTAINER, "")


async def test_ephemeral_container_in_a_shared_process_namespace_keeps_the_pods(
    node: Node,
) -> None:
    pod = make_pod()
    assert pod.spec is not None
    pod.spec.share_process_namespace = True
    await node.sync(pod)
    pod.spec.ephemeral_containers = [debugger(target="app")]
    await node.sync(pod)
    namespaces = node.running("debugger").config.linux.security_context.namespace_options
    assert (namespaces.pid, namespaces.target_id) == (pb.POD, "")


async def test_ephemeral_container_is_never_restarted(node: Node) -> None:
    pod = make_pod(policy="Always")
    await node.sync(pod)
    assert pod.spec is not None
    pod.spec.ephemeral_containers = [debugger()]
    await node.sync(pod)
    node.runtime.exit_container(node.running("debugger").id, 1)
    node.runtime.calls.clear()
    assert await node.sync(pod) == SyncResult({}, None)
    assert "CreateContainer" not in node.runtime.calls
    assert [c.state for c in node.instances("debugger")] == [pb.CONTAINER_EXITED]
    node.running("app")


async def test_ephemeral_container_starts_while_the_pod_initializes(node: Node) -> None:
    pod = make_pod(init=(container("init-1"),))
    await node.sync(pod)
    assert pod.spec is not None
    pod.spec.ephemeral_containers = [debugger(target="init-1")]
    await node.sync(pod)
    namespaces = node.running("debugger").config.linux.security_context.namespace_options
    assert namespaces.target_id == node.running("init-1").id
    assert not node.instances("app")


async def test_ephemeral_container_without_its_target_is_a_start_failure(node: Node) -> None:
    pod = make_pod(init=(container("init-1"),))
    assert pod.spec is not None
    await node.sync(pod)
    pod.spec.ephemeral_containers = [debugger(target="app")]
    result = await node.sync(pod)
    failure = StartFailure("CreateContainerConfigError", "unable to find target container app")
    assert result.start_failures["debugger"] == failure
    assert ("Warning", "Failed", "Error: unable to find target container app") in node.events.seen


async def test_the_sandbox_log_can_be_turned_off(node: Node) -> None:
    node.options = dataclasses.replace(node.options, sandbox_log=False)
    node.manager = node.new_manager()
    await node.sync(make_pod())
    await node.manager.record_sandbox(UID)
    assert node.manager.sandboxes.records() == []
    assert node.runtime.calls["PodSandboxStatus"] == 1


async def test_a_sandbox_not_yet_recorded_is_recorded_before_its_removal(node: Node) -> None:
    """A pod removed before the kubelet recorded its sandbox (its sync failed after the
    sandbox was made) still has its record; a runtime that cannot tell leaves one without
    interfaces."""
    pod = make_pod()
    await node.sync(pod)
    await node.manager.kill_pod(pod, await node.state(), 0)
    await node.manager.remove_pod(await node.state())
    (record,) = node.manager.sandboxes.records()
    assert record.interfaces[0].name == "eth0" and not node.runtime.sandboxes
    await node.sync(pod)
    node.runtime.fail("PodSandboxStatus", grpc.StatusCode.NOT_FOUND)
    await node.manager.record_sandbox(UID)
    (newer,) = node.manager.sandboxes.records()
    assert newer.sandbox_id != record.sandbox_id and newer.interfaces == ()
