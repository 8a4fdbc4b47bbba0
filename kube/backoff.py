"""Restart backoff for supervised processes: shared by the lab's supervisor (components run
detached, polled by PID) and ``kubelab server`` (components run as its children).

The policy is the kubelet's crash-loop backoff for containers: 1 s, 2 s, 4 s ... at most
30 s between restarts of a process that keeps dying, back to 1 s once a run lasted
``stable`` seconds.  Time is passed in, so callers and tests bring their own clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

INITIAL_BACKOFF: Final = 1.0
MAX_BACKOFF: Final = 30.0
STABLE: Final = 60.0


@dataclass
class Backoff:
    """When a dead process may be started again: the delay doubles with each crash in a
    row, and resets once a run lasted ``stable`` seconds."""

    initial: float = INITIAL_BACKOFF
    maximum: float = MAX_BACKOFF
    stable: float = STABLE
    _crashes: dict[str, int] = field(default_factory=dict)
    _started: dict[str, float] = field(default_factory=dict)
    _due: dict[str, float] = field(default_factory=dict)

    def running(self, key: str, pid: int, now: float) -> None:
        """``key`` runs as ``pid`` (first sighting starts the clock of its run)."""
        self._started.setdefault(f"{key}:{pid}", now)

    def restart_at(self, key: str, pid: int, now: float) -> float:
        """``key`` (last seen as ``pid``) is dead: the time it may be started again."""
        if key not in self._due:
            started = self._started.pop(f"{key}:{pid}", now)
            crashes = 0 if now - started >= self.stable else self._crashes.get(key, 0)
            self._crashes[key] = crashes + 1
            self._due[key] = now + min(self.initial * 2**crashes, self.maximum)
        return self._due[key]

    def due(self, key: str, pid: int, now: float) -> bool:
        """``key`` (last seen as ``pid``) is dead: True once it may be restarted."""
        return now >= self.restart_at(key, pid, now)

    def restarted(self, key: str) -> None:
        self._due.pop(key, None)
