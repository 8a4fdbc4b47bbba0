"""Object keys and owner references."""

from __future__ import annotations

import pytest

from kube.api import owners
from kube.api.keys import key_of, object_key, split_key
from kube.api.kinds.coordination_v1 import Lease
from kube.api.meta_v1 import ObjectMeta


@pytest.mark.parametrize(
    ("namespace", "name", "key"),
    [("default", "web", "default/web"), (None, "node1", "node1"), ("", "ns", "ns")],
    ids=["namespaced", "cluster-scoped", "empty-namespace"],
)
def test_keys_round_trip(namespace: str | None, name: str, key: str) -> None:
    assert key_of(ObjectMeta(name=name, namespace=namespace)) == key
    assert split_key(key) == (namespace or "", name)


@pytest.mark.parametrize("key", ["/a", "a/", "a/b/c"], ids=["no-namespace", "no-name", "extra"])
def test_malformed_keys_are_rejected(key: str) -> None:
    with pytest.raises(ValueError, match="unexpected key format"):
        split_key(key)


def _lease(name: str, uid: str) -> Lease:
    return Lease(metadata=ObjectMeta(name=name, namespace="default", uid=uid))


def test_controller_reference_lifecycle() -> None:
    owner, other, obj = _lease("owner", "u1"), _lease("other", "u2"), _lease("obj", "u3")
    assert object_key(obj) == "default/obj"
    assert owners.controller_of(obj) is None
    owners.set_owner(obj, owners.controller_ref(owner))
    ref = owners.controller_of(obj)
    assert ref is not None
    assert (ref.api_version, ref.kind, ref.name, ref.block_owner_deletion) == (
        "coordination.k8s.io/v1",
        "Lease",
        "owner",
        True,
    )
    assert owners.is_controlled_by(obj, owner) and owners.is_owned_by(obj, owner)
    assert not owners.is_owned_by(obj, other)
    owners.set_owner(obj, owners.controller_ref(owner, block_owner_deletion=False))
    assert len(obj.metadata.owner_references or []) == 1, "same uid replaces"
    assert owners.remove_owner(obj, "u1")
    assert not owners.remove_owner(obj, "u1")
    assert obj.metadata.owner_references is None
