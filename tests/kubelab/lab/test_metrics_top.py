"""``kubectl top`` in the shared lab, where the metrics-server add-on scrapes real kubelets that
read cgroups (v1 on these machines): every node and a pod's container are reported, and the
memory kubectl prints agrees with the kubelets' /stats/summary read (through the API server's
node proxy) around it, within what changes in a scrape window.  CPU, a rate over windows the
two do not share, is checked for its form only; test_kubectl_top.py checks it exactly."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from tests.kubelab.lab.labs import UP_TIMEOUT
from tests.servers import Kubectl

pytestmark = [
    pytest.mark.lab,
    pytest.mark.privileged,
    pytest.mark.containerd,
    pytest.mark.timeout(UP_TIMEOUT + 120),
]

MI = 1024 * 1024
WAIT = 60.0
MEMORY_DRIFT = 8 * MI
"""How far an idle container's working set may move in a scrape window (15 s)."""
MACHINE_DRIFT = 0.05
"""How far, as a fraction, a node's may: a lab node's usage is the whole machine's (the root
cgroup, as upstream's), and the machine runs more than the lab.  While the lab before this
one is still being taken down it falls by a gigabyte (20%) between two scrapes, so the nodes
are compared again until the machine settles (``WAIT``)."""


def _top(kubectl: Kubectl, *args: str, namespaced: bool = True) -> list[list[str]]:
    """The rows of a ``kubectl top`` that succeeded, waiting for the metrics to be there."""
    deadline = time.monotonic() + WAIT
    while True:
        result = kubectl.run("top", *args, check=False, namespaced=namespaced)
        if result.returncode == 0:
            return [line.split() for line in result.stdout.splitlines()[1:]]
        assert time.monotonic() < deadline, f"kubectl top {' '.join(args)}: {result.stderr}"
        time.sleep(2)


def _summary(kubectl: Kubectl, node: str) -> dict[str, Any]:
    path = f"/api/v1/nodes/{node}/proxy/stats/summary"
    loaded: dict[str, Any] = json.loads(kubectl.run("get", "--raw", path, namespaced=False).stdout)
    return loaded


def _mebibytes(printed: str) -> int:
    match = re.fullmatch(r"(\d+)Mi", printed)
    assert match, printed
    return int(match.group(1)) * MI


def _within(printed: str, measured: list[int], drift: float = 0.0) -> bool:
    """Whether kubectl's Mi (rounded down) lies within the working sets read around it, give
    or take what they may move in a scrape window."""
    shown = _mebibytes(printed)
    slack = max(MEMORY_DRIFT, drift * max(measured))
    return min(measured) - slack <= shown <= max(measured) + slack


def test_top_nodes_and_pods_agree_with_the_kubelets(lab_kubectl: Kubectl) -> None:
    kubectl = lab_kubectl
    kubectl.run("run", "idle", "--image=busybox", "--", "sleep", "3600")
    kubectl.run("wait", "--for=condition=Ready", "pod/idle", "--timeout=60s")
    node = kubectl.json("get", "pod", "idle")["spec"]["nodeName"]
    names = kubectl.run("get", "nodes", "-o", "name", namespaced=False).stdout.split()

    deadline = time.monotonic() + WAIT
    while True:
        before = {
            n.removeprefix("node/"): _summary(kubectl, n.removeprefix("node/")) for n in names
        }
        rows = {row[0]: row for row in _top(kubectl, "nodes", namespaced=False)}
        pods = _top(kubectl, "pod", "idle", "--containers")
        after = {name: _summary(kubectl, name) for name in before}
        assert sorted(rows) == sorted(before)
        apart = {
            name: (row, working_sets)
            for name, row in rows.items()
            if not _within(
                row[3],
                working_sets := [
                    s[name]["node"]["memory"]["workingSetBytes"] for s in (before, after)
                ],
                MACHINE_DRIFT,
            )
        }
        if not apart:
            break
        assert time.monotonic() < deadline, apart
        time.sleep(5)
    for row in rows.values():
        assert re.fullmatch(r"\d+m", row[1]) and re.fullmatch(r"\d+%", row[2]), row
        assert re.fullmatch(r"\d+%", row[4]), row

    (pod_row,) = pods
    assert pod_row[:2] == ["idle", "idle"] and re.fullmatch(r"\d+m", pod_row[2]), pod_row
    measured = []
    for summary in (before[node], after[node]):
        (pod,) = [p for p in summary["pods"] if p["podRef"]["namespace"] == kubectl.namespace]
        (container,) = pod["containers"]
        assert container["name"] == "idle"
        measured.append(container["memory"]["workingSetBytes"])
    assert _within(pod_row[3], measured), (pod_row, measured)
