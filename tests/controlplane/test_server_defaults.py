"""``kubelab server`` as a user starts it (no flags but its ports), driven with the pinned
kubectl as a user types it: a deleted namespace takes everything in it along, whether it
was made by ``kubectl create namespace`` or from YAML with or without a ``spec``; content
that an older server left behind in namespaces that no longer exist is removed at start;
and, under the default ``--authorization-mode Node,RBAC``, a service account gets what its
RoleBinding grants and nothing more."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from controlplane.storage.sqlite import SQLiteStore
from tests.servers import Kubectl, start_server, stop_server

COMPONENT_PORTS = ("--scheduler-port", "0", "--controller-manager-port", "0")


def fill(kubectl: Kubectl, namespace: str) -> None:
    """What a user puts in a namespace: a ConfigMap, a Secret, a Deployment (its ReplicaSet
    and pods follow) and a Service."""
    kubectl.run("-n", namespace, "create", "configmap", "settings", "--from-literal=a=b")
    kubectl.run("-n", namespace, "create", "secret", "generic", "token", "--from-literal=t=x")
    kubectl.run("-n", namespace, "create", "deployment", "web", "--image=nginx", "--replicas=2")
    kubectl.run("-n", namespace, "expose", "deployment", "web", "--port=80")
    deadline = time.monotonic() + 30
    while "web-" not in kubectl.run("-n", namespace, "get", "pods", "-o", "name").stdout:
        assert time.monotonic() < deadline, "the Deployment's pods never appeared"
        time.sleep(0.2)


def content(kubectl: Kubectl, namespace: str) -> str:
    listed = kubectl.run(
        "-n", namespace, "get", "all,configmaps,secrets", "-o", "name", "--ignore-not-found"
    )
    return listed.stdout.strip()


NAMESPACE_YAML = {
    "no-spec": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: from-yaml\n",
    "empty-spec": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: from-yaml\nspec: {}\n",
}


@pytest.mark.parametrize("how", ["kubectl-create", *NAMESPACE_YAML])
def test_deleting_a_namespace_deletes_everything_in_it(kubectl: Kubectl, how: str) -> None:
    if how == "kubectl-create":
        name = "made-by-create"
        assert kubectl.run("create", "namespace", name).stdout == f"namespace/{name} created\n"
    else:
        name = "from-yaml"
        kubectl.run("apply", "-f", "-", input=NAMESPACE_YAML[how])
    finalizers = kubectl.run("get", "namespace", name, "-o", "jsonpath={.spec.finalizers}")
    assert json.loads(finalizers.stdout) == ["kubernetes"]
    fill(kubectl, name)
    assert "deployment.apps/web" in content(kubectl, name)

    deleted = kubectl.run("delete", "namespace", name, "--timeout=60s")
    assert deleted.stdout == f'namespace "{name}" deleted\n'
    assert content(kubectl, name) == ""
    gone = kubectl.run("get", "namespace", name, check=False)
    assert gone.stderr == f'Error from server (NotFound): namespaces "{name}" not found\n'


def test_a_clients_finalizers_are_kept_before_kubernetes(kubectl: Kubectl) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "held"},
        "spec": {"finalizers": ["example.com/cleanup"]},
    }
    kubectl.run("create", "-f", "-", input=json.dumps(manifest))
    finalizers = kubectl.run("get", "namespace", "held", "-o", "jsonpath={.spec.finalizers}")
    assert json.loads(finalizers.stdout) == ["example.com/cleanup", "kubernetes"]
    kubectl.run("-n", "held", "create", "configmap", "settings")
    kubectl.run("delete", "namespace", "held", "--wait=false")

    # Emptied, then held by the client's finalizer alone, until that client releases it.
    deadline = time.monotonic() + 30
    while True:
        spec = kubectl.json("get", "namespace", "held")["spec"]
        if spec == {"finalizers": ["example.com/cleanup"]}:
            break
        assert time.monotonic() < deadline, f"never finalized by the controller: {spec}"
        time.sleep(0.2)
    assert content(kubectl, "held") == ""
    phase = kubectl.run("get", "namespace", "held", "-o", "jsonpath={.status.phase}")
    assert phase.stdout == "Terminating"
    released = {**manifest, "spec": {"finalizers": []}}
    kubectl.run(
        "replace",
        "--raw",
        "/api/v1/namespaces/held/finalize",
        "-f",
        "-",
        input=json.dumps(released),
    )
    kubectl.run("wait", "--for=delete", "namespace/held", "--timeout=30s")


def test_a_service_account_gets_only_what_its_role_binding_grants(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl.run("create", "namespace", "confined")
    kubectl.run("-n", "confined", "create", "serviceaccount", "reader")
    kubectl.run(
        "-n", "confined", "create", "role", "pod-reader", "--verb=get,list", "--resource=pods"
    )
    kubectl.run(
        *("-n", "confined", "create", "rolebinding", "reader"),
        *("--role=pod-reader", "--serviceaccount=confined:reader"),
    )
    kubectl.run("-n", "kube-system", "create", "secret", "generic", "keys", "--from-literal=k=v")
    token = kubectl.run("-n", "confined", "create", "token", "reader").stdout.strip()
    config = json.loads(kubectl.run("config", "view", "--raw", "--minify", "-o", "json").stdout)
    config["users"][0]["user"] = {"token": token}
    as_reader = Kubectl(tmp_path / "reader.kubeconfig", tmp_path / "reader-cache", "confined")
    as_reader.kubeconfig.write_text(json.dumps(config))

    listed = as_reader.run("get", "pods")
    assert listed.stderr == "No resources found in confined namespace.\n"
    refused = as_reader.run("get", "secrets", "-A", check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        'Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:'
        'confined:reader" cannot list resource "secrets" in API group "" at the cluster scope\n'
    )
    assert as_reader.run("auth", "can-i", "list", "secrets", "-A", check=False).stdout == "no\n"
    assert as_reader.run("auth", "can-i", "list", "pods").stdout == "yes\n"


def test_content_left_in_namespaces_that_no_longer_exist_is_deleted_at_start(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = start_server(data_dir, *COMPONENT_PORTS, command="server")
    kubectl = Kubectl(server.kubeconfig, tmp_path / "kubectl-cache", "default")
    try:
        kubectl.run("create", "namespace", "gone")
        fill(kubectl, "gone")
    finally:
        stop_server(server)

    async def drop_namespace() -> None:
        # What an older server did on `kubectl delete namespace`: the namespace went at once.
        store = await SQLiteStore.open(data_dir / "state.db")
        try:
            await store.delete("/registry/namespaces/gone")
        finally:
            await store.close()

    asyncio.run(drop_namespace())
    server = start_server(data_dir, *COMPONENT_PORTS, command="server")
    try:
        deadline = time.monotonic() + 60
        while left := content(kubectl, "gone"):
            assert time.monotonic() < deadline, f"still there:\n{left}"
            time.sleep(0.5)
    finally:
        stop_server(server)
    log = (data_dir.parent / "data.log").read_text()
    assert "namespace gone does not exist but holds" in log
