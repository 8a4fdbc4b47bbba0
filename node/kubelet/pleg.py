"""The pod lifecycle event generator: relist the runtime every second, wake changed pods.

Shaped like upstream's generic PLEG (``pkg/kubelet/pleg/generic.go``).  Containers change on
their own (they exit, they are OOM-killed, a liveness kill lands), and CRI has no events, so
the PLEG lists the runtime's pods every ``period`` seconds and compares each pod's
fingerprint (its sandboxes with their readiness, its containers with their state) with the
previous relist.  Every pod whose fingerprint changed, appeared or vanished is reported to
``on_change`` with its uid; the kubelet's handler only wakes that pod's worker, so a relist
never blocks on a sync.

The last relist is kept as ``pods``: the kubelet's view of what runs on the node, used by the
housekeeping (orphans) and the kubelet server (the pod's sandbox, for port-forward).
``healthy`` turns false when no relist has succeeded for ``RELIST_THRESHOLD`` seconds, which
upstream reports as the Node's Ready condition ("PLEG is not healthy").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from kube.clock import Clock
from node.kubelet.runtime.state import PodRuntimeState

log = logging.getLogger("kubelab.kubelet.pleg")

RELIST_PERIOD = 1.0
RELIST_THRESHOLD = 180.0

Fingerprint = frozenset[tuple[str, str]]


def fingerprint(state: PodRuntimeState) -> Fingerprint:
    """What a pod's worker reacts to: each sandbox's readiness and each container's state."""
    return frozenset(
        [(s.id, "ready" if s.ready else "notready") for s in state.sandboxes]
        + [(c.id, c.state) for c in state.containers]
    )


class PodLifecycleEventGenerator:
    """Relists ``relist`` every ``period`` seconds; see the module docstring."""

    def __init__(
        self,
        relist: Callable[[], Awaitable[Mapping[str, PodRuntimeState]]],
        on_change: Callable[[str], None],
        clock: Clock,
        *,
        period: float = RELIST_PERIOD,
    ) -> None:
        self._relist = relist
        self._on_change = on_change
        self.clock = clock
        self.period = period
        self.pods: dict[str, PodRuntimeState] = {}
        self._seen: dict[str, Fingerprint] = {}
        self._last_relist: float | None = None
        self._started = clock.monotonic()

    async def relist(self) -> set[str]:
        """One relist: updates ``pods`` and reports the uids that changed."""
        pods = dict(await self._relist())
        self._last_relist = self.clock.monotonic()
        seen = {uid: fingerprint(state) for uid, state in pods.items()}
        changed = {
            uid for uid in seen.keys() | self._seen.keys() if seen.get(uid) != self._seen.get(uid)
        }
        self.pods, self._seen = pods, seen
        for uid in changed:
            self._on_change(uid)
        return changed

    def observed(self, state: PodRuntimeState) -> None:
        """A pod's state seen outside a relist (by its worker, right after a sync), so that
        ``pods`` is current before the next relist; change detection is left to the relist."""
        self.pods[state.uid] = state

    async def run(self) -> None:
        """Relist forever; a failed relist is logged and retried on the next period."""
        while True:
            try:
                await self.relist()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.warning("PLEG relist failed: %s", error)
            await self.clock.sleep(self.period)

    def healthy(self) -> tuple[bool, str]:
        """Whether relisting keeps up, and upstream's message when it does not."""
        since = self._last_relist if self._last_relist is not None else self._started
        elapsed = self.clock.monotonic() - since
        if elapsed <= RELIST_THRESHOLD:
            return True, ""
        return False, (
            f"PLEG is not healthy: pleg was last seen active {elapsed:.0f}s ago; "
            f"threshold is {RELIST_THRESHOLD:.0f}s"
        )
