"""The runtime manager: turns a pod into CRI calls, and the runtime back into pod states.

Shaped like upstream's ``kuberuntime`` manager, whose order of actions it keeps:

- ``snapshot`` relists the runtime (ListPodSandbox + ListContainers) and groups what carries
  the kubelet's labels by pod UID into ``PodRuntimeState`` values.  Details come from
  PodSandboxStatus and ContainerStatus, cached by id: a sandbox's IPs never change, and a
  container's status only changes with its listed state, so a relist of a quiet node costs
  the two list calls.  An exited container's termination message is read once, from its
  host-side termination-log file (or the tail of its log, for ``FallbackToLogsOnError``).
- ``sync_pod`` is ``computePodActions`` followed by ``SyncPod``: kill the whole pod when its
  sandbox is missing, not ready or changed (a new sandbox gets attempt + 1) unless the pod has
  finished under its restart policy; else kill the containers to restart (spec hash changed,
  liveness/startup failed); prune dead instances and empty old sandboxes (``prune``, which
  the kubelet also runs once a pod has finished: the newest dead instance of each container
  is kept, for ``lastState`` and ``logs --previous``); create the sandbox (with the CRI
  handler of the pod's RuntimeClass: ``runtimeclass``; a new one is kept in ``sandboxes``,
  which the server serves, with the runtime's CNI result, once the kubelet has sent the
  pod's status: ``record_sandbox``, ``network``); start the ephemeral containers that
  never ran (once: they are never restarted, and may start while the pod initializes; with
  ``targetContainerName`` in the target's PID namespace), then the next init container (one
  per sync, each only after the one before exited 0), else every regular container that
  should run and does not.  A start passes CrashLoopBackOff, the image
  (``images.ImagePuller``), the config (``envvars``, ``containers``), CreateContainer,
  StartContainer and the postStart hook; what failed becomes the container's
  ``StartFailure`` for the status, plus the time until a backoff ends.
- ``kill_pod`` stops every running container concurrently (preStop first, its time taken
  from the grace period), then the ready sandboxes; ``remove_pod`` removes containers,
  sandboxes and the pod cgroup.  Both are idempotent.

Expected races (NOT_FOUND after a concurrent removal) are tolerated everywhere; other CRI
errors raise ``CRIError`` to the pod worker, which retries, except those of creating and
starting a container, which are the container's start failure (as upstream's sync result).
The pod cgroup is recorded on the sandbox (``CGROUP_PARENT_ANNOTATION``) so a restarted
kubelet can remove it without the pod.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

import grpc
import msgspec

from kube.api.kinds.core_v1.pod import (
    Container,
    EphemeralContainer,
    LifecycleHandler,
    Pod,
    PodSpec,
)
from kube.api.struct import QuantityValue
from kube.clock import Clock
from node.cri.client import CRIError, RuntimeClient
from node.cri.pb import api_pb2 as pb
from node.kubelet.backoff import BackoffKey, CrashLoopBackOff
from node.kubelet.runtime import containers, envvars, hosts, labels, network, sandbox
from node.kubelet.runtime.cgroups import Cgroups
from node.kubelet.runtime.dns import dns_config
from node.kubelet.runtime.hooks import HookRunner, pod_ref
from node.kubelet.runtime.images import (
    ImagePuller,
    ImagePullError,
    Record,
    SecretGetter,
    grpc_message,
)
from node.kubelet.runtime.options import NodeRuntimeOptions
from node.kubelet.runtime.runtimeclass import RuntimeClasses, RuntimeClassNotFound
from node.kubelet.runtime.state import PodRuntimeState, SandboxState, age
from node.kubelet.status import (
    CRASH_LOOP_BACK_OFF,
    CREATE_CONTAINER_CONFIG_ERROR,
    RUN_CONTAINER_ERROR,
    RuntimeContainer,
    RuntimeState,
    StartFailure,
    container_restarts,
    should_restart,
)

LOG = logging.getLogger("kubelab.kubelet.runtime")

CGROUP_PARENT_ANNOTATION = "io.kubelab.pod.cgroupParent"
CREATE_CONTAINER_ERROR = "CreateContainerError"
POST_START_HOOK_ERROR = "PostStartHookError"
KILL_UNKNOWN = 'Container is in "unknown" state, try killing it before restart'
DEFAULT_GRACE_SECONDS = 30
MINIMUM_GRACE_SECONDS = 2
# Upstream's getTerminationMessage and readLastStringFromContainerLogs limits.
MAX_TERMINATION_MESSAGE_BYTES = 4096
FALLBACK_LOG_LINES = 80
FALLBACK_LOG_BYTES = 2048

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_STATES: Mapping[int, RuntimeState] = {
    pb.CONTAINER_CREATED: "created",
    pb.CONTAINER_RUNNING: "running",
    pb.CONTAINER_EXITED: "exited",
}
_T = TypeVar("_T")


class EventSink(Protocol):
    def event(self, obj: Pod, type: str, reason: str, message: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class PodInputs:
    """What a sync needs besides the pod: volume host paths by name, the env sources, the
    container ids whose liveness or startup probe failed, the node's allocatable."""

    volume_paths: Mapping[str, Path]
    env: envvars.EnvSources
    unhealthy: frozenset[str] = frozenset()
    node_allocatable: Mapping[str, QuantityValue] | None = None


