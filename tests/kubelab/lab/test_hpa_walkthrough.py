"""kubernetes.io's HorizontalPodAutoscaler walkthrough in the shared lab, with its own commands
and manifests, adapted where the lab's offline images require: ``php-apache`` runs the python
image serving the walkthrough's CPU-burning page (the same square-root loop, answering "OK!"),
and the load generator is the lab's ``busybox`` (the walkthrough's ``busybox:1.28`` tag is not
in the lab registry).  The metrics-server add-on scrapes the kubelets, which read cgroups; the
500m limit is checked as the CFS quota the container runs under (cgroup v1 here), since the
utilization the HPA acts on (usage over the 200m request) is bounded by it (250%).

One change shortens the wait and is not the walkthrough's: the HPA's scale-down stabilization
window (upstream's default, 5 minutes) is patched to 15 s through ``behavior``, so that the
fall back to one replica after the load stops takes about a minute.  Scaling up keeps every
default (15 s syncs, 15 s metric resolution).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import pytest

from tests.kubelab.lab.labs import UP_TIMEOUT
from tests.servers import Kubectl

pytestmark = [
    pytest.mark.lab,
    pytest.mark.long,
    pytest.mark.privileged,
    pytest.mark.containerd,
    pytest.mark.timeout(UP_TIMEOUT + 300),
]

WAIT = 150.0
"""Generous bounds on each phase: a scale-up takes 30-45 s, a fall back about a minute."""

SERVER = """\
import http.server, math

class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        x = 0.0001
        for i in range(1000001):
            x += math.sqrt(x)
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"OK!")

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("", 80), Page).serve_forever()
"""
"""The walkthrough's index.php (``$x += sqrt($x)`` a million times, then "OK!") in Python."""

PHP_APACHE = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: php-apache
spec:
  selector:
    matchLabels:
      run: php-apache
  template:
    metadata:
      labels:
        run: php-apache
    spec:
      containers:
      - name: php-apache
        image: python
        command: ["python3", "-c", {json.dumps(SERVER)}]
        ports:
        - containerPort: 80
        resources:
          limits:
            cpu: 500m
          requests:
            cpu: 200m
---
apiVersion: v1
kind: Service
metadata:
  name: php-apache
  labels:
    run: php-apache
spec:
  ports:
  - port: 80
  selector:
    run: php-apache
"""
"""The walkthrough's php-apache.yaml, its image and command replaced."""

SHORT_SCALE_DOWN = '{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":15}}}}'


def until(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(2)


def hpa_row(kubectl: Kubectl) -> list[str]:
    """``kubectl get hpa``'s row as columns (TARGETS, ``cpu: 250%/50%``, one column)."""
    lines = kubectl.run("get", "hpa").stdout.splitlines()
    header = re.split(r"\s{2,}", lines[0].strip())
    assert header == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    (row,) = lines[1:]
    return re.split(r"\s{2,}", row.strip())


def utilization(row: list[str]) -> int | None:
    """The current CPU utilization TARGETS shows, None while it is ``<unknown>``."""
    match = re.fullmatch(r"cpu: (\d+)%/50%|cpu: <unknown>/50%", row[2])
    assert match, row
    return int(match.group(1)) if match.group(1) else None


def test_the_hpa_walkthrough(lab_kubectl: Kubectl) -> None:
    kubectl = lab_kubectl
    applied = kubectl.run("apply", "-f", "-", input=PHP_APACHE).stdout.split("\n")
    assert applied[:2] == ["deployment.apps/php-apache created", "service/php-apache created"]
    kubectl.run("rollout", "status", "deployment/php-apache", "--timeout=60s")
    # The limit is enforced: CFS quota 50 ms per 100 ms period in the container's cgroup.
    quota = kubectl.run(
        "exec",
        "deploy/php-apache",
        "--",
        "cat",
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
        "/sys/fs/cgroup/cpu/cpu.cfs_period_us",
    )
    assert quota.stdout.split() == ["50000", "100000"]

    autoscaled = kubectl.run(
        "autoscale", "deployment", "php-apache", "--cpu-percent=50", "--min=1", "--max=10"
    )
    assert autoscaled.stdout.strip() == "horizontalpodautoscaler.autoscaling/php-apache autoscaled"
    kubectl.run("patch", "hpa", "php-apache", "--type=merge", "-p", SHORT_SCALE_DOWN)

    kubectl.run(
        "run",
        "load-generator",
        "--image=busybox",
        "--restart=Never",
        "--",
        "/bin/sh",
        "-c",
        "while sleep 0.01; do wget -q -O- http://php-apache; done",
    )
    loaded: list[list[str]] = []

    def scaled_up() -> bool:
        row = hpa_row(kubectl)
        loaded.append(row)
        return int(row[5]) > 1

    until(scaled_up, "the HPA to scale php-apache up under load")
    row = loaded[-1]
    assert row[:2] == ["php-apache", "Deployment/php-apache"] and row[3:5] == ["1", "10"], row
    # Above the target by more than the tolerance, as read by the sync that scaled (the row
    # after it reads the load spread over more pods).
    assert max(utilization(seen) or 0 for seen in loaded) > 55, loaded
    described = kubectl.run("describe", "hpa", "php-apache").stdout
    assert re.search(r"AbleToScale\s+True\s+\w+", described), described
    assert re.search(r"ScalingActive\s+True\s+ValidMetricFound", described), described
    assert re.search(r"ScalingLimited\s+(True|False)\s+\w+", described), described
    assert re.search(
        r"Normal\s+SuccessfulRescale\s+.*\s+horizontal-pod-autoscaler\s+New size: \d+; "
        r"reason: cpu resource utilization \(percentage of request\) above target",
        described,
    ), described

    kubectl.run("delete", "pod", "load-generator", "--grace-period=1")
    until(lambda: hpa_row(kubectl)[5] == "1", "php-apache to fall back to one replica")
    rest = utilization(hpa_row(kubectl))
    assert rest is not None and rest < 50, rest
    described = kubectl.run("describe", "hpa", "php-apache").stdout
    assert re.search(
        r"horizontal-pod-autoscaler\s+New size: 1; reason: All metrics below target", described
    ), described
