"""What ``kubelab lab status`` adds for an etcd lab: the etcd members, the load balancer's view
and who holds each control-plane component's Lease.

Split in two so the rendering is a pure function of collected data (unit-tested without a
lab): ``collect`` asks the running lab, ``render`` turns an ``HAStatus`` into lines.

- etcd: each member asked on its own with ``etcdctl`` (the Debian package's, v3 API) from
  inside the router's namespace (the single control plane's, without HA, whose member
  listens on its loopback): ``endpoint status`` (member ID, leader ID, raft term and index)
  and ``endpoint health`` (a quorum answers), names from ``member list``.  One member asked
  per call, so a dead member costs only its own line;
- the load balancer (HA): the state file it rewrites whenever a target goes in or out
  (``Lab.loadbalancer_state``);
- the Leases ``kube-system/kube-scheduler``, ``kube-controller-manager`` and
  ``cloud-controller-manager``: holder identity, read through the host forwarder.  An HA
  server runs with its node's name as hostname, so the identity (``<hostname>_<uuid>``)
  names the node holding it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kube.api.kinds.coordination_v1 import Lease
from kube.client.errors import ApiError
from kube.client.rest import Client
from kubelab.lab import components
from kubelab.lab.etcd import CLIENT_PORT
from kubelab.lab.processes import CommandError, run
from kubelab.lab.topology import Lab

LEASES: Final = ("kube-scheduler", "kube-controller-manager", "cloud-controller-manager")
ETCDCTL: Final = "etcdctl"
ETCDCTL_TIMEOUT: Final = "2s"


@dataclass(frozen=True)
class MemberStatus:
    """One etcd member as ``endpoint status`` and ``endpoint health`` answered (``error``:
    why it did not)."""

    name: str
    endpoint: str
    member_id: int | None = None
    healthy: bool = False
    leader: bool = False
    raft_term: int | None = None
    raft_index: int | None = None
    error: str = ""


@dataclass(frozen=True)
class Backend:
    address: str
    healthy: bool
    clients: tuple[str, ...] = ()
    """The clients (``ip:port`` as the balancer sees them) relayed to it now."""


@dataclass(frozen=True)
class Holder:
    """Who holds a Lease: its identity and the lab node that names (None: unknown)."""

    lease: str
    identity: str | None
    node: str | None
    transitions: int = 0


@dataclass(frozen=True)
class HAStatus:
    members: tuple[MemberStatus, ...] = ()
    backends: tuple[Backend, ...] | None = None
    """None: no load balancer (one control plane) or its state file is missing."""
    holders: tuple[Holder, ...] = ()
    leases_error: str = ""

    @property
    def healthy(self) -> bool:
        """Every member healthy with one leader, and the load balancer has a server."""
        leaders = sum(m.leader for m in self.members)
        backends_ok = self.backends is None or any(b.healthy for b in self.backends)
        return all(m.healthy for m in self.members) and leaders == 1 and backends_ok


def render(status: HAStatus) -> list[str]:
    """The lines ``status`` prints for an etcd lab."""
    lines = ["etcd members:"]
    for m in status.members:
        if m.error:
            lines.append(f"  {m.name:<14} {m.endpoint:<22} unreachable: {m.error}")
            continue
        role = "leader" if m.leader else "follower"
        lines.append(
            f"  {m.name:<14} {m.endpoint:<22} id {m.member_id or 0:016x} "
            f"{'healthy' if m.healthy else 'UNHEALTHY':<9} {role:<8} "
            f"term {m.raft_term} index {m.raft_index}"
        )
    if status.backends is not None:
        healthy = [b.address for b in status.backends if b.healthy]
        out = [b.address for b in status.backends if not b.healthy]
        line = f"load balancer: healthy {', '.join(healthy) or 'none'}"
        lines.append(line + (f"; out: {', '.join(out)}" if out else ""))
    lines.append("leases (kube-system):")
    if status.leases_error:
        lines.append(f"  not readable: {status.leases_error}")
    for h in status.holders:
        holder = f"{h.node or '?'} ({h.identity})" if h.identity else "nobody"
        lines.append(f"  {h.lease:<25} {holder}, transitions {h.transitions}")
    return lines


def parse_member(
    name: str, endpoint: str, status_json: str, health_json: str, names: dict[int, str]
) -> MemberStatus:
    """A member from ``etcdctl endpoint status -w json`` and ``endpoint health -w json``
    output, log lines around the JSON allowed (``names``: member IDs to names from ``member
    list``).  A member cut off from the others answers without a leader."""
    status: Any = _json_line(status_json, "[")[0]["Status"]
    health: Any = _json_line(health_json, "[")[0]
    member_id = int(status["header"]["member_id"])
    return MemberStatus(
        name=names.get(member_id) or name,
        endpoint=endpoint,
        member_id=member_id,
        healthy=bool(health.get("health")),
        leader=int(status.get("leader", 0)) == member_id,
        raft_term=int(status["raftTerm"]),
        raft_index=int(status["raftIndex"]),
    )


def _json_line(output: str, opening: str) -> Any:
    """The JSON document starting with ``opening`` among etcdctl's output lines (it logs
    warnings, JSON objects themselves, beside it)."""
    for line in output.splitlines():
        if line.startswith(opening) and not line.startswith('{"level"'):
            return json.loads(line)
    raise ValueError(f"no JSON in {output!r}")


def parse_member_names(member_list_json: str) -> dict[int, str]:
    """Member IDs to names from ``etcdctl member list -w json``."""
    data: Any = _json_line(member_list_json, "{")
    return {int(m["ID"]): str(m.get("name", "")) for m in data.get("members", [])}


def parse_backends(state_json: str) -> tuple[Backend, ...]:
    """The load balancer's state file (``netns.NetnsForwarder.describe`` under ``backends``)."""
    data: Any = json.loads(state_json)
    return tuple(
        Backend(str(b["address"]), bool(b["healthy"]), tuple(b.get("clients", ())))
        for b in data["backends"]
    )


