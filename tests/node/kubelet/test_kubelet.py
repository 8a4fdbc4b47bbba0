"""The whole kubelet against a real API server and the fake CRI runtime (over real gRPC).

No root: the runtime is ``FakeRuntime``, mounts and cgroups are recorded by fakes, and the
pod network is the runtime's own (the fake hands out IPs).  What is checked is the kubelet's
logic end to end: pods run and report status, deletion is graceful and confirmed, crashed
containers restart, a restarted kubelet adopts what runs, orphans are removed, completed pods
keep their containers, static pods get mirror pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kube.api.kinds.core_v1.cluster import ConfigMap, Event, ServiceAccount
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Container, Pod
from kube.api.kinds.node_v1 import RuntimeClass
from kube.api.kinds.storage_v1 import CSINode
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from node.cri.fake import FakeContainer, FakeRuntime
from node.cri.pb import api_pb2 as pb
from node.kubelet.csinode import CHECK_PERIOD, MIGRATED_PLUGINS_ANNOTATION
from node.kubelet.kubelet import Kubelet, KubeletConfig
from node.kubelet.mirror import is_mirror_pod
from node.kubelet.nodestatus import NodeOptions
from node.kubelet.runtime.cgroups import FakeCgroups
from node.kubelet.runtime.labels import POD_UID_LABEL
from node.kubelet.runtime.options import NodeRuntimeOptions
from node.kubelet.volumes.manager import FakeMounter
from tests import builders
from tests.controlplane.apiserver.admission_servers import node_kubeconfig
from tests.servers import ServerProcess, start_server, stop_server

BUSYBOX = "docker.io/library/busybox:1.35"
PAUSE = "registry.k8s.io/pause:3.9"
TIMEOUT = 15.0


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


class FakeNode:
    """One kubelet on one fake runtime; ``start``/``stop`` it like a process."""

    def __init__(
        self,
        client: Client,
        runtime: FakeRuntime,
        root: Path,
        name: str | None = None,
        csinode_check_period: float = CHECK_PERIOD,
    ) -> None:
        self.client = client
        self.runtime = runtime
        self.root = root
        self.name = name or f"node-{uuid.uuid4().hex[:8]}"
        self.csinode_check_period = csinode_check_period
        self.manifests = root / "manifests"
        self.manifests.mkdir(exist_ok=True)
        self.cgroups = FakeCgroups()
        self.kubelet: Kubelet | None = None
        self._task: asyncio.Task[None] | None = None

    def config(self) -> KubeletConfig:
        return KubeletConfig(
            node=NodeOptions(
                node_name=self.name,
                node_ips=("127.0.0.1",),
                hostname=self.name,
                root_dir=self.root / "kubelet",
            ),
            runtime=NodeRuntimeOptions(
                node_name=self.name,
                node_ips=("127.0.0.1",),
                root_dir=self.root / "kubelet",
                pod_logs_dir=self.root / "logs",
                resolv_conf=self.root / "resolv.conf",
            ),
            runtime_endpoint=self.runtime.endpoint,
            pod_manifest_path=self.manifests,
            csinode_check_period=self.csinode_check_period,
        )

    async def start(self) -> None:
        (self.root / "resolv.conf").write_text("nameserver 127.0.0.53\n")
        self.kubelet = Kubelet(
            self.client, self.config(), mounter=FakeMounter(), cgroups=self.cgroups
        )
        self._task = asyncio.create_task(self.kubelet.run())

        async def registered() -> bool:
            if self._task is not None and self._task.done():
                self._task.result()
            try:
                await self.client.get(Node, self.name)
            except ApiError:
                return False
            return True

        await eventually(registered, f"node {self.name} to register")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def sandboxes(self, uid: str) -> list[pb.PodSandboxConfig]:
        return [
            s.config
            for s in self.runtime.sandboxes.values()
            if s.config.labels.get(POD_UID_LABEL) == uid
        ]

    def containers(self, uid: str) -> list[FakeContainer]:
        return [
            c for c in self.runtime.containers.values() if c.config.labels.get(POD_UID_LABEL) == uid
        ]


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[FakeRuntime]:
    fake = FakeRuntime(images=[BUSYBOX, PAUSE])
    await fake.start(tmp_path / "cri.sock")
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The whole control plane: pods need their ServiceAccount and the root CA ConfigMap."""
    data_dir = tmp_path_factory.mktemp("kubelet-server") / "data"
    data_dir.mkdir()
    server = start_server(data_dir, command="server")
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture
async def namespace(client: Client, namespace: str) -> str:
    """The test's namespace once the controllers gave it what pods mount."""

    async def ready() -> bool:
        try:
            await client.get(ServiceAccount, "default", namespace)
            await client.get(ConfigMap, "kube-root-ca.crt", namespace)
        except ApiError:
            return False
        return True

    await eventually(ready, f"namespace {namespace} to be set up")
    return namespace


