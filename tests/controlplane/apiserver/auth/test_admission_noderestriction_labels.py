"""NodeRestriction's label rule, called directly: a kubelet may set on its Node only the labels
upstream's kubelet may set (``kube.api.kinds.core_v1.node.is_kubelet_label``) in the reserved
namespaces, so neither ``kubernetes.io/instance-type`` nor ``failure-domain.kubernetes.io/zone``,
which upstream does not allow."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controlplane.apiserver.auth.admission.noderestriction import node_restriction
from controlplane.apiserver.errors import ApiError
from controlplane.apiserver.registry.store import Admission, RequestContext, ResourceStore
from controlplane.apiserver.storage.watchcache import WatchCache
from controlplane.storage.sqlite import SQLiteStore
from kube.api.kinds.core_v1.node import (
    LABEL_INSTANCE_TYPE_STABLE,
    LABEL_TOPOLOGY_ZONE,
    Node,
)
from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import ObjectMeta
from kube.clock import FakeClock

KUBELET = RequestContext(user="system:node:n1", groups=("system:nodes", "system:authenticated"))
REFUSED = {"kubernetes.io/instance-type": "big", "failure-domain.kubernetes.io/zone": "z1"}
ALLOWED = {
    LABEL_INSTANCE_TYPE_STABLE: "big",
    LABEL_TOPOLOGY_ZONE: "z1",
    "pool.node.kubernetes.io/tier": "gold",
}


@pytest.fixture
async def admit(tmp_path: Path) -> AsyncIterator[Admission]:
    """NodeRestriction over a pods cache it never reads for Nodes."""
    store = await SQLiteStore.open(tmp_path / "db")
    try:
        yield node_restriction(WatchCache(ResourceStore(Pod.kind_info, store, FakeClock())))
    finally:
        await store.close()


def node(labels: dict[str, str]) -> Node:
    return Node(metadata=ObjectMeta(name="n1", labels=labels))


async def test_a_kubelet_may_not_register_with_labels_upstream_does_not_allow(
    admit: Admission,
) -> None:
    with pytest.raises(ApiError) as error:
        await admit("CREATE", Node.kind_info, node(REFUSED), None, KUBELET)
    assert error.value.code == 403
    assert error.value.message == (
        'nodes "n1" is forbidden: node "n1" is not allowed to set the following labels: '
        "failure-domain.kubernetes.io/zone, kubernetes.io/instance-type"
    )


async def test_a_kubelet_may_not_add_labels_upstream_does_not_allow(admit: Admission) -> None:
    with pytest.raises(ApiError) as error:
        await admit("UPDATE", Node.kind_info, node({**ALLOWED, **REFUSED}), node(ALLOWED), KUBELET)
    assert error.value.code == 403
    assert error.value.message == (
        'nodes "n1" is forbidden: is not allowed to modify labels: '
        "failure-domain.kubernetes.io/zone, kubernetes.io/instance-type"
    )


async def test_a_kubelet_may_set_its_own_labels(admit: Admission) -> None:
    await admit("CREATE", Node.kind_info, node(ALLOWED), None, KUBELET)
    moved = {**ALLOWED, LABEL_INSTANCE_TYPE_STABLE: "small", LABEL_TOPOLOGY_ZONE: "z2"}
    await admit("UPDATE", Node.kind_info, node(moved), node(ALLOWED), KUBELET)
