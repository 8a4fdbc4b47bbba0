"""The extension server's side of the front proxy: whose X-Remote-* headers are believed
(a client certificate of the requestheader CA with an allowed name), how they are read, and the
settings round-tripped through extension-apiserver-authentication."""

from __future__ import annotations

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kube.api.kinds.authorization_v1 import SubjectAccessReview, SubjectAccessReviewStatus
from kube.client import delegation
from kube.clock import FakeClock
from kube.pki import CertificateAuthority
from tests.fakeapi import Action, FakeApi

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


async def test_the_cache_forgets_after_the_ttl() -> None:
    clock = FakeClock()
    cache: delegation.TTLCache[str, bool] = delegation.TTLCache(clock, limit=2)
    cache.put("a", True, 300)
    cache.put("b", False, 30)
    await clock.advance(29)
    assert (cache.get("a"), cache.get("b")) == (True, False)
    await clock.advance(1)
    assert (cache.get("a"), cache.get("b")) == (True, None)
    await clock.advance(270)
    assert cache.get("a") is None
    cache.put("c", True, 10)
    cache.put("d", True, 10)
    cache.put("e", True, 10)  # past the limit: the cache starts over rather than grow
    assert (cache.get("c"), cache.get("e")) == (None, True)


async def test_the_authorizer_asks_each_question_once_per_ttl() -> None:
    clock = FakeClock()
    api = FakeApi()
    asked: list[str] = []

    def review(action: Action) -> SubjectAccessReview:
        assert isinstance(action.obj, SubjectAccessReview) and action.obj.spec is not None
        attributes = action.obj.spec.resource_attributes
        assert attributes is not None
        asked.append(f"{action.obj.spec.user} {attributes.verb} {attributes.namespace}")
        action.obj.status = SubjectAccessReviewStatus(allowed=attributes.namespace == "mine")
        return action.obj

    api.react("create", "SubjectAccessReview", review)
    authorizer = delegation.Authorizer(api, clock)
    hpa = delegation.RemoteUser("system:serviceaccount:kube-system:hpa")
    for _ in range(3):
        mine = await authorizer.authorize(hpa, verb="list", resource="pods", namespace="mine")
        theirs = await authorizer.authorize(hpa, verb="list", resource="pods", namespace="theirs")
        assert (mine, theirs) == ((True, ""), (False, ""))
    other = delegation.RemoteUser("someone")
    assert (await authorizer.authorize(other, verb="list", resource="pods", namespace="mine"))[0]
    await clock.advance(delegation.AUTHORIZED_TTL)
    await authorizer.authorize(hpa, verb="list", resource="pods", namespace="mine")
    assert asked == [
        "system:serviceaccount:kube-system:hpa list mine",
        "system:serviceaccount:kube-system:hpa list theirs",
        "someone list mine",
        "system:serviceaccount:kube-system:hpa list mine",
    ]
