"""Bringing a lab up and down, and nodes in and out: ordered lists of small actions.

``up`` (the shape of kind's cluster creation) runs, in order:

1. ``CleanStale``: whatever a previous lab of this name left (after a crash) is torn down;
2. ``CreateNetwork``: namespaces, ``lab0``, veths, addresses, routes (``network.create``);
   ``WriteCloudConfig``: the lab cloud's inventory (``components.cloud_config``), which the
   cloud-controller-manager inside ``kubelab server`` reads; in the router, the resolver
   answering NXDOMAIN at the host's nameserver addresses (``kubelab.lab.resolver``) and the
   lab registries (``registry_actions``: the private one's password and htpasswd first);
3. with ``--store etcd``, etcd in ``controlplane`` (waited for); ``kubelab server`` in
   ``controlplane`` on 10.240.0.10:6443 (``--authorization-mode Node,RBAC``, the lab cloud
   provider);
4. the host forwarder: ``kubelab lab forward``, a detached process listening on the host's
   127.0.0.1:6443 (or ``--host-api-port``) and connecting inside ``controlplane``
   (``netns.NetnsForwarder``);
5. ``BuildImages`` then, per Kubernetes node (the control plane and every worker),
   containerd (mirroring the public registries to the lab's: ``kubelab.lab.registry``), and
   ``LoadImages`` (waits for each CRI and imports that node's images: ``node_images``, into
   every node at once); then ``PushImages``: every image the lab builds into the registry,
   under the names people type; the API server starts meanwhile;
6. ``WaitServer``: the API answers through the forwarder; the host kubeconfig (admin) is
   written and each node's credentials (``node_credentials``: the CA, the kubelet's own
   kubeconfig as ``system:node:NAME``, its serving certificate, the proxies' kubeconfig, the
   NetworkPolicy agents' as ``system:kubelab-network-policy``); ``ApplyNetworkPolicyRbac``:
   what those agents may read;
7. per Kubernetes node its kubelet (``--cloud-provider external``), proxy and NetworkPolicy
   agent (the control plane's kubelet registers its Node tainted
   ``node-role.kubernetes.io/control-plane:NoSchedule``);
8. ``ApplyAddons``: the cluster DNS's, the Ingress controller's and the metrics-server's
   objects created (or updated);
9. ``WaitNodesReady``: every Node Ready with a podCIDR, initialized by the cloud node
   controller (providerID, no uninitialized taint) and its pod CIDR routed in the router by
   the route controller (NetworkUnavailable False); ``MarkControlPlane`` labels the control
   plane's Node ``node-role.kubernetes.io/control-plane`` and
   ``node.kubernetes.io/exclude-from-external-load-balancers`` through the API (as kubeadm
   does: a kubelet may not set ``node-role`` labels on itself), which lets kube-dns schedule
   and keeps the control plane out of the lab cloud's load balancers;
10. ``StartSupervisor``: from now on crashed components are restarted
    (``kubelab.lab.supervisor``); ``WaitAddons``: kube-dns and kubelab-ingress available (not
    the metrics-server, which is ready only after two scrapes, as upstream's: ``kubectl top``
    answers "metrics not available yet" for that long after ``up``).

With several control planes (the HA lab) step 3 becomes: ``SeedPKI`` (the cluster CA and
service-account key made once, copied into every server's data directory, and the etcd
members' certificates issued from that CA), every etcd member started, then each waited for
(a member is healthy only once a quorum runs), every ``kubelab server`` started at once (their
startup work tolerates one another), and the router's ``loadbalancer``; step 4's forwarder
leads to the load balancer in the router; ``WaitServer`` also waits for each server's
``/readyz``.

What each component runs comes from ``kubelab.lab.components``; ``StartComponent`` writes its
files and starts it detached (``processes.ProcessTable``).  Starting and waiting are separate
actions, so slow starts overlap while the list stays a plain sequence.

``add_node`` runs the same actions for one new worker (its namespace and veth, containerd,
images, the cloud config with it, a bootstrap token: its kubelet joins through a
CertificateSigningRequest, proxy, NetworkPolicy agent, Ready and initialized); ``remove_node``
stops its processes, removes its sandboxes, mounts, cgroups and namespace, rewrites the cloud
config, and waits for the control plane to notice (the cloud node lifecycle controller deletes
the Node, the route controller its route). The saved spec lists the workers before a node is
created and after one is removed, so ``down`` always finds every node.

``down`` runs every step even when an earlier one failed, and is what ``CleanStale`` runs:
the supervisor stopped, kubelets, proxies and NetworkPolicy agents stopped, every pod
sandbox stopped and removed through each containerd's CRI, containerds stopped, then the
forwarder, the server, etcd, the registries and the resolver;
then anything left (``lab_processes``: whatever runs in a lab namespace, names the lab's
state directory on its command line, such as shims and the kubelet's CNI agent, or sits in
the lab's cgroups), mounts under ``/run/kubelab/<lab>``, the cgroup subtree
``/kubelab/<lab>`` in every hierarchy, the namespaces, and the state directory.  Logs under
``/var/log/kubelab/<lab>`` are kept until the next ``up``.

Progress goes to ``report`` as one ``✓``/``✗`` line per step; ``on_step`` (if given) hears
each step's name as it starts (the command's live display).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import socket
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final, Protocol

from controlplane import bootstraptoken
from controlplane.apiserver.auth.tokens import TokenIssuer
from controlplane.apiserver.certs import serving
from kube.api.kinds.apps_v1 import Deployment
from kube.api.kinds.core_v1.node import (
    LABEL_NODE_EXCLUDE_BALANCERS,
    LABEL_NODE_ROLE_CONTROL_PLANE,
)
from kube.api.kinds.core_v1.node import Node as NodeObject
from kube.api.meta_v1 import Resource
from kube.client import kubeconfig
from kube.client.errors import ApiError
from kube.client.rest import Client
from kube.pki import CertificateAuthority, KeyPair, write_file
from kubelab.lab import addons, components, network, registry
from kubelab.lab.components import Component, Health, containerd_layout
from kubelab.lab.images import build_images, import_images
from kubelab.lab.processes import (
    CommandError,
    ProcessTable,
    log_tail,
    run,
    terminate,
)
from kubelab.lab.supervisor import SUPERVISOR_KEY
from kubelab.lab.topology import (
    CGROUP_ROOT,
    IMAGE_CACHE,
    Lab,
    Node,
    Role,
    running_spec,
    spec_file,
)
from node.cri.client import RuntimeClient

SERVER_TIMEOUT: Final = 60.0
CRI_TIMEOUT: Final = 20.0
ETCD_TIMEOUT: Final = 30.0
REGISTRY_TIMEOUT: Final = 20.0
READY_TIMEOUT: Final = 120.0
ADDON_TIMEOUT: Final = 120.0
NODE_GONE_TIMEOUT: Final = 120.0
"""``node rm``: the node-monitor grace period (20 s), then the cloud node lifecycle
controller's next pass (every 5 s) deletes the Node; this bounds the wait generously."""
BOOTSTRAP_TOKEN_TTL: Final = 3600.0
UNINITIALIZED_TAINT: Final = "node.cloudprovider.kubernetes.io/uninitialized"
WORKLOAD_IMAGES: Final = ("pause", "busybox", "echoserver", "nginx")
"""What every worker imports at once: the sandbox image and what workloads (the demo, the
tests, tutorials) run.  python (117 MB) is left out: it is built and cached, and
``kubelab images load`` imports it where wanted."""
CONTROL_PLANE_IMAGES: Final = ("pause", "busybox", "kubelab")
"""The tainted control plane runs only add-ons (the cluster DNS runs the kubelab image) and
pods that tolerate the taint."""
POLL: Final = 0.2
NODE_AGENTS: Final = ("kubelet", "proxy", "network-policy")
"""The components a Kubernetes node runs on top of its containerd, stopped before it."""
CGROUP_FS: Final = Path("/sys/fs/cgroup")
Report = Callable[[str], None]


