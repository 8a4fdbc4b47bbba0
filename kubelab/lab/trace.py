"""``kubelab lab trace SOURCE DESTINATION``: one real probe, followed through the lab's kernel.

What Antrea's Traceflow does for its own datapath, done here with what the kernel already
offers any namespace: a probe (a TCP SYN, or a UDP datagram with ``--udp``) is sent from
inside SOURCE with an unassigned DSCP, and every namespace it may cross (each node's,
the router's, the client's, the source and destination pods', the pods behind a destination
Service's address or NodePort) gets ``node.trace``'s marking table and an ``nft monitor
trace`` for the duration.  Afterwards each namespace's events
say which chains and rules the probe met with which verdict, and the packet as each hook
saw it; that is enough to put the namespaces in order (a routed hop lowers the TTL; the
source comes first) and to say, per hop, the interfaces in and out, the route taken (``ip
route get`` with the incoming interface, as the kernel decided it), the rules with what
made each (``node.trace.Origins``), the NAT applied.  Then each node's ``conntrack`` entry
for the probe, and, where the lab's proxy writes the legacy tables (``--iptables-backend
libiptc``, invisible to nftrace), the rules whose counters grew.

The verdict: ``answered`` (the SYN was answered, or the datagram), ``delivered`` (a datagram
reached the destination without an answer) or ``dropped``, with where and why: the rule that
dropped or rejected it and what made that rule, a refusal, or the last namespace that saw
the probe and its route check (no route, rp_filter); a kube-proxy that is not running on a
node the probe crossed is noted (its rules outlive it).  In userspace proxy mode the probe ends
at the proxy process (a REDIRECT), which opens a connection of its own to the endpoint: the
trace says so rather than pretend to follow it.

The monitors are waited for, not slept on (``Monitor``: a sentinel packet each prints before
the probe and one after it); the marking tables are removed in a ``finally`` (also on
Ctrl-C) and the monitors ended by PID; one trace at a time per lab, since the tables share a
name.  Forms of SOURCE and DESTINATION: ``pod/NS/NAME``, ``svc/NS/NAME:PORT`` (a port number
or name), ``lb/NS/NAME:PORT`` (its load-balancer address), ``node/NAME``,
``nodeport/NODE:PORT``, ``client`` and an IP; a destination other than a Service needs
``:PORT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import json
import os
import random
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.discovery_v1 import EndpointSlice
from kube.client.rest import Client
from kube.table import aligned
from kubelab.lab.processes import CommandError, ProcessTable, nsenter, run
from kubelab.lab.topology import Lab, Node
from node import trace as kernel
from node.cni.network import host_veth_name
from node.netns import call_in_netns
from node.proxy import model

PROBE_PORTS: Final = range(20000, 30000)
"""Source ports of probes: below the NodePort range, outside the kernel's ephemeral one."""
SENTINEL_WAIT: Final = 3.0
"""How long a monitor may take to show it listens, or that it printed the probe's events."""
SENTINEL_EVERY: Final = 0.1
LOOPBACK: Final = "127.0.0.1"
PROBE_TIMEOUT: Final = 1.0
CGROUP_PIDS: Final = Path("/sys/fs/cgroup/pids")
MAX_ENDPOINT_PODS: Final = 8
LINE_BUFFERED: Final = ("stdbuf", "-oL")
"""nft's output into a pipe is block-buffered, and a monitor ended by a signal never
flushes it: line by line, every event printed is in the pipe when it ends."""
_POLICY: Final = re.compile(r"^NetworkPolicy [^/ ]+/[^/ ]+ ")


class TraceError(Exception):
    """A SOURCE or DESTINATION the lab has no such thing for, or a lab that is not up."""


@dataclass(frozen=True)
class Place:
    """Where a probe starts or is sent: its address, and (a namespace of the lab) where it
    lives and, for a pod, the host end of its veth."""

    label: str
    ip: str
    port: int = 0
    protocol: str = "tcp"
    netns: Path | None = None
    node: str = ""
    veth: str = ""


@dataclass(frozen=True)
class Snapshot:
    """What the trace reads of the cluster, once, before the probe."""

    pods: Sequence[Pod] = ()
    services: Sequence[Service] = ()
    slices: Sequence[EndpointSlice] = ()


