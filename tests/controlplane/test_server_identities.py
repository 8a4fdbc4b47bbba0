"""``kubelab server`` under its default ``--authorization-mode Node,RBAC``: every component
runs as its own identity (the scheduler, the controller-manager and each controller as its
service account) and the cluster still works: a Deployment becomes available on hollow
nodes, a namespace's deletion finishes, and the component identities are refused what their
roles do not grant."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from kube.api.kinds.apps_v1 import Deployment, DeploymentSpec
from kube.api.kinds.core_v1.cluster import ConfigMap, Namespace, Secret, ServiceAccount
from kube.api.kinds.core_v1.pod import Container, PodSpec, PodTemplateSpec
from kube.api.kinds.core_v1.service import Service
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from kube.client import kubeconfig
from kube.client.errors import ApiError
from kube.client.informers import SharedInformerFactory
from kube.client.rest import Client
from kube.clock import RealClock
from kube.pki import KeyPair, identity
from node.hollow.nodes import FleetSpec, NodeFleet
from node.hollow.pods import HollowKubelet
from tests.servers import REPO, ServerProcess, serve_all_in_one

KUBELAB = [sys.executable, "-m", "kubelab"]

SPEC = FleetSpec(count=2, name_prefix="rbac-")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from serve_all_in_one(tmp_path_factory)


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def hollow_nodes(client: Client) -> AsyncIterator[None]:
    clock = RealClock()
    fleet = NodeFleet(client, SPEC, clock, renew_interval=2)
    informers = SharedInformerFactory(client, clock=clock)
    kubelet = HollowKubelet(client, informers, SPEC, clock)
    await fleet.register()
    informers.start()
    assert await informers.wait_for_cache_sync(timeout=10)
    tasks = [asyncio.create_task(fleet.renew_forever()), asyncio.create_task(kubelet.run())]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await informers.shutdown()
        await fleet.deregister()


def deployment(name: str, namespace: str) -> Deployment:
    labels = {"app": name}
    return Deployment(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=DeploymentSpec(
            replicas=2,
            selector=LabelSelector(match_labels=labels),
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels=labels),
                spec=PodSpec(containers=[Container(name="c", image="app")]),
            ),
        ),
    )


def test_each_component_has_its_own_identity(server: ServerProcess) -> None:
    expected = {
        "admin": ("kubernetes-admin", ["system:masters"]),
        "scheduler": ("system:kube-scheduler", []),
        "controller-manager": ("system:kube-controller-manager", []),
        "cloud-controller-manager": ("system:cloud-controller-manager", []),
        "proxy": ("system:kube-proxy", []),
        "pki/apiserver-kubelet-client": ("kube-apiserver-kubelet-client", []),
    }
    for name, wanted in expected.items():
        if name.startswith("pki/"):
            cert = KeyPair.read(server.data_dir / "pki", name.removeprefix("pki/")).certificate
        else:
            config = kubeconfig.load(server.data_dir / f"{name}.kubeconfig")
            assert config.cert_pem is not None
            cert = KeyPair(config.cert_pem, b"").certificate
        assert identity(cert) == wanted, name


async def test_controllers_work_under_node_and_rbac(server: ServerProcess) -> None:
    async with Client.from_kubeconfig(server.kubeconfig) as admin:
        await admin.create(Namespace(metadata=ObjectMeta(name="work")))
        async with hollow_nodes(admin):
            await admin.create(deployment("web", "work"))

            async def available() -> bool:
                found = await admin.get(Deployment, "web", "work")
                return bool(found.status and found.status.available_replicas == 2)

            await eventually(available)

        # Each controller acted as its own service account, created on demand.
        account = await admin.get(ServiceAccount, "deployment-controller", "kube-system")
        assert account.metadata.name == "deployment-controller"

        await admin.create(Namespace(metadata=ObjectMeta(name="doomed")))
        await admin.create(ConfigMap(metadata=ObjectMeta(name="c", namespace="doomed")))
        await admin.create(deployment("gone", "doomed"))
        await admin.delete(Namespace, "doomed")

        async def namespace_gone() -> bool:
            try:
                await admin.get(Namespace, "doomed")
            except ApiError as error:
                return error.not_found
            return False

        await eventually(namespace_gone)


async def test_component_identities_are_least_privileged(server: ServerProcess) -> None:
    data_dir: Path = server.data_dir
    async with (
        Client.from_kubeconfig(data_dir / "scheduler.kubeconfig") as scheduler,
        Client.from_kubeconfig(data_dir / "proxy.kubeconfig") as proxy,
    ):
        for client in (scheduler, proxy):
            with pytest.raises(ApiError) as denied:
                await client.list(Secret, "kube-system")
            assert denied.value.code == 403
        await proxy.list(Service)  # system:node-proxier lists services


async def test_token_create_prints_a_bootstrap_token(server: ServerProcess, tmp_path: Path) -> None:
    bootstrap = tmp_path / "bootstrap.kubeconfig"
    result = await asyncio.to_thread(
        subprocess.run,
        [
            *KUBELAB,
            "token",
            "create",
            "--kubeconfig",
            str(server.kubeconfig),
            "--ttl",
            "1h",
            "--bootstrap-kubeconfig",
            str(bootstrap),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip()
    assert re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16}", token)
    token_id = token.split(".")[0]
    async with Client.from_kubeconfig(server.kubeconfig) as admin:
        secret = await admin.get(Secret, f"bootstrap-token-{token_id}", "kube-system")
    assert secret.type == "bootstrap.kubernetes.io/token"
    data = {k: v.decode() for k, v in secret.decoded_data().items()}
    assert data["usage-bootstrap-authentication"] == "true"
    assert data["auth-extra-groups"] == "system:bootstrappers:kubelab:default-node-token"
    assert kubeconfig.load(bootstrap).token == token
    async with Client.from_kubeconfig(bootstrap) as bootstrapper:
        with pytest.raises(ApiError) as denied:
            await bootstrapper.list(Secret, "kube-system")
        assert denied.value.code == 403  # authenticated, and allowed CSRs only
