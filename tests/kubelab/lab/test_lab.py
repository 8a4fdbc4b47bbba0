"""The lab: the inventory and the exec layer without root, then one real 2-worker lab.

The lab is brought up once for the module the way a user does (``python -m
kubelab.lab.command up``, in a subprocess) and driven with the pinned kubectl through the host
forwarder.  Everything sent to lab addresses goes through ``kubelab lab exec`` (nsenter into a
lab namespace) or from a pod: nothing of the lab is ever put on the host.  The last test runs
``down`` and checks that nothing of the lab is left and the host's iptables are untouched.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubelab.lab.demo import manifests
from kubelab.lab.processes import (
    CommandError,
    ProcessError,
    ProcessRecord,
    ProcessTable,
    run,
)
from kubelab.lab.topology import Lab, LabSpec, Role, SpecError, running_spec
from tests.servers import REPO, Kubectl

LAB_NAME = "kltest"
TEST_API_PORT = 16443  # not 6443: a user's own lab may be running
LAB_COMMAND = [sys.executable, "-m", "kubelab.lab.command"]
BUSYBOX = "docker.io/library/busybox:1.35"
UP_TIMEOUT = 240.0


# -- without root -----------------------------------------------------------------------------


def test_the_inventory_names_every_node_address_and_path() -> None:
    lab = Lab(LabSpec(name="demo", workers=3))
    assert [(n.name, n.role, n.ip) for n in lab.nodes] == [
        ("router", Role.ROUTER, "10.240.0.1"),
        ("controlplane", Role.CONTROLPLANE, "10.240.0.10"),
        ("node1", Role.WORKER, "10.240.0.11"),
        ("node2", Role.WORKER, "10.240.0.12"),
        ("node3", Role.WORKER, "10.240.0.13"),
        ("client", Role.CLIENT, "10.240.0.100"),
    ]
    node = lab.node("node2")
    assert node.netns_path == Path("/run/netns/demo-node2")
    assert node.uplink == "r-node2"
    assert node.log("kubelet") == Path("/var/log/kubelab/demo/node2/kubelet.log")
    assert node.cgroup_root == "/kubelab/demo/node2"
    assert node.state_dir == Path("/run/kubelab/demo/node2")
    assert lab.host_api_url == "https://127.0.0.1:6443"
    assert lab.api_url == "https://10.240.0.10:6443"
    assert all(len(n.uplink) <= 15 for n in lab.nodes)


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(LabSpec(name="Bad"), id="uppercase-name"),
        pytest.param(LabSpec(name="averylongname"), id="long-name"),
        pytest.param(LabSpec(workers=0), id="no-workers"),
        pytest.param(LabSpec(workers=90), id="too-many-workers"),
        pytest.param(LabSpec(host_api_port=0), id="bad-host-api-port"),
        pytest.param(LabSpec(cni="calico"), id="unknown-cni"),
    ],
)
def test_specs_the_lab_cannot_build_are_refused(spec: LabSpec) -> None:
    with pytest.raises(SpecError):
        Lab(spec)


def test_a_failed_command_carries_its_command_line_and_output() -> None:
    with pytest.raises(CommandError) as caught:
        run("sh", "-c", "echo oops; exit 3")
    assert caught.value.command == ["sh", "-c", "echo oops; exit 3"]
    assert caught.value.returncode == 3
    assert "oops" in caught.value.output
    with pytest.raises(CommandError) as missing:
        run("no-such-command-kubelab")
    assert isinstance(missing.value.__cause__, FileNotFoundError)


def test_a_detached_component_is_recorded_checked_and_stopped_by_pid(tmp_path: Path) -> None:
    table = ProcessTable(tmp_path / "processes.json")
    record = table.start("node1/sleeper", ["sleep", "60"], log=tmp_path / "sleeper.log")
    assert record.alive()
    assert ProcessTable(table.path).get("node1/sleeper") == record  # read back from the file
    table.check_alive("node1/sleeper")
    assert table.stop("node1/sleeper") is True
    assert not record.alive()
    assert table.records() == []
    assert table.stop("node1/sleeper") is False  # idempotent
    # A reused PID (another start time) is never taken for ours.
    assert not ProcessRecord("x/y", record.pid, record.start_time + 1, [], "").alive()


def test_a_component_that_exits_at_once_is_reported_with_its_log(tmp_path: Path) -> None:
    table = ProcessTable(tmp_path / "processes.json")
    table.start("node1/broken", ["sh", "-c", "echo cannot start; exit 1"], log=tmp_path / "b.log")
    deadline = time.monotonic() + 5
    while table.get("node1/broken") is not None and table.get("node1/broken").alive():  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with pytest.raises(ProcessError, match="node1/broken exited") as caught:
        table.check_alive("node1/broken")
    assert "cannot start" in caught.value.output  # the log's tail


def test_the_running_spec_is_the_saved_one_or_found_from_the_namespaces() -> None:
    found = running_spec("nolabhere", {"nolabhere-router", "nolabhere-node3", "other-node7"})
    assert found == LabSpec(name="nolabhere", workers=3)
    assert running_spec("nolabhere", set()).workers == LabSpec().workers


# -- a real lab -------------------------------------------------------------------------------


def lab_command(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LAB_COMMAND, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def node_exec(node: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """A command inside a lab node, as ``kubelab lab exec NODE -- CMD...``."""
    return lab_command("exec", "--name", LAB_NAME, node, "--", *argv, timeout=30)


def host_iptables() -> dict[str, str]:
    """The host's rules in both backends, without counters."""
    saved = {}
    for command in ("iptables-save", "iptables-legacy-save"):
        out = subprocess.run([command], capture_output=True, text=True, check=False).stdout
        lines = [re.sub(r"\[\d+:\d+\]", "", line) for line in out.splitlines()]
        saved[command] = "\n".join(line for line in lines if not line.startswith("#"))
    return saved


