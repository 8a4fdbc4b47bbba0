"""What the API server enforces on CertificateSigningRequests: the recorded requester, an
immutable spec, approve and sign permissions on the signer, no system:masters requests."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from controlplane.storage.sqlite import SQLiteStore
from kube.api.kinds.certificates_v1 import (
    APPROVED,
    CertificateSigningRequest,
    CertificateSigningRequestCondition,
    CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
)
from kube.api.kinds.rbac_v1 import (
    ClusterRole,
    ClusterRoleBinding,
    PolicyRule,
    RoleRef,
    Subject,
)
from kube.api.meta_v1 import ObjectMeta
from kube.client import kubeconfig
from kube.client.errors import ApiError
from kube.client.rest import Client
from kube.pki import CertificateAuthority, certificate_request, generate_key
from tests.controlplane.apiserver.inprocess import serving

SIGNER = "example.com/widgets"
CSR_RULE = PolicyRule(
    api_groups=["certificates.k8s.io"],
    resources=["certificatesigningrequests", "certificatesigningrequests/approval"],
    verbs=["create", "get", "update"],
)


@pytest.fixture
async def clients(tmp_path: Path) -> AsyncIterator[tuple[Client, Client]]:
    """(admin, alice): alice may create, read and update requests, and approve nothing."""
    store = await SQLiteStore.open(tmp_path / "state.db")
    data_dir = tmp_path / "data"
    try:
        async with serving(store, data_dir, authorization_modes=("RBAC",)):
            admin = Client.from_kubeconfig(data_dir / "admin.kubeconfig")
            ca = CertificateAuthority.load_or_create(data_dir / "pki")
            config = kubeconfig.load(data_dir / "admin.kubeconfig")
            alice_pair = ca.issue("alice", client=True)
            alice = Client(
                kubeconfig.ClientConfig(
                    server=config.server,
                    ca_pem=config.ca_pem,
                    cert_pem=alice_pair.cert_pem,
                    key_pem=alice_pair.key_pem,
                )
            )
            await grant(admin, "csr-user", [CSR_RULE])
            try:
                yield admin, alice
            finally:
                await alice.close()
                await admin.close()
    finally:
        await store.close()


async def grant(admin: Client, name: str, rules: list[PolicyRule]) -> None:
    await admin.create(ClusterRole(metadata=ObjectMeta(name=name), rules=rules))
    await admin.create(
        ClusterRoleBinding(
            metadata=ObjectMeta(name=name),
            role_ref=RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=name),
            subjects=[Subject(kind="User", name="alice", api_group="rbac.authorization.k8s.io")],
        )
    )


def request(
    name: str, organizations: Sequence[str] = (), signer: str = SIGNER
) -> CertificateSigningRequest:
    return CertificateSigningRequest(
        metadata=ObjectMeta(name=name),
        spec=CertificateSigningRequestSpec(
            request=certificate_request(generate_key(), "someone", organizations),
            signer_name=signer,
            usages=["digital signature", "client auth"],
            username="mallory",
            groups=["system:masters"],
        ),
    )


def approved(csr: CertificateSigningRequest) -> CertificateSigningRequest:
    changed = copy.deepcopy(csr)
    changed.status = CertificateSigningRequestStatus(
        conditions=[
            CertificateSigningRequestCondition(type=APPROVED, status="True", reason="ByHand")
        ]
    )
    return changed


async def test_the_server_records_the_real_requester(clients: tuple[Client, Client]) -> None:
    _, alice = clients
    created = await alice.create(request("r1"))
    assert created.spec is not None
    assert created.spec.username == "alice"
    assert created.spec.groups == ["system:authenticated"]
    changed = copy.deepcopy(created)
    assert changed.spec is not None
    changed.spec.username = "mallory"
    updated = await alice.update(changed)
    assert updated.spec is not None and updated.spec.username == "alice"


async def test_approval_needs_approve_on_the_signer(clients: tuple[Client, Client]) -> None:
    admin, alice = clients
    created = await alice.create(request("r2"))
    with pytest.raises(ApiError) as denied:
        await alice.update(approved(created), subresource="approval")
    assert denied.value.code == 403
    assert "user not permitted to approve requests with signerName" in str(denied.value)
    await grant(
        admin,
        "widget-approver",
        [
            PolicyRule(
                api_groups=["certificates.k8s.io"],
                resources=["signers"],
                resource_names=["example.com/*"],
                verbs=["approve"],
            )
        ],
    )
    done = await alice.update(approved(created), subresource="approval")
    assert done.status is not None and done.status.conditions
    assert done.status.conditions[0].type == APPROVED


async def test_no_client_certificate_for_system_masters(clients: tuple[Client, Client]) -> None:
    _, alice = clients
    with pytest.raises(ApiError) as denied:
        await alice.create(
            request("r3", ["system:masters"], signer="kubernetes.io/kube-apiserver-client")
        )
    assert denied.value.code == 403
    assert "with system:masters group is not allowed" in str(denied.value)
