"""``kubelab lab``: a multi-node cluster in network namespaces on this machine.

A thin command (kind's shape): it parses flags, builds the inventory
(``kubelab.lab.topology.Lab``) and hands it to ``kubelab.lab.cluster``.  Subcommands:

- ``up [--name lab] [--nodes 2] [--control-planes 1|3|5] [--store sqlite|etcd]
  [--cni kubelab|reference] [--proxy-mode iptables|nftables|userspace]
  [--iptables-backend restore|libiptc] [--host-api-port 6443]``: progress per step (a live
  line with a spinner and the elapsed time on a terminal, plain ``✓`` lines otherwise), then
  how to use it;
- ``down``: stop and remove everything of the lab;
- ``status``: per node, each component's process, restarts and health endpoint, and the
  Node's Ready condition; for an etcd lab also the members, the load balancer's healthy API
  servers and the Lease holders (``kubelab.lab.hastatus``);
- ``kill|stop|start NODE COMPONENT``, ``partition|heal NODE``: faults on purpose
  (``kubelab.lab.faults``);
- ``nodes``: each node's role, IP, Ready, podCIDR and taints;
- ``logs NODE COMPONENT [-f]``: a component's log (``-f``: follow it, as ``tail -F``);
- ``node add`` / ``node rm NAME``: a worker joins or leaves the running lab;
- ``kubeconfig``: the path of the host's kubeconfig (server https://127.0.0.1:6443, or
  ``--host-api-port``);
- ``exec NODE -- CMD...``: run a command in a node's network namespace (``nsenter --net``);
- ``trace SOURCE DESTINATION [--udp] [-o json]``: one probe followed through every namespace
  it crosses (``kubelab.lab.trace``);
- ``doctor [NODE] [--fix] [-o json]``: ``kubelab doctor`` (``node.doctor``) inside the node,
  or each Kubernetes node in turn, with the paths its components were started with;
- ``ui [--port N] [--allow-trace]``: a live web page of the lab on the host's loopback
  (``kubelab.lab.ui``), its URL with a token printed;
- ``demo``: what ``make lab`` shows (``kubelab.lab.demo``);
- ``vagrant render|bundles|address``: what the Vagrant VMs' provisioning runs
  (``kubelab.lab.vagrant``);
- ``forward``, ``resolver`` and ``supervise`` (hidden): the host forwarder (and, given
  several targets and ``--health-check``, the HA lab's load balancer), the router's
  NXDOMAIN answerer at the host's nameserver addresses (``kubelab.lab.resolver``) and the
  supervisor ``up`` starts.

Run as root.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kube.table import aligned
from kubelab.lab import vagrant
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

if TYPE_CHECKING:
    from rich.progress import TaskID

    from kube.api.kinds.core_v1.node import Node as NodeObject
    from kubelab.lab.components import Health


def _add_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", default="lab", help="the lab's name (default: lab)")


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {text!r}")
    return int(text)


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def configure(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    commands = parser.add_subparsers(dest="lab_command", metavar="COMMAND", required=True)
    up = commands.add_parser("up", help="bring a lab up (tearing down a stale one first)")
    _add_name(up)
    up.add_argument(
        "--nodes",
        type=int,
        default=LabSpec.workers,
        help=f"worker nodes besides the control plane (default: {LabSpec.workers})",
    )
    up.add_argument(
        "--control-planes",
        type=int,
        default=LabSpec.control_planes,
        help="control-plane nodes: 1, or 3 or 5 behind a load balancer (needs --store etcd)",
    )
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
        ("status", "each node's processes, their health and the Node's Ready condition"),
        ("nodes", "each node's role, IP, Ready, podCIDR and taints"),
        ("kubeconfig", "print the path of the host's kubeconfig"),
        ("demo", "run the demo `make lab` shows: a spread Deployment behind two Services"),
    ):
        _add_name(commands.add_parser(name, help=text))
    exec_ = commands.add_parser("exec", help="run a command inside a node: exec NODE -- CMD...")
    _add_name(exec_)
    exec_.add_argument("node")
    exec_.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD...")
    doctor = commands.add_parser(
        "doctor", help="what is wrong with a node (every Kubernetes node without NODE)"
    )
    _add_name(doctor)
    doctor.add_argument("node", nargs="?")
    doctor.add_argument("--fix", action="store_true", help="apply the fixes that are safe")
    doctor.add_argument("-o", "--output", choices=("table", "json"), default="table")
    trace = commands.add_parser(
        "trace", help="follow one real probe through the kernel: trace SOURCE DESTINATION"
    )
    _add_name(trace)
    trace.add_argument("source", help="pod/NS/NAME, node/NAME, client or an IP")
    trace.add_argument(
        "destination",
        help="pod/NS/NAME:PORT, svc/NS/NAME:PORT, lb/NS/NAME:PORT, node/NAME:PORT, "
        "nodeport/NODE:PORT, client:PORT or IP:PORT",
    )
    trace.add_argument("--udp", action="store_true", help="a UDP datagram instead of a TCP SYN")
    trace.add_argument("-o", "--output", choices=("table", "json"), default="table")
    ui = commands.add_parser(
        "ui", help="a live web page of the lab: topology, Services, stories, traces"
    )
    _add_name(ui)
    ui.add_argument("--address", default="127.0.0.1", help="where to listen (default: loopback)")
    ui.add_argument("--port", type=_port, default=0, help="the port (default: a free one)")
    ui.add_argument(
        "--allow-trace",
        action="store_true",
        help="let the page run traces (a probe, and marking tables for its duration)",
    )
    ui.add_argument(
        "--kubeconfig", type=Path, help="read the API with this (default: the lab's host one)"
    )
    logs = commands.add_parser("logs", help="a component's log: logs NODE COMPONENT [-f]")
    _add_name(logs)
    logs.add_argument("node")
    logs.add_argument("component")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    for name, text in (
        ("kill", "SIGKILL a component (the supervisor restarts it): kill NODE COMPONENT"),
        ("stop", "stop a component and keep it down: stop NODE COMPONENT"),
        ("start", "start a stopped component again: start NODE COMPONENT"),
    ):
        fault = commands.add_parser(name, help=text)
        _add_name(fault)
        fault.add_argument("node")
        fault.add_argument("component")
    for name, text in (
        ("partition", "cut a control plane off from the others (in the router)"),
        ("heal", "undo partition NODE"),
    ):
        cut = commands.add_parser(name, help=text)
        _add_name(cut)
        cut.add_argument("node")
    node = commands.add_parser("node", help="a worker joins (add) or leaves (rm NAME)")
    node_commands = node.add_subparsers(dest="node_command", metavar="add|rm", required=True)
    _add_name(node_commands.add_parser("add", help="the next free nodeN joins the lab"))
    rm = node_commands.add_parser("rm", help="a worker leaves: its processes, state, Node")
    _add_name(rm)
    rm.add_argument("node")
    forward = commands.add_parser("forward")  # hidden in spirit: started by `up`
    forward.add_argument("--netns", type=Path, help="connect inside this namespace")
    forward.add_argument("--target", type=_address, action="append", required=True)
    forward.add_argument("--listen", type=_address, required=True)
    forward.add_argument("--health-check", metavar="PATH", help="HTTPS path asked of targets")
    forward.add_argument("--ca", type=Path, help="the CA verifying the health checks")
    forward.add_argument("--state-file", type=Path, help="JSON of the healthy targets")
    answer = commands.add_parser("resolver")  # hidden in spirit: started by `up`
    answer.add_argument("--listen", type=_address, action="append", required=True)
    vagrant_run = vagrant.configure(
        commands.add_parser("vagrant", help="the Vagrant VMs' configuration (run by provisioning)")
    )
    supervise = commands.add_parser("supervise")  # hidden in spirit: started by `up`
    supervise.add_argument("--table", type=Path, required=True)

    def run(args: argparse.Namespace) -> int:
        handler = {
            "up": _up,
            "down": _down,
            "status": _status,
            "nodes": _nodes,
            "logs": _logs,
            "node": _node,
            "kubeconfig": _kubeconfig,
            "exec": _exec,
            "doctor": _doctor,
            "trace": _trace,
            "ui": _ui,
            "kill": _fault,
            "stop": _fault,
            "start": _fault,
            "partition": _fault,
            "heal": _fault,
            "demo": _demo,
            "forward": _forward,
            "resolver": _resolver,
            "supervise": _supervise,
            "vagrant": vagrant_run,
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
        workers=args.nodes,
        store=args.store,
        cni=args.cni,
        proxy_mode=args.proxy_mode,
        iptables_backend=args.iptables_backend,
        host_api_port=args.host_api_port,
        control_planes=args.control_planes,
    )
    return Lab(spec)


def _root() -> None:
    if os.geteuid() != 0:
        raise SystemExit("kubelab lab: run as root (namespaces, mounts, cgroups)")


def _report(line: str) -> None:
    print(line, flush=True)


class LiveSteps:
    """Progress on a terminal: a live line per step (spinner, name, elapsed time) that turns
    into the step's ``✓``/``✗`` line when it ends; other lines print above."""

    def __init__(self) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            SpinnerColumn(finished_text=" "),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
        )
        self.task: TaskID | None = None

    def __enter__(self) -> LiveSteps:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def started(self, name: str) -> None:
        self.task = self.progress.add_task(name, total=1)

    def report(self, line: str) -> None:
        if self.task is not None and line.startswith(("✓", "✗")):
            done = line.rpartition(" (")[0] if line.endswith("s)") else line
            self.progress.update(self.task, description=done, completed=1)
            self.task = None
        else:
            self.progress.console.print(line, highlight=False, markup=False)


