"""The lab's inventory: every name, address and path of one lab, computed from a ``LabSpec``.

One place answers "where is it?" for every other module of the lab (as the one inventory file
of Kubernetes The Hard Way does), so nothing else builds a path or an address by hand:

- the underlay: a ``router`` network namespace holding the bridge ``lab0`` with 10.240.0.1/24;
  each node namespace is linked to it by a veth pair (``eth0`` in the node, ``r-NODE`` on the
  bridge);
- ``controlplane`` (10.240.0.10) runs ``kubelab server`` (and etcd with ``--store etcd``)
  and, as every Kubernetes node of the lab, containerd, a kubelet (its Node tainted
  ``node-role.kubernetes.io/control-plane:NoSchedule``), the proxy and the NetworkPolicy
  agent;
- with ``control_planes`` N > 1 (the HA lab, etcd only) the control plane is
  ``controlplane1..N`` at 10.240.0.2..(1+N), each running an etcd member and a
  ``kubelab server``, and 10.240.0.10:6443 is no node's: it is an address of the router's
  ``lab0``, where the lab's load balancer forwards to the healthy API servers, so every
  kubeconfig, kubelet, proxy and controller keeps using https://10.240.0.10:6443; workers ``nodeN``
  (10.240.0.(10+N)) run containerd, the kubelet, the proxy and the NetworkPolicy agent;
  ``client`` (10.240.0.100) stands for the outside world;
- the workers are a set of names, not a count: ``node add`` takes the number after the
  highest, ``node rm`` leaves a gap, and the saved spec lists them so that ``down`` (even
  after a crash) finds every node;
- cluster CIDR 10.244.0.0/16 (a /24 per node), Service CIDR 10.96.0.0/12 (the ``kubernetes``
  Service at 10.96.0.1, cluster DNS at 10.96.0.10);
- the lab registry (``kubelab.lab.registry``) runs where every node reaches it without a
  name: in the router (10.240.0.1), or on VMs on the control-plane VM; port 5000 serves
  every image without credentials, port 5001 the private repositories (htpasswd); its
  storage is under the lab's state;
- network namespaces are named ``<lab>-<node>``; state lives under ``/run/kubelab/<lab>/``,
  logs under ``/var/log/kubelab/<lab>/<node>/<component>.log``, the images cache in
  ``/var/cache/kubelab``; pods' cgroups under ``/kubelab/<lab>/<node>``.  The state and log
  roots are fields of ``Lab`` (defaults as above) so the same inventory can describe VMs
  whose state lives under /var/lib/kubelab.

Everything here is pure computation: reading it never touches the machine.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Final

UNDERLAY_CIDR: Final = "10.240.0.0/24"
ROUTER_IP: Final = "10.240.0.1"
CONTROLPLANE_IP: Final = "10.240.0.10"
"""The API server's address: the control plane's own, or (HA) the load balancer's."""
FIRST_CONTROLPLANE_HOST: Final = 2
"""HA: ``controlplaneN`` at 10.240.0.(1+N), below the API address and the workers."""
MAX_CONTROL_PLANES: Final = 5
FIRST_WORKER_HOST: Final = 11
CLIENT_IP: Final = "10.240.0.100"
CLUSTER_CIDR: Final = "10.244.0.0/16"
SERVICE_CIDR: Final = "10.96.0.0/12"
CLUSTER_DNS: Final = "10.96.0.10"
LOAD_BALANCER_POOL: Final = "10.240.0.200-10.240.0.250"
"""The lab cloud's load-balancer IPs (on lab0, owned by the router); nothing else uses them."""
ZONES: Final = ("lab-a", "lab-b")
"""The lab cloud's zones, alternating over the Kubernetes nodes in order."""
INSTANCE_TYPE: Final = "lab.standard"
REGION: Final = "lab"
BRIDGE: Final = "lab0"
VM_UNDERLAY_INTERFACE: Final = "eth1"
"""The private network's interface on the Vagrant VMs (Debian's boxes keep eth0, eth1)."""
API_PORT: Final = 6443
HOST_API_HOST: Final = "127.0.0.1"
KUBELET_PORT: Final = 10250
REGISTRY_PORT: Final = 5000
PRIVATE_REGISTRY_PORT: Final = 5001
RUN_ROOT: Final = Path("/run/kubelab")
LOG_ROOT: Final = Path("/var/log/kubelab")
IMAGE_CACHE: Final = Path("/var/cache/kubelab")
NETNS_DIR: Final = Path("/run/netns")
CGROUP_ROOT: Final = "/kubelab"
MAX_WORKERS: Final = 100 - FIRST_WORKER_HOST  # node1 .. node89 at 10.240.0.11 .. .99
STORES: Final = ("sqlite", "etcd")
CNIS: Final = ("kubelab", "reference")
PROXY_MODES: Final = ("iptables", "nftables", "userspace")
IPTABLES_BACKENDS: Final = ("restore", "libiptc")
_NAME = re.compile(r"^[a-z][a-z0-9]{0,9}$")


