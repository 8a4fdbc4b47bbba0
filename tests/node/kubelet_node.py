"""A one-node cluster for privileged kubelet tests and benchmarks (not a test file).

Everything of the cluster lives in one network namespace, as on a lab node: containerd (from
``containerd_node.ContainerdNode``), ``kubelab server`` (API server, scheduler, controllers,
bound to the node's address) and ``kubelab kubelet``, each started with ``nsenter --net``.
The node's address sits on an ``eth0`` inside the namespace; nothing is added to the
host.  The test process reaches the API server through a ``NetnsForwarder`` on the host's
loopback, run on a thread of its own so that blocking callers (kubectl through
``subprocess.run``) never stall it, and ``host_kubeconfig`` names that forwarder.

The kubelet serves HTTPS on the node address with a certificate issued by the cluster CA, so
``kubectl logs/exec/port-forward`` go kubectl → forwarder → API server → kubelet → CRI
streaming server → pod, the whole way a user's would.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from kube.client import kubeconfig
from kube.pki import CertificateAuthority, KeyPair
from kubelab.lab.forward import NetnsForwarder
from tests.node.containerd_node import ContainerdNode
from tests.servers import REPO, Kubectl, ServerProcess, start_server, stop_server

NODE_IP: Final = "10.200.0.2"
NODE_PREFIX: Final = 24
CLUSTER_CIDR: Final = "10.244.0.0/16"
SERVICE_CIDR: Final = "10.96.0.0/16"
KUBELET_PORT: Final = 10250
STOP_TIMEOUT: Final = 15.0


class ThreadedForwarder:
    """A ``NetnsForwarder`` running on an event loop in a thread of its own."""

    def __init__(self, forwarder: NetnsForwarder) -> None:
        self.forwarder = forwarder
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.port = 0

    def start(self) -> int:
        self.thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self.forwarder.start(), self.loop).result(10)
        return self.port

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.forwarder.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class KubeletCluster:
    """See the module docstring.  A context manager; ``node.name`` is the Node's name."""

    def __init__(self, archives: Sequence[Path], work_dir: Path) -> None:
        self.containerd = ContainerdNode(archives, reference_cni=False)
        self.work_dir = work_dir
        self.node_name = f"node-{uuid.uuid4().hex[:6]}"
        self.server: ServerProcess | None = None
        self.forwarder: ThreadedForwarder | None = None
        self.kubelet: subprocess.Popen[bytes] | None = None
        self.kubelet_log = work_dir / "kubelet.log"

    @property
    def nsenter(self) -> list[str]:
        return ["nsenter", f"--net={self.containerd.netns_path}", "--"]

    @property
    def kubelet_root(self) -> Path:
        return self.containerd.state_dir / "kubelet"

    @property
    def pod_logs_dir(self) -> Path:
        return self.containerd.state_dir / "pod-logs"

    @property
    def host_kubeconfig(self) -> Path:
        return self.work_dir / "host.kubeconfig"

    def kubectl(self, namespace: str = "default") -> Kubectl:
        return Kubectl(self.host_kubeconfig, self.work_dir / "kubectl-cache", namespace)

    def __enter__(self) -> KubeletCluster:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _start(self) -> None:
        self.containerd.__enter__()
        netns = self.containerd.netns
        for command in (
            # No dummy driver on these machines: a veth pair with both ends inside.
            ["ip", "-n", netns, "link", "add", "eth0", "type", "veth", "peer", "name", "uplink"],
            ["ip", "-n", netns, "link", "set", "uplink", "up"],
            ["ip", "-n", netns, "addr", "add", f"{NODE_IP}/{NODE_PREFIX}", "dev", "eth0"],
            ["ip", "-n", netns, "link", "set", "eth0", "up"],
            ["ip", "-n", netns, "route", "add", "default", "dev", "eth0"],
        ):
            subprocess.run(command, check=True, capture_output=True)
        data_dir = self.work_dir / "server"
        data_dir.mkdir()
        self.server = start_server(
            data_dir,
            "--bind-address",
            "0.0.0.0",
            "--advertise-address",
            NODE_IP,
            "--cluster-cidr",
            CLUSTER_CIDR,
            command="server",
            prefix=self.nsenter,
        )
        self.forwarder = ThreadedForwarder(
            NetnsForwarder((NODE_IP, self.server.port), connect_netns=self.containerd.netns_path)
        )
        port = self.forwarder.start()
        pki = data_dir / "pki"
        ca = CertificateAuthority.load_or_create(pki)
        admin = KeyPair.read(pki, "admin")
        kubeconfig.write(
            self.host_kubeconfig,
            kubeconfig.render(f"https://127.0.0.1:{port}", ca.cert_pem, "admin", admin),
        )
        serving = ca.issue(f"system:node:{self.node_name}", server=True, ip_addresses=[NODE_IP])
        self.tls_cert, self.tls_key = serving.write(self.work_dir, "kubelet")
        (self.work_dir / "resolv.conf").write_text("nameserver 10.96.0.10\n")
        self.start_kubelet()

    def start_kubelet(self, *extra: str) -> None:
        assert self.server is not None
        with self.kubelet_log.open("ab") as log:
            self.kubelet = subprocess.Popen(
                [
                    *self.nsenter,
                    sys.executable,
                    "-m",
                    "kubelab",
                    "kubelet",
                    "--kubeconfig",
                    str(self.server.kubeconfig),
                    "--node-name",
                    self.node_name,
                    "--node-ip",
                    NODE_IP,
                    "--container-runtime-endpoint",
                    self.containerd.endpoint,
                    "--root-dir",
                    str(self.kubelet_root),
                    "--pod-logs-dir",
                    str(self.pod_logs_dir),
                    "--cgroup-root",
                    self.containerd.cgroup_parent,
                    "--cni-conf-dir",
                    str(self.containerd.cni_conf_dir),
                    "--cni-bin-dir",
                    str(self.containerd.cni_bin_dir),
                    "--cluster-cidr",
                    CLUSTER_CIDR,
                    "--resolv-conf",
                    str(self.work_dir / "resolv.conf"),
                    "--tls-cert-file",
                    str(self.tls_cert),
                    "--tls-private-key-file",
                    str(self.tls_key),
                    "--client-ca-file",
                    str(self.work_dir / "server" / "pki" / "ca.crt"),
                    "--port",
                    str(KUBELET_PORT),
                    *extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=REPO,
                start_new_session=True,
            )

    def stop_kubelet(self) -> None:
        """SIGTERM the kubelet and wait; its pods keep running, as on a real node."""
        process, self.kubelet = self.kubelet, None
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()

    def close(self) -> None:
        self.stop_kubelet()
        if self.forwarder is not None:
            self.forwarder.stop()
            self.forwarder = None
        if self.server is not None:
            stop_server(self.server)
            self.server = None
        self.containerd.close()

    def interfaces(self) -> list[str]:
        """Link names in the node's namespace (veths of pods show up here)."""
        out = subprocess.run(
            ["ip", "-n", self.containerd.netns, "-o", "link", "show"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()]


def kubelet_logs(cluster: KubeletCluster) -> str:
    return cluster.kubelet_log.read_text(errors="replace")[-20000:]


def pod_cgroups(cluster: KubeletCluster) -> Iterator[Path]:
    """Pod cgroup directories left under the cluster's cgroup root, in any hierarchy."""
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        root = hierarchy / cluster.containerd.cgroup_parent.lstrip("/")
        if root.is_dir():
            yield from (p for p in root.rglob("pod*") if p.is_dir())