@pytest.fixture
async def node(client: Client, runtime: FakeRuntime, tmp_path: Path) -> AsyncIterator[FakeNode]:
    harness = FakeNode(client, runtime, tmp_path)
    await harness.start()
    try:
        yield harness
    finally:
        await harness.stop()
        with contextlib.suppress(ApiError):
            await client.delete(Node, harness.name)


def _pod(node: FakeNode, namespace: str, name: str = "web", **spec: Any) -> Pod:
    return builders.pod(
        name,
        namespace,
        node_name=node.name,
        containers=[Container(name="app", image=BUSYBOX)],
        termination_grace_period_seconds=1,
        **spec,
    )


async def _phase(client: Client, namespace: str, name: str, phase: str) -> None:
    async def reached() -> bool:
        try:
            pod = await client.get(Pod, name, namespace)
        except ApiError as error:
            if error.not_found:
                return False
            raise
        return pod.status is not None and pod.status.phase == phase

    await eventually(reached, f"pod {namespace}/{name} to be {phase}")


async def _gone(client: Client, namespace: str, name: str) -> None:
    async def gone() -> bool:
        try:
            await client.get(Pod, name, namespace)
        except ApiError as error:
            return error.not_found
        return False

    await eventually(gone, f"pod {namespace}/{name} to be deleted")


async def test_a_pod_runs_and_reports_its_status(
    client: Client, namespace: str, node: FakeNode
) -> None:
    created = await client.create(_pod(node, namespace))
    await _phase(client, namespace, "web", "Running")
    pod = await client.get(Pod, "web", namespace)
    assert pod.status is not None
    assert pod.status.pod_ip and pod.status.host_ip == "127.0.0.1"
    statuses = pod.status.container_statuses or []
    assert [(s.name, s.ready, s.restart_count) for s in statuses] == [("app", True, 0)]
    assert statuses[0].state is not None and statuses[0].state.running is not None
    assert (statuses[0].container_id or "").startswith("fake://")
    conditions = {c.type: c.status for c in pod.status.conditions or []}
    assert conditions["Ready"] == "True" and conditions["ContainersReady"] == "True"
    uid = created.metadata.uid or ""
    assert len(node.sandboxes(uid)) == 1 and len(node.containers(uid)) == 1
    assert node.kubelet is not None
    sandboxes = node.kubelet.runtime.sandboxes

    async def recorded() -> bool:  # just after the status was sent
        return any(r.uid == uid for r in sandboxes.records())

    await eventually(recorded, "the sandbox's record")
    (record,) = sandboxes.records()
    assert record.interfaces[0].ips == (pod.status.pod_ip,)


