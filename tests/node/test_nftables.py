"""node.nftables: the fake's transaction semantics, SubprocessNftables's commands and errors
over a fake runner, and the real ``nft`` in a namespace of the test's own."""

from __future__ import annotations

import subprocess

import pytest

from node.iptables import may_change_current_netns
from node.nftables import (
    FakeNftables,
    NftablesError,
    SubprocessNftables,
    failing_line,
    listed_names,
)
from tests.netns import NetnsFactory

T = "ip kube-proxy"


def test_fake_applies_chains_rules_sets_and_elements() -> None:
    nft = FakeNftables()
    nft.run(
        [
            f"add table {T}",
            f"add chain {T} nat-output {{ type nat hook output priority -100 ; }}",
            f"add chain {T} services",
            f"add map {T} service-ips {{ type ipv4_addr . inet_proto . inet_service : verdict ; }}",
            f"add rule {T} nat-output jump services",
            f"add rule {T} services ip daddr . meta l4proto . th dport vmap @service-ips",
            f"add element {T} service-ips {{ 10.0.0.1 . tcp . 80 : goto services, "
            "10.0.0.2 . tcp . 80 : drop }",
        ]
    )
    table = nft.current
    assert table.chains["nat-output"] == ["jump services"] and table.base_chains == {"nat-output"}
    assert table.maps["service-ips"] == {
        "10.0.0.1 . tcp . 80": "goto services",
        "10.0.0.2 . tcp . 80": "drop",
    }
    assert nft.list_names("chains") == ["nat-output", "services"]
    assert nft.list_names("maps") == ["service-ips"] and nft.list_names("sets") == []
    nft.run(
        [f"flush chain {T} nat-output", f"delete element {T} service-ips {{ 10.0.0.1 . tcp . 80 }}"]
    )
    assert table is not nft.current and nft.current.chains["nat-output"] == []
    nft.run([f"delete table {T}"])
    assert nft.list_names("chains") == []


@pytest.mark.parametrize(
    ("line", "why"),
    [
        pytest.param(f"add rule {T} services goto nowhere", "chain nowhere", id="missing-target"),
        pytest.param(
            f"add rule {T} services ip saddr @nothing drop", "set nothing", id="missing-set"
        ),
        pytest.param(f"delete chain {T} services", "holds rules", id="chain-with-rules"),
        pytest.param(f"delete chain {T} target", "referenced", id="referenced-chain"),
        pytest.param(
            f"add element {T} m {{ 1.1.1.1 : goto services }}", "File exists", id="verdict"
        ),
        pytest.param(
            f"delete element {T} m {{ 9.9.9.9 }}", "element 9.9.9.9", id="missing-element"
        ),
        pytest.param(f"delete set {T} s", "referenced", id="referenced-set"),
    ],
)
def test_fake_rolls_back_the_whole_transaction(line: str, why: str) -> None:
    nft = FakeNftables()
    nft.run(
        [
            f"add table {T}",
            f"add chain {T} services",
            f"add chain {T} target",
            f"add set {T} s {{ type ipv4_addr ; }}",
            f"add map {T} m {{ type ipv4_addr : verdict ; }}",
            f"add rule {T} services ip saddr @s goto target",
            f"add element {T} m {{ 1.1.1.1 : goto target }}",
        ]
    )
    before = nft.current
    with pytest.raises(NftablesError) as caught:
        nft.run([f"add chain {T} new", line])
    assert why in caught.value.stderr and caught.value.failing_line == 2
    assert caught.value.context()[-1] == f">      2  {line}"
    assert nft.current is before and "new" not in nft.current.chains


def test_failing_line() -> None:
    stderr = (
        "/dev/stdin:7:33-40: Error: Could not process rule: No such file or directory\n"
        "add rule ip kube-proxy foo goto nonexist\n"
    )
    assert failing_line(stderr) == 7
    assert failing_line("Error: No such file or directory") is None


