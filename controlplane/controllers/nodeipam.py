"""The node-ipam controller: every Node gets its own pod CIDR, carved from ``--cluster-cidr``.

Upstream's range allocator (``pkg/controller/nodeipam/ipam/range_allocator.go`` and
``cidrset``): each cluster CIDR (one per IP family, comma-separated) is split into subnets of
``--node-cidr-mask-size`` (64 for IPv6) kept in a bitmap; a Node without ``spec.podCIDRs``
gets the next free subnet of each family, written by a patch of ``spec.podCIDR`` and
``spec.podCIDRs``.  Subnets overlapping ``--service-cluster-ip-range`` are never handed out.
When no subnet is left the Node gets a ``CIDRNotAvailable`` event and the key is retried.

The bitmap is memory only, so before the first allocation it is rebuilt from the CIDRs of
every Node in the cache (``run`` has waited for the cache to sync); a subnet is therefore
never handed out twice, even across restarts.  Keys are node names.  The allocator remembers
which node holds which subnets, so a node that is gone from the cache (or is being deleted)
releases them level-triggered, and a node whose patch has not reached the cache yet is
patched again with the subnets it already holds rather than being given new ones.
"""

from __future__ import annotations

import ipaddress

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller
from controlplane.controllers.nodeutil import record_node_status_change
from kube.api.kinds.core_v1.node import Node
from kube.client.errors import ApiError

NAME = "node-ipam"
IPV6_NODE_MASK_SIZE = 64

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class CIDRExhaustedError(Exception):
    """No free subnet is left in a cluster CIDR."""


class CIDRSet:
    """The subnets of one cluster CIDR and which of them are taken (upstream ``cidrset``).

    Allocation goes round from the subnet after the last one handed out, so a released
    subnet is not reused at once.
    """

    def __init__(self, cluster: Network, mask_size: int) -> None:
        if mask_size < cluster.prefixlen or mask_size > cluster.max_prefixlen:
            raise ValueError(f"node CIDR mask size {mask_size} does not fit cluster CIDR {cluster}")
        self.cluster = cluster
        self.mask_size = mask_size
        self.size = 1 << (mask_size - cluster.prefixlen)
        self._used: set[int] = set()
        self._next = 0

    def _subnet(self, index: int) -> Network:
        step = 1 << (self.cluster.max_prefixlen - self.mask_size)
        address = int(self.cluster.network_address) + index * step
        return ipaddress.ip_network((address, self.mask_size))

    def _indexes(self, cidr: Network) -> range:
        """The subnets ``cidr`` covers (or the one containing it); empty if it is elsewhere."""
        if cidr.version != self.cluster.version or not cidr.overlaps(self.cluster):
            return range(0)
        shift = self.cluster.max_prefixlen - self.mask_size
        base = int(self.cluster.network_address)
        first = max(int(cidr.network_address), base)
        last = min(int(cidr.broadcast_address), int(self.cluster.broadcast_address))
        return range((first - base) >> shift, ((last - base) >> shift) + 1)

    def allocate_next(self) -> Network:
        for offset in range(self.size):
            index = (self._next + offset) % self.size
            if index not in self._used:
                self._used.add(index)
                self._next = (index + 1) % self.size
                return self._subnet(index)
        raise CIDRExhaustedError(
            "CIDR allocation failed; there are no remaining CIDRs left to allocate in the "
            f"accepted range {self.cluster}"
        )

    def occupy(self, cidr: Network) -> None:
        self._used.update(self._indexes(cidr))

    def release(self, cidr: Network) -> None:
        self._used.difference_update(self._indexes(cidr))


def _networks(value: str) -> list[Network]:
    return [ipaddress.ip_network(part.strip()) for part in value.split(",") if part.strip()]


class NodeIPAMController(Controller):
    NAME = NAME
    EVENT_SOURCE = "cidrAllocator"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        options = ctx.options
        self.cidr_sets = [
            CIDRSet(
                cluster,
                options.node_cidr_mask_size if cluster.version == 4 else IPV6_NODE_MASK_SIZE,
            )
            for cluster in _networks(options.cluster_cidr)
        ]
        self._service_ranges = _networks(options.service_cluster_ip_range)
        self._held: dict[str, list[str]] = {}
        """Node name → the CIDRs it holds, as written to its spec."""
        self._initialised = False
        self.nodes = ctx.informers.informer_for(Node)
        self.nodes.add_event_handler(self.enqueue, self.enqueue_update, self.enqueue)

    def _initialise(self) -> None:
        """Mark the service range and every CIDR the cached Nodes hold as taken."""
        for service_range in self._service_ranges:
            for cidr_set in self.cidr_sets:
                cidr_set.occupy(service_range)
        for node in self.nodes.lister.list():
            self._occupy(node)
        self._initialised = True

    def _occupy(self, node: Node) -> None:
        name = node.metadata.name or ""
        cidrs = (node.spec.pod_cidrs if node.spec else None) or []
        if not cidrs or self._held.get(name) == cidrs:
            return
        self._release(name)
        for cidr_set, cidr in zip(self.cidr_sets, cidrs, strict=False):
            try:
                cidr_set.occupy(ipaddress.ip_network(cidr, strict=False))
            except ValueError:
                continue
        self._held[name] = list(cidrs)

    def _release(self, name: str) -> None:
        for cidr_set, cidr in zip(self.cidr_sets, self._held.pop(name, []), strict=False):
            cidr_set.release(ipaddress.ip_network(cidr, strict=False))

    def _allocate(self, node: Node) -> list[str]:
        allocated: list[Network] = []
        try:
            for cidr_set in self.cidr_sets:
                allocated.append(cidr_set.allocate_next())
        except CIDRExhaustedError:
            for cidr_set, cidr in zip(self.cidr_sets, allocated, strict=False):
                cidr_set.release(cidr)
            record_node_status_change(self.ctx.recorder, node, "CIDRNotAvailable")
            raise
        cidrs = [str(cidr) for cidr in allocated]
        self._held[node.metadata.name or ""] = cidrs
        return cidrs

    async def sync_key(self, key: str) -> None:
        if not self._initialised:
            self._initialise()
        node = self.nodes.lister.get(key)
        if node is None or node.metadata.deletion_timestamp is not None:
            self._release(key)
            return
        if (node.spec.pod_cidrs if node.spec else None) or not self.cidr_sets:
            self._occupy(node)
            return
        cidrs = self._held.get(key) or self._allocate(node)
        patch = {"spec": {"podCIDR": cidrs[0], "podCIDRs": cidrs}}
        try:
            await self.ctx.client.patch(Node, key, None, patch)
        except ApiError as error:
            if error.not_found:
                self._release(key)
                return
            record_node_status_change(self.ctx.recorder, node, "CIDRAssignmentFailed")
            raise


def new(ctx: ControllerContext) -> NodeIPAMController:
    return NodeIPAMController(ctx)
