"""Who may use the kubelet's HTTPS API: authentication and authorization delegated to the API
server, as upstream's ``pkg/kubelet/server/auth.go`` and the apiserver's delegating
authenticator and authorizer.

**Authentication** (in order): a client certificate verified against ``--client-ca-file``
(the TLS layer verifies it; CN is the user, O the groups); else, with
``--authentication-token-webhook``, a bearer token the API server vouches for in a
TokenReview (an invalid token is a 401, never anonymous); else, with ``--anonymous-auth``,
``system:anonymous`` in ``system:unauthenticated``; else 401.

**Authorization** with ``--authorization-mode Webhook``: the request becomes attributes on the
``nodes`` resource named after this node (``request_attributes``): the verb from the HTTP
method (GET → get, POST → create, PUT → update, PATCH → patch, DELETE → delete), the
subresource from the path (``/stats`` → stats, ``/metrics`` → metrics, ``/logs`` → log,
``/spec`` → spec, ``/checkpoint`` → checkpoint; ``/pods``, ``/healthz`` and ``/configz`` →
pods, healthz and configz with ``proxy`` as the fallback, as upstream's fine-grained kubelet
authorization; everything else, ``/exec``, ``/attach``, ``/portForward``, ``/containerLogs``
and ``/run`` among them → proxy).  Each is asked as a SubjectAccessReview until one is allowed;
none → 403 ``Forbidden (user=..., verb=..., resource=nodes, subresource(s)=[...])``.
``AlwaysAllow`` (upstream's flag default) lets every authenticated request through.

Answers are cached as upstream's defaults: tokens 2 minutes (rejected ones 10 seconds),
allowed reviews 5 minutes, denied ones 30 seconds, so busy clients do not cost a review per
request while a new RoleBinding still takes effect soon.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509

from kube.api.kinds.authentication_v1 import TokenReview, TokenReviewSpec
from kube.api.kinds.authorization_v1 import (
    ResourceAttributes,
    SubjectAccessReview,
    SubjectAccessReviewSpec,
)
from kube.client.delegation import TTLCache
from kube.client.interface import ApiClient
from kube.clock import Clock
from kube.pki import identity

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
TOKEN_TTL = 120.0
INVALID_TOKEN_TTL = 10.0
AUTHORIZED_TTL = 300.0
UNAUTHORIZED_TTL = 30.0

VERBS = {
    "GET": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
SUBRESOURCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("/stats", ("stats",)),
    ("/metrics", ("metrics",)),
    ("/logs", ("log",)),
    ("/spec", ("spec",)),
    ("/checkpoint", ("checkpoint",)),
    ("/pods", ("pods", "proxy")),
    ("/healthz", ("healthz", "proxy")),
    ("/configz", ("configz", "proxy")),
)
"""Path prefix → the subresources that may allow it, in the order they are asked."""


class Unauthorized(Exception):
    """No acceptable credentials (401)."""


class Forbidden(Exception):
    """Authenticated, but not allowed (403); the message says who asked for what."""


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


ANONYMOUS_USER = User(ANONYMOUS, (UNAUTHENTICATED,))
INVALID_TOKEN = User("")
"""What the token cache keeps for a token the API server rejected."""


@dataclass(frozen=True)
class Attributes:
    """What a request to the kubelet asks for, as ``nodes`` resource attributes."""

    verb: str
    subresources: tuple[str, ...]
    name: str


def _is_subpath(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def request_attributes(method: str, path: str, node_name: str) -> Attributes:
    """The attributes a request is authorized on (see the module docstring)."""
    verb = VERBS.get(method.upper(), "")
    subresources = next((s for p, s in SUBRESOURCES if _is_subpath(path, p)), ("proxy",))
    return Attributes(verb, subresources, node_name)


@dataclass(frozen=True)
class AuthOptions:
    """The kubelet's ``--anonymous-auth``, ``--authentication-token-webhook`` and
    ``--authorization-mode`` (Webhook: ``webhook_authorization``)."""

    anonymous: bool = True
    token_webhook: bool = False
    webhook_authorization: bool = False
    token_ttl: float = TOKEN_TTL
    authorized_ttl: float = AUTHORIZED_TTL
    unauthorized_ttl: float = UNAUTHORIZED_TTL


def certificate_user(der: bytes) -> User:
    """The user a verified client certificate names: CN is the user, O the groups."""
    name, groups = identity(x509.load_der_x509_certificate(der))
    return User(name, (*groups, AUTHENTICATED))


class KubeletAuth:
    """Authenticates and authorizes requests to the kubelet (see the module docstring);
    ``client`` is the kubelet's own, which the Node authorizer lets create TokenReviews and
    SubjectAccessReviews."""

    def __init__(
        self, options: AuthOptions, client: ApiClient, node_name: str, clock: Clock
    ) -> None:
        self.options = options
        self.client = client
        self.node_name = node_name
        self.tokens: TTLCache[str, User] = TTLCache(clock)
        self.decisions: TTLCache[tuple[User, str, str], bool] = TTLCache(clock)

    async def authenticate(self, certificate: bytes | None, headers: Mapping[str, str]) -> User:
        """The request's user; Unauthorized when it has none acceptable."""
        if certificate:
            return certificate_user(certificate)
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        if self.options.token_webhook and scheme.lower() == "bearer" and token.strip():
            user = await self._review_token(token.strip())
            if user is None:
                raise Unauthorized("invalid bearer token")
            return user
        if self.options.anonymous:
            return ANONYMOUS_USER
        raise Unauthorized("no client certificate or bearer token")

    async def _review_token(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        user = self.tokens.get(key)
        if user is None:
            review = await self.client.create(TokenReview(spec=TokenReviewSpec(token=token)))
            status = review.status
            info = status.user if status is not None and status.authenticated else None
            user = (
                User(
                    info.username or "",
                    tuple(info.groups or ()),
                    info.uid or "",
                    tuple(sorted((k, tuple(v)) for k, v in (info.extra or {}).items())),
                )
                if info is not None
                else INVALID_TOKEN
            )
            ttl = self.options.token_ttl if user.name else INVALID_TOKEN_TTL
            self.tokens.put(key, user, ttl)
        return user if user.name else None

    async def authorize(self, user: User, method: str, path: str) -> None:
        """Return when ``user`` may make this request; Forbidden otherwise."""
        if not self.options.webhook_authorization:
            return
        attributes = request_attributes(method, path, self.node_name)
        for subresource in attributes.subresources:
            if await self._allowed(user, attributes.verb, subresource):
                return
        raise Forbidden(
            f"Forbidden (user={user.name}, verb={attributes.verb}, resource=nodes, "
            f"subresource(s)=[{' '.join(attributes.subresources)}])"
        )

    async def _allowed(self, user: User, verb: str, subresource: str) -> bool:
        key = (user, verb, subresource)
        cached = self.decisions.get(key)
        if cached is not None:
            return cached
        review = await self.client.create(
            SubjectAccessReview(
                spec=SubjectAccessReviewSpec(
                    user=user.name,
                    groups=list(user.groups),
                    uid=user.uid or None,
                    extra={k: list(v) for k, v in user.extra} or None,
                    resource_attributes=ResourceAttributes(
                        verb=verb,
                        version="v1",
                        resource="nodes",
                        subresource=subresource,
                        name=self.node_name,
                    ),
                )
            )
        )
        allowed = bool(review.status is not None and review.status.allowed)
        ttl = self.options.authorized_ttl if allowed else self.options.unauthorized_ttl
        self.decisions.put(key, allowed, ttl)
        return allowed
