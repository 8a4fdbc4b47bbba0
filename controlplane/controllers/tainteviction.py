"""The taint-eviction controller: pods leave nodes with NoExecute taints they don't tolerate.

Upstream's ``pkg/controller/tainteviction``.  For a pod bound to a node with NoExecute
taints:

* a taint no toleration of the pod tolerates → the pod is deleted now;
* every taint tolerated, some matching toleration with ``tolerationSeconds`` → deleted once
  the smallest of those has passed since the controller first saw the pod tolerating the
  taints (``tolerationSeconds`` <= 0 means now); the pod's key is enqueued for that moment;
* every taint tolerated forever → nothing; a scheduled deletion is cancelled, as it is when
  the taints go away (event "Cancelling deletion of Pod ns/name").

Deleting records ``TaintManagerEviction`` "Marking for deletion Pod ns/name", adds the
``DisruptionTarget`` condition (``DeletionByTaintManager``) and deletes gracefully.  The pace
of evictions is set by the node-lifecycle controller, which rate-limits the NoExecute taints
it adds; this controller does not rate-limit deletions (as upstream).

Keys are pod keys; a node whose NoExecute taints change enqueues every pod bound to it.  The
scheduled deletions live in memory, keyed by pod, with the monotonic time they were first
scheduled; pods already being deleted are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from controlplane.controllers.nodeutil import (
    DISRUPTION_TARGET,
    has_condition,
    no_execute_taints,
    patch_pod_status,
)
from kube.api.keys import object_key
from kube.api.kinds.core_v1.node import Node, Taint
from kube.api.kinds.core_v1.pod import Pod, PodCondition, Toleration
from kube.api.taints import tolerates
from kube.client.errors import ApiError
from kube.client.informers import NODE_NAME_INDEX

NAME = "taint-eviction-controller"
REASON = "TaintManagerEviction"


@dataclass
class _Scheduled:
    pod: Pod
    created: float
    """Monotonic time the deletion was first scheduled; tolerationSeconds count from it."""


def matching_tolerations(
    taints: list[Taint], tolerations: list[Toleration]
) -> list[Toleration] | None:
    """The first toleration tolerating each taint, or None if some taint is not tolerated
    (upstream ``GetMatchingTolerations``)."""
    used: list[Toleration] = []
    for taint in taints:
        toleration = next((t for t in tolerations if tolerates(t, taint)), None)
        if toleration is None:
            return None
        used.append(toleration)
    return used


def min_toleration_seconds(tolerations: list[Toleration]) -> float | None:
    """The shortest ``tolerationSeconds`` (0 if any is <= 0), None if all are forever."""
    seconds = [t.toleration_seconds for t in tolerations if t.toleration_seconds is not None]
    return float(max(0, min(seconds))) if seconds else None


class TaintEvictionController(Controller):
    NAME = NAME
    EVENT_SOURCE = "taint-eviction-controller"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self._scheduled: dict[str, _Scheduled] = {}
        self.nodes = ctx.informers.informer_for(Node)
        self.pods = ctx.informers.informer_for(Pod)
        self.pods.add_event_handler(self.enqueue, self._pod_updated, self.enqueue)
        self.nodes.add_event_handler(self._node_added, self._node_updated, self._node_added)

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        old_spec, new_spec = old.spec, new.spec
        if (
            old_spec is None
            or new_spec is None
            or (old_spec.tolerations, old_spec.node_name)
            != (new_spec.tolerations, new_spec.node_name)
        ):
            self.enqueue(new)

    def _node_added(self, obj: Any) -> None:
        self._enqueue_pods_of(unwrap(obj))

    def _node_updated(self, old: Node, new: Node) -> None:
        if no_execute_taints(old) != no_execute_taints(new):
            self._enqueue_pods_of(new)

    def _enqueue_pods_of(self, node: Node) -> None:
        for key in self.pods.lister.index_keys(NODE_NAME_INDEX, node.metadata.name or ""):
            self.queue.add(key)

    async def sync_key(self, key: str) -> None:
        pod = self.pods.lister.get(key)
        if pod is None or pod.metadata.deletion_timestamp is not None:
            self._scheduled.pop(key, None)
            return
        node_name = pod.spec.node_name if pod.spec else None
        taints = no_execute_taints(self.nodes.lister.get(node_name) if node_name else None)
        if not taints:
            self._cancel(key)
            return
        used = matching_tolerations(
            taints, list((pod.spec.tolerations if pod.spec else None) or ())
        )
        if used is not None:
            seconds = min_toleration_seconds(used)
            if seconds is None:
                self._cancel(key)
                return
            now = self.ctx.clock.monotonic()
            scheduled = self._scheduled.setdefault(key, _Scheduled(pod, now))
            remaining = scheduled.created + seconds - now
            if remaining > 0:
                self.queue.add_after(key, remaining)
                return
        await self._evict(pod)
        self._scheduled.pop(key, None)

    def _cancel(self, key: str) -> None:
        scheduled = self._scheduled.pop(key, None)
        if scheduled is not None:
            self.ctx.recorder.event(
                scheduled.pod, "Normal", REASON, f"Cancelling deletion of Pod {key}"
            )

    async def _evict(self, pod: Pod) -> None:
        """Mark the pod as a disruption target, then delete it (``addConditionAndDeletePod``)."""
        key = object_key(pod)
        self.ctx.recorder.event(pod, "Normal", REASON, f"Marking for deletion Pod {key}")
        condition = PodCondition(
            type=DISRUPTION_TARGET,
            status="True",
            reason="DeletionByTaintManager",
            message="Taint manager: deleting due to NoExecute taint",
            last_transition_time=self.ctx.clock.now().replace(microsecond=0),
        )
        client, name, namespace = self.ctx.client, pod.metadata.name or "", pod.metadata.namespace
        try:
            current = await client.get(Pod, name, namespace)
            if not has_condition(current, condition):
                await patch_pod_status(client, current, condition=condition)
            await client.delete(Pod, name, namespace)
        except ApiError as error:
            if not error.not_found:
                raise


def _placement(pod: Pod) -> tuple[str, list[Toleration]]:
    """The pod's node and tolerations: what decides whether it must go."""
    spec = pod.spec
    return (
        (spec.node_name or "") if spec else "",
        list((spec.tolerations if spec else None) or ()),
    )


def new(ctx: ControllerContext) -> TaintEvictionController:
    return TaintEvictionController(ctx)
