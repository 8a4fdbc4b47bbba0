"""Exec through the whole chain on a real containerd: stdin that ends, exit codes, output.

kubectl (WebSocket v5) or the official Python client → API server → kubelet → containerd's
streaming server over SPDY → the process.  The point is stdin's end: ``echo hello | kubectl
exec -i POD -- cat`` must end when the pipe does (v5's close of channel 0 becomes a FIN on the
SPDY stdin stream; with a tty, a Ctrl-D), and the exit status must come back.  One cluster
for the module (``kubelet_node.KubeletCluster``), one namespace and one long-running pod for
all tests.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.node.containerd_node import containerd_images_fixture  # noqa: F401 (fixture)
from tests.node.kubelet_node import KubeletCluster, kubelet_logs
from tests.servers import Kubectl

pytestmark = [pytest.mark.privileged, pytest.mark.containerd]

BUSYBOX = "docker.io/library/busybox:1.35"
POD = "shell"
TIMEOUT = 60.0


def wait_for(check: Any, what: str, cluster: KubeletCluster) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{kubelet_logs(cluster)}")
        time.sleep(0.25)


@pytest.fixture(scope="module")
def cluster(
    containerd_images: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeletCluster]:
    with KubeletCluster(containerd_images, tmp_path_factory.mktemp("exec-stdin")) as c:
        kubectl = c.kubectl()

        def node_ready() -> bool:
            result = kubectl.run("get", "node", c.node_name, "-o", "json", check=False)
            if result.returncode != 0:
                return False
            node = json.loads(result.stdout)
            conditions = {x["type"]: x["status"] for x in node["status"].get("conditions", [])}
            return conditions.get("Ready") == "True" and bool(node["spec"].get("podCIDR"))

        wait_for(node_ready, f"node {c.node_name} to be Ready", c)
        yield c


@pytest.fixture(scope="module")
def kubectl(cluster: KubeletCluster) -> Iterator[Kubectl]:
    """A namespace with one running busybox pod, ``POD``."""
    namespace = f"t-{uuid.uuid4().hex[:6]}"
    kubectl = cluster.kubectl(namespace)
    kubectl.run("create", "namespace", namespace, namespaced=False)
    wait_for(
        lambda: kubectl.run("get", "serviceaccount", "default", check=False).returncode == 0,
        "the default service account",
        cluster,
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD},
        "spec": {
            "containers": [{"name": "sh", "image": BUSYBOX, "command": ["sleep", "3600"]}],
            "terminationGracePeriodSeconds": 1,
        },
    }
    kubectl.run("apply", "-f", "-", input=json.dumps(pod))
    jsonpath = "jsonpath={.status.phase}"
    wait_for(
        lambda: kubectl.run("get", "pod", POD, "-o", jsonpath, check=False).stdout == "Running",
        f"pod {POD} to run",
        cluster,
    )
    yield kubectl
    kubectl.run("delete", "namespace", namespace, "--wait=false", namespaced=False)


def test_kubectl_exec_stdin_ends_with_the_pipe(kubectl: Kubectl) -> None:
    result = kubectl.run("exec", "-i", POD, "--", "cat", input="hello\n")
    assert (result.returncode, result.stdout) == (0, "hello\n")


def test_kubectl_exec_exit_code(kubectl: Kubectl) -> None:
    result = kubectl.run("exec", POD, "--", "sh", "-c", "exit 7", check=False)
    assert result.returncode == 7, result.stderr


def test_kubectl_exec_output(kubectl: Kubectl) -> None:
    result = kubectl.run("exec", POD, "--", "echo", "hi")
    assert (result.returncode, result.stdout) == (0, "hi\n")


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "tty"])
def test_python_client_closes_stdin(cluster: KubeletCluster, kubectl: Kubectl, tty: bool) -> None:
    from kubernetes import client, config
    from kubernetes.stream import stream

    api = config.new_client_from_config(config_file=str(cluster.host_kubeconfig))
    try:
        core = client.CoreV1Api(api)
        ws = stream(
            core.connect_get_namespaced_pod_exec,
            POD,
            kubectl.namespace,
            command=["cat"],
            stdin=True,
            stdout=True,
            stderr=not tty,
            tty=tty,
            _preload_content=False,
        )
        try:
            ws.write_stdin("from python\n")
            # v5: the end of stdin, right away (with a tty, the output must not be lost).
            ws.close_channel(0)
            ws.run_forever(timeout=TIMEOUT)
            assert not ws.is_open(), "the session did not end after stdin was closed"
            # A terminal echoes the input and turns newlines into CR LF.
            expected = "from python\r\nfrom python\r\n" if tty else "from python\n"
            assert ws.read_stdout() == expected
            assert ws.returncode == 0
        finally:
            ws.close()
            if ws.sock is not None:
                # websocket-client's close() returns early once it answered the peer's close
                # frame, leaving the socket open: close it.
                ws.sock.shutdown()
    finally:
        api.close()
