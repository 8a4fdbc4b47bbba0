"""core/v1 Service and Endpoints: defaults, validation (create and update), printer cells,
field selectors and registration."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.codec import from_builtins, to_builtins
from kube.api.errors import ErrorType
from kube.api.kinds.core_v1.service import Endpoints, Service
from tests.kube.api.kinds.helpers import (
    CREATED,
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    cells,
    decode,
    merge,
    problems,
)

SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "default", "creationTimestamp": CREATED},
    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
}


def service(**spec: Any) -> dict[str, Any]:
    """SERVICE with ``spec`` merged into its spec."""
    return merge(SERVICE, {"spec": spec})


TWO_PORTS = [{"name": "http", "port": 80}, {"name": "https", "port": 443}]

# Defaults.


def test_minimal_service_gets_upstream_defaults() -> None:
    assert to_builtins(decode(SERVICE, Service))["spec"] == {
        "ports": [{"protocol": "TCP", "port": 80, "targetPort": 80}],
        "selector": {"app": "web"},
        "type": "ClusterIP",
        "sessionAffinity": "None",
        "internalTrafficPolicy": "Cluster",
    }


def test_service_without_spec_gets_one() -> None:
    raw = merge(SERVICE, {"spec": None})
    assert to_builtins(decode(raw, Service))["spec"] == {
        "type": "ClusterIP",
        "sessionAffinity": "None",
        "internalTrafficPolicy": "Cluster",
    }


DEFAULT_CASES: list[tuple[str, dict[str, Any], str, Any]] = [
    ("nodeport-external-policy", {"type": "NodePort"}, "externalTrafficPolicy", "Cluster"),
    ("lb-external-policy", {"type": "LoadBalancer"}, "externalTrafficPolicy", "Cluster"),
    ("lb-allocates-node-ports", {"type": "LoadBalancer"}, "allocateLoadBalancerNodePorts", True),
    (
        "lb-keeps-allocate-false",
        {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False},
        "allocateLoadBalancerNodePorts",
        False,
    ),
    (
        "external-ips-external-policy",
        {"externalIPs": ["192.0.2.10"]},
        "externalTrafficPolicy",
        "Cluster",
    ),
    ("clusterip-no-external-policy", {}, "externalTrafficPolicy", None),
    (
        "keeps-local-policy",
        {"type": "NodePort", "externalTrafficPolicy": "Local"},
        "externalTrafficPolicy",
        "Local",
    ),
    (
        "client-ip-timeout",
        {"sessionAffinity": "ClientIP"},
        "sessionAffinityConfig",
        {"clientIP": {"timeoutSeconds": 10800}},
    ),
    (
        "client-ip-keeps-timeout",
        {
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}},
        },
        "sessionAffinityConfig",
        {"clientIP": {"timeoutSeconds": 60}},
    ),
    (
        "affinity-none-drops-config",
        {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}},
        "sessionAffinityConfig",
        None,
    ),
    ("cluster-ip-mirrored", {"clusterIP": "10.96.0.10"}, "clusterIPs", ["10.96.0.10"]),
    ("headless-mirrored", {"clusterIP": "None"}, "clusterIPs", ["None"]),
    (
        "keeps-cluster-ips",
        {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10", "fd00::a"]},
        "clusterIPs",
        ["10.96.0.10", "fd00::a"],
    ),
    (
        "external-name-no-internal-policy",
        {"type": "ExternalName", "externalName": "db.example.com"},
        "internalTrafficPolicy",
        None,
    ),
    ("keeps-internal-local", {"internalTrafficPolicy": "Local"}, "internalTrafficPolicy", "Local"),
    (
        "named-target-port",
        {"ports": [{"port": 80, "targetPort": "http"}]},
        "ports",
        [{"protocol": "TCP", "port": 80, "targetPort": "http"}],
    ),
    (
        "zero-target-port",
        {"ports": [{"port": 80, "targetPort": 0, "protocol": "UDP"}]},
        "ports",
        [{"protocol": "UDP", "port": 80, "targetPort": 80}],
    ),
]


@pytest.mark.parametrize(
    ("spec", "field", "expected"),
    [c[1:] for c in DEFAULT_CASES],
    ids=[c[0] for c in DEFAULT_CASES],
)
def test_service_defaults(spec: dict[str, Any], field: str, expected: Any) -> None:
    assert to_builtins(decode(service(**spec), Service))["spec"].get(field) == expected


def test_load_balancer_ingress_ip_mode_defaults_to_vip() -> None:
    raw = merge(
        service(type="LoadBalancer"),
        {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}, {"hostname": "lb.io"}]}}},
    )
    assert to_builtins(decode(raw, Service))["status"]["loadBalancer"]["ingress"] == [
        {"ip": "203.0.113.7", "ipMode": "VIP"},
        {"hostname": "lb.io"},
    ]


def test_defaults_are_idempotent() -> None:
    raw = service(type="LoadBalancer", sessionAffinity="ClientIP", clusterIP="10.96.0.10")
    once = to_builtins(decode(raw, Service))
    assert to_builtins(decode(once, Service)) == once


# Validation.


VALIDATION_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", SERVICE, []),
    ("valid-two-ports", service(ports=TWO_PORTS), []),
    (
        "valid-lb",
        service(
            type="LoadBalancer",
            externalTrafficPolicy="Local",
            healthCheckNodePort=30999,
            loadBalancerSourceRanges=[" 10.0.0.0/8 "],
            loadBalancerClass="example.com/lb",
        ),
        [],
    ),
    (
        "valid-dual-stack",
        service(
            clusterIP="10.96.0.10",
            clusterIPs=["10.96.0.10", "fd00::a"],
            ipFamilies=["IPv4", "IPv6"],
            ipFamilyPolicy="RequireDualStack",
        ),
        [],
    ),
    (
        "valid-external-name",
        service(type="ExternalName", externalName="db.example.com.", ports=None),
        [],
    ),
    ("valid-headless-without-ports", service(clusterIP="None", ports=None), []),
    ("valid-client-ip", service(sessionAffinity="ClientIP"), []),
    ("ports-required", service(ports=None), [("spec.ports", REQUIRED)]),
    # The target port defaults to the port, so it is reported too (as upstream does).
    (
        "port-zero",
        service(ports=[{"port": 0}]),
        [("spec.ports[0].port", INVALID), ("spec.ports[0].targetPort", INVALID)],
    ),
    ("port-missing", service(ports=[{"targetPort": 8080}]), [("spec.ports[0].port", INVALID)]),
    (
        "port-too-big",
        service(ports=[{"port": 70000}]),
        [("spec.ports[0].port", INVALID), ("spec.ports[0].targetPort", INVALID)],
    ),
    (
        "names-required",
        service(ports=[{"port": 80}, {"port": 443}]),
        [("spec.ports[0].name", REQUIRED), ("spec.ports[1].name", REQUIRED)],
    ),
    (
        "names-unique",
        service(ports=[{"name": "web", "port": 80}, {"name": "web", "port": 81}]),
        [("spec.ports[1].name", DUPLICATE)],
    ),
    (
        "name-dns-label",
        service(ports=[{"name": "Web", "port": 80}]),
        [("spec.ports[0].name", INVALID)],
    ),
    (
        "protocol",
        service(ports=[{"port": 80, "protocol": "ICMP"}]),
        [("spec.ports[0].protocol", NOT_SUPPORTED)],
    ),
    (
        "target-port-number",
        service(ports=[{"port": 80, "targetPort": 70000}]),
        [("spec.ports[0].targetPort", INVALID)],
    ),
    (
        "target-port-name",
        service(ports=[{"port": 80, "targetPort": "no_underscores"}]),
        [("spec.ports[0].targetPort", INVALID)],
    ),
    (
        "app-protocol",
        service(ports=[{"port": 80, "appProtocol": "-bad"}]),
        [("spec.ports[0].appProtocol", INVALID)],
    ),
    (
        "same-port-and-protocol",
        service(ports=[{"name": "a", "port": 80}, {"name": "b", "port": 80}]),
        [("spec.ports[1]", DUPLICATE)],
    ),
    (
        "same-port-other-protocol",
        service(ports=[{"name": "a", "port": 53}, {"name": "b", "port": 53, "protocol": "UDP"}]),
        [],
    ),
    (
        "node-port-on-cluster-ip",
        service(ports=[{"port": 80, "nodePort": 30080}]),
        [("spec.ports[0].nodePort", FORBIDDEN)],
    ),
    (
        "node-port-duplicate",
        service(
            type="NodePort",
            ports=[
                {"name": "a", "port": 80, "nodePort": 30080},
                {"name": "b", "port": 81, "nodePort": 30080},
            ],
        ),
        [("spec.ports[1].nodePort", DUPLICATE)],
    ),
    ("type", service(type="Internal"), [("spec.type", NOT_SUPPORTED)]),
    (
        "session-affinity",
        service(sessionAffinity="Sticky"),
        [("spec.sessionAffinity", NOT_SUPPORTED)],
    ),
    (
        "client-ip-timeout",
        service(
            sessionAffinity="ClientIP",
            sessionAffinityConfig={"clientIP": {"timeoutSeconds": 86401}},
        ),
        [("spec.sessionAffinityConfig.clientIP.timeoutSeconds", INVALID)],
    ),
    ("selector-label", service(selector={"app": "no spaces"}), [("spec.selector", INVALID)]),
    (
        "external-name-required",
        service(type="ExternalName", ports=None),
        [("spec.externalName", REQUIRED)],
    ),
    (
        "external-name-dns",
        service(type="ExternalName", externalName="db_primary.example.com"),
        [("spec.externalName", INVALID)],
    ),
    (
        "external-name-no-cluster-ip",
        service(type="ExternalName", externalName="db.example.com", clusterIP="10.96.0.10"),
        [("spec.clusterIPs", FORBIDDEN)],
    ),
    (
        "external-name-no-families",
        service(
            type="ExternalName",
            externalName="db.example.com",
            ipFamilies=["IPv4"],
            ipFamilyPolicy="SingleStack",
        ),
        [("spec.ipFamilies", FORBIDDEN), ("spec.ipFamilyPolicy", FORBIDDEN)],
    ),
    ("cluster-ip-not-ip", service(clusterIP="10.96.0.300"), [("spec.clusterIPs[0]", INVALID)]),
    (
        "headless-node-port",
        service(type="NodePort", clusterIP="None"),
        [("spec.clusterIPs[0]", INVALID)],
    ),
    (
        "cluster-ips-first-matches",
        service(clusterIP="10.96.0.10", clusterIPs=["10.96.0.11"]),
        [("spec.clusterIPs", INVALID)],
    ),
    (
        "cluster-ips-without-cluster-ip",
        service(clusterIPs=["10.96.0.11"]),
        [("spec.clusterIPs", INVALID)],
    ),
    (
        "cluster-ips-one-per-family",
        service(clusterIP="10.96.0.10", clusterIPs=["10.96.0.10", "10.96.0.11"]),
        [("spec.clusterIPs", INVALID)],
    ),
    (
        "cluster-ips-none-alone",
        service(clusterIP="None", clusterIPs=["None", "10.96.0.11"]),
        [("spec.clusterIPs", INVALID)],
    ),
    (
        "cluster-ip-family",
        service(clusterIP="fd00::a", ipFamilies=["IPv4"]),
        [("spec.clusterIPs[0]", INVALID)],
    ),
    ("ip-family", service(ipFamilies=["IPv5"]), [("spec.ipFamilies[0]", NOT_SUPPORTED)]),
    (
        "ip-family-duplicate",
        service(ipFamilies=["IPv4", "IPv4"]),
        [("spec.ipFamilies[1]", DUPLICATE)],
    ),
    (
        "ip-family-policy",
        service(ipFamilyPolicy="DualStack"),
        [("spec.ipFamilyPolicy", NOT_SUPPORTED)],
    ),
    ("external-ip", service(externalIPs=["not-an-ip"]), [("spec.externalIPs[0]", INVALID)]),
    (
        "external-ip-loopback",
        service(externalIPs=["127.0.0.1"]),
        [("spec.externalIPs[0]", INVALID)],
    ),
    (
        "source-ranges-need-lb",
        service(loadBalancerSourceRanges=["10.0.0.0/8"]),
        [("spec.loadBalancerSourceRanges", FORBIDDEN)],
    ),
    (
        "source-range-cidr",
        service(type="LoadBalancer", loadBalancerSourceRanges=["10.0.0.0/33"]),
        [("spec.loadBalancerSourceRanges[0]", INVALID)],
    ),
    (
        "allocate-node-ports-need-lb",
        service(allocateLoadBalancerNodePorts=True),
        [("spec.allocateLoadBalancerNodePorts", FORBIDDEN)],
    ),
    (
        "lb-class-need-lb",
        service(loadBalancerClass="example.com/lb"),
        [("spec.loadBalancerClass", FORBIDDEN)],
    ),
    (
        "lb-class-name",
        service(type="LoadBalancer", loadBalancerClass="-lb"),
        [("spec.loadBalancerClass", INVALID)],
    ),
    (
        "external-policy-not-external",
        service(externalTrafficPolicy="Local"),
        [("spec.externalTrafficPolicy", INVALID)],
    ),
    (
        "external-policy-value",
        service(type="NodePort", externalTrafficPolicy="Anywhere"),
        [("spec.externalTrafficPolicy", NOT_SUPPORTED)],
    ),
    (
        "health-check-port-needs-local-lb",
        service(type="NodePort", healthCheckNodePort=30999),
        [("spec.healthCheckNodePort", INVALID)],
    ),
    (
        "internal-policy",
        service(internalTrafficPolicy="Nowhere"),
        [("spec.internalTrafficPolicy", NOT_SUPPORTED)],
    ),
    (
        "traffic-distribution",
        service(trafficDistribution="Nearest"),
        [("spec.trafficDistribution", NOT_SUPPORTED)],
    ),
    ("name-dns1035", merge(SERVICE, {"metadata": {"name": "1web"}}), [("metadata.name", INVALID)]),
    (
        "topology-annotations-agree",
        merge(
            SERVICE,
            {
                "metadata": {
                    "annotations": {
                        "service.kubernetes.io/topology-mode": "Auto",
                        "service.kubernetes.io/topology-aware-hints": "Disabled",
                    }
                }
            },
        ),
        [("metadata.annotations[service.kubernetes.io/topology-mode]", INVALID)],
    ),
    (
        "source-ranges-annotation-needs-lb",
        merge(
            SERVICE,
            {
                "metadata": {
                    "annotations": {
                        "service.beta.kubernetes.io/load-balancer-source-ranges": "10.0.0.0/8"
                    }
                }
            },
        ),
        [
            (
                "metadata.annotations[service.beta.kubernetes.io/load-balancer-source-ranges]",
                FORBIDDEN,
            )
        ],
    ),
    (
        "ingress-needs-lb",
        merge(
            SERVICE,
            {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7", "ipMode": "VIP"}]}}},
        ),
        [("status.loadBalancer.ingress", FORBIDDEN)],
    ),
    (
        "ingress-fields",
        merge(
            service(type="LoadBalancer"),
            {
                "status": {
                    "loadBalancer": {
                        "ingress": [
                            {"ip": "203.0.113.300"},
                            {"hostname": "203.0.113.8", "ipMode": "VIP"},
                        ]
                    }
                }
            },
        ),
        [
            ("status.loadBalancer.ingress[0].ip", INVALID),
            ("status.loadBalancer.ingress[1].hostname", INVALID),
            ("status.loadBalancer.ingress[1].ipMode", FORBIDDEN),
        ],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[1:] for c in VALIDATION_CASES],
    ids=[c[0] for c in VALIDATION_CASES],
)
def test_service_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, Service)) == sorted(expected)


UNDEFAULTED_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    (
        "empty-spec",
        {},
        [("spec.ports", REQUIRED), ("spec.sessionAffinity", REQUIRED), ("spec.type", REQUIRED)],
    ),
    (
        "cluster-ips-not-mirrored",
        {
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "internalTrafficPolicy": "Cluster",
            "clusterIP": "10.96.0.10",
        },
        [("spec.clusterIPs", REQUIRED)],
    ),
    (
        "affinity-none-with-config",
        {
            "clusterIP": "None",
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "internalTrafficPolicy": "Cluster",
            "clusterIPs": ["None"],
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10}},
        },
        [("spec.sessionAffinityConfig", FORBIDDEN)],
    ),
    (
        "client-ip-without-config",
        {
            "clusterIP": "None",
            "type": "ClusterIP",
            "sessionAffinity": "ClientIP",
            "internalTrafficPolicy": "Cluster",
            "clusterIPs": ["None"],
        },
        [("spec.sessionAffinityConfig", REQUIRED)],
    ),
    (
        "lb-needs-policies",
        {
            "type": "LoadBalancer",
            "sessionAffinity": "None",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
        },
        [
            ("spec.allocateLoadBalancerNodePorts", REQUIRED),
            ("spec.externalTrafficPolicy", REQUIRED),
            ("spec.internalTrafficPolicy", REQUIRED),
        ],
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [c[1:] for c in UNDEFAULTED_CASES],
    ids=[c[0] for c in UNDEFAULTED_CASES],
)
def test_validation_without_defaults(
    spec: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    obj = from_builtins(merge(SERVICE, {"spec": None}) | {"spec": spec}, Service).obj
    assert problems(obj) == sorted(expected)


def test_service_messages_follow_upstream() -> None:
    raw = service(ports=[{"port": 80}, {"name": "x", "port": 0, "targetPort": 8080}])
    assert [str(e) for e in walk.validate(decode(raw, Service))] == [
        "spec.ports[0].name: Required value",
        "spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive",
    ]
    headless = walk.validate(decode(service(type="LoadBalancer", clusterIP="None"), Service))
    assert [str(e) for e in headless] == [
        'spec.clusterIPs[0]: Invalid value: "None": '
        "may not be set to 'None' for LoadBalancer services"
    ]


UPDATE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("unchanged", service(clusterIP="10.96.0.10"), service(clusterIP="10.96.0.10"), []),
    (
        "cluster-ip-changed",
        service(clusterIP="10.96.0.10"),
        service(clusterIP="10.96.0.11"),
        [("spec.clusterIPs[0]", INVALID)],
    ),
    (
        "cluster-ip-unset",
        service(clusterIP="10.96.0.10"),
        SERVICE,
        [("spec.clusterIPs[0]", INVALID)],
    ),
    (
        "to-external-name",
        service(clusterIP="10.96.0.10"),
        service(type="ExternalName", externalName="db.example.com"),
        [],
    ),
    ("from-headless", service(clusterIP="None"), service(clusterIP="None"), []),
    (
        "add-secondary",
        service(clusterIP="10.96.0.10", ipFamilies=["IPv4"]),
        service(
            clusterIP="10.96.0.10",
            clusterIPs=["10.96.0.10", "fd00::a"],
            ipFamilies=["IPv4", "IPv6"],
            ipFamilyPolicy="PreferDualStack",
        ),
        [],
    ),
    (
        "release-secondary-needs-single-stack",
        service(
            clusterIP="10.96.0.10",
            clusterIPs=["10.96.0.10", "fd00::a"],
            ipFamilies=["IPv4", "IPv6"],
            ipFamilyPolicy="PreferDualStack",
        ),
        service(clusterIP="10.96.0.10", ipFamilies=["IPv4"], ipFamilyPolicy="PreferDualStack"),
        [("spec.ipFamilyPolicy", INVALID), ("spec.ipFamilyPolicy", INVALID)],
    ),
    (
        "family-changed",
        service(ipFamilies=["IPv4"]),
        service(ipFamilies=["IPv6"]),
        [("spec.ipFamilies[0]", INVALID)],
    ),
    (
        "lb-class-changed",
        service(type="LoadBalancer", loadBalancerClass="example.com/a"),
        service(type="LoadBalancer", loadBalancerClass="example.com/b"),
        [("spec.loadBalancerClass", INVALID)],
    ),
    (
        "health-check-port-changed",
        service(type="LoadBalancer", externalTrafficPolicy="Local", healthCheckNodePort=30999),
        service(type="LoadBalancer", externalTrafficPolicy="Local", healthCheckNodePort=30998),
        [("spec.healthCheckNodePort", FORBIDDEN)],
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [c[1:] for c in UPDATE_CASES],
    ids=[c[0] for c in UPDATE_CASES],
)
def test_service_update(
    old: dict[str, Any], new: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    errors = walk.validate_update(decode(new, Service), decode(old, Service))
    assert sorted((e.field, e.type) for e in errors) == sorted(expected)


# Printer cells and field selectors.

CELL_CASES: list[tuple[str, dict[str, Any], list[Any]]] = [
    (
        "cluster-ip",
        service(clusterIP="10.96.0.10"),
        ["web", "ClusterIP", "10.96.0.10", "<none>", "80/TCP", "5m", "app=web"],
    ),
    ("not-allocated", SERVICE, ["web", "ClusterIP", "<none>", "<none>", "80/TCP", "5m", "app=web"]),
    (
        "headless",
        service(clusterIP="None", ports=None, selector=None),
        ["web", "ClusterIP", "None", "<none>", "<none>", "5m", "<none>"],
    ),
    (
        "external-ips",
        service(clusterIP="10.96.0.10", externalIPs=["192.0.2.1", "192.0.2.2"]),
        ["web", "ClusterIP", "10.96.0.10", "192.0.2.1,192.0.2.2", "80/TCP", "5m", "app=web"],
    ),
    (
        "node-port",
        service(
            type="NodePort",
            clusterIP="10.96.0.10",
            selector={"b": "2", "c": "3"},
            ports=[
                {"name": "http", "port": 80, "nodePort": 30080},
                {"name": "dns", "port": 53, "protocol": "UDP"},
            ],
        ),
        ["web", "NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP", "5m", "app=web,b=2,c=3"],
    ),
    (
        "lb-pending",
        service(type="LoadBalancer", clusterIP="10.96.0.10"),
        ["web", "LoadBalancer", "10.96.0.10", "<pending>", "80/TCP", "5m", "app=web"],
    ),
    (
        "lb-ingress",
        merge(
            service(type="LoadBalancer", externalIPs=["192.0.2.9"]),
            {
                "status": {
                    "loadBalancer": {
                        "ingress": [
                            {"ip": "203.0.113.9"},
                            {"hostname": "lb.example.com"},
                            {"ip": "203.0.113.10"},
                            {"ip": "203.0.113.9"},
                        ]
                    }
                }
            },
        ),
        [
            "web",
            "LoadBalancer",
            "<none>",
            "203.0.113.10,203.0.113.9,lb.example.com,192.0.2.9",
            "80/TCP",
            "5m",
            "app=web",
        ],
    ),
    (
        "external-name",
        service(type="ExternalName", externalName="db.example.com", ports=None),
        ["web", "ExternalName", "<none>", "db.example.com", "<none>", "5m", "app=web"],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in CELL_CASES], ids=[c[0] for c in CELL_CASES]
)
def test_service_cells(raw: dict[str, Any], expected: list[Any]) -> None:
    assert cells(decode(raw, Service)) == expected


def test_service_columns() -> None:
    columns = Service.kind_info.columns
    assert [c.name for c in columns] == [
        "Name",
        "Type",
        "Cluster-IP",
        "External-IP",
        "Port(s)",
        "Age",
        "Selector",
    ]
    assert [c.priority for c in columns] == [0, 0, 0, 0, 0, 0, 1]


def test_service_field_selectors() -> None:
    fields = Service.kind_info.selectable_fields(decode(service(clusterIP="None"), Service))
    assert fields == {
        "metadata.name": "web",
        "metadata.namespace": "default",
        "spec.clusterIP": "None",
        "spec.type": "ClusterIP",
    }


def test_registrations() -> None:
    svc, ep = Service.kind_info, Endpoints.kind_info
    assert (svc.plural, svc.short_names, svc.categories) == ("services", ("svc",), ("all",))
    assert svc.subresources == ("status", "proxy")
    assert svc.name_format == "dns1035-label"
    assert (ep.plural, ep.singular, ep.short_names) == ("endpoints", "endpoints", ("ep",))


# Endpoints.

ENDPOINTS: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Endpoints",
    "metadata": {"name": "web", "namespace": "default", "creationTimestamp": CREATED},
    "subsets": [{"addresses": [{"ip": "10.244.1.5"}], "ports": [{"port": 8080}]}],
}


def endpoints(*subsets: dict[str, Any]) -> dict[str, Any]:
    return merge(ENDPOINTS, {"subsets": list(subsets)})


def test_endpoint_ports_default_to_tcp() -> None:
    assert to_builtins(decode(ENDPOINTS, Endpoints))["subsets"][0]["ports"] == [
        {"port": 8080, "protocol": "TCP"}
    ]


ENDPOINTS_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", ENDPOINTS, []),
    ("valid-not-ready-only", endpoints({"notReadyAddresses": [{"ip": "fd00::5"}]}), []),
    ("addresses-required", endpoints({"ports": [{"port": 80}]}), [("subsets[0]", REQUIRED)]),
    (
        "ip",
        endpoints({"addresses": [{"ip": "10.244.1"}]}),
        [("subsets[0].addresses[0].ip", INVALID)],
    ),
    (
        "ip-required",
        endpoints({"addresses": [{"hostname": "web-0"}]}),
        [("subsets[0].addresses[0].ip", INVALID)],
    ),
    (
        "ip-loopback",
        endpoints({"notReadyAddresses": [{"ip": "127.0.0.1"}]}),
        [("subsets[0].notReadyAddresses[0].ip", INVALID)],
    ),
    (
        "ip-link-local",
        endpoints({"addresses": [{"ip": "169.254.169.254"}]}),
        [("subsets[0].addresses[0].ip", INVALID)],
    ),
    (
        "hostname",
        endpoints({"addresses": [{"ip": "10.244.1.5", "hostname": "Web_0"}]}),
        [("subsets[0].addresses[0].hostname", INVALID)],
    ),
    (
        "node-name",
        endpoints({"addresses": [{"ip": "10.244.1.5", "nodeName": "Node_1"}]}),
        [("subsets[0].addresses[0].nodeName", INVALID)],
    ),
    (
        "port-names",
        endpoints(
            {
                "addresses": [{"ip": "10.244.1.5"}],
                "ports": [{"port": 80}, {"name": "b", "port": 81}],
            }
        ),
        [("subsets[0].ports[0].name", REQUIRED)],
    ),
    (
        "port-number",
        endpoints({"addresses": [{"ip": "10.244.1.5"}], "ports": [{"port": 0}]}),
        [("subsets[0].ports[0].port", INVALID)],
    ),
    (
        "port-protocol",
        endpoints(
            {"addresses": [{"ip": "10.244.1.5"}], "ports": [{"port": 80, "protocol": "tcp"}]}
        ),
        [("subsets[0].ports[0].protocol", NOT_SUPPORTED)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [c[1:] for c in ENDPOINTS_CASES],
    ids=[c[0] for c in ENDPOINTS_CASES],
)
def test_endpoints_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, Endpoints)) == sorted(expected)


def addresses(*ips: str) -> list[dict[str, str]]:
    return [{"ip": ip} for ip in ips]


ENDPOINTS_CELLS: list[tuple[str, dict[str, Any], str]] = [
    ("none", merge(ENDPOINTS, {"subsets": None}), "<none>"),
    ("one", ENDPOINTS, "10.244.1.5:8080"),
    (
        "ports-by-address",
        endpoints(
            {
                "addresses": addresses("10.0.0.1", "10.0.0.2"),
                "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}],
            }
        ),
        "10.0.0.1:80,10.0.0.2:80,10.0.0.1:81 + 1 more...",
    ),
    (
        "more",
        endpoints(
            {"addresses": addresses(*(f"10.0.0.{i}" for i in range(1, 6))), "ports": [{"port": 80}]}
        ),
        "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 2 more...",
    ),
    ("no-ports", endpoints({"addresses": addresses("10.0.0.1", "10.0.0.2")}), "10.0.0.1,10.0.0.2"),
    (
        "ipv6",
        endpoints({"addresses": addresses("fd00::5"), "ports": [{"port": 80}]}),
        "[fd00::5]:80",
    ),
    (
        "not-ready-only",
        endpoints({"notReadyAddresses": addresses("10.0.0.1"), "ports": [{"port": 80}]}),
        "",
    ),
    (
        "across-subsets",
        endpoints(
            {"addresses": addresses("10.0.0.1"), "ports": [{"port": 80}]},
            {"addresses": addresses("10.0.1.1", "10.0.1.2", "10.0.1.3"), "ports": [{"port": 443}]},
        ),
        "10.0.0.1:80,10.0.1.1:443,10.0.1.2:443 + 1 more...",
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in ENDPOINTS_CELLS], ids=[c[0] for c in ENDPOINTS_CELLS]
)
def test_endpoints_cells(raw: dict[str, Any], expected: str) -> None:
    assert cells(decode(raw, Endpoints)) == ["web", expected, "5m"]
