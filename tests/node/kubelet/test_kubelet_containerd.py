"""The kubelet on a real containerd in a node namespace, driven with the real kubectl.

One cluster per module (``kubelet_node.KubeletCluster``): ``kubelab server`` and
``kubelab kubelet`` in the node's network namespace beside containerd, the pod network from
our CNI plugin once the node IPAM controller gave the Node its podCIDR.  Each test works in a
namespace of its own and checks what a user would: pod status, ``kubectl logs/exec/
port-forward``, restarts, deletion, and that nothing is left behind on the node.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from node.cni.network import host_veth_name
from node.cri.client import RuntimeClient
from node.kubelet.runtime.labels import POD_UID_LABEL
from tests.node.containerd_node import containerd_images_fixture  # noqa: F401 (fixture)
from tests.node.kubelet_node import KubeletCluster, kubelet_logs, pod_cgroups
from tests.servers import KUBECTL, Kubectl

pytestmark = [pytest.mark.privileged, pytest.mark.containerd]

BUSYBOX = "docker.io/library/busybox:1.35"
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def cluster(
    containerd_images: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeletCluster]:
    with KubeletCluster(containerd_images, tmp_path_factory.mktemp("kubelet-cluster")) as c:
        kubectl = c.kubectl()
        try:
            wait_for(
                lambda: _node_ready(kubectl, c.node_name), f"node {c.node_name} to be Ready", c
            )
            yield c
        finally:
            print(kubelet_logs(c))


def wait_for(
    check: Callable[[], bool], what: str, cluster: KubeletCluster, timeout: float = TIMEOUT
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{kubelet_logs(cluster)}")
        time.sleep(0.25)


def _node_ready(kubectl: Kubectl, name: str) -> bool:
    result = kubectl.run("get", "node", name, "-o", "json", check=False, namespaced=False)
    if result.returncode != 0:
        return False
    node = json.loads(result.stdout)
    conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
    return conditions.get("Ready") == "True" and bool(node["spec"].get("podCIDR"))


@pytest.fixture
def kubectl(cluster: KubeletCluster) -> Iterator[Kubectl]:
    namespace = f"t-{uuid.uuid4().hex[:6]}"
    kubectl = cluster.kubectl(namespace)
    kubectl.run("create", "namespace", namespace, namespaced=False)
    wait_for(
        lambda: kubectl.run("get", "serviceaccount", "default", check=False).returncode == 0,
        "the default service account",
        cluster,
    )
    yield kubectl
    kubectl.run("delete", "namespace", namespace, "--wait=false", namespaced=False)


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    kubectl.run("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objects))


def pod(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": containers, "terminationGracePeriodSeconds": 2, **spec},
    }


def get_pod(kubectl: Kubectl, name: str) -> dict[str, Any]:
    return kubectl.json("get", "pod", name)


def phase(kubectl: Kubectl, name: str) -> str:
    result = kubectl.run("get", "pod", name, "-o", "jsonpath={.status.phase}", check=False)
    return result.stdout


def wait_phase(cluster: KubeletCluster, kubectl: Kubectl, name: str, want: str) -> None:
    wait_for(lambda: phase(kubectl, name) == want, f"pod {name} to be {want}", cluster)


def wait_ready(cluster: KubeletCluster, kubectl: Kubectl, name: str) -> None:
    def ready() -> bool:
        result = kubectl.run(
            "get",
            "pod",
            name,
            "-o",
            'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
            check=False,
        )
        return result.stdout == "True"

    wait_for(ready, f"pod {name} to be Ready", cluster)


def test_a_pod_with_init_containers_volumes_and_env_from_every_source(
    cluster: KubeletCluster, kubectl: Kubectl
) -> None:
    secret_value = base64.b64encode(b"s3cret").decode()
    apply(
        kubectl,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg"},
            "data": {"greeting": "hello", "file.txt": "from a configmap"},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "sec"},
            "data": {"password": secret_value},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "backend"},
            "spec": {"ports": [{"port": 8080, "name": "http"}]},
        },
    )
    wait_for(
        lambda: kubectl.run("get", "svc", "backend", check=False).returncode == 0,
        "the service",
        cluster,
    )
    app = {
        "name": "app",
        "image": BUSYBOX,
        "command": [
            "sh",
            "-c",
            "env | sort; cat /work/init.txt; cat /cfg/file.txt; "
            "cat /sec/password; echo; cat /proj/labels; echo; "
            "ls /var/run/secrets/kubernetes.io/serviceaccount; sleep 3600",
        ],
        "env": [
            {"name": "LITERAL", "value": "plain"},
            {"name": "EXPANDED", "value": "$(LITERAL)-x"},
            {
                "name": "FROM_CM",
                "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}},
            },
            {
                "name": "FROM_SECRET",
                "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}},
            },
            {"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {
                "name": "MEM_LIMIT",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
            },
        ],
        "envFrom": [{"prefix": "CM_", "configMapRef": {"name": "cfg"}}],
        "resources": {"limits": {"memory": "64Mi", "cpu": "200m"}},
        "volumeMounts": [
            {"name": "work", "mountPath": "/work"},
            {"name": "cfg", "mountPath": "/cfg"},
            {"name": "sec", "mountPath": "/sec"},
            {"name": "proj", "mountPath": "/proj"},
        ],
    }
    init = [
        {
            "name": "first",
            "image": BUSYBOX,
            "command": ["sh", "-c", "echo one > /work/init.txt"],
            "volumeMounts": [{"name": "work", "mountPath": "/work"}],
        },
        {
            "name": "second",
            "image": BUSYBOX,
            "command": ["sh", "-c", "test -f /work/init.txt && echo two >> /work/init.txt"],
            "volumeMounts": [{"name": "work", "mountPath": "/work"}],
        },
    ]
    volumes = [
        {"name": "work", "emptyDir": {}},
        {"name": "cfg", "configMap": {"name": "cfg"}},
        {"name": "sec", "secret": {"secretName": "sec"}},
        {
            "name": "proj",
            "projected": {
                "sources": [
                    {
                        "downwardAPI": {
                            "items": [
                                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}
                            ]
                        }
                    }
                ]
            },
        },
    ]
    spec = pod("full", [app], initContainers=init, volumes=volumes)
    spec["metadata"]["labels"] = {"app": "full"}
    apply(kubectl, spec)
    wait_phase(cluster, kubectl, "full", "Running")
    status = get_pod(kubectl, "full")["status"]
    assert [s["state"]["terminated"]["reason"] for s in status["initContainerStatuses"]] == [
        "Completed",
        "Completed",
    ]
    assert status["podIP"].startswith("10.244.")

    def logged() -> str:
        return kubectl.run("logs", "full", "-c", "app", check=False).stdout

    wait_for(lambda: "token" in logged(), "the app's output", cluster)
    out = logged()
    for line in (
        "LITERAL=plain",
        "EXPANDED=plain-x",
        "FROM_CM=hello",
        "FROM_SECRET=s3cret",
        "MY_POD=full",
        f"MY_IP={status['podIP']}",
        "MEM_LIMIT=64",
        "CM_greeting=hello",
        "BACKEND_SERVICE_PORT=8080",
        "BACKEND_SERVICE_PORT_HTTP=8080",
        "KUBERNETES_SERVICE_HOST=",
        "one\ntwo",
        "from a configmap",
        "s3cret",
        'app="full"',
        "ca.crt\nnamespace\ntoken",
    ):
        assert line in out, f"{line!r} not in the logs:\n{out}"


def test_kubectl_exec_logs_and_port_forward_through_the_api_server(
    cluster: KubeletCluster, kubectl: Kubectl
) -> None:
    apply(
        kubectl,
        pod(
            "web",
            [
                {
                    "name": "web",
                    "image": BUSYBOX,
                    "command": [
                        "sh",
                        "-c",
                        "echo started; mkdir -p /www; echo hello-from-pod > "
                        "/www/index.html; exec httpd -f -p 8080 -h /www",
                    ],
                    "ports": [{"containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
                }
            ],
        ),
    )
    wait_ready(cluster, kubectl, "web")
    assert kubectl.run("exec", "web", "--", "echo", "hi").stdout == "hi\n"
    failed = kubectl.run("exec", "web", "--", "sh", "-c", "exit 3", check=False)
    assert failed.returncode == 3
    assert "started" in kubectl.run("logs", "web").stdout
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        local = probe.getsockname()[1]
    forward = subprocess.Popen(
        [
            str(KUBECTL),
            "--kubeconfig",
            str(kubectl.kubeconfig),
            "-n",
            kubectl.namespace,
            "port-forward",
            "pod/web",
            f"{local}:8080",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert forward.stdout is not None
        assert "Forwarding from" in forward.stdout.readline()
        body = subprocess.run(
            ["curl", "-s", "--max-time", "10", f"http://127.0.0.1:{local}/"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        assert body == "hello-from-pod\n"
    finally:
        forward.terminate()
        forward.wait(10)
        forward.stdout.close() if forward.stdout else None
        forward.stderr.close() if forward.stderr else None


def test_liveness_failure_restarts_and_crash_loop_backs_off(
    cluster: KubeletCluster, kubectl: Kubectl
) -> None:
    apply(
        kubectl,
        pod(
            "live",
            [
                {
                    "name": "live",
                    "image": BUSYBOX,
                    "command": ["sh", "-c", "touch /tmp/healthy; sleep 3600"],
                    "livenessProbe": {
                        "exec": {"command": ["test", "-f", "/tmp/healthy"]},
                        "periodSeconds": 1,
                        "failureThreshold": 1,
                    },
                }
            ],
        ),
        pod("crash", [{"name": "crash", "image": BUSYBOX, "command": ["sh", "-c", "exit 2"]}]),
    )
    wait_phase(cluster, kubectl, "live", "Running")
    kubectl.run("exec", "live", "--", "rm", "/tmp/healthy")

    def restarts(name: str) -> int:
        statuses = get_pod(kubectl, name)["status"].get("containerStatuses") or [{}]
        return int(statuses[0].get("restartCount", 0))

    wait_for(lambda: restarts("live") >= 1, "the liveness restart", cluster)
    # CrashLoopBackOff: the first restart is at once, the second 10 s after, the third 20 s.
    wait_for(lambda: restarts("crash") >= 2, "the second crash restart", cluster)
    second = time.monotonic()
    wait_for(lambda: restarts("crash") >= 3, "the third crash restart", cluster)
    assert 15 <= time.monotonic() - second <= 30
    status = get_pod(kubectl, "crash")["status"]["containerStatuses"][0]
    assert status["lastState"]["terminated"]["exitCode"] == 2
    assert "BackOff" in event_reasons(kubectl, "crash")
    assert "Killing" in event_reasons(kubectl, "live")


def event_reasons(kubectl: Kubectl, name: str) -> list[str]:
    events = kubectl.json("get", "events", "--field-selector", f"involvedObject.name={name}")
    items: list[dict[str, Any]] = events["items"]
    return [e["reason"] for e in items]


def test_logs_of_the_previous_instance_and_followed_logs(
    cluster: KubeletCluster, kubectl: Kubectl
) -> None:
    apply(
        kubectl,
        pod(
            "talk",
            [
                {
                    "name": "talk",
                    "image": BUSYBOX,
                    "command": [
                        "sh",
                        "-c",
                        "echo run-$(cat /data/n 2>/dev/null || echo 0); "
                        "echo 1 > /data/n; i=0; while true; do echo tick-$i; i=$((i+1)); "
                        "sleep 0.2; [ $i = 5 ] && [ ! -f /data/stay ] && touch /data/stay "
                        "&& exit 1; done",
                    ],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            volumes=[{"name": "data", "emptyDir": {}}],
        ),
    )

    def restarted() -> bool:
        statuses = get_pod(kubectl, "talk")["status"].get("containerStatuses") or [{}]
        return statuses[0].get("restartCount", 0) >= 1 and "running" in statuses[0]["state"]

    wait_for(restarted, "the talking container to restart", cluster)
    previous = kubectl.run("logs", "talk", "--previous").stdout
    assert previous.startswith("run-0\ntick-0\n") and "tick-4" in previous
    follow = subprocess.Popen(
        [
            str(KUBECTL),
            "--kubeconfig",
            str(kubectl.kubeconfig),
            "-n",
            kubectl.namespace,
            "logs",
            "-f",
            "talk",
            "--tail",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follow.stdout is not None
        lines = [follow.stdout.readline() for _ in range(3)]
        numbers = [int(line.strip().removeprefix("tick-")) for line in lines]
        assert numbers == sorted(numbers) and len(set(numbers)) == 3, lines
    finally:
        follow.terminate()
        follow.wait(10)
        for stream in (follow.stdout, follow.stderr):
            if stream is not None:
                stream.close()


def test_oom_killed_under_a_small_memory_limit(cluster: KubeletCluster, kubectl: Kubectl) -> None:
    apply(
        kubectl,
        pod(
            "oom",
            [
                {
                    "name": "oom",
                    "image": BUSYBOX,
                    "command": [
                        "sh",
                        "-c",
                        "x=$(head -c 100000000 /dev/zero | tr '\\0' a); sleep 1",
                    ],
                    "resources": {"limits": {"memory": "16Mi"}},
                }
            ],
            restartPolicy="Never",
        ),
    )
    wait_phase(cluster, kubectl, "oom", "Failed")
    terminated = get_pod(kubectl, "oom")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["reason"] == "OOMKilled"


def test_graceful_deletion_runs_pre_stop_and_leaves_nothing_behind(
    cluster: KubeletCluster, kubectl: Kubectl
) -> None:
    marker = cluster.work_dir / f"prestop-{kubectl.namespace}"
    apply(
        kubectl,
        pod(
            "bye",
            [
                {
                    "name": "bye",
                    "image": BUSYBOX,
                    "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"],
                    "lifecycle": {
                        "preStop": {"exec": {"command": ["sh", "-c", "echo bye > /host/done"]}}
                    },
                    "volumeMounts": [{"name": "host", "mountPath": "/host"}],
                }
            ],
            volumes=[
                {"name": "host", "hostPath": {"path": str(marker), "type": "DirectoryOrCreate"}}
            ],
        ),
    )
    wait_phase(cluster, kubectl, "bye", "Running")
    uid = get_pod(kubectl, "bye")["metadata"]["uid"]
    (sandbox,) = sandbox_ids(cluster, uid)
    # Not a count of links: earlier tests' pods may still be going, their veths with them.
    veth = host_veth_name(sandbox, "eth0")
    assert veth in cluster.interfaces()
    pod_ip = get_pod(kubectl, "bye")["status"]["podIP"]
    kubectl.run("delete", "pod", "bye", "--wait=true", "--timeout=60s")
    assert (marker / "done").read_text() == "bye\n"
    wait_for(lambda: veth not in cluster.interfaces(), "the pod's veth to go", cluster)
    wait_for(
        lambda: runtime_pods(cluster, uid) == (0, 0), "the pod's sandbox to be removed", cluster
    )
    assert not (cluster.kubelet_root / "pods" / uid).exists()
    assert not any(uid.replace("-", "_") in str(p) or uid in str(p) for p in pod_cgroups(cluster))
    assert not any(uid in str(m) for m in cluster.containerd.mounts())
    assert pod_ip not in allocated_ips(cluster)


def test_a_restarted_kubelet_adopts_its_pods_without_duplicates(
    cluster: KubeletCluster, kubectl: Kubectl
) -> None:
    apply(
        kubectl, pod("steady", [{"name": "steady", "image": BUSYBOX, "command": ["sleep", "3600"]}])
    )
    wait_phase(cluster, kubectl, "steady", "Running")
    uid = get_pod(kubectl, "steady")["metadata"]["uid"]
    before = get_pod(kubectl, "steady")["status"]["containerStatuses"][0]["containerID"]
    assert runtime_pods(cluster, uid) == (1, 1)
    cluster.stop_kubelet()
    cluster.start_kubelet()
    time.sleep(5)
    after = get_pod(kubectl, "steady")["status"]
    assert after["phase"] == "Running"
    assert after["containerStatuses"][0]["containerID"] == before
    assert after["containerStatuses"][0]["restartCount"] == 0
    assert runtime_pods(cluster, uid) == (1, 1)


def sandbox_ids(cluster: KubeletCluster, uid: str) -> list[str]:
    """The IDs of containerd's sandboxes for the pod with ``uid``."""

    async def listed() -> list[str]:
        async with RuntimeClient(cluster.containerd.endpoint) as cri:
            return [s.id for s in await cri.list_pod_sandbox(labels={POD_UID_LABEL: uid})]

    return asyncio.run(listed())


