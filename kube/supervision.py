"""A parent process that runs components as its children: one command, one log stream, one
place that handles signals (``kubelab server``, like ``k3s server``).

Why children and not tasks in one event loop: one Python process holds one interpreter lock,
so an API server, a scheduler and a controller-manager sharing a process share one core; as
children each gets its own.

What the parent does, and nothing more:

- **start** a child (``start``) in a process group of its own, so a Ctrl-C at the terminal
  reaches only the parent, which then stops the children in order; each child also gets
  SIGTERM from the kernel should the parent die without stopping it (``PR_SET_PDEATHSIG``),
  so no child outlives its parent;
- **relay** every line the child writes, stdout to stdout and stderr to stderr, unchanged
  (components' log lines already name their logger, and their "serving" lines their
  component), so the command has one log stream; ``start`` can wait for the stdout line
  that says the child serves and hand back the match, so the next child can be started with
  what that one printed;
- **restart** a child that exits while the parent is not stopping, after the lab
  supervisor's crash-loop backoff (``kube.backoff``: 1 s, 2 s ... 30 s, reset after a
  stable run), and say so on stderr (name, pid, exit code, delay, restart count); the
  command line is asked for again at each start, so a child can be restarted with what
  its earlier run settled (the API server keeps the port it first bound);
- **stop** the children (``stop``) in the reverse order of their start: SIGTERM, then
  SIGKILL after ``stop_timeout`` seconds for one that does not exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from kube.backoff import Backoff

PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)

log = logging.getLogger("kube.supervision")


def _die_with_parent() -> None:
    """In the forked child, before exec: SIGTERM when the parent dies."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class ChildExited(Exception):
    """A child exited before printing the line ``start`` waited for."""

    def __init__(self, name: str, code: int) -> None:
        super().__init__(f"{name} exited with code {code} before it was serving")
        self.name = name
        self.code = code


@dataclass
class Child:
    """One supervised child: how to start it, and its current process."""

    name: str
    command: Callable[[], Sequence[str]]
    process: asyncio.subprocess.Process | None = None
    restarts: int = 0
    keeper: asyncio.Task[None] | None = None
    relays: list[asyncio.Task[None]] = field(default_factory=list, repr=False)
    ready: asyncio.Future[re.Match[str]] | None = field(default=None, repr=False)


class Supervisor:
    """Starts, relays, restarts and stops children (see the module docstring).

    Every method runs on one event loop; ``stop`` may be called once, after which nothing is
    restarted.
    """

    def __init__(
        self,
        backoff: Backoff | None = None,
        stop_timeout: float = 10.0,
        out: TextIO | None = None,
        err: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff = backoff or Backoff()
        self.stop_timeout = stop_timeout
        self._out = out
        self._err = err
        self._clock = clock
        self._children: list[Child] = []
        self._stopping = asyncio.Event()

    @property
    def children(self) -> list[Child]:
        return list(self._children)

    async def start(
        self, name: str, command: Callable[[], Sequence[str]], ready: str | None = None
    ) -> re.Match[str] | None:
        """Start ``name`` and keep it running until ``stop``.

        With ``ready`` (a regular expression), wait until the child prints a stdout line it
        matches and return the match; raises ChildExited (and gives the child up) if the
        child exits first, since a component that cannot start would only crash-loop.
        """
        child = Child(name, command)
        loop = asyncio.get_running_loop()
        if ready is not None:
            child.ready = loop.create_future()
        await self._spawn(child, re.compile(ready) if ready is not None else None)
        self._children.append(child)
        child.keeper = asyncio.create_task(self._keep(child), name=f"supervise {name}")
        if child.ready is None:
            return None
        return await child.ready

    async def stop(self) -> None:
        """Stop every child, the last started first."""
        self._stopping.set()
        for child in reversed(self._children):
            await self._stop_one(child)
        for child in self._children:
            if child.keeper is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await child.keeper

    async def _spawn(self, child: Child, ready: re.Pattern[str] | None) -> int:
        """Start the child's process; its pid."""
        process = await asyncio.create_subprocess_exec(
            *child.command(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            process_group=0,
            preexec_fn=_die_with_parent,
        )
        child.process = process
        self.backoff.running(child.name, process.pid, self._clock())
        assert process.stdout is not None and process.stderr is not None
        child.relays = [
            asyncio.create_task(self._relay(process.stdout, self._out or sys.stdout, child, ready)),
            asyncio.create_task(self._relay(process.stderr, self._err or sys.stderr, None, None)),
        ]
        return process.pid

    async def _relay(
        self,
        stream: asyncio.StreamReader,
        target: TextIO,
        child: Child | None,
        ready: re.Pattern[str] | None,
    ) -> None:
        while line := await stream.readline():
            text = line.decode(errors="replace")
            target.write(text if text.endswith("\n") else text + "\n")
            target.flush()
            if ready is not None and child is not None and child.ready is not None:
                match = ready.search(text)
                if match is not None and not child.ready.done():
                    child.ready.set_result(match)

    async def _keep(self, child: Child) -> None:
        """Wait for the child to exit; unless stopping, report it and start it again."""
        while True:
            process = child.process
            assert process is not None
            code = await process.wait()
            for relay in child.relays:
                await relay
            if child.ready is not None and not child.ready.done():
                child.ready.set_exception(ChildExited(child.name, code))
                return
            if self._stopping.is_set():
                return
            now = self._clock()
            delay = max(0.0, self.backoff.restart_at(child.name, process.pid, now) - now)
            child.restarts += 1
            log.warning(
                "%s (pid %d) exited with code %d; restarting in %.0fs (restart %d)",
                child.name,
                process.pid,
                code,
                delay,
                child.restarts,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            if self._stopping.is_set():
                return
            self.backoff.restarted(child.name)
            pid = await self._spawn(child, None)
            log.warning("%s restarted as pid %d", child.name, pid)

    async def _stop_one(self, child: Child) -> None:
        process = child.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), self.stop_timeout)
        except TimeoutError:
            log.warning(
                "%s (pid %d) did not stop in %gs: killed",
                child.name,
                process.pid,
                self.stop_timeout,
            )
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        log.info("%s (pid %d) stopped", child.name, process.pid)
