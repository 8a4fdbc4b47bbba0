"""Who is asking, and may they: the authentication and authorization stages.

Both are pluggable: the server tries its authenticators in order (the first to recognise the
request names the user; none means ``system:anonymous``) and asks one authorizer about every
request.  Today: client certificates (CN = user, O = groups) and an authorizer that lets
authenticated users do everything and anonymous ones read only health, version, discovery and
OpenAPI, which is what upstream's default RBAC grants them.  The security issue adds tokens,
RBAC and the Node authorizer behind the same two signatures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from controlplane.apiserver.requestinfo import RequestInfo

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
_PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version", "/api", "/apis", "/openapi")


@dataclass(frozen=True)
class User:
    """An authenticated (or anonymous) identity."""

    name: str
    groups: tuple[str, ...]


ANONYMOUS_USER = User(ANONYMOUS, (UNAUTHENTICATED,))

Authenticator = Callable[[web.Request], User | None]
Authorizer = Callable[[User, RequestInfo], bool]


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


def default_authorizer(user: User, info: RequestInfo) -> bool:
    """Authenticated users may do anything; anonymous ones only read the public paths."""
    if AUTHENTICATED in user.groups:
        return True
    return (
        not info.is_resource_request
        and info.verb == "get"
        and any(info.path == p or info.path.startswith(p + "/") for p in _PUBLIC_PATHS)
    )


def denial_message(user: User, info: RequestInfo) -> str:
    """The 403 message, shaped like upstream's."""
    if not info.is_resource_request:
        return f'forbidden: User "{user.name}" cannot {info.verb} path "{info.path}"'
    where = f' in the namespace "{info.namespace}"' if info.namespace else " at the cluster scope"
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    return (
        f'{resource} is forbidden: User "{user.name}" cannot {info.verb} resource '
        f'"{resource}" in API group "{info.group}"{where}'
    )
