"""cluster-info on a real API server under RBAC: published at start, readable anonymously
(and nothing else in kube-public is), signed by the bootstrap-signer acting as its own service
account, and enough for a node holding only a token and the CA hash to trust the cluster."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from controlplane import bootstraptoken
from controlplane.apiserver.server import Running
from controlplane.apiserver.system import clusterinfo as publisher
from controlplane.controllers import bootstrapsigner
from controlplane.controllers.clientbuilder import ServiceAccountClients
from controlplane.controllers.context import ControllerContext
from controlplane.storage.sqlite import SQLiteStore
from kube.api.kinds.certificates_v1 import CertificateSigningRequest
from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.kinds.rbac_v1 import Role, RoleBinding
from kube.api.meta_v1 import ObjectMeta
from kube.client import clusterinfo
from kube.client.events import EventRecorder
from kube.client.informers import SharedInformerFactory
from kube.client.rest import Client
from kube.clock import RealClock
from tests.controlplane.apiserver.inprocess import serving


@dataclass
class Cluster:
    running: Running
    admin: Client
    ca_pem: bytes
    url: str


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    store = await SQLiteStore.open(tmp_path / "state.db")
    data_dir = tmp_path / "data"
    try:
        async with serving(store, data_dir, authorization_modes=("RBAC",)) as (running, _):
            admin = Client.from_kubeconfig(data_dir / "admin.kubeconfig")
            try:
                url = f"https://127.0.0.1:{running.port}"
                yield Cluster(running, admin, (data_dir / "pki" / "ca.crt").read_bytes(), url)
            finally:
                await admin.close()
    finally:
        await store.close()


async def anonymous_get(cluster: Cluster, path: str) -> int:
    context = ssl.create_default_context(cadata=cluster.ca_pem.decode())
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
        session.get(cluster.url + path) as response,
    ):
        return response.status


async def test_cluster_info_is_published_at_start_and_kept(cluster: Cluster) -> None:
    published = await cluster.admin.get(ConfigMap, clusterinfo.NAME, clusterinfo.NAMESPACE)
    content = (published.data or {})[clusterinfo.KUBECONFIG_KEY]
    assert content == clusterinfo.kubeconfig(cluster.url, cluster.ca_pem)
    assert "token" not in content and "client-key" not in content
    signed = ConfigMap(
        metadata=published.metadata, data={**(published.data or {}), "jws-kubeconfig-abcdef": "s"}
    )
    await cluster.admin.update(signed)
    assert not await publisher.publish(
        cluster.running.server, cluster.running.server.url, cluster.ca_pem
    ), "a restart"
    again = await cluster.admin.get(ConfigMap, clusterinfo.NAME, clusterinfo.NAMESPACE)
    assert (again.data or {})["jws-kubeconfig-abcdef"] == "s", "signatures are kept"


async def test_servers_starting_at_once_create_it_once(cluster: Cluster) -> None:
    await cluster.admin.delete(ConfigMap, clusterinfo.NAME, clusterinfo.NAMESPACE)
    server = cluster.running.server
    written = await asyncio.gather(
        *(publisher.publish(server, server.url, cluster.ca_pem) for _ in range(3))
    )
    assert sorted(written) == [False, False, True]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        pytest.param("/api/v1/namespaces/kube-public/configmaps/cluster-info", 200, id="it"),
        pytest.param("/api/v1/namespaces/kube-public/configmaps", 403, id="list"),
        pytest.param("/api/v1/namespaces/kube-public/configmaps/other", 403, id="other"),
        pytest.param("/api/v1/namespaces/kube-system/secrets", 403, id="secrets"),
    ],
)
async def test_anonymous_users_read_cluster_info_and_nothing_else(
    cluster: Cluster, path: str, status: int
) -> None:
    await cluster.admin.create(
        ConfigMap(metadata=ObjectMeta(name="other", namespace="kube-public"), data={"a": "b"})
    )
    assert await anonymous_get(cluster, path) == status


async def test_the_namespaced_bootstrap_roles_exist(cluster: Cluster) -> None:
    def names(objects: list[Role] | list[RoleBinding]) -> set[str]:
        return {o.metadata.name or "" for o in objects}

    system_roles = (await cluster.admin.list(Role, "kube-system")).items
    public_roles = (await cluster.admin.list(Role, "kube-public")).items
    assert names(system_roles) >= {
        "extension-apiserver-authentication-reader",
        "system::leader-locking-kube-controller-manager",
        "system::leader-locking-kube-scheduler",
        "system:controller:bootstrap-signer",
        "system:controller:cloud-provider",
        "system:controller:token-cleaner",
    }
    assert names(public_roles) >= {
        "system:controller:bootstrap-signer",
        "kubelab:bootstrap-signer-clusterinfo",
    }
    system_bindings = (await cluster.admin.list(RoleBinding, "kube-system")).items
    assert names(system_bindings) >= {
        "system::extension-apiserver-authentication-reader",
        "system::leader-locking-kube-controller-manager",
        "system::leader-locking-kube-scheduler",
        "system:controller:bootstrap-signer",
        "system:controller:cloud-provider",
        "system:controller:token-cleaner",
    }


async def test_a_node_with_a_token_and_the_ca_hash_discovers_the_cluster(
    cluster: Cluster,
) -> None:
    token = await bootstraptoken.create(cluster.admin, ttl=600)
    clock = RealClock()
    accounts = ServiceAccountClients(cluster.admin, clock)
    informers = SharedInformerFactory(cluster.admin, clock=clock)
    recorder = EventRecorder(cluster.admin, component="kube-controller-manager", clock=clock)
    ctx = ControllerContext(
        client=await accounts.client("bootstrap-signer"),
        informers=informers,
        recorder=recorder,
        clock=clock,
    )
    signer = bootstrapsigner.new(ctx)
    informers.start()
    running = asyncio.create_task(signer.run(1))
    key = clusterinfo.SIGNATURE_PREFIX + token.split(".")[0]
    try:
        async with asyncio.timeout(20):
            while True:
                current = await cluster.admin.get(ConfigMap, clusterinfo.NAME, "kube-public")
                if key in (current.data or {}):
                    break
                await asyncio.sleep(0.1)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await informers.shutdown()
        await accounts.close()
    pin = clusterinfo.ca_cert_hash(cluster.ca_pem)
    trusted = await clusterinfo.discover(cluster.url, token, [pin])
    assert (trusted.server, trusted.ca_pem, trusted.token) == (cluster.url, cluster.ca_pem, token)
    async with Client(trusted) as joining:  # a bootstrapper: it may ask for a certificate
        assert (await joining.list(CertificateSigningRequest)).items == []
    wrong = "sha256:" + "0" * 64
    with pytest.raises(clusterinfo.DiscoveryError, match="matches none"):
        await clusterinfo.discover(cluster.url, token, [wrong])
