"""node.iptables: the fake's transaction semantics, RestoreIptables over a fake runner, and
RestoreIptables for real inside a network namespace this test creates."""

from __future__ import annotations

import subprocess
import sys

import pytest

from node.iptables import (
    HOST_OPT_IN,
    FakeIptables,
    IptablesError,
    RestoreIptables,
    failing_line,
    may_change_current_netns,
)
from tests.netns import NetnsFactory


def test_fake_applies_chains_rules_and_deletions() -> None:
    fake = FakeIptables()
    fake.restore(
        "nat",
        [":KUBE-A - [0:0]", ":KUBE-B - [0:0]", "-A KUBE-A -j KUBE-B", "-A KUBE-B -j RETURN"],
    )
    fake.restore("nat", ["-I OUTPUT -j KUBE-A", "-I OUTPUT 1 -j RETURN"])
    assert fake.rules("nat", "OUTPUT") == ["-A OUTPUT -j RETURN", "-A OUTPUT -j KUBE-A"]
    assert ":KUBE-A - [0:0]" in fake.save("nat") and ":OUTPUT ACCEPT [0:0]" in fake.save("nat")
    # Declaring flushes; chains referencing each other go in one transaction.
    fake.restore(
        "nat",
        [":KUBE-A - [0:0]", ":KUBE-B - [0:0]", "-D OUTPUT -j KUBE-A", "-X KUBE-A", "-X KUBE-B"],
    )
    assert set(fake.tables["nat"]) == {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}


@pytest.mark.parametrize(
    ("lines", "bad"),
    [
        pytest.param([":KUBE-A - [0:0]", "-A KUBE-A -j KUBE-MISSING"], 3, id="missing-target"),
        pytest.param(["-A KUBE-NONE -j RETURN"], 2, id="missing-chain"),
        pytest.param([":KUBE-A - [0:0]", "-A OUTPUT -j KUBE-A", "-X KUBE-A"], 4, id="referenced"),
        pytest.param(["-D OUTPUT -j RETURN"], 2, id="delete-missing-rule"),
        pytest.param(["-X OUTPUT"], 2, id="builtin"),
    ],
)
def test_fake_rolls_back_the_whole_transaction(lines: list[str], bad: int) -> None:
    fake = FakeIptables()
    before = fake.save("nat")
    with pytest.raises(IptablesError) as caught:
        fake.restore("nat", lines)
    assert caught.value.failing_line == bad
    assert caught.value.line_text == lines[bad - 2]
    assert any(line.startswith(">") for line in caught.value.context())
    assert fake.save("nat") == before


