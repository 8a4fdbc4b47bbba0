"""The endpointslice controller, with fake informers and a fake API."""

from __future__ import annotations

import copy

import pytest

from controlplane.controllers import endpointslice
from controlplane.controllers.endpointslice import (
    CONTROLLER_NAME,
    MANAGED_BY_LABEL,
    StaleInformerCache,
)
from kube.api.kinds.core_v1.pod import ContainerPort, Pod
from kube.api.kinds.core_v1.service import Service, ServicePort
from kube.api.kinds.discovery_v1 import SERVICE_NAME_LABEL, Endpoint, EndpointSlice
from kube.api.meta_v1 import Status
from kube.client.errors import ApiError
from tests.controlplane.controllers.endpointfixtures import NAMESPACE, node, pod, service
from tests.controlplane.controllers.fakes import Harness, harness

KEY = f"{NAMESPACE}/web"


def created(h: Harness) -> list[EndpointSlice]:
    return [a.obj for a in h.client.writes("create", "EndpointSlice")]


def names(endpoint_slice: EndpointSlice) -> list[str]:
    return sorted(e.target_ref.name or "" for e in endpoint_slice.endpoints or () if e.target_ref)


def only_endpoint(h: Harness) -> Endpoint:
    (endpoint_slice,) = created(h)
    (endpoint,) = endpoint_slice.endpoints or []
    return endpoint


async def synced(h: Harness, *objs: Service | Pod) -> endpointslice.EndpointSliceController:
    h.cache(node(), *objs)
    controller = endpointslice.new(h.ctx)
    await controller.sync(KEY)
    return controller


async def test_slice_shape() -> None:
    h = harness()
    svc = service(labels={"tier": "front"})
    await synced(h, svc, pod("a"))
    (endpoint_slice,) = created(h)
    meta = endpoint_slice.metadata
    assert meta.generate_name == "web-"
    assert meta.labels == {
        "tier": "front",
        SERVICE_NAME_LABEL: "web",
        MANAGED_BY_LABEL: CONTROLLER_NAME,
    }
    (owner,) = meta.owner_references or []
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "Service",
        "web",
        svc.metadata.uid,
        True,
    )
    assert (meta.annotations or {})["endpoints.kubernetes.io/last-change-trigger-time"] == (
        "2026-01-01T00:00:00Z"
    )
    assert endpoint_slice.address_type == "IPv4"
    assert [(p.name, p.port, p.protocol) for p in endpoint_slice.ports or ()] == [
        ("http", 8080, "TCP")
    ]
    (endpoint,) = endpoint_slice.endpoints or []
    assert endpoint.addresses == ["10.244.0.1"]
    assert (endpoint.node_name, endpoint.zone, endpoint.hostname) == ("node-a", "zone-1", None)
    assert endpoint.target_ref is not None
    assert (endpoint.target_ref.kind, endpoint.target_ref.name) == ("Pod", "a")


@pytest.mark.parametrize(
    ("ready", "terminating", "publish", "conditions"),
    [
        pytest.param(True, False, False, (True, True, False), id="ready"),
        pytest.param(False, False, False, (False, False, False), id="not-ready"),
        pytest.param(True, True, False, (False, True, True), id="terminating-serving"),
        pytest.param(False, True, False, (False, False, True), id="terminating-not-serving"),
        pytest.param(False, False, True, (True, False, False), id="not-ready-published"),
        pytest.param(True, True, True, (True, True, True), id="terminating-published"),
    ],
)
async def test_conditions(
    ready: bool, terminating: bool, publish: bool, conditions: tuple[bool, bool, bool]
) -> None:
    h = harness()
    await synced(h, service(publish=publish), pod("a", ready=ready, terminating=terminating))
    found = only_endpoint(h).conditions
    assert found is not None
    assert (found.ready, found.serving, found.terminating) == conditions


