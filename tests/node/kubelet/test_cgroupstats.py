"""Reading resource usage from cgroup trees built in temporary directories (v1 with separate or
joint cpu and cpuacct hierarchies, and v2), and the kubelet's provider placing the node, pods and
containers as the runtime manager and runc place their cgroups."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from kube.api.kinds.core_v1.pod import Pod, PodSpec
from kube.api.meta_v1 import ObjectMeta
from kube.clock import FakeClock
from node.kubelet.cgroupstats import CgroupStatsProvider, CgroupUsage, SysCgroupReader
from node.kubelet.runtime.state import PodRuntimeState, SandboxState
from node.kubelet.stats import CPUStats, MemoryStats
from node.kubelet.status import RuntimeContainer

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
POD_CGROUP = "/kubepods/burstable/podu1"


def _v1(root: Path, path: str, cpu_ns: int, usage: int, inactive: int, cpuacct: str) -> None:
    cpu = root / cpuacct / path.strip("/")
    cpu.mkdir(parents=True, exist_ok=True)
    (cpu / "cpuacct.usage").write_text(f"{cpu_ns}\n")
    memory = root / "memory" / path.strip("/")
    memory.mkdir(parents=True, exist_ok=True)
    (memory / "memory.usage_in_bytes").write_text(f"{usage}\n")
    (memory / "memory.stat").write_text(
        f"cache 100\nrss 200\ninactive_file 7\ntotal_cache 300\ntotal_inactive_file {inactive}\n"
    )


def _v2(root: Path, path: str, cpu_us: int, usage: int, inactive: int) -> None:
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    directory = root / path.strip("/")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cpu.stat").write_text(
        f"usage_usec {cpu_us}\nuser_usec {cpu_us - 10}\nsystem_usec 10\n"
    )
    (directory / "memory.current").write_text(f"{usage}\n")
    (directory / "memory.stat").write_text(f"anon 1000\nfile 5000\ninactive_file {inactive}\n")


@pytest.mark.parametrize("cpuacct", ["cpuacct", "cpu,cpuacct"], ids=["separate", "joint"])
def test_v1_reads_cpuacct_and_working_set(tmp_path: Path, cpuacct: str) -> None:
    _v1(tmp_path, POD_CGROUP, 5_000_000_000, 40_000_000, 15_000_000, cpuacct)
    reader = SysCgroupReader(tmp_path)
    assert not reader.v2
    assert reader.read(POD_CGROUP) == CgroupUsage(5_000_000_000, 40_000_000, 25_000_000)


def test_v2_reads_cpu_stat_and_working_set(tmp_path: Path) -> None:
    _v2(tmp_path, POD_CGROUP, 1_500_000, 8_192_000, 4_096_000)
    reader = SysCgroupReader(tmp_path)
    assert reader.v2
    assert reader.read(POD_CGROUP) == CgroupUsage(1_500_000_000, 8_192_000, 4_096_000)


def test_v2_root_memory_comes_from_meminfo(tmp_path: Path) -> None:
    _v2(tmp_path, "/", 7_000, 0, 0)
    (tmp_path / "memory.current").unlink()
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(
        "MemTotal:       16000 kB\nMemFree:         6000 kB\nInactive(file):   2500 kB\n"
    )
    reader = SysCgroupReader(tmp_path, meminfo)
    assert reader.read("/") == CgroupUsage(7_000_000, 10_240_000, 7_680_000)


def test_working_set_never_below_zero_and_absent_cgroups_are_none(tmp_path: Path) -> None:
    _v1(tmp_path, POD_CGROUP, 1, 1000, 5000, "cpuacct")
    reader = SysCgroupReader(tmp_path)
    assert reader.read(POD_CGROUP) == CgroupUsage(1, 1000, 0)
    assert reader.read("/kubepods/gone") is None
    with pytest.raises(ValueError, match="invalid cgroup path"):
        reader.read("/kubepods/../../etc")


def _running(container_ids: tuple[str, ...]) -> list[tuple[Pod, PodRuntimeState]]:
    pod = Pod(
        metadata=ObjectMeta(name="web", namespace="default", uid="u1"),
        spec=PodSpec(containers=[]),
    )
    sandbox = SandboxState(
        id="sb", attempt=0, ready=True, created_at=T0, ips=(), cgroup_parent=POD_CGROUP
    )
    containers = tuple(
        RuntimeContainer(
            id=cid,
            name=f"c{i}",
            image="i",
            image_ref="i",
            state="running" if cid != "exited" else "exited",
            created_at=T0,
            started_at=T0 + datetime.timedelta(seconds=1),
        )
        for i, cid in enumerate(container_ids)
    )
    return [(pod, PodRuntimeState(uid="u1", sandboxes=(sandbox,), containers=containers))]


async def test_provider_places_node_pods_and_containers_and_rates_cpu(tmp_path: Path) -> None:
    clock = FakeClock(T0)
    _v1(tmp_path, "/", 10_000_000_000, 500, 100, "cpuacct")
    _v1(tmp_path, POD_CGROUP, 2_000_000_000, 300, 100, "cpuacct")
    _v1(tmp_path, f"{POD_CGROUP}/abc", 1_000_000_000, 200, 50, "cpuacct")
    running = _running(("abc", "exited", "missing"))
    provider = CgroupStatsProvider("n1", SysCgroupReader(tmp_path), lambda: running, clock)
    first = await provider.summary()
    assert first.node.node_name == "n1"
    assert first.node.cpu == CPUStats(T0, 10_000_000_000, None)
    assert first.node.memory == MemoryStats(T0, 400, 500)
    (pod,) = first.pods
    assert (pod.namespace, pod.name, pod.uid, pod.start_time) == ("default", "web", "u1", T0)
    assert pod.memory == MemoryStats(T0, 200, 300)
    assert [(c.name, c.start_time) for c in pod.containers] == [
        ("c0", T0 + datetime.timedelta(seconds=1))
    ]
    await clock.advance(2)
    _v1(tmp_path, f"{POD_CGROUP}/abc", 1_500_000_000, 200, 50, "cpuacct")
    second = await provider.summary()
    later = T0 + datetime.timedelta(seconds=2)
    assert second.pods[0].containers[0].cpu == CPUStats(later, 1_500_000_000, 250_000_000)
    assert second.pods[0].cpu == CPUStats(later, 2_000_000_000, 0)
