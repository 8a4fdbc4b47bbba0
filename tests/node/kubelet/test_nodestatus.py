"""The Node the kubelet registers, the status it reports and its Lease, against a real API
server (registration, writes, Lease) and the fake CRI runtime, with a FakeClock and a
StaticMachine; the pure pieces (thresholds, labels, cgroup limits) on their own."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
import pytest

from kube.api.kinds.coordination_v1 import Lease
from kube.api.kinds.core_v1.node import Node, NodeCondition, Taint
from kube.api.meta_v1 import ObjectMeta
from kube.client.rest import Client
from kube.clock import FakeClock
from node.cri.client import RuntimeClient
from node.cri.fake import FakeRuntime
from node.cri.pb import api_pb2 as pb
from node.kubelet.nodestatus import (
    CMAD_ANNOTATION,
    KUBELET_VERSION,
    NODE_LEASE_NAMESPACE,
    TAINT_UNINITIALIZED,
    CgroupLimits,
    HostMachine,
    MachineCapacity,
    MachineIdentity,
    MachineUsage,
    NodeOptions,
    NodeOptionsError,
    NodeStatusManager,
    StaticMachine,
    Threshold,
    cgroup_limits,
    check_node_labels,
    not_ready_message,
    os_image,
    parse_eviction_hard,
    parse_reserved,
    set_condition,
)

GI = 1 << 30
MI = 1 << 20
IMAGES = ["registry.k8s.io/pause:3.9", "busybox:1.35"]


@dataclass
class Recorder:
    events: list[tuple[str, str, str]] = field(default_factory=list)

    def event(self, obj: Node, type: str, reason: str, message: str) -> None:
        self.events.append((type, reason, message))

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.events]


def static_machine() -> StaticMachine:
    return StaticMachine(
        capacity=MachineCapacity(
            cpu_millis=4000, memory_bytes=8 * GI, ephemeral_storage_bytes=100 * GI
        ),
        usage=MachineUsage(
            memory_available=6 * GI,
            nodefs_available=60 * GI,
            nodefs_inodes_free=900_000,
            nodefs_inodes=1_000_000,
            pid_available=30_000,
            pid_max=32_768,
        ),
        identity=MachineIdentity(
            machine_id="m-1",
            system_uuid="uuid-1",
            boot_id="boot-1",
            kernel_version="6.1.0-test",
            os_image="Debian GNU/Linux 12 (bookworm)",
            architecture="amd64",
        ),
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory for the CRI socket (unix socket paths are limited to 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="ns-") as directory:
        yield Path(directory)


@pytest.fixture
async def runtime(short_dir: Path, clock: FakeClock) -> AsyncIterator[FakeRuntime]:
    fake = FakeRuntime(images=IMAGES, clock=clock)
    await fake.start(short_dir / "cri.sock")
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def cri(runtime: FakeRuntime) -> AsyncIterator[RuntimeClient]:
    async with RuntimeClient(runtime.endpoint) as client:
        yield client


@pytest.fixture
def machine() -> StaticMachine:
    return static_machine()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


Make = Callable[..., NodeStatusManager]


@pytest.fixture
def make(
    client: Client,
    cri: RuntimeClient,
    clock: FakeClock,
    machine: StaticMachine,
    recorder: Recorder,
    tmp_path: Path,
) -> Make:
    """``make(**options)``: a manager for a node of its own name on the shared API server."""

    def build(**overrides: Any) -> NodeStatusManager:
        name = f"node-{uuid.uuid4().hex[:8]}"
        defaults: dict[str, Any] = {
            "node_name": name,
            "node_ips": ("10.0.0.5",),
            "hostname": name,
            "root_dir": tmp_path / "kubelet",
        }
        options = NodeOptions(**(defaults | overrides))
        return NodeStatusManager(client, options, cri, clock, machine, recorder)

    return build


def condition(node: Node, type: str) -> NodeCondition:
    assert node.status is not None
    found = next((c for c in node.status.conditions or () if c.type == type), None)
    assert found is not None, type
    return found


# Registration.


async def test_register_creates_the_node(make: Make) -> None:
    manager = make(
        labels={"team": "blue", "node.kubernetes.io/pool": "a"},
        taints=[Taint(key="dedicated", value="db", effect="NoExecute")],
        external_cloud_provider=True,
        system_reserved={"cpu": "500m", "memory": "1Gi"},
    )
    node = await manager.register()
    name = manager.options.node_name
    assert node.metadata.uid
    assert node.metadata.labels == {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "team": "blue",
        "node.kubernetes.io/pool": "a",
    }
    assert node.metadata.annotations == {CMAD_ANNOTATION: "true"}
    assert node.spec is not None
    assert [(t.key, t.value, t.effect) for t in node.spec.taints or ()] == [
        ("dedicated", "db", "NoExecute"),
        (TAINT_UNINITIALIZED, "true", "NoSchedule"),
    ]
    status = node.status
    assert status is not None
    assert status.capacity == {
        "cpu": "4",
        "memory": "8Gi",
        "ephemeral-storage": "100Gi",
        "pods": "110",
        "hugepages-2Mi": "0",
    }
    # memory: 8Gi - 1Gi reserved - 100Mi hard eviction; storage: 100Gi - 10%.
    assert status.allocatable == {
        "cpu": "3500m",
        "memory": "7068Mi",
        "ephemeral-storage": "90Gi",
        "pods": "110",
        "hugepages-2Mi": "0",
    }
    assert manager.allocatable() == status.allocatable
    assert [(a.type, a.address) for a in status.addresses or ()] == [
        ("InternalIP", "10.0.0.5"),
        ("Hostname", name),
    ]
    assert status.daemon_endpoints is not None
    assert status.daemon_endpoints.kubelet_endpoint is not None
    assert status.daemon_endpoints.kubelet_endpoint.port == 10250
    info = status.node_info
    assert info is not None
    assert (info.machine_id, info.system_uuid, info.boot_id) == ("m-1", "uuid-1", "boot-1")
    assert info.os_image == "Debian GNU/Linux 12 (bookworm)"
    assert info.kernel_version == "6.1.0-test"
    assert info.container_runtime_version == "fake://0.1.0"
    assert info.kubelet_version == KUBELET_VERSION
    assert (info.operating_system, info.architecture) == ("linux", "amd64")
    names = sorted(n for image in status.images or () for n in image.names or ())
    assert "docker.io/library/busybox:1.35" in names
    assert any(n.startswith("registry.k8s.io/pause@sha256:") for n in names)
    ready = condition(node, "Ready")
    assert (ready.status, ready.reason, ready.message) == (
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    )
    assert [c.type for c in status.conditions or ()] == [
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    ]
    assert manager.node() == node


async def test_register_reconciles_an_existing_node(make: Make, client: Client) -> None:
    manager = make(external_cloud_provider=True)
    name = manager.options.node_name
    existing = await client.create(
        Node(
            metadata=ObjectMeta(
                name=name, labels={"kubernetes.io/hostname": "old-name", "team": "red"}
            )
        )
    )
    node = await manager.register()
    assert node.metadata.uid == existing.metadata.uid
    labels = node.metadata.labels or {}
    assert labels["kubernetes.io/hostname"] == name
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["team"] == "red"
    assert (node.metadata.annotations or {})[CMAD_ANNOTATION] == "true"
    # The uninitialized taint is for new nodes only.
    assert node.spec is None or not node.spec.taints
    # Nothing to reconcile: the Node is returned as it is.
    again = await manager.register()
    assert again.metadata.resource_version == node.metadata.resource_version


async def test_register_retries_until_the_api_answers(
    make: Make, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    manager = make(labels={"team": "not a label value"})
    task = asyncio.create_task(manager.register())
    # The API server refuses the Node; the manager backs off (0.1 s, 0.2 s, ...) and retries.
    await _until(lambda: clock.sleepers == 1)
    await clock.advance(0.1)
    await _until(lambda: clock.sleepers == 1)
    assert not task.done()
    refusals = [r for r in caplog.records if r.getMessage().startswith("registering node")]
    assert len(refusals) == 2
    assert "not a label value" in refusals[0].getMessage()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_bad_options_are_refused(make: Make) -> None:
    with pytest.raises(NodeOptionsError, match="--eviction-hard: unknown signal 'memory'"):
        make(eviction_hard={"memory": "1Gi"})
    with pytest.raises(NodeOptionsError, match="--kube-reserved: memory: bad quantity 'lots'"):
        make(kube_reserved={"memory": "lots"})
    with pytest.raises(NodeOptionsError, match=r"node-role\.kubernetes\.io/master"):
        make(labels={"node-role.kubernetes.io/master": ""})


# Status updates.


async def test_status_is_written_when_changed_or_due(make: Make, clock: FakeClock) -> None:
    manager = make()
    registered = await manager.register()
    created = condition(registered, "Ready")

    assert await manager.sync_status()  # the first report
    await clock.advance(10)
    assert not await manager.sync_status()  # nothing changed, not due

    manager.set_network_error("no podCIDR yet")
    await clock.advance(10)
    assert await manager.sync_status()
    node = manager.node()
    assert node is not None
    ready = condition(node, "Ready")
    assert (ready.status, ready.reason, ready.message) == (
        "False",
        "KubeletNotReady",
        "no podCIDR yet",
    )
    assert ready.last_transition_time == clock.now().replace(microsecond=0)
    assert created.last_transition_time is not None
    assert ready.last_transition_time > created.last_transition_time
    not_ready_since = ready.last_transition_time
    memory = condition(node, "MemoryPressure")

    await clock.advance(10)
    assert not await manager.sync_status()
    await clock.advance(300)
    assert await manager.sync_status()  # unchanged, but the report is due
    node = manager.node()
    assert node is not None
    assert condition(node, "Ready").last_transition_time == not_ready_since
    heartbeat = condition(node, "MemoryPressure").last_heartbeat_time
    assert memory.last_heartbeat_time is not None
    assert heartbeat is not None
    assert heartbeat > memory.last_heartbeat_time
    assert condition(node, "MemoryPressure").last_transition_time == memory.last_transition_time


async def test_status_keeps_fields_others_own(make: Make, client: Client) -> None:
    manager = make()
    node = await manager.register()
    assert node.status is not None
    node.status.volumes_in_use = ["kubernetes.io/csi/vol-1"]
    await client.update_status(node)
    assert await manager.sync_status()
    stored = await client.get(Node, manager.options.node_name)
    assert stored.status is not None
    assert stored.status.volumes_in_use == ["kubernetes.io/csi/vol-1"]


async def test_not_ready_reasons(
    make: Make, runtime: FakeRuntime, clock: FakeClock, recorder: Recorder
) -> None:
    manager = make()
    node = Node(metadata=ObjectMeta(name=manager.options.node_name))

    runtime.fail("Version", grpc.StatusCode.UNAVAILABLE)
    status = await manager.compute_status(node)
    node.status = status
    assert condition(node, "Ready").message == "container runtime is down"
    assert node.status.node_info is not None
    assert node.status.node_info.container_runtime_version == ""

    runtime.set_condition("NetworkReady", False, "NetworkPluginNotReady", "cni not initialized")
    node.status = await manager.compute_status(node)
    assert condition(node, "Ready").message == (
        "container runtime network not ready: NetworkReady=false "
        "reason:NetworkPluginNotReady message:cni not initialized"
    )

    runtime.set_condition("RuntimeReady", False, "Broken", "runc missing")
    manager.set_network_error("no podCIDR yet")
    node.status = await manager.compute_status(node)
    assert condition(node, "Ready").message == (
        "[container runtime not ready: RuntimeReady=false reason:Broken message:runc missing, "
        "container runtime network not ready: NetworkReady=false "
        "reason:NetworkPluginNotReady message:cni not initialized, no podCIDR yet]"
    )

    # A runtime that stops answering is down only after 30 s; its last answers stand.
    runtime.set_condition("RuntimeReady", True)
    runtime.set_condition("NetworkReady", True)
    manager.set_network_error(None)
    node.status = await manager.compute_status(node)
    assert condition(node, "Ready").status == "True"
    runtime.fail("Version", grpc.StatusCode.UNAVAILABLE, times=10)
    await clock.advance(20)
    node.status = await manager.compute_status(node)
    assert condition(node, "Ready").status == "True"
    await clock.advance(20)
    node.status = await manager.compute_status(node)
    assert condition(node, "Ready").message == "container runtime is down"
    assert recorder.reasons().count("NodeNotReady") == 2
    assert recorder.reasons().count("NodeReady") == 1


async def test_a_failing_health_check_makes_the_node_not_ready(
    client: Client, cri: RuntimeClient, clock: FakeClock, machine: StaticMachine, tmp_path: Path
) -> None:
    verdict = (False, "PLEG is not healthy: pleg was last seen active 200s ago; threshold is 180s")
    options = NodeOptions(
        node_name="n", node_ips=("10.0.0.5",), hostname="n", root_dir=tmp_path / "kubelet"
    )
    manager = NodeStatusManager(
        client, options, cri, clock, machine, health_checks=[lambda: verdict]
    )
    node = Node(metadata=ObjectMeta(name="n"))
    node.status = await manager.compute_status(node)
    assert condition(node, "Ready").message == verdict[1]
    verdict = (True, "")
    node.status = await manager.compute_status(node)
    assert condition(node, "Ready").status == "True"


async def test_pressure_conditions(make: Make, machine: StaticMachine, recorder: Recorder) -> None:
    manager = make(
        eviction_hard={
            "memory.available": "1Gi",
            "nodefs.available": "10%",
            "pid.available": "1000",
        }
    )
    node = Node(metadata=ObjectMeta(name=manager.options.node_name))
    node.status = await manager.compute_status(node)
    for kind, reason in (
        ("MemoryPressure", "KubeletHasSufficientMemory"),
        ("DiskPressure", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "KubeletHasSufficientPID"),
    ):
        assert (condition(node, kind).status, condition(node, kind).reason) == ("False", reason)

    machine.usage = replace(
        machine.usage, memory_available=512 * MI, nodefs_available=5 * GI, pid_available=10
    )
    node.status = await manager.compute_status(node)
    memory = condition(node, "MemoryPressure")
    assert (memory.status, memory.reason, memory.message) == (
        "True",
        "KubeletHasInsufficientMemory",
        "kubelet has insufficient memory available",
    )
    disk = condition(node, "DiskPressure")
    assert (disk.status, disk.reason, disk.message) == (
        "True",
        "KubeletHasDiskPressure",
        "kubelet has disk pressure",
    )
    pid = condition(node, "PIDPressure")
    assert (pid.status, pid.reason, pid.message) == (
        "True",
        "KubeletHasInsufficientPID",
        "kubelet has insufficient PID available",
    )
    assert recorder.reasons()[-3:] == [
        "NodeHasInsufficientMemory",
        "NodeHasDiskPressure",
        "NodeHasInsufficientPID",
    ]
    assert recorder.events[-1][2] == (
        f"Node {manager.options.node_name} status is now: NodeHasInsufficientPID"
    )


async def test_images_are_the_largest_fifty(make: Make, runtime: FakeRuntime) -> None:
    for n in range(60):
        runtime.images[f"sha256:{n:064x}"] = pb.Image(
            id=f"sha256:{n:064x}",
            repo_tags=[f"example.com/app{n}:v1"],
            repo_digests=[f"example.com/app{n}@sha256:{n:064x}"],
            size=n,
        )
    manager = make()
    node = Node(metadata=ObjectMeta(name=manager.options.node_name))
    status = await manager.compute_status(node)
    images = status.images or []
    assert len(images) == 50
    assert images[0].size_bytes == 1 * MI  # the two default images are the largest
    assert images[-1].size_bytes == 12
    names = images[2].names or []
    assert names[0] == f"example.com/app59@sha256:{59:064x}"
    assert names[1] == "example.com/app59:v1"


# The Lease.


async def test_lease_is_created_renewed_and_recreated(
    make: Make, client: Client, clock: FakeClock
) -> None:
    manager = make()
    node = await manager.register()
    name = manager.options.node_name
    lease = await manager.renew_lease()
    assert lease.metadata.namespace == NODE_LEASE_NAMESPACE
    assert lease.spec is not None
    assert lease.spec.holder_identity == name
    assert lease.spec.lease_duration_seconds == 40
    assert lease.spec.renew_time == "2026-01-01T00:00:00.000000Z"
    owner = (lease.metadata.owner_references or [])[0]
    assert (owner.api_version, owner.kind, owner.name, owner.uid) == (
        "v1",
        "Node",
        name,
        node.metadata.uid,
    )

    await clock.advance(10)
    renewed = await manager.renew_lease()
    assert renewed.spec is not None
    assert renewed.spec.renew_time == "2026-01-01T00:00:10.000000Z"

    # Someone else wrote it: the renewal conflicts, re-reads and wins.
    stored = await client.get(Lease, name, NODE_LEASE_NAMESPACE)
    stored.metadata.labels = {"touched": "yes"}
    await client.update(stored)
    await clock.advance(10)
    renewed = await manager.renew_lease()
    assert renewed.spec is not None
    assert renewed.spec.renew_time == "2026-01-01T00:00:20.000000Z"
    assert renewed.metadata.labels == {"touched": "yes"}

    await client.delete(Lease, name, NODE_LEASE_NAMESPACE)
    recreated = await manager.renew_lease()
    assert recreated.metadata.uid != renewed.metadata.uid


async def test_run_reports_and_heartbeats(make: Make, client: Client, clock: FakeClock) -> None:
    manager = make()
    await manager.register()
    name = manager.options.node_name
    task = asyncio.create_task(manager.run())
    try:
        await _until(lambda: clock.sleepers == 2)
        lease = await client.get(Lease, name, NODE_LEASE_NAMESPACE)
        assert lease.spec is not None
        assert lease.spec.renew_time == "2026-01-01T00:00:00.000000Z"
        await clock.advance(10)
        await _until(lambda: clock.sleepers == 2)
        lease = await client.get(Lease, name, NODE_LEASE_NAMESPACE)
        assert lease.spec is not None
        assert lease.spec.renew_time == "2026-01-01T00:00:10.000000Z"
        node = await client.get(Node, name)
        assert condition(node, "Ready").status == "True"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(250):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition never held")


# Pure pieces.


def test_set_condition_keeps_transition_time_while_unchanged(clock: FakeClock) -> None:
    conditions: list[NodeCondition] = []
    start = clock.now()
    assert set_condition(conditions, "Ready", True, "KubeletReady", "ok", start)
    later = start.replace(minute=5)
    assert not set_condition(conditions, "Ready", True, "KubeletReady", "ok", later)
    assert conditions[0].last_transition_time == start
    assert conditions[0].last_heartbeat_time == later
    assert set_condition(conditions, "Ready", False, "KubeletNotReady", "down", later)
    assert conditions[0].last_transition_time == later
    assert len(conditions) == 1


def test_not_ready_message_aggregates() -> None:
    assert not_ready_message(["one"]) == "one"
    assert not_ready_message(["one", "two"]) == "[one, two]"


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        pytest.param({"memory.available": "-1"}, "bad quantity '-1'", id="negative"),
        pytest.param({"nodefs.available": "110%"}, "bad percentage '110%'", id="percent"),
        pytest.param({"nodefs.available": "x%"}, "bad percentage 'x%'", id="not-a-number"),
        pytest.param({"disk": "1Gi"}, "unknown signal 'disk'", id="signal"),
    ],
)
def test_bad_eviction_thresholds(flag: dict[str, str], message: str) -> None:
    with pytest.raises(NodeOptionsError, match=message):
        parse_eviction_hard(flag)


def test_eviction_thresholds() -> None:
    parsed = parse_eviction_hard({"memory.available": "100Mi", "nodefs.available": "10%"})
    assert parsed["memory.available"] == Threshold("memory.available", amount=100 * MI)
    assert parsed["nodefs.available"].value(1000) == 100


def test_reservations() -> None:
    assert parse_reserved("--system-reserved", {"cpu": "1.5", "memory": "1Gi"}) == {
        "cpu": 1500,
        "memory": GI,
    }
    with pytest.raises(NodeOptionsError, match="unknown resource 'gpu'"):
        parse_reserved("--system-reserved", {"gpu": "1"})


@pytest.mark.parametrize(
    ("label", "allowed"),
    [
        pytest.param("team", True, id="plain"),
        pytest.param("example.com/x", True, id="other-domain"),
        pytest.param("node.kubernetes.io/pool", True, id="node-namespace"),
        pytest.param("x.kubelet.kubernetes.io/y", True, id="kubelet-subdomain"),
        pytest.param("topology.kubernetes.io/zone", True, id="zone"),
        pytest.param("node-role.kubernetes.io/worker", False, id="role"),
        pytest.param("kubernetes.io/custom", False, id="kubernetes-io"),
        pytest.param("foo.k8s.io/bar", False, id="k8s-io"),
    ],
)
def test_node_labels(label: str, allowed: bool) -> None:
    if allowed:
        check_node_labels({label: "v"})
    else:
        with pytest.raises(NodeOptionsError, match=label):
            check_node_labels({label: "v"})


def test_os_image() -> None:
    text = 'NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n'
    assert os_image(text) == "Debian GNU/Linux 12 (bookworm)"
    assert os_image("") == "Linux"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_limits_take_the_smallest(tmp_path: Path) -> None:
    _write(
        tmp_path / "proc/self/mounts",
        "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
        "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n",
    )
    _write(tmp_path / "proc/self/cgroup", "5:memory:/lab/n1\n4:cpu:/lab/n1\n0::/lab/n1\n")
    memory = tmp_path / "sys/fs/cgroup/memory"
    _write(memory / "memory.limit_in_bytes", "9223372036854771712\n")
    _write(memory / "lab/memory.limit_in_bytes", f"{4 * GI}\n")
    _write(memory / "lab/n1/memory.limit_in_bytes", f"{6 * GI}\n")
    cpu = tmp_path / "sys/fs/cgroup/cpu/lab/n1"
    _write(cpu / "cpu.cfs_quota_us", "-1\n")
    _write(cpu / "cpu.cfs_period_us", "100000\n")
    unified = tmp_path / "sys/fs/cgroup/unified/lab/n1"
    _write(unified / "memory.max", "max\n")
    _write(unified / "cpu.max", "150000 100000\n")
    limits = cgroup_limits(tmp_path)
    assert (limits.memory_bytes, limits.cpu_millis) == (4 * GI, 1500)


def test_no_cgroup_limits(tmp_path: Path) -> None:
    assert cgroup_limits(tmp_path) == CgroupLimits(None, None)


def test_host_machine_reads_this_machine(tmp_path: Path) -> None:
    machine = HostMachine(tmp_path / "not" / "yet")
    capacity = machine.read_capacity()
    assert capacity.cpu_millis >= 1000
    assert capacity.memory_bytes > 0
    assert capacity.ephemeral_storage_bytes > 0
    usage = machine.read_usage()
    assert 0 < usage.pid_available < usage.pid_max
    assert usage.nodefs_available <= capacity.ephemeral_storage_bytes
    identity = machine.read_identity()
    assert identity.kernel_version
    assert identity.architecture in ("amd64", "arm64")
