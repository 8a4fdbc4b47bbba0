"""The cloud-controller-manager's ClusterRole grants what the documentation lists."""

from __future__ import annotations

from controlplane.cloud import rbac
from kube.api import codec, walk
from kube.api.kinds.rbac_v1 import ClusterRole


def grants(role: ClusterRole) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for rule in role.rules or ():
        for resource in rule.resources or ():
            found.setdefault(resource, set()).update(rule.verbs or ())
    return found


def test_the_documented_permissions_are_granted() -> None:
    documented = {
        "events": {"create", "patch", "update"},
        "nodes": {"*"},
        "nodes/status": {"patch"},
        "services": {"list", "patch", "update", "watch"},
        "serviceaccounts": {"create"},
        "persistentvolumes": {"get", "list", "update", "watch"},
        "endpoints": {"create", "get", "list", "watch", "update"},
    }
    role = rbac.cluster_role()
    for resource, verbs in documented.items():
        assert verbs <= grants(role)[resource], resource
    assert grants(role)["services/status"] == {"patch", "update"}
    assert grants(role)["leases"] == {"create", "get", "update"}


def test_it_is_a_valid_object_that_round_trips() -> None:
    role = rbac.cluster_role()
    assert not walk.validate(role)
    decoded = codec.decode_json(codec.encode_json(role), ClusterRole)
    assert decoded.unknown_fields == []
    assert decoded.obj.metadata.name == "system:cloud-controller-manager"
    assert decoded.obj.rules == role.rules
