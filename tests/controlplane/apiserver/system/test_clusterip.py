"""The ClusterIP allocator over real ServiceCIDR, IPAddress and Service stores (SQLite): ranges
and bands as upstream's, every allocation an IPAddress, the IPAddress create as the lock, the
repair pass."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from controlplane.apiserver.system import bootstrap, clusterip
from controlplane.storage.interface import Store
from controlplane.storage.sqlite import SQLiteStore
from kube.api.kinds.core_v1.service import Service, ServicePort, ServiceSpec
from kube.api.kinds.networking_v1 import GROUP as NETWORKING_GROUP
from kube.api.kinds.networking_v1 import (
    IPAddress,
    ServiceCIDR,
    ServiceCIDRSpec,
    ServiceCIDRStatus,
)
from kube.api.meta_v1 import Condition, DeleteOptions, ObjectMeta
from kube.api.scheme import SCHEME
from kube.clock import FakeClock

CTX = RequestContext(user="admin", groups=("system:masters",))


@pytest.mark.parametrize(
    ("cidr", "first", "last", "offset"),
    [
        pytest.param("10.96.0.0/28", "10.96.0.1", "10.96.0.14", 0, id="slash-28-no-band"),
        pytest.param("10.96.0.0/24", "10.96.0.1", "10.96.0.254", 16, id="slash-24-min-band"),
        pytest.param("10.96.0.0/22", "10.96.0.1", "10.96.3.254", 64, id="slash-22-size-16th"),
        pytest.param("10.96.0.0/12", "10.96.0.1", "10.111.255.254", 256, id="slash-12-max"),
        pytest.param("fd00::/112", "fd00::1", "fd00::ffff", 256, id="ipv6-keeps-last"),
    ],
)
def test_range_bounds_and_static_band(cidr: str, first: str, last: str, offset: int) -> None:
    rng = clusterip.Range(ipaddress.ip_network(cidr))
    assert str(ipaddress.ip_address(rng.first)) == first
    assert str(ipaddress.ip_address(rng.last)) == last
    assert rng.offset == offset


def test_candidates_cover_the_upper_band_first_then_the_lower() -> None:
    rng = clusterip.Range(ipaddress.ip_network("10.0.0.0/24"))
    got = list(rng.candidates(random.Random(7)))
    assert len(got) == len(set(got)) == 254
    upper = {f"10.0.0.{i}" for i in range(17, 255)}
    assert set(got[: len(upper)]) == upper
    assert set(got[len(upper) :]) == {f"10.0.0.{i}" for i in range(1, 17)}


@dataclass
class Stores:
    services: ResourceStore
    cidrs: ResourceStore
    addresses: ResourceStore
    clock: FakeClock

    async def service(
        self, name: str, cluster_ip: str | None = None, families: list[str] | None = None
    ) -> Service:
        spec = ServiceSpec(
            cluster_ip=cluster_ip, ip_families=families, ports=[ServicePort(port=80)]
        )
        created = await self.services.create(
            "default", Service(metadata=ObjectMeta(name=name), spec=spec), CTX
        )
        assert isinstance(created, Service) and created.spec is not None
        return created

    async def cidr(self, name: str, cidr: str, ready: str | None = None) -> None:
        obj = ServiceCIDR(metadata=ObjectMeta(name=name), spec=ServiceCIDRSpec(cidrs=[cidr]))
        created = await self.cidrs.create("", obj, CTX)
        if ready is not None:
            condition = Condition(type="Ready", status=ready, reason="Test", message="m")
            created.status = ServiceCIDRStatus(conditions=[condition])  # type: ignore[attr-defined]
            await self.cidrs.update("", name, created, CTX, subresource="status")

    async def addresses_by_name(self) -> dict[str, IPAddress]:
        items = (await self.addresses.list()).items
        return {a.metadata.name or "": a for a in items if isinstance(a, IPAddress)}


def _store(store: Store, clock: FakeClock, plural: str, group: str = "") -> ResourceStore:
    info = SCHEME.by_resource(group, "v1", plural)
    assert info is not None
    return ResourceStore(info, store, clock)


def _server(store: Store, clock: FakeClock) -> Stores:
    """The stores one API server has over ``store``, its Services allocating as the server's
    (every server's allocator starts from the same random seed: they pick the same addresses
    first)."""
    net = NETWORKING_GROUP
    cidrs = _store(store, clock, "servicecidrs", net)
    addresses = _store(store, clock, "ipaddresses", net)
    services = _store(store, clock, "services")
    allocator = clusterip.ClusterIPAllocator(cidrs, addresses, rand=random.Random(1))
    services.hooks.append(bootstrap.ServiceAllocation(allocator, (30000, 32767)))
    return Stores(services, cidrs, addresses, clock)


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Stores]:
    store = await SQLiteStore.open(tmp_path / "store.db")
    server = _server(store, FakeClock(datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)))
    await clusterip.ensure_default_cidr(server.cidrs, "10.96.0.0/28", server.clock.now())
    try:
        yield server
    finally:
        await store.close()


async def test_an_allocation_is_an_ipaddress_pointing_at_its_service(stores: Stores) -> None:
    service = await stores.service("web")
    assert service.spec is not None
    ip = service.spec.cluster_ip or ""
    assert ipaddress.ip_address(ip) in ipaddress.ip_network("10.96.0.0/28")
    assert service.spec.cluster_ips == [ip]
    assert service.spec.ip_families == ["IPv4"]
    (address,) = (await stores.addresses_by_name()).values()
    assert address.metadata.name == ip
    assert address.metadata.labels == {
        "ipaddress.kubernetes.io/ip-family": "IPv4",
        "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io",
    }
    assert address.spec is not None and address.spec.parent_ref is not None
    ref = address.spec.parent_ref
    assert (ref.group or "", ref.resource, ref.namespace, ref.name) == (
        "",
        "services",
        "default",
        "web",
    )
    await stores.services.delete("default", "web", DeleteOptions(), CTX)
    assert await stores.addresses_by_name() == {}


async def _refusal(
    stores: Stores,
    name: str,
    cluster_ip: str | None = None,
    families: list[str] | None = None,
    field: str = "spec.clusterIPs[0]",
) -> str:
    """The message of the 422 creating the Service gets, at ``field``."""
    with pytest.raises(errors.ApiError) as caught:
        await stores.service(name, cluster_ip, families)
    assert caught.value.code == 422
    assert caught.value.details is not None
    (cause,) = caught.value.details.causes or []
    assert cause.field == field
    return cause.message or ""


async def test_requested_addresses_are_checked(stores: Stores) -> None:
    await stores.service("a", "10.96.0.5")
    taken = await _refusal(stores, "b", "10.96.0.5")
    assert "failed to allocate IP 10.96.0.5: provided IP is already allocated" in taken
    outside = await _refusal(stores, "c", "10.97.0.5")
    assert (
        "failed to allocate IP 10.97.0.5: the provided network does not match the current range"
        in outside
    )
    broadcast = await _refusal(stores, "d", "10.96.0.15")
    assert (
        "the provided IP (10.96.0.15) is not in the valid range. The range of valid IPs is "
        "10.96.0.0/28" in broadcast
    )
    assert set(await stores.addresses_by_name()) == {"10.96.0.5"}


async def _full(stores: Stores, name: str) -> None:
    """A dynamic allocation from full ranges: upstream's InternalError."""
    with pytest.raises(errors.ApiError) as caught:
        await stores.service(name)
    assert (caught.value.code, caught.value.message) == (
        500,
        "Internal error occurred: failed to allocate a serviceIP: range is full",
    )


