"""networking.k8s.io/v1 as users reach it: the pinned kubectl and the official Python client
against a real ``kubelab apiserver``, with the kubernetes.io docs' manifests (the corpus in
tests/kube/api/manifests) and the invalid ones of tests/kube/api/invalid.

IngressClasses are cluster-scoped and the module's server is shared, so every test names its
classes after its own namespace and deletes them.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from tests.controlplane.apiserver.corpus import CORPUS, columns, create, refusal
from tests.servers import Kubectl

GROUP_VERSION = "networking.k8s.io/v1"
VERBS = "create,delete,deletecollection,get,list,patch,update,watch"


def _rows(text: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


def _manifest(name: str) -> list[dict[str, Any]]:
    """The documents of a corpus manifest, without the namespace the docs give them (each
    test works in its own)."""
    documents = [d for d in yaml.safe_load_all((CORPUS / "manifests" / name).read_text()) if d]
    for document in documents:
        document["metadata"].pop("namespace", None)
    return documents


def test_api_resources_list_the_group(kubectl: Kubectl) -> None:
    """As upstream 1.36 lists the group: five resources, no categories, two short names."""
    out = kubectl.run(
        "api-resources", "--api-group=networking.k8s.io", "-o", "wide", namespaced=False
    ).stdout
    assert columns(out) == [
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"],
        ["ingressclasses", "", "networking.k8s.io/v1", "false", "IngressClass", VERBS, ""],
        ["ingresses", "ing", "networking.k8s.io/v1", "true", "Ingress", VERBS, ""],
        ["ipaddresses", "", "networking.k8s.io/v1", "false", "IPAddress", VERBS, ""],
        ["networkpolicies", "netpol", "networking.k8s.io/v1", "true", "NetworkPolicy", VERBS, ""],
        ["servicecidrs", "", "networking.k8s.io/v1", "false", "ServiceCIDR", VERBS, ""],
    ]


def test_network_policy_from_the_docs(kubectl: Kubectl) -> None:
    (policy,) = _manifest("networking-networkpolicy-test-network-policy.yaml")
    created = create(kubectl, policy)
    assert created == "networkpolicy.networking.k8s.io/test-network-policy created"
    rows = _rows(kubectl.run("get", "networkpolicy").stdout)
    assert rows[0] == ["NAME", "POD-SELECTOR", "AGE"]
    assert rows[1][:2] == ["test-network-policy", "role=db"]
    got = kubectl.json("get", "netpol", "test-network-policy")
    assert got["spec"] == policy["spec"]
    kubectl.run("create", "-f", "-", input=json.dumps(_bare_policy("deny-all")))
    defaulted = kubectl.json("get", "netpol", "deny-all")["spec"]
    assert defaulted == {
        "podSelector": {},
        "ingress": [{"ports": [{"protocol": "TCP", "port": 80}]}],
        "policyTypes": ["Ingress"],
    }
    names = [r[:2] for r in _rows(kubectl.run("get", "netpol").stdout)[1:]]
    assert names == [["deny-all", "<none>"], ["test-network-policy", "role=db"]]


def _bare_policy(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name},
        "spec": {"ingress": [{"ports": [{"port": 80}]}]},
    }


def test_network_policy_update_patch_delete(kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=json.dumps(_bare_policy("web")))
    patched = kubectl.run(
        "patch", "netpol", "web", "--type=merge", "-p", '{"spec":{"egress":[{}]}}'
    ).stdout
    assert patched.strip() == "networkpolicy.networking.k8s.io/web patched"
    assert kubectl.json("get", "netpol", "web")["spec"]["egress"] == [{}]
    kubectl.run(
        "patch",
        "netpol",
        "web",
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/podSelector","value":{"matchLabels":{"app":"web"}}}]',
    )
    current = kubectl.json("get", "netpol", "web")
    current["spec"]["policyTypes"] = ["Ingress", "Egress"]
    replaced = kubectl.run("replace", "-f", "-", input=json.dumps(current)).stdout
    assert replaced.strip() == "networkpolicy.networking.k8s.io/web replaced"
    spec = kubectl.json("get", "netpol", "web")["spec"]
    assert (spec["podSelector"], spec["policyTypes"]) == (
        {"matchLabels": {"app": "web"}},
        ["Ingress", "Egress"],
    )
    applied = kubectl.run(
        "apply", "--server-side", "-f", "-", input=json.dumps(_bare_policy("applied"))
    ).stdout
    assert applied.strip() == "networkpolicy.networking.k8s.io/applied serverside-applied"
    deleted = kubectl.run("delete", "netpol", "web", "applied").stdout.splitlines()
    assert deleted == [
        f'networkpolicy.networking.k8s.io "{name}" deleted from {kubectl.namespace} namespace'
        for name in ("web", "applied")
    ]
    assert kubectl.run("get", "netpol").stdout == ""


def test_create_ingress_generator(kubectl: Kubectl) -> None:
    out = kubectl.run("create", "ingress", "simple", "--rule=foo.com/bar=svc1:8080").stdout
    assert out.strip() == "ingress.networking.k8s.io/simple created"
    kubectl.run(
        "create",
        "ingress",
        "classy",
        "--class=nginx",
        "--rule=foo.com/*=svc1:http,tls=cert",
        "--rule=bar.com/=svc2:80",
        "--default-backend=svc3:8080",
    )
    kubectl.run("create", "ingress", "catch-all", "--class=other", "--rule=/path=svc:port")
    rows = _rows(kubectl.run("get", "ingress").stdout)
    assert rows[0] == ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    # ADDRESS is empty until a controller reports one: the row has no cell there.
    assert [r[:4] for r in rows[1:]] == [
        ["catch-all", "other", "*", "80"],
        ["classy", "nginx", "foo.com,bar.com", "80, 443"],
        ["simple", "<none>", "foo.com", "80"],
    ]
    simple = kubectl.json("get", "ing", "simple")["spec"]
    assert simple["rules"] == [
        {
            "host": "foo.com",
            "http": {
                "paths": [
                    {
                        "path": "/bar",
                        "pathType": "Exact",
                        "backend": {"service": {"name": "svc1", "port": {"number": 8080}}},
                    }
                ]
            },
        }
    ]
    classy = kubectl.json("get", "ing", "classy")["spec"]
    assert classy["tls"] == [{"hosts": ["foo.com"], "secretName": "cert"}]
    assert classy["rules"][0]["http"]["paths"][0]["pathType"] == "Prefix"


def _patch_status(
    kubectl: Kubectl, status: dict[str, Any], check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Merge ``status`` into minimal-ingress through its status subresource."""
    patch = ("--subresource=status", "--type=merge", "-p", json.dumps(status))
    return kubectl.run("patch", "ingress", "minimal-ingress", *patch, check=check)


