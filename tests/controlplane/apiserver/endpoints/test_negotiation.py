"""Accept headers as kubectl and the Python client send them."""

from __future__ import annotations

import pytest

from controlplane.apiserver.endpoints import negotiation
from controlplane.apiserver.errors import ApiError

KUBECTL_GET = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json"
)
KUBECTL_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;"
    "g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)


@pytest.mark.parametrize(
    ("accept", "discovery", "expected"),
    [
        (None, False, negotiation.Output("application/json")),
        ("application/json", False, negotiation.Output("application/json")),
        ("*/*", False, negotiation.Output("application/json")),
        (KUBECTL_GET, False, negotiation.Output("application/json", "Table")),
        (KUBECTL_DISCOVERY, True, negotiation.Output("application/json", "APIGroupDiscoveryList")),
        (KUBECTL_DISCOVERY, False, negotiation.Output("application/json")),
        ("application/vnd.kubernetes.protobuf, */*", False, negotiation.Output("application/json")),
        (
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            False,
            negotiation.Output("application/json", "PartialObjectMetadataList"),
        ),
        ("application/yaml", False, negotiation.Output("application/yaml")),
    ],
    ids=[
        "none",
        "json",
        "any",
        "kubectl-get",
        "kubectl-discovery",
        "discovery-elsewhere",
        "protobuf-then-any",
        "partial-list",
        "yaml",
    ],
)
def test_choose(accept: str | None, discovery: bool, expected: negotiation.Output) -> None:
    assert negotiation.choose(accept, discovery=discovery) == expected


CLIENT_GO_PROTOBUF = "application/vnd.kubernetes.protobuf, */*"
"""client-go's Accept for built-in kinds (kube-controller-manager, kubelet, kube-proxy...)."""


def _yes() -> bool:
    return True


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (CLIENT_GO_PROTOBUF, negotiation.Output(negotiation.PROTOBUF)),
        (
            "application/json;q=0.5, application/vnd.kubernetes.protobuf",
            negotiation.Output(negotiation.PROTOBUF),
        ),
        (
            "application/vnd.kubernetes.protobuf;q=0.5, application/json",
            negotiation.Output(negotiation.JSON),
        ),
        ("*/*, application/vnd.kubernetes.protobuf", negotiation.Output(negotiation.PROTOBUF)),
        ("application/*", negotiation.Output(negotiation.JSON)),
        (
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            negotiation.Output(negotiation.PROTOBUF, negotiation.PARTIAL_LIST),
        ),
        (
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, application/json",
            negotiation.Output(negotiation.JSON),
        ),
        (
            "application/yaml;as=Table;g=meta.k8s.io;v=v1",
            negotiation.Output(negotiation.YAML, negotiation.TABLE),
        ),
    ],
    ids=[
        "client-go",
        "q-values",
        "q-values-json",
        "concrete-before-wildcard",
        "application-any",
        "partial-protobuf",
        "no-protobuf-table",
        "yaml-table",
    ],
)
def test_choose_with_protobuf(accept: str, expected: negotiation.Output) -> None:
    assert negotiation.choose(accept, protobuf=_yes) == expected


def test_kind_without_message_falls_back() -> None:
    """A custom resource: client-go's ``*/*`` gets JSON, protobuf alone nothing."""
    assert negotiation.choose(CLIENT_GO_PROTOBUF) == negotiation.Output(negotiation.JSON)
    with pytest.raises(ApiError) as raised:
        negotiation.choose(negotiation.PROTOBUF)
    assert raised.value.code == 406
    assert raised.value.status().message == (
        "only the following media types are accepted: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )


def test_watch_streams() -> None:
    assert negotiation.choose(
        "application/vnd.kubernetes.protobuf;stream=watch, application/json",
        protobuf=_yes,
        stream=True,
    ) == negotiation.Output(negotiation.PROTOBUF)
    with pytest.raises(ApiError) as raised:
        negotiation.choose("application/yaml", stream=True)
    assert raised.value.status().message == (
        "only the following media types are accepted: "
        "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
    )


def test_no_transform_where_not_served() -> None:
    with pytest.raises(ApiError):
        negotiation.choose("application/json;as=Table;v=v1;g=meta.k8s.io", transforms=False)


def test_body_type() -> None:
    assert negotiation.body_type("application/merge-patch+json; charset=utf-8") == (
        "application/merge-patch+json"
    )
    assert negotiation.body_type(None) == "application/json"
