"""The lab: the inventory and the exec layer without root, then one real 2-worker lab.

The lab is brought up once for the module the way a user does (``python -m
kubelab.lab.command up``, in a subprocess) and driven with the pinned kubectl through the host
forwarder.  Everything sent to lab addresses goes through ``kubelab lab exec`` (nsenter into a
lab namespace) or from a pod: nothing of the lab is ever put on the host.  After the demo's
checks (and the cluster DNS, source addresses, a load balancer of the lab cloud, the Node
authorizer, and a pod's service-account token under RBAC) a killed kubelet and a killed
``kubelab server`` are brought back by the supervisor (the cloud controllers then create
nothing twice); a node joins through TLS bootstrap and is initialized by the
cloud-controller-manager, a load balancer spreads over it and refuses without endpoints, then
the node leaves and is deleted by the cloud, which takes it out of the load balancer; then
``down`` is checked to leave nothing of the lab and the host's iptables untouched.  The lab's
name and host port can be overridden (``KUBELAB_TEST_LAB``, ``KUBELAB_TEST_PORT``) to run
beside another copy of the suite.  The last test reuses the lab's name for the ``--store etcd
--proxy-mode userspace`` variant, crashes it and brings it up again over the wreck.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubelab.lab import network
from kubelab.lab.demo import manifests
from kubelab.lab.images import ECHOSERVER_IMAGE, ECHOSERVER_PORT, KUBELAB_IMAGE
from kubelab.lab.processes import (
    CommandError,
    ProcessError,
    ProcessRecord,
    ProcessTable,
    run,
)
from kubelab.lab.topology import Lab, LabSpec, Role, SpecError, running_spec
from tests.kubelab.lab import labs
from tests.kubelab.lab.labs import UP_TIMEOUT, lab_command
from tests.servers import REPO, Kubectl

# Overridable so a second copy of the suite can run beside one already running.
LAB_NAME = os.environ.get("KUBELAB_TEST_LAB", "kltest")
TEST_API_PORT = int(os.environ.get("KUBELAB_TEST_PORT", "16443"))  # not 6443: a user's own lab
BUSYBOX = "busybox"
# A test's time limit includes its fixtures' setup: the first privileged test's covers the
# module lab's `up`.
pytestmark = [pytest.mark.lab, pytest.mark.timeout(UP_TIMEOUT + 120)]


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
    assert [n.name for n in lab.kubernetes_nodes] == ["controlplane", "node1", "node2", "node3"]
    assert lab.next_worker() == "node4"


def test_the_workers_are_a_set_of_names_saved_with_the_spec(tmp_path: Path) -> None:
    spec = LabSpec(name="demo").with_workers(("node4", "node1"))
    lab = Lab(spec)
    assert [(w.name, w.ip) for w in lab.workers] == [
        ("node1", "10.240.0.11"),
        ("node4", "10.240.0.14"),
    ]
    assert lab.next_worker() == "node5"  # never a removed node's name again
    spec.save(tmp_path / "spec.json")
    assert LabSpec.load(tmp_path / "spec.json") == spec
    roots = Lab(spec, run_root=Path("/var/lib/kubelab"), log_root=Path("/var/log/vm"))
    assert roots.node("node4").state_dir == Path("/var/lib/kubelab/demo/node4")
    assert roots.process_file == Path("/var/lib/kubelab/demo/processes.json")
    assert roots.node("node4").log("proxy") == Path("/var/log/vm/demo/node4/proxy.log")


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(LabSpec(name="Bad"), id="uppercase-name"),
        pytest.param(LabSpec(name="averylongname"), id="long-name"),
        pytest.param(LabSpec(workers=0), id="no-workers"),
        pytest.param(LabSpec(workers=90), id="too-many-workers"),
        pytest.param(LabSpec(host_api_port=0), id="bad-host-api-port"),
        pytest.param(LabSpec(cni="calico"), id="unknown-cni"),
        pytest.param(LabSpec(store="mysql"), id="unknown-store"),
        pytest.param(LabSpec(workers=1, worker_names=("worker1",)), id="bad-worker-name"),
        pytest.param(LabSpec(workers=1, worker_names=("node0",)), id="worker-number-0"),
        pytest.param(LabSpec(workers=2, worker_names=("node1", "node1")), id="repeated-worker"),
        pytest.param(LabSpec(workers=2, worker_names=("node1",)), id="count-differs"),
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
    found = running_spec(
        "nolabhere", {"nolabhere-router", "nolabhere-node3", "nolabhere-node1", "other-node7"}
    )
    assert found.worker_list == ("node1", "node3")  # a gap left by `node rm`
    assert running_spec("nolabhere", set()) == LabSpec(name="nolabhere")


def test_the_cli_takes_nodes_and_refuses_a_bad_count(capsys: pytest.CaptureFixture[str]) -> None:
    from kubelab.lab.command import main

    with pytest.raises(SystemExit):
        main(["up", "--workers", "2"])
    if os.geteuid() == 0:
        assert main(["up", "--name", "klbad", "--nodes", "0"]) == 2
        assert "nodes: 1 to 89 workers, got 0" in capsys.readouterr().err


# -- a real lab -------------------------------------------------------------------------------


def node_exec(node: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """A command inside a node of the module's lab."""
    return labs.node_exec(LAB_NAME, node, *argv)


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

    def __init__(self) -> None:
        self.iptables_before = host_iptables()
        self.links_before = host_links()
        self.sysctls_before = host_sysctls()

    def came_up(self, running: labs.RunningLab) -> Running:
        self.lab = running.lab
        self.kubectl = running.kubectl
        self.up_output = running.up_output
        return self


