"""The cluster DNS, Ingress and metrics-server add-ons' objects: valid, accepted by a real API
server, and consistent with ``kubelab dns``'s, ``kubelab ingress``'s and ``kubelab
metrics-server``'s own flags."""

from __future__ import annotations

from kube.api import walk
from kube.api.kinds.apiregistration_v1 import APIService
from kube.api.kinds.apps_v1 import Deployment
from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.networking_v1 import IngressClass, is_default_class
from kube.api.kinds.rbac_v1 import ClusterRole, ClusterRoleBinding, RoleBinding
from kube.api.meta_v1 import Resource
from kube.client.rest import Client
from kubelab.cli import build_parser
from kubelab.lab.addons import (
    DNS_SERVICE_IP,
    METRICS_PORT_SECURE,
    cluster_dns,
    ingress_controller,
    metrics_server,
)


def _by_kind(objects: list[Resource]) -> dict[str, Resource]:
    return {type(obj).__name__: obj for obj in objects}


ACCOUNT_ROLE_DEPLOYMENT: list[type[Resource]] = [
    ServiceAccount,
    ClusterRole,
    ClusterRoleBinding,
    Deployment,
]


def assert_valid(objects: list[Resource], kinds: list[type[Resource]]) -> None:
    """``objects`` are of ``kinds``, in that order, and valid once defaulted."""
    assert [type(obj) for obj in objects] == kinds
    for obj in objects:
        walk.set_defaults(obj)
        assert not walk.validate_create(obj), (obj.metadata.name, walk.validate_create(obj))


def test_objects_are_valid_and_in_creation_order() -> None:
    assert_valid(cluster_dns(), [*ACCOUNT_ROLE_DEPLOYMENT, Service])


def test_deployment_runs_kubelab_dns_with_its_probes_on_its_ports() -> None:
    deployment = _by_kind(cluster_dns(cluster_domain="lab.local"))["Deployment"]
    assert isinstance(deployment, Deployment)
    assert deployment.spec is not None and deployment.spec.template is not None
    pod = deployment.spec.template.spec
    assert pod is not None and pod.containers
    (container,) = pod.containers
    assert container.command is not None and container.command[:2] == ["kubelab", "dns"]
    args = build_parser().parse_args(container.command[1:])
    assert args.kubeconfig is None  # in-cluster configuration
    assert args.cluster_domain == "lab.local"
    assert args.listen == ("0.0.0.0", 53)
    assert container.liveness_probe is not None and container.liveness_probe.http_get is not None
    assert container.readiness_probe is not None and container.readiness_probe.http_get
    assert (container.liveness_probe.http_get.path, container.liveness_probe.http_get.port) == (
        "/healthz",
        args.health_port,
    )
    assert (container.readiness_probe.http_get.path, container.readiness_probe.http_get.port) == (
        "/ready",
        args.ready_port,
    )
    assert pod.dns_policy == "Default"
    assert pod.service_account_name == "kube-dns"
    assert [(t.key, t.effect) for t in pod.tolerations or ()] == [
        ("node-role.kubernetes.io/control-plane", "NoSchedule")
    ]
    # Pinned to the control plane, the one node that imports the kubelab image.
    assert pod.node_selector == {"node-role.kubernetes.io/control-plane": ""}
    assert deployment.spec.replicas == 1
    assert deployment.spec.template.metadata is not None
    assert deployment.spec.template.metadata.labels == {"k8s-app": "kube-dns"}


def test_service_and_role() -> None:
    objects = _by_kind(cluster_dns())
    service = objects["Service"]
    assert isinstance(service, Service) and service.spec is not None
    assert service.spec.cluster_ip == DNS_SERVICE_IP == "10.96.0.10"
    assert service.spec.selector == {"k8s-app": "kube-dns"}
    assert [(p.name, p.port, p.protocol) for p in service.spec.ports or ()] == [
        ("dns", 53, "UDP"),
        ("dns-tcp", 53, "TCP"),
        ("metrics", 9153, "TCP"),
    ]
    role = objects["ClusterRole"]
    granted = _granted(role)
    for group, resource in (
        ("", "services"),
        ("discovery.k8s.io", "endpointslices"),
        ("", "namespaces"),
    ):
        assert {(group, resource, "list"), (group, resource, "watch")} <= granted
    assert ("", "events", "create") in granted
    binding = objects["ClusterRoleBinding"]
    assert isinstance(binding, ClusterRoleBinding) and binding.role_ref is not None
    assert binding.role_ref.name == role.metadata.name
    assert [(s.kind, s.namespace, s.name) for s in binding.subjects or ()] == [
        ("ServiceAccount", "kube-system", "kube-dns")
    ]


async def test_a_real_api_server_accepts_them(client: Client) -> None:
    for obj in cluster_dns():
        await client.create(obj)
    service = await client.get(Service, "kube-dns", "kube-system")
    assert service.spec is not None and service.spec.cluster_ip == "10.96.0.10"
    deployment = await client.get(Deployment, "kube-dns", "kube-system")
    assert deployment.spec is not None and deployment.spec.replicas == 1


