"""networking.k8s.io/v1 NetworkPolicy, Ingress, IngressClass, ServiceCIDR and IPAddress:
defaults, validation with upstream's messages, printer cells and registration."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.codec import to_builtins
from kube.api.errors import ErrorType
from kube.api.kinds.networking_v1 import (
    Ingress,
    IngressClass,
    IPAddress,
    NetworkPolicy,
    ServiceCIDR,
)
from kube.api.meta_v1 import Resource
from tests.kube.api.kinds.helpers import (
    CREATED,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    cells,
    decode,
    merge,
    ordered,
    problems,
    update_problems,
)

Cases = list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]]

# NetworkPolicy.

POLICY: dict[str, Any] = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "db", "namespace": "default", "creationTimestamp": CREATED},
    "spec": {
        "podSelector": {"matchLabels": {"role": "db"}},
        "ingress": [{"ports": [{"port": 6379}]}],
    },
}


def policy(**spec: Any) -> dict[str, Any]:
    return merge(POLICY, {"spec": spec})


def ingress_port(**port: Any) -> dict[str, Any]:
    return policy(ingress=[{"ports": [port]}])


def egress_peer(**peer: Any) -> dict[str, Any]:
    return policy(egress=[{"to": [peer]}])


def test_policy_defaults() -> None:
    spec = to_builtins(decode(POLICY, NetworkPolicy))["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["ingress"] == [{"ports": [{"protocol": "TCP", "port": 6379}]}]
    egress = to_builtins(decode(policy(egress=[{}]), NetworkPolicy))["spec"]
    assert egress["policyTypes"] == ["Ingress", "Egress"]
    chosen = to_builtins(decode(policy(egress=[{}], policyTypes=["Egress"]), NetworkPolicy))
    assert chosen["spec"]["policyTypes"] == ["Egress"]


def test_policy_without_spec_selects_every_pod() -> None:
    """As the Go value fields: an empty spec and podSelector, Ingress isolation."""
    bare = merge(POLICY, {"spec": None})
    assert to_builtins(decode(bare, NetworkPolicy))["spec"] == {
        "podSelector": {},
        "policyTypes": ["Ingress"],
    }


POLICY_CASES: Cases = [
    ("valid", POLICY, []),
    ("valid-named-port", ingress_port(port="redis", protocol="UDP"), []),
    ("valid-range", ingress_port(port=32000, endPort=32768), []),
    ("valid-ip-block", egress_peer(ipBlock={"cidr": "10.0.0.0/16", "except": ["10.0.1.0/24"]}), []),
    (
        "protocol",
        ingress_port(protocol="ICMP"),
        [("spec.ingress[0].ports[0].protocol", NOT_SUPPORTED)],
    ),
    ("port-zero", ingress_port(port=0), [("spec.ingress[0].ports[0].port", INVALID)]),
    ("port-name", ingress_port(port="Redis_"), [("spec.ingress[0].ports[0].port", INVALID)]),
    ("end-port-alone", ingress_port(endPort=90), [("spec.ingress[0].ports[0].endPort", INVALID)]),
    (
        "end-port-named",
        ingress_port(port="http", endPort=90),
        [("spec.ingress[0].ports[0].endPort", INVALID)],
    ),
    (
        "end-port-below",
        ingress_port(port=90, endPort=80),
        [("spec.ingress[0].ports[0].endPort", INVALID)],
    ),
    ("no-peer", egress_peer(), [("spec.egress[0].to[0]", REQUIRED)]),
    (
        "ip-block-and-selector",
        egress_peer(ipBlock={"cidr": "10.0.0.0/8"}, podSelector={}),
        [("spec.egress[0].to[0]", FORBIDDEN)],
    ),
    (
        "cidr-missing",
        egress_peer(ipBlock={"except": ["10.0.0.0/24"]}),
        [("spec.egress[0].to[0].ipBlock.cidr", REQUIRED)],
    ),
    (
        "cidr-invalid",
        egress_peer(ipBlock={"cidr": "10.0.0.0"}),
        [("spec.egress[0].to[0].ipBlock.cidr", INVALID)],
    ),
    (
        "except-outside",
        egress_peer(ipBlock={"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24", "10.0.0.0/16"]}),
        [
            ("spec.egress[0].to[0].ipBlock.except[0]", INVALID),
            ("spec.egress[0].to[0].ipBlock.except[1]", INVALID),
        ],
    ),
    (
        "except-other-family",
        egress_peer(ipBlock={"cidr": "10.0.0.0/16", "except": ["fd00::/64"]}),
        [("spec.egress[0].to[0].ipBlock.except[0]", INVALID)],
    ),
    (
        "selector",
        policy(podSelector={"matchLabels": {"role": "bad value"}}),
        [("spec.podSelector.matchLabels", INVALID)],
    ),
    ("policy-type", policy(policyTypes=["Sideways"]), [("spec.policyTypes[0]", NOT_SUPPORTED)]),
    (
        "three-policy-types",
        policy(policyTypes=["Ingress", "Egress", "Ingress"]),
        [("spec.policyTypes", INVALID)],
    ),
]


def test_policy_messages() -> None:
    raw = policy(
        ingress=[{"ports": [{"endPort": 90}, {"port": 90, "endPort": 80}]}],
        egress=[{"to": [{}, {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24"]}}]}],
    )
    assert [str(e) for e in walk.validate(decode(raw, NetworkPolicy))] == [
        "spec.ingress[0].ports[0].endPort: Invalid value: 90: may not be specified when `port` "
        "is not specified",
        "spec.ingress[0].ports[1].endPort: Invalid value: 80: must be greater than or equal to "
        "`port`",
        "spec.egress[0].to[0]: Required value: must specify a peer",
        'spec.egress[0].to[1].ipBlock.except[0]: Invalid value: "10.1.0.0/24": must be a strict '
        "subset of `cidr`",
    ]


def test_policy_cells() -> None:
    assert cells(decode(POLICY, NetworkPolicy)) == ["db", "role=db", "5m"]
    assert cells(decode(policy(podSelector=None), NetworkPolicy))[1] == "<none>"
    info = NetworkPolicy.kind_info
    assert (info.plural, info.namespaced, info.short_names) == (
        "networkpolicies",
        True,
        ("netpol",),
    )
    assert [c.name for c in info.columns] == ["Name", "Pod-Selector", "Age"]


# Ingress.

SERVICE_BACKEND: dict[str, Any] = {"service": {"name": "test", "port": {"number": 80}}}
INGRESS: dict[str, Any] = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "Ingress",
    "metadata": {"name": "web", "namespace": "default", "creationTimestamp": CREATED},
    "spec": {
        "rules": [
            {
                "host": "foo.example.com",
                "http": {
                    "paths": [{"path": "/", "pathType": "Prefix", "backend": SERVICE_BACKEND}]
                },
            }
        ]
    },
}


def ingress(**spec: Any) -> dict[str, Any]:
    return merge(INGRESS, {"spec": spec})


def route(host: str | None = None, **path: Any) -> dict[str, Any]:
    """An Ingress of one rule (for ``host``) with one path: Prefix / to ``test:80`` unless
    ``path`` says otherwise."""
    rule: dict[str, Any] = {
        "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": SERVICE_BACKEND, **path}]}
    }
    if host is not None:
        rule["host"] = host
    return ingress(rules=[rule])


PATH = "spec.rules[0].http.paths[0]"
BUCKET = {"apiGroup": "k8s.example.com", "kind": "StorageBucket", "name": "assets"}

INGRESS_CASES: Cases = [
    ("valid", INGRESS, []),
    ("valid-wildcard", route("*.example.com"), []),
    ("valid-default-backend-only", ingress(rules=None, defaultBackend=SERVICE_BACKEND), []),
    ("valid-resource", route(backend={"resource": BUCKET}), []),
    ("valid-port-name", route(backend={"service": {"name": "test", "port": {"name": "http"}}}), []),
    ("valid-implementation-specific", route(path=None, pathType="ImplementationSpecific"), []),
    (
        "valid-tls",
        ingress(tls=[{"hosts": ["*.example.com", "a.example.com"], "secretName": "t"}]),
        [],
    ),
    ("nothing", ingress(rules=None), [("spec", INVALID)]),
    ("ip-host", route("10.0.0.1"), [("spec.rules[0].host", INVALID)]),
    ("bad-host", route("Foo.example.com"), [("spec.rules[0].host", INVALID)]),
    ("bad-wildcard", route("foo.*.com"), [("spec.rules[0].host", INVALID)]),
    ("no-paths", ingress(rules=[{"http": {}}]), [("spec.rules[0].http.paths", REQUIRED)]),
    ("relative-prefix", route(path="foo"), [(f"{PATH}.path", INVALID)]),
    ("exact-no-path", route(path=None, pathType="Exact"), [(f"{PATH}.path", INVALID)]),
    ("double-slash", route(path="/a//b"), [(f"{PATH}.path", INVALID)]),
    ("dot-suffix", route(path="/a/.."), [(f"{PATH}.path", INVALID)]),
    (
        "relative-specific",
        route(path="a", pathType="ImplementationSpecific"),
        [(f"{PATH}.path", INVALID)],
    ),
    ("no-path-type", route(pathType=None), [(f"{PATH}.pathType", REQUIRED)]),
    ("path-type", route(pathType="Regex"), [(f"{PATH}.pathType", NOT_SUPPORTED)]),
    ("no-backend", route(backend={}), [(f"{PATH}.backend", INVALID)]),
    (
        "both-backends",
        route(backend={**SERVICE_BACKEND, "resource": BUCKET}),
        [(f"{PATH}.backend", INVALID)],
    ),
    ("no-port", route(backend={"service": {"name": "test"}}), [(f"{PATH}.backend", REQUIRED)]),
    (
        "name-and-number",
        route(backend={"service": {"name": "test", "port": {"name": "http", "number": 80}}}),
        [(f"{PATH}.backend", INVALID)],
    ),
    (
        "port-number",
        route(backend={"service": {"name": "test", "port": {"number": 70000}}}),
        [(f"{PATH}.backend.service.port.number", INVALID)],
    ),
    (
        "service-name",
        route(backend={"service": {"name": "1test", "port": {"number": 80}}}),
        [(f"{PATH}.backend.service.name", INVALID)],
    ),
    (
        "resource-kind",
        route(backend={"resource": {**BUCKET, "kind": None}}),
        [(f"{PATH}.backend.resource.kind", REQUIRED)],
    ),
    (
        "resource-name",
        route(backend={"resource": {**BUCKET, "name": "a/b"}}),
        [(f"{PATH}.backend.resource.name", INVALID)],
    ),
    ("tls-host", ingress(tls=[{"hosts": ["a*.example.com"]}]), [("spec.tls[0].hosts[0]", INVALID)]),
    (
        "tls-secret",
        ingress(tls=[{"secretName": "Bad_Name"}]),
        [("spec.tls[0].secretName", INVALID)],
    ),
    ("class-name", ingress(ingressClassName="Nginx"), [("spec.ingressClassName", INVALID)]),
]


def test_ingress_messages() -> None:
    raw = ingress(
        rules=[
            {
                "host": "10.0.0.1",
                "http": {"paths": [{"path": "x", "pathType": "Exact", "backend": {}}]},
            },
            {
                "http": {
                    "paths": [
                        {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "t"}}}
                    ]
                }
            },
        ]
    )
    assert [str(e) for e in walk.validate(decode(raw, Ingress))] == [
        'spec.rules[0].host: Invalid value: "10.0.0.1": must be a DNS name, not an IP address',
        'spec.rules[0].http.paths[0].path: Invalid value: "x": must be an absolute path',
        'spec.rules[0].http.paths[0].backend: Invalid value: "": resource or service backend is '
        "required",
        "spec.rules[1].http.paths[0].backend: Required value: port name or number is required",
    ]
    assert [str(e) for e in walk.validate(decode(ingress(rules=None), Ingress))] == [
        "spec: Invalid value: null: either `defaultBackend` or `rules` must be specified"
    ]


def test_a_new_ingress_names_its_class_by_annotation_or_field_not_both() -> None:
    annotated = {"metadata": {"annotations": {"kubernetes.io/ingress.class": "nginx"}}}
    both = decode(merge(ingress(ingressClassName="nginx"), annotated), Ingress)
    assert [str(e) for e in walk.validate_create(both)] == [
        'annotations.kubernetes.io/ingress.class: Invalid value: "nginx": can not be set when '
        "the class field is also set"
    ]
    assert not walk.validate_update(both, both)  # only new Ingresses, as upstream
    assert not walk.validate_create(decode(merge(INGRESS, annotated), Ingress))


def test_ingress_status_addresses() -> None:
    raw = merge(
        INGRESS,
        {"status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}, {"hostname": "1.2.3.4"}]}}},
    )
    assert problems(decode(raw, Ingress)) == [("status.loadBalancer.ingress[1].hostname", INVALID)]


INGRESS_CELLS: list[tuple[str, dict[str, Any], list[Any]]] = [
    ("plain", INGRESS, ["web", "<none>", "foo.example.com", "", "80", "5m"]),
    (
        "class-tls-address",
        merge(
            ingress(ingressClassName="nginx", tls=[{"hosts": ["foo.example.com"]}]),
            {
                "status": {
                    "loadBalancer": {
                        "ingress": [
                            {"ip": "10.0.0.9"},
                            {"hostname": "lb.example.com"},
                            {"ip": "10.0.0.1"},
                        ]
                    }
                }
            },
        ),
        ["web", "nginx", "foo.example.com", "10.0.0.1,10.0.0.9,lb.example.com", "80, 443", "5m"],
    ),
    ("no-host", route(), ["web", "<none>", "*", "", "80", "5m"]),
    (
        "many-hosts",
        ingress(rules=[{"host": f"h{i}.example.com"} for i in range(5)]),
        [
            "web",
            "<none>",
            "h0.example.com,h1.example.com,h2.example.com + 2 more...",
            "",
            "80",
            "5m",
        ],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in INGRESS_CELLS], ids=[c[0] for c in INGRESS_CELLS]
)
def test_ingress_cells(raw: dict[str, Any], expected: list[Any]) -> None:
    assert cells(decode(raw, Ingress)) == expected


def test_ingress_registration() -> None:
    info = Ingress.kind_info
    assert (info.plural, info.namespaced, info.short_names, info.subresources) == (
        "ingresses",
        True,
        ("ing",),
        ("status",),
    )
    assert [c.name for c in info.columns] == ["Name", "Class", "Hosts", "Address", "Ports", "Age"]


# IngressClass.

CLASS: dict[str, Any] = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IngressClass",
    "metadata": {"name": "external-lb", "creationTimestamp": CREATED},
    "spec": {
        "controller": "example.com/ingress-controller",
        "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "lb"},
    },
}


def ingress_class(**spec: Any) -> dict[str, Any]:
    return merge(CLASS, {"spec": spec})


def parameters(**ref: Any) -> dict[str, Any]:
    return ingress_class(parameters=ref)


def test_class_parameters_default_to_cluster_scope() -> None:
    assert to_builtins(decode(CLASS, IngressClass))["spec"]["parameters"]["scope"] == "Cluster"


CLASS_CASES: Cases = [
    ("valid", CLASS, []),
    ("valid-namespaced", parameters(scope="Namespace", namespace="config"), []),
    ("valid-no-parameters", ingress_class(parameters=None), []),
    ("no-controller", ingress_class(controller=None), [("spec.controller", REQUIRED)]),
    ("no-spec", merge(CLASS, {"spec": None}), [("spec.controller", REQUIRED)]),
    ("controller-not-path", ingress_class(controller="nginx"), [("spec.controller", INVALID)]),
    ("controller-host", ingress_class(controller="Example.com/x"), [("spec.controller", INVALID)]),
    (
        "controller-path",
        ingress_class(controller="example.com/a b"),
        [("spec.controller", INVALID)],
    ),
    (
        "controller-too-long",
        ingress_class(controller="example.com/" + "a" * 240),
        [("spec.controller", TOO_LONG)],
    ),
    ("scope", parameters(scope="Galaxy"), [("spec.parameters.scope", NOT_SUPPORTED)]),
    ("empty-scope", parameters(scope=""), [("spec.parameters.scope", NOT_SUPPORTED)]),
    (
        "namespace-scope-without-namespace",
        parameters(scope="Namespace"),
        [("spec.parameters.namespace", REQUIRED)],
    ),
    (
        "cluster-scope-with-namespace",
        parameters(namespace="config"),
        [("spec.parameters.namespace", FORBIDDEN)],
    ),
    ("kind-missing", parameters(kind=None), [("spec.parameters.kind", REQUIRED)]),
    ("name-segment", parameters(name=".."), [("spec.parameters.name", INVALID)]),
    ("api-group", parameters(apiGroup="K8s"), [("spec.parameters.apiGroup", INVALID)]),
]


# ServiceCIDR and IPAddress.

SERVICE_CIDR: dict[str, Any] = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "ServiceCIDR",
    "metadata": {"name": "newcidr1", "creationTimestamp": CREATED},
    "spec": {"cidrs": ["10.96.0.0/24"]},
}


def cidrs(*values: str) -> dict[str, Any]:
    return merge(SERVICE_CIDR, {"spec": {"cidrs": list(values)}})


CIDR_CASES: Cases = [
    ("valid", SERVICE_CIDR, []),
    ("valid-dual-stack", cidrs("10.96.0.0/24", "fd00:10:96::/112"), []),
    ("none", cidrs(), [("spec.cidrs", REQUIRED)]),
    ("no-spec", merge(SERVICE_CIDR, {"spec": None}), [("spec.cidrs", REQUIRED)]),
    ("three", cidrs("10.0.0.0/8", "fd00::/64", "fd01::/64"), [("spec.cidrs", INVALID)]),
    ("same-family", cidrs("10.0.0.0/8", "11.0.0.0/8"), [("spec.cidrs", INVALID)]),
    ("not-a-cidr", cidrs("10.0.0.1"), [("spec.cidrs[0]", INVALID)]),
    ("host-bits", cidrs("10.0.0.1/24"), [("spec.cidrs[0]", INVALID)]),
    ("not-canonical", cidrs("10.0.0.0/24", "fd00:0::/64"), [("spec.cidrs[1]", INVALID)]),
]

IP_ADDRESS: dict[str, Any] = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IPAddress",
    "metadata": {"name": "10.96.0.10", "creationTimestamp": CREATED},
    "spec": {
        "parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "web"}
    },
}


def address(name: str = "10.96.0.10", **ref: Any) -> dict[str, Any]:
    return merge(IP_ADDRESS, {"metadata": {"name": name}, "spec": {"parentRef": ref}})


IP_CASES: Cases = [
    ("valid", IP_ADDRESS, []),
    ("valid-ipv6", address("2001:db8::1"), []),
    ("not-canonical", address("2001:db8:0::1"), [("metadata.name", INVALID)]),
    ("leading-zeros", address("010.96.0.10"), [("metadata.name", INVALID)]),
    ("not-an-ip", address("web"), [("metadata.name", INVALID)]),
    ("no-parent", merge(IP_ADDRESS, {"spec": None}), [("spec.parentRef", REQUIRED)]),
    ("no-resource", address(resource=None), [("spec.parentRef.resource", REQUIRED)]),
    (
        "no-parent-name",
        merge(IP_ADDRESS, {"spec": {"parentRef": {"name": None}}}),
        [("spec.parentRef.name", REQUIRED)],
    ),
    ("group", address(group="Apps"), [("spec.parentRef.group", INVALID)]),
    ("segment", address(namespace="a/b"), [("spec.parentRef.namespace", INVALID)]),
]


def test_service_cidr_update() -> None:
    """CIDRs keep their places; a single-family range may only gain its second family."""
    dual = cidrs("10.96.0.0/24", "fd00::/108")
    assert update_problems(SERVICE_CIDR, dual, ServiceCIDR) == []
    assert update_problems(SERVICE_CIDR, cidrs("10.97.0.0/24"), ServiceCIDR) == [
        ("spec.cidrs[0]", INVALID)
    ]
    assert update_problems(dual, SERVICE_CIDR, ServiceCIDR) == [("spec.cidrs", INVALID)]
    errors = walk.validate_update(
        decode(cidrs("10.97.0.0/24"), ServiceCIDR), decode(SERVICE_CIDR, ServiceCIDR)
    )
    assert [str(e) for e in errors] == [
        'spec.cidrs[0]: Invalid value: "10.97.0.0/24": field is immutable'
    ]


def test_ip_address_parent_is_immutable() -> None:
    moved = merge(IP_ADDRESS, {"spec": {"parentRef": {"name": "other"}}})
    assert update_problems(IP_ADDRESS, moved, IPAddress) == [("spec.parentRef", INVALID)]


def test_service_cidr_and_ip_address_cells() -> None:
    assert cells(decode(cidrs("10.96.0.0/24", "fd00::/108"), ServiceCIDR)) == [
        "newcidr1",
        "10.96.0.0/24,fd00::/108",
        "5m",
    ]
    assert cells(decode(IP_ADDRESS, IPAddress)) == ["10.96.0.10", "services/default/web", "5m"]
    gateway = address(group="Gateway.Networking.k8s.io", resource="Gateways", namespace=None)
    assert cells(decode(gateway, IPAddress))[1] == "gateways.gateway.networking.k8s.io/web"
    for cls, plural, column in (
        (ServiceCIDR, "servicecidrs", "CIDRs"),
        (IPAddress, "ipaddresses", "ParentRef"),
    ):
        info = cls.kind_info
        assert (info.plural, info.namespaced, info.short_names) == (plural, False, ())
        assert [c.name for c in info.columns] == ["Name", column, "Age"]
    # Upstream's IPAddress printer defines two columns and appends the age as a third cell.
    assert [c.defined for c in IPAddress.kind_info.columns] == [True, True, False]
    assert ServiceCIDR.kind_info.subresources == ("status",)


CASES = [
    (kind, *case)
    for kind, cases in (
        (NetworkPolicy, POLICY_CASES),
        (Ingress, INGRESS_CASES),
        (IngressClass, CLASS_CASES),
        (ServiceCIDR, CIDR_CASES),
        (IPAddress, IP_CASES),
    )
    for case in cases
]


@pytest.mark.parametrize(
    ("cls", "raw", "expected"),
    [(c[0], *c[2:]) for c in CASES],
    ids=[f"{c[0].__name__}-{c[1]}" for c in CASES],
)
def test_validation(
    cls: type[Resource], raw: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(raw, cls)) == ordered(expected)


def test_class_messages() -> None:
    raw = ingress_class(
        controller="nginx", parameters={"kind": "K", "name": "p", "scope": "Namespace"}
    )
    assert [str(e) for e in walk.validate(decode(raw, IngressClass))] == [
        'spec.controller: Invalid value: "nginx": must be a domain-prefixed path (such as '
        '"acme.io/foo")',
        "spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'",
    ]


def test_class_controller_is_immutable() -> None:
    changed = ingress_class(controller="example.com/other")
    assert update_problems(CLASS, changed, IngressClass) == [("spec.controller", INVALID)]
    relabelled = merge(CLASS, {"metadata": {"labels": {"a": "b"}}})
    assert update_problems(CLASS, relabelled, IngressClass) == []


def test_class_cells() -> None:
    assert cells(decode(CLASS, IngressClass)) == [
        "external-lb",
        "example.com/ingress-controller",
        "IngressParameters.k8s.example.com/lb",
        "5m",
    ]
    core = parameters(apiGroup=None, kind="ConfigMap")
    assert cells(decode(core, IngressClass))[2] == "ConfigMap/lb"
    assert cells(decode(ingress_class(parameters=None), IngressClass))[2] == "<none>"
    info = IngressClass.kind_info
    assert (info.plural, info.namespaced, info.short_names) == ("ingressclasses", False, ())
    assert [c.name for c in info.columns] == ["Name", "Controller", "Parameters", "Age"]
