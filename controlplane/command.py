"""``kubelab server``: every control-plane component under one command, like ``k3s server``.

One command, one log stream, one parent that handles signals; but each component runs in a
process of its own, its child, so that the API server, the scheduler and the controllers
each get a core (one Python process holds one interpreter lock: run as one, the whole control
plane shared a core).  The parent (``supervise``) uses ``kube.supervision``:

- ports left free (``--scheduler-port 0``) are chosen first, so that every child knows them
  (the API server probes the scheduler and the controller-manager for ComponentStatus);
- the API server starts first; once it prints ``kubelab apiserver: serving on https://...``
  (relayed as the command's first stdout line, which scripts and tests wait for) its admin
  and component kubeconfigs are written, and the scheduler and the controller-manager (and,
  given ``--cloud-provider``, the cloud-controller-manager) start;
- every child runs this same command line with ``--run-component NAME`` added (a flag for
  the parent's use only, so each child parses exactly the flags the user gave), and runs
  that one component as its own command does (``run_component``);
- each child is waited for until it prints the line that says it serves; one that exits
  before (a bad flag or configuration, which a restart would only repeat) fails the command
  with its exit code, its error relayed;
- a child that exits later is reported and restarted with backoff; the API server is
  restarted on the port its first run bound, so the others' kubeconfigs stay right;
- SIGTERM or SIGINT stops the children in the reverse order of their start: controllers
  first, the API server last.

Each component runs as its own identity (``<data-dir>/scheduler.kubeconfig``,
``controller-manager.kubeconfig``, ``cloud-controller-manager.kubeconfig``, see
``controlplane.apiserver.certs.identities``), and the controllers, as kubeadm configures them, each
as its own ``kube-system`` service account (``--use-service-account-credentials``), so the
whole control plane works under ``--authorization-mode Node,RBAC``, its default as in k3s and
kubeadm clusters, with each part granted only its role.  The controller-manager signs
approved certificate requests with the cluster CA in ``<data-dir>/pki``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import random
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from controlplane.apiserver import command as apiserver_command
from controlplane.apiserver.certs import identities
from controlplane.cloud import command as cloud_command
from controlplane.controllers import command as controller_manager_command
from controlplane.scheduler import command as scheduler_command
from kube import component
from kube.supervision import ChildExited, Supervisor

APISERVER = "apiserver"
SCHEDULER = "scheduler"
CONTROLLER_MANAGER = "controller-manager"
CLOUD_CONTROLLER_MANAGER = "cloud-controller-manager"
COMPONENTS = (APISERVER, SCHEDULER, CONTROLLER_MANAGER, CLOUD_CONTROLLER_MANAGER)

_SERVING = r"kubelab apiserver: serving on https://\S+:(\d+)"


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
    controller_manager_command.add_autoscaler_flags(parser)
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the scheduler and the controllers only while holding their Leases "
        "(default: true; with one control plane there is no one to elect against)",
    )
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
    # How the server starts its children: each runs one component with the server's flags.
    parser.add_argument("--run-component", choices=COMPONENTS, help=argparse.SUPPRESS)


def child_command(argv: Sequence[str], name: str, *extra: str) -> list[str]:
    """The command line of the child running ``name``: this command's own (``argv``, from
    ``server`` on) with the component named, and ``extra`` flags after (they win)."""
    return [sys.executable, "-m", "kubelab", *argv, "--run-component", name, *extra]


async def supervise(args: argparse.Namespace, argv: Sequence[str], stop: asyncio.Event) -> int:
    """Run each component as a child of this process until ``stop`` (see the module
    docstring); the exit code of a component that could not start, if one could not."""
    supervisor = Supervisor()
    port: list[str] = []
    # Ports the flags leave free (0) are chosen here, so that every child knows them: the
    # API server probes the scheduler and the controller-manager for ComponentStatus.
    chosen = [
        part
        for flag, value in (
            ("--scheduler-port", args.scheduler_port),
            ("--controller-manager-port", args.controller_manager_port),
        )
        if value == 0
        for part in (flag, str(_free_port()))
    ]
    argv = [*argv, *chosen]

    def apiserver() -> list[str]:
        # A restarted API server binds the port its first run chose (--secure-port 0), which
        # the kubeconfigs of the other components name.
        return child_command(argv, APISERVER, *port)

    try:
        try:
            serving = await supervisor.start(APISERVER, apiserver, ready=_SERVING)
            assert serving is not None
            port[:] = ["--secure-port", serving.group(1)]
            cloud = [CLOUD_CONTROLLER_MANAGER] if args.cloud_provider is not None else []
            for name in [SCHEDULER, CONTROLLER_MANAGER, *cloud]:
                command = functools.partial(child_command, argv, name)
                await supervisor.start(name, command, ready=rf"kubelab {name}: .*serving")
        except ChildExited as error:
            # A bad flag or configuration: restarting would only fail again.
            logging.getLogger("kubelab.server").error("%s", error)
            return error.code or 1
        await stop.wait()
    finally:
        await supervisor.stop()
    return 0


EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _free_port() -> int:
    """A loopback port nothing listens on, from below the kernel's ephemeral range.  The child
    binds it seconds later, and a port of that range may meanwhile become the local end of any
    process's outgoing connection (once, in CI, the scheduler's did)."""
    ephemeral = int(EPHEMERAL_PORTS.read_text().split()[0])
    for port in random.sample(range(ephemeral // 2, ephemeral), 100):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        chosen: int = probe.getsockname()[1]
        return chosen


async def run_component(args: argparse.Namespace, name: str, stop: asyncio.Event) -> int:
    """One component of the server, in this process, with the server's flags."""
    data_dir = apiserver_command.prepare_data_dir(args)
    if name == APISERVER:
        health = {
            SCHEDULER: f"http://127.0.0.1:{args.scheduler_port}/healthz",
            CONTROLLER_MANAGER: f"http://127.0.0.1:{args.controller_manager_port}/healthz",
        }
        async with apiserver_command.serving(args, data_dir, component_health=health):
            await stop.wait()
        return 0
    if name == SCHEDULER:
        scheduler = scheduler_command.SchedulerOptions(
            kubeconfig=identities.kubeconfig_path(data_dir, identities.SCHEDULER),
            config=args.scheduler_config,
            port=args.scheduler_port,
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
            leader_elect=args.leader_elect,
        )
        return await scheduler_command.run_scheduler(scheduler, stop)
    if name == CONTROLLER_MANAGER:
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
            autoscaler=controller_manager_command.autoscaler_options(args),
            leader_elect=args.leader_elect,
        )
        return await controller_manager_command.run_controller_manager(controllers, stop)
    cloud = cloud_command.CloudControllerManagerOptions(
        kubeconfig=identities.kubeconfig_path(data_dir, identities.CLOUD_CONTROLLER_MANAGER),
        cloud_provider=args.cloud_provider,
        cloud_config=args.cloud_config,
        cluster_name=args.cluster_name,
        configure_cloud_routes=args.configure_cloud_routes,
        allow_untagged_cloud=args.allow_untagged_cloud,
        cluster_cidr=args.cluster_cidr,
        port=args.cloud_controller_manager_port,
        leader_elect=args.leader_elect,
    )
    return await cloud_command.run_cloud_controller_manager(cloud, stop)


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)

    def run(args: argparse.Namespace) -> int:
        if args.run_component is not None:
            return component.run(lambda stop: run_component(args, args.run_component, stop))
        argv = sys.argv[1:]
        return component.run(lambda stop: supervise(args, argv, stop))

    return run