HOST_SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
)


def host_sysctls() -> str:
    return run("sysctl", *HOST_SYSCTLS)


def host_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip() for line in out.splitlines()}


class Running:
    """The module's lab: its inventory, kubectl, and the host's state before it came up
    (iptables of both backends, links, the sysctls the lab sets in its namespaces)."""

    def __init__(self, lab: Lab, kubectl: Kubectl) -> None:
        self.lab = lab
        self.kubectl = kubectl
        self.iptables_before = host_iptables()
        self.links_before = host_links()
        self.sysctls_before = host_sysctls()
        self.up_output = ""


@pytest.fixture(name="lab", scope="module")
def lab_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    lab = Lab(LabSpec(name=LAB_NAME, workers=2, host_api_port=TEST_API_PORT))
    kubectl = Kubectl(lab.host_kubeconfig, tmp_path_factory.mktemp("kubectl"), "default")
    running = Running(lab, kubectl)
    try:
        started = time.monotonic()
        up = lab_command(
            "up",
            *("--name", LAB_NAME, "--workers", "2", "--host-api-port", str(TEST_API_PORT)),
            timeout=UP_TIMEOUT,
        )
        print(f"kubelab lab up: {time.monotonic() - started:.1f}s\n{up.stdout}")
        assert up.returncode == 0, f"up failed:\n{up.stdout}\n{up.stderr}"
        running.up_output = up.stdout
        yield running
    finally:
        lab_command("down", "--name", LAB_NAME, timeout=120)


class Web:
    """The demo's pods by node (name, IP) and its Services' addresses."""

    def __init__(
        self, pods: dict[str, list[tuple[str, str]]], cluster_ip: str, node_port: int
    ) -> None:
        self.pods = pods
        self.cluster_ip = cluster_ip
        self.node_port = node_port

    def first(self, node: str) -> tuple[str, str]:
        return self.pods[node][0]


def answering_nodes(bodies: list[str]) -> set[str]:
    """The nodes in the demo's answers ("POD on NODE")."""
    return {body.rpartition(" on ")[2] for body in bodies}


