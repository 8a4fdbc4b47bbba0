"""The namespace controller, with fake informers, a fake API and fake discovery."""

from __future__ import annotations

import datetime
from typing import Any

import msgspec
import pytest

from controlplane.controllers import namespace as nsc
from kube.api import codec
from kube.api.kinds.apps_v1 import Deployment
from kube.api.kinds.core_v1.cluster import ConfigMap, Namespace, NamespaceSpec, NamespaceStatus
from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import ObjectMeta, Resource, Status
from kube.client.errors import ApiError
from tests import builders
from tests.controlplane.controllers.fakes import Action, Harness, harness, stamp

DELETED_AT = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
SERVED: list[type[Resource]] = [Pod, ConfigMap, Deployment]
WIDGETS = "/apis/example.com/v1/namespaces/team/widgets"


def _missing(path: str) -> ApiError:
    return ApiError(Status(code=404, reason="NotFound", message=f"{path} not found"))


class FakeServer:
    """Discovery and the dynamic verbs over the fake API's objects, plus one custom kind.

    A delete of an object with finalizers only marks it, as the API server does."""

    def __init__(self, h: Harness, *, broken_groups: tuple[str, ...] = ()) -> None:
        self.h = h
        self.broken = broken_groups
        self.widgets: dict[str, dict[str, Any]] = {}
        h.client.react("request", "*", self.answer)

    def _resources(self, group_version: str) -> list[dict[str, Any]]:
        verbs = ["create", "delete", "deletecollection", "get", "list"]
        listed = [
            {"name": cls.kind_info.plural, "namespaced": True, "kind": cls.kind_info.kind}
            for cls in SERVED
            if cls.kind_info.api_version == group_version
        ]
        if group_version == "example.com/v1":
            # No deletecollection: the controller lists and deletes one by one.
            listed.append({"name": "widgets", "namespaced": True, "kind": "Widget"})
            return [{**r, "verbs": ["delete", "get", "list"]} for r in listed]
        return [{**r, "verbs": verbs} for r in listed]

    def _remove(self, key: tuple[Any, ...], obj: Resource) -> None:
        if obj.metadata.finalizers:
            obj.metadata.deletion_timestamp = DELETED_AT
        else:
            del self.h.client.objects[key]

    def answer(self, action: Action) -> bytes:
        method, path = action.kind, action.name
        if path == "/apis":
            groups = ["apps", "example.com", *self.broken]
            return codec.encode_json(
                {
                    "groups": [
                        {"name": g, "preferredVersion": {"groupVersion": f"{g}/v1"}} for g in groups
                    ]
                }
            )
        if path in ("/api/v1", "/apis/apps/v1", "/apis/example.com/v1"):
            group_version = path.removeprefix("/api/").removeprefix("/apis/")
            return codec.encode_json({"resources": self._resources(group_version)})
        if path.startswith(WIDGETS):
            return self._widgets(method, path)
        for cls in SERVED:
            collection = cls.kind_info.plural
            if (
                not path.endswith(f"/namespaces/team/{collection}")
                and f"/{collection}/" not in path
            ):
                continue
            name = path.rsplit("/", 1)[-1] if f"/{collection}/" in path else None
            found = [
                (key, obj)
                for key, obj in self.h.client.objects.items()
                if key[0] is cls and key[1] == "team" and (name is None or key[2] == name)
            ]
            if method == "GET":
                return codec.encode_json({"items": [codec.to_builtins(o) for _, o in found]})
            self.h.client.actions.append(Action("deletecollection", cls.__name__, "team", ""))
            for key, obj in found:
                self._remove(key, obj)
            return b"{}"
        raise _missing(path)

    def _widgets(self, method: str, path: str) -> bytes:
        if method == "GET" and path == WIDGETS:
            return codec.encode_json({"items": list(self.widgets.values())})
        if method == "DELETE" and path != WIDGETS:
            name = path.rsplit("/", 1)[-1]
            self.h.client.actions.append(Action("delete", "Widget", "team", name))
            self.widgets.pop(name, None)
            return b"{}"
        raise ApiError(Status(code=405, reason="MethodNotAllowed", message="not supported"))


def terminating(finalizers: list[str] | None = None) -> Namespace:
    ns = stamp(
        Namespace(
            metadata=ObjectMeta(name="team", deletion_timestamp=DELETED_AT),
            spec=NamespaceSpec(finalizers=["kubernetes"] if finalizers is None else finalizers),
            status=NamespaceStatus(phase="Active"),
        )
    )
    return ns


def pod(name: str, *, grace: int = 30, finalizers: list[str] | None = None) -> Pod:
    return stamp(
        builders.pod(
            name,
            "team",
            finalizers=finalizers,
            phase="Running",
            termination_grace_period_seconds=grace,
        )
    )


def configmap(name: str, finalizers: list[str] | None = None) -> ConfigMap:
    return stamp(ConfigMap(metadata=ObjectMeta(name=name, namespace="team", finalizers=finalizers)))


def stored_namespace(h: Harness) -> Namespace:
    ns = h.client.objects[(Namespace, None, "team")]
    assert isinstance(ns, Namespace)
    return ns


def conditions(h: Harness) -> dict[str, tuple[str, str, str]]:
    status = stored_namespace(h).status
    assert status is not None
    return {
        c.type or "": (c.status or "", c.reason or "", c.message or "")
        for c in status.conditions or ()
    }


def finalized(h: Harness) -> list[Any]:
    return [a.obj.spec.finalizers for a in h.client.writes("update") if a.subresource == "finalize"]


