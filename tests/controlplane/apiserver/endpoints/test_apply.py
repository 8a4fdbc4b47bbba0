"""Server-side apply and managedFields: field sets, merging, conflicts, and the real clients."""

from __future__ import annotations

import copy
import datetime
import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from controlplane.apiserver import errors
from controlplane.apiserver.endpoints import apply
from controlplane.apiserver.registry.store import RequestContext
from kube.api import codec
from kube.api.meta_v1 import Resource
from kube.api.scheme import SCHEME, KindInfo
from tests.servers import Kubectl

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
LATER = NOW + datetime.timedelta(minutes=5)


def _info(api_version: str, kind: str) -> KindInfo:
    info = SCHEME.by_kind(api_version, kind)
    assert info is not None
    return info


DEPLOYMENTS = _info("apps/v1", "Deployment")
PODS = _info("v1", "Pod")
CONFIGMAPS = _info("v1", "ConfigMap")
SERVICES = _info("v1", "Service")


def deployment(replicas: int = 2, image: str = "nginx:1.27", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web", **labels}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "nginx", "image": image, "ports": [{"containerPort": 80}]}
                    ]
                },
            },
        },
    }


def configmap(**data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": data}


# Field sets.

FIELD_SETS = [
    pytest.param(
        CONFIGMAPS,
        configmap(a="1", b="2"),
        {
            "f:apiVersion": {},
            "f:kind": {},
            "f:data": {"f:a": {}, "f:b": {}},
            "f:metadata": {"f:name": {}},
        },
        id="configmap-data-map",
    ),
    pytest.param(
        DEPLOYMENTS,
        deployment(),
        {
            "f:apiVersion": {},
            "f:kind": {},
            "f:metadata": {"f:labels": {"f:app": {}}, "f:name": {}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {"f:matchLabels": {"f:app": {}}},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {
                        "f:containers": {
                            'k:{"name":"nginx"}': {
                                ".": {},
                                "f:image": {},
                                "f:name": {},
                                # The protocol key defaults to TCP, as upstream's schema says.
                                "f:ports": {
                                    'k:{"containerPort":80,"protocol":"TCP"}': {
                                        ".": {},
                                        "f:containerPort": {},
                                    }
                                },
                            }
                        }
                    },
                },
            },
        },
        id="deployment-map-lists-by-key",
    ),
    pytest.param(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "finalizers": ["a/b", "c/d"], "labels": {}},
            "spec": {
                "nodeSelector": {"disk": "ssd"},
                "containers": [{"name": "c", "image": "busybox", "args": ["sleep", "1"]}],
            },
        },
        {
            "f:apiVersion": {},
            "f:kind": {},
            "f:metadata": {
                "f:finalizers": {'v:"a/b"': {}, 'v:"c/d"': {}},
                "f:labels": {},
                "f:name": {},
            },
            "f:spec": {
                "f:containers": {
                    'k:{"name":"c"}': {".": {}, "f:args": {}, "f:image": {}, "f:name": {}}
                },
                "f:nodeSelector": {},
            },
        },
        id="pod-set-atomic-list-atomic-map-empty-map",
    ),
    pytest.param(
        SERVICES,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 80, "protocol": "UDP"}]},
        },
        {
            "f:apiVersion": {},
            "f:kind": {},
            "f:metadata": {"f:name": {}},
            "f:spec": {
                "f:ports": {
                    'k:{"port":80,"protocol":"UDP"}': {".": {}, "f:port": {}, "f:protocol": {}}
                }
            },
        },
        id="service-ports-two-keys",
    ),
]


@pytest.mark.parametrize(("info", "value", "expected"), FIELD_SETS)
def test_field_set(info: KindInfo, value: dict[str, Any], expected: dict[str, Any]) -> None:
    fields = apply.field_set(value, info.cls)
    assert apply.to_fields_v1(fields) == expected
    assert apply.from_fields_v1(expected) == fields


