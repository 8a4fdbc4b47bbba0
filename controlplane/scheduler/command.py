"""``kubelab scheduler``: the scheduler process, and ``kubelab scheduler explain``.

The process serves plain HTTP on ``--bind-address:--port`` (upstream serves HTTPS on 10259
behind delegated authentication, which arrives with the security issue): ``/healthz``,
``/readyz`` (informer caches synced, leading or standing by), ``/metrics`` (with
``leader_election_master_status``),
and ``/debug/explain/NAMESPACE/NAME`` with the latest decision for a pod.
``explain`` fetches that and prints it as tables.

With ``--leader-elect`` only the holder of the ``kube-system/kube-scheduler`` Lease schedules;
a leader that cannot renew stops at once and the process exits with status 1, as upstream's
does, so a supervisor restarts it as a standby.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kube import component

if TYPE_CHECKING:
    from aiohttp import web

    from controlplane.scheduler.config import KubeSchedulerConfiguration
    from controlplane.scheduler.scheduler import Scheduler

DEFAULT_PORT = 10259


def add_flags(parser: argparse.ArgumentParser) -> None:
    component.add_client_flags(parser, qps=200.0, burst=400, required=False)
    parser.add_argument(
        "--config", type=Path, help="a KubeSchedulerConfiguration file (default: the defaults)"
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="schedule only while holding the kube-scheduler Lease "
        "(default: the configuration's leaderElection.leaderElect, true)",
    )
    component.add_serving_flags(parser, DEFAULT_PORT, "/healthz, /metrics and explain")
    parser.add_argument(
        "--explain-capacity",
        type=int,
        default=1000,
        help="how many pods' latest decisions to keep for explain (default: 1000)",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    explain = actions.add_parser("explain", help="why a pod was (or was not) placed where it was")
    explain.add_argument("pod", metavar="NAMESPACE/NAME")
    explain.add_argument(
        "--address",
        default=f"http://127.0.0.1:{DEFAULT_PORT}",
        help=f"the scheduler's address (default: http://127.0.0.1:{DEFAULT_PORT})",
    )
    explain.add_argument("--top", type=int, default=10, help="scored nodes to show (default: 10)")


def explain(args: argparse.Namespace) -> int:
    from controlplane.scheduler.explain import render

    namespace, sep, name = args.pod.partition("/")
    if not sep or not namespace or not name:
        print("kubelab scheduler explain: expected NAMESPACE/NAME", file=sys.stderr)
        return 2
    url = f"{args.address.rstrip('/')}/debug/explain/{namespace}/{name}"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            doc = json.load(response)
    except urllib.error.HTTPError as error:
        print(f"kubelab scheduler explain: {error.read().decode().strip()}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"kubelab scheduler explain: cannot reach {url}: {error}", file=sys.stderr)
        return 1
    print(render(doc, args.top), end="")
    return 0


def health_app(scheduler: Scheduler, leading: Callable[[], bool]) -> web.Application:
    """/healthz, /readyz, /metrics (with ``leader_election_master_status``) and explain."""
    from aiohttp import web

    from controlplane.scheduler.explain import to_json

    leader = scheduler.metrics.gauge(
        "leader_election_master_status",
        "1 while this instance holds the lease it competes for (or runs without one).",
        ("name",),
    )

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if scheduler.synced:
            return web.Response(text="ok")
        return web.Response(status=503, text="informer caches not synced yet")

    async def metrics(_: web.Request) -> web.Response:
        scheduler.update_pending_gauge()
        leader.set("kube-scheduler", value=1 if leading() else 0)
        return web.Response(
            text=scheduler.metrics.render(), content_type="text/plain", charset="utf-8"
        )

    async def explain_pod(request: web.Request) -> web.Response:
        key = f"{request.match_info['namespace']}/{request.match_info['name']}"
        decision = scheduler.decisions.get(key)
        if decision is None:
            return web.Response(status=404, text=f"no recent scheduling decision for pod {key}")
        return web.json_response(to_json(decision))

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/debug/explain/{namespace}/{name}", explain_pod)
    return app


def load_config(path: Path | None) -> KubeSchedulerConfiguration:
    from controlplane.scheduler.config import ConfigError, KubeSchedulerConfiguration, load

    if path is None:
        return KubeSchedulerConfiguration()
    try:
        return load(path.read_bytes())
    except OSError as error:
        raise SystemExit(f"kubelab scheduler: cannot read {path}: {error.strerror}") from None
    except ConfigError as error:
        raise SystemExit(f"kubelab scheduler: {path}: {error}") from None


@dataclass(frozen=True)
class SchedulerOptions:
    """How to run the scheduler, whichever command starts it."""

    kubeconfig: Path
    config: Path | None = None
    leader_elect: bool | None = None
    bind_address: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    explain_capacity: int = 1000
    qps: float = 200.0
    burst: int = 400

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SchedulerOptions:
        return cls(
            kubeconfig=args.kubeconfig,
            config=args.config,
            leader_elect=args.leader_elect,
            bind_address=args.bind_address,
            port=args.port,
            explain_capacity=args.explain_capacity,
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
        )


async def run_scheduler(options: SchedulerOptions, stop: asyncio.Event) -> int:
    """Schedule until ``stop`` is set (0) or the leader lease is lost (1)."""
    from controlplane.scheduler.config import DEFAULT_SCHEDULER_NAME
    from controlplane.scheduler.scheduler import DecisionLog, Scheduler
    from kube.client.events import SeriesEventRecorder
    from kube.client.informers import SharedInformerFactory
    from kube.client.leaderelection import (
        LeaderElectionConfig,
        LeaderElector,
        leader_identity,
    )
    from kube.client.rest import Client
    from kube.clock import RealClock

    config = load_config(options.config)
    election = config.leader_election
    leader_elect = election.leader_elect if options.leader_elect is None else options.leader_elect
    clock = RealClock()
    identity = leader_identity()
    client = Client.from_kubeconfig(
        options.kubeconfig, user_agent="kubelab-scheduler", qps=options.qps, burst=options.burst
    )
    async with client:
        # One recorder for every profile, reporting as the default one (upstream has one per
        # profile, each reporting under its scheduler name).
        recorder = SeriesEventRecorder(
            client,
            DEFAULT_SCHEDULER_NAME,
            f"{DEFAULT_SCHEDULER_NAME}-{socket.gethostname()}",
            clock=clock,
        )
        informers = SharedInformerFactory(client, clock=clock)
        scheduler = Scheduler(
            client,
            informers,
            config,
            recorder,
            clock,
            decisions=DecisionLog(options.explain_capacity),
        )
        elector = (
            LeaderElector(
                client,
                LeaderElectionConfig(
                    lock_name=election.resource_name,
                    lock_namespace=election.resource_namespace,
                    identity=identity,
                    lease_duration=election.lease_duration,
                    renew_deadline=election.renew_deadline,
                    retry_period=election.retry_period,
                ),
                clock,
            )
            if leader_elect
            else None
        )
        leading = (lambda: elector.is_leader) if elector is not None else (lambda: True)
        runner, port = await component.serve_health(
            health_app(scheduler, leading), options.bind_address, options.port
        )
        print(
            f"kubelab scheduler: serving health on http://{options.bind_address}:{port}",
            flush=True,
        )
        await recorder.start()

        async def sync_then_schedule() -> None:
            await scheduler.sync()
            # The synced caches (every node and pod) live as long as the process.
            component.tune_garbage_collector()
            await (elector.run(scheduler.run) if elector is not None else scheduler.run())

        try:
            return await component.until_stopped(sync_then_schedule(), stop, "scheduler")
        finally:
            await informers.shutdown()
            await recorder.close()
            await runner.cleanup()


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)

    def run(args: argparse.Namespace) -> int:
        if args.action == "explain":
            return explain(args)
        if args.kubeconfig is None:
            parser.error("the following arguments are required: --kubeconfig")
        return component.run(lambda stop: run_scheduler(SchedulerOptions.from_args(args), stop))

    return run