def test_ingresses_from_the_docs_and_their_status(kubectl: Kubectl) -> None:
    (minimal,) = _manifest("networking-ingress-minimal-ingress.yaml")
    (resource,) = _manifest("networking-ingress-resource-backend.yaml")
    assert create(kubectl, minimal, resource).splitlines() == [
        "ingress.networking.k8s.io/minimal-ingress created",
        "ingress.networking.k8s.io/ingress-resource-backend created",
    ]
    assert kubectl.json("get", "ingress", "ingress-resource-backend")["spec"] == resource["spec"]
    status = {"status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.5"}, {"ip": "10.0.0.4"}]}}}
    ignored = kubectl.run(
        "patch", "ingress", "minimal-ingress", "--type=merge", "-p", json.dumps(status)
    ).stdout
    assert ignored.strip() == "ingress.networking.k8s.io/minimal-ingress patched (no change)"
    _patch_status(kubectl, status)
    rows = _rows(kubectl.run("get", "ingress", "minimal-ingress").stdout)
    assert rows[1][:5] == ["minimal-ingress", "nginx-example", "*", "10.0.0.4,10.0.0.5", "80"]
    bad_status = {"status": {"loadBalancer": {"ingress": [{"ip": "not-an-ip"}]}}}
    refused = _patch_status(kubectl, bad_status, check=False)
    assert 'status.loadBalancer.ingress[0].ip: Invalid value: "not-an-ip"' in refused.stderr
    label = kubectl.run("label", "ingress", "minimal-ingress", "team=web").stdout
    assert label.strip() == "ingress.networking.k8s.io/minimal-ingress labeled"
    after = kubectl.json("get", "ingress", "minimal-ingress")
    assert after["status"] == status["status"]
    kubectl.run("delete", "ingress", "--all")
    assert kubectl.run("get", "ingress").stdout == ""


