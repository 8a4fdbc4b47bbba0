"""node.k8s.io/v1 RuntimeClass as users reach it: the pinned kubectl and the official Python
client against a real ``kubelab apiserver``, with the kubernetes.io docs' manifests (the corpus
in tests/kube/api/manifests) and invalid classes refused with 422s naming the field.

RuntimeClasses are cluster-scoped and the module's server is shared, so tests that make their
own name them after their namespace and delete them.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from tests.controlplane.apiserver.corpus import CORPUS, columns, refusal
from tests.servers import Kubectl

GROUP_VERSION = "node.k8s.io/v1"
VERBS = "create,delete,deletecollection,get,list,patch,update,watch"


def test_api_resources_list_the_group(kubectl: Kubectl) -> None:
    out = kubectl.run(
        "api-resources", "--api-group=node.k8s.io", "-o", "wide", namespaced=False
    ).stdout
    assert columns(out) == [
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"],
        ["runtimeclasses", "", GROUP_VERSION, "false", "RuntimeClass", VERBS, ""],
    ]


def test_runtime_classes_from_the_docs(kubectl: Kubectl) -> None:
    """The Runtime Class page's class and the Pod Overhead page's, created, shown with
    upstream's columns, the handler immutable, then deleted."""
    for manifest, name in (("myclass", "myclass"), ("kata-fc", "kata-fc")):
        path = CORPUS / "manifests" / f"node-runtimeclass-{manifest}.yaml"
        created = kubectl.run("create", "-f", str(path), namespaced=False).stdout
        assert created.strip() == f"runtimeclass.node.k8s.io/{name} created"
    try:
        table = columns(kubectl.run("get", "runtimeclass", namespaced=False).stdout)
        assert table[0] == ["NAME", "HANDLER", "AGE"]
        assert [row[:2] for row in table[1:]] == [
            ["kata-fc", "kata-fc"],
            ["myclass", "myconfiguration"],
        ]
        kata = kubectl.json("get", "runtimeclass", "kata-fc")
        assert kata["overhead"] == {"podFixed": {"cpu": "250m", "memory": "120Mi"}}
        labelled = kubectl.run("label", "runtimeclass", "myclass", "tier=a", namespaced=False)
        assert labelled.stdout.strip() == "runtimeclass.node.k8s.io/myclass labeled"
        immutable = kubectl.run(
            "patch",
            "runtimeclass",
            "myclass",
            "-p",
            '{"handler":"other"}',
            namespaced=False,
            check=False,
        )
        assert immutable.returncode == 1
        assert (
            'The RuntimeClass "myclass" is invalid: handler: Invalid value: "other": '
            "field is immutable" in immutable.stderr
        )
    finally:
        deleted = kubectl.run("delete", "runtimeclass", "myclass", "kata-fc", namespaced=False)
    assert deleted.stdout.splitlines() == [
        'runtimeclass.node.k8s.io "myclass" deleted',
        'runtimeclass.node.k8s.io "kata-fc" deleted',
    ]
    assert kubectl.run("get", "runtimeclass", "myclass", namespaced=False, check=False).returncode


def test_invalid_manifest_is_refused(kubectl: Kubectl) -> None:
    assert (
        'The RuntimeClass "kata" is invalid: handler: Invalid value: "Kata_FC": a lowercase '
        "RFC 1123 label must consist of" in refusal(kubectl, "node-runtimeclass-bad-handler.yaml")
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            {},
            'The RuntimeClass "bad" is invalid: handler: Required value',
            id="no-handler",
        ),
        pytest.param(
            {"handler": "runc", "overhead": {"podFixed": {"cpu": "-1"}}},
            'overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0',
            id="negative-overhead",
        ),
        pytest.param(
            {"handler": "runc", "scheduling": {"nodeSelector": {"a b": "c"}}},
            'scheduling.nodeSelector: Invalid value: "a b": name part must consist of',
            id="bad-selector",
        ),
        pytest.param(
            {
                "handler": "runc",
                "scheduling": {"tolerations": [{"key": "k", "operator": "Exists"}] * 2},
            },
            "scheduling.tolerations[1]: Duplicate value",
            id="duplicate-toleration",
        ),
    ],
)
def test_invalid_classes_are_refused(
    kubectl: Kubectl, body: dict[str, object], message: str
) -> None:
    document = {"apiVersion": GROUP_VERSION, "kind": "RuntimeClass", "metadata": {"name": "bad"}}
    refused = kubectl.run(
        "create", "-f", "-", input=json.dumps({**document, **body}), namespaced=False, check=False
    )
    assert refused.returncode == 1
    assert message in refused.stderr


def test_explain(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "runtimeclass", namespaced=False).stdout
    assert "GROUP:      node.k8s.io" in out
    assert "KIND:       RuntimeClass" in out
    for field in (
        "handler\t<string> -required-",
        "overhead\t<Overhead>",
        "scheduling\t<Scheduling>",
    ):
        assert field in out
    scheduling = kubectl.run("explain", "runtimeclass.scheduling", namespaced=False).stdout
    assert "nodeSelector\t<map[string]string>" in scheduling
    assert "tolerations\t<[]Toleration>" in scheduling
    overhead = kubectl.run("explain", "runtimeclass.overhead", namespaced=False).stdout
    # Upstream's kubectl shows <map[string]Quantity>: its OpenAPI refers to a Quantity schema,
    # which ours inlines (every resource list's, not only this one).
    assert "podFixed\t<map[string]" in overhead


def test_python_client(api_client: k8s.ApiClient, namespace: str) -> None:
    api = k8s.NodeV1Api(api_client)
    name = f"{namespace}-gvisor"
    api.create_runtime_class(
        k8s.V1RuntimeClass(
            metadata=k8s.V1ObjectMeta(name=name),
            handler="runsc",
            overhead=k8s.V1Overhead(pod_fixed={"cpu": "100m"}),
            scheduling=k8s.V1Scheduling(
                node_selector={"sandbox": "gvisor"},
                tolerations=[k8s.V1Toleration(key="sandbox", operator="Exists")],
            ),
        )
    )
    try:
        listed = api.list_runtime_class(field_selector=f"metadata.name={name}").items
        assert [(c.handler, c.overhead.pod_fixed, c.scheduling.node_selector) for c in listed] == [
            ("runsc", {"cpu": "100m"}, {"sandbox": "gvisor"})
        ]
        with pytest.raises(ApiException) as invalid:
            api.create_runtime_class(
                k8s.V1RuntimeClass(metadata=k8s.V1ObjectMeta(name=f"{name}-bad"), handler="a.b")
            )
        assert invalid.value.status == 422
        causes = json.loads(invalid.value.body)["details"]["causes"]
        assert [(c["reason"], c["field"]) for c in causes] == [("FieldValueInvalid", "handler")]
    finally:
        status = api.delete_runtime_class(name)
    assert status.status == "Success"
    with pytest.raises(ApiException) as gone:
        api.read_runtime_class(name)
    assert gone.value.status == 404