@pytest.fixture(name="lab", scope="module")
def lab_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    before = Running()
    spec = LabSpec(name=LAB_NAME, workers=2, host_api_port=TEST_API_PORT)
    with labs.lab_up(spec, tmp_path_factory.mktemp("kubectl")) as running:
        yield before.came_up(running)


class Web:
    """The demo's nginx pods by node (name, IP), its Services' addresses, and the busybox
    probe pod on each worker (the demo's client pods)."""

    def __init__(
        self,
        pods: dict[str, list[tuple[str, str]]],
        cluster_ip: str,
        node_port: int,
        probes: dict[str, tuple[str, str]],
    ) -> None:
        self.pods = pods
        self.cluster_ip = cluster_ip
        self.node_port = node_port
        self.probes = probes

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
    kubectl.run("rollout", "status", "daemonset/probe", "--timeout=90s")
    pods = pods_by_node(kubectl, "web")
    probes = {node: found[0] for node, found in pods_by_node(kubectl, "probe").items()}
    service: dict[str, Any] = kubectl.json("get", "service", "web")
    node_port: dict[str, Any] = kubectl.json("get", "service", "web-nodeport")
    web = Web(pods, service["spec"]["clusterIP"], node_port["spec"]["ports"][0]["nodePort"], probes)
    # Pods Ready is not yet rules written: each proxy syncs at most once a second.
    for worker in lab.lab.workers:
        served(worker.name, f"http://{web.cluster_ip}/")
        served("client", f"http://{worker.ip}:{web.node_port}/")
    return web


def pods_by_node(kubectl: Kubectl, app: str) -> dict[str, list[tuple[str, str]]]:
    """The app's pods that are not being deleted, by node: (name, IP)."""
    listed: dict[str, Any] = kubectl.json("get", "pods", "-l", f"app={app}")
    pods: dict[str, list[tuple[str, str]]] = {}
    for p in listed["items"]:
        if p["metadata"].get("deletionTimestamp") is None:
            pod = (p["metadata"]["name"], p["status"]["podIP"])
            pods.setdefault(p["spec"]["nodeName"], []).append(pod)
    return pods


def served(node: str, url: str, timeout: float = 30.0) -> None:
    """Wait until ``url`` answers from a lab node's namespace."""
    deadline = time.monotonic() + timeout
    while node_exec(node, "curl", "-s", "-m", "2", "-o", "/dev/null", url).returncode != 0:
        assert time.monotonic() < deadline, f"{url} never answered from {node}"
        time.sleep(0.2)


def served_by_every_worker(workers: set[str], node_port: int) -> None:
    """Wait until each worker's node port answers the client: a load balancer picks any worker,
    and each node's proxy syncs on its own (at most once a second)."""
    for worker in sorted(workers):
        served("client", f"http://{worker}:{node_port}/")


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


def nodes_answering(
    node: str, url: str, pod: str | None, kubectl: Kubectl, wanted: set[str]
) -> set[str]:
    """The nodes whose pods answer GETs of ``url``, asked until all of ``wanted`` have
    answered or 40 GETs have: each GET goes to an endpoint picked at random, so a fixed dozen
    would all land on one node once in about 2,000 runs."""
    seen: set[str] = set()
    for _ in range(40):
        seen |= answering_nodes(answers(1, node, url, pod, kubectl))
        if wanted <= seen:
            break
    return seen


@pytest.mark.privileged
@pytest.mark.containerd
def test_every_node_is_ready_with_a_pod_cidr_routed_by_the_router(lab: Running) -> None:
    nodes: dict[str, Any] = lab.kubectl.json("get", "nodes")
    by_name = {n["metadata"]["name"]: n for n in nodes["items"]}
    assert set(by_name) == {"controlplane", "node1", "node2"}
    routes = run("ip", "-n", lab.lab.router.netns, "route", "show")
    for member in lab.lab.kubernetes_nodes:
        node = by_name[member.name]
        assert ready_condition(node) == "True"
        cidr = node["spec"]["podCIDR"]
        # The route controller's route (the lab's provider marks them proto 200).
        assert f"{cidr} via {member.ip} dev lab0 proto 200" in routes
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conditions["NetworkUnavailable"] == "False"
        assert node["spec"]["providerID"] == f"lab://{LAB_NAME}/{member.name}"
        labels = node["metadata"]["labels"]
        assert labels["topology.kubernetes.io/zone"] == lab.lab.zone(member)
        assert labels["topology.kubernetes.io/region"] == "lab"
        assert labels["node.kubernetes.io/instance-type"] == "lab.standard"
    assert "✗" not in lab.up_output  # one ✓ line per step, then how to use the lab
    assert f"export KUBECONFIG={lab.lab.host_kubeconfig}" in lab.up_output
    status = lab_command("status", "--name", LAB_NAME)
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.count("Node Ready") == 3
    for health in ("6443/readyz 200", "10250/healthz 200", "10256/healthz 200", "RuntimeReady"):
        assert health in status.stdout
    assert lab_command("kubeconfig", "--name", LAB_NAME).stdout.strip() == str(
        lab.lab.host_kubeconfig
    )
    assert f"https://127.0.0.1:{TEST_API_PORT}" in lab.lab.host_kubeconfig.read_text()