class LabError(Exception):
    """A step of ``up`` failed; the message says which and why (logs included)."""


@dataclass
class Context:
    """What actions share: the inventory, the process table, the progress sink."""

    lab: Lab
    report: Report = print
    images: dict[str, Path] = field(default_factory=dict)
    processes: ProcessTable = field(init=False)

    def __post_init__(self) -> None:
        self.processes = ProcessTable(self.lab.process_file)


class Action(Protocol):
    """One step of ``up`` or ``node add``: ``name`` is shown as progress, ``execute`` does
    it."""

    name: str

    async def execute(self, ctx: Context) -> None: ...


# -- the actions ------------------------------------------------------------------------------


@dataclass
class CleanStale:
    name: str = "clean up what an earlier lab left"

    async def execute(self, ctx: Context) -> None:
        lab = ctx.lab
        stale = (
            lab.state_dir.exists()
            or bool(set(lab.netns_names()) & network.existing_namespaces())
            or bool(lab_cgroups(lab))
        )
        if stale:
            # The stale lab may have had other workers than the ones asked for.
            earlier = Lab(running_spec(lab.name, network.existing_namespaces()))
            await down(earlier, report=lambda line: ctx.report(f"  {line}"))
        shutil.rmtree(lab.log_dir, ignore_errors=True)
        host, port = lab.host_api_address
        if _listening(host, port):
            raise LabError(
                f"{host}:{port} is in use on the host: another lab or API server runs "
                f"(`kubelab lab down --name ...` it first)"
            )


@dataclass
class CreateNetwork:
    name: str = "network: namespaces, bridge lab0, veths, routes"

    async def execute(self, ctx: Context) -> None:
        ctx.lab.spec.save(spec_file(ctx.lab.name))
        await asyncio.to_thread(network.create, ctx.lab)


@dataclass
class WriteCloudConfig:
    """The lab cloud's inventory (``components.cloud_config``), replaced atomically: before
    the server starts, and before a new node's kubelet starts or after a node is gone."""

    name: str = "cloud config: the lab cloud's instances"

    async def execute(self, ctx: Context) -> None:
        await asyncio.to_thread(write_cloud_config, ctx.lab)


def write_cloud_config(lab: Lab) -> None:
    write_file(lab.cloud_config, components.cloud_config(lab).encode())


@dataclass
class SeedPKI:
    """HA: the PKI every server shares, made before any starts (``kubelab server`` would
    otherwise create a CA of its own in each data directory): the cluster CA, the
    service-account signing key and the front-proxy CA and client certificate in the first
    server's ``pki/`` (``Lab.pki_dir``), copied into
    every other server's; and the etcd members' certificates from the same CA."""

    name: str = "PKI: one cluster CA and service-account key for every server; etcd's"

    async def execute(self, ctx: Context) -> None:
        await asyncio.to_thread(seed_pki, ctx.lab)


