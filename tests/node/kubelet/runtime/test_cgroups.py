"""Pod cgroup parents by QoS class, and removing pod cgroups from every hierarchy."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kube.api.kinds.core_v1.pod import Pod
from node.kubelet.runtime.cgroups import FakeCgroups, SysCgroups, pod_cgroup_parent
from node.kubelet.runtime.options import NodeRuntimeOptions


def make_pod(resources: dict[str, Any]) -> Pod:
    container = {"name": "app", "image": "busybox", "resources": resources}
    data = {"metadata": {"name": "web", "uid": "u1"}, "spec": {"containers": [container]}}
    return msgspec.convert(data, Pod)


GUARANTEED = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}


@pytest.mark.parametrize(
    ("resources", "root", "expected"),
    [
        pytest.param(GUARANTEED, "/kubepods", "/kubepods/podu1", id="guaranteed"),
        pytest.param(
            {"requests": {"cpu": "1"}}, "/kubepods", "/kubepods/burstable/podu1", id="burstable"
        ),
        pytest.param({}, "/kubepods", "/kubepods/besteffort/podu1", id="besteffort"),
        pytest.param({}, "/", "/besteffort/podu1", id="root-slash"),
        pytest.param(
            {}, "/lab/node1/kubepods", "/lab/node1/kubepods/besteffort/podu1", id="nested-root"
        ),
    ],
)
def test_pod_cgroup_parent(resources: dict[str, Any], root: str, expected: str) -> None:
    options = NodeRuntimeOptions(node_name="n", node_ips=(), root_dir=Path("/r"), cgroup_root=root)
    assert pod_cgroup_parent(make_pod(resources), options) == expected


POD_CGROUP = "/kubepods/burstable/podu1"


def make_tree(root: Path, hierarchies: list[str]) -> None:
    for hierarchy in hierarchies:
        for leaf in ("c1", "c2/nested"):
            (root / hierarchy / POD_CGROUP.lstrip("/") / leaf).mkdir(parents=True)
        (root / hierarchy / "kubepods/burstable/podu2").mkdir(parents=True)


def test_removes_from_every_v1_hierarchy_and_unified(tmp_path: Path) -> None:
    make_tree(tmp_path, ["cpu,cpuacct", "memory", "pids", "unified"])
    (tmp_path / "cpu").symlink_to("cpu,cpuacct")
    (tmp_path / "systemd").mkdir()
    cgroups = SysCgroups(tmp_path)
    assert [p.name for p in cgroups.hierarchies()] == [
        "cpu,cpuacct",
        "memory",
        "pids",
        "systemd",
        "unified",
    ]
    cgroups.remove(POD_CGROUP)
    for hierarchy in ("cpu,cpuacct", "memory", "pids", "unified"):
        assert not (tmp_path / hierarchy / POD_CGROUP.lstrip("/")).exists()
        assert (tmp_path / hierarchy / "kubepods/burstable/podu2").is_dir()
    cgroups.remove(POD_CGROUP)  # idempotent


def test_cgroup2_only_root(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    make_tree(tmp_path, [""])
    cgroups = SysCgroups(tmp_path)
    assert cgroups.hierarchies() == [tmp_path]
    cgroups.remove(POD_CGROUP)
    assert not (tmp_path / POD_CGROUP.lstrip("/")).exists()


def test_missing_root_is_nothing_to_do(tmp_path: Path) -> None:
    SysCgroups(tmp_path / "absent").remove(POD_CGROUP)


@pytest.mark.parametrize(("busy", "removed"), [(2, True), (9, False)], ids=["retried", "gives-up"])
def test_ebusy_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, busy: int, removed: bool
) -> None:
    make_tree(tmp_path, ["memory"])
    left = {"busy": busy}
    real_rmdir = Path.rmdir
    sleeps: list[float] = []

    def rmdir(self: Path) -> None:
        if self.name == "podu1" and left["busy"]:
            left["busy"] -= 1
            raise OSError(errno.EBUSY, "Device or resource busy", str(self))
        real_rmdir(self)

    monkeypatch.setattr(Path, "rmdir", rmdir)
    cgroups = SysCgroups(tmp_path, retries=3, delay=0.5, sleep=sleeps.append)
    target = tmp_path / "memory" / POD_CGROUP.lstrip("/")
    if removed:
        cgroups.remove(POD_CGROUP)
        assert sleeps == [0.5, 0.5]
    else:
        with pytest.raises(OSError, match="busy"):
            cgroups.remove(POD_CGROUP)
        assert sleeps == [0.5, 0.5, 0.5]
    assert target.exists() is not removed


@pytest.mark.parametrize(
    "path", ["relative/pod", "/", "/kubepods/../etc", "/kubepods/./x", ""], ids=str
)
def test_invalid_paths_are_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(ValueError, match="invalid cgroup path"):
        SysCgroups(tmp_path).remove(path)
    with pytest.raises(ValueError, match="invalid cgroup path"):
        FakeCgroups().remove(path)


def test_fake_records() -> None:
    fake = FakeCgroups()
    fake.remove("/kubepods/podu1")
    fake.remove("/kubepods/podu1")
    assert fake.removed == ["/kubepods/podu1", "/kubepods/podu1"]
