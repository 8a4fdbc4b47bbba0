"""The pinned kubectl against a real ``kubelab apiserver``: every command's output checked."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from kube.pki import certificate_request, generate_key
from tests.servers import KUBECTL, Kubectl, ServerProcess

PROTOBUF = "application/vnd.kubernetes.protobuf"

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: frontend}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports:
        - containerPort: 80
"""

SERVICE = """
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: NodePort
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 8080
"""


def _rows(text: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


def test_version(kubectl: Kubectl) -> None:
    out = kubectl.run("version", "-o", "json", namespaced=False).stdout
    server = json.loads(out)["serverVersion"]
    assert (server["major"], server["minor"]) == ("1", "36")
    assert server["gitVersion"].startswith("v1.36.0+kubelab")


UPSTREAM_API_RESOURCES = Path(__file__).with_name("api-resources-1.36.txt")


def _cells(table: str) -> list[tuple[str, ...]]:
    """The rows of a kubectl table cut where its header's columns start, so an empty cell (no
    short names, no categories) stays in its column."""
    header, *lines = table.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [tuple(line[a:b].strip() for a, b in bounds) for line in [header, *lines]]


def test_api_resources_are_upstreams_ga_built_ins(kubectl: Kubectl) -> None:
    """``kubectl api-resources -o wide`` lists, in kubectl's order, exactly the GA built-in
    resources of Kubernetes 1.36 with their short names, preferred version, scope, kind, verbs
    and categories.  The expected table was made from the official Python client v36.0.3's
    OpenAPI document (resources, versions, scope, kinds, verbs) and upstream's discovery
    documents (short names, categories); rows of groups upstream does not have (a test's
    custom resources) are left out."""
    expected = _cells(UPSTREAM_API_RESOURCES.read_text())
    served = _cells(kubectl.run("api-resources", "-o", "wide", namespaced=False).stdout)
    groups = {row[2] for row in expected}
    assert [row for row in served if row[2] in groups] == expected


def test_create_get_and_output_formats(kubectl: Kubectl) -> None:
    out = kubectl.run("create", "-f", "-", input=DEPLOYMENT).stdout
    assert out.strip() == "deployment.apps/web created"
    rows = _rows(kubectl.run("get", "deployments").stdout)
    assert rows[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert rows[1][:4] == ["web", "0/2", "0", "0"]
    wide = _rows(kubectl.run("get", "deploy", "-o", "wide").stdout)
    assert wide[0] == [
        "NAME",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "AGE",
        "CONTAINERS",
        "IMAGES",
        "SELECTOR",
    ]
    assert wide[1][5:] == ["nginx", "nginx:1.27", "app=web"]
    obj = kubectl.json("get", "deployment", "web")
    assert obj["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
    }
    as_yaml = yaml.safe_load(kubectl.run("get", "deployment", "web", "-o", "yaml").stdout)
    assert as_yaml["metadata"]["generation"] == 1
    labels = _rows(kubectl.run("get", "deploy", "--show-labels").stdout)
    assert labels[0][-1] == "LABELS"
    assert labels[1][-1] == "app=web,tier=frontend"
    selected = kubectl.run("get", "deploy", "-l", "tier=backend").stdout
    assert selected == ""


def test_get_all_namespaces(kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=DEPLOYMENT)
    rows = _rows(kubectl.run("get", "deployments", "-A", namespaced=False).stdout)
    assert rows[0][:2] == ["NAMESPACE", "NAME"]
    assert [kubectl.namespace, "web"] in [r[:2] for r in rows[1:]]


def test_describe(kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=SERVICE)
    out = kubectl.run("describe", "service", "web").stdout
    assert re.search(r"^Name:\s+web$", out, re.M)
    assert re.search(r"^Type:\s+NodePort$", out, re.M)
    assert re.search(r"^TargetPort:\s+8080/TCP$", out, re.M)
    assert re.search(r"^NodePort:\s+<unset>\s+3\d{4}/TCP$", out, re.M)


def test_apply_twice_with_changes(kubectl: Kubectl) -> None:
    first = kubectl.run("apply", "-f", "-", input=DEPLOYMENT).stdout
    assert first.strip() == "deployment.apps/web created"
    again = kubectl.run("apply", "-f", "-", input=DEPLOYMENT).stdout
    assert again.strip() == "deployment.apps/web unchanged"
    changed = DEPLOYMENT.replace("replicas: 2", "replicas: 3").replace("nginx:1.27", "nginx:1.28")
    third = kubectl.run("apply", "-f", "-", input=changed).stdout
    assert third.strip() == "deployment.apps/web configured"
    obj = kubectl.json("get", "deployment", "web")
    spec = obj["spec"]
    assert spec["replicas"] == 3
    assert spec["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
    assert obj["metadata"]["generation"] == 2


def test_apply_server_side(kubectl: Kubectl) -> None:
    out = kubectl.run("apply", "--server-side", "-f", "-", input=DEPLOYMENT).stdout
    assert out.strip() == "deployment.apps/web serverside-applied"
    # kubectl leaves managedFields out of its output unless asked (since 1.21).
    obj = kubectl.json("get", "deployment", "web", "--show-managed-fields")
    managers = {m["manager"] for m in obj["metadata"]["managedFields"]}
    assert "kubectl" in managers


@pytest.mark.parametrize(
    ("args", "expected", "kind", "name"),
    [
        (
            ["create", "configmap", "cfg", "--from-literal=a=b"],
            "configmap/cfg created",
            "configmap",
            "cfg",
        ),
        (
            ["create", "secret", "generic", "s", "--from-literal=p=q"],
            "secret/s created",
            "secret",
            "s",
        ),
        (
            ["create", "deployment", "gen", "--image=nginx", "--replicas=2"],
            "deployment.apps/gen created",
            "deployment",
            "gen",
        ),
        (
            ["create", "service", "clusterip", "svc", "--tcp=80:8080"],
            "service/svc created",
            "service",
            "svc",
        ),
    ],
    ids=["configmap", "secret", "deployment", "service"],
)
def test_generator_commands(
    kubectl: Kubectl, args: list[str], expected: str, kind: str, name: str
) -> None:
    assert kubectl.run(*args).stdout.strip() == expected
    assert kubectl.json("get", kind, name)["metadata"]["name"] == name


def test_create_namespace_generator(kubectl: Kubectl) -> None:
    name = kubectl.namespace + "-gen"
    out = kubectl.run("create", "namespace", name, namespaced=False).stdout
    assert out.strip() == f"namespace/{name} created"
    phase = kubectl.json("get", "namespace", name)["status"]["phase"]
    assert phase == "Active"


def _answered_in_protobuf(log: str, status: str) -> bool:
    """Whether kubectl's -v=8 log shows a response of ``status`` in protobuf."""
    pattern = (
        rf'"Response" status="{status}" headers=<\n(?:\s+[^\n]*\n)*?\s+Content-Type: {PROTOBUF}\n'
    )
    return re.search(pattern, log) is not None


def test_kubectl_reads_protobuf_answers(kubectl: Kubectl) -> None:
    """Generator commands and describe's event list use client-go's typed clients, which ask
    for protobuf: what kubectl prints is its own decoding of the server's protobuf."""
    created = kubectl.run("create", "configmap", "pb", "--from-literal=a=b", "-o", "json", "-v=8")
    assert _answered_in_protobuf(created.stderr, "201 Created")
    obj = json.loads(created.stdout)
    assert obj == kubectl.json("get", "configmap", "pb")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "pb.probed"},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "pb",
            "namespace": kubectl.namespace,
            "uid": obj["metadata"]["uid"],
        },
        "reason": "Probed",
        "message": "read through protobuf",
        "type": "Normal",
        "count": 1,
        "source": {"component": "kubelab-test"},
        "firstTimestamp": obj["metadata"]["creationTimestamp"],
        "lastTimestamp": obj["metadata"]["creationTimestamp"],
    }
    kubectl.run("create", "-f", "-", input=json.dumps(event))
    described = kubectl.run("describe", "configmap", "pb", "-v=8")
    assert _answered_in_protobuf(described.stderr, "200 OK")
    assert re.search(
        r"Normal\s+Probed\s+\S+\s+kubelab-test\s+read through protobuf", described.stdout
    )


