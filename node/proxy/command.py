"""``kubelab proxy``: the kube-proxy of one node, in the node's network namespace.

Flags are upstream's: ``--kubeconfig``, ``--hostname-override``, ``--proxy-mode``,
``--cluster-cidr``, ``--nodeport-addresses``, ``--masquerade-all``, ``--sync-period``,
``--min-sync-period``, ``--healthz-bind-address``, ``--metrics-bind-address``, ``--udp-timeout``
(userspace mode: how long an idle UDP association is kept); and ``--iptables-backend``
chooses how rules reach the kernel: ``restore`` (iptables-restore on whichever of nft and
legacy the node uses) or ``libiptc`` (python-iptables, which writes the legacy tables only).
``--proxy-mode userspace`` proxies in this process (asyncio TCP and UDP relays, iptables
REDIRECT to them; :mod:`node.proxy.userspace`); ``--proxy-mode nftables`` writes upstream's
``ip kube-proxy`` table with ``nft`` (:mod:`node.proxy.nftproxier`).  At start each mode
removes the other modes' rules, as upstream's kube-proxy does (:mod:`node.proxy.cleanup`).
Syncs that change a Service's rules are told as Events on it (:mod:`node.proxy.base`).
The process must run inside the node's network namespace: iptables and nft commands refuse to
run anywhere but in a namespace named under /run/netns.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import ipaddress
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kube import component

if TYPE_CHECKING:
    from kube.clock import Clock
    from node.iptables import Iptables
    from node.nftables import Nftables
    from node.proxy.base import Proxier
    from node.proxy.health import ProxyMetrics, ServiceHealthServer

MODES = ("iptables", "nftables", "userspace")
BACKENDS = ("restore", "libiptc")
DEFAULT_HEALTHZ = "0.0.0.0:10256"
DEFAULT_METRICS = "127.0.0.1:10249"


def _cidr(text: str) -> str:
    try:
        return str(ipaddress.IPv4Network(text, strict=False))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an IPv4 CIDR, got {text!r}") from None


def _cidrs(text: str) -> list[str]:
    return [_cidr(item.strip()) for item in text.split(",") if item.strip()]


def add_flags(parser: argparse.ArgumentParser) -> None:
    component.add_client_flags(parser)
    parser.add_argument(
        "--hostname-override",
        default="",
        help="the name of this node (default: the host name)",
    )
    parser.add_argument(
        "--proxy-mode",
        choices=MODES,
        default="iptables",
        help="iptables (default); nftables: upstream's nftables mode, one table "
        "(ip kube-proxy) written with nft; or userspace: a TCP/UDP proxy in this process that "
        "iptables REDIRECTs service traffic to (endpoints see the node's address)",
    )
    parser.add_argument(
        "--iptables-backend",
        choices=BACKENDS,
        default="restore",
        help="restore: iptables-restore on the node's backend (nft or legacy, detected); "
        "libiptc: python-iptables, which writes the LEGACY tables only (default: restore)",
    )
    parser.add_argument(
        "--cluster-cidr",
        type=_cidr,
        default=None,
        help="pod CIDR of the cluster: traffic to a cluster IP from outside it is masqueraded",
    )
    parser.add_argument(
        "--nodeport-addresses",
        type=_cidrs,
        default=None,
        help="comma-separated CIDRs: NodePorts answer only on local addresses inside them "
        "(default: every local address, 127.0.0.1 included)",
    )
    parser.add_argument(
        "--masquerade-all", action="store_true", help="masquerade all traffic to cluster IPs"
    )
    parser.add_argument(
        "--sync-period",
        type=component.duration,
        default=30.0,
        help="how often the rules are rewritten whole (default: 30s)",
    )
    parser.add_argument(
        "--min-sync-period",
        type=component.duration,
        default=1.0,
        help="the least time between syncs; changes in between are coalesced (default: 1s)",
    )
    parser.add_argument(
        "--udp-timeout",
        type=component.duration,
        default=0.25,
        help="userspace mode: how long an idle UDP association is kept (default: 250ms)",
    )
    parser.add_argument(
        "--healthz-bind-address",
        type=component.address,
        default=component.address(DEFAULT_HEALTHZ),
        help=f"IP:PORT of /healthz (default: {DEFAULT_HEALTHZ}; port 0: any free port)",
    )
    parser.add_argument(
        "--metrics-bind-address",
        type=component.address,
        default=component.address(DEFAULT_METRICS),
        help=f"IP:PORT of /metrics (default: {DEFAULT_METRICS}; port 0: any free port)",
    )


def make_iptables(backend: str) -> Iptables:
    """The iptables backend named by ``--iptables-backend``; SystemExit(2) if not built."""
    if backend == "restore":
        from node.iptables import RestoreIptables

        return RestoreIptables()
    try:
        module = importlib.import_module("node.proxy.libiptc")
    except ImportError as error:
        print(
            f"kubelab proxy: --iptables-backend libiptc is not built yet ({error})",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    iptables: Iptables = module.LibiptcIptables()
    return iptables


def make_proxier(
    args: argparse.Namespace,
    iptables: Iptables,
    node_name: str,
    clock: Clock,
    metrics: ProxyMetrics,
    service_health: ServiceHealthServer,
) -> Proxier:
    """The proxier of ``--proxy-mode``."""
    if args.proxy_mode == "userspace":
        from node.proxy.userspace import UserspaceProxier

        return UserspaceProxier(
            iptables,
            node_name,
            clock,
            nodeport_cidrs=args.nodeport_addresses,
            sync_period=args.sync_period,
            min_sync_period=args.min_sync_period,
            udp_idle_timeout=args.udp_timeout,
            metrics=metrics,
        )
    from node.proxy.nftproxier import NftablesProxier
    from node.proxy.proxier import IptablesProxier

    options: dict[str, Any] = {
        "cluster_cidr": args.cluster_cidr,
        "masquerade_all": args.masquerade_all,
        "nodeport_cidrs": args.nodeport_addresses,
        "sync_period": args.sync_period,
        "min_sync_period": args.min_sync_period,
        "metrics": metrics,
        "service_health": service_health,
    }
    if args.proxy_mode == "nftables":
        from node.nftables import SubprocessNftables

        return NftablesProxier(SubprocessNftables(), node_name, clock, **options)
    return IptablesProxier(iptables, node_name, clock, **options)


def cleanup_other_modes(mode: str, iptables: Iptables, nftables: Nftables) -> None:
    """Remove what the modes other than ``mode`` left on the node (see node.proxy.cleanup)."""
    from node.proxy.cleanup import cleanup_iptables, cleanup_nftables

    if mode == "nftables":
        cleanup_iptables(iptables)
    else:
        cleanup_nftables(nftables)


async def run_proxy(args: argparse.Namespace, iptables: Iptables, stop: asyncio.Event) -> int:
    from kube.client.events import EventRecorder
    from kube.client.informers import SharedInformerFactory
    from kube.clock import RealClock
    from node.nftables import SubprocessNftables
    from node.proxy.health import ProxyMetrics, ServiceHealthServer, health_app, metrics_app

    clock = RealClock()
    node_name = args.hostname_override or socket.gethostname()
    metrics = ProxyMetrics(clock)
    service_health = ServiceHealthServer()
    proxier = make_proxier(args, iptables, node_name, clock, metrics, service_health)
    await asyncio.to_thread(cleanup_other_modes, args.proxy_mode, iptables, SubprocessNftables())
    async with (
        component.client_from_flags(args, "kubelab-proxy") as client,
        EventRecorder(client, "kube-proxy", host=node_name, clock=clock) as recorder,
    ):
        informers = SharedInformerFactory(client, clock=clock)
        proxier.bind(informers, recorder)
        health, health_port = await component.serve_health(
            health_app(metrics, 2 * args.sync_period), *args.healthz_bind_address
        )
        served, metrics_port = await component.serve_health(
            metrics_app(metrics), *args.metrics_bind_address
        )
        try:
            informers.start()
            await informers.wait_for_cache_sync()
            writer = (
                "nft"
                if args.proxy_mode == "nftables"
                else f"iptables backend {args.iptables_backend} ({iptables.backend})"
            )
            print(
                f"kubelab proxy: node {node_name}, mode {args.proxy_mode}, {writer}; "
                f"/healthz on port {health_port}, /metrics on port {metrics_port}",
                flush=True,
            )
            return await component.until_stopped(proxier.run(), stop, "proxy")
        finally:
            await informers.shutdown()
            await proxier.close()
            await service_health.close()
            await served.cleanup()
            await health.cleanup()


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)

    def run(args: argparse.Namespace) -> int:
        iptables = make_iptables(args.iptables_backend)
        return component.run(lambda stop: run_proxy(args, iptables, stop))

    return run
