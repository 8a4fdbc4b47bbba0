"""storage.k8s.io/v1's CSI kinds as users reach them: the pinned kubectl and the official Python
client against a real ``kubelab apiserver``, with the documentation's manifests (the corpus in
tests/kube/api/manifests) and the invalid ones of tests/kube/api/invalid.

Four of the five kinds are cluster-scoped and the module's server is shared, so every test names
its cluster-scoped objects after its own namespace and deletes them.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
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

GROUP_VERSION = "storage.k8s.io/v1"
VERBS = "create,delete,deletecollection,get,list,patch,update,watch"


def _without_age(rows: list[list[str]]) -> list[list[str]]:
    return [row[:-1] for row in rows]


def _manifest(name: str, rename: str | None = None) -> dict[str, Any]:
    """The corpus manifest's one document, without the docs' namespace, perhaps renamed."""
    documents: list[dict[str, Any]] = [
        d for d in yaml.safe_load_all((CORPUS / "manifests" / name).read_text()) if d
    ]
    (document,) = documents
    document["metadata"].pop("namespace", None)
    if rename is not None:
        document["metadata"]["name"] = rename
    return document


def test_api_resources_list_the_group(kubectl: Kubectl) -> None:
    """As upstream 1.36 lists the group: six resources, one short name beside StorageClass's."""
    out = kubectl.run(
        "api-resources", "--api-group=storage.k8s.io", "-o", "wide", namespaced=False
    ).stdout
    assert columns(out) == [
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"],
        ["csidrivers", "", GROUP_VERSION, "false", "CSIDriver", VERBS, ""],
        ["csinodes", "", GROUP_VERSION, "false", "CSINode", VERBS, ""],
        ["csistoragecapacities", "", GROUP_VERSION, "true", "CSIStorageCapacity", VERBS, ""],
        ["storageclasses", "sc", GROUP_VERSION, "false", "StorageClass", VERBS, ""],
        ["volumeattachments", "", GROUP_VERSION, "false", "VolumeAttachment", VERBS, ""],
        [
            "volumeattributesclasses",
            "vac",
            GROUP_VERSION,
            "false",
            "VolumeAttributesClass",
            VERBS,
            "",
        ],
    ]


def test_csi_driver_from_the_docs(kubectl: Kubectl) -> None:
    name = f"{kubectl.namespace}.example.com"
    driver = _manifest("storage-csidriver-mycsidriver.yaml", name)
    assert create(kubectl, driver) == f"csidriver.storage.k8s.io/{name} created"
    bare = f"bare.{name}"
    create(kubectl, {"apiVersion": GROUP_VERSION, "kind": "CSIDriver", "metadata": {"name": bare}})
    try:
        out = kubectl.run("get", "csidrivers", name, bare).stdout
        assert _without_age(columns(out)) == [
            [
                "NAME",
                "ATTACHREQUIRED",
                "PODINFOONMOUNT",
                "STORAGECAPACITY",
                "TOKENREQUESTS",
                "REQUIRESREPUBLISH",
                "MODES",
            ],
            [name, "true", "true", "false", "gcp,", "true", "Persistent,Ephemeral"],
            [bare, "true", "false", "false", "<unset>", "false", "Persistent"],
        ]
        assert kubectl.json("get", "csidriver", name)["spec"] == {
            **driver["spec"],
            "storageCapacity": False,
        }
        assert kubectl.json("get", "csidriver", bare)["spec"] == {
            "attachRequired": True,
            "podInfoOnMount": False,
            "volumeLifecycleModes": ["Persistent"],
            "storageCapacity": False,
            "fsGroupPolicy": "ReadWriteOnceWithFSType",
            "requiresRepublish": False,
            "seLinuxMount": False,
        }
        patched = kubectl.run(
            "patch", "csidriver", bare, "--type=merge", "-p", '{"spec":{"storageCapacity":true}}'
        ).stdout
        assert patched.strip() == f"csidriver.storage.k8s.io/{bare} patched"
        immutable = kubectl.run(
            "patch", "csidriver", bare, "-p", '{"spec":{"attachRequired":false}}', check=False
        )
        assert (
            f'The CSIDriver "{bare}" is invalid: spec.attachedRequired: Invalid value: false: '
            "field is immutable" in immutable.stderr
        )
        modes = kubectl.run(
            "patch",
            "csidriver",
            bare,
            "--type=json",
            "-p",
            '[{"op":"add","path":"/spec/volumeLifecycleModes/-","value":"Ephemeral"}]',
            check=False,
        )
        assert "spec.volumeLifecycleModes: Invalid value" in modes.stderr
        assert "field is immutable" in modes.stderr
    finally:
        kubectl.run("delete", "csidriver", name, bare)
    assert kubectl.run("get", "csidriver", name, check=False).returncode == 1