_WORKER = re.compile(r"^node(\d+)$")
_CONTROLPLANE = re.compile(r"^controlplane(\d+)$")


class Role(Enum):
    """What a node of the lab runs."""

    ROUTER = "router"
    CONTROLPLANE = "controlplane"
    WORKER = "worker"
    CLIENT = "client"


class SpecError(ValueError):
    """A LabSpec the lab cannot build (bad name, too many workers, unknown option)."""


@dataclass(frozen=True)
class LabSpec:
    """What the user asked for; ``validate()`` says what cannot be built."""

    name: str = "lab"
    workers: int = 2
    store: str = "sqlite"
    cni: str = "kubelab"
    proxy_mode: str = "iptables"
    iptables_backend: str = "restore"
    host_api_port: int = API_PORT
    """The host forwarder's port on 127.0.0.1 (another one lets labs run side by side)."""
    worker_names: tuple[str, ...] = ()
    """The workers once nodes were added or removed (empty: ``node1..node<workers>``)."""
    control_planes: int = 1
    """Control-plane nodes: 1 (``controlplane``), or an odd number up to 5 with etcd (HA)."""
    nameservers: tuple[str, ...] = ()
    """The host's nameservers when the lab came up: the router answers at their addresses
    (``kubelab.lab.resolver``), since the nodes' processes read the host's resolv.conf."""

    @property
    def worker_list(self) -> tuple[str, ...]:
        """The workers' names, in order of their numbers."""
        names = self.worker_names or tuple(f"node{i}" for i in range(1, self.workers + 1))
        return tuple(sorted(names, key=worker_number))

    def with_workers(self, names: tuple[str, ...]) -> LabSpec:
        """This spec with exactly these workers (``node add`` / ``node rm``)."""
        return replace(self, workers=len(names), worker_names=tuple(names))

    def validate(self) -> None:
        if not _NAME.match(self.name):
            raise SpecError(
                f"lab name {self.name!r}: 1-10 lowercase letters and digits, starting with a "
                "letter (it prefixes namespace names)"
            )
        if not 1 <= self.host_api_port <= 65535:
            raise SpecError(f"host API port: 1 to 65535, got {self.host_api_port}")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise SpecError(f"nodes: 1 to {MAX_WORKERS} workers, got {self.workers}")
        if self.worker_names:
            numbers = [_WORKER.match(n) for n in self.worker_names]
            if not all(m and 1 <= int(m.group(1)) <= MAX_WORKERS for m in numbers):
                raise SpecError(
                    f"worker names: node1 to node{MAX_WORKERS}, got {self.worker_names}"
                )
            if len(set(self.worker_names)) != len(self.worker_names):
                raise SpecError(f"worker names repeat: {self.worker_names}")
            if len(self.worker_names) != self.workers:
                raise SpecError(f"{self.workers} workers but {len(self.worker_names)} names")
        if self.control_planes not in range(1, MAX_CONTROL_PLANES + 1, 2):
            raise SpecError(
                f"control planes: 1, 3 or 5 (an etcd quorum wants an odd number), "
                f"got {self.control_planes}"
            )
        if self.control_planes > 1 and self.store != "etcd":
            raise SpecError(
                f"{self.control_planes} control planes need --store etcd (each runs an etcd "
                f"member; SQLite is one machine's store), got --store {self.store}"
            )
        for value, allowed, what in (
            (self.store, STORES, "store"),
            (self.cni, CNIS, "cni"),
            (self.proxy_mode, PROXY_MODES, "proxy mode"),
            (self.iptables_backend, IPTABLES_BACKENDS, "iptables backend"),
        ):
            if value not in allowed:
                raise SpecError(f"{what} {value!r}: one of {', '.join(allowed)}")

    def save(self, path: Path) -> None:
        """Write the spec as JSON (``up`` keeps it in the lab's state directory)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> LabSpec:
        data = json.loads(path.read_text())
        data["worker_names"] = tuple(data.get("worker_names", ()))
        data["nameservers"] = tuple(data.get("nameservers", ()))
        return cls(**data)


def worker_number(name: str) -> int:
    """N of ``nodeN`` (0 for any other name)."""
    match = _WORKER.match(name)
    return int(match.group(1)) if match else 0


def spec_file(name: str) -> Path:
    """Where ``up`` saved the spec of lab ``name``."""
    return RUN_ROOT / name / "spec.json"


def running_spec(name: str, namespaces: set[str]) -> LabSpec:
    """The spec of lab ``name`` as it runs, for every command but ``up``: the saved spec, or
    (state directory gone after a crash) one whose workers are the ``<name>-nodeN``
    namespaces among ``namespaces`` (the names ``ip netns list`` shows), and whose control
    planes are the ``<name>-controlplaneN`` ones if any (an HA lab), so that ``down`` finds
    every node."""
    try:
        return LabSpec.load(spec_file(name))
    except (OSError, ValueError, TypeError):
        pass
    prefix = f"{name}-"
    found = tuple(
        sorted(
            (
                ns.removeprefix(prefix)
                for ns in namespaces
                if ns.startswith(prefix) and _WORKER.match(ns.removeprefix(prefix))
            ),
            key=worker_number,
        )
    )
    numbers = [
        int(m.group(1))
        for ns in namespaces
        if ns.startswith(prefix) and (m := _CONTROLPLANE.match(ns.removeprefix(prefix)))
    ]
    spec = LabSpec(name=name)
    if numbers:
        highest = min(max(numbers) | 1, MAX_CONTROL_PLANES)
        spec = replace(spec, control_planes=highest, store="etcd")
    return spec.with_workers(found) if found else spec


@dataclass(frozen=True)
class Node:
    """One network namespace of the lab and where its things live."""

    lab: str
    name: str
    role: Role
    ip: str
    run_root: Path = RUN_ROOT
    log_root: Path = LOG_ROOT

    @property
    def netns(self) -> str:
        """The namespace's name under /run/netns."""
        return f"{self.lab}-{self.name}"

    @property
    def netns_path(self) -> Path:
        return NETNS_DIR / self.netns

    @property
    def uplink(self) -> str:
        """The router's end of the node's veth pair (on ``lab0``; at most 15 characters)."""
        return f"r-{self.name}"

    @property
    def is_kubernetes_node(self) -> bool:
        """Runs containerd, a kubelet and a proxy (the control plane and the workers)."""
        return self.role in (Role.CONTROLPLANE, Role.WORKER)

    @property
    def state_dir(self) -> Path:
        return self.run_root / self.lab / self.name

    @property
    def log_dir(self) -> Path:
        return self.log_root / self.lab / self.name

    def log(self, component: str) -> Path:
        return self.log_dir / f"{component}.log"

    @property
    def containerd_dir(self) -> Path:
        return self.state_dir / "containerd"

    @property
    def kubelet_dir(self) -> Path:
        return self.state_dir / "kubelet"

    @property
    def pod_logs_dir(self) -> Path:
        return self.state_dir / "pod-logs"

    @property
    def kubelet_kubeconfig(self) -> Path:
        """The kubelet's own kubeconfig (``system:node:<name>``; written by TLS bootstrap for
        a node that joins with a bootstrap token)."""
        return self.state_dir / "kubelet.kubeconfig"

    @property
    def bootstrap_kubeconfig(self) -> Path:
        """A joining kubelet's bootstrap-token kubeconfig (``node add``)."""
        return self.state_dir / "bootstrap.kubeconfig"

    @property
    def kubelet_pki_dir(self) -> Path:
        """The kubelet's ``--cert-dir``: its serving certificate, and its client key while
        a bootstrap certificate request is pending."""
        return self.state_dir / "pki"

    @property
    def cni_bin_dir(self) -> Path:
        return self.state_dir / "cni" / "bin"

    @property
    def cni_conf_dir(self) -> Path:
        return self.state_dir / "cni" / "net.d"

    @property
    def cgroup_root(self) -> str:
        """The kubelet's ``--cgroup-root``: pods of this node only, so ``down`` finds them."""
        return f"{CGROUP_ROOT}/{self.lab}/{self.name}"


