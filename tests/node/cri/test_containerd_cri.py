"""The CRI client against a real containerd in a network namespace (tests/node/containerd_node).

One pod lifecycle through ``RuntimeClient``: a sandbox on the bridge network gets an IP from
the node's pod CIDR, a busybox container's stdout lands in its CRI log, ExecSync runs in it,
and stop/remove leave nothing.  The teardown test checks the fixture itself: a node torn down
with a pod still running leaves no namespace, process, mount, cgroup or directory.
"""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

import pytest

from kubelab.lab.images import BUSYBOX_IMAGE
from node.cri.client import RuntimeClient
from node.cri.pb import api_pb2 as pb
from tests.node.containerd_node import (  # noqa: F401 (fixtures)
    ContainerdNode,
    containerd_images_fixture,
    containerd_node_fixture,
)

pytestmark = [pytest.mark.privileged, pytest.mark.containerd]


def sandbox_config(node: ContainerdNode, name: str, log_dir: Path) -> pb.PodSandboxConfig:
    uid = f"uid-{name}"
    config = pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name, namespace="default", uid=uid),
        hostname=name,
        log_directory=str(log_dir),
    )
    config.linux.cgroup_parent = f"{node.cgroup_parent}/pod{uid}"
    return config


def busybox(name: str, *command: str) -> pb.ContainerConfig:
    return pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=name),
        image=pb.ImageSpec(image=BUSYBOX_IMAGE),
        command=list(command),
        log_path=f"{name}/0.log",
    )


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def wait_for_log(path: Path, text: str) -> str:
    for _ in range(200):
        if text in (content := read(path)):
            return content
        await asyncio.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path}")


def leftovers(node: ContainerdNode, containerd_pid: int) -> list[str]:
    """What a torn-down node left behind."""
    found = [str(p) for p in node.mounts()]
    found += [f"shim {pid}" for pid in node.shim_pids()]
    if node.netns in read(Path("/proc/self/mounts")) or node.netns_path.exists():
        found.append(f"netns {node.netns}")
    if Path(f"/proc/{containerd_pid}").exists():
        found.append(f"containerd {containerd_pid}")
    if node.state_dir.exists():
        found.append(str(node.state_dir))
    return found + cgroups(node)


def cgroups(node: ContainerdNode) -> list[str]:
    """The node's cgroup directories in some hierarchies (v1 and the cgroup2 mount)."""
    paths = (
        Path("/sys/fs/cgroup", hierarchy, node.cgroup_parent.lstrip("/"))
        for hierarchy in ("memory", "cpu", "pids", "unified")
    )
    return [str(p) for p in paths if p.exists()]


async def start_pod(cri: RuntimeClient, node: ContainerdNode, log_dir: Path) -> tuple[str, str]:
    """A sandbox with a busybox container that says hello and sleeps: (sandbox, container)."""
    config = sandbox_config(node, "web", log_dir)
    sandbox = await cri.run_pod_sandbox(config)
    container = await cri.create_container(
        sandbox, busybox("app", "sh", "-c", "echo hello from busybox; exec sleep 3600"), config
    )
    await cri.start_container(container)
    return sandbox, container


async def test_pod_lifecycle(containerd_node: ContainerdNode, tmp_path: Path) -> None:
    async with RuntimeClient(containerd_node.endpoint) as cri:
        assert (await cri.version()).runtime_name == "containerd"
        assert {c.type: c.status for c in (await cri.status()).conditions} == {
            "RuntimeReady": True,
            "NetworkReady": True,
        }
        sandbox, container = await start_pod(cri, containerd_node, tmp_path)

        status = await cri.pod_sandbox_status(sandbox)
        assert status.state == pb.SANDBOX_READY
        ip = ipaddress.ip_address(status.network.ip)
        assert ip in ipaddress.ip_network(containerd_node.pod_cidr)

        log = await wait_for_log(tmp_path / "app" / "0.log", "hello from busybox")
        # <RFC3339Nano> stdout F <text>
        assert log.split(" ", 3)[1:] == ["stdout", "F", "hello from busybox\n"]

        result = await cri.exec_sync(container, ["sh", "-c", "echo $((6 * 7)); hostname"], 5)
        assert result.exit_code == 0
        assert result.stdout.decode().split() == ["42", "web"]

        await cri.stop_container(container, 1)
        stopped = await cri.container_status(container)
        assert stopped.state == pb.CONTAINER_EXITED
        await cri.remove_container(container)
        await cri.stop_pod_sandbox(sandbox)
        await cri.remove_pod_sandbox(sandbox)
        assert await cri.list_pod_sandbox() == []
        assert containerd_node.shim_pids() == []


async def test_teardown_leaves_nothing(containerd_images: list[Path], tmp_path: Path) -> None:
    node = ContainerdNode(containerd_images, pod_cidr="10.88.7.0/24")
    with node:
        async with RuntimeClient(node.endpoint) as cri:
            await start_pod(cri, node, tmp_path)
        assert node.shim_pids()
        assert cgroups(node)
        assert any(p.is_relative_to(node.state_dir) for p in node.mounts())
        containerd_pid = node.pid
        assert containerd_pid is not None
    assert leftovers(node, containerd_pid) == []
