"""A real containerd in a network namespace of its own, for privileged tests (not a test file).

``ContainerdNode`` is what a kubelab node's runtime looks like on the lab machines: a network
namespace (``ip netns add``, lo up), a containerd started inside it with
``nsenter --net=/run/netns/NAME -- containerd --config FILE`` (``ip netns exec`` remounts /sys
and runc then finds no cgroups), its own state directory holding every socket, root, runc root
and netns mount (``node.kubelet.runtimeconfig``), the reference CNI plugins (bridge +
host-local with a per-node IPAM directory, loopback) on a conflist written for the pod CIDR the
test gives, and the offline pause and busybox images (``kubelab.lab.images``) imported into
``k8s.io``.

It is a plain (synchronous) context manager so sync and async fixtures alike can use it, and
its teardown talks CRI over a blocking gRPC channel, which needs no event loop.  Teardown
leaves nothing behind, in this order: every pod sandbox is stopped and removed through CRI (so
the shims exit), containerd is stopped by its PID, shims still naming our containerd's socket
on their command line and processes left in our cgroups are killed by PID, everything mounted
under the state directory is unmounted (deepest first), the cgroup subtree ``cgroup_parent``
is removed from every hierarchy, then the network namespace and the directories go.

Usage, from a conftest or a test module::

    from tests.node.containerd_node import (  # noqa: F401 (fixtures)
        containerd_images_fixture,
        containerd_node_fixture,
    )

    @pytest.mark.privileged
    @pytest.mark.containerd
    async def test_x(containerd_node: ContainerdNode) -> None:
        async with RuntimeClient(containerd_node.endpoint) as cri: ...

or ``with ContainerdNode(archives, pod_cidr="10.88.1.0/24") as node:`` directly
(``reference_cni=False`` leaves the CNI config to a kubelet).  Pods should
use a ``cgroup_parent`` under ``node.cgroup_parent`` so teardown finds their cgroups.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Final, TypeVar

import grpc
import pytest
from google.protobuf.message import Message

from kubelab.lab.images import BASIC_IMAGES, PAUSE_IMAGE, build_images, import_images
from node.cri.client import RUNTIME_SERVICE, serialize
from node.cri.pb import api_pb2 as pb
from node.kubelet.runtimeconfig import ContainerdLayout, write_containerd_config

IMAGE_CACHE: Final = Path("/var/cache/kubelab-test-images")
BASE_DIR: Final = Path("/run/kubelab-test")
REFERENCE_CNI: Final = Path("/usr/lib/cni")
CNI_PLUGINS: Final = ("loopback", "bridge", "host-local")
NETNS_DIR: Final = Path("/run/netns")
DEFAULT_POD_CIDR: Final = "10.88.0.0/24"
READY_TIMEOUT: Final = 15.0
STOP_TIMEOUT: Final = 10.0
CRI_TIMEOUT: Final = 30.0

_Response = TypeVar("_Response", bound=Message)


class ContainerdNode:
    """One node's containerd, in its own network namespace; see the module docstring.

    Attributes once entered: ``endpoint`` (``unix://.../containerd.sock``), ``socket``,
    ``netns`` (the namespace's name), ``netns_path``, ``state_dir``, ``layout``,
    ``cni_bin_dir``, ``cni_conf_dir``, ``pod_cidr``, ``cgroup_parent`` (a cgroup path such as
    ``/kubelab-test-ab12cd34`` for pods of this node), ``pid`` (containerd's) and ``log`` (its
    output).
    """

    def __init__(
        self,
        archives: Sequence[Path],
        *,
        pod_cidr: str = DEFAULT_POD_CIDR,
        base_dir: Path = BASE_DIR,
        reference_cni: bool = True,
    ) -> None:
        self.name = f"kt-{uuid.uuid4().hex[:8]}"
        self.archives = list(archives)
        self.pod_cidr = pod_cidr
        self.reference_cni = reference_cni
        self.netns = self.name
        self.netns_path = NETNS_DIR / self.name
        self.state_dir = base_dir / self.name
        self.cni_bin_dir = self.state_dir / "cni" / "bin"
        self.cni_conf_dir = self.state_dir / "cni" / "net.d"
        self.cgroup_parent = f"/kubelab-test-{self.name}"
        self.log = self.state_dir / "containerd.log"
        self.layout = ContainerdLayout(
            state_dir=self.state_dir,
            sandbox_image=PAUSE_IMAGE,
            cni_bin_dir=self.cni_bin_dir,
            cni_conf_dir=self.cni_conf_dir,
        )
        self.socket = self.layout.socket
        self.endpoint = self.layout.endpoint
        self.pid: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ContainerdNode:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # Start.

    def _start(self) -> None:
        _run("ip", "netns", "add", self.netns)
        _run("ip", "-n", self.netns, "link", "set", "lo", "up")
        write_containerd_config(self.layout)
        self._install_cni()
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                [
                    "nsenter",
                    f"--net={self.netns_path}",
                    "--",
                    "containerd",
                    "--config",
                    str(self.layout.config_file),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pid = self._process.pid
        self._wait_ready()
        import_images(self.socket, self.archives)

    def _install_cni(self) -> None:
        self.cni_bin_dir.mkdir(parents=True)
        self.cni_conf_dir.mkdir(parents=True)
        if not self.reference_cni:
            return  # a kubelet configures the pod network once its Node has a podCIDR
        for plugin in CNI_PLUGINS:
            shutil.copy2(REFERENCE_CNI / plugin, self.cni_bin_dir / plugin)
        conflist = {
            "cniVersion": "1.0.0",
            "name": "kubelab-test",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.pod_cidr}]],
                        "dataDir": str(self.state_dir / "cni" / "ipam"),
                    },
                }
            ],
        }
        (self.cni_conf_dir / "10-kubelab-test.conflist").write_text(json.dumps(conflist))

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        problem = "no answer"
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(
                    f"containerd exited ({self._process.returncode}):\n{self._log()}"
                )
            try:
                with _SyncCRI(self.socket) as cri:
                    status = cri.call("Status", pb.StatusRequest(), pb.StatusResponse, timeout=1)
                conditions = {c.type: c for c in status.status.conditions}
                wanted = [
                    c for c in conditions.values() if self.reference_cni or c.type != "NetworkReady"
                ]
                if all(c.status for c in wanted) and len(conditions) >= 2:
                    return
                problem = "; ".join(
                    f"{c.type}: {c.reason} {c.message}" for c in conditions.values()
                )
            except grpc.RpcError as error:
                problem = str(error)
            time.sleep(0.05)
        raise RuntimeError(
            f"containerd's CRI not ready in {READY_TIMEOUT}s: {problem}\n{self._log()}"
        )

    def _log(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    # Teardown: every step runs even when an earlier one failed.

    def close(self) -> None:
        """Remove everything the node created; safe to call twice and after a failed start."""
        if self._process is not None:
            self._remove_sandboxes()
            self._stop_containerd()
        self._kill_leftovers()
        self._unmount_state()
        self._remove_cgroups()
        if self.netns_path.exists():
            subprocess.run(["ip", "netns", "delete", self.netns], check=False)
        shutil.rmtree(self.state_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.state_dir.parent.rmdir()  # shared by concurrent nodes: only when empty

    def _remove_sandboxes(self) -> None:
        try:
            with _SyncCRI(self.socket) as cri:
                listed = cri.call(
                    "ListPodSandbox", pb.ListPodSandboxRequest(), pb.ListPodSandboxResponse
                )
                for sandbox in listed.items:
                    stop = pb.StopPodSandboxRequest(pod_sandbox_id=sandbox.id)
                    cri.call("StopPodSandbox", stop, pb.StopPodSandboxResponse)
                    remove = pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox.id)
                    cri.call("RemovePodSandbox", remove, pb.RemovePodSandboxResponse)
        except grpc.RpcError:
            pass  # containerd is gone: the shims and mounts are handled below

    def _stop_containerd(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _kill_leftovers(self) -> None:
        """Kill our shims (they name our socket with ``-address``) and anything left in our
        cgroups, by PID."""
        pids = set(self._shim_pids()) | set(self._cgroup_pids())
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + STOP_TIMEOUT
        while pids and time.monotonic() < deadline:
            pids = {pid for pid in pids if Path(f"/proc/{pid}").exists() and not _zombie(pid)}
            time.sleep(0.02)

    def shim_pids(self) -> list[int]:
        """The containerd shims serving this node (for tests checking teardown)."""
        return list(self._shim_pids())

    def _shim_pids(self) -> Iterator[int]:
        socket = str(self.socket)
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            words = [a.decode(errors="replace") for a in args]
            if words and "containerd-shim" in words[0] and socket in words:
                yield int(proc.name)

    def _cgroup_pids(self) -> Iterator[int]:
        for directory in self._cgroup_dirs():
            for procs in directory.rglob("cgroup.procs"):
                try:
                    yield from (int(line) for line in procs.read_text().split())
                except OSError:
                    continue

    def _cgroup_dirs(self) -> list[Path]:
        return [
            d for d in (m / self.cgroup_parent.lstrip("/") for m in _cgroup_mounts()) if d.is_dir()
        ]

    def mounts(self) -> list[Path]:
        """Mount points under the state directory or on the netns file, deepest first."""
        found = []
        for line in Path("/proc/self/mounts").read_text().splitlines():
            point = Path(line.split()[1].replace("\\040", " "))
            if point == self.netns_path or point.is_relative_to(self.state_dir):
                found.append(point)
        return sorted(found, key=lambda p: len(p.parts), reverse=True)

    def _unmount_state(self) -> None:
        for point in self.mounts():
            if point != self.netns_path:
                subprocess.run(["umount", "-l", str(point)], check=False, capture_output=True)

    def _remove_cgroups(self) -> None:
        for directory in self._cgroup_dirs():
            children = sorted(
                (p for p in directory.rglob("*") if p.is_dir()),
                key=lambda p: len(p.parts),
                reverse=True,
            )
            for cgroup in [*children, directory]:
                with contextlib.suppress(OSError):
                    cgroup.rmdir()


@pytest.fixture(name="containerd_images", scope="session")
def containerd_images_fixture() -> list[Path]:
    """The pause and busybox archives, built once into a cache shared by test sessions."""
    return build_images(IMAGE_CACHE, BASIC_IMAGES)


@pytest.fixture(name="containerd_node")
def containerd_node_fixture(containerd_images: list[Path]) -> Iterator[ContainerdNode]:
    """A fresh ContainerdNode with the default pod CIDR, removed after the test."""
    with ContainerdNode(containerd_images) as node:
        yield node


class _SyncCRI:
    """A blocking CRI channel for setup and teardown, which must work with or without an
    event loop (``node.cri.client.RuntimeClient`` is asyncio-only)."""

    def __init__(self, socket: Path) -> None:
        self._channel = grpc.insecure_channel(f"unix://{socket}")

    def __enter__(self) -> _SyncCRI:
        return self

    def __exit__(self, *_: object) -> None:
        self._channel.close()

    def call(
        self,
        method: str,
        request: Message,
        response_type: type[_Response],
        timeout: float = CRI_TIMEOUT,
    ) -> _Response:
        stub = self._channel.unary_unary(
            f"/{RUNTIME_SERVICE}/{method}",
            request_serializer=serialize,
            response_deserializer=response_type.FromString,
        )
        response: _Response = stub(request, timeout=timeout)
        return response


def _run(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip()}")


def _cgroup_mounts() -> list[Path]:
    mounts = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] in ("cgroup", "cgroup2"):
            mounts.append(Path(fields[1]))
    return mounts


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"