def ready_condition(node: dict[str, Any]) -> str:
    return str({c["type"]: c["status"] for c in node["status"]["conditions"]}.get("Ready"))


@pytest.mark.privileged
@pytest.mark.containerd
def test_the_control_plane_is_a_tainted_labelled_node_that_gets_no_demo_pod(
    lab: Running, web: Web
) -> None:
    node: dict[str, Any] = lab.kubectl.json("get", "node", "controlplane")
    assert ready_condition(node) == "True"
    assert node["spec"]["taints"] == [
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    ]
    labels = node["metadata"]["labels"]
    assert labels["node-role.kubernetes.io/control-plane"] == ""
    # As kubeadm marks it: load balancers send to the workers only.
    assert labels["node.kubernetes.io/exclude-from-external-load-balancers"] == ""
    assert "controlplane" not in web.pods
    listed = lab_command("nodes", "--name", LAB_NAME)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
    assert rows["controlplane"][1:4] == ["control-plane", "10.240.0.10", "True"]
    assert rows["controlplane"][5] == "node-role.kubernetes.io/control-plane:NoSchedule"
    assert rows["node1"][1:4] == ["worker", "10.240.0.11", "True"]


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_pod_reaches_a_pod_on_the_other_node_by_its_ip(lab: Running, web: Web) -> None:
    assert set(web.pods) == {"node1", "node2"}  # spread by the topology constraint
    probe1, _ = web.probes["node1"]
    on_node2, ip2 = web.first("node2")
    answer = answers(1, "node1", f"http://{ip2}/", probe1, lab.kubectl)
    assert answer == [f"{on_node2} on node2"]


@pytest.mark.privileged
@pytest.mark.containerd
def test_pod_to_pod_across_nodes_keeps_the_source_ip(lab: Running, web: Web) -> None:
    """Through the router's pod-CIDR routes, not NAT: the echoserver on node2 sees the
    probe pod's own address."""
    echo = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "echo", "labels": {"app": "echo"}},
        "spec": {
            "nodeName": "node2",
            "containers": [{"name": "echo", "image": ECHOSERVER_IMAGE}],
        },
    }
    lab.kubectl.run("apply", "-f", "-", input=json.dumps(echo))
    lab.kubectl.run("wait", "--for=condition=Ready", "pod/echo", "--timeout=60s")
    echo_ip = lab.kubectl.json("get", "pod", "echo")["status"]["podIP"]
    probe1, probe1_ip = web.probes["node1"]
    (answer,) = answers(
        1, "node1", f"http://{echo_ip}:{ECHOSERVER_PORT}/clientip", probe1, lab.kubectl
    )
    assert answer.rpartition(":")[0] == probe1_ip
    lab.kubectl.run("delete", "pod", "echo", "--grace-period=1")


@pytest.mark.privileged
@pytest.mark.containerd
def test_the_cluster_dns_serves_service_names_to_pods(lab: Running, web: Web) -> None:
    system = lab.kubectl.run("-n", "kube-system", "get", "pods,svc", "-o", "wide").stdout
    assert re.search(r"pod/kube-dns-\S+\s+1/1\s+Running\s+\d+\s+\S+\s+\S+\s+controlplane", system)
    assert re.search(r"service/kube-dns\s+ClusterIP\s+10\.96\.0\.10\s", system)
    probe1, _ = web.probes["node1"]

    def lookup(name: str) -> str:
        done = lab.kubectl.run("exec", probe1, "--", "nslookup", name, check=False)
        return done.stdout + done.stderr

    assert web.cluster_ip in lookup("web.default.svc.cluster.local")
    by_name = answers(1, "node1", "http://web/", probe1, lab.kubectl)  # its search domains
    assert answering_nodes(by_name) <= {"node1", "node2"}
    headless = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web-headless"},
        "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 80}]},
    }
    lab.kubectl.run("apply", "-f", "-", input=json.dumps(headless))
    pod_ips = {ip for pods in web.pods.values() for _, ip in pods}
    deadline = time.monotonic() + 30
    while not pod_ips <= set(re.findall(r"10\.244\.\d+\.\d+", lookup("web-headless"))):
        assert time.monotonic() < deadline, lookup("web-headless")
        time.sleep(0.5)
    assert "NXDOMAIN" in lookup("nothing-here.default.svc.cluster.local")
    lab.kubectl.run("delete", "service", "web-headless")


@pytest.mark.privileged
@pytest.mark.containerd
def test_the_cluster_ip_reaches_both_nodes_pods_from_a_node_and_from_a_pod(
    lab: Running, web: Web
) -> None:
    url, both = f"http://{web.cluster_ip}/", {"node1", "node2"}
    assert nodes_answering("node1", url, None, lab.kubectl, both) == both
    for probe, _ in web.probes.values():
        assert nodes_answering("node1", url, probe, lab.kubectl, both) == both


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
        answers(1, "client", f"http://{ip}/", None, lab.kubectl)
        logs = lab.kubectl.run("logs", pod, "-c", "web").stdout
        assert '"GET / HTTP/1.1" 200' in logs, node  # nginx's access log is its stdout
        conf = lab.kubectl.run("exec", pod, "--", "cat", "/etc/nginx/sites-enabled/default")
        assert f"on {node}" in conf.stdout, node  # written by the init container
        probe, probe_ip = web.probes[node]
        address = lab.kubectl.run(
            "exec", probe, "--", "ip", "-o", "-4", "addr", "show", "eth0"
        ).stdout
        assert f"inet {probe_ip}/" in address, node


