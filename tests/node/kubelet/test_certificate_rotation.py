"""When the kubelet renews its client certificate, and which kubeconfigs it considers its own."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

import pytest

from kube.client import kubeconfig
from kube.client.errors import ClientError
from kube.clock import FakeClock
from kube.pki import CertificateAuthority
from node.kubelet import certificate
from tests.fakeapi import Action, FakeApi


def test_rotation_falls_between_70_and_90_percent_of_the_lifetime(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path)
    cert = ca.issue("system:node:a", organizations=["system:nodes"], client=True, days=10)
    parsed = cert.certificate
    start, end = parsed.not_valid_before_utc, parsed.not_valid_after_utc
    earliest = certificate.rotation_deadline(parsed, lambda low, high: low)
    latest = certificate.rotation_deadline(parsed, lambda low, high: high)
    assert earliest == start + (end - start) * 0.7
    assert latest == start + (end - start) * 0.9
    for _ in range(20):
        assert earliest <= certificate.rotation_deadline(parsed) <= latest


def test_only_the_nodes_own_identity_is_renewed(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path)

    def config(user: str, groups: list[str]) -> kubeconfig.ClientConfig:
        pair = ca.issue(user, organizations=groups, client=True)
        return kubeconfig.ClientConfig(
            server="https://x", ca_pem=ca.cert_pem, cert_pem=pair.cert_pem, key_pem=pair.key_pem
        )

    assert certificate.is_node_identity(config("system:node:a", ["system:nodes"]), "a")
    assert not certificate.is_node_identity(config("system:node:b", ["system:nodes"]), "a")
    assert not certificate.is_node_identity(config("kubernetes-admin", ["system:masters"]), "a")
    assert not certificate.is_node_identity(kubeconfig.ClientConfig(server="https://x"), "a")


def test_a_missing_or_expired_kubeconfig_is_not_usable(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path)
    path = tmp_path / "kubelet.kubeconfig"
    now = datetime.datetime.now(datetime.UTC)
    assert not certificate.usable(path, now)
    pair = ca.issue("system:node:a", organizations=["system:nodes"], client=True, days=1)
    kubeconfig.write(path, kubeconfig.render("https://x", ca.cert_pem, "node", pair))
    assert certificate.usable(path, now)
    assert not certificate.usable(path, now + datetime.timedelta(days=2))


def refused(_: Action) -> None:
    """Every certificate request fails: the API is unreachable."""
    raise ClientError("POST /apis/certificates.k8s.io/v1/certificatesigningrequests: refused")


async def test_a_certificate_that_expires_unrenewed_ends_the_kubelet(tmp_path: Path) -> None:
    ca = CertificateAuthority.load_or_create(tmp_path)
    pair = ca.issue("system:node:a", organizations=["system:nodes"], client=True, days=1)
    paths = certificate.Paths(tmp_path / "kubelet.kubeconfig", tmp_path / "pki")
    kubeconfig.write(paths.kubeconfig, kubeconfig.render("https://x", ca.cert_pem, "node", pair))
    clock = FakeClock(datetime.datetime.now(datetime.UTC))
    api = FakeApi(clock)
    api.react("create", "CertificateSigningRequest", refused)
    rotator = certificate.client_manager(api, paths, "a", clock)
    task = asyncio.create_task(rotator.run())
    for _ in range(200):
        if task.done():
            break
        await clock.advance(3600)
    with pytest.raises(certificate.CertificateRequestError, match="expired without a renewal"):
        await task
