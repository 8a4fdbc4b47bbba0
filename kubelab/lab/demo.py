"""``kubelab lab demo``: what `make lab` shows once the lab is up.

A Deployment of four web servers spread over the workers (the control plane is tainted
NoSchedule, so none lands there; busybox httpd answering with its
pod's name and node), a ClusterIP Service and a NodePort Service in front of them; then the
Service VIP fetched from each worker node and from a pod on each worker, and the NodePort of
each worker fetched from the ``client`` namespace (the outside world).  Each line printed says
who asked and who answered, so the spreading done by kube-proxy's rules is visible.  Every
request runs inside the lab's namespaces (``nsenter --net`` or ``kubectl exec``), never from
the host's own network, and the pinned kubectl of the venv does the Kubernetes side, as a
user would.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubelab.lab.images import BUSYBOX_IMAGE
from kubelab.lab.processes import CommandError, run
from kubelab.lab.topology import Lab

KUBECTL = Path(sys.executable).parent / "kubectl"
REPLICAS = 4
REQUESTS = 6
ROLLOUT_TIMEOUT = "120s"
NODE_PORT = 30080
PATIENCE = 10.0

SERVE = (
    'echo "serving $POD_NAME"; mkdir -p /www && echo "$POD_NAME on $NODE_NAME" > /www/index.html '
    "&& exec httpd -f -p 80 -h /www"
)


def manifests() -> list[dict[str, Any]]:
    labels = {"app": "web"}
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": labels},
                            # The control plane's NoSchedule taint keeps pods off it; with
                            # the default (Ignore) it would still count as an empty domain.
                            "nodeTaintsPolicy": "Honor",
                        }
                    ],
                    "containers": [
                        {
                            "name": "web",
                            "image": BUSYBOX_IMAGE,
                            "command": ["sh", "-c", SERVE],
                            "env": env,
                            "ports": [{"containerPort": 80}],
                            "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1},
                        }
                    ],
                },
            },
        },
    }

    def service(name: str, kind: str, port: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": kind, "selector": labels, "ports": [port]},
        }

    return [
        deployment,
        service("web", "ClusterIP", {"port": 80}),
        service("web-nodeport", "NodePort", {"port": 80, "nodePort": NODE_PORT}),
    ]


class Demo:
    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    def kubectl(self, *args: str, input: str | None = None) -> str:
        done = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(self.lab.host_kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if done.returncode != 0:
            raise CommandError(["kubectl", *args], done.returncode, done.stdout + done.stderr)
        return done.stdout

    def run(self) -> None:
        step("a Deployment of 4 web servers, a ClusterIP and a NodePort Service")
        self.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(m) for m in manifests()))
        self.kubectl("rollout", "status", "deployment/web", f"--timeout={ROLLOUT_TIMEOUT}")
        print(self.kubectl("get", "pods", "-l", "app=web", "-o", "wide"), end="")
        vip = self.kubectl("get", "service", "web", "-o", "jsonpath={.spec.clusterIP}")
        self.wait_for_endpoints()
        step(f"the Service VIP {vip} from each worker node (kube-proxy's DNAT)")
        for node in self.lab.workers:
            for _ in range(REQUESTS):
                answer = self.fetch(node.netns_path, f"http://{vip}/")
                print(f"  {node.name} -> {vip}: {answer}")
        step(f"the Service VIP {vip} from a pod on each worker")
        for node_name, pod in self.pods_by_node().items():
            fetch = ["exec", pod, "--", "timeout", "5", "wget", "-qO-", f"http://{vip}/"]
            for _ in range(REQUESTS):
                answer = patiently(functools.partial(self.kubectl, *fetch)).strip()
                print(f"  {pod} ({node_name}) -> {vip}: {answer}")
        step(f"the NodePort {NODE_PORT} of each worker from the client namespace (outside)")
        for node in self.lab.workers:
            for _ in range(REQUESTS):
                url = f"http://{node.ip}:{NODE_PORT}/"
                answer = self.fetch(self.lab.client.netns_path, url)
                print(f"  client -> {node.ip}:{NODE_PORT}: {answer}")
        step("explore")
        print(
            f"  export KUBECONFIG={self.lab.host_kubeconfig}\n"
            f"  {KUBECTL} get nodes,pods -o wide\n"
            "  kubelab lab exec node1 -- iptables -t nat -S KUBE-SERVICES\n"
            "  kubelab lab nodes; kubelab lab status; kubelab lab logs node1 kubelet\n"
            "  kubelab lab down        # removes everything of the lab"
        )

    def wait_for_endpoints(self) -> None:
        jsonpath = "jsonpath={.items[*].endpoints[*].addresses[0]}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = self.kubectl(
                "get", "endpointslices", "-l", "kubernetes.io/service-name=web", "-o", jsonpath
            ).split()
            if len(found) >= REPLICAS:
                return
            time.sleep(0.5)
        raise CommandError(["kubectl", "get", "endpointslices"], 1, "the Service has no endpoints")

    def pods_by_node(self) -> dict[str, str]:
        listed = json.loads(self.kubectl("get", "pods", "-l", "app=web", "-o", "json"))
        pods: dict[str, str] = {}
        for pod in listed["items"]:
            pods.setdefault(pod["spec"]["nodeName"], pod["metadata"]["name"])
        return dict(sorted(pods.items()))

    @staticmethod
    def fetch(netns: Path, url: str) -> str:
        return patiently(lambda: run("curl", "-s", "--max-time", "5", url, netns=netns)).strip()


def patiently(request: Callable[[], str]) -> str:
    """A request retried for a few seconds: kube-proxy writes a new Service's rules within
    its min-sync-period (1 s) of the endpoints becoming ready, not at the same instant."""
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            return request()
        except CommandError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)