async def test_an_empty_namespace_is_finalized() -> None:
    h = harness()
    FakeServer(h)
    h.store(terminating(["kubernetes", "example.com/other"]))
    h.client.seed(configmap("a"))
    await nsc.new(h.ctx).sync("team")
    assert stored_namespace(h).status.phase == "Terminating"  # type: ignore[union-attr]
    assert finalized(h) == [["example.com/other"]]
    assert (ConfigMap, "team", "a") not in h.client.objects
    assert {t: s for t, (s, _, _) in conditions(h).items()} == dict.fromkeys(nsc.OK, "False")


async def test_custom_resources_are_deleted_one_by_one() -> None:
    h = harness()
    server = FakeServer(h)
    server.widgets["w"] = {"metadata": {"name": "w", "namespace": "team"}}
    h.store(terminating())
    await nsc.new(h.ctx).sync("team")
    assert [(a.kind, a.name) for a in h.client.writes("delete")] == [("Widget", "w")]
    assert finalized(h) == [[]]


async def test_pods_go_first_and_the_rest_waits_for_them() -> None:
    h = harness()
    FakeServer(h)
    h.store(terminating())
    h.client.seed(pod("web", finalizers=["example.com/hold"]), configmap("a"))
    await nsc.new(h.ctx).sync("team")
    assert [a.kind for a in h.client.writes("deletecollection")] == ["Pod"]
    assert (ConfigMap, "team", "a") in h.client.objects
    assert finalized(h) == []
    assert conditions(h)[nsc.CONTENT_REMAINING] == (
        "True",
        "SomeResourcesRemain",
        "Some resources are remaining: pods. has 1 resource instances",
    )
    assert conditions(h)[nsc.FINALIZERS_REMAINING] == (
        "True",
        "SomeFinalizerRemain",
        "Some finalizers are remaining: example.com/hold in 1 resource instances",
    )


@pytest.mark.parametrize(
    ("elapsed", "grace", "requeue_after"),
    [
        pytest.param(0, 30, 16, id="grace-period-pending"),
        pytest.param(60, 30, 8, id="grace-period-passed-finalizer-estimate"),
    ],
)
async def test_remaining_content_requeues_after_half_the_estimate(
    elapsed: int, grace: int, requeue_after: int
) -> None:
    h = harness()
    FakeServer(h)
    controller = nsc.new(h.ctx)  # before the cache is filled: nothing queued by handlers
    h.store(terminating())
    h.client.seed(pod("web", grace=grace, finalizers=["example.com/hold"]))
    await h.clock.advance(elapsed)
    await controller.sync("team")
    assert finalized(h) == []
    await h.clock.advance(requeue_after - 0.5)
    assert len(controller.queue) == 0
    await h.clock.advance(1)
    assert await controller.queue.get() == "team"


async def test_configmaps_with_finalizers_hold_the_namespace() -> None:
    h = harness()
    FakeServer(h)
    h.store(terminating())
    h.client.seed(configmap("a", ["example.com/hold"]), configmap("b", ["example.com/hold"]))
    await nsc.new(h.ctx).sync("team")
    assert finalized(h) == []
    assert conditions(h)[nsc.CONTENT_REMAINING][2] == (
        "Some resources are remaining: configmaps. has 2 resource instances"
    )


async def test_a_failing_group_is_reported_and_the_rest_still_emptied() -> None:
    h = harness()
    FakeServer(h, broken_groups=("metrics.k8s.io",))
    h.store(terminating())
    h.client.seed(configmap("a"))
    with pytest.raises(nsc.ContentDeletionError):
        await nsc.new(h.ctx).sync("team")
    assert (ConfigMap, "team", "a") not in h.client.objects
    assert finalized(h) == []
    state, reason, message = conditions(h)[nsc.DISCOVERY_FAILURE]
    assert (state, reason) == ("True", "DiscoveryFailed")
    assert message.startswith(
        "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of "
        "server APIs: metrics.k8s.io/v1: "
    )


async def test_a_failing_delete_is_reported() -> None:
    h = harness()
    FakeServer(h)
    h.store(terminating())
    h.client.seed(configmap("a"))

    def failing(action: Action) -> None:
        if action.name.endswith("/configmaps"):
            raise ApiError(Status(code=500, reason="InternalError", message="etcd is down"))

    h.client.react("request", "DELETE", failing)
    with pytest.raises(nsc.ContentDeletionError):
        await nsc.new(h.ctx).sync("team")
    assert conditions(h)[nsc.CONTENT_FAILURE] == (
        "True",
        "ContentDeletionFailed",
        "Failed to delete all resource types, 1 remaining: 500 InternalError: etcd is down",
    )


@pytest.mark.parametrize(
    "ns",
    [
        pytest.param(
            stamp(Namespace(metadata=ObjectMeta(name="team"), spec=NamespaceSpec(["kubernetes"]))),
            id="not-deleted",
        ),
        pytest.param(terminating([]), id="already-finalized"),
    ],
)
async def test_nothing_to_delete(ns: Namespace) -> None:
    h = harness()
    FakeServer(h)
    h.store(ns)
    h.client.seed(configmap("a"))
    await nsc.new(h.ctx).sync("team")
    assert (ConfigMap, "team", "a") in h.client.objects
    assert finalized(h) == []


async def test_only_deleted_namespaces_are_queued_and_late() -> None:
    h = harness()
    controller = nsc.new(h.ctx)
    live = stamp(Namespace(metadata=ObjectMeta(name="live")))
    controller._changed(live)
    controller._updated(live, msgspec.structs.replace(live))
    controller._changed(terminating())
    assert len(controller.queue) == 0
    await h.clock.advance(nsc.DELETION_DELAY)
    assert await controller.queue.get() == "team"
    assert len(controller.queue) == 0
