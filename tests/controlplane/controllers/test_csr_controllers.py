"""csrapproving and csrsigning against fakes: which requests are approved (after which access
review), which are signed, which fail, and with what certificate."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from controlplane.controllers import certificates, csrapproving, csrsigning
from controlplane.controllers.context import ControllerOptions
from kube.api.kinds.authorization_v1 import SubjectAccessReview, SubjectAccessReviewStatus
from kube.api.kinds.certificates_v1 import (
    APPROVED,
    DENIED,
    FAILED,
    CertificateSigningRequest,
    CertificateSigningRequestCondition,
    CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
)
from kube.api.meta_v1 import ObjectMeta
from kube.pki import CertificateAuthority, certificate_request, generate_key, identity
from tests.controlplane.controllers.fakes import Action, Harness, harness, stamp

NODE = "system:node:n1"
BOOTSTRAPPER = "system:bootstrap:abcdef"
CLIENT_USAGES = ["digital signature", "client auth"]


def csr(
    name: str = "csr-1",
    *,
    subject: tuple[str, list[str]] = (NODE, ["system:nodes"]),
    signer: str = certificates.KUBE_APISERVER_CLIENT_KUBELET,
    usages: list[str] | None = None,
    username: str = BOOTSTRAPPER,
    conditions: Sequence[str] = (),
    pem: bytes | None = None,
    expiration_seconds: int | None = None,
) -> CertificateSigningRequest:
    return stamp(
        CertificateSigningRequest(
            metadata=ObjectMeta(name=name),
            spec=CertificateSigningRequestSpec(
                request=pem or certificate_request(generate_key(), *subject),
                signer_name=signer,
                usages=list(CLIENT_USAGES if usages is None else usages),
                username=username,
                groups=["system:bootstrappers", "system:authenticated"],
                expiration_seconds=expiration_seconds,
            ),
            status=CertificateSigningRequestStatus(
                conditions=[
                    CertificateSigningRequestCondition(type=c, status="True") for c in conditions
                ]
            )
            if conditions
            else None,
        )
    )


def answering(h: Harness, allowed: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """Make the fake API answer access reviews: (user, subresource) pairs in ``allowed`` may
    create; returns the reviews asked, in order."""
    asked: list[tuple[str, str]] = []

    def review(action: Action) -> SubjectAccessReview:
        obj = action.obj
        assert isinstance(obj, SubjectAccessReview)
        assert obj.spec is not None and obj.spec.resource_attributes is not None
        attributes = obj.spec.resource_attributes
        assert (attributes.group, attributes.resource, attributes.verb) == (
            "certificates.k8s.io",
            "certificatesigningrequests",
            "create",
        )
        key = (obj.spec.user or "", attributes.subresource or "")
        asked.append(key)
        obj.status = SubjectAccessReviewStatus(allowed=key in allowed)
        return obj

    h.client.react("create", "SubjectAccessReview", review)
    return asked


def approval(h: Harness) -> CertificateSigningRequestCondition | None:
    writes = h.client.writes("update", "CertificateSigningRequest")
    if not writes:
        return None
    assert [w.subresource for w in writes] == ["approval"]
    return writes[0].obj.status.conditions[-1]  # type: ignore[no-any-return]


async def approve(request: CertificateSigningRequest, allowed: set[tuple[str, str]]) -> Any:
    h = harness()
    h.store(request)
    asked = answering(h, allowed)
    controller = csrapproving.new(h.ctx)
    await controller.sync(request.metadata.name or "")
    return approval(h), asked


async def test_a_bootstrapper_with_nodeclient_permission_is_approved() -> None:
    condition, asked = await approve(csr(), {(BOOTSTRAPPER, "nodeclient")})
    assert asked == [(BOOTSTRAPPER, "nodeclient")]
    assert condition is not None
    assert (condition.type, condition.status, condition.reason) == (
        APPROVED,
        "True",
        "AutoApproved",
    )
    assert condition.message == csrapproving.NODE_CLIENT[1]


async def test_a_node_renewing_its_own_certificate_asks_selfnodeclient_first() -> None:
    condition, asked = await approve(csr(username=NODE), {(NODE, "selfnodeclient")})
    assert asked == [(NODE, "selfnodeclient")]
    assert condition is not None and condition.message == csrapproving.SELF_NODE_CLIENT[1]


async def test_a_requester_without_permission_is_left_pending() -> None:
    condition, asked = await approve(csr(), set())
    assert asked == [(BOOTSTRAPPER, "nodeclient")]
    assert condition is None  # never denied: a person may still approve it


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(csr(subject=("system:node:n1", ["other"])), id="wrong-organization"),
        pytest.param(csr(subject=("n1", ["system:nodes"])), id="not-a-node-name"),
        pytest.param(csr(usages=["digital signature", "server auth"]), id="server-usage"),
        pytest.param(csr(signer="example.com/custom"), id="other-signer"),
        pytest.param(csr(conditions=[DENIED]), id="already-denied"),
        pytest.param(csr(conditions=[APPROVED]), id="already-approved"),
    ],
)
async def test_requests_that_are_not_node_client_requests_are_not_touched(
    request_: CertificateSigningRequest,
) -> None:
    condition, asked = await approve(request_, {(BOOTSTRAPPER, "nodeclient")})
    assert (condition, asked) == (None, [])


# Signing.


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority.load_or_create(tmp_path)


def signer_for(ca: CertificateAuthority, tmp_path: Path, maximum: float = 86400.0) -> Any:
    h = harness(
        ControllerOptions(
            cluster_signing_cert_file=tmp_path / "ca.crt",
            cluster_signing_key_file=tmp_path / "ca.key",
            cluster_signing_duration=maximum,
        )
    )
    return h, csrsigning.new(h.ctx)


def written(h: Harness) -> CertificateSigningRequestStatus:
    [write] = h.client.writes("update", "CertificateSigningRequest")
    assert write.subresource == "status"
    status: CertificateSigningRequestStatus = write.obj.status
    return status


async def test_an_approved_kubelet_client_request_is_signed(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    h, controller = signer_for(ca, tmp_path)
    h.store(csr(conditions=[APPROVED], expiration_seconds=1200))
    await controller.sync("csr-1")
    status = written(h)
    assert status.certificate is not None
    cert = x509.load_pem_x509_certificate(status.certificate)
    assert identity(cert) == (NODE, ["system:nodes"])
    assert cert.issuer == ca.pair.certificate.subject
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert lifetime == datetime.timedelta(seconds=1200 + 300)  # asked for, backdated 5 min


async def test_the_lifetime_is_capped(ca: CertificateAuthority, tmp_path: Path) -> None:
    h, controller = signer_for(ca, tmp_path, maximum=3600.0)
    h.store(csr(conditions=[APPROVED], expiration_seconds=7 * 86400))
    await controller.sync("csr-1")
    cert = x509.load_pem_x509_certificate(written(h).certificate or b"")
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == datetime.timedelta(
        seconds=3600 + 300
    )


async def test_a_kubelet_serving_request_keeps_its_addresses(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    key = generate_key()
    request = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                    x509.NameAttribute(NameOID.COMMON_NAME, NODE),
                ]
            )
        )
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("n1"), x509.IPAddress(ipaddress.ip_address("10.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    h, controller = signer_for(ca, tmp_path)
    h.store(
        csr(
            signer=certificates.KUBELET_SERVING,
            usages=["digital signature", "key encipherment", "server auth"],
            conditions=[APPROVED],
            pem=request.public_bytes(serialization.Encoding.PEM),
        )
    )
    await controller.sync("csr-1")
    cert = x509.load_pem_x509_certificate(written(h).certificate or b"")
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["n1"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.1"]


async def test_a_request_breaking_its_signer_rules_fails(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    h, controller = signer_for(ca, tmp_path)
    h.store(csr(subject=(NODE, ["system:masters"]), conditions=[APPROVED]))
    await controller.sync("csr-1")
    status = written(h)
    assert status.certificate is None
    failed = status.conditions[-1] if status.conditions else None
    assert failed is not None
    assert (failed.type, failed.reason) == (FAILED, "SignerValidationFailure")
    assert failed.message == 'subject organization must be exactly "system:nodes"'


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(csr(), id="pending"),
        pytest.param(csr(conditions=[DENIED]), id="denied"),
        pytest.param(csr(conditions=[APPROVED, FAILED]), id="failed"),
        pytest.param(csr(signer="example.com/custom", conditions=[APPROVED]), id="other-signer"),
    ],
)
async def test_requests_not_ready_or_not_ours_are_not_signed(
    ca: CertificateAuthority, tmp_path: Path, request_: CertificateSigningRequest
) -> None:
    h, controller = signer_for(ca, tmp_path)
    h.store(request_)
    await controller.sync("csr-1")
    assert h.client.writes() == []
