"""The lab's supervisor: one detached process per lab that restarts crashed components.

Design, the simplest that survives the lab's other processes coming and going:

- the components stay what ``kubelab.lab.processes`` makes them: detached processes (own
  session, log file) recorded by PID and start time in the lab's process table.  The
  supervisor is not their parent and holds no state of its own but backoff timers, so it can
  die or be stopped at any time without taking a component with it;
- ``up`` starts it last (``kubelab lab supervise``, recorded as ``router/supervisor``, the
  lab's own infrastructure) so that a component failing *during* ``up`` fails ``up`` with its
  log instead of being retried quietly;
- every ``POLL`` seconds it reads the table; a component that is no longer running (PID gone,
  reused or a zombie) is started again with its recorded command (``ProcessTable.restart``,
  which counts ``restarts``, shown by ``kubelab lab status``) once its backoff has passed:
  1 s, 2 s, 4 s ... at most 30 s, back to 1 s after a run of ``STABLE`` seconds, as the
  kubelet's crash-loop backoff does for containers;
- stopping is by the table too: ``ProcessTable.stop`` removes a record before it signals, and
  ``restart`` re-reads the record under the table's lock, so a component being stopped (by
  ``down`` or ``node rm``) is never brought back.  ``down`` stops the supervisor first anyway;
- it exits by itself once the table is gone (the lab was removed behind its back).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from kubelab.lab.processes import CommandError, ProcessTable

POLL: Final = 0.5
INITIAL_BACKOFF: Final = 1.0
MAX_BACKOFF: Final = 30.0
STABLE: Final = 60.0
SUPERVISOR_KEY: Final = "router/supervisor"


@dataclass
class Backoff:
    """When a dead component may be started again: the delay doubles with each crash in a
    row, and resets once a run lasted ``stable`` seconds."""

    initial: float = INITIAL_BACKOFF
    maximum: float = MAX_BACKOFF
    stable: float = STABLE
    _crashes: dict[str, int] = field(default_factory=dict)
    _started: dict[str, float] = field(default_factory=dict)
    _due: dict[str, float] = field(default_factory=dict)

    def running(self, key: str, pid: int, now: float) -> None:
        """``key`` runs as ``pid`` (first sighting starts the clock of its run)."""
        self._started.setdefault(f"{key}:{pid}", now)

    def due(self, key: str, pid: int, now: float) -> bool:
        """``key`` (last seen as ``pid``) is dead: True once it may be restarted."""
        if key not in self._due:
            started = self._started.pop(f"{key}:{pid}", now)
            crashes = 0 if now - started >= self.stable else self._crashes.get(key, 0)
            self._crashes[key] = crashes + 1
            self._due[key] = now + min(self.initial * 2**crashes, self.maximum)
        return now >= self._due[key]

    def restarted(self, key: str) -> None:
        self._due.pop(key, None)


class Supervisor:
    """Restarts the dead components of one process table (see the module docstring)."""

    def __init__(
        self,
        table: ProcessTable,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] = print,
    ) -> None:
        self.table = table
        self.backoff = backoff or Backoff()
        self.clock = clock
        self.say = say

    def check(self) -> None:
        """One pass: restart what is dead and due."""
        now = self.clock()
        for record in self.table.records():
            if record.key == SUPERVISOR_KEY:
                continue
            if record.alive():
                self.backoff.running(record.key, record.pid, now)
            elif self.backoff.due(record.key, record.pid, now):
                self.backoff.restarted(record.key)
                try:
                    new = self.table.restart(record.key)
                except CommandError as error:
                    self.say(f"{record.key}: cannot restart: {error}")
                    continue
                if new is not None:
                    self.say(f"{record.key}: pid {record.pid} died; restarted as pid {new.pid}")

    async def run(self, stop: asyncio.Event) -> int:
        while not stop.is_set():
            if not self.table.path.exists():
                self.say(f"{self.table.path} is gone: the lab was removed")
                return 0
            await asyncio.to_thread(self.check)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), POLL)
        return 0
