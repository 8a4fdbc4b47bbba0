"""An API server on a real three-member etcd cluster while members are killed with -9.

Each test writes a numbered sequence of ConfigMaps through the API server (``--store
etcd://a,b,c``), records which creates were acknowledged, kills members, and ends by checking
that every acknowledged write is present.  One member down: the store fails over to another
endpoint and writes go on; the member rejoins and catches up (read from it alone, serializable,
so the answer is its own copy).  Two down: no quorum, so writes fail with a 503 Status saying
the storage is unavailable (never a 500), and so do consistent reads, while lists at
``resourceVersion=0`` still answer from the API server's watch cache; with one member back the
writes succeed again and nothing acknowledged is lost.  The last tests walk the runbook in
docs/ha.md: replacing a failed member (member remove, member add, start with
``--initial-cluster-state existing``) and restoring a snapshot.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aetcd
import pytest
from aetcd import rpc

from controlplane.storage.etcd import EtcdStore, EtcdTLS
from controlplane.storage.interface import Unavailable
from kube.api.kinds.core_v1.cluster import ConfigMap, Namespace
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from kube.pki import CertificateAuthority
from kubelab.lab.etcd import EtcdCluster, EtcdMember, EtcdProcess, EtcdRunner
from tests.controlplane.storage.etcd_server import loopback_cluster
from tests.servers import BARE_APISERVER, ServerProcess, free_ports, start_server, stop_server

pytestmark = [pytest.mark.etcd, pytest.mark.slow]

NAMESPACE = "ha"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EtcdRunner]:
    runner = loopback_cluster(tmp_path / "etcd", 3)
    runner.start()
    try:
        yield runner
    finally:
        runner.stop()


@pytest.fixture
def apiserver(cluster: EtcdRunner, tmp_path: Path) -> Iterator[ServerProcess]:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = start_server(data_dir, *BARE_APISERVER, "--store", cluster.cluster.store_url())
    try:
        yield server
    finally:
        stop_server(server)


class Writer:
    """Creates ``cm-<i>`` in order and remembers which creates the server acknowledged."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.next = 0
        self.acknowledged: list[str] = []
        self.failures: list[ApiError] = []

    async def write(self, count: int) -> None:
        for _ in range(count):
            name = f"cm-{self.next}"
            self.next += 1
            config_map = ConfigMap(
                metadata=ObjectMeta(name=name, namespace=NAMESPACE), data={"i": name}
            )
            try:
                await self.client.create(config_map)
            except ApiError as error:
                if error.status.reason != "AlreadyExists":  # a retry of an applied create
                    self.failures.append(error)
                    continue
            self.acknowledged.append(name)

    async def missing(self) -> list[str]:
        present = {cm.metadata.name for cm in (await self.client.list(ConfigMap, NAMESPACE)).items}
        return [name for name in self.acknowledged if name not in present]


async def member_keys(endpoint: str, prefix: bytes) -> set[bytes]:
    """The keys under ``prefix`` in one member's own copy (a serializable read)."""
    host, port = endpoint.rsplit(":", 1)
    client = aetcd.Client(host, int(port))
    await client.connect()
    try:
        request = rpc.RangeRequest(
            key=prefix, range_end=prefix[:-1] + bytes([prefix[-1] + 1]), serializable=True
        )
        response = await client.kvstub.Range(request, timeout=5)
        return {bytes(kv.key) for kv in response.kvs}
    finally:
        await client.close()


async def setup_client(apiserver: ServerProcess, **options: int) -> Client:
    client = Client.from_kubeconfig(apiserver.kubeconfig, user_agent="ha-tests", **options)
    await client.create(Namespace(metadata=ObjectMeta(name=NAMESPACE)))
    return client