@contextlib.contextmanager
def _progress() -> Iterator[tuple[Callable[[str], None], Callable[[str], None] | None]]:
    """(report, on_step) for ``cluster``: live lines on a terminal, plain lines otherwise."""
    if not sys.stdout.isatty():
        yield _report, None
        return
    with LiveSteps() as live:
        yield live.report, live.started


def _usage(lab: Lab) -> str:
    from kubelab.lab.demo import KUBECTL

    nodes = ", ".join(n.name for n in lab.kubernetes_nodes)
    first = lab.workers[0].name
    name = f" --name {lab.name}" if lab.name != "lab" else ""
    return (
        f"  export KUBECONFIG={lab.host_kubeconfig}\n"
        f"  {KUBECTL} get nodes,pods -A -o wide\n"
        f"  kubelab lab nodes{name}; kubelab lab status{name}\n"
        f"  kubelab lab exec{name} {first} -- iptables -t nat -S\n"
        f"  kubelab lab logs{name} {first} kubelet -f\n"
        f"  kubelab lab node add{name}; kubelab lab node rm{name} NODE\n"
        f"  kubelab lab down{name}\n"
        f"  Kubernetes nodes: {nodes}; logs: {lab.log_dir}/NODE/COMPONENT.log"
    )


def _up(args: argparse.Namespace) -> int:
    from kubelab.lab import cluster

    _root()
    lab = _lab(args)
    try:
        with _progress() as (report, on_step):
            took = asyncio.run(cluster.up(lab, report, on_step))
    except cluster.LabError as error:
        print(f"kubelab lab up: {error}", file=sys.stderr)
        print(f"logs: {lab.log_dir}; remove with: kubelab lab down --name {lab.name}")
        return 1
    print(f"\nlab {lab.name} is up in {took:.1f}s; use it with:\n{_usage(lab)}")
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


