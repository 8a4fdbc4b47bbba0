"""Authentication: the credentials a request may carry, and whose they are.

The chain, in upstream's order: a verified client certificate (``auth``), else a bearer token,
else the anonymous user (``--anonymous-auth``; switched off, a request without credentials gets
401).  A bearer token is offered to every token authenticator in turn:

- ``StaticTokens``: ``--token-auth-file``, CSV lines ``token,user,uid,"group1,group2"``.
- ``ServiceAccountTokens``: JWTs signed with the server's service-account key.  Bound tokens
  (TokenRequest) must name one of the API audiences, be within ``nbf``..``exp``, and their
  service account and bound Pod or Secret must still exist with the uid in the token; legacy
  tokens (issuer ``kubernetes/serviceaccount``) must still be the ``token`` of the Secret they
  name.
- ``BootstrapTokens``: ``<id>.<secret>`` matching a ``bootstrap-token-<id>`` Secret in
  kube-system that allows authentication and has not expired (``system:bootstrap:<id>`` in
  ``system:bootstrappers``).

A token none of them accepts is a 401, never a downgrade to anonymous.  Objects are looked up
in the server's watch caches (``Lookup``), falling back to the store only when the cache has
not seen an object (a token used the instant its service account was created), as
upstream's token getter falls back from its listers to a live read.

Impersonation (``Impersonate-User``, ``-Group``, ``-Uid``, ``-Extra-<key>``) then replaces the
authenticated user with the requested one, after asking the authorizer whether the caller may
``impersonate`` each part (users, groups, serviceaccounts, uids, userextras/<key>).
"""

from __future__ import annotations

import base64
import binascii
import csv
import hmac
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from controlplane.apiserver import errors
from controlplane.apiserver.auth import (
    ANONYMOUS,
    AUTHENTICATED,
    UNAUTHENTICATED,
    Authorizer,
    User,
    forbidden,
)
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from kube.api.bootstraptoken import (
    NAMESPACE,
    SECRET_PREFIX,
    TOKEN,
    expiration,
    extra_groups,
    is_token_secret,
    token_data,
)
from kube.api.kinds.core_v1.cluster import Secret
from kube.api.meta_v1 import Resource
from kube.clock import Clock

LEGACY_ISSUER = "kubernetes/serviceaccount"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
BOOTSTRAPPERS = "system:bootstrappers"
_EXTRA_HEADER = "Impersonate-Extra-"


class InvalidToken(Exception):
    """A token an authenticator recognises as its kind but refuses; the message says why."""


class Lookup(Protocol):
    """One kind's objects by namespace and name: a watch cache, or a dict in tests."""

    async def lookup(self, namespace: str, name: str) -> Resource | None: ...


TokenAuthenticator = Callable[[str], Awaitable[User | None]]
"""The token's user; ``None`` if the token is not of this kind; ``InvalidToken`` if bad."""


# Static tokens.


def load_token_file(path: Path) -> dict[str, User]:
    """``--token-auth-file``: token → user; a malformed line stops the server with its number."""
    users: dict[str, User] = {}
    with path.open(newline="") as file:
        for number, row in enumerate(csv.reader(file), start=1):
            if not row or row[0].startswith("#"):
                continue
            if len(row) < 3 or not row[0] or not row[1]:
                raise ValueError(
                    f'{path}:{number}: expected token,user,uid[,"group1,group2"], got {row!r}'
                )
            groups = (
                tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
            )
            if row[0] in users:
                raise ValueError(f"{path}:{number}: duplicate token")
            users[row[0]] = User(row[1], (*groups, AUTHENTICATED), uid=row[2])
    return users


class StaticTokens:
    def __init__(self, users: dict[str, User]) -> None:
        self.users = users

    async def __call__(self, token: str) -> User | None:
        for known, user in self.users.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return user
        return None


# Service-account JWTs.


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _decode_jwt(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes] | None:
    """Header, claims, signing input and signature; ``None`` if it is not a JWT at all."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        header = json.loads(_unb64(parts[0]))
        claims = json.loads(_unb64(parts[1]))
        signature = _unb64(parts[2])
    except (binascii.Error, ValueError):
        return None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return None
    return header, claims, f"{parts[0]}.{parts[1]}".encode(), signature


def _service_account_user(namespace: str, name: str, uid: str, extra: dict[str, str]) -> User:
    return User(
        f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
        (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}", AUTHENTICATED),
        uid=uid,
        extra={k: (v,) for k, v in extra.items()},
    )


def split_service_account(username: str) -> tuple[str, str] | None:
    """``system:serviceaccount:<ns>:<name>`` → (ns, name)."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, sep, name = username.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
    return (namespace, name) if sep and namespace and name and ":" not in name else None


