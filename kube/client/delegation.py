"""What an extension API server needs to trust the requests the aggregator proxies to it.

The API server authenticates a caller, then proxies its request to the extension server over
TLS with the *front-proxy* client certificate and the caller's identity in request headers
(``X-Remote-User``, ``X-Remote-Group``, ``X-Remote-Extra-<key>``).  The receiving side
(upstream's requestheader authenticator, the API server's own included) believes those headers
only from a client certificate that chains to the requestheader CA and, when a list of allowed
names is given, whose common name is in it; anyone else could write the same headers.
``RequestHeaderAuthenticator`` is that check, on the DER certificate the TLS layer saw.

Authorization is delegated back: the extension server asks the API server whether the user may
do what it asks with a ``SubjectAccessReview`` (``authorize``), as upstream's delegating
authorizer, which keeps each answer 10 seconds (``Authorizer``: its ``AllowCacheTTL`` and
``DenyCacheTTL`` defaults), so a client asking the same thing many times a second costs one
review per 10 seconds.  The API server publishes where the requestheader settings are in
``kube-system/extension-apiserver-authentication`` (``REQUESTHEADER_*`` keys); an extension
server reads them with ``from_configmap``.

This lives in the base because both sides use it: the API server (requests from its own front
proxy) and add-ons that serve an aggregated API (the metrics server).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar
from urllib.parse import quote, unquote

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID

from kube.api.kinds.authorization_v1 import (
    NonResourceAttributes,
    ResourceAttributes,
    SubjectAccessReview,
    SubjectAccessReviewSpec,
)
from kube.api.meta_v1 import ObjectMeta
from kube.client.interface import ApiClient
from kube.clock import Clock

NAMESPACE = "kube-system"
CONFIGMAP = "extension-apiserver-authentication"
CLIENT_CA_KEY = "client-ca-file"
REQUESTHEADER_CA_KEY = "requestheader-client-ca-file"
REQUESTHEADER_ALLOWED_NAMES_KEY = "requestheader-allowed-names"
REQUESTHEADER_USERNAME_KEY = "requestheader-username-headers"
REQUESTHEADER_UID_KEY = "requestheader-uid-headers"
REQUESTHEADER_GROUP_KEY = "requestheader-group-headers"
REQUESTHEADER_EXTRA_KEY = "requestheader-extra-headers-prefix"
AUTHORIZED_TTL = 10.0
UNAUTHORIZED_TTL = 10.0


@dataclass(frozen=True)
class RemoteUser:
    """The identity a front proxy vouched for."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestHeaderConfig:
    """Upstream's ``--requestheader-*`` flags: whom to believe and which headers to read."""

    ca_pem: bytes
    allowed_names: Sequence[str] = ()
    username_headers: Sequence[str] = ("X-Remote-User",)
    uid_headers: Sequence[str] = ()
    group_headers: Sequence[str] = ("X-Remote-Group",)
    extra_headers_prefix: Sequence[str] = ("X-Remote-Extra-",)

    def configmap_data(self) -> dict[str, str]:
        """The requestheader keys of ``extension-apiserver-authentication``, as upstream
        writes them (lists as JSON arrays)."""
        return {
            REQUESTHEADER_CA_KEY: self.ca_pem.decode(),
            REQUESTHEADER_ALLOWED_NAMES_KEY: json.dumps(list(self.allowed_names)),
            REQUESTHEADER_USERNAME_KEY: json.dumps(list(self.username_headers)),
            REQUESTHEADER_UID_KEY: json.dumps(list(self.uid_headers)),
            REQUESTHEADER_GROUP_KEY: json.dumps(list(self.group_headers)),
            REQUESTHEADER_EXTRA_KEY: json.dumps(list(self.extra_headers_prefix)),
        }


def from_configmap(data: Mapping[str, str]) -> RequestHeaderConfig | None:
    """The requestheader settings an API server published (None if it published none)."""
    ca = data.get(REQUESTHEADER_CA_KEY)
    if not ca:
        return None

    def listed(key: str) -> tuple[str, ...]:
        value = json.loads(data.get(key) or "[]")
        return tuple(str(v) for v in value) if isinstance(value, list) else ()

    return RequestHeaderConfig(
        ca_pem=ca.encode(),
        allowed_names=listed(REQUESTHEADER_ALLOWED_NAMES_KEY),
        username_headers=listed(REQUESTHEADER_USERNAME_KEY),
        uid_headers=listed(REQUESTHEADER_UID_KEY),
        group_headers=listed(REQUESTHEADER_GROUP_KEY),
        extra_headers_prefix=listed(REQUESTHEADER_EXTRA_KEY),
    )


