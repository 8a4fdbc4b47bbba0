"""Ingresses to one routing table: which backend a request for a host and path goes to, and
which certificate a TLS client naming a server gets.

:func:`build` reads the Ingresses the controller serves and, through :class:`ClusterView`, the
Services, EndpointSlices and Secrets they name, and returns a :class:`RoutingTable` that is never
changed afterwards: the controller builds a new one on every change and swaps it in, so a
request routed by the old table finishes with the backend it got (see ``controller``).

Matching follows the Ingress documentation (kubernetes.io, "Ingress", path types and host
wildcards), whose examples table is this module's test matrix:

- a request's host picks the rules of that exact host, else those of a wildcard host
  ``*.foo.com`` (which matches exactly one more label: ``bar.foo.com``, not ``foo.com`` nor
  ``baz.bar.foo.com``), else the rules without a host;
- among those rules' paths, ``Exact`` matches the path itself (case-sensitive, a trailing slash
  included), ``Prefix`` matches element by element on ``/`` (``/foo`` matches ``/foo``,
  ``/foo/`` and ``/foo/bar``, not ``/foobar``; a trailing slash in the rule is ignored);
  ``ImplementationSpecific`` is treated as ``Prefix`` here (an empty path as ``/``);
- the longest matching path wins, and on equal length ``Exact`` beats ``Prefix``;
- no matching path: the ``defaultBackend`` of the (oldest) Ingress that defined the host's
  rules, else that of the oldest Ingress with one, else nothing (the proxy answers 404).

Several Ingresses may name the same host; their paths merge, and when two name the same path
and type the oldest (by creation time, then namespace and name) wins, as ingress-nginx has it.

A backend is a Service port's ready endpoints from the Service's EndpointSlices (a slice port
named as the Service port, TCP; an endpoint whose ``ready`` condition is unset counts as ready),
taken in turn (round-robin, one counter per Service port shared by every path that names it).
A backend that cannot be resolved (no such Service or port, an ExternalName Service, a
``resource`` backend, which this controller does not serve) has no endpoints, and the proxy
answers 503 for it, as for a Service with no ready endpoint; :attr:`RoutingTable.problems`
says why, for the log.

TLS: each ``spec.tls`` entry's Secret (``kubernetes.io/tls``, ``tls.crt`` and ``tls.key``) is
the certificate of its hosts (of the Ingress's rules' hosts when it lists none); the first
Ingress to name a host wins.  A missing or malformed Secret is a problem, and its hosts get the
controller's default certificate.
"""

from __future__ import annotations

import base64
import binascii
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from kube.api.kinds.core_v1.cluster import Secret
from kube.api.kinds.core_v1.service import Service, ServicePort
from kube.api.kinds.discovery_v1 import EndpointSlice
from kube.api.kinds.networking_v1 import Ingress, IngressBackend

Address = tuple[str, int]
T = TypeVar("T")
TLS_SECRET_TYPE = "kubernetes.io/tls"


class ClusterView(Protocol):
    """The objects a table is built from; every method is read-only."""

    def service(self, namespace: str, name: str) -> Service | None: ...

    def endpoint_slices(self, namespace: str, service: str) -> list[EndpointSlice]:
        """The slices labelled ``kubernetes.io/service-name: service`` in ``namespace``."""
        ...

    def secret(self, namespace: str, name: str) -> Secret | None: ...


class Backend:
    """A Service port (``namespace/name:port``) and its ready endpoints, taken in turn."""

    def __init__(self, name: str, endpoints: Sequence[Address]) -> None:
        self.name = name
        self.endpoints = tuple(endpoints)
        self._turn = itertools.count()

    def in_turn(self) -> list[Address]:
        """Every endpoint, starting with the one whose turn it is (the rest for retries)."""
        if not self.endpoints:
            return []
        start = next(self._turn) % len(self.endpoints)
        return [*self.endpoints[start:], *self.endpoints[:start]]

    def __repr__(self) -> str:
        return f"Backend({self.name!r}, {list(self.endpoints)!r})"