@dataclass
class ServiceAccountTokens:
    """Verifies the JWTs ``TokenIssuer`` signs (and legacy Secret-based ones)."""

    key: ec.EllipticCurvePublicKey
    issuers: Sequence[str]
    audiences: Sequence[str]
    clock: Clock
    accounts: Lookup
    pods: Lookup
    secrets: Lookup

    async def __call__(self, token: str) -> User | None:
        return await self.authenticate(token, self.audiences)

    async def authenticate(self, token: str, audiences: Sequence[str]) -> User | None:
        decoded = _decode_jwt(token)
        if decoded is None:
            return None
        header, claims, signed, signature = decoded
        issuer = claims.get("iss")
        if issuer != LEGACY_ISSUER and issuer not in self.issuers:
            return None
        if header.get("alg") != "ES256" or len(signature) != 64:
            raise InvalidToken("unexpected signing algorithm")
        der = encode_dss_signature(
            int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
        )
        try:
            self.key.verify(der, signed, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise InvalidToken("invalid signature") from None
        if issuer == LEGACY_ISSUER:
            return await self._legacy(token, claims)
        return await self._bound(claims, audiences)

    async def _bound(self, claims: dict[str, Any], audiences: Sequence[str]) -> User:
        aud = claims.get("aud")
        named = aud if isinstance(aud, list) else [aud]
        if not {a for a in named if isinstance(a, str)} & set(audiences):
            raise InvalidToken("token audiences are not accepted")
        now = self.clock.now().timestamp()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if not isinstance(exp, int | float) or now >= exp:
            raise InvalidToken("token has expired")
        if isinstance(nbf, int | float) and now < nbf:
            raise InvalidToken("token is not valid yet")
        identity = claims.get("kubernetes.io")
        if not isinstance(identity, dict):
            raise InvalidToken("token has no kubernetes.io claim")
        namespace = _text(identity.get("namespace"))
        account_claim = _named(identity.get("serviceaccount"))
        if not namespace or account_claim is None:
            raise InvalidToken("token names no service account")
        await self._check_exists(self.accounts, "service account", namespace, account_claim)
        extra: dict[str, str] = {}
        for kind, lookup in (("pod", self.pods), ("secret", self.secrets)):
            bound = _named(identity.get(kind))
            if bound is not None:
                await self._check_exists(lookup, kind, namespace, bound)
                if kind == "pod":
                    extra["authentication.kubernetes.io/pod-name"] = bound[0]
                    extra["authentication.kubernetes.io/pod-uid"] = bound[1]
        return _service_account_user(namespace, account_claim[0], account_claim[1], extra)

    async def _legacy(self, token: str, claims: dict[str, Any]) -> User:
        prefix = "kubernetes.io/serviceaccount/"
        namespace = _text(claims.get(prefix + "namespace"))
        secret_name = _text(claims.get(prefix + "secret.name"))
        account = _text(claims.get(prefix + "service-account.name"))
        uid = _text(claims.get(prefix + "service-account.uid"))
        if not (namespace and secret_name and account and uid):
            raise InvalidToken("legacy token lacks its service-account claims")
        secret = await self.secrets.lookup(namespace, secret_name)
        if (
            not isinstance(secret, Secret)
            or secret.metadata.deletion_timestamp is not None
            or secret.decoded_data().get("token") != token.encode()
        ):
            raise InvalidToken(f"token secret {namespace}/{secret_name} no longer holds it")
        await self._check_exists(self.accounts, "service account", namespace, (account, uid))
        return _service_account_user(namespace, account, uid, {})

    @staticmethod
    async def _check_exists(
        lookup: Lookup, what: str, namespace: str, named: tuple[str, str]
    ) -> None:
        name, uid = named
        found = await lookup.lookup(namespace, name)
        if found is None or found.metadata.deletion_timestamp is not None:
            raise InvalidToken(f"{what} {namespace}/{name} does not exist")
        if uid and found.metadata.uid != uid:
            raise InvalidToken(
                f"{what} {namespace}/{name} has uid {found.metadata.uid}, not {uid} as the "
                "token says"
            )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _named(value: object) -> tuple[str, str] | None:
    if not isinstance(value, dict) or not _text(value.get("name")):
        return None
    return _text(value.get("name")), _text(value.get("uid"))


# Bootstrap tokens.


@dataclass
class BootstrapTokens:
    """``<id>.<secret>`` tokens kept in ``kube-system/bootstrap-token-<id>`` Secrets."""

    secrets: Lookup
    clock: Clock

    async def __call__(self, token: str) -> User | None:
        match = TOKEN.match(token)
        if match is None:
            return None
        token_id, token_secret = match.groups()
        secret = await self.secrets.lookup(NAMESPACE, f"{SECRET_PREFIX}{token_id}")
        if not is_token_secret(secret):
            raise InvalidToken(f"no bootstrap token with id {token_id}")
        if secret.metadata.deletion_timestamp is not None:
            raise InvalidToken(f"bootstrap token {token_id} is being deleted")
        data = token_data(secret)
        if data.get("token-id") != token_id or not hmac.compare_digest(
            data.get("token-secret", "").encode(), token_secret.encode()
        ):
            raise InvalidToken(f"bootstrap token {token_id} does not match its secret")
        if data.get("usage-bootstrap-authentication") != "true":
            raise InvalidToken(f"bootstrap token {token_id} may not be used to authenticate")
        try:
            expires = expiration(data)
        except ValueError:
            raise InvalidToken(f"bootstrap token {token_id} has a bad expiration") from None
        if expires is not None and self.clock.now() >= expires:
            raise InvalidToken(f"bootstrap token {token_id} has expired")
        groups = extra_groups(data)
        if any(not g.startswith(BOOTSTRAPPERS + ":") for g in groups):
            raise InvalidToken(f"bootstrap token {token_id} has groups outside {BOOTSTRAPPERS}")
        return User(f"system:bootstrap:{token_id}", (BOOTSTRAPPERS, *groups, AUTHENTICATED))


# The chain.


@dataclass
class TokenChain:
    """Bearer tokens, offered to each authenticator in turn."""

    authenticators: Sequence[TokenAuthenticator]
    api_audiences: Sequence[str]
    service_accounts: ServiceAccountTokens | None = None

    async def authenticate(
        self, token: str, audiences: Sequence[str] = ()
    ) -> tuple[User, list[str]]:
        """The token's user and the audiences it was found valid for; ``InvalidToken`` if no
        authenticator accepts it.  Tokens without audiences of their own (static, bootstrap)
        are valid only for the API server's audiences."""
        wanted = list(audiences) or list(self.api_audiences)
        for authenticate in self.authenticators:
            if authenticate is self.service_accounts:
                user = await self.service_accounts.authenticate(token, wanted)
                granted = wanted
            else:
                granted = [a for a in wanted if a in self.api_audiences]
                user = await authenticate(token) if granted else None
            if user is not None:
                return user, granted
        raise InvalidToken("invalid bearer token")

    async def __call__(self, request: web.Request) -> User | None:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        token = token.strip()
        try:
            if not token:
                raise InvalidToken("empty bearer token")
            return (await self.authenticate(token))[0]
        except InvalidToken:
            raise errors.ApiError(401, "Unauthorized", "Unauthorized") from None


# Impersonation.


def impersonate(request: web.Request, user: User, authorize: Authorizer) -> User:
    """The user the ``Impersonate-*`` headers ask for, if ``user`` may impersonate every part
    of it; ``user`` itself when there are no such headers."""
    headers = request.headers
    name = headers.get("Impersonate-User")
    groups = headers.getall("Impersonate-Group", [])
    uid = headers.get("Impersonate-Uid")
    extra: dict[str, tuple[str, ...]] = {}
    for key in {k for k in headers if k.lower().startswith(_EXTRA_HEADER.lower())}:
        extra_key = _unescape(key[len(_EXTRA_HEADER) :]).lower()
        extra[extra_key] = tuple(headers.getall(key))
    if name is None:
        if groups or uid is not None or extra:
            raise errors.bad_request(
                "requested impersonation of groups, a uid or extra without impersonating a user"
            )
        return user

    def check(resource: str, target: str, group: str = "", namespace: str = "") -> None:
        resource, _, subresource = resource.partition("/")
        info = RequestInfo(
            path=request.path,
            verb="impersonate",
            is_resource_request=True,
            group=group,
            namespace=namespace,
            resource=resource,
            subresource=subresource,
            name=target,
        )
        if not authorize(user, info):
            raise forbidden(user, info)

    account = split_service_account(name)
    if account is not None:
        check("serviceaccounts", account[1], namespace=account[0])
    else:
        check("users", name)
    for group in groups:
        check("groups", group)
    if uid is not None:
        check("uids", uid, group="authentication.k8s.io")
    for key, values in extra.items():
        for value in values:
            check(f"userextras/{key}", value, group="authentication.k8s.io")
    implied: tuple[str, ...] = ()
    if account is not None and not groups:
        implied = (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{account[0]}")
    status = UNAUTHENTICATED if name == ANONYMOUS else AUTHENTICATED
    all_groups = tuple(dict.fromkeys((*groups, *implied, status)))
    return User(name, all_groups, uid=uid or "", extra=extra)


def _unescape(text: str) -> str:
    """Extra keys travel percent-encoded in header names (``%2F`` for ``/``)."""
    return unquote(text)
