"""An N-member etcd cluster: its configuration (names, URLs, TLS files, flags) and a runner.

The configuration is pure: ``EtcdCluster`` turns a list of members (name, address, ports) into
what each ``etcd`` process is started with, the ``--initial-cluster`` string every member must
agree on, and the client endpoints an API server is given (``etcd://a,b,c``).  ``write_pki``
is its one side effect: it issues each member's certificate from the lab's cluster CA.  One
certificate per member serves both roles, as kubeadm's etcd "peer" and "server" certificates
together would: server and client usages (a member is a TLS client of its peers) and the
member's address as SAN, plus loopback so local tools reach it.  Peers always talk TLS with
client-certificate auth; clients do when ``client_tls`` is set (the store then needs
``--etcd-cafile/--etcd-certfile/--etcd-keyfile``).

``EtcdProcess`` runs one member as a child process for tests, benches and (through ``netns``)
a lab node: it waits for ``/health``, stops by PID (SIGTERM, then SIGKILL) and can ``kill`` -9
for crash tests.  It is synchronous on purpose: fixtures and benches start a cluster before
their event loop matters, and a member's start is a few hundred milliseconds of polling.  The
kernel kills a member whose starting thread dies (``PR_SET_PDEATHSIG``), so a test killed
mid-run leaves nothing listening; start members from a thread that outlives them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kube.pki import CertificateAuthority, write_file

ETCD_BINARY = shutil.which("etcd") or "/usr/bin/etcd"
CLIENT_PORT = 2379
PEER_PORT = 2380
CLUSTER_TOKEN = "kubelab-etcd"
PROGRESS_NOTIFY = "--experimental-watch-progress-notify-interval=5s"
"""How often a quiet watch that asks for progress hears etcd's revision (10 min by default):
the API server's watch caches and bookmarks move forward with it."""

ClusterState = Literal["new", "existing"]


def etcd_available() -> bool:
    return Path(ETCD_BINARY).is_file() and os.access(ETCD_BINARY, os.X_OK)