def load_balancer_ingress(kubectl: Kubectl, service: str) -> list[dict[str, str]]:
    found: dict[str, Any] = kubectl.json("get", "service", service)
    return list(found.get("status", {}).get("loadBalancer", {}).get("ingress", []))


def external_ip(kubectl: Kubectl, service: str) -> str:
    """The Service's load balancer address, once the cloud has given it one."""
    deadline = time.monotonic() + 60
    while not (ingress := load_balancer_ingress(kubectl, service)):
        assert time.monotonic() < deadline, f"no external IP for {service}"
        time.sleep(0.5)
    return ingress[0]["ip"]


class RouterNat:
    """The lab cloud's load balancers as the router's ``nat`` table has them: each address's
    dispatch rules (one per Service port, under ``KUBELAB-LB``) and the nodes their chains
    DNAT to."""

    def __init__(self) -> None:
        done = node_exec("router", "iptables", "-t", "nat", "-S")
        assert done.returncode == 0, done.stdout + done.stderr
        self.rules = done.stdout.splitlines()

    def dispatch(self, ip: str) -> list[str]:
        return [r for r in self.rules if r.startswith("-A KUBELAB-LB ") and f"-d {ip}/32 " in r]

    def targets(self, ip: str) -> set[str]:
        """The node IPs the load balancer at ``ip`` sends to."""
        chains = {rule.rpartition(" -j ")[2] for rule in self.dispatch(ip)}
        return {
            m.group(1)
            for r in self.rules
            if r.split()[1] in chains
            and (m := re.search(r"-j DNAT --to-destination ([\d.]+):\d+$", r))
        }


def refused_or_answered(url: str) -> int:
    """curl's exit code for a GET from the client namespace: 0 answered, 7 could not connect,
    28 no answer within 2 s."""
    return node_exec("client", "curl", "-s", "-m", "2", "-o", "/dev/null", url).returncode


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_load_balancer_ip_answers_the_client_and_goes_with_its_service(
    lab: Running, web: Web
) -> None:
    lab.kubectl.run(
        "expose", "deployment", "web", "--name", "web-lb2", "--type", "LoadBalancer", "--port", "80"
    )
    external = external_ip(lab.kubectl, "web-lb2")
    assert external.startswith("10.240.0.2")
    workers = {w.ip for w in lab.lab.workers}
    assert RouterNat().targets(external) == workers
    node_port = lab.kubectl.json("get", "service", "web-lb2")["spec"]["ports"][0]["nodePort"]
    served_by_every_worker(workers, node_port)
    both = {"node1", "node2"}
    assert nodes_answering("client", f"http://{external}/", None, lab.kubectl, both) == both
    lab.kubectl.run("delete", "service", "web-lb2")
    deadline = time.monotonic() + 30
    while f"{external}/32" in run("ip", "-n", lab.lab.router.netns, "addr", "show", "lab0"):
        assert time.monotonic() < deadline, "the load balancer's IP stayed on the router"
        time.sleep(0.5)
    assert node_exec("client", "curl", "-s", "-m", "2", f"http://{external}/").returncode != 0


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_kubelet_cannot_read_the_secrets_of_another_nodes_pods(lab: Running) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "for-node2"},
        "stringData": {"password": "s3cret"},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "uses-secret"},
        "spec": {
            "nodeName": "node2",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "c",
                    "image": BUSYBOX,
                    "command": ["sleep", "3600"],
                    "env": [
                        {
                            "name": "P",
                            "valueFrom": {"secretKeyRef": {"name": "for-node2", "key": "password"}},
                        }
                    ],
                }
            ],
        },
    }
    lab.kubectl.run("apply", "-f", "-", input=json.dumps(secret) + "\n---\n" + json.dumps(pod))

    def as_kubelet(node: str) -> subprocess.CompletedProcess[str]:
        config = lab.lab.node(node).kubelet_kubeconfig
        return subprocess.run(
            [str(REPO / ".venv" / "bin" / "kubectl"), "--kubeconfig", str(config),
             "--server", lab.lab.host_api_url, "get", "secret", "for-node2", "-o", "name"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip

    denied = as_kubelet("node1")
    assert denied.returncode != 0
    assert 'User "system:node:node1" cannot get resource "secrets"' in denied.stderr
    assert as_kubelet("node2").stdout.strip() == "secret/for-node2"  # its own pod's secret
    lab.kubectl.run("delete", "pod", "uses-secret", "--grace-period=1")
    lab.kubectl.run("delete", "secret", "for-node2")


# Run in a pod: the API as the pod's service account sees it, through the Service
# ``kubernetes`` by name, trusting the mounted CA.  Prints {what: [status, body]}.
AS_SERVICE_ACCOUNT = """
import json, ssl, sys, urllib.error, urllib.request
mounted = "/var/run/secrets/kubernetes.io/serviceaccount/"
token = open(mounted + "token").read()
tls = ssl.create_default_context(cafile=mounted + "ca.crt")
found = {}
for path in sys.argv[1:]:
    request = urllib.request.Request(
        "https://kubernetes.default.svc" + path, headers={"Authorization": "Bearer " + token}
    )
    try:
        with urllib.request.urlopen(request, context=tls, timeout=10) as response:
            found[path] = [response.status, json.load(response)]
    except urllib.error.HTTPError as error:
        found[path] = [error.code, json.load(error)]
print(json.dumps(found))
"""


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_pods_service_account_token_gets_what_its_role_binding_grants_and_no_more(
    lab: Running,
) -> None:
    """From inside a pod (the kubelab image's Python, on the control-plane node, which has
    that image): the token ServiceAccount admission projected lists the pods of its
    namespace, as its Role allows, and is refused its secrets and other namespaces' pods."""
    ns, account = "sa-e2e", "reader"
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": account, "namespace": ns}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "pod-reader", "namespace": ns},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "pod-reader", "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": "pod-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "asker", "namespace": ns},
         "spec": {
             "serviceAccountName": account,
             "nodeName": "controlplane",
             "tolerations": [{"key": "node-role.kubernetes.io/control-plane",
                              "effect": "NoSchedule"}],
             "terminationGracePeriodSeconds": 1,
             "containers": [{"name": "c", "image": KUBELAB_IMAGE,
                             "command": ["sleep", "3600"]}]}},
    ]  # fmt: skip
    manifest = "\n---\n".join(json.dumps(o) for o in objects)
    lab.kubectl.run("apply", "-f", "-", input=manifest, namespaced=False)
    try:
        lab.kubectl.run(
            "-n", ns, "wait", "--for=condition=Ready", "pod/asker", "--timeout=60s",
            namespaced=False,
        )  # fmt: skip
        pods, secrets, elsewhere = (
            f"/api/v1/namespaces/{ns}/pods",
            f"/api/v1/namespaces/{ns}/secrets",
            "/api/v1/namespaces/default/pods",
        )
        done = lab.kubectl.run(
            "-n", ns, "exec", "asker", "--",
            "python3", "-c", AS_SERVICE_ACCOUNT, pods, secrets, elsewhere,
            namespaced=False,
        )  # fmt: skip
        found = json.loads(done.stdout)
        status, listed = found[pods]
        assert status == 200 and listed["kind"] == "PodList"
        assert [p["metadata"]["name"] for p in listed["items"]] == ["asker"]
        user = f"system:serviceaccount:{ns}:{account}"
        for path, where in ((secrets, ns), (elsewhere, "default")):
            status, body = found[path]
            resource = path.rpartition("/")[2]
            assert status == 403, (path, body)
            assert body["kind"] == "Status" and body["reason"] == "Forbidden"
            assert body["message"] == (
                f'{resource} is forbidden: User "{user}" cannot list resource "{resource}" '
                f'in API group "" in the namespace "{where}"'
            )
    finally:
        lab.kubectl.run("delete", "namespace", ns, "--wait=false", namespaced=False)


