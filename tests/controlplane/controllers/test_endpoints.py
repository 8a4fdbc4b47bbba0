"""The endpoints controller, with fake informers and a fake API."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.controllers import endpoints
from kube.api.kinds.core_v1.pod import ContainerPort, Pod
from kube.api.kinds.core_v1.service import Endpoints, ServicePort
from kube.api.meta_v1 import ObjectMeta, Status
from kube.client.errors import ApiError
from tests.controlplane.controllers.endpointfixtures import NAMESPACE, pod, service
from tests.controlplane.controllers.fakes import Harness, harness, stamp

KEY = f"{NAMESPACE}/web"


def written(h: Harness) -> Endpoints:
    (action,) = h.client.writes("create", "Endpoints") + h.client.writes("update", "Endpoints")
    result: Endpoints = action.obj
    return result


def ips(endpoints: Endpoints) -> tuple[list[str], list[str]]:
    """(ready, not ready) IPs across all subsets."""
    subsets = endpoints.subsets or []
    return (
        sorted(a.ip or "" for s in subsets for a in s.addresses or ()),
        sorted(a.ip or "" for s in subsets for a in s.not_ready_addresses or ()),
    )


@pytest.mark.parametrize(
    ("pods", "publish", "ready", "not_ready"),
    [
        pytest.param([pod("a")], False, ["10.244.0.1"], [], id="ready-pod"),
        pytest.param([pod("a", ready=False)], False, [], ["10.244.0.1"], id="not-ready-pod"),
        pytest.param([pod("a", terminating=True)], False, [], [], id="terminating-left-out"),
        pytest.param(
            [pod("a", terminating=True)], True, ["10.244.0.1"], [], id="terminating-published"
        ),
        pytest.param([pod("a", ready=False)], True, ["10.244.0.1"], [], id="not-ready-published"),
        pytest.param([pod("a", ips=())], False, [], [], id="no-ip-yet"),
        pytest.param([pod("a", phase="Succeeded")], False, [], [], id="finished-pod"),
        pytest.param([pod("a", labels={"app": "db"})], False, [], [], id="not-selected"),
        pytest.param(
            [pod("a"), pod("b", ("10.244.0.2",), ready=False)],
            False,
            ["10.244.0.1"],
            ["10.244.0.2"],
            id="mixed",
        ),
    ],
)
async def test_readiness(
    pods: list[Pod], publish: bool, ready: list[str], not_ready: list[str]
) -> None:
    h = harness()
    h.cache(service(publish=publish), *pods)
    await endpoints.new(h.ctx).sync(KEY)
    assert ips(written(h)) == (ready, not_ready)


async def test_address_points_at_the_pod() -> None:
    h = harness()
    h.cache(service(labels={"tier": "front"}), pod("a"))
    await endpoints.new(h.ctx).sync(KEY)
    result = written(h)
    assert result.metadata.name == "web"
    assert result.metadata.labels == {"tier": "front"}
    (subset,) = result.subsets or []
    (address,) = subset.addresses or []
    assert address.node_name == "node-a"
    assert address.target_ref is not None
    assert (address.target_ref.kind, address.target_ref.name, address.target_ref.uid) == (
        "Pod",
        "a",
        "uid-a",
    )
    assert [(p.name, p.port, p.protocol) for p in subset.ports or ()] == [("http", 8080, "TCP")]
    annotations = result.metadata.annotations or {}
    assert annotations["endpoints.kubernetes.io/last-change-trigger-time"] == (
        "2026-01-01T00:00:00Z"
    )


async def test_named_target_port_is_resolved_per_pod() -> None:
    h = harness()
    port = ServicePort(name="http", protocol="TCP", port=80, target_port="web")
    h.cache(
        service(ports=[port]),
        pod("a", ports=[ContainerPort(name="web", container_port=8080, protocol="TCP")]),
        pod("b", ("10.244.0.2",), ports=[ContainerPort(name="web", container_port=9090)]),
        pod("c", ("10.244.0.3",), ports=[ContainerPort(name="other", container_port=1)]),
    )
    await endpoints.new(h.ctx).sync(KEY)
    found = {
        (a.ip, p.port)
        for s in written(h).subsets or ()
        for a in s.addresses or ()
        for p in s.ports or ()
    }
    assert found == {("10.244.0.1", 8080), ("10.244.0.2", 9090)}


async def test_addresses_sharing_ports_are_one_subset() -> None:
    h = harness()
    ports = [
        ServicePort(name="http", protocol="TCP", port=80, target_port=8080),
        ServicePort(name="metrics", protocol="TCP", port=9100, target_port=9100),
    ]
    h.cache(service(ports=ports), pod("a"), pod("b", ("10.244.0.2",), ready=False))
    await endpoints.new(h.ctx).sync(KEY)
    (subset,) = written(h).subsets or []
    assert [p.name for p in subset.ports or ()] == ["http", "metrics"]
    assert [a.ip for a in subset.addresses or ()] == ["10.244.0.1"]
    assert [a.ip for a in subset.not_ready_addresses or ()] == ["10.244.0.2"]


async def test_headless_service_without_ports() -> None:
    h = harness()
    h.cache(
        service(ports=[], cluster_ip="None"),
        pod("a", hostname="a", subdomain="web"),
        pod("b", ("10.244.0.2",), hostname="b", subdomain="other"),
    )
    await endpoints.new(h.ctx).sync(KEY)
    result = written(h)
    (subset,) = result.subsets or []
    assert subset.ports is None
    assert [(a.ip, a.hostname) for a in subset.addresses or ()] == [
        ("10.244.0.1", "a"),
        ("10.244.0.2", None),
    ]
    assert result.metadata.labels == {"service.kubernetes.io/headless": ""}


@pytest.mark.parametrize(
    "svc",
    [
        pytest.param(service(no_selector=True), id="no-selector"),
        pytest.param(service(kind="ExternalName"), id="external-name"),
        pytest.param(
            service("kubernetes", namespace="default", selector={"app": "web"}),
            id="api-server-service",
        ),
    ],
)
async def test_services_left_alone(svc: Any) -> None:
    h = harness()
    h.cache(svc, pod("a", namespace=svc.metadata.namespace))
    await endpoints.new(h.ctx).sync(f"{svc.metadata.namespace}/{svc.metadata.name}")
    assert h.client.actions == []


@pytest.mark.parametrize(
    ("existing", "deleted"),
    [
        pytest.param(True, ["web"], id="deletes-endpoints"),
        pytest.param(False, [], id="already-gone"),
    ],
)
async def test_deleted_service(existing: bool, deleted: list[str]) -> None:
    h = harness()
    if existing:
        h.store(stamp(Endpoints(metadata=ObjectMeta(name="web", namespace=NAMESPACE))))
    await endpoints.new(h.ctx).sync(KEY)
    assert [a.name for a in h.client.writes("delete", "Endpoints")] == deleted


async def test_up_to_date_endpoints_are_not_rewritten() -> None:
    h = harness()
    h.cache(service(), pod("a"))
    controller = endpoints.new(h.ctx)
    await controller.sync(KEY)
    h.cache(written(h))
    h.client.actions.clear()
    await controller.sync(KEY)
    assert h.client.actions == []


async def test_changed_pods_update_the_endpoints() -> None:
    h = harness()
    h.cache(service(), pod("a"))
    controller = endpoints.new(h.ctx)
    await controller.sync(KEY)
    h.store(written(h))
    h.cache(pod("b", ("10.244.0.2",)))
    h.client.actions.clear()
    await controller.sync(KEY)
    (update,) = h.client.writes("update", "Endpoints")
    assert ips(update.obj) == (["10.244.0.1", "10.244.0.2"], [])
    # The new pod's Ready transition triggered this write.
    assert (update.obj.metadata.annotations or {})[
        "endpoints.kubernetes.io/last-change-trigger-time"
    ] == "2026-01-01T00:05:00.25Z"


async def test_over_capacity_is_truncated() -> None:
    h = harness()
    pods = [pod(f"p{i}", (f"10.244.{i // 250}.{i % 250}",)) for i in range(1001)]
    h.cache(service(), *pods)
    await endpoints.new(h.ctx).sync(KEY)
    result = written(h)
    assert len(ips(result)[0]) == endpoints.MAX_CAPACITY
    assert (result.metadata.annotations or {})["endpoints.kubernetes.io/over-capacity"] == (
        "truncated"
    )


async def test_failed_create_is_an_event_and_retried() -> None:
    h = harness()
    h.cache(service(), pod("a"))
    h.client.fail_next("create", ApiError(Status(code=500, reason="InternalError", message="x")))
    with pytest.raises(ApiError):
        await endpoints.new(h.ctx).sync(KEY)
    assert h.recorder.reasons() == ["FailedToCreateEndpoint"]


async def test_terminating_namespace_is_not_retried() -> None:
    h = harness()
    h.cache(service(), pod("a"))
    h.client.fail_next(
        "create",
        ApiError(
            Status(
                code=403,
                reason="Forbidden",
                message="unable to create new content in namespace shop because it is being"
                " terminated",
            )
        ),
    )
    await endpoints.new(h.ctx).sync(KEY)
    assert h.recorder.events == []


async def test_pod_change_queues_the_services_selecting_it() -> None:
    h = harness()
    h.cache(
        service(), service("db", selector={"app": "db"}), service("all", selector={"app": "web"})
    )
    controller = endpoints.new(h.ctx)
    old = pod("a")
    new = pod("a", labels={"app": "db"})
    new.metadata.resource_version = "2"
    controller.pod_updated(old, new)
    assert sorted([await controller.queue.get() for _ in range(3)]) == [
        f"{NAMESPACE}/all",
        f"{NAMESPACE}/db",
        KEY,
    ]
    assert len(controller.queue) == 0


async def test_leftover_endpoints_are_queued_at_start() -> None:
    h = harness()
    h.cache(
        stamp(Endpoints(metadata=ObjectMeta(name="old", namespace=NAMESPACE))),
        stamp(
            Endpoints(
                metadata=ObjectMeta(
                    name="lock",
                    namespace=NAMESPACE,
                    annotations={"control-plane.alpha.kubernetes.io/leader": "{}"},
                )
            )
        ),
    )
    controller = endpoints.new(h.ctx)
    controller.queue_leftover_endpoints()
    assert await controller.queue.get() == f"{NAMESPACE}/old"
    assert len(controller.queue) == 0