def seed_pki(lab: Lab) -> None:
    ca = CertificateAuthority.load_or_create(lab.pki_dir)
    TokenIssuer.load_or_create(lab.pki_dir)
    serving.ensure_front_proxy(lab.pki_dir)
    for node in lab.controlplanes[1:]:
        shutil.copytree(lab.pki_dir, lab.server_dir_of(node) / "pki", dirs_exist_ok=True)
    components.etcd_cluster(lab).write_pki(ca)


@dataclass
class AttachNode:
    """``node add``'s network step: the spec saved with the new worker first (so ``down``
    finds it whatever happens next), then its namespace and veth."""

    node: Node
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.node.name}: namespace and veth to lab0 ({self.node.ip})"

    async def execute(self, ctx: Context) -> None:
        ctx.lab.spec.save(spec_file(ctx.lab.name))
        await asyncio.to_thread(network.attach, ctx.lab, self.node)


@dataclass
class StartComponent:
    """Write a component's files and start it detached (``kubelab.lab.components``)."""

    component: Component
    name: str = ""

    def __post_init__(self) -> None:
        c = self.component
        self.name = self.name or f"{c.node}: {c.name}"

    async def execute(self, ctx: Context) -> None:
        start_component(ctx.processes, self.component)


def start_component(table: ProcessTable, c: Component) -> None:
    """Write a component's directories and files, then start it detached and record it."""
    for directory in c.dirs:
        directory.mkdir(parents=True, exist_ok=True)
    for path, text in c.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    table.start(c.key, c.command, log=c.log, netns=c.netns, cwd=c.cwd)


@dataclass
class WaitHealthy:
    """Wait until a component's health endpoint answers (etcd before the API server)."""

    component: Component
    timeout: float
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.component.key} healthy"

    async def execute(self, ctx: Context) -> None:
        c = self.component
        assert c.health is not None
        health = c.health

        async def healthy() -> bool:
            return (await probe(health))[0]

        await wait_for(
            healthy, f"{c.key}'s {health.url}", self.timeout,
            lambda: ctx.processes.check_alive(c.key),
        )  # fmt: skip


def node_images(node: Node) -> tuple[str, ...]:
    """The images ``node`` imports (by short name)."""
    return CONTROL_PLANE_IMAGES if node.role is Role.CONTROLPLANE else WORKLOAD_IMAGES


@dataclass
class BuildImages:
    """The images the nodes import, built into the cache where missing (a warm cache
    answers at once)."""

    nodes: tuple[Node, ...]
    name: str = f"images (cache {IMAGE_CACHE})"

    async def execute(self, ctx: Context) -> None:
        names = list(dict.fromkeys(name for node in self.nodes for name in node_images(node)))
        archives = await asyncio.to_thread(build_images, IMAGE_CACHE, names)
        ctx.images = dict(zip(names, archives, strict=True))


@dataclass
class WriteRegistryCredentials:
    name: str = "registry: the private registry's password and htpasswd"

    async def execute(self, ctx: Context) -> None:
        await asyncio.to_thread(registry.write_credentials, registry.LabRegistry.of(ctx.lab))


@dataclass
class PushImages:
    """Every image the lab builds, pushed into the lab registry under the names people type
    (``registry.seed``)."""

    name: str = "registry: the lab's images pushed under the names people type"

    async def execute(self, ctx: Context) -> None:
        try:
            await asyncio.to_thread(registry.seed, registry.LabRegistry.of(ctx.lab), IMAGE_CACHE)
        except registry.RegistryError as error:
            raise LabError(str(error)) from error


def registry_actions(lab: Lab) -> list[Action]:
    """Starting the lab registry (and, given the host's nameservers, the router's resolver):
    right after the network, so they start while the control plane does."""
    answer: list[Action] = []
    if lab.spec.nameservers:
        answer = [
            StartComponent(
                components.resolver(lab, lab.spec.nameservers),
                name=f"router: NXDOMAIN for outside names at {', '.join(lab.spec.nameservers)}",
            )
        ]
    where = registry.LabRegistry.of(lab)
    return [
        *answer,
        WriteRegistryCredentials(),
        StartComponent(
            components.registry_component(lab),
            name=f"{lab.registry_node.name}: registry at {where.url()}",
        ),
        StartComponent(
            components.private_registry(lab),
            name=f"{lab.registry_node.name}: private registry at {where.url(private=True)}",
        ),
    ]


def push_actions(lab: Lab) -> list[Action]:
    """Waiting for both registries, then pushing every image."""
    return [
        WaitHealthy(components.registry_component(lab), REGISTRY_TIMEOUT),
        WaitHealthy(components.private_registry(lab), REGISTRY_TIMEOUT),
        PushImages(),
    ]


@dataclass
class LoadImages:
    """Wait for each node's CRI, then import the images into it; the nodes concurrently
    (each import is mostly copying archives into that node's content store)."""

    nodes: tuple[Node, ...]
    name: str = ""

    def __post_init__(self) -> None:
        names = ", ".join(n.name for n in self.nodes)
        self.name = self.name or f"CRI ready, images imported: {names}"

    async def execute(self, ctx: Context) -> None:
        await asyncio.gather(*(self._load(ctx, node) for node in self.nodes))

    async def _load(self, ctx: Context, node: Node) -> None:
        await wait_for(
            lambda: _runtime_ready(node),
            f"{node.name}'s containerd to be ready",
            CRI_TIMEOUT,
            lambda: ctx.processes.check_alive(components.containerd(ctx.lab, node).key),
        )
        archives = [ctx.images[name] for name in node_images(node)]
        await asyncio.to_thread(import_images, containerd_layout(node).socket, archives)


