"""The cluster add-ons the lab installs, as typed objects: the cluster DNS, the Ingress
controller, the metrics-server, and the RBAC of the NetworkPolicy agents.

``cluster_dns()`` returns what a kubeadm cluster's CoreDNS manifests hold, for ``kubelab dns``:
the ``kube-dns`` ServiceAccount in kube-system, a ClusterRole (list and watch Services,
EndpointSlices and Namespaces; create Events, which tell each Service's first answer) bound to
it, a ``kube-dns`` Deployment, and the ``kube-dns`` Service at the cluster's DNS address
(10.96.0.10 in the lab), named ``kube-dns`` because kubelets, tutorials and ``kubectl -n
kube-system get svc`` expect that name.

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

``ingress_controller()`` is what k3s's bundled Traefik or ingress-nginx's manifest hold, for
``kubelab ingress``: the ``kubelab-ingress`` ServiceAccount in kube-system with a ClusterRole
reading Services, Secrets (the TLS certificates, from any namespace, as ingress-nginx reads
them), EndpointSlices, Ingresses and IngressClasses and patching ``ingresses/status``, a
``kubelab-ingress`` Deployment (the kubelab image, on the control plane as the DNS's, probed on
``/healthz`` and ``/ready`` at port 10254), its ``kubelab-ingress`` LoadBalancer Service (ports
80 and 443; the lab cloud gives it an address from the pool, which the controller writes to
every Ingress's status), and the ``kubelab`` IngressClass (controller ``kubelab.io/ingress``),
annotated as the default class, so an Ingress written without a class is the lab's.

``metrics_server()`` is upstream metrics-server's components.yaml for ``kubelab
metrics-server``: its ServiceAccount; ``system:metrics-server`` (nodes/metrics, pods and nodes)
and ``system:aggregated-metrics-reader`` (aggregated into view, edit and admin) with their
bindings, the auth-delegator and extension-apiserver-authentication-reader bindings a
delegating extension server needs; the Deployment (probed on ``/livez`` and ``/readyz`` over
HTTPS), the ``metrics-server`` Service and the APIService ``v1beta1.metrics.k8s.io`` (group
priority 100, version priority 100, its self-signed certificate not verified, as upstream's).
It reaches the kubelets at their InternalIP with its service-account token, verifying their
serving certificates with the cluster CA (the lab's kubelets have theirs signed through the API
server).  Unlike upstream's pod, it runs in the control plane node's network (hostNetwork, on
port 4443: the node's kubelet holds 10250), where the API server reaches it and it reaches the
kubelets by the routes the control plane already has, without relying on the pod network.

``network_policy_rbac()`` is what kube-network-policies' manifest grants its agent: a
ClusterRole reading Pods, Namespaces and NetworkPolicies, bound to the user the lab's agents
are (``system:kubelab-network-policy``, a client certificate of the cluster CA, since they
run on the nodes beside kube-proxy rather than as a DaemonSet's pods).

The objects are returned in the order they must be created.  The lab imports this module;
the components never do.
"""

from __future__ import annotations

from controlplane.ingress.controller import CONTROLLER as INGRESS_CONTROLLER
from kube.api.kinds.apiregistration_v1 import APIService, APIServiceSpec, ServiceReference
from kube.api.kinds.apps_v1 import Deployment, DeploymentSpec
from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.api.kinds.core_v1.node import LABEL_NODE_ROLE_CONTROL_PLANE
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
from kube.api.kinds.networking_v1 import (
    DEFAULT_CLASS_ANNOTATION,
    GROUP,
    IngressClass,
    IngressClassSpec,
)
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

ADDON_NAMESPACE = "kube-system"
DNS_NAME = "kube-dns"
DNS_ROLE = "system:kubelab-dns"
DNS_SERVICE_IP = "10.96.0.10"
DNS_PORT = 53
HEALTH_PORT = 8080
READY_PORT = 8181
METRICS_PORT = 9153
INGRESS_NAME = "kubelab-ingress"
INGRESS_ROLE = "system:kubelab-ingress"
INGRESS_CLASS = "kubelab"
HTTP_PORT = 80
HTTPS_PORT = 443
INGRESS_HEALTH_PORT = 10254
METRICS_NAME = "metrics-server"
METRICS_ROLE = "system:metrics-server"
METRICS_PORT_SECURE = 4443
NETWORK_POLICY_USER = "system:kubelab-network-policy"
READ = ["get", "list", "watch"]
RBAC_GROUP = "rbac.authorization.k8s.io"


