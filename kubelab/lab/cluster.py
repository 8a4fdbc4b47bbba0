"""Bringing a lab up and down: ordered lists of small actions, each with ``execute(ctx)``.

``up`` (the shape of kind's cluster creation) runs, in order:

1. ``CleanStale``: whatever a previous lab of this name left (after a crash) is torn down;
2. ``CreateNetwork``: namespaces, ``lab0``, veths, addresses, routes (``network.create``);
3. ``StartServer``: ``kubelab server`` in ``controlplane`` on 10.240.0.10:6443, SQLite;
4. ``StartForwarder``: ``kubelab lab forward``, a detached process listening on the host's
   127.0.0.1:6443 (or ``--host-api-port``) and connecting inside ``controlplane``
   (``netns.NetnsForwarder``);
5. ``BuildImages`` then, per worker, ``StartContainerd`` (its config from
   ``node.kubelet.runtimeconfig``) and ``LoadImages`` (waits for CRI, imports pause+busybox);
   the API server starts meanwhile;
6. ``WaitServer``: the API answers through the forwarder; the host kubeconfig is written and
   each kubelet's serving certificate issued from the server's CA;
7. per worker ``StartKubelet`` (``--cluster-dns 10.96.0.10``, ``--cgroup-root
   /kubelab/<lab>/<node>``) and ``StartProxy``;
8. ``WaitNodesReady``: every worker's Node Ready with a podCIDR;
9. ``RoutePodCIDRs``: a route per pod CIDR in the router.

Starting is detached (``processes.ProcessTable``) and waiting is a separate action, so slow
starts overlap while the list stays a plain sequence.  ``down`` runs every step even when an
earlier one failed, and is what ``CleanStale`` runs: kubelets and proxies stopped, every pod
sandbox stopped and removed through each containerd's CRI, containerds stopped, then the
forwarder and the server; then anything left (``lab_processes``: whatever runs in a lab
namespace, names the lab's state directory on its command line, such as shims and the
kubelet's CNI agent, or sits in the lab's cgroups), mounts under ``/run/kubelab/<lab>``,
the cgroup subtree ``/kubelab/<lab>`` in every hierarchy, the namespaces, and the state
directory.  Logs under ``/var/log/kubelab/<lab>`` are kept until the next ``up``.

Progress goes to ``ctx.report`` as one line per step.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from kubelab.api.kinds.core_v1.node import Node as NodeObject
from kubelab.client import kubeconfig
from kubelab.client.rest import Client
from kubelab.lab import network
from kubelab.lab.images import PAUSE_IMAGE, build_images, import_images
from kubelab.lab.processes import (
    CommandError,
    ProcessTable,
    log_tail,
    run,
    terminate,
)
from kubelab.lab.topology import (
    API_PORT,
    CLUSTER_CIDR,
    CLUSTER_DNS,
    CONTROLPLANE_IP,
    IMAGE_CACHE,
    KUBELET_PORT,
    SERVICE_CIDR,
    Lab,
    Node,
    running_spec,
    spec_file,
)
from kubelab.pki import CertificateAuthority, KeyPair
from node.cri.client import RuntimeClient
from node.kubelet.runtimeconfig import ContainerdLayout, write_containerd_config

SERVER_TIMEOUT: Final = 60.0
CRI_TIMEOUT: Final = 20.0
READY_TIMEOUT: Final = 120.0
POLL: Final = 0.2
PYTHON: Final = sys.executable
KUBELAB: Final = (PYTHON, "-m", "kubelab")
LAB_COMMAND: Final = (PYTHON, "-m", "kubelab.lab.command")
CGROUP_FS: Final = Path("/sys/fs/cgroup")


class LabError(Exception):
    """A step of ``up`` failed; the message says which and why (logs included)."""


@dataclass
class Context:
    """What actions share: the inventory, the process table, the progress sink."""

    lab: Lab
    report: Callable[[str], None] = print
    images: list[Path] = field(default_factory=list)
    processes: ProcessTable = field(init=False)

    def __post_init__(self) -> None:
        self.processes = ProcessTable(self.lab.process_file)


class Action(Protocol):
    """One step of ``up``: ``name`` is shown as progress, ``execute`` does it."""

    name: str

    async def execute(self, ctx: Context) -> None: ...


def key(node: Node, component: str) -> str:
    """The process table's key of a node's component: ``node1/kubelet``."""
    return f"{node.name}/{component}"


def layout(node: Node) -> ContainerdLayout:
    """The node's containerd layout (sockets, root, state under its state directory)."""
    return ContainerdLayout(
        state_dir=node.containerd_dir,
        sandbox_image=PAUSE_IMAGE,
        cni_bin_dir=node.cni_bin_dir,
        cni_conf_dir=node.cni_conf_dir,
    )