def holder(lab: Lab, lease: Lease) -> Holder:
    """Who holds ``lease``: its identity, and the node whose name prefixes it."""
    spec = lease.spec
    identity = spec.holder_identity if spec is not None else None
    names = {n.name for n in lab.controlplanes}
    hostname = (identity or "").rpartition("_")[0]
    return Holder(
        lease.metadata.name or "",
        identity or None,
        hostname if hostname in names else None,
        (spec.lease_transitions or 0) if spec is not None else 0,
    )


def _etcd_members(lab: Lab) -> list[tuple[str, str, Path]]:
    """(name, endpoint, namespace to ask from) per member."""
    if lab.ha:
        cluster = components.etcd_cluster(lab)
        return [(m.name, m.endpoint, lab.router.netns_path) for m in cluster.members]
    cp = lab.controlplane
    return [(cp.name, f"127.0.0.1:{CLIENT_PORT}", cp.netns_path)]


def _etcdctl(netns: Path, endpoint: str, *args: str) -> str:
    return run(
        ETCDCTL, f"--endpoints={endpoint}", f"--command-timeout={ETCDCTL_TIMEOUT}",
        "-w", "json", *args, netns=netns, timeout=10,
    )  # fmt: skip


def _member(name: str, endpoint: str, netns: Path, names: dict[int, str]) -> MemberStatus:
    try:
        status = _etcdctl(netns, endpoint, "endpoint", "status")
    except CommandError as error:
        return MemberStatus(name, endpoint, error=_etcdctl_error(error))
    try:
        health = _etcdctl(netns, endpoint, "endpoint", "health")
    except CommandError as error:
        health = error.output  # an unhealthy member: etcdctl still prints the JSON, exit 1
    try:
        return parse_member(name, endpoint, status, health, names)
    except (ValueError, KeyError, IndexError) as error:
        return MemberStatus(name, endpoint, error=f"unexpected etcdctl output: {error}")


def _etcdctl_error(error: CommandError) -> str:
    """etcdctl's ``Error: ...`` line (its other lines are JSON logs)."""
    lines = [line for line in error.output.splitlines() if line.startswith("Error:")]
    return lines[0].removeprefix("Error:").strip() if lines else str(error)


def collect_members(lab: Lab) -> tuple[MemberStatus, ...]:
    """Every member's status (blocking: run it in a thread)."""
    members = _etcd_members(lab)
    names: dict[int, str] = {}
    for _, endpoint, netns in members:
        try:
            names = parse_member_names(_etcdctl(netns, endpoint, "member", "list"))
            break
        except (CommandError, ValueError, KeyError):
            continue
    return tuple(_member(name, endpoint, netns, names) for name, endpoint, netns in members)


def read_backends(lab: Lab) -> tuple[Backend, ...] | None:
    if not lab.ha:
        return None
    try:
        return parse_backends(lab.loadbalancer_state.read_text())
    except (OSError, ValueError, KeyError):
        return None


async def collect(lab: Lab) -> HAStatus:
    """The HA status of a running etcd lab."""
    members = asyncio.create_task(asyncio.to_thread(collect_members, lab))
    holders: list[Holder] = []
    error = ""
    try:
        async with Client.from_kubeconfig(lab.host_kubeconfig, user_agent="kubelab-lab") as c:
            for name in LEASES:
                try:
                    holders.append(holder(lab, await c.get(Lease, name, "kube-system")))
                except ApiError as missing:
                    if not missing.not_found:
                        raise
                    holders.append(Holder(name, None, None))
    except (OSError, ApiError, ValueError) as failed:
        error = str(failed) or type(failed).__name__
    return HAStatus(
        members=await members,
        backends=read_backends(lab),
        holders=tuple(holders),
        leases_error=error,
    )
