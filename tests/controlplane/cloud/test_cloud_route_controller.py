"""The route controller against a fake cloud."""

from __future__ import annotations

import pytest

from controlplane.cloud import route
from controlplane.cloud.context import CapabilityUnsupported
from controlplane.cloud.provider import Route
from tests.controlplane.cloud.cloudfixtures import cloud_harness, node


def routes(cloud: object) -> list[tuple[str, str]]:
    table = cloud.route_table.get("kubernetes", [])  # type: ignore[attr-defined]
    return sorted((r.target_node, r.destination_cidr) for r in table)


async def test_routes_are_created_per_pod_cidr_and_network_becomes_available() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    h.store(node("node1", ip="10.0.0.11", pod_cidr="10.244.1.0/24"), node("node2"))
    await route.new(h.ctx, cloud_ctx).sync(route.ROUTES_KEY)
    assert routes(cloud) == [("node1", "10.244.1.0/24")]
    [created] = cloud.called("create_route")
    assert created.target_node_addresses[0].address == "10.0.0.11"
    [patch] = h.client.writes("patch", "Node")
    [condition] = patch.obj["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "NetworkUnavailable",
        "False",
        "RouteCreated",
    )


async def test_second_sync_creates_nothing_and_writes_nothing() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    h.store(node("node1", pod_cidr="10.244.1.0/24"))
    controller = route.new(h.ctx, cloud_ctx)
    await controller.sync(route.ROUTES_KEY)
    h.cache(await h.client.get(type(node("x")), "node1"))
    h.client.actions.clear()
    await controller.sync(route.ROUTES_KEY)
    assert len(cloud.called("create_route")) == 1
    assert h.client.actions == []


async def test_routes_of_gone_nodes_and_blackholes_are_deleted_others_kept() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    cloud.route_table["kubernetes"] = [
        Route(target_node="gone", destination_cidr="10.244.9.0/24"),
        Route(target_node="", destination_cidr="10.244.8.0/24", blackhole=True),
        Route(target_node="vpn", destination_cidr="192.168.0.0/16"),
    ]
    await route.new(h.ctx, cloud_ctx).sync(route.ROUTES_KEY)
    assert routes(cloud) == [("vpn", "192.168.0.0/16")]


async def test_failed_route_is_an_event_a_condition_and_a_retry() -> None:
    h, cloud, cloud_ctx = cloud_harness()
    cloud.failures["create_route"] = RuntimeError("quota exceeded")
    h.store(node("node1", pod_cidr="10.244.1.0/24"), node("node2", pod_cidr="10.244.2.0/24"))
    with pytest.raises(route.RouteSyncError, match="quota exceeded"):
        await route.new(h.ctx, cloud_ctx).sync(route.ROUTES_KEY)
    assert h.recorder.reasons() == ["FailedToCreateRoute"]
    assert routes(cloud) == [("node2", "10.244.2.0/24")]
    reasons = sorted(
        (p.name, p.obj["status"]["conditions"][0]["reason"]) for p in h.client.writes("patch")
    )
    assert reasons == [("node1", "NoRouteCreated"), ("node2", "RouteCreated")]


def test_not_started_without_routes_or_when_told_not_to() -> None:
    h, cloud, cloud_ctx = cloud_harness(configure_cloud_routes=False)
    with pytest.raises(CapabilityUnsupported, match="configure-cloud-routes"):
        route.new(h.ctx, cloud_ctx)
    h, cloud, cloud_ctx = cloud_harness()
    cloud.supported.discard("routes")
    with pytest.raises(CapabilityUnsupported, match="does not support routes"):
        route.new(h.ctx, cloud_ctx)


def test_only_relevant_node_changes_enqueue() -> None:
    h, _, cloud_ctx = cloud_harness()
    controller = route.new(h.ctx, cloud_ctx)
    controller._updated(node("a", rv="1"), node("a", rv="2"))
    assert len(controller.queue) == 0
    controller._updated(node("a"), node("a", pod_cidr="10.244.3.0/24"))
    assert len(controller.queue) == 1