# -- the actions of up ------------------------------------------------------------------------


@dataclass
class CleanStale:
    name: str = "clean up what an earlier lab left"

    async def execute(self, ctx: Context) -> None:
        lab = ctx.lab
        stale = (
            lab.state_dir.exists()
            or bool(set(lab.netns_names()) & network.existing_namespaces())
            or bool(lab_cgroups(lab))
        )
        if stale:
            # The stale lab may have had another number of workers than the one asked for.
            earlier = Lab(running_spec(lab.name, network.existing_namespaces()))
            await down(earlier, report=lambda line: ctx.report(f"  {line}"))
        shutil.rmtree(lab.log_dir, ignore_errors=True)
        host, port = lab.host_api_address
        if _listening(host, port):
            raise LabError(
                f"{host}:{port} is in use on the host: another lab or API server runs "
                f"(`kubelab lab down --name ...` it first)"
            )


@dataclass
class CreateNetwork:
    name: str = "network: namespaces, bridge lab0, veths, routes"

    async def execute(self, ctx: Context) -> None:
        ctx.lab.spec.save(spec_file(ctx.lab.name))
        await asyncio.to_thread(network.create, ctx.lab)


@dataclass
class StartServer:
    name: str = f"control plane: kubelab server on {CONTROLPLANE_IP}:{API_PORT}"

    async def execute(self, ctx: Context) -> None:
        lab, cp = ctx.lab, ctx.lab.controlplane
        lab.server_dir.mkdir(parents=True, exist_ok=True)
        ctx.processes.start(
            key(cp, "server"),
            [
                *KUBELAB, "server",
                "--data-dir", lab.server_dir,
                "--bind-address", CONTROLPLANE_IP,
                "--secure-port", str(API_PORT),
                "--advertise-address", CONTROLPLANE_IP,
                "--store", ctx.lab.spec.store,
                "--service-cluster-ip-range", SERVICE_CIDR,
                "--cluster-cidr", CLUSTER_CIDR,
            ],
            log=cp.log("server"),
            netns=cp.netns_path,
            cwd=lab.state_dir,
        )  # fmt: skip


@dataclass
class StartForwarder:
    name: str = "host forwarder: 127.0.0.1 → controlplane"

    async def execute(self, ctx: Context) -> None:
        lab, cp = ctx.lab, ctx.lab.controlplane
        host, port = lab.host_api_address
        ctx.processes.start(
            key(cp, "forwarder"),
            [
                *LAB_COMMAND, "forward",
                "--netns", cp.netns_path,
                "--target", f"{CONTROLPLANE_IP}:{API_PORT}",
                "--listen", f"{host}:{port}",
            ],
            log=cp.log("forwarder"),
            cwd=lab.state_dir,
        )  # fmt: skip


@dataclass
class BuildImages:
    name: str = f"images: pause and busybox (cache {IMAGE_CACHE})"

    async def execute(self, ctx: Context) -> None:
        ctx.images = await asyncio.to_thread(build_images, IMAGE_CACHE)


@dataclass
class StartContainerd:
    node: Node
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.node.name}: containerd"

    async def execute(self, ctx: Context) -> None:
        node = self.node
        config = write_containerd_config(layout(node))
        node.cni_bin_dir.mkdir(parents=True, exist_ok=True)
        node.cni_conf_dir.mkdir(parents=True, exist_ok=True)
        ctx.processes.start(
            key(node, "containerd"),
            ["containerd", "--config", config],
            log=node.log("containerd"),
            netns=node.netns_path,
        )


@dataclass
class LoadImages:
    node: Node
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.node.name}: CRI ready, images imported"

    async def execute(self, ctx: Context) -> None:
        node = self.node
        await wait_for(
            lambda: _runtime_ready(node),
            f"{node.name}'s containerd to be ready",
            CRI_TIMEOUT,
            lambda: ctx.processes.check_alive(key(node, "containerd")),
        )
        await asyncio.to_thread(import_images, layout(node).socket, ctx.images)


