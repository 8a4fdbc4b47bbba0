"""The lab's supervisor: backoff arithmetic, and real detached processes restarted or not."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kube.backoff import Backoff
from kubelab.lab.processes import ProcessTable
from kubelab.lab.supervisor import SUPERVISOR_KEY, Supervisor


@pytest.fixture(name="table")
def table_fixture(tmp_path: Path) -> Iterator[ProcessTable]:
    table = ProcessTable(tmp_path / "processes.json")
    yield table
    for record in table.records():
        table.stop(record.key, timeout=2)


def wait_until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_killed_component_is_restarted_with_its_command_log_and_a_count(
    table: ProcessTable, tmp_path: Path
) -> None:
    log = tmp_path / "sleeper.log"
    first = table.start("node1/sleeper", ["sleep", "60"], log=log, cwd=tmp_path)
    supervisor = Supervisor(table, Backoff(initial=0.1), say=lambda _: None)
    supervisor.check()
    assert table.get("node1/sleeper") == first  # alive: left alone
    os.kill(first.pid, signal.SIGKILL)
    wait_until(lambda: not first.alive())
    supervisor.check()  # dead, its backoff starts
    time.sleep(0.15)
    supervisor.check()
    again = table.get("node1/sleeper")
    assert again is not None
    assert again.pid != first.pid and again.alive()
    assert again.restarts == 1
    assert again.command == first.command and again.cwd == str(tmp_path)
    assert log.read_text().count("--- ") == 2  # each start is marked in the log


def test_a_stopped_component_and_the_supervisor_itself_are_never_restarted(
    table: ProcessTable, tmp_path: Path
) -> None:
    stopped = table.start("node1/sleeper", ["sleep", "60"], log=tmp_path / "s.log")
    own = table.start(SUPERVISOR_KEY, ["sleep", "60"], log=tmp_path / "sup.log")
    supervisor = Supervisor(table, Backoff(initial=0), say=lambda _: None)
    os.kill(own.pid, signal.SIGKILL)
    wait_until(lambda: not own.alive())
    assert table.stop("node1/sleeper") is True
    supervisor.check()
    assert table.get("node1/sleeper") is None
    assert not stopped.alive()
    assert table.get(SUPERVISOR_KEY) == own  # recorded, dead, not restarted


def test_the_supervisor_exits_once_its_table_is_gone(table: ProcessTable, tmp_path: Path) -> None:
    table.start("node1/sleeper", ["sleep", "60"], log=tmp_path / "s.log")
    said: list[str] = []
    supervisor = Supervisor(table, say=said.append)
    table.stop("node1/sleeper")
    table.path.unlink()

    async def run() -> int:
        return await asyncio.wait_for(supervisor.run(asyncio.Event()), 5)

    assert asyncio.run(run()) == 0
    assert said == [f"{table.path} is gone: the lab was removed"]
