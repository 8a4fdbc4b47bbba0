"""``RestoreIptables(netns=...)``, the one option the lab cloud added to node.iptables:
commands run through ``nsenter --net=PATH`` only for a namespace bind-mounted under
/run/netns."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from node.iptables import IptablesError, RestoreIptables
from tests.netns import NetnsFactory


class Recorder:
    def __init__(self) -> None:
        self.argv: list[list[str]] = []

    def __call__(self, argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
        self.argv.append(argv)
        return subprocess.CompletedProcess(argv, 0, "*nat\nCOMMIT\n", "")


@pytest.mark.parametrize(
    "path",
    ["/tmp/not-a-netns", "/run/netns/../netns-escape", "/run/netns/ccm-does-not-exist"],
    ids=["outside", "dotdot", "missing"],
)
def test_targets_other_than_named_namespaces_are_refused(path: str) -> None:
    runner = Recorder()
    with pytest.raises(IptablesError, match="refusing to run in"):
        RestoreIptables(backend="nft", runner=runner, netns=path).save("nat")
    assert runner.argv == []


@pytest.mark.privileged
def test_a_plain_file_under_run_netns_is_refused() -> None:
    fake = Path("/run/netns/ccm-plain-file")
    fake.touch()
    try:
        with pytest.raises(IptablesError, match="refusing"):
            RestoreIptables(backend="nft", runner=Recorder(), netns=str(fake)).save("nat")
    finally:
        fake.unlink()


@pytest.mark.privileged
def test_commands_enter_a_named_namespace_with_nsenter(make_netns: NetnsFactory) -> None:
    netns = str(make_netns("ccm-ipt").path)
    runner = Recorder()
    tables = RestoreIptables(backend="nft", runner=runner, netns=netns)
    tables.save("nat")
    tables.restore("nat", [":KUBELAB-LB - [0:0]"])
    assert [argv[:3] for argv in runner.argv] == [["nsenter", f"--net={netns}", "--"]] * 2
    assert runner.argv[0][3:] == ["iptables-nft-save", "-t", "nat"]
