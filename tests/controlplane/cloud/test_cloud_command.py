"""The ``kubelab cloud-controller-manager`` command line, and ``kubelab server`` running it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controlplane.cloud import command, registry
from controlplane.cloud.fake import FakeCloud
from kubelab.cli import build_parser


def test_flags_become_options(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        [
            "cloud-controller-manager",
            "--kubeconfig",
            str(tmp_path / "kc"),
            "--cloud-provider",
            "lab",
            "--cloud-config",
            str(tmp_path / "cloud.yaml"),
            "--cluster-name",
            "hlab",
            "--no-configure-cloud-routes",
            "--controllers",
            "*,-route",
            "--node-monitor-period",
            "2s",
            "--no-leader-elect",
        ]
    )
    options = command.CloudControllerManagerOptions.from_args(args)
    assert options.cloud_provider == "lab"
    assert options.cloud_config == tmp_path / "cloud.yaml"
    assert options.cluster_name == "hlab"
    assert not options.configure_cloud_routes
    assert options.controllers == "*,-route"
    assert options.node_monitor_period == 2.0
    assert not options.leader_elect


def test_server_takes_the_cloud_flags() -> None:
    args = build_parser().parse_args(
        ["server", "--cloud-provider", "lab", "--cloud-config", "/x", "--cluster-name", "hlab"]
    )
    assert (args.cloud_provider, args.cloud_config, args.cluster_name) == (
        "lab",
        Path("/x"),
        "hlab",
    )
    assert build_parser().parse_args(["server"]).cloud_provider is None


@pytest.fixture
def untagged() -> Iterator[str]:
    name = f"untagged-{uuid.uuid4().hex[:6]}"
    registry.register_cloud_provider(name, lambda _: FakeCloud(cluster_id=False))
    yield name
    registry.unregister_cloud_provider(name)


@pytest.mark.parametrize(
    ("provider", "controllers", "message"),
    [
        ("no-such-cloud", "*", "unknown cloud provider 'no-such-cloud'"),
        ("lab", "*,bogus", "'bogus' is not a known controller"),
        (None, "*", "no ClusterID found"),
    ],
    ids=["unknown-provider", "unknown-controller", "untagged-cloud"],
)
async def test_bad_setups_stop_with_a_clear_message(
    provider: str | None, controllers: str, message: str, untagged: str, tmp_path: Path
) -> None:
    options = command.CloudControllerManagerOptions(
        kubeconfig=tmp_path / "kc", cloud_provider=provider or untagged, controllers=controllers
    )
    with pytest.raises(SystemExit, match=message):
        await command.run_cloud_controller_manager(options, asyncio.Event())
