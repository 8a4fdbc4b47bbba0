"""Discovery with APIServices: groups and versions in upstream's aggregator order, extension
servers' group/versions listed, and their APIResourceLists in the aggregated form; the legacy
documents in upstream's JSON order and protobuf bytes."""

from __future__ import annotations

import kube.api.kinds  # noqa: F401  (registers every kind)
from controlplane.apiserver import protobuf
from controlplane.apiserver.aggregator import autoregister
from controlplane.apiserver.endpoints import discovery
from controlplane.apiserver.endpoints.handlers import json_dict
from kube.api import codec
from kube.api.meta_v1 import GroupVersionKind
from kube.api.scheme import SCHEME

KINDS = list(SCHEME.served())
WARDLE = ("wardle.example.com", "v1alpha1")
ANSWERED = {
    "kind": "APIResourceList",
    "groupVersion": "wardle.example.com/v1alpha1",
    "resources": [
        {
            "name": "flunders",
            "singularName": "flunder",
            "namespaced": True,
            "kind": "Flunder",
            "verbs": ["get", "list"],
            "shortNames": ["fl"],
        },
        {"name": "flunders/status", "namespaced": True, "kind": "Flunder", "verbs": ["get"]},
    ],
}


def _aggregation(**extra: tuple[int, int]) -> discovery.Aggregation:
    priorities = {
        gv: autoregister.PRIORITIES[gv]
        for gv in {(i.group, i.version) for i in KINDS}
        if gv in autoregister.PRIORITIES
    }
    priorities[("apiregistration.k8s.io", "v1")] = autoregister.APIREGISTRATION_PRIORITY
    priorities[WARDLE] = extra.get("wardle", (1000, 15))
    return discovery.Aggregation(priorities, [WARDLE], {WARDLE: ANSWERED})


def test_groups_by_priority_then_name() -> None:
    names = [g.name for g in discovery.api_group_list(KINDS, _aggregation()).groups]
    assert names[0] == "apiregistration.k8s.io"
    assert names.index("apps") < names.index("autoscaling") < names.index("batch")
    assert names.index("batch") < names.index("wardle.example.com")
    first = [
        g.name for g in discovery.api_group_list(KINDS, _aggregation(wardle=(19000, 1))).groups
    ]
    assert first[:2] == ["apiregistration.k8s.io", "wardle.example.com"]


def test_versions_by_version_priority() -> None:
    autoscaling = discovery.api_group(KINDS, "autoscaling", _aggregation())
    assert autoscaling is not None
    assert [v.version for v in autoscaling.versions] == ["v2", "v1"]
    wardle = discovery.api_group(KINDS, "wardle.example.com", _aggregation())
    assert wardle is not None and wardle.preferred_version is not None
    assert wardle.preferred_version.group_version == "wardle.example.com/v1alpha1"


def test_extension_resources_in_the_aggregated_document() -> None:
    document = discovery.aggregated(KINDS, False, _aggregation())
    group = next(g for g in document.items if g.metadata.name == "wardle.example.com")
    [version] = group.versions
    [flunders] = version.resources
    assert (flunders.resource, flunders.scope, flunders.singular_resource) == (
        "flunders",
        "Namespaced",
        "flunder",
    )
    assert flunders.response_kind == GroupVersionKind(
        group="wardle.example.com", version="v1alpha1", kind="Flunder"
    )
    assert flunders.short_names == ["fl"]
    assert [s.subresource for s in flunders.subresources or ()] == ["status"]
    unanswered = discovery.Aggregation(_aggregation().priorities, [WARDLE], {})
    listed = discovery.aggregated(KINDS, False, unanswered)
    assert "wardle.example.com" not in [g.metadata.name for g in listed.items]


# The legacy documents on the wire, in meta/v1's generated.proto numbers (k8s.io/apimachinery):
# APIVersions {1: versions, 2: serverAddressByClientCIDRs {1: clientCIDR, 2: serverAddress}};
# APIResource {1: name, 2: namespaced, 3: kind, 4: verbs (a Verbs message, items at 1),
# 5: shortNames, 6: singularName, 7: categories, 8: group, 9: version, 10: storageVersionHash},
# every value field written, empty or not, as gogo-protobuf writes them.


def _field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def _envelope(kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, b"v1") + _field(2, kind.encode())
    return protobuf.MAGIC + _field(1, type_meta) + _field(2, raw) + b"\x1a\x00\x22\x00"


def test_api_versions_in_protobuf() -> None:
    body = protobuf.encode_body(json_dict(discovery.api_versions("10.0.0.1:6443")))
    address = _field(1, b"0.0.0.0/0") + _field(2, b"10.0.0.1:6443")
    assert body == _envelope("APIVersions", _field(1, b"v1") + _field(2, address))
    assert protobuf.decode_body(body) == json_dict(discovery.api_versions("10.0.0.1:6443"))


def test_a_subresource_of_another_group_in_protobuf() -> None:
    """deployments/scale answers with autoscaling/v1 Scale: its group and version are set;
    the resource itself names neither (empty strings on the wire, left out of its JSON)."""
    listed = discovery.api_resource_list(
        [i for i in KINDS if i.plural == "deployments" and i.group == "apps"], "apps", "v1"
    )
    deployments, scale = listed.resources[0], listed.resources[-1]
    assert scale.name == "deployments/scale"
    verbs = b"".join(_field(1, verb.encode()) for verb in ("get", "patch", "update"))
    expected = (
        _field(1, b"deployments/scale")
        + b"\x10\x01"
        + _field(3, b"Scale")
        + _field(4, verbs)
        + _field(6, b"")
        + _field(8, b"autoscaling")
        + _field(9, b"v1")
        + _field(10, b"")
    )
    body = protobuf.encode_body(json_dict(listed))
    assert expected in body
    decoded = protobuf.decode_body(body)
    assert decoded == json_dict(listed)
    assert decoded["resources"][0]["storageVersionHash"] == deployments.storage_version_hash
    assert "group" not in decoded["resources"][0]


def test_api_resources_in_upstreams_json_order() -> None:
    """A subresource's group and version come before its kind, as upstream's Go struct has
    them."""
    listed = discovery.api_resource_list(KINDS, "apps", "v1")
    scale = next(r for r in listed.resources if r.name == "deployments/scale")
    assert codec.encode_json(scale) == (
        b'{"name":"deployments/scale","singularName":"","namespaced":true,'
        b'"group":"autoscaling","version":"v1","kind":"Scale","verbs":["get","patch","update"]}'
    )


def test_groups_are_typed_only_as_documents_of_their_own() -> None:
    """``/apis`` lists groups without kind or apiVersion; ``/apis/G`` is an APIGroup."""
    listed = json_dict(discovery.api_group_list(KINDS))
    assert listed["kind"] == "APIGroupList"
    assert all("kind" not in g and "apiVersion" not in g for g in listed["groups"])
    apps = discovery.api_group(KINDS, "apps")
    assert apps is not None
    assert codec.encode_json(apps).startswith(b'{"kind":"APIGroup","apiVersion":"v1","name":"apps"')
