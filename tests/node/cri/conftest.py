"""Fixtures for the CRI tests: a FakeRuntime on a unix socket in tmp_path, a RuntimeClient
connected to it, and builders for the sandbox and container configs a kubelet would send."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import pytest

from kube.clock import FakeClock
from node.cri.client import RuntimeClient
from node.cri.fake import FakeRuntime
from node.cri.pb import api_pb2 as pb

BUSYBOX = "busybox:1.35"
PAUSE = "registry.k8s.io/pause:3.9"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def runtime(tmp_path: Path, clock: FakeClock) -> AsyncIterator[FakeRuntime]:
    fake = FakeRuntime(images=[BUSYBOX, PAUSE], clock=clock)
    await fake.start(tmp_path / "cri.sock")
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def cri(runtime: FakeRuntime) -> AsyncIterator[RuntimeClient]:
    async with RuntimeClient(runtime.endpoint) as client:
        yield client


def _sandbox_config(
    name: str,
    *,
    attempt: int = 0,
    labels: Mapping[str, str] | None = None,
    host_network: bool = False,
    log_directory: str = "",
) -> pb.PodSandboxConfig:
    config = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(
            name=name, namespace="default", uid=f"uid-{name}", attempt=attempt
        ),
        hostname=name,
        log_directory=log_directory,
        labels=labels or {},
    )
    if host_network:
        config.linux.security_context.namespace_options.network = pb.NODE
    return config


def _container_config(
    name: str,
    *,
    image: str = BUSYBOX,
    attempt: int = 0,
    labels: Mapping[str, str] | None = None,
) -> pb.ContainerConfig:
    return pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=name, attempt=attempt),
        image=pb.ImageSpec(image=image),
        command=["sleep", "3600"],
        envs=[pb.KeyValue(key="GREETING", value="hello")],
        labels=labels or {},
        log_path=f"{name}/{attempt}.log",
    )


@pytest.fixture
def sandbox_config() -> Callable[..., pb.PodSandboxConfig]:
    """``sandbox_config(name, attempt=0, labels=None, host_network=False, log_directory="")``"""
    return _sandbox_config


@pytest.fixture
def container_config() -> Callable[..., pb.ContainerConfig]:
    """``container_config(name, image=BUSYBOX, attempt=0, labels=None)``"""
    return _container_config
