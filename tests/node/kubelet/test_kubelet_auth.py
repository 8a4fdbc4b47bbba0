"""The kubelet's authenticator and authorizer without a server: how a request maps to
``nodes`` attributes (upstream's table), the TTL cache, and which reviews are asked, cached
and answered with 401 or 403."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from kube.api.kinds.authentication_v1 import TokenReview, TokenReviewStatus, UserInfo
from kube.api.kinds.authorization_v1 import SubjectAccessReview, SubjectAccessReviewStatus
from kube.clock import FakeClock
from kube.pki import CertificateAuthority
from node.kubelet.auth import (
    ANONYMOUS_USER,
    AuthOptions,
    Forbidden,
    KubeletAuth,
    Unauthorized,
    User,
    request_attributes,
)
from tests.fakeapi import Action, FakeApi


@pytest.mark.parametrize(
    ("method", "path", "verb", "subresources"),
    [
        ("GET", "/stats/summary", "get", ("stats",)),
        ("GET", "/stats", "get", ("stats",)),
        ("GET", "/metrics", "get", ("metrics",)),
        ("GET", "/metrics/cadvisor", "get", ("metrics",)),
        ("GET", "/logs/syslog", "get", ("log",)),
        ("GET", "/spec/", "get", ("spec",)),
        ("POST", "/checkpoint/ns/pod/c", "create", ("checkpoint",)),
        ("GET", "/pods", "get", ("pods", "proxy")),
        ("GET", "/healthz", "get", ("healthz", "proxy")),
        ("GET", "/configz", "get", ("configz", "proxy")),
        ("GET", "/containerLogs/ns/pod/c", "get", ("proxy",)),
        ("POST", "/exec/ns/pod/c", "create", ("proxy",)),
        ("GET", "/exec/ns/pod/c", "get", ("proxy",)),
        ("POST", "/attach/ns/pod/c", "create", ("proxy",)),
        ("POST", "/portForward/ns/pod", "create", ("proxy",)),
        ("POST", "/run/ns/pod/c", "create", ("proxy",)),
        ("PUT", "/anything", "update", ("proxy",)),
        ("PATCH", "/anything", "patch", ("proxy",)),
        ("DELETE", "/anything", "delete", ("proxy",)),
        ("GET", "/statsextra", "get", ("proxy",)),  # a prefix is not a subpath
        ("GET", "/podsx", "get", ("proxy",)),
    ],
)
def test_request_attributes(
    method: str, path: str, verb: str, subresources: tuple[str, ...]
) -> None:
    attributes = request_attributes(method, path, "node-a")
    assert (attributes.verb, attributes.subresources, attributes.name) == (
        verb,
        subresources,
        "node-a",
    )


class Reviews:
    """The API's answers to the kubelet's TokenReviews and SubjectAccessReviews."""

    def __init__(self, tokens: dict[str, User], allowed: set[tuple[str, str, str]]) -> None:
        self.tokens = tokens
        self.allowed = allowed
        self.api = FakeApi()
        self.api.react("create", "TokenReview", self.review_token)
        self.api.react("create", "SubjectAccessReview", self.review_access)

    @property
    def asked(self) -> list[Any]:
        return [action.obj for action in self.api.actions]

    def review_token(self, action: Action) -> TokenReview:
        review = action.obj
        assert isinstance(review, TokenReview) and review.spec is not None
        user = self.tokens.get(review.spec.token or "")
        review.status = TokenReviewStatus(
            authenticated=user is not None,
            user=UserInfo(username=user.name, groups=list(user.groups)) if user else None,
        )
        return review

    def review_access(self, action: Action) -> SubjectAccessReview:
        review = action.obj
        assert isinstance(review, SubjectAccessReview) and review.spec is not None
        attributes = review.spec.resource_attributes
        assert attributes is not None
        assert (attributes.resource, attributes.name, attributes.group) == ("nodes", "node-a", None)
        key = (review.spec.user or "", attributes.verb or "", attributes.subresource or "")
        review.status = SubjectAccessReviewStatus(allowed=key in self.allowed)
        return review


SA = User("system:serviceaccount:default:reader", ("system:serviceaccounts",))


def auth(reviews: Reviews, clock: FakeClock, **options: bool) -> KubeletAuth:
    return KubeletAuth(AuthOptions(**options), reviews.api, "node-a", clock)


async def test_authentication_order() -> None:
    reviews = Reviews({"good": SA}, set())
    clock = FakeClock()
    webhook = auth(reviews, clock, token_webhook=True, anonymous=False)
    bearer = {"Authorization": "Bearer good"}
    assert await webhook.authenticate(None, bearer) == SA
    assert await webhook.authenticate(None, bearer) == SA
    assert len(reviews.asked) == 1  # cached
    with pytest.raises(Unauthorized):
        await webhook.authenticate(None, {"Authorization": "Bearer bad"})
    with pytest.raises(Unauthorized):
        await webhook.authenticate(None, {})
    cert = CertificateAuthority.create().issue("admin", organizations=["ops"], client=True)
    der = cert.certificate.public_bytes(serialization.Encoding.DER)
    assert await webhook.authenticate(der, bearer) == User("admin", ("ops", "system:authenticated"))
    anonymous = auth(reviews, clock, anonymous=True)
    assert await anonymous.authenticate(None, {}) == ANONYMOUS_USER
    # Without the webhook a token is not a credential: anonymous, or 401.
    assert await anonymous.authenticate(None, bearer) == ANONYMOUS_USER
    with pytest.raises(Unauthorized):
        await auth(reviews, clock, anonymous=False).authenticate(None, bearer)


async def test_authorization_asks_each_subresource_and_caches_the_answers() -> None:
    reviews = Reviews({}, {(SA.name, "get", "pods")})
    clock = FakeClock()
    kubelet = auth(reviews, clock, webhook_authorization=True)
    await kubelet.authorize(SA, "GET", "/pods")
    with pytest.raises(Forbidden) as denied:
        await kubelet.authorize(SA, "POST", "/exec/default/web/app")
    assert str(denied.value) == (
        "Forbidden (user=system:serviceaccount:default:reader, verb=create, resource=nodes, "
        "subresource(s)=[proxy])"
    )
    assert len(reviews.asked) == 2
    await kubelet.authorize(SA, "GET", "/pods")
    with pytest.raises(Forbidden):
        await kubelet.authorize(SA, "POST", "/exec/default/web/app")
    assert len(reviews.asked) == 2  # both answers cached
    reviews.allowed.add((SA.name, "create", "proxy"))
    await clock.advance(31)  # a denial is kept 30 s
    await kubelet.authorize(SA, "POST", "/exec/default/web/app")
    assert len(reviews.asked) == 3
    reviews.allowed.clear()
    await clock.advance(268)  # an allowance 5 minutes: the one of t=0 until t=300
    await kubelet.authorize(SA, "GET", "/pods")
    await clock.advance(1)
    with pytest.raises(Forbidden):
        await kubelet.authorize(SA, "GET", "/pods")  # pods, then proxy: both denied now
    assert [r.spec.resource_attributes.subresource for r in reviews.asked[3:]] == [
        "pods",
        "proxy",
    ]


async def test_always_allow_asks_nothing() -> None:
    reviews = Reviews({}, set())
    await auth(reviews, FakeClock()).authorize(ANONYMOUS_USER, "POST", "/exec/a/b/c")
    assert reviews.asked == []
