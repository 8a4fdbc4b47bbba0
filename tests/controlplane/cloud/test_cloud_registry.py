"""The cloud provider registry: registration, lookup, entry points, config handling."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from controlplane.cloud import registry
from controlplane.cloud.fake import FakeCloud
from controlplane.cloud.provider import CloudProvider


def _factory(config: IO[str] | None) -> CloudProvider:
    cloud = FakeCloud()
    if config is not None:
        cloud.clusters_list = config.read().split()
    return cloud


@pytest.fixture
def name() -> Iterator[str]:
    yield "test-cloud"
    registry.unregister_cloud_provider("test-cloud")


def test_registered_provider_is_built_with_its_config(name: str, tmp_path: Path) -> None:
    registry.register_cloud_provider(name, _factory)
    config = tmp_path / "cloud.conf"
    config.write_text("one two")
    cloud = registry.init_cloud_provider(name, config)
    assert isinstance(cloud, FakeCloud)
    assert cloud.clusters_list == ["one", "two"]
    assert isinstance(registry.init_cloud_provider(name, None), FakeCloud)


def test_second_registration_is_an_error(name: str) -> None:
    registry.register_cloud_provider(name, _factory)
    with pytest.raises(registry.CloudProviderError, match="registered twice"):
        registry.register_cloud_provider(name, _factory)


def test_unknown_provider_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(registry.CloudProviderError, match=r"unknown cloud provider 'nope'.*lab"):
        registry.init_cloud_provider("nope", None)


def test_unreadable_config_is_an_error(name: str, tmp_path: Path) -> None:
    registry.register_cloud_provider(name, _factory)
    with pytest.raises(registry.CloudProviderError, match="cannot read"):
        registry.init_cloud_provider(name, tmp_path / "missing.conf")


def test_bad_config_is_an_error_from_the_provider(tmp_path: Path) -> None:
    config = tmp_path / "lab.yaml"
    config.write_text("lab: x\n")
    with pytest.raises(registry.CloudProviderError, match="lacks 'loadBalancerPool'"):
        registry.init_cloud_provider("lab", config)


def test_out_of_tree_provider_is_found_through_its_entry_point(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    point = importlib.metadata.EntryPoint(
        name=name, value=f"{__name__}:_factory", group=registry.ENTRY_POINT_GROUP
    )

    def entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
        return [point] if group == registry.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    assert isinstance(registry.init_cloud_provider(name, None), FakeCloud)
    assert name in registry.registered_providers()


def test_lab_provider_is_declared_as_an_entry_point() -> None:
    text = (Path(__file__).parents[3] / "pyproject.toml").read_text()
    assert '[project.entry-points."kubelab.cloud_providers"]' in text
    assert 'lab = "kubelab.lab.cloud:new"' in text
