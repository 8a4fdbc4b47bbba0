"""Services' ClusterIPs, allocated from ServiceCIDRs and recorded as IPAddress objects, as
upstream's allocator since 1.33 (MultiCIDRServiceAllocator GA, no dual write to a bitmap).

- The ranges are the ServiceCIDR objects that are Ready (or carry no Ready condition yet: the
  controller-manager may not run) and are not being deleted; the API server creates the
  default one, ``kubernetes``, from ``--service-cluster-ip-range``, marks it Ready and
  recreates it if it is deleted (``ensure_default_cidr``, upstream's DefaultServiceCIDR
  controller). A second ServiceCIDR simply adds its addresses.
- Every allocated address is an IPAddress named after it, labelled as the allocator's and
  pointing at its Service. Creating that object is the lock: two API servers, or two requests
  of one, that pick the same address cannot both create it, and the loser tries the next one.
  The IPAddress watch cache only lets the search skip addresses known to be taken.
- Within a range, dynamic allocations start at a random address of the upper band and fall
  back to the lower band (KEP-3070: the lower ``offset`` addresses are kept for Services that
  ask for a given address), as upstream's ``calculateRangeOffset`` divides it.
- ``repair`` is upstream's RepairIPAddress: a Service whose address has no IPAddress gets one,
  an IPAddress of the allocator's whose Service is gone (for longer than a request may take)
  or holds another address is deleted.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from controlplane.apiserver.storage.watchcache import WatchCache
from kube.api.kinds.core_v1.service import Service
from kube.api.kinds.networking_v1 import (
    LABEL_IP_ADDRESS_FAMILY,
    LABEL_MANAGED_BY,
    IPAddress,
    IPAddressSpec,
    ParentReference,
    ServiceCIDR,
    ServiceCIDRSpec,
    ServiceCIDRStatus,
)
from kube.api.meta_v1 import Condition, DeleteOptions, ObjectMeta
from kube.clock import Clock

log = logging.getLogger(__name__)

MANAGED_BY = "ipallocator.k8s.io"
DEFAULT_SERVICE_CIDR = "kubernetes"
ORPHAN_GRACE = datetime.timedelta(seconds=60)
"""How long an IPAddress may exist without its Service: the time a create may take between
allocating the address and writing the Service (upstream's request timeout)."""
SYSTEM = RequestContext(user="system:apiserver", groups=("system:masters",))

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AllocationError(Exception):
    """No free address left, or the requested one is taken or outside every range."""


FULL = "range is full"
ALLOCATED = "provided IP is already allocated"
MISMATCHED = "the provided network does not match the current range"


def family(address: str) -> str:
    """``IPv4`` or ``IPv6``, the IPFamily of ``address``."""
    return f"IPv{ipaddress.ip_address(address).version}"


@dataclass(frozen=True)
class Range:
    """The addresses of one CIDR a Service may get: not the network address, nor IPv4's
    broadcast address; the first ``offset`` of them form the band kept for static requests."""

    network: Network

    @property
    def first(self) -> int:
        return int(self.network.network_address) + 1

    @property
    def last(self) -> int:
        last = int(self.network.broadcast_address)
        return last - 1 if self.network.version == 4 else last

    @property
    def offset(self) -> int:
        """upstream's calculateRangeOffset: min(max(16, size/16), 256), none for /28 and
        smaller."""
        size = self.network.num_addresses
        return 0 if size <= 16 else min(max(16, size // 16), 256)

    def contains(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        return self.first <= int(address) <= self.last

    def candidates(self, rand: random.Random) -> Iterator[str]:
        """Every address once, in the order a dynamic allocation tries them (``banded``)."""
        for value in banded(self.first, self.last, self.offset, rand):
            yield str(ipaddress.ip_address(value))


def banded(first: int, last: int, offset: int, rand: random.Random) -> Iterator[int]:
    """Every value of ``first..last`` once, as upstream's allocators try them for a dynamic
    allocation: the upper band (all but the ``offset`` lowest, which are kept for requests of
    a given value) from a random start, wrapping, then the lower band likewise."""
    upper = first + offset
    for low, high in ((upper, last), (first, upper - 1)):
        count = high - low + 1
        if count <= 0:
            continue
        start = rand.randrange(count)
        for step in range(count):
            yield low + (start + step) % count


def is_ready(cidr: ServiceCIDR) -> bool:
    """Upstream's isReady: the Ready condition's status, true when there is none yet."""
    for condition in (cidr.status.conditions if cidr.status else None) or ():
        if condition.type == "Ready":
            return condition.status == "True"
    return True


def service_ref(namespace: str, name: str) -> ParentReference:
    """A reference to a Service (core group: no ``group``, as upstream's JSON omits it)."""
    return ParentReference(resource="services", namespace=namespace, name=name)


def labels(address: str) -> dict[str, str]:
    """The labels the allocator puts on the IPAddress of ``address``."""
    return {LABEL_IP_ADDRESS_FAMILY: family(address), LABEL_MANAGED_BY: MANAGED_BY}


def ip_address(address: str, namespace: str, name: str) -> IPAddress:
    """The IPAddress the allocator records for a Service's address."""
    return IPAddress(
        metadata=ObjectMeta(name=address, labels=labels(address)),
        spec=IPAddressSpec(parent_ref=service_ref(namespace, name)),
    )


class ClusterIPAllocator:
    """Allocates and releases ClusterIPs over the ServiceCIDR and IPAddress stores."""

    def __init__(
        self,
        cidrs: ResourceStore,
        addresses: ResourceStore,
        known: WatchCache | None = None,
        rand: random.Random | None = None,
    ) -> None:
        self.cidrs = cidrs
        self.addresses = addresses
        self.known = known
        """The IPAddress cache, if any: addresses it holds are skipped without a write."""
        self.rand = rand or random.Random()

    async def ranges(self, ip_family: str) -> list[Range]:
        """The ranges of one family allocations may use now, each CIDR once, in random order
        (as upstream's map of allocators)."""
        networks: dict[Network, None] = {}
        for obj in (await self.cidrs.list()).items:
            assert isinstance(obj, ServiceCIDR)
            if obj.metadata.deletion_timestamp is None and is_ready(obj):
                for network in obj.networks():
                    if f"IPv{network.version}" == ip_family:
                        networks[network] = None
        ranges = [Range(n) for n in networks]
        self.rand.shuffle(ranges)
        return ranges

    async def allocate(self, service: Service, requested: str | None, dry_run: bool) -> str:
        """Reserve ``requested``, or a free address of the Service's family; a dry run checks
        a requested address and answers a range's network address for a dynamic one, as
        upstream's dry-run allocator, persisting nothing."""
        namespace, name = service.metadata.namespace or "", service.metadata.name or ""
        if requested:
            address = ipaddress.ip_address(requested)
            ranges = [r for r in await self.ranges(family(requested)) if address in r.network]
            if not ranges:
                raise AllocationError(MISMATCHED)
            if not any(r.contains(address) for r in ranges):
                raise AllocationError(
                    f"the provided IP ({requested}) is not in the valid range. The range of "
                    f"valid IPs is {ranges[0].network}"
                )
            if dry_run:
                return requested
            if not await _create(self.addresses, ip_address(requested, namespace, name)):
                raise AllocationError(ALLOCATED)
            return requested
        spec = service.spec
        ip_family = (spec.ip_families if spec else None) or await self.families()
        for rng in await self.ranges(ip_family[0]):
            if dry_run:
                return str(rng.network.network_address)
            for candidate in rng.candidates(self.rand):
                if self.known is not None and self.known.get("", candidate) is not None:
                    continue
                if await _create(self.addresses, ip_address(candidate, namespace, name)):
                    return candidate
        raise AllocationError(FULL)

    async def families(self) -> list[str]:
        """The IP families the cluster is configured for, primary first: the default
        ServiceCIDR's (IPv4 without one)."""
        try:
            default = await self.cidrs.get("", DEFAULT_SERVICE_CIDR)
        except errors.ApiError:
            return ["IPv4"]
        assert isinstance(default, ServiceCIDR)
        return [f"IPv{n.version}" for n in default.networks()] or ["IPv4"]

    async def release(self, address: str) -> None:
        """Delete the address's IPAddress; one already gone is no error (upstream ignores
        release errors too)."""
        await _delete(self.addresses, address)


async def _create(addresses: ResourceStore, address: IPAddress) -> bool:
    """Create the IPAddress; False if it exists (another allocation won the address)."""
    try:
        await addresses.create("", address, SYSTEM)
    except errors.ApiError as error:
        if error.code == 409:
            return False
        raise
    return True


async def _delete(addresses: ResourceStore, name: str) -> None:
    try:
        await addresses.delete("", name, DeleteOptions(), SYSTEM)
    except errors.ApiError as error:
        if error.code != 404:
            raise


async def ensure_default_cidr(cidrs: ResourceStore, cidr: str, now: datetime.datetime) -> None:
    """Upstream's DefaultServiceCIDR controller, one pass: create the ServiceCIDR
    ``kubernetes`` over ``cidr`` if it does not exist (one on its way out is left to the
    controller-manager: recreated once gone), and mark it Ready when it matches ``cidr`` and
    carries no Ready condition (or an Unknown one). Idempotent; run at start and periodically.
    """
    wanted = [str(ipaddress.ip_network(cidr))]
    try:
        current = await cidrs.get("", DEFAULT_SERVICE_CIDR)
    except errors.ApiError as error:
        if error.code != 404:
            raise
        default = ServiceCIDR(
            metadata=ObjectMeta(name=DEFAULT_SERVICE_CIDR), spec=ServiceCIDRSpec(cidrs=wanted)
        )
        try:
            current = await cidrs.create("", default, SYSTEM)
        except errors.ApiError as conflict:
            if conflict.code != 409:
                raise
            return
        log.info("created the default ServiceCIDR %s over %s", DEFAULT_SERVICE_CIDR, cidr)
    assert isinstance(current, ServiceCIDR)
    if current.metadata.deletion_timestamp is not None or current.spec is None:
        return
    if current.spec.cidrs != wanted:
        log.debug("the default ServiceCIDR %s is not this server's %s", current.spec.cidrs, cidr)
        return
    conditions = (current.status.conditions if current.status else None) or []
    ready = next((c for c in conditions if c.type == "Ready"), None)
    if ready is not None and ready.status != "Unknown":
        return
    current.status = ServiceCIDRStatus(
        conditions=[c for c in conditions if c.type != "Ready"]
        + [
            Condition(
                type="Ready",
                status="True",
                reason="",
                message="Kubernetes default Service CIDR is ready",
                last_transition_time=now.replace(microsecond=0),
            )
        ]
    )
    try:
        await cidrs.update("", DEFAULT_SERVICE_CIDR, current, SYSTEM, subresource="status")
    except errors.ApiError as error:
        if error.code not in (404, 409):
            raise


async def repair(
    services: ResourceStore,
    addresses: ResourceStore,
    cidrs: ResourceStore,
    now: datetime.datetime,
) -> None:
    """One pass of upstream's RepairIPAddress over every Service and IPAddress."""
    networks = [n for obj in (await cidrs.list()).items for n in _cidr(obj).networks()]
    listed = {a.metadata.name or "": _address(a) for a in (await addresses.list()).items}
    held: dict[tuple[str, str], set[str]] = {}
    for obj in (await services.list()).items:
        assert isinstance(obj, Service)
        key = (obj.metadata.namespace or "", obj.metadata.name or "")
        held[key] = set(_cluster_ips(obj))
    for (namespace, name), ips in held.items():
        for ip in sorted(ips):
            if not any(ipaddress.ip_address(ip) in n for n in networks):
                log.warning(
                    "Cluster IP [%s]: %s of Service %s/%s is not within any configured Service "
                    "CIDR; please recreate service",
                    family(ip),
                    ip,
                    namespace,
                    name,
                )
                continue
            current = listed.get(ip)
            if current is not None and _labelled(current) and _refers(current, namespace, name):
                continue
            if current is not None:
                if _owner(current) != (namespace, name) and ip in held.get(_owner(current), ()):
                    log.warning(
                        "Cluster IP [%s]:%s was assigned to multiple services; please "
                        "recreate service",
                        family(ip),
                        ip,
                    )
                    continue
                await _delete(addresses, ip)
            log.warning(
                "Cluster IP [%s]: %s of Service %s/%s is not allocated; repairing",
                family(ip),
                ip,
                namespace,
                name,
            )
            fresh = ip_address(ip, namespace, name)
            await _create(addresses, fresh)
            listed[ip] = fresh
    for ip, current in listed.items():
        if (current.metadata.labels or {}).get(LABEL_MANAGED_BY) != MANAGED_BY:
            continue
        ref = (current.spec.parent_ref if current.spec else None) or ParentReference()
        owner = _owner(current)
        if ref.group or ref.resource != "services":
            reason = "does not reference a Service"
        elif owner not in held:
            created = current.metadata.creation_timestamp
            if created is not None and now - created <= ORPHAN_GRACE:
                continue
            reason = "appears to have leaked"
        elif ip not in held[owner]:
            reason = "has a wrong reference"
        else:
            continue
        log.warning("IPAddress %s of Service %s/%s %s: cleaning up", ip, *owner, reason)
        await _delete(addresses, ip)


def _cluster_ips(service: Service) -> list[str]:
    spec = service.spec
    if spec is None or spec.type == "ExternalName" or spec.cluster_ip in (None, "", "None"):
        return []
    return list(spec.cluster_ips or [spec.cluster_ip or ""])


def _labelled(address: IPAddress) -> bool:
    """Whether the address carries (at least) the allocator's labels."""
    present = address.metadata.labels or {}
    return labels(address.metadata.name or "").items() <= present.items()


def _owner(address: IPAddress) -> tuple[str, str]:
    """The namespace and name of the object the address points at."""
    ref = (address.spec.parent_ref if address.spec else None) or ParentReference()
    return ref.namespace or "", ref.name or ""


def _refers(address: IPAddress, namespace: str, name: str) -> bool:
    """Whether the address points at the Service ``namespace/name``."""
    ref = (address.spec.parent_ref if address.spec else None) or ParentReference()
    service = not ref.group and ref.resource == "services"
    return service and _owner(address) == (namespace, name)


def _cidr(obj: object) -> ServiceCIDR:
    assert isinstance(obj, ServiceCIDR)
    return obj


def _address(obj: object) -> IPAddress:
    assert isinstance(obj, IPAddress)
    return obj


async def keep(
    services: ResourceStore,
    addresses: ResourceStore,
    cidrs: ResourceStore,
    default_cidr: str,
    clock: Clock,
    interval: float,
) -> None:
    """Forever: the default ServiceCIDR kept, then a repair pass, every ``interval`` seconds
    (a failed pass is logged and retried at the next)."""
    while True:
        try:
            await ensure_default_cidr(cidrs, default_cidr, clock.now())
            await repair(services, addresses, cidrs, clock.now())
        except errors.ApiError as error:
            log.warning("ClusterIP repair failed: %s", error)
        except Exception:  # a bug here must not end repairs for the server's lifetime
            log.exception("ClusterIP repair failed")
        await clock.sleep(interval)
