"""The real kubelet's resource usage, read from cgroups (v1, as on the project's machines, or v2).

Where to read: the runtime manager gives each sandbox its pod cgroup (``cgroups.
pod_cgroup_parent``, recorded on the sandbox) and containerd's runc, with the cgroupfs driver,
puts each container in ``<pod cgroup>/<container id>``.  The node is the root cgroup, as
upstream's (cAdvisor's ``/``): everything the machine runs.  The lab's nodes share one machine,
so each reports the machine's usage, which is what their kubelets see of it.

What to read, per cgroup (``SysCgroupReader``, behind ``CgroupReader`` so tests give it a
tree in a temporary directory):

- v1: ``cpuacct.usage`` (cumulative nanoseconds) in the cpuacct hierarchy (``cpuacct``, or
  the joint ``cpu,cpuacct``), ``memory.usage_in_bytes`` and ``memory.stat``'s
  ``total_inactive_file`` in the memory hierarchy;
- v2 (``cgroup.controllers`` at the root): ``cpu.stat``'s ``usage_usec``, ``memory.current``
  and ``memory.stat``'s ``inactive_file``; the root has no ``memory.current``, so the node's
  memory comes from ``/proc/meminfo`` there (MemTotal - MemFree, less ``Inactive(file)``).

The working set is usage minus inactive file pages, never below zero, as cAdvisor computes it.
A cgroup that is not there (a container that just went) is skipped, not an error.
"""

from __future__ import annotations

import datetime
import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kube.api.kinds.core_v1.pod import Pod
from kube.clock import Clock
from node.kubelet.runtime.state import PodRuntimeState
from node.kubelet.stats import (
    ContainerStats,
    CPUStats,
    MemoryStats,
    NodeStats,
    PodStats,
    Rates,
    Summary,
)


@dataclass(frozen=True)
class CgroupUsage:
    """One cgroup's figures, read at one moment."""

    cpu_ns: int
    memory_usage: int
    working_set: int


class CgroupReader(Protocol):
    def read(self, cgroup_path: str) -> CgroupUsage | None:
        """The cgroup's usage now; None when it is not there."""
        ...


def _stat(path: Path, key: str) -> int:
    """The value of ``key`` in a flat-keyed file (``memory.stat``, ``cpu.stat``); 0 if absent."""
    for line in path.read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def _below(root: Path, cgroup_path: str) -> Path:
    parts = [p for p in cgroup_path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"invalid cgroup path {cgroup_path!r}")
    return root.joinpath(*parts)


class SysCgroupReader:
    """Reads cgroups under ``root`` (``/sys/fs/cgroup``), v2 when it is a cgroup2 mount."""

    CPUACCT = ("cpuacct", "cpu,cpuacct", "cpuacct,cpu")

    def __init__(
        self, root: Path = Path("/sys/fs/cgroup"), meminfo: Path = Path("/proc/meminfo")
    ) -> None:
        self.root = root
        self.meminfo = meminfo
        self.v2 = (root / "cgroup.controllers").exists()
        self._cpuacct = next(
            (root / name for name in self.CPUACCT if (root / name).is_dir()), root / "cpuacct"
        )

    def read(self, cgroup_path: str) -> CgroupUsage | None:
        try:
            if self.v2:
                return self._read_v2(_below(self.root, cgroup_path))
            return self._read_v1(cgroup_path)
        except FileNotFoundError:
            return None

    def _read_v1(self, cgroup_path: str) -> CgroupUsage:
        cpu = int((_below(self._cpuacct, cgroup_path) / "cpuacct.usage").read_text())
        memory = _below(self.root / "memory", cgroup_path)
        usage = int((memory / "memory.usage_in_bytes").read_text())
        inactive = _stat(memory / "memory.stat", "total_inactive_file")
        return CgroupUsage(cpu, usage, max(usage - inactive, 0))

    def _read_v2(self, directory: Path) -> CgroupUsage:
        cpu = _stat(directory / "cpu.stat", "usage_usec") * 1000
        if directory == self.root:
            info = {
                name: int(value.split()[0])
                for name, _, value in (
                    line.partition(":") for line in self.meminfo.read_text().splitlines()
                )
            }
            usage = (info["MemTotal"] - info["MemFree"]) * 1024
            inactive = info["Inactive(file)"] * 1024
        else:
            usage = int((directory / "memory.current").read_text())
            inactive = _stat(directory / "memory.stat", "inactive_file")
        return CgroupUsage(cpu, usage, max(usage - inactive, 0))


RunningPod = tuple[Pod, PodRuntimeState]


NODE_CGROUP = "/"


class CgroupStatsProvider:
    """The kubelet's ``StatsProvider``: the root cgroup, and each running pod's and
    running container's cgroup, read at once.  ``running`` lists the pods the kubelet runs
    with the runtime's last view of each (the PLEG's)."""

    def __init__(
        self,
        node_name: str,
        reader: CgroupReader,
        running: Callable[[], Iterable[RunningPod]],
        clock: Clock,
    ) -> None:
        self.node_name = node_name
        self.reader = reader
        self.running = running
        self.clock = clock
        self.start_time = clock.now()
        self.rates = Rates()

    async def summary(self) -> Summary:
        return self.measure()

    def measure(self) -> Summary:
        now = self.clock.now()
        measured: set[str] = set()

        def read(path: str) -> tuple[CgroupUsage, datetime.datetime] | None:
            usage = self.reader.read(path)
            if usage is not None:
                measured.add(path)
            return (usage, now) if usage is not None else None

        node_usage = read(NODE_CGROUP)
        pods = []
        for pod, state in self.running():
            sandbox = state.sandbox
            if sandbox is None or not sandbox.cgroup_parent:
                continue
            containers = []
            for container in state.containers:
                if container.state != "running":
                    continue
                path = posixpath.join(sandbox.cgroup_parent, container.id)
                usage = read(path)
                if usage is None:
                    continue
                cpu, memory = self._stats(path, *usage)
                start = container.started_at or container.created_at
                containers.append(ContainerStats(container.name, start, cpu, memory))
            pod_usage = read(sandbox.cgroup_parent)
            pod_cpu, pod_memory = (
                self._stats(sandbox.cgroup_parent, *pod_usage) if pod_usage else (None, None)
            )
            pods.append(
                PodStats(
                    pod.metadata.namespace or "",
                    pod.metadata.name or "",
                    pod.metadata.uid or "",
                    (pod.status.start_time if pod.status else None) or sandbox.created_at,
                    containers,
                    pod_cpu,
                    pod_memory,
                )
            )
        node_cpu, node_memory = (
            self._stats(NODE_CGROUP, *node_usage) if node_usage else (None, None)
        )
        self.rates.keep(measured)
        return Summary(NodeStats(self.node_name, self.start_time, node_cpu, node_memory), pods)

    def _stats(
        self, key: str, usage: CgroupUsage, at: datetime.datetime
    ) -> tuple[CPUStats, MemoryStats]:
        return self.rates.cpu(key, at, usage.cpu_ns), MemoryStats(
            at, usage.working_set, usage.memory_usage
        )