def _node(args: argparse.Namespace) -> int:
    from kubelab.lab import cluster

    _root()
    lab = _lab(args)
    if not lab.process_file.exists():
        print(f"kubelab lab node: lab {lab.name} is not up", file=sys.stderr)
        return 1
    try:
        if args.node_command == "add":
            with _progress() as (report, on_step):
                grown = asyncio.run(cluster.add_node(lab, report, on_step))
            print(f"{grown.workers[-1].name} ({grown.workers[-1].ip}) joined lab {lab.name}")
        else:
            asyncio.run(cluster.remove_node(lab, args.node, _report))
            print(f"{args.node} left lab {lab.name}")
    except KeyError as error:
        print(f"kubelab lab node: {error.args[0]}", file=sys.stderr)
        return 2
    except cluster.LabError as error:
        print(f"kubelab lab node {args.node_command}: {error}", file=sys.stderr)
        return 1
    return 0


def _status(args: argparse.Namespace) -> int:
    from kubelab.lab import cluster, components, hastatus
    from kubelab.lab.processes import ProcessTable

    lab = _lab(args)
    records = ProcessTable(lab.process_file).records()
    if not records:
        print(f"lab {lab.name}: not running")
        return 1
    health = {c.key: c.health for c in components.lab_components(lab)}

    async def gather() -> tuple[dict[str, Any], list[tuple[bool, str]]]:
        try:
            nodes = await cluster.node_objects(lab)
        except Exception as error:
            print(f"API server: not answering ({error})")
            nodes = {}
        probes = await asyncio.gather(
            *(_probe(health.get(r.key), r.alive()) for r in records),
        )
        return nodes, list(probes)

    nodes, probes = asyncio.run(gather())
    ha = asyncio.run(hastatus.collect(lab)) if lab.spec.store == "etcd" else None
    answers = {r.key: p for r, p in zip(records, probes, strict=True)}
    healthy = True
    for node in lab.nodes:
        line = f"{node.name:<13} {node.ip:<12}"
        if node.is_kubernetes_node:
            obj = nodes.get(node.name)
            ready = obj is not None and cluster.node_ready(obj)
            cidr = obj.spec.pod_cidr if obj is not None and obj.spec else None
            line += f" Node {'Ready' if ready else 'NotReady'}, podCIDR {cidr or '-'}"
            healthy = healthy and ready
        print(line)
        for record in (r for r in records if r.node == node.name):
            ok, answer = answers[record.key]
            state = "up" if record.alive() else "DOWN"
            print(
                f"  {record.component:<11} {state:<4} pid {record.pid:<7} "
                f"restarts {record.restarts:<3} {answer}"
            )
            healthy = healthy and ok
    if ha is not None:
        print("\n".join(hastatus.render(ha)))
        healthy = healthy and ha.healthy
    return 0 if healthy else 1


