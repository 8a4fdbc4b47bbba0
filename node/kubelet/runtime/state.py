"""What the runtime has of one pod: its sandboxes and container instances, as CRI reported them.

The runtime manager builds a ``PodRuntimeState`` per pod UID from one relist (``snapshot``)
and the pod worker hands it back to ``sync_pod``, ``kill_pod`` and ``remove_pod``; the
status generator reads ``containers`` and ``pod_ips``.  It is a frozen value: a relist makes
a new one, so a worker can compare two of them, and nobody mutates what another task reads.
"""

from __future__ import annotations

import dataclasses
import datetime

from node.kubelet.status import RuntimeContainer


@dataclasses.dataclass(frozen=True)
class SandboxState:
    """One sandbox of a pod.  ``cgroup_parent`` is the pod cgroup the kubelet gave it ("" when
    it did not record one); ``host_network`` says whether it shares the node's network."""

    id: str
    attempt: int
    ready: bool
    created_at: datetime.datetime
    ips: tuple[str, ...]
    host_network: bool = False
    cgroup_parent: str = ""


@dataclasses.dataclass(frozen=True)
class PodRuntimeState:
    """Every sandbox (newest first) and container instance (any order) of one pod."""

    uid: str
    namespace: str = ""
    name: str = ""
    sandboxes: tuple[SandboxState, ...] = ()
    containers: tuple[RuntimeContainer, ...] = ()

    @property
    def sandbox(self) -> SandboxState | None:
        """The newest sandbox, ready or not."""
        return self.sandboxes[0] if self.sandboxes else None

    @property
    def pod_ips(self) -> tuple[str, ...]:
        """The newest sandbox's IPs while it is ready; none otherwise."""
        sandbox = self.sandbox
        return sandbox.ips if sandbox is not None and sandbox.ready else ()

    def running(self) -> bool:
        """Whether anything of the pod still runs: a ready sandbox or a running container."""
        return any(s.ready for s in self.sandboxes) or any(
            c.state == "running" for c in self.containers
        )

    def newest(self, name: str) -> RuntimeContainer | None:
        """The most recently created instance of the container ``name``."""
        instances = [c for c in self.containers if c.name == name]
        return max(instances, key=age) if instances else None


def age(instance: RuntimeContainer) -> tuple[datetime.datetime, int]:
    """Orders instances of a container oldest first: by creation, then restart count (two
    instances created within the runtime's clock resolution)."""
    return instance.created_at, instance.restart_count
