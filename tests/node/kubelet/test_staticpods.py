"""The file pod source: manifests in a temporary directory (or one file), a fake clock."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kube.api import walk
from kube.api.kinds.core_v1.pod import Pod, PodSpec, Toleration
from kube.api.meta_v1 import ObjectMeta
from kube.clock import FakeClock
from node.kubelet.staticpods import (
    CONFIG_HASH_ANNOTATION,
    CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    MAX_MANIFEST_BYTES,
    ManifestError,
    StaticPodSource,
    apply_defaults,
    load_manifest,
)

NODE = "node-a"

WEB_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: web
    image: busybox
    command: [httpd, -f]
"""


def pod_json(name: str, image: str = "busybox", **metadata: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, **metadata},
            "spec": {"containers": [{"name": "c", "image": image}]},
        }
    )


def names(pods: list[Pod]) -> list[str]:
    return [f"{p.metadata.namespace}/{p.metadata.name}" for p in pods]


def uid(pods: list[Pod], name: str) -> str:
    (found,) = (p for p in pods if p.metadata.name == name)
    assert found.metadata.uid
    return found.metadata.uid


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    path = tmp_path / "manifests"
    path.mkdir()
    return path


class Watcher:
    """Runs a source and collects what it hands to ``on_change``."""

    def __init__(self, source: StaticPodSource, clock: FakeClock) -> None:
        self.source, self.clock = source, clock
        self.changes: asyncio.Queue[list[Pod]] = asyncio.Queue()

    def on_change(self, pods: list[Pod]) -> None:
        for pod in pods:
            pod.status = None  # what a handler does to the pods never looks like a change
        self.changes.put_nowait(pods)

    async def next(self) -> list[Pod]:
        return await asyncio.wait_for(self.changes.get(), 5)

    async def poll(self) -> None:
        """Let one poll period pass once the source sleeps, and the poll it ends run."""
        await self.until_sleeping()
        await self.clock.advance(self.source.period)
        await self.until_sleeping()

    async def until_sleeping(self) -> None:
        for _ in range(500):
            if self.clock.sleepers:
                return
            await asyncio.sleep(0)
        raise AssertionError("the source never slept")


@pytest.fixture
async def watcher(manifests: Path) -> AsyncIterator[Watcher]:
    clock = FakeClock()
    watcher = Watcher(StaticPodSource(manifests, NODE, clock), clock)
    task = asyncio.create_task(watcher.source.run(watcher.on_change))
    yield watcher
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_manifest_becomes_this_nodes_static_pod(manifests: Path) -> None:
    (manifests / "web.yaml").write_text(WEB_YAML)
    (pod,) = StaticPodSource(manifests, NODE, FakeClock()).snapshot()
    meta = pod.metadata
    assert (meta.namespace, meta.name) == ("default", "web-node-a")
    assert meta.uid is not None and len(meta.uid) == 32
    assert meta.self_link is None
    assert meta.labels == {"app": "web"}
    assert meta.annotations == {
        CONFIG_HASH_ANNOTATION: meta.uid,
        CONFIG_SOURCE_ANNOTATION: "file",
        CONFIG_SEEN_ANNOTATION: "2026-01-01T00:00:00.000000Z",
    }
    assert pod.spec is not None and pod.spec.node_name == NODE
    assert pod.spec.tolerations == [Toleration(operator="Exists", effect="NoExecute")]
    # The API's defaults were applied, and the result is what the API would accept.
    assert pod.spec.restart_policy == "Always"
    assert [c.image_pull_policy for c in pod.spec.containers or ()] == ["Always"]
    assert not walk.validate(pod)


def test_node_name_is_lowercased_in_the_pod_name() -> None:
    pod = Pod(metadata=ObjectMeta(name="web"), spec=PodSpec(containers=[]))
    apply_defaults(pod, "/etc/kubernetes/manifests/web.yaml", "Node-A")
    assert pod.metadata.name == "web-node-a"
    assert pod.spec is not None and pod.spec.node_name == "Node-A"


