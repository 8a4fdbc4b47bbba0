"""RuntimeClass from the API to containerd, in the shared lab: each node's containerd has two
runc handlers, ``runc`` (the default) and ``kubelab-runc`` (its own runc state directory), so a
pod's class shows where its containers were made.  A class whose handler containerd lacks
leaves the pod's sandbox failing with containerd's own message, as on any cluster.

The manifests are the kubernetes.io RuntimeClass page's, with the lab's handler names.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubelab.lab.components import containerd_layout
from tests.kubelab.lab.labs import UP_TIMEOUT, RunningLab
from tests.servers import Kubectl

pytestmark = [
    pytest.mark.lab,
    pytest.mark.privileged,
    pytest.mark.containerd,
    pytest.mark.timeout(UP_TIMEOUT + 120),
]

MakeClass = Callable[[str, str], None]


def runtime_class(name: str, handler: str) -> str:
    return json.dumps(
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": name},
            "handler": handler,
        }
    )


def pod(name: str, runtime_class_name: str | None) -> str:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]
    }
    if runtime_class_name is not None:
        spec["runtimeClassName"] = runtime_class_name
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def runc_state(lab: RunningLab, kubectl: Kubectl, name: str) -> set[str]:
    """The handlers under whose runc state directory the pod's container lives on its node."""
    kubectl.run("wait", f"pod/{name}", "--for=condition=Ready", "--timeout=90s")
    got = kubectl.json("get", "pod", name)
    container_id = got["status"]["containerStatuses"][0]["containerID"].removeprefix(
        "containerd://"
    )
    state_dir = containerd_layout(lab.lab.node(got["spec"]["nodeName"])).state_dir
    return {
        handler
        for handler in ("runc", "kubelab-runc")
        if (Path(state_dir) / handler / "k8s.io" / container_id).is_dir()
    }


@pytest.fixture(name="classes")
def classes_fixture(shared_lab: RunningLab) -> Iterator[MakeClass]:
    """The test's RuntimeClasses (cluster-scoped), deleted afterwards."""
    made: list[str] = []

    def make(name: str, handler: str) -> None:
        shared_lab.kubectl.run(
            "apply", "-f", "-", input=runtime_class(name, handler), namespaced=False
        )
        made.append(name)

    yield make
    for name in made:
        shared_lab.kubectl.run(
            "delete", "runtimeclass", name, "--ignore-not-found", namespaced=False
        )


def test_a_pods_runtime_class_picks_containerds_handler(
    shared_lab: RunningLab, lab_kubectl: Kubectl, classes: MakeClass
) -> None:
    classes("lab-alternative", "kubelab-runc")
    lab_kubectl.run("apply", "-f", "-", input=pod("default-handler", None))
    lab_kubectl.run("apply", "-f", "-", input=pod("alternative-handler", "lab-alternative"))
    assert runc_state(shared_lab, lab_kubectl, "default-handler") == {"runc"}
    assert runc_state(shared_lab, lab_kubectl, "alternative-handler") == {"kubelab-runc"}
    rows = shared_lab.kubectl.run("get", "runtimeclass", "lab-alternative", namespaced=False)
    assert rows.stdout.split()[:5] == ["NAME", "HANDLER", "AGE", "lab-alternative", "kubelab-runc"]


def test_a_handler_containerd_lacks_fails_the_sandbox_with_containerds_message(
    lab_kubectl: Kubectl, classes: MakeClass
) -> None:
    classes("lab-missing", "no-such-handler")
    lab_kubectl.run("apply", "-f", "-", input=pod("nowhere", "lab-missing"))
    wanted = 'no runtime for "no-such-handler" is configured'
    deadline = time.monotonic() + 60
    while True:
        events = lab_kubectl.json(
            "get", "events", "--field-selector", "involvedObject.name=nowhere"
        )
        failed = [e for e in events["items"] if e["reason"] == "FailedCreatePodSandBox"]
        if failed:
            break
        assert time.monotonic() < deadline, f"no FailedCreatePodSandBox: {events['items']}"
        time.sleep(1)
    assert wanted in failed[0]["message"], failed[0]["message"]
    assert failed[0]["type"] == "Warning"
    status = lab_kubectl.json("get", "pod", "nowhere")["status"]
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