def runtime_pods(cluster: KubeletCluster, uid: str) -> tuple[int, int]:
    """How many sandboxes and containers containerd has for the pod with ``uid``."""

    async def count() -> tuple[int, int]:
        async with RuntimeClient(cluster.containerd.endpoint) as cri:
            sandboxes = await cri.list_pod_sandbox(labels={POD_UID_LABEL: uid})
            containers = await cri.list_containers(labels={POD_UID_LABEL: uid})
        return len(sandboxes), len(containers)

    return asyncio.run(count())


def allocated_ips(cluster: KubeletCluster) -> set[str]:
    """Addresses the node's IPAM holds (one file per address)."""
    ipam = cluster.kubelet_root / "cni"
    return {p.name for p in ipam.rglob("*") if p.is_file() and p.name.count(".") == 3}


@pytest.fixture
def shell(cluster: KubeletCluster, kubectl: Kubectl) -> str:
    """A running busybox pod to exec into."""
    apply(kubectl, pod("shell", [{"name": "sh", "image": BUSYBOX, "command": ["sleep", "3600"]}]))
    wait_phase(cluster, kubectl, "shell", "Running")
    return "shell"


def test_kubectl_exec_stdin_ends_with_the_pipe(kubectl: Kubectl, shell: str) -> None:
    """kubectl's v5 close of stdin becomes a FIN on containerd's SPDY stdin stream."""
    result = kubectl.run("exec", "-i", shell, "--", "cat", input="hello\n")
    assert (result.returncode, result.stdout) == (0, "hello\n")


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "tty"])
def test_python_client_exec_closes_stdin(
    cluster: KubeletCluster, kubectl: Kubectl, shell: str, tty: bool
) -> None:
    from kubernetes import client, config
    from kubernetes.stream import stream

    api = config.new_client_from_config(config_file=str(cluster.host_kubeconfig))
    try:
        core = client.CoreV1Api(api)
        ws = stream(
            core.connect_get_namespaced_pod_exec,
            shell,
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
