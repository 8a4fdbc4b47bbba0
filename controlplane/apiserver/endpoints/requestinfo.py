"""What a request is about, read from its method, path and query, as Kubernetes reads it.

``/apis/apps/v1/namespaces/default/deployments/web/scale`` becomes group ``apps``, version
``v1``, namespace ``default``, resource ``deployments``, name ``web``, subresource ``scale``
and, for a PATCH, verb ``patch``.  Authorization, admission, audit and routing all work from
this one parse, so it follows upstream's RequestInfoFactory closely: ``list`` vs ``get`` by the
presence of a name, ``watch`` from ``?watch=true`` (any capitalisation, as older Python clients
send ``True``) or the legacy ``/watch/`` prefix, ``deletecollection`` for DELETE on a
collection, no verb for a method other than GET, HEAD, POST, PUT, PATCH and DELETE (an
OPTIONS through ``pods/proxy`` is allowed only by a rule for every verb), and everything
outside ``/api`` and ``/apis`` as a non-resource request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_NAMESPACE_SUBRESOURCES = ("status", "finalize")

_METHOD_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


@dataclass(frozen=True)
class RequestInfo:
    """The parse of one request."""

    path: str
    verb: str
    is_resource_request: bool = False
    api_prefix: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    parts: tuple[str, ...] = ()
    field_selector: str = ""
    """The ``fieldSelector`` of a list or watch, which the Node authorizer reads."""

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def true(value: str | None) -> bool:
    """A boolean query parameter, case-insensitively (``true``, ``True``, ``1``)."""
    return value is not None and value.lower() in ("true", "1")


def parse(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """The RequestInfo of a request (never raises; unknown shapes are non-resource)."""
    method = method.upper()
    segments = tuple(p for p in path.strip("/").split("/") if p) if path else ()
    plain_verb = method.lower()
    if not segments or segments[0] not in ("api", "apis"):
        return RequestInfo(path=path, verb=plain_verb)
    prefix, rest = segments[0], list(segments[1:])
    if prefix == "apis":
        if len(rest) < 2:
            return RequestInfo(path=path, verb=plain_verb, api_prefix=prefix)
        group, version, rest = rest[0], rest[1], rest[2:]
    else:
        if len(rest) < 1:
            return RequestInfo(path=path, verb=plain_verb, api_prefix=prefix)
        group, version, rest = "", rest[0], rest[1:]

    verb = _METHOD_VERBS.get(method, "")  # OPTIONS...: no verb, as upstream
    if rest and rest[0] == "watch":
        verb, rest = "watch", rest[1:]
    if not rest:
        return RequestInfo(
            path=path, verb=plain_verb, api_prefix=prefix, group=group, version=version
        )

    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""

    if verb == "get" and not name:
        verb = "list"
    if verb == "delete" and not name:
        verb = "deletecollection"
    if verb in ("list", "get") and true(query.get("watch")):
        verb = "watch"
    return RequestInfo(
        path=path,
        verb=verb,
        is_resource_request=True,
        api_prefix=prefix,
        group=group,
        version=version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
        parts=tuple(rest),
        field_selector=query.get("fieldSelector", "") if verb in ("list", "watch") else "",
    )