@dataclass
class WaitServer:
    name: str = "control plane serving; kubeconfigs and kubelet certificates"

    async def execute(self, ctx: Context) -> None:
        lab = ctx.lab
        admin = lab.server_dir / "admin.kubeconfig"

        def alive() -> None:
            ctx.processes.check_alive(key(lab.controlplane, "server"))
            ctx.processes.check_alive(key(lab.controlplane, "forwarder"))

        await wait_for(
            lambda: _exists(admin), "the API server's admin kubeconfig", SERVER_TIMEOUT, alive
        )
        ca = CertificateAuthority.load_or_create(lab.pki_dir)
        credentials = KeyPair.read(lab.pki_dir, "admin")
        for path, url in (
            (lab.node_kubeconfig, lab.api_url),
            (lab.host_kubeconfig, lab.host_api_url),
        ):
            kubeconfig.write(
                path, kubeconfig.render(url, ca.cert_pem, "admin", credentials, cluster=lab.name)
            )
        await wait_for(
            lambda: _api_answers(lab.host_kubeconfig),
            "the API server through the forwarder",
            SERVER_TIMEOUT,
            alive,
        )
        for node in lab.workers:
            node.state_dir.mkdir(parents=True, exist_ok=True)
            serving = ca.issue(f"system:node:{node.name}", server=True, ip_addresses=[node.ip])
            serving.write(node.state_dir, "kubelet")
            (node.state_dir / "resolv.conf").write_text(f"nameserver {CLUSTER_DNS}\n")


@dataclass
class StartKubelet:
    node: Node
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.node.name}: kubelet"

    async def execute(self, ctx: Context) -> None:
        node, lab = self.node, ctx.lab
        ctx.processes.start(
            key(node, "kubelet"),
            [
                *KUBELAB, "kubelet",
                "--kubeconfig", lab.node_kubeconfig,
                "--node-name", node.name,
                "--node-ip", node.ip,
                "--container-runtime-endpoint", layout(node).endpoint,
                "--root-dir", node.kubelet_dir,
                "--pod-logs-dir", node.pod_logs_dir,
                "--cgroup-root", node.cgroup_root,
                "--cni-plugin", lab.spec.cni,
                "--cni-conf-dir", node.cni_conf_dir,
                "--cni-bin-dir", node.cni_bin_dir,
                "--cluster-cidr", CLUSTER_CIDR,
                "--cluster-dns", CLUSTER_DNS,
                "--resolv-conf", node.state_dir / "resolv.conf",
                "--tls-cert-file", node.state_dir / "kubelet.crt",
                "--tls-private-key-file", node.state_dir / "kubelet.key",
                "--client-ca-file", lab.pki_dir / "ca.crt",
                "--port", str(KUBELET_PORT),
            ],
            log=node.log("kubelet"),
            netns=node.netns_path,
            cwd=node.state_dir,
        )  # fmt: skip


@dataclass
class StartProxy:
    node: Node
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.node.name}: kubelab proxy"

    async def execute(self, ctx: Context) -> None:
        node, lab = self.node, ctx.lab
        ctx.processes.start(
            key(node, "proxy"),
            [
                *KUBELAB, "proxy",
                "--kubeconfig", lab.node_kubeconfig,
                "--hostname-override", node.name,
                "--proxy-mode", lab.spec.proxy_mode,
                "--iptables-backend", lab.spec.iptables_backend,
                "--cluster-cidr", CLUSTER_CIDR,
            ],
            log=node.log("proxy"),
            netns=node.netns_path,
            cwd=node.state_dir,
        )  # fmt: skip


@dataclass
class WaitNodesReady:
    name: str = "every worker's Node Ready with a podCIDR"

    async def execute(self, ctx: Context) -> None:
        lab = ctx.lab

        def alive() -> None:
            for record in ctx.processes.records():
                ctx.processes.check_alive(record.key)

        await wait_for(
            lambda: _nodes_ready(lab), "the Nodes to be Ready", READY_TIMEOUT, alive, ctx=ctx
        )


@dataclass
class RoutePodCIDRs:
    name: str = "router: a route to each node's pod CIDR"

    async def execute(self, ctx: Context) -> None:
        cidrs = await pod_cidrs(ctx.lab)
        await asyncio.to_thread(network.route_pod_cidrs, ctx.lab, cidrs)