def test_csi_driver_refusals(kubectl: Kubectl) -> None:
    base = {"apiVersion": GROUP_VERSION, "kind": "CSIDriver", "metadata": {"name": "bad.io"}}
    cases = [
        (
            {"fsGroupPolicy": "Always"},
            'spec.fsGroupPolicy: Unsupported value: "Always": supported values: "File", '
            '"None", "ReadWriteOnceWithFSType"',
        ),
        (
            {"tokenRequests": [{"audience": "a"}, {"audience": "a"}]},
            'spec.tokenRequests[1].audience: Duplicate value: "a"',
        ),
        (
            {"tokenRequests": [{"audience": "a", "expirationSeconds": 60}]},
            "spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a "
            "duration less than 10 minutes",
        ),
        (
            {"volumeLifecycleModes": ["Sometimes"]},
            'spec.volumeLifecycleModes: Unsupported value: "Sometimes"',
        ),
        (
            {"nodeAllocatableUpdatePeriodSeconds": 5},
            "spec.nodeAllocatableUpdatePeriodSeconds: Invalid value: 5: must be greater than "
            "or equal to 10 seconds",
        ),
    ]
    for spec, message in cases:
        stderr = refused_document(kubectl, {**base, "spec": spec})
        assert f'The CSIDriver "bad.io" is invalid: {message}' in stderr


def test_csi_node_from_the_docs(kubectl: Kubectl) -> None:
    name = f"{kubectl.namespace}-node1"
    node = _manifest("storage-csinode-node1.yaml", name)
    assert create(kubectl, node) == f"csinode.storage.k8s.io/{name} created"
    try:
        assert _without_age(columns(kubectl.run("get", "csinodes", name).stdout)) == [
            ["NAME", "DRIVERS"],
            [name, "1"],
        ]
        assert kubectl.json("get", "csinode", name)["spec"] == node["spec"]
        kubectl.run(
            "patch",
            "csinode",
            name,
            "-p",
            '{"spec":{"drivers":[{"name":"second.example.com","nodeID":"n2"}]}}',
        )
        drivers = kubectl.json("get", "csinode", name)["spec"]["drivers"]
        assert [d["name"] for d in drivers] == ["second.example.com", "mycsidriver.example.com"]
        moved = kubectl.run(
            "patch",
            "csinode",
            name,
            "-p",
            '{"spec":{"drivers":[{"name":"mycsidriver.example.com","nodeID":"other"}]}}',
            check=False,
        )
        assert f'The CSINode "{name}" is invalid: spec.drivers: Invalid value' in moved.stderr
        assert "field is immutable" in moved.stderr
        counted = kubectl.run(
            "patch",
            "csinode",
            name,
            "-p",
            '{"spec":{"drivers":[{"name":"mycsidriver.example.com","allocatable":{"count":8}}]}}',
        )
        assert counted.returncode == 0
        long_id = {"name": "long.example.com", "nodeID": "x" * 257}
        refused = refused_document(
            kubectl,
            {
                "apiVersion": GROUP_VERSION,
                "kind": "CSINode",
                "metadata": {"name": f"{name}-long"},
                "spec": {"drivers": [long_id, {"name": "Bad_Name", "nodeID": "a"}]},
            },
        )
        assert "spec.drivers[0].nodeID: Invalid value" in refused
        assert "must be 256 characters or less" in refused
        assert 'spec.drivers[1].name: Invalid value: "Bad_Name"' in refused
    finally:
        kubectl.run("delete", "csinode", name)


