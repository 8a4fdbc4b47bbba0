"""CRI labels and annotations of sandboxes and containers, and reading them back."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from kube.api.kinds.core_v1.pod import Container, Pod
from node.kubelet.runtime.labels import (
    ContainerInfo,
    container_annotations,
    container_hash,
    container_info,
    container_labels,
    sandbox_annotations,
    sandbox_labels,
)

IDENTITY = {
    "io.kubernetes.pod.name": "web",
    "io.kubernetes.pod.namespace": "ns",
    "io.kubernetes.pod.uid": "u1",
}


def make_pod(spec: dict[str, Any], **metadata: Any) -> Pod:
    meta = {"name": "web", "namespace": "ns", "uid": "u1", **metadata}
    return msgspec.convert({"metadata": meta, "spec": spec}, Pod)


def make_container(**fields: Any) -> Container:
    return msgspec.convert({"name": "app", "image": "busybox:1.35", **fields}, Container)


def test_sandbox_labels_keep_pod_labels_and_identity_wins() -> None:
    pod = make_pod({}, labels={"app": "web", "io.kubernetes.pod.name": "spoof"})
    assert sandbox_labels(pod) == {"app": "web", **IDENTITY}
    assert sandbox_annotations(make_pod({}, annotations={"a": "b"})) == {"a": "b"}
    assert sandbox_annotations(make_pod({})) == {}


def test_container_labels_are_identity_only() -> None:
    pod = make_pod({}, labels={"app": "web"})
    expected = {**IDENTITY, "io.kubernetes.container.name": "app"}
    assert container_labels(pod, make_container()) == expected


@pytest.mark.parametrize(
    ("spec", "metadata", "container", "expected"),
    [
        pytest.param(
            {},
            {},
            {"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"},
            {
                "io.kubernetes.container.restartCount": "3",
                "io.kubernetes.container.terminationMessagePath": "/dev/termination-log",
                "io.kubernetes.container.terminationMessagePolicy": "File",
            },
            id="minimal",
        ),
        pytest.param(
            {"terminationGracePeriodSeconds": 30},
            {"deletionGracePeriodSeconds": 5},
            {
                "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}},
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
            },
            {
                "io.kubernetes.container.restartCount": "3",
                "io.kubernetes.container.terminationMessagePath": "",
                "io.kubernetes.container.terminationMessagePolicy": "",
                "io.kubernetes.pod.deletionGracePeriod": "5",
                "io.kubernetes.pod.terminationGracePeriod": "30",
                "io.kubernetes.container.preStopHandler": '{"exec":{"command":["sleep","1"]}}',
                "io.kubernetes.container.ports": '[{"containerPort":80,"protocol":"TCP"}]',
            },
            id="grace-prestop-ports",
        ),
    ],
)
def test_container_annotations(
    spec: dict[str, Any], metadata: dict[str, Any], container: dict[str, Any], expected: Any
) -> None:
    c = make_container(**container)
    annotations = container_annotations(make_pod(spec, **metadata), c, 3)
    assert annotations.pop("io.kubernetes.container.hash") == container_hash(c)
    assert annotations == expected


@pytest.mark.parametrize(
    ("change", "same"),
    [
        pytest.param({"image": "busybox:1.36"}, False, id="image"),
        pytest.param({"name": "other"}, False, id="name"),
        pytest.param({"resources": {"limits": {"cpu": "1"}}}, True, id="resources-resized"),
        pytest.param({"terminationMessagePath": "/x"}, True, id="defaulted-fields"),
    ],
)
def test_container_hash(change: dict[str, Any], same: bool) -> None:
    base = container_hash(make_container())
    assert base == container_hash(make_container())
    assert int(base, 16) < 2**32
    assert (container_hash(make_container(**change)) == base) is same


def test_container_info_round_trip() -> None:
    handler = {"exec": {"command": ["stop"]}}
    container = make_container(
        lifecycle={"preStop": handler},
        terminationMessagePath="/tmp/msg",
        terminationMessagePolicy="FallbackToLogsOnError",
    )
    pod = make_pod({"terminationGracePeriodSeconds": 30})
    info = container_info(
        container_labels(pod, container), container_annotations(pod, container, 2)
    )
    assert info == ContainerInfo(
        pod_uid="u1",
        pod_name="web",
        pod_namespace="ns",
        container_name="app",
        hash=container_hash(container),
        restart_count=2,
        termination_message_path="/tmp/msg",
        termination_message_policy="FallbackToLogsOnError",
        termination_grace_seconds=30,
        pre_stop=json.dumps(handler, separators=(",", ":")),
    )


@pytest.mark.parametrize(
    ("labels", "annotations", "expected"),
    [
        pytest.param({"io.kubernetes.pod.name": "web"}, {}, None, id="not-ours"),
        pytest.param(
            {**IDENTITY, "io.kubernetes.container.name": "app"},
            {
                "io.kubernetes.container.restartCount": "x",
                "io.kubernetes.pod.deletionGracePeriod": "2",
                "io.kubernetes.pod.terminationGracePeriod": "30",
            },
            ContainerInfo("u1", "web", "ns", "app", "", 0, "", "", 2, ""),
            id="deletion-grace-wins-malformed-count-zero",
        ),
        pytest.param(
            {**IDENTITY, "io.kubernetes.container.name": "app"},
            {"io.kubernetes.pod.deletionGracePeriod": "bad"},
            ContainerInfo("u1", "web", "ns", "app", "", 0, "", "", None, ""),
            id="no-grace",
        ),
    ],
)
def test_container_info(
    labels: dict[str, str], annotations: dict[str, str], expected: ContainerInfo | None
) -> None:
    assert container_info(labels, annotations) == expected