@dataclass(frozen=True, slots=True)
class EtcdMember:
    """One member: its name (unique in the cluster), the address it listens on, its ports."""

    name: str
    address: str
    client_port: int = CLIENT_PORT
    peer_port: int = PEER_PORT

    @property
    def endpoint(self) -> str:
        """``host:port`` of the client URL, as ``--store etcd://`` and ``EtcdStore`` take it."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.client_port}"

    def peer_endpoint(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.peer_port}"


@dataclass(frozen=True, slots=True)
class TLSFiles:
    """The PEM files one party presents: the CA it trusts, its certificate and key."""

    ca: Path
    cert: Path
    key: Path


@dataclass(frozen=True)
class EtcdCluster:
    """The configuration of an etcd cluster whose files live under ``base_dir``.

    ``base_dir/pki`` holds ``ca.crt``, each member's ``<name>.crt``/``.key`` and the client
    pair ``client.crt``/``.key``; ``base_dir/<name>`` is each member's data directory.
    """

    members: tuple[EtcdMember, ...]
    base_dir: Path
    client_tls: bool = False
    token: str = CLUSTER_TOKEN

    def __post_init__(self) -> None:
        if not self.members:
            raise ValueError("an etcd cluster needs at least one member")
        names = [m.name for m in self.members]
        if len(set(names)) != len(names):
            raise ValueError(f"etcd member names must be unique: {names}")
        urls = [m.peer_endpoint() for m in self.members] + [m.endpoint for m in self.members]
        if len(set(urls)) != len(urls):
            raise ValueError(f"etcd members must not share an address and port: {urls}")

    @classmethod
    def on_addresses(
        cls,
        addresses: Sequence[str],
        base_dir: Path,
        *,
        prefix: str = "etcd",
        client_tls: bool = False,
    ) -> EtcdCluster:
        """Members ``<prefix>1..N`` on the given addresses with the standard ports."""
        members = tuple(EtcdMember(f"{prefix}{i}", a) for i, a in enumerate(addresses, 1))
        return cls(members, base_dir, client_tls=client_tls)

    def member(self, name: str) -> EtcdMember:
        for member in self.members:
            if member.name == name:
                return member
        raise KeyError(f"no etcd member {name!r}")

    @property
    def quorum(self) -> int:
        return len(self.members) // 2 + 1

    @property
    def pki_dir(self) -> Path:
        return self.base_dir / "pki"

    def data_dir(self, member: EtcdMember) -> Path:
        return self.base_dir / member.name

    def log_path(self, member: EtcdMember) -> Path:
        return self.base_dir / f"{member.name}.log"

    def client_url(self, member: EtcdMember) -> str:
        return f"{'https' if self.client_tls else 'http'}://{member.endpoint}"

    def peer_url(self, member: EtcdMember) -> str:
        return f"https://{member.peer_endpoint()}"

    def initial_cluster(self, members: Sequence[EtcdMember] | None = None) -> str:
        """``name=peer-url,...``: every member of the cluster a member starts into."""
        chosen = self.members if members is None else members
        return ",".join(f"{m.name}={self.peer_url(m)}" for m in chosen)

    def endpoints(self) -> list[str]:
        return [m.endpoint for m in self.members]

    def store_url(self, first: EtcdMember | None = None) -> str:
        """The ``--store`` value for an API server using every member, ``first`` (its local
        one) first, else in order."""
        endpoints = self.endpoints()
        if first is not None:
            endpoints.remove(first.endpoint)
            endpoints.insert(0, first.endpoint)
        return "etcd://" + ",".join(endpoints)

    def member_tls(self, member: EtcdMember) -> TLSFiles:
        return TLSFiles(
            self.pki_dir / "ca.crt",
            self.pki_dir / f"{member.name}.crt",
            self.pki_dir / f"{member.name}.key",
        )

    def client_tls_files(self) -> TLSFiles:
        """What a client (the API server, etcdctl) presents when ``client_tls`` is on."""
        return TLSFiles(
            self.pki_dir / "ca.crt", self.pki_dir / "client.crt", self.pki_dir / "client.key"
        )

    def flags(
        self,
        member: EtcdMember,
        *,
        state: ClusterState = "new",
        initial: Sequence[EtcdMember] | None = None,
    ) -> list[str]:
        """``etcd`` (3.4) arguments for ``member``.

        ``state="existing"`` with ``initial`` (the members after ``etcdctl member add``) is how a
        replacement member joins a running cluster.
        """
        tls = self.member_tls(member)
        peer_url = self.peer_url(member)
        client_url = self.client_url(member)
        flags = [
            f"--name={member.name}",
            f"--data-dir={self.data_dir(member)}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster={self.initial_cluster(initial)}",
            f"--initial-cluster-state={state}",
            f"--initial-cluster-token={self.token}",
            f"--peer-cert-file={tls.cert}",
            f"--peer-key-file={tls.key}",
            f"--peer-trusted-ca-file={tls.ca}",
            "--peer-client-cert-auth",
            # A member cut off campaigns without raising the term, so once reconnected it
            # does not depose a working leader (off by default in etcd 3.4).
            "--pre-vote",
            PROGRESS_NOTIFY,
            "--logger=zap",
            "--log-outputs=stderr",
        ]
        if self.client_tls:
            flags += [
                f"--cert-file={tls.cert}",
                f"--key-file={tls.key}",
                f"--trusted-ca-file={tls.ca}",
                "--client-cert-auth",
            ]
        return flags

    def write_pki(self, ca: CertificateAuthority) -> None:
        """Issue each member's certificate and the client pair from ``ca`` into ``pki_dir``."""
        for member in self.members:
            self.issue_member(ca, member)
        ca.issue("kube-apiserver-etcd-client", client=True).write(self.pki_dir, "client")

    def issue_member(self, ca: CertificateAuthority, member: EtcdMember) -> None:
        """``member``'s certificate (and ``ca.crt``): for one member added to a running cluster."""
        write_file(self.pki_dir / "ca.crt", ca.cert_pem)
        pair = ca.issue(
            member.name,
            server=True,
            client=True,
            dns_names=[member.name, "localhost"],
            ip_addresses=sorted({member.address, "127.0.0.1"}),
        )
        pair.write(self.pki_dir, member.name)


