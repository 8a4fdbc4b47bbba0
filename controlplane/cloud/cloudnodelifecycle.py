"""The cloud node lifecycle controller: Nodes follow their instances out of the cloud.

Upstream's ``cloud-provider/controllers/nodelifecycle``: a Node whose Ready condition is not
True may be so because its instance was deleted or shut down, which only the cloud can tell.
For such a Node this controller asks the cloud and

- deletes the Node (event ``DeletingNode``) when its instance no longer exists, with the
  Node's uid as precondition so a Node registered again under that name is left alone;
- adds the ``node.cloudprovider.kubernetes.io/shutdown:NoSchedule`` taint while the instance
  exists but is shut down.

A Ready Node loses the shutdown taint; a Ready Node is never deleted, whatever the cloud says
(a healthy kubelet proves its instance exists).  Every Node is enqueued each
``node_monitor_period`` and when its Ready condition changes.  Keys are node names.
"""

from __future__ import annotations

import copy
import logging

from controlplane.cloud.context import TAINT_SHUTDOWN, CloudContext, CloudController, has_taint
from controlplane.cloud.instances import instance_exists, instance_shutdown, require_instances
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.nodeutil import NO_SCHEDULE, is_ready, node_condition, node_taints
from kube.api.kinds.core_v1.node import Node, NodeSpec, Taint
from kube.api.meta_v1 import Preconditions
from kube.client.errors import ApiError

NAME = "cloud-node-lifecycle"
EVENT_DELETING_NODE = "DeletingNode"

log = logging.getLogger("kubelab.cloud")


def _ready_status(node: Node) -> str | None:
    condition = node_condition(node, "Ready")
    return condition.status if condition else None


class CloudNodeLifecycleController(CloudController):
    NAME = NAME
    EVENT_SOURCE = "cloud-node-lifecycle-controller"

    def __init__(self, ctx: ControllerContext, cloud: CloudContext) -> None:
        super().__init__(ctx, cloud)
        require_instances(self.cloud)
        self.period = self.options.node_monitor_period
        self.nodes = ctx.informers.informer_for(Node)
        self.nodes.add_event_handler(self.enqueue, self._enqueue_ready_change)

    def _enqueue_ready_change(self, old: Node, new: Node) -> None:
        if _ready_status(old) != _ready_status(new):
            self.enqueue(new)

    def resync(self) -> None:
        for key in self.nodes.lister.keys():  # noqa: SIM118 (an Indexer, not a dict)
            self.queue.add(key)

    async def sync_key(self, key: str) -> None:
        node = self.nodes.lister.get(key)
        if node is None:
            return
        if is_ready(node):
            if has_taint(node, TAINT_SHUTDOWN):
                await self._set_taints(
                    node, [t for t in node_taints(node) if t.key != TAINT_SHUTDOWN]
                )
            return
        if not await instance_exists(self.cloud, node):
            await self._delete(node)
            return
        if await instance_shutdown(self.cloud, node) and not has_taint(node, TAINT_SHUTDOWN):
            shutdown = Taint(key=TAINT_SHUTDOWN, effect=NO_SCHEDULE)
            await self._set_taints(node, [*node_taints(node), shutdown])

    async def _delete(self, node: Node) -> None:
        name = node.metadata.name or ""
        log.info("cloud-node-lifecycle: deleting node %s: its instance is gone", name)
        self.ctx.recorder.event(
            node,
            "Normal",
            EVENT_DELETING_NODE,
            f"Deleting node {name} because it does not exist in the cloud provider",
        )
        try:
            await self.ctx.client.delete(
                Node, name, preconditions=Preconditions(uid=node.metadata.uid)
            )
        except ApiError as error:
            if not error.not_found:
                raise

    async def _set_taints(self, node: Node, taints: list[Taint]) -> None:
        updated = copy.deepcopy(node)
        updated.spec = updated.spec or NodeSpec()
        updated.spec.taints = taints or None
        await self.ctx.client.update(updated)


def new(ctx: ControllerContext, cloud: CloudContext) -> CloudNodeLifecycleController:
    return CloudNodeLifecycleController(ctx, cloud)