@dataclass
class WaitServer:
    name: str = "control plane serving; kubeconfigs and kubelet certificates"

    async def execute(self, ctx: Context) -> None:
        lab = ctx.lab
        admin = lab.server_dir / "admin.kubeconfig"

        def alive() -> None:
            for cp in lab.controlplanes:
                ctx.processes.check_alive(components.server(lab, cp).key)
            ctx.processes.check_alive(components.forwarder(lab).key)

        await wait_for(
            lambda: _exists(admin), "the API server's admin kubeconfig", SERVER_TIMEOUT, alive
        )
        ca = CertificateAuthority.load_or_create(lab.pki_dir)
        admin_pair = KeyPair.read(lab.pki_dir, "admin")
        kubeconfig.write(
            lab.host_kubeconfig,
            kubeconfig.render(lab.host_api_url, ca.cert_pem, "admin", admin_pair, cluster=lab.name),
        )
        await wait_for(
            lambda: _api_answers(lab.host_kubeconfig),
            "the API server through the forwarder",
            SERVER_TIMEOUT,
            alive,
        )
        for node in lab.kubernetes_nodes:
            await asyncio.to_thread(write_credentials, node_credentials(lab, node))


def node_credentials(lab: Lab, node: Node) -> dict[Path, bytes]:
    """What a node needs from the control plane, at the paths its components' flags name
    (server https://10.240.0.10:6443): the cluster CA, the kubelet's kubeconfig with its own
    client certificate (``system:node:NAME`` in ``system:nodes``, what the Node authorizer
    knows it by) and the proxies' kubeconfig (``system:kube-proxy``, the identity the server
    issued); the kubelet requests its serving certificate itself."""
    ca = CertificateAuthority.load_or_create(lab.pki_dir)
    client = ca.issue(f"system:node:{node.name}", organizations=("system:nodes",), client=True)
    config = kubeconfig.render(
        lab.api_url, ca.cert_pem, f"system:node:{node.name}", client, cluster=lab.name
    )
    return {**_shared_credentials(lab, ca), node.kubelet_kubeconfig: config.encode()}


def join_credentials(lab: Lab, node: Node, token: str) -> dict[Path, bytes]:
    """``node_credentials`` for a node that joins through TLS bootstrap: a bootstrap-token
    kubeconfig instead of the kubelet's own, which the kubelet obtains by a certificate
    request."""
    ca = CertificateAuthority.load_or_create(lab.pki_dir)
    config = kubeconfig.render(
        lab.api_url, ca.cert_pem, "tls-bootstrap-token-user", token=token, cluster=lab.name
    )
    return {**_shared_credentials(lab, ca), node.bootstrap_kubeconfig: config.encode()}


def _shared_credentials(lab: Lab, ca: CertificateAuthority) -> dict[Path, bytes]:
    proxy = kubeconfig.render(
        lab.api_url, ca.cert_pem, "proxy", KeyPair.read(lab.pki_dir, "proxy"), cluster=lab.name
    )
    agent = ca.issue(addons.NETWORK_POLICY_USER, client=True)
    network_policy = kubeconfig.render(
        lab.api_url, ca.cert_pem, addons.NETWORK_POLICY_USER, agent, cluster=lab.name
    )
    return {
        lab.ca_file: ca.cert_pem,
        lab.proxy_kubeconfig: proxy.encode(),
        lab.network_policy_kubeconfig: network_policy.encode(),
    }


def write_credentials(credentials: dict[Path, bytes]) -> None:
    """Write ``node_credentials``: certificates world-readable, keys and kubeconfigs not."""
    for path, content in credentials.items():
        write_file(path, content, 0o644 if path.suffix == ".crt" else 0o600)


@dataclass
class WriteJoinCredentials:
    """A bootstrap token (``controlplane.bootstraptoken``, valid an hour) and the joining
    node's credentials (``join_credentials``)."""

    node: Node
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or (
            f"{self.node.name}: bootstrap token, serving certificate (joins through a CSR)"
        )

    async def execute(self, ctx: Context) -> None:
        async with _admin(ctx.lab) as client:
            token = await bootstraptoken.create(
                client, BOOTSTRAP_TOKEN_TTL, description=f"kubelab lab node add {self.node.name}"
            )
        credentials = await asyncio.to_thread(join_credentials, ctx.lab, self.node, token)
        await asyncio.to_thread(write_credentials, credentials)


def _admin(lab: Lab) -> Client:
    """A client of the lab's API as the admin, through the host forwarder."""
    return Client.from_kubeconfig(lab.host_kubeconfig, user_agent="kubelab-lab")


@dataclass
class ApplyNetworkPolicyRbac:
    """What the NetworkPolicy agents may read (``addons.network_policy_rbac()``), before they
    start."""

    name: str = f"RBAC: {addons.NETWORK_POLICY_USER} reads pods, namespaces, networkpolicies"

    async def execute(self, ctx: Context) -> None:
        async with _admin(ctx.lab) as client:
            for obj in addons.network_policy_rbac():
                await create_or_update(client, obj)


