"""Pod workers: one asyncio task per pod UID, driving the pod through its lifecycle.

Shaped like upstream's ``pkg/kubelet/pod_workers.go``.  The kubelet hands every change it hears
about (the API's pod watch, static pod files, the PLEG, probe verdicts, backoff timers) to
``PodWorkers``; each pod's worker runs the ``PodSyncer`` for it, one step at a time, never two
at once for the same pod.  Updates that arrive while a step runs are merged: the worker keeps
only the latest version of the pod and runs once more afterwards, so a burst of changes costs
one extra sync, not one per change.

The state machine of a pod, in the order it only ever moves::

    SYNCING ──(terminal phase, deletion, or removal)──▶ TERMINATING ──▶ TERMINATED ──▶ REMOVED

- SYNCING: ``sync_pod`` makes the node match the pod (sandbox, containers, volumes, status).
  It returns whether the pod reached a terminal phase and when it wants to run again (a
  CrashLoopBackOff ending); otherwise the worker runs on the next event or after
  ``resync_interval``.
- TERMINATING: ``sync_terminating_pod`` stops every container within the grace period.  A
  deletion (``deletionTimestamp``) or a removal (the pod left the API or its manifest vanished)
  cancels a SYNCING step in flight, so a pod stuck pulling an image is still deleted at once.
  A second kill with a shorter grace period shortens it, as upstream.
- TERMINATED: ``sync_terminated_pod`` gives back what the pod held on the node (volumes,
  cgroups, probe workers) and reports the final status, once.  The pod's dead containers stay
  so that ``kubectl logs`` still works for a completed pod.
- REMOVED: once the pod is being deleted or is gone, ``sync_removed_pod`` removes its
  containers and sandboxes and confirms the deletion to the API server.  When the pod is also
  gone from the kubelet's sources the worker ends and the pod is forgotten.

A step that raises is retried with a per-pod backoff (``ERROR_BACKOFF`` doubling to
``MAX_ERROR_BACKOFF``), the state unchanged.  Time comes from the injected ``Clock``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
from collections.abc import Iterable
from typing import NamedTuple, Protocol

from kube.api.kinds.core_v1.pod import Pod
from kube.clock import Clock

log = logging.getLogger("kubelab.kubelet.podworkers")

RESYNC_INTERVAL = 60.0
ERROR_BACKOFF = 1.0
MAX_ERROR_BACKOFF = 10.0
DEFAULT_GRACE_SECONDS = 30


class PodState(enum.Enum):
    SYNCING = "syncing"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    REMOVED = "removed"


class SyncOutcome(NamedTuple):
    """What one ``sync_pod`` concluded."""

    terminal: bool = False
    """The pod reached Succeeded or Failed: nothing will run again."""
    resync_after: float | None = None
    """Run again after this many seconds (a backoff ending), unless an event comes first."""


class PodSyncer(Protocol):
    """The kubelet's side of the workers: one method per state, each idempotent."""

    async def sync_pod(self, pod: Pod) -> SyncOutcome: ...

    async def sync_terminating_pod(self, pod: Pod, grace_seconds: int) -> None: ...

    async def sync_terminated_pod(self, pod: Pod) -> None: ...

    async def sync_removed_pod(self, pod: Pod) -> None: ...


def _uid(pod: Pod) -> str:
    return pod.metadata.uid or ""


def _deleting(pod: Pod) -> bool:
    return pod.metadata.deletion_timestamp is not None


def grace_seconds(pod: Pod) -> int:
    """The grace period a pod's containers get: the deletion's, else the spec's."""
    if pod.metadata.deletion_grace_period_seconds is not None:
        return max(0, pod.metadata.deletion_grace_period_seconds)
    if pod.spec is not None and pod.spec.termination_grace_period_seconds is not None:
        return max(0, pod.spec.termination_grace_period_seconds)
    return DEFAULT_GRACE_SECONDS


@dataclasses.dataclass(eq=False)
class _Worker:
    pod: Pod
    state: PodState = PodState.SYNCING
    removed: bool = False
    """The pod left the kubelet's sources (the API or the manifest directory)."""
    grace: int | None = None
    cleaned: bool = False
    failures: int = 0
    wake: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    step: asyncio.Task[float | None] | None = None

    def must_terminate(self) -> bool:
        return self.removed or _deleting(self.pod)


