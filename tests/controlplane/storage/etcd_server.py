"""A real etcd for tests: one member on loopback, its own free ports and data directory.

``EtcdServer`` is a one-member ``kubelab.lab.etcd`` cluster (peer TLS from a throwaway CA,
plain client URL) run by ``EtcdProcess``: it waits until ``/health`` answers healthy, stops by
PID (SIGTERM, then SIGKILL after a timeout), and ``kill()`` is the kill -9 a crash test wants.
The ports are chosen once, so a stopped server starts again on the same client endpoint with
the same data (a restart).  ``loopback_cluster`` builds the N-member configuration the fault
tests and ``bench/ha.py`` run.

Should the test process die without running its finalizers, the kernel kills etcd too
(``PR_SET_PDEATHSIG``): call ``start`` from a thread that outlives the server (the main one).
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from kube.pki import CertificateAuthority
from kubelab.lab.etcd import (
    ETCD_BINARY,
    EtcdCluster,
    EtcdMember,
    EtcdProcess,
    EtcdRunner,
    etcd_available,
)
from tests.servers import free_ports

__all__ = ["ETCD_BINARY", "EtcdServer", "etcd_available", "loopback_cluster"]


def loopback_cluster(
    base_dir: Path, size: int, *, prefix: str = "etcd", client_tls: bool = False
) -> EtcdRunner:
    """A ``size``-member cluster on 127.0.0.1 with free ports, not started; its CA (key too, so
    a test can issue certificates for members it adds) and certificates are in its ``pki_dir``."""
    ports = free_ports(2 * size)
    members = tuple(
        EtcdMember(f"{prefix}{i + 1}", "127.0.0.1", ports[2 * i], ports[2 * i + 1])
        for i in range(size)
    )
    cluster = EtcdCluster(members, base_dir, client_tls=client_tls)
    cluster.write_pki(CertificateAuthority.load_or_create(cluster.pki_dir))
    return EtcdRunner(cluster)


class EtcdServer:
    """One etcd member under ``base_dir`` (its data in ``base_dir/<name>``, its log beside it)."""

    def __init__(self, base_dir: Path, *, name: str = "kubelab-test") -> None:
        self.base_dir = base_dir
        self._runner = loopback_cluster(base_dir, 1, prefix=name)
        self._process: EtcdProcess = next(iter(self._runner.processes.values()))
        self.name = self._process.member.name

    @property
    def data_dir(self) -> Path:
        return self._runner.cluster.data_dir(self._process.member)

    @property
    def client_port(self) -> int:
        return self._process.member.client_port

    @property
    def endpoint(self) -> str:
        """The client endpoint, as ``EtcdStore.open`` takes it."""
        return self._process.member.endpoint

    @property
    def client_url(self) -> str:
        return f"http://{self.endpoint}"

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def running(self) -> bool:
        return self._process.running()

    def start(self, timeout: float = 30.0) -> None:
        self._process.start(timeout=timeout)

    def log_tail(self, lines: int = 20) -> str:
        return self._process.log_tail(lines)

    def stop(self, timeout: float = 10.0) -> None:
        self._process.stop(timeout)

    def kill(self) -> None:
        self._process.kill()

    def __enter__(self) -> EtcdServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
