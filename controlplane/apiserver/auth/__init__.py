"""Who is asking, and may they: the shapes shared by the authentication and authorization stages.

Both stages are chains.  Authenticators are tried in order: each either does not recognise the
request (``None``), names the user, or raises the 401 of ``unauthorized()`` for a credential
it recognises as its own but finds bad (an expired or forged token is never silently
downgraded to anonymous, as upstream).  Authorizers are asked in order and the first that
allows wins (upstream's union authorizer; no built-in authorizer denies outright, they allow
or have no opinion).  The chains live in ``authn`` (credentials) and ``authz`` (modes, with
``rbac`` and ``nodeauthz``); this module holds the user record, the certificate
authenticator, the compatibility ``AlwaysAllow`` decision and upstream's 403.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web

from controlplane.apiserver import errors
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from kube.api.meta_v1 import StatusDetails

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
MASTERS = "system:masters"
_PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version", "/api", "/apis", "/openapi")


@dataclass(frozen=True)
class User:
    """An authenticated (or anonymous) identity."""

    name: str
    groups: tuple[str, ...]
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)


ANONYMOUS_USER = User(ANONYMOUS, (UNAUTHENTICATED,))

Authenticator = Callable[[web.Request], User | Awaitable[User | None] | None]
"""A request's user, ``None`` if the request carries no credential of this kind."""
Authorizer = Callable[[User, RequestInfo], bool]
"""Whether the user may make the request (``False``: no opinion, the next one is asked)."""


def unauthorized() -> errors.ApiError:
    """Upstream's 401: the same words whatever was wrong, so nothing leaks to the caller."""
    return errors.ApiError(401, "Unauthorized", "Unauthorized")


def certificate_authenticator(request: web.Request) -> User | None:
    """The user a verified client certificate names: CN is the user, O the groups."""
    ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    name, groups = "", []
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                name = value
            elif key == "organizationName":
                groups.append(value)
    return User(name, (*groups, AUTHENTICATED)) if name else None


def is_public(info: RequestInfo) -> bool:
    """Health, version, discovery and OpenAPI reads: what everyone may see."""
    return (
        not info.is_resource_request
        and info.verb == "get"
        and any(info.path == p or info.path.startswith(p + "/") for p in _PUBLIC_PATHS)
    )


def always_allow(user: User, info: RequestInfo) -> bool:
    """``--authorization-mode AlwaysAllow``: authenticated users may do anything, anonymous
    ones only read the public paths (the behaviour before RBAC, kept for compatibility)."""
    return AUTHENTICATED in user.groups or is_public(info)


def forbidden(user: User, info: RequestInfo) -> errors.ApiError:
    """Upstream's 403 for a denied request: the message below, details naming the resource."""
    details = StatusDetails(
        name=info.name or None,
        group=info.group or None,
        kind=info.resource or None,
    )
    return errors.ApiError(403, "Forbidden", denial_message(user, info), details)


def denial_message(user: User, info: RequestInfo) -> str:
    """The 403 message, shaped like upstream's."""
    if not info.is_resource_request:
        return f'forbidden: User "{user.name}" cannot {info.verb} path "{info.path}"'
    where = f' in the namespace "{info.namespace}"' if info.namespace else " at the cluster scope"
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    qualified = f"{info.resource}.{info.group}" if info.group else info.resource
    named = f' "{info.name}"' if info.name else ""
    return (
        f'{qualified}{named} is forbidden: User "{user.name}" cannot {info.verb} resource '
        f'"{resource}" in API group "{info.group}"{where}'
    )
