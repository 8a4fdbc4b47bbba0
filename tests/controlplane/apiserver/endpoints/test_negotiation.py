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


def test_nothing_acceptable_is_406() -> None:
    with pytest.raises(ApiError) as raised:
        negotiation.choose("application/vnd.kubernetes.protobuf")
    assert raised.value.code == 406


def test_body_type() -> None:
    assert negotiation.body_type("application/merge-patch+json; charset=utf-8") == (
        "application/merge-patch+json"
    )
    assert negotiation.body_type(None) == "application/json"
