"""Faults on purpose, on a process table of plain processes (no lab, no root): a kill the
supervisor would repair, and a stop it would not."""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kube.backoff import Backoff
from kubelab.lab import faults
from kubelab.lab.cluster import LabError
from kubelab.lab.processes import ProcessRecord, ProcessTable
from kubelab.lab.supervisor import Supervisor
from kubelab.lab.topology import Lab, LabSpec


@pytest.fixture
def lab() -> Iterator[Lab]:
    # Short: containerd's socket path, computed for every component, must fit 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="kf", dir="/tmp"))
    spec = LabSpec(name="demo", store="etcd", control_planes=3, workers=1)
    yield Lab(spec, run_root=root, log_root=root)
    shutil.rmtree(root)


@contextlib.contextmanager
def running(lab: Lab, key: str) -> Iterator[tuple[ProcessTable, ProcessRecord]]:
    """A plain process in the lab's process table as component ``key``, stopped at the end."""
    table = ProcessTable(lab.process_file)
    record = table.start(key, ["sleep", "60"], log=lab.log_dir / f"{key.replace('/', '-')}.log")
    try:
        yield table, record
    finally:
        table.stop(record.key)


def wait_dead(table: ProcessTable, key: str) -> None:
    deadline = time.monotonic() + 5
    while (record := table.get(key)) is not None and record.alive():
        assert time.monotonic() < deadline, f"{key} still alive"
        time.sleep(0.02)


def test_a_killed_component_is_restarted_by_the_supervisor(lab: Lab) -> None:
    with running(lab, "controlplane2/server") as (table, first):
        assert faults.kill(lab, "controlplane2", "server") == first.pid
        wait_dead(table, first.key)
        Supervisor(table, Backoff(initial=0), say=lambda line: None).check()
        again = table.get(first.key)
        assert again is not None and again.alive() and again.pid != first.pid
        assert again.restarts == 1
        with pytest.raises(LabError, match="not running"):
            faults.kill(lab, "controlplane2", "etcd")


def test_a_stopped_component_stays_down_until_started(lab: Lab) -> None:
    with running(lab, "controlplane1/etcd") as (table, first):
        assert faults.stop(lab, "controlplane1", "etcd")
        assert not first.alive() and table.get(first.key) is None
        Supervisor(table, Backoff(initial=0), say=lambda line: None).check()
        assert table.get(first.key) is None  # nothing to restart
        with pytest.raises(KeyError, match="no component"):
            faults.stop(lab, "controlplane9", "etcd")


def test_start_refuses_a_component_that_runs(lab: Lab) -> None:
    with running(lab, "controlplane3/etcd"), pytest.raises(LabError, match="runs already"):
        faults.start(lab, "controlplane3", "etcd")


def test_only_an_ha_control_plane_can_be_partitioned(tmp_path: Path) -> None:
    single = Lab(LabSpec(name="one"), run_root=tmp_path)
    with pytest.raises(LabError, match="only a control plane of an HA lab"):
        faults.partition(single, "controlplane")
    ha = Lab(LabSpec(name="demo", store="etcd", control_planes=3), run_root=tmp_path)
    with pytest.raises(LabError, match="only a control plane"):
        faults.heal(ha, "node1")


def test_kill_sends_the_signal_asked_for(lab: Lab) -> None:
    with running(lab, "node1/proxy") as (table, record):
        faults.kill(lab, "node1", "proxy", signal.SIGTERM)
        wait_dead(table, record.key)
