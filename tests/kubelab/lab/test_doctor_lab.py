"""``kubelab lab doctor`` on the shared lab: a healthy worker passes (its two warnings are the
lab's own and explained below); a worker broken on purpose (forwarding off, strict
rp_filter, its route to the other nodes' pods gone, a chain left by a kube-proxy that wrote
legacy tables for a Service that no longer exists, its CNI configuration moved away) is
diagnosed check by check, ``--fix`` repairs the safe ones and names the others still broken;
everything is restored in ``finally`` blocks, so the lab is as it was."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from node.proxy import names
from tests.kubelab.lab.labs import UP_TIMEOUT, RunningLab, lab_command

pytestmark = [
    pytest.mark.lab,
    pytest.mark.privileged,
    pytest.mark.containerd,
    pytest.mark.timeout(UP_TIMEOUT + 120),  # the first test may bring the shared lab up
]

WORKER = "node1"
EXPLAINED = {
    "resolv-conf": "the netns lab has no upstream resolver: its pods' resolv.conf names none "
    "(kubelab.lab.components.NO_NAMESERVERS)",
    "commands": "ethtool and socat, optional in kubeadm's list, are not installed here; "
    "nothing of the lab runs them",
}
"""Checks that may warn on a healthy lab node, and why."""
STALE_CHAIN = names.service_chain("gone/web:http", "TCP")


def doctor(lab: RunningLab, *flags: str) -> tuple[int, dict[str, dict[str, Any]], list[Any]]:
    """``kubelab lab doctor --name LAB WORKER -o json FLAGS``: exit status, checks by name,
    what ``--fix`` fixed."""
    done = lab_command("doctor", "--name", lab.name, WORKER, "-o", "json", *flags)
    assert done.returncode in (0, 1), done.stderr
    [report] = json.loads(done.stdout)
    assert report["node"] == WORKER
    return done.returncode, {c["name"]: c for c in report["checks"]}, report["fixed"]


def node_sh(lab: RunningLab, script: str) -> str:
    done = lab.exec(WORKER, "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_healthy_worker_passes_every_check(shared_lab: RunningLab) -> None:
    code, checks, _ = doctor(shared_lab)
    assert code == 0
    unexplained = {
        name: check["evidence"]
        for name, check in checks.items()
        if check["status"] != "pass" and name not in EXPLAINED
    }
    assert unexplained == {}
    assert all(checks[name]["status"] in ("pass", "warn") for name in EXPLAINED)
    assert "10.244." in checks["pod-cidr-routes"]["evidence"]
    assert "renewed" in checks["node-lease"]["evidence"]
    assert "last sync" in checks["kube-proxy-sync"]["evidence"]


@contextlib.contextmanager
def broken(lab: RunningLab, break_it: str, restore: str) -> Iterator[None]:
    """Run ``break_it`` on the worker, and ``restore`` afterwards whatever happened."""
    try:
        node_sh(lab, break_it)
        yield
    finally:
        node_sh(lab, restore)


def test_a_broken_worker_is_diagnosed_and_fix_repairs_the_safe_ones(
    shared_lab: RunningLab,
) -> None:
    lab = shared_lab
    rp_filter = node_sh(lab, "sysctl -n net.ipv4.conf.all.rp_filter")
    gateway = json.loads(node_sh(lab, "ip -j route show default"))[0]["gateway"]
    conf_dir = lab.lab.node(WORKER).cni_conf_dir
    with contextlib.ExitStack() as stack:
        stack.enter_context(
            broken(lab, "sysctl -qw net.ipv4.ip_forward=0", "sysctl -qw net.ipv4.ip_forward=1")
        )
        stack.enter_context(
            broken(
                lab,
                "sysctl -qw net.ipv4.conf.all.rp_filter=1",
                f"sysctl -qw net.ipv4.conf.all.rp_filter={rp_filter}",
            )
        )
        stack.enter_context(
            broken(
                lab,
                "ip route del default",
                f"ip route replace default via {gateway} dev eth0",
            )
        )
        # Written back rather than renamed back: containerd 1.6 reloads its CNI configuration
        # when a file in the directory is written, and stays "cni plugin not initialized"
        # after the file is only renamed back in (found when the node stayed NotReady).
        stack.enter_context(
            broken(
                lab,
                f"mkdir -p {conf_dir}.away && mv {conf_dir}/* {conf_dir}.away/",
                f"cp {conf_dir}.away/* {conf_dir}/ && rm -r {conf_dir}.away",
            )
        )
        stack.enter_context(
            broken(
                lab,
                f"iptables-legacy -t nat -N {STALE_CHAIN} && iptables-legacy -t nat -A "
                f"OUTPUT -d 10.96.99.99/32 -p tcp --dport 80 -j {STALE_CHAIN}",
                f"iptables-legacy -t nat -D OUTPUT -d 10.96.99.99/32 -p tcp --dport 80 "
                f"-j {STALE_CHAIN} 2>/dev/null; iptables-legacy -t nat -X {STALE_CHAIN} "
                "2>/dev/null; true",
            )
        )
        code, checks, _ = doctor(lab)
        assert code == 1
        expected = {
            "ip-forward": ("fail", "net.ipv4.ip_forward = 0"),
            "rp-filter": ("warn", "strict rp_filter on all"),
            "pod-cidr-routes": ("fail", "Network is unreachable"),
            "cni-config": ("fail", f"no CNI configuration in {conf_dir}"),
            "leftover-service-rules": ("warn", f"iptables-legacy nat: {STALE_CHAIN}"),
            "iptables-backends": ("fail", "legacy: 1 rules"),
        }
        for name, (status, evidence) in expected.items():
            assert (checks[name]["status"], evidence in checks[name]["evidence"]) == (
                status,
                True,
            ), checks[name]
        unexpected = {
            n: c["evidence"]
            for n, c in checks.items()
            if c["status"] != "pass" and n not in expected and n not in EXPLAINED
        }
        assert unexpected == {}

        code, checks, fixed = doctor(lab, "--fix")
        assert code == 1
        assert sorted((f["name"], f["error"]) for f in fixed) == [
            ("ip-forward", None),
            ("leftover-service-rules", None),
            ("rp-filter", None),
        ]
        for name in ("ip-forward", "rp-filter", "leftover-service-rules", "iptables-backends"):
            assert checks[name]["status"] == "pass", checks[name]
        for name in ("pod-cidr-routes", "cni-config"):
            assert checks[name]["status"] == "fail" and not checks[name]["safeFix"]
        assert node_sh(lab, "sysctl -n net.ipv4.ip_forward") == "1"
        assert node_sh(lab, "sysctl -n net.ipv4.conf.all.rp_filter") == "2"
        assert STALE_CHAIN not in node_sh(lab, "iptables-legacy-save -t nat")
    lab.kubectl.run(
        "wait", "--for=condition=Ready", f"node/{WORKER}", "--timeout=60s", namespaced=False
    )
    code, checks, _ = doctor(lab)
    assert code == 0, {n: c["evidence"] for n, c in checks.items() if c["status"] == "fail"}