@dataclass
class ApplyAddons:
    """The cluster add-ons (``addons.cluster_dns()``, ``addons.ingress_controller()``,
    ``addons.metrics_server()``): created, or replaced with the lab's version when they exist
    (an ``up`` of a newer kubelab)."""

    name: str = (
        "add-ons: cluster DNS (kube-dns in kube-system, 10.96.0.10), "
        "Ingress controller (kubelab-ingress, IngressClass kubelab), metrics-server"
    )

    async def execute(self, ctx: Context) -> None:
        async with _admin(ctx.lab) as client:
            addon_objects = [
                *addons.cluster_dns(),
                *addons.ingress_controller(),
                *addons.metrics_server(),
            ]
            for obj in addon_objects:
                await create_or_update(client, obj)


async def create_or_update(client: Client, obj: Resource) -> None:
    try:
        await client.create(obj)
    except ApiError as error:
        if not error.already_exists:
            raise
        current = await client.get(type(obj), obj.metadata.name or "", obj.metadata.namespace)
        obj.metadata.resource_version = current.metadata.resource_version
        await client.update(obj)


@dataclass
class WaitAddons:
    name: str = f"add-ons ready: {addons.DNS_NAME}, {addons.INGRESS_NAME}"

    async def execute(self, ctx: Context) -> None:
        for name in (addons.DNS_NAME, addons.INGRESS_NAME):
            await wait_for(
                functools.partial(_available, ctx.lab, name),
                f"{name} to be available",
                ADDON_TIMEOUT,
            )


async def _available(lab: Lab, name: str) -> bool:
    """Whether the add-on Deployment ``name`` has an available replica."""
    try:
        async with _admin(lab) as client:
            deployment = await client.get(Deployment, name, addons.ADDON_NAMESPACE)
    except Exception:
        return False
    status = deployment.status
    return status is not None and (status.available_replicas or 0) >= 1


@dataclass
class WaitNodesReady:
    nodes: tuple[Node, ...]
    name: str = ""

    def __post_init__(self) -> None:
        names = ", ".join(n.name for n in self.nodes)
        self.name = self.name or f"Nodes Ready, initialized by the cloud, podCIDR routed: {names}"

    async def execute(self, ctx: Context) -> None:
        involved = {n.name for n in (*self.nodes, *ctx.lab.controlplanes, ctx.lab.router)}

        def alive() -> None:
            for record in ctx.processes.records():
                if record.node in involved:
                    ctx.processes.check_alive(record.key)

        await wait_for(
            lambda: _nodes_ready(ctx.lab, self.nodes),
            "the Nodes to be Ready",
            READY_TIMEOUT,
            alive,
            ctx=ctx,
        )


@dataclass
class MarkControlPlane:
    name: str = f"control planes: Nodes labelled {LABEL_NODE_ROLE_CONTROL_PLANE}"

    async def execute(self, ctx: Context) -> None:
        lab = ctx.lab
        labels = {LABEL_NODE_ROLE_CONTROL_PLANE: "", LABEL_NODE_EXCLUDE_BALANCERS: ""}
        patch = {"metadata": {"labels": labels}}
        async with _admin(lab) as c:
            for cp in lab.controlplanes:
                await c.patch(NodeObject, cp.name, None, patch)


@dataclass
class StartSupervisor:
    name: str = "supervisor: crashed components are restarted from now on"

    async def execute(self, ctx: Context) -> None:
        lab = ctx.lab
        ctx.processes.start(
            SUPERVISOR_KEY,
            [*components.KUBELAB, "lab", "supervise", "--table", lab.process_file],
            log=lab.router.log("supervisor"),
            cwd=lab.state_dir,
        )


def agent_actions(lab: Lab, node: Node, *, bootstrap: bool = False) -> list[Action]:
    """Starting a Kubernetes node's kubelet, proxy and NetworkPolicy agent (once the API
    server answers)."""
    return [
        StartComponent(components.kubelet(lab, node, bootstrap=bootstrap)),
        StartComponent(components.proxy(lab, node)),
        StartComponent(components.network_policy(lab, node)),
    ]


def up_actions(lab: Lab) -> list[Action]:
    """The ordered steps of ``up`` (see the module docstring)."""
    nodes = lab.kubernetes_nodes
    servers = [components.server(lab, cp) for cp in lab.controlplanes]
    control: list[Action] = [StartComponent(s) for s in servers]
    if lab.spec.store == "etcd":
        etcds = [components.etcd(lab, cp) for cp in lab.controlplanes]
        control = [
            *(StartComponent(e) for e in etcds),
            *(WaitHealthy(e, ETCD_TIMEOUT) for e in etcds),
            *control,
        ]
    if lab.ha:
        control = [
            SeedPKI(),
            *control,
            StartComponent(
                components.loadbalancer(lab),
                name=f"router: load balancer {lab.api_url} → "
                + ", ".join(cp.ip for cp in lab.controlplanes),
            ),
        ]
    to = components.api_node(lab).name
    return [
        CleanStale(),
        CreateNetwork(),
        WriteCloudConfig(),
        *registry_actions(lab),
        *control,
        StartComponent(components.forwarder(lab), name=f"host forwarder: 127.0.0.1 → {to}"),
        BuildImages(nodes),
        *(StartComponent(components.containerd(lab, n)) for n in nodes),
        LoadImages(nodes),
        *push_actions(lab),
        *(WaitHealthy(s, SERVER_TIMEOUT) for s in servers if lab.ha),
        WaitServer(),
        ApplyNetworkPolicyRbac(),
        *(a for n in nodes for a in agent_actions(lab, n)),
        ApplyAddons(),
        WaitNodesReady(nodes),
        MarkControlPlane(),
        StartSupervisor(),
        WaitAddons(),
    ]


