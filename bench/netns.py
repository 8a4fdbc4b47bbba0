"""Network namespaces for the benchmarks that run a node of their own, removed however the run
ends.

A benchmark of 10,000 Services runs for minutes, so it is often stopped: by Ctrl-C, by
``timeout`` or ``kill`` (SIGTERM), or by its terminal going away (SIGHUP).  Python ends on
the last two without running ``finally`` blocks, which left namespaces (and a worker with its
``nft`` still running inside them) behind.  :func:`temporary_netns` turns those signals into
:class:`KeyboardInterrupt` while its block runs and deletes the namespaces on the way out,
with the signals ignored until that is done; :func:`run_in` runs a worker in one of them in a
process group of its own, killed whole (the worker and whatever it started) if the run is
interrupted while it waits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

STOPPING = (signal.SIGTERM, signal.SIGHUP)
Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


@contextmanager
def _handled(signals: Sequence[int], handler: Handler) -> Iterator[None]:
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


@contextmanager
def temporary_netns(*prefixes: str) -> Iterator[list[str]]:
    """One fresh namespace per prefix (``PREFIX-xxxxxx``), deleted when the block ends, also
    when it is interrupted by SIGINT, SIGTERM or SIGHUP."""
    names = [f"{prefix}-{uuid.uuid4().hex[:6]}" for prefix in prefixes]
    with _handled(STOPPING, _interrupt):
        try:
            for name in names:
                subprocess.run(["ip", "netns", "add", name], check=True)
            yield names
        finally:
            with _handled((signal.SIGINT, *STOPPING), signal.SIG_IGN):
                for name in names:
                    subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


def path(name: str) -> str:
    """The namespace's bind mount, for ``nsenter --net=`` and ``SubprocessNftables``."""
    return str(Path("/run/netns") / name)


def run_in(name: str, argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` inside namespace ``name``, its output captured; on an interruption the
    process group it leads is killed before the interruption goes on."""
    with subprocess.Popen(
        ["nsenter", f"--net={path(name)}", *argv],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate()
        except BaseException:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
