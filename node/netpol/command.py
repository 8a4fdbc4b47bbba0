"""``kubelab network-policy``: the NetworkPolicy agent of one node, in its network namespace.

Flags: ``--kubeconfig`` (and the other client flags), ``--hostname-override`` (the node whose
pods are enforced), ``--sync-period``, ``--min-sync-period`` and ``--healthz-bind-address``
(``/healthz``: 200 while the last sync succeeded).  As upstream's policy agents
(kube-network-policies, kube-router), it runs on every node beside kube-proxy and programs
that node's own nftables table; like ``kubelab proxy`` it must run inside the node's network
namespace (``nft`` refuses to run anywhere but in a namespace named under /run/netns).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from kube import component

if TYPE_CHECKING:
    from aiohttp import web

    from node.netpol.agent import NetworkPolicyAgent
    from node.nftables import Nftables

DEFAULT_HEALTHZ = "127.0.0.1:9080"
"""As kube-network-policies serves its metrics (on 9080)."""


def add_flags(parser: argparse.ArgumentParser) -> None:
    component.add_client_flags(parser)
    parser.add_argument(
        "--hostname-override",
        default="",
        help="the name of this node, whose pods are enforced (default: the host name)",
    )
    parser.add_argument(
        "--sync-period",
        type=component.duration,
        default=30.0,
        help="how often the table is rewritten even without changes (default: 30s)",
    )
    parser.add_argument(
        "--min-sync-period",
        type=component.duration,
        default=0.1,
        help="the least time between syncs; changes in between are coalesced (default: 100ms)",
    )
    parser.add_argument(
        "--healthz-bind-address",
        type=component.address,
        default=component.address(DEFAULT_HEALTHZ),
        help=f"IP:PORT of /healthz (default: {DEFAULT_HEALTHZ}; port 0: any free port)",
    )


def health_app(agent: NetworkPolicyAgent) -> web.Application:
    """``/healthz``: 200 while the agent's last sync succeeded, else 503."""
    from aiohttp import web

    async def healthz(_: web.Request) -> web.Response:
        body = f'{{"healthy": {str(agent.healthy).lower()}, "syncs": {agent.syncs}}}\n'
        return web.Response(
            status=200 if agent.healthy else 503, text=body, content_type="application/json"
        )

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    return app


async def run_agent(args: argparse.Namespace, nftables: Nftables, stop: asyncio.Event) -> int:
    from kube.client.informers import SharedInformerFactory
    from kube.clock import RealClock
    from node.netpol.agent import NetworkPolicyAgent

    clock = RealClock()
    node_name = args.hostname_override or socket.gethostname()
    agent = NetworkPolicyAgent(
        nftables,
        node_name,
        clock,
        min_sync_period=args.min_sync_period,
        sync_period=args.sync_period,
    )
    async with component.client_from_flags(args, "kubelab-network-policy") as client:
        informers = SharedInformerFactory(client, clock=clock)
        agent.bind(informers)
        health, port = await component.serve_health(health_app(agent), *args.healthz_bind_address)
        try:
            informers.start()
            await informers.wait_for_cache_sync()
            print(f"kubelab network-policy: node {node_name}; /healthz on port {port}", flush=True)
            return await component.until_stopped(agent.run(), stop, "network-policy")
        finally:
            await informers.shutdown()
            await health.cleanup()


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)

    def run(args: argparse.Namespace) -> int:
        from node.netpol.compiler import FAMILY, TABLE
        from node.nftables import SubprocessNftables

        nftables = SubprocessNftables(FAMILY, TABLE)
        return component.run(lambda stop: run_agent(args, nftables, stop))

    return run
