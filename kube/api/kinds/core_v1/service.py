"""core/v1 service discovery: Service, and the Endpoints that list the addresses behind one.

A Service gives a stable virtual IP (or a DNS name, for ``ExternalName``) to the pods its selector
picks; ``ports`` map the service's ports to the pods' target ports, and NodePort/LoadBalancer
services also expose them on every node or through a cloud load balancer.

Two steps upstream performs outside its defaulting happen here too, because users see their
result in ``kubectl get -o yaml`` and validation relies on them: the singular ``clusterIP`` is
mirrored into ``clusterIPs``, and an ingress IP of a load balancer gets ``ipMode: VIP``.  What the
API server's allocators decide (cluster IPs, node ports, the health check node port, IP
families) is left to them, so validation does not demand those values.

The IP helpers (``parse_ip``, ``validate_non_special_ip``) are shared with discovery.k8s.io.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Self

import msgspec

from kube.api import names
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.kinds.core_v1.pod import PROTOCOLS
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.meta_v1 import Condition, Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import (
    CIDR,
    DNS1035_LABEL,
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    IP_ADDRESS,
    QUALIFIED_NAME,
    IntOrString,
    Struct,
    atomic,
    meta,
)

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
_IP_SERVICE_TYPES = SERVICE_TYPES[:3]
SESSION_AFFINITIES = ("ClientIP", "None")
TRAFFIC_POLICIES = ("Cluster", "Local")
IP_FAMILIES = ("IPv4", "IPv6")
IP_FAMILY_POLICIES = ("SingleStack", "PreferDualStack", "RequireDualStack")
TRAFFIC_DISTRIBUTIONS = ("PreferClose", "PreferSameZone", "PreferSameNode")
LOAD_BALANCER_IP_MODES = ("Proxy", "VIP")
CLUSTER_IP_NONE = "None"
DEFAULT_CLIENT_IP_TIMEOUT = 10800
MAX_CLIENT_IP_TIMEOUT = 86400
LOAD_BALANCER_SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges"
TOPOLOGY_MODE_ANNOTATION = "service.kubernetes.io/topology-mode"
TOPOLOGY_HINTS_ANNOTATION = "service.kubernetes.io/topology-aware-hints"

Protocol = Annotated[str | None, meta(enum=PROTOCOLS)]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


# IP addresses, as upstream's netutils reads them.


def parse_ip(value: str) -> IPAddress | None:
    """An IP address the way Go's ``ParseIPSloppy`` reads it (IPv4 parts may carry leading
    zeros, read as decimal), unwrapping IPv4-mapped IPv6; None when it is no address."""
    if value.count(".") == 3 and ":" not in value:
        parts = value.split(".")
        if all(p.isascii() and p.isdigit() and len(p) <= 3 for p in parts):
            value = ".".join(str(int(p)) for p in parts)
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def validate_non_special_ip(value: str, path: Path, errors: ErrorList) -> None:
    """An address pods or clients may really use: not unspecified, loopback or link-local."""
    address = parse_ip(value)
    if address is None:
        errors.invalid(path, value, "must be a valid IP address")
        return
    if address.is_unspecified:
        errors.invalid(path, value, f"may not be unspecified ({value})")
    if address.is_loopback:
        errors.invalid(path, value, "may not be in the loopback range (127.0.0.0/8, ::1/128)")
    if address.is_link_local:
        errors.invalid(
            path, value, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"
        )
    if _is_link_local_multicast(address):
        errors.invalid(
            path,
            value,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        )


def _is_link_local_multicast(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return address in ipaddress.IPv4Network("224.0.0.0/24")
    packed = address.packed
    return packed[0] == 0xFF and packed[1] & 0x0F == 0x02


def _validate_ip(value: str, path: Path, errors: ErrorList) -> bool:
    """Report ``value`` unless it is an IP address; whether it is one."""
    problems = names.check_format(IP_ADDRESS, value)
    errors.extend_checked(path, value, problems)
    return not problems


def _validate_port_number(value: int | None, path: Path, errors: ErrorList) -> None:
    """A port number 1-65535 (a missing one reads as 0, as upstream's zero value does)."""
    port = value or 0
    errors.extend_checked(path, port, names.is_valid_port_num(port))


# Service.


class ClientIPConfig(Struct):
    """How long a client sticks to the same endpoint."""

    timeout_seconds: Annotated[int | None, meta(proto=1)] = None


class SessionAffinityConfig(Struct):
    """Settings of the session affinity in use."""

    client_ip: Annotated[ClientIPConfig | None, meta(proto=1)] = msgspec.field(
        default=None, name="clientIP"
    )


class ServicePort(Struct):
    """One port the service exposes and the pod port it forwards to."""

    name: Annotated[str | None, meta(format=DNS1123_LABEL, proto=1, omitempty=True)] = None
    protocol: Annotated[
        str | None, meta(required=True, enum=PROTOCOLS, proto=2, omitempty=True)
    ] = None
    app_protocol: Annotated[str | None, meta(format=QUALIFIED_NAME, proto=6)] = None
    port: Annotated[int | None, meta(proto=3)] = None
    target_port: Annotated[IntOrString | None, meta(proto=4)] = None
    node_port: Annotated[int | None, meta(proto=5, omitempty=True)] = None

    def set_defaults(self) -> None:
        if self.protocol is None:
            self.protocol = "TCP"
        if self.target_port in (None, 0, ""):
            self.target_port = self.port

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_port_number(self.port, path.child("port"), errors)
        target, target_path = self.target_port, path.child("targetPort")
        if isinstance(target, str):
            errors.extend_checked(target_path, target, names.is_iana_svc_name(target))
        elif target is not None:
            _validate_port_number(target, target_path, errors)


class PortStatus(Struct):
    """The state of one port of a load balancer ingress point."""

    port: Annotated[int | None, meta(proto=1)] = None
    protocol: Annotated[Protocol, meta(proto=2)] = None
    error: Annotated[str | None, meta(proto=3)] = None


class LoadBalancerIngress(Struct):
    """One ingress point of a load balancer: an IP or a host name."""

    ip: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    hostname: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    ip_mode: Annotated[str | None, meta(enum=LOAD_BALANCER_IP_MODES, proto=3)] = None
    ports: Annotated[list[PortStatus] | None, atomic(proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.ip:
            _validate_ip(self.ip, path.child("ip"), errors)
            if self.ip_mode is None:
                errors.required(path.child("ipMode"), "must be specified when `ip` is set")
        elif self.ip_mode is not None:
            errors.forbidden(path.child("ipMode"), "may not be specified when `ip` is not set")
        if self.hostname:
            hostname_path = path.child("hostname")
            for problem in names.is_dns1123_subdomain(self.hostname):
                errors.invalid(hostname_path, self.hostname, problem)
            if parse_ip(self.hostname) is not None:
                errors.invalid(
                    hostname_path, self.hostname, "must be a DNS name, not an IP address"
                )


class LoadBalancerStatus(Struct):
    """The ingress points of a load balancer."""

    ingress: Annotated[list[LoadBalancerIngress] | None, atomic(proto=1)] = None

    def addresses(self) -> list[str]:
        """The distinct IPs (or, without one, host names) of the ingress points, sorted."""
        found = {i.ip or i.hostname for i in self.ingress or () if i.ip or i.hostname}
        return sorted(a for a in found if a)


class ServiceStatus(Struct):
    """The load balancer of the service, and conditions about it."""

    load_balancer: Annotated[LoadBalancerStatus | None, meta(proto=1)] = None
    conditions: Annotated[list[Condition] | None, meta(merge_key="type", proto=2)] = None


class ServiceSpec(Struct):
    """What the service exposes, to whom, and how traffic reaches its endpoints."""

    ports: Annotated[
        list[ServicePort] | None,
        meta(
            merge_key="port",
            list_map_keys=("port", "protocol"),
            doc="The ports the service exposes.",
            proto=1,
        ),
    ] = None
    selector: Annotated[
        dict[str, str] | None,
        meta(map_type="atomic", doc="Labels of the pods traffic is routed to.", proto=2),
    ] = None
    cluster_ip: Annotated[
        str | None,
        meta(
            doc="The virtual IP of the service, or None for a headless service.",
            proto=3,
            omitempty=True,
        ),
    ] = msgspec.field(default=None, name="clusterIP")
    cluster_ips: Annotated[list[str] | None, atomic(proto=18)] = msgspec.field(
        default=None, name="clusterIPs"
    )
    type: Annotated[
        str | None,
        meta(
            required=True,
            enum=SERVICE_TYPES,
            doc="ClusterIP, NodePort, LoadBalancer or ExternalName.",
            proto=4,
            omitempty=True,
        ),
    ] = None
    external_ips: Annotated[list[str] | None, atomic(proto=5)] = msgspec.field(
        default=None, name="externalIPs"
    )
    session_affinity: Annotated[
        str | None, meta(required=True, enum=SESSION_AFFINITIES, proto=7, omitempty=True)
    ] = None
    load_balancer_ip: Annotated[str | None, meta(proto=8, omitempty=True)] = msgspec.field(
        default=None, name="loadBalancerIP"
    )
    load_balancer_source_ranges: Annotated[list[str] | None, atomic(proto=9)] = None
    external_name: Annotated[str | None, meta(proto=10, omitempty=True)] = None
    external_traffic_policy: Annotated[str | None, meta(proto=11, omitempty=True)] = None
    health_check_node_port: Annotated[int | None, meta(proto=12, omitempty=True)] = None
    publish_not_ready_addresses: Annotated[bool | None, meta(proto=13, omitempty=True)] = None
    session_affinity_config: Annotated[SessionAffinityConfig | None, meta(proto=14)] = None
    ip_families: Annotated[
        list[Annotated[str, meta(enum=IP_FAMILIES)]] | None, atomic(proto=19)
    ] = None
    ip_family_policy: Annotated[str | None, meta(enum=IP_FAMILY_POLICIES, proto=17)] = None
    allocate_load_balancer_node_ports: Annotated[bool | None, meta(proto=20)] = None
    load_balancer_class: Annotated[str | None, meta(proto=21)] = None
    internal_traffic_policy: Annotated[str | None, meta(enum=TRAFFIC_POLICIES, proto=22)] = None
    traffic_distribution: Annotated[str | None, meta(enum=TRAFFIC_DISTRIBUTIONS, proto=23)] = None

    @property
    def headless(self) -> bool:
        """Whether the service has no virtual IP (``clusterIP: None``)."""
        return self.cluster_ips == [CLUSTER_IP_NONE]

    @property
    def externally_accessible(self) -> bool:
        """Whether traffic from outside the cluster reaches it (node ports, a load balancer
        or external IPs)."""
        return self.type in ("LoadBalancer", "NodePort") or (
            self.type == "ClusterIP" and bool(self.external_ips)
        )

    @property
    def needs_health_check(self) -> bool:
        """Whether a load balancer must probe nodes for local endpoints."""
        return self.type == "LoadBalancer" and self.external_traffic_policy == "Local"

    def set_defaults(self) -> None:
        if not self.session_affinity:
            self.session_affinity = "None"
        if self.session_affinity == "None":
            self.session_affinity_config = None
        elif self.session_affinity == "ClientIP":
            config = self.session_affinity_config
            if (
                config is None
                or config.client_ip is None
                or config.client_ip.timeout_seconds is None
            ):
                self.session_affinity_config = SessionAffinityConfig(
                    client_ip=ClientIPConfig(timeout_seconds=DEFAULT_CLIENT_IP_TIMEOUT)
                )
        if not self.type:
            self.type = "ClusterIP"
        if self.externally_accessible and not self.external_traffic_policy:
            self.external_traffic_policy = "Cluster"
        if self.internal_traffic_policy is None and self.type in _IP_SERVICE_TYPES:
            self.internal_traffic_policy = "Cluster"
        if self.type == "LoadBalancer" and self.allocate_load_balancer_node_ports is None:
            self.allocate_load_balancer_node_ports = True
        if self.cluster_ip and not self.cluster_ips:
            self.cluster_ips = [self.cluster_ip]

    def validate(self, path: Path, errors: ErrorList) -> None:
        ports = self.ports or []
        if not ports and not self.headless and self.type != "ExternalName":
            errors.required(path.child("ports"))
        self._validate_type_rules(path, errors)
        self._validate_ports(ports, path.child("ports"), errors)
        names.validate_labels(self.selector, path.child("selector"), errors)
        self._validate_session_affinity(path, errors)
        if self.type != "ExternalName":
            self._validate_cluster_ips(path, errors)
        for i, ip in enumerate(self.external_ips or ()):
            if _validate_ip(ip, path.child("externalIPs").index(i), errors):
                validate_non_special_ip(ip, path.child("externalIPs").index(i), errors)
        self._validate_load_balancer_fields(path, errors)
        self._validate_traffic_policies(path, errors)

    def _validate_type_rules(self, path: Path, errors: ErrorList) -> None:
        ips_path = path.child("clusterIPs")
        if self.type in ("LoadBalancer", "NodePort") and self.headless:
            errors.invalid(
                ips_path.index(0),
                CLUSTER_IP_NONE,
                f"may not be set to 'None' for {self.type} services",
            )
        if self.type != "ExternalName":
            return
        for attr, name in (("cluster_ips", "clusterIPs"), ("ip_families", "ipFamilies")):
            if getattr(self, attr):
                errors.forbidden(path.child(name), "may not be set for ExternalName services")
        if self.ip_family_policy is not None:
            errors.forbidden(
                path.child("ipFamilyPolicy"), "may not be set for ExternalName services"
            )
        # The name (a CNAME) may end in a dot to say it is fully qualified.
        cname = (self.external_name or "").removesuffix(".")
        if cname:
            errors.extend_checked(
                path.child("externalName"), cname, names.check_format(DNS1123_SUBDOMAIN, cname)
            )
        else:
            errors.required(path.child("externalName"))

    def _validate_ports(self, ports: list[ServicePort], path: Path, errors: ErrorList) -> None:
        seen_names: set[str] = set()
        seen_node_ports: set[tuple[str | None, int]] = set()
        seen_ports: set[tuple[str | None, int | None]] = set()
        for i, port in enumerate(ports):
            port_path = path.index(i)
            if port.name:
                if port.name in seen_names:
                    errors.duplicate(port_path.child("name"), port.name)
                seen_names.add(port.name)
            elif len(ports) > 1:
                errors.required(port_path.child("name"))
            if port.node_port:
                if self.type == "ClusterIP":
                    errors.forbidden(
                        port_path.child("nodePort"), "may not be used when `type` is 'ClusterIP'"
                    )
                if (port.protocol, port.node_port) in seen_node_ports:
                    errors.duplicate(port_path.child("nodePort"), port.node_port)
                seen_node_ports.add((port.protocol, port.node_port))
            if (port.protocol, port.port) in seen_ports:
                errors.duplicate(port_path, {"port": port.port, "protocol": port.protocol})
            seen_ports.add((port.protocol, port.port))

    def _validate_session_affinity(self, path: Path, errors: ErrorList) -> None:
        config_path = path.child("sessionAffinityConfig")
        if self.session_affinity == "None" and self.session_affinity_config is not None:
            errors.forbidden(config_path, "must not be set when session affinity is None")
        if self.session_affinity != "ClientIP":
            return
        detail = "when session affinity type is ClientIP"
        config = self.session_affinity_config
        if config is None:
            errors.required(config_path, detail)
        elif config.client_ip is None:
            errors.required(config_path.child("clientIP"), detail)
        elif config.client_ip.timeout_seconds is None:
            errors.required(config_path.child("clientIP").child("timeoutSeconds"), detail)
        elif not 0 < config.client_ip.timeout_seconds <= MAX_CLIENT_IP_TIMEOUT:
            errors.invalid(
                config_path.child("clientIP").child("timeoutSeconds"),
                config.client_ip.timeout_seconds,
                f"must be greater than 0 and less than {MAX_CLIENT_IP_TIMEOUT}",
            )

    def _validate_cluster_ips(self, path: Path, errors: ErrorList) -> None:
        """``clusterIP``, ``clusterIPs`` and ``ipFamilies`` agree with each other."""
        ips, ips_path = self.cluster_ips or [], path.child("clusterIPs")
        if self.cluster_ip:
            if not ips:
                errors.required(ips_path)
            elif ips[0] != self.cluster_ip:
                errors.invalid(ips_path, ips, "first value must match `clusterIP`")
        elif ips:
            errors.invalid(ips_path, ips, "must be empty when `clusterIP` is not specified")
        families = self.ip_families or []
        for i, family in enumerate(families):
            if family in families[:i]:
                errors.duplicate(path.child("ipFamilies").index(i), family)
        all_valid = True
        for i, ip in enumerate(ips):
            if i == 0 and ip == CLUSTER_IP_NONE:
                if len(ips) > 1:
                    all_valid = False
                    errors.invalid(ips_path, ips, "'None' must be the first and only value")
                continue
            all_valid = _validate_ip(ip, ips_path.index(i), errors) and all_valid
        if len(ips) > 2:
            errors.invalid(ips_path, ips, "may only hold up to 2 values")
        if not all_valid:
            return
        addresses = [parse_ip(ip) for ip in ips]
        if len(ips) > 1 and len({type(a) for a in addresses}) != len(ips):
            errors.invalid(ips_path, ips, "may specify no more than one IP for each IP family")
        if self.headless:
            return
        for i, (ip, address, family) in enumerate(zip(ips, addresses, families, strict=False)):
            is_v6 = isinstance(address, ipaddress.IPv6Address)
            if (family == "IPv4" and is_v6) or (family == "IPv6" and not is_v6):
                errors.invalid(
                    ips_path.index(i),
                    ip,
                    f"expected an {family} value as indicated by `ipFamilies[{i}]`",
                )

    def _validate_load_balancer_fields(self, path: Path, errors: ErrorList) -> None:
        is_lb = self.type == "LoadBalancer"
        only_lb = "may only be used when `type` is 'LoadBalancer'"
        ranges_path = path.child("loadBalancerSourceRanges")
        if self.load_balancer_source_ranges and not is_lb:
            errors.forbidden(ranges_path, only_lb)
        for i, value in enumerate(self.load_balancer_source_ranges or ()):
            # Values may be space-padded, a leftover of the annotation they replaced.
            value = value.strip()
            errors.extend_checked(ranges_path.index(i), value, names.check_format(CIDR, value))
        if self.allocate_load_balancer_node_ports is not None and not is_lb:
            errors.forbidden(path.child("allocateLoadBalancerNodePorts"), only_lb)
        if is_lb and self.allocate_load_balancer_node_ports is None:
            errors.required(path.child("allocateLoadBalancerNodePorts"))
        class_path = path.child("loadBalancerClass")
        if self.load_balancer_class is not None:
            if is_lb:
                errors.extend_checked(
                    class_path,
                    self.load_balancer_class,
                    names.is_qualified_name(self.load_balancer_class),
                )
            else:
                errors.forbidden(class_path, only_lb)

    def _validate_traffic_policies(self, path: Path, errors: ErrorList) -> None:
        external_path = path.child("externalTrafficPolicy")
        if not self.externally_accessible:
            if self.external_traffic_policy:
                errors.invalid(
                    external_path,
                    self.external_traffic_policy,
                    "may only be set for externally-accessible services",
                )
        elif not self.external_traffic_policy:
            errors.required(external_path)
        elif self.external_traffic_policy not in TRAFFIC_POLICIES:
            errors.not_supported(external_path, self.external_traffic_policy, TRAFFIC_POLICIES)
        check_path = path.child("healthCheckNodePort")
        if self.health_check_node_port and not self.needs_health_check:
            errors.invalid(
                check_path,
                self.health_check_node_port,
                "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is "
                "'Local'",
            )
        elif self.health_check_node_port:
            _validate_port_number(self.health_check_node_port, check_path, errors)
        if self.internal_traffic_policy is None and self.type in _IP_SERVICE_TYPES:
            errors.required(path.child("internalTrafficPolicy"))


def _external_ip_cell(service: Service) -> str:
    spec = service.spec or ServiceSpec()
    external = list(spec.external_ips or ())
    if spec.type in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if spec.type == "LoadBalancer":
        load_balancer = service.status.load_balancer if service.status else None
        ingress = load_balancer.addresses() if load_balancer else []
        return ",".join(ingress + external) or "<pending>"
    if spec.type == "ExternalName":
        return spec.external_name or ""
    return "<unknown>"


def _ports_cell(ports: list[ServicePort] | None) -> str:
    pieces = [
        f"{p.port or 0}:{p.node_port}/{p.protocol or ''}"
        if p.node_port
        else f"{p.port or 0}/{p.protocol or ''}"
        for p in ports or ()
    ]
    return ",".join(pieces) or "<none>"


def _selector_cell(selector: dict[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((selector or {}).items())) or "<none>"


def _cluster_ip_cell(spec: ServiceSpec | None) -> str:
    if spec is None:
        return "<none>"
    if spec.cluster_ips:
        return spec.cluster_ips[0]
    return spec.cluster_ip or "<none>"


@kind(
    group="",
    version="v1",
    plural="services",
    short_names=("svc",),
    categories=("all",),
    subresources=("status", "proxy"),
    name_format=DNS1035_LABEL,
    columns=(
        NAME_COLUMN,
        Column("Type", lambda o, now: o.spec.type if o.spec else ""),
        Column("Cluster-IP", lambda o, now: _cluster_ip_cell(o.spec)),
        Column("External-IP", lambda o, now: _external_ip_cell(o)),
        Column("Port(s)", lambda o, now: _ports_cell(o.spec.ports if o.spec else None)),
        AGE_COLUMN,
        Column(
            "Selector",
            lambda o, now: _selector_cell(o.spec.selector if o.spec else None),
            priority=1,
        ),
    ),
    field_selectors={
        "spec.clusterIP": lambda o: o.spec.cluster_ip if o.spec else None,
        "spec.type": lambda o: o.spec.type if o.spec else None,
    },
)
class Service(Resource):
    """A stable address and load balancing for the pods a selector picks."""

    spec: Annotated[ServiceSpec | None, meta(doc="How the service is exposed.", proto=2)] = None
    status: Annotated[
        ServiceStatus | None, meta(doc="The load balancer, once one is provisioned.", proto=3)
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = ServiceSpec()
        if self.spec.type == "LoadBalancer" and self.status and self.status.load_balancer:
            for ingress in self.status.load_balancer.ingress or ():
                if ingress.ip and ingress.ip_mode is None:
                    ingress.ip_mode = "VIP"

    def validate(self, path: Path, errors: ErrorList) -> None:
        annotations = self.metadata.annotations or {}
        mode = annotations.get(TOPOLOGY_MODE_ANNOTATION)
        hints = annotations.get(TOPOLOGY_HINTS_ANNOTATION)
        if mode is not None and hints is not None and mode != hints:
            errors.invalid(
                path.child("metadata").child("annotations").key(TOPOLOGY_MODE_ANNOTATION),
                mode,
                f"must match annotations[{TOPOLOGY_HINTS_ANNOTATION}] when both are specified",
            )
        spec = self.spec or ServiceSpec()
        ranges = annotations.get(LOAD_BALANCER_SOURCE_RANGES_ANNOTATION)
        if ranges is not None and not spec.load_balancer_source_ranges:
            self._validate_source_ranges_annotation(ranges, spec, errors)
        ingress = (
            self.status.load_balancer.ingress if self.status and self.status.load_balancer else None
        )
        if ingress and spec.type != "LoadBalancer":
            errors.forbidden(
                path.child("status").child("loadBalancer").child("ingress"),
                "may only be used when `spec.type` is 'LoadBalancer'",
            )

    @staticmethod
    def _validate_source_ranges_annotation(
        value: str, spec: ServiceSpec, errors: ErrorList
    ) -> None:
        path = (
            ROOT.child("metadata").child("annotations").key(LOAD_BALANCER_SOURCE_RANGES_ANNOTATION)
        )
        if spec.type != "LoadBalancer":
            errors.forbidden(path, "may only be used when `type` is 'LoadBalancer'")
        for cidr in filter(None, (c.strip() for c in value.strip().split(","))):
            errors.extend_checked(path, cidr, names.check_format(CIDR, cidr))

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        new_spec, old_spec = self.spec or ServiceSpec(), old.spec or ServiceSpec()
        if "ExternalName" not in (new_spec.type, old_spec.type):
            _validate_cluster_ips_update(new_spec, old_spec, errors)
            _validate_ip_families_update(new_spec, old_spec, errors)
        if (
            new_spec.type == old_spec.type == "LoadBalancer"
            and new_spec.load_balancer_class != old_spec.load_balancer_class
        ):
            errors.invalid(
                ROOT.child("spec").child("loadBalancerClass"),
                new_spec.load_balancer_class,
                "may not change once set",
            )
        if (
            new_spec.needs_health_check
            and old_spec.needs_health_check
            and new_spec.health_check_node_port != old_spec.health_check_node_port
        ):
            errors.forbidden(ROOT.child("spec").child("healthCheckNodePort"), "field is immutable")


_SPEC = ROOT.child("spec")


def _validate_cluster_ips_update(new: ServiceSpec, old: ServiceSpec, errors: ErrorList) -> None:
    """Cluster IPs never change; a secondary one may only be added or released."""
    if new.headless and old.headless:
        return
    new_ips, old_ips = new.cluster_ips or [], old.cluster_ips or []
    path = _SPEC.child("clusterIPs")
    changed = "may not change once set"
    if len(new_ips) == len(old_ips):
        for i, ip in enumerate(old_ips):
            if ip != new_ips[i]:
                errors.invalid(path.index(i), new_ips, changed)
    elif len(new_ips) < len(old_ips):
        if not new_ips:
            errors.invalid(path.index(0), new_ips, "primary clusterIP can not be unset")
        elif new_ips[0] != old_ips[0]:
            errors.invalid(path.index(0), new_ips, changed)
        if len(new_ips) == 1 and new.ip_family_policy != "SingleStack":
            errors.invalid(
                _SPEC.child("ipFamilyPolicy"),
                new.ip_family_policy,
                "must be set to 'SingleStack' when releasing the secondary clusterIP",
            )
    elif old_ips and new_ips[0] != old_ips[0]:
        errors.invalid(path.index(0), new_ips, changed)


def _validate_ip_families_update(new: ServiceSpec, old: ServiceSpec, errors: ErrorList) -> None:
    """IP families never change; a secondary one may only be added or released."""
    if new.headless or old.headless:
        return
    new_families, old_families = new.ip_families or [], old.ip_families or []
    path = _SPEC.child("ipFamilies").index(0)
    changed = "may not change once set"
    if len(new_families) == len(old_families):
        if new_families != old_families:
            errors.invalid(path, new_families, changed)
    elif len(new_families) < len(old_families):
        if not new.cluster_ips:
            errors.invalid(path, new_families, "primary ipFamily can not be unset")
        if new_families and new_families[0] != old_families[0]:
            errors.invalid(path, new.cluster_ips, changed)
        if len(new_families) == 1 and new.ip_family_policy != "SingleStack":
            errors.invalid(
                _SPEC.child("ipFamilyPolicy"),
                new.ip_family_policy,
                "must be set to 'SingleStack' when releasing the secondary ipFamily",
            )
    elif old_families and new_families[0] != old_families[0]:
        errors.invalid(path, new.cluster_ips, changed)


# Endpoints.


class EndpointAddress(Struct):
    """One address of an endpoint, and the object (usually a pod) behind it."""

    ip: Annotated[str | None, meta(proto=1)] = None
    hostname: Annotated[str | None, meta(format=DNS1123_LABEL, proto=3, omitempty=True)] = None
    node_name: Annotated[str | None, meta(format=DNS1123_SUBDOMAIN, proto=4)] = None
    target_ref: Annotated[ObjectReference | None, meta(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        ip = self.ip or ""
        if _validate_ip(ip, path.child("ip"), errors):
            validate_non_special_ip(ip, path.child("ip"), errors)


class EndpointPort(Struct):
    """A port the endpoints of a subset serve on."""

    name: Annotated[str | None, meta(format=DNS1123_LABEL, proto=1, omitempty=True)] = None
    port: Annotated[int | None, meta(proto=2)] = None
    protocol: Annotated[
        str | None, meta(required=True, enum=PROTOCOLS, proto=3, omitempty=True)
    ] = None
    app_protocol: Annotated[str | None, meta(format=QUALIFIED_NAME, proto=4)] = None

    def set_defaults(self) -> None:
        if self.protocol is None:
            self.protocol = "TCP"

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_port_number(self.port, path.child("port"), errors)


class EndpointSubset(Struct):
    """Addresses that all serve the same ports."""

    addresses: Annotated[list[EndpointAddress] | None, atomic(proto=1)] = None
    not_ready_addresses: Annotated[list[EndpointAddress] | None, atomic(proto=2)] = None
    ports: Annotated[list[EndpointPort] | None, atomic(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.addresses and not self.not_ready_addresses:
            errors.required(path, "must specify `addresses` or `notReadyAddresses`")
        ports = self.ports or []
        if len(ports) > 1:
            for i, port in enumerate(ports):
                if not port.name:
                    errors.required(path.child("ports").index(i).child("name"))


def _host_port(ip: str, port: int | None) -> str:
    host = f"[{ip}]" if ":" in ip else ip
    return f"{host}:{port or 0}"


MAX_ENDPOINTS_SHOWN = 3


def _endpoints_cell(endpoints: Endpoints) -> str:
    """Up to three ``ip:port`` pairs, then how many more there are (upstream's format)."""
    if not endpoints.subsets:
        return "<none>"
    shown: list[str] = []
    count = 0
    for subset in endpoints.subsets:
        ips = [a.ip or "" for a in subset.addresses or ()]
        pairs = (
            [_host_port(ip, p.port) for p in subset.ports for ip in ips] if subset.ports else ips
        )
        count += len(pairs)
        shown += pairs[: MAX_ENDPOINTS_SHOWN - len(shown)]
    text = ",".join(shown)
    if count > MAX_ENDPOINTS_SHOWN:
        return f"{text} + {count - MAX_ENDPOINTS_SHOWN} more..."
    return text


@kind(
    group="",
    version="v1",
    plural="endpoints",
    singular="endpoints",
    short_names=("ep",),
    columns=(
        NAME_COLUMN,
        Column("Endpoints", lambda o, now: _endpoints_cell(o)),
        AGE_COLUMN,
    ),
)
class Endpoints(Resource):
    """The addresses and ports that implement a service (superseded by EndpointSlices)."""

    subsets: Annotated[
        list[EndpointSubset] | None,
        atomic(doc="Groups of addresses that serve the same ports.", proto=2),
    ] = None