class PodWorkers:
    """Every pod worker of the node; see the module docstring."""

    def __init__(
        self, syncer: PodSyncer, clock: Clock, *, resync_interval: float = RESYNC_INTERVAL
    ) -> None:
        self.syncer = syncer
        self.clock = clock
        self.resync_interval = resync_interval
        self._workers: dict[str, _Worker] = {}

    def update_pod(self, pod: Pod, *, removed: bool = False) -> None:
        """The latest version of ``pod``; ``removed`` when it left the kubelet's sources.

        Never blocks: the pod's worker picks the update up (merged with any not yet seen).
        """
        uid = _uid(pod)
        worker = self._workers.get(uid)
        if worker is None:
            # Even a pod removed before this kubelet ever ran it gets a worker: after a
            # restart its containers may still be running and must be stopped.
            worker = self._workers[uid] = _Worker(pod)
            worker.task = asyncio.create_task(self._run(uid, worker), name=f"pod worker {uid}")
        worker.pod = pod
        worker.removed = worker.removed or removed
        if worker.must_terminate():
            grace = grace_seconds(pod)
            shortened = worker.grace is not None and grace < worker.grace
            worker.grace = grace if worker.grace is None else min(worker.grace, grace)
            # A sync in flight gives way to the termination; a termination in flight starts
            # again with the shorter grace period (a force delete must not wait the old one).
            interrupted = worker.state is PodState.SYNCING or (
                worker.state is PodState.TERMINATING and shortened
            )
            if interrupted and worker.step is not None:
                worker.step.cancel()
        worker.wake.set()

    def sync(self, uid: str) -> None:
        """Run the pod's worker again (its runtime state or a probe verdict changed)."""
        worker = self._workers.get(uid)
        if worker is not None:
            worker.wake.set()

    def state(self, uid: str) -> PodState | None:
        worker = self._workers.get(uid)
        return worker.state if worker is not None else None

    def pod(self, uid: str) -> Pod | None:
        worker = self._workers.get(uid)
        return worker.pod if worker is not None else None

    def known(self) -> set[str]:
        """UIDs of every pod that has a worker (running, terminating or awaiting removal)."""
        return set(self._workers)

    def forget_missing(self, present: Iterable[str]) -> None:
        """Mark every pod not in ``present`` as removed from the sources (housekeeping)."""
        keep = set(present)
        for uid, worker in list(self._workers.items()):
            if uid not in keep and not worker.removed:
                self.update_pod(worker.pod, removed=True)

    async def close(self) -> None:
        """Stop every worker where it stands (the pods keep running on the node)."""
        tasks = [w.task for w in self._workers.values() if w.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._workers.clear()

    async def _run(self, uid: str, worker: _Worker) -> None:
        delay: float | None = 0.0
        try:
            while not (worker.state is PodState.REMOVED and worker.removed):
                await self._wait(worker, delay)
                worker.wake.clear()
                worker.step = asyncio.ensure_future(self._step(worker))
                try:
                    delay = await worker.step
                    worker.failures = 0
                except asyncio.CancelledError:
                    if worker.task is not None and worker.task.cancelling():
                        raise
                    delay = 0.0  # a kill cancelled the step: terminate (again) at once
                except Exception as error:
                    worker.failures += 1
                    delay = min(MAX_ERROR_BACKOFF, ERROR_BACKOFF * 2 ** (worker.failures - 1))
                    log.warning(
                        "pod %s/%s (%s): %s failed, retrying in %.0fs: %s",
                        worker.pod.metadata.namespace,
                        worker.pod.metadata.name,
                        uid,
                        worker.state.value,
                        delay,
                        error,
                        exc_info=log.isEnabledFor(logging.DEBUG),
                    )
                finally:
                    worker.step = None
        finally:
            if self._workers.get(uid) is worker:
                del self._workers[uid]

    async def _wait(self, worker: _Worker, delay: float | None) -> None:
        """Until an update arrives or ``delay`` seconds pass (forever when None)."""
        if worker.wake.is_set() or delay == 0.0:
            return
        waiters: list[asyncio.Future[object]] = [asyncio.ensure_future(worker.wake.wait())]
        if delay is not None:
            waiters.append(asyncio.ensure_future(self.clock.sleep(delay)))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            for waiter in waiters:
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter

    async def _step(self, worker: _Worker) -> float | None:
        """Run the current state's sync; the delay before the next run (None: on events)."""
        pod = worker.pod
        if worker.state is PodState.SYNCING:
            if worker.must_terminate():
                worker.state = PodState.TERMINATING
                return 0.0
            outcome = await self.syncer.sync_pod(pod)
            if outcome.terminal:
                worker.state = PodState.TERMINATING
                return 0.0
            if outcome.resync_after is not None:
                return min(outcome.resync_after, self.resync_interval)
            return self.resync_interval
        if worker.state is PodState.TERMINATING:
            if worker.grace is None:
                worker.grace = grace_seconds(pod)
            await self.syncer.sync_terminating_pod(pod, worker.grace)
            worker.state = PodState.TERMINATED
            return 0.0
        if worker.state is PodState.TERMINATED:
            if not worker.cleaned:
                await self.syncer.sync_terminated_pod(pod)
                worker.cleaned = True
            if worker.must_terminate():
                await self.syncer.sync_removed_pod(pod)
                worker.state = PodState.REMOVED
                return 0.0
            return None
        return None
