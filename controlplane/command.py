"""``kubelab server``: every control-plane component in one process, like ``k3s server``.

The API server starts first and writes its admin kubeconfig; the scheduler and the
controller-manager (and, given ``--cloud-provider``, the cloud-controller-manager) then run
in the same event loop as its clients, over HTTPS like any other client, so nothing about
them differs from running each as its own command.  Each runs as its own identity
(``<data-dir>/scheduler.kubeconfig``, ``controller-manager.kubeconfig``,
``cloud-controller-manager.kubeconfig``, see ``controlplane.apiserver.certs.identities``), and the
controllers, as kubeadm configures them, each as its own ``kube-system`` service account
(``--use-service-account-credentials``), so the whole control plane works under
``--authorization-mode Node,RBAC``, its default as in k3s and kubeadm clusters, with each part
granted only its role.  The controller-manager
signs approved certificate requests with the cluster CA in ``<data-dir>/pki``.  A component
that stops with an error stops the whole server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from controlplane.apiserver import command as apiserver_command
from controlplane.apiserver.certs import identities
from controlplane.cloud import command as cloud_command
from controlplane.controllers import command as controller_manager_command
from controlplane.scheduler import command as scheduler_command
from kubelab import component


def add_flags(parser: argparse.ArgumentParser) -> None:
    apiserver_command.add_flags(parser, authorization_mode=("Node", "RBAC"))
    parser.add_argument(
        "--controllers",
        default="*",
        help="controllers to run: '*' for all, NAME to add one, -NAME to leave one out",
    )
    parser.add_argument("--cluster-cidr", default="10.244.0.0/16", help="pod addresses")
    parser.add_argument(
        "--node-cidr-mask-size", type=int, default=24, help="prefix of each node's podCIDR"
    )
    parser.add_argument(
        "--kube-api-qps",
        type=float,
        default=200.0,
        help="requests per second the scheduler and the controller-manager may send (default: 200)",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=int,
        default=400,
        help="requests they may send in a burst above that (default: 400)",
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
        default=True,
        help="run each controller as its own kube-system service account (default: true)",
    )
    parser.add_argument(
        "--cluster-signing-duration",
        type=component.duration,
        default=365 * 24 * 3600.0,
        help="the longest lifetime of a certificate the CSR signer issues (default: 8760h)",
    )
    controller_manager_command.add_approve_kubelet_serving_flag(parser)
    parser.add_argument(
        "--controller-manager-port",
        type=int,
        default=controller_manager_command.DEFAULT_PORT,
        help="the controller-manager's /healthz and /metrics port "
        f"(default: {controller_manager_command.DEFAULT_PORT}; 0: any free port)",
    )
    parser.add_argument(
        "--cloud-controller-manager-port",
        type=int,
        default=cloud_command.DEFAULT_PORT,
        help="the cloud-controller-manager's /healthz and /metrics port "
        f"(default: {cloud_command.DEFAULT_PORT}; 0: any free port)",
    )
    cloud_command.add_cloud_flags(parser, required=False)
    parser.add_argument(
        "--scheduler-config",
        type=Path,
        help="a KubeSchedulerConfiguration file for the scheduler (default: the defaults)",
    )
    parser.add_argument(
        "--scheduler-port",
        type=int,
        default=scheduler_command.DEFAULT_PORT,
        help="the scheduler's /healthz, /metrics and explain port "
        f"(default: {scheduler_command.DEFAULT_PORT}; 0: any free port)",
    )


async def serve(args: argparse.Namespace, stop: asyncio.Event) -> int:
    data_dir = apiserver_command.prepare_data_dir(args)
    async with apiserver_command.serving(args, data_dir):
        scheduler = scheduler_command.SchedulerOptions(
            kubeconfig=identities.kubeconfig_path(data_dir, identities.SCHEDULER),
            config=args.scheduler_config,
            port=args.scheduler_port,
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
        )
        controllers = controller_manager_command.ControllerManagerOptions(
            kubeconfig=identities.kubeconfig_path(data_dir, identities.CONTROLLER_MANAGER),
            controllers=args.controllers,
            cluster_cidr=args.cluster_cidr,
            node_cidr_mask_size=args.node_cidr_mask_size,
            service_cluster_ip_range=args.service_cluster_ip_range,
            node_monitor_grace_period=args.node_monitor_grace_period,
            port=args.controller_manager_port,
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
            use_service_account_credentials=args.use_service_account_credentials,
            cluster_signing_cert_file=data_dir / "pki" / "ca.crt",
            cluster_signing_key_file=data_dir / "pki" / "ca.key",
            cluster_signing_duration=args.cluster_signing_duration,
            approve_kubelet_serving=args.approve_kubelet_serving_certificates,
        )
        components = [
            asyncio.create_task(scheduler_command.run_scheduler(scheduler, stop)),
            asyncio.create_task(
                controller_manager_command.run_controller_manager(controllers, stop)
            ),
        ]
        if args.cloud_provider is not None:
            cloud = cloud_command.CloudControllerManagerOptions(
                kubeconfig=identities.kubeconfig_path(
                    data_dir, identities.CLOUD_CONTROLLER_MANAGER
                ),
                cloud_provider=args.cloud_provider,
                cloud_config=args.cloud_config,
                cluster_name=args.cluster_name,
                configure_cloud_routes=args.configure_cloud_routes,
                allow_untagged_cloud=args.allow_untagged_cloud,
                cluster_cidr=args.cluster_cidr,
                port=args.cloud_controller_manager_port,
            )
            components.append(
                asyncio.create_task(cloud_command.run_cloud_controller_manager(cloud, stop))
            )
        stopping = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait(
                [*components, stopping], return_when=asyncio.FIRST_COMPLETED
            )
            failed = [task for task in done if task is not stopping]
            code = max((task.result() for task in failed), default=0)
        finally:
            stop.set()
            for task in [*components, stopping]:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    return code


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)
    return lambda args: component.run(lambda stop: serve(args, stop))
