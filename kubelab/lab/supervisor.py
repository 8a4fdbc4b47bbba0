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
from typing import Final

from kube.backoff import Backoff
from kubelab.lab.processes import CommandError, ProcessTable

POLL: Final = 0.5
SUPERVISOR_KEY: Final = "router/supervisor"


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
