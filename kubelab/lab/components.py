"""What each component of a lab node runs: its command line, config files, log and health URL.

The one place that turns the inventory (``kubelab.lab.topology``) into command lines, so the
lab's flag lists exist once: ``kubelab.lab.cluster`` starts these ``Component``s inside the
lab's namespaces, and the same values can be rendered into one systemd unit per component
for VMs (where ``Lab(run_root=..., log_root=...)`` puts state under /var/lib/kubelab, no
``netns`` is used and ``program`` is the installed ``kubelab``).

Every function here is pure: it computes, never touches the machine.  A component's
``dirs`` must exist and its ``files`` (containerd's TOML, the kubelet's resolv.conf) be
written before it starts.  Credentials are not files of a component: the lab writes them
(``cluster.node_credentials``) where these flags name them.

Identities: the server authorizes with ``Node,RBAC``; each kubelet is ``system:node:<name>``
(its own kubeconfig, or TLS bootstrap with ``bootstrap=True``), the proxies are
``system:kube-proxy``.  The server runs the cloud-controller-manager with the lab's provider
(``cloud_config``: the lab's inventory as a small cloud), and the kubelets run with
``--cloud-provider external``.  A kubelet's ``--resolv-conf`` is ``Lab.resolv_conf`` (VMs:
``Lab(..., resolv_conf=Path("/etc/resolv.conf"))``), else a per-node file without
nameservers, since the netns lab has no upstream resolver.

Per node:

- ``controlplane``: ``etcd`` (``--store etcd`` only: client URL http://127.0.0.1:2379 inside
  the namespace, data under the lab's state), ``server`` (``kubelab server``), then like every
  Kubernetes node ``containerd``, ``kubelet`` (registered with the
  ``node-role.kubernetes.io/control-plane:NoSchedule`` taint), ``proxy`` and
  ``network-policy`` (``kubelab network-policy``: NetworkPolicy enforced in the node's
  nftables, as ``system:kubelab-network-policy``);
- ``nodeN``: ``containerd``, ``kubelet``, ``proxy``, ``network-policy`` (not yet on VMs,
  whose provisioning does not create its RBAC);
- the host: ``forwarder`` (``kubelab lab forward``: 127.0.0.1:<host port> → the API server),
  listed under ``controlplane`` since that is where it leads.

With several control planes (the HA lab) ``controlplaneN`` runs one member of an etcd cluster
(``etcd_cluster``: ``kubelab.lab.etcd``'s configuration, peer TLS from the cluster CA, plain
HTTP clients on the node's address) and a ``kubelab server`` bound to its own address,
storing through its local member first and the others as fallback, advertising its own
address (the ``kubernetes`` Service's endpoints are every live server, as upstream; the
server's in-process components talk to it there) with 10.240.0.10 as an extra SAN of its
serving certificate, since every other client comes through the load balancer.  Its
scheduler, controller-manager and cloud-controller-manager run with leader election
(``kubelab server``'s default); each server runs under ``unshare --uts`` with the node's name
as hostname, which makes its Lease holder identities ``controlplaneN_<uuid>``.  The router
runs ``loadbalancer`` (``kubelab lab forward`` with every server as target and ``/readyz``
health checks), and the host forwarder leads into the router, to the load balancer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kube.api.kinds.core_v1.node import LABEL_NODE_ROLE_CONTROL_PLANE
from kubelab.lab import registry
from kubelab.lab.etcd import PROGRESS_NOTIFY, EtcdCluster, EtcdMember
from kubelab.lab.images import PAUSE_IMAGE
from kubelab.lab.topology import (
    API_PORT,
    BRIDGE,
    CLUSTER_CIDR,
    CLUSTER_DNS,
    CONTROLPLANE_IP,
    INSTANCE_TYPE,
    KUBELET_PORT,
    LOAD_BALANCER_POOL,
    REGION,
    SERVICE_CIDR,
    VM_UNDERLAY_INTERFACE,
    Lab,
    Node,
    Role,
)
from node.kubelet.runtimeconfig import ContainerdLayout, containerd_config

KUBELAB: Final = (sys.executable, "-m", "kubelab")
"""How the lab runs ``kubelab`` (this interpreter, so a venv's install is the one used)."""
ETCD: Final = "/usr/bin/etcd"
REGISTRY: Final = "/usr/bin/docker-registry"
ETCD_CLIENT_URL: Final = "http://127.0.0.1:2379"
ETCD_PEER_URL: Final = "http://127.0.0.1:2380"
PROXY_HEALTHZ_PORT: Final = 10256
NETWORK_POLICY_HEALTHZ_PORT: Final = 9080
CONTROL_PLANE_TAINT: Final = f"{LABEL_NODE_ROLE_CONTROL_PLANE}:NoSchedule"
NODE_MONITOR_GRACE_PERIOD: Final = "20s"
"""How long a silent node stays Ready (upstream 40 s): a removed node is gone sooner."""
NETNS_SERVER_FLAGS: Final = ("--node-monitor-grace-period", NODE_MONITOR_GRACE_PERIOD)
VM_SERVER_FLAGS: Final = ("--no-leader-elect",)
"""On VMs, which may be emulated (qemu's TCG, several times slower than the host): upstream's
40 s before a silent node is NotReady, and no leader election, whose 10 s renewal deadline a
controller-manager busy starting its controllers on an emulated CPU misses (it then exits and
starts over, and never assigns a pod CIDR); the VM lab has one control plane, so no one to
elect against."""
NO_NAMESERVERS: Final = (
    "# The netns lab has no upstream resolver: no nameserver, so pods with dnsPolicy\n"
    "# Default (the cluster DNS among them) resolve nothing outside the cluster, and the\n"
    "# cluster DNS answers REFUSED for outside names instead of forwarding to itself.\n"
)


@dataclass(frozen=True)
class Health:
    """An HTTP(S) endpoint that answers 200 while the component is healthy, asked from
    inside ``netns`` (None: the host); certificates are not checked (status only).  A
    ``unix://`` URL is a CRI socket, healthy when the runtime reports RuntimeReady."""

    url: str
    netns: Path | None


@dataclass(frozen=True)
class Component:
    """One long-running process of a node."""

    node: str
    name: str
    command: tuple[str, ...]
    log: Path
    netns: Path | None = None
    cwd: Path | None = None
    dirs: tuple[Path, ...] = ()
    files: Mapping[Path, str] = field(default_factory=dict)
    health: Health | None = None

    @property
    def key(self) -> str:
        """``NODE/COMPONENT``, the process table's key."""
        return f"{self.node}/{self.name}"


def containerd_layout(node: Node) -> ContainerdLayout:
    """The node's containerd layout (sockets, root, state under its state directory; the
    registries' ``hosts.toml`` files under ``certs.d``)."""
    return ContainerdLayout(
        state_dir=node.containerd_dir,
        sandbox_image=PAUSE_IMAGE,
        cni_bin_dir=node.cni_bin_dir,
        cni_conf_dir=node.cni_conf_dir,
        registry_hosts_dir=node.containerd_dir / "certs.d",
    )


def store_url(lab: Lab, node: Node) -> str:
    """``kubelab server --store`` on control plane ``node``: SQLite in its data directory,
    the lab's etcd, or (HA) every member, the node's own first."""
    if lab.ha:
        cluster = etcd_cluster(lab)
        return cluster.store_url(first=cluster.member(node.name))
    return (
        f"etcd://{ETCD_CLIENT_URL.removeprefix('http://')}"
        if lab.spec.store == "etcd"
        else "sqlite"
    )


def etcd_cluster(lab: Lab) -> EtcdCluster:
    """The HA lab's etcd cluster: a member per control plane, named after it, on its address;
    certificates and data directories under ``Lab.etcd_dir``."""
    members = tuple(EtcdMember(n.name, n.ip) for n in lab.controlplanes)
    return EtcdCluster(members, lab.etcd_dir)


def etcd(lab: Lab, node: Node) -> Component:
    if lab.ha:
        cluster = etcd_cluster(lab)
        member = cluster.member(node.name)
        return Component(
            node.name,
            "etcd",
            (ETCD, *cluster.flags(member)),
            node.log("etcd"),
            netns=node.netns_path,
            cwd=node.state_dir,
            dirs=(node.state_dir, lab.etcd_dir),
            health=Health(f"{cluster.client_url(member)}/health", node.netns_path),
        )
    cp = node
    return Component(
        cp.name,
        "etcd",
        (
            ETCD,
            "--name", cp.name,
            "--data-dir", str(lab.etcd_dir),
            "--listen-client-urls", ETCD_CLIENT_URL,
            "--advertise-client-urls", ETCD_CLIENT_URL,
            "--listen-peer-urls", ETCD_PEER_URL,
            "--initial-advertise-peer-urls", ETCD_PEER_URL,
            "--initial-cluster", f"{cp.name}={ETCD_PEER_URL}",
            "--initial-cluster-state", "new",
            PROGRESS_NOTIFY,
        ),
        cp.log("etcd"),
        netns=cp.netns_path,
        cwd=cp.state_dir,
        dirs=(cp.state_dir,),
        health=Health(f"{ETCD_CLIENT_URL}/health", cp.netns_path),
    )  # fmt: skip


def server(lab: Lab, node: Node, program: tuple[str, ...] = KUBELAB) -> Component:
    """``kubelab server`` on control plane ``node`` (see the module docstring for HA)."""
    cp = node
    data_dir = lab.server_dir_of(cp)
    hostname = ("unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', cp.name)
    return Component(
        cp.name,
        "server",
        (
            *(hostname if lab.ha else ()),
            *program, "server",
            "--data-dir", str(data_dir),
            "--bind-address", cp.ip,
            "--secure-port", str(API_PORT),
            "--advertise-address", cp.ip,
            *(("--tls-san", CONTROLPLANE_IP) if lab.ha else ()),
            "--store", store_url(lab, cp),
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--cluster-cidr", CLUSTER_CIDR,
            "--authorization-mode", "Node,RBAC",
            "--kubelet-certificate-authority", str(lab.ca_file),
            "--approve-kubelet-serving-certificates",
            "--cloud-provider", "lab",
            "--cloud-config", str(lab.cloud_config),
            "--cluster-name", lab.name,
            *(VM_SERVER_FLAGS if lab.vms else NETNS_SERVER_FLAGS),
            "--controllers", "*,bootstrapsigner,tokencleaner",
        ),
        cp.log("server"),
        netns=cp.netns_path,
        cwd=lab.state_dir,
        dirs=(data_dir,),
        health=Health(f"https://{cp.ip}:{API_PORT}/readyz", cp.netns_path),
    )  # fmt: skip


def api_node(lab: Lab) -> Node:
    """The namespace owning 10.240.0.10: the control plane, or (HA) the router."""
    return lab.router if lab.ha else lab.controlplane


def forwarder(lab: Lab, program: tuple[str, ...] = KUBELAB) -> Component:
    """The host forwarder: 127.0.0.1:<host port> to 10.240.0.10:6443 in ``api_node``."""
    to = api_node(lab)
    host, port = lab.host_api_address
    return Component(
        to.name,
        "forwarder",
        (
            *program, "lab", "forward",
            "--netns", str(to.netns_path),
            "--target", f"{CONTROLPLANE_IP}:{API_PORT}",
            "--listen", f"{host}:{port}",
        ),
        to.log("forwarder"),
        cwd=lab.state_dir,
        health=Health(f"{lab.host_api_url}/readyz", None),
    )  # fmt: skip


def loadbalancer(lab: Lab, program: tuple[str, ...] = KUBELAB) -> Component:
    """HA: the API servers' load balancer in the router, on 10.240.0.10:6443 (see
    ``kubelab.lab.forward``)."""
    router = lab.router
    targets = (a for cp in lab.controlplanes for a in ("--target", f"{cp.ip}:{API_PORT}"))
    return Component(
        router.name,
        "loadbalancer",
        (
            *program, "lab", "forward",
            "--listen", f"{CONTROLPLANE_IP}:{API_PORT}",
            *targets,
            "--health-check", "/readyz",
            "--ca", str(lab.ca_file),
            "--state-file", str(lab.loadbalancer_state),
        ),
        router.log("loadbalancer"),
        netns=router.netns_path,
        cwd=lab.state_dir,
        health=Health(f"{lab.api_url}/readyz", router.netns_path),
    )  # fmt: skip


def containerd(lab: Lab, node: Node) -> Component:
    """The node's containerd, pulling through the lab registry (``registry.mirror_hosts``)."""
    layout = containerd_layout(node)
    assert layout.registry_hosts_dir is not None
    mirrors = registry.mirror_hosts(registry.LabRegistry.of(lab), layout.registry_hosts_dir)
    return Component(
        node.name,
        "containerd",
        ("containerd", "--config", str(layout.config_file)),
        node.log("containerd"),
        netns=node.netns_path,
        dirs=(
            layout.root,
            layout.state,
            layout.opt,
            *layout.runc_roots.values(),
            node.cni_bin_dir,
            node.cni_conf_dir,
        ),
        files={layout.config_file: containerd_config(layout), **mirrors},
        health=Health(layout.endpoint, None),
    )


def _registry(lab: Lab, private: bool) -> Component:
    where = registry.LabRegistry.of(lab)
    node = lab.registry_node
    return Component(
        node.name,
        "private-registry" if private else "registry",
        (REGISTRY, "serve", str(where.config_file(private))),
        node.log("private-registry" if private else "registry"),
        netns=where.netns,
        cwd=lab.state_dir,
        dirs=(where.storage(private),),
        files={where.config_file(private): registry.config(where, private)},
        health=Health(f"{where.url(private)}/", where.netns),
    )


def registry_component(lab: Lab) -> Component:
    """The lab registry (``kubelab.lab.registry``): every image, no credentials."""
    return _registry(lab, private=False)


def private_registry(lab: Lab) -> Component:
    """The private registry: htpasswd (``registry.write_credentials`` writes it first)."""
    return _registry(lab, private=True)


def resolver(lab: Lab, addresses: Sequence[str], program: tuple[str, ...] = KUBELAB) -> Component:
    """The router's answer to the host's nameservers (``kubelab.lab.resolver``): the nodes'
    processes read the host's resolv.conf, whose servers the lab cannot reach."""
    router = lab.router
    listen = (a for address in addresses for a in ("--listen", f"{address}:53"))
    return Component(
        router.name,
        "resolver",
        (*program, "lab", "resolver", *listen),
        router.log("resolver"),
        netns=router.netns_path,
        cwd=lab.state_dir,
    )


def cloud_config(lab: Lab) -> str:
    """The lab cloud provider's inventory (``kubelab.lab.cloud``): every
    Kubernetes node with its namespace, address, zone and instance type, the router's
    namespace and the load-balancer pool (on VMs no namespaces: each VM exists while listed
    and the control-plane VM routes).  The provider re-reads it when it changes."""
    nodes = [
        {
            "name": node.name,
            **({} if lab.vms else {"netns": str(node.netns_path)}),
            "internalIP": node.ip,
            "zone": lab.zone(node),
            "instanceType": INSTANCE_TYPE,
        }
        for node in lab.kubernetes_nodes
    ]
    document = {
        "lab": lab.name,
        "region": REGION,
        **({} if lab.vms else {"routerNetns": str(lab.router.netns_path)}),
        "bridge": VM_UNDERLAY_INTERFACE if lab.vms else BRIDGE,
        "loadBalancerPool": LOAD_BALANCER_POOL,
        "nodes": nodes,
    }
    return json.dumps(document, indent=1) + "\n"


def resolv_conf(lab: Lab, node: Node) -> Path:
    """The resolv.conf the node's kubelet gives pods (``--resolv-conf``): never the cluster
    DNS (whose pod resolves through it)."""
    return lab.resolv_conf or node.state_dir / "resolv.conf"


def kubelet(
    lab: Lab, node: Node, program: tuple[str, ...] = KUBELAB, *, bootstrap: bool = False
) -> Component:
    """The node's kubelet, as ``system:node:<name>`` from its own kubeconfig; with
    ``bootstrap`` that kubeconfig does not exist yet and the kubelet obtains it through a
    certificate request authenticated by the bootstrap token in ``bootstrap_kubeconfig``.

    Its serving certificate comes the same way once its Node is registered
    (``--rotate-server-certificates``, approved by the server's csrapproving, checked by the
    server with ``--kubelet-certificate-authority``): nothing reaches the kubelet's API before
    the API server answers, so the lab need not issue one.  Its API takes client certificates
    from the cluster CA and tokens (TokenReview), no anonymous requests, and asks the server
    about each request (SubjectAccessReview on ``nodes/<subresource>``)."""
    taints = (
        ("--register-with-taints", CONTROL_PLANE_TAINT) if node.role is Role.CONTROLPLANE else ()
    )
    joining = ("--bootstrap-kubeconfig", str(node.bootstrap_kubeconfig)) if bootstrap else ()
    files = {} if lab.resolv_conf else {resolv_conf(lab, node): NO_NAMESERVERS}
    return Component(
        node.name,
        "kubelet",
        (
            *program, "kubelet",
            "--kubeconfig", str(node.kubelet_kubeconfig),
            *joining,
            "--cert-dir", str(node.kubelet_pki_dir),
            "--node-name", node.name,
            "--node-ip", node.ip,
            "--container-runtime-endpoint", containerd_layout(node).endpoint,
            "--root-dir", str(node.kubelet_dir),
            "--pod-logs-dir", str(node.pod_logs_dir),
            "--cgroup-root", node.cgroup_root,
            "--cni-plugin", lab.spec.cni,
            "--cni-conf-dir", str(node.cni_conf_dir),
            "--cni-bin-dir", str(node.cni_bin_dir),
            "--cluster-cidr", CLUSTER_CIDR,
            "--cluster-dns", CLUSTER_DNS,
            "--resolv-conf", str(resolv_conf(lab, node)),
            "--rotate-server-certificates",
            "--client-ca-file", str(lab.ca_file),
            "--anonymous-auth=false",
            "--authentication-token-webhook",
            "--authorization-mode", "Webhook",
            "--port", str(KUBELET_PORT),
            "--cloud-provider", "external",
            *taints,
        ),
        node.log("kubelet"),
        netns=node.netns_path,
        cwd=node.state_dir,
        dirs=(node.kubelet_pki_dir,),
        files=files,
        health=Health(f"https://{node.ip}:{KUBELET_PORT}/healthz", node.netns_path),
    )  # fmt: skip


def doctor(lab: Lab, node: Node) -> tuple[str, ...]:
    """``kubelab doctor`` for ``node``, with the paths and addresses its components were
    started with (run it inside the node's network namespace); kube-proxy's kubeconfig
    reads the other Nodes, which the kubelet's may not."""
    return (
        *KUBELAB, "doctor", node.name,
        "--kubeconfig", str(node.kubelet_kubeconfig),
        "--proxy-kubeconfig", str(lab.proxy_kubeconfig),
        "--cert-dir", str(node.kubelet_pki_dir),
        "--cni-conf-dir", str(node.cni_conf_dir),
        "--cni-bin-dir", str(node.cni_bin_dir),
        "--containerd-config", str(containerd_layout(node).config_file),
        "--container-runtime-endpoint", containerd_layout(node).endpoint,
        "--resolv-conf", str(resolv_conf(lab, node)),
        "--cluster-dns", CLUSTER_DNS,
        "--proxy-healthz", f"http://127.0.0.1:{PROXY_HEALTHZ_PORT}/healthz",
    )  # fmt: skip


def proxy(lab: Lab, node: Node, program: tuple[str, ...] = KUBELAB) -> Component:
    return Component(
        node.name,
        "proxy",
        (
            *program, "proxy",
            "--kubeconfig", str(lab.proxy_kubeconfig),
            "--hostname-override", node.name,
            "--proxy-mode", lab.spec.proxy_mode,
            "--iptables-backend", lab.spec.iptables_backend,
            "--cluster-cidr", CLUSTER_CIDR,
            "--healthz-bind-address", f"0.0.0.0:{PROXY_HEALTHZ_PORT}",
        ),
        node.log("proxy"),
        netns=node.netns_path,
        cwd=node.state_dir,
        health=Health(f"http://127.0.0.1:{PROXY_HEALTHZ_PORT}/healthz", node.netns_path),
    )  # fmt: skip


def network_policy(lab: Lab, node: Node, program: tuple[str, ...] = KUBELAB) -> Component:
    """The node's NetworkPolicy agent (``kubelab network-policy``), beside its proxy."""
    return Component(
        node.name,
        "network-policy",
        (
            *program, "network-policy",
            "--kubeconfig", str(lab.network_policy_kubeconfig),
            "--hostname-override", node.name,
            "--healthz-bind-address", f"127.0.0.1:{NETWORK_POLICY_HEALTHZ_PORT}",
        ),
        node.log("network-policy"),
        netns=node.netns_path,
        cwd=node.state_dir,
        health=Health(
            f"http://127.0.0.1:{NETWORK_POLICY_HEALTHZ_PORT}/healthz", node.netns_path
        ),
    )  # fmt: skip


def node_components(lab: Lab, node: Node, program: tuple[str, ...] = KUBELAB) -> list[Component]:
    """Everything ``node`` runs, in start order (the forwarder is the host's: ``forwarder``)."""
    control = []
    if node.role is Role.CONTROLPLANE:
        control = [
            *([etcd(lab, node)] if lab.spec.store == "etcd" else []),
            server(lab, node, program),
        ]
    if node.role is Role.ROUTER and lab.ha:
        control = [loadbalancer(lab, program)]
    if node == lab.registry_node:
        control = [*control, registry_component(lab), private_registry(lab)]
    if node.role is Role.ROUTER and lab.spec.nameservers:
        control = [*control, resolver(lab, lab.spec.nameservers, program)]
    if not node.is_kubernetes_node:
        return control
    return [
        *control,
        containerd(lab, node),
        kubelet(lab, node, program),
        proxy(lab, node, program),
        *([] if lab.vms else [network_policy(lab, node, program)]),
    ]


def lab_components(lab: Lab, program: tuple[str, ...] = KUBELAB) -> list[Component]:
    """Every component of the lab, node by node, then the host forwarder."""
    return [
        *(c for node in lab.nodes for c in node_components(lab, node, program)),
        forwarder(lab, program),
    ]


def by_key(lab: Lab, key: str, program: tuple[str, ...] = KUBELAB) -> Component:
    """The lab's component ``NODE/COMPONENT`` (KeyError naming the known ones otherwise)."""
    found = {c.key: c for c in lab_components(lab, program)}
    if key not in found:
        raise KeyError(f"lab {lab.name} has no component {key!r} (known: {', '.join(found)})")
    return found[key]
