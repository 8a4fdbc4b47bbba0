"""Encryption at rest: values in upstream's formats, Secrets encrypted in the raw SQLite row
and the raw etcd value, reads, lists and watches through the real server, key rotation, and a
clear 500 (never a crash) for a value no configured key decrypts."""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from nacl.secret import SecretBox

from controlplane.apiserver.command import add_flags
from controlplane.apiserver.storage.encryption import ConfigError, EncryptionConfig, load
from controlplane.storage.etcd import EtcdStore
from controlplane.storage.interface import Store
from controlplane.storage.sqlite import SQLiteStore
from tests.controlplane.apiserver.inprocess import serving
from tests.controlplane.storage.etcd_server import EtcdServer
from tests.servers import BARE_APISERVER, Kubectl, start_server, stop_server

KEY1 = base64.b64encode(bytes(range(32))).decode()
KEY2 = base64.b64encode(bytes(range(100, 132))).decode()
SECRET_VALUE = b"correct-horse-battery-staple"
STORAGE_KEY = "/registry/secrets/default/db"


def write_config(path: Path, *providers: str, resources: str = "[secrets]") -> Path:
    """An EncryptionConfiguration for ``resources`` with providers given as YAML flow maps."""
    lines = [
        "apiVersion: apiserver.config.k8s.io/v1",
        "kind: EncryptionConfiguration",
        "resources:",
        f"- resources: {resources}",
        "  providers:",
        *(f"  - {p}" for p in providers),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def cipher(kind: str, name: str, secret: str) -> str:
    return f"{{{kind}: {{keys: [{{name: {name}, secret: '{secret}'}}]}}}}"


def config(tmp_path: Path, *providers: str, resources: str = "[secrets]") -> EncryptionConfig:
    return load(write_config(tmp_path / "encryption.yaml", *providers, resources=resources))


# Formats.


@pytest.mark.parametrize("kind", ["aescbc", "aesgcm", "secretbox"])
def test_values_are_stored_in_upstreams_format(tmp_path: Path, kind: str) -> None:
    providers = config(tmp_path, cipher(kind, "k1", KEY1)).providers_for("", "secrets")
    sealed = providers.write(b'{"kind":"Secret"}', STORAGE_KEY)
    prefix = f"k8s:enc:{kind}:v1:k1:".encode()
    assert sealed.startswith(prefix)
    body, key = sealed[len(prefix) :], bytes(range(32))
    if kind == "aescbc":
        decryptor = Cipher(algorithms.AES(key), modes.CBC(body[:16])).decryptor()
        unpadder = padding.PKCS7(128).unpadder()
        padded = decryptor.update(body[16:]) + decryptor.finalize()
        plain = unpadder.update(padded) + unpadder.finalize()
    elif kind == "aesgcm":
        plain = AESGCM(key).decrypt(body[:12], body[12:], STORAGE_KEY.encode())
    else:
        plain = SecretBox(key).decrypt(body)
    assert plain == b'{"kind":"Secret"}'
    assert providers.read(sealed, STORAGE_KEY) == (b'{"kind":"Secret"}', False)
    assert providers.write(b"same", STORAGE_KEY) != providers.write(b"same", STORAGE_KEY), (
        "a fresh IV or nonce every time"
    )


def test_aesgcm_binds_the_value_to_its_key(tmp_path: Path) -> None:
    providers = config(tmp_path, cipher("aesgcm", "k1", KEY1)).providers_for("", "secrets")
    sealed = providers.write(b"{}", STORAGE_KEY)
    with pytest.raises(Exception, match="message authentication failed"):
        providers.read(sealed, "/registry/secrets/default/other")


def test_resource_patterns(tmp_path: Path) -> None:
    loaded = config(tmp_path, cipher("aescbc", "k1", KEY1), resources="[secrets, '*.apps']")
    assert loaded.providers_for("", "secrets").providers[0].prefix.startswith(b"k8s:enc:aescbc")
    assert loaded.providers_for("apps", "deployments").providers[0].prefix.startswith(b"k8s:enc")
    assert loaded.providers_for("", "configmaps").providers[0].prefix == b""
    everything = config(tmp_path, cipher("aescbc", "k1", KEY1), resources="['*.*']")
    assert everything.providers_for("batch", "jobs").providers[0].prefix != b""
    core = config(tmp_path, cipher("aescbc", "k1", KEY1), resources="['*.']")
    assert core.providers_for("", "configmaps").providers[0].prefix != b""
    assert core.providers_for("apps", "deployments").providers[0].prefix == b""
    with pytest.raises(ConfigError, match="not a valid resource"):
        config(tmp_path, cipher("aescbc", "k1", KEY1), resources="['leases.*']")


@pytest.mark.parametrize(
    ("providers", "message"),
    [
        pytest.param(["{kms: {name: x}}"], "'kms' is not supported", id="kms"),
        pytest.param([cipher("aescbc", "k1", "not base64!")], "not valid base64", id="base64"),
        pytest.param(
            [cipher("aesgcm", "k1", "c2hvcnQ=")], "16 or 24 or 32 bytes, got 5", id="size"
        ),
        pytest.param([cipher("secretbox", "k1", KEY1[:24])], "32 bytes", id="secretbox-size"),
        pytest.param([cipher("aescbc", "", KEY1)], "name", id="no-name"),
        pytest.param(["{identity: {}, aescbc: {}}"], "exactly one provider", id="two"),
        pytest.param([], "providers: expected a non-empty list", id="none"),
    ],
)
def test_bad_configurations_are_refused(tmp_path: Path, providers: list[str], message: str) -> None:
    path = write_config(tmp_path / "e.yaml", *providers)
    if not providers:
        path.write_text(path.read_text().replace("  providers:\n", "  providers: []\n"))
    with pytest.raises(ConfigError, match=message):
        load(path)


def test_the_flag_reports_a_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_flags(parser)
    path = tmp_path / "e.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\n")
    with pytest.raises(SystemExit):
        parser.parse_args(["--encryption-provider-config", str(path)])
    assert "expected apiVersion apiserver.config.k8s.io/v1" in capsys.readouterr().err


