"""The cluster add-ons the lab installs, as typed objects: the cluster DNS, the metrics-server,
and the RBAC of the NetworkPolicy agents.

``cluster_dns()`` returns what a kubeadm cluster's CoreDNS manifests hold, for ``kubelab dns``:
the ``kube-dns`` ServiceAccount in kube-system, a ClusterRole (list and watch Services,
EndpointSlices and Namespaces) bound to it, a ``kube-dns`` Deployment, and the ``kube-dns``
Service at the cluster's DNS address (10.96.0.10 in the lab), named ``kube-dns`` because
kubelets, tutorials and ``kubectl -n kube-system get svc`` expect that name.

The role is ``system:kubelab-dns``, not ``system:kube-dns``, for the reason kubeadm's is
``system:coredns``: the API server bootstraps ``system:kube-dns`` itself (and its binding to
this ServiceAccount) with upstream's rules, which do not include Namespaces, and reconciles it
at every start, so the add-on cannot own it.

The Deployment runs the kubelab image (the one that holds ``kubelab`` itself) with
``kubelab dns`` and the in-cluster configuration (no kubeconfig: the pod's service-account
token), dnsPolicy Default (the pod resolves through its node's resolv.conf, which is also
where it forwards other names, never through itself), tolerates the control-plane taint,
is pinned to the control plane (nodeSelector ``node-role.kubernetes.io/control-plane``: the
one node that imports the large kubelab image), and is probed on ``/healthz`` (liveness)
and ``/ready`` (readiness: its caches synced).
``metrics_server()`` is upstream metrics-server's components.yaml for ``kubelab
metrics-server``: its ServiceAccount; ``system:metrics-server`` (nodes/metrics, pods and nodes)
and ``system:aggregated-metrics-reader`` (aggregated into view, edit and admin) with their
bindings, the auth-delegator and extension-apiserver-authentication-reader bindings a
delegating extension server needs; the Deployment, the ``metrics-server`` Service and the
APIService ``v1beta1.metrics.k8s.io`` (group priority 100, version priority 100, its
self-signed certificate not verified, as upstream's).  It reaches the kubelets at their
InternalIP with its service-account token, verifying their serving certificates with the
cluster CA (the lab's kubelets have theirs signed through the API server).  Unlike upstream's
pod, it runs in the control plane node's network (hostNetwork, on port 4443: the node's
kubelet holds 10250), where the API server reaches it and it reaches the kubelets by the
routes the control plane already has, without relying on the pod network.
``network_policy_rbac()`` is what kube-network-policies' manifest grants its agent: a
ClusterRole reading Pods, Namespaces and NetworkPolicies, bound to the user the lab's agents
are (``system:kubelab-network-policy``, a client certificate of the cluster CA, since they
run on the nodes beside kube-proxy rather than as a DaemonSet's pods).

The objects are returned in the order they must be created.  The lab imports this module;
the components never do.
"""

from __future__ import annotations

from kube.api.kinds.apiregistration_v1 import APIService, APIServiceSpec, ServiceReference
from kube.api.kinds.apps_v1 import Deployment, DeploymentSpec
from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.api.kinds.core_v1.pod import (
    Container,
    ContainerPort,
    HTTPGetAction,
    PodSpec,
    PodTemplateSpec,
    Probe,
    Toleration,
)
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.rbac_v1 import (
    ClusterRole,
    ClusterRoleBinding,
    PolicyRule,
    RoleBinding,
    RoleRef,
    Subject,
)
from kube.api.meta_v1 import LabelSelector, ObjectMeta, Resource
from kubelab.lab.images import KUBELAB_IMAGE

DNS_NAMESPACE = "kube-system"
DNS_NAME = "kube-dns"
DNS_ROLE = "system:kubelab-dns"
DNS_SERVICE_IP = "10.96.0.10"
DNS_PORT = 53
HEALTH_PORT = 8080
READY_PORT = 8181
METRICS_PORT = 9153
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"
NETWORK_POLICY_USER = "system:kubelab-network-policy"
READ = ["get", "list", "watch"]
METRICS_NAME = "metrics-server"
METRICS_ROLE = "system:metrics-server"
METRICS_PORT_SECURE = 4443
RBAC_GROUP = "rbac.authorization.k8s.io"


