"""``kubelab server --controllers *,bootstrapsigner,tokencleaner`` under Node,RBAC: a new token
signs cluster-info, a node discovers the cluster with it, and once the token expires the
tokencleaner deletes it and its signature goes (each controller as its own service account)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from controlplane import bootstraptoken
from controlplane.controllers.manager import enabled
from controlplane.controllers.registry import CONTROLLERS, OFF_BY_DEFAULT
from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.client import clusterinfo
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests.servers import ServerProcess, serve_all_in_one


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from serve_all_in_one(
        tmp_path_factory,
        "--authorization-mode",
        "Node,RBAC",
        "--controllers",
        "*,bootstrapsigner,tokencleaner",
    )


def test_the_token_controllers_run_only_when_named() -> None:
    default = enabled("*", list(CONTROLLERS), OFF_BY_DEFAULT)
    assert "bootstrapsigner" not in default and "tokencleaner" not in default
    named = enabled("*,bootstrapsigner,tokencleaner", list(CONTROLLERS), OFF_BY_DEFAULT)
    assert set(named) - set(default) == {"bootstrapsigner", "tokencleaner"}


async def signed(admin: Client, keys: set[str], within: float = 30.0) -> None:
    """Wait until cluster-info's signatures are exactly ``keys``."""
    async with asyncio.timeout(within):
        while True:
            configmap = await admin.get(ConfigMap, clusterinfo.NAME, clusterinfo.NAMESPACE)
            data = configmap.data or {}
            if {k for k in data if k.startswith(clusterinfo.SIGNATURE_PREFIX)} == keys:
                return
            await asyncio.sleep(0.2)


async def test_tokens_sign_cluster_info_until_they_expire(server: ServerProcess) -> None:
    async with Client.from_kubeconfig(server.kubeconfig) as admin:
        lasting = await bootstraptoken.create(admin, ttl=600)
        # Long enough to be seen signed on a loaded machine, short enough to watch expire.
        brief = await bootstraptoken.create(admin, ttl=10)
        lasting_key, brief_key = (
            clusterinfo.SIGNATURE_PREFIX + token.split(".")[0] for token in (lasting, brief)
        )
        await signed(admin, {lasting_key, brief_key})
        ca_pem = (server.data_dir / "pki" / "ca.crt").read_bytes()
        trusted = await clusterinfo.discover(
            server.url, lasting, [clusterinfo.ca_cert_hash(ca_pem)]
        )
        assert trusted.ca_pem == ca_pem and trusted.token == lasting
        # At expiry the signer drops the signature and the cleaner deletes the Secret, each on
        # its own: either may come first.
        await signed(admin, {lasting_key})
        await deleted(admin, f"bootstrap-token-{brief.split('.')[0]}")


async def deleted(admin: Client, secret: str, within: float = 30.0) -> None:
    """Wait until the Secret ``secret`` of kube-system is gone."""
    async with asyncio.timeout(within):
        while True:
            try:
                await admin.get(Secret, secret, "kube-system")
            except ApiError as error:
                if error.not_found:
                    return
                raise
            await asyncio.sleep(0.2)
