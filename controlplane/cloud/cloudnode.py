"""The cloud node controller: initializes Nodes from the cloud, then keeps their addresses.

A kubelet run with ``--cloud-provider external`` registers its Node with the
``node.cloudprovider.kubernetes.io/uninitialized:NoSchedule`` taint, so nothing is scheduled
there before the cloud has described it (upstream ``cloud-provider/controllers/node``).  This
controller asks the cloud for the instance's metadata and, for a Node carrying the taint:

1. writes the cloud's addresses to ``status.addresses`` (the status subresource);
2. sets ``spec.providerID`` if empty, the ``node.kubernetes.io/instance-type``,
   ``topology.kubernetes.io/zone`` and ``topology.kubernetes.io/region`` labels (and their
   deprecated ``beta``/``failure-domain`` twins, which upstream still writes), and removes the
   taint, in one update that carries the resourceVersion it read, so it cannot overwrite a
   change it did not see.

An instance the cloud does not know is an error and the key is retried: the Node stays
tainted (and the lifecycle controller deletes it if the cloud says it is gone).  Initialized
Nodes are enqueued every ``node_status_update_frequency``; their sync only refreshes the
addresses when the cloud's differ.  Keys are node names.
"""

from __future__ import annotations

import copy
import logging

from controlplane.cloud.context import (
    TAINT_UNINITIALIZED,
    CloudContext,
    CloudController,
    has_taint,
    node_addresses,
)
from controlplane.cloud.instances import instance_metadata, require_instances
from controlplane.cloud.provider import InstanceMetadata, InstanceNotFound
from controlplane.controllers.context import ControllerContext
from controlplane.controllers.nodeutil import node_taints
from kube.api import codec
from kube.api.kinds.core_v1.node import (
    LABEL_FAILURE_DOMAIN_BETA_REGION,
    LABEL_FAILURE_DOMAIN_BETA_ZONE,
    LABEL_INSTANCE_TYPE,
    LABEL_INSTANCE_TYPE_STABLE,
    LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE,
    Node,
    NodeSpec,
)
from kube.api.meta_v1 import ObjectMeta

NAME = "cloud-node"


log = logging.getLogger("kubelab.cloud")


def cloud_labels(metadata: InstanceMetadata) -> dict[str, str]:
    """The labels a Node gets from its instance's metadata (empty values are left out)."""
    labels: dict[str, str] = {}
    for value, keys in (
        (metadata.instance_type, (LABEL_INSTANCE_TYPE_STABLE, LABEL_INSTANCE_TYPE)),
        (metadata.zone, (LABEL_TOPOLOGY_ZONE, LABEL_FAILURE_DOMAIN_BETA_ZONE)),
        (metadata.region, (LABEL_TOPOLOGY_REGION, LABEL_FAILURE_DOMAIN_BETA_REGION)),
    ):
        if value:
            labels.update(dict.fromkeys(keys, value))
    return labels


class CloudNodeController(CloudController):
    NAME = NAME

    def __init__(self, ctx: ControllerContext, cloud: CloudContext) -> None:
        super().__init__(ctx, cloud)
        require_instances(self.cloud)
        self.period = self.options.node_status_update_frequency
        self.nodes = ctx.informers.informer_for(Node)
        self.nodes.add_event_handler(self._enqueue_tainted, self._enqueue_tainted_update)

    def _enqueue_tainted(self, node: Node) -> None:
        if has_taint(node, TAINT_UNINITIALIZED):
            self.enqueue(node)

    def _enqueue_tainted_update(self, old: Node, new: Node) -> None:
        if has_taint(new, TAINT_UNINITIALIZED):
            self.enqueue_update(old, new)

    def resync(self) -> None:
        for key in self.nodes.lister.keys():  # noqa: SIM118 (an Indexer, not a dict)
            self.queue.add(key)

    async def sync_key(self, key: str) -> None:
        node = self.nodes.lister.get(key)
        if node is None:
            return
        if has_taint(node, TAINT_UNINITIALIZED):
            await self._initialize(node)
        else:
            await self._refresh_addresses(node)

    async def _initialize(self, node: Node) -> None:
        name = node.metadata.name or ""
        metadata = await instance_metadata(self.cloud, node)
        if not metadata.provider_id:
            raise ValueError(f"the cloud gave node {name} no provider ID")
        if metadata.node_addresses:
            node = await self._write_addresses(node, metadata)
        updated = copy.deepcopy(node)
        updated.spec = updated.spec or NodeSpec()
        updated.spec.provider_id = updated.spec.provider_id or metadata.provider_id
        updated.metadata = updated.metadata or ObjectMeta()
        updated.metadata.labels = {**(updated.metadata.labels or {}), **cloud_labels(metadata)}
        remaining = [t for t in node_taints(updated) if t.key != TAINT_UNINITIALIZED]
        updated.spec.taints = remaining or None
        await self.ctx.client.update(updated)
        log.info(
            "cloud-node: initialized node %s (%s, %s/%s, %s)",
            name,
            metadata.provider_id,
            metadata.region,
            metadata.zone,
            metadata.instance_type,
        )

    async def _refresh_addresses(self, node: Node) -> None:
        try:
            metadata = await instance_metadata(self.cloud, node)
        except InstanceNotFound:
            return  # the lifecycle controller deals with instances that are gone
        if metadata.node_addresses:
            await self._write_addresses(node, metadata)

    async def _write_addresses(self, node: Node, metadata: InstanceMetadata) -> Node:
        """Replace the Node's addresses with the cloud's if they differ; the Node as written."""
        wanted = list(metadata.node_addresses)
        if node_addresses(node) == wanted:
            return node
        body = {
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "status": {"addresses": [codec.to_builtins(a) for a in wanted]},
        }
        return await self.ctx.client.patch(
            Node, node.metadata.name or "", None, body, patch_type="merge", subresource="status"
        )


def new(ctx: ControllerContext, cloud: CloudContext) -> CloudNodeController:
    return CloudNodeController(ctx, cloud)