def _service_account_rbac(
    name: str, role_name: str, rules: list[PolicyRule], labels: dict[str, str]
) -> list[Resource]:
    """An add-on's ServiceAccount in kube-system, its ClusterRole and their binding."""
    role = ClusterRole(metadata=ObjectMeta(name=role_name, labels=labels), rules=rules)
    binding = ClusterRoleBinding(
        metadata=ObjectMeta(name=role_name, labels=labels),
        role_ref=RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role_name),
        subjects=[Subject(kind="ServiceAccount", name=name, namespace=ADDON_NAMESPACE)],
    )
    account = ServiceAccount(
        metadata=ObjectMeta(name=name, namespace=ADDON_NAMESPACE, labels=labels)
    )
    return [account, role, binding]


def _kubelab_container(
    name: str,
    image: str,
    command: list[str],
    ports: list[ContainerPort],
    health_port: int,
    ready_port: int,
) -> Container:
    """A container running ``kubelab`` ``command``, probed on ``/healthz`` (liveness) and
    ``/ready`` (readiness)."""
    return Container(
        name=name,
        image=image,
        image_pull_policy="IfNotPresent",
        command=command,
        ports=ports,
        liveness_probe=Probe(
            http_get=HTTPGetAction(path="/healthz", port=health_port, scheme="HTTP"),
            initial_delay_seconds=10,
            timeout_seconds=5,
            failure_threshold=5,
        ),
        readiness_probe=Probe(
            http_get=HTTPGetAction(path="/ready", port=ready_port, scheme="HTTP"),
            period_seconds=1,
        ),
    )


def _control_plane_deployment(
    name: str,
    labels: dict[str, str],
    container: Container,
    dns_policy: str,
    *,
    host_network: bool = False,
) -> Deployment:
    """One replica of an add-on's pod, run as its ServiceAccount on the control plane (see
    the module docstring), in the node's network if ``host_network``."""
    return Deployment(
        metadata=ObjectMeta(name=name, namespace=ADDON_NAMESPACE, labels=labels),
        spec=DeploymentSpec(
            replicas=1,
            selector=LabelSelector(match_labels=labels),
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels=labels),
                spec=PodSpec(
                    containers=[container],
                    service_account_name=name,
                    dns_policy=dns_policy,
                    host_network=host_network or None,
                    priority_class_name="system-cluster-critical",
                    node_selector={LABEL_NODE_ROLE_CONTROL_PLANE: ""},
                    tolerations=[
                        Toleration(
                            key=LABEL_NODE_ROLE_CONTROL_PLANE,
                            operator="Exists",
                            effect="NoSchedule",
                        )
                    ],
                ),
            ),
        ),
    )


def cluster_dns(
    cluster_ip: str = DNS_SERVICE_IP,
    cluster_domain: str = "cluster.local",
    image: str = KUBELAB_IMAGE,
) -> list[Resource]:
    """The DNS add-on's objects, in creation order; see the module docstring."""
    labels = {"k8s-app": DNS_NAME}
    rules = [
        PolicyRule(api_groups=[""], resources=["services", "namespaces"], verbs=["list", "watch"]),
        PolicyRule(
            api_groups=["discovery.k8s.io"], resources=["endpointslices"], verbs=["list", "watch"]
        ),
        PolicyRule(api_groups=[""], resources=["events"], verbs=["create", "patch"]),
    ]
    command = [
        "kubelab",
        "dns",
        f"--cluster-domain={cluster_domain}",
        f"--listen=0.0.0.0:{DNS_PORT}",
        f"--health-port={HEALTH_PORT}",
        f"--ready-port={READY_PORT}",
        f"--metrics-port={METRICS_PORT}",
    ]
    ports = [
        ContainerPort(name="dns", container_port=DNS_PORT, protocol="UDP"),
        ContainerPort(name="dns-tcp", container_port=DNS_PORT, protocol="TCP"),
        ContainerPort(name="metrics", container_port=METRICS_PORT, protocol="TCP"),
    ]
    container = _kubelab_container("dns", image, command, ports, HEALTH_PORT, READY_PORT)
    service = Service(
        metadata=ObjectMeta(name=DNS_NAME, namespace=ADDON_NAMESPACE, labels=labels),
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
        *_service_account_rbac(DNS_NAME, DNS_ROLE, rules, labels),
        _control_plane_deployment(DNS_NAME, labels, container, "Default"),
        service,
    ]


