"""Network namespaces for privileged tests: made on demand, each with a unique name and its
loopback up, and all deleted when the test (or the ``with`` block) ends, whatever happened.

The ``make_netns`` fixture (``tests/conftest.py``) hands a test a :class:`NetnsFactory`;
harnesses that outlive one test (a node-and-pod pair) hold one in ``contextlib.closing``.
Deleting a namespace a test already deleted is not an error, so a test may remove one on
purpose (a pod sandbox that disappears).
"""

from __future__ import annotations

import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kubelab.lab.topology import NETNS_DIR
from tests.servers import REPO


@dataclass(frozen=True)
class Netns:
    """One namespace: its name for ``ip -n``, its path for ``nsenter --net=``."""

    name: str

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def run(
        self, *argv: str, input: str | None = None, timeout: float = 600.0
    ) -> subprocess.CompletedProcess[str]:
        """``argv`` inside the namespace (``nsenter --net``), from the repository's root; the
        caller checks the outcome."""
        return subprocess.run(
            ["nsenter", f"--net={self.path}", *argv],
            input=input,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )

    def ip(self, *argv: str) -> str:
        """``ip -n <name> argv...``; its output, CalledProcessError with stderr if it fails."""
        return subprocess.run(
            ["ip", "-n", self.name, *argv], check=True, capture_output=True, text=True
        ).stdout


@dataclass
class NetnsFactory:
    """Makes namespaces named ``<prefix>-<random>`` and deletes every one it made on close."""

    prefix: str = "kl-test"
    made: list[Netns] = field(default_factory=list)

    def __call__(self, prefix: str | None = None) -> Netns:
        return self.named(f"{prefix or self.prefix}-{uuid.uuid4().hex[:8]}")

    def named(self, name: str) -> Netns:
        """A namespace of exactly this name, for a test whose files name it; one a killed
        run left behind is replaced."""
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
        netns = Netns(name)
        self.made.append(netns)
        netns.ip("link", "set", "lo", "up")
        return netns

    def close(self) -> None:
        while self.made:
            name = self.made.pop().name
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


__all__ = ["Netns", "NetnsFactory"]