def _granted(role: Resource) -> set[tuple[str, str, str]]:
    assert isinstance(role, ClusterRole)
    return {
        (group, resource, verb)
        for rule in role.rules or ()
        for group in rule.api_groups or ()
        for resource in rule.resources or ()
        for verb in rule.verbs or ()
    }


def test_the_ingress_controller_add_on() -> None:
    objects = ingress_controller()
    assert_valid(objects, [*ACCOUNT_ROLE_DEPLOYMENT, Service, IngressClass])
    by_kind = _by_kind(objects)
    deployment = by_kind["Deployment"]
    assert isinstance(deployment, Deployment) and deployment.spec and deployment.spec.template
    pod = deployment.spec.template.spec
    assert pod is not None and pod.node_selector == {"node-role.kubernetes.io/control-plane": ""}
    (container,) = pod.containers or []
    assert container.command is not None and container.command[:2] == ["kubelab", "ingress"]
    args = build_parser().parse_args(container.command[1:])
    assert args.kubeconfig is None
    assert args.publish_service == "kube-system/kubelab-ingress"
    assert (args.http_address, args.https_address) == (("0.0.0.0", 80), ("0.0.0.0", 443))
    probes = [container.liveness_probe, container.readiness_probe]
    assert [(p.http_get.path, p.http_get.port) for p in probes if p and p.http_get] == [
        ("/healthz", args.healthz_address[1]),
        ("/ready", args.healthz_address[1]),
    ]
    service = by_kind["Service"]
    assert isinstance(service, Service) and service.spec is not None
    assert service.spec.type == "LoadBalancer"
    assert [(p.name, p.port) for p in service.spec.ports or ()] == [("http", 80), ("https", 443)]
    ingress_class = by_kind["IngressClass"]
    assert isinstance(ingress_class, IngressClass) and ingress_class.spec is not None
    assert ingress_class.spec.controller == args.controller_class == "kubelab.io/ingress"
    assert is_default_class(ingress_class)
    granted = _granted(by_kind["ClusterRole"])
    for group, resource in (
        ("", "services"),
        ("", "secrets"),
        ("discovery.k8s.io", "endpointslices"),
        ("networking.k8s.io", "ingresses"),
        ("networking.k8s.io", "ingressclasses"),
    ):
        assert {(group, resource, "list"), (group, resource, "watch")} <= granted
    assert ("networking.k8s.io", "ingresses/status", "patch") in granted


async def test_a_real_api_server_accepts_the_ingress_add_on(client: Client) -> None:
    for obj in ingress_controller():
        await client.create(obj)
    service = await client.get(Service, "kubelab-ingress", "kube-system")
    assert service.spec is not None and service.spec.type == "LoadBalancer"
    assert is_default_class(await client.get(IngressClass, "kubelab"))


def test_the_metrics_server_add_on() -> None:
    objects = metrics_server()
    kinds: list[type[Resource]] = [ServiceAccount, ClusterRole, ClusterRole, RoleBinding]
    assert_valid(
        objects, [*kinds, ClusterRoleBinding, ClusterRoleBinding, Service, Deployment, APIService]
    )
    assert [obj.metadata.name for obj in objects] == [
        "metrics-server",
        "system:aggregated-metrics-reader",
        "system:metrics-server",
        "metrics-server-auth-reader",
        "metrics-server:system:auth-delegator",
        "system:metrics-server",
        "metrics-server",
        "metrics-server",
        "v1beta1.metrics.k8s.io",
    ]
    apiservice = objects[-1]
    assert isinstance(apiservice, APIService) and apiservice.spec is not None
    spec = apiservice.spec
    assert (spec.group_priority_minimum, spec.version_priority) == (100, 100)
    assert spec.service is not None and (spec.service.namespace, spec.service.name) == (
        "kube-system",
        "metrics-server",
    )
    deployment = objects[-2]
    assert isinstance(deployment, Deployment)
    assert deployment.spec is not None and deployment.spec.template is not None
    pod = deployment.spec.template.spec
    assert pod is not None and pod.host_network
    (container,) = pod.containers or []
    assert container.command is not None
    args = build_parser().parse_args(container.command[1:])
    assert args.kubeconfig is None  # in-cluster: its token authenticates it to the kubelets
    assert args.secure_port == METRICS_PORT_SECURE
    assert args.kubelet_preferred_address_types == ["InternalIP", "ExternalIP", "Hostname"]
    assert ("", "nodes/metrics", "get") in _granted(objects[2])
    assert ("metrics.k8s.io", "pods", "list") in _granted(objects[1])


async def test_a_real_api_server_accepts_the_metrics_server_add_on(client: Client) -> None:
    for obj in metrics_server():
        await client.create(obj)
    apiservice = await client.get(APIService, "v1beta1.metrics.k8s.io")
    assert apiservice.spec is not None and apiservice.spec.insecure_skip_tls_verify