def up_actions(lab: Lab) -> list[Action]:
    """The ordered steps of ``up`` (see the module docstring)."""
    workers = lab.workers
    return [
        CleanStale(),
        CreateNetwork(),
        StartServer(),
        StartForwarder(),
        BuildImages(),
        *(StartContainerd(n) for n in workers),
        *(LoadImages(n) for n in workers),
        WaitServer(),
        *(a for n in workers for a in (StartKubelet(n), StartProxy(n))),
        WaitNodesReady(),
        RoutePodCIDRs(),
    ]


async def up(lab: Lab, report: Callable[[str], None] = print) -> float:
    """Run ``up_actions`` in order; the seconds it took.  On failure the lab is left as it
    is (for its logs) and ``LabError`` names the step; ``down`` removes it."""
    ctx = Context(lab, report)
    started = time.monotonic()
    for action in up_actions(lab):
        step = time.monotonic()
        try:
            await action.execute(ctx)
        except (CommandError, LabError, OSError) as error:
            report(f"✗ {action.name}")
            raise LabError(f"{action.name}: {error}") from error
        report(f"✓ {action.name} ({time.monotonic() - step:.1f}s)")
    return time.monotonic() - started


# -- waiting ----------------------------------------------------------------------------------


async def wait_for(
    check: Callable[[], Awaitable[bool]],
    what: str,
    seconds: float,
    alive: Callable[[], None] = lambda: None,
    *,
    ctx: Context | None = None,
) -> None:
    """Poll ``check`` until true; ``alive`` raises if a process it needs died meanwhile."""
    deadline = time.monotonic() + seconds
    while not await check():
        alive()
        if time.monotonic() > deadline:
            tails = ""
            if ctx is not None:
                tails = "".join(
                    f"\n--- {r.key} ({r.log}):\n{log_tail(r, 1500)}"
                    for r in ctx.processes.records()
                )
            raise LabError(f"timed out after {seconds:.0f}s waiting for {what}{tails}")
        await asyncio.sleep(POLL)


async def _exists(path: Path) -> bool:
    return await asyncio.to_thread(path.exists)


async def _runtime_ready(node: Node) -> bool:
    if not layout(node).socket.exists():
        return False
    try:
        async with RuntimeClient(layout(node).endpoint, timeout=2) as cri:
            status = await cri.status()
    except Exception:
        return False
    return any(c.type == "RuntimeReady" and c.status for c in status.conditions)


async def _api_answers(kubeconfig_path: Path) -> bool:
    try:
        async with Client.from_kubeconfig(kubeconfig_path, user_agent="kubelab-lab") as client:
            await client.list(NodeObject)
    except Exception:
        return False
    return True


async def node_objects(lab: Lab) -> dict[str, NodeObject]:
    """The lab's Node objects by name, read through the host kubeconfig."""
    async with Client.from_kubeconfig(lab.host_kubeconfig, user_agent="kubelab-lab") as client:
        listed = await client.list(NodeObject)
    return {n.metadata.name or "": n for n in listed.items}


