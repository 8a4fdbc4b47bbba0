"""A parent's children, as ``kubelab server`` runs its components: real child processes (small
Python scripts) started, relayed, restarted when killed and stopped in order."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from kube.backoff import Backoff
from kube.supervision import ChildExited, Supervisor

SERVE = """
import signal, sys, time
name = sys.argv[1]
def stop(*_):
    print(f"{name} got SIGTERM", file=sys.stderr, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print(f"{name}: serving on port {sys.argv[2]}", flush=True)
print(f"{name} log line", file=sys.stderr, flush=True)
while True:
    time.sleep(1)
"""

STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("stubborn: serving", flush=True)
while True:
    time.sleep(1)
"""


def script(text: str, *args: str) -> Callable[[], Sequence[str]]:
    return lambda: [sys.executable, "-c", text, *args]


async def eventually(check: Callable[[], bool], within: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_the_ready_line_is_handed_back_and_output_relayed_line_by_line() -> None:
    out, err = io.StringIO(), io.StringIO()
    supervisor = Supervisor(out=out, err=err)
    try:
        match = await supervisor.start("one", script(SERVE, "one", "6443"), ready=r"port (\d+)")
        assert match is not None and match.group(1) == "6443"
        await eventually(lambda: "one log line\n" in err.getvalue())
        assert out.getvalue() == "one: serving on port 6443\n"
    finally:
        await supervisor.stop()


async def test_a_killed_child_is_restarted_with_its_command_asked_again_and_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    out = io.StringIO()
    ports = iter(["1", "2"])
    supervisor = Supervisor(Backoff(initial=0.05), out=out, err=io.StringIO())
    try:
        await supervisor.start(
            "api", lambda: [sys.executable, "-c", SERVE, "api", next(ports)], ready="serving"
        )
        child = supervisor.children[0]
        assert child.process is not None
        first = child.process.pid
        with caplog.at_level(logging.WARNING, logger="kube.supervision"):
            os.kill(first, signal.SIGKILL)
            await eventually(lambda: "api: serving on port 2\n" in out.getvalue())
        assert child.process.pid != first
        assert child.restarts == 1
        assert f"api (pid {first}) exited with code -9; restarting in 0s (restart 1)" in (
            caplog.text
        )
        assert f"api restarted as pid {child.process.pid}" in caplog.text
    finally:
        await supervisor.stop()


async def test_stop_signals_the_last_started_first_and_kills_one_that_ignores_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    err = io.StringIO()
    # Long enough for a child that heeds SIGTERM to exit on a loaded machine (0.5 s was not,
    # once, in CI); the stubborn one costs the test this much.
    supervisor = Supervisor(stop_timeout=3, out=io.StringIO(), err=err)
    await supervisor.start("first", script(SERVE, "first", "1"), ready="serving")
    await supervisor.start("stubborn", script(STUBBORN), ready="serving")
    await supervisor.start("last", script(SERVE, "last", "3"), ready="serving")
    processes = [child.process for child in supervisor.children]
    with caplog.at_level(logging.INFO, logger="kube.supervision"):
        await supervisor.stop()
    assert all(p is not None and p.returncode is not None for p in processes)
    stopped = [r.getMessage() for r in caplog.records if r.getMessage().endswith("stopped")]
    assert [line.split()[0] for line in stopped] == ["last", "stubborn", "first"]
    assert "stubborn (pid" in caplog.text and "did not stop in 3s: killed" in caplog.text
    assert err.getvalue().index("last got SIGTERM") < err.getvalue().index("first got SIGTERM")


async def test_a_child_that_exits_before_it_serves_fails_start_and_is_not_restarted(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    crash = f"open({str(runs)!r}, 'a').write('x'); raise SystemExit(3)"
    supervisor = Supervisor(Backoff(initial=0.01), out=io.StringIO(), err=io.StringIO())
    try:
        with pytest.raises(ChildExited) as raised:
            await supervisor.start("broken", script(crash), ready="serving")
        assert raised.value.code == 3
        assert str(raised.value) == "broken exited with code 3 before it was serving"
        await asyncio.sleep(0.3)
        assert runs.read_text() == "x"
    finally:
        await supervisor.stop()


async def test_children_get_sigterm_when_the_parent_dies(tmp_path: Path) -> None:
    """A parent killed outright (SIGKILL, no chance to stop anything) leaves no child."""
    parent = f"""
import asyncio, sys
from kube.supervision import Supervisor
async def main():
    supervisor = Supervisor()
    await supervisor.start("child", lambda: [sys.executable, "-c", {SERVE!r}, "child", "9"],
                           ready="serving")
    print(supervisor.children[0].process.pid, flush=True)
    await asyncio.sleep(60)
asyncio.run(main())
"""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", parent, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    await process.stdout.readline()  # the child's own serving line, relayed
    child_pid = int(await process.stdout.readline())
    process.kill()
    await process.wait()

    def gone() -> bool:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            return True
        # Reaped by init once it exits; until then it may linger as a zombie.
        return Path(f"/proc/{child_pid}/stat").read_text().split()[2] == "Z"

    await eventually(gone)