async def test_an_unconfigured_family_is_refused(stores: Stores) -> None:
    message = await _refusal(stores, "v6", families=["IPv6"], field="spec.ipFamilies[0]")
    assert message == 'Invalid value: "IPv6": ipfamily IPv6 is not configured on cluster'


async def test_a_full_range_is_extended_by_a_second_servicecidr(stores: Stores) -> None:
    got = {(await stores.service(f"s{i}")).spec.cluster_ip for i in range(14)}  # type: ignore[union-attr]
    assert len(got) == 14
    await _full(stores, "extra")
    await stores.cidr("newcidr1", "10.96.0.0/24")
    extra = await stores.service("extra")
    assert extra.spec is not None and extra.spec.cluster_ip not in got
    assert ipaddress.ip_address(extra.spec.cluster_ip or "") in ipaddress.ip_network("10.96.0.0/24")


@pytest.mark.parametrize(
    "unusable",
    [
        pytest.param("not-ready", id="ready-false"),
        pytest.param("deleting", id="being-deleted"),
    ],
)
async def test_only_ready_live_servicecidrs_are_allocated_from(
    stores: Stores, unusable: str
) -> None:
    await stores.cidr("other", "10.200.0.0/24", ready="False" if unusable == "not-ready" else None)
    if unusable == "deleting":
        cidr = await stores.cidrs.get("", "other")
        cidr.metadata.finalizers = ["test/hold"]
        await stores.cidrs.update("", "other", cidr, CTX)
        await stores.cidrs.delete("", "other", DeleteOptions(), CTX)
    for i in range(14):
        await stores.service(f"s{i}")
    await _full(stores, "extra")
    assert "does not match the current range" in await _refusal(stores, "x", "10.200.0.9")