@dataclass(frozen=True)
class PathRule:
    """One path of a rule: ``path`` as written, its type, and where it routes."""

    path: str
    path_type: str
    backend: Backend

    @property
    def _prefix(self) -> str:
        return self.path.rstrip("/")

    @property
    def length(self) -> int:
        """How long a match this is, for precedence (a Prefix rule's trailing slash aside)."""
        return len(self.path) if self.path_type == "Exact" else len(self._prefix)

    def matches(self, path: str) -> bool:
        if self.path_type == "Exact":
            return path == self.path
        prefix = self._prefix
        return path == prefix or path.startswith(prefix + "/")


@dataclass(frozen=True)
class HostRoutes:
    """The paths of one host, most specific first, and where unmatched paths go."""

    paths: tuple[PathRule, ...]
    fallback: Backend | None


@dataclass(frozen=True)
class Certificate:
    """A certificate chain and its key (PEM), from the Secret ``source`` (``namespace/name``)."""

    cert_pem: bytes
    key_pem: bytes
    source: str


@dataclass(frozen=True)
class RoutingTable:
    """Where requests go and which certificate each server name gets; never changed once
    built (see the module docstring)."""

    hosts: dict[str, HostRoutes] = field(default_factory=dict)
    """Exact hosts, and wildcard ones as ``*.foo.com``."""
    any_host: HostRoutes | None = None
    default: Backend | None = None
    certificates: dict[str, Certificate] = field(default_factory=dict)
    """By exact host, and by wildcard host as ``*.foo.com``."""
    problems: tuple[str, ...] = ()

    def route(self, host: str, path: str) -> Backend | None:
        """The backend for a request (``host`` as :func:`request_host` gives it, ``path``
        without the query), or None when nothing matches and there is no default backend."""
        routes = _by_host(self.hosts, host) or self.any_host
        if routes is not None:
            for rule in routes.paths:
                if rule.matches(path):
                    return rule.backend
            if routes.fallback is not None:
                return routes.fallback
        return self.default

    def certificate(self, server_name: str) -> Certificate | None:
        """The certificate for a TLS server name (None: the default one)."""
        return _by_host(self.certificates, server_name.lower().rstrip("."))


def _by_host(table: dict[str, T], host: str) -> T | None:
    """The entry for ``host`` itself, else for the wildcard one label above it."""
    found = table.get(host)
    if found is None and "." in host:
        found = table.get("*." + host.partition(".")[2])
    return found


def request_host(header: str) -> str:
    """A Host header as the table looks hosts up: lower case, without port or final dot."""
    host = header.strip().lower()
    if host.startswith("["):  # an IPv6 literal
        return host.partition("]")[0] + "]"
    return host.partition(":")[0].rstrip(".")


def _age(ingress: Ingress) -> tuple[str, str, str]:
    meta = ingress.metadata
    created = meta.creation_timestamp.isoformat() if meta.creation_timestamp else ""
    return created, meta.namespace or "", meta.name or ""


