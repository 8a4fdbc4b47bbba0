"""Faults on purpose, on a process table of plain processes (no lab, no root): a kill the
supervisor would repair, and a stop it would not."""

from __future__ import annotations

import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelab.lab import faults
from kubelab.lab.cluster import LabError
from kubelab.lab.processes import ProcessTable
from kubelab.lab.supervisor import Backoff, Supervisor
from kubelab.lab.topology import Lab, LabSpec


@pytest.fixture
def lab() -> Iterator[Lab]:
    # Short: containerd's socket path, computed for every component, must fit 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="kf", dir="/tmp"))
    spec = LabSpec(name="demo", store="etcd", control_planes=3, workers=1)
    yield Lab(spec, run_root=root, log_root=root)
    shutil.rmtree(root)


def wait_dead(table: ProcessTable, key: str) -> None:
    deadline = time.monotonic() + 5
    while (record := table.get(key)) is not None and record.alive():
        assert time.monotonic() < deadline, f"{key} still alive"
        time.sleep(0.02)


def test_a_killed_component_is_restarted_by_the_supervisor(lab: Lab) -> None:
    table = ProcessTable(lab.process_file)
    first = table.start("controlplane2/server", ["sleep", "60"], log=lab.log_dir / "s.log")
    try:
        assert faults.kill(lab, "controlplane2", "server") == first.pid
        wait_dead(table, first.key)
        Supervisor(table, Backoff(initial=0), say=lambda line: None).check()
        again = table.get(first.key)
        assert again is not None and again.alive() and again.pid != first.pid
        assert again.restarts == 1
        with pytest.raises(LabError, match="not running"):
            faults.kill(lab, "controlplane2", "etcd")
    finally:
        table.stop(first.key)


def test_a_stopped_component_stays_down_until_started(lab: Lab) -> None:
    table = ProcessTable(lab.process_file)
    first = table.start("controlplane1/etcd", ["sleep", "60"], log=lab.log_dir / "e.log")
    try:
        assert faults.stop(lab, "controlplane1", "etcd")
        assert not first.alive() and table.get(first.key) is None
        Supervisor(table, Backoff(initial=0), say=lambda line: None).check()
        assert table.get(first.key) is None  # nothing to restart
        with pytest.raises(KeyError, match="no component"):
            faults.stop(lab, "controlplane9", "etcd")
    finally:
        table.stop(first.key)


def test_start_refuses_a_component_that_runs(lab: Lab) -> None:
    table = ProcessTable(lab.process_file)
    record = table.start("controlplane3/etcd", ["sleep", "60"], log=lab.log_dir / "e.log")
    try:
        with pytest.raises(LabError, match="runs already"):
            faults.start(lab, "controlplane3", "etcd")
    finally:
        table.stop(record.key)


def test_only_an_ha_control_plane_can_be_partitioned(tmp_path: Path) -> None:
    single = Lab(LabSpec(name="one"), run_root=tmp_path)
    with pytest.raises(LabError, match="only a control plane of an HA lab"):
        faults.partition(single, "controlplane")
    ha = Lab(LabSpec(name="demo", store="etcd", control_planes=3), run_root=tmp_path)
    with pytest.raises(LabError, match="only a control plane"):
        faults.heal(ha, "node1")


def test_kill_sends_the_signal_asked_for(lab: Lab) -> None:
    table = ProcessTable(lab.process_file)
    record = table.start("node1/proxy", ["sleep", "60"], log=lab.log_dir / "p.log")
    try:
        faults.kill(lab, "node1", "proxy", signal.SIGTERM)
        wait_dead(table, record.key)
    finally:
        table.stop(record.key)
