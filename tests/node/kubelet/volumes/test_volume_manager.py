"""The VolumeManager with a fake mounter, a fake API and a fake clock (no root needed)."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.api.kinds.core_v1.pod import Container, Pod, PodSpec, ResourceRequirements
from kube.api.kinds.core_v1.volume import (
    ConfigMapVolumeSource,
    EmptyDirVolumeSource,
    HostPathVolumeSource,
    PersistentVolumeClaimVolumeSource,
    ProjectedVolumeSource,
    SecretVolumeSource,
    ServiceAccountTokenProjection,
    Volume,
    VolumeProjection,
)
from kube.api.meta_v1 import ObjectMeta
from kube.clock import FakeClock
from node.kubelet.volumes.manager import (
    FakeMounter,
    MountError,
    SystemMounter,
    VolumeError,
    VolumeManager,
)

GI = 2**30


class FakeApi:
    """ConfigMaps, Secrets and numbered tokens, as the kubelet's caches would serve them."""

    def __init__(self) -> None:
        self.config_maps: dict[str, ConfigMap] = {}
        self.secrets: dict[str, Secret] = {}
        self.tokens: list[tuple[str | None, int]] = []

    async def config_map(self, namespace: str, name: str) -> ConfigMap | None:
        return self.config_maps.get(f"{namespace}/{name}")

    async def secret(self, namespace: str, name: str) -> Secret | None:
        return self.secrets.get(f"{namespace}/{name}")

    async def service_account_token(
        self, pod: Pod, audience: str | None, expiration_seconds: int
    ) -> str:
        self.tokens.append((audience, expiration_seconds))
        return f"token-{len(self.tokens)}"


def make_pod(*volumes: Volume, memory_limits: list[str | None] | None = None) -> Pod:
    containers = [
        Container(
            name=f"c{i}",
            resources=ResourceRequirements(limits={"memory": limit} if limit else None),
        )
        for i, limit in enumerate(memory_limits or [None])
    ]
    return Pod(
        metadata=ObjectMeta(name="web", namespace="ns", uid="uid-1"),
        spec=PodSpec(containers=containers, volumes=list(volumes)),
    )


@pytest.fixture
def mounter() -> FakeMounter:
    return FakeMounter()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def api() -> FakeApi:
    api = FakeApi()
    api.config_maps["ns/config"] = ConfigMap(metadata=ObjectMeta(name="config"), data={"k": "v1"})
    api.secrets["ns/creds"] = Secret(metadata=ObjectMeta(name="creds"), string_data={"pw": "x"})
    return api


@pytest.fixture
async def manager(
    tmp_path: Path, mounter: FakeMounter, clock: FakeClock
) -> AsyncIterator[VolumeManager]:
    manager = VolumeManager(tmp_path / "kubelet", mounter, clock, {"memory": "4Gi"})
    yield manager
    await manager.close()


def volume_path(manager: VolumeManager, plugin: str, name: str) -> Path:
    return manager.volume_dir("uid-1", plugin, name)


async def test_setup_lays_out_every_kind(
    manager: VolumeManager, mounter: FakeMounter, api: FakeApi, tmp_path: Path
) -> None:
    pod = make_pod(
        Volume(name="scratch", empty_dir=EmptyDirVolumeSource()),
        Volume(name="cache", empty_dir=EmptyDirVolumeSource(medium="Memory", size_limit="1Gi")),
        Volume(name="host", host_path=HostPathVolumeSource(path=str(tmp_path))),
        Volume(name="conf", config_map=ConfigMapVolumeSource(name="config")),
        Volume(name="sec", secret=SecretVolumeSource(secret_name="creds")),
    )

    paths = await manager.setup(pod, api)

    assert paths == {
        "scratch": volume_path(manager, "empty-dir", "scratch"),
        "cache": volume_path(manager, "empty-dir", "cache"),
        "host": tmp_path,
        "conf": volume_path(manager, "configmap", "conf"),
        "sec": volume_path(manager, "secret", "sec"),
    }
    assert paths["scratch"].stat().st_mode & 0o777 == 0o777
    assert (paths["conf"] / "k").read_bytes() == b"v1"
    assert (paths["sec"] / "pw").read_bytes() == b"x"
    assert mounter.mounts == {paths["cache"]: GI, paths["sec"]: 4 * GI}