def _attachment(name: str, pv: str = "pv-1") -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {
            "attacher": "mycsidriver.example.com",
            "nodeName": "node1",
            "source": {"persistentVolumeName": pv},
        },
    }


def test_volume_attachment_and_its_status(kubectl: Kubectl) -> None:
    name = f"{kubectl.namespace}-va"
    created = _attachment(name)
    created["status"] = {"attached": True}  # a client's status is dropped on create
    assert create(kubectl, created) == f"volumeattachment.storage.k8s.io/{name} created"
    try:
        header = ["NAME", "ATTACHER", "PV", "NODE", "ATTACHED"]
        row = [name, "mycsidriver.example.com", "pv-1", "node1"]
        out = kubectl.run("get", "volumeattachments", name).stdout
        assert _without_age(columns(out)) == [header, [*row, "false"]]
        kubectl.run(
            "patch",
            "volumeattachment",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            '{"status":{"attached":true,"attachmentMetadata":{"devicePath":"/dev/vdb"}}}',
        )
        out = kubectl.run("get", "volumeattachments", name).stdout
        assert _without_age(columns(out)) == [header, [*row, "true"]]
        status = kubectl.json("get", "volumeattachment", name)["status"]
        assert status == {"attached": True, "attachmentMetadata": {"devicePath": "/dev/vdb"}}
        immutable = kubectl.run(
            "patch",
            "volumeattachment",
            name,
            "--type=merge",
            "-p",
            '{"spec":{"nodeName":"node2"}}',
            check=False,
        )
        assert f'The VolumeAttachment "{name}" is invalid: spec: Invalid value' in immutable.stderr
        assert "field is immutable" in immutable.stderr
        labelled = kubectl.run("label", "volumeattachment", name, "seen=yes").stdout
        assert labelled.strip() == f"volumeattachment.storage.k8s.io/{name} labeled"
    finally:
        kubectl.run("delete", "volumeattachment", name)
    both = _attachment(f"{name}-both")
    both["spec"]["source"]["inlineVolumeSpec"] = {}
    assert (
        "spec.source: Forbidden: must specify exactly one of inlineVolumeSpec and "
        "persistentVolumeName" in refused_document(kubectl, both)
    )
    bad_pv = _attachment(f"{name}-pv", pv="PV_1")
    assert 'spec.source.persistentVolumeName: Invalid value: "PV_1"' in refused_document(
        kubectl, bad_pv
    )
    bad_attacher = _attachment(f"{name}-attacher")
    bad_attacher["spec"]["attacher"] = "Not A Driver"
    assert 'spec.attacher: Invalid value: "Not A Driver"' in refused_document(kubectl, bad_attacher)


def _capacity(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name},
        "storageClassName": "fast",
        **fields,
    }


