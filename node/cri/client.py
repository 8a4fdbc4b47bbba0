"""The kubelet's asynchronous CRI client: one grpc.aio channel to a runtime's unix socket.

The kubelet talks to containerd (or to ``node.cri.fake.FakeRuntime`` in tests and hollow nodes)
only through ``RuntimeClient``.  Each method wraps one CRI call of ``runtime.v1`` and takes and
returns the generated protobuf messages of ``node.cri.pb.api_pb2`` where they carry structure
(configs, statuses, list items), plain values where the response is one field (ids, URLs, image
refs).  So the kubelet builds a ``PodSandboxConfig`` once and hands it to RunPodSandbox,
CreateContainer and PullImage alike, and nothing is copied into a parallel object model.

Why it is shaped so:

- Calls go through ``channel.unary_unary`` with the message types named here, not through the
  generated stubs, which are untyped: mypy checks every request and response.
- Every ``grpc.aio.AioRpcError`` becomes a ``CRIError`` carrying the status code, the CRI
  method and the runtime's details, so callers branch on ``err.code`` (NOT_FOUND after a
  concurrent removal, DEADLINE_EXCEEDED for an exec probe timeout, UNAVAILABLE while the
  runtime is down) and logs say which call failed.
- Each call has a deadline: 2 minutes, the upstream kubelet's ``--runtime-request-timeout``,
  for PullImage too; ExecSync gets the default plus its own timeout, or no deadline when its
  timeout is 0.  (A CreateContainer unpacks the image's layers on the image's first use on a
  node, which takes tens of seconds for a large image on a busy machine: a 10 s deadline
  cancelled it and every retry started again.)  Calls fail fast (no wait_for_ready) so a
  dead runtime shows up as UNAVAILABLE at once and the kubelet can report it in the Node's
  Ready condition.
- Idempotency is the runtime's: containerd answers RemovePodSandbox and RemoveContainer of
  unknown ids with success, StopPodSandbox and StopContainer of unknown ids with NOT_FOUND.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Final, TypeVar, cast

import grpc
from google.protobuf.message import Message
from grpc import aio

from node.cri.pb import api_pb2 as pb

RUNTIME_SERVICE: Final = "runtime.v1.RuntimeService"
IMAGE_SERVICE: Final = "runtime.v1.ImageService"
CRI_API_VERSION: Final = "v1"
DEFAULT_TIMEOUT: Final = 120.0
PULL_IMAGE_TIMEOUT: Final = 120.0
# The upstream kubelet's limit for CRI messages (large ListContainers, ExecSync output).
MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024

# containerd answers ~80 ms after it starts: retry the socket soon after a runtime restart,
# instead of gRPC's default first backoff of one second.
RECONNECT_BACKOFF_MS: Final = 100

_Response = TypeVar("_Response", bound=Message)


def serialize(message: Message) -> bytes:
    """The gRPC serializer for any protobuf message (client requests, server responses)."""
    return message.SerializeToString()


class CRIError(Exception):
    """A CRI call that failed: the gRPC status code, the CRI method and the runtime's details."""

    def __init__(self, method: str, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"CRI {method}: {code.name}: {details}")
        self.method = method
        self.code = code
        self.details = details


def grpc_target(endpoint: str) -> str:
    """The gRPC target for a runtime endpoint: ``unix:///run/x.sock`` or a bare absolute path."""
    if endpoint.startswith("unix://"):
        return endpoint
    if endpoint.startswith("/"):
        return f"unix://{endpoint}"
    raise ValueError(f"CRI endpoint must be unix:///path or an absolute path, got {endpoint!r}")


