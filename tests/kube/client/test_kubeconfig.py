"""Kubeconfigs round-trip, and resolve paths and contexts as kubectl does."""

from __future__ import annotations

from pathlib import Path

import pytest

from kube.client import kubeconfig
from kube.pki import CertificateAuthority, identity


def test_render_then_load(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    admin = ca.issue("kubernetes-admin", organizations=["system:masters"], client=True)
    path = tmp_path / "admin.kubeconfig"
    kubeconfig.write(path, kubeconfig.render("https://127.0.0.1:6443", ca.cert_pem, "admin", admin))
    assert path.stat().st_mode & 0o777 == 0o600
    config = kubeconfig.load(path)
    assert config.server == "https://127.0.0.1:6443"
    assert (config.ca_pem, config.cert_pem, config.key_pem) == (
        ca.cert_pem,
        admin.cert_pem,
        admin.key_pem,
    )
    assert identity(admin.certificate) == ("kubernetes-admin", ["system:masters"])


def test_relative_certificate_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(b"CA")
    (tmp_path / "k").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: x, cluster: {server: 'https://h', certificate-authority: ca.crt}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: c, context: {cluster: x, user: u}}]\n"
    )
    config = kubeconfig.load(tmp_path / "k")
    assert (config.ca_pem, config.token) == (b"CA", "abc")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("[", "not valid YAML", id="malformed"),
        pytest.param("- a", "not a kubeconfig", id="not-a-mapping"),
        pytest.param("apiVersion: v1", "no current context", id="no-context"),
        pytest.param("current-context: c", "context 'c' is not defined", id="undefined"),
    ],
)
def test_bad_kubeconfigs_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "k").write_text(text)
    with pytest.raises(kubeconfig.KubeconfigError, match=message):
        kubeconfig.load(tmp_path / "k")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(kubeconfig.KubeconfigError, match="cannot read"):
        kubeconfig.load(tmp_path / "absent")