def test_csi_storage_capacities(kubectl: Kubectl) -> None:
    capacity = _manifest("storage-csistoragecapacity-zone.yaml")
    assert create(kubectl, capacity) == (
        "csistoragecapacity.storage.k8s.io/csisc-fast-zone-a created"
    )
    create(kubectl, _capacity("unknown"))
    assert columns(kubectl.run("get", "csistoragecapacities").stdout) == [
        ["NAME", "STORAGECLASSNAME", "CAPACITY"],
        ["csisc-fast-zone-a", "fast", "100Gi"],
        ["unknown", "fast", "<unset>"],
    ]
    kubectl.run("patch", "csistoragecapacity", "unknown", "-p", '{"capacity":"2Ti"}')
    assert kubectl.json("get", "csistoragecapacity", "unknown")["capacity"] == "2Ti"
    moved = kubectl.run(
        "patch", "csistoragecapacity", "unknown", "-p", '{"storageClassName":"slow"}', check=False
    )
    assert (
        'The CSIStorageCapacity "unknown" is invalid: storageClassName: Invalid value: "slow": '
        "field is immutable" in moved.stderr
    )
    refused = refused_document(
        kubectl, _capacity("bad", storageClassName="Fast", nodeTopology={"matchLabels": {"a": "-"}})
    )
    assert 'storageClassName: Invalid value: "Fast"' in refused
    assert 'nodeTopology.matchLabels: Invalid value: "-"' in refused
    kubectl.run("delete", "csistoragecapacity", "csisc-fast-zone-a", "unknown")
    assert "No resources found" in kubectl.run("get", "csistoragecapacities").stderr


def test_volume_attributes_class_from_the_docs(kubectl: Kubectl) -> None:
    name = f"{kubectl.namespace}-silver"
    silver = _manifest("storage-volumeattributesclass-silver.yaml", name)
    assert create(kubectl, silver) == f"volumeattributesclass.storage.k8s.io/{name} created"
    try:
        assert _without_age(columns(kubectl.run("get", "vac", name).stdout)) == [
            ["NAME", "DRIVERNAME"],
            [name, "pd.csi.storage.gke.io"],
        ]
        got = kubectl.json("get", "volumeattributesclass", name)
        assert got["parameters"] == silver["parameters"]
        annotated = kubectl.run("annotate", "vac", name, "tier=2").stdout
        assert annotated.strip() == f"volumeattributesclass.storage.k8s.io/{name} annotated"
        changed = kubectl.run(
            "patch", "vac", name, "-p", '{"parameters":{"provisioned-iops":"6000"}}', check=False
        )
        assert (
            f'The VolumeAttributesClass "{name}" is invalid: parameters: Forbidden: updates to '
            "parameters are forbidden." in changed.stderr
        )
        driver = kubectl.run("patch", "vac", name, "-p", '{"driverName":"other.io"}', check=False)
        assert "driverName: Forbidden: updates to driverName are forbidden." in driver.stderr
    finally:
        kubectl.run("delete", "vac", name)
    bad = {**silver, "metadata": {"name": f"{name}-bad"}, "driverName": "a/b/c"}
    assert 'driverName: Invalid value: "a/b/c"' in refused_document(kubectl, bad)


INVALID = [
    (
        "storage-csidriver-unknown-fsgrouppolicy.yaml",
        'The CSIDriver "bad-policy.example.com" is invalid: spec.fsGroupPolicy: Unsupported '
        'value: "Always"',
    ),
    (
        "storage-csidriver-short-token.yaml",
        'The CSIDriver "short-token.example.com" is invalid: '
        "spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration "
        "less than 10 minutes",
    ),
    (
        "storage-csinode-duplicate-driver.yaml",
        'The CSINode "twice" is invalid: spec.drivers[1].name: Duplicate value: '
        '"mycsidriver.example.com"',
    ),
    (
        "storage-volumeattachment-no-source.yaml",
        'The VolumeAttachment "nothing" is invalid: spec.source: Required value: must specify '
        "exactly one of inlineVolumeSpec and persistentVolumeName",
    ),
    (
        "storage-csistoragecapacity-negative.yaml",
        'The CSIStorageCapacity "negative" is invalid: capacity: Invalid value: "-1Gi": must be '
        "greater than or equal to 0",
    ),
    (
        "storage-volumeattributesclass-no-parameters.yaml",
        'The VolumeAttributesClass "empty" is invalid: parameters: Required value: must contain '
        "at least one key/value pair",
    ),
]


