"""The service-cidr-controller, with fake informers and a fake API."""

from __future__ import annotations

import datetime

import pytest

from controlplane.controllers import servicecidrs
from kube.api.kinds.networking_v1 import (
    IPAddress,
    IPAddressSpec,
    ParentReference,
    ServiceCIDR,
    ServiceCIDRSpec,
)
from kube.api.meta_v1 import ObjectMeta
from tests.controlplane.controllers.fakes import Harness, harness, stamp

ALLOCATOR = {
    "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io",
    "ipaddress.kubernetes.io/ip-family": "IPv4",
}


def cidr(name: str, *cidrs: str, deleted_ago: float | None = None, h: Harness) -> ServiceCIDR:
    obj = stamp(
        ServiceCIDR(
            metadata=ObjectMeta(name=name, finalizers=[servicecidrs.FINALIZER]),
            spec=ServiceCIDRSpec(cidrs=list(cidrs)),
        )
    )
    if deleted_ago is not None:
        obj.metadata.deletion_timestamp = h.clock.now() - datetime.timedelta(seconds=deleted_ago)
    h.store(obj)
    return obj


def address(ip: str, labels: dict[str, str] | None = ALLOCATOR) -> IPAddress:
    ref = ParentReference(resource="services", namespace="default", name="web")
    return stamp(IPAddress(metadata=ObjectMeta(name=ip, labels=labels), spec=IPAddressSpec(ref)))


def stored(h: Harness, name: str) -> ServiceCIDR:
    obj = h.client.objects[(ServiceCIDR, None, name)]
    assert isinstance(obj, ServiceCIDR)
    return obj


def ready(obj: ServiceCIDR) -> tuple[str | None, str | None, str | None]:
    (condition,) = (obj.status.conditions if obj.status else None) or []
    assert condition.type == "Ready" and condition.last_transition_time is not None
    return condition.status, condition.reason, condition.message


async def test_a_live_servicecidr_gets_the_finalizer_and_ready() -> None:
    h = harness()
    obj = stamp(ServiceCIDR(metadata=ObjectMeta(name="new"), spec=ServiceCIDRSpec(["10.1.0.0/24"])))
    h.store(obj)
    await servicecidrs.new(h.ctx).sync("new")
    got = stored(h, "new")
    assert got.metadata.finalizers == [servicecidrs.FINALIZER]
    assert ready(got) == ("True", "", "Kubernetes Service CIDR is ready")


async def test_a_deleted_servicecidr_in_use_stays_terminating() -> None:
    h = harness()
    cidr("newcidr1", "10.96.0.0/24", deleted_ago=30, h=h)
    cidr("kubernetes", "10.96.0.0/28", h=h)
    h.store(address("10.96.0.48"), address("10.96.0.5"))
    await servicecidrs.new(h.ctx).sync("newcidr1")
    got = stored(h, "newcidr1")
    assert got.metadata.finalizers == [servicecidrs.FINALIZER]
    assert ready(got) == ("False", "Terminating", servicecidrs.TERMINATING_MESSAGE)


@pytest.mark.parametrize(
    ("others", "addresses"),
    [
        pytest.param([("big", "10.96.0.0/16")], ["10.96.0.48"], id="covered-by-a-larger-one"),
        pytest.param([("kubernetes", "10.96.0.0/28")], ["10.96.0.5"], id="addresses-elsewhere"),
        pytest.param([], [], id="no-addresses"),
    ],
)
async def test_a_deleted_servicecidr_no_longer_needed_loses_its_finalizer(
    others: list[tuple[str, str]], addresses: list[str]
) -> None:
    h = harness()
    cidr("newcidr1", "10.96.0.0/24", deleted_ago=30, h=h)
    for name, block in others:
        cidr(name, block, h=h)
    h.store(*(address(a) for a in addresses), address("10.96.0.77", labels=None))
    await servicecidrs.new(h.ctx).sync("newcidr1")
    assert stored(h, "newcidr1").metadata.finalizers is None


async def test_the_finalizer_stays_for_the_grace_period() -> None:
    h = harness()
    cidr("newcidr1", "10.96.0.0/24", deleted_ago=1, h=h)
    controller = servicecidrs.new(h.ctx)
    await controller.sync("newcidr1")
    assert stored(h, "newcidr1").metadata.finalizers == [servicecidrs.FINALIZER]
    assert h.client.writes(kind="ServiceCIDR") == []
