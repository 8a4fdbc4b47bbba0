"""The kubelet's Node: registration, the status it reports, and the Lease heartbeat.

Upstream's ``kubelet_node_status.go``, ``nodestatus/setters.go`` and the node lease
controller, in one manager, because the three share what they know about the node (its uid
for the Lease's owner, the last status written):

- ``register`` creates the Node (``tryRegisterWithAPIServer``), retrying with backoff until the
  API server answers.  The initial Node carries the default labels (``kubernetes.io/hostname``,
  ``kubernetes.io/os``/``arch`` and their ``beta.`` twins), the ``--node-labels``, the
  ``--register-with-taints`` plus, with an external cloud provider, the
  ``node.cloudprovider.kubernetes.io/uninitialized`` taint (only at creation: the cloud
  controller removes it and an existing Node is never tainted again), the
  controller-managed-attach-detach annotation and a full status.  If the Node exists, the
  default labels and the annotation are reconciled onto it and it is kept.
- ``sync_status`` (every ``status_update_frequency``) computes the status as the setters do:
  addresses, daemon endpoints, capacity and allocatable (capacity minus system-reserved,
  kube-reserved and the hard eviction thresholds of memory and nodefs), node info, images
  (the 50 largest), the pressure conditions and Ready.  It writes only when something other
  than heartbeat times changed or ``status_report_frequency`` passed since the last write, so
  an idle node costs the API server one write every five minutes; liveness is the Lease's
  job.  Condition ``lastTransitionTime`` moves only when a condition's status changes;
  ``lastHeartbeatTime`` is the time of each computation.  The write is a ``PUT
  /status`` of the Node just read (so fields others own, such as ``volumesAttached``, are
  kept), retried on conflict as upstream's ``nodeStatusUpdateRetry``.
- ``renew_lease`` (every ``lease_duration_seconds / 4``) keeps ``kube-node-lease/<node>``
  renewed: holder the node, owned by the Node (its uid) so it goes with it; created if
  missing, re-read after a conflict.

Ready is False (``KubeletNotReady``) with upstream's messages when the runtime has not
answered CRI Status for 30 s ("container runtime is down"), when RuntimeReady or NetworkReady
is false, when the kubelet said so through ``set_network_error`` (no podCIDR yet), or when one
of the ``health_checks`` fails (the PLEG's "PLEG is not healthy"); several
reasons are joined as upstream's error aggregate prints them.  The machine (CPU, memory,
disk, pressure signals, identity) is read through ``MachineInfo``: ``HostMachine`` reads
psutil, cgroup limits and /etc, ``StaticMachine`` is given its numbers (tests, hollow nodes).
All timing comes from the injected ``Clock``.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import logging
import os
import platform
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import msgspec
import psutil

from kube import KUBERNETES_VERSION
from kube.api.kinds.coordination_v1 import Lease, LeaseSpec
from kube.api.kinds.core_v1.node import (
    LABEL_ARCH_BETA,
    LABEL_ARCH_STABLE,
    LABEL_HOSTNAME,
    LABEL_OS_BETA,
    LABEL_OS_STABLE,
    ContainerImage,
    DaemonEndpoint,
    Node,
    NodeAddress,
    NodeCondition,
    NodeDaemonEndpoints,
    NodeSpec,
    NodeStatus,
    NodeSystemInfo,
    Taint,
    is_kubelet_label,
    is_reserved_label,
)
from kube.api.meta_v1 import ObjectMeta, OwnerReference
from kube.api.quantity import Format, Quantity, QuantityError
from kube.api.struct import QuantityValue, micro_time
from kube.client.errors import ApiError, ClientError
from kube.client.interface import ApiClient
from kube.clock import Clock
from node.cri.client import CRIError, RuntimeClient
from node.cri.pb import api_pb2 as pb

log = logging.getLogger(__name__)

DEFAULT_LABELS: Final = (
    LABEL_HOSTNAME,
    LABEL_OS_STABLE,
    LABEL_ARCH_STABLE,
    LABEL_OS_BETA,
    LABEL_ARCH_BETA,
)
CMAD_ANNOTATION: Final = "volumes.kubernetes.io/controller-managed-attach-detach"
TAINT_UNINITIALIZED: Final = "node.cloudprovider.kubernetes.io/uninitialized"
NODE_LEASE_NAMESPACE: Final = "kube-node-lease"
OPERATING_SYSTEM: Final = "linux"
KUBELET_VERSION: Final = f"v{KUBERNETES_VERSION}"

MAX_IMAGES: Final = 50
MAX_NAMES_PER_IMAGE: Final = 5
RUNTIME_DOWN_AFTER: Final = 30.0
"""Seconds without a CRI Status answer before the runtime counts as down (upstream)."""
STATUS_UPDATE_RETRIES: Final = 5
REGISTER_BACKOFF: Final = (0.1, 7.0)
LEASE_BACKOFF: Final = (0.2, 7.0)

# Condition types, reasons and messages, as upstream's setters write them.
READY: Final = "Ready"
MEMORY_PRESSURE: Final = "MemoryPressure"
DISK_PRESSURE: Final = "DiskPressure"
PID_PRESSURE: Final = "PIDPressure"
KUBELET_READY: Final = "KubeletReady"
KUBELET_NOT_READY: Final = "KubeletNotReady"
READY_MESSAGE: Final = "kubelet is posting ready status"
RUNTIME_DOWN: Final = "container runtime is down"


@dataclass(frozen=True)
class _PressureText:
    """Reasons, messages and event reasons of one pressure condition, without and with."""

    reason: tuple[str, str]
    message: tuple[str, str]
    event: tuple[str, str]


PRESSURE_TEXT: Final = {
    MEMORY_PRESSURE: _PressureText(
        ("KubeletHasSufficientMemory", "KubeletHasInsufficientMemory"),
        ("kubelet has sufficient memory available", "kubelet has insufficient memory available"),
        ("NodeHasSufficientMemory", "NodeHasInsufficientMemory"),
    ),
    DISK_PRESSURE: _PressureText(
        ("KubeletHasNoDiskPressure", "KubeletHasDiskPressure"),
        ("kubelet has no disk pressure", "kubelet has disk pressure"),
        ("NodeHasNoDiskPressure", "NodeHasDiskPressure"),
    ),
    PID_PRESSURE: _PressureText(
        ("KubeletHasSufficientPID", "KubeletHasInsufficientPID"),
        ("kubelet has sufficient PID available", "kubelet has insufficient PID available"),
        ("NodeHasSufficientPID", "NodeHasInsufficientPID"),
    ),
}

# Eviction signals and the pressure condition each one drives.  The image filesystem is
# measured as the node filesystem: the lab keeps containerd's root on it.
SIGNAL_CONDITIONS: Final = {
    "memory.available": MEMORY_PRESSURE,
    "nodefs.available": DISK_PRESSURE,
    "nodefs.inodesFree": DISK_PRESSURE,
    "imagefs.available": DISK_PRESSURE,
    "imagefs.inodesFree": DISK_PRESSURE,
    "pid.available": PID_PRESSURE,
}
DEFAULT_EVICTION_HARD: Final[Mapping[str, str]] = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
}
RESERVABLE: Final = ("cpu", "memory", "ephemeral-storage", "pid")
GO_ARCHITECTURES: Final = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386"}


class NodeOptionsError(ValueError):
    """Node options the kubelet cannot start with; the message names the flag and value."""


@dataclass(frozen=True)
class NodeOptions:
    """What the kubelet's flags say about its Node.  ``pod_cidr`` is never set by the kubelet:
    read it from ``NodeStatusManager.node()``.

    ``system_reserved``/``kube_reserved`` map resources (cpu, memory, ephemeral-storage, pid)
    to quantities; ``eviction_hard`` maps eviction signals to a quantity or a percentage
    (``{"memory.available": "100Mi", "nodefs.available": "10%"}``).
    """

    node_name: str
    node_ips: tuple[str, ...]
    hostname: str
    root_dir: Path
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()
    external_cloud_provider: bool = False
    kubelet_port: int = 10250
    max_pods: int = 110
    system_reserved: Mapping[str, str] = field(default_factory=dict)
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_EVICTION_HARD))
    status_update_frequency: float = 10.0
    status_report_frequency: float = 300.0
    lease_duration_seconds: int = 40


# The machine.


@dataclass(frozen=True)
class MachineCapacity:
    """What the machine has for pods: CPU (millicores), memory and root-dir filesystem size."""

    cpu_millis: int
    memory_bytes: int
    ephemeral_storage_bytes: int


@dataclass(frozen=True)
class MachineUsage:
    """The eviction signals' raw numbers, measured now."""

    memory_available: int
    nodefs_available: int
    nodefs_inodes_free: int
    nodefs_inodes: int
    pid_available: int
    pid_max: int


