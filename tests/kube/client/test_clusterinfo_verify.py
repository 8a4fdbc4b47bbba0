"""Token discovery's trust decision: cluster-info is believed only with a valid signature by
the token and, unless explicitly skipped, a CA matching the pinned hash."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kube.client import clusterinfo, jws
from kube.client.clusterinfo import DiscoveryError
from kube.pki import CertificateAuthority

TOKEN_ID, TOKEN_SECRET = "abcdef", "0123456789abcdef"
TOKEN = f"{TOKEN_ID}.{TOKEN_SECRET}"
SERVER = "https://10.0.0.1:6443"


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.create()


def pin(ca: CertificateAuthority) -> str:
    """kubeadm's recipe: sha256 over the DER SubjectPublicKeyInfo of the CA certificate."""
    spki = (
        x509.load_pem_x509_certificate(ca.cert_pem)
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def signed(ca: CertificateAuthority, token_id: str = TOKEN_ID) -> dict[str, str]:
    content = clusterinfo.kubeconfig(SERVER, ca.cert_pem)
    return {
        "kubeconfig": content,
        f"jws-kubeconfig-{token_id}": jws.detached_signature(content, token_id, TOKEN_SECRET),
    }


def test_the_published_kubeconfig_is_kubeadms_shape(ca: CertificateAuthority) -> None:
    import yaml

    document = yaml.safe_load(clusterinfo.kubeconfig(SERVER, ca.cert_pem))
    assert document["clusters"] == [
        {
            "name": "",
            "cluster": {
                "server": SERVER,
                "certificate-authority-data": base64.b64encode(ca.cert_pem).decode(),
            },
        }
    ]
    assert not document["users"] and not document["contexts"]


def test_a_signed_cluster_info_with_a_pinned_ca_is_trusted(ca: CertificateAuthority) -> None:
    assert clusterinfo.ca_cert_hash(ca.cert_pem) == pin(ca)
    config = clusterinfo.verify(signed(ca), TOKEN, ["sha256:" + "0" * 64, pin(ca)])
    assert (config.server, config.ca_pem, config.token) == (SERVER, ca.cert_pem, TOKEN)
    skipped = clusterinfo.verify(signed(ca), TOKEN, [], unsafe_skip_ca_verification=True)
    assert skipped.ca_pem == ca.cert_pem


def test_another_ca_is_refused_even_when_signed(ca: CertificateAuthority) -> None:
    other = CertificateAuthority.create("impostor")
    with pytest.raises(DiscoveryError, match="matches none of the CA hashes"):
        clusterinfo.verify(signed(other), TOKEN, [pin(ca)])


@pytest.mark.parametrize(
    ("change", "token", "hashes", "message"),
    [
        pytest.param({}, "abcdef.0123456789abcdeX", None, "not of the form", id="bad-token"),
        pytest.param({}, "abcdef.0123456789abcdee", None, "not valid", id="wrong-secret"),
        pytest.param({}, "zzzzzz.0123456789abcdef", None, "no signature for", id="unknown-id"),
        pytest.param({}, TOKEN, [], "no CA hash given", id="no-pin"),
        pytest.param({}, TOKEN, ["md5:00"], "not a CA hash", id="bad-pin"),
        pytest.param({"kubeconfig": None}, TOKEN, None, "no 'kubeconfig'", id="no-kubeconfig"),
        pytest.param(
            {"kubeconfig": "apiVersion: v1\n# changed\n"}, TOKEN, None, "not valid", id="tampered"
        ),
    ],
)
def test_refusals_say_why(
    ca: CertificateAuthority,
    change: dict[str, str | None],
    token: str,
    hashes: list[str] | None,
    message: str,
) -> None:
    data = {**signed(ca), **change}
    present = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(DiscoveryError, match=message):
        clusterinfo.verify(present, token, [pin(ca)] if hashes is None else hashes)


def test_a_signed_kubeconfig_without_a_cluster_is_refused(ca: CertificateAuthority) -> None:
    content = "apiVersion: v1\nclusters: []\n"
    data = {
        "kubeconfig": content,
        f"jws-kubeconfig-{TOKEN_ID}": jws.detached_signature(content, TOKEN_ID, TOKEN_SECRET),
    }
    with pytest.raises(DiscoveryError, match="names no cluster"):
        clusterinfo.verify(data, TOKEN, [pin(ca)])