async def read_cluster(lab: Lab) -> Snapshot:
    try:
        async with Client.from_kubeconfig(lab.host_kubeconfig, user_agent="kubelab-trace") as c:
            pods, services, slices = await asyncio.gather(
                c.list(Pod), c.list(Service), c.list(EndpointSlice)
            )
    except OSError as error:
        raise TraceError(f"the API server of lab {lab.name} does not answer ({error})") from error
    return Snapshot(pods.items, services.items, slices.items)


def resolve(lab: Lab, cluster: Snapshot, text: str, *, source: bool, udp: bool = False) -> Place:
    """The place ``text`` names (see the module docstring for the forms)."""
    kind, _, rest = text.partition("/")
    what, port = _split_port(rest if rest else text, text)
    protocol = "udp" if udp else "tcp"
    if source and port:
        raise TraceError(f"{text}: a source takes no port (the probe picks its own)")
    number = _needs(port, text) if port and kind not in ("svc", "lb") else 0
    if text == "client":
        node = lab.client
        return Place("client", node.ip, number, protocol, node.netns_path, node.name)
    if kind == "node" and rest:
        node = _node(lab, what, text)
        return Place(f"node {node.name}", node.ip, number, protocol, node.netns_path, node.name)
    if kind == "nodeport" and rest:
        node = _node(lab, what, text)
        return Place(f"NodePort {node.name}:{port}", node.ip, _needs(port, text), protocol)
    if kind == "pod" and rest:
        pod = _pod(cluster, what, text)
        return _pod_place(lab, pod, port, protocol)
    if kind in ("svc", "lb") and rest:
        return _service_place(cluster, kind, what, port, text, udp)
    try:
        ip = str(ipaddress.IPv4Address(what))
    except ValueError:
        raise TraceError(
            f"{text}: expected pod/NS/NAME, svc/NS/NAME:PORT, lb/NS/NAME:PORT, node/NAME, "
            "nodeport/NODE:PORT, client or an IPv4 address"
        ) from None
    return _ip_place(lab, cluster, ip, port, protocol, source, text)


def _split_port(text: str, whole: str) -> tuple[str, str]:
    head, sep, port = text.rpartition(":")
    if not sep:
        return text, ""
    if not port:
        raise TraceError(f"{whole}: empty port")
    return head, port


def _needs(port: str, text: str) -> int:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise TraceError(f"{text}: a destination needs :PORT (1-65535), got {port or 'none'}")
    return int(port)


def _node(lab: Lab, name: str, text: str) -> Node:
    try:
        return lab.node(name)
    except KeyError as error:
        raise TraceError(f"{text}: {error.args[0]}") from None


def _pod(cluster: Snapshot, what: str, text: str) -> Pod:
    namespace, _, name = what.partition("/")
    for pod in cluster.pods:
        if (pod.metadata.namespace, pod.metadata.name) == (namespace, name):
            return pod
    raise TraceError(f"{text}: no pod {name!r} in namespace {namespace!r}")


def _pod_place(lab: Lab, pod: Pod, port: str, protocol: str) -> Place:
    label = f"pod {pod.metadata.namespace}/{pod.metadata.name}"
    ip = pod.status.pod_ip if pod.status else None
    node_name = pod.spec.node_name if pod.spec else None
    if not ip or not node_name:
        raise TraceError(f"{label}: not running yet (no IP or node)")
    number = _needs(port, label) if port else 0
    node = lab.node(node_name)
    if pod.spec is not None and pod.spec.host_network:
        return Place(label, ip, number, protocol, node.netns_path, node.name)
    netns, sandbox = pod_netns(node.cgroup_root, pod)
    return Place(label, ip, number, protocol, netns, node.name, host_veth_name(sandbox, "eth0"))


def pod_netns(cgroup_root: str, pod: Pod) -> tuple[Path, str]:
    """The network namespace of a pod's processes (``/proc/PID/ns/net``) and its sandbox's
    ID: the one container of the pod's cgroup that is none of its containers."""
    statuses = (pod.status.container_statuses if pod.status else None) or []
    containers = {(status.container_id or "").partition("://")[2] for status in statuses}
    pod_dirs = (CGROUP_PIDS / cgroup_root.lstrip("/")).glob(f"**/pod{pod.metadata.uid}/*")
    found = sorted(d for d in pod_dirs if d.is_dir())
    sandbox = next((d.name for d in found if d.name not in containers), "")
    for directory in found:
        pids = (directory / "cgroup.procs").read_text().split()
        if pids and sandbox:
            return Path(f"/proc/{pids[0]}/ns/net"), sandbox
    raise TraceError(f"pod {pod.metadata.namespace}/{pod.metadata.name}: no process found")


