"""resource.k8s.io/v1 as users reach it: the pinned kubectl and the official Python client
against a real ``kubelab apiserver``, with the DRA documentation's DeviceClass, ResourceClaim,
ResourceClaimTemplate and ResourceSlice (the corpus in tests/kube/api/manifests) and the invalid
manifests of tests/kube/api/invalid.

DeviceClass and ResourceSlice are cluster-scoped and the module's server is shared, so every test
names its cluster-scoped objects after its own namespace and deletes them.
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
        ["resourceclaims", "", GROUP_VERSION, "true", "ResourceClaim", VERBS, ""],
        [
            "resourceclaimtemplates",
            "",
            GROUP_VERSION,
            "true",
            "ResourceClaimTemplate",
            VERBS,
            "",
        ],
        ["resourceslices", "", GROUP_VERSION, "false", "ResourceSlice", VERBS, ""],
    ]


def _manifest(name: str) -> dict[str, Any]:
    """The corpus manifest's one document."""
    (document,) = yaml.safe_load_all((CORPUS / "manifests" / name).read_text())
    assert isinstance(document, dict)
    return document


def test_device_class_from_the_docs(kubectl: Kubectl) -> None:
    document = _manifest("resource-deviceclass-example.yaml")
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
            {"selectors": [{"cel": {"expression": "devices.driver == 'gpu.example.com'"}}]},
            'spec.selectors[0].cel.expression: Invalid value: "devices.driver == '
            "'gpu.example.com'\": compilation failed: ERROR: <input>:1:1: undeclared reference "
            "to 'devices' (in container '')",
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


