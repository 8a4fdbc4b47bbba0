"""``kubelab lab ui`` given what it cannot serve: a clear line and an exit status, never a
traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import REPO


def ui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelab", "lab", "ui", *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "status", "said"),
    [
        pytest.param(("--name", "nolabhere"), 1, "lab nolabhere is not up", id="no-lab"),
        pytest.param(
            ("--kubeconfig", "/nonexistent/kubeconfig"),
            2,
            "cannot load the kubeconfig /nonexistent/kubeconfig",
            id="no-kubeconfig",
        ),
        pytest.param(("--port", "99999"), 2, "expected a port number 0-65535", id="bad-port"),
        pytest.param(("--name", "Not-A-Lab"), 2, "lab name 'Not-A-Lab'", id="bad-name"),
    ],
)
def test_bad_input_is_said_plainly(args: tuple[str, ...], status: int, said: str) -> None:
    done = ui(*args)
    assert done.returncode == status, done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_a_file_that_is_no_kubeconfig(tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_text("just text\n")
    done = ui("--name", "nolabhere", "--kubeconfig", str(junk))
    assert done.returncode == 2
    assert f"cannot load the kubeconfig {junk}" in done.stderr
