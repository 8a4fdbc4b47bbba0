"""Pod status from what the kubelet saw: upstream's ``generateAPIPodStatus``, pure.

The pod worker gathers an ``Observation`` (the pod's containers as CRI reported them, the
sandbox and its IPs, probe results, the reasons recent starts failed, the node's IPs and the
time) and ``generate_pod_status`` turns it, with the pod and the status last computed for it,
into the complete ``PodStatus`` to send through the ``status`` subresource.  Nothing here does
I/O or keeps state, so every rule is table-tested.

The rules, and the upstream function each one follows:

- container statuses (``convertToAPIContainerStatuses``): the newest runtime instance of a
  container is its state, the one before it its lastState; a container with no instance
  waits as ``ContainerCreating`` (``PodInitializing`` when the pod has init containers); one
  that will be started again and whose last start failed waits with the failure's reason
  and message (the reason cache: ``CrashLoopBackOff``, ``ErrImagePull``, ``ImagePullBackOff``,
  ``CreateContainerConfigError``, ...), its terminated state moving to lastState;
  terminated statuses are never rewritten; regular statuses sorted by name, init statuses
  in spec order;
- started and ready (the probe manager's ``UpdatePodStatus``): started when running and the
  startup probe succeeded (or there is none); ready when started, running and the readiness
  probe succeeded (or there is none); a regular init container is ready once it exited 0;
- phase (``getPhase``), including init containers, sidecars (restartable init containers),
  restart policies and the container-level restart policy, then the three-way merge that
  keeps a terminal phase terminal, and ``activeDeadlineSeconds``;
- conditions (``status/generate.go``): PodReadyToStartContainers, Initialized, Ready (with
  readiness gates) and ContainersReady, PodScheduled; conditions the kubelet does not own
  are kept from the API, DisruptionTarget from the previous status; ``lastTransitionTime``
  kept while a condition's status does not change (the status manager's part);
- IPs (``sortPodIPs``): the first address of the node's family, then the first of the other;
  host-network pods take the node's IPs;
- times are cut to whole seconds, as the API stores them, so that recomputing an unchanged
  status gives an equal one; ``status_changed`` is ``!isPodStatusByKubeletEqual``.

Container IDs come out as ``<runtime>://<id>`` (``containerd://...``), image IDs are the
runtime's image ref.  Ephemeral containers get statuses like regular ones, never probed.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, NamedTuple

import msgspec

from kube.api.kinds.core_v1.pod import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    HostIP,
    Pod,
    PodCondition,
    PodIP,
    PodSpec,
    PodStatus,
    qos_class,
)
from node.kubelet.staticpods import is_static_pod

# Waiting reasons the kubelet itself gives.
CONTAINER_CREATING = "ContainerCreating"
POD_INITIALIZING = "PodInitializing"
# Reasons a start failure is recorded with (the pod worker's reason cache).
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
ERR_IMAGE_PULL = "ErrImagePull"
IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
RUN_CONTAINER_ERROR = "RunContainerError"
# Condition reasons.
UNKNOWN_CONTAINER_STATUSES = "UnknownContainerStatuses"
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"
DEADLINE_EXCEEDED = "DeadlineExceeded"

# Condition types.
POD_SCHEDULED = "PodScheduled"
POD_READY_TO_START_CONTAINERS = "PodReadyToStartContainers"
INITIALIZED = "Initialized"
CONTAINERS_READY = "ContainersReady"
READY = "Ready"
DISRUPTION_TARGET = "DisruptionTarget"
KUBELET_CONDITIONS = frozenset(
    {
        POD_SCHEDULED,
        POD_READY_TO_START_CONTAINERS,
        INITIALIZED,
        CONTAINERS_READY,
        READY,
        "PodResizePending",
        "PodResizeInProgress",
    }
)
SHARED_CONDITIONS = frozenset({DISRUPTION_TARGET})
TERMINAL_PHASES = ("Succeeded", "Failed")

RuntimeState = Literal["created", "running", "exited", "unknown"]


@dataclasses.dataclass(frozen=True)
class RuntimeContainer:
    """One container instance as CRI reported it (``ContainerStatus``)."""

    id: str
    name: str
    image: str
    image_ref: str
    state: RuntimeState
    created_at: datetime.datetime
    started_at: datetime.datetime | None = None
    finished_at: datetime.datetime | None = None
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    restart_count: int = 0
    """The restart count the kubelet stored on this instance (its attempt)."""
    spec_hash: str = ""
    """The hash of the container spec it was created from (restart when the spec's differs)."""
    sandbox_id: str = ""
    grace_seconds: int | None = None
    """The pod's grace period stored on it, for killing it when the pod is gone."""
    pre_stop: str = ""
    """The preStop handler stored on it (JSON, "" for none), for the same reason."""


class StartFailure(NamedTuple):
    """Why the last attempt to start a container failed: a waiting reason and message."""

    reason: str
    message: str = ""


@dataclasses.dataclass(frozen=True)
class Observation:
    """Everything besides the pod that the status depends on.

    ``containers`` holds every instance the runtime still has, any order.  ``readiness`` and
    ``startup`` map a container *ID* (the bare CRI id) to the probe's current verdict; a
    container whose probe has no verdict yet is neither ready nor started.
    ``start_failures`` maps a container *name* to the reason its last start failed.
    ``terminal`` says the pod worker has decided the pod is done (it will restart nothing).
    """

    now: datetime.datetime
    node_ips: Sequence[str] = ()
    containers: Sequence[RuntimeContainer] = ()
    sandbox_ready: bool = False
    pod_ips: Sequence[str] = ()
    readiness: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    startup: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    start_failures: Mapping[str, StartFailure] = dataclasses.field(default_factory=dict)
    terminal: bool = False
    runtime_type: str = "containerd"

    def newest(self, name: str) -> RuntimeContainer | None:
        """The most recently created instance of the container ``name``."""
        return next((c for c in self.by_age() if c.name == name), None)

    def by_age(self) -> list[RuntimeContainer]:
        """The instances, newest first."""
        return sorted(self.containers, key=lambda c: c.created_at, reverse=True)


def generate_pod_status(
    pod: Pod, seen: Observation, previous: PodStatus | None = None
) -> PodStatus:
    """The status to report for ``pod``.  ``previous`` is the status the kubelet last
    computed for it (``pod.status``, as the API has it, when there is none)."""
    spec = pod.spec or PodSpec()
    api = pod.status or PodStatus()
    old = previous or api
    has_init = bool(spec.init_containers)
    ephemeral = [Container(name=c.name, image=c.image) for c in spec.ephemeral_containers or ()]
    status = PodStatus(
        qos_class=qos_class(spec),
        init_container_statuses=_container_statuses(
            pod, seen, old.init_container_statuses, spec.init_containers or [], True, has_init
        ),
        container_statuses=_container_statuses(
            pod, seen, old.container_statuses, spec.containers or [], False, has_init
        ),
        ephemeral_container_statuses=_container_statuses(
            pod, seen, old.ephemeral_container_statuses, ephemeral, False, has_init
        )
        or None,
    )
    _set_probe_results(spec, status, seen)
    everything = [*(status.container_statuses or ()), *(status.init_container_statuses or ())]
    status.phase = pod_phase(pod, everything, seen.terminal, _any_regular_running(spec, seen))
    if status.phase not in TERMINAL_PHASES:
        if old.phase in TERMINAL_PHASES:
            status.phase = old.phase
        elif api.phase in TERMINAL_PHASES:
            status.phase = api.phase
    if status.phase == old.phase:
        status.reason = old.reason or api.reason
        status.message = old.message or api.message
    start_time = old.start_time or _second(seen.now)
    deadline = spec.active_deadline_seconds
    if deadline is not None and (seen.now - start_time).total_seconds() >= deadline:
        status.phase = "Failed"
        status.reason = DEADLINE_EXCEEDED
        status.message = "Pod was active on the node longer than the specified deadline"
    if api.phase in TERMINAL_PHASES:
        status.phase = api.phase
    status.conditions = _conditions(pod, old, api, status, seen)
    _set_ips(spec, status, seen)
    status.start_time = start_time
    status.observed_generation = pod.metadata.generation
    return status


def _second(moment: datetime.datetime) -> datetime.datetime:
    """A time as the API keeps it: whole seconds."""
    return moment.replace(microsecond=0)


def _maybe_second(moment: datetime.datetime | None) -> datetime.datetime | None:
    return None if moment is None else _second(moment)


# Container statuses.


def _convert(instance: RuntimeContainer, runtime_type: str) -> ContainerStatus:
    """One runtime instance as an API container status."""
    container_id = f"{runtime_type}://{instance.id}"
    state = ContainerState()
    if instance.state == "running":
        state.running = ContainerStateRunning(started_at=_maybe_second(instance.started_at))
    elif instance.state == "exited":
        state.terminated = ContainerStateTerminated(
            exit_code=instance.exit_code,
            reason=instance.reason or None,
            message=instance.message or None,
            started_at=_maybe_second(instance.started_at),
            finished_at=_maybe_second(instance.finished_at),
            container_id=container_id,
        )
    else:  # created or unknown: waiting to run, which keeps the pod Pending
        state.waiting = ContainerStateWaiting()
    return ContainerStatus(
        name=instance.name,
        state=state,
        last_state=ContainerState(),
        restart_count=instance.restart_count,
        image=instance.image,
        image_id=instance.image_ref,
        container_id=container_id,
    )


def _container_statuses(
    pod: Pod,
    seen: Observation,
    previous: list[ContainerStatus] | None,
    containers: list[Container],
    is_init: bool,
    has_init: bool,
) -> list[ContainerStatus]:
    default = POD_INITIALIZING if has_init else CONTAINER_CREATING
    olds = {s.name or "": s for s in previous or ()}
    statuses: dict[str, ContainerStatus] = {}
    for container in containers:
        name = container.name or ""
        old = olds.get(name)
        if old is not None and old.state is not None and old.state.terminated is not None:
            statuses[name] = copy.deepcopy(old)
            continue
        statuses[name] = ContainerStatus(
            name=name,
            image=container.image,
            state=ContainerState(waiting=ContainerStateWaiting(reason=default)),
            restart_count=old.restart_count if old is not None else 0,
            last_state=copy.deepcopy(old.last_state) if old is not None else ContainerState(),
        )
    _infer_vanished(pod, seen, olds, statuses, default)
    seen_count: dict[str, int] = {}
    for instance in seen.by_age():
        if instance.name not in statuses or seen_count.get(instance.name, 0) >= 2:
            continue
        converted = _convert(instance, seen.runtime_type)
        if seen_count.get(instance.name, 0) == 0:
            statuses[instance.name] = converted
        else:
            statuses[instance.name].last_state = converted.state
        seen_count[instance.name] = seen_count.get(instance.name, 0) + 1
    for container in containers:
        _apply_start_failure(pod, seen, container, is_init, statuses[container.name or ""])
    if is_init:
        return [statuses[c.name or ""] for c in containers]
    return sorted(statuses.values(), key=lambda s: s.name or "")


def _infer_vanished(
    pod: Pod,
    seen: Observation,
    olds: Mapping[str, ContainerStatus],
    statuses: Mapping[str, ContainerStatus],
    default: str,
) -> None:
    """A container that was running and that the runtime no longer has terminated, exit code
    unknown: say so in lastState (so the pod does not fall back to Pending) and count it."""
    present = {c.name for c in seen.containers}
    for name, status in statuses.items():
        old = olds.get(name)
        if name in present or old is None or old.state is None or old.state.running is None:
            continue
        waiting = status.state.waiting if status.state else None
        if waiting is None or waiting.reason != default:
            continue
        if status.last_state is not None and status.last_state.terminated is not None:
            continue
        status.last_state = ContainerState(
            terminated=ContainerStateTerminated(
                reason="ContainerStatusUnknown",
                message="The container could not be located when the pod was deleted.  "
                "The container used to be Running",
                exit_code=137,
            )
        )
        if pod.metadata.deletion_timestamp is None:
            status.restart_count = (status.restart_count or 0) + 1


def _apply_start_failure(
    pod: Pod, seen: Observation, container: Container, is_init: bool, status: ContainerStatus
) -> None:
    """A container the next sync will start again waits with its last start failure."""
    name = container.name or ""
    newest = seen.newest(name)
    if is_init:
        if newest is not None and newest.state == "exited" and newest.exit_code == 0:
            return
        if (
            newest is None
            and not container.is_sidecar()
            and _any_regular_created(pod.spec or PodSpec(), seen)
            and status.state is not None
            and status.state.waiting is not None
        ):
            status.state = ContainerState(
                terminated=ContainerStateTerminated(
                    reason="Completed",
                    message="Unable to get init container status from container runtime and "
                    "pod has been initialized, treat it as exited normally",
                    exit_code=0,
                )
            )
            return
    if not should_restart(pod, container, newest):
        return
    failure = seen.start_failures.get(name)
    if failure is None:
        return
    if status.state is not None and status.state.terminated is not None:
        status.last_state = status.state
    status.state = ContainerState(
        waiting=ContainerStateWaiting(reason=failure.reason, message=failure.message or None)
    )


def container_restarts(container: Container, spec: PodSpec, exit_code: int) -> bool:
    """Whether a container that exited with ``exit_code`` is started again: its restart
    rules, then its own restart policy, then the pod's (upstream ``ContainerShouldRestart``)."""
    for rule in container.restart_policy_rules or ():
        codes = rule.exit_codes
        if codes is None:
            continue
        listed = exit_code in (codes.values or ())
        if listed == (codes.operator == "In"):
            return rule.action == "Restart"
    policy = container.restart_policy or spec.restart_policy or "Always"
    if policy == "OnFailure":
        return exit_code != 0
    return policy == "Always"


def should_restart(pod: Pod, container: Container, newest: RuntimeContainer | None) -> bool:
    """Whether the next sync starts ``container`` (upstream ``ShouldContainerBeRestarted``):
    never for a pod being deleted; always when it has no instance or one that is not
    running and did not exit; after an exit, as its restart policy says."""
    if pod.metadata.deletion_timestamp is not None:
        return False
    if newest is None or newest.state in ("created", "unknown"):
        return True
    if newest.state == "running":
        return False
    return container_restarts(container, pod.spec or PodSpec(), newest.exit_code)


def _any_regular_created(spec: PodSpec, seen: Observation) -> bool:
    names = {c.name for c in spec.containers or ()}
    return any(c.name in names for c in seen.containers)


def _any_regular_running(spec: PodSpec, seen: Observation) -> bool:
    names = {c.name for c in spec.containers or ()}
    return any(c.name in names and c.state == "running" for c in seen.containers)


# Started and ready.


def bare_id(container_id: str | None) -> str:
    """A status's ``<runtime>://<id>`` as the runtime's own id ("" for none)."""
    return (container_id or "").partition("://")[2]


def _running(status: ContainerStatus) -> bool:
    return status.state is not None and status.state.running is not None


def _started(container: Container, status: ContainerStatus, seen: Observation) -> bool:
    if not _running(status):
        return False
    verdict = seen.startup.get(bare_id(status.container_id))
    if verdict is not None:
        return verdict
    return container.startup_probe is None


def _ready(container: Container, status: ContainerStatus, seen: Observation) -> bool:
    if not _running(status):
        return False
    verdict = seen.readiness.get(bare_id(status.container_id))
    if verdict is not None:
        return verdict
    return container.readiness_probe is None


def _set_probe_results(spec: PodSpec, status: PodStatus, seen: Observation) -> None:
    containers = {c.name: c for c in spec.containers or ()}
    for container_status in status.container_statuses or ():
        container = containers[container_status.name]
        container_status.started = _started(container, container_status, seen)
        container_status.ready = container_status.started and _ready(
            container, container_status, seen
        )
    inits = {c.name: c for c in spec.init_containers or ()}
    for container_status in status.init_container_statuses or ():
        container = inits[container_status.name]
        container_status.started = _started(container, container_status, seen)
        if container.is_sidecar():
            container_status.ready = container_status.started and _ready(
                container, container_status, seen
            )
            continue
        terminated = container_status.state.terminated if container_status.state else None
        container_status.ready = terminated is not None and terminated.exit_code == 0
    for container_status in status.ephemeral_container_statuses or ():
        container_status.ready = False


# Phase.


class _Counts:
    """What getPhase counts over the container statuses."""

    def __init__(self) -> None:
        self.pending_init = 0
        self.pending_sidecars = 0
        self.failed_init_final = 0
        self.unknown = 0
        self.running = 0
        self.waiting = 0
        self.stopped = 0
        self.stopped_final = 0
        self.succeeded = 0


def _last_exit(status: ContainerStatus) -> int | None:
    """The exit code of the container's last termination, if it has one."""
    last = status.last_state.terminated if status.last_state else None
    return None if last is None else last.exit_code or 0


def pod_phase(
    pod: Pod,
    statuses: Iterable[ContainerStatus],
    terminal: bool,
    has_initialized: bool,
) -> str:
    """Upstream ``getPhase`` (with container restart rules): the phase the statuses imply."""
    spec = pod.spec or PodSpec()
    by_name = {s.name: s for s in statuses}
    counts = _Counts()
    for container in spec.init_containers or ():
        status = by_name.get(container.name)
        if container.is_sidecar():
            _count_sidecar(status, counts)
        else:
            _count_init(container, spec, status, counts)
    for container in spec.containers or ():
        _count_regular(container, spec, by_name.get(container.name), counts)
    if counts.failed_init_final:
        return "Failed"
    if counts.pending_init or (counts.pending_sidecars and not has_initialized) or counts.waiting:
        return "Pending"
    if counts.running and not counts.unknown:
        return "Running"
    if not counts.running and counts.stopped and not counts.unknown:
        if terminal and not is_static_pod(pod):
            return "Succeeded" if counts.stopped == counts.succeeded else "Failed"
        if counts.stopped != counts.stopped_final:
            return "Running"
        return "Succeeded" if counts.stopped == counts.succeeded else "Failed"
    return "Pending"


def _count_init(
    container: Container, spec: PodSpec, status: ContainerStatus | None, counts: _Counts
) -> None:
    state = status.state if status is not None else None
    if status is None or state is None or state.running is not None:
        counts.pending_init += 1
    elif state.terminated is not None:
        code = state.terminated.exit_code or 0
        if code and not container_restarts(container, spec, code):
            counts.failed_init_final += 1
    elif state.waiting is not None and (last := _last_exit(status)) is not None:
        if last and not container_restarts(container, spec, last):
            counts.failed_init_final += 1
    else:
        counts.pending_init += 1


def _count_sidecar(status: ContainerStatus | None, counts: _Counts) -> None:
    state = status.state if status is not None else None
    if status is None:
        counts.unknown += 1
    elif state is None:
        counts.pending_sidecars += 1
        counts.unknown += 1
    elif state.running is not None:
        if not status.started:
            counts.pending_sidecars += 1
        counts.running += 1
    elif state.waiting is not None and _last_exit(status) is None:
        counts.pending_sidecars += 1
        counts.waiting += 1


def _count_regular(
    container: Container, spec: PodSpec, status: ContainerStatus | None, counts: _Counts
) -> None:
    state = status.state if status is not None else None
    if status is None or state is None:
        counts.unknown += 1
        return
    if state.running is not None:
        counts.running += 1
        return
    if state.terminated is not None:
        code: int | None = state.terminated.exit_code or 0
    elif state.waiting is not None:
        code = _last_exit(status)
        if code is None:
            counts.waiting += 1
            return
    else:
        counts.unknown += 1
        return
    counts.stopped += 1
    if not container_restarts(container, spec, code or 0):
        counts.stopped_final += 1
    if state.terminated is not None and not code:
        counts.succeeded += 1


# Conditions.


def _names(names: list[str]) -> str:
    """A list of names as Go prints a []string."""
    return "[" + " ".join(names) + "]"


def _condition(pod: Pod, kind: str, ok: bool, reason: str = "", message: str = "") -> PodCondition:
    return PodCondition(
        type=kind,
        observed_generation=pod.metadata.generation,
        status="True" if ok else "False",
        reason=reason or None,
        message=message or None,
    )


def _unready_message(unknown: list[str], unready: list[str], word: str) -> str:
    parts = []
    if unknown:
        parts.append(f"containers with unknown status: {_names(unknown)}")
    if unready:
        parts.append(f"containers with {word} status: {_names(unready)}")
    return ", ".join(parts)


def _containers_ready(
    pod: Pod, statuses: Mapping[str, ContainerStatus], phase: str
) -> PodCondition:
    spec = pod.spec or PodSpec()
    unknown: list[str] = []
    unready: list[str] = []
    sidecars = [c for c in spec.init_containers or () if c.is_sidecar()]
    for container in (*sidecars, *(spec.containers or ())):
        name = container.name or ""
        status = statuses.get(name)
        if status is None:
            unknown.append(name)
        elif not status.ready:
            unready.append(name)
    if phase == "Succeeded" and not unknown:
        return _condition(pod, CONTAINERS_READY, False, POD_COMPLETED)
    if phase == "Failed":
        return _condition(pod, CONTAINERS_READY, False, POD_FAILED)
    message = _unready_message(unknown, unready, "unready")
    if message:
        return _condition(pod, CONTAINERS_READY, False, CONTAINERS_NOT_READY, message)
    return _condition(pod, CONTAINERS_READY, True)


def pod_ready(
    pod: Pod, containers_ready: PodCondition, conditions: Sequence[PodCondition]
) -> PodCondition:
    """Ready: the containers are, and so is every readiness gate's condition among
    ``conditions`` (upstream ``GeneratePodReadyCondition``); no transition time."""
    if containers_ready.status != "True":
        return msgspec.structs.replace(containers_ready, type=READY)
    problems = []
    for gate in (pod.spec or PodSpec()).readiness_gates or ():
        found = next((c for c in conditions if c.type == gate.condition_type), None)
        if found is None:
            problems.append(
                f'corresponding condition of pod readiness gate "{gate.condition_type}" '
                "does not exist."
            )
        elif found.status != "True":
            problems.append(
                f'the status of pod readiness gate "{gate.condition_type}" is not "True", '
                f"but {found.status}"
            )
    if problems:
        return _condition(pod, READY, False, READINESS_GATES_NOT_READY, ", ".join(problems))
    return _condition(pod, READY, True)


def _initialized(pod: Pod, statuses: Mapping[str, ContainerStatus], phase: str) -> PodCondition:
    spec = pod.spec or PodSpec()
    unknown: list[str] = []
    incomplete: list[str] = []
    for container in spec.init_containers or ():
        name = container.name or ""
        status = statuses.get(name)
        if status is None:
            unknown.append(name)
        elif not (status.started if container.is_sidecar() else status.ready):
            incomplete.append(name)
    if phase == "Succeeded" and not unknown:
        return _condition(pod, INITIALIZED, True, POD_COMPLETED)
    regular = {c.name for c in spec.containers or ()}
    if any(
        name in regular and s.state is not None and (s.state.running or s.state.terminated)
        for name, s in statuses.items()
    ):
        return _condition(pod, INITIALIZED, True)
    message = _unready_message(unknown, incomplete, "incomplete")
    if message:
        return _condition(pod, INITIALIZED, False, CONTAINERS_NOT_INITIALIZED, message)
    return _condition(pod, INITIALIZED, True)


def _conditions(
    pod: Pod, old: PodStatus, api: PodStatus, status: PodStatus, seen: Observation
) -> list[PodCondition]:
    """The kubelet's conditions after those it does not own, transition times kept."""
    phase = status.phase or "Pending"
    conditions = [
        copy.deepcopy(c) for c in api.conditions or () if c.type not in KUBELET_CONDITIONS
    ]
    disruption = next((c for c in old.conditions or () if c.type == DISRUPTION_TARGET), None)
    if disruption is not None:
        conditions = [c for c in conditions if c.type != DISRUPTION_TARGET]
        conditions.append(copy.deepcopy(disruption))
    statuses = {
        s.name or "": s
        for s in (*(status.init_container_statuses or ()), *(status.container_statuses or ()))
    }
    spec = pod.spec or PodSpec()
    sandbox = seen.sandbox_ready and (bool(seen.pod_ips) or bool(spec.host_network))
    conditions.append(_condition(pod, POD_READY_TO_START_CONTAINERS, sandbox))
    conditions.append(_initialized(pod, statuses, phase))
    containers_ready = _containers_ready(pod, statuses, phase)
    conditions.append(pod_ready(pod, containers_ready, conditions))
    conditions.append(containers_ready)
    conditions.append(_condition(pod, POD_SCHEDULED, True))
    before = {c.type: c for c in old.conditions or ()}
    for condition in conditions:
        if condition.type not in KUBELET_CONDITIONS:
            continue
        earlier = before.get(condition.type)
        if earlier is not None and earlier.status == condition.status:
            condition.last_transition_time = earlier.last_transition_time
        else:
            condition.last_transition_time = _second(seen.now)
    return conditions


# Addresses.


def _ordered_ips(ips: Sequence[str], node_ips: Sequence[str]) -> list[str]:
    """The first IP of the node's family, then the first of the other (``sortPodIPs``)."""
    parsed = [ipaddress.ip_address(ip) for ip in ips]
    primary = 6 if node_ips and ipaddress.ip_address(node_ips[0]).version == 6 else 4
    ordered = []
    for version in (primary, 10 - primary):
        found = next((ip for ip in parsed if ip.version == version), None)
        if found is not None:
            ordered.append(str(found))
    return ordered


def _set_ips(spec: PodSpec, status: PodStatus, seen: Observation) -> None:
    pod_ips = _ordered_ips(seen.pod_ips, seen.node_ips)
    host_ips = list(seen.node_ips[:2])
    if spec.host_network and not pod_ips:
        pod_ips = host_ips
    if pod_ips:
        status.pod_ips = [PodIP(ip=ip) for ip in pod_ips]
        status.pod_ip = pod_ips[0]
    if host_ips:
        status.host_ips = [HostIP(ip=ip) for ip in host_ips]
        status.host_ip = host_ips[0]


# Comparison.


def status_changed(old: PodStatus | None, new: PodStatus) -> bool:
    """Whether ``new`` says something ``old`` does not (upstream ``!isPodStatusByKubeletEqual``):
    only the conditions the kubelet owns or shares count, and of those only status, reason
    and message; probe and transition times are bookkeeping."""
    if old is None:
        return True

    def owned(status: PodStatus) -> dict[str | None, tuple[str | None, ...]]:
        return {
            c.type: (c.status, c.reason, c.message)
            for c in status.conditions or ()
            if c.type in KUBELET_CONDITIONS or c.type in SHARED_CONDITIONS
        }

    if owned(old) != owned(new):
        return True
    rest = msgspec.structs.replace(old, conditions=new.conditions)
    return bool(msgspec.to_builtins(rest) != msgspec.to_builtins(new))
