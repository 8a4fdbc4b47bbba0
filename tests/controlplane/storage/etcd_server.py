"""A real etcd for tests: one member on loopback, its own free ports and data directory.

``EtcdServer`` starts ``etcd`` (3.4 flags) as a child process in its own session, waits until
``/health`` on the client URL answers healthy, and stops it by PID: SIGTERM, then SIGKILL after
a timeout.  ``kill()`` is the kill -9 a crash test wants.  The ports are chosen once, so a
stopped server starts again on the same client endpoint with the same data (a restart).

Should the test process die without running its finalizers (kill -9, ``os._exit``), the kernel
kills etcd too (``PR_SET_PDEATHSIG``), so nothing is left listening.  That signal follows the
*thread* that started etcd: call ``start`` from a thread that outlives the server (the main one).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

ETCD_BINARY = shutil.which("etcd") or "/usr/bin/etcd"


def etcd_available() -> bool:
    return Path(ETCD_BINARY).is_file() and os.access(ETCD_BINARY, os.X_OK)


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies (Linux; elsewhere nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports nobody listens on (held open together while chosen)."""
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


class EtcdServer:
    """One etcd member under ``base_dir`` (its data in ``base_dir/data``, its log beside it)."""

    def __init__(self, base_dir: Path, *, name: str = "kubelab-test") -> None:
        self.base_dir = base_dir
        self.data_dir = base_dir / "data"
        self.log_path = base_dir / "etcd.log"
        self.name = name
        self.client_port, self.peer_port = free_ports(2)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The client endpoint, as ``EtcdStore.open`` takes it."""
        return f"127.0.0.1:{self.client_port}"

    @property
    def client_url(self) -> str:
        return f"http://{self.endpoint}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = 30.0) -> None:
        if self.running():
            return
        self.base_dir.mkdir(parents=True, exist_ok=True)
        peer_url = f"http://127.0.0.1:{self.peer_port}"
        command = [
            ETCD_BINARY,
            "--name",
            self.name,
            "--data-dir",
            str(self.data_dir),
            "--listen-client-urls",
            self.client_url,
            "--advertise-client-urls",
            self.client_url,
            "--listen-peer-urls",
            peer_url,
            "--initial-advertise-peer-urls",
            peer_url,
            "--initial-cluster",
            f"{self.name}={peer_url}",
            "--initial-cluster-state",
            "new",
            "--logger",
            "zap",
            "--log-outputs",
            "stderr",
        ]
        # The environment's ETCD_* variables would override these flags (etcd reads them).
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        try:
            self._wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                code = self._process.returncode
                raise RuntimeError(f"etcd exited with {code} while starting:\n{self.log_tail()}")
            if self._healthy():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"etcd not healthy after {timeout}s:\n{self.log_tail()}")
            time.sleep(0.05)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=1) as response:
                return bool(json.loads(response.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited after ``timeout`` seconds."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                process.wait()

    def kill(self) -> None:
        """kill -9: the crash a durability test wants."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        process.wait()

    def __enter__(self) -> EtcdServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