def test_namespace_and_tolerations_are_kept(manifests: Path) -> None:
    (manifests / "p.json").write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "kube-system"},
                "spec": {
                    "containers": [{"name": "c", "image": "busybox"}],
                    "tolerations": [
                        {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
                        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5},
                    ],
                },
            }
        )
    )
    (pod,) = StaticPodSource(manifests, NODE, FakeClock()).snapshot()
    assert pod.metadata.namespace == "kube-system"
    assert pod.spec is not None
    assert pod.spec.tolerations == [
        Toleration(key="dedicated", operator="Exists", effect="NoSchedule"),
        Toleration(operator="Exists", effect="NoExecute"),
    ]


def test_uid_depends_on_content_node_and_path(manifests: Path) -> None:
    (manifests / "a.yaml").write_text(WEB_YAML)
    (manifests / "b.json").write_text(pod_json("web2"))
    first = load_manifest(manifests / "a.yaml", NODE).obj.metadata.uid
    # Same meaning, other spelling (JSON, comments): same pod, same UID.
    (manifests / "a.yaml").write_text("# a comment\n" + WEB_YAML)
    assert load_manifest(manifests / "a.yaml", NODE).obj.metadata.uid == first
    assert load_manifest(manifests / "a.yaml", "node-b").obj.metadata.uid != first
    (manifests / "c.yaml").write_text(WEB_YAML)
    assert load_manifest(manifests / "c.yaml", NODE).obj.metadata.uid != first
    (manifests / "a.yaml").write_text(WEB_YAML.replace("busybox", "busybox:1.35"))
    assert load_manifest(manifests / "a.yaml", NODE).obj.metadata.uid != first


def test_uid_from_the_manifest_is_kept(manifests: Path) -> None:
    (manifests / "p.json").write_text(pod_json("p", uid="fixed-uid"))
    pod = load_manifest(manifests / "p.json", NODE).obj
    assert pod.metadata.uid == "fixed-uid"
    assert pod.metadata.annotations is not None
    assert pod.metadata.annotations[CONFIG_HASH_ANNOTATION] == "fixed-uid"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("", "exactly one object, found 0", id="empty"),
        pytest.param("a: [", "malformed YAML", id="malformed"),
        pytest.param(WEB_YAML + "---\n" + WEB_YAML, "found 2", id="two-documents"),
        pytest.param(
            '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}',
            "must hold a Pod, not a ConfigMap",
            id="not-a-pod",
        ),
        pytest.param('{"kind": "Pod"}', "apiVersion: Required value", id="no-api-version"),
        pytest.param(
            '{"apiVersion": "v1", "kind": "Pod", "spec": {"containers": []}}',
            "metadata.name: Required value",
            id="no-name",
        ),
        pytest.param(
            pod_json("p", image=""), "spec.containers[0].image: Required value", id="invalid"
        ),
        pytest.param(pod_json("Bad_Name"), "metadata.name: Invalid value", id="bad-name"),
        pytest.param(
            '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 5}}',
            "metadata.name: expected str",
            id="wrong-type",
        ),
    ],
)
def test_invalid_manifests_are_refused(manifests: Path, content: str, message: str) -> None:
    path = manifests / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ManifestError, match=re.escape(message)):
        load_manifest(path, NODE)


def test_oversized_manifest_is_refused(manifests: Path) -> None:
    path = manifests / "big.yaml"
    path.write_text(WEB_YAML + "#" * MAX_MANIFEST_BYTES)
    with pytest.raises(ManifestError, match="larger than"):
        load_manifest(path, NODE)


