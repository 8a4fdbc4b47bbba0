"""``kubelab kubelet``: the node agent, and ``kubelab kubelet runtime-config`` for its runtime.

Flags are upstream's kubelet flags where they exist (``--kubeconfig``, ``--node-name``,
``--node-ip``, ``--container-runtime-endpoint``, ``--root-dir``, ``--pod-manifest-path``,
``--cluster-dns``, ``--cluster-domain``, ``--cgroup-root``, ``--cloud-provider``,
``--node-labels``, ``--register-with-taints``, ``--max-pods``, ``--system-reserved``,
``--kube-reserved``, ``--eviction-hard``, ``--address``, ``--port``, ``--tls-cert-file``,
``--tls-private-key-file``, ``--bootstrap-kubeconfig``, ``--cert-dir``,
``--rotate-certificates`` and ``--rotate-server-certificates``: TLS bootstrapping and
certificate rotation, ``certificate``; ``--client-ca-file``, ``--anonymous-auth``,
``--authentication-token-webhook``, ``--authorization-mode``: who may use the kubelet's API,
``auth``); the pod network ones (``--cni-*``, ``--cluster-cidr``) configure what upstream
leaves to a network add-on.

``runtime-config`` writes the containerd configuration of a node (its own root, state and
socket under ``--state-dir``, the local pause image, the CNI directories); the lab and the
Vagrant machines both start containerd with it.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kube import component

if TYPE_CHECKING:
    from kube.api.kinds.core_v1.node import Taint
    from node.kubelet.kubelet import KubeletConfig

DEFAULT_RUNTIME_ENDPOINT = "unix:///run/containerd/containerd.sock"
DEFAULT_SANDBOX_IMAGE = "registry.k8s.io/pause:3.9"


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _pairs(text: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in _csv(text):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE[,KEY=VALUE...], got {text!r}")
        pairs[key] = value
    return pairs


def _eviction(text: str) -> dict[str, str]:
    thresholds: dict[str, str] = {}
    for item in _csv(text):
        key, sep, value = item.partition("<")
        if not sep or not key or not value:
            raise argparse.ArgumentTypeError(f"expected SIGNAL<QUANTITY[,...], got {text!r}")
        thresholds[key] = value
    return thresholds


def _taints(text: str) -> list[Taint]:
    from kube.api.taints import parse_taint

    try:
        return [parse_taint(item) for item in _csv(text)]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_flags(parser: argparse.ArgumentParser) -> None:
    component.add_client_flags(parser, qps=50.0, burst=100, required=False)
    credentials = parser.add_argument_group("client credentials")
    credentials.add_argument(
        "--bootstrap-kubeconfig",
        type=Path,
        help="a kubeconfig with a bootstrap token: when --kubeconfig does not exist (or its "
        "certificate expired), request a client certificate with it and write --kubeconfig",
    )
    credentials.add_argument(
        "--cert-dir",
        type=Path,
        help="where the key of a pending certificate request is kept (default: ROOT-DIR/pki)",
    )
    credentials.add_argument(
        "--rotate-certificates",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="renew the client certificate at 70-90%% of its lifetime (default: true)",
    )
    node = parser.add_argument_group("node")
    node.add_argument("--node-name", default=socket.gethostname().lower(), help="the Node's name")
    node.add_argument(
        "--node-ip", type=_csv, default=[], help="the node's IPs, comma-separated (InternalIP)"
    )
    node.add_argument("--node-labels", type=_pairs, default={}, help="KEY=VALUE,... on the Node")
    node.add_argument(
        "--register-with-taints",
        type=_taints,
        default=[],
        help="KEY[=VALUE]:EFFECT,... taints the Node is registered with",
    )
    node.add_argument(
        "--cloud-provider",
        choices=["", "external"],
        default="",
        help="external: a cloud-controller-manager initializes the Node",
    )
    node.add_argument("--max-pods", type=int, default=110, help="pods this node runs at most")
    node.add_argument("--system-reserved", type=_pairs, default={}, help="RESOURCE=QUANTITY,...")
    node.add_argument("--kube-reserved", type=_pairs, default={}, help="RESOURCE=QUANTITY,...")
    node.add_argument(
        "--eviction-hard",
        type=_eviction,
        default={"memory.available": "100Mi", "nodefs.available": "10%"},
        help="SIGNAL<QUANTITY,... (default: memory.available<100Mi,nodefs.available<10%%)",
    )
    pods = parser.add_argument_group("pods")
    pods.add_argument(
        "--container-runtime-endpoint",
        default=DEFAULT_RUNTIME_ENDPOINT,
        help=f"CRI endpoint (default: {DEFAULT_RUNTIME_ENDPOINT})",
    )
    pods.add_argument("--root-dir", type=Path, default=Path("/var/lib/kubelet"))
    pods.add_argument("--pod-logs-dir", type=Path, default=Path("/var/log/pods"))
    pods.add_argument("--pod-manifest-path", type=Path, help="a directory of static pod manifests")
    pods.add_argument("--cluster-dns", type=_csv, default=[], help="DNS server IPs for pods")
    pods.add_argument("--cluster-domain", default="cluster.local")
    pods.add_argument("--resolv-conf", type=Path, default=Path("/etc/resolv.conf"))
    pods.add_argument("--cgroup-root", default="/kubepods", help="the cgroup pods are placed under")
    network = parser.add_argument_group("pod network")
    network.add_argument(
        "--cni-plugin",
        choices=["kubelab", "reference", "none"],
        default="kubelab",
        help="kubelab-cni (default), the reference bridge plugin, or none (configured elsewhere)",
    )
    network.add_argument("--cni-conf-dir", type=Path, default=Path("/etc/cni/net.d"))
    network.add_argument("--cni-bin-dir", type=Path, default=Path("/opt/cni/bin"))
    network.add_argument("--cni-data-dir", type=Path, help="IPAM state (default: ROOT-DIR/cni)")
    network.add_argument("--cluster-cidr", default="10.244.0.0/16", help="every pod's network")
    server = parser.add_argument_group("server")
    server.add_argument("--address", help="address to serve on (default: the first --node-ip)")
    server.add_argument("--port", type=int, default=10250)
    server.add_argument("--tls-cert-file", type=Path)
    server.add_argument("--tls-private-key-file", type=Path)
    server.add_argument(
        "--rotate-server-certificates",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="obtain the serving certificate through a kubernetes.io/kubelet-serving "
        "certificate request (approved by csrapproving or an admin) and renew it before it "
        "expires, instead of --tls-cert-file (default: false)",
    )
    server.add_argument(
        "--client-ca-file", type=Path, help="authenticate client certificates signed by this CA"
    )
    server.add_argument(
        "--anonymous-auth",
        type=component.boolean,
        default=True,
        help="serve requests without credentials as system:anonymous; false: 401 (default: true)",
    )
    server.add_argument(
        "--authentication-token-webhook",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="authenticate bearer tokens with a TokenReview (default: false)",
    )
    server.add_argument(
        "--authorization-mode",
        choices=["AlwaysAllow", "Webhook"],
        default="AlwaysAllow",
        help="Webhook: authorize each request with a SubjectAccessReview (default: AlwaysAllow)",
    )


def add_runtime_config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir", type=Path, required=True, help="containerd's root, state and sockets"
    )
    parser.add_argument("--sandbox-image", default=DEFAULT_SANDBOX_IMAGE)
    parser.add_argument("--cni-conf-dir", type=Path, default=Path("/etc/cni/net.d"))
    parser.add_argument("--cni-bin-dir", type=Path, default=Path("/opt/cni/bin"))


def write_runtime_config(args: argparse.Namespace) -> int:
    from node.kubelet.runtimeconfig import ContainerdLayout, write_containerd_config

    layout = ContainerdLayout(
        state_dir=args.state_dir,
        sandbox_image=args.sandbox_image,
        cni_bin_dir=args.cni_bin_dir,
        cni_conf_dir=args.cni_conf_dir,
    )
    print(write_containerd_config(layout))
    return 0


def kubelet_config(args: argparse.Namespace) -> KubeletConfig:
    """The ``KubeletConfig`` the flags describe (errors exit with a message)."""
    from node.kubelet.auth import AuthOptions
    from node.kubelet.kubelet import KubeletConfig, NetworkOptions, ServerOptions
    from node.kubelet.nodestatus import NodeOptions
    from node.kubelet.runtime.options import NodeRuntimeOptions

    if not args.node_ip:
        raise SystemExit("kubelab kubelet: --node-ip is required")
    node_ips = tuple(args.node_ip)
    server = None
    if args.tls_cert_file is not None or args.tls_private_key_file is not None:
        if args.tls_cert_file is None or args.tls_private_key_file is None:
            raise SystemExit(
                "kubelab kubelet: --tls-cert-file and --tls-private-key-file go together"
            )
        if args.rotate_server_certificates:
            raise SystemExit(
                "kubelab kubelet: --rotate-server-certificates replaces --tls-cert-file"
            )
    if args.tls_cert_file is not None or args.rotate_server_certificates:
        server = ServerOptions(
            address=args.address or node_ips[0],
            port=args.port,
            tls_cert=args.tls_cert_file,
            tls_key=args.tls_private_key_file,
            client_ca=args.client_ca_file,
            auth=AuthOptions(
                anonymous=args.anonymous_auth,
                token_webhook=args.authentication_token_webhook,
                webhook_authorization=args.authorization_mode == "Webhook",
            ),
        )
    return KubeletConfig(
        node=NodeOptions(
            node_name=args.node_name,
            node_ips=node_ips,
            hostname=args.node_name,
            labels=args.node_labels,
            taints=args.register_with_taints,
            external_cloud_provider=args.cloud_provider == "external",
            kubelet_port=args.port,
            max_pods=args.max_pods,
            system_reserved=args.system_reserved,
            kube_reserved=args.kube_reserved,
            eviction_hard=args.eviction_hard,
            root_dir=args.root_dir,
        ),
        runtime=NodeRuntimeOptions(
            node_name=args.node_name,
            node_ips=node_ips,
            root_dir=args.root_dir,
            pod_logs_dir=args.pod_logs_dir,
            cluster_dns=tuple(args.cluster_dns),
            cluster_domain=args.cluster_domain,
            resolv_conf=args.resolv_conf,
            cgroup_root=args.cgroup_root,
        ),
        runtime_endpoint=args.container_runtime_endpoint,
        network=NetworkOptions(
            conf_dir=args.cni_conf_dir,
            bin_dir=args.cni_bin_dir,
            data_dir=args.cni_data_dir or args.root_dir / "cni",
            cluster_cidr=args.cluster_cidr,
            plugin=None if args.cni_plugin == "none" else args.cni_plugin,
        ),
        server=server,
        pod_manifest_path=args.pod_manifest_path,
        cert_dir=args.cert_dir or args.root_dir / "pki",
    )


async def run_kubelet(args: argparse.Namespace, stop: asyncio.Event) -> int:
    from kube.clock import RealClock
    from node.kubelet import certificate
    from node.kubelet.kubelet import Kubelet
    from node.kubelet.nodestatus import NodeOptionsError

    if args.kubeconfig is None:
        raise SystemExit("kubelab kubelet: --kubeconfig is required")
    config = kubelet_config(args)
    clock = RealClock()
    paths = certificate.Paths(args.kubeconfig, config.cert_dir)
    if args.bootstrap_kubeconfig is not None:
        bootstrapping = certificate.bootstrap(
            paths, args.bootstrap_kubeconfig, config.node.node_name, clock
        )
        try:
            await component.until_stopped(bootstrapping, stop, "kubelet")
        except certificate.CertificateRequestError as error:
            raise SystemExit(f"kubelab kubelet: TLS bootstrap: {error}") from None
        if stop.is_set():
            return 0
    async with component.client_from_flags(args, "kubelet") as client:
        try:
            kubelet = Kubelet(client, config)
        except NodeOptionsError as error:
            raise SystemExit(f"kubelab kubelet: {error}") from None
        managers = []
        if args.rotate_certificates and certificate.is_node_identity(
            client.config, config.node.node_name
        ):
            managers.append(certificate.client_manager(client, paths, config.node.node_name, clock))

        async def run() -> None:
            try:
                await asyncio.gather(kubelet.run(), *(m.run() for m in managers))
            except certificate.CertificateRequestError as error:
                raise SystemExit(f"kubelab kubelet: {error}") from None

        return await component.until_stopped(run(), stop, "kubelet")


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)
    commands = parser.add_subparsers(dest="kubelet_command", metavar="COMMAND")
    runtime_config = commands.add_parser(
        "runtime-config",
        help="write a node's containerd configuration and print its path",
        description="Write a node's containerd configuration and print its path.",
    )
    add_runtime_config_flags(runtime_config)

    def run(args: argparse.Namespace) -> int:
        if args.kubelet_command == "runtime-config":
            return write_runtime_config(args)
        return component.run(lambda stop: run_kubelet(args, stop))

    return run
