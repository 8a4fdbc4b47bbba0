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
  ``node-role.kubernetes.io/control-plane:NoSchedule`` taint) and ``proxy``;
- ``nodeN``: ``containerd``, ``kubelet``, ``proxy``;
- the host: ``forwarder`` (``kubelab lab forward``: 127.0.0.1:<host port> → the API server),
  listed under ``controlplane`` since that is where it leads.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

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
ETCD_CLIENT_URL: Final = "http://127.0.0.1:2379"
ETCD_PEER_URL: Final = "http://127.0.0.1:2380"
PROXY_HEALTHZ_PORT: Final = 10256
CONTROL_PLANE_ROLE: Final = "node-role.kubernetes.io/control-plane"
CONTROL_PLANE_TAINT: Final = f"{CONTROL_PLANE_ROLE}:NoSchedule"
NODE_MONITOR_GRACE_PERIOD: Final = "20s"
"""How long a silent node stays Ready (upstream 40 s): a removed node is gone sooner."""
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
    """The node's containerd layout (sockets, root, state under its state directory)."""
    return ContainerdLayout(
        state_dir=node.containerd_dir,
        sandbox_image=PAUSE_IMAGE,
        cni_bin_dir=node.cni_bin_dir,
        cni_conf_dir=node.cni_conf_dir,
    )


def store_url(lab: Lab) -> str:
    """``kubelab server --store``: SQLite in its data directory, or the lab's etcd."""
    return (
        f"etcd://{ETCD_CLIENT_URL.removeprefix('http://')}"
        if lab.spec.store == "etcd"
        else "sqlite"
    )


def etcd(lab: Lab) -> Component:
    cp = lab.controlplane
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
        ),
        cp.log("etcd"),
        netns=cp.netns_path,
        cwd=cp.state_dir,
        dirs=(cp.state_dir,),
        health=Health(f"{ETCD_CLIENT_URL}/health", cp.netns_path),
    )  # fmt: skip


def server(lab: Lab, program: tuple[str, ...] = KUBELAB) -> Component:
    cp = lab.controlplane
    return Component(
        cp.name,
        "server",
        (
            *program, "server",
            "--data-dir", str(lab.server_dir),
            "--bind-address", CONTROLPLANE_IP,
            "--secure-port", str(API_PORT),
            "--advertise-address", CONTROLPLANE_IP,
            "--store", store_url(lab),
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--cluster-cidr", CLUSTER_CIDR,
            "--authorization-mode", "Node,RBAC",
            "--cloud-provider", "lab",
            "--cloud-config", str(lab.cloud_config),
            "--cluster-name", lab.name,
            "--node-monitor-grace-period", NODE_MONITOR_GRACE_PERIOD,
            "--controllers", "*,bootstrapsigner,tokencleaner",
        ),
        cp.log("server"),
        netns=cp.netns_path,
        cwd=lab.state_dir,
        dirs=(lab.server_dir,),
        health=Health(f"{lab.api_url}/readyz", cp.netns_path),
    )  # fmt: skip


def forwarder(lab: Lab, program: tuple[str, ...] = KUBELAB) -> Component:
    cp = lab.controlplane
    host, port = lab.host_api_address
    return Component(
        cp.name,
        "forwarder",
        (
            *program, "lab", "forward",
            "--netns", str(cp.netns_path),
            "--target", f"{CONTROLPLANE_IP}:{API_PORT}",
            "--listen", f"{host}:{port}",
        ),
        cp.log("forwarder"),
        cwd=lab.state_dir,
        health=Health(f"{lab.host_api_url}/readyz", None),
    )  # fmt: skip


def containerd(node: Node) -> Component:
    layout = containerd_layout(node)
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
            layout.runc_root,
            node.cni_bin_dir,
            node.cni_conf_dir,
        ),
        files={layout.config_file: containerd_config(layout)},
        health=Health(layout.endpoint, None),
    )


def cloud_config(lab: Lab) -> str:
    """The lab cloud provider's inventory (``controlplane.cloud.providers.lab``): every
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
    certificate request authenticated by the bootstrap token in ``bootstrap_kubeconfig``."""
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
            "--tls-cert-file", str(serving_cert(node)),
            "--tls-private-key-file", str(serving_key(node)),
            "--client-ca-file", str(lab.ca_file),
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


def serving_cert(node: Node) -> Path:
    """The kubelet's serving certificate (issued from the cluster CA by the lab)."""
    return node.kubelet_pki_dir / "kubelet.crt"


def serving_key(node: Node) -> Path:
    return node.kubelet_pki_dir / "kubelet.key"


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


def node_components(lab: Lab, node: Node, program: tuple[str, ...] = KUBELAB) -> list[Component]:
    """Everything ``node`` runs, in start order (the forwarder is the host's: ``forwarder``)."""
    control = []
    if node.role is Role.CONTROLPLANE:
        control = [*([etcd(lab)] if lab.spec.store == "etcd" else []), server(lab, program)]
    if not node.is_kubernetes_node:
        return control
    return [*control, containerd(node), kubelet(lab, node, program), proxy(lab, node, program)]


def lab_components(lab: Lab, program: tuple[str, ...] = KUBELAB) -> list[Component]:
    """Every component of the lab, node by node, then the host forwarder."""
    return [
        *(c for node in lab.nodes for c in node_components(lab, node, program)),
        forwarder(lab, program),
    ]