@dataclass(frozen=True)
class MachineIdentity:
    """Who the machine is (``nodeInfo``); ``architecture`` uses Go's names (amd64, arm64)."""

    machine_id: str
    system_uuid: str
    boot_id: str
    kernel_version: str
    os_image: str
    architecture: str


class MachineInfo(Protocol):
    """Reads the machine; every method is read-only and cheap enough to call each sync."""

    def read_capacity(self) -> MachineCapacity: ...

    def read_usage(self) -> MachineUsage: ...

    def read_identity(self) -> MachineIdentity: ...


@dataclass
class StaticMachine:
    """A machine whose numbers are given (tests change ``usage`` to cause pressure)."""

    capacity: MachineCapacity
    usage: MachineUsage
    identity: MachineIdentity

    def read_capacity(self) -> MachineCapacity:
        return self.capacity

    def read_usage(self) -> MachineUsage:
        return self.usage

    def read_identity(self) -> MachineIdentity:
        return self.identity


@dataclass(frozen=True)
class CgroupLimits:
    """The tightest limits of the cgroups this process is in (None: unlimited)."""

    memory_bytes: int | None
    cpu_millis: int | None


class HostMachine:
    """The real machine: psutil, the limits of our cgroups (v1 and v2), the root dir's
    filesystem, and identity files under ``fs_root`` (``/`` except in tests).

    CPU and memory capacity are the smaller of the machine's and our cgroups' limits (every
    ancestor counts), so a node in a limited cgroup reports what it can really use.
    """

    def __init__(self, root_dir: Path, fs_root: Path = Path("/")) -> None:
        self.root_dir = root_dir
        self.fs_root = fs_root

    def read_capacity(self) -> MachineCapacity:
        limits = cgroup_limits(self.fs_root)
        cpu = (psutil.cpu_count(logical=True) or 1) * 1000
        memory = psutil.virtual_memory().total
        return MachineCapacity(
            cpu_millis=min(cpu, limits.cpu_millis or cpu),
            memory_bytes=min(memory, limits.memory_bytes or memory),
            ephemeral_storage_bytes=shutil.disk_usage(self._existing_root()).total,
        )

    def read_usage(self) -> MachineUsage:
        root = self._existing_root()
        fs = os.statvfs(root)
        pid_max = int(_read(self.fs_root / "proc/sys/kernel/pid_max") or "32768")
        return MachineUsage(
            memory_available=psutil.virtual_memory().available,
            nodefs_available=shutil.disk_usage(root).free,
            nodefs_inodes_free=fs.f_favail,
            nodefs_inodes=fs.f_files,
            pid_available=pid_max - len(psutil.pids()),
            pid_max=pid_max,
        )

    def read_identity(self) -> MachineIdentity:
        machine = platform.machine()
        return MachineIdentity(
            machine_id=_read(self.fs_root / "etc/machine-id"),
            system_uuid=_read(self.fs_root / "sys/class/dmi/id/product_uuid"),
            boot_id=_read(self.fs_root / "proc/sys/kernel/random/boot_id"),
            kernel_version=platform.release(),
            os_image=os_image(_read(self.fs_root / "etc/os-release")),
            architecture=GO_ARCHITECTURES.get(machine, machine),
        )

    def _existing_root(self) -> Path:
        """The root dir, or its nearest existing ancestor (before the kubelet creates it)."""
        path = self.root_dir
        while not path.exists() and path != path.parent:
            path = path.parent
        return path