async def test_one_member_killed_writes_continue_and_it_catches_up(
    cluster: EtcdRunner, apiserver: ServerProcess
) -> None:
    async with await setup_client(apiserver) as client:
        writer = Writer(client)
        await writer.write(20)
        first = cluster.cluster.members[0]  # the endpoint the API server talks to
        cluster[first.name].kill()
        started = time.monotonic()
        await writer.write(20)
        failover = time.monotonic() - started
        assert writer.failures == [], writer.failures
        assert len(writer.acknowledged) == 40
        assert failover < 30, f"20 writes took {failover:.1f}s across the failover"

        cluster[first.name].start()  # same data dir: it rejoins as itself
        await writer.write(10)
        deadline = time.monotonic() + 20
        wanted = {f"/registry/configmaps/{NAMESPACE}/{n}".encode() for n in writer.acknowledged}
        while True:
            have = await member_keys(first.endpoint, f"/registry/configmaps/{NAMESPACE}/".encode())
            if wanted <= have or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert sorted(wanted - have) == []
        assert await writer.missing() == []


async def test_two_members_killed_writes_fail_cleanly_and_recover(
    cluster: EtcdRunner, apiserver: ServerProcess
) -> None:
    async with await setup_client(apiserver, max_retries=0) as client:
        writer = Writer(client)
        await writer.write(20)
        for member in cluster.cluster.members[1:]:
            cluster[member.name].kill()

        await writer.write(1)
        assert len(writer.failures) == 1
        status = writer.failures[0].status
        assert status.code == 503, status
        assert status.reason == "ServiceUnavailable"
        assert "storage is unavailable" in (status.message or "")

        # A consistent read (no resourceVersion) needs the quorum and fails the same clean
        # way; resourceVersion=0 is answered from the API server's watch cache, as upstream.
        with pytest.raises(ApiError) as raised:
            await client.list(ConfigMap, NAMESPACE)
        assert raised.value.status.code == 503
        assert "storage is unavailable" in (raised.value.status.message or "")
        cached = await client.list(ConfigMap, NAMESPACE, resource_version="0")
        assert sorted(cm.metadata.name or "" for cm in cached.items) == sorted(writer.acknowledged)

        back = cluster.cluster.members[1]
        cluster[back.name].start()
        deadline = time.monotonic() + 30
        before = len(writer.acknowledged)
        while len(writer.acknowledged) == before and time.monotonic() < deadline:
            await writer.write(1)
            await asyncio.sleep(0.2)
        assert len(writer.acknowledged) > before, writer.failures[-1].status
        await writer.write(10)
        assert await writer.missing() == []
        assert all(f.status.code == 503 for f in writer.failures), [
            f.status for f in writer.failures
        ]


async def test_client_tls_to_etcd(tmp_path: Path) -> None:
    """Members that want client certificates: the store and ``--etcd-*file`` speak TLS."""
    with loopback_cluster(tmp_path / "etcd", 1, client_tls=True) as runner:
        files = runner.cluster.client_tls_files()
        endpoints = runner.cluster.endpoints()
        with pytest.raises(Unavailable):  # the CA alone: the member wants a certificate
            await EtcdStore.open(endpoints, tls=EtcdTLS(files.ca), connect_timeout=1)
        with pytest.raises(Unavailable):  # no TLS at all
            await EtcdStore.open(endpoints, connect_timeout=1)
        data_dir = tmp_path / "data"
        data_dir.mkdir()
        server = start_server(
            data_dir,
            *BARE_APISERVER,
            "--store",
            runner.cluster.store_url(),
            "--etcd-cafile",
            str(files.ca),
            "--etcd-certfile",
            str(files.cert),
            "--etcd-keyfile",
            str(files.key),
        )
        try:
            async with await setup_client(server) as client:
                await Writer(client).write(1)
                assert [
                    cm.metadata.name for cm in (await client.list(ConfigMap, NAMESPACE)).items
                ] == ["cm-0"]
        finally:
            stop_server(server)


# The runbook in docs/ha.md, step by step with etcdctl.

ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"