async def _probe(health: Health | None, alive: bool) -> tuple[bool, str]:
    """A component's health for ``status``: its endpoint's answer, or whether it runs."""
    from kubelab.lab import cluster

    if not alive:
        return False, "not running"
    if health is None:
        return True, "running (no health endpoint)"
    ok, code = await cluster.probe(health)
    return ok, f"{health.url} {code}"


def _nodes(args: argparse.Namespace) -> int:
    from kubelab.lab import cluster

    lab = _lab(args)
    try:
        nodes = asyncio.run(cluster.node_objects(lab))
    except Exception as error:
        print(f"kubelab lab nodes: the API server of lab {lab.name} does not answer ({error})")
        return 1
    roles = {Role.CONTROLPLANE: "control-plane", Role.WORKER: "worker"}
    rows = [("NAME", "ROLE", "IP", "READY", "PODCIDR", "TAINTS")]
    for node in lab.kubernetes_nodes:
        obj = nodes.pop(node.name, None)
        if obj is None:
            rows.append((node.name, roles[node.role], node.ip, "(no Node)", "-", "-"))
            continue
        rows.append(_node_row(obj, roles[node.role], node.ip))
    rows += [_node_row(obj, "(not in the lab)", "-") for obj in nodes.values()]
    print("\n".join(aligned(rows)))
    return 0


def _node_row(obj: NodeObject, role: str, ip: str) -> tuple[str, str, str, str, str, str]:
    from kubelab.lab import cluster

    spec = obj.spec
    taints = (
        ",".join(
            f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in (spec.taints or [])
        )
        if spec
        else ""
    )
    return (
        obj.metadata.name or "",
        role,
        ip,
        "True" if cluster.node_ready(obj) else "False",
        (spec.pod_cidr if spec else None) or "-",
        taints or "-",
    )


