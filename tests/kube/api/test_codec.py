"""Decoding and encoding: unknown fields by path, clear errors, YAML as Kubernetes reads it."""

from __future__ import annotations

import msgspec
import pytest

import kube.api.kinds  # noqa: F401  (registers every kind)
from kube.api import codec
from kube.api.kinds.coordination_v1 import Lease
from kube.api.kinds.core_v1.pod import Pod
from kube.api.scheme import SCHEME, KindInfo


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