@pytest.mark.privileged
@pytest.mark.containerd
def test_the_demo_shows_answers_from_both_workers(lab: Running, web: Web) -> None:
    done = lab_command("demo", "--name", LAB_NAME, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    sections = done.stdout.split("\n== ")
    for section in sections[2:6]:  # node, pod, NodePort and load-balancer requests
        assert "on node1" in section and "on node2" in section, section
    assert sections[6].startswith("http://web by name") and " on node" in sections[6]


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_killed_kubelet_is_restarted_by_the_supervisor(lab: Running) -> None:
    table = ProcessTable(lab.lab.process_file)
    killed = table.get("node1/kubelet")
    assert killed is not None and killed.restarts == 0
    os.kill(killed.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while (now := table.get("node1/kubelet")) is None or now.pid == killed.pid:
        assert time.monotonic() < deadline, "the kubelet was not restarted"
        time.sleep(0.2)
    assert now.restarts == 1 and now.alive()
    assert now.command == killed.command
    status = lab_command("status", "--name", LAB_NAME)
    kubelet_lines = [
        line for line in status.stdout.splitlines() if line.strip().startswith("kubelet")
    ]
    assert any("restarts 1" in line for line in kubelet_lines), status.stdout
    lab.kubectl.run("wait", "--for=condition=Ready", "node/node1", "--timeout=60s")
    logs = lab_command("logs", "--name", LAB_NAME, "router", "supervisor")
    assert f"node1/kubelet: pid {killed.pid} died; restarted as pid {now.pid}" in logs.stdout


def service_ports(kubectl: Kubectl) -> dict[str, int]:
    """Service name → how many ports it has, for every Service."""
    listed: dict[str, Any] = kubectl.json("get", "services", "-A")
    return {
        f"{s['metadata']['namespace']}/{s['metadata']['name']}": len(s["spec"]["ports"])
        for s in listed["items"]
    }


def load_balancer_ips(kubectl: Kubectl) -> dict[str, str]:
    """Service name → external IP, for every LoadBalancer Service that has one."""
    listed: dict[str, Any] = kubectl.json("get", "services", "-A")
    return {
        f"{s['metadata']['namespace']}/{s['metadata']['name']}": ingress[0]["ip"]
        for s in listed["items"]
        if s["spec"]["type"] == "LoadBalancer"
        and (ingress := s.get("status", {}).get("loadBalancer", {}).get("ingress"))
    }


@pytest.mark.privileged
@pytest.mark.containerd
def test_the_cloud_controllers_resume_after_a_server_crash_and_create_nothing_twice(
    lab: Running, web: Web
) -> None:
    """``kubelab server`` (the API server and the cloud-controller-manager) SIGKILLed and
    restarted by the supervisor: the route and service controllers start over from the
    router's state, so every pod CIDR keeps one route and every load balancer one address and
    one set of rules; a Service created afterwards gets an address of its own."""
    table = ProcessTable(lab.lab.process_file)
    killed = table.get("controlplane/server")
    assert killed is not None
    before = load_balancer_ips(lab.kubectl)
    assert before, "the demo's web-lb has an external IP"
    os.kill(killed.pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while (now := table.get("controlplane/server")) is None or now.pid == killed.pid:
        assert time.monotonic() < deadline, "the server was not restarted"
        time.sleep(0.2)
    while lab.kubectl.run("get", "--raw", "/readyz", check=False, namespaced=False).returncode:
        assert time.monotonic() < deadline, "the API never answered again"
        time.sleep(0.5)

    lab.kubectl.run(
        "expose", "deployment", "web", "--name", "web-lb3", "--type", "LoadBalancer", "--port", "80"
    )
    new_ip = external_ip(lab.kubectl, "web-lb3")
    served("client", f"http://{new_ip}/")
    ips = load_balancer_ips(lab.kubectl)
    assert {k: v for k, v in ips.items() if k != "default/web-lb3"} == before
    assert new_ip not in before.values()
    assert len(set(ips.values())) == len(ips)
    # Exactly one route per Node's pod CIDR (and none else of the cloud's).
    nodes: dict[str, Any] = lab.kubectl.json("get", "nodes")
    cidrs = sorted(n["spec"]["podCIDR"] for n in nodes["items"])
    routes = run("ip", "-n", lab.lab.router.netns, "route", "show", "proto", "200")
    assert sorted(line.split()[0] for line in routes.splitlines()) == cidrs, routes
    # Exactly the load balancers' addresses on lab0 from the pool, each with one rule set.
    addresses = run("ip", "-n", lab.lab.router.netns, "-o", "-4", "addr", "show", "dev", "lab0")
    pool = re.findall(r"inet (10\.240\.0\.2[0-5]\d)/32", addresses)
    assert sorted(pool) == sorted(ips.values()), addresses
    nat = RouterNat()
    ports = service_ports(lab.kubectl)  # the Ingress add-on's has two: 80 and 443
    for service, ip in ips.items():
        assert len(nat.dispatch(ip)) == ports[service], (service, nat.dispatch(ip))
        assert {w.ip for w in lab.lab.workers} == nat.targets(ip), service
    chains = [r for r in nat.rules if r.startswith("-N KLB-")]
    assert len(chains) == sum(ports[s] for s in ips), chains  # one per port
    lab.kubectl.run("delete", "service", "web-lb3")


SPREAD = "spread"


def decode_stream(text: str) -> list[dict[str, Any]]:
    """The JSON documents of ``kubectl get --watch -o json`` (one after another)."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    while (at := _skip_space(text, at)) < len(text):
        document, at = decoder.raw_decode(text, at)
        found.append(document)
    return found


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def spread_deployment(replicas: int) -> dict[str, Any]:
    """The demo's web server, one per worker (a topology spread constraint)."""
    deployment = manifests()[0]
    labels = {"app": SPREAD}
    deployment["metadata"]["name"] = SPREAD
    deployment["spec"]["replicas"] = replicas
    deployment["spec"]["selector"] = {"matchLabels": labels}
    template = deployment["spec"]["template"]
    template["metadata"]["labels"] = labels
    template["spec"]["topologySpreadConstraints"][0]["labelSelector"] = {"matchLabels": labels}
    return deployment


def running_pods(kubectl: Kubectl, app: str) -> dict[str, str]:
    """Pod name → node of the app's Ready pods that are not being deleted."""
    listed: dict[str, Any] = kubectl.json("get", "pods", "-l", f"app={app}")
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName", "")
        for p in listed["items"]
        if p["metadata"].get("deletionTimestamp") is None
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in p.get("status", {}).get("conditions", [])
        )
    }


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_node_added_at_runtime_joins_through_a_csr_and_is_initialized_by_the_cloud(
    lab: Running, web: Web, tmp_path: Path
) -> None:
    """The new kubelet has a bootstrap token only: its client certificate comes through a
    CertificateSigningRequest.  It registers tainted uninitialized (seen through a watch),
    so nothing is scheduled there until the cloud node controller has set its providerID,
    zone, region and instance type; the route controller routes its pod CIDR."""
    watch_log = tmp_path / "nodes.json"
    with watch_log.open("w") as out:
        watch = subprocess.Popen(
            [str(REPO / ".venv" / "bin" / "kubectl"), "--kubeconfig", str(lab.lab.host_kubeconfig),
             "get", "nodes", "--watch", "--output-watch-events", "-o", "json"],
            stdout=out, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        time.sleep(1)  # the watch is established (its first events list the current nodes)
        added = lab_command("node", "add", "--name", LAB_NAME, timeout=UP_TIMEOUT)
    finally:
        watch.terminate()
        watch.wait(10)
    assert added.returncode == 0, added.stdout + added.stderr
    assert "node3 (10.240.0.13) joined" in added.stdout
    csrs: dict[str, Any] = lab.kubectl.json("get", "csr")
    (csr,) = [c for c in csrs["items"] if c["spec"]["username"].startswith("system:bootstrap:")]
    assert csr["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
    assert {c["type"] for c in csr["status"]["conditions"]} == {"Approved"}
    node3_versions = [
        e["object"] for e in decode_stream(watch_log.read_text())
        if e["object"]["metadata"]["name"] == "node3"
    ]  # fmt: skip
    first = node3_versions[0]
    assert "node.cloudprovider.kubernetes.io/uninitialized" in {
        t["key"] for t in first["spec"].get("taints", [])
    }
    assert "providerID" not in first["spec"]
    node: dict[str, Any] = lab.kubectl.json("get", "node", "node3")
    assert ready_condition(node) == "True"
    assert node["spec"]["providerID"] == f"lab://{LAB_NAME}/node3"
    assert not node["spec"].get("taints")
    labels = node["metadata"]["labels"]
    assert labels["topology.kubernetes.io/zone"] == "lab-b"
    assert labels["topology.kubernetes.io/region"] == "lab"
    assert labels["node.kubernetes.io/instance-type"] == "lab.standard"
    routes = run("ip", "-n", lab.lab.router.netns, "route", "show")
    assert f"{node['spec']['podCIDR']} via 10.240.0.13 dev lab0 proto 200" in routes
    lab.kubectl.run("apply", "-f", "-", input=json.dumps(spread_deployment(3)))
    lab.kubectl.run("rollout", "status", f"deployment/{SPREAD}", "--timeout=90s")
    pods: dict[str, Any] = lab.kubectl.json("get", "pods", "-l", f"app={SPREAD}")
    on_node3 = [p for p in pods["items"] if p["spec"]["nodeName"] == "node3"]
    assert len(on_node3) == 1
    # The router routes node3's pod CIDR: a pod there answers from node1.
    url = f"http://{on_node3[0]['status']['podIP']}/"
    served("node1", url)
    answer = answers(1, "node1", url, None, lab.kubectl)
    assert answer == [f"{on_node3[0]['metadata']['name']} on node3"]
    assert Lab(running_spec(LAB_NAME, set())).spec.worker_list == ("node1", "node2", "node3")


SPREAD_LB = "spread-lb"


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_load_balancer_spreads_over_the_nodes_and_refuses_without_endpoints(
    lab: Running,
) -> None:
    """After the node added above: the router DNATs a LoadBalancer's address to every worker
    (node3 included); with no endpoints the nodes' proxies REJECT, so the client is refused
    at once rather than left to time out; with endpoints again it answers.  Its Service is
    left for the node removal below."""
    lab.kubectl.run(
        "expose", "deployment", SPREAD, "--name", SPREAD_LB, "--type", "LoadBalancer",
        "--port", "80",
    )  # fmt: skip
    url = f"http://{(ip := external_ip(lab.kubectl, SPREAD_LB))}/"
    workers = {w.ip for w in Lab(running_spec(LAB_NAME, set())).workers}
    assert "10.240.0.13" in workers
    assert workers == RouterNat().targets(ip)
    node_port = lab.kubectl.json("get", "service", SPREAD_LB)["spec"]["ports"][0]["nodePort"]
    served_by_every_worker(workers, node_port)
    assert len(answering_nodes(answers(12, "client", url, None, lab.kubectl))) > 1

    lab.kubectl.run("scale", "deployment", SPREAD, "--replicas=0")
    deadline = time.monotonic() + 60
    while lab.kubectl.json("get", "pods", "-l", f"app={SPREAD}")["items"]:
        assert time.monotonic() < deadline, "the scaled-down pods stayed"
        time.sleep(0.5)
    while lab.kubectl.json("get", "endpoints", SPREAD_LB).get("subsets"):
        assert time.monotonic() < deadline, "the Service kept endpoints"
        time.sleep(0.5)
    # Until every node's proxy has synced, some still DNAT to the deleted pods (no answer):
    # wait for each worker's node port (where the router sends) to refuse.
    for worker in sorted(workers):
        while (code := refused_or_answered(f"http://{worker}:{node_port}/")) != 7:
            assert time.monotonic() < deadline, f"{worker}: curl's exit code stayed {code}"
            time.sleep(0.5)
    for _ in range(6):  # whichever node the router picks: the answer is a reset, at once
        refused = node_exec("client", "curl", "-sv", "-m", "5", url)
        assert refused.returncode == 7 and "Connection refused" in refused.stderr, refused.stderr

    lab.kubectl.run("scale", "deployment", SPREAD, "--replicas=3")
    lab.kubectl.run("rollout", "status", f"deployment/{SPREAD}", "--timeout=90s")
    served_by_every_worker(workers, node_port)
    assert len(answering_nodes(answers(12, "client", url, None, lab.kubectl))) > 1


@pytest.mark.privileged
@pytest.mark.containerd
def test_a_removed_node_is_deleted_by_the_cloud_and_its_pods_are_recreated_elsewhere(
    lab: Running,
) -> None:
    node3 = Lab(running_spec(LAB_NAME, set())).node("node3")
    removed = lab_command("node", "rm", "--name", LAB_NAME, "node3", timeout=240)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "node3: Node deleted by the cloud node lifecycle controller" in removed.stdout
    nodes: dict[str, Any] = lab.kubectl.json("get", "nodes")
    assert "node3" not in {n["metadata"]["name"] for n in nodes["items"]}
    events: dict[str, Any] = lab.kubectl.json("get", "events", "-A")
    assert any(
        e["reason"] == "DeletingNode" and e["involvedObject"]["name"] == "node3"
        for e in events["items"]
    )
    assert node3.netns not in run("ip", "netns", "list")
    deadline = time.monotonic() + 30  # the route controller deletes the route of a gone Node
    while "10.240.0.13" in run("ip", "-n", lab.lab.router.netns, "route", "show"):
        assert time.monotonic() < deadline, "node3's route stayed in the router"
        time.sleep(0.5)
    # The service controller updates the load balancer of the test above to the nodes left.
    lb_ip = external_ip(lab.kubectl, SPREAD_LB)
    deadline = time.monotonic() + 30
    while "10.240.0.13" in (targets := RouterNat().targets(lb_ip)):
        assert time.monotonic() < deadline, f"the load balancer still sends to node3: {targets}"
        time.sleep(0.5)
    assert {"10.240.0.11", "10.240.0.12"} <= targets
    assert not node3.state_dir.exists()
    assert not [p for p in ProcessTable(lab.lab.process_file).records() if p.node == "node3"]
    left = run("pgrep", "-af", f"{node3.state_dir}|netns/{node3.netns}", check=False)
    assert [line for line in left.splitlines() if "pgrep" not in line] == []
    assert str(node3.state_dir) not in Path("/proc/self/mounts").read_text()
    assert not [
        h for h in Path("/sys/fs/cgroup").iterdir() if (h / "kubelab" / LAB_NAME / "node3").exists()
    ]
    assert Lab(running_spec(LAB_NAME, set())).spec.worker_list == ("node1", "node2")
    # The pod garbage collector deletes pods bound to a Node that is gone (after its
    # quarantine), and the ReplicaSet recreates them on the remaining workers.
    deadline = time.monotonic() + 120
    while sorted((placed := running_pods(lab.kubectl, SPREAD)).values()) != [
        "node1",
        "node1",
        "node2",
    ] and sorted(placed.values()) != ["node1", "node2", "node2"]:
        assert time.monotonic() < deadline, f"pods not recreated elsewhere: {placed}"
        time.sleep(1)
    served("client", f"http://{lb_ip}/")
    lab.kubectl.run("delete", "service", SPREAD_LB)
    lab.kubectl.run("delete", "deployment", SPREAD)


@pytest.mark.privileged
@pytest.mark.containerd
def test_down_leaves_nothing_of_the_lab(lab: Running, web: Web) -> None:
    records = ProcessTable(lab.lab.process_file).records()
    assert {r.component for r in records} == {
        "supervisor",
        "server",
        "forwarder",
        "containerd",
        "kubelet",
        "proxy",
        "network-policy",
        "registry",
        "private-registry",
        *(["resolver"] if network.host_nameservers() else []),
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
    assert f"{lab.lab.state_dir}/" not in mounts  # other labs may run meanwhile
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
@pytest.mark.etcd
def test_etcd_and_userspace_serve_a_deployment_and_up_after_a_crash_cleans_first(
    tmp_path: Path,
) -> None:
    """The ``--store etcd --proxy-mode userspace`` variant under the module lab's name (its
    lab is down by now): a Deployment's pods run and answer through their Service; then a
    crash (every process SIGKILLed, the state left behind) and an ``up`` over the wreck."""
    lab = Lab(LabSpec(name=LAB_NAME, workers=1, store="etcd", host_api_port=TEST_API_PORT))
    kubectl = Kubectl(lab.host_kubeconfig, tmp_path, "default")
    up = [
        "up", "--name", LAB_NAME, "--nodes", "1", "--host-api-port", str(TEST_API_PORT),
        "--store", "etcd", "--proxy-mode", "userspace",
    ]  # fmt: skip
    try:
        first = lab_command(*up, timeout=UP_TIMEOUT)
        assert first.returncode == 0, first.stdout + first.stderr
        records = ProcessTable(lab.process_file).records()
        assert "controlplane/etcd" in {r.key for r in records}
        kubectl.run("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in manifests()))
        kubectl.run("rollout", "status", "deployment/web", "--timeout=90s")
        cluster_ip = kubectl.json("get", "service", "web")["spec"]["clusterIP"]
        served("node1", f"http://{cluster_ip}/")
        assert answering_nodes(answers(4, "node1", f"http://{cluster_ip}/", None, kubectl)) == {
            "node1"
        }
        assert "KUBE-PORTALS-CONTAINER" in node_exec("node1", "iptables", "-t", "nat", "-S").stdout
        shims = run("pgrep", "-f", f"{lab.state_dir}/node1/containerd", check=False).split()
        assert shims
        # The crash: every component SIGKILLed (the supervisor first), the pods' shims and all
        # the state left behind.
        for record in sorted(records, key=lambda r: r.component != "supervisor"):
            os.kill(record.pid, signal.SIGKILL)

        again = lab_command(*up, timeout=UP_TIMEOUT)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "clean up what an earlier lab left" in again.stdout
        assert not [pid for pid in shims if Path(f"/proc/{pid}").exists()]
        assert kubectl.run("get", "pods", "-o", "name").stdout == ""  # a fresh cluster
    finally:
        assert lab_command("down", "--name", LAB_NAME, timeout=120).returncode == 0
    assert not lab.state_dir.exists()
    assert not [n for n in run("ip", "netns", "list").split() if n.startswith(f"{LAB_NAME}-")]
    assert "etcd" not in run("pgrep", "-af", f"{lab.state_dir}", check=False)
