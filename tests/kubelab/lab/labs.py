"""Real labs for tests (not a test file): the ``kubelab lab`` command run as a user runs it,
a command inside a lab node, and one lab brought up for as long as a fixture needs it.

Labs are named and given a host API port of their own so several can run at once (a module's
lab beside the package's shared one, or a second copy of the suite).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kubelab.lab.topology import Lab, LabSpec
from tests.servers import REPO, Kubectl

LAB_COMMAND = [sys.executable, "-m", "kubelab.lab.command"]
UP_TIMEOUT = 900.0
"""Seconds ``up`` may take: from a cold image cache it builds the Debian-based images first,
and the HA lab starts three control planes."""


def lab_command(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``kubelab lab ARGS...`` in a subprocess, its output captured, never raising on failure."""
    return subprocess.run(
        [*LAB_COMMAND, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def node_exec(
    lab: str, node: str, *argv: str, timeout: float = 30.0
) -> subprocess.CompletedProcess[str]:
    """A command inside a lab node, as ``kubelab lab exec --name LAB NODE -- CMD...``."""
    return lab_command("exec", "--name", lab, node, "--", *argv, timeout=timeout)


@dataclass
class RunningLab:
    """A lab that is up: its inventory, the pinned kubectl through the host forwarder (in the
    ``default`` namespace), and what ``up`` printed."""

    lab: Lab
    kubectl: Kubectl
    up_output: str

    @property
    def name(self) -> str:
        return self.lab.spec.name

    def exec(
        self, node: str, *argv: str, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        return node_exec(self.name, node, *argv, timeout=timeout)


@contextmanager
def lab_up(spec: LabSpec, kubectl_cache: Path, *flags: str) -> Iterator[RunningLab]:
    """``kubelab lab up`` for ``spec`` (its name, workers and host port, plus ``flags``), and
    ``kubelab lab down`` afterwards, whatever happened."""
    lab = Lab(spec)
    kubectl = Kubectl(lab.host_kubeconfig, kubectl_cache, "default")
    argv = (
        "--name",
        spec.name,
        "--nodes",
        str(spec.workers),
        "--host-api-port",
        str(spec.host_api_port),
    )
    try:
        started = time.monotonic()
        up = lab_command("up", *argv, *flags, timeout=UP_TIMEOUT)
        print(f"kubelab lab up: {time.monotonic() - started:.1f}s\n{up.stdout}")
        assert up.returncode == 0, f"up failed:\n{up.stdout}\n{up.stderr}"
        yield RunningLab(lab, kubectl, up.stdout)
    finally:
        lab_command("down", "--name", spec.name, timeout=180)