DIE_WITH_PARENT = ("setpriv", "--pdeathsig", "KILL", "--")
"""The member gets SIGKILL when the thread that started it dies.  util-linux's setpriv sets
it and execs, rather than a ``preexec_fn`` running Python between fork and exec: in a parent
with gRPC's threads (the tests' etcd clients) that child once aborted before it ran etcd."""


class EtcdProcess:
    """One member of ``cluster`` as a child process (optionally inside network namespace
    ``netns``), logging to ``cluster.log_path(member)``."""

    def __init__(self, cluster: EtcdCluster, member: EtcdMember, *, netns: str | None = None):
        self.cluster = cluster
        self.member = member
        self.netns = netns
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(
        self, *, state: ClusterState = "new", initial: Sequence[EtcdMember] | None = None
    ) -> list[str]:
        argv = [ETCD_BINARY, *self.cluster.flags(self.member, state=state, initial=initial)]
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else argv

    def start(
        self,
        *,
        state: ClusterState = "new",
        initial: Sequence[EtcdMember] | None = None,
        wait: bool = True,
        timeout: float = 30.0,
    ) -> None:
        """Start the member; with ``wait``, return once ``/health`` says healthy.

        Members of a new cluster only become healthy once a quorum runs: start them all with
        ``wait=False``, then ``wait_healthy`` each (``EtcdRunner.start`` does).
        """
        if self.running():
            return
        log_path = self.cluster.log_path(self.member)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        # The environment's ETCD_* variables would override the flags (etcd reads them).
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        with log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [*DIE_WITH_PARENT, *self.command(state=state, initial=initial)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        if wait:
            self.wait_healthy(timeout)

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self._process is None or self._process.poll() is not None:
                    code = None if self._process is None else self._process.returncode
                    raise RuntimeError(
                        f"etcd {self.member.name} exited ({code}) while starting:\n"
                        + self.log_tail()
                    )
                if self.healthy():
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"etcd {self.member.name} not healthy after {timeout}s:\n{self.log_tail()}"
                    )
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise

    def healthy(self) -> bool:
        """``GET /health`` on the client URL says ``"health": "true"`` (a quorum is up)."""
        context = None
        if self.cluster.client_tls:
            files = self.cluster.client_tls_files()
            context = ssl.create_default_context(cafile=str(files.ca))
            context.load_cert_chain(str(files.cert), str(files.key))
        url = f"{self.cluster.client_url(self.member)}/health"
        try:
            with urllib.request.urlopen(url, timeout=1, context=context) as response:
                return bool(json.loads(response.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.cluster.log_path(self.member).read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited after ``timeout`` seconds."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            process.wait()

    def kill(self) -> None:
        """kill -9: the crash a fault test wants."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        process.wait()


class EtcdRunner:
    """Every member of ``cluster`` as processes: started together, stopped together."""

    def __init__(self, cluster: EtcdCluster, *, netns: dict[str, str] | None = None) -> None:
        self.cluster = cluster
        namespaces = netns or {}
        self.processes = {
            m.name: EtcdProcess(cluster, m, netns=namespaces.get(m.name)) for m in cluster.members
        }

    def __getitem__(self, name: str) -> EtcdProcess:
        return self.processes[name]

    def start(self, timeout: float = 30.0) -> None:
        """Start every member, then wait until each is healthy (all stopped on failure)."""
        try:
            for process in self.processes.values():
                process.start(wait=False)
            for process in self.processes.values():
                process.wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for process in self.processes.values():
            process.stop()

    def __enter__(self) -> EtcdRunner:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