def _service_place(
    cluster: Snapshot, kind: str, what: str, port: str, text: str, udp: bool
) -> Place:
    namespace, _, name = what.partition("/")
    service = next(
        (
            s
            for s in cluster.services
            if (s.metadata.namespace, s.metadata.name) == (namespace, name)
        ),
        None,
    )
    if service is None or service.spec is None:
        raise TraceError(f"{text}: no Service {name!r} in namespace {namespace!r}")
    ports = [
        p
        for p in service.spec.ports or []
        if port in (str(p.port), p.name or "") and (p.protocol or "TCP") != "SCTP"
    ]
    if not ports:
        have = ", ".join(f"{p.name or p.port}" for p in service.spec.ports or [])
        raise TraceError(f"{text}: Service {namespace}/{name} has no port {port} ({have})")
    chosen = next((p for p in ports if (p.protocol == "UDP") == udp), ports[0])
    protocol = (chosen.protocol or "TCP").lower()
    label = f"Service {namespace}/{name}:{chosen.port}/{protocol}"
    if kind == "svc":
        return Place(label, service.spec.cluster_ip or "", chosen.port or 0, protocol)
    status = service.status.load_balancer if service.status else None
    ips = [i.ip for i in (status.ingress if status else None) or [] if i.ip]
    if not ips:
        raise TraceError(f"{text}: Service {namespace}/{name} has no load-balancer address")
    return Place(f"LoadBalancer {ips[0]} of {label}", ips[0], chosen.port or 0, protocol)


def _ip_place(
    lab: Lab, cluster: Snapshot, ip: str, port: str, protocol: str, source: bool, text: str
) -> Place:
    for node in lab.nodes:
        if node.ip == ip:
            return Place(
                f"node {node.name}", ip, int(port or 0), protocol, node.netns_path, node.name
            )
    for pod in cluster.pods:
        if pod.status is not None and pod.status.pod_ip == ip:
            return _pod_place(lab, pod, port, protocol)
    if source:
        raise TraceError(f"{text}: no node or pod of lab {lab.name} has this address")
    return Place(ip, ip, _needs(port, text), protocol)


@dataclass(frozen=True)
class Rule:
    """A rule (or a base chain's policy) the probe met, and what made it."""

    chain: str
    rule: str
    verdict: str
    origin: str


@dataclass
class Hop:
    """One namespace the probe crossed, in order."""

    namespace: str
    iif: str = ""
    oif: str = ""
    saddr: str = ""
    sport: int = 0
    daddr: str = ""
    route: str = ""
    rules: list[Rule] = field(default_factory=list)
    nat: list[str] = field(default_factory=list)
    ttl: int = 0
    """The TTL the probe came in (or was sent) with."""
    last_ttl: int = 0
    """The TTL it left with."""
    peer: str = ""
    """A pod's: the host end of its veth, on the node's bridge."""


@dataclass
class Trace:
    """The whole answer: what ``-o json`` prints, and the table is made of."""

    source: str
    destination: str
    protocol: str
    probe: str
    verdict: str
    where: str
    why: str
    endpoint: str
    hops: list[Hop]
    conntrack: list[str]
    counters: list[str]
    notes: list[str]
    seconds: float


def probe(source: Place, destination: Place, port: int, dscp: int = kernel.DSCP) -> str:
    """Send the probe from inside ``source``; what came of it: ``answered``, ``refused``,
    ``reset`` (accepted, then reset), ``unreachable: WHY`` (the source's own routing said
    no, or an ICMP error came back from where the probe could go no further), ``failed:
    WHY``, ``sent`` (a datagram without an answer) or ``timeout``.  Blocking:
    run it in a worker thread."""
    assert source.netns is not None
    kind = socket.SOCK_DGRAM if destination.protocol == "udp" else socket.SOCK_STREAM
    sock = call_in_netns(source.netns, lambda: socket.socket(socket.AF_INET, kind))
    with sock:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dscp << 2)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.settimeout(PROBE_TIMEOUT)
        try:
            sock.bind(("", port))
            sock.connect((destination.ip, destination.port))
            if kind == socket.SOCK_STREAM:
                return "answered"
            sock.send(b"kubelab trace\n")
            sock.recv(512)
            return "answered"
        except TimeoutError:
            return "sent" if kind == socket.SOCK_DGRAM else "timeout"
        except ConnectionRefusedError:
            return "refused"
        except ConnectionResetError:
            return "reset"
        except OSError as error:
            why = os.strerror(error.errno) if error.errno else str(error)
            if error.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
                return f"unreachable: {why}"
            return f"failed: {why}"


