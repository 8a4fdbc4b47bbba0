"""``kubelab story`` on the shared lab, where every component records its steps for real: a
Deployment spread over both workers behind a Service, asked for by name from a pod (so the
cluster DNS answers it), and a pod whose image tag does not exist.

The lab's API server writes no audit log and its scheduler's explain port is inside the control
plane's namespace, so here the create is told from the field manager and a scheduling step
from the scheduler's event; tests/kubelab/story/test_story_server.py covers both sources.
"""

from __future__ import annotations

import pytest

from tests.kubelab.lab.labs import UP_TIMEOUT
from tests.kubelab.story.stories import Steps, story, until
from tests.servers import Kubectl

pytestmark = [
    pytest.mark.lab,
    pytest.mark.privileged,
    pytest.mark.containerd,
    pytest.mark.timeout(UP_TIMEOUT + 120),
]

WEB = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: web}}
            topologyKey: kubernetes.io/hostname
      containers:
      - {name: nginx, image: nginx}
"""
POD_STEPS = [
    "Created Pod",
    "Scheduled",
    "SandboxCreated",
    "AddedInterface",
    "Pulling",
    "Pulled",
    "Created",
    "Started",
    "Ready",
]


def told(kubectl: Kubectl, target: str) -> Steps:
    return story(kubectl.kubeconfig, kubectl.namespace, target)


def test_a_deployment_behind_a_service_on_two_nodes(lab_kubectl: Kubectl) -> None:
    kubectl = lab_kubectl
    kubectl.run("apply", "-f", "-", input=WEB)
    kubectl.run("expose", "deployment", "web", "--port", "80")
    kubectl.run("rollout", "status", "deployment/web", "--timeout=90s")
    name = f"web.{kubectl.namespace}.svc.cluster.local"
    kubectl.run("run", "ask", "--image=busybox", "--restart=Never", "--", "nslookup", name)

    def settled() -> Steps:
        steps = told(kubectl, "deployment/web")
        syncs = {s["actor"] for s in steps if s["step"] == "EndpointsSynced"}
        answered = any(s["step"] == "Answered" for s in steps)
        return steps if len(syncs) >= 2 and answered else []

    steps = until(settled, "proxy syncs on two nodes and a DNS answer")
    pods = sorted({s["object"] for s in steps if s["object"].startswith("Pod/")})
    assert len(pods) == 2
    nodes = set()
    for pod in pods:
        chain = [s for s in steps if s["object"] == pod]
        assert [s["step"] for s in chain] == POD_STEPS, pod
        node = chain[-1]["actor"].removeprefix("kubelet ")
        nodes.add(node)
        added = next(s for s in chain if s["step"] == "AddedInterface")
        assert added["actor"] == f"kubelet {node}"
        assert (
            added["detail"].startswith("Add eth0 [10.244.")
            and "; on the host cni0, veth" in added["detail"]
        )
        assert next(s for s in chain if s["step"] == "SandboxCreated")["cause"] == (
            f"binding to node {node}"
        )
    assert len(nodes) == 2
    order = [s["step"] for s in steps]
    first_ready = order.index("Ready")
    assert order.index("Created Deployment") < order.index("Created ReplicaSet") < first_ready
    syncs = [s for s in steps if s["step"] == "EndpointsSynced"]
    assert {s["actor"] for s in syncs} >= {f"kube-proxy {n}" for n in nodes}
    assert all(s["cause"].startswith("EndpointSlice/web-") for s in syncs)
    (answer,) = [s for s in steps if s["step"] == "Answered"]
    vip = kubectl.run("get", "service", "web", "-o", "jsonpath={.spec.clusterIP}").stdout
    assert answer["detail"] == f"Answered {name}. A {vip} (first answer since this server started)"
    assert answer["actor"].startswith("kubelab-dns")
    assert order.index("Answered") > max(i for i, s in enumerate(order) if s == "Ready")


def test_a_pod_whose_image_is_missing(lab_kubectl: Kubectl) -> None:
    kubectl = lab_kubectl
    kubectl.run("run", "nope", "--image=nginx:0.0.1")

    def failed() -> Steps:
        steps = told(kubectl, "pod/nope")
        return steps if any(s["step"] == "BackOff" for s in steps) else []

    steps = until(failed, "image pull back-off")
    order = [s["step"] for s in steps]
    assert order[:5] == ["Created Pod", "Scheduled", "SandboxCreated", "AddedInterface", "Pulling"]
    assert "Failed" in order and "Ready" not in order and "Started" not in order
    pull = next(s for s in steps if s["step"] == "Failed")
    assert "nginx:0.0.1" in pull["detail"] and "not found" in pull["detail"]