async def run_actions(
    lab: Lab,
    actions: Sequence[Action],
    report: Report = print,
    on_step: Callable[[str], None] | None = None,
) -> float:
    """Run ``actions`` in order, one ✓ line each; the seconds it took.  On failure the lab
    is left as it is (for its logs) and ``LabError`` names the step."""
    ctx = Context(lab, report)
    started = time.monotonic()
    for action in actions:
        if on_step is not None:
            on_step(action.name)
        step = time.monotonic()
        try:
            await action.execute(ctx)
        except (CommandError, LabError, OSError, ApiError) as error:
            report(f"✗ {action.name}")
            raise LabError(f"{action.name}: {error}") from error
        report(f"✓ {action.name} ({time.monotonic() - step:.1f}s)")
    return time.monotonic() - started


async def up(
    lab: Lab, report: Report = print, on_step: Callable[[str], None] | None = None
) -> float:
    """Run ``up_actions``; the seconds it took.  On failure the lab is left as it is (for
    its logs) and ``LabError`` names the step; ``down`` removes it.  The host's nameservers
    are recorded in the spec (the router stands in for them) unless the lab has its own."""
    if not lab.vms and not lab.spec.nameservers:
        lab = lab.with_spec(replace(lab.spec, nameservers=network.host_nameservers()))
    return await run_actions(lab, up_actions(lab), report, on_step)


# -- nodes joining and leaving ----------------------------------------------------------------


async def add_node(
    lab: Lab, report: Report = print, on_step: Callable[[str], None] | None = None
) -> Lab:
    """A new worker (``Lab.next_worker``) joins the running lab: its namespace and veth,
    containerd and images, the lab cloud's inventory with it, a bootstrap token, kubelet
    (which gets its client certificate through a CertificateSigningRequest) and proxy, then
    its Node Ready and initialized by the cloud-controller-manager (which also routes its pod
    CIDR).  Returns the grown lab."""
    workers = (*lab.spec.worker_list, lab.next_worker())
    grown = lab.with_spec(lab.spec.with_workers(workers))
    node = grown.node(workers[-1])
    actions: list[Action] = [
        AttachNode(node),
        BuildImages((node,)),
        StartComponent(components.containerd(grown, node)),
        LoadImages((node,)),
        WriteCloudConfig(name=f"cloud config: instance {node.name} added"),
        WriteJoinCredentials(node),
        *agent_actions(grown, node, bootstrap=True),
        WaitNodesReady((node,)),
    ]
    await run_actions(grown, actions, report, on_step)
    return grown


async def remove_node(lab: Lab, name: str, report: Report = print) -> Lab:
    """Worker ``name`` leaves: its kubelet, proxy and NetworkPolicy agent stopped, its pod
    sandboxes removed, its containerd stopped, whatever else ran for it killed, its mounts,
    cgroups, namespace (and veth) removed, and the lab cloud's inventory rewritten without it;
    the saved spec then lists the remaining workers. Then, as with a cloud machine that
    vanished, the control plane notices: the Node goes NotReady after the node-monitor grace
    period, the cloud node lifecycle controller deletes it and the route controller its route;
    this waits (bounded) for the Node to be gone. Returns the shrunk lab."""
    node = lab.node(name)
    if node.role is not Role.WORKER:
        raise LabError(f"{name} is not a worker: only workers can be removed")
    rest = tuple(w for w in lab.spec.worker_list if w != name)
    if not rest:
        raise LabError(f"{name} is the last worker: `kubelab lab down` removes the lab")
    table = ProcessTable(lab.process_file)
    shrunk = lab.with_spec(lab.spec.with_workers(rest))
    steps: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        (
            f"{name}: kubelet, proxy and NetworkPolicy agent stopped",
            _stopper(table, [node], *NODE_AGENTS),
        ),
        (f"{name}: pod sandboxes removed through CRI", lambda: _remove_sandboxes(lab, node, table)),
        (f"{name}: containerd stopped", _stopper(table, [node], "containerd")),
        (f"{name}: leftover processes killed", lambda: _off_thread(_kill_node_leftovers, node)),
        (f"{name}: mounts removed", lambda: _off_thread(_unmount, node.state_dir)),
        (f"{name}: cgroups removed", lambda: _off_thread(_remove_cgroup_dirs, node_cgroups(node))),
        (f"{name}: namespace and veth removed", lambda: _off_thread(network.detach, node)),
        (
            f"{name}: instance gone from the cloud config",
            lambda: _off_thread(write_cloud_config, shrunk),
        ),
        (
            f"{name}: Node deleted by the cloud node lifecycle controller",
            lambda: wait_for(
                lambda: _node_gone(lab, name), f"Node {name} to be deleted", NODE_GONE_TIMEOUT
            ),
        ),
    ]
    problems = await _run_all(steps, report)
    shrunk.spec.save(spec_file(lab.name))
    shutil.rmtree(node.state_dir, ignore_errors=True)
    if problems:
        raise LabError(f"removing {name} left things behind:\n" + "\n".join(problems))
    return shrunk


