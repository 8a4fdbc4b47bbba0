"""The kubelet's serving certificate manager against a fake API that signs at once: no request
before the Node has addresses, a request for exactly those names, a new one as soon as they
change, the certificate kept on disk and handed to the server, and no request while the stored
one is current."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kube.api.kinds.certificates_v1 import (
    CertificateSigningRequest,
    CertificateSigningRequestStatus,
)
from kube.api.kinds.core_v1.node import NodeAddress
from kube.clock import FakeClock
from kube.pki import CertificateAuthority, KeyPair
from node.kubelet import certificate
from tests.fakeapi import Action, FakeApi


def signing_api(ca: CertificateAuthority, clock: FakeClock, behind: float = 0.0) -> FakeApi:
    """An API whose CertificateSigningRequests have a certificate from ``ca`` by the time they
    are read back; the signer's clock is ``behind`` seconds behind the kubelet's."""
    api = FakeApi(clock)

    def sign(action: Action) -> None:
        csr = api.stored(CertificateSigningRequest, action.name)
        assert csr.spec is not None and csr.spec.request is not None
        request = x509.load_pem_x509_csr(csr.spec.request)
        key = serialization.load_pem_private_key(ca.pair.key_pem, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        now = clock.now() - datetime.timedelta(seconds=behind)
        cert = (
            x509.CertificateBuilder()
            .subject_name(request.subject)
            .issuer_name(ca.pair.certificate.subject)
            .public_key(request.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(
                request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value,
                critical=False,
            )
            .sign(key, hashes.SHA256())
        )
        csr.status = CertificateSigningRequestStatus(
            certificate=cert.public_bytes(serialization.Encoding.PEM)
        )

    api.react("get", "CertificateSigningRequest", sign)
    return api


def requests(api: FakeApi) -> list[CertificateSigningRequest]:
    """The CertificateSigningRequests the kubelet created, in order."""
    return [a.obj for a in api.writes("create", "CertificateSigningRequest")]


def names(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(sans.get_values_for_type(x509.DNSName)), {
        str(ip) for ip in sans.get_values_for_type(x509.IPAddress)
    }


async def settle(clock: FakeClock, seconds: float, step: float = 1.0) -> None:
    for _ in range(int(seconds / step)):
        await clock.advance(step)
        for _ in range(5):
            await asyncio.sleep(0)


async def test_the_serving_certificate_follows_the_node_addresses(tmp_path: Path) -> None:
    clock = FakeClock(datetime.datetime.now(datetime.UTC))
    api = signing_api(CertificateAuthority.create(), clock)
    addresses: list[NodeAddress] = []
    served: list[KeyPair] = []
    manager = certificate.serving_manager(
        api, tmp_path, "n1", clock, lambda: addresses, served.append
    )
    task = asyncio.create_task(manager.run())
    try:
        await settle(clock, 3)
        assert requests(api) == []  # the Node has not reported an address yet
        addresses[:] = [
            NodeAddress(type="InternalIP", address="10.240.0.11"),
            NodeAddress(type="Hostname", address="n1"),
        ]
        await settle(clock, 3)
        (first,) = requests(api)
        assert first.spec is not None
        assert (first.spec.signer_name, first.spec.usages) == (
            "kubernetes.io/kubelet-serving",
            ["digital signature", "server auth"],
        )
        assert len(served) == 1
        assert names(served[0].certificate) == ({"n1"}, {"10.240.0.11"})
        stored = certificate.PemStore(tmp_path / certificate.SERVING_FILE).pair()
        assert stored == served[0]
        assert (tmp_path / certificate.SERVING_FILE).stat().st_mode & 0o777 == 0o600

        await settle(clock, 120)
        assert len(requests(api)) == 1  # current, and the same names: nothing to ask

        addresses.append(NodeAddress(type="ExternalIP", address="192.0.2.7"))
        await settle(clock, certificate.RECHECK + 2)
        assert len(requests(api)) == 2
        assert names(served[-1].certificate) == ({"n1"}, {"10.240.0.11", "192.0.2.7"})

        await settle(clock, 3600 * 0.9, step=10)  # past the rotation deadline
        assert len(requests(api)) == 3
        renewed = served[-1].certificate
        assert renewed.not_valid_after_utc > clock.now() + datetime.timedelta(minutes=30)
    finally:
        task.cancel()


async def test_certificates_due_at_once_are_asked_for_with_backoff(tmp_path: Path) -> None:
    clock = FakeClock(datetime.datetime.now(datetime.UTC))
    api = signing_api(CertificateAuthority.create(), clock, behind=3500)
    addresses = [NodeAddress(type="InternalIP", address="10.240.0.11")]
    manager = certificate.serving_manager(api, tmp_path, "n1", clock, lambda: addresses)
    task = asyncio.create_task(manager.run())
    try:
        await settle(clock, 60)
        # Each certificate is past its rotation point when it arrives: the requests come
        # 1, 2, 4, 8, 16 and 32 s apart, not one per turn of the loop.
        assert 5 <= len(requests(api)) <= 7
    finally:
        task.cancel()


def test_a_template_is_satisfied_by_exactly_its_names() -> None:
    ca = CertificateAuthority.create()
    cert = ca.issue("system:node:n1", server=True, dns_names=["n1"], ip_addresses=["::1"])
    template = certificate.serving_template(
        [NodeAddress(type="Hostname", address="n1"), NodeAddress(type="InternalIP", address="::1")]
    )
    assert template is not None and template.satisfied_by(cert.certificate)
    fewer = certificate.serving_template([NodeAddress(type="Hostname", address="n1")])
    assert fewer is not None and not fewer.satisfied_by(cert.certificate)
    assert certificate.CLIENT.satisfied_by(ca.issue("system:node:n1", client=True).certificate)
    assert certificate.serving_template([NodeAddress(type="InternalIP", address="")]) is None
