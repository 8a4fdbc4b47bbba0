"""The HA lab for real: ``kubelab lab up --control-planes 3 --store etcd --nodes 1``.

Three etcd members (one leader), three API servers healthy behind the router's load balancer
at 10.240.0.10:6443, kubectl through the host forwarder, one holder per leader Lease, a pod
Running on the worker, and ``kubelab lab status`` saying all that.  Needs root, etcd and
containerd; the package's HA lab (``ha_lab``), which the fault tests have left healthy.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from kubelab.lab import hastatus
from kubelab.lab.topology import Lab
from tests.kubelab.lab.labs import UP_TIMEOUT, RunningLab, lab_command
from tests.servers import Kubectl

BUSYBOX = "busybox"

pytestmark = [
    pytest.mark.lab,
    pytest.mark.long,
    pytest.mark.privileged,
    pytest.mark.etcd,
    pytest.mark.containerd,
    pytest.mark.slow,
    pytest.mark.timeout(UP_TIMEOUT + 300),
]


@pytest.fixture(name="lab")
def lab_fixture(ha_lab: RunningLab) -> Lab:
    return ha_lab.lab


@pytest.fixture(name="kubectl")
def kubectl_fixture(ha_lab: RunningLab) -> Kubectl:
    return ha_lab.kubectl


def test_three_etcd_members_are_healthy_with_one_leader(lab: Lab) -> None:
    members = hastatus.collect_members(lab)
    assert [m.name for m in members] == ["controlplane1", "controlplane2", "controlplane3"]
    assert all(m.healthy and not m.error for m in members), members
    assert sum(m.leader for m in members) == 1
    assert len({m.member_id for m in members}) == 3
    assert len({m.raft_term for m in members}) == 1


def test_three_api_servers_are_healthy_behind_the_api_address(lab: Lab) -> None:
    backends = hastatus.read_backends(lab) or ()
    assert [(b.address, b.healthy) for b in backends] == [
        (f"{cp.ip}:6443", True) for cp in lab.controlplanes
    ]
    # The router owns 10.240.0.10; a worker reaches the API there, certificate verified.
    out = lab_command(
        "exec", "--name", lab.spec.name, "node1", "--",
        "curl", "-s", "--cacert", str(lab.ca_file), "https://10.240.0.10:6443/readyz",
    )  # fmt: skip
    assert out.stdout.strip() == "ok", out


def test_kubectl_works_through_the_host_forwarder(lab: Lab, kubectl: Kubectl) -> None:
    nodes: dict[str, Any] = kubectl.json("get", "nodes")
    names = sorted(n["metadata"]["name"] for n in nodes["items"])
    assert names == ["controlplane1", "controlplane2", "controlplane3", "node1"]
    kubernetes: dict[str, Any] = kubectl.json("get", "endpoints", "kubernetes")
    # Every server advertises its own address: the kubernetes Service leads to each one.
    addresses = [a["ip"] for a in kubernetes["subsets"][0]["addresses"]]
    assert addresses == [cp.ip for cp in lab.controlplanes]


def test_each_leader_lease_has_exactly_one_holder_among_the_control_planes(
    lab: Lab, kubectl: Kubectl
) -> None:
    for name in hastatus.LEASES:
        lease: dict[str, Any] = {}
        deadline = time.monotonic() + 60
        while not lease.get("spec", {}).get("holderIdentity"):
            assert time.monotonic() < deadline, f"nobody holds {name}"
            result = kubectl.run(
                "get", "lease", name, "-n", "kube-system", "-o", "json", check=False
            )
            lease = json.loads(result.stdout) if result.returncode == 0 else {}
            time.sleep(1)
        holder = lease["spec"]["holderIdentity"]
        node, _, instance = holder.rpartition("_")
        assert node in {cp.name for cp in lab.controlplanes} and instance, holder


def test_a_pod_on_the_worker_becomes_running(kubectl: Kubectl) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ha-sleeper"},
        "spec": {
            "containers": [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}],
            "terminationGracePeriodSeconds": 1,
        },
    }
    kubectl.run("apply", "-f", "-", input=json.dumps(pod))
    kubectl.run("wait", "pod/ha-sleeper", "--for=condition=Ready", "--timeout=120s")
    running: dict[str, Any] = kubectl.json("get", "pod", "ha-sleeper")
    assert running["status"]["phase"] == "Running"
    assert running["spec"]["nodeName"] == "node1"  # the control planes are tainted
    kubectl.run("delete", "pod", "ha-sleeper", "--wait=false")


def test_status_shows_members_balancer_and_lease_holders(lab: Lab) -> None:
    status = lab_command("status", "--name", lab.spec.name, timeout=120)
    out = status.stdout
    assert status.returncode == 0, f"{out}\n{status.stderr}"
    assert "etcd members:" in out
    member_lines = [line for line in out.splitlines() if " id " in line and "term" in line]
    assert len(member_lines) == 3 and all("healthy" in line for line in member_lines)
    assert sum(" leader " in line for line in member_lines) == 1
    assert "load balancer: healthy 10.240.0.2:6443, 10.240.0.3:6443, 10.240.0.4:6443" in out
    for name in hastatus.LEASES:
        line = next(line for line in out.splitlines() if line.strip().startswith(name))
        assert "controlplane" in line and "nobody" not in line, line
    assert re.search(r"^  loadbalancer\s+up\b", out, re.MULTILINE), out