def test_invalid_files_are_skipped_and_reported_once(
    manifests: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (manifests / "a-bad.yaml").write_text("kind: Pod\n")
    (manifests / "b.yaml").write_text(WEB_YAML)
    (manifests / "c-unknown.json").write_text(
        pod_json("other").replace('"image"', '"imagee": "x", "image"')
    )
    source = StaticPodSource(manifests, NODE, FakeClock())
    with caplog.at_level(logging.WARNING, logger="kubelab.kubelet.staticpods"):
        assert names(source.snapshot()) == ["default/web-node-a", "default/other-node-a"]
        assert names(source.snapshot()) == ["default/web-node-a", "default/other-node-a"]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "a-bad.yaml: skipping manifest: apiVersion: Required value" in messages[0]
    assert "ignoring unknown fields spec.containers[0].imagee" in messages[1]


def test_hidden_files_directories_and_duplicates_are_skipped(manifests: Path) -> None:
    (manifests / ".web.yaml.swp").write_text(pod_json("hidden"))
    (manifests / "sub").mkdir()
    (manifests / "sub" / "p.json").write_text(pod_json("nested"))
    (manifests / "a.yaml").write_text(WEB_YAML)
    (manifests / "b.json").write_text(pod_json("web"))
    pods = StaticPodSource(manifests, NODE, FakeClock()).snapshot()
    assert names(pods) == ["default/web-node-a"]
    assert pods[0].metadata.labels == {"app": "web"}  # a.yaml, first in name order


def test_a_single_file_path(manifests: Path) -> None:
    path = manifests / "only.json"
    (manifests / "ignored.yaml").write_text(WEB_YAML)
    path.write_text(pod_json("only"))
    assert names(StaticPodSource(path, NODE, FakeClock()).snapshot()) == ["default/only-node-a"]


def test_missing_path_gives_no_pods(tmp_path: Path) -> None:
    assert StaticPodSource(tmp_path / "absent", NODE, FakeClock()).snapshot() == []


async def test_run_follows_files_appearing_changing_and_vanishing(
    manifests: Path, watcher: Watcher
) -> None:
    assert await watcher.next() == []  # the first poll reports even an empty set

    (manifests / "web.yaml").write_text(WEB_YAML)
    await watcher.poll()
    added = await watcher.next()
    assert names(added) == ["default/web-node-a"]
    assert added[0].metadata.annotations is not None
    seen = added[0].metadata.annotations[CONFIG_SEEN_ANNOTATION]

    await watcher.poll()  # nothing changed: nothing reported, seen kept
    (manifests / "db.json").write_text(pod_json("db"))
    await watcher.poll()
    both = await watcher.next()
    assert names(both) == ["default/db-node-a", "default/web-node-a"]
    assert uid(both, "web-node-a") == uid(added, "web-node-a")
    assert watcher.changes.empty()
    web = next(p for p in both if p.metadata.name == "web-node-a")
    assert web.metadata.annotations is not None
    assert web.metadata.annotations[CONFIG_SEEN_ANNOTATION] == seen

    (manifests / "web.yaml").write_text(WEB_YAML.replace("httpd", "nc"))
    await watcher.poll()
    changed = await watcher.next()
    assert names(changed) == names(both)
    assert uid(changed, "web-node-a") != uid(both, "web-node-a")
    assert uid(changed, "db-node-a") == uid(both, "db-node-a")
    web = next(p for p in changed if p.metadata.name == "web-node-a")
    assert web.metadata.annotations is not None
    assert web.metadata.annotations[CONFIG_SEEN_ANNOTATION] != seen  # a new pod, seen now

    (manifests / "db.json").write_text("{not a pod")
    await watcher.poll()
    assert names(await watcher.next()) == ["default/web-node-a"]

    (manifests / "web.yaml").unlink()
    await watcher.poll()
    assert await watcher.next() == []


async def test_run_awaits_an_async_handler(manifests: Path) -> None:
    (manifests / "web.yaml").write_text(WEB_YAML)
    clock = FakeClock()
    source = StaticPodSource(manifests, NODE, clock, period=1.0)
    received: list[list[Pod]] = []
    done = asyncio.Event()

    async def on_change(pods: list[Pod]) -> None:
        await asyncio.sleep(0)
        received.append(pods)
        done.set()

    task = asyncio.create_task(source.run(on_change))
    await asyncio.wait_for(done.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [names(pods) for pods in received] == [["default/web-node-a"]]
