"""``kubelab lab``: a multi-node cluster in network namespaces on this machine.

A thin command (kind's shape): it parses flags, builds the inventory
(``kubelab.lab.topology.Lab``) and hands it to ``kubelab.lab.cluster``.  Subcommands:

- ``up [--name lab] [--workers 2] [--cni kubelab|reference] [--proxy-mode iptables]
  [--iptables-backend restore|libiptc] [--host-api-port 6443]``: one progress line per step,
  then how to use it;
- ``down``: stop and remove everything of the lab;
- ``status``: per node, each component's process and whether the Node is Ready;
- ``kubeconfig``: the path of the host's kubeconfig (server https://127.0.0.1:6443, or
  ``--host-api-port``);
- ``exec NODE -- CMD...``: run a command in a node's network namespace (``nsenter --net``);
- ``demo``: what ``make lab`` shows (``kubelab.lab.demo``);
- ``forward`` (hidden): the host forwarder process ``up`` starts.

Run as root.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from kubelab.lab.topology import (
    API_PORT,
    CNIS,
    IPTABLES_BACKENDS,
    PROXY_MODES,
    STORES,
    Lab,
    LabSpec,
    Role,
    SpecError,
    running_spec,
)


def _add_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default="lab", help="the lab's name (default: lab)")


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    commands = parser.add_subparsers(dest="lab_command", metavar="COMMAND", required=True)
    up = commands.add_parser("up", help="bring a lab up (tearing down a stale one first)")
    _add_name(up)
    up.add_argument("--workers", type=int, default=2, help="worker nodes (default: 2)")
    up.add_argument("--store", choices=STORES, default="sqlite")
    up.add_argument("--cni", choices=CNIS, default="kubelab", help="pod network plugin")
    up.add_argument("--proxy-mode", choices=PROXY_MODES, default="iptables")
    up.add_argument("--iptables-backend", choices=IPTABLES_BACKENDS, default="restore")
    up.add_argument(
        "--host-api-port",
        type=int,
        default=API_PORT,
        help=f"the host forwarder's port on 127.0.0.1 (default: {API_PORT})",
    )
    for name, text in (
        ("down", "stop and remove everything of a lab"),
        ("status", "each node's processes and Node condition"),
        ("kubeconfig", "print the path of the host's kubeconfig"),
        ("demo", "run the demo `make lab` shows: a spread Deployment behind two Services"),
    ):
        _add_name(commands.add_parser(name, help=text))
    exec_ = commands.add_parser("exec", help="run a command inside a node: exec NODE -- CMD...")
    _add_name(exec_)
    exec_.add_argument("node")
    exec_.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD...")
    forward = commands.add_parser("forward")  # hidden in spirit: started by `up`
    forward.add_argument("--netns", type=Path, required=True)
    forward.add_argument("--target", type=_address, required=True)
    forward.add_argument("--listen", type=_address, required=True)

    def run(args: argparse.Namespace) -> int:
        handler = {
            "up": _up,
            "down": _down,
            "status": _status,
            "kubeconfig": _kubeconfig,
            "exec": _exec,
            "demo": _demo,
            "forward": _forward,
        }[args.lab_command]
        try:
            return handler(args)
        except SpecError as error:
            print(f"kubelab lab: {error}", file=sys.stderr)
            return 2

    return run


def _lab(args: argparse.Namespace) -> Lab:
    """The lab ``up`` asks for, or (other commands) the one running under that name."""
    if args.lab_command != "up":
        from kubelab.lab.network import existing_namespaces

        return Lab(running_spec(args.name, existing_namespaces()))
    spec = LabSpec(
        name=args.name,
        workers=args.workers,
        store=args.store,
        cni=args.cni,
        proxy_mode=args.proxy_mode,
        iptables_backend=args.iptables_backend,
        host_api_port=args.host_api_port,
    )
    return Lab(spec)


def _root() -> None:
    if os.geteuid() != 0:
        raise SystemExit("kubelab lab: run as root (namespaces, mounts, cgroups)")


def _report(line: str) -> None:
    print(line, flush=True)


def _up(args: argparse.Namespace) -> int:
    from kubelab.lab import cluster

    _root()
    lab = _lab(args)
    try:
        took = asyncio.run(cluster.up(lab, _report))
    except cluster.LabError as error:
        print(f"kubelab lab up: {error}", file=sys.stderr)
        print(f"logs: {lab.log_dir}; remove with: kubelab lab down --name {lab.name}")
        return 1
    workers = ", ".join(w.name for w in lab.workers)
    print(
        f"\nlab {lab.name} is up in {took:.1f}s: controlplane, {workers}, client\n"
        f"  export KUBECONFIG={lab.host_kubeconfig}\n"
        f"  kubectl get nodes -o wide\n"
        f"  kubelab lab exec {lab.workers[0].name} -- iptables -t nat -S\n"
        f"  kubelab lab status --name {lab.name}; kubelab lab down --name {lab.name}\n"
        f"  logs: {lab.log_dir}/NODE/COMPONENT.log"
    )
    return 0


def _down(args: argparse.Namespace) -> int:
    from kubelab.lab import cluster

    _root()
    try:
        asyncio.run(cluster.down(_lab(args), _report))
    except cluster.LabError as error:
        print(f"kubelab lab down: {error}", file=sys.stderr)
        return 1
    return 0


def _status(args: argparse.Namespace) -> int:
    from kubelab.lab import cluster
    from kubelab.lab.processes import ProcessTable

    lab = _lab(args)
    records = ProcessTable(lab.process_file).records()
    if not records:
        print(f"lab {lab.name}: not running")
        return 1
    try:
        nodes = asyncio.run(cluster.node_objects(lab))
    except Exception as error:
        print(f"API server: not answering ({error})")
        nodes = {}
    healthy = True
    for node in lab.nodes:
        mine = [r for r in records if r.node == node.name]
        parts = [f"{r.component} {'up' if r.alive() else 'DOWN'} (pid {r.pid})" for r in mine]
        healthy = healthy and all(r.alive() for r in mine)
        if node.role is Role.WORKER:
            obj = nodes.get(node.name)
            ready = obj is not None and cluster.node_ready(obj)
            cidr = obj.spec.pod_cidr if obj is not None and obj.spec else None
            parts.append(f"Node {'Ready' if ready else 'NotReady'} podCIDR {cidr or '-'}")
            healthy = healthy and ready
        print(f"{node.name:<13} {node.ip:<12} {'; '.join(parts) or '-'}")
    return 0 if healthy else 1


def _demo(args: argparse.Namespace) -> int:
    from kubelab.lab.demo import Demo
    from kubelab.lab.processes import CommandError

    _root()
    try:
        Demo(_lab(args)).run()
    except CommandError as error:
        print(f"kubelab lab demo: {error}", file=sys.stderr)
        return 1
    return 0


def _kubeconfig(args: argparse.Namespace) -> int:
    lab = _lab(args)
    if not lab.host_kubeconfig.exists():
        print(f"kubelab lab: lab {lab.name} is not up", file=sys.stderr)
        return 1
    print(lab.host_kubeconfig)
    return 0


def _exec(args: argparse.Namespace) -> int:
    lab = _lab(args)
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("kubelab lab exec: NODE -- CMD...", file=sys.stderr)
        return 2
    try:
        node = lab.node(args.node)
    except KeyError as error:
        print(f"kubelab lab exec: {error.args[0]}", file=sys.stderr)
        return 2
    if not node.netns_path.exists():
        print(f"kubelab lab exec: lab {lab.name} is not up", file=sys.stderr)
        return 1
    os.execvp("nsenter", ["nsenter", f"--net={node.netns_path}", "--", *argv])


def _forward(args: argparse.Namespace) -> int:
    from kubelab import component
    from kubelab.lab.netns import NetnsForwarder

    async def serve(stop: asyncio.Event) -> int:
        forwarder = NetnsForwarder(args.target, connect_netns=args.netns, listen=args.listen)
        port = await forwarder.start()
        print(f"kubelab lab forward: 127.0.0.1:{port} → {args.netns} {args.target}", flush=True)
        try:
            await stop.wait()
        finally:
            await forwarder.stop()
        return 0

    return component.run(serve)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kubelab lab", description="A multi-node cluster in network namespaces."
    )
    run = configure(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
