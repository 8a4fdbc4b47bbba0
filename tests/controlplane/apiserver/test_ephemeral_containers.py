"""``pods/ephemeralcontainers`` against a real API server, written as kubectl debug and the
official Python client write it: additions pass, everything upstream refuses is a 422 with
upstream's message and field path, and a plain pod update cannot change the list."""

from __future__ import annotations

import json
from typing import Any

import kubernetes.client as k8s
import pytest

from tests.servers import Kubectl

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: docker.io/library/busybox:1.35
    command: [sleep, "3600"]
"""
IMAGE = "--image=docker.io/library/busybox:1.35"


@pytest.fixture
def pod(kubectl: Kubectl) -> str:
    kubectl.run("create", "-f", "-", input=POD)
    return "web"


def ephemeral(kubectl: Kubectl, pod: str) -> list[dict[str, object]]:
    spec = kubectl.json("get", "pod", pod)["spec"]
    assert isinstance(spec, dict)
    return list(spec.get("ephemeralContainers", []))


def patch(
    kubectl: Kubectl, pod: str, operations: list[dict[str, Any]], *, refused: bool = True
) -> str:
    """A JSON patch of ``pods/ephemeralcontainers``; its error when it must be refused."""
    result = kubectl.run(
        "patch",
        "pod",
        pod,
        "--subresource=ephemeralcontainers",
        "--type=json",
        "-p",
        json.dumps(operations),
        check=not refused,
    )
    if refused:
        assert result.returncode == 1
    return result.stderr.strip()


def test_kubectl_debug_adds_ephemeral_containers(kubectl: Kubectl, pod: str) -> None:
    result = kubectl.run("debug", pod, IMAGE, "--target=app", "-c", "dbg", "--", "sh")
    assert result.stdout.startswith('Targeting container "app".')
    kubectl.run("debug", pod, IMAGE, "-c", "dbg2", "--image-pull-policy=IfNotPresent")
    first, second = ephemeral(kubectl, pod)
    assert first["name"] == "dbg" and first["targetContainerName"] == "app"
    assert first["command"] == ["sh"] and first["resources"] == {}
    assert first["securityContext"] == {"capabilities": {"add": ["SYS_PTRACE"]}}
    assert first["terminationMessagePath"] == "/dev/termination-log"
    assert (second["name"], second["imagePullPolicy"]) == ("dbg2", "IfNotPresent")
    managers = kubectl.json("get", "pod", pod, "--show-managed-fields")["metadata"]
    entries = [(m["manager"], m.get("subresource")) for m in managers["managedFields"]]
    # Within one second upstream orders entries by manager name, so compare them unordered.
    assert sorted(entries, key=str) == [
        ("kubectl", "ephemeralcontainers"),
        ("kubectl-create", None),
    ]
    through = kubectl.json("get", "pod", pod, "--subresource=ephemeralcontainers")
    assert through["kind"] == "Pod"
    assert [c["name"] for c in through["spec"]["ephemeralContainers"]] == ["dbg", "dbg2"]


def test_target_must_name_a_container(kubectl: Kubectl, pod: str) -> None:
    result = kubectl.run("debug", pod, IMAGE, "--target=nope", "-c", "dbg", check=False)
    assert result.returncode == 1
    assert result.stderr.strip().endswith(
        'The Pod "web" is invalid: spec.ephemeralContainers[0].targetContainerName: '
        'Not found: "nope"'
    )
    assert ephemeral(kubectl, pod) == []


def test_forbidden_fields_and_names(kubectl: Kubectl, pod: str) -> None:
    added = {
        "name": "app",
        "image": "busybox",
        "ports": [{"containerPort": 80}],
        "resources": {"limits": {"cpu": "1"}},
        "readinessProbe": {"exec": {"command": ["true"]}},
        "lifecycle": {"preStop": {"exec": {"command": ["true"]}}},
    }
    error = patch(
        kubectl, pod, [{"op": "add", "path": "/spec/ephemeralContainers", "value": [added]}]
    )
    assert error.splitlines() == [
        'The Pod "web" is invalid: ',
        '* spec.ephemeralContainers[0].name: Duplicate value: "app"',
        "* spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
        "* spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral "
        "Container",
        "* spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an "
        "Ephemeral Container",
        "* spec.ephemeralContainers[0].lifecycle: Forbidden: cannot be set for an Ephemeral "
        "Container",
    ]


def test_existing_ones_can_be_neither_changed_nor_removed(kubectl: Kubectl, pod: str) -> None:
    kubectl.run("debug", pod, IMAGE, "-c", "dbg")
    changed = [{"op": "replace", "path": "/spec/ephemeralContainers/0/image", "value": "x:1"}]
    assert patch(kubectl, pod, changed).splitlines() == [
        'The Pod "web" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral '
        'containers "dbg" may not be changed',
        '- image: "docker.io/library/busybox:1.35"',
        '+ image: "x:1"',
    ]
    removed = [{"op": "remove", "path": "/spec/ephemeralContainers/0"}]
    assert patch(kubectl, pod, removed) == (
        'The Pod "web" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral '
        'containers "dbg" may not be removed'
    )
    assert [c["name"] for c in ephemeral(kubectl, pod)] == ["dbg"]


def test_only_ephemeral_containers_change_through_the_subresource(
    kubectl: Kubectl, pod: str
) -> None:
    operations: list[dict[str, Any]] = [
        {"op": "add", "path": "/spec/ephemeralContainers", "value": [{"name": "e", "image": "b"}]},
        {"op": "add", "path": "/metadata/labels", "value": {"sneaky": "yes"}},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "other:1"},
    ]
    patch(kubectl, pod, operations, refused=False)
    got = kubectl.json("get", "pod", pod)
    assert "labels" not in got["metadata"]
    spec = got["spec"]
    assert isinstance(spec, dict)
    assert spec["containers"][0]["image"] == "docker.io/library/busybox:1.35"
    assert [c["name"] for c in spec["ephemeralContainers"]] == ["e"]


def test_a_pod_update_cannot_add_them(kubectl: Kubectl, pod: str) -> None:
    added = [
        {"op": "add", "path": "/spec/ephemeralContainers", "value": [{"name": "e", "image": "b"}]}
    ]
    result = kubectl.run("patch", "pod", pod, "--type=json", "-p", json.dumps(added), check=False)
    assert result.returncode == 1
    assert result.stderr.startswith(
        'The Pod "web" is invalid: spec: Forbidden: pod updates may not change fields other than'
    )
    assert "+ ephemeralContainers: [" in result.stderr


def test_static_pods_take_none(kubectl: Kubectl) -> None:
    mirror = POD.replace(
        "  name: web\n",
        "  name: web\n  annotations: {kubernetes.io/config.mirror: x}\nspec:\n  nodeName: n1\n",
    ).replace("spec:\n  containers", "  containers", 1)
    kubectl.run("create", "-f", "-", input=mirror)
    result = kubectl.run("debug", "web", IMAGE, "-c", "dbg", check=False)
    assert result.returncode == 1
    assert result.stderr.strip().endswith(
        'The Pod "web" is invalid: []: Forbidden: static pods do not support ephemeral containers'
    )


def test_python_client_reads_and_replaces(
    api_client: k8s.ApiClient, kubectl: Kubectl, pod: str
) -> None:
    core = k8s.CoreV1Api(api_client)
    current = core.read_namespaced_pod_ephemeralcontainers(pod, kubectl.namespace)
    current.spec.ephemeral_containers = [k8s.V1EphemeralContainer(name="e", image="busybox:1.35")]
    replaced = core.replace_namespaced_pod_ephemeralcontainers(pod, kubectl.namespace, current)
    assert [c.name for c in replaced.spec.ephemeral_containers] == ["e"]
    current = core.read_namespaced_pod_ephemeralcontainers(pod, kubectl.namespace)
    current.spec.ephemeral_containers = []
    with pytest.raises(k8s.ApiException) as raised:
        core.replace_namespaced_pod_ephemeralcontainers(pod, kubectl.namespace, current)
    assert raised.value.status == 422
    cause = json.loads(raised.value.body)["details"]["causes"][0]
    assert cause == {
        "reason": "FieldValueForbidden",
        "message": 'Forbidden: existing ephemeral containers "e" may not be removed\n',
        "field": "spec.ephemeralContainers",
    }


def test_discovery_serves_the_subresource(kubectl: Kubectl) -> None:
    listed = json.loads(kubectl.run("get", "--raw", "/api/v1", namespaced=False).stdout)
    (entry,) = [r for r in listed["resources"] if r["name"] == "pods/ephemeralcontainers"]
    assert (entry["kind"], entry["namespaced"]) == ("Pod", True)
    assert sorted(entry["verbs"]) == ["get", "patch", "update"]
