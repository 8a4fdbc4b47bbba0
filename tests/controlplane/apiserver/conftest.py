"""A real ``kubelab apiserver`` process on each storage backend, and real clients for it.

The server runs as a subprocess (``python -m kubelab apiserver --secure-port 0``), as users run
it, so blocking clients (kubectl, the official Python client) can talk to it from the test.
One server serves a whole test module; each test gets a namespace of its own.  The process is
stopped by PID at the end and its data directory removed with the tmp path.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import kubernetes
import pytest

from tests.controlplane.storage.etcd_server import EtcdServer, etcd_available

KUBECTL = Path(sys.executable).parent / "kubectl"
START_TIMEOUT = 60.0
"""Seconds a server may take to say it is serving."""
REPO = Path(__file__).parents[3]


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


def start_server(data_dir: Path, *extra: str) -> ServerProcess:
    log_path = data_dir.parent / f"{data_dir.name}.log"
    log = log_path.open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubelab",
            "apiserver",
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


@pytest.fixture(scope="module", params=["sqlite", pytest.param("etcd", marks=pytest.mark.etcd)])
def apiserver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """One API server per test module and backend: every API test runs on SQLite and etcd."""
    base = tmp_path_factory.mktemp(f"apiserver-{request.param}")
    data_dir = base / "data"
    data_dir.mkdir()
    etcd: EtcdServer | None = None
    extra: list[str] = []
    if request.param == "etcd":
        if not etcd_available():
            pytest.skip("no etcd binary (`make setup` installs etcd-server)")
        etcd = EtcdServer(base / "etcd")
        etcd.start()
        extra = ["--store", f"etcd://{etcd.endpoint}"]
    server = start_server(data_dir, *extra)
    try:
        yield server
    finally:
        stop_server(server)
        if etcd is not None:
            etcd.stop()


@dataclass
class Kubectl:
    kubeconfig: Path
    cache_dir: Path
    namespace: str

    def run(
        self, *args: str, input: str | None = None, check: bool = True, namespaced: bool = True
    ) -> subprocess.CompletedProcess[str]:
        command = [
            str(KUBECTL),
            "--kubeconfig",
            str(self.kubeconfig),
            "--cache-dir",
            str(self.cache_dir),
        ]
        if namespaced:
            command += ["-n", self.namespace]
        result = subprocess.run(
            [*command, *args], input=input, capture_output=True, text=True, timeout=60
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def json(self, *args: str) -> dict[str, object]:
        loaded: dict[str, object] = json.loads(self.run(*args, "-o", "json").stdout)
        return loaded


@pytest.fixture
def namespace(apiserver: ServerProcess) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(apiserver.kubeconfig), "create", "-f", "-"],
        input=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return name


@pytest.fixture
def kubectl(apiserver: ServerProcess, namespace: str, tmp_path: Path) -> Kubectl:
    return Kubectl(apiserver.kubeconfig, tmp_path / "kube-cache", namespace)


@pytest.fixture
def api_client(apiserver: ServerProcess) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        yield client
    finally:
        client.close()