class Runner:
    """Answers iptables commands from a script: argv[0] → (exit code, stdout, stderr)."""

    def __init__(self, answers: dict[str, tuple[int, str, str]]) -> None:
        self.answers = answers
        self.calls: list[tuple[list[str], str]] = []

    def __call__(self, argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
        self.calls.append((argv, stdin))
        code, out, err = self.answers.get(argv[0], (0, "", ""))
        return subprocess.CompletedProcess(argv, code, out, err)


@pytest.fixture
def named_netns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("node.iptables.may_change_current_netns", lambda: True)


LEGACY_RULES = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n"
HINTED = "*mangle\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n"


@pytest.mark.parametrize(
    ("nft", "legacy", "expected"),
    [
        pytest.param("", "", "nft", id="empty-defaults-to-nft"),
        pytest.param("", LEGACY_RULES, "legacy", id="legacy-has-more-rules"),
        pytest.param(HINTED, LEGACY_RULES, "nft", id="hint-chain-wins"),
        pytest.param(LEGACY_RULES, LEGACY_RULES, "nft", id="tie-is-nft"),
    ],
)
@pytest.mark.usefixtures("named_netns")
def test_backend_detection(nft: str, legacy: str, expected: str) -> None:
    runner = Runner({"iptables-nft-save": (0, nft, ""), "iptables-legacy-save": (0, legacy, "")})
    iptables = RestoreIptables(runner=runner)
    assert iptables.backend == expected
    iptables.save("nat")
    assert runner.calls[-1][0] == [f"iptables-{expected}-save", "-t", "nat"]


@pytest.mark.usefixtures("named_netns")
def test_restore_input_and_failing_line() -> None:
    runner = Runner(
        {"iptables-nft-restore": (1, "", "iptables-nft-restore: line 3 failed: No chain.\n")}
    )
    iptables = RestoreIptables("nft", runner=runner)
    with pytest.raises(IptablesError) as caught:
        iptables.restore("nat", [":KUBE-A - [0:0]", "-A KUBE-B -j RETURN"])
    argv, stdin = runner.calls[0]
    assert argv == ["iptables-nft-restore", "--noflush", "--wait", "5"]
    assert stdin == "*nat\n:KUBE-A - [0:0]\n-A KUBE-B -j RETURN\nCOMMIT\n"
    assert caught.value.failing_line == 3
    assert caught.value.line_text == "-A KUBE-B -j RETURN"
    assert "line 3" in str(caught.value)


@pytest.mark.parametrize(
    ("stderr", "line"),
    [
        pytest.param("iptables-restore: line 4 failed", 4, id="legacy"),
        pytest.param("iptables-nft-restore: line 12 failed: Invalid argument", 12, id="nft"),
        pytest.param("Chain 'KUBE-X' does not exist\nError occurred at line: 4\n", 4, id="load"),
        pytest.param("Another app is currently holding the xtables lock", None, id="no-line"),
    ],
)
def test_failing_line(stderr: str, line: int | None) -> None:
    assert failing_line(stderr) == line


def test_refuses_outside_a_named_netns() -> None:
    if may_change_current_netns():
        pytest.skip("this test process runs in a named netns")
    runner = Runner({})
    with pytest.raises(IptablesError, match="refusing"):
        RestoreIptables("nft", runner=runner).save("nat")
    assert runner.calls == []


def test_a_machine_that_is_a_node_opts_in_to_its_own_netns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(HOST_OPT_IN, raising=False)
    without = may_change_current_netns()
    monkeypatch.setenv(HOST_OPT_IN, "1")
    assert may_change_current_netns()
    monkeypatch.setenv(HOST_OPT_IN, "yes")  # only "1" opts in
    assert may_change_current_netns() == without


def test_unknown_backend() -> None:
    with pytest.raises(ValueError, match="nft, legacy"):
        RestoreIptables("ebpf")


# Privileged: the real commands in a namespace of our own.

SCRIPT = """
import sys
from node.iptables import IptablesError, RestoreIptables
ipt = RestoreIptables(sys.argv[1])
ipt.restore("nat", [":KUBE-A - [0:0]", ":KUBE-B - [0:0]", "-A KUBE-A -j KUBE-B",
                    "-I OUTPUT -j KUBE-A"])
try:
    ipt.restore("nat", [":KUBE-C - [0:0]", "-A KUBE-C -j KUBE-MISSING"])
except IptablesError as e:
    print("failing", e.failing_line)
ipt.restore("nat", [":KUBE-A - [0:0]", ":KUBE-B - [0:0]", "-D OUTPUT -j KUBE-A",
                    "-X KUBE-A", "-X KUBE-B"])
print(ipt.save("nat"))
"""


@pytest.mark.privileged
@pytest.mark.parametrize("backend", ["nft", "legacy"])
def test_restore_iptables_in_a_netns(make_netns: NetnsFactory, backend: str) -> None:
    done = make_netns("kl-ipt").run(sys.executable, "-c", SCRIPT, backend, timeout=60)
    assert done.returncode == 0, done.stderr
    failing, saved = done.stdout.split("\n", 1)
    assert failing in ("failing 3", "failing 4")  # the rule, or the COMMIT (nft)
    assert "KUBE-" not in saved
    assert "*nat" in done.stdout