def etcdctl(endpoint: str, *args: str, within: float = 10.0) -> str:
    """``etcdctl --endpoints=endpoint args``; tried again until ``within`` seconds have passed
    (a member just killed may have been the leader: requests wait for the next election;
    every call here may be repeated)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL")}
    deadline = time.monotonic() + within
    while True:
        done = subprocess.run(
            [ETCDCTL, f"--endpoints={endpoint}", "--command-timeout=3s", *args],
            capture_output=True,
            text=True,
            timeout=30,
            env={**env, "ETCDCTL_API": "3"},
            check=False,
        )
        if done.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert done.returncode == 0, f"etcdctl {' '.join(args)}: {done.stderr}"
    return done.stdout


def put_keys(endpoint: str, count: int, prefix: str = "/runbook/") -> set[str]:
    for i in range(count):
        etcdctl(endpoint, "put", f"{prefix}{i}", str(i))
    return {f"{prefix}{i}" for i in range(count)}


def local_keys(endpoint: str, prefix: str = "/runbook/") -> set[str]:
    """The keys one member holds itself (serializable: no quorum read)."""
    out = etcdctl(endpoint, "get", prefix, "--prefix", "--keys-only", "--consistency=s")
    return {line for line in out.splitlines() if line}


def test_failed_member_replaced_with_member_remove_and_add(
    cluster: EtcdRunner, tmp_path: Path
) -> None:
    etcd1, etcd2, etcd3 = cluster.cluster.members
    keys = put_keys(etcd1.endpoint, 20)
    cluster[etcd3.name].kill()

    members = json.loads(etcdctl(etcd1.endpoint, "member", "list", "-w", "json"))["members"]
    failed = next(m for m in members if m["name"] == etcd3.name)
    etcdctl(etcd1.endpoint, "member", "remove", f"{failed['ID']:x}", within=20)
    keys |= put_keys(etcd1.endpoint, 5, "/runbook/after-remove-")

    client_port, peer_port = free_ports(2)
    etcd4 = EtcdMember("etcd4", "127.0.0.1", client_port, peer_port)
    grown = EtcdCluster((etcd1, etcd2, etcd4), cluster.cluster.base_dir)
    grown.issue_member(CertificateAuthority.load_or_create(grown.pki_dir), etcd4)
    etcdctl(
        etcd1.endpoint,
        "member",
        "add",
        etcd4.name,
        f"--peer-urls={grown.peer_url(etcd4)}",
        within=20,
    )
    replacement = EtcdProcess(grown, etcd4)
    try:
        replacement.start(state="existing")
        deadline = time.monotonic() + 20
        while local_keys(etcd4.endpoint) != keys and time.monotonic() < deadline:
            time.sleep(0.1)
        assert local_keys(etcd4.endpoint) == keys
        names = {
            m["name"]
            for m in json.loads(etcdctl(etcd4.endpoint, "member", "list", "-w", "json"))["members"]
        }
        assert names == {"etcd1", "etcd2", "etcd4"}
        # Quorum is two of the three again: losing the other old member keeps it writable.
        cluster[etcd2.name].kill()
        etcdctl(etcd4.endpoint, "put", "/runbook/with-two", "x")
    finally:
        replacement.stop()


def test_snapshot_save_and_restore(cluster: EtcdRunner, tmp_path: Path) -> None:
    etcd1 = cluster.cluster.members[0]
    keys = put_keys(etcd1.endpoint, 20)
    snapshot = tmp_path / "snapshot.db"
    etcdctl(etcd1.endpoint, "snapshot", "save", str(snapshot))
    etcdctl(etcd1.endpoint, "put", "/runbook/after-snapshot", "x")  # not in the snapshot
    cluster.stop()

    # Restore into a new one-member cluster (the same steps, once per member, restore three).
    client_port, peer_port = free_ports(2)
    restored = EtcdCluster(
        (EtcdMember("restored1", "127.0.0.1", client_port, peer_port),), tmp_path / "restored"
    )
    restored.write_pki(CertificateAuthority.load_or_create(restored.pki_dir))
    member = restored.members[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL")}
    done = subprocess.run(
        [
            ETCDCTL,
            "snapshot",
            "restore",
            str(snapshot),
            f"--name={member.name}",
            f"--data-dir={restored.data_dir(member)}",
            f"--initial-cluster={restored.initial_cluster()}",
            f"--initial-advertise-peer-urls={restored.peer_url(member)}",
            "--initial-cluster-token=kubelab-etcd-restored",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        env={**env, "ETCDCTL_API": "3"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with EtcdRunner(restored):
        assert local_keys(member.endpoint) == keys
