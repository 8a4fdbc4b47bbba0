"""A kubelet joins with a bootstrap token: TLS bootstrapping against a real API server under
``Node,RBAC`` with the real csrapproving and csrsigning controllers (running as the
controller-manager does, each controller as its service account), then acts as
``system:node:<name>`` with only what the Node authorizer grants, and renews its certificate."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controlplane import bootstraptoken
from kube.api.kinds.certificates_v1 import (
    CertificateSigningRequest,
    CertificateSigningRequestSpec,
)
from kube.api.kinds.core_v1.cluster import Secret
from kube.api.kinds.core_v1.node import Node
from kube.api.meta_v1 import ObjectMeta
from kube.client import kubeconfig
from kube.client.errors import ApiError
from kube.client.rest import Client
from kube.clock import RealClock
from kube.pki import KeyPair, certificate_request, generate_key, identity
from node.kubelet import certificate
from tests.node.kubelet.certificate_servers import cluster


async def test_a_kubelet_joins_with_a_bootstrap_token_and_rotates(tmp_path: Path) -> None:
    async with cluster(tmp_path) as running:
        data_dir = running.server.config.data_dir
        async with Client.from_kubeconfig(data_dir / "admin.kubeconfig") as admin:
            token = await bootstraptoken.create(admin, ttl=600)
            bootstrap = tmp_path / "bootstrap.kubeconfig"
            kubeconfig.write(bootstrap, bootstraptoken.bootstrap_kubeconfig(admin.config, token))
            await admin.create(
                Secret(
                    metadata=ObjectMeta(name="elsewhere", namespace="default"),
                    string_data={"k": "v"},
                )
            )

        paths = certificate.Paths(tmp_path / "kubelet.kubeconfig", tmp_path / "pki")
        clock = RealClock()
        assert await certificate.bootstrap(paths, bootstrap, "node-a", clock, within=30)
        assert not paths.pending_key.exists()
        # A second start finds the certificate and asks for nothing.
        assert not await certificate.bootstrap(paths, bootstrap, "node-a", clock, within=30)

        config = kubeconfig.load(paths.kubeconfig)
        assert config.cert_pem is not None
        first = KeyPair(config.cert_pem, b"").certificate
        assert identity(first) == ("system:node:node-a", ["system:nodes"])
        assert certificate.is_node_identity(config, "node-a")
        lifetime = first.not_valid_after_utc - first.not_valid_before_utc
        assert lifetime.total_seconds() <= 3600 + 300  # capped by --cluster-signing-duration

        async with Client.from_kubeconfig(paths.kubeconfig) as kubelet:
            await kubelet.create(Node(metadata=ObjectMeta(name="node-a")))
            with pytest.raises(ApiError) as denied:
                await kubelet.get(Secret, "elsewhere", "default")
            assert denied.value.code == 403  # no pod of node-a references it
            with pytest.raises(ApiError) as listing:
                await kubelet.list(Secret)
            assert listing.value.code == 403

            rotator = certificate.client_manager(kubelet, paths, "node-a", clock)
            await rotator.rotate()
            renewed = kubeconfig.load(paths.kubeconfig)
            assert renewed.cert_pem is not None
            second = KeyPair(renewed.cert_pem, b"").certificate
            assert second.serial_number != first.serial_number
            assert identity(second) == ("system:node:node-a", ["system:nodes"])
            found = await kubelet.get(Node, "node-a")  # still accepted as the node
            assert found.metadata.name == "node-a"


async def test_requests_the_approver_does_not_recognise_stay_pending(tmp_path: Path) -> None:
    async with cluster(tmp_path) as running:
        data_dir = running.server.config.data_dir
        async with Client.from_kubeconfig(data_dir / "admin.kubeconfig") as admin:
            token = await bootstraptoken.create(admin, ttl=600)
            config = kubeconfig.ClientConfig(
                server=admin.config.server, ca_pem=admin.config.ca_pem, token=token
            )
        # A bootstrapper asking for another subject than a node's is not auto-approved.
        async with Client(config) as bootstrapper:
            request = CertificateSigningRequest(
                metadata=ObjectMeta(name="not-a-node"),
                spec=CertificateSigningRequestSpec(
                    request=certificate_request(generate_key(), "someone", ["system:nodes"]),
                    signer_name=certificate.SIGNER,
                    usages=list(certificate.USAGES),
                    username="system:admin",  # the server records the real requester
                ),
            )
            created = await bootstrapper.create(request)
            assert created.spec is not None
            assert created.spec.username == f"system:bootstrap:{token.split('.')[0]}"
            await asyncio.sleep(1.0)
            current = await bootstrapper.get(CertificateSigningRequest, "not-a-node")
            assert current.status is None or not current.status.conditions
