"""The component identities the server issues, and the CA signing requests."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from controlplane.apiserver.certs import identities
from kube.client import kubeconfig
from kube.pki import (
    CertificateAuthority,
    KeyPair,
    certificate_request,
    generate_key,
    identity,
)


def test_every_client_identity_gets_a_kubeconfig(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path / "pki")
    paths = identities.write_kubeconfigs(tmp_path, ca, "https://127.0.0.1:6443")
    assert [p.name for p in paths] == [
        "admin.kubeconfig",
        "scheduler.kubeconfig",
        "controller-manager.kubeconfig",
        "cloud-controller-manager.kubeconfig",
        "proxy.kubeconfig",
    ]
    subjects = {}
    for path in paths:
        config = kubeconfig.load(path)
        assert config.server == "https://127.0.0.1:6443"
        assert config.ca_pem == ca.cert_pem
        assert config.cert_pem is not None
        subjects[path.stem] = identity(KeyPair(config.cert_pem, b"").certificate)
        assert path.stat().st_mode & 0o077 == 0  # holds a private key
    assert subjects == {
        "admin": ("kubernetes-admin", ["system:masters"]),
        "scheduler": ("system:kube-scheduler", []),
        "controller-manager": ("system:kube-controller-manager", []),
        "cloud-controller-manager": ("system:cloud-controller-manager", []),
        "proxy": ("system:kube-proxy", []),
    }
    masters = [name for name, (_, groups) in subjects.items() if "system:masters" in groups]
    assert masters == ["admin"]


def test_identities_are_kept_unless_their_subject_changed(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path)
    first = identities.ensure(ca, tmp_path, identities.SCHEDULER)
    assert identities.ensure(ca, tmp_path, identities.SCHEDULER) == first
    # An older kubelab issued the kubelet client identity in system:masters: issued again.
    ca.issue("kube-apiserver-kubelet-client", organizations=["system:masters"], client=True).write(
        tmp_path, "apiserver-kubelet-client"
    )
    pair = identities.ensure(ca, tmp_path, identities.KUBELET_CLIENT)
    assert identity(pair.certificate) == ("kube-apiserver-kubelet-client", [])
    assert KeyPair.read(tmp_path, "apiserver-kubelet-client") == pair


def test_the_ca_signs_a_request_with_its_own_usages_and_lifetime(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path)
    request = x509.load_pem_x509_csr(
        certificate_request(generate_key(), "system:node:a", ["system:nodes"])
    )
    pem = ca.sign_request(request, [ExtendedKeyUsageOID.CLIENT_AUTH], datetime.timedelta(hours=1))
    cert = x509.load_pem_x509_certificate(pem)
    assert identity(cert) == ("system:node:a", ["system:nodes"])
    assert cert.public_key() == request.public_key()
    basic = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert not basic.ca
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == datetime.timedelta(
        hours=1, minutes=5
    )


def test_a_request_whose_signature_does_not_verify_is_refused(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path)
    pem = certificate_request(generate_key(), "x")
    der = bytearray(x509.load_pem_x509_csr(pem).public_bytes(serialization.Encoding.DER))
    der[-1] ^= 0xFF  # the last byte belongs to the signature
    tampered = x509.load_der_x509_csr(bytes(der))
    with pytest.raises(ValueError, match="signature"):
        ca.sign_request(tampered, [], datetime.timedelta(hours=1))


async def test_kubelets_are_verified_with_the_kubelet_certificate_authority(
    tmp_path: Path,
) -> None:
    from controlplane.storage.sqlite import SQLiteStore
    from tests.controlplane.apiserver.inprocess import serving

    other = CertificateAuthority.create("kubelet-ca")
    other.pair.write(tmp_path, "kubelet-ca")
    store = await SQLiteStore.open(tmp_path / "state.db")
    try:
        async with serving(
            store, tmp_path / "data", kubelet_certificate_authority=tmp_path / "kubelet-ca.crt"
        ) as (running, _):
            kubelets = running.server.backends.kubelets
            assert kubelets is not None
            trusted = kubelets.context.get_ca_certs()
            assert [c["subject"] for c in trusted] == [((("commonName", "kubelet-ca"),),)]
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("names", "accepted"),
    [
        pytest.param(["127.0.0.1"], True, id="names-its-address"),
        pytest.param(["10.9.9.9"], False, id="names-another-address"),
    ],
)
async def test_a_kubelet_must_be_certified_for_the_address_it_is_reached_at(
    tmp_path: Path, names: list[str], accepted: bool
) -> None:
    import ssl

    import aiohttp
    from aiohttp import web

    from controlplane.apiserver.registry.proxy import KubeletConnector

    ca = CertificateAuthority.load_or_create(tmp_path)
    cert, key = ca.issue("system:node:a", server=True, ip_addresses=names).write(tmp_path, "k")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    app = web.Application()

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    connector = KubeletConnector(
        ca.cert_pem, ca.issue("kube-apiserver-kubelet-client", client=True)
    )
    try:
        async with aiohttp.ClientSession() as session:
            if accepted:
                async with session.get(
                    f"https://127.0.0.1:{port}/healthz", ssl=connector.context
                ) as answer:
                    assert await answer.text() == "ok"
            else:
                with pytest.raises(aiohttp.ClientConnectorCertificateError):
                    await session.get(f"https://127.0.0.1:{port}/healthz", ssl=connector.context)
    finally:
        await runner.cleanup()
