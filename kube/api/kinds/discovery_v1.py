"""discovery.k8s.io/v1: EndpointSlice, the scalable successor of core/v1 Endpoints.

A Service's endpoints are split into slices of at most 1000 endpoints, each slice holding one
address type (IPv4, IPv6 or FQDN) and one set of ports; kube-proxy and DNS watch slices, not
Endpoints.  Each endpoint carries its readiness conditions, the node and zone it runs in, and
topology hints.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from typing import Annotated

from kube.api import names
from kube.api.errors import ErrorList, Path
from kube.api.kinds.core_v1.pod import PROTOCOLS
from kube.api.kinds.core_v1.service import parse_ip, validate_non_special_ip
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.meta_v1 import Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    QUALIFIED_NAME,
    Struct,
    atomic,
    meta,
)

ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
"""The label naming the Service a slice belongs to (upstream's ``discoveryv1.LabelServiceName``)."""
MAX_ENDPOINTS = 1000
MAX_PORTS = 100
MAX_ADDRESSES = 100
MAX_TOPOLOGY_LABELS = 16
MAX_HINTS = 8
MAX_SHOWN = 3
_IP_CLASS = {"IPv4": ipaddress.IPv4Address, "IPv6": ipaddress.IPv6Address}


class EndpointConditions(Struct):
    """Whether an endpoint is ready, serving, and terminating."""

    ready: Annotated[bool | None, meta(proto=1)] = None
    serving: Annotated[bool | None, meta(proto=2)] = None
    terminating: Annotated[bool | None, meta(proto=3)] = None


class ForZone(Struct):
    """A zone an endpoint should serve (topology aware routing)."""

    name: Annotated[str | None, meta(proto=1)] = None


class ForNode(Struct):
    """A node an endpoint should serve (topology aware routing)."""

    name: Annotated[str | None, meta(proto=1)] = None


def _validate_hints(
    hints: Sequence[ForZone | ForNode],
    check: Callable[[str], list[str]],
    path: Path,
    errors: ErrorList,
) -> None:
    """At most eight hints, each named once and validly (``check`` gives the problems)."""
    if len(hints) > MAX_HINTS:
        errors.too_many(path, len(hints), MAX_HINTS)
        return
    seen: set[str] = set()
    for i, hint in enumerate(hints):
        name, name_path = hint.name or "", path.index(i).child("name")
        if name in seen:
            errors.duplicate(name_path, name)
        seen.add(name)
        for problem in check(name):
            errors.invalid(name_path, name, problem)


class EndpointHints(Struct):
    """Where an endpoint should be consumed from."""

    for_zones: Annotated[list[ForZone] | None, atomic(proto=1)] = None
    for_nodes: Annotated[list[ForNode] | None, atomic(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_hints(
            self.for_zones or [], names.is_valid_label_value, path.child("forZones"), errors
        )
        _validate_hints(
            self.for_nodes or [], names.is_dns1123_subdomain, path.child("forNodes"), errors
        )


class Endpoint(Struct):
    """One backend: its addresses, readiness, and where it runs."""

    addresses: Annotated[list[str] | None, meta(list_type="set", proto=1)] = None
    conditions: Annotated[EndpointConditions | None, meta(proto=2)] = None
    hostname: Annotated[str | None, meta(format=DNS1123_LABEL, proto=3)] = None
    target_ref: Annotated[ObjectReference | None, meta(proto=4)] = None
    deprecated_topology: Annotated[dict[str, str] | None, meta(proto=5)] = None
    node_name: Annotated[str | None, meta(format=DNS1123_SUBDOMAIN, proto=6)] = None
    zone: Annotated[str | None, meta(proto=7)] = None
    hints: Annotated[EndpointHints | None, meta(proto=8)] = None

    def check_addresses(self, address_type: str | None, path: Path, errors: ErrorList) -> None:
        """Addresses of the slice's type: one to a hundred (the slice knows the type)."""
        addresses = self.addresses or []
        addresses_path = path.child("addresses")
        if not addresses:
            errors.required(addresses_path, "must contain at least 1 address")
        elif len(addresses) > MAX_ADDRESSES:
            errors.too_many(addresses_path, len(addresses), MAX_ADDRESSES)
        for i, address in enumerate(addresses):
            address_path = addresses_path.index(i)
            if address_type == "FQDN":
                _validate_fqdn(address, address_path, errors)
            elif address_type in ("IPv4", "IPv6"):
                if not isinstance(parse_ip(address), _IP_CLASS[address_type]):
                    errors.invalid(address_path, address, f"must be a valid {address_type} address")
                validate_non_special_ip(address, address_path, errors)

    def validate(self, path: Path, errors: ErrorList) -> None:
        topology = self.deprecated_topology or {}
        topology_path = path.child("deprecatedTopology")
        if len(topology) > MAX_TOPOLOGY_LABELS:
            errors.too_many(topology_path, len(topology), MAX_TOPOLOGY_LABELS)
        names.validate_labels(topology, topology_path, errors)


def _validate_fqdn(value: str, path: Path, errors: ErrorList) -> None:
    """A fully qualified domain name: a DNS subdomain of at least two labels."""
    if not value:
        errors.required(path)
        return
    name = value.removesuffix(".")
    problems = names.is_dns1123_subdomain(name)
    if problems:
        errors.invalid(path, name, ",".join(problems))
    elif "." not in name:
        errors.invalid(
            path, name, "should be a domain with at least two segments separated by dots"
        )


class EndpointPort(Struct):
    """A port the endpoints of a slice serve on."""

    name: Annotated[str | None, meta(format=DNS1123_LABEL, proto=1)] = None
    protocol: Annotated[str | None, meta(required=True, enum=PROTOCOLS, proto=2)] = None
    port: Annotated[int | None, meta(proto=3)] = None
    app_protocol: Annotated[str | None, meta(format=QUALIFIED_NAME, proto=4)] = None

    def set_defaults(self) -> None:
        if self.name is None:
            self.name = ""
        if self.protocol is None:
            self.protocol = "TCP"


def _list_cell(values: list[str]) -> str:
    """Up to three values, then how many more there are; ``<unset>`` when there are none."""
    text = ",".join(values[:MAX_SHOWN])
    if len(values) > MAX_SHOWN:
        return f"{text} + {len(values) - MAX_SHOWN} more..."
    return text or "<unset>"


def _port_text(port: EndpointPort) -> str:
    if port.port is not None:
        return str(port.port)
    return port.name if port.name is not None else "*"


@kind(
    group="discovery.k8s.io",
    version="v1",
    plural="endpointslices",
    columns=(
        NAME_COLUMN,
        Column("AddressType", lambda o, now: o.address_type or ""),
        Column("Ports", lambda o, now: _list_cell([_port_text(p) for p in o.ports or ()])),
        Column(
            "Endpoints",
            lambda o, now: _list_cell([a for e in o.endpoints or () for a in e.addresses or ()]),
        ),
        AGE_COLUMN,
    ),
)
class EndpointSlice(Resource):
    """A slice of the endpoints of a service: addresses of one type sharing one set of ports."""

    address_type: Annotated[
        str | None,
        meta(
            required=True,
            enum=ADDRESS_TYPES,
            immutable=True,
            doc="The type of every address in the slice: IPv4, IPv6 or FQDN.",
            proto=4,
        ),
    ] = None
    endpoints: Annotated[
        list[Endpoint] | None, atomic(doc="The endpoints in the slice (at most 1000).", proto=2)
    ] = None
    ports: Annotated[
        list[EndpointPort] | None,
        atomic(doc="The ports every endpoint of the slice serves (at most 100).", proto=3),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        endpoints, endpoints_path = self.endpoints or [], path.child("endpoints")
        if len(endpoints) > MAX_ENDPOINTS:
            errors.too_many(endpoints_path, len(endpoints), MAX_ENDPOINTS)
        else:
            for i, endpoint in enumerate(endpoints):
                endpoint.check_addresses(self.address_type, endpoints_path.index(i), errors)
        ports, ports_path = self.ports or [], path.child("ports")
        if len(ports) > MAX_PORTS:
            errors.too_many(ports_path, len(ports), MAX_PORTS)
            return
        seen: set[str] = set()
        for i, port in enumerate(ports):
            name = port.name or ""
            if name in seen:
                errors.duplicate(ports_path.index(i).child("name"), name)
            seen.add(name)
