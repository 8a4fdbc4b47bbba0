"""The kubelet's volume manager: a pod's volumes set up on the node, kept current, removed.

Each volume a pod declares becomes a directory the runtime bind-mounts into containers:

    <root>/pods/<uid>/volumes/kubernetes.io~<plugin>/<name>

(``empty-dir``, ``configmap``, ``secret``, ``downward-api``, ``projected``, as upstream escapes
``kubernetes.io/<plugin>``); a hostPath volume is the node path itself, after upstream's type
check.  ``setup`` returns the host path of every volume by name.

- emptyDir: a 0777 directory; with ``medium: Memory`` a tmpfs sized like upstream's
  ``calculateEmptyDirMemorySize`` (the smallest positive of node allocatable memory, the pod's
  memory limit and ``sizeLimit``).
- configMap, secret, downwardAPI, projected: a directory (tmpfs for secret and projected, as
  upstream's wrapped emptyDir with medium Memory, so secrets and tokens never touch disk) whose
  files are written by the ``AtomicWriter`` from ``sources.payload``.

Setup is idempotent and is also how content is kept current: ``refresh(pod)`` runs it again
with the ``SourcesGetter`` given at setup; the writer only publishes a new version when a file
changed.  The kubelet calls it on each pod sync (and when a ConfigMap or Secret changes).
Service account tokens are cached per pod and renewed like upstream's token manager: a token
fetched for ``expirationSeconds`` E is replaced after 80% of E or 24 hours, whichever comes
first (without upstream's jitter, so tests are exact).  A per-pod task sleeps on the ``Clock``
until the next renewal and refreshes the pod then; on failure it retries every
``TOKEN_RETRY_SECONDS``.

Side effects sit behind narrow interfaces: the ``Mounter`` (``SystemMounter`` calls
mount(2)/umount(2), no process per mount; ``FakeMounter`` records), the ``SourcesGetter``
(the API), the ``Clock``.
Files are written directly (small, local).  ``teardown`` works from the disk alone, so a
restarted kubelet can remove the volumes of pods it no longer knows (``pods_on_disk``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import logging
import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple, Protocol

from kube.api.kinds.core_v1.cluster import ConfigMap, Secret
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import HostPathVolumeSource, Volume, parse_quantity
from kube.api.struct import QuantityValue
from kube.clock import Clock
from node.kubelet.volumes import sources
from node.kubelet.volumes.atomic import AtomicWriter

__all__ = [
    "FakeMounter",
    "MountError",
    "Mounter",
    "SourcesGetter",
    "SystemMounter",
    "VolumeError",
    "VolumeManager",
]

log = logging.getLogger(__name__)

MAX_TOKEN_TTL = 24 * 3600.0
TOKEN_REFRESH_FRACTION = 0.8
TOKEN_RETRY_SECONDS = 10.0
EMPTY_DIR_MODE = 0o777
MEMORY = "Memory"

EMPTY_DIR = "empty-dir"
CONFIG_MAP = "configmap"
SECRET = "secret"
DOWNWARD_API = "downward-api"
PROJECTED = "projected"
HOST_PATH = "host-path"


class MountError(Exception):
    """A mount operation that failed: what was asked (as the ``mount`` command would say it),
    the error number and its text."""

    def __init__(self, command: list[str], code: int, output: str) -> None:
        super().__init__(f"{' '.join(command)} failed ({code}): {output.strip()}")
        self.command = command
        self.code = code
        self.output = output


class Mounter(Protocol):
    """The mount table: the only privileged operations volumes need."""

    async def mount_tmpfs(self, target: Path, size_bytes: int | None) -> None:
        """Mount a fresh tmpfs on ``target`` (an existing directory), of at most the size."""
        ...

    async def unmount(self, target: Path) -> None: ...

    def is_mountpoint(self, target: Path) -> bool: ...


class SystemMounter:
    """The real mount table, through mount(2) and umount(2) (needs root)."""

    async def mount_tmpfs(self, target: Path, size_bytes: int | None) -> None:
        options = f"size={size_bytes}" if size_bytes else ""
        if _libc.mount(b"tmpfs", os.fsencode(target), b"tmpfs", 0, options.encode() or None):
            command = ["mount", "-t", "tmpfs", *(["-o", options] if options else []), "tmpfs"]
            raise _mount_error([*command, str(target)])

    async def unmount(self, target: Path) -> None:
        if _libc.umount2(os.fsencode(target), 0):
            raise _mount_error(["umount", str(target)])

    def is_mountpoint(self, target: Path) -> bool:
        # The kubelet only mounts tmpfs, a filesystem of its own: a device change tells, in
        # one stat, what a scan of the node's (long) mount table would.
        return os.path.ismount(target)


_libc = ctypes.CDLL(None, use_errno=True)


def _mount_error(command: list[str]) -> MountError:
    code = ctypes.get_errno()
    return MountError(command, code, os.strerror(code))


class FakeMounter:
    """A mount table in memory: ``mounts`` maps each mounted path to its tmpfs size."""

    def __init__(self) -> None:
        self.mounts: dict[Path, int | None] = {}

    async def mount_tmpfs(self, target: Path, size_bytes: int | None) -> None:
        if target in self.mounts:
            raise MountError(["mount", str(target)], 32, "already mounted")
        self.mounts[target] = size_bytes

    async def unmount(self, target: Path) -> None:
        if self.mounts.pop(target, False) is False:
            raise MountError(["umount", str(target)], 32, "not mounted")

    def is_mountpoint(self, target: Path) -> bool:
        return target in self.mounts


class SourcesGetter(Protocol):
    """Where volume content comes from (the API server, through the kubelet's caches)."""

    async def config_map(self, namespace: str, name: str) -> ConfigMap | None:
        """The ConfigMap, or None when it does not exist; other failures raise."""
        ...

    async def secret(self, namespace: str, name: str) -> Secret | None:
        """The Secret, or None when it does not exist; other failures raise."""
        ...

    async def service_account_token(
        self, pod: Pod, audience: str | None, expiration_seconds: int
    ) -> str:
        """A token of the pod's service account bound to the pod (a TokenRequest)."""
        ...


class VolumeError(Exception):
    """Volumes that could not be set up; the message is upstream's event text."""


class _Token(NamedTuple):
    value: str
    refresh_at: float  # on the clock's monotonic scale


@dataclasses.dataclass
class _PodVolumes:
    pod: Pod
    sources: SourcesGetter
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    tokens: dict[tuple[str | None, int], _Token] = dataclasses.field(default_factory=dict)
    refresher: asyncio.Task[None] | None = None


def _plugin(volume: Volume) -> str:
    """The upstream plugin name of a volume's source."""
    for plugin, present in (
        (EMPTY_DIR, volume.empty_dir),
        (HOST_PATH, volume.host_path),
        (CONFIG_MAP, volume.config_map),
        (SECRET, volume.secret),
        (DOWNWARD_API, volume.downward_api),
        (PROJECTED, volume.projected),
    ):
        if present is not None:
            return plugin
    raise VolumeError(f'volume "{volume.name}": unsupported volume type')


def _check_host_path(source: HostPathVolumeSource) -> Path:
    """Upstream's hostPath type check, creating the path for the ...OrCreate types."""
    path = Path(source.path or "")
    kind = source.type or ""
    if kind == "DirectoryOrCreate" and not path.exists():
        path.mkdir(mode=0o755, parents=True)
    if kind == "FileOrCreate" and not path.exists():
        path.touch(mode=0o644)
    checks = {
        "DirectoryOrCreate": (stat.S_ISDIR, "a directory"),
        "Directory": (stat.S_ISDIR, "a directory"),
        "FileOrCreate": (stat.S_ISREG, "a file"),
        "File": (stat.S_ISREG, "a file"),
        "Socket": (stat.S_ISSOCK, "a socket file"),
        "CharDevice": (stat.S_ISCHR, "a character device"),
        "BlockDevice": (stat.S_ISBLK, "a block device"),
    }
    if kind == "":
        return path
    if kind not in checks:
        raise VolumeError(f"{kind} is an invalid volume type")
    check, what = checks[kind]
    try:
        matches = check(path.stat().st_mode)
    except FileNotFoundError:
        matches = False
    if not matches:
        raise VolumeError(f"hostPath type check failed: {path} is not {what}")
    return path


def _memory_limit(pod: Pod) -> int | None:
    """The pod's memory limit as its cgroup gets it: only when every app container has one;
    the larger of their sum and the largest init container limit, plus the overhead."""
    spec = pod.spec
    if spec is None:
        return None

    def limit(limits: Mapping[str, QuantityValue] | None) -> int | None:
        quantity = parse_quantity((limits or {}).get("memory"))
        return quantity.value() if quantity is not None and quantity.value() > 0 else None

    app = [limit(c.resources.limits if c.resources else None) for c in spec.containers or []]
    if not app or any(value is None for value in app):
        return None
    init = [limit(c.resources.limits if c.resources else None) for c in spec.init_containers or []]
    total = max([sum(v or 0 for v in app), *(v or 0 for v in init)])
    return total + (limit(spec.overhead) or 0)


def _make_dir(directory: Path) -> None:
    """A volume directory, 0777 as upstream's emptyDir (also under a tmpfs mounted on it)."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, EMPTY_DIR_MODE)


class VolumeManager:
    """Sets up, refreshes and tears down the volumes of the pods on this node.

    Calls for one pod are serialised by a per-pod lock; different pods proceed independently.
    """

    def __init__(
        self,
        root_dir: Path,
        mounter: Mounter,
        clock: Clock,
        node_allocatable: Mapping[str, QuantityValue] | None = None,
    ) -> None:
        self.root_dir = root_dir
        self._mounter = mounter
        self._clock = clock
        self._allocatable = dict(node_allocatable or {})
        self._pods: dict[str, _PodVolumes] = {}

    def volumes_dir(self, pod_uid: str) -> Path:
        return self.root_dir / "pods" / pod_uid / "volumes"

    def volume_dir(self, pod_uid: str, plugin: str, name: str) -> Path:
        return self.volumes_dir(pod_uid) / f"kubernetes.io~{plugin}" / name

    def pods_on_disk(self) -> set[str]:
        """UIDs of the pods that have a volumes directory (to clean up orphans at start)."""
        pods = self.root_dir / "pods"
        return (
            {p.name for p in pods.iterdir() if (p / "volumes").is_dir()} if pods.is_dir() else set()
        )

    async def setup(self, pod: Pod, getter: SourcesGetter) -> dict[str, Path]:
        """Make every volume of ``pod`` ready and current; returns host paths by volume name.

        Idempotent.  Every volume is attempted; failures are raised together as one
        ``VolumeError`` afterwards.  Starts the pod's token renewal when it has tokens.
        """
        uid = pod.metadata.uid or ""
        state = self._pods.get(uid)
        if state is None:
            state = self._pods[uid] = _PodVolumes(pod, getter)
        state.pod, state.sources = pod, getter
        paths: dict[str, Path] = {}
        errors: list[str] = []
        async with state.lock:
            for volume in (pod.spec.volumes if pod.spec else None) or []:
                try:
                    paths[volume.name or ""] = await self._setup_volume(state, volume)
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    errors.append(f'MountVolume.SetUp failed for volume "{volume.name}" : {error}')
        if state.tokens and state.refresher is None:
            state.refresher = asyncio.create_task(
                self._renew_tokens(state), name=f"volume token renewal {uid}"
            )
        if errors:
            raise VolumeError("; ".join(errors))
        return paths

    async def refresh(self, pod: Pod) -> None:
        """Rewrite the pod's configMap/secret/downwardAPI/projected volumes whose content
        changed (a no-op for unchanged ones), with the getter given to ``setup``."""
        state = self._pods.get(pod.metadata.uid or "")
        if state is None:
            raise VolumeError(f"volumes of pod {pod.metadata.uid} were never set up")
        await self.setup(pod, state.sources)

    async def teardown(self, pod_uid: str) -> None:
        """Unmount and remove every volume directory of the pod (hostPath sources are never
        touched).  Idempotent; works without any state from ``setup``."""
        state = self._pods.pop(pod_uid, None)
        if state is not None:
            await self._stop(state)
        volumes = self.volumes_dir(pod_uid)
        if not volumes.is_dir():
            return
        for volume in sorted(volumes.glob("*/*")):
            if self._mounter.is_mountpoint(volume):
                await self._mounter.unmount(volume)
            if self._mounter.is_mountpoint(volume):
                raise VolumeError(f"{volume} is still mounted; not removing it")
        shutil.rmtree(volumes)

    async def close(self) -> None:
        """Stop every token renewal task (the kubelet is stopping); volumes stay."""
        for state in self._pods.values():
            await self._stop(state)

    @staticmethod
    async def _stop(state: _PodVolumes) -> None:
        if state.refresher is not None:
            state.refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await state.refresher
            state.refresher = None

    async def _setup_volume(self, state: _PodVolumes, volume: Volume) -> Path:
        plugin = _plugin(volume)
        if volume.host_path is not None:
            return _check_host_path(volume.host_path)
        directory = self.volume_dir(state.pod.metadata.uid or "", plugin, volume.name or "")
        if volume.empty_dir is not None:
            medium = volume.empty_dir.medium or ""
            if medium not in ("", MEMORY):
                raise VolumeError(f"unsupported emptyDir medium {medium!r}")
            await self._setup_dir(directory, medium == MEMORY, volume.empty_dir.size_limit, state)
            return directory
        await self._setup_dir(directory, plugin in (SECRET, PROJECTED), None, state)
        objects = await self._fetch(state, volume)
        payload = await sources.payload(
            state.pod, volume, objects, self._token_getter(state), self._allocatable
        )
        AtomicWriter(directory, self._clock.now).write(payload)
        return directory

    async def _setup_dir(
        self, directory: Path, memory: bool, size_limit: QuantityValue | None, state: _PodVolumes
    ) -> None:
        _make_dir(directory)
        if memory and not self._mounter.is_mountpoint(directory):
            await self._mounter.mount_tmpfs(directory, self._memory_size(state.pod, size_limit))

    def _memory_size(self, pod: Pod, size_limit: QuantityValue | None) -> int | None:
        """Upstream ``calculateEmptyDirMemorySize``: node allocatable memory, lowered to the
        pod's memory limit and then to ``sizeLimit`` when those are positive and smaller."""
        allocatable = parse_quantity(self._allocatable.get("memory"))
        size = allocatable.value() if allocatable is not None else None
        limit = parse_quantity(size_limit)
        for candidate in (_memory_limit(pod), limit.value() if limit is not None else None):
            if candidate is not None and candidate > 0 and (size is None or candidate <= size):
                size = candidate
        return size

    async def _fetch(self, state: _PodVolumes, volume: Volume) -> sources.Objects:
        namespace = state.pod.metadata.namespace or ""
        wanted = sources.references(volume)
        config_maps = {
            name: found
            for name in wanted.config_maps
            if (found := await state.sources.config_map(namespace, name)) is not None
        }
        secrets = {
            name: secret
            for name in wanted.secrets
            if (secret := await state.sources.secret(namespace, name)) is not None
        }
        return sources.Objects(config_maps, secrets)

    def _token_getter(self, state: _PodVolumes) -> sources.TokenGetter:
        async def get(audience: str | None, expiration_seconds: int) -> str:
            key = (audience, expiration_seconds)
            cached = state.tokens.get(key)
            now = self._clock.monotonic()
            if cached is not None and now < cached.refresh_at:
                return cached.value
            value = await state.sources.service_account_token(
                state.pod, audience, expiration_seconds
            )
            ttl = min(TOKEN_REFRESH_FRACTION * expiration_seconds, MAX_TOKEN_TTL)
            state.tokens[key] = _Token(value, now + ttl)
            return value

        return get

    async def _renew_tokens(self, state: _PodVolumes) -> None:
        """Refresh the pod when its earliest token is due; retry failures periodically."""
        while True:
            due = min(token.refresh_at for token in state.tokens.values())
            await self._clock.sleep(max(0.0, due - self._clock.monotonic()))
            try:
                await self.refresh(state.pod)
            except VolumeError as error:
                log.warning("renewing tokens of pod %s: %s", state.pod.metadata.uid, error)
                await self._clock.sleep(TOKEN_RETRY_SECONDS)