async def test_concurrent_creates_never_share_an_address(stores: Stores) -> None:
    created = await asyncio.gather(*(stores.service(f"s{i}") for i in range(14)))
    ips = [s.spec.cluster_ip for s in created if s.spec is not None]
    assert len(set(ips)) == 14
    assert set(await stores.addresses_by_name()) == set(ips)


async def test_two_servers_creating_at_once_never_share_an_address(stores: Stores) -> None:
    other = _server(stores.services.store, stores.clock)
    created = await asyncio.gather(
        *(server.service(f"s{n}-{i}") for i in range(7) for n, server in enumerate((stores, other)))
    )
    ips = [s.spec.cluster_ip for s in created if s.spec is not None]
    assert len(set(ips)) == 14


async def test_a_dry_run_persists_nothing(stores: Stores) -> None:
    dry = RequestContext(user="admin", groups=("system:masters",), dry_run=True)
    spec = ServiceSpec(ports=[ServicePort(port=80)])
    service = Service(metadata=ObjectMeta(name="dry"), spec=spec)
    created = await stores.services.create("default", service, dry)
    assert isinstance(created, Service) and created.spec is not None
    assert created.spec.cluster_ip == "10.96.0.0"  # as upstream's dry-run allocator answers
    assert await stores.addresses_by_name() == {}


async def test_a_type_change_to_externalname_releases_the_address(stores: Stores) -> None:
    service = await stores.service("web")
    assert service.spec is not None
    service.spec.type = "ExternalName"
    service.spec.external_name = "example.com"
    service.spec.cluster_ip = service.spec.cluster_ips = service.spec.ip_families = None
    service.spec.ip_family_policy = None
    await stores.services.update("default", "web", service, CTX)
    assert await stores.addresses_by_name() == {}


async def test_repair_restores_missing_and_removes_orphan_addresses(stores: Stores) -> None:
    kept = await stores.service("kept")
    lost = await stores.service("lost")
    assert kept.spec is not None and lost.spec is not None
    await stores.addresses.delete("", lost.spec.cluster_ip or "", DeleteOptions(), CTX)
    orphan = clusterip.ip_address("10.96.0.9", "default", "gone")
    await stores.addresses.create("", orphan, CTX)
    foreign = IPAddress(
        metadata=ObjectMeta(name="10.96.0.10"),
        spec=clusterip.ip_address("10.96.0.10", "default", "gone").spec,
    )
    await stores.addresses.create("", foreign, CTX)

    await clusterip.repair(stores.services, stores.addresses, stores.cidrs, stores.clock.now())
    names = set(await stores.addresses_by_name())
    assert names == {kept.spec.cluster_ip, lost.spec.cluster_ip, "10.96.0.9", "10.96.0.10"}

    later = stores.clock.now() + clusterip.ORPHAN_GRACE + datetime.timedelta(seconds=1)
    await clusterip.repair(stores.services, stores.addresses, stores.cidrs, later)
    names = set(await stores.addresses_by_name())
    # Only the allocator's own orphan goes; an address someone else made is theirs.
    assert names == {kept.spec.cluster_ip, lost.spec.cluster_ip, "10.96.0.10"}


def _ready(cidr: object) -> tuple[str | None, str | None]:
    assert isinstance(cidr, ServiceCIDR) and cidr.status is not None
    (condition,) = cidr.status.conditions or []
    assert condition.type == "Ready"
    return condition.status, condition.message


async def test_the_default_servicecidr_is_kept_and_ready(stores: Stores) -> None:
    default = await stores.cidrs.get("", clusterip.DEFAULT_SERVICE_CIDR)
    assert _ready(default) == ("True", "Kubernetes default Service CIDR is ready")
    await stores.cidrs.delete("", clusterip.DEFAULT_SERVICE_CIDR, DeleteOptions(), CTX)
    await clusterip.ensure_default_cidr(stores.cidrs, "10.96.0.0/28", stores.clock.now())
    default = await stores.cidrs.get("", clusterip.DEFAULT_SERVICE_CIDR)
    assert isinstance(default, ServiceCIDR) and default.spec is not None
    assert default.spec.cidrs == ["10.96.0.0/28"]
    assert _ready(default)[0] == "True"


async def test_a_default_servicecidr_set_not_ready_is_left_so(stores: Stores) -> None:
    default = await stores.cidrs.get("", clusterip.DEFAULT_SERVICE_CIDR)
    assert isinstance(default, ServiceCIDR)
    default.status = ServiceCIDRStatus(
        conditions=[Condition(type="Ready", status="False", reason="Admin", message="off")]
    )
    await stores.cidrs.update("", "kubernetes", default, CTX, subresource="status")
    await clusterip.ensure_default_cidr(stores.cidrs, "10.96.0.0/28", stores.clock.now())
    assert _ready(await stores.cidrs.get("", "kubernetes")) == ("False", "off")
