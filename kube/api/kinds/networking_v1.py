"""networking.k8s.io/v1: NetworkPolicy, Ingress, IngressClass, ServiceCIDR and IPAddress.

A NetworkPolicy says which traffic may reach (``ingress``) and leave (``egress``) the pods its
``podSelector`` picks; a network plugin enforces it.  An Ingress routes HTTP requests from
outside the cluster to Services by host and path, and an IngressClass names the controller that
implements the Ingresses of its class; the ``ingressclass.kubernetes.io/is-default-class``
annotation marks the class that new Ingresses without one get (the DefaultIngressClass
admission plugin, in ``controlplane.apiserver.auth.admission``).  A ServiceCIDR is a range
Services' ClusterIPs come from, and an IPAddress (named by the address) records one allocated
address and the object it belongs to.  Nothing here enforces a policy, serves a route or
allocates an address: these are the objects, stored and validated for the plugins, controllers
and allocators that do (the API server's ClusterIP allocator, ``system/clusterip.py``, records
its allocations as IPAddresses and creates the default ServiceCIDR).  New IP and CIDR fields
are validated strictly and must be canonical (``names.is_canonical_ip``/``is_canonical_cidr``).

Field names, order and protobuf numbers are k8s.io/api release-1.36's; defaults and validation
follow pkg/apis/networking (a policy is about Ingress always and about Egress when it has
egress rules; a port's protocol is TCP; a parameters reference is cluster-scoped), and the
messages are upstream's.  As on the Go value fields, a missing ``spec`` (and a policy's missing
``podSelector``) is defaulted to an empty one, so every rule about it is checked.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from typing import Annotated, Any, Self

import msgspec

from kube.api import names
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.kinds.apps_v1 import format_selector
from kube.api.kinds.core_v1.pod import PROTOCOLS
from kube.api.kinds.core_v1.service import parse_ip
from kube.api.kinds.core_v1.volume import TypedLocalObjectReference
from kube.api.meta_v1 import Condition, LabelSelector, Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import (
    CANONICAL_CIDR,
    CANONICAL_IP,
    CIDR,
    DNS1035_LABEL,
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    IP_ADDRESS,
    Embedded,
    IntOrString,
    Struct,
    atomic,
    meta,
)

GROUP = "networking.k8s.io"
POLICY_TYPES = ("Ingress", "Egress")
PATH_TYPES = ("Exact", "Prefix", "ImplementationSpecific")
PARAMETERS_SCOPES = ("Namespace", "Cluster")
DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
LABEL_IP_ADDRESS_FAMILY = "ipaddress.kubernetes.io/ip-family"
LABEL_MANAGED_BY = "ipaddress.kubernetes.io/managed-by"
"""Upstream's well-known IPAddress labels: the address's family and who allocated it."""
"""The deprecated annotation that names an Ingress's class; an Ingress carrying it is never
given the default class."""
MAX_CONTROLLER_LENGTH = 250
_INVALID_PATH_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
_INVALID_PATH_SUFFIXES = ("/..", "/.")
_HTTP_PATH_FMT = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"
_HTTP_PATH = re.compile(_HTTP_PATH_FMT)


def is_default_class(obj: Any) -> bool:
    """Whether an IngressClass is annotated as the cluster's default."""
    return (obj.metadata.annotations or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"


# NetworkPolicy.


class NetworkPolicyPort(Struct):
    """A port (or range of ports) traffic is allowed on."""

    protocol: Annotated[
        str | None, meta(enum=PROTOCOLS, doc="TCP (the default), UDP or SCTP.", proto=1)
    ] = None
    port: Annotated[
        IntOrString | None,
        meta(doc="A port number or a named port on the pod; absent: every port.", proto=2),
    ] = None
    end_port: Annotated[
        int | None,
        meta(doc="The last port of the range starting at the numeric ``port``.", proto=3),
    ] = None

    def set_defaults(self) -> None:
        if self.protocol is None:
            self.protocol = "TCP"

    def validate(self, path: Path, errors: ErrorList) -> None:
        port, end = self.port, self.end_port
        if port is None:
            if end is not None:
                errors.invalid(
                    path.child("endPort"), end, "may not be specified when `port` is not specified"
                )
        elif isinstance(port, int):
            errors.extend_checked(path.child("port"), port, names.is_valid_port_num(port))
            if end is not None:
                if end < port:
                    errors.invalid(
                        path.child("endPort"), end, "must be greater than or equal to `port`"
                    )
                errors.extend_checked(path.child("endPort"), end, names.is_valid_port_num(end))
        else:
            if end is not None:
                errors.invalid(
                    path.child("endPort"), end, "may not be specified when `port` is non-numeric"
                )
            errors.extend_checked(path.child("port"), port, names.is_iana_svc_name(port))


def _network(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return None


class IPBlock(Struct):
    """A CIDR, less the CIDRs of ``except``."""

    cidr: Annotated[
        str | None,
        meta(required=True, format=CIDR, doc="The block, such as 192.168.1.0/24.", proto=1),
    ] = None
    except_: Annotated[
        list[str] | None,
        atomic(format=CIDR, doc="CIDRs inside ``cidr`` to leave out.", proto=2),
    ] = msgspec.field(default=None, name="except")

    def validate(self, path: Path, errors: ErrorList) -> None:
        block = _network(self.cidr or "")
        if block is None:
            return
        for i, text in enumerate(self.except_ or ()):
            excluded = _network(text)
            if excluded is None:
                continue
            if excluded.network_address not in block or excluded.prefixlen <= block.prefixlen:
                errors.invalid(
                    path.child("except").index(i), text, "must be a strict subset of `cidr`"
                )


class NetworkPolicyPeer(Struct):
    """Pods (by pod and namespace selectors) or an IP block traffic may come from or go to."""

    pod_selector: Annotated[
        LabelSelector | None,
        meta(doc="Pods, in the policy's namespace unless namespaceSelector is set.", proto=1),
    ] = None
    namespace_selector: Annotated[
        LabelSelector | None, meta(doc="Namespaces whose pods this peer selects.", proto=2)
    ] = None
    ip_block: Annotated[
        IPBlock | None,
        meta(doc="Addresses; excludes the two selectors.", proto=3),
    ] = msgspec.field(default=None, name="ipBlock")

    def validate(self, path: Path, errors: ErrorList) -> None:
        peers = sum(
            p is not None for p in (self.pod_selector, self.namespace_selector, self.ip_block)
        )
        if peers == 0:
            errors.required(path, "must specify a peer")
        elif peers > 1 and self.ip_block is not None:
            errors.forbidden(path, "may not specify both ipBlock and another peer")


class NetworkPolicyIngressRule(Struct):
    """Traffic allowed to the selected pods: from these peers, on these ports."""

    ports: Annotated[
        list[NetworkPolicyPort] | None,
        atomic(doc="Ports allowed (any of them); empty: every port.", proto=1),
    ] = None
    from_: Annotated[
        list[NetworkPolicyPeer] | None,
        atomic(doc="Sources allowed (any of them); empty: every source.", proto=2),
    ] = msgspec.field(default=None, name="from")


class NetworkPolicyEgressRule(Struct):
    """Traffic allowed out of the selected pods: to these peers, on these ports."""

    ports: Annotated[
        list[NetworkPolicyPort] | None,
        atomic(doc="Destination ports allowed (any of them); empty: every port.", proto=1),
    ] = None
    to: Annotated[
        list[NetworkPolicyPeer] | None,
        atomic(doc="Destinations allowed (any of them); empty: every destination.", proto=2),
    ] = None


class NetworkPolicySpec(Struct):
    """The pods a policy applies to and the traffic it allows them."""

    pod_selector: Annotated[
        LabelSelector | None,
        meta(doc="The pods the policy applies to; empty: every pod of the namespace.", proto=1),
    ] = None
    ingress: Annotated[
        list[NetworkPolicyIngressRule] | None,
        atomic(doc="Incoming traffic allowed; empty: none.", proto=2),
    ] = None
    egress: Annotated[
        list[NetworkPolicyEgressRule] | None,
        atomic(doc="Outgoing traffic allowed; empty: none.", proto=3),
    ] = None
    policy_types: Annotated[
        list[str] | None,
        atomic(
            enum=POLICY_TYPES,
            doc="Which directions the policy isolates: Ingress, Egress or both.",
            proto=4,
        ),
    ] = None

    def set_defaults(self) -> None:
        if self.pod_selector is None:
            self.pod_selector = LabelSelector()
        if not self.policy_types:
            self.policy_types = ["Ingress", "Egress"] if self.egress else ["Ingress"]

    def validate(self, path: Path, errors: ErrorList) -> None:
        types = self.policy_types or []
        if len(types) > len(POLICY_TYPES):
            errors.invalid(
                path.child("policyTypes"), types, "may not specify more than two policyTypes"
            )


def _spec(obj: Any, empty: type[Struct]) -> Any:
    """An object's spec, or an empty one (printers read specs of objects not defaulted)."""
    return obj.spec or empty()


@kind(
    group=GROUP,
    version="v1",
    plural="networkpolicies",
    short_names=("netpol",),
    columns=(
        NAME_COLUMN,
        Column(
            "Pod-Selector",
            lambda o, now: format_selector(_spec(o, NetworkPolicySpec).pod_selector),
            description="podSelector selects the pods to which this NetworkPolicy object applies.",
        ),
        AGE_COLUMN,
    ),
)
class NetworkPolicy(Resource):
    """The traffic allowed to and from a set of pods."""

    spec: Annotated[
        NetworkPolicySpec | None,
        meta(doc="The pods selected and the traffic allowed them.", proto=2),
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = NetworkPolicySpec()


# Ingress.


class ServiceBackendPort(Struct):
    """The port of a Service backend, by name or number."""

    name: Annotated[
        str | None, meta(doc="The name of the Service's port.", proto=1, omitempty=True)
    ] = None
    number: Annotated[
        int | None, meta(doc="The number of the Service's port.", proto=2, omitempty=True)
    ] = None


class IngressServiceBackend(Struct):
    """A Service in the Ingress's namespace, and its port."""

    name: Annotated[
        str | None,
        meta(required=True, format=DNS1035_LABEL, doc="The Service's name.", proto=1),
    ] = None
    port: Annotated[
        ServiceBackendPort | None, meta(doc="The Service's port, by name or number.", proto=2)
    ] = None


class IngressBackend(Struct):
    """Where matching requests go: a Service or another resource."""

    service: Annotated[
        IngressServiceBackend | None, meta(doc="A Service; excludes resource.", proto=4)
    ] = None
    resource: Annotated[
        TypedLocalObjectReference | None,
        meta(doc="Another object in the Ingress's namespace; excludes service.", proto=3),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.resource is not None and self.service is not None:
            errors.invalid(path, "", "cannot set both resource and service backends")
        elif self.resource is not None:
            _validate_reference(self.resource, path.child("resource"), errors)
        elif self.service is not None:
            self._validate_port(self.service.port or ServiceBackendPort(), path, errors)
        else:
            errors.invalid(path, "", "resource or service backend is required")

    @staticmethod
    def _validate_port(port: ServiceBackendPort, path: Path, errors: ErrorList) -> None:
        port_path = path.child("service").child("port")
        if port.name and port.number:
            errors.invalid(path, "", "cannot set both port name & port number")
        elif port.name:
            errors.extend_checked(
                port_path.child("name"), port.name, names.is_iana_svc_name(port.name)
            )
        elif port.number:
            errors.extend_checked(
                port_path.child("number"), port.number, names.is_valid_port_num(port.number)
            )
        else:
            errors.required(path, "port name or number is required")


def _validate_reference(
    ref: TypedLocalObjectReference | IngressClassParametersReference,
    path: Path,
    errors: ErrorList,
) -> None:
    """An object reference's group and, once present, its kind and name (path segments)."""
    if ref.api_group is not None:
        errors.extend_checked(
            path.child("apiGroup"), ref.api_group, names.is_dns1123_subdomain(ref.api_group)
        )
    for name, value in (("kind", ref.kind), ("name", ref.name)):
        if value:
            errors.extend_checked(path.child(name), value, names.is_path_segment_name(value))


class IngressTLS(Struct):
    """Hosts served over TLS with the certificate of a Secret."""

    hosts: Annotated[list[str] | None, atomic(doc="Hosts the certificate is for.", proto=1)] = None
    secret_name: Annotated[
        str | None,
        meta(
            format=DNS1123_SUBDOMAIN,
            doc="The Secret holding the certificate and key.",
            proto=2,
            omitempty=True,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        for i, host in enumerate(self.hosts or ()):
            check = (
                names.is_wildcard_dns1123_subdomain if "*" in host else names.is_dns1123_subdomain
            )
            errors.extend_checked(path.child("hosts").index(i), host, check(host))


class HTTPIngressPath(Struct):
    """A path and the backend its requests go to."""

    path: Annotated[
        str | None,
        meta(doc="Matched against the request's path; starts with '/'.", proto=1, omitempty=True),
    ] = None
    path_type: Annotated[
        str | None,
        meta(
            required=True,
            enum=PATH_TYPES,
            doc="How the path is matched: Exact, Prefix or ImplementationSpecific.",
            proto=3,
        ),
    ] = None
    backend: Annotated[
        IngressBackend | None,
        meta(required=True, doc="Where matching requests go.", proto=2),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        value, path_path = self.path or "", path.child("path")
        if self.path_type in ("Exact", "Prefix"):
            if not value.startswith("/"):
                errors.invalid(path_path, value, "must be an absolute path")
            for sequence in _INVALID_PATH_SEQUENCES:
                if sequence in value:
                    errors.invalid(path_path, value, f"must not contain '{sequence}'")
            for suffix in _INVALID_PATH_SUFFIXES:
                if value.endswith(suffix):
                    errors.invalid(path_path, value, f"cannot end with '{suffix}'")
        elif self.path_type == "ImplementationSpecific" and value and not value.startswith("/"):
            errors.invalid(path_path, value, "must be an absolute path")


class HTTPIngressRuleValue(Struct):
    """The paths of an HTTP rule."""

    paths: Annotated[
        list[HTTPIngressPath] | None,
        atomic(required=True, doc="Paths and the backends they route to.", proto=1),
    ] = None


class IngressRule(Struct):
    """Requests for a host (or any host) and the paths that route them."""

    PROTO_EMBEDDED = (Embedded(2, "IngressRuleValue", ("http",)),)

    host: Annotated[
        str | None,
        meta(
            doc="A DNS name, or a wildcard one such as *.foo.com; absent: every host.",
            proto=1,
            omitempty=True,
        ),
    ] = None
    http: Annotated[
        HTTPIngressRuleValue | None, meta(doc="The HTTP paths of the rule.", proto=1)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        host, host_path = self.host or "", path.child("host")
        if not host:
            return
        if parse_ip(host) is not None:
            errors.invalid(host_path, host, "must be a DNS name, not an IP address")
        check = names.is_wildcard_dns1123_subdomain if "*" in host else names.is_dns1123_subdomain
        errors.extend_checked(host_path, host, check(host))


class IngressSpec(Struct):
    """The rules, TLS and default backend of an Ingress."""

    ingress_class_name: Annotated[
        str | None,
        meta(
            format=DNS1123_SUBDOMAIN,
            doc="The IngressClass that implements this Ingress.",
            proto=4,
        ),
    ] = None
    default_backend: Annotated[
        IngressBackend | None, meta(doc="Where requests no rule matches go.", proto=1)
    ] = None
    tls: Annotated[list[IngressTLS] | None, atomic(doc="TLS for hosts, on port 443.", proto=2)] = (
        None
    )
    rules: Annotated[
        list[IngressRule] | None, atomic(doc="Host rules; absent: the default backend.", proto=3)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.rules and self.default_backend is None:
            errors.invalid(path, self.rules, "either `defaultBackend` or `rules` must be specified")


class IngressPortStatus(Struct):
    """The state of one port of a load balancer."""

    port: Annotated[int | None, meta(proto=1)] = None
    protocol: Annotated[str | None, meta(proto=2)] = None
    error: Annotated[str | None, meta(proto=3)] = None


class IngressLoadBalancerIngress(Struct):
    """One entry point of a load balancer."""

    ip: Annotated[str | None, meta(format=IP_ADDRESS, proto=1, omitempty=True)] = None
    hostname: Annotated[str | None, meta(format=DNS1123_SUBDOMAIN, proto=2, omitempty=True)] = None
    ports: Annotated[list[IngressPortStatus] | None, atomic(proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.hostname and parse_ip(self.hostname) is not None:
            errors.invalid(
                path.child("hostname"), self.hostname, "must be a DNS name, not an IP address"
            )


class IngressLoadBalancerStatus(Struct):
    """The load balancer serving an Ingress."""

    ingress: Annotated[list[IngressLoadBalancerIngress] | None, atomic(proto=1)] = None


class IngressStatus(Struct):
    """What the ingress controller reports."""

    load_balancer: Annotated[
        IngressLoadBalancerStatus | None,
        meta(doc="The addresses the Ingress is reached at.", proto=1),
    ] = None


MAX_HOSTS_SHOWN = 3


def _hosts_cell(spec: IngressSpec) -> str:
    """Up to three hosts, then how many rules more; ``*`` when no rule names a host."""
    rules = spec.rules or []
    shown = [r.host for r in rules[:MAX_HOSTS_SHOWN] if r.host]
    if not shown:
        return "*"
    text = ",".join(shown)
    if len(rules) > MAX_HOSTS_SHOWN:
        return f"{text} + {len(rules) - MAX_HOSTS_SHOWN} more..."
    return text


def _address_cell(status: IngressStatus | None) -> str:
    """The load balancer's addresses (each entry's IP, else its hostname), sorted and unique."""
    balancer = (status.load_balancer if status else None) or IngressLoadBalancerStatus()
    return ",".join(sorted({i.ip or i.hostname or "" for i in balancer.ingress or ()} - {""}))


@kind(
    group=GROUP,
    version="v1",
    plural="ingresses",
    short_names=("ing",),
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column(
            "Class",
            lambda o, now: _spec(o, IngressSpec).ingress_class_name or "<none>",
            description="The name of the IngressClass resource that should be used for this "
            "ingress",
        ),
        Column(
            "Hosts",
            lambda o, now: _hosts_cell(_spec(o, IngressSpec)),
            description="Hosts that incoming requests are matched against before the ingress rule",
        ),
        Column(
            "Address",
            lambda o, now: _address_cell(o.status),
            description="Address is a list containing ingress points for the load-balancer",
        ),
        Column(
            "Ports",
            lambda o, now: "80, 443" if _spec(o, IngressSpec).tls else "80",
            description="Ports of TLS configurations that open",
        ),
        AGE_COLUMN,
    ),
)
class Ingress(Resource):
    """HTTP routes from outside the cluster to Services, by host and path."""

    spec: Annotated[
        IngressSpec | None, meta(doc="The rules, TLS and default backend.", proto=2)
    ] = None
    status: Annotated[IngressStatus | None, meta(doc="The load balancer's addresses.", proto=3)] = (
        None
    )

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = IngressSpec()

    def validate_create(self, errors: ErrorList) -> None:
        """A new Ingress names its class one way: the deprecated annotation or the field."""
        annotation = (self.metadata.annotations or {}).get(INGRESS_CLASS_ANNOTATION)
        if annotation is not None and _spec(self, IngressSpec).ingress_class_name is not None:
            errors.invalid(
                ROOT.child("annotations").child(INGRESS_CLASS_ANNOTATION),
                annotation,
                "can not be set when the class field is also set",
            )


# IngressClass.


class IngressClassParametersReference(Struct):
    """The object holding a controller's parameters for a class, cluster- or namespace-scoped."""

    api_group: Annotated[
        str | None,
        meta(doc="The object's API group; absent: the core group.", proto=1),
    ] = None
    kind: Annotated[str | None, meta(required=True, doc="The object's kind.", proto=2)] = None
    name: Annotated[str | None, meta(required=True, doc="The object's name.", proto=3)] = None
    scope: Annotated[
        str | None,
        meta(
            enum=PARAMETERS_SCOPES,
            doc="Cluster (the default) or Namespace.",
            proto=4,
        ),
    ] = None
    namespace: Annotated[
        str | None,
        meta(
            format=DNS1123_LABEL,
            doc="The object's namespace: required with scope Namespace, not allowed otherwise.",
            proto=5,
        ),
    ] = None

    def set_defaults(self) -> None:
        if self.scope is None:
            self.scope = "Cluster"

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_reference(self, path, errors)
        if self.scope == "":  # set but empty: the declared enum check skips it
            errors.not_supported(path.child("scope"), "", PARAMETERS_SCOPES)
        if self.scope == "Namespace" and self.namespace is None:
            errors.required(path.child("namespace"), "`parameters.scope` is set to 'Namespace'")
        if self.scope == "Cluster" and self.namespace is not None:
            errors.forbidden(path.child("namespace"), "`parameters.scope` is set to 'Cluster'")


class IngressClassSpec(Struct):
    """The controller of a class and its parameters."""

    controller: Annotated[
        str | None,
        meta(
            required=True,
            immutable=True,
            doc="The controller implementing the class, a domain-prefixed path such as "
            "acme.io/ingress-controller.",
            proto=1,
            omitempty=True,
        ),
    ] = None
    parameters: Annotated[
        IngressClassParametersReference | None,
        meta(doc="An object with the controller's parameters for the class.", proto=2),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        controller, controller_path = self.controller or "", path.child("controller")
        if not controller:
            return
        if len(controller.encode()) > MAX_CONTROLLER_LENGTH:
            errors.too_long(controller_path, MAX_CONTROLLER_LENGTH)
        host, slash, rest = controller.partition("/")
        if not slash or not host or not rest:
            errors.invalid(
                controller_path,
                controller,
                'must be a domain-prefixed path (such as "acme.io/foo")',
            )
            return
        errors.extend_checked(controller_path, host, names.is_dns1123_subdomain(host))
        if not _HTTP_PATH.fullmatch(rest):
            errors.invalid(
                controller_path,
                rest,
                f"Invalid path (regex used for validation is '{_HTTP_PATH_FMT}')",
            )


def _parameters_cell(spec: IngressClassSpec) -> str:
    """``Kind[.group]/name`` of the parameters, or ``<none>``."""
    ref = spec.parameters
    if ref is None:
        return "<none>"
    kind_name = ref.kind or ""
    if ref.api_group is not None:
        kind_name += "." + ref.api_group
    return f"{kind_name}/{ref.name or ''}"


@kind(
    group=GROUP,
    version="v1",
    plural="ingressclasses",
    namespaced=False,
    columns=(
        NAME_COLUMN,
        Column(
            "Controller",
            lambda o, now: _spec(o, IngressClassSpec).controller or "",
            description="Controller that is responsible for handling this class",
        ),
        Column(
            "Parameters",
            lambda o, now: _parameters_cell(_spec(o, IngressClassSpec)),
            description="A reference to a resource with additional parameters",
        ),
        AGE_COLUMN,
    ),
)
class IngressClass(Resource):
    """A class of Ingresses and the controller that implements them."""

    spec: Annotated[
        IngressClassSpec | None, meta(doc="The controller and its parameters.", proto=2)
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = IngressClassSpec()


# ServiceCIDR and IPAddress.


class ServiceCIDRSpec(Struct):
    """The ranges ClusterIPs are allocated from."""

    cidrs: Annotated[
        list[str] | None,
        atomic(
            format=CANONICAL_CIDR,
            doc="At most two CIDRs, one of each IP family, such as 10.96.0.0/12; immutable "
            "but for adding the second family.",
            proto=1,
        ),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        cidrs, cidrs_path = self.cidrs or [], path.child("cidrs")
        if not cidrs:
            errors.required(cidrs_path, "at least one CIDR required")
        elif len(cidrs) > MAX_SERVICE_CIDRS:
            errors.invalid(cidrs_path, cidrs, "may only hold up to 2 values")
        elif len(cidrs) == MAX_SERVICE_CIDRS and _family(cidrs[0]) == _family(cidrs[1]) != 0:
            errors.invalid(
                cidrs_path,
                cidrs,
                "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and "
                "2001:db8::/64",
            )


MAX_SERVICE_CIDRS = 2


def _family(cidr: str) -> int:
    """4 or 6, or 0 when ``cidr`` is no CIDR."""
    network = _network(cidr)
    return network.version if network is not None else 0


class ServiceCIDRStatus(Struct):
    """Whether the range is ready for allocations."""

    conditions: Annotated[
        list[Condition] | None,
        meta(merge_key="type", doc="The range's conditions (Ready).", proto=1),
    ] = None


@kind(
    group=GROUP,
    version="v1",
    plural="servicecidrs",
    namespaced=False,
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column(
            "CIDRs",
            lambda o, now: ",".join(_spec(o, ServiceCIDRSpec).cidrs or ()),
            description='cidrs defines the IP blocks in CIDR notation (e.g. "192.168.0.0/24" '
            'or "2001:db8::/64") from which to assign service cluster IPs.',
        ),
        AGE_COLUMN,
    ),
)
class ServiceCIDR(Resource):
    """A range of IP addresses Services' ClusterIPs are allocated from."""

    spec: Annotated[ServiceCIDRSpec | None, meta(doc="The CIDRs of the range.", proto=2)] = None
    status: Annotated[
        ServiceCIDRStatus | None, meta(doc="Whether the range is ready.", proto=3)
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = ServiceCIDRSpec()

    def networks(self) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        """The range's CIDRs, parsed (validation has made them canonical)."""
        return [ipaddress.ip_network(c) for c in (self.spec.cidrs if self.spec else None) or ()]

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        """CIDRs keep their places; a single-family range may gain its second family."""
        new_cidrs = (self.spec.cidrs if self.spec else None) or []
        old_cidrs = (old.spec.cidrs if old.spec else None) or []
        path = ROOT.child("spec").child("cidrs")
        if len(new_cidrs) == len(old_cidrs) or (len(old_cidrs), len(new_cidrs)) == (1, 2):
            for i, (new, before) in enumerate(zip(new_cidrs, old_cidrs, strict=False)):
                if new != before:
                    errors.immutable(path.index(i), new)
        else:
            errors.immutable(path, new_cidrs)


class ParentReference(Struct):
    """The object an IPAddress is allocated to (a Service, in the core group)."""

    group: Annotated[str | None, meta(doc="The object's API group.", proto=1, omitempty=True)] = (
        None
    )
    resource: Annotated[
        str | None,
        meta(required=True, doc="The object's resource.", proto=2, omitempty=True),
    ] = None
    namespace: Annotated[
        str | None, meta(doc="The object's namespace.", proto=3, omitempty=True)
    ] = None
    name: Annotated[
        str | None, meta(required=True, doc="The object's name.", proto=4, omitempty=True)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.group:
            errors.extend_checked(
                path.child("group"), self.group, names.is_dns1123_subdomain(self.group)
            )
        for name, value in (
            ("resource", self.resource),
            ("name", self.name),
            ("namespace", self.namespace),
        ):
            if value:
                errors.extend_checked(path.child(name), value, names.is_path_segment_name(value))


class IPAddressSpec(Struct):
    """What an IPAddress is allocated to."""

    parent_ref: Annotated[
        ParentReference | None,
        meta(required=True, immutable=True, doc="The object the address belongs to.", proto=1),
    ] = None


def _parent_cell(spec: IPAddressSpec) -> str:
    """``resource[.group][/namespace]/name`` of the parent, lower-cased, or ``<none>``."""
    ref = spec.parent_ref
    if ref is None:
        return "<none>"
    text = (ref.resource or "") + (f".{ref.group}" if ref.group else "")
    text = text.lower() + (f"/{ref.namespace}" if ref.namespace else "")
    return f"{text}/{ref.name or ''}"


@kind(
    group=GROUP,
    version="v1",
    plural="ipaddresses",
    namespaced=False,
    name_format=CANONICAL_IP,
    columns=(
        NAME_COLUMN,
        Column(
            "ParentRef",
            lambda o, now: _parent_cell(_spec(o, IPAddressSpec)),
            description="ParentRef references the resource that an IPAddress is attached to. "
            "An IPAddress must reference a parent object.",
        ),
        dataclasses.replace(AGE_COLUMN, defined=False),
    ),
)
class IPAddress(Resource):
    """One allocated IP address, named by the address in canonical form."""

    spec: Annotated[
        IPAddressSpec | None, meta(doc="What the address is allocated to.", proto=2)
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = IPAddressSpec()