def test_ingress_classes_from_the_docs(kubectl: Kubectl) -> None:
    classes = _manifest("networking-ingressclass-external-lb.yaml")
    prefix = kubectl.namespace
    for cls in classes:
        cls["metadata"]["name"] = f"{prefix}-{cls['metadata']['name']}"
        cls["metadata"].get("annotations", {}).clear()  # other tests' Ingresses stay classless
    try:
        created = create(kubectl, *classes)
        assert created.splitlines() == [
            f"ingressclass.networking.k8s.io/{c['metadata']['name']} created" for c in classes
        ]
        names = [c["metadata"]["name"] for c in classes]
        rows = _rows(kubectl.run("get", "ingressclass", *names, namespaced=False).stdout)
        assert rows[0] == ["NAME", "CONTROLLER", "PARAMETERS", "AGE"]
        assert [r[:3] for r in rows[1:]] == [
            [
                f"{prefix}-external-lb",
                "example.com/ingress-controller",
                "IngressParameters.k8s.example.com/external-lb",
            ],
            [
                f"{prefix}-external-lb-2",
                "example.com/ingress-controller",
                "IngressParameter.k8s.example.com/external-config",
            ],
            [f"{prefix}-nginx-example", "k8s.io/ingress-nginx", "<none>"],
        ]
        first = kubectl.json("get", "ingressclass", f"{prefix}-external-lb")
        assert first["spec"]["parameters"]["scope"] == "Cluster"
        immutable = kubectl.run(
            "patch",
            "ingressclass",
            f"{prefix}-external-lb",
            "--type=merge",
            "-p",
            '{"spec":{"controller":"example.com/other"}}',
            check=False,
            namespaced=False,
        )
        assert (
            f'The IngressClass "{prefix}-external-lb" is invalid: spec.controller: Invalid '
            'value: "example.com/other": field is immutable' in immutable.stderr
        )
        annotated = kubectl.run(
            "annotate", "ingressclass", f"{prefix}-external-lb", "team=edge", namespaced=False
        ).stdout
        assert annotated.strip() == f"ingressclass.networking.k8s.io/{prefix}-external-lb annotated"
    finally:
        kubectl.run(
            "delete", "ingressclass", *(c["metadata"]["name"] for c in classes), namespaced=False
        )


def test_service_cidrs_and_ip_addresses(kubectl: Kubectl) -> None:
    (cidr,) = _manifest("networking-servicecidr-newcidr1.yaml")
    (address,) = _manifest("networking-ipaddress-service.yaml")
    name = cidr["metadata"]["name"] = f"{kubectl.namespace}-newcidr1"
    try:
        assert create(kubectl, cidr, address).splitlines() == [
            f"servicecidr.networking.k8s.io/{name} created",
            "ipaddress.networking.k8s.io/10.96.0.10 created",
        ]
        rows = _rows(kubectl.run("get", "servicecidr", name, namespaced=False).stdout)
        assert [rows[0], rows[1][:2]] == [["NAME", "CIDRS", "AGE"], [name, "10.96.0.0/24"]]
        rows = _rows(kubectl.run("get", "ipaddress", "10.96.0.10", namespaced=False).stdout)
        assert rows == [["NAME", "PARENTREF"], ["10.96.0.10", "services/kube-system/kube-dns"]]
        moved = kubectl.run(
            "patch",
            "servicecidr",
            name,
            "-p",
            '{"spec":{"cidrs":["10.97.0.0/24"]}}',
            check=False,
            namespaced=False,
        )
        assert (
            f'The ServiceCIDR "{name}" is invalid: spec.cidrs[0]: Invalid value: "10.97.0.0/24": '
            "field is immutable" in moved.stderr
        )
        ready = {"status": {"conditions": [_ready_condition()]}}
        kubectl.run(
            "patch",
            "servicecidr",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(ready),
            namespaced=False,
        )
        got = kubectl.json("get", "servicecidr", name)
        assert [c["type"] for c in got["status"]["conditions"]] == ["Ready"]
        reparented = kubectl.run(
            "patch",
            "ipaddress",
            "10.96.0.10",
            "--type=merge",
            "-p",
            '{"spec":{"parentRef":{"name":"other"}}}',
            check=False,
            namespaced=False,
        )
        assert "spec.parentRef: Invalid value" in reparented.stderr
        assert "field is immutable" in reparented.stderr
    finally:
        kubectl.run("delete", "servicecidr", name, namespaced=False)
        kubectl.run("delete", "ipaddress", "10.96.0.10", namespaced=False)