@pytest.mark.parametrize(
    ("size_limit", "memory_limits", "expected"),
    [
        pytest.param(None, [None], 4 * GI, id="node-allocatable"),
        pytest.param(None, ["1Gi", "512Mi"], GI + GI // 2, id="pod-limit"),
        pytest.param(None, ["1Gi", None], 4 * GI, id="partial-limits-ignored"),
        pytest.param("100Mi", ["1Gi"], 100 * 2**20, id="size-limit-smaller"),
        pytest.param("8Gi", ["1Gi"], GI, id="size-limit-larger-ignored"),
        pytest.param("0", [None], 4 * GI, id="zero-size-limit-ignored"),
    ],
)
async def test_memory_empty_dir_size(
    manager: VolumeManager,
    mounter: FakeMounter,
    api: FakeApi,
    size_limit: str | None,
    memory_limits: list[str | None],
    expected: int,
) -> None:
    volume = Volume(
        name="m", empty_dir=EmptyDirVolumeSource(medium="Memory", size_limit=size_limit)
    )

    await manager.setup(make_pod(volume, memory_limits=memory_limits), api)

    assert mounter.mounts == {volume_path(manager, "empty-dir", "m"): expected}


def make_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))


@pytest.mark.parametrize(
    ("kind", "prepare", "error"),
    [
        pytest.param("", None, None, id="unchecked-missing"),
        pytest.param("DirectoryOrCreate", None, None, id="directory-created"),
        pytest.param("Directory", None, "is not a directory", id="directory-missing"),
        pytest.param("Directory", Path.mkdir, None, id="directory"),
        pytest.param("FileOrCreate", None, None, id="file-created"),
        pytest.param("FileOrCreate", Path.mkdir, "is not a file", id="file-or-create-on-directory"),
        pytest.param("File", Path.touch, None, id="file"),
        pytest.param("File", Path.mkdir, "is not a file", id="file-is-directory"),
        pytest.param("Socket", make_socket, None, id="socket"),
        pytest.param("Socket", Path.touch, "is not a socket file", id="socket-is-file"),
        pytest.param("CharDevice", Path.touch, "is not a character device", id="char-device"),
        pytest.param("BlockDevice", Path.touch, "is not a block device", id="block-device"),
    ],
)
async def test_host_path_type_checks(
    manager: VolumeManager, api: FakeApi, tmp_path: Path, kind: str, prepare: Any, error: str | None
) -> None:
    target = tmp_path / "target"
    if prepare is not None:
        prepare(target)
    pod = make_pod(Volume(name="h", host_path=HostPathVolumeSource(path=str(target), type=kind)))

    if error is None:
        assert await manager.setup(pod, api) == {"h": target}
        assert kind != "DirectoryOrCreate" or target.is_dir()
        assert kind != "FileOrCreate" or target.is_file()
    else:
        with pytest.raises(
            VolumeError, match=f'volume "h" : hostPath type check failed: .* {error}'
        ):
            await manager.setup(pod, api)


async def test_refresh_publishes_only_changes(manager: VolumeManager, api: FakeApi) -> None:
    pod = make_pod(Volume(name="conf", config_map=ConfigMapVolumeSource(name="config")))
    await manager.setup(pod, api)
    directory = volume_path(manager, "configmap", "conf")
    first = os.readlink(directory / "..data")

    await manager.refresh(pod)
    assert os.readlink(directory / "..data") == first

    api.config_maps["ns/config"] = ConfigMap(metadata=ObjectMeta(name="config"), data={"k": "v2"})
    await manager.refresh(pod)

    assert os.readlink(directory / "..data") != first
    assert (directory / "k").read_bytes() == b"v2"


@pytest.mark.parametrize(
    ("volume", "message"),
    [
        pytest.param(
            Volume(name="conf", config_map=ConfigMapVolumeSource(name="gone")),
            'MountVolume.SetUp failed for volume "conf" : configmaps "gone" not found',
            id="missing-configmap",
        ),
        pytest.param(
            Volume(
                name="pvc",
                persistent_volume_claim=PersistentVolumeClaimVolumeSource(claim_name="c"),
            ),
            'MountVolume.SetUp failed for volume "pvc" : volume "pvc": unsupported volume type',
            id="unsupported",
        ),
        pytest.param(
            Volume(name="huge", empty_dir=EmptyDirVolumeSource(medium="HugePages")),
            "unsupported emptyDir medium 'HugePages'",
            id="hugepages",
        ),
    ],
)
async def test_setup_errors(
    manager: VolumeManager, api: FakeApi, volume: Volume, message: str
) -> None:
    ok = Volume(name="ok", empty_dir=EmptyDirVolumeSource())

    with pytest.raises(VolumeError, match=message):
        await manager.setup(make_pod(volume, ok), api)

    assert volume_path(manager, "empty-dir", "ok").is_dir()  # the others are still set up


