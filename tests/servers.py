"""Real ``kubelab`` processes, started as users start them, and the pinned kubectl, for tests
of any package.

The server runs as a subprocess (``python -m kubelab apiserver --secure-port 0``) so blocking
clients (kubectl, the official Python client) can talk to it from the test.  ``stop_server``
ends it by PID.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from kube.component import parse_duration

KUBECTL = Path(sys.executable).parent / "kubectl"
START_TIMEOUT = 60.0
"""Seconds a server may take to say it is serving."""
REPO = Path(__file__).parents[1]
BARE_APISERVER = ("--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition")
"""Flags for an API server run alone whose tests create pods or nodes: no controller-manager
runs beside it, so no namespace gets the ``default`` ServiceAccount that ServiceAccount
admission requires of pods, and nothing lifts the not-ready taint TaintNodesByCondition puts
on new Nodes.  Each test that needs them passes them itself."""


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    data_dir: Path
    port: int
    log: IO[str]

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "admin.kubeconfig"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


async def start_component(*argv: str) -> tuple[asyncio.subprocess.Process, str]:
    """``kubelab ARGV...`` as a pod runs it outside a pod (no ``KUBERNETES_*`` variables),
    and the first line it prints (where components say what they serve)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubelab",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")},
    )
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    return process, line.decode()


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback TCP ports nobody listens on (held open together while
    chosen; another process may still take one before the caller does)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port() -> int:
    """A loopback TCP port nobody listens on (``free_ports``)."""
    return free_ports(1)[0]


def host_address() -> str:
    """An IPv4 address of this machine other than loopback, which EndpointSlices refuse."""
    shown = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    addresses = [shown[i + 1].partition("/")[0] for i, word in enumerate(shown) if word == "inet"]
    if not addresses:
        pytest.skip("no IPv4 address off loopback to serve the extension server on")
    return addresses[0]


def start_server(
    data_dir: Path, *extra: str, command: str = "apiserver", prefix: Sequence[str] = ()
) -> ServerProcess:
    """``kubelab COMMAND`` (``apiserver`` or ``server``) on a free port, once it serves, with
    the flags a user would give it plus ``extra`` (nothing is added behind the caller's back).

    ``prefix`` runs it under another command (``nsenter --net=... --``)."""
    log_path = data_dir.parent / f"{data_dir.name}.log"
    log = log_path.open("w")
    process = subprocess.Popen(
        [
            *prefix,
            sys.executable,
            "-m",
            "kubelab",
            command,
            "--data-dir",
            str(data_dir),
            "--secure-port",
            "0",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        cwd=REPO,
    )
    assert process.stdout is not None
    # readline blocks: if the line never comes, a timer ends the process and so the wait.
    timer = threading.Timer(START_TIMEOUT, process.kill)
    timer.start()
    try:
        line = process.stdout.readline()
    finally:
        timer.cancel()
    match = re.search(r"serving on https://[^:]+:(\d+)", line)
    server = ServerProcess(process, data_dir, int(match.group(1)) if match else 0, log)
    if not match:
        stop_server(server)
        raise AssertionError(f"apiserver did not start: {line!r}\n{log_path.read_text()}")
    return server


def start_all_in_one(data_dir: Path, *extra: str) -> ServerProcess:
    """``kubelab server`` with the scheduler's and controller-manager's ports free, once it
    serves."""
    return start_server(
        data_dir,
        "--scheduler-port",
        "0",
        "--controller-manager-port",
        "0",
        *extra,
        command="server",
    )


def serve_all_in_one(
    tmp_path_factory: pytest.TempPathFactory, *extra: str
) -> Iterator[ServerProcess]:
    """``kubelab server`` (``start_all_in_one``) for a module fixture, stopped at its end."""
    data_dir = tmp_path_factory.mktemp("server") / "data"
    data_dir.mkdir()
    process = start_all_in_one(data_dir, *extra)
    try:
        yield process
    finally:
        stop_server(process)


def stop_server(server: ServerProcess) -> None:
    if server.process.poll() is None:
        os.kill(server.process.pid, signal.SIGTERM)
        try:
            server.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait()
    if server.process.stdout is not None:
        server.process.stdout.close()
    server.log.close()


@dataclass
class Kubectl:
    kubeconfig: Path
    cache_dir: Path
    namespace: str

    def argv(self, *args: str, namespaced: bool = True) -> list[str]:
        """The command line of ``kubectl ARGS...`` on this server (in the namespace)."""
        command = [
            str(KUBECTL),
            "--kubeconfig",
            str(self.kubeconfig),
            "--cache-dir",
            str(self.cache_dir),
        ]
        if namespaced:
            command += ["-n", self.namespace]
        return [*command, *args]

    def run(
        self, *args: str, input: str | None = None, check: bool = True, namespaced: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            self.argv(*args, namespaced=namespaced),
            input=input,
            capture_output=True,
            text=True,
            timeout=_process_timeout(args),
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def json(self, *args: str) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.run(*args, "-o", "json").stdout)
        return loaded


def _process_timeout(args: Sequence[str]) -> float:
    """How long a kubectl call may run: 60 s, or its own ``--timeout=`` plus time to report
    it (``rollout status --timeout=90s`` must fail with kubectl's message, not be killed)."""
    waits = [
        parse_duration(a.removeprefix("--timeout=")) for a in args if a.startswith("--timeout=")
    ]
    return max([60.0, *(wait + 30.0 for wait in waits)])