def test_resource_claim_from_the_docs_and_its_status(kubectl: Kubectl) -> None:
    claim = _manifest("resource-resourceclaim-example.yaml")
    claim["status"] = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "1"}]}
    assert create(kubectl, claim) == "resourceclaim.resource.k8s.io/example-resource-claim created"
    name = "example-resource-claim"
    got = kubectl.json("get", "resourceclaim", name)
    assert got["spec"] == claim["spec"]  # allocationMode All: no count defaulted
    assert "status" not in got  # a client's status is dropped on create
    header = ["NAME", "STATE"]
    assert [row[:2] for row in columns(kubectl.run("get", "resourceclaims").stdout)] == [
        header,
        [name, "pending"],
    ]
    allocation = {
        "devices": {
            "results": [
                {
                    "request": "single-gpu-claim",
                    "driver": "driver.example.com",
                    "pool": "node1",
                    "device": "gpu-0",
                }
            ]
        }
    }
    reserved = [{"resource": "pods", "name": "pod", "uid": "7f5d2b9c-0000-4000-8000-000000000001"}]
    status = {"status": {"allocation": allocation, "reservedFor": reserved}}
    kubectl.run(
        "patch",
        "resourceclaim",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    assert [row[:2] for row in columns(kubectl.run("get", "resourceclaims").stdout)] == [
        header,
        [name, "allocated,reserved"],
    ]
    assert kubectl.json("get", "resourceclaim", name)["status"] == status["status"]
    immutable = kubectl.run(
        "patch",
        "resourceclaim",
        name,
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/devices/requests/0/name","value":"other"}]',
        check=False,
    )
    assert f'The ResourceClaim "{name}" is invalid: spec: Invalid value' in immutable.stderr
    assert "field is immutable" in immutable.stderr
    labelled = kubectl.run("label", "resourceclaim", name, "seen=yes").stdout
    assert labelled.strip() == f"resourceclaim.resource.k8s.io/{name} labeled"
    deleted = kubectl.run("delete", "resourceclaim", name).stdout
    assert deleted.strip() == (
        f'resourceclaim.resource.k8s.io "{name}" deleted from {kubectl.namespace} namespace'
    )


def test_resource_claim_template_from_the_docs(kubectl: Kubectl) -> None:
    template = _manifest("resource-resourceclaimtemplate-example.yaml")
    name = template["metadata"]["name"]
    created = create(kubectl, template)
    assert created == f"resourceclaimtemplate.resource.k8s.io/{name} created"
    header, row = columns(kubectl.run("get", "resourceclaimtemplates").stdout)
    assert (header, row[0]) == (["NAME", "AGE"], name)
    (request,) = kubectl.json("get", "resourceclaimtemplate", name)["spec"]["spec"]["devices"][
        "requests"
    ]
    assert request["exactly"]["allocationMode"] == "ExactCount"
    assert request["exactly"]["count"] == 1
    listed = kubectl.json("get", "resourceclaimtemplates")["items"]
    assert [t["metadata"]["name"] for t in listed] == [name]
    immutable = kubectl.run(
        "patch",
        "resourceclaimtemplate",
        name,
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/spec/devices/requests/0/exactly/count","value":2}]',
        check=False,
    )
    assert f'The ResourceClaimTemplate "{name}" is invalid: spec: Invalid value' in immutable.stderr
    kubectl.run("delete", "resourceclaimtemplate", name)
    assert "No resources found" in kubectl.run("get", "resourceclaimtemplates").stderr


def _claim(name: str, *requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": list(requests), **devices}},
    }


def test_resource_claim_refusals(kubectl: Kubectl) -> None:
    exactly = {"deviceClassName": "gpu"}
    sub = {"name": "small", "deviceClassName": "gpu"}
    request = "spec.devices.requests[0]"
    cases: list[tuple[list[dict[str, Any]], dict[str, Any], str]] = [
        (
            [{"name": "gpu"}],
            {},
            f"{request}: Required value: exactly one of `exactly` or `firstAvailable` is required",
        ),
        (
            [{"name": "gpu", "exactly": exactly, "firstAvailable": [sub]}],
            {},
            f"{request}: Invalid value: null: exactly one of `exactly` or `firstAvailable` is "
            "required, but multiple fields are set",
        ),
        (
            [{"name": "GPU", "exactly": exactly}],
            {},
            f'{request}.name: Invalid value: "GPU"',
        ),
        (
            [{"name": "gpu", "exactly": {**exactly, "allocationMode": "All", "count": 2}}],
            {},
            f"{request}.exactly.count: Invalid value: 2: must not be specified when "
            "allocationMode is 'All'",
        ),
        (
            [{"name": "gpu", "exactly": {**exactly, "allocationMode": "Some"}}],
            {},
            f'{request}.exactly.allocationMode: Unsupported value: "Some": supported values: '
            '"All", "ExactCount"',
        ),
        (
            [{"name": "gpu", "exactly": {}}],
            {},
            f"{request}.exactly.deviceClassName: Required value",
        ),
        (
            [{"name": "gpu", "exactly": exactly}, {"name": "gpu", "exactly": exactly}],
            {},
            'spec.devices.requests[1]: Duplicate value: "gpu"',
        ),
        (
            [{"name": "gpu", "exactly": exactly}],
            {"constraints": [{"requests": ["nic"], "matchAttribute": "a.io/numa"}]},
            'spec.devices.constraints[0].requests[0]: Invalid value: "nic": must be the name of '
            "a request in the claim",
        ),
    ]
    for requests, devices, message in cases:
        stderr = refused_document(kubectl, _claim("bad", *requests, **devices))
        assert f'The ResourceClaim "bad" is invalid: {message}' in stderr


def test_resource_slice_from_the_docs(kubectl: Kubectl) -> None:
    cat = _manifest("resource-resourceslice-cat-slice.yaml")
    name = f"{kubectl.namespace}-cat-slice"
    cat["metadata"]["name"] = name
    node_spec = {k: v for k, v in cat["spec"].items() if k != "allNodes"}
    on_node = {
        **cat,
        "metadata": {"name": f"{name}-node1"},
        "spec": {**node_spec, "nodeName": "node1", "devices": []},
    }
    assert create(kubectl, cat, on_node).splitlines() == [
        f"resourceslice.resource.k8s.io/{name} created",
        f"resourceslice.resource.k8s.io/{name}-node1 created",
    ]
    try:
        out = kubectl.run("get", "resourceslices", name, f"{name}-node1").stdout
        assert [row[:-1] for row in columns(out)] == [
            ["NAME", "NODE", "DRIVER", "POOL"],
            [name, "", "resource-driver.example.com", "black-cat-pool"],
            [f"{name}-node1", "node1", "resource-driver.example.com", "black-cat-pool"],
        ]
        assert kubectl.json("get", "resourceslice", name)["spec"] == cat["spec"]
        selected = kubectl.json("get", "resourceslices", "--field-selector=spec.nodeName=node1")
        assert f"{name}-node1" in [s["metadata"]["name"] for s in selected["items"]]
        assert name not in [s["metadata"]["name"] for s in selected["items"]]
        generation = '{"spec":{"pool":{"generation":2}}}'
        kubectl.run("patch", "resourceslice", name, "--type=merge", "-p", generation)
        assert kubectl.json("get", "resourceslice", name)["spec"]["pool"]["generation"] == 2
        moved = kubectl.run(
            "patch",
            "resourceslice",
            f"{name}-node1",
            "--type=merge",
            "-p",
            '{"spec":{"nodeName":"node2","driver":"other.example.com"}}',
            check=False,
        )
        assert 'spec.driver: Invalid value: "other.example.com": field is immutable' in (
            moved.stderr
        )
        assert 'spec.nodeName: Invalid value: "node2": field is immutable' in moved.stderr
    finally:
        kubectl.run("delete", "resourceslice", name, f"{name}-node1")


def test_resource_slice_refusals(kubectl: Kubectl) -> None:
    pool = {"name": "pool", "generation": 1, "resourceSliceCount": 1}
    spec = {"driver": "d.example.com", "pool": pool, "nodeName": "node1"}
    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"nodeName": None},
            "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
            "`perDeviceNodeSelection` is required",
        ),
        (
            {"pool": {**pool, "resourceSliceCount": 0}},
            "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero",
        ),
        (
            {"devices": [{"name": "GPU"}]},
            'spec.devices[0].name: Invalid value: "GPU"',
        ),
        (
            {"devices": [{"name": "gpu", "attributes": {"model": {}}}]},
            'spec.devices[0].attributes[model]: Invalid value: "": exactly one value must be '
            "specified",
        ),
        (
            {"devices": [{"name": "gpu", "attributes": {"v": {"version": "1.2"}}}]},
            'spec.devices[0].attributes[v].version: Invalid value: "1.2": must be a string '
            "compatible with semver.org spec 2.0.0",
        ),
    ]
    for change, message in cases:
        body = {
            "apiVersion": GROUP_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"name": "bad"},
            "spec": {k: v for k, v in {**spec, **change}.items() if v is not None},
        }
        stderr = refused_document(kubectl, body)
        assert f'The ResourceSlice "bad" is invalid: {message}' in stderr