def test_patch_types_label_annotate_scale(kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=DEPLOYMENT)
    assert kubectl.run(
        "patch", "deployment", "web", "--type=merge", "-p", '{"spec":{"minReadySeconds":5}}'
    ).stdout.strip() == ("deployment.apps/web patched")
    kubectl.run(
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/replicas","value":4}]',
    )
    kubectl.run(
        "patch",
        "deployment",
        "web",
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:2"}]}}}}',
    )
    out = kubectl.run("label", "deployment", "web", "team=blue").stdout
    assert out.strip() == "deployment.apps/web labeled"
    out = kubectl.run("annotate", "deployment", "web", "note=hello").stdout
    assert out.strip() == "deployment.apps/web annotated"
    out = kubectl.run("scale", "deployment", "web", "--replicas=6").stdout
    assert out.strip() == "deployment.apps/web scaled"
    obj = kubectl.json("get", "deployment", "web")
    meta, spec = obj["metadata"], obj["spec"]
    assert spec["minReadySeconds"] == 5
    assert spec["replicas"] == 6
    container = spec["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"], container["ports"]) == (
        "nginx",
        "nginx:2",
        [{"containerPort": 80, "protocol": "TCP"}],
    )
    assert meta["labels"]["team"] == "blue"
    assert meta["annotations"]["note"] == "hello"


