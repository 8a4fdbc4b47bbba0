"""A fake CRI runtime: a real grpc.aio server on a unix socket with in-memory pods.

The kubelet's logic (pod workers, PLEG, probes, backoff, restart recovery) is tested end to end
over real gRPC, through the same ``RuntimeClient`` it uses against containerd, without root,
processes, images or a network; hollow nodes may run one per node for the same reason.

State is plain dataclasses that tests read directly (``runtime.sandboxes``,
``runtime.containers``, ``runtime.calls``) and change only through the hooks below, so the
runtime's own transitions stay in one place:

- sandboxes are SANDBOX_READY until StopPodSandbox, then SANDBOX_NOTREADY; they get an IP from
  the pod CIDR unless they use the node's network;
- containers go CONTAINER_CREATED → CONTAINER_RUNNING → CONTAINER_EXITED and have no process:
  a running container runs until a test calls ``exit_container`` / ``oom_kill``, until
  StopContainer (exit 143, or 137 with a zero grace period) or StopPodSandbox (137), or at
  once when the ``on_start`` hook returns an exit code (init containers that complete);
- ExecSync answers through ``exec_handler`` (``default_exec`` knows echo, true and false);
- images are those given to the constructor; PullImage of any other image fails with
  NOT_FOUND unless ``allow_pull`` is set; an image of ``private`` (reference → username and
  password) pulls only with those in the request's ``auth``, else fails as containerd does
  with a registry's 401 (``pulls`` records each PullImage's reference and username);
- PodSandboxStatus with ``verbose`` answers containerd's ``info`` (the CNI result);
- ``fail(method, code)`` makes the next call(s) of one method fail with that code.

Behaviour follows containerd 1.6 where the kubelet depends on it: names (sandbox metadata,
container name + attempt per sandbox) are reserved until removal; RemovePodSandbox and
RemoveContainer of unknown ids succeed, StopPodSandbox and StopContainer of unknown ids are
NOT_FOUND; RemovePodSandbox stops and removes the sandbox's containers; RemoveContainer of a
running container is refused; image references are normalized as docker does
(``busybox`` is ``docker.io/library/busybox:latest``).  Timestamps come from the injected
``Clock``, so a ``FakeClock`` drives container start and finish times.  State survives
``stop()``/``start()``, as pods survive a containerd restart.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import inspect
import ipaddress
import json
import os
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

import grpc
from google.protobuf.message import Message
from grpc import aio

from kube.clock import Clock, RealClock
from kube.imagename import ImageName, normalize
from node.cri.client import CRI_API_VERSION, IMAGE_SERVICE, RUNTIME_SERVICE, serialize
from node.cri.pb import api_pb2 as pb

RUNTIME_NAME: Final = "fake"
RUNTIME_VERSION: Final = "0.1.0"
RUNTIME_READY: Final = "RuntimeReady"
NETWORK_READY: Final = "NetworkReady"
EXIT_SIGTERM: Final = 143
EXIT_SIGKILL: Final = 137
# sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
_MAX_SOCKET_PATH: Final = 107
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

_Request = TypeVar("_Request", bound=Message)


@dataclass
class ExecResult:
    """What an ExecSync returns."""

    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0


@dataclass
class FakeSandbox:
    id: str
    config: pb.PodSandboxConfig
    runtime_handler: str
    created_at: int
    ip: str
    state: pb.PodSandboxState = pb.SANDBOX_READY


def _verbose_info(sandbox: FakeSandbox) -> dict[str, object]:
    """What containerd's verbose PodSandboxStatus says of the pod network (its ``cniResult``:
    go-cni's Result, interfaces by name, the pod's end with its netns); the host end is
    named as kubelab-cni names it."""
    if not sandbox.ip:
        return {"cniResult": None}
    pod_end = {"IPConfigs": [{"IP": sandbox.ip, "Gateway": None}], "Mac": "", "Sandbox": "fake"}
    host_end = {"IPConfigs": None, "Mac": "", "Sandbox": ""}
    return {"cniResult": {"Interfaces": {"eth0": pod_end, f"veth{sandbox.id[:11]}": host_end}}}


@dataclass
class FakeContainer:
    id: str
    sandbox_id: str
    config: pb.ContainerConfig
    image: pb.Image
    log_path: str
    created_at: int
    state: pb.ContainerState = pb.CONTAINER_CREATED
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    reason: str = ""
    message: str = ""


ExecHandler = Callable[[FakeContainer, list[str]], ExecResult | Awaitable[ExecResult]]
StartHook = Callable[[FakeContainer], int | None]


def default_exec(container: FakeContainer, cmd: list[str]) -> ExecResult:
    """``echo ARGS`` prints its arguments, ``true`` and ``false`` exit 0 and 1, others 127."""
    match cmd:
        case ["echo", *words]:
            return ExecResult(stdout=(" ".join(words) + "\n").encode())
        case ["true"]:
            return ExecResult()
        case ["false"]:
            return ExecResult(exit_code=1)
    return ExecResult(stderr=f"{cmd[0] if cmd else ''}: not found\n".encode(), exit_code=127)


def normalize_image(reference: str) -> str:
    """The fully qualified form of an image reference, as docker and containerd expand it."""
    return normalize(reference)


def _make_image(reference: str) -> pb.Image:
    full = normalize_image(reference)
    digest = hashlib.sha256(full.encode()).hexdigest()
    repo, at, _ = full.partition("@")
    if at:
        return pb.Image(id=f"sha256:{digest}", repo_digests=[full], size=1 << 20)
    repo = repo.rsplit(":", 1)[0]
    return pb.Image(
        id=f"sha256:{digest}",
        repo_tags=[full],
        repo_digests=[f"{repo}@sha256:{digest}"],
        size=1 << 20,
    )


class _Fail(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class FakeRuntime:
    """An in-memory CRI runtime serving RuntimeService and ImageService on a unix socket."""

    def __init__(
        self,
        *,
        images: Iterable[str] = (),
        allow_pull: bool = False,
        clock: Clock | None = None,
        pod_cidr: str = "10.88.0.0/16",
        streaming_url: str = "http://127.0.0.1:10010",
        exec_handler: ExecHandler = default_exec,
        on_start: StartHook | None = None,
        private: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        self.allow_pull = allow_pull
        self.private = {normalize(k): v for k, v in (private or {}).items()}
        self.pulls: list[tuple[str, str]] = []
        self.exec_handler = exec_handler
        self.on_start = on_start
        self.streaming_url = streaming_url
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.containers: dict[str, FakeContainer] = {}
        self.images: dict[str, pb.Image] = {}
        self.calls: Counter[str] = Counter()
        self.conditions: dict[str, pb.RuntimeCondition] = {
            kind: pb.RuntimeCondition(type=kind, status=True)
            for kind in (RUNTIME_READY, NETWORK_READY)
        }
        self.endpoint = ""
        self._clock = clock or RealClock()
        self._failures: dict[str, list[_Fail]] = {}
        self._names: dict[tuple[str, ...], str] = {}
        self._ips = self._addresses(pod_cidr)
        self._server: aio.Server | None = None
        for reference in images:
            self._add_image(reference)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, socket_path: str | os.PathLike[str]) -> str:
        """Serve on ``socket_path`` (a stale socket there is replaced); returns the endpoint."""
        path = os.fspath(socket_path)
        if len(path.encode()) > _MAX_SOCKET_PATH:
            raise ValueError(f"unix socket path longer than {_MAX_SOCKET_PATH} bytes: {path}")
        _remove_socket(path)
        server = aio.server()
        server.add_generic_rpc_handlers(self._handlers())
        server.add_insecure_port(f"unix://{path}")
        await server.start()
        self._server = server
        self.endpoint = f"unix://{path}"
        return self.endpoint

    async def stop(self) -> None:
        """Stop serving and remove the socket; the in-memory state is kept."""
        if self._server is not None:
            await self._server.stop(None)
            self._server = None
            _remove_socket(self.endpoint.removeprefix("unix://"))

    # -- hooks for tests ----------------------------------------------------------------------

    def fail(
        self,
        method: str,
        code: grpc.StatusCode = grpc.StatusCode.UNKNOWN,
        details: str = "injected failure",
        *,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of CRI ``method`` (e.g. "PullImage") fail."""
        self._failures.setdefault(method, []).extend(_Fail(code, details) for _ in range(times))

    def exit_container(
        self, container_id: str, exit_code: int, *, reason: str = "", message: str = ""
    ) -> None:
        """End a running container; the reason defaults to Completed (0) or Error."""
        container = self.containers[container_id]
        if container.state != pb.CONTAINER_RUNNING:
            raise ValueError(f"container {container_id} is not running")
        container.state = pb.CONTAINER_EXITED
        container.finished_at = self._now()
        container.exit_code = exit_code
        container.reason = reason or ("Completed" if exit_code == 0 else "Error")
        container.message = message

    def oom_kill(self, container_id: str) -> None:
        """End a running container as the kernel's OOM killer would."""
        self.exit_container(container_id, EXIT_SIGKILL, reason="OOMKilled")

    def set_condition(self, kind: str, status: bool, reason: str = "", message: str = "") -> None:
        """Set RuntimeReady or NetworkReady; RunPodSandbox fails while NetworkReady is false."""
        self.conditions[kind] = pb.RuntimeCondition(
            type=kind, status=status, reason=reason, message=message
        )

    def write_log(self, container_id: str, text: str, stream: str = "stdout") -> None:
        """Append lines to the container's CRI log file (``<RFC3339Nano> <stream> F <line>``)."""
        container = self.containers[container_id]
        if not container.log_path:
            raise ValueError(f"container {container_id} has no log path")
        now = self._clock.now().astimezone(datetime.UTC)
        stamp = f"{now:%Y-%m-%dT%H:%M:%S}.{now.microsecond * 1000:09d}Z"
        path = Path(container.log_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as log:
            log.writelines(f"{stamp} {stream} F {line}\n" for line in text.splitlines())

    # -- plumbing -----------------------------------------------------------------------------

    def _now(self) -> int:
        return (self._clock.now() - _EPOCH) // datetime.timedelta(microseconds=1) * 1000

    @staticmethod
    def _addresses(pod_cidr: str) -> Iterator[str]:
        hosts = ipaddress.ip_network(pod_cidr).hosts()
        next(hosts)  # the first address belongs to the bridge
        return (str(address) for address in hosts)

    def _add_image(self, reference: str) -> pb.Image:
        image = _make_image(reference)
        self.images[image.id] = image
        return image

    def _find_image(self, reference: str) -> pb.Image | None:
        if reference in self.images:
            return self.images[reference]
        full = normalize_image(reference)
        for image in self.images.values():
            if full in image.repo_tags or full in image.repo_digests:
                return image
        return None

    def _sandbox(self, sandbox_id: str) -> FakeSandbox:
        sandbox = self.sandboxes.get(sandbox_id)
        if sandbox is None:
            raise _Fail(grpc.StatusCode.NOT_FOUND, f"sandbox {sandbox_id!r} not found")
        return sandbox

    def _container(self, container_id: str) -> FakeContainer:
        container = self.containers.get(container_id)
        if container is None:
            raise _Fail(grpc.StatusCode.NOT_FOUND, f"container {container_id!r} not found")
        return container

    def _running(self, container_id: str) -> FakeContainer:
        container = self._container(container_id)
        if container.state != pb.CONTAINER_RUNNING:
            state = pb.ContainerState.Name(container.state)
            raise _Fail(grpc.StatusCode.FAILED_PRECONDITION, f"container is in {state} state")
        return container

    def _reserve(self, key: tuple[str, ...], owner: str) -> None:
        holder = self._names.setdefault(key, owner)
        if holder != owner:
            raise _Fail(
                grpc.StatusCode.ALREADY_EXISTS, f"name {'_'.join(key)} is reserved for {holder}"
            )

    def _release(self, owner: str) -> None:
        self._names = {key: holder for key, holder in self._names.items() if holder != owner}

    def _stop(self, container: FakeContainer, exit_code: int) -> None:
        if container.state == pb.CONTAINER_RUNNING:
            self.exit_container(container.id, exit_code)

    def _handlers(self) -> list[grpc.GenericRpcHandler[Message, Message]]:
        runtime = {
            "Version": self._handler(pb.VersionRequest, self._version),
            "Status": self._handler(pb.StatusRequest, self._status),
            "UpdateRuntimeConfig": self._handler(
                pb.UpdateRuntimeConfigRequest, self._update_runtime_config
            ),
            "RunPodSandbox": self._handler(pb.RunPodSandboxRequest, self._run_pod_sandbox),
            "StopPodSandbox": self._handler(pb.StopPodSandboxRequest, self._stop_pod_sandbox),
            "RemovePodSandbox": self._handler(pb.RemovePodSandboxRequest, self._remove_pod_sandbox),
            "PodSandboxStatus": self._handler(pb.PodSandboxStatusRequest, self._pod_sandbox_status),
            "ListPodSandbox": self._handler(pb.ListPodSandboxRequest, self._list_pod_sandbox),
            "PortForward": self._handler(pb.PortForwardRequest, self._port_forward),
            "CreateContainer": self._handler(pb.CreateContainerRequest, self._create_container),
            "StartContainer": self._handler(pb.StartContainerRequest, self._start_container),
            "StopContainer": self._handler(pb.StopContainerRequest, self._stop_container),
            "RemoveContainer": self._handler(pb.RemoveContainerRequest, self._remove_container),
            "ListContainers": self._handler(pb.ListContainersRequest, self._list_containers),
            "ContainerStatus": self._handler(pb.ContainerStatusRequest, self._container_status),
            "ReopenContainerLog": self._handler(
                pb.ReopenContainerLogRequest, self._reopen_container_log
            ),
            "ExecSync": self._handler(pb.ExecSyncRequest, self._exec_sync),
            "Exec": self._handler(pb.ExecRequest, self._exec),
            "Attach": self._handler(pb.AttachRequest, self._attach),
        }
        image = {
            "ListImages": self._handler(pb.ListImagesRequest, self._list_images),
            "ImageStatus": self._handler(pb.ImageStatusRequest, self._image_status),
            "PullImage": self._handler(pb.PullImageRequest, self._pull_image),
            "RemoveImage": self._handler(pb.RemoveImageRequest, self._remove_image),
        }
        return [
            grpc.method_handlers_generic_handler(RUNTIME_SERVICE, runtime),
            grpc.method_handlers_generic_handler(IMAGE_SERVICE, image),
        ]

    def _handler(
        self,
        request_type: type[_Request],
        impl: Callable[[_Request], Awaitable[Message]],
    ) -> grpc.RpcMethodHandler[Message, Message]:
        """One method: counted in ``calls``, injected failures first, ``_Fail`` as a status."""
        method = request_type.__name__.removesuffix("Request")

        async def behaviour(
            request: _Request, context: aio.ServicerContext[_Request, Message]
        ) -> Message:
            self.calls[method] += 1
            try:
                pending = self._failures.get(method)
                if pending:
                    raise pending.pop(0)
                return await impl(request)
            except _Fail as failure:
                await context.abort(failure.code, failure.details)
                raise  # abort raises; this line only satisfies the type checker

        return grpc.unary_unary_rpc_method_handler(
            behaviour,
            request_deserializer=request_type.FromString,
            response_serializer=serialize,
        )

    # -- RuntimeService -----------------------------------------------------------------------

    async def _version(self, request: pb.VersionRequest) -> pb.VersionResponse:
        return pb.VersionResponse(
            version=RUNTIME_VERSION,
            runtime_name=RUNTIME_NAME,
            runtime_version=RUNTIME_VERSION,
            runtime_api_version=CRI_API_VERSION,
        )

    async def _status(self, request: pb.StatusRequest) -> pb.StatusResponse:
        status = pb.RuntimeStatus(conditions=list(self.conditions.values()))
        return pb.StatusResponse(status=status)

    async def _update_runtime_config(
        self, request: pb.UpdateRuntimeConfigRequest
    ) -> pb.UpdateRuntimeConfigResponse:
        pod_cidr = request.runtime_config.network_config.pod_cidr
        if pod_cidr:
            self._ips = self._addresses(pod_cidr)
        return pb.UpdateRuntimeConfigResponse()

    async def _run_pod_sandbox(self, request: pb.RunPodSandboxRequest) -> pb.RunPodSandboxResponse:
        config = request.config
        meta = config.metadata
        host_network = config.linux.security_context.namespace_options.network == pb.NODE
        network = self.conditions[NETWORK_READY]
        if not host_network and not network.status:
            raise _Fail(grpc.StatusCode.UNKNOWN, f"cni config uninitialized: {network.reason}")
        sandbox_id = secrets.token_hex(32)
        self._reserve((meta.name, meta.namespace, meta.uid, str(meta.attempt)), sandbox_id)
        self.sandboxes[sandbox_id] = FakeSandbox(
            id=sandbox_id,
            config=config,
            runtime_handler=request.runtime_handler,
            created_at=self._now(),
            ip="" if host_network else next(self._ips),
        )
        return pb.RunPodSandboxResponse(pod_sandbox_id=sandbox_id)

    async def _stop_pod_sandbox(
        self, request: pb.StopPodSandboxRequest
    ) -> pb.StopPodSandboxResponse:
        sandbox = self._sandbox(request.pod_sandbox_id)
        for container in self.containers.values():
            if container.sandbox_id == sandbox.id:
                self._stop(container, EXIT_SIGKILL)
        sandbox.state = pb.SANDBOX_NOTREADY
        return pb.StopPodSandboxResponse()

    async def _remove_pod_sandbox(
        self, request: pb.RemovePodSandboxRequest
    ) -> pb.RemovePodSandboxResponse:
        sandbox = self.sandboxes.pop(request.pod_sandbox_id, None)
        if sandbox is not None:
            for container in [c for c in self.containers.values() if c.sandbox_id == sandbox.id]:
                self._stop(container, EXIT_SIGKILL)
                del self.containers[container.id]
                self._release(container.id)
            self._release(sandbox.id)
        return pb.RemovePodSandboxResponse()

    async def _pod_sandbox_status(
        self, request: pb.PodSandboxStatusRequest
    ) -> pb.PodSandboxStatusResponse:
        sandbox = self._sandbox(request.pod_sandbox_id)
        config = sandbox.config
        status = pb.PodSandboxStatus(
            id=sandbox.id,
            metadata=config.metadata,
            state=sandbox.state,
            created_at=sandbox.created_at,
            network=pb.PodSandboxNetworkStatus(ip=sandbox.ip),
            linux=pb.LinuxPodSandboxStatus(
                namespaces=pb.Namespace(options=config.linux.security_context.namespace_options)
            ),
            labels=config.labels,
            annotations=config.annotations,
            runtime_handler=sandbox.runtime_handler,
        )
        info = {"info": json.dumps(_verbose_info(sandbox))} if request.verbose else {}
        return pb.PodSandboxStatusResponse(status=status, info=info)

    async def _list_pod_sandbox(
        self, request: pb.ListPodSandboxRequest
    ) -> pb.ListPodSandboxResponse:
        wanted = request.filter
        items = [
            pb.PodSandbox(
                id=sandbox.id,
                metadata=sandbox.config.metadata,
                state=sandbox.state,
                created_at=sandbox.created_at,
                labels=sandbox.config.labels,
                annotations=sandbox.config.annotations,
                runtime_handler=sandbox.runtime_handler,
            )
            for sandbox in self.sandboxes.values()
            if (not wanted.id or sandbox.id == wanted.id)
            and (not wanted.HasField("state") or sandbox.state == wanted.state.state)
            and _matches(sandbox.config.labels, wanted.label_selector)
        ]
        return pb.ListPodSandboxResponse(items=items)

    async def _port_forward(self, request: pb.PortForwardRequest) -> pb.PortForwardResponse:
        sandbox = self._sandbox(request.pod_sandbox_id)
        if sandbox.state != pb.SANDBOX_READY:
            raise _Fail(grpc.StatusCode.FAILED_PRECONDITION, "sandbox is not ready")
        return pb.PortForwardResponse(url=self._stream_url("portforward"))

    async def _create_container(
        self, request: pb.CreateContainerRequest
    ) -> pb.CreateContainerResponse:
        sandbox = self._sandbox(request.pod_sandbox_id)
        if sandbox.state != pb.SANDBOX_READY:
            raise _Fail(grpc.StatusCode.FAILED_PRECONDITION, "sandbox is not ready")
        config = request.config
        image = self._find_image(config.image.image)
        if image is None:
            raise _Fail(grpc.StatusCode.NOT_FOUND, f"image {config.image.image!r} not found")
        container_id = secrets.token_hex(32)
        self._reserve(
            (sandbox.id, config.metadata.name, str(config.metadata.attempt)), container_id
        )
        log_directory = sandbox.config.log_directory
        self.containers[container_id] = FakeContainer(
            id=container_id,
            sandbox_id=sandbox.id,
            config=config,
            image=image,
            log_path=os.path.join(log_directory, config.log_path)
            if log_directory and config.log_path
            else "",
            created_at=self._now(),
        )
        return pb.CreateContainerResponse(container_id=container_id)

    async def _start_container(
        self, request: pb.StartContainerRequest
    ) -> pb.StartContainerResponse:
        container = self._container(request.container_id)
        if container.state != pb.CONTAINER_CREATED:
            state = pb.ContainerState.Name(container.state)
            raise _Fail(grpc.StatusCode.FAILED_PRECONDITION, f"container is in {state} state")
        if self.sandboxes[container.sandbox_id].state != pb.SANDBOX_READY:
            raise _Fail(grpc.StatusCode.FAILED_PRECONDITION, "sandbox is not ready")
        container.state = pb.CONTAINER_RUNNING
        container.started_at = self._now()
        exit_code = self.on_start(container) if self.on_start is not None else None
        if exit_code is not None:
            self.exit_container(container.id, exit_code)
        return pb.StartContainerResponse()

    async def _stop_container(self, request: pb.StopContainerRequest) -> pb.StopContainerResponse:
        container = self._container(request.container_id)
        self._stop(container, EXIT_SIGTERM if request.timeout > 0 else EXIT_SIGKILL)
        return pb.StopContainerResponse()

    async def _remove_container(
        self, request: pb.RemoveContainerRequest
    ) -> pb.RemoveContainerResponse:
        container = self.containers.get(request.container_id)
        if container is not None:
            if container.state == pb.CONTAINER_RUNNING:
                raise _Fail(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "container is in CONTAINER_RUNNING state, please stop it first",
                )
            del self.containers[container.id]
            self._release(container.id)
        return pb.RemoveContainerResponse()

    async def _list_containers(
        self, request: pb.ListContainersRequest
    ) -> pb.ListContainersResponse:
        wanted = request.filter
        containers = [
            pb.Container(
                id=container.id,
                pod_sandbox_id=container.sandbox_id,
                metadata=container.config.metadata,
                image=container.config.image,
                image_ref=container.image.id,
                state=container.state,
                created_at=container.created_at,
                labels=container.config.labels,
                annotations=container.config.annotations,
            )
            for container in self.containers.values()
            if (not wanted.id or container.id == wanted.id)
            and (not wanted.pod_sandbox_id or container.sandbox_id == wanted.pod_sandbox_id)
            and (not wanted.HasField("state") or container.state == wanted.state.state)
            and _matches(container.config.labels, wanted.label_selector)
        ]
        return pb.ListContainersResponse(containers=containers)

    async def _container_status(
        self, request: pb.ContainerStatusRequest
    ) -> pb.ContainerStatusResponse:
        container = self._container(request.container_id)
        config = container.config
        digests = container.image.repo_digests
        status = pb.ContainerStatus(
            id=container.id,
            metadata=config.metadata,
            state=container.state,
            created_at=container.created_at,
            started_at=container.started_at,
            finished_at=container.finished_at,
            exit_code=container.exit_code,
            image=config.image,
            image_ref=digests[0] if digests else container.image.id,
            reason=container.reason,
            message=container.message,
            labels=config.labels,
            annotations=config.annotations,
            mounts=config.mounts,
            log_path=container.log_path,
        )
        return pb.ContainerStatusResponse(status=status)

    async def _reopen_container_log(
        self, request: pb.ReopenContainerLogRequest
    ) -> pb.ReopenContainerLogResponse:
        self._running(request.container_id)
        return pb.ReopenContainerLogResponse()

    async def _exec_sync(self, request: pb.ExecSyncRequest) -> pb.ExecSyncResponse:
        container = self._running(request.container_id)
        result = self.exec_handler(container, list(request.cmd))
        if inspect.isawaitable(result):
            try:
                result = await asyncio.wait_for(result, request.timeout or None)
            except TimeoutError:
                raise _Fail(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"timeout {request.timeout}s exceeded running {list(request.cmd)}",
                ) from None
        return pb.ExecSyncResponse(
            stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code
        )

    async def _exec(self, request: pb.ExecRequest) -> pb.ExecResponse:
        self._running(request.container_id)
        return pb.ExecResponse(url=self._stream_url("exec"))

    async def _attach(self, request: pb.AttachRequest) -> pb.AttachResponse:
        self._running(request.container_id)
        return pb.AttachResponse(url=self._stream_url("attach"))

    def _stream_url(self, kind: str) -> str:
        return f"{self.streaming_url}/{kind}/{secrets.token_urlsafe(8)}"

    # -- ImageService -------------------------------------------------------------------------

    async def _list_images(self, request: pb.ListImagesRequest) -> pb.ListImagesResponse:
        reference = request.filter.image.image
        if reference:
            found = self._find_image(reference)
            return pb.ListImagesResponse(images=[found] if found is not None else [])
        return pb.ListImagesResponse(images=list(self.images.values()))

    async def _image_status(self, request: pb.ImageStatusRequest) -> pb.ImageStatusResponse:
        return pb.ImageStatusResponse(image=self._find_image(request.image.image))

    async def _pull_image(self, request: pb.PullImageRequest) -> pb.PullImageResponse:
        reference = request.image.image
        name = ImageName.parse(reference)
        full = str(name)
        self.pulls.append((full, request.auth.username))
        wanted = self.private.get(full)
        if wanted is not None and (request.auth.username, request.auth.password) != wanted:
            raise _Fail(
                grpc.StatusCode.UNKNOWN,
                f'failed to pull and unpack image "{full}": failed to resolve reference '
                f'"{full}": pulling from host {name.registry} failed with status code '
                f"[manifests {name.tag or name.digest}]: 401 Unauthorized",
            )
        image = self._find_image(reference)
        if image is None:
            if not self.allow_pull:
                raise _Fail(
                    grpc.StatusCode.NOT_FOUND,
                    f'failed to pull and unpack image "{full}": failed to resolve reference '
                    f'"{full}": {full}: not found',
                )
            image = self._add_image(reference)
        return pb.PullImageResponse(image_ref=image.id)

    async def _remove_image(self, request: pb.RemoveImageRequest) -> pb.RemoveImageResponse:
        image = self._find_image(request.image.image)
        if image is not None:
            del self.images[image.id]
        return pb.RemoveImageResponse()


def _remove_socket(path: str) -> None:
    Path(path).unlink(missing_ok=True)


def _matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())
