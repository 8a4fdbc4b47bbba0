"""ComponentStatus through the pinned kubelet-less kubectl and the Python client: ``kubectl get
cs`` on a ``kubelab apiserver`` whose components are a fake scheduler answering what a test
says and a controller-manager nobody runs, and on a whole ``kubelab server``."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from tests.controlplane.apiserver.admission_servers import BACKENDS, serve
from tests.controlplane.apiserver.corpus import columns
from tests.controlplane.storage.etcd_server import EtcdServer
from tests.servers import (
    BARE_APISERVER,
    Kubectl,
    ServerProcess,
    free_ports,
    start_all_in_one,
    start_server,
    stop_server,
)

SCHEDULER_PORT, ABSENT_PORT = free_ports(2)
"""The fake scheduler's, and one where nothing listens: the controller-manager is down."""
WARNING = "Warning: v1 ComponentStatus is deprecated in v1.19+"
REFUSED = (
    f'Get "http://127.0.0.1:{ABSENT_PORT}/healthz": dial tcp 127.0.0.1:{ABSENT_PORT}: '
    "connect: connection refused"
)


class FakeComponent(http.server.ThreadingHTTPServer):
    """A component's /healthz answering ``status`` with ``body``."""

    status = 200
    body = b"ok"


class _Health(http.server.BaseHTTPRequestHandler):
    server: FakeComponent

    def do_GET(self) -> None:
        self.send_response(self.server.status if self.path == "/healthz" else 404)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads what the API server made of the answers."""


@pytest.fixture(scope="module")
def scheduler() -> Iterator[FakeComponent]:
    server = FakeComponent(("127.0.0.1", SCHEDULER_PORT), _Health)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


@pytest.fixture(autouse=True)
def healthy_scheduler(scheduler: FakeComponent) -> None:
    scheduler.status, scheduler.body = 200, b"ok"


@pytest.fixture(scope="module", params=BACKENDS)
def apiserver(
    request: pytest.FixtureRequest,
    scheduler: FakeComponent,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ServerProcess]:
    """The API server on each store: etcd-0 reports the store, whichever it is."""
    yield from serve(
        request.param,
        tmp_path_factory,
        *BARE_APISERVER,
        "--component-health",
        f"scheduler=http://127.0.0.1:{SCHEDULER_PORT}/healthz",
        "--component-health",
        f"controller-manager=http://127.0.0.1:{ABSENT_PORT}/healthz",
    )


def test_kubectl_get_cs(kubectl: Kubectl) -> None:
    got = kubectl.run("get", "cs", namespaced=False)
    assert got.stderr.strip() == WARNING
    assert columns(got.stdout) == [
        ["NAME", "STATUS", "MESSAGE", "ERROR"],
        ["controller-manager", "Unhealthy", REFUSED, ""],
        ["etcd-0", "Healthy", "ok", ""],
        ["scheduler", "Healthy", "ok", ""],
    ]


def test_an_unhealthy_answer_and_one_component(kubectl: Kubectl, scheduler: FakeComponent) -> None:
    scheduler.status, scheduler.body = 500, b"[-]informer-sync failed"
    assert columns(kubectl.run("get", "componentstatus", "scheduler", namespaced=False).stdout) == [
        ["NAME", "STATUS", "MESSAGE", "ERROR"],
        ["scheduler", "Unhealthy", "HTTP probe failed with statuscode: 500", ""],
    ]
    healthy = kubectl.json("get", "componentstatuses", "etcd-0")
    assert healthy == {
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": "etcd-0"},
        "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}],
    }
    missing = kubectl.run("get", "cs", "kube-proxy", check=False)
    assert missing.returncode == 1
    assert 'componentstatuses "kube-proxy" not found' in missing.stderr


def test_read_only(kubectl: Kubectl) -> None:
    manifest = {"apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": "mine"}}
    refused = kubectl.run("create", "-f", "-", input=json.dumps(manifest), check=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith("Error from server (MethodNotAllowed): ")
    assert "the server does not allow this method on the requested resource" in refused.stderr
    deleted = kubectl.run("delete", "cs", "etcd-0", check=False, namespaced=False)
    assert deleted.stderr == (
        "Error from server (MethodNotAllowed): "
        "the server does not allow this method on the requested resource\n"
    )
    rows = [
        line.split()
        for line in kubectl.run("api-resources", "-o", "wide", namespaced=False).stdout.splitlines()
        if line.startswith("componentstatuses ")
    ]
    assert rows == [["componentstatuses", "cs", "v1", "false", "ComponentStatus", "get,list"]]
    explained = kubectl.run("explain", "componentstatus.conditions", namespaced=False).stdout
    assert "type\t<string> -required-" in explained and "error\t<string>" in explained


def test_python_client(api_client: kubernetes.client.ApiClient) -> None:
    core = k8s.CoreV1Api(api_client)
    listed = core.list_component_status()
    conditions = {
        s.metadata.name: (s.conditions[0].type, s.conditions[0].status, s.conditions[0].message)
        for s in listed.items
    }
    assert conditions == {
        "controller-manager": ("Healthy", "False", REFUSED),
        "etcd-0": ("Healthy", "True", "ok"),
        "scheduler": ("Healthy", "True", "ok"),
    }
    selected = core.list_component_status(field_selector="metadata.name=etcd-0").items
    assert [s.metadata.name for s in selected] == ["etcd-0"]
    with pytest.raises(ApiException) as unknown:
        core.list_component_status(field_selector="status=True")
    assert unknown.value.status == 400


def test_a_whole_server_reports_its_components_healthy(tmp_path: Path) -> None:
    """``kubelab server`` tells its API server where it runs the scheduler and the
    controller-manager (here on ports it chose)."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = start_all_in_one(data_dir)
    try:
        kubectl = Kubectl(server.kubeconfig, tmp_path / "cache", "default")
        # The server answers once its API server serves; the others start after it.
        deadline = time.monotonic() + 60
        while True:
            table = columns(kubectl.run("get", "cs", namespaced=False).stdout)
            if all(row[1] == "Healthy" for row in table[1:]) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert table == [
            ["NAME", "STATUS", "MESSAGE", "ERROR"],
            ["controller-manager", "Healthy", "ok", ""],
            ["etcd-0", "Healthy", "ok", ""],
            ["scheduler", "Healthy", "ok", ""],
        ]
    finally:
        stop_server(server)


@pytest.mark.etcd
def test_etcd_down_is_reported(tmp_path: Path) -> None:
    """The store's own error, under ERROR, as upstream's etcd probe reports it."""
    etcd = EtcdServer(tmp_path / "etcd")
    etcd.start()
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = start_server(data_dir, *BARE_APISERVER, "--store", f"etcd://{etcd.endpoint}")
    try:
        kubectl = Kubectl(server.kubeconfig, tmp_path / "cache", "default")
        kubectl.run("api-resources", namespaced=False)  # discovery cached while etcd is up
        etcd.stop()
        got = kubectl.run("get", "cs", "etcd-0", namespaced=False, check=False)
        assert got.returncode == 0, got.stderr
        (header, row) = columns(got.stdout)
        assert header == ["NAME", "STATUS", "MESSAGE", "ERROR"]
        assert row[:3] == ["etcd-0", "Unhealthy", ""] and row[3], row
    finally:
        stop_server(server)
        etcd.stop()