def _control_plane_deployment(
    metadata: ObjectMeta, container: Container, pod: PodSpec
) -> Deployment:
    """One replica of ``pod`` running ``container``, a critical add-on on the control plane
    (the one node that imports the kubelab image), labelled and selected as ``metadata``."""
    pod.containers = [container]
    pod.priority_class_name = "system-cluster-critical"
    pod.node_selector = {CONTROL_PLANE_TAINT: ""}
    pod.tolerations = [Toleration(key=CONTROL_PLANE_TAINT, operator="Exists", effect="NoSchedule")]
    return Deployment(
        metadata=metadata,
        spec=DeploymentSpec(
            replicas=1,
            selector=LabelSelector(match_labels=metadata.labels),
            template=PodTemplateSpec(metadata=ObjectMeta(labels=metadata.labels), spec=pod),
        ),
    )


def cluster_dns(
    cluster_ip: str = DNS_SERVICE_IP,
    cluster_domain: str = "cluster.local",
    image: str = KUBELAB_IMAGE,
) -> list[Resource]:
    """The DNS add-on's objects, in creation order; see the module docstring."""
    labels = {"k8s-app": DNS_NAME}
    metadata = ObjectMeta(name=DNS_NAME, namespace=DNS_NAMESPACE, labels=labels)
    role = ClusterRole(
        metadata=ObjectMeta(name=DNS_ROLE, labels=labels),
        rules=[
            PolicyRule(
                api_groups=[""], resources=["services", "namespaces"], verbs=["list", "watch"]
            ),
            PolicyRule(
                api_groups=["discovery.k8s.io"],
                resources=["endpointslices"],
                verbs=["list", "watch"],
            ),
        ],
    )
    binding = ClusterRoleBinding(
        metadata=ObjectMeta(name=DNS_ROLE, labels=labels),
        role_ref=RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=DNS_ROLE),
        subjects=[Subject(kind="ServiceAccount", name=DNS_NAME, namespace=DNS_NAMESPACE)],
    )
    command = [
        "kubelab",
        "dns",
        f"--cluster-domain={cluster_domain}",
        f"--listen=0.0.0.0:{DNS_PORT}",
        f"--health-port={HEALTH_PORT}",
        f"--ready-port={READY_PORT}",
        f"--metrics-port={METRICS_PORT}",
    ]
    container = Container(
        name="dns",
        image=image,
        image_pull_policy="IfNotPresent",
        command=command,
        ports=[
            ContainerPort(name="dns", container_port=DNS_PORT, protocol="UDP"),
            ContainerPort(name="dns-tcp", container_port=DNS_PORT, protocol="TCP"),
            ContainerPort(name="metrics", container_port=METRICS_PORT, protocol="TCP"),
        ],
        liveness_probe=Probe(
            http_get=HTTPGetAction(path="/healthz", port=HEALTH_PORT, scheme="HTTP"),
            initial_delay_seconds=10,
            timeout_seconds=5,
            failure_threshold=5,
        ),
        readiness_probe=Probe(
            http_get=HTTPGetAction(path="/ready", port=READY_PORT, scheme="HTTP"),
            period_seconds=1,
        ),
    )
    deployment = _control_plane_deployment(
        metadata, container, PodSpec(service_account_name=DNS_NAME, dns_policy="Default")
    )
    service = Service(
        metadata=ObjectMeta(name=DNS_NAME, namespace=DNS_NAMESPACE, labels=labels),
        spec=ServiceSpec(
            cluster_ip=cluster_ip,
            selector=labels,
            ports=[
                ServicePort(name="dns", port=DNS_PORT, target_port=DNS_PORT, protocol="UDP"),
                ServicePort(name="dns-tcp", port=DNS_PORT, target_port=DNS_PORT, protocol="TCP"),
                ServicePort(
                    name="metrics", port=METRICS_PORT, target_port=METRICS_PORT, protocol="TCP"
                ),
            ],
        ),
    )
    return [
        ServiceAccount(metadata=ObjectMeta(name=DNS_NAME, namespace=DNS_NAMESPACE, labels=labels)),
        role,
        binding,
        deployment,
        service,
    ]


def _cluster_role_ref(name: str) -> RoleRef:
    return RoleRef(api_group=RBAC_GROUP, kind="ClusterRole", name=name)