def test_fields_v1_members_and_children() -> None:
    trie: dict[str, Any] = {"f:a": {".": {}, "f:b": {}}, "f:c": {}, "f:d": {"f:e": {}}}
    fields = apply.from_fields_v1(trie)
    assert fields == {("f:a",), ("f:a", "f:b"), ("f:c",), ("f:d", "f:e")}
    assert apply.to_fields_v1(fields) == trie
    with pytest.raises(ValueError, match="unknown path element"):
        apply.from_fields_v1({"x:y": {}})


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("f:spec", "f:replicas"), ".spec.replicas"),
        (("f:spec", 'k:{"name":"nginx"}', "f:image"), '.spec[name="nginx"].image'),
        (
            ("f:ports", 'k:{"containerPort":80,"protocol":"TCP"}'),
            '.ports[containerPort=80,protocol="TCP"]',
        ),
        (("f:metadata", "f:finalizers", 'v:"a/b"'), '.metadata.finalizers[="a/b"]'),
    ],
    ids=["field", "key", "two-keys", "value"],
)
def test_path_string(path: apply.Path, text: str) -> None:
    assert apply.path_string(path) == text


# Merging.

MERGES = [
    pytest.param(
        CONFIGMAPS,
        configmap(a="1", b="2"),
        configmap(b="3", c="4"),
        {"a": "1", "b": "3", "c": "4"},
        ("data",),
        id="map-merges-key-by-key",
    ),
    pytest.param(
        PODS,
        {"metadata": {"finalizers": ["x/a", "x/b"]}},
        {"metadata": {"finalizers": ["x/c", "x/a"]}},
        ["x/c", "x/a", "x/b"],
        ("metadata", "finalizers"),
        id="set-list-union",
    ),
    pytest.param(
        PODS,
        {"spec": {"containers": [{"name": "c", "args": ["a", "b"]}]}},
        {"spec": {"containers": [{"name": "c", "args": ["z"]}]}},
        [{"name": "c", "args": ["z"]}],
        ("spec", "containers"),
        id="atomic-list-replaced",
    ),
    pytest.param(
        PODS,
        {"spec": {"nodeSelector": {"a": "1", "b": "2"}}},
        {"spec": {"nodeSelector": {"c": "3"}}},
        {"c": "3"},
        ("spec", "nodeSelector"),
        id="atomic-map-replaced",
    ),
    pytest.param(
        PODS,
        {
            "spec": {
                "containers": [
                    {"name": "a", "image": "a:1"},
                    {"name": "side", "image": "s:1"},
                    {"name": "b", "image": "b:1", "tty": True},
                ]
            }
        },
        {"spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "new", "image": "n"}]}},
        [
            {"name": "a", "image": "a:1"},
            {"name": "side", "image": "s:1"},
            {"name": "b", "image": "b:2", "tty": True},
            {"name": "new", "image": "n"},
        ],
        ("spec", "containers"),
        id="map-list-merged-by-key-in-order",
    ),
]


@pytest.mark.parametrize(("info", "live", "config", "expected", "where"), MERGES)
def test_merge(
    info: KindInfo,
    live: dict[str, Any],
    config: dict[str, Any],
    expected: Any,
    where: tuple[str, ...],
) -> None:
    before = copy.deepcopy(live)
    merged: Any = apply.merge(live, config, info.cls)
    for key in where:
        merged = merged[key]
    assert merged == expected
    assert live == before


@pytest.mark.parametrize(
    ("old", "new", "added", "modified", "removed"),
    [
        (configmap(a="1"), configmap(a="2", b="3"), {".data.b"}, {".data.a"}, set()),
        (configmap(a="1", b="2"), configmap(a="1"), set(), set(), {".data.b"}),
        (
            {"spec": {"containers": [{"name": "c", "image": "i"}]}},
            {"spec": {"containers": []}},
            set(),
            set(),
            {
                '.spec.containers[name="c"]',
                '.spec.containers[name="c"].image',
                '.spec.containers[name="c"].name',
            },
        ),
    ],
    ids=["added-and-modified", "removed", "list-item-removed"],
)
def test_compare(
    old: dict[str, Any], new: dict[str, Any], added: set[str], modified: set[str], removed: set[str]
) -> None:
    info = PODS if "spec" in old else CONFIGMAPS
    changes = apply.compare(old, new, info.cls)
    assert set(apply.paths(frozenset(changes.added))) == added
    assert set(apply.paths(frozenset(changes.modified))) == modified
    assert set(apply.paths(frozenset(changes.removed))) == removed


# Apply and Update bookkeeping on typed objects.


def _apply(
    info: KindInfo,
    live: Resource | None,
    config: dict[str, Any],
    manager: str,
    *,
    force: bool = False,
    now: datetime.datetime = NOW,
) -> Resource:
    return apply.apply(info, live, config, manager, force=force, subresource="", now=now)


def _owners(obj: Resource) -> dict[tuple[str, str], set[str]]:
    return {
        (e.manager or "", e.operation or ""): set(apply.paths(apply.from_fields_v1(e.fields_v1)))
        for e in obj.metadata.managed_fields or ()
    }


def _create(info: KindInfo, value: dict[str, Any], manager: str) -> Resource:
    obj = codec.from_builtins(value, info.cls).obj
    apply.record_update(info, obj, None, RequestContext(field_manager=manager), "", NOW)
    return obj


def _update(info: KindInfo, old: Resource, value: dict[str, Any], ctx: RequestContext) -> Resource:
    obj = codec.from_builtins(value, info.cls).obj
    obj.metadata.managed_fields = old.metadata.managed_fields
    apply.record_update(info, obj, old, ctx, "", LATER)
    return obj


def test_apply_creates_with_an_apply_entry() -> None:
    obj = _apply(CONFIGMAPS, None, configmap(a="1"), "alpha")
    (entry,) = obj.metadata.managed_fields or []
    assert (entry.manager, entry.operation, entry.api_version) == ("alpha", "Apply", "v1")
    assert entry.time == NOW and entry.fields_type == "FieldsV1"
    assert entry.fields_v1 == {"f:data": {"f:a": {}}}


def test_apply_again_changes_nothing() -> None:
    first = _apply(CONFIGMAPS, None, configmap(a="1"), "alpha")
    again = _apply(CONFIGMAPS, first, configmap(a="1"), "alpha", now=LATER)
    assert codec.encode_json(again) == codec.encode_json(first)


def test_apply_removes_what_the_manager_no_longer_applies() -> None:
    first = _apply(CONFIGMAPS, None, configmap(a="1", b="2"), "alpha")
    second = _apply(CONFIGMAPS, first, configmap(a="1"), "alpha", now=LATER)
    assert second.data == {"a": "1"}  # type: ignore[attr-defined]
    assert _owners(second) == {("alpha", "Apply"): {".data.a"}}
    assert second.metadata.managed_fields[0].time == LATER  # type: ignore[index]


def test_apply_keeps_what_another_manager_also_owns() -> None:
    first = _apply(CONFIGMAPS, None, configmap(a="1", b="2"), "alpha")
    shared = _apply(CONFIGMAPS, first, configmap(b="2"), "beta")
    assert _owners(shared) == {
        ("alpha", "Apply"): {".data.a", ".data.b"},
        ("beta", "Apply"): {".data.b"},
    }
    dropped = _apply(CONFIGMAPS, shared, configmap(a="1"), "alpha")
    assert dropped.data == {"a": "1", "b": "2"}  # type: ignore[attr-defined]


CONFLICTS = [
    pytest.param(
        "alpha",
        "Apply",
        'Apply failed with 1 conflict: conflict with "alpha": .data.k',
        'conflict with "alpha"',
        id="applier",
    ),
    pytest.param(
        "kubectl-client-side-apply",
        "Update",
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.k',
        'conflict with "kubectl-client-side-apply" using v1',
        id="updater",
    ),
]


@pytest.mark.parametrize(("owner", "operation", "message", "cause"), CONFLICTS)
def test_conflicts_and_force(owner: str, operation: str, message: str, cause: str) -> None:
    if operation == "Apply":
        live = _apply(CONFIGMAPS, None, configmap(k="v", other="o"), owner)
    else:
        live = _create(CONFIGMAPS, configmap(k="v", other="o"), owner)
    with pytest.raises(errors.ApiError) as conflict:
        _apply(CONFIGMAPS, live, configmap(k="changed"), "beta")
    error = conflict.value
    assert (error.code, error.reason, error.message) == (409, "Conflict", message)
    assert error.details is not None and error.details.causes is not None
    ((reason, text, field),) = [(c.reason, c.message, c.field) for c in error.details.causes]
    assert (reason, text, field) == ("FieldManagerConflict", cause, ".data.k")

    forced = _apply(CONFIGMAPS, live, configmap(k="changed"), "beta", force=True)
    assert forced.data == {"k": "changed", "other": "o"}  # type: ignore[attr-defined]
    owners = _owners(forced)
    assert owners[("beta", "Apply")] == {".data.k"}
    assert ".data.other" in owners[(owner, operation)]
    assert ".data.k" not in owners[(owner, operation)]


def test_several_conflicts_are_listed_by_manager() -> None:
    live = _apply(DEPLOYMENTS, None, deployment(), "alpha")
    with pytest.raises(errors.ApiError) as conflict:
        _apply(DEPLOYMENTS, live, deployment(replicas=5, image="nginx:2"), "beta")
    assert conflict.value.message == (
        'Apply failed with 2 conflicts: conflicts with "alpha":\n'
        "- .spec.replicas\n"
        '- .spec.template.spec.containers[name="nginx"].image'
    )


def test_same_value_is_shared_not_a_conflict() -> None:
    live = _create(DEPLOYMENTS, deployment(), "kubectl-create")
    shared = _apply(DEPLOYMENTS, live, deployment(), "beta")
    owners = _owners(shared)
    assert ".spec.replicas" in owners[("beta", "Apply")]
    assert ".spec.replicas" in owners[("kubectl-create", "Update")]


def test_kubectl_takes_over_what_its_client_side_apply_recorded() -> None:
    value = deployment()
    value["metadata"]["annotations"] = {apply.LAST_APPLIED: json.dumps(deployment())}
    live = _create(DEPLOYMENTS, value, "kubectl-client-side-apply")
    with pytest.raises(errors.ApiError):
        _apply(DEPLOYMENTS, live, deployment(replicas=3), "someone-else")
    taken = _apply(DEPLOYMENTS, live, deployment(replicas=3), "kubectl")
    assert taken.spec.replicas == 3  # type: ignore[attr-defined]
    recorded = json.loads((taken.metadata.annotations or {})[apply.LAST_APPLIED])
    assert recorded["spec"]["replicas"] == 3


def test_update_entries_record_changes_and_take_ownership() -> None:
    created = _create(CONFIGMAPS, configmap(a="1", b="2"), "creator")
    # The map came with the write, so it is a member too (fieldsV1 ``"f:data": {".": {}, ...}``).
    assert _owners(created) == {("creator", "Update"): {".data", ".data.a", ".data.b"}}
    assert created.metadata.managed_fields[0].time == NOW  # type: ignore[index]

    edited = _update(
        CONFIGMAPS, created, configmap(a="9", c="3"), RequestContext(field_manager="kubectl-edit")
    )
    # a was taken over, b removed from everyone: the creator keeps only the map itself.
    assert _owners(edited) == {
        ("creator", "Update"): {".data"},
        ("kubectl-edit", "Update"): {".data.a", ".data.c"},
    }
    times = [(e.manager, e.time) for e in edited.metadata.managed_fields or []]
    assert times == [("creator", NOW), ("kubectl-edit", LATER)]  # oldest first

    unchanged = _update(
        CONFIGMAPS, edited, configmap(a="9", c="3"), RequestContext(field_manager="x")
    )
    assert unchanged.metadata.managed_fields == edited.metadata.managed_fields


def test_update_manager_defaults_to_the_user_agent() -> None:
    created = _create(CONFIGMAPS, configmap(a="1"), "creator")
    ctx = RequestContext(user_agent="OpenAPI-Generator/31.0.0/python")
    updated = _update(CONFIGMAPS, created, configmap(a="2"), ctx)
    assert ("OpenAPI-Generator", "Update") in _owners(updated)


def test_update_respects_managed_fields_sent_and_reset() -> None:
    created = _create(CONFIGMAPS, configmap(a="1"), "creator")
    obj = codec.from_builtins(configmap(a="1"), CONFIGMAPS.cls).obj
    obj.metadata.managed_fields = []
    apply.record_update(CONFIGMAPS, obj, created, RequestContext(field_manager="x"), "", LATER)
    assert obj.metadata.managed_fields is None


@pytest.mark.parametrize(
    ("agent", "manager"),
    [
        ("kubectl/v1.36.4 (linux/amd64) kubernetes/abc", "kubectl"),
        ("OpenAPI-Generator/31.0.0/python", "OpenAPI-Generator"),
        ("odd\x00name/1", "oddname"),
        ("", ""),
    ],
    ids=["kubectl", "python", "unprintable", "none"],
)
def test_manager_from_user_agent(agent: str, manager: str) -> None:
    assert apply.manager_from_user_agent(agent) == manager


# The real clients.

DEPLOYMENT = json.dumps(deployment())


def _get(kubectl: Kubectl, name: str = "web") -> dict[str, Any]:
    return kubectl.json("get", "deployment", name, "--show-managed-fields")


def _managers(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(m["manager"], m["operation"]) for m in obj["metadata"]["managedFields"]}


def test_kubectl_apply_server_side_twice_is_a_no_op(kubectl: Kubectl) -> None:
    kubectl.run("apply", "--server-side", "-f", "-", input=DEPLOYMENT)
    first = _get(kubectl)
    again = kubectl.run("apply", "--server-side", "-f", "-", input=DEPLOYMENT).stdout
    assert again.strip() == "deployment.apps/web serverside-applied"
    second = _get(kubectl)
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert _managers(second) == {("kubectl", "Apply")}


def test_kubectl_conflicts_and_force_conflicts(kubectl: Kubectl) -> None:
    kubectl.run("apply", "--server-side", "-f", "-", input=DEPLOYMENT)
    scaled = json.dumps(deployment(replicas=5))
    failed = kubectl.run(
        "apply", "--server-side", "--field-manager", "other", "-f", "-", input=scaled, check=False
    )
    assert failed.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas' in failed.stderr
    kubectl.run(
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "--force-conflicts",
        "-f",
        "-",
        input=scaled,
    )
    obj = _get(kubectl)
    assert obj["spec"]["replicas"] == 5
    fields = {m["manager"]: m["fieldsV1"] for m in obj["metadata"]["managedFields"]}
    assert "f:replicas" in fields["other"]["f:spec"]
    assert "f:replicas" not in fields["kubectl"]["f:spec"]


def test_kubectl_client_side_then_server_side_apply(kubectl: Kubectl) -> None:
    assert kubectl.run("apply", "-f", "-", input=DEPLOYMENT).stdout.strip() == (
        "deployment.apps/web created"
    )
    assert ("kubectl-client-side-apply", "Update") in _managers(_get(kubectl))
    # A changed value the client-side apply recorded is taken over, not a conflict (upstream's
    # lastAppliedManager), and kubectl then migrates the client-side manager's fields.
    out = kubectl.run("apply", "--server-side", "-f", "-", input=json.dumps(deployment(replicas=3)))
    assert out.stdout.strip() == "deployment.apps/web serverside-applied"
    obj = _get(kubectl)
    assert obj["spec"]["replicas"] == 3
    managers = _managers(obj)
    assert ("kubectl", "Apply") in managers
    assert ("kubectl-client-side-apply", "Update") not in managers


def test_kubectl_edit_style_writes_record_update_entries(kubectl: Kubectl) -> None:
    kubectl.run("apply", "--server-side", "-f", "-", input=DEPLOYMENT)
    kubectl.run("label", "deployment", "web", "team=blue")
    obj = _get(kubectl)
    fields = {m["manager"]: m for m in obj["metadata"]["managedFields"]}
    assert fields["kubectl-label"]["operation"] == "Update"
    assert fields["kubectl-label"]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:team": {}}}}


def test_apply_options_and_validation(kubectl: Kubectl) -> None:
    base = ["apply", "--server-side", "-f", "-"]
    unknown = deployment()
    unknown["spec"]["bogus"] = 1
    strict = kubectl.run(*base, "--validate=strict", input=json.dumps(unknown), check=False)
    assert strict.returncode != 0 and 'unknown field "spec.bogus"' in strict.stderr
    dry = kubectl.run(*base, "--dry-run=server", input=DEPLOYMENT).stdout
    assert "serverside-applied (server dry run)" in dry
    missing = kubectl.run("get", "deployment", "web", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr


def _call(client: Any, path: str, body: Any, query: list[tuple[str, str]]) -> Any:
    return client.call_api(
        path,
        "PATCH",
        query_params=query,
        header_params={"Content-Type": "application/apply-patch+yaml"},
        body=body,
        response_types_map={200: "object", 201: "object"},
        auth_settings=["BearerToken"],
        _return_http_data_only=False,
    )


def test_python_client_apply_creates_and_requires_a_manager(
    api_client: Any, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/cm"
    with pytest.raises(ApiException) as missing:
        _call(api_client, path, configmap(a="1"), [])
    assert missing.value.status == 422
    assert "fieldManager: Required value: is required for apply patch" in missing.value.body
    created = _call(api_client, path, configmap(a="1"), [("fieldManager", "alpha")])
    assert created[1] == 201
    updated = _call(api_client, path, configmap(a="2"), [("fieldManager", "alpha")])
    assert updated[1] == 200 and updated[0]["data"] == {"a": "2"}
    with pytest.raises(ApiException) as wrong:
        _call(api_client, path, {**configmap(a="1"), "apiVersion": "v2"}, [("fieldManager", "a")])
    assert wrong.value.status == 400
