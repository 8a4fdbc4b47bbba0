"""``kubelab lab demo``: what `make lab` shows once the lab is up.

A Deployment of four nginx servers (``nginx``, pulled from the lab registry as from Docker Hub:
an untagged image is pulled ``Always``) spread over the
workers (the control plane is tainted NoSchedule, so none lands there), each answering
"POD on NODE": the server block comes from a ConfigMap, into which an init container writes
its node's name (nginx knows its hostname, the pod's name, but not its node).  In front of
them a ClusterIP, a NodePort and a LoadBalancer Service (the lab cloud gives it an external
IP from 10.240.0.200-250, which the router forwards to the NodePort on the nodes).  A
``probe`` DaemonSet (``busybox``) puts one client pod on each worker.  Then: the Service VIP
fetched from each worker node and from the probe pod on each worker, the NodePort of each
worker and the load balancer's IP fetched from the ``client`` namespace (the outside world),
and ``http://web`` fetched by name from a probe pod (the cluster DNS and the pod's search
domains).  Each line printed says who asked and who answered, so the spreading done by
kube-proxy's rules is visible.  Every request runs inside the lab's namespaces (``nsenter
--net`` or ``kubectl exec``), never from the host's own network, and the pinned kubectl of
the venv does the Kubernetes side, as a user would.
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

from kube.api.kinds.core_v1.node import LABEL_HOSTNAME
from kubelab.lab.processes import CommandError, run
from kubelab.lab.topology import Lab

KUBECTL = Path(sys.executable).parent / "kubectl"
KUBELAB = Path(sys.executable).parent / "kubelab"
REPLICAS = 4
REQUESTS = 6
ROLLOUT_TIMEOUT = "120s"
NODE_PORT = 30080
PATIENCE = 10.0
LB_TIMEOUT = 60.0

SERVER_BLOCK = """server {
    listen 80 default_server;
    location / {
        default_type text/plain;
        return 200 "$hostname on NODE_NAME\\n";
    }
}
"""
"""nginx's answer: its hostname (the pod's name) and the node, which the init container
substitutes for NODE_NAME."""
RENDER = 'sed "s/NODE_NAME/$NODE_NAME/" /template/default > /sites/default'


def manifests() -> list[dict[str, Any]]:
    """The demo's objects: the Deployment first (tests reuse it), then its ConfigMap, the
    Services and the probe DaemonSet."""
    labels = {"app": "web"}
    node_name = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
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
                            "topologyKey": LABEL_HOSTNAME,
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": labels},
                            # The control plane's NoSchedule taint keeps pods off it; with
                            # the default (Ignore) it would still count as an empty domain.
                            "nodeTaintsPolicy": "Honor",
                        }
                    ],
                    "initContainers": [
                        {
                            "name": "config",
                            "image": "busybox",
                            "command": ["sh", "-c", RENDER],
                            "env": [node_name],
                            "volumeMounts": [
                                {"name": "template", "mountPath": "/template"},
                                {"name": "sites", "mountPath": "/sites"},
                            ],
                        }
                    ],
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx",
                            "ports": [{"containerPort": 80}],
                            "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1},
                            "volumeMounts": [
                                {"name": "sites", "mountPath": "/etc/nginx/sites-enabled"}
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "template", "configMap": {"name": "web"}},
                        {"name": "sites", "emptyDir": {}},
                    ],
                },
            },
        },
    }
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "web", "namespace": "default"},
        "data": {"default": SERVER_BLOCK},
    }
    probe_labels = {"app": "probe"}
    probe = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "probe", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": probe_labels},
            "template": {
                "metadata": {"labels": probe_labels},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {"name": "probe", "image": "busybox", "command": ["sleep", "86400"]}
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
        config,
        service("web", "ClusterIP", {"port": 80}),
        service("web-nodeport", "NodePort", {"port": 80, "nodePort": NODE_PORT}),
        service("web-lb", "LoadBalancer", {"port": 80}),
        probe,
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
        step("4 nginx servers; ClusterIP, NodePort and LoadBalancer Services; a probe pod per node")
        self.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(m) for m in manifests()))
        self.kubectl("rollout", "status", "deployment/web", f"--timeout={ROLLOUT_TIMEOUT}")
        self.kubectl("rollout", "status", "daemonset/probe", f"--timeout={ROLLOUT_TIMEOUT}")
        print(self.kubectl("get", "pods", "-o", "wide"), end="")
        vip = self.kubectl("get", "service", "web", "-o", "jsonpath={.spec.clusterIP}")
        self.wait_for_endpoints()
        step(f"the Service VIP {vip} from each worker node (kube-proxy's DNAT)")
        for node in self.lab.workers:
            for _ in range(REQUESTS):
                answer = self.fetch(node.netns_path, f"http://{vip}/")
                print(f"  {node.name} -> {vip}: {answer}")
        step(f"the Service VIP {vip} from a pod on each worker")
        probes = self.pods_by_node("probe")
        for node_name, pod in probes.items():
            for _ in range(REQUESTS):
                answer = self.from_pod(pod, f"http://{vip}/")
                print(f"  {pod} ({node_name}) -> {vip}: {answer}")
        step(f"the NodePort {NODE_PORT} of each worker from the client namespace (outside)")
        for node in self.lab.workers:
            for _ in range(REQUESTS):
                url = f"http://{node.ip}:{NODE_PORT}/"
                answer = self.fetch(self.lab.client.netns_path, url)
                print(f"  client -> {node.ip}:{NODE_PORT}: {answer}")
        external = self.load_balancer_ip("web-lb")
        step(f"the LoadBalancer's external IP {external} from the client namespace (outside)")
        for _ in range(REQUESTS * len(self.lab.workers)):  # as many as the NodePorts got
            answer = self.fetch(self.lab.client.netns_path, f"http://{external}/")
            print(f"  client -> {external}: {answer}")
        step("http://web by name from a pod (the cluster DNS at 10.96.0.10)")
        node_name, pod = next(iter(probes.items()))
        for _ in range(REQUESTS // 2):
            print(f"  {pod} ({node_name}) -> http://web: {self.from_pod(pod, 'http://web/')}")
        step("explore")
        named = "" if self.lab.name == "lab" else f" --name {self.lab.name}"
        lab = f"{KUBELAB} lab"
        print(
            f"  export KUBECONFIG={self.lab.host_kubeconfig}\n"
            f"  {KUBECTL} get nodes,pods,svc -o wide\n"
            f"  {KUBECTL} -n kube-system get pods,svc\n"
            f"  {lab} exec{named} node1 -- iptables -t nat -S KUBE-SERVICES\n"
            f"  {lab} exec{named} router -- ip route    # the cloud's pod-CIDR routes\n"
            f"  {lab} nodes{named}; {lab} status{named}; {lab} logs{named} node1 kubelet\n"
            f"  {lab} down{named}    # removes everything of the lab"
        )

    def from_pod(self, pod: str, url: str) -> str:
        fetch = ["exec", pod, "--", "timeout", "5", "wget", "-qO-", url]
        return patiently(functools.partial(self.kubectl, *fetch)).strip()

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

    def load_balancer_ip(self, service: str) -> str:
        """The external IP the cloud's service controller wrote into the Service's status."""
        jsonpath = "jsonpath={.status.loadBalancer.ingress[0].ip}"
        deadline = time.monotonic() + LB_TIMEOUT
        while not (ip := self.kubectl("get", "service", service, "-o", jsonpath).strip()):
            if time.monotonic() > deadline:
                raise CommandError(["kubectl", "get", "service", service], 1, "no external IP")
            time.sleep(0.5)
        return ip

    def pods_by_node(self, app: str) -> dict[str, str]:
        listed = json.loads(self.kubectl("get", "pods", "-l", f"app={app}", "-o", "json"))
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