async def _node_gone(lab: Lab, name: str) -> bool:
    try:
        return name not in await node_objects(lab)
    except (OSError, ApiError):
        return False


# -- waiting ----------------------------------------------------------------------------------


async def wait_for(
    check: Callable[[], Awaitable[bool]],
    what: str,
    seconds: float,
    alive: Callable[[], None] = lambda: None,
    *,
    ctx: Context | None = None,
) -> None:
    """Poll ``check`` until true; ``alive`` raises if a process it needs died meanwhile."""
    deadline = time.monotonic() + seconds
    while not await check():
        alive()
        if time.monotonic() > deadline:
            tails = ""
            if ctx is not None:
                tails = "".join(
                    f"\n--- {r.key} ({r.log}):\n{log_tail(r, 1500)}"
                    for r in ctx.processes.records()
                )
            raise LabError(f"timed out after {seconds:.0f}s waiting for {what}{tails}")
        await asyncio.sleep(POLL)


async def _exists(path: Path) -> bool:
    return await asyncio.to_thread(path.exists)


async def probe(health: Health) -> tuple[bool, str]:
    """Ask a health endpoint (inside its namespace): healthy?, and what it answered.  A
    ``unix://`` URL is a CRI endpoint: healthy when the runtime reports RuntimeReady."""
    if health.url.startswith("unix://"):
        ready = await _cri_ready(health.url)
        return ready, "RuntimeReady" if ready else "not ready"
    try:
        out = await asyncio.to_thread(
            run,
            "curl", "-sk", "-m", "2", "-o", "/dev/null", "-w", "%{http_code}", health.url,
            netns=health.netns, timeout=5, check=False,
        )  # fmt: skip
    except CommandError as error:
        return False, str(error)
    code = out.strip()
    return code == "200", code if code not in ("", "000") else "no answer"


async def _runtime_ready(node: Node) -> bool:
    layout = containerd_layout(node)
    return layout.socket.exists() and await _cri_ready(layout.endpoint)


async def _cri_ready(endpoint: str) -> bool:
    try:
        async with RuntimeClient(endpoint, timeout=2) as cri:
            status = await cri.status()
    except Exception:
        return False
    return any(c.type == "RuntimeReady" and c.status for c in status.conditions)


async def _api_answers(kubeconfig_path: Path) -> bool:
    try:
        async with Client.from_kubeconfig(kubeconfig_path, user_agent="kubelab-lab") as client:
            await client.list(NodeObject)
    except Exception:
        return False
    return True


async def node_objects(lab: Lab) -> dict[str, NodeObject]:
    """The lab's Node objects by name, read through the host kubeconfig."""
    async with _admin(lab) as client:
        listed = await client.list(NodeObject)
    return {n.metadata.name or "": n for n in listed.items}


def node_ready(node: NodeObject) -> bool:
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def node_usable(node: NodeObject) -> bool:
    """Ready, with a podCIDR, initialized by the cloud node controller (a providerID, the
    uninitialized taint gone) and its pod CIDR routed (NetworkUnavailable False)."""
    spec, status = node.spec, node.status
    if spec is None or not spec.pod_cidr or not spec.provider_id or not node_ready(node):
        return False
    if any(t.key == UNINITIALIZED_TAINT for t in spec.taints or []):
        return False
    conditions = (status.conditions if status else None) or []
    return any(c.type == "NetworkUnavailable" and c.status == "False" for c in conditions)


async def _nodes_ready(lab: Lab, wanted: Sequence[Node]) -> bool:
    try:
        nodes = await node_objects(lab)
    except Exception:
        return False
    return all(m.name in nodes and node_usable(nodes[m.name]) for m in wanted)


def _listening(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


# -- down -------------------------------------------------------------------------------------


async def down(lab: Lab, report: Report = print) -> None:
    """Remove everything of the lab (see the module docstring); idempotent, and every step
    runs even when an earlier one failed (the failures are reported, then raised together)."""
    table = ProcessTable(lab.process_file)
    nodes = lab.nodes
    steps: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("supervisor stopped", _stopper(table, nodes, "supervisor")),
        (
            "kubelets, proxies and NetworkPolicy agents stopped",
            _stopper(table, nodes, *NODE_AGENTS),
        ),
        (
            "pod sandboxes removed through CRI",
            lambda: asyncio.gather(
                *(_remove_sandboxes(lab, n, table) for n in lab.kubernetes_nodes)
            ),
        ),
        ("containerds stopped", _stopper(table, nodes, "containerd")),
        (
            "forwarder and server stopped",
            _stopper(table, nodes, "forwarder", "loadbalancer", "server"),
        ),
        ("etcd stopped", _stopper(table, nodes, "etcd")),
        (
            "registries and resolver stopped",
            _stopper(table, nodes, "registry", "private-registry", "resolver"),
        ),
        (
            "leftover processes killed (shims, pods, helpers)",
            lambda: _off_thread(_kill_leftovers, lab),
        ),
        ("mounts removed", lambda: _off_thread(_unmount, lab.state_dir)),
        ("cgroups removed", lambda: _off_thread(_remove_cgroup_dirs, lab_cgroups(lab))),
        ("namespaces deleted", lambda: _off_thread(network.destroy, lab)),
        (f"{lab.state_dir} removed", lambda: _off_thread(_remove_state, lab)),
    ]
    problems = await _run_all(steps, report)
    if problems:
        raise LabError("down left things behind:\n" + "\n".join(problems))


