"""Subresources as REST objects: every subresource a built-in kind declares is served by a
REST object implementing the interfaces of its verbs, and the endpoints dispatch on those
interfaces (a verb the object does not implement is a 405; bodies are checked like any
other body)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from controlplane.apiserver.auth import admission
from controlplane.apiserver.registry import rest, subresources
from controlplane.apiserver.server import APIServer, ServerConfig
from controlplane.storage.sqlite import SQLiteStore
from tests.controlplane.apiserver.inprocess import serving

INTERFACES = (rest.Getter, rest.Creater, rest.Updater, rest.Patcher, rest.Connecter)
NOT_SERVED = {("pods", "resize")}
"""Declared (so discovery lists them, as upstream) but not served yet."""
NS = "default"


async def test_every_declared_subresource_has_a_rest_object(tmp_path: Path) -> None:
    store = await SQLiteStore.open(tmp_path / "store.db")
    try:
        server = APIServer(store, ServerConfig(data_dir=tmp_path))
        served: dict[str, set[str]] = {}
        for resource_store in server.stores.values():
            info = resource_store.info
            for name in info.subresources:
                found = subresources.rest(resource_store, name, server.backends)
                if (info.plural, name) in NOT_SERVED:
                    assert found is None, f"{info.plural}/{name}"
                    continue
                assert found is not None, f"{info.plural}/{name} has no REST object"
                kinds = {i.__name__ for i in INTERFACES if isinstance(found, i)}
                assert kinds, f"{info.plural}/{name}: {type(found).__name__} serves no verb"
                served.setdefault(f"{info.plural}/{name}", set()).update(kinds)
            assert subresources.rest(resource_store, "nonsense", server.backends) is None
    finally:
        await store.close()
    assert served["pods/status"] == {"Getter", "Updater", "Patcher"}
    assert served["deployments/scale"] == {"Getter", "Updater", "Patcher"}
    assert served["pods/binding"] == served["pods/eviction"] == {"Creater"}
    assert served["serviceaccounts/token"] == {"Creater"}
    assert served["namespaces/finalize"] == {"Updater"}
    assert served["pods/log"] == served["nodes/proxy"] == {"Connecter"}
    assert served["pods/proxy"] == served["services/proxy"] == {"Connecter"}


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    store = await SQLiteStore.open(tmp_path / "store.db")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    try:
        # No controller-manager runs beside it: no default ServiceAccount for the pod.
        plugins = admission.enabled(disable=["ServiceAccount"])
        async with serving(store, data_dir, admission_plugins=plugins) as (_, session):
            pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
            async with session.post(f"/api/v1/namespaces/{NS}/pods", json=pod) as response:
                assert response.status == 201
            yield session
    finally:
        await store.close()


async def send(
    session: aiohttp.ClientSession, method: str, path: str, body: Any, content_type: str
) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": content_type}
    async with session.request(method, path, json=body, headers=headers) as response:
        return response.status, await response.json()


async def test_binding_is_created_and_answered_with_a_status(
    session: aiohttp.ClientSession,
) -> None:
    binding = {"apiVersion": "v1", "kind": "Binding", "target": {"kind": "Node", "name": "n1"}}
    path = f"/api/v1/namespaces/{NS}/pods/p/binding"
    code, answer = await send(session, "POST", path, binding, "application/json")
    assert (code, answer["kind"], answer["status"], answer["code"]) == (
        201,
        "Status",
        "Success",
        201,
    )
    async with session.get(f"/api/v1/namespaces/{NS}/pods/p") as response:
        assert (await response.json())["spec"]["nodeName"] == "n1"


async def test_a_binding_posted_to_bindings_binds_the_pod_it_names(
    session: aiohttp.ClientSession,
) -> None:
    """``bindings`` is served by the binding REST object, as upstream's legacy storage: the
    pod is bound, no Binding is stored (before, one was, and the pod stayed unscheduled)."""
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "n2"},
    }
    path = f"/api/v1/namespaces/{NS}/bindings"
    code, answer = await send(session, "POST", path, binding, "application/json")
    assert (code, answer["kind"], answer["status"]) == (201, "Status", "Success")
    async with session.get(f"/api/v1/namespaces/{NS}/pods/p") as response:
        assert (await response.json())["spec"]["nodeName"] == "n2"
    code, answer = await send(session, "POST", path, binding, "application/json")
    assert (code, answer["reason"]) == (409, "Conflict"), "bound once, as pods/binding"
    assert answer["message"].endswith('pod p is already assigned to node "n2"')


async def test_a_subresource_body_of_another_kind_is_a_400(session: aiohttp.ClientSession) -> None:
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction"}
    path = f"/api/v1/namespaces/{NS}/pods/p/binding"
    code, answer = await send(session, "POST", path, eviction, "application/json")
    assert code == 400
    assert answer["message"] == (
        "the API version in the data (policy/v1) does not match the expected API version (v1)"
    )


async def test_a_verb_the_rest_object_does_not_serve_is_a_405(
    session: aiohttp.ClientSession,
) -> None:
    path = f"/api/v1/namespaces/{NS}/pods/p/binding"
    code, answer = await send(session, "PUT", path, {}, "application/json")
    assert code == 405
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server does not allow this method on the requested resource",
        "reason": "MethodNotAllowed",
        "details": {},
        "code": 405,
    }


async def test_scale_patches_apply_to_the_scale_but_server_side_apply_is_a_415(
    session: aiohttp.ClientSession,
) -> None:
    deployment = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    async with session.post(f"/apis/apps/v1/namespaces/{NS}/deployments", json=deployment) as r:
        assert r.status == 201
    path = f"/apis/apps/v1/namespaces/{NS}/deployments/d/scale"
    patch = {"spec": {"replicas": 3}}
    code, scale = await send(session, "PATCH", path, patch, "application/merge-patch+json")
    assert (code, scale["kind"], scale["spec"]["replicas"]) == (200, "Scale", 3)
    code, answer = await send(session, "PATCH", path, patch, "application/apply-patch+yaml")
    assert (code, answer["reason"]) == (415, "UnsupportedMediaType")