async def test_refresh_before_setup_fails(manager: VolumeManager) -> None:
    with pytest.raises(VolumeError, match="never set up"):
        await manager.refresh(make_pod())


def token_volume(expiration_seconds: int) -> Volume:
    return Volume(
        name="tok",
        projected=ProjectedVolumeSource(
            sources=[
                VolumeProjection(
                    service_account_token=ServiceAccountTokenProjection(
                        path="token", audience="api", expiration_seconds=expiration_seconds
                    )
                )
            ]
        ),
    )


@pytest.mark.parametrize(
    ("expiration_seconds", "refresh_after"),
    [
        pytest.param(600, 480, id="eighty-percent"),
        pytest.param(3 * 86400, 86400, id="at-most-a-day"),
    ],
)
async def test_tokens_are_renewed_before_expiry(
    manager: VolumeManager,
    mounter: FakeMounter,
    clock: FakeClock,
    api: FakeApi,
    expiration_seconds: int,
    refresh_after: int,
) -> None:
    pod = make_pod(token_volume(expiration_seconds))
    await manager.setup(pod, api)
    token = volume_path(manager, "projected", "tok") / "token"
    assert token.read_bytes() == b"token-1"
    assert token.parent in mounter.mounts

    await manager.refresh(pod)  # a pod sync before the deadline reuses the token
    await clock.advance(refresh_after - 1)
    assert token.read_bytes() == b"token-1"

    await clock.advance(1)
    assert token.read_bytes() == b"token-2"
    assert api.tokens == [("api", expiration_seconds)] * 2

    await clock.advance(refresh_after)
    assert token.read_bytes() == b"token-3"


async def test_failed_renewal_is_retried(
    manager: VolumeManager, clock: FakeClock, api: FakeApi
) -> None:
    await manager.setup(make_pod(token_volume(600)), api)
    token = volume_path(manager, "projected", "tok") / "token"
    working = api.service_account_token

    async def failing(pod: Pod, audience: str | None, expiration_seconds: int) -> str:
        raise ConnectionError("api down")

    api.service_account_token = failing  # type: ignore[method-assign]
    await clock.advance(480)
    assert token.read_bytes() == b"token-1"

    api.service_account_token = working  # type: ignore[method-assign]
    await clock.advance(10)
    assert token.read_bytes() == b"token-2"


async def test_teardown_unmounts_and_removes_everything(
    manager: VolumeManager, mounter: FakeMounter, clock: FakeClock, api: FakeApi, tmp_path: Path
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    pod = make_pod(
        token_volume(600),
        Volume(name="m", empty_dir=EmptyDirVolumeSource(medium="Memory")),
        Volume(name="host", host_path=HostPathVolumeSource(path=str(host))),
    )
    await manager.setup(pod, api)
    assert manager.pods_on_disk() == {"uid-1"}

    await manager.teardown("uid-1")
    await manager.teardown("uid-1")

    assert mounter.mounts == {}
    assert not manager.volumes_dir("uid-1").exists()
    assert manager.pods_on_disk() == set()
    assert host.is_dir()
    await clock.advance(1000)  # the renewal task is gone
    assert api.tokens == [("api", 600)]


async def test_teardown_from_disk_after_restart(
    tmp_path: Path, mounter: FakeMounter, clock: FakeClock, api: FakeApi
) -> None:
    before = VolumeManager(tmp_path, mounter, clock)
    await before.setup(
        make_pod(Volume(name="s", secret=SecretVolumeSource(secret_name="creds"))), api
    )
    await before.close()

    after = VolumeManager(tmp_path, mounter, clock)
    await after.teardown("uid-1")

    assert mounter.mounts == {}
    assert after.pods_on_disk() == set()


@pytest.mark.privileged
async def test_the_system_mounter_mounts_and_unmounts_tmpfs(tmp_path: Path) -> None:
    mounter = SystemMounter()
    target = tmp_path / "volume"
    target.mkdir()
    assert not mounter.is_mountpoint(target)
    await mounter.mount_tmpfs(target, 1024 * 1024)
    try:
        assert mounter.is_mountpoint(target)
        assert os.statvfs(target).f_blocks * os.statvfs(target).f_frsize == 1024 * 1024
    finally:
        await mounter.unmount(target)
    assert not mounter.is_mountpoint(target)
    with pytest.raises(MountError, match=r"umount .* failed \(22\): Invalid argument"):
        await mounter.unmount(target)
