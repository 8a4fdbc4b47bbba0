"""The cluster DNS and metrics-server add-ons' objects: valid, accepted by a real API server,
and consistent with ``kubelab dns``'s and ``kubelab metrics-server``'s own flags."""

from __future__ import annotations

from kube.api import walk
from kube.api.kinds.apiregistration_v1 import APIService
from kube.api.kinds.apps_v1 import Deployment
from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.rbac_v1 import ClusterRole, ClusterRoleBinding
from kube.api.meta_v1 import Resource
from kube.client.rest import Client
from kubelab.cli import build_parser
from kubelab.lab.addons import DNS_SERVICE_IP, METRICS_PORT_SECURE, cluster_dns, metrics_server


def _by_kind(objects: list[Resource]) -> dict[str, Resource]:
    return {type(obj).__name__: obj for obj in objects}


def test_objects_are_valid_and_in_creation_order() -> None:
    objects = cluster_dns()
    assert [type(obj) for obj in objects] == [
        ServiceAccount,
        ClusterRole,
        ClusterRoleBinding,
        Deployment,
        Service,
    ]
    for obj in objects:
        walk.set_defaults(obj)
        assert not walk.validate(obj), (obj.metadata.name, walk.validate(obj))


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
    assert isinstance(role, ClusterRole)
    granted = {
        (group, resource, verb)
        for rule in role.rules or ()
        for group in rule.api_groups or ()
        for resource in rule.resources or ()
        for verb in rule.verbs or ()
    }
    for group, resource in (
        ("", "services"),
        ("discovery.k8s.io", "endpointslices"),
        ("", "namespaces"),
    ):
        assert {(group, resource, "list"), (group, resource, "watch")} <= granted
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


def test_metrics_server_objects_are_upstreams_and_run_kubelab_metrics_server() -> None:
    objects = metrics_server()
    assert [(type(obj).__name__, obj.metadata.name) for obj in objects] == [
        ("ServiceAccount", "metrics-server"),
        ("ClusterRole", "system:aggregated-metrics-reader"),
        ("ClusterRole", "system:metrics-server"),
        ("RoleBinding", "metrics-server-auth-reader"),
        ("ClusterRoleBinding", "metrics-server:system:auth-delegator"),
        ("ClusterRoleBinding", "system:metrics-server"),
        ("Service", "metrics-server"),
        ("Deployment", "metrics-server"),
        ("APIService", "v1beta1.metrics.k8s.io"),
    ]
    for obj in objects:
        walk.set_defaults(obj)
        assert not walk.validate(obj), (obj.metadata.name, walk.validate(obj))
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
    assert pod is not None and pod.containers and pod.host_network
    (container,) = pod.containers
    assert container.command is not None
    args = build_parser().parse_args(container.command[1:])
    assert args.kubeconfig is None  # in-cluster: its token authenticates it to the kubelets
    assert args.secure_port == METRICS_PORT_SECURE
    assert args.kubelet_preferred_address_types == ["InternalIP", "ExternalIP", "Hostname"]
    role = objects[2]
    assert isinstance(role, ClusterRole)
    assert ("", "nodes/metrics", "get") in {
        (group, resource, verb)
        for rule in role.rules or ()
        for group in rule.api_groups or ()
        for resource in rule.resources or ()
        for verb in rule.verbs or ()
    }


async def test_a_real_api_server_accepts_the_metrics_server(client: Client) -> None:
    for obj in metrics_server():
        await client.create(obj)
    apiservice = await client.get(APIService, "v1beta1.metrics.k8s.io")
    assert apiservice.spec is not None and apiservice.spec.insecure_skip_tls_verify
