"""``kubelab cloud-controller-manager``: the cloud controllers over one cloud provider.

Like upstream's: ``--cloud-provider NAME`` picks a registered provider (the in-tree ones, or
any installed package declaring a ``kubelab.cloud_providers`` entry point) and
``--cloud-config FILE`` is handed to its factory.  A cloud without a cluster ID is refused
unless ``--allow-untagged-cloud``.  With ``--leader-elect`` only the holder of the
``kube-system/cloud-controller-manager`` Lease initializes the cloud and runs the controllers;
one that cannot renew stops at once and exits 1, and a standby takes over where it left off
(every controller reconciles from the API and the cloud, so nothing is created twice).
Controllers whose capability the cloud lacks are skipped with a log line.  ``/healthz``,
``/readyz`` and ``/metrics`` are served as the controller-manager serves them.

The ClusterRole this component needs is :func:`controlplane.cloud.rbac.cluster_role`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kube import component

if TYPE_CHECKING:
    from controlplane.controllers.controller import Controller
    from controlplane.controllers.manager import ControllerFactory
    from kube.client.rest import Client

log = logging.getLogger("kubelab.cloud")

DEFAULT_PORT = 10258
LEASE_NAME = "cloud-controller-manager"


def add_cloud_flags(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """The flags that choose and configure the cloud (``kubelab server`` shares them)."""
    parser.add_argument(
        "--cloud-provider",
        required=required,
        help="the cloud provider's registered name (in-tree: lab)",
    )
    parser.add_argument(
        "--cloud-config",
        type=Path,
        help="the provider's configuration file (in its own format)",
    )
    parser.add_argument(
        "--cluster-name", default="kubernetes", help="the cluster's name in the cloud"
    )
    parser.add_argument(
        "--configure-cloud-routes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="create routes for the Nodes' pod CIDRs in the cloud (default: true)",
    )
    parser.add_argument(
        "--allow-untagged-cloud",
        action="store_true",
        help="run even if the cloud has no cluster ID",
    )


def add_flags(parser: argparse.ArgumentParser) -> None:
    component.add_client_flags(parser, qps=20.0, burst=30)
    add_cloud_flags(parser)
    parser.add_argument(
        "--controllers",
        default="*",
        help="controllers to run: '*' for all, NAME to add one, -NAME to leave one out "
        "(cloud-node, cloud-node-lifecycle, service, route)",
    )
    parser.add_argument("--cluster-cidr", default="10.244.0.0/16", help="pod addresses")
    parser.add_argument(
        "--node-status-update-frequency",
        type=component.duration,
        default=300.0,
        help="how often initialized Nodes' addresses are refreshed (default: 5m)",
    )
    parser.add_argument(
        "--node-monitor-period",
        type=component.duration,
        default=5.0,
        help="how often every Node's instance is looked up (default: 5s)",
    )
    parser.add_argument(
        "--route-reconciliation-period",
        type=component.duration,
        default=10.0,
        help="how often the routes are reconciled (default: 10s)",
    )
    parser.add_argument(
        "--concurrent-service-syncs",
        type=int,
        default=1,
        help="Services whose load balancers are synced at once (default: 1)",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"run the controllers only while holding the {LEASE_NAME} Lease",
    )
    component.add_serving_flags(parser, DEFAULT_PORT, "/healthz and /metrics")


@dataclass(frozen=True)
class CloudControllerManagerOptions:
    """How to run the cloud-controller-manager, whichever command starts it."""

    kubeconfig: Path
    cloud_provider: str
    cloud_config: Path | None = None
    cluster_name: str = "kubernetes"
    configure_cloud_routes: bool = True
    allow_untagged_cloud: bool = False
    controllers: str = "*"
    cluster_cidr: str = "10.244.0.0/16"
    node_status_update_frequency: float = 300.0
    node_monitor_period: float = 5.0
    route_reconciliation_period: float = 10.0
    concurrent_service_syncs: int = 1
    leader_elect: bool = True
    bind_address: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    qps: float = 20.0
    burst: int = 30

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CloudControllerManagerOptions:
        return cls(
            kubeconfig=args.kubeconfig,
            cloud_provider=args.cloud_provider,
            cloud_config=args.cloud_config,
            cluster_name=args.cluster_name,
            configure_cloud_routes=args.configure_cloud_routes,
            allow_untagged_cloud=args.allow_untagged_cloud,
            controllers=args.controllers,
            cluster_cidr=args.cluster_cidr,
            node_status_update_frequency=args.node_status_update_frequency,
            node_monitor_period=args.node_monitor_period,
            route_reconciliation_period=args.route_reconciliation_period,
            concurrent_service_syncs=args.concurrent_service_syncs,
            leader_elect=args.leader_elect,
            bind_address=args.bind_address,
            port=args.port,
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
        )


class KubeconfigClientBuilder:
    """Clients for the provider, from the component's kubeconfig; closed with the component."""

    def __init__(self, kubeconfig: Path) -> None:
        self._kubeconfig = kubeconfig
        self._clients: list[Client] = []

    def client(self, name: str) -> Client:
        from kube.client.rest import Client

        built = Client.from_kubeconfig(
            self._kubeconfig, user_agent=f"kubelab-cloud-controller-manager/{name}"
        )
        self._clients.append(built)
        return built

    async def close(self) -> None:
        for built in self._clients:
            await built.close()


