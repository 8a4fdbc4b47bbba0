"""A namespace deleted in the lab takes its workloads along: the kubelets stop its pods and
containerd no longer runs their containers (they used to keep running, with their veths and
addresses, in a namespace that no longer existed)."""

from __future__ import annotations

import subprocess
import time

import pytest

from kubelab.lab.components import containerd_layout
from tests.kubelab.lab.labs import RunningLab

pytestmark = [pytest.mark.lab, pytest.mark.privileged, pytest.mark.containerd]


def running_container_ids(lab: RunningLab, node: str) -> set[str]:
    socket = containerd_layout(lab.lab.node(node)).socket
    listed = subprocess.run(
        ["ctr", "-a", str(socket), "-n", "k8s.io", "tasks", "ls", "-q"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return set(listed.stdout.split())


def test_deleting_a_namespace_stops_its_pods_on_the_nodes(shared_lab: RunningLab) -> None:
    kubectl = shared_lab.kubectl
    kubectl.run("create", "namespace", "doomed")
    kubectl.run(
        *("-n", "doomed", "create", "deployment", "sleepers", "--replicas=2"),
        *("--image=busybox", "--"),
        *("sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"),  # stops when told to
    )
    kubectl.run("-n", "doomed", "rollout", "status", "deployment/sleepers", "--timeout=120s")
    pods = kubectl.json("-n", "doomed", "get", "pods")["items"]
    assert isinstance(pods, list)
    containers = {
        (pod["spec"]["nodeName"], pod["status"]["containerStatuses"][0]["containerID"])
        for pod in pods
    }
    for node, container in containers:
        assert container.removeprefix("containerd://") in running_container_ids(shared_lab, node)

    deleted = kubectl.run("delete", "namespace", "doomed", "--timeout=120s")
    assert deleted.stdout == 'namespace "doomed" deleted\n'
    left = kubectl.run("-n", "doomed", "get", "all")
    assert (left.stdout, left.stderr) == ("", "No resources found in doomed namespace.\n")
    deadline = time.monotonic() + 30
    for node, container in containers:
        while container.removeprefix("containerd://") in running_container_ids(shared_lab, node):
            assert time.monotonic() < deadline, f"{container} still runs on {node}"
            time.sleep(0.5)
