"""The leases every API server keeps: its identity, and its place in the ``kubernetes`` Service.

Several API servers serve one cluster behind a load balancer, and pods reach them through the
``default/kubernetes`` Service, whose endpoints must name every server that is up and none
that is gone.  Upstream's answer, followed here:

- **Identity lease** (``APIServerIdentity``): a ``coordination.k8s.io/v1`` Lease
  ``kube-system/apiserver-<id>``, the id derived from the host name (base32 of its SHA-256,
  so one host keeps one lease across restarts), labelled
  ``apiserver.kubernetes.io/identity=kube-apiserver``, held by ``apiserver-<id>_<uuid>`` (a
  new uuid per process), lasting an hour and renewed every ``interval``.  Leases whose holder
  stopped renewing an hour ago are deleted by whichever server looks (hourly).
- **Master leases** (the lease endpoint reconciler): every ``interval`` a server writes its
  advertise address under ``/masterleases/<address>`` with an expiry ``ttl`` ahead (etcd's
  lease TTL upstream; here the expiry is in the value, compared with the reader's clock, so the
  servers' clocks must agree to within a fraction of the TTL), then sets the ``kubernetes``
  Endpoints and EndpointSlice to the addresses of the unexpired leases, sorted, with its own
  port; expired leases are deleted as they are seen.  A server that stops removes its lease
  and reconciles at once, so its address leaves without waiting for the TTL; one that dies
  leaves within the TTL.  As upstream, the last server never erases every address (clients
  could then reach no server even once one is back), and a server advertising a loopback
  address holds no master lease (nothing outside its machine could use it).

Every API server of a cluster must serve on the same port: the endpoints carry one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import hashlib
import ipaddress
import json
import logging
import uuid
from typing import TYPE_CHECKING

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import RequestContext, ResourceStore, Selection
from controlplane.storage.interface import (
    Conflict,
    KeyExists,
    KeyNotFound,
    Store,
    guaranteed_update,
)
from kube.api.kinds.coordination_v1 import Lease, LeaseSpec
from kube.api.kinds.core_v1.node import LABEL_HOSTNAME
from kube.api.kinds.core_v1.service import (
    EndpointAddress,
    EndpointPort,
    Endpoints,
    EndpointSubset,
)
from kube.api.kinds.discovery_v1 import (
    SERVICE_NAME_LABEL,
    Endpoint,
    EndpointConditions,
    EndpointSlice,
)
from kube.api.kinds.discovery_v1 import EndpointPort as SlicePort
from kube.api.meta_v1 import DeleteOptions, ObjectMeta, Preconditions, Resource
from kube.api.struct import micro_time, parse_micro_time
from kube.clock import Clock

if TYPE_CHECKING:
    from controlplane.apiserver.registry.rest import Lookup

log = logging.getLogger(__name__)

IDENTITY_LABEL = "apiserver.kubernetes.io/identity"
IDENTITY_VALUE = "kube-apiserver"
IDENTITY_NAMESPACE = "kube-system"
IDENTITY_LEASE_DURATION = 3600
"""Seconds an identity lease lasts (upstream's)."""
IDENTITY_GC_PERIOD = 3600.0
RENEW_INTERVAL = 10.0
"""Seconds between renewals of both leases and reconciliations of the endpoints."""
ENDPOINTS_TTL = 15.0
"""Seconds a master lease lasts unrenewed (upstream's ``MasterEndpointReconcileTTL``)."""
MASTER_LEASES = "/masterleases/"
SERVICE = "kubernetes"
SYSTEM = RequestContext(user="system:apiserver", groups=("system:masters",))


def identity_lease_name(hostname: str) -> str:
    digest = hashlib.sha256(hostname.encode()).digest()[:16]
    return "apiserver-" + base64.b32encode(digest).decode().rstrip("=").lower()


class ApiServerLeases:
    """Keeps one API server's identity and master leases and the ``kubernetes`` endpoints
    (see the module docstring).  ``start`` renews once before returning (the endpoints
    exist when the server says it is ready); ``stop`` takes this server out of them."""

    def __init__(
        self,
        registry: Lookup,
        advertise: str,
        store: Store,
        clock: Clock,
        hostname: str,
        *,
        interval: float = RENEW_INTERVAL,
        ttl: float = ENDPOINTS_TTL,
        gc_period: float = IDENTITY_GC_PERIOD,
    ) -> None:
        self.registry = registry
        self.advertise = advertise
        self.store = store
        self.clock = clock
        self.hostname = hostname
        self.name = identity_lease_name(hostname)
        self.holder = f"{self.name}_{uuid.uuid4()}"
        self.interval = interval
        self.ttl = ttl
        self.gc_period = gc_period
        self.port = 0
        self._task: asyncio.Task[None] | None = None

    @property
    def address(self) -> str | None:
        """The address this server puts in the endpoints (None for a loopback one)."""
        address = self.advertise
        return None if ipaddress.ip_address(address).is_loopback else address

    async def start(self, port: int) -> None:
        self.port = port
        await self._renew()
        await self._collect_identities()
        self._task = asyncio.create_task(self._run(), name="apiserver leases")

    async def stop(self) -> None:
        """Stop renewing; remove this server's address from the endpoints now."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        address = self.address
        if address is None:
            return
        try:
            with contextlib.suppress(KeyNotFound):
                await self.store.delete(MASTER_LEASES + address)
            await self.reconcile()
        except Exception as error:  # the store is down: the lease expires on its own
            log.warning("removing %s from the kubernetes endpoints failed: %s", address, error)

    async def _run(self) -> None:
        collected = self.clock.monotonic()
        while True:
            await self.clock.sleep(self.interval)
            try:
                await self._renew()
                if self.clock.monotonic() - collected >= self.gc_period:
                    collected = self.clock.monotonic()
                    await self._collect_identities()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the store is unavailable, say: next round
                log.warning("renewing the API server's leases failed: %s", error)

    async def _renew(self) -> None:
        await self._renew_identity()
        address = self.address
        if address is not None:
            await self._renew_master_lease(address)
            await self.reconcile()

    # The identity lease.

    async def _renew_identity(self) -> None:
        leases = self._lookup("coordination.k8s.io", "v1", "leases")
        spec = LeaseSpec(
            holder_identity=self.holder,
            lease_duration_seconds=IDENTITY_LEASE_DURATION,
            renew_time=micro_time(self.clock.now()),
        )
        lease = await _get(leases, IDENTITY_NAMESPACE, self.name)
        if lease is None:
            labels = {IDENTITY_LABEL: IDENTITY_VALUE, LABEL_HOSTNAME: self.hostname}
            meta = ObjectMeta(name=self.name, namespace=IDENTITY_NAMESPACE, labels=labels)
            try:
                await leases.create(IDENTITY_NAMESPACE, Lease(metadata=meta, spec=spec), SYSTEM)
            except errors.ApiError as error:
                if error.code != 409:  # created meanwhile: renewed next round
                    raise
            return
        assert isinstance(lease, Lease)
        lease.spec = spec
        try:  # at the resourceVersion read: a conflict waits for the next round
            await leases.update(IDENTITY_NAMESPACE, self.name, lease, SYSTEM)
        except errors.ApiError as error:
            if error.code != 409:
                raise

    async def _collect_identities(self) -> None:
        """Delete identity leases an hour past their last renewal (upstream's lease GC)."""
        leases = self._lookup("coordination.k8s.io", "v1", "leases")
        selection = Selection.parse(leases.info, f"{IDENTITY_LABEL}={IDENTITY_VALUE}", None)
        listed = await leases.list(IDENTITY_NAMESPACE, selection)
        now = self.clock.now()
        for lease in listed.items:
            assert isinstance(lease, Lease)
            if not _expired(lease, now):
                continue
            options = DeleteOptions(
                preconditions=Preconditions(resource_version=lease.metadata.resource_version)
            )
            with contextlib.suppress(errors.ApiError):  # renewed or deleted meanwhile
                await leases.delete(IDENTITY_NAMESPACE, lease.metadata.name or "", options, SYSTEM)
                log.info("deleted the expired identity lease %s", lease.metadata.name)

    # The master leases and the endpoints.

    async def _renew_master_lease(self, address: str) -> None:
        value = json.dumps(
            {"address": address, "expires": self.clock.now().timestamp() + self.ttl}
        ).encode()
        key = MASTER_LEASES + address
        try:
            await guaranteed_update(self.store, key, lambda _: value)
        except KeyNotFound:
            with contextlib.suppress(KeyExists):  # written meanwhile: renewed next round
                await self.store.create(key, value)

    async def live_addresses(self) -> list[str]:
        """The addresses of the unexpired master leases, sorted; expired ones are deleted."""
        now = self.clock.now().timestamp()
        live = set()
        for kv in (await self.store.list(MASTER_LEASES)).items:
            try:
                lease = json.loads(kv.value)
                address, expires = str(lease["address"]), float(lease["expires"])
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring the malformed master lease %s", kv.key)
                continue
            if expires > now:
                live.add(address)
                continue
            with contextlib.suppress(KeyNotFound, Conflict):  # renewed or deleted meanwhile
                await self.store.delete(kv.key, kv.mod_revision)
        return sorted(live)

    async def reconcile(self) -> None:
        """Point the ``kubernetes`` Endpoints and EndpointSlice at the live addresses."""
        addresses = await self.live_addresses()
        if not addresses:
            log.info("no API server holds a master lease: leaving the kubernetes endpoints")
            return
        endpoints = self._lookup("", "v1", "endpoints")
        wanted = Endpoints(
            metadata=ObjectMeta(
                name=SERVICE,
                namespace="default",
                labels={"endpointslice.kubernetes.io/skip-mirror": "true"},
            ),
            subsets=[
                EndpointSubset(
                    addresses=[EndpointAddress(ip=address) for address in addresses],
                    ports=[EndpointPort(name="https", port=self.port, protocol="TCP")],
                )
            ],
        )
        current = await _get(endpoints, "default", SERVICE)
        if not isinstance(current, Endpoints) or current.subsets != wanted.subsets:
            await _put(endpoints, wanted)
        slices = self._lookup("discovery.k8s.io", "v1", "endpointslices")
        wanted_slice = EndpointSlice(
            metadata=ObjectMeta(
                name=SERVICE,
                namespace="default",
                labels={
                    SERVICE_NAME_LABEL: SERVICE,
                    "endpointslice.kubernetes.io/managed-by": "kube-apiserver",
                },
            ),
            address_type="IPv4",
            endpoints=[
                Endpoint(addresses=[address], conditions=EndpointConditions(ready=True))
                for address in addresses
            ],
            ports=[SlicePort(name="https", port=self.port, protocol="TCP")],
        )
        current = await _get(slices, "default", SERVICE)
        if (
            not isinstance(current, EndpointSlice)
            or current.endpoints != wanted_slice.endpoints
            or current.ports != wanted_slice.ports
        ):
            await _put(slices, wanted_slice)

    def _lookup(self, group: str, version: str, plural: str) -> ResourceStore:
        store = self.registry.lookup(group, version, plural)
        assert store is not None
        return store


def _expired(lease: Lease, now: datetime.datetime) -> bool:
    spec = lease.spec
    if spec is None or spec.renew_time is None or spec.lease_duration_seconds is None:
        return True
    try:
        renewed = parse_micro_time(spec.renew_time)
    except ValueError:
        return True
    return renewed + datetime.timedelta(seconds=spec.lease_duration_seconds) < now


async def _put(store: ResourceStore, obj: Resource) -> None:
    """Write the ``kubernetes`` object (created if missing).  A 409 means another API server
    wrote it at the same moment (both created it, say, as three start at once): the next
    round compares again."""
    try:
        await store.update("default", SERVICE, obj, SYSTEM)
    except errors.ApiError as error:
        if error.code != 409:
            raise


async def _get(store: ResourceStore, namespace: str, name: str) -> Resource | None:
    try:
        return await store.get(namespace, name)
    except errors.ApiError as error:
        if error.code == 404:
            return None
        raise