@pytest.mark.parametrize(
    ("manifest", "message"), INVALID, ids=[name.removesuffix(".yaml") for name, _ in INVALID]
)
def test_invalid_objects_are_refused(kubectl: Kubectl, manifest: str, message: str) -> None:
    assert message in refusal(kubectl, manifest)


def test_explain(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "csidriver.spec", namespaced=False).stdout
    assert "GROUP:      storage.k8s.io" in out
    assert "KIND:       CSIDriver" in out
    for field in (
        "attachRequired\t<boolean>",
        "fsGroupPolicy\t<string>",
        "podInfoOnMount\t<boolean>",
        "tokenRequests\t<[]TokenRequest>",
        "volumeLifecycleModes\t<[]string>",
    ):
        assert field in out
    attachment = kubectl.run("explain", "volumeattachment.spec", namespaced=False).stdout
    assert "attacher\t<string> -required-" in attachment
    assert "source\t<VolumeAttachmentSource> -required-" in attachment
    vac = kubectl.run("explain", "vac", namespaced=False).stdout
    assert "driverName\t<string> -required-" in vac


@dataclass(frozen=True)
class Watched:
    """How one kind is watched: its object, a change, and its first cells before and after."""

    resource: str
    namespaced: bool
    body: dict[str, Any]
    change: list[str]
    first: list[str]
    second: list[str]


WATCHED = [
    Watched(
        "csidrivers",
        False,
        {"apiVersion": GROUP_VERSION, "kind": "CSIDriver", "metadata": {}},
        ["-p", '{"spec":{"podInfoOnMount":true}}'],
        ["true", "false"],
        ["true", "true"],
    ),
    Watched(
        "csinodes",
        False,
        {"apiVersion": GROUP_VERSION, "kind": "CSINode", "metadata": {}, "spec": {}},
        ["-p", '{"spec":{"drivers":[{"name":"a.io","nodeID":"n"}]}}'],
        ["0"],
        ["1"],
    ),
    Watched(
        "volumeattachments",
        False,
        _attachment(""),
        ["--subresource=status", "--type=merge", "-p", '{"status":{"attached":true}}'],
        ["mycsidriver.example.com", "pv-1", "node1", "false"],
        ["mycsidriver.example.com", "pv-1", "node1", "true"],
    ),
    Watched(
        "csistoragecapacities",
        True,
        _capacity("", capacity="1Gi"),
        ["-p", '{"capacity":"2Gi"}'],
        ["fast", "1Gi"],
        ["fast", "2Gi"],
    ),
    Watched(
        "volumeattributesclasses",
        False,
        {**_manifest("storage-volumeattributesclass-silver.yaml"), "metadata": {}},
        ["-p", '{"metadata":{"labels":{"seen":"yes"}}}'],
        ["pd.csi.storage.gke.io"],
        ["pd.csi.storage.gke.io"],
    ),
]


