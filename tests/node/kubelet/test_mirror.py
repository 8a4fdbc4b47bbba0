"""Mirror pods against a real API server: static pods read from manifest files, mirrored."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import MIRROR_POD_ANNOTATION, Container, Pod, PodSpec
from kube.api.meta_v1 import ObjectMeta, OwnerReference
from kube.client.errors import ApiError
from kube.client.rest import Client
from node.kubelet.mirror import (
    MirrorClient,
    is_mirror_of,
    is_mirror_pod,
    mirror_hash,
    mirror_pod,
    static_hash,
)
from node.kubelet.staticpods import (
    CONFIG_HASH_ANNOTATION,
    CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    is_static_pod,
    load_manifest,
)


class Manifests:
    """Writes manifests for one node and reads them back as its static pods."""

    def __init__(self, directory: Path, node_name: str, namespace: str) -> None:
        self.directory, self.node_name, self.namespace = directory, node_name, namespace

    def static(self, name: str, image: str = "busybox") -> Pod:
        path = self.directory / f"{name}.json"
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"containers": [{"name": "c", "image": image}]},
        }
        path.write_text(json.dumps(manifest))
        pod = load_manifest(path, self.node_name).obj
        assert pod.metadata.annotations is not None
        pod.metadata.annotations[CONFIG_SEEN_ANNOTATION] = "2026-01-01T00:00:00.000000Z"
        return pod


@pytest.fixture
async def node(client: Client) -> Node:
    return await client.create(Node(metadata=ObjectMeta(name=f"node-{uuid.uuid4().hex[:8]}")))


@pytest.fixture
def node_name(node: Node) -> str:
    assert node.metadata.name
    return node.metadata.name


@pytest.fixture
def manifests(tmp_path: Path, node_name: str, namespace: str) -> Manifests:
    return Manifests(tmp_path, node_name, namespace)


@pytest.fixture
def mirrors(client: Client, node_name: str) -> MirrorClient:
    return MirrorClient(client, node_name)


async def pods_in(client: Client, namespace: str) -> dict[str, Pod]:
    listed = await client.list(Pod, namespace)
    return {pod.metadata.name or "": pod for pod in listed.items}


def test_helpers_tell_static_and_mirror_pods_apart(manifests: Manifests) -> None:
    static = manifests.static("web")
    mirror = mirror_pod(static, manifests.node_name, "node-uid")
    plain = Pod(metadata=ObjectMeta(name="p"), spec=PodSpec(containers=[Container(name="c")]))
    assert is_static_pod(static) and not is_mirror_pod(static)
    assert is_mirror_pod(mirror) and is_static_pod(mirror)
    assert not is_static_pod(plain) and not is_mirror_pod(plain)
    assert static_hash(static) == static.metadata.uid == mirror_hash(mirror)
    assert mirror_hash(static) is None and static_hash(plain) is None
    assert is_mirror_of(mirror, static)
    assert not is_mirror_of(mirror, manifests.static("web", image="busybox:1.35"))
    with pytest.raises(ValueError, match=r"no kubernetes\.io/config\.hash annotation"):
        mirror_pod(plain, manifests.node_name, "node-uid")


async def test_mirror_is_created_with_annotation_and_owner(
    client: Client, manifests: Manifests, mirrors: MirrorClient, node: Node
) -> None:
    static = manifests.static("web")
    assert await mirrors.create(static)

    created = await client.get(Pod, static.metadata.name or "", manifests.namespace)
    meta = created.metadata
    assert meta.name == f"web-{manifests.node_name}"
    assert meta.uid != static.metadata.uid
    assert meta.annotations == {
        CONFIG_HASH_ANNOTATION: static.metadata.uid,
        CONFIG_SOURCE_ANNOTATION: "file",
        CONFIG_SEEN_ANNOTATION: "2026-01-01T00:00:00.000000Z",
        MIRROR_POD_ANNOTATION: static.metadata.uid,
    }
    assert meta.owner_references == [
        OwnerReference(
            api_version="v1",
            kind="Node",
            name=manifests.node_name,
            uid=node.metadata.uid,
            controller=True,
        )
    ]
    assert created.spec is not None and created.spec.node_name == manifests.node_name
    assert created.status is not None and created.status.phase == "Pending"
    # The source's copy is left as it was.
    assert static.metadata.owner_references is None
    assert static.metadata.annotations is not None
    assert MIRROR_POD_ANNOTATION not in static.metadata.annotations

    assert not await mirrors.create(static)  # AlreadyExists is tolerated


async def test_delete_honours_the_uid_precondition(
    client: Client, manifests: Manifests, mirrors: MirrorClient
) -> None:
    static = manifests.static("web")
    await mirrors.create(static)
    name = static.metadata.name or ""
    assert not await mirrors.delete(manifests.namespace, name, uid="some-other-uid")
    uid = (await client.get(Pod, name, manifests.namespace)).metadata.uid
    assert await mirrors.delete(manifests.namespace, name, uid=uid)
    assert await pods_in(client, manifests.namespace) == {}  # grace 0: gone at once
    assert not await mirrors.delete(manifests.namespace, name)  # NotFound is tolerated


async def test_reconcile_creates_replaces_and_deletes(
    client: Client, manifests: Manifests, mirrors: MirrorClient
) -> None:
    web, db = manifests.static("web"), manifests.static("db")
    web_name, db_name = web.metadata.name or "", db.metadata.name or ""
    await mirrors.reconcile([web, db], [])
    first = await pods_in(client, manifests.namespace)
    assert sorted(first) == [db_name, web_name]

    # Unchanged: nothing happens.
    await mirrors.reconcile([web, db], list(first.values()))
    assert await pods_in(client, manifests.namespace) == first

    # The web manifest changes: its mirror is replaced, db's stays.
    new_web = manifests.static("web", image="busybox:1.35")
    assert static_hash(new_web) != static_hash(web)
    await mirrors.reconcile([new_web, db], list(first.values()))
    second = await pods_in(client, manifests.namespace)
    assert mirror_hash(second[web_name]) == static_hash(new_web)
    assert second[web_name].metadata.uid != first[web_name].metadata.uid
    assert second[db_name] == first[db_name]

    # The db manifest goes: its mirror is an orphan.
    await mirrors.reconcile([new_web], list(second.values()))
    assert sorted(await pods_in(client, manifests.namespace)) == [web_name]


async def test_reconcile_replaces_a_mirror_being_deleted(
    client: Client, manifests: Manifests, mirrors: MirrorClient
) -> None:
    static = manifests.static("web")
    await mirrors.create(static)
    name = static.metadata.name or ""
    await client.delete(Pod, name, manifests.namespace)  # graceful: it is bound to a node
    deleting = await client.get(Pod, name, manifests.namespace)
    assert deleting.metadata.deletion_timestamp is not None

    await mirrors.reconcile([static], [deleting])
    replaced = await client.get(Pod, name, manifests.namespace)
    assert replaced.metadata.deletion_timestamp is None
    assert replaced.metadata.uid != deleting.metadata.uid
    assert is_mirror_of(replaced, static)


async def test_reconcile_leaves_other_pods_alone(
    client: Client, manifests: Manifests, mirrors: MirrorClient, namespace: str
) -> None:
    own = Pod(
        metadata=ObjectMeta(name="api-pod", namespace=namespace),
        spec=PodSpec(node_name=manifests.node_name, containers=[Container(name="c", image="x")]),
    )
    elsewhere = mirror_pod(manifests.static("other"), "another-node", "uid")
    assert elsewhere.spec is not None
    elsewhere.spec.node_name = "another-node"
    for pod in (own, elsewhere):
        await client.create(pod)
    await mirrors.reconcile([], list((await pods_in(client, namespace)).values()))
    assert sorted(await pods_in(client, namespace)) == ["api-pod", f"other-{manifests.node_name}"]


async def test_no_mirror_while_the_node_is_deleted(
    client: Client, manifests: Manifests, mirrors: MirrorClient, node: Node
) -> None:
    name = manifests.node_name
    node.metadata.finalizers = ["example.com/hold"]
    await client.update(node)
    await client.delete(Node, name)
    static = manifests.static("web")
    try:
        assert not await mirrors.create(static)
        assert await pods_in(client, manifests.namespace) == {}
    finally:
        await client.patch(Node, name, None, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiError) as error:
        await mirrors.create(static)
    assert error.value.not_found