INVALID = [
    (
        "resource-resourceslice-two-node-selections.yaml",
        'The ResourceSlice "two-selections" is invalid: spec: Invalid value: "{`nodeName`, '
        '`allNodes`}": exactly one of `nodeName`, `nodeSelector`, `allNodes`, '
        "`perDeviceNodeSelection` is required, but multiple fields are set",
    ),
    (
        "resource-resourceclaim-zero-count.yaml",
        'The ResourceClaim "zero" is invalid: spec.devices.requests[0].exactly.count: Invalid '
        "value: 0: must be greater than zero",
    ),
    (
        "resource-resourceclaimtemplate-no-request-type.yaml",
        'The ResourceClaimTemplate "empty-request" is invalid: spec.spec.devices.requests[0]: '
        "Required value",
    ),
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
    devices = kubectl.run("explain", "resourceclaim.spec.devices").stdout
    assert "KIND:       ResourceClaim" in devices
    for field in (
        "config\t<[]DeviceClaimConfiguration>",
        "constraints\t<[]DeviceConstraint>",
        "requests\t<[]DeviceRequest>",
    ):
        assert field in devices
    exactly = kubectl.run("explain", "resourceclaimtemplate.spec.spec.devices.requests.exactly")
    assert "deviceClassName\t<string> -required-" in exactly.stdout
    assert "allocationMode\t<string>" in exactly.stdout


def _row(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


ALLOCATED = {
    "status": {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": "d.io", "pool": "p", "device": "gpu-0"}]
            }
        }
    }
}
WATCHED = [
    # resource, namespaced, body, change, header, second cell before and after
    ("deviceclasses", False, _class(""), ["label"], ["NAME", "AGE"], None),
    (
        "resourceclaims",
        True,
        _claim("", {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}),
        ["--subresource=status", "--type=merge", "-p", json.dumps(ALLOCATED)],
        ["NAME", "STATE", "AGE"],
        ("pending", "allocated"),
    ),
    (
        "resourceclaimtemplates",
        True,
        {
            "apiVersion": GROUP_VERSION,
            "kind": "ResourceClaimTemplate",
            "metadata": {},
            "spec": {"spec": {}},
        },
        ["label"],
        ["NAME", "AGE"],
        None,
    ),
    (
        "resourceslices",
        False,
        {
            "apiVersion": GROUP_VERSION,
            "kind": "ResourceSlice",
            "metadata": {},
            "spec": {
                "driver": "d.example.com",
                "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                "allNodes": True,
            },
        },
        ["label"],
        ["NAME", "NODE", "DRIVER", "POOL", "AGE"],
        None,
    ),
]


@pytest.mark.parametrize(
    ("resource", "namespaced", "body", "change", "header", "states"),
    WATCHED,
    ids=[w[0] for w in WATCHED],
)
def test_get_watch_streams_changes(
    kubectl: Kubectl,
    resource: str,
    namespaced: bool,
    body: dict[str, Any],
    change: list[str],
    header: list[str],
    states: tuple[str, str] | None,
) -> None:
    """``kubectl get -w`` prints the row of each change (a label, or a claim's allocation)."""
    name = f"{kubectl.namespace}-watched"
    create(kubectl, {**body, "metadata": {"name": name}})
    command = kubectl.argv("get", resource, name, "-w", "--request-timeout=20s")
    verb = (
        ["label", resource, name, "seen=yes"]
        if change == ["label"]
        else ["patch", resource, name, *change]
    )
    try:
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as watcher:
            try:
                assert watcher.stdout is not None
                assert _row(watcher.stdout.readline()) == header
                first = _row(watcher.stdout.readline())
                time.sleep(0.3)
                kubectl.run(*verb)
                second = _row(watcher.stdout.readline())
                assert (first[0], second[0]) == (name, name)
                if states is not None:
                    assert (first[1], second[1]) == states
            finally:
                watcher.terminate()
    finally:
        kubectl.run("delete", resource, name)