class Runner:
    def __init__(self, stdout: str = "", returncode: int = 0, stderr: str = "") -> None:
        self.calls: list[tuple[list[str], str]] = []
        self.result = (returncode, stdout, stderr)

    def __call__(self, argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
        self.calls.append((argv, stdin))
        return subprocess.CompletedProcess(argv, *self.result)


@pytest.fixture
def named_netns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("node.iptables.may_change_current_netns", lambda: True)


@pytest.mark.usefixtures("named_netns")
def test_run_feeds_one_script_and_names_the_failing_line() -> None:
    runner = Runner()
    SubprocessNftables(runner=runner).run(["add table ip kube-proxy", "flush chain ip x y"])
    assert runner.calls == [(["nft", "-f", "-"], "add table ip kube-proxy\nflush chain ip x y\n")]
    failing = Runner(returncode=1, stderr="/dev/stdin:2:1-5: Error: No such file or directory")
    with pytest.raises(NftablesError) as caught:
        SubprocessNftables(runner=failing).run(["add table ip kube-proxy", "flush chain ip x y"])
    assert caught.value.line_text == "flush chain ip x y"
    assert "nft -f - failed at line 2" in str(caught.value)


@pytest.mark.usefixtures("named_netns")
def test_list_names_keeps_the_tables_own() -> None:
    listing = "\n".join(
        [
            "table ip kube-proxy {",
            "\tchain nat-output {",
            "\t\ttype nat hook output priority -100; policy accept;",
            "\t}",
            "\tchain service-ULMVA6XW-ns1/svc1/tcp/p80 {",
            "\t}",
            '\tchain "quoted-by-a-later-nft" {',
            "\t}",
            "}",
            "table ip nat {",
            "\tchain POSTROUTING {",
            "\t}",
            "}",
        ]
    )
    runner = Runner(stdout=listing)
    assert SubprocessNftables(runner=runner).list_names("chains") == [
        "nat-output",
        "service-ULMVA6XW-ns1/svc1/tcp/p80",
        "quoted-by-a-later-nft",
    ]
    assert runner.calls[0][0] == ["nft", "--terse", "list", "chains", "ip"]
    assert SubprocessNftables(runner=runner).list_names("sets") == []
    with pytest.raises(ValueError, match="kind must be one of"):
        SubprocessNftables(runner=runner).list_names("rules")


def test_listed_names_tell_sets_from_maps() -> None:
    listing = "table ip kube-proxy {\n\tset cluster-ips {\n\t}\n\tmap service-ips {\n\t}\n}\n"
    assert listed_names(listing, "kube-proxy", "set") == ["cluster-ips"]
    assert listed_names(listing, "kube-proxy", "map") == ["service-ips"]
    assert listed_names(listing, "other", "set") == []


def test_refuses_outside_a_named_netns() -> None:
    if may_change_current_netns():
        pytest.skip("this process runs in a named netns")
    runner = Runner()
    with pytest.raises(NftablesError, match="refusing to run"):
        SubprocessNftables(runner=runner).run(["add table ip kube-proxy"])
    with pytest.raises(NftablesError, match="refusing to run"):
        SubprocessNftables(runner=runner, netns="/tmp/not-a-netns").list_names("chains")
    assert runner.calls == []


@pytest.mark.privileged
def test_subprocess_nftables_in_a_netns(make_netns: NetnsFactory) -> None:
    netns = make_netns("klnft-t")
    nft = SubprocessNftables(netns=f"/run/netns/{netns.name}")
    assert nft.list_names("chains") == []
    nft.run([f"add table {T}", f"add chain {T} services", f"add set {T} s {{ type ipv4_addr ; }}"])
    assert nft.list_names("chains") == ["services"] and nft.list_names("sets") == ["s"]
    with pytest.raises(NftablesError) as caught:
        nft.run([f"add chain {T} other", f"add rule {T} services goto nowhere"])
    assert caught.value.failing_line == 2
    assert nft.list_names("chains") == ["services"]  # the transaction left nothing