@pytest.mark.parametrize(
    ("objs", "expected"),
    [
        pytest.param([pod("a", ips=())], [], id="no-ip-yet"),
        pytest.param([pod("a", phase="Failed")], [], id="finished"),
        pytest.param([pod("a", labels={"app": "db"})], [], id="not-selected"),
        pytest.param([pod("a"), pod("b", ("10.244.0.2",))], ["a", "b"], id="two-pods"),
    ],
)
async def test_which_pods_are_endpoints(objs: list[Pod], expected: list[str]) -> None:
    h = harness()
    await synced(h, service(), *objs)
    (endpoint_slice,) = created(h)
    assert names(endpoint_slice) == expected


async def test_at_most_100_endpoints_per_slice() -> None:
    h = harness()
    pods = [pod(f"p{i}", (f"10.244.{i // 200}.{i % 200 + 1}",)) for i in range(250)]
    await synced(h, service(), *pods)
    assert sorted(len(s.endpoints or ()) for s in created(h)) == [50, 100, 100]


async def test_named_ports_group_pods_into_slices() -> None:
    h = harness()
    port = ServicePort(name="http", protocol="TCP", port=80, target_port="web")
    await synced(
        h,
        service(ports=[port]),
        pod("a", ports=[ContainerPort(name="web", container_port=8080)]),
        pod("b", ("10.244.0.2",), ports=[ContainerPort(name="web", container_port=9090)]),
        pod("c", ("10.244.0.3",), ports=[ContainerPort(name="web", container_port=9090)]),
    )
    found = {tuple(p.port for p in s.ports or ()): names(s) for s in created(h)}
    assert found == {(8080,): ["a"], (9090,): ["b", "c"]}


async def test_dual_stack_service_gets_a_slice_per_family() -> None:
    h = harness()
    await synced(h, service(families=["IPv4", "IPv6"]), pod("a", ("10.244.0.1", "fd00::1")))
    found = {s.address_type: [e.addresses for e in s.endpoints or ()] for s in created(h)}
    assert found == {"IPv4": [["10.244.0.1"]], "IPv6": [["fd00::1"]]}


async def test_headless_service_hostnames() -> None:
    h = harness()
    await synced(
        h,
        service(cluster_ip="None", ports=[]),
        pod("a", hostname="a", subdomain="web"),
    )
    (endpoint_slice,) = created(h)
    assert (endpoint_slice.metadata.labels or {})["service.kubernetes.io/headless"] == ""
    assert endpoint_slice.ports is None
    assert [e.hostname for e in endpoint_slice.endpoints or ()] == ["a"]


async def test_no_endpoints_gets_a_placeholder_once() -> None:
    h = harness()
    controller = await synced(h, service())
    (placeholder,) = created(h)
    assert placeholder.endpoints == [] and placeholder.ports is None
    h.cache(placeholder)
    h.client.actions.clear()
    await controller.sync(KEY)
    assert h.client.actions == []


@pytest.mark.parametrize(
    ("publish", "expected", "events"),
    [
        pytest.param(False, [], ["FailedToUpdateEndpointSlices"], id="skipped-and-retried"),
        pytest.param(True, ["a"], [], id="published-anyway"),
    ],
)
async def test_pod_on_unknown_node(publish: bool, expected: list[str], events: list[str]) -> None:
    h = harness()
    h.cache(service(publish=publish), pod("a", node="gone"))
    controller = endpointslice.new(h.ctx)
    if events:
        with pytest.raises(endpointslice.ReconcileError, match="Node gone Not Found"):
            await controller.sync(KEY)
    else:
        await controller.sync(KEY)
    (endpoint_slice,) = created(h)
    assert names(endpoint_slice) == expected
    assert h.recorder.reasons() == events


async def steady(h: Harness, *objs: Service | Pod) -> endpointslice.EndpointSliceController:
    """A controller whose first sync's slices are in the cache and the API."""
    controller = await synced(h, *objs)
    for endpoint_slice in created(h):
        h.store(h.client.objects[(EndpointSlice, NAMESPACE, endpoint_slice.metadata.name or "")])
    h.client.actions.clear()
    return controller


