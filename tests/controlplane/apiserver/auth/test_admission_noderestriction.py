"""NodeRestriction through the API, with kubelet client certificates (CN system:node:<name>,
O system:nodes) on a server authorizing with Node,RBAC: a kubelet changes only its own Node,
its own CSINode and the pods bound to it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kube.api.kinds.authentication_v1 import (
    BoundObjectReference,
    TokenRequest,
    TokenRequestSpec,
)
from kube.api.kinds.core_v1.cluster import ServiceAccount
from kube.api.kinds.core_v1.node import Node, NodeSpec, Taint
from kube.api.kinds.core_v1.pod import MIRROR_POD_ANNOTATION, Container, Pod, PodStatus
from kube.api.kinds.policy_v1 import Eviction
from kube.api.kinds.storage_v1 import CSINode, CSINodeSpec
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests import builders
from tests.controlplane.apiserver.admission_servers import node_kubeconfig, serve
from tests.servers import ServerProcess

MODES = ["Node,RBAC", "AlwaysAllow"]
"""With Node,RBAC the Node authorizer refuses most writes first; with AlwaysAllow only
NodeRestriction stands between a kubelet and other nodes' objects."""


@pytest.fixture(
    scope="module",
    params=[pytest.param(("sqlite", m), id=f"sqlite-{m}") for m in MODES]
    + [pytest.param(("etcd", m), id=f"etcd-{m}", marks=pytest.mark.etcd) for m in MODES],
)
def apiserver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    backend, mode = request.param
    yield from serve(
        backend,
        tmp_path_factory,
        "--authorization-mode",
        mode,
        "--enable-admission-plugins",
        "NodeRestriction",
        "--disable-admission-plugins",
        "ServiceAccount",
    )


@pytest.fixture
def authorizing(request: pytest.FixtureRequest) -> bool:
    """Whether the Node authorizer runs (its 403s come before admission's)."""
    return "Node" in str(request.node.callspec.params["apiserver"][1])


@pytest.fixture
async def kubelet(apiserver: ServerProcess, tmp_path: Path) -> AsyncIterator[Client]:
    """The kubelet of node ``n1``."""
    path = node_kubeconfig(apiserver, "n1", tmp_path)
    async with Client.from_kubeconfig(path, user_agent="kubelet") as c:
        yield c


def node(name: str, **labels: str) -> Node:
    return Node(metadata=ObjectMeta(name=name, labels=labels or None))


def pod(namespace: str, name: str, node_name: str, mirror: bool = True, **spec: Any) -> Pod:
    return builders.pod(
        name,
        namespace,
        annotations={MIRROR_POD_ANNOTATION: "hash"} if mirror else None,
        node_name=node_name,
        containers=[Container(name="app", image="app")],
        **spec,
    )


async def refused(call: object, message: str) -> None:
    with pytest.raises(ApiError) as error:
        await call  # type: ignore[misc]
    assert error.value.code == 403, error.value.message
    assert message in error.value.message


