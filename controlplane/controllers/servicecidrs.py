"""The service-cidrs controller (upstream ``pkg/controller/servicecidrs``): ServiceCIDRs become
Ready, and one still in use is not deleted.

Keys are ServiceCIDR names. A live ServiceCIDR gets the finalizer
``networking.k8s.io/service-cidr-finalizer`` and the condition Ready=True. A deleted one keeps
the finalizer, with Ready=False and reason ``Terminating``, while an IPAddress of the allocator's
lies in it and in no other ServiceCIDR (a Service would be left with an address outside every
range); once none does, the finalizer is removed after a grace period from the deletion, long
enough for every API server to stop allocating from the range. An IPAddress that appears or goes
enqueues the ServiceCIDRs containing it; a ServiceCIDR that changes enqueues every one being
deleted, since it may now cover their addresses.
"""

from __future__ import annotations

import copy
import ipaddress
from typing import Any

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from kube.api.kinds.networking_v1 import (
    LABEL_MANAGED_BY,
    IPAddress,
    ServiceCIDR,
    ServiceCIDRStatus,
)
from kube.api.meta_v1 import Condition

NAME = "service-cidr-controller"
FINALIZER = "networking.k8s.io/service-cidr-finalizer"
ALLOCATOR = "ipallocator.k8s.io"
"""The managed-by label value of the API server's ClusterIP allocator."""
DELETION_GRACE = 10.0
"""Seconds from a ServiceCIDR's deletion before its finalizer may go (upstream's
deletionGracePeriod)."""
READY_MESSAGE = "Kubernetes Service CIDR is ready"
TERMINATING_MESSAGE = (
    "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a "
    "new ServiceCIDR"
)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _within(inner: Network, outer: Network) -> bool:
    """Whether ``inner`` is ``outer`` or a subnet of it."""
    return (
        inner.version == outer.version
        and int(outer.network_address) <= int(inner.network_address)
        and int(inner.broadcast_address) <= int(outer.broadcast_address)
    )


class ServiceCIDRController(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.cidrs = ctx.informers.informer_for(ServiceCIDR)
        self.addresses = ctx.informers.informer_for(IPAddress)
        self.cidrs.add_event_handler(self._cidr_changed, self._cidr_updated, self._cidr_changed)
        self.addresses.add_event_handler(
            self._address_changed, self._address_updated, self._address_changed
        )

    def _cidr_changed(self, obj: Any) -> None:
        self.enqueue(obj)
        for other in self.cidrs.lister.list():
            if other.metadata.deletion_timestamp is not None:
                self.enqueue(other)

    def _cidr_updated(self, old: Any, new: Any) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._cidr_changed(new)

    def _address_changed(self, obj: Any) -> None:
        address = ipaddress.ip_address(unwrap(obj).metadata.name or "")
        for cidr in self.cidrs.lister.list():
            if any(address in n for n in cidr.networks()):
                self.enqueue(cidr)

    def _address_updated(self, old: Any, new: Any) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._address_changed(new)

    async def sync_key(self, key: str) -> None:
        cidr = self.cidrs.lister.get(key)
        if cidr is None:
            return
        deleted = cidr.metadata.deletion_timestamp
        if deleted is not None:
            if not self._can_delete(cidr):
                await self._set_ready(cidr, "False", "Terminating", TERMINATING_MESSAGE)
                return
            left = DELETION_GRACE - (self.ctx.clock.now() - deleted).total_seconds()
            if left > 0:
                self.queue.add_after(key, left)
                return
            if FINALIZER in (cidr.metadata.finalizers or ()):
                updated = copy.deepcopy(cidr)
                updated.metadata.finalizers = [
                    f for f in cidr.metadata.finalizers or () if f != FINALIZER
                ] or None
                await self.ctx.client.update(updated)
            return
        if FINALIZER not in (cidr.metadata.finalizers or ()):
            updated = copy.deepcopy(cidr)
            updated.metadata.finalizers = [*(cidr.metadata.finalizers or ()), FINALIZER]
            cidr = await self.ctx.client.update(updated)
        await self._set_ready(cidr, "True", "", READY_MESSAGE)

    def _others(self, cidr: ServiceCIDR) -> list[Network]:
        """The CIDRs of every other ServiceCIDR that is not being deleted."""
        return [
            n
            for other in self.cidrs.lister.list()
            if other.metadata.name != cidr.metadata.name
            and other.metadata.deletion_timestamp is None
            for n in other.networks()
        ]

    def _can_delete(self, cidr: ServiceCIDR) -> bool:
        """Whether no address of the allocator's would be left outside every range: each CIDR
        is inside another ServiceCIDR's, or each address inside it is in another's too."""
        others = self._others(cidr)
        mine = cidr.networks()
        if all(any(_within(n, o) for o in others) for n in mine):
            return True
        for address in self.addresses.lister.list():
            if (address.metadata.labels or {}).get(LABEL_MANAGED_BY) != ALLOCATOR:
                continue
            ip = ipaddress.ip_address(address.metadata.name or "")
            if any(ip in n for n in mine) and not any(ip in o for o in others):
                return False
        return True

    async def _set_ready(self, cidr: ServiceCIDR, status: str, reason: str, message: str) -> None:
        """Write the Ready condition unless it already says this (its transition time moves
        only when the status changes; an empty reason is written as upstream's, ``""``)."""
        conditions = list((cidr.status.conditions if cidr.status else None) or [])
        current = next((c for c in conditions if c.type == "Ready"), None)
        if current is not None and (current.status, current.reason or None, current.message) == (
            status,
            reason,
            message,
        ):
            return
        now = self.ctx.clock.now().replace(microsecond=0)
        ready = Condition(
            type="Ready",
            status=status,
            reason=reason,
            message=message,
            last_transition_time=current.last_transition_time
            if current is not None and current.status == status
            else now,
        )
        updated = copy.deepcopy(cidr)
        updated.status = ServiceCIDRStatus(
            conditions=[c for c in conditions if c.type != "Ready"] + [ready]
        )
        await self.ctx.client.update_status(updated)


def new(ctx: ControllerContext) -> ServiceCIDRController:
    return ServiceCIDRController(ctx)