def metrics_server(image: str = KUBELAB_IMAGE) -> list[Resource]:
    """The metrics-server add-on's objects, in creation order; see the module docstring."""
    labels = {"k8s-app": METRICS_NAME}
    namespace = DNS_NAMESPACE

    def meta(name: str, namespaced: bool = True, **extra: str) -> ObjectMeta:
        return ObjectMeta(
            name=name, namespace=namespace if namespaced else None, labels={**labels, **extra}
        )

    account = Subject(kind="ServiceAccount", name=METRICS_NAME, namespace=namespace)
    reader = ClusterRole(
        metadata=meta(
            "system:aggregated-metrics-reader",
            namespaced=False,
            **{
                f"rbac.authorization.k8s.io/aggregate-to-{r}": "true"
                for r in ("view", "edit", "admin")
            },
        ),
        rules=[PolicyRule(api_groups=["metrics.k8s.io"], resources=["pods", "nodes"], verbs=READ)],
    )
    role = ClusterRole(
        metadata=meta(METRICS_ROLE, namespaced=False),
        rules=[
            PolicyRule(api_groups=[""], resources=["nodes/metrics"], verbs=["get"]),
            PolicyRule(api_groups=[""], resources=["pods", "nodes"], verbs=READ),
        ],
    )
    command = [
        "kubelab",
        "metrics-server",
        f"--secure-port={METRICS_PORT_SECURE}",
        "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
        "--metric-resolution=15s",
    ]
    container = Container(
        name=METRICS_NAME,
        image=image,
        image_pull_policy="IfNotPresent",
        command=command,
        ports=[ContainerPort(name="https", container_port=METRICS_PORT_SECURE, protocol="TCP")],
        liveness_probe=Probe(
            http_get=HTTPGetAction(path="/livez", port="https", scheme="HTTPS"),
            initial_delay_seconds=20,
            timeout_seconds=5,
            failure_threshold=5,
        ),
        readiness_probe=Probe(
            http_get=HTTPGetAction(path="/readyz", port="https", scheme="HTTPS"),
            period_seconds=2,
        ),
    )
    deployment = _control_plane_deployment(
        meta(METRICS_NAME),
        container,
        PodSpec(service_account_name=METRICS_NAME, host_network=True),
    )
    service = Service(
        metadata=meta(METRICS_NAME),
        spec=ServiceSpec(
            selector=labels,
            ports=[ServicePort(name="https", port=443, target_port="https", protocol="TCP")],
        ),
    )
    apiservice = APIService(
        metadata=ObjectMeta(name="v1beta1.metrics.k8s.io", labels=labels),
        spec=APIServiceSpec(
            group="metrics.k8s.io",
            version="v1beta1",
            group_priority_minimum=100,
            version_priority=100,
            insecure_skip_tls_verify=True,
            service=ServiceReference(name=METRICS_NAME, namespace=namespace),
        ),
    )
    return [
        ServiceAccount(metadata=meta(METRICS_NAME)),
        reader,
        role,
        RoleBinding(
            metadata=meta("metrics-server-auth-reader"),
            role_ref=RoleRef(
                api_group=RBAC_GROUP, kind="Role", name="extension-apiserver-authentication-reader"
            ),
            subjects=[account],
        ),
        ClusterRoleBinding(
            metadata=meta("metrics-server:system:auth-delegator", namespaced=False),
            role_ref=_cluster_role_ref("system:auth-delegator"),
            subjects=[account],
        ),
        ClusterRoleBinding(
            metadata=meta(METRICS_ROLE, namespaced=False),
            role_ref=_cluster_role_ref(METRICS_ROLE),
            subjects=[account],
        ),
        service,
        deployment,
        apiservice,
    ]


def network_policy_rbac() -> list[Resource]:
    """The NetworkPolicy agents' ClusterRole and its binding; see the module docstring."""
    role = ClusterRole(
        metadata=ObjectMeta(name=NETWORK_POLICY_USER),
        rules=[
            PolicyRule(api_groups=[""], resources=["pods", "namespaces"], verbs=READ),
            PolicyRule(api_groups=["networking.k8s.io"], resources=["networkpolicies"], verbs=READ),
        ],
    )
    binding = ClusterRoleBinding(
        metadata=ObjectMeta(name=NETWORK_POLICY_USER),
        role_ref=RoleRef(
            api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=NETWORK_POLICY_USER
        ),
        subjects=[
            Subject(kind="User", api_group="rbac.authorization.k8s.io", name=NETWORK_POLICY_USER)
        ],
    )
    return [role, binding]
