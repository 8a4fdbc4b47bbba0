"""The node-ipam controller, with fake informers and a fake API."""

from __future__ import annotations

import pytest

from controlplane.controllers import nodeipam
from controlplane.controllers.context import ControllerOptions
from kube.api.kinds.core_v1.node import Node, NodeSpec
from kube.api.meta_v1 import ObjectMeta
from tests.controlplane.controllers.fakes import Harness, harness, stamp


def node(name: str, *cidrs: str) -> Node:
    spec = NodeSpec(pod_cidr=cidrs[0], pod_cidrs=list(cidrs)) if cidrs else NodeSpec()
    return stamp(Node(metadata=ObjectMeta(name=name), spec=spec))


def small(cluster: str = "10.244.0.0/23", service: str = "10.96.0.0/12") -> Harness:
    return harness(ControllerOptions(cluster_cidr=cluster, service_cluster_ip_range=service))


def assigned(h: Harness) -> list[tuple[str, str]]:
    return [(a.name, a.obj["spec"]["podCIDR"]) for a in h.client.writes("patch", "Node")]


@pytest.mark.parametrize(
    ("cluster", "existing", "expected"),
    [
        pytest.param("10.244.0.0/16", [], "10.244.0.0/24", id="first-subnet"),
        pytest.param(
            "10.244.0.0/16",
            [node("a", "10.244.0.0/24"), node("b", "10.244.1.0/24")],
            "10.244.2.0/24",
            id="rebuilt-from-existing-nodes",
        ),
        pytest.param("10.96.0.0/16", [], "10.96.1.0/24", id="service-range-skipped"),
        pytest.param("fd00::/48", [], "fd00::/64", id="ipv6-mask-64"),
    ],
)
async def test_allocation(cluster: str, existing: list[Node], expected: str) -> None:
    h = small(cluster, service="10.96.0.0/24")
    h.store(*existing, node("new"))
    await nodeipam.new(h.ctx).sync("new")
    [patch] = h.client.writes("patch", "Node")
    assert patch.obj == {"spec": {"podCIDR": expected, "podCIDRs": [expected]}}


async def test_dual_stack_gets_one_cidr_per_family() -> None:
    h = small("10.244.0.0/16,fd00::/48")
    h.store(node("new"))
    await nodeipam.new(h.ctx).sync("new")
    assert h.client.writes("patch")[0].obj["spec"]["podCIDRs"] == ["10.244.0.0/24", "fd00::/64"]


async def test_a_node_with_a_cidr_is_left_alone() -> None:
    h = small()
    h.store(node("a", "10.244.0.0/24"))
    await nodeipam.new(h.ctx).sync("a")
    assert h.client.actions == []


async def test_never_hands_out_a_cidr_twice() -> None:
    h = small()
    h.store(node("a"), node("b"), node("c"))
    controller = nodeipam.new(h.ctx)
    for name in ("a", "b"):
        await controller.sync(name)
    with pytest.raises(nodeipam.CIDRExhaustedError):
        await controller.sync("c")
    assert assigned(h) == [("a", "10.244.0.0/24"), ("b", "10.244.1.0/24")]
    assert h.recorder.events == [
        ("Normal", "CIDRNotAvailable", "Node c status is now: CIDRNotAvailable", "c")
    ]


async def test_a_lagging_cache_gets_the_same_cidr_again() -> None:
    h = small()
    h.store(node("a"))
    controller = nodeipam.new(h.ctx)
    await controller.sync("a")
    await controller.sync("a")
    assert assigned(h) == [("a", "10.244.0.0/24"), ("a", "10.244.0.0/24")]


async def test_deleting_a_node_releases_its_cidr() -> None:
    h = small()
    a = node("a", "10.244.0.0/24")
    h.store(a, node("b", "10.244.1.0/24"), node("c"))
    controller = nodeipam.new(h.ctx)
    with pytest.raises(nodeipam.CIDRExhaustedError):
        await controller.sync("c")
    h.uncache(a)
    await controller.sync("a")
    await controller.sync("c")
    assert assigned(h) == [("c", "10.244.0.0/24")]