def ingress_controller(image: str = KUBELAB_IMAGE) -> list[Resource]:
    """The Ingress add-on's objects, in creation order; see the module docstring."""
    labels = {"app.kubernetes.io/name": INGRESS_NAME}
    rules = [
        PolicyRule(api_groups=[""], resources=["services", "secrets"], verbs=["list", "watch"]),
        PolicyRule(
            api_groups=["discovery.k8s.io"], resources=["endpointslices"], verbs=["list", "watch"]
        ),
        PolicyRule(
            api_groups=[GROUP], resources=["ingresses", "ingressclasses"], verbs=["list", "watch"]
        ),
        PolicyRule(api_groups=[GROUP], resources=["ingresses/status"], verbs=["patch"]),
    ]
    command = [
        "kubelab",
        "ingress",
        f"--controller-class={INGRESS_CONTROLLER}",
        f"--publish-service={ADDON_NAMESPACE}/{INGRESS_NAME}",
        f"--http-address=0.0.0.0:{HTTP_PORT}",
        f"--https-address=0.0.0.0:{HTTPS_PORT}",
        f"--healthz-address=0.0.0.0:{INGRESS_HEALTH_PORT}",
    ]
    ports = [
        ContainerPort(name="http", container_port=HTTP_PORT, protocol="TCP"),
        ContainerPort(name="https", container_port=HTTPS_PORT, protocol="TCP"),
    ]
    container = _kubelab_container(
        "controller", image, command, ports, INGRESS_HEALTH_PORT, INGRESS_HEALTH_PORT
    )
    service = Service(
        metadata=ObjectMeta(name=INGRESS_NAME, namespace=ADDON_NAMESPACE, labels=labels),
        spec=ServiceSpec(
            type="LoadBalancer",
            selector=labels,
            ports=[
                ServicePort(name="http", port=HTTP_PORT, target_port="http", protocol="TCP"),
                ServicePort(name="https", port=HTTPS_PORT, target_port="https", protocol="TCP"),
            ],
        ),
    )
    ingress_class = IngressClass(
        metadata=ObjectMeta(
            name=INGRESS_CLASS, labels=labels, annotations={DEFAULT_CLASS_ANNOTATION: "true"}
        ),
        spec=IngressClassSpec(controller=INGRESS_CONTROLLER),
    )
    return [
        *_service_account_rbac(INGRESS_NAME, INGRESS_ROLE, rules, labels),
        _control_plane_deployment(INGRESS_NAME, labels, container, "ClusterFirst"),
        service,
        ingress_class,
    ]


def metrics_server(image: str = KUBELAB_IMAGE) -> list[Resource]:
    """The metrics-server add-on's objects, in creation order; see the module docstring."""
    labels = {"k8s-app": METRICS_NAME}
    rules = [
        PolicyRule(api_groups=[""], resources=["nodes/metrics"], verbs=["get"]),
        PolicyRule(api_groups=[""], resources=["pods", "nodes"], verbs=READ),
    ]
    account, role, binding = _service_account_rbac(METRICS_NAME, METRICS_ROLE, rules, labels)
    subject = Subject(kind="ServiceAccount", name=METRICS_NAME, namespace=ADDON_NAMESPACE)
    aggregated = {f"{RBAC_GROUP}/aggregate-to-{r}": "true" for r in ("view", "edit", "admin")}
    reader = ClusterRole(
        metadata=ObjectMeta(
            name="system:aggregated-metrics-reader", labels={**labels, **aggregated}
        ),
        rules=[PolicyRule(api_groups=["metrics.k8s.io"], resources=["pods", "nodes"], verbs=READ)],
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
    service = Service(
        metadata=ObjectMeta(name=METRICS_NAME, namespace=ADDON_NAMESPACE, labels=labels),
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
            service=ServiceReference(name=METRICS_NAME, namespace=ADDON_NAMESPACE),
        ),
    )
    return [
        account,
        reader,
        role,
        RoleBinding(
            metadata=ObjectMeta(
                name="metrics-server-auth-reader", namespace=ADDON_NAMESPACE, labels=labels
            ),
            role_ref=RoleRef(
                api_group=RBAC_GROUP, kind="Role", name="extension-apiserver-authentication-reader"
            ),
            subjects=[subject],
        ),
        ClusterRoleBinding(
            metadata=ObjectMeta(name="metrics-server:system:auth-delegator", labels=labels),
            role_ref=RoleRef(
                api_group=RBAC_GROUP, kind="ClusterRole", name="system:auth-delegator"
            ),
            subjects=[subject],
        ),
        binding,
        service,
        _control_plane_deployment(
            METRICS_NAME, labels, container, "ClusterFirst", host_network=True
        ),
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
