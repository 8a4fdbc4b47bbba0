"""Pod cgroups: where a pod's cgroup goes, and removing it once the pod is gone.

The kubelet hands the runtime a ``cgroup_parent`` per sandbox (upstream's pod container
manager with the cgroupfs driver): ``<cgroup_root>/pod<uid>`` for Guaranteed pods,
``<cgroup_root>/burstable/pod<uid>`` and ``<cgroup_root>/besteffort/pod<uid>`` for the
others.  containerd creates those directories in every hierarchy but never removes them
(lab notes), so removal is the kubelet's: ``Cgroups.remove`` behind a Protocol, with
``SysCgroups`` doing it under a root directory (``/sys/fs/cgroup`` on a node, a temporary
tree in tests) and ``FakeCgroups`` recording calls.
"""

from __future__ import annotations

import errno
import os
import posixpath
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from kube.api.kinds.core_v1.pod import Pod, qos_class
from node.kubelet.runtime.options import NodeRuntimeOptions


def pod_cgroup_parent(pod: Pod, options: NodeRuntimeOptions) -> str:
    """The pod's cgroup path (cgroupfs driver), by QoS class."""
    qos = qos_class(pod.spec)
    leaf = f"pod{pod.metadata.uid or ''}"
    root = options.cgroup_root or "/"
    if qos == "Guaranteed":
        return posixpath.join(root, leaf)
    return posixpath.join(root, qos.lower(), leaf)


class Cgroups(Protocol):
    """Removes pod cgroups.  ``remove`` is idempotent: a path that is not there is done."""

    def remove(self, cgroup_path: str) -> None: ...


def _relative(cgroup_path: str) -> str:
    """The cgroup path below a hierarchy's root; refuses paths that could leave it."""
    parts = [p for p in cgroup_path.split("/") if p]
    if not cgroup_path.startswith("/") or not parts or any(p in (".", "..") for p in parts):
        raise ValueError(f"invalid cgroup path {cgroup_path!r}: must be absolute, below /")
    return "/".join(parts)


class SysCgroups:
    """Removes cgroups from every hierarchy mounted under ``root``.

    A root holding ``cgroup.controllers`` is a cgroup2-only mount and is the one hierarchy;
    otherwise every directory below it (v1 controllers, and ``unified`` when a cgroup2 mount
    sits beside them) is one, symlinked aliases (``cpu`` → ``cpu,cpuacct``) counted once.
    A cgroup directory is removed children first; the kernel refuses (EBUSY) while a
    process that was just killed is still leaving, so each rmdir is retried ``retries``
    times, ``delay`` seconds apart.  Raises OSError when a directory still cannot go.
    """

    def __init__(
        self,
        root: Path = Path("/sys/fs/cgroup"),
        *,
        retries: int = 5,
        delay: float = 0.02,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.root = root
        self._retries = retries
        self._delay = delay
        self._sleep = sleep

    def hierarchies(self) -> list[Path]:
        """The hierarchy roots under ``root``, each once, by its real name."""
        if (self.root / "cgroup.controllers").exists():
            return [self.root]
        if not self.root.is_dir():
            return []
        seen: dict[Path, Path] = {}
        for entry in sorted(self.root.iterdir(), key=lambda e: (e.is_symlink(), e.name)):
            if entry.is_dir():
                seen.setdefault(entry.resolve(), entry)
        return list(seen.values())

    def remove(self, cgroup_path: str) -> None:
        relative = _relative(cgroup_path)
        for hierarchy in self.hierarchies():
            target = hierarchy / relative
            for directory in _bottom_up(target):
                self._rmdir(directory)

    def _rmdir(self, directory: Path) -> None:
        for attempt in range(self._retries + 1):
            try:
                directory.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as error:
                if error.errno != errno.EBUSY or attempt == self._retries:
                    raise
                self._sleep(self._delay)


def _bottom_up(target: Path) -> Iterator[Path]:
    """``target`` and the directories below it, deepest first (nothing when it is absent)."""
    if not target.is_dir():
        return
    for current, _dirs, _files in os.walk(target, topdown=False):
        yield Path(current)


class FakeCgroups:
    """Records the paths ``remove`` was called with, in order."""

    def __init__(self) -> None:
        self.removed: list[str] = []

    def remove(self, cgroup_path: str) -> None:
        _relative(cgroup_path)
        self.removed.append(cgroup_path)
