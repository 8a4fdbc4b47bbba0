"""Real metrics processes for tests and benchmarks: ``kubelab hollow-nodes`` serving each
node's kubelet API, ``kubelab metrics-server`` scraping them, each a child process, and the
objects that register a metrics-server running outside the cluster behind the aggregator."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from kube.pki import CertificateAuthority
from tests.servers import REPO, ServerProcess, host_address


class Process:
    """A kubelab command run until ``stop``, started once its first line matches ``ready``."""

    def __init__(self, argv: list[str], ready: str, log: Path) -> None:
        self.log: IO[str] = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kubelab", *argv],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            cwd=REPO,
        )
        assert self.process.stdout is not None
        self.line = self.process.stdout.readline()
        if not re.search(ready, self.line):
            self.stop()
            raise AssertionError(f"kubelab {argv[0]} did not start: {log.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.close()


def registration(address: str, port: int) -> list[dict[str, Any]]:
    """Upstream's metrics-server Service and APIService, with the endpoint slice a selectorless
    Service needs (the server runs as a process of the test, not as a pod)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "metrics-server", "namespace": "kube-system"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "metrics-server-1",
                "namespace": "kube-system",
                "labels": {"kubernetes.io/service-name": "metrics-server"},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {
                "group": "metrics.k8s.io",
                "version": "v1beta1",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "insecureSkipTLSVerify": True,
                "service": {"name": "metrics-server", "namespace": "kube-system"},
            },
        },
    ]


def hollow_kubelets(server: ServerProcess, work: Path, count: int, *flags: str) -> Process:
    """``kubelab hollow-nodes --count COUNT FLAGS`` serving each node's kubelet API on
    127.0.0.1, under a certificate of a CA of its own (``work/kubelet-ca.crt``, for the
    metrics-server to trust); the kubelets accept the API server's clients."""
    ca = CertificateAuthority.create("hollow-kubelet-ca")
    cert, key = ca.issue("hollow-kubelet", server=True, ip_addresses=["127.0.0.1"]).write(
        work, "kubelet"
    )
    (work / "kubelet-ca.crt").write_bytes(ca.cert_pem)
    return Process(
        [
            "hollow-nodes",
            "--kubeconfig",
            str(server.kubeconfig),
            "--count",
            str(count),
            "--kubelet-address",
            "127.0.0.1",
            "--tls-cert-file",
            str(cert),
            "--tls-private-key-file",
            str(key),
            "--client-ca-file",
            str(server.data_dir / "pki" / "ca.crt"),
            *flags,
        ],
        f"{count} nodes ready",
        work / "hollow.log",
    )


def metrics_server(server: ServerProcess, work: Path, resolution: str) -> tuple[Process, str, int]:
    """``kubelab metrics-server`` scraping every ``resolution`` the kubelets
    ``hollow_kubelets`` started in ``work``, on this machine's address (reachable from the
    API server's aggregator): the process, its address and its port."""
    address = host_address()
    metrics = Process(
        [
            "metrics-server",
            "--kubeconfig",
            str(server.kubeconfig),
            "--bind-address",
            address,
            "--secure-port",
            "0",
            "--metric-resolution",
            resolution,
            "--kubelet-preferred-address-types",
            "InternalIP",
            "--kubelet-certificate-authority",
            str(work / "kubelet-ca.crt"),
        ],
        r"serving on port \d+",
        work / "metrics-server.log",
    )
    return metrics, address, int(metrics.line.rsplit(" ", 1)[1])
