"""resource.k8s.io/v1 as users reach it: the pinned kubectl and the official Python client
against a real ``kubelab apiserver``, with the DRA documentation's DeviceClass (the corpus in
tests/kube/api/manifests) and the invalid manifests of tests/kube/api/invalid.

DeviceClass is cluster-scoped and the module's server is shared, so every test names its classes
after its own namespace and deletes them.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from tests.controlplane.apiserver.corpus import (
    CORPUS,
    columns,
    create,
    refusal,
    refused_document,
)
from tests.servers import Kubectl

GROUP_VERSION = "resource.k8s.io/v1"
VERBS = "create,delete,deletecollection,get,list,patch,update,watch"


def _class(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_api_resources_list_the_group(kubectl: Kubectl) -> None:
    out = kubectl.run(
        "api-resources", "--api-group=resource.k8s.io", "-o", "wide", namespaced=False
    ).stdout
    assert columns(out) == [
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"],
        ["deviceclasses", "", GROUP_VERSION, "false", "DeviceClass", VERBS, ""],
    ]


def test_device_class_from_the_docs(kubectl: Kubectl) -> None:
    (document,) = yaml.safe_load_all(
        (CORPUS / "manifests" / "resource-deviceclass-example.yaml").read_text()
    )
    name = f"{kubectl.namespace}-example"
    document["metadata"]["name"] = name
    assert create(kubectl, document) == f"deviceclass.resource.k8s.io/{name} created"
    try:
        out = kubectl.run("get", "deviceclasses", name).stdout
        header, row = columns(out)
        assert (header, row[0]) == (["NAME", "AGE"], name)
        assert kubectl.json("get", "deviceclass", name)["spec"] == document["spec"]
        config = {
            "spec": {
                "config": [
                    {
                        "opaque": {
                            "driver": "driver.example.com",
                            "parameters": {"apiVersion": "v1", "kind": "Config", "n": 1},
                        }
                    }
                ]
            }
        }
        patched = kubectl.run("patch", "deviceclass", name, "-p", json.dumps(config)).stdout
        assert patched.strip() == f"deviceclass.resource.k8s.io/{name} patched"
        spec = kubectl.json("get", "deviceclass", name)["spec"]
        assert spec == {**document["spec"], **config["spec"]}
        listed = kubectl.json("get", "deviceclasses")["items"]
        assert name in [c["metadata"]["name"] for c in listed]
        refused = kubectl.run(
            "patch",
            "deviceclass",
            name,
            "--type=json",
            "-p",
            '[{"op":"replace","path":"/spec/config/0/opaque/parameters","value":"text"}]',
            check=False,
        )
        assert (
            f'The DeviceClass "{name}" is invalid: spec.config[0].opaque.parameters: Invalid '
            'value: "<value omitted>": parameters must be a valid JSON object' in refused.stderr
        )
    finally:
        deleted = kubectl.run("delete", "deviceclass", name).stdout
    assert deleted.strip() == f'deviceclass.resource.k8s.io "{name}" deleted'
    assert kubectl.run("get", "deviceclass", name, check=False).returncode == 1


def test_device_class_refusals(kubectl: Kubectl) -> None:
    opaque: dict[str, Any] = {"driver": "driver.example.com", "parameters": {}}
    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"selectors": [{"cel": {"expression": ""}}]},
            "spec.selectors[0].cel.expression: Required value",
        ),
        (
            {"selectors": [{"cel": {"expression": "x" * (10 * 1024 + 1)}}]},
            "spec.selectors[0].cel.expression: Too long: may not be more than 10240 bytes",
        ),
        (
            {"selectors": [{"cel": {"expression": "true"}}] * 33},
            "spec.selectors: Too many: 33: must have at most 32 items",
        ),
        ({"config": [{}]}, "spec.config[0].opaque: Required value"),
        (
            {"config": [{"opaque": {"driver": "driver.example.com"}}]},
            "spec.config[0].opaque.parameters: Required value",
        ),
        (
            {"config": [{"opaque": {**opaque, "driver": "d" * 64}}]},
            "spec.config[0].opaque.driver: Too long: may not be more than 63 bytes",
        ),
        (
            {"extendedResourceName": "cpu"},
            'spec.extendedResourceName: Invalid value: "cpu": must be a valid extended resource '
            "name",
        ),
    ]
    for spec, message in cases:
        stderr = refused_document(kubectl, _class("bad", **spec))
        assert f'The DeviceClass "bad" is invalid: {message}' in stderr
    assert 'metadata.name: Invalid value: "Bad_Name"' in refused_document(
        kubectl, _class("Bad_Name")
    )


INVALID = [
    (
        "resource-deviceclass-selector-without-cel.yaml",
        'The DeviceClass "no-cel" is invalid: spec.selectors[0].cel: Required value',
    ),
    (
        "resource-deviceclass-bad-driver.yaml",
        'The DeviceClass "bad-driver" is invalid: spec.config[0].opaque.driver: Invalid value: '
        '"Driver_Example"',
    ),
]


@pytest.mark.parametrize(
    ("manifest", "message"), INVALID, ids=[name.removesuffix(".yaml") for name, _ in INVALID]
)
def test_invalid_objects_are_refused(kubectl: Kubectl, manifest: str, message: str) -> None:
    assert message in refusal(kubectl, manifest)


def test_explain(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "deviceclass.spec", namespaced=False).stdout
    assert "GROUP:      resource.k8s.io" in out
    assert "KIND:       DeviceClass" in out
    for field in (
        "config\t<[]DeviceClassConfiguration>",
        "extendedResourceName\t<string>",
        "selectors\t<[]DeviceSelector>",
    ):
        assert field in out
    cel = kubectl.run("explain", "deviceclass.spec.selectors.cel", namespaced=False).stdout
    assert "expression\t<string> -required-" in cel


def _row(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_get_watch_streams_changes(kubectl: Kubectl) -> None:
    """``kubectl get -w`` prints the row of each change."""
    name = f"{kubectl.namespace}-watched"
    create(kubectl, _class(name))
    command = kubectl.argv("get", "deviceclasses", name, "-w", "--request-timeout=20s")
    try:
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as watcher:
            try:
                assert watcher.stdout is not None
                assert _row(watcher.stdout.readline()) == ["NAME", "AGE"]
                assert _row(watcher.stdout.readline())[0] == name
                time.sleep(0.3)
                kubectl.run("label", "deviceclass", name, "seen=yes")
                assert _row(watcher.stdout.readline())[0] == name
            finally:
                watcher.terminate()
    finally:
        kubectl.run("delete", "deviceclass", name)


def test_python_client(api_client: k8s.ApiClient, namespace: str) -> None:
    api = k8s.ResourceV1Api(api_client)
    name = f"{namespace}-gpu"
    api.create_device_class(
        k8s.V1DeviceClass(
            metadata=k8s.V1ObjectMeta(name=name),
            spec=k8s.V1DeviceClassSpec(
                selectors=[
                    k8s.V1DeviceSelector(
                        cel=k8s.V1CELDeviceSelector(expression='device.driver == "gpu.io"')
                    )
                ],
                config=[
                    k8s.V1DeviceClassConfiguration(
                        opaque=k8s.V1OpaqueDeviceConfiguration(
                            driver="gpu.io", parameters={"sharing": "TimeSlicing"}
                        )
                    )
                ],
            ),
        )
    )
    try:
        listed = api.list_device_class(field_selector=f"metadata.name={name}").items
        assert [c.spec.config[0].opaque.parameters for c in listed] == [{"sharing": "TimeSlicing"}]
        patched = api.patch_device_class(name, {"spec": {"extendedResourceName": "gpu.io/gpu"}})
        assert patched.spec.extended_resource_name == "gpu.io/gpu"
        with pytest.raises(ApiException) as invalid:
            api.create_device_class(
                k8s.V1DeviceClass(
                    metadata=k8s.V1ObjectMeta(name=f"{name}-bad"),
                    spec=k8s.V1DeviceClassSpec(selectors=[k8s.V1DeviceSelector()]),
                )
            )
        assert invalid.value.status == 422
        causes = json.loads(invalid.value.body)["details"]["causes"]
        assert causes == [
            {
                "reason": "FieldValueRequired",
                "message": "Required value",
                "field": "spec.selectors[0].cel",
            }
        ]
    finally:
        # As upstream, a delete is answered with the deleted object.
        deleted = api.delete_device_class(name)
    assert deleted.metadata.name == name
    with pytest.raises(ApiException) as gone:
        api.read_device_class(name)
    assert gone.value.status == 404