async def test_a_pods_runtime_class_handler_reaches_cri(
    client: Client, namespace: str, runtime: FakeRuntime, tmp_path: Path
) -> None:
    """A pod whose class is gone by the time its kubelet sees it fails its sandbox with
    upstream's event, retried until the class exists again; then it runs with its handler."""
    harness = FakeNode(client, runtime, tmp_path)
    name = f"{namespace}-gvisor"

    def runtime_class() -> RuntimeClass:
        return RuntimeClass(metadata=ObjectMeta(name=name), handler="runsc")

    await client.create(runtime_class())
    created = await client.create(_pod(harness, namespace, runtime_class_name=name))
    await client.delete(RuntimeClass, name)  # admitted, then the class went away
    await harness.start()
    try:
        message = f'Failed to create pod sandbox: runtimeclass.node.k8s.io "{name}" not found'

        async def reported() -> bool:
            events = (await client.list(Event, namespace)).items
            return any(
                e.reason == "FailedCreatePodSandBox" and e.message == message for e in events
            )

        await eventually(reported, "the missing RuntimeClass to be reported")
        assert harness.sandboxes(created.metadata.uid or "") == []
        await client.create(runtime_class())
        await _phase(client, namespace, "web", "Running")
        assert [s.runtime_handler for s in runtime.sandboxes.values()] == ["runsc"]
    finally:
        await harness.stop()
        await client.delete(RuntimeClass, name)
        with contextlib.suppress(ApiError):
            await client.delete(Node, harness.name)


async def test_the_kubelet_registers_its_csinode_and_keeps_it(
    client: Client, apiserver: ServerProcess, runtime: FakeRuntime, tmp_path: Path
) -> None:
    """As its own node (Node authorizer, NodeRestriction): the CSINode is created, owned by
    the Node, with no drivers, and comes back when deleted."""
    name = f"node-{uuid.uuid4().hex[:8]}"
    async with Client.from_kubeconfig(node_kubeconfig(apiserver, name, tmp_path)) as kubelet:
        harness = FakeNode(kubelet, runtime, tmp_path, name=name, csinode_check_period=0.2)
        await harness.start()
        try:
            csinode = await _csinode(client, name)
            node = await client.get(Node, name)
            assert [
                (o.api_version, o.kind, o.name, o.uid)
                for o in csinode.metadata.owner_references or ()
            ] == [("v1", "Node", name, node.metadata.uid)]
            assert csinode.spec is not None and csinode.spec.drivers == []
            assert (csinode.metadata.annotations or {})[MIGRATED_PLUGINS_ANNOTATION] == (
                "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,"
                "kubernetes.io/cinder,kubernetes.io/gce-pd,kubernetes.io/portworx-volume,"
                "kubernetes.io/vsphere-volume"
            )
            await client.delete(CSINode, name)
            again = await _csinode(client, name, other_than=csinode.metadata.uid)
            assert again.metadata.owner_references == csinode.metadata.owner_references
        finally:
            await harness.stop()
            with contextlib.suppress(ApiError):
                await client.delete(Node, name)


async def _csinode(client: Client, name: str, other_than: str | None = None) -> CSINode:
    """The CSINode of node ``name`` once it exists (and is not the one whose uid is given)."""
    found: list[CSINode] = []

    async def exists() -> bool:
        try:
            csinode = await client.get(CSINode, name)
        except ApiError:
            return False
        found[:] = [csinode]
        return csinode.metadata.uid != other_than

    await eventually(exists, f"CSINode {name}")
    return found[0]


async def test_deletion_is_graceful_confirmed_and_leaves_nothing(
    client: Client, namespace: str, node: FakeNode
) -> None:
    created = await client.create(_pod(node, namespace))
    await _phase(client, namespace, "web", "Running")
    await client.delete(Pod, "web", namespace)
    await _gone(client, namespace, "web")
    uid = created.metadata.uid or ""
    assert node.sandboxes(uid) == [] and node.containers(uid) == []
    assert not (node.root / "kubelet" / "pods" / uid).exists()


