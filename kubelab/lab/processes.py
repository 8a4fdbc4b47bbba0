"""The lab's exec layer: commands run to completion, and components run detached.

Two kinds of process:

- ``run()`` runs a command to completion (``ip``, ``ctr``, ``sysctl``), optionally inside a
  lab namespace, and raises ``CommandError`` (from ``kubelab.lab.images``: the command line,
  its exit status and its output, with the underlying exception as ``__cause__``) when it
  fails;
- ``ProcessTable.start()`` starts a long-running component (containerd, ``kubelab server``,
  a kubelet...) detached: its own session, stdin from /dev/null, stdout and stderr appended to
  its log file, inside a namespace through ``nsenter --net=/run/netns/NAME --``.  Never
  ``ip netns exec``: it remounts /sys in a private mount namespace and runc then finds no
  cgroups.

The table is a JSON file (``/run/kubelab/<lab>/processes.json``) naming each component's PID,
its start time (field 22 of ``/proc/PID/stat``) and command, so a later ``kubelab lab down``
(another process, maybe after a crash) stops exactly what was started: a PID whose start time
differs was reused by someone else and is left alone.  ``stop()`` forgets the component
first, then sends SIGTERM to its process group, waits, then SIGKILL; it is idempotent.  A
component found dead (``check_alive``) raises ``ProcessError``, a ``CommandError`` carrying
its log's tail.  ``restart()`` starts a dead component's recorded command again and counts
it (``restarts``): the lab's supervisor (``kubelab.lab.supervisor``) calls it.

Several processes change the file (a ``kubelab lab`` command and the lab's supervisor), so
every read-modify-write holds an exclusive ``flock`` on ``processes.json.lock`` (threads of
one process additionally share a lock).  Because ``stop()`` removes the record before it
signals, and ``restart()`` re-reads the record under the lock, the supervisor never brings
back a component someone is stopping.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from kubelab.lab.images import CommandError

__all__ = ["CommandError", "ProcessError", "ProcessRecord", "ProcessTable", "nsenter", "run"]

RUN_TIMEOUT: Final = 120.0
STOP_TIMEOUT: Final = 15.0
POLL: Final = 0.05


def nsenter(netns: Path | None) -> list[str]:
    """The prefix that runs a command in the network namespace at ``netns`` (none: here)."""
    return [] if netns is None else ["nsenter", f"--net={netns}", "--"]


def run(
    *command: str | Path,
    netns: Path | None = None,
    input: str | None = None,
    timeout: float = RUN_TIMEOUT,
    check: bool = True,
) -> str:
    """Run a command to completion (in ``netns`` if given); its combined output.

    Raises ``CommandError`` when it cannot start, times out, or (``check``) exits non-zero.
    """
    args = [*nsenter(netns), *(str(c) for c in command)]
    try:
        done = subprocess.run(
            args,
            input=input,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=None if input is not None else subprocess.DEVNULL,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as error:
        raise CommandError(args, 127, str(error)) from error
    except subprocess.TimeoutExpired as error:
        output = error.output if isinstance(error.output, str) else ""
        raise CommandError(args, None, output) from error
    if check and done.returncode != 0:
        raise CommandError(args, done.returncode, done.stdout)
    return done.stdout


class ProcessError(CommandError):
    """A component is not running as it should: its command line, what happened and the
    tail of its log."""

    def __init__(self, command: Sequence[str], what: str, output: str = "") -> None:
        Exception.__init__(self, f"{shlex.join(command)}: {what}\n{output.strip()}".strip())
        self.command = list(command)
        self.returncode = None
        self.output = output


@dataclass(frozen=True)
class ProcessRecord:
    """A component the lab started: ``key`` is ``NODE/COMPONENT``."""

    key: str
    pid: int
    start_time: int
    command: list[str]
    log: str
    cwd: str | None = None
    restarts: int = 0
    """How many times the supervisor started it again after it died."""

    @property
    def node(self) -> str:
        return self.key.partition("/")[0]

    @property
    def component(self) -> str:
        return self.key.partition("/")[2]

    def alive(self) -> bool:
        """The very process started (same PID and start time) runs and is not a zombie."""
        stat = _stat(self.pid)
        return stat is not None and stat[0] != "Z" and stat[1] == self.start_time


class ProcessTable:
    """The components of one lab, persisted in ``path``; see the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Threads of one process (``down`` stops components concurrently) share the file.
        self._lock = threading.Lock()

    def records(self) -> list[ProcessRecord]:
        """Every recorded component, in start order (empty if no table)."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        return [ProcessRecord(**item) for item in data]

    def get(self, key: str) -> ProcessRecord | None:
        return next((r for r in self.records() if r.key == key), None)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive use of the file, across threads and processes (its directory exists)."""
        with self._lock, open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _put(self, record: ProcessRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked():
            self._save(_replaced(self.records(), record))

    def _save(self, records: Sequence[ProcessRecord]) -> None:
        partial = self.path.with_suffix(".tmp")
        partial.write_text(json.dumps([asdict(r) for r in records], indent=1))
        os.replace(partial, self.path)

    def start(
        self,
        key: str,
        command: Sequence[str | Path],
        *,
        log: Path,
        netns: Path | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> ProcessRecord:
        """Start ``command`` detached (in ``netns``), its output appended to ``log``, and
        record it.  Does not wait for it to work: ``check_alive`` tells later.

        Raises ``CommandError`` if it cannot be started, ``ProcessError`` if ``key`` runs.
        """
        existing = self.get(key)
        if existing is not None and existing.alive():
            raise ProcessError(existing.command, f"{key} is already running (pid {existing.pid})")
        args = [*nsenter(netns), *(str(c) for c in command)]
        record = _spawn(key, args, log, cwd, env)
        self._put(record)
        return record

    def restart(self, key: str) -> ProcessRecord | None:
        """Start a dead component's recorded command again (same log and directory, this
        process's environment), its ``restarts`` counted; the new record, or None if the
        component is gone from the table or running."""
        if not self.path.exists():
            return None
        with self._locked():
            record = self.get(key)
            if record is None or record.alive():
                return None
            _reap(record.pid)
            cwd = Path(record.cwd) if record.cwd else None
            new = _spawn(key, record.command, Path(record.log), cwd, None)
            new = ProcessRecord(**{**asdict(new), "restarts": record.restarts + 1})
            self._save(_replaced(self.records(), new))
        return new

    def check_alive(self, key: str) -> None:
        """Raise ``ProcessError`` with the log's tail if the component is not running."""
        record = self.get(key)
        if record is None:
            raise ProcessError([key], "never started")
        if not record.alive():
            _reap(record.pid)
            raise ProcessError(record.command, f"{key} exited", log_tail(record))

    def stop(self, key: str, timeout: float = STOP_TIMEOUT) -> bool:
        """Stop a component by PID (SIGTERM to its group, SIGKILL after ``timeout``) and forget
        it; True if it was running.  Idempotent."""
        if not self.path.exists():
            return False
        with self._locked():
            record = self.get(key)
            if record is None:
                return False
            self._save([r for r in self.records() if r.key != key])
        was_alive = record.alive()
        if was_alive:
            terminate(record.pid, timeout, expect_start=record.start_time)
        return was_alive


def _replaced(records: list[ProcessRecord], record: ProcessRecord) -> list[ProcessRecord]:
    """``records`` with ``record`` in place of the one of its key (keeping its position), or
    appended."""
    keys = [r.key for r in records]
    if record.key not in keys:
        return [*records, record]
    return [record if r.key == record.key else r for r in records]


def _spawn(
    key: str, args: list[str], log: Path, cwd: Path | None, env: dict[str, str] | None
) -> ProcessRecord:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"--- {time.strftime('%FT%T%z')} {shlex.join(args)}\n".encode())
        out.flush()
        try:
            process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as error:
            raise CommandError(args, 127, str(error)) from error
    stat = _stat(process.pid)
    # The lab's processes outlive this one: forget the child without waiting for it.
    process.returncode = 0
    return ProcessRecord(
        key, process.pid, stat[1] if stat else 0, args, str(log), str(cwd) if cwd else None
    )


def terminate(pid: int, timeout: float = STOP_TIMEOUT, *, expect_start: int | None = None) -> None:
    """SIGTERM the process group led by ``pid`` (or the process alone), SIGKILL after
    ``timeout`` seconds; returns when it is gone or a zombie."""

    def running() -> bool:
        stat = _stat(pid)
        if stat is None or stat[0] == "Z":
            return False
        return expect_start is None or stat[1] == expect_start

    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not running():
            return
        _signal(pid, sig)
        deadline = time.monotonic() + timeout
        while running() and time.monotonic() < deadline:
            time.sleep(POLL)
        _reap(pid)


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
            return
    except ProcessLookupError:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _reap(pid: int) -> None:
    """Collect the process if it is our child (components started by this very process)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of a process, or None if there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[19])


def log_tail(record: ProcessRecord, size: int = 3000) -> str:
    try:
        return Path(record.log).read_text(errors="replace")[-size:]
    except OSError:
        return ""
