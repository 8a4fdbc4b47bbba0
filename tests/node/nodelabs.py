"""The labs the node tests share, one per proxy mode (not a test file).

kube-proxy's behaviour suite (``tests/node/proxy/test_proxy_lab.py``) runs on a lab of every
mode; the NetworkPolicy truth tables (``tests/node/netpol/test_netpol_lab.py``) on the modes
that rewrite addresses in the kernel.  Both need the same thing, a whole lab of that mode, and
a lab is the slowest thing a test can ask for, so ``node_lab`` (``tests/node/conftest.py``) is
session-scoped and each module parametrizes it indirectly with the modes it runs on: pytest
groups the tests of one mode across modules, the mode's lab comes up for the first of them and
goes down before the next mode's.  Each module adds its own workload (the proxy suite in
``default``, the truth tables in ``x``, ``y`` and ``z``) and leaves the other's alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kubelab.lab.topology import Lab
from tests.servers import Kubectl


@dataclass(frozen=True)
class Mode:
    lab: str
    host_api_port: int
    proxy_mode: str
    iptables_backend: str


IPTABLES = pytest.param(Mode("px1", 16450, "iptables", "restore"), id="iptables-restore")
LIBIPTC = pytest.param(Mode("px2", 16451, "iptables", "libiptc"), id="iptables-libiptc")
USERSPACE = pytest.param(Mode("px3", 16452, "userspace", "restore"), id="userspace")
NFTABLES = pytest.param(Mode("klnft1", 16470, "nftables", "restore"), id="nftables")


@dataclass(frozen=True)
class NodeLab:
    """A running lab of one mode: its inventory and the pinned kubectl (``default``)."""

    mode: Mode
    lab: Lab
    kubectl: Kubectl


def web_server_pod(name: str, node: str, port: int) -> dict[str, Any]:
    """A busybox ``httpd`` answering ``ok`` on ``port``, pinned to ``node``, labelled
    ``app=NAME`` and Ready once it listens (the trace tests' and ``bench.trace``'s pods)."""
    serve = f"mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p {port} -h /www"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "web",
                    "image": "busybox",
                    "command": ["sh", "-c", serve],
                    "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1},
                }
            ],
        },
    }
