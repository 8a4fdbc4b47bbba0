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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kubelab import component

if TYPE_CHECKING:
    from aiohttp import web

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


def health_app(
    leading: Callable[[], bool], synced: Callable[[], bool], lease: str = "kube-controller-manager"
) -> web.Application:
    from aiohttp import web

    from kubelab.metrics import Registry

    metrics = Registry()
    leader = metrics.gauge(
        "leader_election_master_status",
        "1 while this instance holds the lease it competes for (or runs without one).",
        ("name",),
    )

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if synced():
            return web.Response(text="ok")
        return web.Response(status=503, text="informer caches not synced yet")

    async def render(_: web.Request) -> web.Response:
        leader.set(lease, value=1 if leading() else 0)
        return web.Response(text=metrics.render(), content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", render)
    return app


async def run_controller_manager(options: ControllerManagerOptions, stop: asyncio.Event) -> int:
    """Run the enabled controllers until ``stop`` is set (0) or the lease is lost (1)."""
    from controlplane.controllers.clientbuilder import ServiceAccountClients
    from controlplane.controllers.context import ControllerContext, ControllerOptions
    from controlplane.controllers.manager import UnknownControllerError, enabled, run_controllers
    from controlplane.controllers.registry import CONTROLLERS, OFF_BY_DEFAULT, SERVICE_ACCOUNTS
    from kubelab.client.events import EventRecorder
    from kubelab.client.informers import SharedInformerFactory
    from kubelab.client.leaderelection import (
        LeaderElectionConfig,
        LeaderElector,
        leader_identity,
    )
    from kubelab.client.rest import Client
    from kubelab.clock import RealClock

    try:
        names = enabled(options.controllers, list(CONTROLLERS), OFF_BY_DEFAULT)
    except UnknownControllerError as error:
        raise SystemExit(f"kubelab controller-manager: {error}") from None
    clock = RealClock()
    identity = leader_identity()
    client = Client.from_kubeconfig(
        options.kubeconfig,
        user_agent="kubelab-controller-manager",
        qps=options.qps,
        burst=options.burst,
    )
    async with client:
        recorder = EventRecorder(client, component="kube-controller-manager", clock=clock)
        informers = SharedInformerFactory(client, clock=clock)
        ctx = ControllerContext(
            client=client,
            informers=informers,
            recorder=recorder,
            clock=clock,
            options=ControllerOptions(
                cluster_cidr=options.cluster_cidr,
                node_cidr_mask_size=options.node_cidr_mask_size,
                service_cluster_ip_range=options.service_cluster_ip_range,
                node_monitor_grace_period=options.node_monitor_grace_period,
                cluster_signing_cert_file=options.cluster_signing_cert_file,
                cluster_signing_key_file=options.cluster_signing_key_file,
                cluster_signing_duration=options.cluster_signing_duration,
                approve_kubelet_serving=options.approve_kubelet_serving,
            ),
        )
        accounts = ServiceAccountClients(client, clock, qps=options.qps, burst=options.burst)
        elector = (
            LeaderElector(
                client,
                LeaderElectionConfig(lock_name="kube-controller-manager", identity=identity),
                clock,
            )
            if options.leader_elect
            else None
        )
        synced = asyncio.Event()

        async def controllers() -> None:
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
            task = asyncio.create_task(run_controllers(ctx, CONTROLLERS, names, contexts))
            await informers.wait_for_cache_sync()
            synced.set()
            await task

        leading = (lambda: elector.is_leader) if elector is not None else (lambda: True)
        runner, port = await component.serve_health(
            health_app(leading, synced.is_set), options.bind_address, options.port
        )
        print(
            f"kubelab controller-manager: {len(names)} controllers; serving health on "
            f"http://{options.bind_address}:{port}",
            flush=True,
        )
        await recorder.start()
        work = elector.run(controllers) if elector is not None else controllers()
        try:
            return await component.until_stopped(work, stop, "controller-manager")
        finally:
            await informers.shutdown()
            await accounts.close()
            await recorder.close()
            await runner.cleanup()


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)
    return lambda args: component.run(
        lambda stop: run_controller_manager(ControllerManagerOptions.from_args(args), stop)
    )
