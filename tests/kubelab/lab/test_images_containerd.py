"""The lab's images run in a real containerd through CRI, as a kubelet would run them.

One containerd node (tests/node/containerd_node.py) for the module, with every image
imported (``--no-unpack``: the CRI plugin unpacks an image when a container first needs it,
which these tests exercise); one pod per test, its container started from the image's own
entrypoint and command unless the test gives one.  The images come from the shared test cache,
so a machine builds them once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kube import __version__
from kubelab.lab.images import (
    ECHOSERVER_IMAGE,
    ECHOSERVER_PORT,
    KUBELAB_IMAGE,
    NGINX_IMAGE,
    PYTHON_IMAGE,
    build_images,
)
from node.cri.client import RuntimeClient
from node.cri.pb import api_pb2 as pb
from tests.node.containerd_node import IMAGE_CACHE, ContainerdNode

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.containerd,
    pytest.mark.slow,
    pytest.mark.timeout(900),  # the first test may build the Debian images into the cache
]

if shutil.which("mmdebstrap") is None:
    pytest.skip("needs mmdebstrap to build the images", allow_module_level=True)

POD_CIDR = "10.88.40.0/24"
GATEWAY = "10.88.40.1"  # the reference bridge plugin's address on the node: the client here


@pytest.fixture(scope="module")
def node() -> Iterator[ContainerdNode]:
    images = ("pause", "echoserver", "nginx", "python", "kubelab")
    with ContainerdNode(build_images(IMAGE_CACHE, images), pod_cidr=POD_CIDR) as started:
        yield started


class Pod:
    """One sandbox with one container on ``node``, removed by ``close``."""

    def __init__(self, cri: RuntimeClient, node: ContainerdNode, log_dir: Path) -> None:
        self.cri, self.node, self.log_dir = cri, node, log_dir
        self.sandbox = ""
        self.container = ""

    async def start(self, image: str, *command: str) -> None:
        name = f"pod-{uuid.uuid4().hex[:6]}"
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, namespace="default", uid=name),
            hostname=name,
            log_directory=str(self.log_dir),
        )
        config.linux.cgroup_parent = f"{self.node.cgroup_parent}/pod{name}"
        self.sandbox = await self.cri.run_pod_sandbox(config)
        container = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name="main"),
            image=pb.ImageSpec(image=image),
            command=list(command),
            log_path="main.log",
        )
        self.container = await self.cri.create_container(self.sandbox, container, config)
        await self.cri.start_container(self.container)

    async def ip(self) -> str:
        status = await self.cri.pod_sandbox_status(self.sandbox)
        return status.network.ip

    async def exited(self) -> int:
        for _ in range(600):
            status = await self.cri.container_status(self.container)
            if status.state == pb.CONTAINER_EXITED:
                return status.exit_code
            await asyncio.sleep(0.05)
        raise AssertionError(f"{self.container} still running:\n{self.log()}")

    def log(self) -> str:
        path = self.log_dir / "main.log"
        return path.read_text() if path.exists() else ""

    async def close(self) -> None:
        if self.sandbox:
            await self.cri.stop_pod_sandbox(self.sandbox)
            await self.cri.remove_pod_sandbox(self.sandbox)


@pytest.fixture
async def pod(node: ContainerdNode, tmp_path: Path) -> AsyncIterator[Pod]:
    async with RuntimeClient(node.endpoint) as cri:
        started = Pod(cri, node, tmp_path)
        try:
            yield started
        finally:
            await started.close()


async def curl(node: ContainerdNode, url: str) -> str:
    """GET ``url`` from the node's network namespace, retrying while the server starts."""
    output = b""
    for _ in range(100):
        process = await asyncio.create_subprocess_exec(
            "nsenter", f"--net={node.netns_path}", "--",
            "curl", "-sS", "--max-time", "2", url,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        output, _ = await process.communicate()
        if process.returncode == 0:
            return output.decode()
        await asyncio.sleep(0.1)
    raise AssertionError(f"curl {url}: {output.decode()}")


async def test_nginx_serves_its_page_on_80_and_logs_to_stdout(
    node: ContainerdNode, pod: Pod
) -> None:
    await pod.start(NGINX_IMAGE)
    ip = await pod.ip()
    assert ipaddress.ip_address(ip) in ipaddress.ip_network(POD_CIDR)
    page = await curl(node, f"http://{ip}:80/")
    assert "<title>Welcome to nginx!</title>" in page
    for _ in range(100):  # the access log line is written after the response
        if '"GET / HTTP/1.1" 200' in pod.log():
            break
        await asyncio.sleep(0.05)
    assert f"{GATEWAY} - - [" in pod.log()
    assert " stdout F " in pod.log()


async def test_python_runs_a_program(pod: Pod) -> None:
    await pod.start(
        PYTHON_IMAGE, "python", "-c", "import sys, sqlite3, ssl; print(sys.version_info[:2], 6 * 7)"
    )
    assert await pod.exited() == 0, pod.log()
    assert "(3, 11) 42" in pod.log()


async def test_echoserver_echoes_the_client_and_the_request(node: ContainerdNode, pod: Pod) -> None:
    await pod.start(ECHOSERVER_IMAGE)
    base = f"http://{await pod.ip()}:{ECHOSERVER_PORT}"
    echoed = await curl(node, f"{base}/some/path?x=1")
    assert f"client_address={GATEWAY}\n" in echoed
    assert "method=GET\n" in echoed
    assert "path=/some/path\n" in echoed
    assert "query=x=1\n" in echoed
    assert "User-Agent: curl/" in echoed
    status = await pod.cri.pod_sandbox_status(pod.sandbox)
    assert echoed.startswith(f"Hostname: {status.metadata.name}\n")
    assert await curl(node, f"{base}/hostname") == f"{status.metadata.name}\n"
    assert (await curl(node, f"{base}/clientip")).startswith(f"{GATEWAY}:")
    assert await curl(node, f"{base}/healthz") == "ok\n"
    assert "GET /some/path from" in pod.log()


async def test_kubelab_image_runs_kubelab(pod: Pod) -> None:
    assert KUBELAB_IMAGE.endswith(f":{__version__}")
    await pod.start(KUBELAB_IMAGE, "kubelab", "--help")
    assert await pod.exited() == 0, pod.log()
    assert "usage: kubelab" in pod.log()
