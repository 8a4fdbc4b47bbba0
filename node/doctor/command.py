"""``kubelab doctor [NODE]``: run every check on this node and say what is wrong.

Run it on the node (in a lab: ``kubelab lab doctor NODE`` runs it inside the node's network
namespace), as root, with the node's own kubeconfig (``--kubeconfig``, the kubelet's) and the
paths its components were started with; each flag is the kubelet's (or containerd's,
kube-proxy's) and defaults as upstream's does.  It prints a table (``-o json``: the same as
JSON), one row per check: pass, warn or fail, the evidence, and for the others the fix.
``--fix`` applies the fixes that are safe (see :mod:`node.doctor.check`), then checks again
and prints what is left.  Exit status 1 when a check fails, 2 on bad input (a kubeconfig that
does not load).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import sys
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kube.client import kubeconfig
from kube.client.rest import Client
from kube.table import aligned
from node.doctor import cluster, network, system
from node.doctor.access import ApiCluster, SystemHost
from node.doctor.check import Check, Config, Context, Result, Status, diagnose, repair

CHECKS: tuple[Check, ...] = system.CHECKS + network.CHECKS + cluster.CHECKS
DEFAULT_KUBECONFIG = Path("/etc/kubernetes/kubelet.conf")
"""Where kubeadm puts the kubelet's kubeconfig."""


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part for part in text.split(",") if part)


def _endpoint(text: str) -> Path:
    if not text.startswith("unix://"):
        raise argparse.ArgumentTypeError(f"expected unix:///PATH, got {text!r}")
    return Path(text.removeprefix("unix://"))


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    defaults = Config(node_name="", kubeconfig=DEFAULT_KUBECONFIG)
    parser.add_argument(
        "node",
        nargs="?",
        default=socket.gethostname().lower(),
        metavar="NODE",
        help="this node's name (default: the host name, as the kubelet's --node-name)",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=defaults.kubeconfig,
        help=f"the node's (the kubelet's) kubeconfig (default: {defaults.kubeconfig})",
    )
    parser.add_argument(
        "--proxy-kubeconfig",
        type=Path,
        help="kube-proxy's kubeconfig, to read every Node (a kubelet may read only its own)",
    )
    parser.add_argument("--cert-dir", type=Path, default=defaults.cert_dir)
    parser.add_argument("--cni-conf-dir", type=Path, default=defaults.cni_conf_dir)
    parser.add_argument("--cni-bin-dir", type=Path, default=defaults.cni_bin_dir)
    parser.add_argument("--containerd-config", type=Path, default=defaults.containerd_config)
    parser.add_argument(
        "--container-runtime-endpoint",
        type=_endpoint,
        default=defaults.runtime_socket,
        help=f"unix:///PATH (default: unix://{defaults.runtime_socket})",
    )
    parser.add_argument("--resolv-conf", type=Path, default=defaults.resolv_conf)
    parser.add_argument("--cluster-dns", type=_csv, default=(), help="DNS server IPs for pods")
    parser.add_argument("--proxy-healthz", default=defaults.proxy_healthz, help="kube-proxy's")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--fix", action="store_true", help="apply the fixes that are safe")
    return run


def run(args: argparse.Namespace) -> int:
    try:
        client_config = kubeconfig.load(args.kubeconfig)
        proxy_config = kubeconfig.load(args.proxy_kubeconfig) if args.proxy_kubeconfig else None
    except kubeconfig.KubeconfigError as error:
        print(f"kubelab doctor: {error}", file=sys.stderr)
        return 2
    config = Config(
        node_name=args.node,
        kubeconfig=args.kubeconfig,
        cert_dir=args.cert_dir,
        cni_conf_dir=args.cni_conf_dir,
        cni_bin_dir=args.cni_bin_dir,
        containerd_config=args.containerd_config,
        runtime_socket=args.container_runtime_endpoint,
        resolv_conf=args.resolv_conf,
        cluster_dns=args.cluster_dns,
        proxy_healthz=args.proxy_healthz,
    )
    certificates = tuple(
        (f"{args.kubeconfig} {what}", pem.decode(errors="replace"))
        for what, pem in (("CA", client_config.ca_pem), ("client", client_config.cert_pem))
        if pem
    )

    async def main() -> tuple[list[Result], list[tuple[Result, str | None]]]:
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(_client(client_config))
            proxy_client = (
                await stack.enter_async_context(_client(proxy_config)) if proxy_config else None
            )
            context = Context(
                SystemHost(),
                ApiCluster(client, proxy_client),
                config,
                api_host=_address(client_config.server),
                kubeconfig_certificates=certificates,
            )
            results = await diagnose(CHECKS, context)
            if not args.fix:
                return results, []
            fixed = repair(results)
            return (await diagnose(CHECKS, context) if fixed else results), fixed

    results, fixed = asyncio.run(main())
    if args.output == "json":
        print(json.dumps(as_json(args.node, results, fixed), indent=2))
    else:
        print("\n".join(render(args.node, results, fixed)))
    return 1 if any(r.finding.status is Status.FAIL for r in results) else 0


def _client(config: kubeconfig.ClientConfig) -> Client:
    return Client(config, user_agent="kubelab-doctor", max_retries=1)


def _address(server: str) -> str:
    """The API server's IP address from its URL (resolved if a name; "" if it does not)."""
    host = urllib.parse.urlsplit(server).hostname or ""
    try:
        return socket.gethostbyname(host)
    except OSError:
        return ""


def render(
    node: str, results: Sequence[Result], fixed: Sequence[tuple[Result, str | None]]
) -> list[str]:
    lines = [
        f"fixed {r.check.name}" if error is None else f"could not fix {r.check.name}: {error}"
        for r, error in fixed
    ]
    rows: list[tuple[str, str, str]] = [("CHECK", "STATUS", "EVIDENCE")]
    for result in results:
        finding = result.finding
        rows.append((result.check.name, finding.status.upper(), finding.evidence))
        if finding.status is not Status.PASS and finding.fix:
            safe = " (safe: --fix applies it)" if finding.repair is not None else ""
            rows.append(("", "", f"fix: {finding.fix}{safe}"))
    counts = {s: sum(r.finding.status is s for r in results) for s in Status}
    summary = (
        f"node {node}: {counts[Status.PASS]} passed, {counts[Status.WARN]} warnings, "
        f"{counts[Status.FAIL]} failed"
    )
    return [*lines, *aligned(rows), summary]


def as_json(
    node: str, results: Sequence[Result], fixed: Sequence[tuple[Result, str | None]]
) -> dict[str, Any]:
    return {
        "node": node,
        "fixed": [{"name": r.check.name, "error": error} for r, error in fixed],
        "checks": [
            {
                "name": r.check.name,
                "reads": r.check.reads,
                "status": str(r.finding.status),
                "evidence": r.finding.evidence,
                "fix": r.finding.fix,
                "safeFix": r.finding.repair is not None,
            }
            for r in results
        ],
    }