def namespaces(lab: Lab, *places: Place) -> dict[str, Path]:
    """Every namespace a probe may cross: the lab's and the pods' of ``places``."""
    found = {n.name: n.netns_path for n in lab.nodes}
    for place in places:
        if place.netns is not None and place.veth:
            found[place.label] = place.netns
    return found


def endpoint_pods(lab: Lab, cluster: Snapshot, destination: Place) -> list[Place]:
    """The pods behind a Service's address or NodePort (up to ``MAX_ENDPOINT_PODS``), so
    the probe is followed into whichever the proxy picks."""
    ips: set[str] = set()
    for service in cluster.services:
        for port in model.service_ports(service):
            addresses = (port.cluster_ip, *port.external_ips, *port.load_balancer_ips)
            if (destination.ip in addresses and port.port == destination.port) or (
                destination.port == port.node_port and not destination.veth
            ):
                mine = [
                    s
                    for s in cluster.slices
                    if model.service_key_of_slice(s) == port.name.service_key
                ]
                ips |= {e.ip for e in model.endpoints_for(port, mine, "")}
    pods = [p for p in cluster.pods if p.status is not None and p.status.pod_ip in ips]
    places = []
    for pod in pods[:MAX_ENDPOINT_PODS]:
        try:
            places.append(_pod_place(lab, pod, "", "tcp"))
        except TraceError:
            continue  # going away: the probe cannot be followed into it
    return places


async def run_trace(
    lab: Lab, source_text: str, destination_text: str, *, udp: bool = False
) -> Trace:
    """Resolve both ends, probe, collect and explain (see the module docstring)."""
    if not lab.process_file.exists():
        raise TraceError(f"lab {lab.name} is not up")
    started = time.monotonic()
    cluster = await read_cluster(lab)
    source = resolve(lab, cluster, source_text, source=True)
    destination = resolve(lab, cluster, destination_text, source=False, udp=udp)
    if source.netns is None:
        raise TraceError(f"{source_text}: not a namespace of the lab a probe can start in")
    port = random.choice(PROBE_PORTS)
    spaces = namespaces(lab, source, destination, *endpoint_pods(lab, cluster, destination))
    legacy = lab.spec.iptables_backend == "libiptc"
    kube_nodes = {n.name: n.netns_path for n in lab.kubernetes_nodes}
    outputs, outcome, before = await _probe_traced(
        spaces, source, destination, port, legacy, kube_nodes
    )
    origins = kernel.Origins(cluster.services, cluster.slices)
    events = {name: kernel.parse_trace(text) for name, text in outputs.items()}
    hops = build_hops(events, source.label if source.veth else source.node, port, origins)
    for place in (source, destination):
        for hop in (h for h in hops if h.namespace == place.label and place.veth):
            hop.peer = f"eth0's veth peer is {place.veth} on {place.node}"
    await asyncio.gather(*(_route(spaces[h.namespace], h) for h in hops))
    entries = await _conntrack(
        kube_nodes | {lab.router.name: lab.router.netns_path}, destination, hops
    )
    counters: list[str] = []
    if legacy:
        after = await _saves(kube_nodes)
        for node, saved in after.items():
            for grown in kernel.grown_counters(before.get(node, ""), saved):
                origin = origins.of_chain(grown.chain) or origins.of_chain(grown.rule.split()[-1])
                counters.append(
                    f"{node} {grown.table} {grown.rule} (+{grown.packets}) {origin}".rstrip()
                )
    verdict, where, why = judge(outcome, hops, destination)
    dnat = (n.removeprefix("DNAT to ") for h in hops for n in h.nat if n.startswith("DNAT to "))
    endpoint = next(dnat, "")
    if not endpoint and entries:
        endpoint = entries[0][1].destination
    notes = _notes(lab, hops, outcome)
    return Trace(
        source=f"{source.label} ({source.ip}:{port})",
        destination=f"{destination.label} ({destination.ip}:{destination.port})",
        protocol=destination.protocol,
        probe=outcome,
        verdict=verdict,
        where=where,
        why=why,
        endpoint=endpoint,
        hops=hops,
        conntrack=[f"{node}: {entry.text()}" for node, entry in entries],
        counters=counters,
        notes=notes,
        seconds=round(time.monotonic() - started, 3),
    )


