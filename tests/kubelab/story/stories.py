"""``kubelab story`` run as a user runs it, for the story tests (the server's and the lab's)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
Steps = list[dict[str, str]]


def story(kubeconfig: Path, namespace: str, target: str, *flags: str) -> Steps:
    """``kubelab story TARGET -o json`` in ``namespace``: the steps it printed."""
    result = subprocess.run(
        [
            sys.executable, "-m", "kubelab", "story", target, "-n", namespace, "-o", "json",
            "--kubeconfig", str(kubeconfig), *flags,
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    steps: Steps = json.loads(result.stdout)
    return steps


def until(check: Callable[[], T], what: str, within: float = 60.0) -> T:
    """``check()`` once it is truthy, asked every half second for ``within`` seconds."""
    deadline = time.monotonic() + within
    while not (found := check()):
        assert time.monotonic() < deadline, f"no {what} in {within} s"
        time.sleep(0.5)
    return found
