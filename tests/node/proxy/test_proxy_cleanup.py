"""Switching proxy modes: each mode's start removes the other modes' rules, and only theirs."""

from __future__ import annotations

import pytest

from kube.clock import FakeClock
from node.iptables import FakeIptables
from node.nftables import FakeNftables
from node.proxy.cleanup import cleanup_iptables, cleanup_nftables
from node.proxy.command import cleanup_other_modes
from node.proxy.proxier import IptablesProxier
from tests.node.proxy.test_proxier import NODE, Cluster

OTHER = "KUBELAB-CNI-MASQ"


async def iptables_mode_ran(iptables: FakeIptables) -> None:
    iptables.restore("nat", [f":{OTHER} - [0:0]", f"-A POSTROUTING -j {OTHER}"])
    cluster = Cluster()
    proxier = IptablesProxier(iptables, NODE, FakeClock(), cluster_cidr="10.244.0.0/16")
    proxier.set_lookups(cluster.services.get, cluster.slices_of)
    proxier.on_service(cluster.put("a", "10.244.1.1"))
    assert await proxier.sync()


async def test_the_nftables_mode_removes_the_iptables_modes_chains_and_jumps() -> None:
    iptables = FakeIptables()
    await iptables_mode_ran(iptables)
    assert "KUBE-SERVICES" in iptables.tables["nat"]
    cleanup_other_modes("nftables", iptables, FakeNftables())
    for table in ("nat", "filter"):
        chains = iptables.tables[table]
        assert not [c for c in chains if c.startswith("KUBE-")], table
        assert not [r for rules in chains.values() for r in rules if "KUBE-" in r], table
    assert iptables.rules("nat", "POSTROUTING") == [f"-A POSTROUTING -j {OTHER}"]
    cleanup_iptables(iptables)  # nothing left to remove: no transaction
    assert len(iptables.restores) == 3 + 2


def nft_with_tables() -> FakeNftables:
    nft = FakeNftables()
    nft.run(["add table ip kube-proxy", "add chain ip kube-proxy services", "add table ip other"])
    return nft


@pytest.mark.parametrize("mode", ["iptables", "userspace"])
def test_the_other_modes_remove_the_nftables_table_only(mode: str) -> None:
    nft = nft_with_tables()
    iptables = FakeIptables()
    cleanup_other_modes(mode, iptables, nft)
    assert list(nft.tables) == ["other"]
    assert iptables.restores == []
    cleanup_nftables(nft)  # no table: still no error
    assert list(nft.tables) == ["other"]


def test_a_failed_cleanup_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    nft = nft_with_tables()
    nft.fail_on = "delete table"
    cleanup_nftables(nft)
    assert "cannot remove the nftables table kube-proxy" in caplog.text
    assert "kube-proxy" in nft.tables