def test_python_client_device_classes(api_client: k8s.ApiClient, namespace: str) -> None:
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


def test_python_client_claims_and_templates(api_client: k8s.ApiClient, namespace: str) -> None:
    api = k8s.ResourceV1Api(api_client)
    spec = k8s.V1ResourceClaimSpec(
        devices=k8s.V1DeviceClaim(
            requests=[
                k8s.V1DeviceRequest(
                    name="gpu", exactly=k8s.V1ExactDeviceRequest(device_class_name="gpu")
                )
            ]
        )
    )
    api.create_namespaced_resource_claim_template(
        namespace,
        k8s.V1ResourceClaimTemplate(
            metadata=k8s.V1ObjectMeta(name="gpu"),
            spec=k8s.V1ResourceClaimTemplateSpec(
                metadata=k8s.V1ObjectMeta(labels={"app": "gpu"}), spec=spec
            ),
        ),
    )
    api.create_namespaced_resource_claim(
        namespace,
        k8s.ResourceV1ResourceClaim(metadata=k8s.V1ObjectMeta(name="gpu"), spec=spec),
    )
    templates = api.list_namespaced_resource_claim_template(namespace).items
    assert [t.spec.metadata.labels for t in templates] == [{"app": "gpu"}]
    (claim,) = api.list_namespaced_resource_claim(namespace).items
    exact = claim.spec.devices.requests[0].exactly
    assert (exact.allocation_mode, exact.count) == ("ExactCount", 1)
    status = api.patch_namespaced_resource_claim_status("gpu", namespace, ALLOCATED)
    assert status.status.allocation.devices.results[0].device == "gpu-0"
    with pytest.raises(ApiException) as invalid:
        api.create_namespaced_resource_claim(
            namespace,
            k8s.ResourceV1ResourceClaim(
                metadata=k8s.V1ObjectMeta(name="bad"),
                spec=k8s.V1ResourceClaimSpec(
                    devices=k8s.V1DeviceClaim(requests=[k8s.V1DeviceRequest(name="gpu")])
                ),
            ),
        )
    assert invalid.value.status == 422
    causes = json.loads(invalid.value.body)["details"]["causes"]
    assert causes == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: exactly one of `exactly` or `firstAvailable` is required",
            "field": "spec.devices.requests[0]",
        }
    ]
    # As upstream, deletes are answered with the deleted object.
    deleted = [
        api.delete_namespaced_resource_claim("gpu", namespace),
        api.delete_namespaced_resource_claim_template("gpu", namespace),
    ]
    assert [d.metadata.name for d in deleted] == ["gpu", "gpu"]
    assert api.list_namespaced_resource_claim(namespace).items == []


def test_python_client_resource_slices(api_client: k8s.ApiClient, namespace: str) -> None:
    api = k8s.ResourceV1Api(api_client)
    name = f"{namespace}-slice"
    api.create_resource_slice(
        k8s.V1ResourceSlice(
            metadata=k8s.V1ObjectMeta(name=name),
            spec=k8s.V1ResourceSliceSpec(
                driver="gpu.example.com",
                pool=k8s.V1ResourcePool(name=namespace, generation=0, resource_slice_count=1),
                node_name=f"{namespace}-node",
                devices=[
                    k8s.V1Device(
                        name="gpu-0",
                        attributes={"model": k8s.V1DeviceAttribute(string="a100")},
                        capacity={"memory": k8s.V1DeviceCapacity(value="80Gi")},
                    )
                ],
            ),
        )
    )
    try:
        listed = api.list_resource_slice(field_selector=f"spec.nodeName={namespace}-node").items
        assert [(s.metadata.name, s.spec.devices[0].capacity["memory"].value) for s in listed] == [
            (name, "80Gi")
        ]
        with pytest.raises(ApiException) as invalid:
            api.create_resource_slice(
                k8s.V1ResourceSlice(
                    metadata=k8s.V1ObjectMeta(name=f"{name}-bad"),
                    spec=k8s.V1ResourceSliceSpec(
                        driver="gpu.example.com",
                        pool=k8s.V1ResourcePool(name="p", generation=0, resource_slice_count=0),
                        all_nodes=True,
                    ),
                )
            )
        assert invalid.value.status == 422
        causes = json.loads(invalid.value.body)["details"]["causes"]
        assert [c["field"] for c in causes] == ["spec.pool.resourceSliceCount"]
    finally:
        deleted = api.delete_resource_slice(name)
    assert deleted.metadata.name == name
