"""CrashLoopBackOff: how long a container that keeps exiting waits before its next start.

The same policy as upstream's kubelet (``flowcontrol.Backoff`` with 10 s initial, 300 s cap,
no jitter), keyed per container *instance of a spec*: pod uid, container name and the hash of
the container's spec, so that editing a container's image starts its backoff afresh.

Two moments matter and both are explicit, as upstream has them:

- ``finished_at``, when the container last exited (from CRI).  The container is in back-off
  while ``now - finished_at`` is shorter than the current delay.
- the moment of the previous restart, recorded by ``record_exit`` when the pod worker decides
  to start the container again.  If the container then exits more than twice the cap
  (10 minutes) after that restart, it ran long enough to count as healthy and the delay
  starts again at 10 s.

So a pod worker that finds an exited container to restart does::

    remaining = backoff.in_backoff(key, finished_at)
    if remaining:
        reason cache ← CrashLoopBackOff, backoff.message(key, pod); resync in ``remaining`` s
    else:
        backoff.record_exit(key, finished_at); start the container

and calls ``gc()`` from its housekeeping loop.  All times come from the injected ``Clock``.
"""

from __future__ import annotations

import datetime
from typing import NamedTuple

from kube.api.kinds.core_v1.pod import Pod
from kube.clock import Clock
from kube.component import go_duration

INITIAL_DELAY = 10.0
MAX_DELAY = 300.0
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"


class BackoffKey(NamedTuple):
    """One container of one pod, as one version of its spec."""

    pod_uid: str
    container: str
    spec_hash: str


class _Entry(NamedTuple):
    delay: float
    last_update: datetime.datetime


class CrashLoopBackOff:
    """Per-container exponential restart delays.  Not thread-safe; one event loop owns it."""

    def __init__(
        self, clock: Clock, *, initial: float = INITIAL_DELAY, maximum: float = MAX_DELAY
    ) -> None:
        self.clock = clock
        self.initial = initial
        self.maximum = maximum
        self._entries: dict[BackoffKey, _Entry] = {}

    def _stable(self, since: datetime.datetime, entry: _Entry) -> bool:
        """Whether ``since`` is long enough after the last restart to forget the backoff."""
        return (since - entry.last_update).total_seconds() > 2 * self.maximum

    def in_backoff(self, key: BackoffKey, finished_at: datetime.datetime) -> float:
        """Seconds the container that exited at ``finished_at`` must still wait (0: start it)."""
        entry = self._entries.get(key)
        if entry is None or self._stable(finished_at, entry):
            return 0.0
        waited = (self.clock.now() - finished_at).total_seconds()
        return max(0.0, entry.delay - waited)

    def record_exit(self, key: BackoffKey, finished_at: datetime.datetime) -> float:
        """The container that exited at ``finished_at`` is being restarted now: double its
        delay (or start at the initial one after a long healthy run).  Returns the delay the
        next exit will wait."""
        entry = self._entries.get(key)
        if entry is None or self._stable(finished_at, entry):
            delay = self.initial
        else:
            delay = min(entry.delay * 2, self.maximum)
        self._entries[key] = _Entry(delay, self.clock.now())
        return delay

    def delay(self, key: BackoffKey) -> float:
        """The current delay of ``key`` (0 when it has none)."""
        entry = self._entries.get(key)
        return entry.delay if entry is not None else 0.0

    def message(self, key: BackoffKey, pod: Pod) -> str:
        """Upstream's waiting message for a container in back-off."""
        meta = pod.metadata
        return (
            f"back-off {go_duration(round(self.delay(key)))} restarting failed "
            f"container={key.container} pod={meta.name}_{meta.namespace}({meta.uid})"
        )

    def gc(self) -> None:
        """Forget entries not restarted for twice the cap: their next exit starts afresh."""
        now = self.clock.now()
        for key in [k for k, e in self._entries.items() if self._stable(now, e)]:
            del self._entries[key]

    def forget_pod(self, pod_uid: str) -> None:
        """Drop every entry of a pod that is gone."""
        for key in [k for k in self._entries if k.pod_uid == pod_uid]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