async def test_a_crashed_container_is_restarted_and_counted(
    client: Client, namespace: str, node: FakeNode
) -> None:
    created = await client.create(_pod(node, namespace))
    await _phase(client, namespace, "web", "Running")
    uid = created.metadata.uid or ""
    (first,) = node.containers(uid)
    node.runtime.exit_container(first.id, 1)

    async def restarted() -> bool:
        pod = await client.get(Pod, "web", namespace)
        statuses = (pod.status.container_statuses if pod.status else None) or []
        return bool(statuses) and statuses[0].restart_count == 1 and bool(statuses[0].ready)

    await eventually(restarted, "the container to restart")
    pod = await client.get(Pod, "web", namespace)
    assert pod.status is not None and pod.status.container_statuses
    last = pod.status.container_statuses[0].last_state
    assert last is not None and last.terminated is not None
    assert (last.terminated.exit_code, last.terminated.reason) == (1, "Error")


async def test_a_completed_pod_succeeds_and_keeps_its_containers(
    client: Client, namespace: str, node: FakeNode
) -> None:
    node.runtime.on_start = lambda c: 0 if c.config.metadata.name == "app" else None
    created = await client.create(_pod(node, namespace, restart_policy="Never"))
    await _phase(client, namespace, "web", "Succeeded")
    uid = created.metadata.uid or ""
    await asyncio.sleep(0.5)
    assert [c.state for c in node.containers(uid)] == [pb.CONTAINER_EXITED]
    await client.delete(Pod, "web", namespace)  # a terminal pod goes at once

    async def removed() -> bool:
        return node.containers(uid) == [] and node.sandboxes(uid) == []

    await eventually(removed, "the completed pod's containers to be removed")


async def test_a_finished_pod_keeps_the_last_instance_of_each_container(
    client: Client, namespace: str, node: FakeNode
) -> None:
    """OnFailure: a failed run, then one that succeeds; once the pod is done, the container
    GC keeps the newest instance only (upstream keeps one dead container per container)."""
    exits = iter((1, 0))
    node.runtime.on_start = lambda c: next(exits)
    created = await client.create(_pod(node, namespace, restart_policy="OnFailure"))
    await _phase(client, namespace, "web", "Succeeded")
    uid = created.metadata.uid or ""

    async def collected() -> bool:
        return [c.exit_code for c in node.containers(uid)] == [0]

    await eventually(collected, "the failed run to be collected")


async def test_a_restarted_kubelet_adopts_running_pods_and_removes_orphans(
    client: Client, namespace: str, node: FakeNode
) -> None:
    kept = await client.create(_pod(node, namespace, "kept"))
    orphan = await client.create(_pod(node, namespace, "orphan"))
    await _phase(client, namespace, "kept", "Running")
    await _phase(client, namespace, "orphan", "Running")
    await node.stop()
    await client.delete(Pod, "orphan", namespace, grace_period_seconds=0)
    sandboxes_before = node.runtime.calls["RunPodSandbox"]
    containers_before = node.runtime.calls["CreateContainer"]
    await node.start()

    async def orphan_removed() -> bool:
        return node.sandboxes(orphan.metadata.uid or "") == []

    await eventually(orphan_removed, "the orphan's sandbox to be removed")
    assert node.runtime.calls["RunPodSandbox"] == sandboxes_before
    assert node.runtime.calls["CreateContainer"] == containers_before
    assert len(node.containers(kept.metadata.uid or "")) == 1


async def test_a_static_pod_runs_with_a_mirror_pod(
    client: Client, namespace: str, node: FakeNode
) -> None:
    manifest = node.manifests / "static.json"
    manifest.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "static", "namespace": namespace},
                "spec": {"containers": [{"name": "app", "image": BUSYBOX}]},
            }
        )
    )
    name = f"static-{node.name}"
    await _phase(client, namespace, name, "Running")
    mirror = await client.get(Pod, name, namespace)
    assert is_mirror_pod(mirror)
    manifest.unlink()
    await _gone(client, namespace, name)

    async def stopped() -> bool:
        return not any(s.state == pb.SANDBOX_READY for s in node.runtime.sandboxes.values())

    await eventually(stopped, "the static pod's sandbox to stop")
