"""``kubelab story`` against ``kubelab server`` with an audit log and two hollow nodes, driven
as a user drives it: the pinned kubectl makes a Deployment, exposes it and runs a pod no node
can take; the story reads the API, the audit log and the scheduler's explain records.

Hollow kubelets record no Events, so the node's steps (sandbox, CNI ADD, pulls) are the lab
test's (tests/kubelab/lab/test_story_lab.py); here the control plane's are checked.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubelab.story.stories import Steps, story, until
from tests.servers import Kubectl, ServerProcess, free_port, start_all_in_one, stop_server

KUBELAB = [sys.executable, "-m", "kubelab"]
POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create]
"""


class Cluster:
    def __init__(self, server: ServerProcess, audit_log: Path, scheduler: str, cache: Path):
        self.server = server
        self.audit_log = audit_log
        self.scheduler = scheduler
        self.cache = cache

    def kubectl(self) -> Kubectl:
        kubectl = Kubectl(self.server.kubeconfig, self.cache, f"s-{uuid.uuid4().hex[:6]}")
        kubectl.run("create", "namespace", kubectl.namespace, namespaced=False)
        return kubectl

    def story(self, target: str, namespace: str) -> Steps:
        flags = ("--audit-log", str(self.audit_log), "--scheduler", self.scheduler)
        return story(self.server.kubeconfig, namespace, target, *flags)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("story")
    (root / "data").mkdir()
    (root / "policy.yaml").write_text(POLICY)
    scheduler_port = free_port()
    server = start_all_in_one(
        root / "data",
        "--scheduler-port", str(scheduler_port),
        "--audit-policy-file", str(root / "policy.yaml"),
        "--audit-log-path", str(root / "audit.log"),
    )  # fmt: skip
    hollow = subprocess.Popen(
        [*KUBELAB, "hollow-nodes", "--kubeconfig", str(server.kubeconfig), "--count", "2",
         "--name-prefix", "story-"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert hollow.stdout is not None and "nodes ready" in hollow.stdout.readline()
        until(lambda: untainted(server), "hollow nodes without the not-ready taint")
        yield Cluster(server, root / "audit.log", f"http://127.0.0.1:{scheduler_port}", root)
    finally:
        hollow.terminate()
        hollow.wait(timeout=20)
        if hollow.stdout is not None:
            hollow.stdout.close()
        stop_server(server)


def untainted(server: ServerProcess) -> bool:
    """Both nodes in, and the node lifecycle controller has lifted their not-ready taints
    (so every pod is scheduled at its first attempt)."""
    kubectl = Kubectl(server.kubeconfig, server.kubeconfig.parent / "cache", "default")
    nodes = json.loads(kubectl.run("get", "nodes", "-o", "json", namespaced=False).stdout)
    items = nodes["items"]
    return len(items) == 2 and not any(n["spec"].get("taints") for n in items)


def test_a_deployment_rollout_is_told_from_the_create_to_the_endpoints(cluster: Cluster) -> None:
    kubectl = cluster.kubectl()
    kubectl.run("create", "deployment", "web", "--image=nginx", "--replicas=2")
    kubectl.run("expose", "deployment", "web", "--port", "80")
    kubectl.run("rollout", "status", "deployment/web", "--timeout=90s")

    def settled() -> Steps:
        steps = cluster.story("deployment/web", kubectl.namespace)
        slices = [s for s in steps if s["object"].startswith("EndpointSlice/")]
        return steps if slices and slices[-1]["detail"].count("(ready)") == 2 else []

    steps = until(settled, "EndpointSlice with both pods ready")
    kinds = [(s["step"], s["object"].split("/")[0]) for s in steps]
    pods = sorted({s["object"] for s in steps if s["object"].startswith("Pod/")})
    assert len(pods) == 2
    created = steps[0]
    assert (created["step"], created["object"]) == ("Created Deployment", "Deployment/web")
    assert created["actor"] == "kubernetes-admin", "who, from the audit log"
    assert "(kubectl/" in created["detail"]
    for step in (
        ("ScalingReplicaSet", "Deployment"),
        ("Created ReplicaSet", "ReplicaSet"),
        ("Created Service", "Service"),
        ("Created EndpointSlice", "EndpointSlice"),
    ):
        assert step in kinds
    replicaset = next(s for s in steps if s["step"] == "Created ReplicaSet")
    assert replicaset["cause"] == "Deployment/web (ownerReference)"
    assert replicaset["actor"] == "system:serviceaccount:kube-system:deployment-controller"
    for pod in pods:
        chain = [s["step"] for s in steps if s["object"] == pod]
        assert chain == ["Created Pod", "Scheduled", "Ready"], pod
        scheduled = next(s for s in steps if s["object"] == pod and s["step"] == "Scheduled")
        explained = r"; explain: 2 of 2 nodes examined, 2 feasible, story-\d scored \d+$"
        assert re.search(explained, scheduled["detail"]), scheduled["detail"]
        assert scheduled["actor"].startswith("default-scheduler")
        made = [s for s in steps if s["step"] == "SuccessfulCreate" and pod[4:] in s["detail"]]
        assert made and made[0]["cause"].startswith("ReplicaSet/web-")
    order = [s["step"] for s in steps]
    assert order.index("Created Deployment") < order.index("Created ReplicaSet")
    assert order.index("Created ReplicaSet") < order.index("Created Pod")
    last_slice = max(i for i, s in enumerate(steps) if s["object"].startswith("EndpointSlice/"))
    assert max(i for i, s in enumerate(order) if s == "Ready") < last_slice
    times = [s["time"] for s in steps]
    assert [t[:19] for t in times] == sorted(t[:19] for t in times), "in time order, by second"


def test_an_unschedulable_pod_is_told_with_the_schedulers_reasons(cluster: Cluster) -> None:
    kubectl = cluster.kubectl()
    kubectl.run(
        "run", "stuck", "--image=nginx", '--overrides={"spec":{"nodeSelector":{"disk":"ssd"}}}'
    )

    def failed() -> Steps:
        steps = cluster.story("pod/stuck", kubectl.namespace)
        return steps if any(s["step"] == "FailedScheduling" for s in steps) else []

    steps = until(failed, "FailedScheduling")
    assert [s["step"] for s in steps] == ["Created Pod", "FailedScheduling"]
    assert steps[0]["actor"] == "kubernetes-admin"
    detail = steps[1]["detail"]
    assert detail.startswith("0/2 nodes are available: 2 node(s) didn't match Pod's node")
    assert detail.endswith("explain: 2 of 2 nodes examined, 0 feasible")


def test_bad_input_is_a_clear_error(cluster: Cluster) -> None:
    for argv, message in (
        (["story", "configmap/x"], "expected KIND/NAME with KIND one of deployment"),
        (["story", "deployment/nope", "--kubeconfig", str(cluster.server.kubeconfig)],
         'deployments.apps "nope" not found'),
        (["story", "pod/x", "--kubeconfig", str(cluster.server.kubeconfig), "--audit-log",
          "/nonexistent"], "cannot read the audit log /nonexistent"),
    ):  # fmt: skip
        result = subprocess.run([*KUBELAB, *argv], capture_output=True, text=True, timeout=60)
        assert result.returncode == 1
        assert message in result.stderr and "Traceback" not in result.stderr