# Through the server, on each backend.


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    server = EtcdServer(tmp_path_factory.mktemp("etcd"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


class Backend:
    """A store and a way to read its raw bytes, bypassing every layer of the server."""

    def __init__(self, kind: str, tmp_path: Path, etcd: EtcdServer | None) -> None:
        self.kind, self.tmp_path, self.etcd = kind, tmp_path, etcd

    async def open(self) -> Store:
        if self.etcd is not None:
            return await EtcdStore.open([self.etcd.endpoint])
        return await SQLiteStore.open(self.tmp_path / "state.db")

    def raw(self, key: str) -> bytes:
        if self.etcd is not None:
            got = subprocess.run(
                ["etcdctl", "--endpoints", self.etcd.endpoint, "get", key, "--print-value-only"],
                capture_output=True,
                check=True,
                timeout=30,
                env={"ETCDCTL_API": "3"},
            )
            return got.stdout.removesuffix(b"\n")
        with sqlite3.connect(self.tmp_path / "state.db") as conn:
            rows = conn.execute("SELECT value FROM log WHERE key = ?", (key,)).fetchall()
            live = conn.execute("SELECT value FROM live WHERE key = ?", (key,)).fetchone()
        assert all(SECRET_VALUE not in row[0] for row in rows), "no plaintext in the history"
        assert live is not None
        return bytes(live[0])


@pytest.fixture(params=["sqlite", pytest.param("etcd", marks=pytest.mark.etcd)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    etcd: EtcdServer | None = request.getfixturevalue("etcd") if request.param == "etcd" else None
    return Backend(request.param, tmp_path, etcd)


@pytest.fixture
def namespace() -> str:
    """A namespace of the test's own (etcd is shared by the module's tests)."""
    return f"t-{uuid.uuid4().hex[:8]}"


def secret(namespace: str, name: str, value: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"password": base64.b64encode(value).decode()},
    }


async def call(
    session: aiohttp.ClientSession, method: str, path: str, body: Any = None
) -> tuple[int, dict[str, Any]]:
    async with session.request(method, path, json=body) as response:
        return response.status, await response.json(content_type=None)


async def create_namespace(session: aiohttp.ClientSession, name: str) -> None:
    status, _ = await call(session, "POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert status in (201, 409)


async def test_secrets_are_encrypted_at_rest_and_served_in_plaintext(
    backend: Backend, namespace: str, tmp_path: Path
) -> None:
    encryption = config(tmp_path, cipher("aesgcm", "key1", KEY1))
    store = await backend.open()
    try:
        async with serving(store, tmp_path / "data", encryption=encryption) as (_, session):
            await create_namespace(session, namespace)
            base = f"/api/v1/namespaces/{namespace}/secrets"
            status, created = await call(
                session, "POST", base, secret(namespace, "db", SECRET_VALUE)
            )
            assert status == 201, created
            key = f"/registry/secrets/{namespace}/db"
            raw = backend.raw(key)
            assert raw.startswith(b"k8s:enc:aesgcm:v1:key1:")
            assert SECRET_VALUE not in raw
            assert base64.b64encode(SECRET_VALUE) not in raw
            assert b'"kind"' not in raw

            status, got = await call(session, "GET", f"{base}/db")
            assert (status, base64.b64decode(got["data"]["password"])) == (200, SECRET_VALUE)
            status, listed = await call(session, "GET", base)
            assert [s["metadata"]["name"] for s in listed["items"]] == ["db"]

            async def watch() -> dict[str, Any]:
                rv = created["metadata"]["resourceVersion"]
                async with session.get(f"{base}?watch=1&resourceVersion={rv}") as stream:
                    line = await stream.content.readline()
                event: dict[str, Any] = json.loads(line)
                return event

            watching = asyncio.create_task(watch())
            await asyncio.sleep(0.2)
            changed = secret(namespace, "db", b"rotated-password")
            status, _ = await call(session, "PUT", f"{base}/db", changed)
            assert status == 200
            event = await asyncio.wait_for(watching, 10)
            assert event["type"] == "MODIFIED"
            assert base64.b64decode(event["object"]["data"]["password"]) == b"rotated-password"
            assert b"rotated-password" not in backend.raw(key)

            status, _ = await call(
                session,
                "POST",
                f"/api/v1/namespaces/{namespace}/configmaps",
                {"metadata": {"name": "plain"}, "data": {"k": "visible"}},
            )
            assert status == 201
            assert b"visible" in backend.raw(f"/registry/configmaps/{namespace}/plain"), (
                "resources the configuration does not name stay as they are"
            )
    finally:
        await store.close()


async def test_rotation_a_wrong_key_and_identity_first(
    backend: Backend, namespace: str, tmp_path: Path
) -> None:
    base = f"/api/v1/namespaces/{namespace}/secrets"
    key = f"/registry/secrets/{namespace}/db"
    old = config(tmp_path, cipher("aescbc", "key1", KEY1))
    rotated = config(tmp_path, cipher("secretbox", "key2", KEY2), cipher("aescbc", "key1", KEY1))
    store = await backend.open()
    try:
        async with serving(store, tmp_path / "data", encryption=old) as (_, session):
            await create_namespace(session, namespace)
            status, _ = await call(session, "POST", base, secret(namespace, "db", SECRET_VALUE))
            assert status == 201
        assert backend.raw(key).startswith(b"k8s:enc:aescbc:v1:key1:")

        async with serving(store, tmp_path / "data", encryption=rotated) as (_, session):
            status, got = await call(session, "GET", f"{base}/db")
            assert status == 200, "the old key still decrypts"
            assert backend.raw(key).startswith(b"k8s:enc:aescbc:v1:key1:"), "reads rewrite nothing"
            status, replaced = await call(session, "PUT", f"{base}/db", got)
            assert status == 200, replaced
            assert replaced["metadata"]["resourceVersion"] != got["metadata"]["resourceVersion"], (
                "an unchanged object read with an old key is written again"
            )
            raw = backend.raw(key)
            assert raw.startswith(b"k8s:enc:secretbox:v1:key2:") and SECRET_VALUE not in raw
            status, again = await call(session, "PUT", f"{base}/db", replaced)
            assert again["metadata"]["resourceVersion"] == replaced["metadata"]["resourceVersion"]

        for providers, expected in (
            ((cipher("aescbc", "key1", KEY1),), 'provider secretbox, key "key2"'),
            ((cipher("secretbox", "key2", KEY1),), 'provider secretbox, key "key2": '),
        ):
            wrong = config(tmp_path, *providers)
            async with serving(store, tmp_path / "data", encryption=wrong) as (_, session):
                for path in (f"{base}/db", base):
                    status, answer = await call(session, "GET", path)
                    assert status == 500, answer
                    assert answer["reason"] == "InternalError"
                    assert f'unable to transform key "{key}"' in answer["message"]
                    assert expected in answer["message"]
                status, _ = await call(session, "GET", "/api/v1/namespaces/default")
                assert status == 200, "the server serves on"

        identity_first = config(tmp_path, "{identity: {}}", cipher("secretbox", "key2", KEY2))
        async with serving(store, tmp_path / "data", encryption=identity_first) as (_, session):
            status, got = await call(session, "GET", f"{base}/db")
            assert status == 200
            await call(session, "PUT", f"{base}/db", got)
            assert backend.raw(key).startswith(b"{"), "identity first writes plaintext"
    finally:
        await store.close()


def test_kubectl_rewrite_reencrypts_with_the_new_key(tmp_path: Path) -> None:
    """Upstream's rotation procedure, with the real process and the pinned kubectl."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    path = write_config(tmp_path / "e.yaml", cipher("aescbc", "key1", KEY1))

    def raw() -> bytes:
        with sqlite3.connect(data_dir / "state.db") as conn:
            row = conn.execute("SELECT value FROM live WHERE key = ?", (STORAGE_KEY,)).fetchone()
        return bytes(row[0])

    server = start_server(data_dir, *BARE_APISERVER, "--encryption-provider-config", str(path))
    try:
        kubectl = Kubectl(server.kubeconfig, tmp_path / "cache", "default")
        kubectl.run(
            "create", "secret", "generic", "db", f"--from-literal=p={SECRET_VALUE.decode()}"
        )
    finally:
        stop_server(server)
    assert raw().startswith(b"k8s:enc:aescbc:v1:key1:") and SECRET_VALUE not in raw()

    write_config(path, cipher("aesgcm", "key2", KEY2), cipher("aescbc", "key1", KEY1))
    server = start_server(data_dir, *BARE_APISERVER, "--encryption-provider-config", str(path))
    try:
        kubectl = Kubectl(server.kubeconfig, tmp_path / "cache", "default")
        listed = kubectl.run("get", "secrets", "-A", "-o", "json", namespaced=False).stdout
        kubectl.run("replace", "-f", "-", input=listed, namespaced=False)
        got = kubectl.json("get", "secret", "db")
        assert base64.b64decode(got["data"]["p"]) == SECRET_VALUE
    finally:
        stop_server(server)
    assert raw().startswith(b"k8s:enc:aesgcm:v1:key2:") and SECRET_VALUE not in raw()