def os_image(os_release: str) -> str:
    """PRETTY_NAME of an os-release file, unquoted; "Linux" without one (upstream)."""
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "PRETTY_NAME":
            return value.strip().strip("\"'")
    return "Linux"


def cgroup_limits(fs_root: Path = Path("/")) -> CgroupLimits:
    """The memory and CPU limits of this process's cgroups, v1 (``memory.limit_in_bytes``,
    ``cpu.cfs_quota_us``/``cpu.cfs_period_us``) and v2 (``memory.max``, ``cpu.max``), the
    smallest over every hierarchy and every ancestor."""
    mounts = _cgroup_mounts(_read(fs_root / "proc/self/mounts"))
    memory: list[int] = []
    cpu: list[int] = []
    for line in _read(fs_root / "proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        for mount in mounts.get(controllers, ()):
            for directory in _ancestors(fs_root / mount.lstrip("/"), path):
                memory += _memory_limit(directory)
                cpu += _cpu_limit(directory)
    return CgroupLimits(min(memory, default=None), min(cpu, default=None))


def _cgroup_mounts(mounts: str) -> dict[str, list[str]]:
    """Mount points by the controllers field of /proc/self/cgroup they serve ("" for v2)."""
    found: dict[str, list[str]] = {}
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        if fields[2] == "cgroup2":
            found.setdefault("", []).append(fields[1])
        elif fields[2] == "cgroup":
            options = fields[3].split(",")
            named = [o for o in options if o.startswith("name=")]
            controllers = named or [o for o in options if o not in ("rw", "ro", "relatime")]
            found.setdefault(",".join(controllers), []).append(fields[1])
    return found


def _ancestors(mount: Path, path: str) -> list[Path]:
    """The cgroup directory of ``path`` under ``mount`` and each parent up to the mount."""
    parts = [p for p in path.split("/") if p]
    candidates = [mount.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
    return [c for c in candidates if c.is_dir()]


def _memory_limit(directory: Path) -> list[int]:
    limits = []
    for name in ("memory.limit_in_bytes", "memory.max"):
        value = _read(directory / name)
        if value.isdigit():
            limits.append(int(value))
    return limits


def _cpu_limit(directory: Path) -> list[int]:
    quota, period = _read(directory / "cpu.cfs_quota_us"), _read(directory / "cpu.cfs_period_us")
    if not (quota.isdigit() and period.isdigit()):
        quota, _, period = _read(directory / "cpu.max").partition(" ")
    if quota.isdigit() and period.isdigit() and int(period) > 0:
        return [int(quota) * 1000 // int(period)]
    return []


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


# Quantities and thresholds.


@dataclass(frozen=True)
class Threshold:
    """A hard eviction threshold: below ``amount``, or below ``percentage`` of capacity."""

    signal: str
    amount: int | None = None
    percentage: float | None = None

    def value(self, capacity: int) -> int:
        if self.percentage is not None:
            return int(capacity * self.percentage / 100)
        return self.amount or 0


def parse_eviction_hard(thresholds: Mapping[str, str]) -> dict[str, Threshold]:
    """``{"memory.available": "100Mi", "nodefs.available": "10%"}`` → thresholds by signal;
    ``NodeOptionsError`` names the bad entry."""
    parsed = {}
    for signal, text in thresholds.items():
        if signal not in SIGNAL_CONDITIONS:
            known = ", ".join(SIGNAL_CONDITIONS)
            raise NodeOptionsError(f"--eviction-hard: unknown signal {signal!r} (known: {known})")
        if text.endswith("%"):
            try:
                percentage = float(text[:-1])
            except ValueError:
                percentage = -1.0
            if not 0 <= percentage <= 100:
                raise NodeOptionsError(f"--eviction-hard: {signal}: bad percentage {text!r}")
            parsed[signal] = Threshold(signal, percentage=percentage)
        else:
            amount = _quantity("--eviction-hard", signal, text).value()
            parsed[signal] = Threshold(signal, amount=amount)
    return parsed


def parse_reserved(flag: str, reserved: Mapping[str, str]) -> dict[str, int]:
    """A reservation flag's quantities (cpu in millicores, the rest in units)."""
    parsed = {}
    for resource, text in reserved.items():
        if resource not in RESERVABLE:
            known = ", ".join(RESERVABLE)
            raise NodeOptionsError(f"{flag}: unknown resource {resource!r} (known: {known})")
        value = _quantity(flag, resource, text)
        parsed[resource] = value.milli_value() if resource == "cpu" else value.value()
    return parsed


def _quantity(flag: str, key: str, text: str) -> Quantity:
    try:
        value = Quantity.parse(text)
    except QuantityError:
        value = Quantity(-1)
    if value < Quantity(0):
        raise NodeOptionsError(f"{flag}: {key}: bad quantity {text!r}")
    return value


def check_node_labels(labels: Mapping[str, str]) -> None:
    """Refuse ``--node-labels`` in the kubernetes.io / k8s.io namespaces that a kubelet may
    not set on its Node (upstream ``validateNodeLabels``: NodeRestriction would refuse them)."""
    refused = [key for key in labels if is_reserved_label(key) and not is_kubelet_label(key)]
    if refused:
        raise NodeOptionsError(
            "--node-labels: unknown 'kubernetes.io' or 'k8s.io' labels: " + ", ".join(refused)
        )


def _cpu(millis: int) -> str:
    return str(Quantity(millis, -3, Format.DECIMAL_SI))


def _bytes(amount: int) -> str:
    return str(Quantity(amount, 0, Format.BINARY_SI))


# Conditions.


class NodeEventSink(Protocol):
    """Where condition transitions are reported (``kube.client.events.EventRecorder``)."""

    def event(self, obj: Node, type: str, reason: str, message: str) -> None: ...


def set_condition(
    conditions: list[NodeCondition],
    type: str,
    status: bool,
    reason: str,
    message: str,
    now: datetime.datetime,
) -> bool:
    """Set one condition in place: the heartbeat is ``now``, the transition time moves only
    when the status changes (or the condition is new).  Returns whether it transitioned."""
    value = "True" if status else "False"
    current = next((c for c in conditions if c.type == type), None)
    if current is None:
        current = NodeCondition(type=type)
        conditions.append(current)
    transitioned = current.status != value
    if transitioned or current.last_transition_time is None:
        current.last_transition_time = now
    current.status = value
    current.reason = reason
    current.message = message
    current.last_heartbeat_time = now
    return transitioned


def node_owner(name: str, uid: str) -> OwnerReference:
    """How what the kubelet makes for its Node (its Lease, its CSINode) names its owner."""
    return OwnerReference(api_version="v1", kind="Node", name=name, uid=uid)


def not_ready_message(errors: Sequence[str]) -> str:
    """Errors joined as upstream's ``errors.NewAggregate`` prints them."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


def _condition_text(condition: pb.RuntimeCondition | None) -> str:
    """A CRI condition as upstream's ``RuntimeCondition.String()``."""
    if condition is None:
        return "<nil>"
    status = "true" if condition.status else "false"
    return f"{condition.type}={status} reason:{condition.reason} message:{condition.message}"


def _without_heartbeats(status: NodeStatus) -> Any:
    plain = msgspec.to_builtins(status)
    for condition in plain.get("conditions", ()):
        condition.pop("lastHeartbeatTime", None)
    return plain


def _backoff(failures: int, low: float, high: float) -> float:
    """Seconds to wait after ``failures`` failures in a row: doubling from ``low``."""
    return min(low * float(2 ** min(failures, 32)), high)


# The manager.


class NodeStatusManager:
    """Registers the Node, keeps its status and its Lease; see the module docstring.

    Not thread-safe; ``run`` is the only long-running entry, ``register`` must have returned
    before it (the Lease's owner is the registered Node).
    """

    def __init__(
        self,
        client: ApiClient,
        options: NodeOptions,
        cri: RuntimeClient,
        clock: Clock,
        machine: MachineInfo | None = None,
        events: NodeEventSink | None = None,
        health_checks: Sequence[Callable[[], tuple[bool, str]]] = (),
    ) -> None:
        check_node_labels(options.labels)
        self._thresholds = parse_eviction_hard(options.eviction_hard)
        self._system_reserved = parse_reserved("--system-reserved", options.system_reserved)
        self._kube_reserved = parse_reserved("--kube-reserved", options.kube_reserved)
        self.options = options
        self._client = client
        self._cri = cri
        self._clock = clock
        self._machine: MachineInfo = machine or HostMachine(options.root_dir)
        self._events = events
        self._health_checks = list(health_checks)
        self._node: Node | None = None
        self._lease: Lease | None = None
        self._allocatable: dict[str, QuantityValue] | None = None
        self._network_error: str | None = None
        self._runtime_ok_at: float | None = None
        self._runtime_errors: list[str] = []
        self._network_errors: list[str] = []
        self._runtime_version = ""
        self._last_report: float | None = None

    # Contract.

    def node(self) -> Node | None:
        """The last Node read from or written to the API server."""
        return self._node

    def allocatable(self) -> dict[str, QuantityValue]:
        """What pods may use: as last reported, or computed now if nothing was yet."""
        if self._allocatable is None:
            self._allocatable = self._resources()[1]
        return dict(self._allocatable)

    def set_network_error(self, message: str | None) -> None:
        """Keep the node NotReady with ``message`` (None clears it), from the next sync."""
        self._network_error = message

    async def register(self) -> Node:
        """Create the Node, or reconcile the existing one; retries until the API answers."""
        failures = 0
        while True:
            try:
                self._node = await self._try_register()
                return self._node
            except (ApiError, ClientError) as error:
                log.warning("registering node %s: %s", self.options.node_name, error)
            await self._clock.sleep(_backoff(failures, *REGISTER_BACKOFF))
            failures += 1

    async def run(self) -> None:
        """Sync the status and renew the Lease until cancelled."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._status_loop())
            tasks.create_task(self._lease_loop())

    # Registration.

    async def _try_register(self) -> Node:
        initial = await self._initial_node()
        try:
            return await self._client.create(initial)
        except ApiError as error:
            if not error.already_exists:
                raise
        existing = await self._client.get(Node, self.options.node_name)
        if reconcile_existing(existing, initial):
            return await self._client.update(existing)
        return existing

    async def _initial_node(self) -> Node:
        identity = self._machine.read_identity()
        labels = {
            LABEL_HOSTNAME: self.options.hostname,
            LABEL_OS_STABLE: OPERATING_SYSTEM,
            LABEL_ARCH_STABLE: identity.architecture,
            LABEL_OS_BETA: OPERATING_SYSTEM,
            LABEL_ARCH_BETA: identity.architecture,
            **self.options.labels,
        }
        taints = [copy.deepcopy(t) for t in self.options.taints]
        if self.options.external_cloud_provider and not any(
            t.key == TAINT_UNINITIALIZED for t in taints
        ):
            taints.append(Taint(key=TAINT_UNINITIALIZED, value="true", effect="NoSchedule"))
        node = Node(
            metadata=ObjectMeta(
                name=self.options.node_name,
                labels=labels,
                annotations={CMAD_ANNOTATION: "true"},
            ),
            spec=NodeSpec(taints=taints or None),
        )
        node.status = await self.compute_status(node)
        return node

    # Status.

    async def sync_status(self) -> bool:
        """Compute the status and write it if it changed or is due; returns whether it wrote.

        Conflicts (someone else wrote the Node in between) are retried on a fresh read.
        """
        for _ in range(STATUS_UPDATE_RETRIES - 1):
            try:
                return await self._try_sync_status()
            except ApiError as error:
                if not error.conflict:
                    raise
        return await self._try_sync_status()

    async def _try_sync_status(self) -> bool:
        node = await self._client.get(Node, self.options.node_name)
        self._node = node
        status = await self.compute_status(node)
        now = self._clock.monotonic()
        due = (
            self._last_report is None
            or now - self._last_report >= self.options.status_report_frequency
        )
        if not due and _without_heartbeats(status) == _without_heartbeats(
            node.status or NodeStatus()
        ):
            return False
        node.status = status
        self._node = await self._client.update_status(node)
        self._last_report = now
        return True

    async def compute_status(self, node: Node) -> NodeStatus:
        """The status ``node`` should have now (a new object; ``node`` is not changed)."""
        status = copy.deepcopy(node.status) if node.status is not None else NodeStatus()
        now = self._clock.now()
        capacity, allocatable = self._resources()
        self._allocatable = allocatable
        identity = self._machine.read_identity()
        await self._probe_runtime()
        status.capacity = capacity
        status.allocatable = allocatable
        status.addresses = [
            *(NodeAddress(type="InternalIP", address=ip) for ip in self.options.node_ips),
            NodeAddress(type="Hostname", address=self.options.hostname),
        ]
        status.daemon_endpoints = NodeDaemonEndpoints(
            kubelet_endpoint=DaemonEndpoint(port=self.options.kubelet_port)
        )
        status.node_info = NodeSystemInfo(
            machine_id=identity.machine_id,
            system_uuid=identity.system_uuid,
            boot_id=identity.boot_id,
            kernel_version=identity.kernel_version,
            os_image=identity.os_image,
            container_runtime_version=self._runtime_version,
            kubelet_version=KUBELET_VERSION,
            kube_proxy_version=KUBELET_VERSION,
            operating_system=OPERATING_SYSTEM,
            architecture=identity.architecture,
        )
        images = await self._images()
        if images is not None:
            status.images = images
        conditions = [copy.deepcopy(c) for c in status.conditions or ()]
        self._set_pressure(node, conditions, now)
        self._set_ready(node, conditions, now)
        status.conditions = conditions
        return status

    def _resources(self) -> tuple[dict[str, QuantityValue], dict[str, QuantityValue]]:
        """Capacity and allocatable (upstream ``GetNodeAllocatableReservation``)."""
        machine = self._machine.read_capacity()
        capacity = {
            "cpu": machine.cpu_millis,
            "memory": machine.memory_bytes,
            "ephemeral-storage": machine.ephemeral_storage_bytes,
            "pods": self.options.max_pods,
        }
        eviction = {
            "memory": self._thresholds.get("memory.available"),
            "ephemeral-storage": self._thresholds.get("nodefs.available"),
        }
        allocatable = {}
        for resource, amount in capacity.items():
            reserved = self._system_reserved.get(resource, 0) + self._kube_reserved.get(resource, 0)
            threshold = eviction.get(resource)
            if threshold is not None:
                reserved += threshold.value(amount)
            allocatable[resource] = max(amount - reserved, 0)
        return _quantities(capacity), _quantities(allocatable)

    async def _probe_runtime(self) -> None:
        """Ask CRI for its version and conditions; keep the last answers if it does not
        answer (upstream ``updateRuntimeUp``)."""
        try:
            version = await self._cri.version()
            status = await self._cri.status()
        except CRIError as error:
            log.warning("container runtime status: %s", error)
            return
        self._runtime_version = f"{version.runtime_name}://{version.runtime_version}"
        self._runtime_ok_at = self._clock.monotonic()
        by_type = {c.type: c for c in status.conditions}
        runtime, network = by_type.get("RuntimeReady"), by_type.get("NetworkReady")
        self._runtime_errors = []
        if runtime is None or not runtime.status:
            self._runtime_errors.append(f"container runtime not ready: {_condition_text(runtime)}")
        self._network_errors = []
        if network is None or not network.status:
            text = _condition_text(network)
            self._network_errors.append(f"container runtime network not ready: {text}")

    async def _images(self) -> list[ContainerImage] | None:
        try:
            images = await self._cri.list_images()
        except CRIError as error:
            log.warning("listing images: %s", error)
            return None
        images.sort(key=lambda i: i.size, reverse=True)
        return [
            ContainerImage(
                names=[*i.repo_digests, *i.repo_tags][:MAX_NAMES_PER_IMAGE],
                size_bytes=i.size,
            )
            for i in images[:MAX_IMAGES]
        ]

    def _set_pressure(
        self, node: Node, conditions: list[NodeCondition], now: datetime.datetime
    ) -> None:
        under = self._under_pressure()
        for kind, text in PRESSURE_TEXT.items():
            pressure = kind in under
            reason, message = text.reason[pressure], text.message[pressure]
            if set_condition(conditions, kind, pressure, reason, message, now):
                self._event(node, text.event[pressure])

    def _under_pressure(self) -> set[str]:
        """The pressure conditions whose hard thresholds are crossed now."""
        usage = self._machine.read_usage()
        capacity = self._machine.read_capacity()
        measured = {
            "memory.available": (usage.memory_available, capacity.memory_bytes),
            "nodefs.available": (usage.nodefs_available, capacity.ephemeral_storage_bytes),
            "nodefs.inodesFree": (usage.nodefs_inodes_free, usage.nodefs_inodes),
            "imagefs.available": (usage.nodefs_available, capacity.ephemeral_storage_bytes),
            "imagefs.inodesFree": (usage.nodefs_inodes_free, usage.nodefs_inodes),
            "pid.available": (usage.pid_available, usage.pid_max),
        }
        return {
            SIGNAL_CONDITIONS[signal]
            for signal, threshold in self._thresholds.items()
            if measured[signal][0] < threshold.value(measured[signal][1])
        }

    def _set_ready(
        self, node: Node, conditions: list[NodeCondition], now: datetime.datetime
    ) -> None:
        errors = []
        if (
            self._runtime_ok_at is None
            or self._clock.monotonic() - self._runtime_ok_at > RUNTIME_DOWN_AFTER
        ):
            errors.append(RUNTIME_DOWN)
        errors += self._runtime_errors + self._network_errors
        if self._network_error:
            errors.append(self._network_error)
        errors += [
            message for healthy, message in (c() for c in self._health_checks) if not healthy
        ]
        ready = not errors
        reason = KUBELET_READY if ready else KUBELET_NOT_READY
        message = READY_MESSAGE if ready else not_ready_message(errors)
        if set_condition(conditions, READY, ready, reason, message, now):
            self._event(node, "NodeReady" if ready else "NodeNotReady")

    def _event(self, node: Node, reason: str) -> None:
        if self._events is not None:
            message = f"Node {node.metadata.name} status is now: {reason}"
            self._events.event(node, "Normal", reason, message)

    # Lease.

    async def renew_lease(self) -> Lease:
        """Renew the Lease (one update), or find or create it when that fails."""
        if self._lease is not None:
            lease = copy.deepcopy(self._lease)
            self._stamp_lease(lease)
            try:
                self._lease = await self._client.update(lease)
                return self._lease
            except ApiError as error:
                if not (error.conflict or error.not_found):
                    raise
        self._lease = await self._ensure_lease()
        return self._lease

    async def _ensure_lease(self) -> Lease:
        name = self.options.node_name
        try:
            lease = await self._client.get(Lease, name, NODE_LEASE_NAMESPACE)
        except ApiError as error:
            if not error.not_found:
                raise
            lease = Lease(metadata=ObjectMeta(name=name, namespace=NODE_LEASE_NAMESPACE))
            self._stamp_lease(lease)
            return await self._client.create(lease)
        self._stamp_lease(lease)
        return await self._client.update(lease)

    def _stamp_lease(self, lease: Lease) -> None:
        spec = lease.spec = lease.spec or LeaseSpec()
        spec.holder_identity = self.options.node_name
        spec.lease_duration_seconds = self.options.lease_duration_seconds
        spec.renew_time = micro_time(self._clock.now())
        uid = self._node.metadata.uid if self._node is not None else None
        if uid and not lease.metadata.owner_references:
            lease.metadata.owner_references = [node_owner(self.options.node_name, uid)]

    # Loops.

    async def _status_loop(self) -> None:
        while True:
            try:
                await self.sync_status()
            except (ApiError, ClientError) as error:
                log.warning("updating node status: %s", error)
            await self._clock.sleep(self.options.status_update_frequency)

    async def _lease_loop(self) -> None:
        interval = self.options.lease_duration_seconds / 4
        low, high = LEASE_BACKOFF
        failures = 0
        while True:
            try:
                await self.renew_lease()
            except (ApiError, ClientError) as error:
                log.warning("renewing node lease: %s", error)
                delay = _backoff(failures, low, min(high, interval))
                failures += 1
            else:
                delay, failures = interval, 0
            await self._clock.sleep(delay)


def reconcile_existing(existing: Node, initial: Node) -> bool:
    """Bring the default labels and the attach-detach annotation of an existing Node to what
    the kubelet would have registered; returns whether anything changed (upstream
    ``updateDefaultLabels`` and ``reconcileCMADAnnotationWithExistingNode``)."""
    changed = False
    labels = existing.metadata.labels = dict(existing.metadata.labels or {})
    wanted = initial.metadata.labels or {}
    for key in DEFAULT_LABELS:
        if key in wanted and labels.get(key) != wanted[key]:
            labels[key] = wanted[key]
            changed = True
    annotations = existing.metadata.annotations = dict(existing.metadata.annotations or {})
    if annotations.get(CMAD_ANNOTATION) != "true":
        annotations[CMAD_ANNOTATION] = "true"
        changed = True
    return changed


def _quantities(amounts: Mapping[str, int]) -> dict[str, QuantityValue]:
    formatted: dict[str, QuantityValue] = {}
    for resource, amount in amounts.items():
        if resource == "cpu":
            formatted[resource] = _cpu(amount)
        elif resource == "pods":
            formatted[resource] = str(amount)
        else:
            formatted[resource] = _bytes(amount)
    formatted["hugepages-2Mi"] = "0"
    return formatted
