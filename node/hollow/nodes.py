"""Registering hollow Nodes and keeping their Leases fresh.

Each node's labels and taints are drawn deterministically from its index (zones and instance
types round-robin, each taint on its configured fraction of the nodes), so a run is
reproducible.  Leases are renewed round-robin at an even rate, ``count`` renewals per
``renew_interval``, instead of in bursts: at 5,000 nodes and the kubelet's 10 s interval that
is already 500 writes a second for the API server.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from kube.api import codec
from kube.api.kinds.coordination_v1 import Lease, LeaseSpec
from kube.api.kinds.core_v1.node import (
    LABEL_ARCH_STABLE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE_STABLE,
    LABEL_OS_STABLE,
    LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE,
    ContainerImage,
    DaemonEndpoint,
    Node,
    NodeAddress,
    NodeCondition,
    NodeDaemonEndpoints,
    NodeSpec,
    NodeStatus,
    NodeSystemInfo,
    Taint,
)
from kube.api.meta_v1 import ObjectMeta
from kube.api.struct import micro_time
from kube.api.taints import parse_taint
from kube.client.errors import ApiError
from kube.client.informers import Indexer
from kube.client.interface import ApiClient
from kube.clock import Clock

LOG = logging.getLogger("kubelab.hollow")

NODE_LEASE_NAMESPACE = "kube-node-lease"
HOLLOW_LABEL = "kubelab.io/hollow-node"
NODE_ADDRESSES = ipaddress.ip_network("10.64.0.0/10")
KUBELET_VERSION = "v1.36.0-hollow"
KUBELET_PORT = 10250


@dataclass(frozen=True)
class TaintRule:
    """A taint and the fraction of nodes that carry it (``key=value:Effect@0.1``)."""

    taint: Taint
    fraction: float = 1.0

    @classmethod
    def parse(cls, text: str) -> TaintRule:
        spec, _, share = text.partition("@")
        try:
            taint = parse_taint(spec)
        except ValueError:
            raise ValueError(f"expected key[=value]:Effect[@fraction], got {text!r}") from None
        try:
            fraction = float(share) if share else 1.0
        except ValueError:
            raise ValueError(f"the fraction in {text!r} is not a number") from None
        if not 0 < fraction <= 1:
            raise ValueError(f"the fraction in {text!r} must be in (0, 1]")
        return cls(taint, fraction)

    def applies_to(self, index: int) -> bool:
        """Whether node ``index`` carries the taint: evenly spread over the indices."""
        return int((index + 1) * self.fraction) > int(index * self.fraction)


@dataclass(frozen=True)
class FleetSpec:
    """What the hollow nodes look like."""

    count: int
    name_prefix: str = "hollow-node-"
    cpu: str = "4"
    memory: str = "16Gi"
    pods: int = 110
    ephemeral_storage: str = "100Gi"
    zones: Sequence[str] = ("zone-a", "zone-b", "zone-c")
    region: str = "lab"
    instance_types: Sequence[str] = ("hollow.medium",)
    taints: Sequence[TaintRule] = ()
    labels: dict[str, str] = field(default_factory=dict)
    images: dict[str, int] = field(default_factory=dict)
    """Images every node reports as present, by name, with their sizes in bytes."""
    kubelet_address: str = ""
    """Where the nodes' kubelet servers listen (node.hollow.kubelets); "" when they serve none
    and each node reports an address of its own from NODE_ADDRESSES."""
    kubelet_ports: tuple[int, ...] = ()
    """Each node's kubelet port, by index, when they serve (else upstream's 10250)."""

    def name(self, index: int) -> str:
        return f"{self.name_prefix}{index}"

    def address(self, index: int) -> str:
        return self.kubelet_address or str(NODE_ADDRESSES[index + 1])

    def kubelet_port(self, index: int) -> int:
        return self.kubelet_ports[index] if self.kubelet_ports else KUBELET_PORT

    def node(self, index: int) -> Node:
        name = self.name(index)
        labels = {
            LABEL_HOSTNAME: name,
            LABEL_OS_STABLE: "linux",
            LABEL_ARCH_STABLE: "amd64",
            LABEL_TOPOLOGY_ZONE: self.zones[index % len(self.zones)],
            LABEL_TOPOLOGY_REGION: self.region,
            LABEL_INSTANCE_TYPE_STABLE: self.instance_types[index % len(self.instance_types)],
            HOLLOW_LABEL: "true",
            **self.labels,
        }
        resources = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.pods),
            "ephemeral-storage": self.ephemeral_storage,
        }
        conditions = [
            NodeCondition(type=kind, status="False", reason=f"KubeletHas{reason}")
            for kind, reason in (
                ("MemoryPressure", "SufficientMemory"),
                ("DiskPressure", "NoDiskPressure"),
                ("PIDPressure", "SufficientPID"),
            )
        ]
        conditions.append(
            NodeCondition(
                type="Ready",
                status="True",
                reason="KubeletReady",
                message="hollow kubelet is posting ready status",
            )
        )
        taints = [rule.taint for rule in self.taints if rule.applies_to(index)]
        return Node(
            metadata=ObjectMeta(name=name, labels=labels),
            spec=NodeSpec(taints=taints or None),
            status=NodeStatus(
                capacity=dict(resources),
                allocatable=dict(resources),
                conditions=conditions,
                addresses=[
                    NodeAddress(type="InternalIP", address=self.address(index)),
                    NodeAddress(type="Hostname", address=name),
                ],
                daemon_endpoints=NodeDaemonEndpoints(
                    kubelet_endpoint=DaemonEndpoint(port=self.kubelet_port(index))
                ),
                node_info=NodeSystemInfo(
                    machine_id=f"hollow-{index}",
                    system_uuid=f"hollow-{index}",
                    boot_id=f"hollow-{index}",
                    kernel_version="hollow",
                    os_image="kubelab hollow node",
                    container_runtime_version="hollow://1.0",
                    kubelet_version=KUBELET_VERSION,
                    kube_proxy_version=KUBELET_VERSION,
                    operating_system="linux",
                    architecture="amd64",
                ),
                images=[
                    ContainerImage(names=[image], size_bytes=size)
                    for image, size in self.images.items()
                ]
                or None,
            ),
        )


class NodeFleet:
    """Registers the nodes of a ``FleetSpec`` and renews their Leases until cancelled."""

    def __init__(
        self,
        client: ApiClient,
        spec: FleetSpec,
        clock: Clock,
        *,
        renew_interval: float = 10.0,
        lease_duration: int = 40,
        concurrency: int = 32,
        nodes: Indexer[Node] | None = None,
    ) -> None:
        self.client = client
        self.spec = spec
        self.clock = clock
        self.renew_interval = renew_interval
        self.lease_duration = lease_duration
        self.concurrency = concurrency
        self._leases: dict[str, Lease] = {}
        self._nodes = nodes
        """A cache of the Nodes: with it, a node found not Ready reports Ready again, as a
        kubelet's status update does after the node controller marked it Unknown."""
        self.silent: set[str] = set()
        """Nodes whose leases are not renewed: a node whose kubelet stopped, for tests."""

    @property
    def names(self) -> list[str]:
        return [self.spec.name(i) for i in range(self.spec.count)]

    async def register(self) -> None:
        """Create every node and its lease (or bring existing ones up to date)."""
        gate = asyncio.Semaphore(self.concurrency)

        async def one(index: int) -> None:
            async with gate:
                await self._register_node(self.spec.node(index))
                await self._renew(self.spec.name(index))

        await asyncio.gather(*(one(i) for i in range(self.spec.count)))
        LOG.info("registered %d hollow nodes", self.spec.count)

    async def _register_node(self, node: Node) -> None:
        try:
            await self.client.create(node)
        except ApiError as error:
            if not error.already_exists:
                raise
            current = await self.client.get(Node, node.metadata.name or "")
            current.metadata.labels = node.metadata.labels
            current.spec = node.spec
            updated = await self.client.update(current)
            updated.status = node.status
            await self.client.update_status(updated)

    async def _renew(self, name: str) -> None:
        """Write a fresh renewTime: an update of the lease last seen (one request), falling
        back to reading it after a conflict or creating it when it is missing."""
        spec = LeaseSpec(
            holder_identity=name,
            lease_duration_seconds=self.lease_duration,
            renew_time=micro_time(self.clock.now()),
        )
        lease = self._leases.get(name)
        try:
            if lease is None:
                lease = await self.client.get(Lease, name, NODE_LEASE_NAMESPACE)
            lease.spec = spec
            self._leases[name] = await self.client.update(lease)
        except ApiError as error:
            self._leases.pop(name, None)
            if not error.not_found:
                raise
            fresh = Lease(metadata=ObjectMeta(name=name, namespace=NODE_LEASE_NAMESPACE), spec=spec)
            self._leases[name] = await self.client.create(fresh)

    async def renew_forever(self) -> None:
        """Renew each lease once per ``renew_interval``, spread evenly across it."""
        pause = self.renew_interval / max(1, self.spec.count)
        while True:
            for name in self.names:
                await self.clock.sleep(pause)
                if name in self.silent:
                    continue
                try:
                    await self._renew(name)
                    await self._report_ready(name)
                except ApiError as error:
                    LOG.warning("renewing the lease of %s: %s", name, error)

    async def _report_ready(self, name: str) -> None:
        node = self._nodes.get(name) if self._nodes is not None else None
        conditions = (node.status.conditions if node and node.status else None) or ()
        if node is None or any(c.type == "Ready" and c.status == "True" for c in conditions):
            return
        fresh = self.spec.node(self.names.index(name))
        assert fresh.status is not None
        now = self.clock.now()
        for condition in fresh.status.conditions or ():
            condition.last_heartbeat_time = condition.last_transition_time = now
        status = {"conditions": codec.to_builtins(fresh.status.conditions)}
        await self.client.patch(Node, name, None, {"status": status}, subresource="status")

    async def deregister(self) -> None:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(name: str) -> None:
            async with gate:
                for cls, namespace in ((Node, None), (Lease, NODE_LEASE_NAMESPACE)):
                    try:
                        await self.client.delete(cls, name, namespace)
                    except ApiError as error:
                        if not error.not_found:
                            raise

        await asyncio.gather(*(one(name) for name in self.names))