async def _run_all(
    steps: Sequence[tuple[str, Callable[[], Awaitable[object]]]], report: Report
) -> list[str]:
    """Run every step whatever happened before; the failures."""
    problems: list[str] = []
    for what, work in steps:
        try:
            await work()
            report(f"✓ {what}")
        except Exception as error:
            problems.append(f"{what}: {error}")
            report(f"✗ {what}: {error}")
    return problems


async def _off_thread(function: Callable[..., object], *args: object) -> object:
    return await asyncio.to_thread(function, *args)


def _stopper(
    table: ProcessTable, nodes: Sequence[Node], *names: str
) -> Callable[[], Awaitable[object]]:
    """Stopping these components of these nodes, concurrently."""
    wanted = {n.name for n in nodes}
    keys = [r.key for r in table.records() if r.component in names and r.node in wanted]
    return lambda: asyncio.gather(*(asyncio.to_thread(table.stop, k) for k in keys))


async def _remove_sandboxes(lab: Lab, node: Node, table: ProcessTable) -> None:
    record = table.get(components.containerd(lab, node).key)
    if record is None or not record.alive():
        return  # no containerd: its shims and mounts are handled afterwards
    async with RuntimeClient(containerd_layout(node).endpoint, timeout=30) as cri:
        for sandbox in await cri.list_pod_sandbox():
            await cri.stop_pod_sandbox(sandbox.id)
            await cri.remove_pod_sandbox(sandbox.id)


def lab_processes(lab: Lab) -> set[int]:
    """Every process of the lab still running, however it was started: inside one of the
    lab's namespaces, naming the lab's state directory on its command line (shims name
    their containerd's socket, the kubelet's CNI agent its socket), or in the lab's cgroups
    (pods)."""
    return _processes_of(lab.nodes, lab.state_dir, lab_cgroups(lab))


def _processes_of(nodes: Sequence[Node], state_dir: Path, cgroups: Sequence[Path]) -> set[int]:
    namespaces = set()
    for node in nodes:
        with contextlib.suppress(OSError):
            info = node.netns_path.stat()
            namespaces.add((info.st_dev, info.st_ino))
    marker = f"{state_dir}/".encode()
    pids: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            info = (proc / "ns" / "net").stat()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in namespaces or marker in cmdline:
            pids.add(int(proc.name))
    for directory in cgroups:
        for procs in directory.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in procs.read_text().split())
    pids.discard(os.getpid())
    return pids


def _kill(find: Callable[[], set[int]]) -> None:
    for pid in find():
        terminate(pid, timeout=2)
    left = [pid for pid in find() if _running(pid)]
    if left:
        raise LabError(f"processes left: {left}")


def _kill_leftovers(lab: Lab) -> None:
    _kill(lambda: lab_processes(lab))


def _kill_node_leftovers(node: Node) -> None:
    _kill(lambda: _processes_of([node], node.state_dir, node_cgroups(node)))


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def mounts_under(directory: Path) -> list[Path]:
    """Mount points under ``directory``, deepest first."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = Path(line.split()[1].replace("\\040", " "))
        if point.is_relative_to(directory):
            found.append(point)
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _unmount(directory: Path) -> None:
    for point in mounts_under(directory):
        run("umount", "-l", point, check=False)
    left = mounts_under(directory)
    if left:
        raise LabError(f"still mounted: {', '.join(map(str, left))}")


def _cgroup_hierarchies() -> Iterator[Path]:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] in ("cgroup", "cgroup2"):
            yield Path(fields[1])


def _cgroups_at(relative: Path) -> list[Path]:
    return [d for d in (h / relative for h in _cgroup_hierarchies()) if d.is_dir()]


def lab_cgroups(lab: Lab) -> list[Path]:
    """The lab's cgroup directory (``/kubelab/<lab>``) in every hierarchy that has it."""
    return _cgroups_at(Path(CGROUP_ROOT.lstrip("/")) / lab.name)


def node_cgroups(node: Node) -> list[Path]:
    """The node's pods' cgroup directory (its ``--cgroup-root``) in every hierarchy."""
    return _cgroups_at(Path(node.cgroup_root.lstrip("/")))


def _remove_state(lab: Lab) -> None:
    shutil.rmtree(lab.state_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        lab.state_dir.parent.rmdir()  # /run/kubelab, when no other lab uses it
    if lab.state_dir.exists():
        raise LabError(f"{lab.state_dir} could not be removed")


def _remove_cgroup_dirs(directories: Sequence[Path]) -> None:
    """Remove cgroup directories (their subtrees deepest first), then each one's parent
    if that is empty now."""
    for directory in directories:
        for cgroup in sorted(
            (p for p in directory.rglob("*") if p.is_dir()),
            key=lambda p: len(p.parts),
            reverse=True,
        ):
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        directory.rmdir()
        with contextlib.suppress(OSError):
            directory.parent.rmdir()  # /kubelab (for a lab's), when nothing else uses it
    left = [d for d in directories if d.is_dir()]
    if left:
        raise LabError(f"cgroups left: {', '.join(map(str, left))}")
