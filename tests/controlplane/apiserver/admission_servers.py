"""A ``kubelab apiserver`` with the flags a test module asks for (its admission plugins, the
components it probes), on each storage backend, and clients authenticated as a node (a client
certificate of the cluster CA)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kube.client import kubeconfig
from kube.pki import CertificateAuthority
from tests.controlplane.storage.etcd_server import EtcdServer
from tests.servers import ServerProcess, start_server, stop_server

BACKENDS = ["sqlite", pytest.param("etcd", marks=pytest.mark.etcd)]


def serve(
    backend: str, tmp_path_factory: pytest.TempPathFactory, *flags: str
) -> Iterator[ServerProcess]:
    """The server for a module fixture parametrized over ``BACKENDS``, stopped at its end."""
    base = tmp_path_factory.mktemp(f"apiserver-{backend}")
    data_dir = base / "data"
    data_dir.mkdir()
    etcd: EtcdServer | None = None
    extra = list(flags)
    if backend == "etcd":
        etcd = EtcdServer(base / "etcd")
        etcd.start()
        extra += ["--store", f"etcd://{etcd.endpoint}"]
    server = start_server(data_dir, *extra)
    try:
        yield server
    finally:
        stop_server(server)
        if etcd is not None:
            etcd.stop()


def node_kubeconfig(server: ServerProcess, node: str, directory: Path) -> Path:
    """A kubeconfig for the kubelet of ``node``: CN system:node:<node>, O system:nodes."""
    ca = CertificateAuthority.load_or_create(server.data_dir / "pki")
    pair = ca.issue(f"system:node:{node}", organizations=["system:nodes"], client=True)
    path = directory / f"{node}.kubeconfig"
    kubeconfig.write(path, kubeconfig.render(server.url, ca.cert_pem, node, pair))
    return path