@dataclass
class _Builder:
    view: ClusterView
    problems: list[str] = field(default_factory=list)
    backends: dict[tuple[str, str, str], Backend] = field(default_factory=dict)

    def backend(self, namespace: str, spec: IngressBackend, where: str) -> Backend:
        service = spec.service
        if service is None:
            self.problems.append(f"{where}: resource backends are not served")
            return Backend(f"{namespace}/<resource>", ())
        port = service.port
        port_key = str((port.number if port else None) or (port.name if port else "") or "")
        key = (namespace, service.name or "", port_key)
        if key not in self.backends:
            name = f"{namespace}/{service.name}:{port_key}"
            self.backends[key] = Backend(name, self._endpoints(key, where))
        return self.backends[key]

    def _endpoints(self, key: tuple[str, str, str], where: str) -> list[Address]:
        namespace, name, port_key = key
        service = self.view.service(namespace, name)
        spec = service.spec if service is not None else None
        if spec is None:
            self.problems.append(f"{where}: service {namespace}/{name} not found")
            return []
        if spec.type == "ExternalName":
            self.problems.append(f"{where}: service {namespace}/{name} is an ExternalName")
            return []
        port = _service_port(spec.ports or [], port_key)
        if port is None:
            self.problems.append(f"{where}: service {namespace}/{name} has no port {port_key}")
            return []
        found: set[Address] = set()
        for endpoint_slice in self.view.endpoint_slices(namespace, name):
            if endpoint_slice.address_type not in ("IPv4", "IPv6"):
                continue
            number = next(
                (
                    p.port
                    for p in endpoint_slice.ports or ()
                    if (p.name or "") == (port.name or "") and (p.protocol or "TCP") == "TCP"
                ),
                None,
            )
            if number is None:
                continue
            for endpoint in endpoint_slice.endpoints or ():
                ready = endpoint.conditions is None or endpoint.conditions.ready is not False
                if ready and endpoint.addresses:
                    found.add((endpoint.addresses[0], number))
        return sorted(found)

    def certificate(self, namespace: str, secret_name: str, where: str) -> Certificate | None:
        secret = self.view.secret(namespace, secret_name)
        source = f"{namespace}/{secret_name}"
        if secret is None:
            self.problems.append(f"{where}: secret {source} not found")
            return None
        data = secret.data or {}
        if secret.type != TLS_SECRET_TYPE or "tls.crt" not in data or "tls.key" not in data:
            self.problems.append(f"{where}: secret {source} is not a {TLS_SECRET_TYPE} secret")
            return None
        try:
            cert, key = (base64.b64decode(data[k], validate=True) for k in ("tls.crt", "tls.key"))
        except binascii.Error:
            self.problems.append(f"{where}: secret {source} holds malformed base64")
            return None
        return Certificate(cert, key, source)


def _service_port(ports: Sequence[ServicePort], port_key: str) -> ServicePort | None:
    """The Service's port by number (a key of digits) or by name."""
    if port_key.isdigit():
        return next((p for p in ports if p.port == int(port_key)), None)
    return next((p for p in ports if p.name == port_key), None)


def build(ingresses: Iterable[Ingress], view: ClusterView) -> RoutingTable:
    """The routing table of ``ingresses`` (the ones the controller serves); see the module
    docstring."""
    builder = _Builder(view)
    paths: dict[str, dict[tuple[str, str], PathRule]] = {}
    fallbacks: dict[str, Backend | None] = {}
    default: Backend | None = None
    certificates: dict[str, Certificate] = {}
    for ingress in sorted(ingresses, key=_age):
        namespace = ingress.metadata.namespace or ""
        where = f"ingress {namespace}/{ingress.metadata.name}"
        spec = ingress.spec
        if spec is None:
            continue
        own_default = (
            builder.backend(namespace, spec.default_backend, where)
            if spec.default_backend is not None
            else None
        )
        default = default or own_default
        for rule in spec.rules or ():
            host = (rule.host or "").lower()
            if fallbacks.get(host) is None:
                fallbacks[host] = own_default
            host_paths = paths.setdefault(host, {})
            for path in (rule.http.paths or []) if rule.http else []:
                if path.backend is None:
                    continue
                path_type = path.path_type or "ImplementationSpecific"
                if path_type == "ImplementationSpecific":
                    path_type = "Prefix"
                key = (path.path or "/", path_type)
                if key not in host_paths:
                    backend = builder.backend(namespace, path.backend, where)
                    host_paths[key] = PathRule(key[0], path_type, backend)
        rule_hosts = [r.host.lower() for r in spec.rules or () if r.host]
        for tls in spec.tls or ():
            if not tls.secret_name:
                continue
            certificate = builder.certificate(namespace, tls.secret_name, where)
            if certificate is None:
                continue
            for host in [h.lower() for h in tls.hosts or ()] or rule_hosts:
                certificates.setdefault(host, certificate)
    routes = {
        host: HostRoutes(
            tuple(sorted(rules.values(), key=lambda r: (-r.length, r.path_type != "Exact"))),
            fallbacks.get(host),
        )
        for host, rules in paths.items()
    }
    any_host = routes.pop("", None)
    return RoutingTable(routes, any_host, default, certificates, tuple(builder.problems))