@pytest.fixture(name="web", scope="module")
def web_fixture(lab: Running) -> Web:
    """The demo's Deployment and Services (``kubelab.lab.demo``), applied as the demo does."""
    kubectl = lab.kubectl
    kubectl.run("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in manifests()))
    kubectl.run("rollout", "status", "deployment/web", "--timeout=90s")
    listed: dict[str, Any] = kubectl.json("get", "pods", "-l", "app=web")
    pods: dict[str, list[tuple[str, str]]] = {}
    for p in listed["items"]:
        if p["metadata"].get("deletionTimestamp") is None:
            pod = (p["metadata"]["name"], p["status"]["podIP"])
            pods.setdefault(p["spec"]["nodeName"], []).append(pod)
    service: dict[str, Any] = kubectl.json("get", "service", "web")
    node_port: dict[str, Any] = kubectl.json("get", "service", "web-nodeport")
    web = Web(pods, service["spec"]["clusterIP"], node_port["spec"]["ports"][0]["nodePort"])
    # Pods Ready is not yet rules written: each proxy syncs at most once a second.
    for worker in lab.lab.workers:
        served(worker.name, f"http://{web.cluster_ip}/")
        served("client", f"http://{worker.ip}:{web.node_port}/")
    return web


def served(node: str, url: str, timeout: float = 30.0) -> None:
    """Wait until ``url`` answers from a lab node's namespace."""
    deadline = time.monotonic() + timeout
    while node_exec(node, "curl", "-s", "-m", "2", "-o", "/dev/null", url).returncode != 0:
        assert time.monotonic() < deadline, f"{url} never answered from {node}"
        time.sleep(0.2)


def answers(count: int, node: str, url: str, pod: str | None, kubectl: Kubectl) -> list[str]:
    """The bodies of ``count`` GETs of ``url`` from a lab node's namespace or from a pod."""
    bodies = []
    for _ in range(count):
        if pod is None:
            done = node_exec(node, "curl", "-s", "-m", "5", url)
        else:
            done = kubectl.run("exec", pod, "--", "timeout", "5", "wget", "-qO-", url, check=False)
        assert done.returncode == 0, f"GET {url} from {pod or node}: {done.stdout}{done.stderr}"
        bodies.append(done.stdout.strip())
    return bodies


@pytest.mark.privileged
@pytest.mark.containerd
def test_every_worker_is_ready_with_a_pod_cidr_routed_by_the_router(lab: Running) -> None:
    nodes: dict[str, Any] = lab.kubectl.json("get", "nodes")
    by_name = {n["metadata"]["name"]: n for n in nodes["items"]}
    assert set(by_name) == {"node1", "node2"}
    routes = run("ip", "-n", lab.lab.router.netns, "route", "show")
    for worker in lab.lab.workers:
        node = by_name[worker.name]
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        assert ready == "True"
        cidr = node["spec"]["podCIDR"]
        assert f"{cidr} via {worker.ip}" in routes
    assert "✗" not in lab.up_output  # one ✓ line per step, then how to use the lab
    assert f"export KUBECONFIG={lab.lab.host_kubeconfig}" in lab.up_output
    status = lab_command("status", "--name", LAB_NAME)
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.count("Node Ready") == 2
    assert lab_command("kubeconfig", "--name", LAB_NAME).stdout.strip() == str(
        lab.lab.host_kubeconfig
    )
    assert f"https://127.0.0.1:{TEST_API_PORT}" in lab.lab.host_kubeconfig.read_text()


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_pod_reaches_a_pod_on_the_other_node_by_its_ip(lab: Running, web: Web) -> None:
    assert set(web.pods) == {"node1", "node2"}  # spread by the topology constraint
    on_node1, _ = web.first("node1")
    on_node2, ip2 = web.first("node2")
    answer = answers(1, "node1", f"http://{ip2}/", on_node1, lab.kubectl)
    assert answer == [f"{on_node2} on node2"]


@pytest.mark.privileged
@pytest.mark.containerd
def test_the_cluster_ip_reaches_both_nodes_pods_from_a_node_and_from_a_pod(
    lab: Running, web: Web
) -> None:
    url = f"http://{web.cluster_ip}/"
    assert answering_nodes(answers(12, "node1", url, None, lab.kubectl)) == {"node1", "node2"}
    on_node1, _ = web.first("node1")
    from_pod = answers(12, "node1", url, on_node1, lab.kubectl)
    assert answering_nodes(from_pod) == {"node1", "node2"}


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_node_port_answers_the_client_namespace(lab: Running, web: Web) -> None:
    seen: list[str] = []
    for worker in lab.lab.workers:
        seen += answers(8, "client", f"http://{worker.ip}:{web.node_port}/", None, lab.kubectl)
    assert answering_nodes(seen) == {"node1", "node2"}


@pytest.mark.privileged
@pytest.mark.containerd
def test_kubectl_logs_and_exec_reach_pods_on_each_node(lab: Running, web: Web) -> None:
    for node in web.pods:
        pod, ip = web.first(node)
        logs = lab.kubectl.run("logs", pod).stdout
        assert f"serving {pod}" in logs, node
        address = lab.kubectl.run(
            "exec", pod, "--", "ip", "-o", "-4", "addr", "show", "eth0"
        ).stdout
        assert f"inet {ip}/" in address, node


@pytest.mark.privileged
@pytest.mark.containerd
def test_the_demo_shows_answers_from_both_workers(lab: Running, web: Web) -> None:
    done = lab_command("demo", "--name", LAB_NAME, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for section in done.stdout.split("\n== ")[2:5]:  # node, pod and client requests
        assert "on node1" in section and "on node2" in section, section


@pytest.mark.privileged
@pytest.mark.containerd
def test_down_leaves_nothing_of_the_lab(lab: Running, web: Web) -> None:
    records = ProcessTable(lab.lab.process_file).records()
    assert {r.component for r in records} == {
        "server",
        "forwarder",
        "containerd",
        "kubelet",
        "proxy",
    }
    shims = [int(p) for p in run("pgrep", "-f", str(lab.lab.state_dir), check=False).split()]
    assert shims, "the pods' shims name the lab's containerd sockets"

    done = lab_command("down", "--name", LAB_NAME, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

    assert not [r.key for r in records if r.alive()]
    left = run("pgrep", "-af", f"{lab.lab.state_dir}|netns/{LAB_NAME}-", check=False)
    assert [line for line in left.splitlines() if "pgrep" not in line] == []
    namespaces = run("ip", "netns", "list")
    assert not [n for n in namespaces.split() if n.startswith(f"{LAB_NAME}-")]
    mounts = Path("/proc/self/mounts").read_text()
    assert "/run/kubelab" not in mounts
    assert f"/run/netns/{LAB_NAME}-" not in mounts
    cgroups = [h for h in Path("/sys/fs/cgroup").iterdir() if (h / "kubelab" / LAB_NAME).exists()]
    assert cgroups == []
    assert not lab.lab.state_dir.exists()
    assert host_iptables() == lab.iptables_before
    assert host_links() == lab.links_before
    assert host_sysctls() == lab.sysctls_before
    assert lab_command("status", "--name", LAB_NAME).returncode == 1


@pytest.mark.privileged
@pytest.mark.containerd
def test_up_after_a_crash_cleans_the_stale_lab_first(tmp_path: Path) -> None:
    name = "klcrash"
    lab = Lab(LabSpec(name=name, workers=1))
    kubectl = Kubectl(lab.host_kubeconfig, tmp_path, "default")
    try:
        assert (
            lab_command("up", "--name", name, "--workers", "1", timeout=UP_TIMEOUT).returncode == 0
        )
        kubectl.run("run", "sleeper", f"--image={BUSYBOX}", "--", "sleep", "3600")
        kubectl.run("wait", "--for=condition=Ready", "pod/sleeper", "--timeout=60s")
        shims = run("pgrep", "-f", f"{lab.state_dir}/node1/containerd", check=False).split()
        assert shims
        # The crash: every component SIGKILLed, the pods' shims and all the state left behind.
        records = ProcessTable(lab.process_file).records()
        for record in records:
            os.kill(record.pid, signal.SIGKILL)

        again = lab_command("up", "--name", name, "--workers", "1", timeout=UP_TIMEOUT)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "clean up what an earlier lab left" in again.stdout
        assert not [pid for pid in shims if Path(f"/proc/{pid}").exists()]
        assert kubectl.run("get", "pods", "-o", "name").stdout == ""  # a fresh cluster
    finally:
        assert lab_command("down", "--name", name, timeout=120).returncode == 0
    assert not lab.state_dir.exists()
    assert not [n for n in run("ip", "netns", "list").split() if n.startswith(f"{name}-")]