def test_errors_read_like_kubernetes(kubectl: Kubectl) -> None:
    missing = kubectl.run("get", "deployment", "nope", check=False)
    assert missing.returncode == 1
    assert 'Error from server (NotFound): deployments.apps "nope" not found' in missing.stderr
    kubectl.run("create", "-f", "-", input=DEPLOYMENT)
    again = kubectl.run("create", "-f", "-", input=DEPLOYMENT, check=False)
    assert (
        'Error from server (AlreadyExists): error when creating "STDIN": deployments.apps '
        '"web" already exists' in again.stderr
    )
    bad = kubectl.run(
        "create",
        "-f",
        "-",
        check=False,
        input=DEPLOYMENT.replace("name: web\n  labels", "name: Web_1\n  labels"),
    )
    assert 'The Deployment "Web_1" is invalid: metadata.name: Invalid value: "Web_1"' in bad.stderr


def test_delete_with_cascade_and_wait(kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=DEPLOYMENT)
    kubectl.run("create", "-f", "-", input=SERVICE)
    ns = kubectl.namespace
    out = kubectl.run("delete", "deployment", "web", "--wait=true").stdout
    assert out.strip() == f'deployment.apps "web" deleted from {ns} namespace'
    out = kubectl.run("delete", "service", "web", "--cascade=background").stdout
    assert out.strip() == f'service "web" deleted from {ns} namespace'
    assert kubectl.run("get", "deploy,svc", "-o", "name").stdout == ""


def test_delete_foreground_waits_for_finalizer_removal(kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=DEPLOYMENT)
    result = kubectl.run("delete", "deployment", "web", "--cascade=foreground", "--wait=false")
    assert result.stdout.strip() == (
        f'deployment.apps "web" deleted from {kubectl.namespace} namespace'
    )
    obj = kubectl.json("get", "deployment", "web")
    assert obj["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert obj["metadata"]["deletionTimestamp"]
    kubectl.run(
        "patch", "deployment", "web", "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )
    gone = kubectl.run("get", "deployment", "web", check=False)
    assert "NotFound" in gone.stderr


def test_get_watch_streams_changes(kubectl: Kubectl, apiserver: ServerProcess) -> None:
    kubectl.run("create", "configmap", "watched", "--from-literal=a=1")
    command = [
        str(KUBECTL),
        "--kubeconfig",
        str(apiserver.kubeconfig),
        "--cache-dir",
        str(kubectl.cache_dir),
        "-n",
        kubectl.namespace,
        "get",
        "configmaps",
        "-w",
        "--request-timeout=20s",
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as watcher:
        try:
            assert watcher.stdout is not None
            header = watcher.stdout.readline()
            assert header.split() == ["NAME", "DATA", "AGE"]
            first = watcher.stdout.readline()
            assert first.split()[:2] == ["watched", "1"]
            time.sleep(0.3)
            kubectl.run("patch", "configmap", "watched", "--type=merge", "-p", '{"data":{"b":"2"}}')
            changed = watcher.stdout.readline()
            assert changed.split()[:2] == ["watched", "2"]
        finally:
            watcher.terminate()


def test_explain(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "deployment.spec.strategy", namespaced=False).stdout
    assert "GROUP:      apps" in out
    assert "KIND:       Deployment" in out
    assert "rollingUpdate\t<RollingUpdateDeployment>" in out
    pods = kubectl.run("explain", "pods.spec.containers", namespaced=False).stdout
    assert "image\t<string>" in pods


def test_delete_orphan_records_the_finalizer_for_the_garbage_collector(kubectl: Kubectl) -> None:
    """The garbage collector (controller-manager) finishes an orphaning delete; the API
    server's part is to mark the object and record the policy as the ``orphan`` finalizer."""
    kubectl.run("create", "-f", "-", input=DEPLOYMENT)
    kubectl.run("delete", "deployment", "web", "--cascade=orphan", "--wait=false")
    meta = kubectl.json("get", "deployment", "web")["metadata"]
    assert meta["finalizers"] == ["orphan"]
    assert meta["deletionTimestamp"]


def test_certificate_approve_and_deny(kubectl: Kubectl) -> None:
    """``kubectl certificate approve|deny`` PUT the request to ``/approval`` as protobuf."""
    names = [f"{kubectl.namespace}-approve", f"{kubectl.namespace}-deny"]
    for name in names:
        request = certificate_request(generate_key(), name)
        csr = {
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {
                "request": base64.b64encode(request).decode(),
                "signerName": "example.com/widgets",
                "usages": ["client auth"],
            },
        }
        kubectl.run("create", "-f", "-", input=json.dumps(csr), namespaced=False)
    approved, denied = names
    out = kubectl.run("certificate", "approve", approved, namespaced=False).stdout
    assert out.strip() == f"certificatesigningrequest.certificates.k8s.io/{approved} approved"
    out = kubectl.run("certificate", "deny", denied, namespaced=False).stdout
    assert out.strip() == f"certificatesigningrequest.certificates.k8s.io/{denied} denied"
    rows = _rows(kubectl.run("get", "csr", *names, namespaced=False).stdout)
    assert [(row[0], row[-1]) for row in rows[1:]] == [(approved, "Approved"), (denied, "Denied")]
    for name, reason in ((approved, "KubectlApprove"), (denied, "KubectlDeny")):
        condition = kubectl.json("get", "csr", name)["status"]["conditions"][0]
        assert (condition["reason"], condition["status"]) == (reason, "True")