async def test_up_to_date_slices_are_left_alone() -> None:
    h = harness()
    controller = await steady(h, service(), pod("a"))
    await controller.sync(KEY)
    assert h.client.actions == []


async def test_removed_pod_updates_its_slice_only() -> None:
    h = harness()
    pods = [pod(f"p{i}", (f"10.244.1.{i + 1}",)) for i in range(150)]
    controller = await steady(h, service(), *pods)
    h.uncache(pods[0])
    await controller.sync(KEY)
    (update,) = h.client.writes()
    assert update.verb == "update"
    assert "p0" not in names(update.obj)
    assert len(update.obj.endpoints) == 99


async def test_new_pod_fills_an_existing_slice() -> None:
    h = harness()
    controller = await steady(h, service(), pod("a"))
    h.cache(pod("b", ("10.244.0.2",)))
    await controller.sync(KEY)
    (update,) = h.client.writes()
    assert update.verb == "update" and names(update.obj) == ["a", "b"]


async def test_changed_ports_reuse_the_old_slice() -> None:
    h = harness()
    svc = service()
    controller = await steady(h, svc, pod("a"))
    old_name = next(iter(h.client.objects.values())).metadata.name
    moved = copy.deepcopy(svc)
    moved.spec.ports = [ServicePort(name="http", protocol="TCP", port=80, target_port=8443)]  # type: ignore[union-attr]
    h.cache(moved)
    await controller.sync(KEY)
    (update,) = h.client.writes()
    assert (update.verb, update.name) == ("update", old_name)
    assert [p.port for p in update.obj.ports or ()] == [8443]


async def test_slices_of_an_older_service_are_replaced() -> None:
    h = harness()
    controller = await steady(h, service(), pod("a"))
    (old,) = [o for o in h.client.objects.values() if isinstance(o, EndpointSlice)]
    h.cache(service())  # same name, new uid
    await controller.sync(KEY)
    assert [(a.verb, a.name) for a in h.client.writes()] == [
        ("create", h.client.writes("create")[0].name),
        ("delete", old.metadata.name),
    ]


async def test_unsupported_address_type_is_deleted() -> None:
    h = harness()
    svc = service(families=["IPv4", "IPv6"])
    controller = await steady(h, svc, pod("a", ("10.244.0.1", "fd00::1")))
    svc.spec.ip_families = ["IPv4"]  # type: ignore[union-attr]
    await controller.sync(KEY)
    (delete,) = h.client.writes()
    assert delete.verb == "delete"


async def test_own_writes_missing_from_the_cache_are_waited_for() -> None:
    h = harness()
    controller = await synced(h, service(), pod("a"))
    h.client.actions.clear()
    with pytest.raises(StaleInformerCache):
        await controller.sync(KEY)
    assert h.client.actions == []
    (endpoint_slice,) = [o for o in h.client.objects.values() if isinstance(o, EndpointSlice)]
    h.cache(endpoint_slice)
    await controller.sync(KEY)
    assert h.client.actions == []


async def test_failed_write_is_an_event_and_retried() -> None:
    h = harness()
    h.client.fail_next("create", ApiError(Status(code=500, reason="InternalError", message="x")))
    h.cache(node(), service(), pod("a"))
    with pytest.raises(endpointslice.ReconcileError, match="failed to create EndpointSlice"):
        await endpointslice.new(h.ctx).sync(KEY)
    assert h.recorder.reasons() == ["FailedToUpdateEndpointSlices"]


async def test_slice_events_queue_their_service() -> None:
    h = harness()
    controller = await steady(h, service(), pod("a"))
    (endpoint_slice,) = [o for o in h.client.objects.values() if isinstance(o, EndpointSlice)]
    while len(controller.queue):
        key = await controller.queue.get()
        controller.queue.done(key)
    controller.slice_deleted(endpoint_slice)
    assert await controller.queue.get() == KEY


async def test_service_without_selector_is_left_alone() -> None:
    h = harness()
    await synced(h, service(no_selector=True), pod("a"))
    assert h.client.actions == []