class Monitor:
    """``nft monitor trace`` in one namespace, its lines read as they come, and the
    sentinels it has printed: datagrams from the namespace to its own 127.0.0.1 at the
    probe's source port, which the marking table traces (as a reply, so no hop counts them).
    The kernel hands a monitor its events in order, so once it prints a sentinel sent after
    the probe it has printed every event of the probe; once it prints one at all, it is
    listening.  This replaces guessing how long a monitor takes on a busy machine."""

    def __init__(self, netns: Path, port: int) -> None:
        self.netns = netns
        self.port = port
        self.lines: list[str] = []
        self.sentinels = 0
        self._seen = asyncio.Event()
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *nsenter(self.netns), *LINE_BUFFERED, "nft", "monitor", "trace",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        async for raw in self._process.stdout:
            line = raw.decode(errors="replace")
            self.lines.append(line)
            if " packet: " in line:
                packet = kernel.Packet.parse(line)
                # Counted once, as it leaves (output hook): it comes back in on lo too.
                if packet.daddr == LOOPBACK and packet.dport == self.port and not packet.iif:
                    self.sentinels += 1
                    self._seen.set()

    async def sentinel_seen(self, after: int) -> bool:
        """Send sentinels until the monitor has printed more than ``after`` of them
        (False if it has not within ``SENTINEL_WAIT``)."""
        deadline = time.monotonic() + SENTINEL_WAIT
        while self.sentinels <= after and time.monotonic() < deadline:
            self._seen.clear()
            await asyncio.to_thread(_send_sentinel, self.netns, self.port)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._seen.wait(), SENTINEL_EVERY)
        return self.sentinels > after

    async def stop(self) -> str:
        """End the monitor (by its PID) and return what it printed."""
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
        if self._process is not None:
            await self._process.wait()
        if self._reader is not None:
            await self._reader
        return "".join(self.lines)