def node_ready(node: NodeObject) -> bool:
    conditions = (node.status.conditions if node.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


async def _nodes_ready(lab: Lab) -> bool:
    try:
        nodes = await node_objects(lab)
    except Exception:
        return False
    for worker in lab.workers:
        node = nodes.get(worker.name)
        if node is None or not node_ready(node) or not (node.spec and node.spec.pod_cidr):
            return False
    return True


async def pod_cidrs(lab: Lab) -> dict[str, str]:
    """Worker name → its Node's podCIDR, for the workers that have one."""
    nodes = await node_objects(lab)
    cidrs = {}
    for worker in lab.workers:
        node = nodes.get(worker.name)
        if node is not None and node.spec is not None and node.spec.pod_cidr:
            cidrs[worker.name] = node.spec.pod_cidr
    return cidrs


def _listening(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


# -- down -------------------------------------------------------------------------------------


async def down(lab: Lab, report: Callable[[str], None] = print) -> None:
    """Remove everything of the lab (see the module docstring); idempotent, and every step
    runs even when an earlier one failed (the failures are reported, then raised together)."""
    table = ProcessTable(lab.process_file)
    problems: list[str] = []

    async def step(what: str, work: Callable[[], Awaitable[object]]) -> None:
        try:
            await work()
            report(f"✓ {what}")
        except Exception as error:
            problems.append(f"{what}: {error}")
            report(f"✗ {what}: {error}")

    def stop(*components: str) -> Callable[[], Awaitable[object]]:
        keys = [r.key for r in table.records() if r.component in components]
        return lambda: asyncio.gather(*(asyncio.to_thread(table.stop, k) for k in keys))

    await step("kubelets and proxies stopped", stop("kubelet", "proxy"))
    await step(
        "pod sandboxes removed through CRI",
        lambda: asyncio.gather(*(_remove_sandboxes(n, table) for n in lab.workers)),
    )
    await step("containerds stopped", stop("containerd"))
    await step("forwarder and server stopped", stop("forwarder", "server"))
    await step(
        "leftover processes killed (shims, pods, helpers)",
        lambda: asyncio.to_thread(_kill_leftovers, lab),
    )
    await step("mounts removed", lambda: asyncio.to_thread(_unmount, lab))
    await step("cgroups removed", lambda: asyncio.to_thread(_remove_cgroups, lab))
    await step("namespaces deleted", lambda: asyncio.to_thread(network.destroy, lab))
    await step(f"{lab.state_dir} removed", lambda: asyncio.to_thread(_remove_state, lab))
    if problems:
        raise LabError("down left things behind:\n" + "\n".join(problems))


async def _remove_sandboxes(node: Node, table: ProcessTable) -> None:
    record = table.get(key(node, "containerd"))
    if record is None or not record.alive():
        return  # no containerd: its shims and mounts are handled afterwards
    async with RuntimeClient(layout(node).endpoint, timeout=30) as cri:
        for sandbox in await cri.list_pod_sandbox():
            await cri.stop_pod_sandbox(sandbox.id)
            await cri.remove_pod_sandbox(sandbox.id)


def lab_processes(lab: Lab) -> set[int]:
    """Every process of the lab still running, however it was started: inside one of the
    lab's namespaces, naming the lab's state directory on its command line (shims name
    their containerd's socket, the kubelet's CNI agent its socket), or in the lab's cgroups
    (pods)."""
    namespaces = set()
    for node in lab.nodes:
        with contextlib.suppress(OSError):
            info = node.netns_path.stat()
            namespaces.add((info.st_dev, info.st_ino))
    marker = f"{lab.state_dir}/".encode()
    pids: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            info = (proc / "ns" / "net").stat()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in namespaces or marker in cmdline:
            pids.add(int(proc.name))
    for directory in lab_cgroups(lab):
        for procs in directory.rglob("cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in procs.read_text().split())
    pids.discard(os.getpid())
    return pids


def _kill_leftovers(lab: Lab) -> None:
    for pid in lab_processes(lab):
        terminate(pid, timeout=2)
    left = [pid for pid in lab_processes(lab) if _running(pid)]
    if left:
        raise LabError(f"processes left: {left}")


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def lab_mounts(lab: Lab) -> list[Path]:
    """Mount points under the lab's state directory, deepest first."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = Path(line.split()[1].replace("\\040", " "))
        if point.is_relative_to(lab.state_dir):
            found.append(point)
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _unmount(lab: Lab) -> None:
    for point in lab_mounts(lab):
        run("umount", "-l", point, check=False)
    left = lab_mounts(lab)
    if left:
        raise LabError(f"still mounted: {', '.join(map(str, left))}")


def _cgroup_hierarchies() -> Iterator[Path]:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] in ("cgroup", "cgroup2"):
            yield Path(fields[1])


def lab_cgroups(lab: Lab) -> list[Path]:
    """The lab's cgroup directory (``/kubelab/<lab>``) in every hierarchy that has it."""
    relative = Path(lab.workers[0].cgroup_root).parent.relative_to("/")
    return [d for d in (h / relative for h in _cgroup_hierarchies()) if d.is_dir()]


def _remove_state(lab: Lab) -> None:
    shutil.rmtree(lab.state_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        lab.state_dir.parent.rmdir()  # /run/kubelab, when no other lab uses it
    if lab.state_dir.exists():
        raise LabError(f"{lab.state_dir} could not be removed")


def _remove_cgroups(lab: Lab) -> None:
    for directory in lab_cgroups(lab):
        for cgroup in sorted(
            (p for p in directory.rglob("*") if p.is_dir()),
            key=lambda p: len(p.parts),
            reverse=True,
        ):
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        directory.rmdir()
        with contextlib.suppress(OSError):
            directory.parent.rmdir()  # /kubelab, when no other lab uses it
    left = lab_cgroups(lab)
    if left:
        raise LabError(f"cgroups left: {', '.join(map(str, left))}")