@dataclasses.dataclass(frozen=True)
class SyncResult:
    """Why containers did not start (by name), and seconds until a backoff ends (None: no
    backoff pending)."""

    start_failures: Mapping[str, StartFailure]
    retry_after: float | None


@dataclasses.dataclass
class _Kill:
    container: RuntimeContainer
    message: str


@dataclasses.dataclass
class _Actions:
    """Upstream's ``podActions``."""

    kill_pod: bool
    create_sandbox: bool
    sandbox_id: str
    attempt: int
    init_to_start: list[Container] = dataclasses.field(default_factory=list)
    to_start: list[Container] = dataclasses.field(default_factory=list)
    ephemeral_to_start: list[EphemeralContainer] = dataclasses.field(default_factory=list)
    to_kill: list[_Kill] = dataclasses.field(default_factory=list)


class _StartFailed(Exception):
    def __init__(self, failure: StartFailure, retry_after: float | None = None) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.retry_after = retry_after


def _time(nanoseconds: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(microseconds=nanoseconds // 1000)


def _optional_time(nanoseconds: int) -> datetime.datetime | None:
    return _time(nanoseconds) if nanoseconds else None


def _ips(status: pb.PodSandboxStatus) -> tuple[str, ...]:
    network = status.network
    return tuple(ip for ip in (network.ip, *(a.ip for a in network.additional_ips)) if ip)


def _not_found(error: CRIError) -> bool:
    return error.code == grpc.StatusCode.NOT_FOUND


async def _tolerant(call: Awaitable[None]) -> None:
    """Await a stop or remove; NOT_FOUND (removed concurrently) counts as done."""
    try:
        await call
    except CRIError as error:
        if not _not_found(error):
            raise


def _spec(pod: Pod) -> PodSpec:
    return pod.spec or PodSpec()


def _restarts_on_failure(pod: Pod) -> bool:
    return _spec(pod).restart_policy != "Never"


def _failed(instance: RuntimeContainer) -> bool:
    """Upstream ``isInitContainerFailed``."""
    if instance.reason == "OOMKilled" or instance.state == "unknown":
        return True
    return instance.state == "exited" and instance.exit_code != 0


def _pid_target(container: Container, state: PodRuntimeState) -> str | None:
    """The id of the container whose process namespace an ephemeral container joins
    (upstream ``getTargetID``); raises ``ConfigError`` when the pod has no such container."""
    if not isinstance(container, EphemeralContainer) or not container.target_container_name:
        return None
    target = state.newest(container.target_container_name)
    if target is None:
        raise envvars.ConfigError(
            f"unable to find target container {container.target_container_name}"
        )
    return target.id


def _read_tail(path: Path) -> str:
    """The text of the last lines of a CRI log file, as upstream's fallback message."""
    try:
        lines = path.read_text(errors="replace").splitlines()[-FALLBACK_LOG_LINES:]
    except OSError:
        return ""
    text = ""
    for line in lines:
        parts = line.split(" ", 3)
        if len(parts) < 3:
            continue
        content = parts[3] if len(parts) == 4 else ""
        text += content if parts[2] == "P" else content + "\n"
    return text.encode()[:FALLBACK_LOG_BYTES].decode(errors="ignore")


def _restart_count_from_logs(log_dir: Path) -> int:
    """Upstream ``calcRestartCountByLogDir``: one more than the highest ``<n>.log`` kept, so a
    container the runtime forgot does not overwrite its earlier logs."""
    counts = [int(p.stem) for p in log_dir.glob("*.log") if p.stem.isdigit()]
    return max(counts) + 1 if counts else 0


class RuntimeManager:
    """Pods to CRI calls and back.  One per kubelet; pod workers call it concurrently for
    different pods, never for the same pod at once."""

    def __init__(
        self,
        cri: RuntimeClient,
        options: NodeRuntimeOptions,
        clock: Clock,
        events: EventSink,
        cgroups: Cgroups,
        backoff: CrashLoopBackOff | None = None,
        secrets: SecretGetter | None = None,
        runtime_classes: RuntimeClasses | None = None,
    ) -> None:
        self.cri = cri
        self.runtime_classes = runtime_classes
        self.options = options
        self.clock = clock
        self.events = events
        self.cgroups = cgroups
        self.backoff = backoff or CrashLoopBackOff(clock)
        self.images = ImagePuller(cri, clock, secrets)
        self.hooks = HookRunner(cri, clock)
        self._sandbox_statuses: dict[str, pb.PodSandboxStatus] = {}
        self._container_statuses: dict[str, RuntimeContainer] = {}
        self.sandboxes = network.SandboxLog()
        """The sandboxes this kubelet created lately, with their CNI result (``network``)."""
        self._unrecorded: dict[str, network.SandboxRecord] = {}
        """New sandboxes not yet in ``sandboxes``, by pod UID (``record_sandbox``)."""

    # -- observing ----------------------------------------------------------------------------

    async def snapshot(self) -> dict[str, PodRuntimeState]:
        """Every pod the runtime has sandboxes or containers of, by UID."""
        items, instances = await asyncio.gather(
            self.cri.list_pod_sandbox(), self.cri.list_containers()
        )
        states = await self._states(items, instances)
        alive = {s.id for s in items}
        self._sandbox_statuses = {k: v for k, v in self._sandbox_statuses.items() if k in alive}
        alive = {c.id for c in instances}
        self._container_statuses = {k: v for k, v in self._container_statuses.items() if k in alive}
        return states

    async def observe(self, pod_uid: str) -> PodRuntimeState:
        """One pod's state (empty when the runtime has nothing of it)."""
        selector = {labels.POD_UID_LABEL: pod_uid}
        items, instances = await asyncio.gather(
            self.cri.list_pod_sandbox(labels=selector), self.cri.list_containers(labels=selector)
        )
        states = await self._states(items, instances)
        return states.get(pod_uid, PodRuntimeState(uid=pod_uid))

    async def _states(
        self, items: Sequence[pb.PodSandbox], instances: Sequence[pb.Container]
    ) -> dict[str, PodRuntimeState]:
        names: dict[str, tuple[str, str]] = {}
        sandboxes: dict[str, list[SandboxState]] = {}
        found: dict[str, list[RuntimeContainer]] = {}
        for item in items:
            uid = item.labels.get(labels.POD_UID_LABEL)
            if uid is None:
                continue
            names[uid] = (
                item.labels.get(labels.POD_NAMESPACE_LABEL, ""),
                item.labels.get(labels.POD_NAME_LABEL, ""),
            )
            state = await self._sandbox(item)
            if state is not None:
                sandboxes.setdefault(uid, []).append(state)
        for instance in instances:
            info = labels.container_info(instance.labels, instance.annotations)
            if info is None:
                continue
            names.setdefault(info.pod_uid, (info.pod_namespace, info.pod_name))
            container = await self._container(instance, info)
            if container is not None:
                found.setdefault(info.pod_uid, []).append(container)
        return {
            uid: PodRuntimeState(
                uid=uid,
                namespace=namespace,
                name=name,
                sandboxes=tuple(
                    sorted(
                        sandboxes.get(uid, ()),
                        key=lambda s: (s.attempt, s.created_at),
                        reverse=True,
                    )
                ),
                containers=tuple(found.get(uid, ())),
            )
            for uid, (namespace, name) in names.items()
        }

    async def _sandbox(self, item: pb.PodSandbox) -> SandboxState | None:
        status = self._sandbox_statuses.get(item.id)
        if status is None:
            try:
                status = await self.cri.pod_sandbox_status(item.id)
            except CRIError as error:
                if _not_found(error):
                    return None
                raise
            self._sandbox_statuses[item.id] = status
        return SandboxState(
            id=item.id,
            attempt=item.metadata.attempt,
            ready=item.state == pb.SANDBOX_READY,
            created_at=_time(item.created_at),
            ips=_ips(status),
            host_network=status.linux.namespaces.options.network == pb.NODE,
            cgroup_parent=item.annotations.get(CGROUP_PARENT_ANNOTATION, ""),
        )

    async def _container(
        self, instance: pb.Container, info: labels.ContainerInfo
    ) -> RuntimeContainer | None:
        state = _STATES.get(instance.state, "unknown")
        cached = self._container_statuses.get(instance.id)
        if cached is not None and cached.state == state:
            return cached
        try:
            status = await self.cri.container_status(instance.id)
        except CRIError as error:
            if _not_found(error):
                return None
            raise
        state = _STATES.get(status.state, "unknown")
        message = status.message
        if state == "exited":
            extra = self._termination_message(info, status)
            if extra:
                message = f"{message}: {extra}" if message else extra
        container = RuntimeContainer(
            id=status.id,
            name=info.container_name,
            image=status.image.image,
            image_ref=status.image_ref,
            state=state,
            created_at=_time(status.created_at),
            started_at=_optional_time(status.started_at),
            finished_at=_optional_time(status.finished_at),
            exit_code=status.exit_code,
            reason=status.reason,
            message=message,
            restart_count=info.restart_count,
            spec_hash=info.hash,
            sandbox_id=instance.pod_sandbox_id,
            grace_seconds=info.termination_grace_seconds,
            pre_stop=info.pre_stop,
        )
        self._container_statuses[instance.id] = container
        return container

    def _termination_message(self, info: labels.ContainerInfo, status: pb.ContainerStatus) -> str:
        path = containers.termination_log_path(
            self.options, info.pod_uid, info.container_name, info.restart_count
        )
        try:
            with path.open("rb") as log:
                text = log.read(MAX_TERMINATION_MESSAGE_BYTES).decode(errors="replace")
        except OSError:
            text = ""
        fallback = info.termination_message_policy == "FallbackToLogsOnError"
        if not text and fallback and status.exit_code != 0 and status.log_path:
            text = _read_tail(Path(status.log_path))
        return text

    # -- syncing ------------------------------------------------------------------------------

    async def sync_pod(self, pod: Pod, state: PodRuntimeState, inputs: PodInputs) -> SyncResult:
        """Bring the runtime one step closer to ``pod``: see the module docstring."""
        actions = self._compute_actions(pod, state, inputs)
        if actions.create_sandbox and actions.sandbox_id:
            self._event(
                pod,
                "Normal",
                "SandboxChanged",
                "Pod sandbox changed, it will be killed and re-created.",
            )
        removed: set[str] = set()
        if actions.kill_pod:
            await self.kill_pod(pod, state, None)
            if actions.create_sandbox:
                inits = {c.name for c in _spec(pod).init_containers or ()}
                doomed = [c for c in state.containers if c.name in inits]
                await self._remove_containers(doomed, removed)
        else:
            await asyncio.gather(
                *(
                    self._kill_container(pod, k.container, None, k.message, state.pod_ips)
                    for k in actions.to_kill
                )
            )
        await self.prune(state, removed)
        ephemeral = [] if actions.kill_pod else actions.ephemeral_to_start
        groups = (ephemeral, actions.init_to_start, actions.to_start)
        if not (actions.create_sandbox or any(groups)):
            return SyncResult({}, None)
        config = self._sandbox_config(pod, actions.attempt, actions.create_sandbox)
        sandbox_id, ips = await self._ensure_sandbox(pod, state, actions, config)
        etc_hosts = hosts.write_etc_hosts(pod, ips, self.options)
        failures: dict[str, StartFailure] = {}
        retries: list[float] = []
        for group in groups:
            for container in group:
                try:
                    await self._start(
                        pod, container, state, sandbox_id, config, ips, etc_hosts, inputs
                    )
                except _StartFailed as failed:
                    failures[container.name or ""] = failed.failure
                    if failed.retry_after is not None:
                        retries.append(failed.retry_after)
                    if group is actions.init_to_start:
                        return SyncResult(failures, min(retries, default=None))
        return SyncResult(failures, min(retries, default=None))

    def _event(self, pod: Pod, type: str, reason: str, message: str) -> None:
        self.events.event(pod, type, reason, message)

    def _compute_actions(self, pod: Pod, state: PodRuntimeState, inputs: PodInputs) -> _Actions:
        """Upstream ``computePodActions``."""
        spec = _spec(pod)
        create, attempt, sandbox_id = self._sandbox_changed(pod, state)
        actions = _Actions(
            kill_pod=create, create_sandbox=create, sandbox_id=sandbox_id, attempt=attempt
        )
        if create:
            if not _restarts_on_failure(pod) and attempt != 0 and state.containers:
                actions.create_sandbox = False
                return actions
            to_start = [
                c
                for c in spec.containers or ()
                if not (spec.restart_policy == "OnFailure" and self._succeeded(c, state))
            ]
            if not to_start:
                actions.create_sandbox = False
            elif spec.init_containers:
                actions.init_to_start = [spec.init_containers[0]]
            else:
                actions.to_start = to_start
            return actions
        # Ephemeral containers start even while the pod initializes, once: never again.
        actions.ephemeral_to_start = [
            c for c in spec.ephemeral_containers or () if state.newest(c.name or "") is None
        ]
        if not self._init_actions(pod, state, actions) or actions.kill_pod:
            return actions
        keep = 0
        for container in spec.containers or ():
            newest = state.newest(container.name or "")
            if newest is None or newest.state != "running":
                if should_restart(pod, container, newest):
                    actions.to_start.append(container)
                    if newest is not None and newest.state == "unknown":
                        actions.to_kill.append(_Kill(newest, KILL_UNKNOWN))
                continue
            restart = _restarts_on_failure(pod)
            if newest.spec_hash and newest.spec_hash != labels.container_hash(container):
                message = f"Container {container.name} definition changed"
                restart = True
            elif newest.id in inputs.unhealthy:
                message = f"Container {container.name} failed liveness probe"
            else:
                keep += 1
                continue
            if restart:
                message += ", will be restarted"
                actions.to_start.append(container)
            actions.to_kill.append(_Kill(newest, message))
        if keep == 0 and not actions.to_start:
            actions.kill_pod = True
            actions.init_to_start = []
        return actions

    @staticmethod
    def _succeeded(container: Container, state: PodRuntimeState) -> bool:
        newest = state.newest(container.name or "")
        return newest is not None and newest.state == "exited" and newest.exit_code == 0

    @staticmethod
    def _sandbox_changed(pod: Pod, state: PodRuntimeState) -> tuple[bool, int, str]:
        """Upstream ``PodSandboxChanged``: (create a new one, its attempt, the current id)."""
        newest = state.sandbox
        if newest is None:
            return True, 0, ""
        if sum(s.ready for s in state.sandboxes) > 1 or not newest.ready:
            return True, newest.attempt + 1, newest.id
        host_network = bool(_spec(pod).host_network)
        if newest.host_network != host_network:
            return True, newest.attempt + 1, ""
        if not host_network and not newest.ips:
            return True, newest.attempt + 1, newest.id
        return False, newest.attempt, newest.id

    def _init_actions(self, pod: Pod, state: PodRuntimeState, actions: _Actions) -> bool:
        """Upstream's init container progress: whether initialization is done; sets the
        init containers to (re)start, or kills the pod when one failed for good.  Sidecars
        (restartable init containers) are started in order and restarted when they exit."""
        spec = _spec(pod)
        inits = spec.init_containers or []
        if not inits:
            return True
        regular = {c.name for c in spec.containers or ()}
        if any(c.name in regular and c.state == "running" for c in state.containers):
            for container in inits:
                newest = state.newest(container.name or "")
                if container.is_sidecar() and (newest is None or newest.state != "running"):
                    actions.init_to_start.append(container)
            return True
        for container in inits:
            newest = state.newest(container.name or "")
            if newest is None or newest.state == "created":
                actions.init_to_start.append(container)
                return False
            if container.is_sidecar():
                if newest.state != "running":
                    actions.init_to_start.append(container)
                continue
            if newest.state == "running":
                return False
            if _failed(newest):
                if not container_restarts(container, spec, newest.exit_code or 1):
                    actions.kill_pod = True
                    return False
                if newest.state == "unknown":
                    actions.to_kill.append(_Kill(newest, KILL_UNKNOWN))
                actions.init_to_start.append(container)
                return False
        return True

    async def _ensure_sandbox(
        self, pod: Pod, state: PodRuntimeState, actions: _Actions, config: pb.PodSandboxConfig
    ) -> tuple[str, tuple[str, ...]]:
        """The sandbox to start containers in, and the pod's IPs (the node's for
        hostNetwork pods), creating the sandbox if the actions say so."""
        current = state.sandbox
        if actions.create_sandbox or current is None:
            try:
                handler = self._runtime_handler(pod)
            except RuntimeClassNotFound as error:
                self._sandbox_failed(pod, str(error))
                raise
            try:
                sandbox_id = await self.cri.run_pod_sandbox(config, handler)
            except CRIError as error:
                self._sandbox_failed(pod, grpc_message(error))
                raise
            status = await self.cri.pod_sandbox_status(sandbox_id)
            if self.options.sandbox_log:
                self._sandbox_created(pod, sandbox_id)
            self._sandbox_statuses[sandbox_id] = status
            ips = _ips(status)
        else:
            sandbox_id, ips = current.id, current.ips
        return sandbox_id, (self.options.node_ips if _spec(pod).host_network else ips)

    def _sandbox_created(self, pod: Pod, sandbox_id: str) -> None:
        meta = pod.metadata
        uid = meta.uid or ""
        self._unrecorded[uid] = network.SandboxRecord(
            meta.namespace or "", meta.name or "", uid, sandbox_id, self.clock.now(), ()
        )

    async def record_sandbox(self, pod_uid: str) -> None:
        """Log the pod's new sandbox, if it has one not yet logged, with the CNI result the
        runtime's verbose PodSandboxStatus tells (``network``).  The kubelet calls this once
        the pod's status is sent: the verbose answer is containerd's whole sandbox info (its
        OCI spec too), and nothing on the pod's way to Running needs it.  A runtime that
        cannot answer any more (the sandbox removed behind the kubelet's back) leaves a
        record without interfaces."""
        new = self._unrecorded.pop(pod_uid, None)
        if new is None:
            return
        try:
            _, info = await self.cri.pod_sandbox_info(new.sandbox_id)
        except CRIError as error:
            LOG.warning("sandbox %s of pod %s: %s", new.sandbox_id, pod_uid, grpc_message(error))
            info = {}
        self.sandboxes.add(dataclasses.replace(new, interfaces=network.cni_interfaces(info)))

    def _runtime_handler(self, pod: Pod) -> str:
        """The CRI handler of the pod's RuntimeClass ("" without a class, or without the
        classes' informer, as in tests that need none)."""
        if self.runtime_classes is None:
            return ""
        return self.runtime_classes.runtime_handler(_spec(pod).runtime_class_name)

    def _sandbox_failed(self, pod: Pod, message: str) -> None:
        self._event(
            pod, "Warning", "FailedCreatePodSandBox", f"Failed to create pod sandbox: {message}"
        )

    def _sandbox_config(self, pod: Pod, attempt: int, creating: bool) -> pb.PodSandboxConfig:
        """The sandbox's config, its pod cgroup recorded in an annotation.  When the sandbox
        is being created, a DNS warning or a config that cannot be made is an event; the
        latter raises ``ConfigError``."""
        dns, warning = dns_config(pod, self.options)
        if warning and creating:
            self._event(pod, "Warning", "DNSConfigForming", warning)
        try:
            config = sandbox.sandbox_config(pod, attempt, self.options, dns=dns)
        except envvars.ConfigError as error:
            if creating:
                self._sandbox_failed(pod, str(error))
            raise
        if config.linux.cgroup_parent:
            config.annotations[CGROUP_PARENT_ANNOTATION] = config.linux.cgroup_parent
        return config

    async def _start(
        self,
        pod: Pod,
        container: Container,
        state: PodRuntimeState,
        sandbox_id: str,
        sandbox_config: pb.PodSandboxConfig,
        ips: tuple[str, ...],
        etc_hosts: Path | None,
        inputs: PodInputs,
    ) -> None:
        """Upstream ``doBackOff`` + ``startContainer``; raises ``_StartFailed``."""
        name = container.name or ""
        meta = pod.metadata
        exited = [c for c in state.containers if c.name == name and c.state == "exited"]
        if exited:
            last = max(exited, key=age)
            key = BackoffKey(meta.uid or "", name, labels.container_hash(container))
            finished = last.finished_at or last.created_at
            remaining = self.backoff.in_backoff(key, finished)
            if remaining > 0:
                self._event(
                    pod,
                    "Warning",
                    "BackOff",
                    f"Back-off restarting failed container {name} in pod {pod_ref(pod)}",
                )
                failure = StartFailure(CRASH_LOOP_BACK_OFF, self.backoff.message(key, pod))
                raise _StartFailed(failure, remaining)
            self.backoff.record_exit(key, finished)

        def record(type: str, reason: str, message: str) -> None:
            self._event(pod, type, reason, message)

        try:
            await self.images.ensure(pod, container, sandbox_config, record)
        except ImagePullError as error:
            record("Warning", "Failed", f"Error: {error.reason}")
            raise _StartFailed(
                StartFailure(error.reason, error.message), error.retry_after
            ) from None
        newest = state.newest(name)
        if newest is not None:
            restart_count = newest.restart_count + 1
        else:
            log_dir = self.options.pod_log_dir(
                meta.namespace or "", meta.name or "", meta.uid or ""
            )
            restart_count = _restart_count_from_logs(log_dir / name)
        try:
            env = await envvars.container_env(
                pod,
                container,
                inputs.env,
                pod_ips=ips,
                host_ips=self.options.node_ips,
                node_name=self.options.node_name,
                node_allocatable=inputs.node_allocatable,
            )
            config = containers.container_config(
                pod,
                container,
                restart_count=restart_count,
                env=env,
                volume_paths=inputs.volume_paths,
                etc_hosts=etc_hosts,
                options=self.options,
                pid_target=_pid_target(container, state),
            )
        except envvars.ConfigError as error:
            record("Warning", "Failed", f"Error: {error}")
            raise _StartFailed(StartFailure(CREATE_CONTAINER_CONFIG_ERROR, str(error))) from None
        container_id = await self._cri_step(
            self.cri.create_container(sandbox_id, config, sandbox_config),
            record,
            CREATE_CONTAINER_ERROR,
        )
        record("Normal", "Created", f"Created container {name}")
        await self._cri_step(self.cri.start_container(container_id), record, RUN_CONTAINER_ERROR)
        record("Normal", "Started", f"Started container {name}")
        post_start = container.lifecycle.post_start if container.lifecycle else None
        if post_start is None:
            return
        problem = await self.hooks.run(pod, container, container_id, post_start, ips)
        if problem is None:
            return
        record("Warning", "FailedPostStartHook", "PostStartHook failed")
        started = RuntimeContainer(
            id=container_id,
            name=name,
            image=container.image or "",
            image_ref="",
            state="running",
            created_at=self.clock.now(),
        )
        await self._kill_container(pod, started, None, "FailedPostStartHook", ips, pre_stop=False)
        raise _StartFailed(StartFailure(POST_START_HOOK_ERROR, problem))

    @staticmethod
    async def _cri_step(call: Awaitable[_T], record: Record, reason: str) -> _T:
        """A CreateContainer or StartContainer: its failure is the container's, except a
        runtime that is down (UNAVAILABLE), which the pod worker retries."""
        try:
            return await call
        except CRIError as error:
            if error.code == grpc.StatusCode.UNAVAILABLE:
                raise
            record("Warning", "Failed", f"Error: {error.details}")
            raise _StartFailed(StartFailure(reason, error.details)) from None

    async def prune(self, state: PodRuntimeState, removed: set[str] | None = None) -> None:
        """Container GC for one pod (upstream's, with MaxPerPodContainer 1): only the newest
        dead instance of each container stays, the one ``lastState`` names; dead sandboxes
        without containers go, except the newest of them.  ``removed`` collects the ids of
        the containers removed (already removed ones are skipped)."""
        removed = set() if removed is None else removed
        dead: dict[str, list[RuntimeContainer]] = {}
        for instance in state.containers:
            if instance.state in ("exited", "unknown") and instance.id not in removed:
                dead.setdefault(instance.name, []).append(instance)
        doomed = [
            instance
            for instances in dead.values()
            for instance in sorted(instances, key=age, reverse=True)[1:]
        ]
        await self._remove_containers(doomed, removed)
        used = {c.sandbox_id for c in state.containers if c.id not in removed}
        inactive = [s for s in state.sandboxes if not s.ready and s.id not in used]
        for old in inactive[1:]:
            await self.cri.remove_pod_sandbox(old.id)
            self._sandbox_statuses.pop(old.id, None)

    async def _remove_containers(
        self, doomed: Iterable[RuntimeContainer], removed: set[str]
    ) -> None:
        for instance in doomed:
            await _tolerant(self.cri.remove_container(instance.id))
            self._container_statuses.pop(instance.id, None)
            removed.add(instance.id)

    # -- killing and removing -----------------------------------------------------------------

    async def kill_pod(
        self, pod: Pod | None, state: PodRuntimeState, grace_seconds: int | None
    ) -> None:
        """Stop every running container concurrently, then every ready sandbox.  The grace
        period is ``grace_seconds``, else the pod's, else the one stored on the container
        (a pod that is gone), else 30 s; a preStop hook runs first within it.  Idempotent."""
        running = [c for c in state.containers if c.state in ("running", "unknown")]
        await asyncio.gather(
            *(self._kill_container(pod, c, grace_seconds, "", state.pod_ips) for c in running)
        )
        for current in state.sandboxes:
            if current.ready:
                await _tolerant(self.cri.stop_pod_sandbox(current.id))

    async def _kill_container(
        self,
        pod: Pod | None,
        instance: RuntimeContainer,
        grace_override: int | None,
        message: str,
        ips: Sequence[str],
        *,
        pre_stop: bool = True,
    ) -> None:
        """Upstream ``killContainer``: Killing event, preStop within the grace period, then
        StopContainer with what is left (at least 2 s unless the grace period is 0)."""
        spec = self._container_spec(pod, instance.name)
        grace = self._grace(pod, instance, grace_override)
        if pod is not None:
            self._event(pod, "Normal", "Killing", message or f"Stopping container {instance.name}")
        handler = self._pre_stop(spec, instance) if pre_stop else None
        timeout = grace
        if handler is not None and grace > 0 and instance.state == "running":
            started = self.clock.monotonic()
            await self._run_pre_stop(pod, spec, instance, handler, grace, ips)
            timeout -= int(self.clock.monotonic() - started)
        if grace > 0:
            timeout = max(timeout, MINIMUM_GRACE_SECONDS)
        await _tolerant(self.cri.stop_container(instance.id, timeout))

    def _grace(self, pod: Pod | None, instance: RuntimeContainer, override: int | None) -> int:
        if override is not None:
            return override
        if pod is not None:
            if pod.metadata.deletion_grace_period_seconds is not None:
                return pod.metadata.deletion_grace_period_seconds
            if _spec(pod).termination_grace_period_seconds is not None:
                return _spec(pod).termination_grace_period_seconds or 0
        if instance.grace_seconds is not None:
            return instance.grace_seconds
        return DEFAULT_GRACE_SECONDS

    @staticmethod
    def _container_spec(pod: Pod | None, name: str) -> Container:
        if pod is not None:
            spec = _spec(pod)
            every: list[Container] = [*(spec.containers or ()), *(spec.init_containers or ())]
            for container in every:
                if container.name == name:
                    return container
        return Container(name=name)

    @staticmethod
    def _pre_stop(spec: Container, instance: RuntimeContainer) -> LifecycleHandler | None:
        if spec.lifecycle is not None:
            return spec.lifecycle.pre_stop
        if not instance.pre_stop:
            return None
        try:
            return msgspec.json.decode(instance.pre_stop, type=LifecycleHandler)
        except msgspec.DecodeError as error:
            LOG.warning("unreadable preStop handler on container %s: %s", instance.id, error)
            return None

    async def _run_pre_stop(
        self,
        pod: Pod | None,
        spec: Container,
        instance: RuntimeContainer,
        handler: LifecycleHandler,
        grace: int,
        ips: Sequence[str],
    ) -> None:
        """Run the preStop hook for at most ``grace`` seconds (upstream ``executePreStopHook``)."""
        subject = pod or Pod()
        hook = asyncio.ensure_future(self.hooks.run(subject, spec, instance.id, handler, ips))
        deadline = asyncio.ensure_future(self.clock.sleep(grace))
        try:
            await asyncio.wait({hook, deadline}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            deadline.cancel()
            hook.cancel()
        if not hook.done() or hook.cancelled():
            problem: str | None = f"preStop hook did not finish within {grace}s"
        elif hook.exception() is not None:
            problem = str(hook.exception())
        else:
            problem = hook.result()
        if problem is not None and pod is not None:
            self._event(pod, "Warning", "FailedPreStopHook", "PreStopHook failed")
            LOG.info("preStop hook of %s failed: %s", instance.id, problem)

    async def remove_pod(self, state: PodRuntimeState) -> None:
        """Remove every container and sandbox of the pod, then its cgroup.  Idempotent; the
        pod's containers must have been stopped (``kill_pod``)."""
        await self.record_sandbox(state.uid)
        await self._remove_containers(state.containers, set())
        for current in state.sandboxes:
            await _tolerant(self.cri.remove_pod_sandbox(current.id))
            self._sandbox_statuses.pop(current.id, None)
        for parent in dict.fromkeys(s.cgroup_parent for s in state.sandboxes if s.cgroup_parent):
            self.cgroups.remove(parent)
        self.backoff.forget_pod(state.uid)
        self.images.forget_pod(state.uid)
