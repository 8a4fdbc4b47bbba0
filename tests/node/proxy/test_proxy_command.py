"""``kubelab proxy`` flags, the proxier each mode builds, and the backends that are not
available."""

from __future__ import annotations

import argparse
import sys
from unittest import mock

import pytest

from node.proxy import command


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kubelab proxy")
    command.add_flags(parser)
    return parser.parse_args(["--kubeconfig", "/tmp/kubeconfig", *argv])


def test_defaults() -> None:
    args = parse()
    assert (args.proxy_mode, args.iptables_backend) == ("iptables", "restore")
    assert (args.sync_period, args.min_sync_period) == (30.0, 1.0)
    assert args.healthz_bind_address == ("0.0.0.0", 10256)
    assert args.metrics_bind_address == ("127.0.0.1", 10249)
    assert args.nodeport_addresses is None and args.cluster_cidr is None


def test_flags() -> None:
    args = parse(
        "--cluster-cidr",
        "10.244.0.0/16",
        "--nodeport-addresses",
        "127.0.0.0/8,192.168.1.7/24",
        "--sync-period",
        "1m",
        "--min-sync-period",
        "250ms",
        "--healthz-bind-address",
        "127.0.0.1:0",
    )
    assert args.nodeport_addresses == ["127.0.0.0/8", "192.168.1.0/24"]
    assert (args.sync_period, args.min_sync_period) == (60.0, 0.25)
    assert args.healthz_bind_address == ("127.0.0.1", 0)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--cluster-cidr", "10.244.0.0/33"], id="bad-cidr"),
        pytest.param(["--sync-period", "soon"], id="bad-duration"),
        pytest.param(["--healthz-bind-address", "localhost:10256"], id="bad-address"),
        pytest.param(["--proxy-mode", "ipvs"], id="unknown-mode"),
    ],
)
def test_bad_flags_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        parse(*argv)
    assert caught.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_userspace_mode_runs_a_userspace_proxier() -> None:
    from kube.clock import FakeClock
    from node.iptables import FakeIptables
    from node.proxy.health import ProxyMetrics, ServiceHealthServer
    from node.proxy.userspace import UserspaceProxier

    args = parse(
        "--proxy-mode", "userspace", "--udp-timeout", "2s", "--nodeport-addresses", "10.0.0.0/8"
    )
    assert args.udp_timeout == 2.0
    clock = FakeClock()
    proxier = command.make_proxier(
        args, FakeIptables(), "node-a", clock, ProxyMetrics(clock), ServiceHealthServer()
    )
    assert isinstance(proxier, UserspaceProxier)
    assert (proxier.node_name, proxier.udp_idle_timeout) == ("node-a", 2.0)
    assert (proxier.sync_period, proxier.min_sync_period) == (30.0, 1.0)
    iptables_mode = command.make_proxier(
        parse(), FakeIptables(), "node-a", clock, ProxyMetrics(clock), ServiceHealthServer()
    )
    assert not isinstance(iptables_mode, UserspaceProxier)


def test_userspace_mode_is_no_longer_refused() -> None:
    parser = argparse.ArgumentParser(prog="kubelab proxy")
    run = command.configure(parser)
    args = parser.parse_args(["--kubeconfig", "/tmp/k", "--proxy-mode", "userspace"])
    with mock.patch("kube.component.run", return_value=0) as started:
        assert run(args) == 0
    started.assert_called_once()
    assert parse().udp_timeout == 0.25


def test_missing_libiptc_backend_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with (
        mock.patch.dict(sys.modules, {"node.proxy.libiptc": None}),
        pytest.raises(SystemExit) as caught,
    ):
        command.make_iptables("libiptc")
    assert caught.value.code == 2
    assert "libiptc is not built yet" in capsys.readouterr().err


def test_restore_backend() -> None:
    from node.iptables import RestoreIptables

    assert isinstance(command.make_iptables("restore"), RestoreIptables)


def test_nftables_mode_runs_an_nftables_proxier() -> None:
    from kube.clock import FakeClock
    from node.iptables import FakeIptables
    from node.nftables import SubprocessNftables
    from node.proxy.health import ProxyMetrics, ServiceHealthServer
    from node.proxy.nftproxier import NftablesProxier

    args = parse("--proxy-mode", "nftables", "--cluster-cidr", "10.244.0.0/16", "--masquerade-all")
    clock = FakeClock()
    proxier = command.make_proxier(
        args, FakeIptables(), "node-a", clock, ProxyMetrics(clock), ServiceHealthServer()
    )
    assert isinstance(proxier, NftablesProxier)
    assert isinstance(proxier.nftables, SubprocessNftables)
    assert proxier.config.cluster_cidr == "10.244.0.0/16" and proxier.config.masquerade_all