async def eventually_allowed(call: Callable[[], Awaitable[object]], within: float = 10.0) -> None:
    """Repeat a call its caller may make once the authorizer has caught up, until it may."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            await call()
            return
        except ApiError as error:
            if error.code != 403 or loop.time() > deadline:
                raise
        await asyncio.sleep(0.05)


async def own_node(client: Client, kubelet: Client) -> Node:
    """Node n1, registered by its kubelet (once per server)."""
    try:
        return await kubelet.get(Node, "n1")
    except ApiError as error:
        if not error.not_found:
            raise
    return await kubelet.create(node("n1", **{"kubernetes.io/hostname": "n1"}))


async def test_a_kubelet_modifies_only_its_own_node(client: Client, kubelet: Client) -> None:
    mine = await own_node(client, kubelet)
    await refused(
        kubelet.create(node("n2")),
        'nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"',
    )
    if (await client.list(Node)).items.__len__() < 2:
        await client.create(node("n2"))
    other = await client.get(Node, "n2")
    other.metadata.labels = {"stolen": "yes"}
    # Writes to an existing Node of another kubelet: the Node authorizer answers first.
    await refused(kubelet.update(other), 'nodes "n2" is forbidden')
    await refused(kubelet.delete(Node, "n2"), 'nodes "n2" is forbidden')

    mine.metadata.labels = {**(mine.metadata.labels or {}), "example.com/rack": "r1"}
    mine = await kubelet.update(mine)
    tainted = Node(
        metadata=mine.metadata,
        spec=NodeSpec(taints=[Taint(key="dedicated", value="x", effect="NoSchedule")]),
    )
    await refused(kubelet.update(tainted), 'node "n1" is not allowed to modify taints')
    mine.metadata.labels = {
        **(mine.metadata.labels or {}),
        "node-restriction.kubernetes.io/trusted": "yes",
        "node-role.kubernetes.io/control-plane": "",
    }
    await refused(
        kubelet.update(mine),
        "is not allowed to modify labels: node-restriction.kubernetes.io/trusted, "
        "node-role.kubernetes.io/control-plane",
    )


async def test_a_kubelet_may_not_register_with_restricted_labels(
    client: Client, kubelet: Client, apiserver: ServerProcess, tmp_path: Path
) -> None:
    path = node_kubeconfig(apiserver, "n3", tmp_path)
    async with Client.from_kubeconfig(path) as n3:
        await refused(
            n3.create(node("n3", **{"node-restriction.kubernetes.io/pool": "gold"})),
            'node "n3" is not allowed to set the following labels: '
            "node-restriction.kubernetes.io/pool",
        )
        created = await n3.create(node("n3", **{"node.kubernetes.io/instance-type": "small"}))
        assert created.metadata.labels == {"node.kubernetes.io/instance-type": "small"}
        await n3.delete(Node, "n3")


async def test_a_kubelet_creates_only_its_own_mirror_pods(
    client: Client, kubelet: Client, namespace: str
) -> None:
    await own_node(client, kubelet)
    await refused(
        kubelet.create(pod(namespace, "plain", "n1", mirror=False)),
        'pod does not have "kubernetes.io/config.mirror" annotation, node "n1" can only create '
        "mirror pods",
    )
    await refused(
        kubelet.create(pod(namespace, "elsewhere", "n2")),
        'node "n1" can only create pods with spec.nodeName set to itself',
    )
    await refused(
        kubelet.create(pod(namespace, "sa", "n1", service_account_name="default")),
        'node "n1" can not create pods that reference a service account',
    )
    await refused(
        kubelet.create(pod(namespace, "secretive", "n1", image_pull_secrets=[{"name": "s"}])),
        'node "n1" can not create pods that reference secrets',
    )
    mirror = await kubelet.create(pod(namespace, "static-web-n1", "n1"))
    assert mirror.spec is not None and mirror.spec.node_name == "n1"
    await kubelet.delete(Pod, "static-web-n1", namespace)


async def test_a_kubelet_touches_only_pods_bound_to_it(
    client: Client, kubelet: Client, namespace: str, authorizing: bool
) -> None:
    await own_node(client, kubelet)
    await client.create(ServiceAccount(metadata=ObjectMeta(name="default", namespace=namespace)))
    other = await client.create(pod(namespace, "other", "n2", mirror=False))
    ours = await client.create(pod(namespace, "ours", "n1", mirror=False))

    def said(message: str) -> str:
        return "is forbidden: User" if authorizing else message

    def seen(target: Pod) -> Pod:
        target.status = target.status or PodStatus()
        target.status.message = "seen by n1"
        return target

    def token_for(target: Pod) -> Awaitable[dict[str, Any]]:
        bound = BoundObjectReference(
            kind="Pod", api_version="v1", name=target.metadata.name, uid=target.metadata.uid
        )
        request = TokenRequest(
            metadata=ObjectMeta(name="default", namespace=namespace),
            spec=TokenRequestSpec(bound_object_ref=bound),
        )
        return kubelet.create_subresource(ServiceAccount, "default", namespace, "token", request)

    await kubelet.update_status(seen(await client.get(Pod, "ours", namespace)))
    # The Node authorizer lets n1 ask for the account's tokens once its graph, which follows
    # pods through a watch, has a pod of n1 using the account: upstream's tests poll too.
    await eventually_allowed(lambda: token_for(ours))
    await refused(
        kubelet.update_status(seen(await client.get(Pod, "other", namespace))),
        said('node "n1" can only update pod status for pods with spec.nodeName set to itself'),
    )
    await refused(
        token_for(other), "node requested token bound to a pod scheduled on a different node"
    )

    eviction = Eviction(metadata=ObjectMeta(name="other", namespace=namespace))
    await refused(
        kubelet.create_subresource(Pod, "other", namespace, "eviction", eviction),
        said("node n1 can only evict pods with spec.nodeName set to itself"),
    )
    await refused(
        kubelet.delete(Pod, "other", namespace),
        said('node "n1" can only delete pods with spec.nodeName set to itself'),
    )
    ours_now = await client.get(Pod, "ours", namespace)
    ours_now.metadata.labels = {"changed": "by-n1"}
    await refused(
        kubelet.update(ours_now),
        said('unexpected operation "UPDATE", node "n1" can only create and delete mirror pods'),
    )
    await kubelet.delete(Pod, "ours", namespace)


def csinode(name: str) -> CSINode:
    return CSINode(metadata=ObjectMeta(name=name), spec=CSINodeSpec(drivers=[]))


async def test_a_kubelet_writes_only_its_own_csinode(
    client: Client, kubelet: Client, authorizing: bool
) -> None:
    await own_node(client, kubelet)
    forbidden = "can only access CSINode with the same name as the requesting node"
    # A create names no object to the authorizer: NodeRestriction refuses it.
    await refused(
        kubelet.create(csinode("n2")),
        f'csinodes.storage.k8s.io "n2" is forbidden: {forbidden}',
    )
    mine = await kubelet.create(csinode("n1"))
    mine.metadata.labels = {"example.com/rack": "r1"}
    mine = await kubelet.update(mine)
    assert (await kubelet.get(CSINode, "n1")).metadata.labels == {"example.com/rack": "r1"}

    with contextlib.suppress(ApiError):
        await client.create(csinode("n2"))
    other = await client.get(CSINode, "n2")
    other.metadata.labels = {"stolen": "yes"}
    # Another node's: the Node authorizer refuses first when it runs, NodeRestriction otherwise.
    said = 'csinodes.storage.k8s.io "n2" is forbidden'
    await refused(kubelet.update(other), said if authorizing else forbidden)
    await refused(kubelet.delete(CSINode, "n2"), said if authorizing else forbidden)
    if authorizing:
        await refused(kubelet.get(CSINode, "n2"), said)
        with pytest.raises(ApiError) as listing:
            await kubelet.list(CSINode)
        assert listing.value.code == 403
    await kubelet.delete(CSINode, "n1")
    await client.delete(CSINode, "n2")