class RequestHeaderAuthenticator:
    """Believe the identity headers of requests whose client certificate chains to the
    requestheader CA (and carries an allowed common name)."""

    def __init__(self, config: RequestHeaderConfig) -> None:
        self.config = config
        self._cas = x509.load_pem_x509_certificates(config.ca_pem)

    def trusts(self, cert_der: bytes | None) -> bool:
        """Whether ``cert_der`` was issued by one of the requestheader CAs (and is valid now)
        with an allowed name."""
        if not cert_der:
            return False
        try:
            cert = x509.load_der_x509_certificate(cert_der)
        except ValueError:
            return False
        if not any(_issued_by(cert, ca) for ca in self._cas):
            return False
        if not self.config.allowed_names:
            return True
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        return any(n.value in self.config.allowed_names for n in names)

    def authenticate(
        self, cert_der: bytes | None, headers: Sequence[tuple[str, str]]
    ) -> RemoteUser | None:
        """The user ``headers`` (every (name, value) pair, repeated names included) name,
        if the certificate is trusted and a user is named."""
        if not self.trusts(cert_der):
            return None
        config = self.config

        def values(names: Sequence[str]) -> list[str]:
            wanted = {n.lower() for n in names}
            return [value for key, value in headers if key.lower() in wanted and value]

        users = values(config.username_headers)
        if not users:
            return None
        uids = values(config.uid_headers)
        extra: dict[str, list[str]] = {}
        prefixes = [p.lower() for p in config.extra_headers_prefix]
        for key, value in headers:
            for prefix in prefixes:
                if key.lower().startswith(prefix) and len(key) > len(prefix):
                    extra.setdefault(unquote(key[len(prefix) :]).lower(), []).append(value)
        return RemoteUser(
            users[0],
            tuple(values(config.group_headers)),
            uids[0] if uids else "",
            {k: tuple(v) for k, v in extra.items()},
        )


def identity_headers(
    name: str, groups: Sequence[str], uid: str, extra: Mapping[str, Sequence[str]]
) -> list[tuple[str, str]]:
    """The headers a front proxy sends for a user (upstream's default header names; extra
    keys are percent-encoded as upstream's proxy does)."""
    headers = [("X-Remote-User", name)]
    if uid:
        headers.append(("X-Remote-Uid", uid))
    headers += [("X-Remote-Group", group) for group in groups]
    for key, values in extra.items():
        headers += [(f"X-Remote-Extra-{quote(key, safe='')}", value) for value in values]
    return headers


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    now = datetime.datetime.now(datetime.UTC)
    return cert.not_valid_before_utc <= now <= cert.not_valid_after_utc


async def authorize(
    client: ApiClient,
    user: RemoteUser,
    *,
    verb: str,
    group: str = "",
    version: str = "",
    resource: str = "",
    subresource: str = "",
    namespace: str = "",
    name: str = "",
    path: str = "",
) -> tuple[bool, str]:
    """Ask the API server whether ``user`` may make a request (a resource request when
    ``resource`` is given, else a non-resource one on ``path``): (allowed, reason)."""
    spec = SubjectAccessReviewSpec(
        user=user.name,
        groups=list(user.groups) or None,
        uid=user.uid or None,
        extra={k: list(v) for k, v in user.extra.items()} or None,
    )
    if resource:
        spec.resource_attributes = ResourceAttributes(
            namespace=namespace or None,
            verb=verb,
            group=group or None,
            version=version or None,
            resource=resource,
            subresource=subresource or None,
            name=name or None,
        )
    else:
        spec.non_resource_attributes = NonResourceAttributes(path=path, verb=verb)
    review = await client.create(SubjectAccessReview(metadata=ObjectMeta(), spec=spec))
    status = review.status
    if status is None:
        return False, ""
    return bool(status.allowed) and not status.denied, status.reason or ""


K = TypeVar("K")
V = TypeVar("V")


@dataclass
class TTLCache(Generic[K, V]):
    """Values kept for a time given with each; expired ones are dropped as they are met, and
    the whole cache when it grows past ``limit`` (a flood of distinct tokens cannot grow it
    without bound)."""

    clock: Clock
    limit: int = 4096
    _entries: dict[K, tuple[float, V]] = field(default_factory=dict)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self.clock.monotonic() >= entry[0]:
            del self._entries[key]
            return None
        return entry[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[key] = (self.clock.monotonic() + ttl, value)


class Authorizer:
    """``authorize`` with its answers kept: allowed ones ``AUTHORIZED_TTL`` seconds, denied
    ones ``UNAUTHORIZED_TTL``."""

    def __init__(self, client: ApiClient, clock: Clock) -> None:
        self.client = client
        self.decisions: TTLCache[tuple[object, ...], tuple[bool, str]] = TTLCache(clock)

    async def authorize(self, user: RemoteUser, **attributes: str) -> tuple[bool, str]:
        """``authorize(client, user, **attributes)``, asked again only once the answer to
        the same question by the same user has expired."""
        key = (
            user.name,
            user.groups,
            user.uid,
            tuple(sorted(user.extra.items())),
            tuple(sorted(attributes.items())),
        )
        decision = self.decisions.get(key)
        if decision is None:
            decision = await authorize(self.client, user, **attributes)
            ttl = AUTHORIZED_TTL if decision[0] else UNAUTHORIZED_TTL
            self.decisions.put(key, decision, ttl)
        return decision
