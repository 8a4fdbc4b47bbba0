"""Discovery with APIServices: groups and versions in upstream's aggregator order, extension
servers' group/versions listed, and their APIResourceLists in the aggregated form."""

from __future__ import annotations

import kube.api.kinds  # noqa: F401  (registers every kind)
from controlplane.apiserver.aggregator import autoregister
from controlplane.apiserver.endpoints import discovery
from kube.api.meta_v1 import GroupVersionKind
from kube.api.scheme import SCHEME

KINDS = list(SCHEME.served())
WARDLE = ("wardle.example.com", "v1alpha1")
ANSWERED = {
    "kind": "APIResourceList",
    "groupVersion": "wardle.example.com/v1alpha1",
    "resources": [
        {
            "name": "flunders",
            "singularName": "flunder",
            "namespaced": True,
            "kind": "Flunder",
            "verbs": ["get", "list"],
            "shortNames": ["fl"],
        },
        {"name": "flunders/status", "namespaced": True, "kind": "Flunder", "verbs": ["get"]},
    ],
}


def _aggregation(**extra: tuple[int, int]) -> discovery.Aggregation:
    priorities = {
        gv: autoregister.PRIORITIES[gv]
        for gv in {(i.group, i.version) for i in KINDS}
        if gv in autoregister.PRIORITIES
    }
    priorities[("apiregistration.k8s.io", "v1")] = autoregister.APIREGISTRATION_PRIORITY
    priorities[WARDLE] = extra.get("wardle", (1000, 15))
    return discovery.Aggregation(priorities, [WARDLE], {WARDLE: ANSWERED})


def test_groups_by_priority_then_name() -> None:
    names = [g.name for g in discovery.api_group_list(KINDS, _aggregation()).groups]
    assert names[0] == "apiregistration.k8s.io"
    assert names.index("apps") < names.index("autoscaling") < names.index("batch")
    assert names.index("batch") < names.index("wardle.example.com")
    first = [
        g.name for g in discovery.api_group_list(KINDS, _aggregation(wardle=(19000, 1))).groups
    ]
    assert first[:2] == ["apiregistration.k8s.io", "wardle.example.com"]


def test_versions_by_version_priority() -> None:
    autoscaling = discovery.api_group(KINDS, "autoscaling", _aggregation())
    assert autoscaling is not None
    assert [v.version for v in autoscaling.versions] == ["v2", "v1"]
    wardle = discovery.api_group(KINDS, "wardle.example.com", _aggregation())
    assert wardle is not None and wardle.preferred_version is not None
    assert wardle.preferred_version.group_version == "wardle.example.com/v1alpha1"


def test_extension_resources_in_the_aggregated_document() -> None:
    document = discovery.aggregated(KINDS, False, _aggregation())
    group = next(g for g in document.items if g.metadata.name == "wardle.example.com")
    [version] = group.versions
    [flunders] = version.resources
    assert (flunders.resource, flunders.scope, flunders.singular_resource) == (
        "flunders",
        "Namespaced",
        "flunder",
    )
    assert flunders.response_kind == GroupVersionKind(
        group="wardle.example.com", version="v1alpha1", kind="Flunder"
    )
    assert flunders.short_names == ["fl"]
    assert [s.subresource for s in flunders.subresources or ()] == ["status"]
    unanswered = discovery.Aggregation(_aggregation().priorities, [WARDLE], {})
    listed = discovery.aggregated(KINDS, False, unanswered)
    assert "wardle.example.com" not in [g.metadata.name for g in listed.items]