def _row(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


@pytest.mark.parametrize("case", WATCHED, ids=[w.resource for w in WATCHED])
def test_get_watch_streams_changes(kubectl: Kubectl, case: Watched) -> None:
    """``kubectl get -w`` prints the row of each change."""
    name = "watched" if case.namespaced else f"{kubectl.namespace}-watched.io"
    body = {**case.body, "metadata": {"name": name}}
    kubectl.run("create", "-f", "-", input=json.dumps(body), namespaced=case.namespaced)
    command = kubectl.argv(
        "get", case.resource, name, "-w", "--request-timeout=20s", namespaced=case.namespaced
    )
    try:
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as watcher:
            try:
                assert watcher.stdout is not None
                watcher.stdout.readline()  # the header
                first = _row(watcher.stdout.readline())
                assert first[: len(case.first) + 1] == [name, *case.first]
                time.sleep(0.3)
                kubectl.run("patch", case.resource, name, *case.change, namespaced=case.namespaced)
                second = _row(watcher.stdout.readline())
                assert second[: len(case.second) + 1] == [name, *case.second]
            finally:
                watcher.terminate()
    finally:
        kubectl.run("delete", case.resource, name, namespaced=case.namespaced)


def test_python_client(api_client: k8s.ApiClient, namespace: str) -> None:
    api = k8s.StorageV1Api(api_client)
    driver_name = f"{namespace}.example.com"
    api.create_csi_driver(
        k8s.V1CSIDriver(
            metadata=k8s.V1ObjectMeta(name=driver_name),
            spec=k8s.V1CSIDriverSpec(attach_required=False, token_requests=[]),
        )
    )
    node_name = f"{namespace}-node"
    api.create_csi_node(
        k8s.V1CSINode(
            metadata=k8s.V1ObjectMeta(name=node_name),
            spec=k8s.V1CSINodeSpec(
                drivers=[k8s.V1CSINodeDriver(name=driver_name, node_id="n1", topology_keys=[])]
            ),
        )
    )
    attachment_name = f"{namespace}-va"
    api.create_volume_attachment(
        k8s.V1VolumeAttachment(
            metadata=k8s.V1ObjectMeta(name=attachment_name),
            spec=k8s.V1VolumeAttachmentSpec(
                attacher=driver_name,
                node_name=node_name,
                source=k8s.V1VolumeAttachmentSource(persistent_volume_name="pv-1"),
            ),
        )
    )
    api.create_namespaced_csi_storage_capacity(
        namespace,
        k8s.V1CSIStorageCapacity(
            metadata=k8s.V1ObjectMeta(name="fast"), storage_class_name="fast", capacity="5Gi"
        ),
    )
    class_name = f"{namespace}-gold"
    api.create_volume_attributes_class(
        k8s.V1VolumeAttributesClass(
            metadata=k8s.V1ObjectMeta(name=class_name),
            driver_name=driver_name,
            parameters={"iops": "9000"},
        )
    )
    try:
        listed = api.list_csi_driver(field_selector=f"metadata.name={driver_name}").items
        assert [(d.spec.attach_required, d.spec.fs_group_policy) for d in listed] == [
            (False, "ReadWriteOnceWithFSType")
        ]
        nodes = api.list_csi_node(field_selector=f"metadata.name={node_name}").items
        assert [d.node_id for d in nodes[0].spec.drivers] == ["n1"]
        status = api.patch_volume_attachment_status(attachment_name, {"status": {"attached": True}})
        assert status.status.attached is True
        capacities = api.list_namespaced_csi_storage_capacity(namespace).items
        assert [(c.storage_class_name, c.capacity) for c in capacities] == [("fast", "5Gi")]
        classes = api.list_volume_attributes_class(field_selector=f"metadata.name={class_name}")
        assert [c.parameters for c in classes.items] == [{"iops": "9000"}]
        with pytest.raises(ApiException) as invalid:
            api.create_volume_attributes_class(
                k8s.V1VolumeAttributesClass(
                    metadata=k8s.V1ObjectMeta(name=f"{class_name}-empty"), driver_name=driver_name
                )
            )
        assert invalid.value.status == 422
        causes = json.loads(invalid.value.body)["details"]["causes"]
        assert causes == [
            {
                "reason": "FieldValueRequired",
                "message": "Required value: must contain at least one key/value pair",
                "field": "parameters",
            }
        ]
        api.delete_namespaced_csi_storage_capacity("fast", namespace)
        assert api.list_namespaced_csi_storage_capacity(namespace).items == []
    finally:
        # As upstream, the cluster-scoped kinds answer a delete with the deleted object.
        deleted = [
            api.delete_csi_driver(driver_name),
            api.delete_csi_node(node_name),
            api.delete_volume_attachment(attachment_name),
            api.delete_volume_attributes_class(class_name),
        ]
    assert [d.metadata.name for d in deleted] == [
        driver_name,
        node_name,
        attachment_name,
        class_name,
    ]
    with pytest.raises(ApiException) as gone:
        api.read_csi_driver(driver_name)
    assert gone.value.status == 404
