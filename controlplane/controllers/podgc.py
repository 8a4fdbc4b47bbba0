"""The pod-garbage-collector controller: removes pods nobody else will clean up.

Upstream's ``pkg/controller/podgc``: every ``GC_CHECK_PERIOD`` seconds one pass over the pod
cache

* deletes terminated pods (phase neither Pending, Running nor Unknown) beyond
  ``--terminated-pod-gc-threshold`` (0 turns this off): evicted pods first, then oldest
  first, names breaking ties;
* deletes terminating pods on a not-Ready node tainted ``node.kubernetes.io/out-of-service``;
* deletes pods bound to a node that does not exist: a missing node is first quarantined for
  ``QUARANTINE_TIME`` seconds (the node informer may simply lag), then confirmed gone with a
  live GET; such pods get the ``DisruptionTarget`` condition (``DeletionByPodGC``);
* deletes terminating pods that were never scheduled.

Every pod is force-deleted (grace 0) after its status was patched to ``Failed`` if it was
not terminal yet, since no kubelet will ever finish it.  The pass is one key, ``GC_KEY``,
that re-enqueues itself; quarantined node names and when they were first seen live in memory.
Failures of single pods don't stop the pass; the first is raised at its end so the key is
retried.
"""

from __future__ import annotations

import datetime

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller
from controlplane.controllers.nodeutil import (
    DISRUPTION_TARGET,
    TAINT_OUT_OF_SERVICE,
    TERMINAL_PHASES,
    is_ready,
    node_taints,
    patch_pod_status,
)
from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import Pod, PodCondition
from kube.client.errors import ApiError

NAME = "pod-garbage-collector"
GC_KEY = "#gc"
GC_CHECK_PERIOD = 20.0
QUARANTINE_TIME = 40.0
_EPOCH = datetime.datetime.min.replace(tzinfo=datetime.UTC)


def is_terminated(pod: Pod) -> bool:
    phase = pod.status.phase if pod.status else None
    return phase not in ("Pending", "Running", "Unknown")


def _eviction_then_age(pod: Pod) -> tuple[bool, datetime.datetime, str]:
    status = pod.status
    evicted = status is not None and status.phase == "Failed" and status.reason == "Evicted"
    return (not evicted, pod.metadata.creation_timestamp or _EPOCH, pod.metadata.name or "")


class PodGCController(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.threshold = ctx.options.terminated_pod_gc_threshold
        self._quarantine: dict[str, float] = {}
        """Missing node name → monotonic time it was first seen missing."""
        self.pods = ctx.informers.informer_for(Pod)
        self.nodes = ctx.informers.informer_for(Node)

    async def run(self, workers: int) -> None:
        self.queue.add(GC_KEY)
        await super().run(workers)

    async def sync_key(self, key: str) -> None:
        self.queue.add_after(GC_KEY, GC_CHECK_PERIOD)
        pods = self.pods.lister.list()
        doomed: list[tuple[Pod, PodCondition | None]] = []
        if self.threshold > 0:
            terminated = sorted(filter(is_terminated, pods), key=_eviction_then_age)
            excess = max(0, len(terminated) - self.threshold)
            doomed += [(pod, None) for pod in terminated[:excess]]
        doomed += [(pod, None) for pod in pods if self._terminating_out_of_service(pod)]
        deleted_nodes = await self._deleted_nodes(pods)
        condition = PodCondition(
            type=DISRUPTION_TARGET,
            status="True",
            reason="DeletionByPodGC",
            message="PodGC: node no longer exists",
            last_transition_time=self.ctx.clock.now().replace(microsecond=0),
        )
        doomed += [(pod, condition) for pod in pods if _node_of(pod) in deleted_nodes]
        doomed += [
            (pod, None)
            for pod in pods
            if pod.metadata.deletion_timestamp is not None and not _node_of(pod)
        ]
        errors: list[ApiError] = []
        done: set[str] = set()
        for pod, reason in doomed:
            if pod.metadata.uid in done:
                continue
            done.add(pod.metadata.uid or "")
            try:
                await self._fail_and_delete(pod, reason)
            except ApiError as error:
                if not error.not_found:
                    errors.append(error)
        if errors:
            raise errors[0]

    def _terminating_out_of_service(self, pod: Pod) -> bool:
        if pod.metadata.deletion_timestamp is None or not _node_of(pod):
            return False
        node = self.nodes.lister.get(_node_of(pod))
        return (
            node is not None
            and not is_ready(node)
            and any(t.key == TAINT_OUT_OF_SERVICE for t in node_taints(node))
        )

    async def _deleted_nodes(self, pods: list[Pod]) -> set[str]:
        """Names of nodes pods are bound to that stayed missing for the quarantine time and
        that a live GET confirms are gone."""
        now = self.ctx.clock.monotonic()
        missing = {_node_of(p) for p in pods if _node_of(p)} - set(self.nodes.lister.keys())
        for name in missing:
            first_seen = self._quarantine.setdefault(name, now)
            if first_seen + QUARANTINE_TIME > now:
                self.queue.add_after(GC_KEY, first_seen + QUARANTINE_TIME - now)
        deleted: set[str] = set()
        for name, first_seen in list(self._quarantine.items()):
            if first_seen + QUARANTINE_TIME > now:
                continue
            del self._quarantine[name]
            if name not in missing:
                continue
            try:
                await self.ctx.client.get(Node, name)
            except ApiError as error:
                if not error.not_found:
                    raise
                deleted.add(name)
        return deleted

    async def _fail_and_delete(self, pod: Pod, condition: PodCondition | None) -> None:
        """Move a pod that is not terminal yet to Failed (with ``condition``), then force
        delete it (upstream ``markFailedAndDeletePodWithCondition``)."""
        if (pod.status.phase if pod.status else None) not in TERMINAL_PHASES:
            await patch_pod_status(self.ctx.client, pod, phase="Failed", condition=condition)
        await self.ctx.client.delete(
            Pod, pod.metadata.name or "", pod.metadata.namespace, grace_period_seconds=0
        )


def _node_of(pod: Pod) -> str:
    return (pod.spec.node_name if pod.spec else None) or ""


def new(ctx: ControllerContext) -> PodGCController:
    return PodGCController(ctx)