class RuntimeClient:
    """RuntimeService and ImageService of one CRI runtime, over one channel.

    Create it inside a running event loop; ``close()`` (or ``async with``) releases the
    channel.  The channel connects lazily and reconnects by itself (first retry after 100 ms)
    when the runtime restarts.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        pull_image_timeout: float = PULL_IMAGE_TIMEOUT,
    ) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.pull_image_timeout = pull_image_timeout
        self._channel = aio.insecure_channel(
            grpc_target(endpoint),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
            ],
        )
        self._callables: dict[str, aio.UnaryUnaryMultiCallable[Message, Message]] = {}

    async def close(self) -> None:
        await self._channel.close(None)

    async def __aenter__(self) -> RuntimeClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _call(
        self,
        service: str,
        method: str,
        request: Message,
        response_type: type[_Response],
        deadline: float | None,
    ) -> _Response:
        path = f"/{service}/{method}"
        callable_ = self._callables.get(path)
        if callable_ is None:
            callable_ = self._channel.unary_unary(
                path,
                request_serializer=serialize,
                response_deserializer=response_type.FromString,
            )
            self._callables[path] = callable_
        try:
            response = await callable_(request, timeout=deadline)
        except aio.AioRpcError as err:
            raise CRIError(method, err.code(), err.details() or "") from None
        return cast(_Response, response)

    async def _runtime(
        self, method: str, request: Message, response_type: type[_Response]
    ) -> _Response:
        return await self._call(RUNTIME_SERVICE, method, request, response_type, self.timeout)

    async def _image(
        self, method: str, request: Message, response_type: type[_Response]
    ) -> _Response:
        return await self._call(IMAGE_SERVICE, method, request, response_type, self.timeout)

    # -- runtime ------------------------------------------------------------------------------

    async def version(self) -> pb.VersionResponse:
        """The runtime's name and versions; read-only."""
        request = pb.VersionRequest(version=CRI_API_VERSION)
        return await self._runtime("Version", request, pb.VersionResponse)

    async def status(self) -> pb.RuntimeStatus:
        """The RuntimeReady and NetworkReady conditions; read-only."""
        response = await self._runtime("Status", pb.StatusRequest(), pb.StatusResponse)
        return response.status

    async def update_runtime_config(self, pod_cidr: str) -> None:
        """Tell the runtime the node's pod CIDR; idempotent."""
        config = pb.RuntimeConfig(network_config=pb.NetworkConfig(pod_cidr=pod_cidr))
        request = pb.UpdateRuntimeConfigRequest(runtime_config=config)
        await self._runtime("UpdateRuntimeConfig", request, pb.UpdateRuntimeConfigResponse)

    # -- sandboxes ----------------------------------------------------------------------------

    async def run_pod_sandbox(self, config: pb.PodSandboxConfig, runtime_handler: str = "") -> str:
        """Create and start a sandbox (its network included); returns the sandbox id.

        Not idempotent: the runtime refuses a second sandbox with the same metadata (name,
        namespace, uid, attempt) while the first exists.
        """
        request = pb.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler)
        response = await self._runtime("RunPodSandbox", request, pb.RunPodSandboxResponse)
        return response.pod_sandbox_id

    async def stop_pod_sandbox(self, sandbox_id: str) -> None:
        """Stop the sandbox and kill its containers; idempotent for a known sandbox."""
        request = pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id)
        await self._runtime("StopPodSandbox", request, pb.StopPodSandboxResponse)

    async def remove_pod_sandbox(self, sandbox_id: str) -> None:
        """Remove the sandbox and its containers (stopping them first); idempotent."""
        request = pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id)
        await self._runtime("RemovePodSandbox", request, pb.RemovePodSandboxResponse)

    async def pod_sandbox_status(self, sandbox_id: str) -> pb.PodSandboxStatus:
        """The sandbox's state, IPs and metadata; read-only."""
        request = pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id)
        response = await self._runtime("PodSandboxStatus", request, pb.PodSandboxStatusResponse)
        return response.status

    async def pod_sandbox_info(self, sandbox_id: str) -> tuple[pb.PodSandboxStatus, dict[str, str]]:
        """The sandbox's status and the runtime's verbose detail (containerd's ``info``: a
        JSON document with the CNI result among the rest); read-only."""
        request = pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id, verbose=True)
        response = await self._runtime("PodSandboxStatus", request, pb.PodSandboxStatusResponse)
        return response.status, dict(response.info)

    async def list_pod_sandbox(
        self,
        *,
        sandbox_id: str = "",
        state: pb.PodSandboxState | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[pb.PodSandbox]:
        """Sandboxes matching every given filter (id, state, labels all equal); read-only."""
        filter_ = pb.PodSandboxFilter(id=sandbox_id, label_selector=labels or {})
        if state is not None:
            filter_.state.state = state
        request = pb.ListPodSandboxRequest(filter=filter_)
        response = await self._runtime("ListPodSandbox", request, pb.ListPodSandboxResponse)
        return list(response.items)

    async def port_forward(self, sandbox_id: str, ports: Iterable[int]) -> str:
        """A streaming-server URL that forwards to the sandbox's ports."""
        request = pb.PortForwardRequest(pod_sandbox_id=sandbox_id, port=list(ports))
        response = await self._runtime("PortForward", request, pb.PortForwardResponse)
        return response.url

    # -- containers ---------------------------------------------------------------------------

    async def create_container(
        self,
        sandbox_id: str,
        config: pb.ContainerConfig,
        sandbox_config: pb.PodSandboxConfig,
    ) -> str:
        """Create a container in a ready sandbox; returns the container id.

        Not idempotent: a second container with the same name and attempt in the sandbox is
        refused while the first exists.
        """
        request = pb.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox_config
        )
        response = await self._runtime("CreateContainer", request, pb.CreateContainerResponse)
        return response.container_id

    async def start_container(self, container_id: str) -> None:
        """Start a created container; fails for one that is running or has exited."""
        request = pb.StartContainerRequest(container_id=container_id)
        await self._runtime("StartContainer", request, pb.StartContainerResponse)

    async def stop_container(self, container_id: str, grace_seconds: int) -> None:
        """SIGTERM, then SIGKILL after ``grace_seconds``; idempotent once exited.

        The gRPC deadline is the default timeout plus the grace period, so a slow stop is not
        cut short by the client.
        """
        request = pb.StopContainerRequest(container_id=container_id, timeout=grace_seconds)
        await self._call(
            RUNTIME_SERVICE,
            "StopContainer",
            request,
            pb.StopContainerResponse,
            self.timeout + grace_seconds,
        )

    async def remove_container(self, container_id: str) -> None:
        """Remove an exited or created container; idempotent."""
        request = pb.RemoveContainerRequest(container_id=container_id)
        await self._runtime("RemoveContainer", request, pb.RemoveContainerResponse)

    async def list_containers(
        self,
        *,
        container_id: str = "",
        sandbox_id: str = "",
        state: pb.ContainerState | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[pb.Container]:
        """Containers matching every given filter; read-only."""
        filter_ = pb.ContainerFilter(
            id=container_id, pod_sandbox_id=sandbox_id, label_selector=labels or {}
        )
        if state is not None:
            filter_.state.state = state
        request = pb.ListContainersRequest(filter=filter_)
        response = await self._runtime("ListContainers", request, pb.ListContainersResponse)
        return list(response.containers)

    async def container_status(self, container_id: str) -> pb.ContainerStatus:
        """State, timestamps, exit code and reason, image and log path; read-only."""
        request = pb.ContainerStatusRequest(container_id=container_id)
        response = await self._runtime("ContainerStatus", request, pb.ContainerStatusResponse)
        return response.status

    async def reopen_container_log(self, container_id: str) -> None:
        """Make the runtime reopen the log file after rotation; the container must be running."""
        request = pb.ReopenContainerLogRequest(container_id=container_id)
        await self._runtime("ReopenContainerLog", request, pb.ReopenContainerLogResponse)

    async def exec_sync(
        self, container_id: str, cmd: Iterable[str], timeout_seconds: int = 0
    ) -> pb.ExecSyncResponse:
        """Run a command to completion in a running container (exec probes, lifecycle hooks).

        A non-zero exit is not an error: read ``exit_code``.  A command outliving
        ``timeout_seconds`` (0 = no limit) fails with DEADLINE_EXCEEDED, from the runtime or
        from the client's deadline of the default timeout plus ``timeout_seconds``.
        """
        request = pb.ExecSyncRequest(
            container_id=container_id, cmd=list(cmd), timeout=timeout_seconds
        )
        deadline = self.timeout + timeout_seconds if timeout_seconds else None
        return await self._call(RUNTIME_SERVICE, "ExecSync", request, pb.ExecSyncResponse, deadline)

    async def exec(
        self,
        container_id: str,
        cmd: Iterable[str],
        *,
        tty: bool = False,
        stdin: bool = False,
        stdout: bool = True,
        stderr: bool = True,
    ) -> str:
        """A streaming-server URL that runs ``cmd`` in the container."""
        request = pb.ExecRequest(
            container_id=container_id,
            cmd=list(cmd),
            tty=tty,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr and not tty,
        )
        response = await self._runtime("Exec", request, pb.ExecResponse)
        return response.url

    async def attach(
        self,
        container_id: str,
        *,
        tty: bool = False,
        stdin: bool = False,
        stdout: bool = True,
        stderr: bool = True,
    ) -> str:
        """A streaming-server URL attached to the container's main process."""
        request = pb.AttachRequest(
            container_id=container_id,
            tty=tty,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr and not tty,
        )
        response = await self._runtime("Attach", request, pb.AttachResponse)
        return response.url

    # -- images -------------------------------------------------------------------------------

    async def pull_image(
        self,
        image: str,
        *,
        auth: pb.AuthConfig | None = None,
        sandbox_config: pb.PodSandboxConfig | None = None,
    ) -> str:
        """Pull an image (2-minute deadline by default); returns the image ref (its id)."""
        request = pb.PullImageRequest(
            image=pb.ImageSpec(image=image), auth=auth, sandbox_config=sandbox_config
        )
        response = await self._call(
            IMAGE_SERVICE, "PullImage", request, pb.PullImageResponse, self.pull_image_timeout
        )
        return response.image_ref

    async def list_images(self, image: str = "") -> list[pb.Image]:
        """Images present, optionally only those matching one reference; read-only."""
        request = pb.ListImagesRequest(filter=pb.ImageFilter(image=pb.ImageSpec(image=image)))
        response = await self._image("ListImages", request, pb.ListImagesResponse)
        return list(response.images)

    async def image_status(self, image: str) -> pb.Image | None:
        """The image if present (by tag, digest or id), else None; read-only."""
        request = pb.ImageStatusRequest(image=pb.ImageSpec(image=image))
        response = await self._image("ImageStatus", request, pb.ImageStatusResponse)
        return response.image if response.HasField("image") else None

    async def remove_image(self, image: str) -> None:
        """Remove an image; idempotent."""
        request = pb.RemoveImageRequest(image=pb.ImageSpec(image=image))
        await self._image("RemoveImage", request, pb.RemoveImageResponse)
