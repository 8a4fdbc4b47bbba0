"""``kubelab doctor`` as a user meets it before any check runs: bad input is a clear error and
exit status 2; and the real Host reads this machine's files but refuses to write outside a
node's network namespace, so a doctor run by mistake on the lab's host never changes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelab.cli import main
from node.doctor.access import HostError, SystemHost
from node.iptables import HOST_OPT_IN


def test_a_kubeconfig_that_does_not_load_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "node1", "--kubeconfig", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == (
        f"kubelab doctor: cannot read {tmp_path / 'none'}: No such file or directory\n"
    )
    (tmp_path / "bad").write_text("[")
    assert main(["doctor", "--kubeconfig", str(tmp_path / "bad")]) == 2
    assert "is not valid YAML" in capsys.readouterr().err


def test_a_runtime_endpoint_that_is_no_unix_socket_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["doctor", "--container-runtime-endpoint", "/run/containerd.sock"])
    assert exited.value.code == 2
    assert "expected unix:///PATH, got '/run/containerd.sock'" in capsys.readouterr().err


def test_the_host_reads_files_and_refuses_writes_outside_a_nodes_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(HOST_OPT_IN, raising=False)
    host = SystemHost()
    (tmp_path / "value").write_text("1\n")
    assert host.read(str(tmp_path / "value")) == "1\n"
    assert host.read(str(tmp_path / "missing")) is None
    assert host.listdir(str(tmp_path)) == ["value"]
    assert host.listdir(str(tmp_path / "missing")) is None
    with pytest.raises(HostError, match=r"refusing to write .*: not inside a node's network"):
        host.write(str(tmp_path / "value"), "0")
    assert (tmp_path / "value").read_text() == "1\n"
