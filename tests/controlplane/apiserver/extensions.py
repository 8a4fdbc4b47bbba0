"""Extension API servers in tests: the process, and registering it with the aggregator as a
cluster admin does (a Service with an EndpointSlice to it, an APIService naming the Service
and the CA of its serving certificate), then waiting until the APIService is Available.

Used by the aggregation tests (a Flunder server) and the autoscaler's (a resource metrics
server).  The API servers they start use ``--enable-aggregator-routing=true`` so the
EndpointSlice's address is reached directly, with no kube-proxy.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.controlplane.apiserver.corpus import create
from tests.servers import REPO, Kubectl

WAIT = 40.0
"""Seconds an availability change may take (the controller rechecks every 10 s)."""


@dataclass
class Extension:
    """The extension server process: stopped and started again on the same port."""

    argv: list[str]
    record: Path
    address: str
    port: int = 0
    process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [*self.argv, "--address", self.address, "--port", str(self.port)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        match = re.search(r"serving on port (\d+)", line)
        assert match, f"the extension server did not start: {line!r}"
        self.port = int(match.group(1))

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=10)
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None

    def requests(self) -> list[dict[str, Any]]:
        lines = self.record.read_text().splitlines() if self.record.exists() else []
        return [json.loads(line) for line in lines]


def until(predicate: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def available(kubectl: Kubectl, name: str) -> dict[str, Any]:
    """The Available condition of the APIService ``name`` (empty while it has none)."""
    conditions = kubectl.json("get", "apiservice", name).get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "Available"), {})


def apiservice(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """An APIService document (fields given as None left out)."""
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": name},
        "spec": {k: v for k, v in spec.items() if v is not None},
    }


def endpoint_slice(address: str, port: int) -> dict[str, Any]:
    """The EndpointSlice of Service ``api``: ``address:port``."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "api-1", "labels": {"kubernetes.io/service-name": "api"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"port": port, "protocol": "TCP"}],
    }


def expose(admin: Kubectl, extension: Extension) -> None:
    """Service ``api`` in the kubectl's namespace, with an EndpointSlice to ``extension``."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "api"},
        "spec": {"ports": [{"port": 443, "targetPort": extension.port}]},
    }
    create(admin, service, endpoint_slice(extension.address, extension.port))


def register(admin: Kubectl, name: str, group: str, version: str, ca_pem: bytes) -> None:
    """The APIService ``name`` for ``group/version`` through Service ``api`` (``expose``),
    waited on until Available."""
    document = apiservice(
        name,
        {
            "group": group,
            "version": version,
            "groupPriorityMinimum": 1000,
            "versionPriority": 15,
            "service": {"namespace": admin.namespace, "name": "api"},
            "caBundle": base64.b64encode(ca_pem).decode(),
        },
    )
    created = admin.run("create", "-f", "-", input=json.dumps(document), namespaced=False)
    assert created.stdout.strip() == f"apiservice.apiregistration.k8s.io/{name} created"
    until(lambda: available(admin, name).get("status") == "True", "the APIService to be available")