async def run_cloud_controller_manager(
    options: CloudControllerManagerOptions, stop: asyncio.Event
) -> int:
    """Run the enabled cloud controllers until ``stop`` is set (0) or the lease is lost (1)."""
    from controlplane.cloud.context import CapabilityUnsupported, CloudContext, CloudOptions
    from controlplane.cloud.controllers import CONTROLLERS
    from controlplane.cloud.registry import CloudProviderError, init_cloud_provider
    from controlplane.controllers.context import ControllerContext, ControllerOptions
    from controlplane.controllers.manager import (
        Manager,
        UnknownControllerError,
        enabled,
        run_controllers,
        run_manager,
    )
    from kube.client.rest import Client
    from kube.clock import RealClock

    try:
        names = enabled(options.controllers, list(CONTROLLERS))
        cloud = init_cloud_provider(options.cloud_provider, options.cloud_config)
    except (UnknownControllerError, CloudProviderError) as error:
        raise SystemExit(f"kubelab cloud-controller-manager: {error}") from None
    if not cloud.has_cluster_id():
        if not options.allow_untagged_cloud:
            raise SystemExit(
                "kubelab cloud-controller-manager: no ClusterID found; a ClusterID is required "
                "for the cloud provider to function properly (--allow-untagged-cloud bypasses "
                "this check)"
            )
        log.warning("the cloud has no ClusterID; running untagged (--allow-untagged-cloud)")
    clock = RealClock()
    client = Client.from_kubeconfig(
        options.kubeconfig,
        user_agent="kubelab-cloud-controller-manager",
        qps=options.qps,
        burst=options.burst,
    )
    builder = KubeconfigClientBuilder(options.kubeconfig)
    cloud_ctx = CloudContext(
        cloud=cloud,
        options=CloudOptions(
            cluster_name=options.cluster_name,
            configure_cloud_routes=options.configure_cloud_routes,
            node_status_update_frequency=options.node_status_update_frequency,
            node_monitor_period=options.node_monitor_period,
            route_reconciliation_period=options.route_reconciliation_period,
        ),
    )
    manager = Manager(
        name="cloud-controller-manager",
        event_component="cloud-controller-manager",
        lease=LEASE_NAME,
        leader_elect=options.leader_elect,
        bind_address=options.bind_address,
        port=options.port,
    )

    async def controllers(ctx: ControllerContext) -> None:
        cloud_stop = asyncio.Event()
        cloud.initialize(builder, cloud_stop)
        built: dict[str, Controller] = {}
        for name in names:
            try:
                built[name] = CONTROLLERS[name](ctx, cloud_ctx)
            except CapabilityUnsupported as reason:
                log.warning("%s controller not started: %s", name, reason)
        try:
            await run_controllers(
                ctx, {name: _prebuilt(c) for name, c in built.items()}, list(built)
            )
        finally:
            cloud_stop.set()

    async with client:
        try:
            return await run_manager(
                manager,
                client,
                clock,
                ControllerOptions(
                    cluster_cidr=options.cluster_cidr,
                    concurrent_syncs={"service": options.concurrent_service_syncs},
                ),
                controllers,
                lambda port: (
                    f"kubelab cloud-controller-manager: provider "
                    f"{cloud.provider_name()}, cluster {options.cluster_name}; serving health on "
                    f"http://{options.bind_address}:{port}"
                ),
                stop,
            )
        finally:
            await builder.close()


def _prebuilt(controller: Controller) -> ControllerFactory:
    return lambda _ctx: controller


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)
    return lambda args: component.run(
        lambda stop: run_cloud_controller_manager(
            CloudControllerManagerOptions.from_args(args), stop
        )
    )