def _logs(args: argparse.Namespace) -> int:
    lab = _lab(args)
    try:
        node = lab.node(args.node)
    except KeyError as error:
        print(f"kubelab lab logs: {error.args[0]}", file=sys.stderr)
        return 2
    log = node.log(args.component)
    if not log.exists():
        have = sorted(p.stem for p in node.log_dir.glob("*.log")) if node.log_dir.is_dir() else []
        print(
            f"kubelab lab logs: no {args.component} log on {node.name} "
            f"(logs: {', '.join(have) or 'none'})",
            file=sys.stderr,
        )
        return 1
    if args.follow:
        os.execvp("tail", ["tail", "-n", "+1", "-F", str(log)])
    sys.stdout.write(log.read_text(errors="replace"))
    return 0


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


def _doctor(args: argparse.Namespace) -> int:
    """``kubelab doctor`` inside each node asked for; with ``-o json``, one JSON list."""
    import json
    import subprocess

    from kubelab.lab import components

    _root()
    lab = _lab(args)
    try:
        nodes = [lab.node(args.node)] if args.node else list(lab.kubernetes_nodes)
    except KeyError as error:
        print(f"kubelab lab doctor: {error.args[0]}", file=sys.stderr)
        return 2
    if not all(n.is_kubernetes_node for n in nodes):
        print(f"kubelab lab doctor: {args.node} is not a Kubernetes node", file=sys.stderr)
        return 2
    if not lab.process_file.exists():
        print(f"kubelab lab doctor: lab {lab.name} is not up", file=sys.stderr)
        return 1
    flags = ("-o", args.output, *(("--fix",) if args.fix else ()))
    reports: list[Any] = []
    worst = 0
    for node in nodes:
        argv = ["nsenter", f"--net={node.netns_path}", "--", *components.doctor(lab, node)]
        done = subprocess.run(
            [*argv, *flags], capture_output=args.output == "json", text=True, check=False
        )
        if args.output == "json" and done.returncode in (0, 1):
            reports.append(json.loads(done.stdout))
        elif args.output == "json":
            sys.stderr.write(done.stderr)
        worst = max(worst, done.returncode)
    if args.output == "json":
        print(json.dumps(reports, indent=2))
    return worst


def _trace(args: argparse.Namespace) -> int:
    """``kubelab.lab.trace``: exit 0 when the probe was answered or delivered, 1 when it was
    dropped, 2 for a SOURCE or DESTINATION the lab does not have."""
    from kubelab.lab import trace

    _root()
    try:
        found = asyncio.run(
            trace.run_trace(_lab(args), args.source, args.destination, udp=args.udp)
        )
    except trace.TraceError as error:
        print(f"kubelab lab trace: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kubelab lab trace: interrupted (the marking tables are removed)", file=sys.stderr)
        return 130
    render = trace.render_json if args.output == "json" else trace.render_table
    print(render(found))
    return 1 if found.verdict == "dropped" else 0


def _fault(args: argparse.Namespace) -> int:
    from kubelab.lab import faults
    from kubelab.lab.cluster import LabError

    _root()
    lab = _lab(args)
    try:
        if args.lab_command == "kill":
            pid = faults.kill(lab, args.node, args.component)
            print(f"{args.node}/{args.component}: pid {pid} killed (the supervisor restarts it)")
        elif args.lab_command == "stop":
            faults.stop(lab, args.node, args.component)
            print(f"{args.node}/{args.component}: stopped; `kubelab lab start` starts it")
        elif args.lab_command == "start":
            record = faults.start(lab, args.node, args.component)
            print(f"{record.key}: started as pid {record.pid}")
        elif args.lab_command == "partition":
            others = faults.partition(lab, args.node)
            print(f"{args.node} cut off from {', '.join(n.name for n in others)}")
        else:
            faults.heal(lab, args.node)
            print(f"{args.node}: partition healed")
    except KeyError as error:
        print(f"kubelab lab {args.lab_command}: {error.args[0]}", file=sys.stderr)
        return 2
    except LabError as error:
        print(f"kubelab lab {args.lab_command}: {error}", file=sys.stderr)
        return 1
    return 0