def _ready_condition() -> dict[str, str]:
    return {
        "type": "Ready",
        "status": "True",
        "reason": "",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


INVALID = [
    (
        "networking-networkpolicy-endport-without-port.yaml",
        'The NetworkPolicy "range" is invalid: spec.ingress[0].ports[0].endPort: Invalid value: '
        "32768: may not be specified when `port` is not specified",
    ),
    (
        "networking-networkpolicy-except-outside-cidr.yaml",
        'The NetworkPolicy "except" is invalid: spec.egress[0].to[0].ipBlock.except[0]: Invalid '
        'value: "10.1.0.0/24": must be a strict subset of `cidr`',
    ),
    (
        "networking-ingress-relative-prefix-path.yaml",
        'The Ingress "relative" is invalid: spec.rules[0].http.paths[0].path: Invalid value: '
        '"testpath": must be an absolute path',
    ),
    (
        "networking-ingress-missing-path-type.yaml",
        'The Ingress "no-path-type" is invalid: spec.rules[0].http.paths[0].pathType: Required '
        "value",
    ),
    (
        "networking-ingress-class-annotation-and-field.yaml",
        'The Ingress "both-classes" is invalid: annotations.kubernetes.io/ingress.class: Invalid '
        'value: "nginx": can not be set when the class field is also set',
    ),
    (
        "networking-ingressclass-namespace-scope-without-namespace.yaml",
        'The IngressClass "scoped" is invalid: spec.parameters.namespace: Required value: '
        "`parameters.scope` is set to 'Namespace'",
    ),
    (
        "networking-servicecidr-two-ipv4.yaml",
        'The ServiceCIDR "two-ipv4" is invalid: spec.cidrs: Invalid value: ["10.96.0.0/24", '
        '"10.97.0.0/24"]: may specify no more than one IP for each IP family, i.e '
        "192.168.0.0/24 and 2001:db8::/64",
    ),
    (
        "networking-ipaddress-not-canonical.yaml",
        'The IPAddress "2001:db8:0::1" is invalid: metadata.name: Invalid value: '
        '"2001:db8:0::1": must be in canonical form ("2001:db8::1")',
    ),
]


@pytest.mark.parametrize(
    ("manifest", "message"), INVALID, ids=[name.removesuffix(".yaml") for name, _ in INVALID]
)
def test_invalid_objects_are_refused(kubectl: Kubectl, manifest: str, message: str) -> None:
    assert message in refusal(kubectl, manifest)


def test_explain(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "networkpolicy.spec", namespaced=False).stdout
    assert "GROUP:      networking.k8s.io" in out
    assert "KIND:       NetworkPolicy" in out
    for field in (
        "egress\t<[]NetworkPolicyEgressRule>",
        "ingress\t<[]NetworkPolicyIngressRule>",
        "podSelector\t<LabelSelector>",
        "policyTypes\t<[]string>",
    ):
        assert field in out
    ingress = kubectl.run("explain", "ingress.spec.rules.http.paths", namespaced=False).stdout
    assert "pathType\t<string> -required-" in ingress
    assert "backend\t<IngressBackend> -required-" in ingress


@dataclass(frozen=True)
class Watched:
    """How one kind is watched: made, changed, and its first cells before and after."""

    resource: str
    namespaced: bool
    create: Callable[[str], list[str]]
    body: Callable[[str], str | None]
    change: Callable[[str], list[str]]
    first: list[str]
    second: list[str]
    fixed_name: str | None = None
    """The name to use (an IPAddress's is its address); else one from the test's namespace."""


def _cluster_object(kind: str, name: str, spec: dict[str, Any]) -> str:
    metadata = {"name": name}
    return json.dumps(
        {"apiVersion": GROUP_VERSION, "kind": kind, "metadata": metadata, "spec": spec}
    )


WATCHED = [
    Watched(
        "networkpolicies",
        True,
        lambda name: ["create", "-f", "-"],
        lambda name: json.dumps(_bare_policy(name)),
        lambda name: [
            "patch",
            "netpol",
            name,
            "-p",
            '{"spec":{"podSelector":{"matchLabels":{"a":"b"}}}}',
        ],
        ["<none>"],
        ["a=b"],
    ),
    Watched(
        "ingresses",
        True,
        lambda name: ["create", "ingress", name, "--rule=a.com/=svc:80"],
        lambda name: None,
        lambda name: [
            "patch",
            "ingress",
            name,
            "--type=merge",
            "-p",
            '{"spec":{"ingressClassName":"x"}}',
        ],
        ["<none>", "a.com"],
        ["x", "a.com"],
    ),
    Watched(
        "ingressclasses",
        False,
        lambda name: ["create", "-f", "-"],
        lambda name: _cluster_object("IngressClass", name, {"controller": "example.com/a"}),
        lambda name: [
            "patch",
            "ingressclass",
            name,
            "-p",
            '{"spec":{"parameters":{"kind":"ConfigMap","name":"p"}}}',
        ],
        ["example.com/a", "<none>"],
        ["example.com/a", "ConfigMap/p"],
    ),
    Watched(
        "servicecidrs",
        False,
        lambda name: ["create", "-f", "-"],
        lambda name: _cluster_object("ServiceCIDR", name, {"cidrs": ["10.200.0.0/24"]}),
        lambda name: [
            "patch",
            "servicecidr",
            name,
            "--type=json",
            "-p",
            '[{"op":"add","path":"/spec/cidrs/-","value":"fd00:200::/112"}]',
        ],
        ["10.200.0.0/24"],
        ["10.200.0.0/24,fd00:200::/112"],
    ),
    Watched(
        "ipaddresses",
        False,
        lambda name: ["create", "-f", "-"],
        lambda name: _cluster_object(
            "IPAddress", name, {"parentRef": {"resource": "services", "name": "a"}}
        ),
        lambda name: ["label", "ipaddress", name, "seen=yes"],
        ["services/a"],
        ["services/a"],
        fixed_name="192.0.2.7",
    ),
]


@pytest.mark.parametrize("case", WATCHED, ids=[w.resource for w in WATCHED])
def test_get_watch_streams_changes(kubectl: Kubectl, case: Watched) -> None:
    """``kubectl get -w`` prints the row of each change (cluster-scoped names are made unique
    by the test's namespace, and deleted)."""
    name = case.fixed_name or ("watched" if case.namespaced else f"{kubectl.namespace}-watched")
    kubectl.run(*case.create(name), input=case.body(name), namespaced=case.namespaced)
    command = kubectl.argv(
        "get", case.resource, name, "-w", "--request-timeout=20s", namespaced=case.namespaced
    )
    try:
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as watcher:
            try:
                assert watcher.stdout is not None
                watcher.stdout.readline()  # the header
                assert _rows(watcher.stdout.readline())[0][: len(case.first) + 1] == [
                    name,
                    *case.first,
                ]
                time.sleep(0.3)
                kubectl.run(*case.change(name), namespaced=case.namespaced)
                assert _rows(watcher.stdout.readline())[0][: len(case.second) + 1] == [
                    name,
                    *case.second,
                ]
            finally:
                watcher.terminate()
    finally:
        kubectl.run("delete", case.resource, name, namespaced=case.namespaced)


def test_python_client(api_client: k8s.ApiClient, namespace: str) -> None:
    api = k8s.NetworkingV1Api(api_client)
    policy = k8s.V1NetworkPolicy(
        metadata=k8s.V1ObjectMeta(name="db"),
        spec=k8s.V1NetworkPolicySpec(
            pod_selector=k8s.V1LabelSelector(match_labels={"role": "db"}),
            egress=[
                k8s.V1NetworkPolicyEgressRule(
                    to=[k8s.V1NetworkPolicyPeer(ip_block=k8s.V1IPBlock(cidr="10.0.0.0/24"))],
                    ports=[k8s.V1NetworkPolicyPort(port=5978, end_port=5980)],
                )
            ],
        ),
    )
    created = api.create_namespaced_network_policy(namespace, policy)
    assert created.spec.policy_types == ["Ingress", "Egress"]
    assert created.spec.egress[0].ports[0].protocol == "TCP"
    backend = k8s.V1IngressBackend(
        service=k8s.V1IngressServiceBackend(name="web", port=k8s.V1ServiceBackendPort(number=80))
    )
    ingress = k8s.V1Ingress(
        metadata=k8s.V1ObjectMeta(name="web"),
        spec=k8s.V1IngressSpec(default_backend=backend),
    )
    api.create_namespaced_ingress(namespace, ingress)
    class_name = f"{namespace}-class"
    ingress_class = k8s.V1IngressClass(
        metadata=k8s.V1ObjectMeta(name=class_name),
        spec=k8s.V1IngressClassSpec(controller="example.com/ingress"),
    )
    api.create_ingress_class(ingress_class)
    cidr = k8s.V1ServiceCIDR(
        metadata=k8s.V1ObjectMeta(name=f"{namespace}-cidr"),
        spec=k8s.V1ServiceCIDRSpec(cidrs=["10.210.0.0/24"]),
    )
    api.create_service_cidr(cidr)
    address = k8s.V1IPAddress(
        metadata=k8s.V1ObjectMeta(name="10.210.0.1"),
        spec=k8s.V1IPAddressSpec(
            parent_ref=k8s.V1ParentReference(resource="services", namespace=namespace, name="web")
        ),
    )
    api.create_ip_address(address)
    try:
        cidrs = api.list_service_cidr(field_selector=f"metadata.name={namespace}-cidr").items
        assert [c.spec.cidrs for c in cidrs] == [["10.210.0.0/24"]]
        assert api.read_ip_address("10.210.0.1").spec.parent_ref.name == "web"
        policies = api.list_namespaced_network_policy(namespace).items
        assert [p.metadata.name for p in policies] == ["db"]
        ingresses = api.list_namespaced_ingress(namespace).items
        assert [i.spec.default_backend.service.port.number for i in ingresses] == [80]
        listed = api.list_ingress_class(field_selector=f"metadata.name={class_name}").items
        assert [c.spec.controller for c in listed] == ["example.com/ingress"]
        status = api.patch_namespaced_ingress_status(
            "web", namespace, {"status": {"loadBalancer": {"ingress": [{"hostname": "lb.x.io"}]}}}
        )
        assert status.status.load_balancer.ingress[0].hostname == "lb.x.io"
        with pytest.raises(ApiException) as invalid:
            api.create_namespaced_ingress(
                namespace, k8s.V1Ingress(metadata=k8s.V1ObjectMeta(name="empty"), spec={})
            )
        assert invalid.value.status == 422
        causes = json.loads(invalid.value.body)["details"]["causes"]
        assert causes == [
            {
                "reason": "FieldValueInvalid",
                "message": "Invalid value: null: either `defaultBackend` or `rules` must be "
                "specified",
                "field": "spec",
            }
        ]
        api.delete_namespaced_network_policy("db", namespace)
        api.delete_namespaced_ingress("web", namespace)
        assert api.list_namespaced_network_policy(namespace).items == []
        assert api.list_namespaced_ingress(namespace).items == []
    finally:
        api.delete_ingress_class(class_name)
        api.delete_service_cidr(f"{namespace}-cidr")
        api.delete_ip_address("10.210.0.1")
    with pytest.raises(ApiException) as gone:
        api.read_ingress_class(class_name)
    assert gone.value.status == 404
