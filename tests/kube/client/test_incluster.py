"""In-cluster configuration: the pod's environment and service-account files, and the bound
token re-read when the kubelet rotates it."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from kube.api.kinds.core_v1.cluster import ConfigMap
from kube.api.meta_v1 import ObjectMeta
from kube.client import kubeconfig
from kube.client.incluster import InClusterError, TokenFile, load
from kube.client.kubeconfig import ClientConfig
from kube.client.rest import Client

ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def rotate(directory: Path, token: str) -> None:
    """Replace the token the way the kubelet's atomic writer does: a new file, renamed over."""
    fresh = directory / ".token.new"
    fresh.write_text(token)
    os.replace(fresh, directory / "token")


@pytest.fixture
def account(tmp_path: Path) -> Path:
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\nCA\n")
    (directory / "namespace").write_text("kube-system")
    rotate(directory, "first\n")
    return directory


def test_reads_the_pods_environment_and_credentials(account: Path) -> None:
    config = load(ENV, account)
    assert config.server == "https://10.96.0.1:443"
    assert config.ca_pem == b"-----BEGIN CERTIFICATE-----\nCA\n"
    assert config.token_file == account / "token"
    assert config.token is None
    assert config.namespace == "kube-system"


def test_ipv6_service_host_is_bracketed(account: Path) -> None:
    config = load(
        {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}, account
    )
    assert config.server == "https://[fd00::1]:6443"


def test_namespace_file_is_optional(account: Path) -> None:
    (account / "namespace").unlink()
    assert load(ENV, account).namespace is None


@pytest.mark.parametrize(
    ("environ", "remove", "message"),
    [
        ({}, None, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be defined"),
        ({"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, None, "must be defined"),
        ({**ENV, "KUBERNETES_SERVICE_PORT": "https"}, None, "not a port number: 'https'"),
        (ENV, "token", "cannot read token"),
        (ENV, "ca.crt", "ca.crt"),
    ],
    ids=["no-env", "no-port", "bad-port", "no-token", "no-ca"],
)
def test_outside_a_pod_it_says_why(
    account: Path, environ: dict[str, str], remove: str | None, message: str
) -> None:
    if remove:
        (account / remove).unlink()
    with pytest.raises(InClusterError, match=message):
        load(environ, account)


def test_token_is_reread_when_rotated_and_kept_when_unreadable(
    account: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = TokenFile(account / "token")
    assert tokens.current() == "first"
    assert tokens.current() == "first"
    rotate(account, "second")
    assert tokens.current() == "second"
    (account / "token").unlink()
    with caplog.at_level(logging.WARNING):
        assert tokens.current() == "second"
    assert "keeping the previous token" in caplog.text
    rotate(account, "")
    assert tokens.current() == "second"  # an empty file is a rotation in progress, not a token
    rotate(account, "third")
    assert tokens.current() == "third"


def test_a_token_that_never_was_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("  \n")
    with pytest.raises(InClusterError, match="is empty"):
        TokenFile(tmp_path / "token").current()


def test_kubeconfig_token_file_is_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"tokenFile": "secrets/token"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
        "current-context": "x",
    }
    (tmp_path / "config").write_text(json.dumps(document))
    config = kubeconfig.load(tmp_path / "config")
    assert config.token_file == tmp_path / "secrets" / "token"
    assert config.namespace == "ns"


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[str, list[str | None]]]:
    """A plain-HTTP server answering every request with a ConfigMap (a watch: one event) and
    recording each request's Authorization header."""
    seen: list[str | None] = []
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "d"}}

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        if request.query.get("watch"):
            return web.Response(text=json.dumps({"type": "ADDED", "object": body}) + "\n")
        return web.json_response(body)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    finally:
        await runner.cleanup()


async def test_client_sends_the_current_token(
    account: Path, recorder: tuple[str, list[str | None]]
) -> None:
    server, seen = recorder
    config = ClientConfig(server=server, token="ignored", token_file=account / "token")
    async with Client(config) as client:
        await client.get(ConfigMap, "cm", "d")
        rotate(account, "second")
        await client.get(ConfigMap, "cm", "d")
        await client.create(ConfigMap(metadata=ObjectMeta(name="x", namespace="d")))
        events = client.watch(ConfigMap, "d")
        assert (await anext(events)).type == "ADDED"
        await events.aclose()
    assert seen == ["Bearer first", "Bearer second", "Bearer second", "Bearer second"]


async def test_client_with_a_fixed_token_sends_it(recorder: tuple[str, list[str | None]]) -> None:
    server, seen = recorder
    async with Client(ClientConfig(server=server, token="fixed")) as client:
        await client.get(ConfigMap, "cm", "d")
    assert seen == ["Bearer fixed"]
