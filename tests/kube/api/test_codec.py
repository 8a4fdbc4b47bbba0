"""Decoding and encoding: unknown fields by path, clear errors, YAML as Kubernetes reads it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest

import kube.api.kinds  # noqa: F401  (registers every kind)
from kube.api import codec
from kube.api.kinds.admissionregistration_v1 import ValidatingAdmissionPolicy
from kube.api.kinds.coordination_v1 import Lease
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import PersistentVolume
from kube.api.meta_v1 import Resource
from kube.api.scheme import SCHEME, KindInfo
from kube.api.struct import Struct, proto_field


def test_known_fields_take_the_fast_path() -> None:
    decoded = codec.decode_json(
        b'{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"a"},'
        b'"spec":{"holderIdentity":"me","leaseDurationSeconds":15}}',
        Lease,
    )
    assert decoded.unknown_fields == []
    assert decoded.obj.spec is not None and decoded.obj.spec.holder_identity == "me"


def test_every_unknown_field_is_reported_by_path() -> None:
    body = b"""{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "colour": "red"},
      "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "imagee": "y",
      "ports": [{"containerPort": 80, "hostport": 1}]}], "nodename": "n"}}"""
    decoded = codec.decode_json(body, Pod)
    assert decoded.unknown_fields == [
        "metadata.colour",
        "spec.containers[1].imagee",
        "spec.containers[1].ports[0].hostport",
        "spec.nodename",
    ]
    assert decoded.obj.spec is not None and decoded.obj.spec.containers is not None
    assert decoded.obj.spec.containers[1].name == "b"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"{", "malformed JSON", id="truncated"),
        pytest.param(b"[]", "<root>: expected object, got array", id="not-an-object"),
        pytest.param(
            b'{"metadata": {"name": 5}}', "metadata.name: expected str, got int", id="wrong-type"
        ),
        pytest.param(
            b'{"spec": {"containers": [{"name": "a", "imagee": 1, "ports": "x"}]}}',
            "spec.containers[0].ports: expected array, got str",
            id="wrong-type-beside-unknown",
        ),
        pytest.param(b"[" * 100_000, "", id="deep-nesting"),
    ],
)
def test_bad_bodies_raise_decode_errors(body: bytes, message: str) -> None:
    with pytest.raises(codec.DecodeError) as raised:
        codec.decode_json(body, Pod)
    assert message in str(raised.value)


def test_yaml_keeps_timestamps_and_lists_unfold() -> None:
    objects = codec.load_manifests(
        """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: dates}
  data: {when: 2024-01-01, at: 2024-01-01T10:00:00Z}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: l, namespace: default}
"""
    )
    assert [d.obj.kind for d in objects] == ["ConfigMap", "Lease"]
    assert codec.to_builtins(objects[0].obj)["data"] == {
        "when": "2024-01-01",
        "at": "2024-01-01T10:00:00Z",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("a: [", "malformed YAML", id="malformed"),
        pytest.param("- 1", "an object must be a mapping", id="not-a-mapping"),
        pytest.param("kind: Pod", "apiVersion: Required value", id="no-api-version"),
        pytest.param("apiVersion: v1\nkind: Podd", 'no kind "Podd"', id="unknown-kind"),
    ],
)
def test_bad_manifests_raise_decode_errors(text: str, message: str) -> None:
    with pytest.raises(codec.DecodeError, match=message):
        codec.load_manifests(text)


def test_encoding_leaves_unset_fields_out() -> None:
    lease = Lease().typed()
    lease.metadata.name = "x"
    assert codec.encode_json(lease) == (
        b'{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"x"}}'
    )


@pytest.mark.parametrize("info", list(SCHEME), ids=[f"{i.api_version}/{i.kind}" for i in SCHEME])
def test_objects_encode_in_kubernetes_field_order(info: KindInfo) -> None:
    """kind, apiVersion and metadata come first, as upstream's JSON has them (its Go structs'
    order: TypeMeta, then ObjectMeta)."""
    names = [f.encode_name for f in msgspec.structs.fields(info.cls)]
    assert names[:3] == ["kind", "apiVersion", "metadata"]


# Structs upstream inlines into another (Go's ``json:",inline"``), as upstream's Go encoder writes
# them: the embedding struct's fields declared before the inlined one come first
# (k8s.io/api admissionregistration/v1 and core/v1 types.go).
INLINED_IN_UPSTREAM_ORDER = [
    pytest.param(
        ValidatingAdmissionPolicy,
        b'{"kind":"ValidatingAdmissionPolicy","apiVersion":"admissionregistration.k8s.io/v1",'
        b'"metadata":{"name":"p"},"spec":{"matchConstraints":{"resourceRules":[{'
        b'"resourceNames":["web"],"operations":["CREATE"],"apiGroups":["apps"],'
        b'"apiVersions":["v1"],"resources":["deployments"],"scope":"*"}],'
        b'"excludeResourceRules":[{"resourceNames":["db"],"operations":["UPDATE"],'
        b'"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"]}]}}}',
        id="NamedRuleWithOperations",
    ),
    pytest.param(
        Pod,
        b'{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},"spec":{"volumes":['
        b'{"name":"data","emptyDir":{}},{"name":"conf","configMap":{"name":"c"}}],'
        b'"containers":[{"name":"a","image":"x"}]}}',
        id="Volume",
    ),
    pytest.param(
        PersistentVolume,
        b'{"kind":"PersistentVolume","apiVersion":"v1","metadata":{"name":"v"},"spec":{'
        b'"capacity":{"storage":"1Gi"},"hostPath":{"path":"/data"},'
        b'"accessModes":["ReadWriteOnce"],"persistentVolumeReclaimPolicy":"Retain"}}',
        id="PersistentVolumeSpec",
    ),
]


@pytest.mark.parametrize(("cls", "upstream"), INLINED_IN_UPSTREAM_ORDER)
def test_inlined_structs_encode_in_upstream_field_order(
    cls: type[Resource], upstream: bytes
) -> None:
    reordered = json.dumps(_reversed_keys(json.loads(upstream))).encode()
    assert reordered != upstream
    assert codec.encode_json(codec.decode_json(reordered, cls).obj) == upstream


def _reversed_keys(value: Any) -> Any:
    """The same JSON with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {key: _reversed_keys(value[key]) for key in reversed(value)}
    if isinstance(value, list):
        return [_reversed_keys(item) for item in value]
    return value


def _structs(cls: type[Struct]) -> Iterator[type[Struct]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _structs(sub)


def _wire_position(cls: type[Struct], attr: str, number: int) -> int:
    """Where a field sits in upstream's message: its own number, or the number at which the
    message it is inlined in sits in this one."""
    for embedded in cls.PROTO_EMBEDDED:
        if attr in embedded.fields:
            outer = [e for e in cls.PROTO_EMBEDDED if e.message == embedded.within]
            return outer[0].number if outer else embedded.number
    return number


EMBEDDERS = sorted({c for c in _structs(Struct) if c.PROTO_EMBEDDED}, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", EMBEDDERS, ids=[c.__name__ for c in EMBEDDERS])
def test_inlined_fields_sit_where_upstream_embeds_them(cls: type[Struct]) -> None:
    """Upstream declares each struct that inlines another in field-number order, the inlined
    message at its number: so the JSON order of the fields follows those numbers."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    positions = []
    for f in info.fields:
        declared = proto_field(f.type.extra) if isinstance(f.type, mi.Metadata) else None
        if declared is not None:
            positions.append(_wire_position(cls, f.name, declared.number))
    assert positions and positions == sorted(positions)