def _ui(args: argparse.Namespace) -> int:
    from kube import component
    from kube.client.kubeconfig import KubeconfigError
    from kube.client.rest import Client
    from kubelab.lab.ui import server
    from kubelab.lab.ui.facts import LabFacts

    if missing := server.missing_vendored():
        print(f"kubelab lab ui: {', '.join(missing)} missing: run make setup", file=sys.stderr)
        return 1
    lab = _lab(args)
    kubeconfig = args.kubeconfig or lab.host_kubeconfig
    if args.kubeconfig is None and not lab.process_file.exists():
        print(f"kubelab lab ui: lab {lab.name} is not up", file=sys.stderr)
        return 1

    async def serve(stop: asyncio.Event) -> int:
        try:
            client = Client.from_kubeconfig(kubeconfig, user_agent="kubelab-ui")
            prober = Client.from_kubeconfig(kubeconfig, user_agent="kubelab-ui", max_retries=0)
        except (KubeconfigError, OSError) as error:
            print(
                f"kubelab lab ui: cannot load the kubeconfig {kubeconfig}: {error}", file=sys.stderr
            )
            return 2

        async def probe() -> None:
            await prober.request("GET", "/readyz")

        def ready(url: str) -> None:
            print(f"kubelab lab ui: serving lab {lab.name} on {url}", flush=True)

        ui = server.Ui(
            lab,
            client,
            LabFacts(lab),
            probe,
            story=server.lab_story(client),
            trace=server.lab_trace(lab) if args.allow_trace else None,
        )
        try:
            serving = asyncio.create_task(
                server.serve(ui, server.new_token(), args.address, args.port, ready)
            )
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        except OSError as error:
            print(
                f"kubelab lab ui: cannot listen on {args.address}:{args.port}: {error}",
                file=sys.stderr,
            )
            return 1
        finally:
            await client.close()
            await prober.close()
        return 0

    return component.run(serve)


def _forward(args: argparse.Namespace) -> int:
    import json

    from kube import component
    from kubelab.lab.forward import Address, Backends, HealthCheck, NetnsForwarder

    check = None
    if args.health_check is not None:
        if args.ca is None:
            raise SystemExit("kubelab lab forward: --health-check needs --ca")
        check = HealthCheck(args.health_check, args.ca)

    healthy: list[tuple[Address, ...]] = []

    def changed(forwarder: NetnsForwarder) -> None:
        now = forwarder.backends.healthy()
        if healthy != [now]:
            healthy[:] = [now]
            print(f"kubelab lab forward: healthy {now}", flush=True)
        if args.state_file is not None:
            partial = args.state_file.with_suffix(".tmp")
            partial.write_text(json.dumps({"backends": forwarder.describe()}) + "\n")
            partial.replace(args.state_file)

    async def serve(stop: asyncio.Event) -> int:
        forwarder = NetnsForwarder(
            Backends(args.target, check),
            connect_netns=args.netns,
            listen=args.listen,
            on_change=changed,
        )
        port = await forwarder.start()
        targets = ", ".join(f"{host}:{target_port}" for host, target_port in args.target)
        inside = f" in {args.netns}" if args.netns else ""
        print(f"kubelab lab forward: {args.listen[0]}:{port} → {targets}{inside}", flush=True)
        try:
            await stop.wait()
        finally:
            await forwarder.stop()
        return 0

    return component.run(serve)


def _resolver(args: argparse.Namespace) -> int:
    from kube import component
    from kubelab.lab import resolver

    async def serve(stop: asyncio.Event) -> int:
        listening = ", ".join(f"{host}:{port}" for host, port in args.listen)
        print(f"kubelab lab resolver: NXDOMAIN for every name on {listening}", flush=True)
        await resolver.serve(args.listen, stop)
        return 0

    return component.run(serve)


def _supervise(args: argparse.Namespace) -> int:
    from kube import component
    from kubelab.lab.processes import ProcessTable
    from kubelab.lab.supervisor import Supervisor

    def say(line: str) -> None:
        print(line, flush=True)

    supervisor = Supervisor(ProcessTable(args.table), say=say)
    say(f"kubelab lab supervise: watching {args.table}")
    return component.run(supervisor.run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kubelab lab", description="A multi-node cluster in network namespaces."
    )
    run = configure(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
