"""``kubelab controller-manager``: every enabled controller in one process, under one lease.

Serves plain HTTP on ``--bind-address:--port`` (upstream: HTTPS on 10257 behind delegated
authentication, which arrives with the security issue): ``/healthz``, ``/readyz`` and
``/metrics`` with ``leader_election_master_status``.  With ``--leader-elect`` only the holder
of ``kube-system/kube-controller-manager`` runs the controllers; one that cannot renew its
lease stops at once and the process exits with status 1.

With ``--use-service-account-credentials`` each controller acts as its own ``kube-system``
service account (``clientbuilder``), as under RBAC it must; the shared informers and events
keep the controller-manager's own identity.  ``--cluster-signing-cert-file`` and
``-key-file`` name the CA csrsigning signs with; without them csrsigning is not started.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from controlplane.controllers.context import AutoscalerOptions
from kube import component

DEFAULT_PORT = 10257


def add_flags(parser: argparse.ArgumentParser) -> None:
    component.add_client_flags(parser, qps=100.0, burst=200)
    parser.add_argument(
        "--controllers",
        default="*",
        help="controllers to run: '*' for all, NAME to add one, -NAME to leave one out "
        "(default: *)",
    )
    parser.add_argument("--cluster-cidr", default="10.244.0.0/16", help="pod addresses")
    parser.add_argument(
        "--node-cidr-mask-size", type=int, default=24, help="prefix of each node's podCIDR"
    )
    parser.add_argument(
        "--service-cluster-ip-range", default="10.96.0.0/12", help="Service ClusterIPs"
    )
    parser.add_argument(
        "--node-monitor-grace-period",
        type=component.duration,
        default=40.0,
        help="how long a node may go unheard before it is NotReady (default: 40s)",
    )
    parser.add_argument(
        "--use-service-account-credentials",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="give each controller a client acting as its own kube-system service account "
        "(needed under RBAC: each is granted only its system:controller:<name> role)",
    )
    parser.add_argument(
        "--cluster-signing-cert-file",
        type=Path,
        help="the CA certificate csrsigning signs approved requests with",
    )
    parser.add_argument("--cluster-signing-key-file", type=Path, help="the private key of that CA")
    parser.add_argument(
        "--cluster-signing-duration",
        type=component.duration,
        default=365 * 24 * 3600.0,
        help="the longest lifetime of a certificate csrsigning issues (default: 8760h)",
    )
    add_approve_kubelet_serving_flag(parser)
    add_autoscaler_flags(parser)
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the controllers only while holding the kube-controller-manager Lease",
    )
    component.add_serving_flags(parser, DEFAULT_PORT, "/healthz and /metrics")


@dataclass(frozen=True)
class ControllerManagerOptions:
    """How to run the controller-manager, whichever command starts it."""

    kubeconfig: Path
    controllers: str = "*"
    cluster_cidr: str = "10.244.0.0/16"
    node_cidr_mask_size: int = 24
    service_cluster_ip_range: str = "10.96.0.0/12"
    node_monitor_grace_period: float = 40.0
    leader_elect: bool = True
    bind_address: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    qps: float = 100.0
    burst: int = 200
    use_service_account_credentials: bool = False
    cluster_signing_cert_file: Path | None = None
    cluster_signing_key_file: Path | None = None
    cluster_signing_duration: float = 365 * 24 * 3600.0
    approve_kubelet_serving: bool = False
    autoscaler: AutoscalerOptions = field(default_factory=AutoscalerOptions)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ControllerManagerOptions:
        return cls(
            kubeconfig=args.kubeconfig,
            controllers=args.controllers,
            cluster_cidr=args.cluster_cidr,
            node_cidr_mask_size=args.node_cidr_mask_size,
            service_cluster_ip_range=args.service_cluster_ip_range,
            node_monitor_grace_period=args.node_monitor_grace_period,
            leader_elect=args.leader_elect,
            bind_address=args.bind_address,
            port=args.port,
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
            use_service_account_credentials=args.use_service_account_credentials,
            cluster_signing_cert_file=args.cluster_signing_cert_file,
            cluster_signing_key_file=args.cluster_signing_key_file,
            cluster_signing_duration=args.cluster_signing_duration,
            approve_kubelet_serving=args.approve_kubelet_serving_certificates,
            autoscaler=autoscaler_options(args),
        )


def add_autoscaler_flags(parser: argparse.ArgumentParser) -> None:
    """The horizontal pod autoscaler's flags, upstream's names and defaults."""
    for name, default, what in (
        ("sync-period", "15s", "how often each HPA is synced"),
        (
            "downscale-stabilization",
            "5m",
            "how far back a scale-down looks for a higher recommendation",
        ),
        ("cpu-initialization-period", "5m", "how long after a start CPU samples may be skipped"),
        (
            "initial-readiness-delay",
            "30s",
            "how long after a start readiness changes count as initial",
        ),
    ):
        parser.add_argument(
            f"--horizontal-pod-autoscaler-{name}",
            type=component.duration,
            default=component.duration(default),
            help=f"{what} (default: {default})",
        )
    parser.add_argument(
        "--horizontal-pod-autoscaler-tolerance",
        type=float,
        default=0.1,
        help="how far from 1 a metric's ratio to its target must be to scale (default: 0.1)",
    )


def autoscaler_options(args: argparse.Namespace) -> AutoscalerOptions:
    return AutoscalerOptions(
        sync_period=args.horizontal_pod_autoscaler_sync_period,
        downscale_stabilization=args.horizontal_pod_autoscaler_downscale_stabilization,
        tolerance=args.horizontal_pod_autoscaler_tolerance,
        cpu_initialization_period=args.horizontal_pod_autoscaler_cpu_initialization_period,
        initial_readiness_delay=args.horizontal_pod_autoscaler_initial_readiness_delay,
    )


def add_approve_kubelet_serving_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--approve-kubelet-serving-certificates",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="csrapproving approves a kubelet's serving certificate request when the node "
        "itself asks for addresses its Node reports (upstream leaves these to an admin; "
        "default: false)",
    )


async def run_controller_manager(options: ControllerManagerOptions, stop: asyncio.Event) -> int:
    """Run the enabled controllers until ``stop`` is set (0) or the lease is lost (1)."""
    from controlplane.controllers.clientbuilder import ServiceAccountClients
    from controlplane.controllers.context import ControllerContext, ControllerOptions
    from controlplane.controllers.manager import (
        Manager,
        UnknownControllerError,
        enabled,
        run_controllers,
        run_manager,
    )
    from controlplane.controllers.registry import CONTROLLERS, OFF_BY_DEFAULT, SERVICE_ACCOUNTS
    from kube.client.rest import Client
    from kube.clock import RealClock

    try:
        names = enabled(options.controllers, list(CONTROLLERS), OFF_BY_DEFAULT)
    except UnknownControllerError as error:
        raise SystemExit(f"kubelab controller-manager: {error}") from None
    clock = RealClock()
    client = Client.from_kubeconfig(
        options.kubeconfig,
        user_agent="kubelab-controller-manager",
        qps=options.qps,
        burst=options.burst,
    )
    manager = Manager(
        name="controller-manager",
        event_component="kube-controller-manager",
        lease="kube-controller-manager",
        leader_elect=options.leader_elect,
        bind_address=options.bind_address,
        port=options.port,
    )
    async with client:
        accounts = ServiceAccountClients(client, clock, qps=options.qps, burst=options.burst)

        async def controllers(ctx: ControllerContext) -> None:
            contexts = (
                {
                    name: dataclasses.replace(
                        ctx, client=await accounts.client(SERVICE_ACCOUNTS[name])
                    )
                    for name in names
                }
                if options.use_service_account_credentials
                else {}
            )
            await run_controllers(ctx, CONTROLLERS, names, contexts)

        try:
            return await run_manager(
                manager,
                client,
                clock,
                ControllerOptions(
                    cluster_cidr=options.cluster_cidr,
                    node_cidr_mask_size=options.node_cidr_mask_size,
                    service_cluster_ip_range=options.service_cluster_ip_range,
                    node_monitor_grace_period=options.node_monitor_grace_period,
                    cluster_signing_cert_file=options.cluster_signing_cert_file,
                    cluster_signing_key_file=options.cluster_signing_key_file,
                    cluster_signing_duration=options.cluster_signing_duration,
                    approve_kubelet_serving=options.approve_kubelet_serving,
                    autoscaler=options.autoscaler,
                ),
                controllers,
                lambda port: (
                    f"kubelab controller-manager: {len(names)} controllers; serving "
                    f"health on http://{options.bind_address}:{port}"
                ),
                stop,
            )
        finally:
            await accounts.close()


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)
    return lambda args: component.run(
        lambda stop: run_controller_manager(ControllerManagerOptions.from_args(args), stop)
    )
