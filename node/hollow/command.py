"""``kubelab hollow-nodes``: a fleet of hollow nodes in one process.

With ``--kubelet-address`` every node also serves its kubelet API there (node.hollow.kubelets),
so the metrics-server scrapes the fleet's synthetic usage (node.hollow.usage)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kube import component
from kube.api.quantity import Quantity, QuantityError
from node.hollow.usage import USAGE_ANNOTATION, Usage, UsageProfile

if TYPE_CHECKING:
    from kube.pki import KeyPair


def _quantity(text: str) -> str:
    try:
        Quantity.parse(text)
    except QuantityError as error:
        raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None
    return text


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _taint(text: str) -> object:
    from node.hollow.nodes import TaintRule

    try:
        return TaintRule.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _csv(text: str) -> list[str]:
    items = [item for item in text.split(",") if item]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def _usage(text: str) -> Usage:
    try:
        return Usage.parse(dict(_pair(item) for item in _csv(text)))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None


def add_flags(parser: argparse.ArgumentParser) -> None:
    component.add_client_flags(parser, qps=500.0, burst=1000)
    parser.add_argument("--count", type=int, required=True, help="how many nodes to run")
    parser.add_argument("--name-prefix", default="hollow-node-", help="node names are PREFIX<i>")
    parser.add_argument("--cpu", type=_quantity, default="4", help="CPU per node (default: 4)")
    parser.add_argument(
        "--memory", type=_quantity, default="16Gi", help="memory per node (default: 16Gi)"
    )
    parser.add_argument("--pods", type=int, default=110, help="pods per node (default: 110)")
    parser.add_argument(
        "--zones",
        type=_csv,
        default=["zone-a", "zone-b", "zone-c"],
        help="zones, assigned round-robin (default: zone-a,zone-b,zone-c)",
    )
    parser.add_argument(
        "--instance-types",
        type=_csv,
        default=["hollow.medium"],
        help="instance types, assigned round-robin",
    )
    parser.add_argument(
        "--taint",
        type=_taint,
        action="append",
        default=[],
        help="key[=value]:Effect[@fraction]: taint that fraction of the nodes (repeatable)",
    )
    parser.add_argument(
        "--label", type=_pair, action="append", default=[], help="KEY=VALUE on every node"
    )
    parser.add_argument(
        "--image",
        type=_pair,
        action="append",
        default=[],
        help="NAME=BYTES: an image every node reports as present (repeatable)",
    )
    parser.add_argument(
        "--lease-renew-interval",
        type=component.duration,
        default=10.0,
        help="how often each node renews its Lease (default: 10s, the kubelet's)",
    )
    parser.add_argument(
        "--workers", type=int, default=8, help="pods processed concurrently (default: 8)"
    )
    parser.add_argument(
        "--kubelet-address",
        default="",
        help="serve each node's kubelet API (/metrics/resource, /stats/summary, /pods) on this "
        "IP, at a port per node, and report it as the nodes' InternalIP (default: serve none)",
    )
    parser.add_argument(
        "--tls-cert-file",
        type=Path,
        help="the kubelet servers' certificate (with --kubelet-address; default: self-signed)",
    )
    parser.add_argument("--tls-private-key-file", type=Path, help="its private key")
    parser.add_argument(
        "--client-ca-file",
        type=Path,
        help="CA of the client certificates the kubelet servers accept (with --kubelet-address)",
    )
    parser.add_argument(
        "--container-usage",
        type=_usage,
        default=UsageProfile().container,
        help="CPU and memory each container uses unless its pod's annotation "
        f"{USAGE_ANNOTATION} says otherwise (default: cpu=10m,memory=16Mi)",
    )
    parser.add_argument(
        "--node-usage",
        type=_usage,
        default=UsageProfile().node,
        help="CPU and memory each node uses besides its pods (default: cpu=100m,memory=512Mi)",
    )
    parser.add_argument(
        "--delete-on-exit",
        action="store_true",
        help="delete the nodes and their leases when stopped",
    )


def _certificate(args: argparse.Namespace) -> KeyPair:
    """The kubelet servers' certificate: the flags', else one self-signed for the address."""
    from kube.pki import CertificateAuthority, KeyPair

    if (args.tls_cert_file is None) != (args.tls_private_key_file is None):
        raise SystemExit(
            "kubelab hollow-nodes: --tls-cert-file and --tls-private-key-file go together"
        )
    if args.tls_cert_file is not None:
        return KeyPair(args.tls_cert_file.read_bytes(), args.tls_private_key_file.read_bytes())
    ca = CertificateAuthority.create("hollow-kubelet-ca")
    return ca.issue("hollow-kubelet", server=True, ip_addresses=[args.kubelet_address])


async def run_fleet(args: argparse.Namespace, stop: asyncio.Event) -> int:
    from kube.api.kinds.core_v1.node import Node
    from kube.client.informers import SharedInformerFactory
    from kube.clock import RealClock
    from node.hollow.kubelets import kubelet_servers
    from node.hollow.nodes import FleetSpec, NodeFleet
    from node.hollow.pods import HollowKubelet
    from node.kubelet.server import KubeletServer

    if args.count < 1:
        raise SystemExit("kubelab hollow-nodes: --count must be at least 1")
    if args.kubelet_address and args.client_ca_file is None:
        raise SystemExit("kubelab hollow-nodes: --kubelet-address needs --client-ca-file")
    clock = RealClock()
    spec = FleetSpec(
        count=args.count,
        name_prefix=args.name_prefix,
        cpu=args.cpu,
        memory=args.memory,
        pods=args.pods,
        zones=args.zones,
        instance_types=args.instance_types,
        taints=args.taint,
        labels=dict(args.label),
        images={name: int(size) for name, size in args.image},
    )
    profile = UsageProfile(container=args.container_usage, node=args.node_usage)
    servers: list[KubeletServer] = []
    async with component.client_from_flags(args, "kubelab-hollow-nodes") as client:
        informers = SharedInformerFactory(client, clock=clock)
        kubelet = HollowKubelet(client, informers, spec, clock, workers=args.workers)
        try:
            if args.kubelet_address:
                servers = kubelet_servers(
                    [spec.name(index) for index in range(spec.count)],
                    kubelet.pods,
                    client,
                    clock,
                    address=args.kubelet_address,
                    certificate=_certificate(args),
                    client_ca=args.client_ca_file,
                    profile=profile,
                )
                ports = tuple([await server.start() for server in servers])
                spec = dataclasses.replace(
                    spec, kubelet_address=args.kubelet_address, kubelet_ports=ports
                )
                kubelet.spec = spec
            fleet = NodeFleet(
                client,
                spec,
                clock,
                renew_interval=args.lease_renew_interval,
                nodes=informers.informer_for(Node).lister,
            )
            await fleet.register()
            informers.start()
            await informers.wait_for_cache_sync()
            component.tune_garbage_collector()
            print(f"kubelab hollow-nodes: {spec.count} nodes ready", flush=True)
            tasks = [
                asyncio.create_task(fleet.renew_forever()),
                asyncio.create_task(kubelet.run()),
            ]
            try:
                await stop.wait()
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                await informers.shutdown()
                if args.delete_on_exit:
                    await fleet.deregister()
        finally:
            for server in servers:
                await server.stop()
    return 0


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    add_flags(parser)
    return lambda args: component.run(lambda stop: run_fleet(args, stop))
