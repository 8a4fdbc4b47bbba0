"""CustomResourceDefinitions end to end: kubectl and the Python client against a real server.

The two CRDs of the manifest corpus (CronTab: two versions, status subresource, printer
columns; WebApp: status and scale subresources, IntOrString, preserve-unknown-fields) are
applied once for the module; each test works in a namespace of its own.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ApiException

from tests.servers import KUBECTL, Kubectl, ServerProcess

MANIFESTS = Path(__file__).parents[3] / "kube" / "api" / "manifests"
CRONTAB_CRD = MANIFESTS / "apiextensions-customresourcedefinition-crontab.yaml"
WEBAPP_CRD = MANIFESTS / "apiextensions-customresourcedefinition-webapp-operator.yaml"
CRONTABS = MANIFESTS / "stable.example.com-crontab-my-new-cron-object.yaml"
WEBAPP = MANIFESTS / "platform.example.com-webapp-storefront.yaml"


def _kubectl(server: ServerProcess, *args: str, input: str | None = None) -> str:
    result = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(server.kubeconfig), *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def crds(apiserver: ServerProcess) -> None:
    _kubectl(apiserver, "apply", "-f", str(CRONTAB_CRD), "-f", str(WEBAPP_CRD))
    _kubectl(
        apiserver,
        "wait",
        "--for",
        "condition=established",
        "--timeout=20s",
        "crd/crontabs.stable.example.com",
        "crd/webapps.platform.example.com",
    )


def _documents(path: Path, namespace: str) -> str:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
    return yaml.safe_dump_all(docs)


@pytest.fixture
def objects(crds: None, kubectl: Kubectl) -> Kubectl:
    kubectl.run("create", "-f", "-", input=_documents(CRONTABS, kubectl.namespace))
    kubectl.run("create", "-f", "-", input=_documents(WEBAPP, kubectl.namespace))
    return kubectl


def _dynamic(api_client: kubernetes.client.ApiClient) -> DynamicClient:
    return DynamicClient(api_client)


def test_established_and_discovered(crds: None, kubectl: Kubectl) -> None:
    crd = kubectl.json("get", "crd", "crontabs.stable.example.com")
    status: Any = crd["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Established"]["status"] == "True"
    assert conditions["Established"]["reason"] == "InitialNamesAccepted"
    assert conditions["NamesAccepted"]["reason"] == "NoConflicts"
    assert status["acceptedNames"]["kind"] == "CronTab"
    assert status["acceptedNames"]["listKind"] == "CronTabList"
    assert status["storedVersions"] == ["v1"]
    resources = kubectl.run("api-resources", "--api-group=stable.example.com").stdout
    assert "crontabs" in resources and "ct" in resources and "CronTab" in resources
    webapps = kubectl.run("api-resources", "--api-group=platform.example.com").stdout
    assert "webapps" in webapps and "wa" in webapps
    versions = kubectl.run("api-versions").stdout.split()
    assert "stable.example.com/v1" in versions and "stable.example.com/v1beta1" in versions
    assert "platform.example.com/v1alpha1" not in versions  # not served


def test_printer_columns(objects: Kubectl) -> None:
    lines = objects.run("get", "crontabs").stdout.splitlines()
    assert lines[0].split() == ["NAME", "SPEC", "REPLICAS", "LAST", "SCHEDULE", "AGE"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert "* * * * */5" in rows["my-new-cron-object"]
    assert rows["my-new-cron-object"].split()[6] == "2"
    # Created at v1beta1 without replicas: read at v1 with the v1 default.
    assert rows["legacy-cron-object"].split()[6] == "1"
    wide = objects.run("get", "wa", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "IMAGE", "DESIRED", "READY", "STATUS", "AGE"]
    assert "ghcr.io/example/storefront:4.1.0" in wide[1]
    narrow = objects.run("get", "wa").stdout.splitlines()
    assert narrow[0].split() == ["NAME", "DESIRED", "READY", "STATUS", "AGE"]


def test_get_yaml_list_all_and_defaults(objects: Kubectl) -> None:
    obj: Any = yaml.safe_load(objects.run("get", "ct", "my-new-cron-object", "-o", "yaml").stdout)
    assert obj["apiVersion"] == "stable.example.com/v1"
    assert obj["kind"] == "CronTab"
    assert obj["spec"]["concurrencyPolicy"] == "Forbid"
    assert obj["metadata"]["labels"] == {"team": "batch"}
    legacy: Any = objects.json("get", "crontabs.v1beta1.stable.example.com", "legacy-cron-object")
    assert legacy["apiVersion"] == "stable.example.com/v1beta1"
    webapp: Any = objects.json("get", "webapp", "storefront")
    assert webapp["spec"]["exposure"] == "LoadBalancer"
    assert webapp["spec"]["targetPort"] == "http" and webapp["spec"]["maxSurge"] == "25%"
    assert webapp["spec"]["resources"]["requests"]["cpu"] == "200m"  # preserved
    objects.run(
        "create",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "stable.example.com/v1",
                "kind": "CronTab",
                "metadata": {"name": "defaulted"},
                "spec": {"cronSpec": "* * * * *", "image": "x"},
            }
        ),
    )
    defaulted: Any = objects.json("get", "ct", "defaulted")
    assert defaulted["spec"]["replicas"] == 1
    assert defaulted["spec"]["concurrencyPolicy"] == "Allow"
    everywhere = objects.run("get", "ct", "-A", namespaced=False).stdout
    assert objects.namespace in everywhere and "defaulted" in everywhere


def test_patch_merge(objects: Kubectl) -> None:
    objects.run(
        "patch", "ct", "my-new-cron-object", "--type", "merge", "-p", '{"spec":{"replicas":5}}'
    )
    obj: Any = objects.json("get", "ct", "my-new-cron-object")
    assert obj["spec"]["replicas"] == 5
    assert obj["metadata"]["generation"] == 2
    failed = objects.run(
        "patch",
        "ct",
        "my-new-cron-object",
        "--type",
        "merge",
        "-p",
        '{"spec":{"replicas":11}}',
        check=False,
    )
    assert failed.returncode != 0
    assert (
        "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal "
        "to 10" in failed.stderr
    )


def test_validation_errors(crds: None, kubectl: Kubectl, api_client: Any) -> None:
    crontabs = _dynamic(api_client).resources.get(
        api_version="stable.example.com/v1", kind="CronTab"
    )
    body = {
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": "bad"},
        "spec": {"cronSpec": "never", "replicas": "two", "concurrencyPolicy": "Sometimes"},
    }
    with pytest.raises(ApiException) as raised:
        crontabs.create(body=body, namespace=kubectl.namespace)
    assert raised.value.status == 422
    status = json.loads(raised.value.body)
    assert status["reason"] == "Invalid"
    causes = {(c["field"], c["reason"]) for c in status["details"]["causes"]}
    assert causes == {
        ("spec.image", "FieldValueRequired"),
        ("spec.cronSpec", "FieldValueInvalid"),
        ("spec.replicas", "FieldValueTypeInvalid"),
        ("spec.concurrencyPolicy", "FieldValueNotSupported"),
    }
    assert status["message"].startswith('CronTab.stable.example.com "bad" is invalid') or status[
        "message"
    ].startswith('CronTab "bad" is invalid')


def test_unknown_fields(crds: None, kubectl: Kubectl) -> None:
    manifest = json.dumps(
        {
            "apiVersion": "stable.example.com/v1",
            "kind": "CronTab",
            "metadata": {"name": "unknown"},
            "spec": {"cronSpec": "* * * * *", "image": "x", "colour": "blue"},
        }
    )
    strict = kubectl.run("create", "--validate=strict", "-f", "-", input=manifest, check=False)
    assert strict.returncode != 0
    assert "BadRequest" in strict.stderr
    assert 'strict decoding error: unknown field "spec.colour"' in strict.stderr
    warned = kubectl.run("create", "--validate=warn", "-f", "-", input=manifest)
    assert 'unknown field "spec.colour"' in warned.stderr
    obj: Any = kubectl.json("get", "ct", "unknown")
    assert "colour" not in obj["spec"]  # pruned


def test_status_subresource(objects: Kubectl, api_client: Any) -> None:
    crontabs = _dynamic(api_client).resources.get(
        api_version="stable.example.com/v1", kind="CronTab"
    )
    ns = objects.namespace
    crontabs.status.patch(
        name="my-new-cron-object",
        namespace=ns,
        body={
            "status": {"replicas": 2, "lastScheduleTime": "2026-01-01T00:00:00Z"},
            "spec": {"replicas": 9},
        },
        content_type="application/merge-patch+json",
    )
    obj = crontabs.get(name="my-new-cron-object", namespace=ns).to_dict()
    assert obj["status"] == {"replicas": 2, "lastScheduleTime": "2026-01-01T00:00:00Z"}
    assert obj["spec"]["replicas"] == 2  # the status endpoint leaves spec alone
    obj["status"]["replicas"] = 7
    obj["spec"]["image"] = "other"
    crontabs.replace(body=obj, namespace=ns)
    obj = crontabs.get(name="my-new-cron-object", namespace=ns).to_dict()
    assert obj["status"]["replicas"] == 2  # the object endpoint leaves status alone
    assert obj["spec"]["image"] == "other"
    with pytest.raises(ApiException) as raised:
        crontabs.status.patch(
            name="my-new-cron-object",
            namespace=ns,
            body={"status": {"lastScheduleTime": "yesterday"}},
            content_type="application/merge-patch+json",
        )
    assert raised.value.status == 422
    table = objects.run("get", "ct", "my-new-cron-object").stdout.splitlines()
    assert table[0].split()[3:5] == ["LAST", "SCHEDULE"]


def test_scale(objects: Kubectl) -> None:
    objects.run("scale", "webapp", "storefront", "--replicas=7")
    obj: Any = objects.json("get", "webapp", "storefront")
    assert obj["spec"]["replicas"] == 7
    scale = json.loads(
        objects.run(
            "get",
            "--raw",
            f"/apis/platform.example.com/v1/namespaces/{objects.namespace}/webapps/storefront/scale",
            namespaced=False,
        ).stdout
    )
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 7
    assert scale["status"]["replicas"] == 0
    failed = objects.run("scale", "webapp", "storefront", "--replicas=51", check=False)
    assert failed.returncode != 0
    assert "spec.replicas in body should be less than or equal to 50" in failed.stderr
    # CronTab has no scale subresource.
    assert objects.run("scale", "ct", "my-new-cron-object", "--replicas=3", check=False).returncode


def test_deprecated_version_warns(crds: None, kubectl: Kubectl) -> None:
    result = kubectl.run(
        "create",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "stable.example.com/v1beta1",
                "kind": "CronTab",
                "metadata": {"name": "old"},
                "spec": {"cronSpec": "* * * * *", "image": "x"},
            }
        ),
    )
    assert "stable.example.com/v1beta1 CronTab is deprecated" in result.stderr


def test_watch(crds: None, kubectl: Kubectl, api_client: Any) -> None:
    custom = kubernetes.client.CustomObjectsApi(api_client)
    ns = kubectl.namespace
    listed = custom.list_namespaced_custom_object("stable.example.com", "v1", ns, "crontabs")
    revision = listed["metadata"]["resourceVersion"]
    body = {
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": "watched"},
        "spec": {"cronSpec": "* * * * *", "image": "x"},
    }
    custom.create_namespaced_custom_object("stable.example.com", "v1", ns, "crontabs", body)
    custom.patch_namespaced_custom_object(
        "stable.example.com", "v1", ns, "crontabs", "watched", {"spec": {"image": "y"}}
    )
    custom.delete_namespaced_custom_object("stable.example.com", "v1", ns, "crontabs", "watched")
    events = list(
        kubernetes.watch.Watch().stream(
            custom.list_namespaced_custom_object,
            "stable.example.com",
            "v1",
            ns,
            "crontabs",
            resource_version=revision,
            timeout_seconds=1,
        )
    )
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[1]["object"]["spec"]["image"] == "y"
    assert events[1]["object"]["spec"]["replicas"] == 1


def test_delete_custom_resource(objects: Kubectl) -> None:
    objects.run("delete", "ct", "my-new-cron-object")
    names = objects.run("get", "ct", "-o", "name").stdout.split()
    assert names == ["crontab.stable.example.com/legacy-cron-object"]


def test_delete_crd_removes_objects(apiserver: ServerProcess, kubectl: Kubectl) -> None:
    crd: Any = yaml.safe_load(CRONTAB_CRD.read_text())
    crd["metadata"]["name"] = "crontabs.doomed.example.com"
    crd["spec"]["group"] = "doomed.example.com"
    kubectl.run("create", "-f", "-", input=json.dumps(crd), namespaced=False)
    kubectl.run(
        "wait",
        "--for",
        "condition=established",
        "--timeout=20s",
        "crd/crontabs.doomed.example.com",
        namespaced=False,
    )
    for name in ("one", "two"):
        kubectl.run(
            "create",
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "doomed.example.com/v1",
                    "kind": "CronTab",
                    "metadata": {"name": name},
                    "spec": {"cronSpec": "* * * * *", "image": "x"},
                }
            ),
        )
    assert len(kubectl.run("get", "crontabs.doomed.example.com", "-o", "name").stdout.split()) == 2
    kubectl.run("delete", "crd", "crontabs.doomed.example.com", "--timeout=30s", namespaced=False)
    assert "crontabs.doomed.example.com" not in kubectl.run("get", "crd", namespaced=False).stdout
    deadline = time.monotonic() + 10
    while "doomed.example.com" in kubectl.run("api-versions", namespaced=False).stdout:
        assert time.monotonic() < deadline, "the deleted CRD's group is still discovered"
        time.sleep(0.2)
    # Created again, the resource starts empty: the objects went with the CRD.
    kubectl.run("create", "-f", "-", input=json.dumps(crd), namespaced=False)
    kubectl.run(
        "wait",
        "--for",
        "condition=established",
        "--timeout=20s",
        "crd/crontabs.doomed.example.com",
        namespaced=False,
    )
    assert kubectl.run("get", "crontabs.doomed.example.com", "-A", "-o", "name").stdout == ""
    kubectl.run("delete", "crd", "crontabs.doomed.example.com", namespaced=False)


def test_explain_reads_the_crd_schema(crds: None, kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "crontabs.spec", namespaced=False).stdout
    assert "GROUP:      stable.example.com" in out
    assert "KIND:       CronTab" in out
    assert "cronSpec\t<string>" in out