@dataclass(frozen=True)
class Lab:
    """The inventory of one lab: its nodes, addresses and paths (see the module docstring)."""

    spec: LabSpec
    run_root: Path = RUN_ROOT
    log_root: Path = LOG_ROOT
    resolv_conf: Path | None = None
    """The resolv.conf kubelets give pods with dnsPolicy Default (the cluster DNS forwards
    outside names to it).  None: the netns lab's own, one per node without nameservers (the
    lab has no upstream resolver); VMs pass /etc/resolv.conf."""
    vms: bool = False
    """The nodes are VMs (the Vagrant lab): no network namespaces, and the control-plane VM
    is the router, its private interface the underlay."""
    nodes: tuple[Node, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.spec.validate()
        base = ipaddress.IPv4Address(ROUTER_IP) - 1

        def node(name: str, role: Role, ip: str) -> Node:
            return Node(self.spec.name, name, role, ip, self.run_root, self.log_root)

        control = [node("controlplane", Role.CONTROLPLANE, CONTROLPLANE_IP)]
        if self.spec.control_planes > 1:
            control = [
                node(
                    f"controlplane{i}",
                    Role.CONTROLPLANE,
                    str(base + FIRST_CONTROLPLANE_HOST + i - 1),
                )
                for i in range(1, self.spec.control_planes + 1)
            ]
        nodes = [
            node("router", Role.ROUTER, ROUTER_IP),
            *control,
            *(
                node(w, Role.WORKER, str(base + FIRST_WORKER_HOST + worker_number(w) - 1))
                for w in self.spec.worker_list
            ),
            node("client", Role.CLIENT, CLIENT_IP),
        ]
        object.__setattr__(self, "nodes", tuple(nodes))

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def router(self) -> Node:
        return self.node("router")

    @property
    def controlplanes(self) -> tuple[Node, ...]:
        """The control-plane nodes: ``controlplane``, or (HA) ``controlplane1..N``."""
        return tuple(n for n in self.nodes if n.role is Role.CONTROLPLANE)

    @property
    def controlplane(self) -> Node:
        """The first control-plane node: the one whose server data directory holds the
        lab's PKI (the only one without HA)."""
        return self.controlplanes[0]

    @property
    def ha(self) -> bool:
        """Several control planes behind the router's load balancer at 10.240.0.10."""
        return len(self.controlplanes) > 1

    @property
    def client(self) -> Node:
        return self.node("client")

    @property
    def workers(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.role is Role.WORKER)

    @property
    def kubernetes_nodes(self) -> tuple[Node, ...]:
        """The nodes with a kubelet: the control plane, then the workers."""
        return tuple(n for n in self.nodes if n.is_kubernetes_node)

    def next_worker(self) -> str:
        """The name ``node add`` gives: the number after the highest worker's."""
        return f"node{max(map(worker_number, self.spec.worker_list), default=0) + 1}"

    @property
    def hosts(self) -> tuple[Node, ...]:
        """Every namespace but the router: each has an ``eth0`` on ``lab0``."""
        return tuple(n for n in self.nodes if n.role is not Role.ROUTER)

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        known = ", ".join(n.name for n in self.nodes)
        raise KeyError(f"lab {self.name} has no node {name!r} (nodes: {known})")

    @property
    def prefix_len(self) -> int:
        return ipaddress.IPv4Network(UNDERLAY_CIDR).prefixlen

    @property
    def state_dir(self) -> Path:
        """``/run/kubelab/<lab>``: everything of the lab that ``down`` removes."""
        return self.run_root / self.name

    @property
    def process_file(self) -> Path:
        """The processes the lab started: PID, start time and command of each."""
        return self.state_dir / "processes.json"

    @property
    def server_dir(self) -> Path:
        """The first control plane's ``kubelab server`` data directory (SQLite store, the
        PKI every server shares, the admin kubeconfig the lab reads)."""
        return self.server_dir_of(self.controlplane)

    @staticmethod
    def server_dir_of(node: Node) -> Path:
        """``kubelab server``'s data directory on control-plane ``node``."""
        return node.state_dir / "server"

    @property
    def etcd_dir(self) -> Path:
        """etcd's data directory (``--store etcd`` on one control plane), or (HA) the
        cluster's base directory: ``pki/`` and one data directory per member
        (``kubelab.lab.etcd.EtcdCluster``)."""
        return self.state_dir / "etcd" if self.ha else self.controlplane.state_dir / "etcd"

    @property
    def pki_dir(self) -> Path:
        """The cluster's PKI: created by the first server, or (HA) by the lab before any
        server starts, and copied into each server's data directory."""
        return self.server_dir / "pki"

    @property
    def loadbalancer_state(self) -> Path:
        """HA: the API servers the load balancer sees healthy (JSON it rewrites on change)."""
        return self.state_dir / "loadbalancer.json"

    @property
    def registry_node(self) -> Node:
        """Where the lab registry runs: the router, or (VMs) the control-plane VM, which
        routes for the workers there."""
        return self.controlplane if self.vms else self.router

    @property
    def registry_dir(self) -> Path:
        """The lab registry's configuration, credentials and storage (``down`` removes it
        with the rest of the state)."""
        return self.state_dir / "registry"

    @property
    def proxy_kubeconfig(self) -> Path:
        """The proxies' kubeconfig: ``system:kube-proxy`` at https://10.240.0.10:6443."""
        return self.state_dir / "proxy.kubeconfig"

    @property
    def network_policy_kubeconfig(self) -> Path:
        """The NetworkPolicy agents' kubeconfig: ``system:kubelab-network-policy`` (RBAC from
        ``addons.network_policy_rbac``) at https://10.240.0.10:6443."""
        return self.state_dir / "network-policy.kubeconfig"

    @property
    def ca_file(self) -> Path:
        """The cluster CA's certificate (kubelets verify the API server's clients with it)."""
        return self.pki_dir / "ca.crt"

    @property
    def cloud_config(self) -> Path:
        """The lab cloud provider's inventory (``--cloud-config``), rewritten on node add/rm."""
        return self.state_dir / "cloud.yaml"

    @staticmethod
    def zone(node: Node) -> str:
        """The node's zone in the lab cloud, alternating by node number (the control plane
        counts as 0, HA's ``controlplaneN`` as N-1), so it never changes while nodes come and
        go."""
        control = _CONTROLPLANE.match(node.name)
        number = int(control.group(1)) - 1 if control else worker_number(node.name)
        return ZONES[number % len(ZONES)]

    def with_spec(self, spec: LabSpec) -> Lab:
        """The same lab (roots, resolv.conf) with another spec (``node add`` / ``node rm``)."""
        return replace(self, spec=spec)

    @property
    def host_kubeconfig(self) -> Path:
        """The kubeconfig for the host (server https://127.0.0.1:<host_api_port>, the forwarder)."""
        return self.state_dir / "admin.kubeconfig"

    @property
    def log_dir(self) -> Path:
        return self.log_root / self.name

    @property
    def api_url(self) -> str:
        return f"https://{CONTROLPLANE_IP}:{API_PORT}"

    @property
    def host_api_address(self) -> tuple[str, int]:
        """Where the host forwarder listens: 127.0.0.1 and the spec's port."""
        return HOST_API_HOST, self.spec.host_api_port

    @property
    def host_api_url(self) -> str:
        host, port = self.host_api_address
        return f"https://{host}:{port}"

    def netns_names(self) -> list[str]:
        return [n.netns for n in self.nodes]
