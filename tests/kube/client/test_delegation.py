"""The extension server's side of the front proxy: whose X-Remote-* headers are believed
(a client certificate of the requestheader CA with an allowed name), how they are read, and the
settings round-tripped through extension-apiserver-authentication."""

from __future__ import annotations

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kube.client import delegation
from kube.pki import CertificateAuthority

FRONT_PROXY = CertificateAuthority.create("front-proxy-ca")
OTHER = CertificateAuthority.create("kubelab-ca")
HEADERS = [
    ("X-Remote-User", "alice"),
    ("X-Remote-Group", "devs"),
    ("x-remote-group", "system:authenticated"),
    ("X-Remote-Extra-Scopes", "read"),
    ("X-Remote-Extra-Scopes", "write"),
    ("X-Remote-Extra-acme.com%2Fproject", "p1"),
    ("Authorization", "Bearer ignored"),
]


def _der(ca: CertificateAuthority, name: str) -> bytes:
    pem = ca.issue(name, client=True).cert_pem
    return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)


def _authenticator(*allowed: str) -> delegation.RequestHeaderAuthenticator:
    return delegation.RequestHeaderAuthenticator(
        delegation.RequestHeaderConfig(ca_pem=FRONT_PROXY.cert_pem, allowed_names=allowed)
    )


def test_headers_of_a_trusted_proxy_name_the_user() -> None:
    user = _authenticator("front-proxy-client").authenticate(
        _der(FRONT_PROXY, "front-proxy-client"), HEADERS
    )
    assert user == delegation.RemoteUser(
        "alice",
        ("devs", "system:authenticated"),
        "",
        {"scopes": ("read", "write"), "acme.com/project": ("p1",)},
    )


def test_other_certificates_and_names_are_not_believed() -> None:
    authenticator = _authenticator("front-proxy-client")
    assert authenticator.authenticate(_der(OTHER, "front-proxy-client"), HEADERS) is None
    assert authenticator.authenticate(_der(FRONT_PROXY, "someone-else"), HEADERS) is None
    assert authenticator.authenticate(None, HEADERS) is None
    assert authenticator.authenticate(b"not a certificate", HEADERS) is None
    assert _authenticator().trusts(_der(FRONT_PROXY, "anyone"))


def test_no_user_header_no_user() -> None:
    der = _der(FRONT_PROXY, "front-proxy-client")
    assert _authenticator().authenticate(der, [("X-Remote-Group", "devs")]) is None


def test_identity_headers_are_read_back() -> None:
    sent = delegation.identity_headers("bob", ["g1", "g2"], "u-1", {"acme.com/project": ["p"]})
    assert sent == [
        ("X-Remote-User", "bob"),
        ("X-Remote-Uid", "u-1"),
        ("X-Remote-Group", "g1"),
        ("X-Remote-Group", "g2"),
        ("X-Remote-Extra-acme.com%2Fproject", "p"),
    ]
    config = delegation.RequestHeaderConfig(
        ca_pem=FRONT_PROXY.cert_pem, uid_headers=("X-Remote-Uid",)
    )
    user = delegation.RequestHeaderAuthenticator(config).authenticate(
        _der(FRONT_PROXY, "front-proxy-client"), sent
    )
    assert user == delegation.RemoteUser("bob", ("g1", "g2"), "u-1", {"acme.com/project": ("p",)})


def test_configmap_round_trip() -> None:
    config = delegation.RequestHeaderConfig(
        ca_pem=FRONT_PROXY.cert_pem, allowed_names=("front-proxy-client",)
    )
    data = config.configmap_data()
    assert data["requestheader-allowed-names"] == '["front-proxy-client"]'
    assert data["requestheader-username-headers"] == '["X-Remote-User"]'
    assert delegation.from_configmap(data) == config
    assert delegation.from_configmap({"client-ca-file": "x"}) is None