def _send_sentinel(netns: Path, port: int) -> None:
    sock = call_in_netns(netns, lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    with sock, contextlib.suppress(OSError):
        sock.sendto(b"", (LOOPBACK, port))


async def _probe_traced(
    spaces: dict[str, Path],
    source: Place,
    destination: Place,
    port: int,
    legacy: bool,
    kube_nodes: dict[str, Path],
) -> tuple[dict[str, str], str, dict[str, str]]:
    """Mark, monitor, probe, and unmark whatever happens: each namespace's trace output,
    the probe's outcome and (legacy tables) the saves from before it."""
    monitors = {name: Monitor(path, port) for name, path in spaces.items()}
    marking = "\n".join(kernel.marking_table(port)) + "\n"
    unmarking = "\n".join(kernel.unmarking_table()) + "\n"
    try:
        await asyncio.gather(
            *(
                asyncio.to_thread(run, "nft", "-f", "-", netns=p, input=marking)
                for p in spaces.values()
            )
        )
        before = await _saves(kube_nodes) if legacy else {}
        await asyncio.gather(*(m.start() for m in monitors.values()))
        await asyncio.gather(*(m.sentinel_seen(0) for m in monitors.values()))
        outcome = await asyncio.to_thread(probe, source, destination, port)
        await asyncio.gather(*(m.sentinel_seen(m.sentinels) for m in monitors.values()))
    finally:
        outputs = {name: await monitor.stop() for name, monitor in monitors.items()}
        await asyncio.gather(
            *(
                asyncio.to_thread(run, "nft", "-f", "-", netns=p, input=unmarking, check=False)
                for p in spaces.values()
            )
        )
    return outputs, outcome, before


async def _saves(nodes: dict[str, Path]) -> dict[str, str]:
    """``iptables-legacy-save -c`` of each node (the legacy tables' counters)."""
    saved = await asyncio.gather(
        *(asyncio.to_thread(run, "iptables-legacy-save", "-c", netns=p) for p in nodes.values())
    )
    return dict(zip(nodes, saved, strict=True))


def build_hops(
    events: dict[str, list[kernel.TraceEvent]], source: str, port: int, origins: kernel.Origins
) -> list[Hop]:
    """The namespaces that saw the probe going out, in the order it crossed them: what the
    source sent first, then by falling TTL (each router lowers it), a namespace where the
    probe only arrived (TTL as it came in) after the one that forwarded it.  A namespace
    crossed twice (the router, before a node's DNAT and after it; a pod reaching itself
    through a Service) is a hop each time: a crossing starts where the marking table's
    rule marks the probe (once per crossing)."""
    hops = []
    for namespace, seen in events.items():
        crossing: list[kernel.TraceEvent] = []
        for event in (e for e in seen if e.packet.dport != port):
            if event.ours and not event.is_policy and crossing:
                hops.append(_hop(namespace, crossing, origins))
                crossing = []
            crossing.append(event)
        if crossing:
            hops.append(_hop(namespace, crossing, origins))
    hops.sort(key=lambda h: (h.namespace != source or bool(h.iif), -h.ttl, -h.last_ttl, not h.oif))
    return hops


def _hop(namespace: str, events: list[kernel.TraceEvent], origins: kernel.Origins) -> Hop:
    packets = [e.packet for e in events]
    hop = Hop(
        namespace=namespace,
        iif=next((p.iif for p in packets if p.iif), ""),
        oif=next((p.oif for p in reversed(packets) if p.oif), ""),
        saddr=packets[0].saddr,
        sport=packets[0].sport,
        daddr=packets[-1].daddr,
        ttl=max(p.ttl for p in packets),
        last_ttl=min(p.ttl for p in packets),
    )
    for event in events:
        if event.ours or (event.is_policy and event.verdict != "drop"):
            continue
        chain = f"{event.family} {event.table} {event.chain}"
        hop.rules.append(Rule(chain, event.rule or "policy", event.verdict, origins.of(event)))
        if event.dnat:
            hop.nat.append(f"DNAT to {event.dnat}")
        elif event.redirect:
            hop.nat.append(f"REDIRECT to the proxy's port {event.redirect}")
        elif "masquerade" in event.rule and event.verdict == "accept":
            hop.nat.append("masquerade (source: the outgoing interface's address)")
    return hop


async def _route(netns: Path, hop: Hop) -> None:
    """The kernel's route for the hop's packet: ``ip route get`` with the incoming
    interface (as it arrived) or without (the namespace that sent it)."""
    if not hop.daddr:
        return
    argv = ["ip", "-o", "route", "get", hop.daddr]
    if hop.iif and hop.saddr:
        argv += ["from", hop.saddr, "iif", hop.iif]
    try:
        answer = await asyncio.to_thread(run, *argv, netns=netns, timeout=5)
    except CommandError as error:
        hop.route = f"no route: {error.output.strip() or error}"
        return
    hop.route = " ".join(answer.split("\\")[0].split())


async def _conntrack(
    nodes: dict[str, Path], destination: Place, hops: list[Hop]
) -> list[tuple[str, kernel.Conntrack]]:
    """Each crossed node's conntrack entry of the probe, looked for by the source address and
    port its packet had there (a masquerade upstream changes them)."""
    command = ("conntrack", "-L", "-p", destination.protocol, "--orig-port-src")
    crossed = [(h.namespace, h.saddr, h.sport) for h in hops if h.namespace in nodes]
    lists = await asyncio.gather(
        *(
            asyncio.to_thread(run, *command, str(sport), netns=nodes[name], check=False)
            for name, _, sport in crossed
        )
    )
    return [
        (name, entry)
        for (name, saddr, sport), text in zip(crossed, lists, strict=True)
        for entry in kernel.parse_conntrack(text)
        if entry.original[0] == saddr and entry.original[2] == sport
    ]


def judge(outcome: str, hops: list[Hop], destination: Place) -> tuple[str, str, str]:
    """``(verdict, where, why)`` from the probe's outcome and the hops."""
    for hop in hops:
        for rule in hop.rules:
            if rule.verdict == "drop":
                how = "rejected" if "reject" in rule.rule or "reject" in rule.chain else "dropped"
                policies = [r.origin for r in hop.rules if _POLICY.match(r.origin)]
                if rule.origin.startswith("NetworkPolicy:") and policies:
                    return (
                        "dropped",
                        hop.namespace,
                        f"{how}: {', '.join(policies)} selects the pod and allows none of it",
                    )
                return (
                    "dropped",
                    hop.namespace,
                    f"{how} by {rule.chain}: {rule.rule} ({rule.origin or 'no known origin'})",
                )
    if outcome == "answered":
        return "answered", hops[-1].namespace if hops else "", ""
    last = hops[-1] if hops else Hop(namespace="")
    redirected = next((h for h in hops if any(n.startswith("REDIRECT") for n in h.nat)), None)
    if outcome == "refused":
        if redirected is not None:
            return (
                "dropped",
                redirected.namespace,
                "refused at the userspace proxy's port: is kube-proxy running there?",
            )
        return (
            "answered",
            last.namespace,
            f"refused: nothing listens on {destination.port}/{destination.protocol} there",
        )
    if outcome == "reset":
        if redirected is not None:
            return (
                "dropped",
                redirected.namespace,
                "reset by the userspace proxy: no endpoint it could relay to",
            )
        return "answered", last.namespace, "reset by the destination"
    if outcome == "sent" and destination.veth and last.namespace == destination.label:
        return "delivered", last.namespace, "no answer to the datagram"
    if outcome.startswith("failed") or (outcome.startswith("unreachable") and not hops):
        # Unreachable without a hop: the source's own routing refused to send it.
        return "dropped", hops[0].namespace if hops else "", outcome
    why = f"the probe was last seen here (route: {last.route or 'none'})"
    if "cross-device" in last.route:
        why = f"rp_filter: the source {last.saddr} is not reachable back through {last.iif}"
    elif last.route.startswith("no route"):
        why = f"no route to {last.daddr} ({last.route.removeprefix('no route: ')})"
    if outcome.startswith("unreachable"):
        # An ICMP error from the namespace that could not forward it (or from past it).
        why += f"; the source was told: {outcome.removeprefix('unreachable: ')}"
    return "dropped", last.namespace, why


def _notes(lab: Lab, hops: list[Hop], outcome: str) -> list[str]:
    notes = []
    table = ProcessTable(lab.process_file)
    kube_nodes = {n.name for n in lab.kubernetes_nodes}
    for name in dict.fromkeys(h.namespace for h in hops if h.namespace in kube_nodes):
        record = table.get(f"{name}/proxy")
        if record is None or not record.alive():
            notes.append(f"kube-proxy on {name} is not running: its rules are as it left them")
    for hop in hops:
        if any(n.startswith("REDIRECT") for n in hop.nat) and outcome == "answered":
            notes.append(
                f"relayed by kube-proxy (userspace) on {hop.namespace}: it opens its own "
                "connection to an endpoint, which this trace does not follow"
            )
    if lab.spec.iptables_backend == "libiptc":
        notes.append(
            "kube-proxy writes the legacy tables here: its rules show as counters, not in the hops"
        )
    return notes


def render_table(trace: Trace) -> str:
    """The trace for people: a summary, one row per rule of each hop, then the rest."""
    lines = [
        f"{trace.source} → {trace.destination} ({trace.protocol}): {trace.verdict.upper()}"
        + (f" at {trace.where}" if trace.where and trace.verdict != "answered" else "")
        + (f": {trace.why}" if trace.why else ""),
    ]
    if trace.endpoint:
        lines.append(f"endpoint: {trace.endpoint}")
    rows = [("HOP", "IN", "OUT", "CHAIN", "RULE", "VERDICT", "MADE BY")]
    for hop in trace.hops:
        first = (hop.namespace, hop.iif or "-", hop.oif or "-")
        if not hop.rules:
            rows.append((*first, "-", "-", "-", "-"))
        for i, rule in enumerate(hop.rules):
            rows.append(
                (
                    *(first if i == 0 else ("", "", "")),
                    rule.chain,
                    rule.rule,
                    rule.verdict,
                    rule.origin or "-",
                )
            )
    lines += aligned(rows)
    for hop in trace.hops:
        extra = [hop.peer] if hop.peer else []
        extra += [f"route: {hop.route}"] if hop.route else []
        extra += hop.nat
        if extra:
            lines.append(f"{hop.namespace}: " + "; ".join(extra))
    lines += [f"conntrack {line}" for line in trace.conntrack]
    lines += [f"counter {line}" for line in trace.counters]
    lines += [f"note: {note}" for note in trace.notes]
    lines.append(f"({trace.seconds:.2f}s)")
    return "\n".join(lines)


def render_json(trace: Trace) -> str:
    return json.dumps(asdict(trace), indent=2)
